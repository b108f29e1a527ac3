/* Turns a valid record into its curated form in one pass over its tokens:
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
	const kiln_field *split_field; /* a direct child of contract->root; NULL: none */
	kiln_json_limits limits;       /* as the validator's */
} kiln_curator_options;

int kiln_curator_new(kiln_curator **out, const kiln_curator_options *options);
void kiln_curator_free(kiln_curator *curator);

/* Appends the curated form of record[0..len) (already valid under the
 * contract) to `out`, without a newline. out_split and out_split_len receive
 * the split key's curated value (string content, or a number's text), valid
 * until the next call; KILN_ENOTFOUND when the record lacks it. */
int kiln_curate(kiln_curator *curator, const char *record, size_t len, kiln_buf *out, const char **out_split,
		size_t *out_split_len);

#endif
