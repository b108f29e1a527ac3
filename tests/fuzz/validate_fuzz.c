/* libFuzzer target for record validation: every input is one record checked
 * against contracts/user-events.yaml, which exercises the scanner, the field
 * lookups, every rule and the path rendering. Checks that a report is
 * consistent and that no path carries bytes a record could have put there
 * unfiltered (paths hold field names, identifiers, indexes or "<key>"). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "contract/validate.h"
#include "core/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kiln_validator *validator(void)
{
	static kiln_contract *contract;
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
	v = kiln_validator_new(contract, &(kiln_validator_options){ .unknown_fields = -1,
								     .limits.max_bytes = 8192 });
	if (!v)
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
	size_t n = kiln_validate(validator(), (const char *)data, size, &report);

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
