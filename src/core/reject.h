/* Why a record is rejected: the machine codes shared by the JSON scanner,
 * the contract validator, the CLI output and (later) the quarantine. */
#ifndef KILN_CORE_REJECT_H
#define KILN_CORE_REJECT_H

#include <stddef.h>

typedef enum kiln_reject {
	KILN_REJECT_NONE = 0,
	KILN_REJECT_JSON_SYNTAX,
	KILN_REJECT_INVALID_UTF8,
	KILN_REJECT_DUPLICATE_KEY,
	KILN_REJECT_TOO_DEEP,
	KILN_REJECT_TOO_LARGE,
	KILN_REJECT_NOT_OBJECT,
	KILN_REJECT_MISSING_REQUIRED,
	KILN_REJECT_TYPE,
	KILN_REJECT_PATTERN,
	KILN_REJECT_RANGE,
	KILN_REJECT_LENGTH,
	KILN_REJECT_ENUM,
	KILN_REJECT_FORMAT,
	KILN_REJECT_UNKNOWN_FIELD,
	KILN_REJECT_PATTERN_LIMIT,  /* a pattern or PII detector could not decide within its PCRE2 limits */
	KILN_REJECT_DUPLICATE,      /* dedup: its key was committed within the window, or came earlier */
	KILN_REJECT_SCHEMA_UNKNOWN, /* Avro: the registry does not know the record's schema id */
	KILN_REJECT_AVRO_DECODE,    /* Avro: the bytes are not a datum of the record's schema */
	KILN_REJECT_NOT_FINITE,     /* Avro: a float or double NaN or infinity (JSON has none) */
	KILN_REJECT_COUNT_          /* number of codes, not a code */
} kiln_reject;

/* "json_syntax", "type", ...; "none" for KILN_REJECT_NONE. Static storage. */
const char *kiln_reject_name(kiln_reject code);

/* The code named name[0..len) ("type"), or KILN_REJECT_COUNT_ when no code
 * has that name ("none" names KILN_REJECT_NONE). */
kiln_reject kiln_reject_parse(const char *name, size_t len);

#endif
