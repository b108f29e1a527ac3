/* YAML documents loaded whole into a small tree that remembers where every
 * node came from, so config and contract errors can name file:line:column.
 * One arena per document: nodes and strings live until kiln_yaml_free(). */
#ifndef KILN_CORE_YAML_DOC_H
#define KILN_CORE_YAML_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum kiln_yaml_kind {
	KILN_YAML_SCALAR,
	KILN_YAML_SEQUENCE,
	KILN_YAML_MAPPING,
} kiln_yaml_kind;

typedef struct kiln_yaml_node kiln_yaml_node;
struct kiln_yaml_node {
	kiln_yaml_kind kind;
	unsigned line;   /* 1-based position of the node's first character */
	unsigned column; /* 1-based */
	/* KILN_YAML_SCALAR: NUL-terminated text (may hold NULs; len is exact). */
	const char *value;
	size_t len;
	bool quoted; /* any non-plain style: never null, bool or number */
	/* Loaded with KILN_YAML_EXPAND_ENV from text that was exactly one
	 * ${NAME} (no default, nothing around it): the value is the
	 * environment's, not the file's. Lets a config tell a secret passed by
	 * reference from one written in the file. */
	bool from_env;
	/* Its text starts with the value of a set environment variable (a
	 * leading ${NAME} or ${NAME:-default} whose variable is set), or was
	 * given by --set: a relative path in it is relative to the working
	 * directory, where the user wrote it, not to the file's folder
	 * (kiln_config_resolve). */
	bool cwd_relative;
	/* SEQUENCE: items[0..count). MAPPING: keys[i] (scalars) -> items[i]. */
	size_t count;
	kiln_yaml_node **items;
	kiln_yaml_node **keys;
};

typedef struct kiln_yaml_doc kiln_yaml_doc;

/* Loads the first document of a file. On failure returns KILN_EINVALID (or
 * KILN_ENOTFOUND / KILN_EIO) with "file:line:col: message" as last error.
 * Duplicate mapping keys and non-scalar keys are errors; aliases resolve to
 * the anchored node. An empty file gives a NULL root. */
int kiln_yaml_load_file(kiln_yaml_doc **out, const char *path);
/* Same from memory; `name` is used in messages. */
int kiln_yaml_load_buffer(kiln_yaml_doc **out, const char *name, const char *buf, size_t len);
void kiln_yaml_free(kiln_yaml_doc *doc);

/* Load flags. KILN_YAML_EXPAND_ENV: in every scalar, ${NAME} and
 * ${NAME:-default} become the environment's value ("$$" is a literal '$');
 * an unset variable without a default is an error naming its position. */
#define KILN_YAML_EXPAND_ENV 0x1u
int kiln_yaml_load_file_ex(kiln_yaml_doc **out, const char *path, unsigned flags);
int kiln_yaml_load_buffer_ex(kiln_yaml_doc **out, const char *name, const char *buf, size_t len,
                             unsigned flags);

/* Sets the scalar at a dotted mapping path ("split.salt") to `value` (a plain
 * scalar, so "true" and numbers keep their types), creating missing mappings.
 * A key that holds dots is written in double quotes:
 * source.options."sasl.mechanism" (no quote or escape inside it).
 * Errors about such a node say "--set PATH" instead of file:line:col. */
int kiln_yaml_set(kiln_yaml_doc *doc, const char *dotted, const char *value);

/* A config file (pipelines, cache.yaml): `path` loaded with
 * KILN_YAML_EXPAND_ENV, then each of the n `sets` ("dotted.key=value", left
 * unchanged; the first '=' outside a quoted key ends the path) applied with
 * kiln_yaml_set; errors name the file or --set. */
int kiln_yaml_load_config(kiln_yaml_doc **out, const char *path, char *const *sets, size_t n);

const kiln_yaml_node *kiln_yaml_root(const kiln_yaml_doc *doc);
/* The scalar node whose value is the pointer value (not a copy), or NULL. */
const kiln_yaml_node *kiln_yaml_find_value(const kiln_yaml_doc *doc, const char *value);
const char *kiln_yaml_name(const kiln_yaml_doc *doc);

/* Value of `key` in a mapping, or NULL when absent or `map` is not a mapping. */
const kiln_yaml_node *kiln_yaml_get(const kiln_yaml_node *map, const char *key);

/* Plain scalar null, ~ or empty (YAML 1.2 core schema). */
bool kiln_yaml_is_null(const kiln_yaml_node *node);

/* Sets the last error to "file:line:col: path: message" for `node` and
 * returns KILN_EINVALID. `path` is the dotted key path, e.g.
 * "schema[0].properties[2].logicalType". */
int kiln_yaml_fail(const kiln_yaml_doc *doc, const kiln_yaml_node *node, const char *path, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));

/* Typed scalar readers (YAML 1.2 core schema). Each returns 0, or
 * KILN_EINVALID via kiln_yaml_fail() naming `path` when the node is not a
 * scalar of that type. Booleans: true/false (any case of those words);
 * integers: decimal, optional sign, fits int64; numbers: JSON-like decimal
 * or .inf/.nan rejected. Strings: any scalar, quoted or plain, not null. */
int kiln_yaml_bool(const kiln_yaml_doc *doc, const kiln_yaml_node *node, const char *path, bool *out);
int kiln_yaml_int64(const kiln_yaml_doc *doc, const kiln_yaml_node *node, const char *path, int64_t *out);
int kiln_yaml_number(const kiln_yaml_doc *doc, const kiln_yaml_node *node, const char *path,
                     long double *out);
int kiln_yaml_string(const kiln_yaml_doc *doc, const kiln_yaml_node *node, const char *path,
                     const char **out);

#endif
