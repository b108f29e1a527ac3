/* Checks one JSON record against a compiled contract in a single pass over
 * the scanner's tokens, without building a tree. A validator owns its
 * scanner, frame stack, seen map and scratch space and is reused record after
 * record; it is not thread-safe (one per worker), the contract is shared. */
#ifndef KILN_CONTRACT_VALIDATE_H
#define KILN_CONTRACT_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/contract.h"
#include "core/json.h"
#include "core/reject.h"

#define KILN_VIOLATIONS_MAX 8   /* violations kept per record; more are only counted */
#define KILN_PATH_MAX       256 /* longest field path kept; longer ones end in "..." */

typedef struct kiln_violation {
	kiln_reject code;
	size_t offset;            /* byte offset in the record where it was found */
	char path[KILN_PATH_MAX]; /* "device.os", "tags[3]", "$" for the record itself */
} kiln_violation;

typedef struct kiln_report {
	size_t count; /* violations found (0 = valid) */
	size_t kept;  /* min(count, KILN_VIOLATIONS_MAX) */
	kiln_violation v[KILN_VIOLATIONS_MAX];
} kiln_report;

typedef struct kiln_validator_options {
	kiln_json_limits limits; /* max_depth 0 = 128; max_bytes 0 = 1 MiB */
	int unknown_fields;      /* -1: as the contract says; else a kiln_unknown_policy */
} kiln_validator_options;

typedef struct kiln_validator kiln_validator;

/* `contract` must outlive the validator. `options` may be NULL. NULL on OOM. */
kiln_validator *kiln_validator_new(const kiln_contract *contract, const kiln_validator_options *options);
void kiln_validator_free(kiln_validator *validator);

/* Validates record[0..len). Fills *out and returns out->count (0 = valid).
 * Syntax-level failures (json_syntax, invalid_utf8, duplicate_key, too_deep,
 * too_large) replace any contract violation: the record is then a single
 * violation. Paths name fields, never values. */
size_t kiln_validate(kiln_validator *validator, const char *record, size_t len, kiln_report *out);

/* Called for each token in order, with the field the validator resolved
 * for it: for a key, the contract field it names (NULL when unknown or in an
 * unchecked subtree); for a value (containers included), the field it is
 * checked against (NULL: unchecked); NULL for closing brackets. A negative
 * return stops the calls (the consumer keeps its error); validation goes on. */
typedef int (*kiln_token_hook)(void *ctx, const kiln_json_token *token, const kiln_field *field);

/* kiln_validate that also feeds every token to `hook` (one pass serves both:
 * the curator consumes the stream while the record is checked). The hook's
 * output is only meaningful when the record turns out valid. */
size_t kiln_validate_hook(kiln_validator *validator, const char *record, size_t len, kiln_report *out,
                          kiln_token_hook hook, void *ctx);

/* Fills a report with the one violation `code` at the record root (used for
 * records rejected before scanning, such as an over-long line). */
void kiln_report_single(kiln_report *out, kiln_reject code, size_t offset);

#endif
