/* ODCS v3 data contracts (apiVersion v3.0.x and v3.1.x) compiled into a
 * field table: one kiln_field per property, children indexed by key hash,
 * patterns compiled with PCRE2 JIT. Compiled once, then shared read-only by
 * any number of validators. */
#ifndef KILN_CONTRACT_CONTRACT_H
#define KILN_CONTRACT_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/decimal.h"
#include "contract/format.h"
#include "core/json.h"

/* PCRE2 limits of every match kiln runs on a record's value (contract
 * patterns and PII detectors, JIT or not): at most this many backtracking
 * steps (pcre2_set_match_limit; PCRE2's default is 10,000,000) and this
 * nesting depth of backtracking (pcre2_set_depth_limit). A value that hits
 * one is rejected as pattern_limit, never passed. */
#define KILN_PATTERN_MATCH_LIMIT 100000u
#define KILN_PATTERN_DEPTH_LIMIT 10000u

typedef enum kiln_ltype {
	KILN_LTYPE_ANY = 0, /* logicalType absent: any JSON value */
	KILN_LTYPE_STRING,
	KILN_LTYPE_INTEGER,
	KILN_LTYPE_NUMBER,
	KILN_LTYPE_BOOLEAN,
	KILN_LTYPE_DATE,
	KILN_LTYPE_TIMESTAMP,
	KILN_LTYPE_TIME,
	KILN_LTYPE_OBJECT,
	KILN_LTYPE_ARRAY,
} kiln_ltype;

/* How a field's value is pseudonymised (DESIGN.md, docs/CONTRACTS.md). */
typedef enum kiln_pseudo_mode {
	KILN_PSEUDO_KEEP = 0,    /* left as is */
	KILN_PSEUDO_TOKEN,       /* keyed HMAC token (default for classification: pii) */
	KILN_PSEUDO_KEEP_DOMAIN, /* email: token for the local part, domain kept */
	KILN_PSEUDO_REDACT,      /* fixed marker */
	KILN_PSEUDO_DROP,        /* field removed */
} kiln_pseudo_mode;

typedef enum kiln_enum_kind {
	KILN_ENUM_STRING = 0,
	KILN_ENUM_NUMBER,
	KILN_ENUM_BOOLEAN, /* enum_values holds "true" or "false" */
} kiln_enum_kind;

typedef enum kiln_unknown_policy {
	KILN_UNKNOWN_REJECT = 0,
	KILN_UNKNOWN_ALLOW,
} kiln_unknown_policy;

/* A bound on a number, date, timestamp or time (all compared as long double:
 * numbers as written, dates/timestamps as epoch seconds). */
typedef struct kiln_bound {
	bool set;
	bool exclusive;
	long double value;
} kiln_bound;

typedef struct kiln_field kiln_field;

/* One slot of an object field's child index: the hash sits in the slot so a
 * probe touches the child only on a likely match. child NULL: empty. */
struct kiln_field_slot {
	uint64_t hash;
	const kiln_field *child;
};

struct kiln_field {
	const char *name; /* NULL for array items and the root */
	size_t name_len;
	uint64_t name_hash; /* kiln_json_hash(name) */
	const char *path;   /* "device.os", "tags[]": for messages */
	uint32_t position;  /* index among the parent's children */
	uint32_t id;        /* 1..contract->field_count, unique in the contract; the root's is 0 */
	kiln_ltype type;
	bool required, unique, primary_key;
	int primary_key_position;   /* -1 when not set */
	const char *classification; /* NULL when not set */

	/* logicalTypeOptions */
	int64_t min_length, max_length; /* -1 when not set; code points */
	void *pattern;                  /* pcre2_code *, NULL when not set; matched under the limits below */
	bool pattern_jit;               /* compiled for pcre2_jit_match */
	const char *pattern_text;
	kiln_format format;
	kiln_bound minimum, maximum;
	uint8_t int_bits; /* integer format iN/uN: N (8..128), 0 when not set */
	bool int_unsigned;
	long double multiple_of;        /* 0 when not set */
	kiln_decimal multiple_of_exact; /* the same as written, when multiple_of_is_exact */
	bool multiple_of_is_exact;
	int64_t min_items, max_items;           /* -1 when not set */
	int64_t min_properties, max_properties; /* -1 when not set */
	bool unique_items;                      /* recorded, not checked per record */

	/* enum: allowed values as written; each compares with JSON values of its
	 * kind (strings by text after unescaping, numbers by value, booleans) */
	size_t enum_count;
	const char **enum_values;
	size_t *enum_lens;
	long double *enum_numbers; /* value of each KILN_ENUM_NUMBER entry */
	uint8_t *enum_kinds;       /* kiln_enum_kind per entry */

	/* customProperties used by kiln */
	kiln_pseudo_mode pseudo_mode;
	const char *pseudo_domain; /* defaults to the field name */
	bool pii_scan;             /* free-text detectors run on this string */

	/* OBJECT: children and their index; ARRAY: items (NULL = any) */
	kiln_field **children;
	size_t child_count;
	struct kiln_field_slot *child_index; /* open addressing, child_index_mask + 1 slots */
	uint32_t child_index_mask;
	uint32_t *required_children; /* indices into children */
	size_t required_count;
	uint32_t seen_base; /* first slot of this object's children in a validator's seen map */
	kiln_field *items;

	unsigned line, column; /* where the property is defined */
};

typedef struct kiln_contract {
	const char *file;
	const char *text; /* the file's bytes (what the digest is of), NUL-terminated */
	size_t text_len;
	const char *api_version, *kind, *id, *name, *version, *status;
	const char *schema_name;  /* the schema object records are checked against */
	unsigned char digest[32]; /* BLAKE2b-256 of the contract file's bytes */
	char digest_hex[65];
	kiln_unknown_policy unknown_fields;
	kiln_field *root;     /* OBJECT field holding the schema's properties */
	uint32_t seen_slots;  /* total children over all object fields */
	uint32_t field_count; /* fields below the root (array items included) */
	struct kiln_arena *arena;
	struct kiln_yaml_doc *doc; /* the parsed YAML: compiled strings point into it */
	void **patterns;           /* every compiled pcre2_code, freed with the contract */
	size_t pattern_count;
} kiln_contract;

typedef struct kiln_contract_options {
	const char *schema; /* schema object name; NULL = the first one */
} kiln_contract_options;

/* Loads and compiles the contract at `path`. On error returns KILN_EINVALID
 * (or KILN_ENOTFOUND/KILN_EIO) with "file:line:col: key.path: message" as the
 * last error. `options` may be NULL. The caller frees with
 * kiln_contract_free(). */
int kiln_contract_load(kiln_contract **out, const char *path, const kiln_contract_options *options);

/* Same from memory; `name` stands for the file name in messages. */
int kiln_contract_load_buffer(kiln_contract **out, const char *name, const char *text, size_t len,
                              const kiln_contract_options *options);

void kiln_contract_free(kiln_contract *contract);

/* The child of an OBJECT field named key[0..len) (decoded bytes) whose
 * kiln_json_hash is `hash`, or NULL. Inline: it runs for every key. */
static inline const kiln_field *kiln_field_child(const kiln_field *object, const char *key, size_t len,
                                                 uint64_t hash)
{
	const struct kiln_field_slot *slots = object->child_index;
	uint32_t slot;

	if (!slots)
		return NULL;
	for (slot = (uint32_t)hash & object->child_index_mask; slots[slot].child;
	     slot = (slot + 1) & object->child_index_mask) {
		const kiln_field *c = slots[slot].child;
		if (slots[slot].hash == hash && c->name_len == len &&
		    kiln_json_bytes_equal(c->name, key, len))
			return c;
	}
	return NULL;
}

/* The field a dotted path names, the way a pipeline's split.key names it:
 * "customer.customer_id" is the property customer_id of the top-level
 * object property customer. A top-level property whose name is the whole
 * path, dots and all, is that field. Every step but the last must be an
 * object with properties: a path through an array or a scalar is refused.
 * *out: the field (static storage of the contract); *out_hidden (may be
 * NULL): the first field along the path, the last included, that curated
 * records drop or redact, else NULL. Errors, *out NULL, the last error one
 * line without the caller's position (callers prefix theirs):
 * KILN_ENOTFOUND when a step names no property ("the contract C has no
 * top-level field \"x\"", "\"customer\" (C:L:C) has no property \"x\""),
 * KILN_EINVALID when a step goes through an array or a scalar (naming it
 * with its contract file:line:col). */
int kiln_contract_field_at(const kiln_field **out, const kiln_field **out_hidden,
                           const kiln_contract *contract, const char *path);

const char *kiln_ltype_name(kiln_ltype type);

#endif
