/* libFuzzer target for record validation and curation: every input is one
 * record checked against contracts/user-events.yaml while the curator
 * consumes the same tokens (pseudonymisation, free-text detectors, the token
 * cache). Checks that a report is consistent, that no path carries bytes a
 * record could have put there unfiltered (paths hold field names,
 * identifiers, indexes or "<key>"), and that a valid record's curated form
 * is itself valid JSON. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "contract/validate.h"
#include "core/error.h"
#include "mask/curate.h"
#include "mask/key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kiln_contract *contract;
static kiln_curator *curator;
static kiln_key key;

static kiln_validator *validator(void)
{
	static kiln_validator *v;
	const char *path = getenv("KILN_FUZZ_CONTRACT");

	if (v)
		return v;
	if (!path)
		path = KILN_SRCDIR "/contracts/user-events.yaml";
	if (kiln_contract_load(&contract, path, NULL) < 0) {
		fprintf(stderr, "%s\n", kiln_error_last());
		abort();
	}
	v = kiln_validator_new(contract,
	                       &(kiln_validator_options){.unknown_fields = -1, .limits.max_bytes = 8192});
	if (!v)
		abort();
	static const unsigned char bytes[32] = {1, 2, 3};
	kiln_key_init(&key, bytes, 1);
	const kiln_field *split =
	    kiln_field_child(contract->root, "user_id", 7, kiln_json_hash("user_id", 7));
	kiln_curator_options copt = {.contract = contract, .key = &key, .split_field = split};
	if (kiln_curator_new(&curator, &copt) < 0)
		abort();
	return v;
}

static bool path_ok(const char *p)
{
	for (; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
			return false;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kiln_report report;
	kiln_validator *v = validator();
	kiln_buf out = KILN_BUF_INIT(0);
	const char *split;
	size_t split_len;

	kiln_curate_begin(curator, &out);
	size_t n = kiln_validate_hook(v, (const char *)data, size, &report, kiln_curate_token, curator);
	if (n == 0) {
		static kiln_json_scanner *check;
		if (!check && !(check = kiln_json_scanner_new(NULL)))
			abort();
		int rc = kiln_curate_end(curator, &split, &split_len);
		if (rc < 0 && rc != KILN_ENOTFOUND)
			abort();
		if (kiln_json_check(check, out.ptr ? out.ptr : "", out.len) != KILN_REJECT_NONE)
			abort(); /* the curated form of a valid record must be valid JSON */
	}
	kiln_buf_free(&out);

	if (n != report.count || report.kept > KILN_VIOLATIONS_MAX || report.kept > report.count ||
	    (report.count && !report.kept))
		abort();
	for (size_t i = 0; i < report.kept; i++) {
		const kiln_violation *x = &report.v[i];
		if (x->code <= KILN_REJECT_NONE || x->code >= KILN_REJECT_COUNT_ || !x->path[0] ||
		    !path_ok(x->path) || (x->offset > size && x->code != KILN_REJECT_TOO_LARGE))
			abort();
	}
	return 0;
}
