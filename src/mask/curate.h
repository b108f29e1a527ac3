/* Turns a valid record into its curated form as its tokens stream by:
 * re-serialised compactly (insignificant whitespace dropped, every other
 * token copied as written) with each field pseudonymised as its contract
 * says (token, keep-domain, redact, drop, keep, free-text detectors). Also
 * hands out the split key's curated value. One curator per worker thread;
 * the contract and key are shared read-only. */
#ifndef KILN_MASK_CURATE_H
#define KILN_MASK_CURATE_H

#include <stddef.h>

#include "contract/contract.h"
#include "core/buf.h"
#include "core/json.h"
#include "mask/key.h"

#define KILN_REDACTED "[REDACTED]"

typedef struct kiln_curator kiln_curator;

typedef struct kiln_curator_options {
	const kiln_contract *contract;
	const kiln_key *key;
	const kiln_field *split_field; /* kiln_contract_field_at's answer (no array above it); NULL: none */
	kiln_json_limits limits;       /* as the validator's */
	bool observe;                  /* keep the record's curated values (kiln_curate_values) */
} kiln_curator_options;

/* One value the curator wrote (containers included), for a data profile:
 * its contract field (NULL outside the contract), its JSON type, flags
 * (KILN_JSON_ESCAPED: a string holding a backslash escape, KILN_JSON_INTEGER:
 * a number without fraction or exponent) and where its curated text lies in
 * the record's output (a string's bytes between the quotes). */
typedef struct kiln_curate_value {
	const kiln_field *field;
	kiln_json_type type;
	uint32_t flags;
	size_t offset, len; /* from the start of the record's curated form */
} kiln_curate_value;

int kiln_curator_new(kiln_curator **out, const kiln_curator_options *options);
void kiln_curator_free(kiln_curator *curator);

/* Curating a record: kiln_curate_begin(), then every token with its field
 * through kiln_curate_token() (a kiln_token_hook: pass it to
 * kiln_validate_hook so one pass validates and curates), then
 * kiln_curate_end(). The curated form (no newline) is appended to `out`;
 * it is meaningful only when the record was valid. */
void kiln_curate_begin(kiln_curator *curator, kiln_buf *out);
int kiln_curate_token(void *curator, const kiln_json_token *token, const kiln_field *field);

/* The first error of the record's tokens, or KILN_ENOTFOUND when it had no
 * split key value; else 0 with the split key's curated value (a string's
 * content or a number's text) in out_split/out_split_len, valid until the
 * next record. */
int kiln_curate_end(kiln_curator *curator, const char **out_split, size_t *out_split_len);

/* After kiln_curate_end() returned KILN_ELIMIT: the contract path of the
 * field ("message", "tags[]") whose free-text detectors could not decide
 * within kiln's PCRE2 limits (the record's text is then not curated); NULL
 * when the error was another one. Static storage of the contract. */
const char *kiln_curate_limit_path(const kiln_curator *curator);

/* With options.observe: the values of the record last curated, in order
 * (valid until the next kiln_curate_begin). Dropped fields are not there;
 * a pseudonymised value is there as its token. */
const kiln_curate_value *kiln_curate_values(const kiln_curator *curator, size_t *out_count);

#endif
