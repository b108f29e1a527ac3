/* Inferring an ODCS v3 contract from sample records (`kiln contract
 * infer`): each record is scanned once into per-field statistics (JSON
 * types, presence, the string formats every value meets, the values of
 * low-cardinality strings, what the PII detectors found), then rendered as
 * the YAML kiln_contract_load reads. The detectors live in the mask layer:
 * the caller hands them in as a function. No value of a field a detector
 * fired on, or that is classified personal, is ever kept or rendered. */
#ifndef KILN_CONTRACT_INFER_H
#define KILN_CONTRACT_INFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* What a detector found in a string (kiln_infer_detect_fn's answer). */
#define KILN_INFER_DETECT_NONE   0 /* nothing personal */
#define KILN_INFER_DETECT_INSIDE 1 /* personal data inside a longer text */
#define KILN_INFER_DETECT_WHOLE  2 /* the whole value is one personal datum */

/* Runs the PII detectors over s[0..len) (decoded UTF-8): one of the
 * answers above, or a negative KILN_E* code with the error set. */
typedef int (*kiln_infer_detect_fn)(void *ctx, const char *s, size_t len);

typedef struct kiln_infer_options {
	const char *name;  /* the contract's id and name and the schema object's name (required) */
	bool classify_pii; /* --pii auto: classification pii / piiScan where detectors or names say */
	kiln_infer_detect_fn detect; /* NULL: no detector (then no string gets an enum) */
	void *detect_ctx;
	size_t max_enum;    /* at most this many distinct values make an enum (0: no enums) */
	uint32_t max_depth; /* deepest nesting accepted; 0: 128 */
} kiln_infer_options;

typedef struct kiln_infer kiln_infer;

/* `options` is copied (name included). KILN_EINVALID for a missing name,
 * KILN_ENOMEM. */
int kiln_infer_new(kiln_infer **out, const kiln_infer_options *options);
void kiln_infer_free(kiln_infer *infer);

/* Adds one record, text[0..len) (a line without its newline). A record
 * that is not one strict JSON object is refused, nothing of it counted:
 * KILN_EINVALID with "FILE:LINE:COL: CODE ..." (CODE a rejection code:
 * json_syntax, not_object, duplicate_key, ...; never a value). Errors of the
 * detector are passed on. */
int kiln_infer_add(kiln_infer *infer, const char *text, size_t len, const char *file, uint64_t line);

/* Records added so far. */
uint64_t kiln_infer_records(const kiln_infer *infer);

/* Appends the contract (YAML, docs/CONTRACTS.md "Inferring a contract") to
 * out. KILN_EINVALID when no record was added; KILN_ENOMEM. */
int kiln_infer_render(const kiln_infer *infer, kiln_buf *out);

/* s[0..len) (valid UTF-8) as a YAML scalar the contract loader reads back
 * as the same string: plain when it can be, else double-quoted. */
int kiln_infer_yaml_scalar(kiln_buf *b, const char *s, size_t len);

#endif
