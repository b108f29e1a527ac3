/* Typed keys of a YAML config file (pipelines, cache.yaml, their store:
 * sections): one reader, so every config names its errors alike,
 * "file:line:col: section.key: message", and resolves relative paths alike
 * (against the config file's folder). */
#ifndef KILN_CORE_CONFIG_H
#define KILN_CORE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/yaml_doc.h"

typedef struct kiln_config {
	const kiln_yaml_doc *doc;
	kiln_arena *arena; /* dotted paths and resolved paths are made in it */
	const char *dir;   /* the config file's folder, "" for the current one */
	const char *docs;  /* where unknown keys point: "docs/PIPELINES.md" */
} kiln_config;

/* "section.key", or key when section is NULL. */
const char *kiln_config_path(const kiln_config *c, const char *section, const char *key);
/* A mapping whose keys are all in `allowed` (NULL-terminated). */
int kiln_config_check_keys(const kiln_config *c, const kiln_yaml_node *map, const char *section,
                           const char *const *allowed);
/* The optional values below leave *out as it is when the key is absent or
 * null; map may be NULL (then the key is absent). */
int kiln_config_string(const kiln_config *c, const kiln_yaml_node *map, const char *section, const char *key,
                       bool required, const char **out);
int kiln_config_int(const kiln_config *c, const kiln_yaml_node *map, const char *section, const char *key,
                    int64_t lo, int64_t hi, int64_t *out);
/* A size such as 65536, 64k, 64M, 1G of at least min bytes. */
int kiln_config_size(const kiln_config *c, const kiln_yaml_node *map, const char *section, const char *key,
                     size_t min, size_t *out);
/* path relative to the config file's folder (absolute paths and NULL as
 * they are), unless path is a value of c's document (as kiln_config_string
 * gave it) that came from an environment variable or --set
 * (kiln_yaml_node.cwd_relative): then relative to the working directory,
 * returned as it is. */
const char *kiln_config_resolve(const kiln_config *c, const char *path);

/* What a reload reports: cb gets the dotted path ("snapshot.records",
 * "pins") of every key added, removed or changed between two documents'
 * roots (either may be NULL), a sequence compared whole, once each in
 * document order. Never a value: key paths only. */
typedef void (*kiln_config_changed_cb)(void *ctx, const char *path);
void kiln_config_changed(const kiln_yaml_node *before, const kiln_yaml_node *after, kiln_config_changed_cb cb,
                         void *ctx);

/* A reload's report, for a daemon that applies the top-level sections
 * `live` (NULL-terminated) while running: *applied_out lists the keys
 * under them that differ between `last` (the config in force) and `next`,
 * *ignored_out the other keys that differ between `started` (what the
 * process started with) and `next`: they need a restart. Comma-separated
 * text in `buf`, "" when none (or out of memory); valid until buf changes. */
void kiln_config_reload_report(const kiln_yaml_node *started, const kiln_yaml_node *last,
                               const kiln_yaml_node *next, const char *const *live, kiln_buf *buf,
                               const char **applied_out, const char **ignored_out);

#endif
