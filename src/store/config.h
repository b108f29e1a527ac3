/* The `store:` section of a YAML config (a pipeline's, a cache node's): the
 * store URL and the kiln_store_options a URL cannot carry. Keys: url, and
 * the keys the backends a config may name declare on their rows
 * (kiln_store_backend.options: today s3's endpoint, region, style,
 * credentials_file, max_retries, http; docs/PIPELINES.md, docs/STORES.md).
 * No credential is ever read from the config itself: keys whose names
 * contain "secret" or "password" are refused. */
#ifndef KILN_STORE_CONFIG_H
#define KILN_STORE_CONFIG_H

#include "core/arena.h"
#include "core/yaml_doc.h"
#include "store/store.h"

typedef struct kiln_store_config_src {
	const kiln_yaml_doc *doc;
	kiln_arena *arena; /* the strings made here (dotted paths, resolved paths) live in it */
	const char *dir;   /* the config file's folder ("" for the current one): a relative
	                    * credentials_file and file://relative/dir are relative to it */
	const char *docs;  /* the page an unknown key points to: "docs/PIPELINES.md" */
	const char *file;  /* what the file is, for "secrets do not belong in the FILE": "pipeline file" */
	const char *path;  /* the section's dotted path in messages when it is not the section's key
	                    * ("targets.burst.store"); NULL: the key */
} kiln_store_config_src;

/* Reads the mapping under key `section` of `parent` (required; `section` is
 * also the dotted path in messages) into *out_url (a file:// or s3:// URL,
 * borrowed from the document or the arena) and *out_options (fields not in
 * the section are left as they are). Errors are KILN_EINVALID with
 * "file:line:col: section.key: message" as last error. */
int kiln_store_config_load(const kiln_store_config_src *src, const kiln_yaml_node *parent,
                           const char *section, const char **out_url, kiln_store_options *out_options);

#endif
