/* Names of the rejection codes (see reject.h). */
#include "core/reject.h"

#include <string.h>

static const char *const names[KILN_REJECT_COUNT_] = {
    [KILN_REJECT_NONE] = "none",
    [KILN_REJECT_JSON_SYNTAX] = "json_syntax",
    [KILN_REJECT_INVALID_UTF8] = "invalid_utf8",
    [KILN_REJECT_DUPLICATE_KEY] = "duplicate_key",
    [KILN_REJECT_TOO_DEEP] = "too_deep",
    [KILN_REJECT_TOO_LARGE] = "too_large",
    [KILN_REJECT_NOT_OBJECT] = "not_object",
    [KILN_REJECT_MISSING_REQUIRED] = "missing_required",
    [KILN_REJECT_TYPE] = "type",
    [KILN_REJECT_PATTERN] = "pattern",
    [KILN_REJECT_RANGE] = "range",
    [KILN_REJECT_LENGTH] = "length",
    [KILN_REJECT_ENUM] = "enum",
    [KILN_REJECT_FORMAT] = "format",
    [KILN_REJECT_UNKNOWN_FIELD] = "unknown_field",
    [KILN_REJECT_PATTERN_LIMIT] = "pattern_limit",
    [KILN_REJECT_DUPLICATE] = "duplicate",
    [KILN_REJECT_SCHEMA_UNKNOWN] = "schema_unknown",
    [KILN_REJECT_AVRO_DECODE] = "avro_decode",
    [KILN_REJECT_NOT_FINITE] = "not_finite",
};

const char *kiln_reject_name(kiln_reject code)
{
	if ((unsigned)code >= KILN_REJECT_COUNT_)
		return "unknown";
	return names[code];
}

kiln_reject kiln_reject_parse(const char *name, size_t len)
{
	for (int c = 0; c < KILN_REJECT_COUNT_; c++)
		if (strlen(names[c]) == len && memcmp(names[c], name, len) == 0)
			return (kiln_reject)c;
	return KILN_REJECT_COUNT_;
}
