/* String formats a contract can require (logicalTypeOptions.format) and the
 * calendar parsing that date and timestamp range checks share. All inputs
 * are decoded UTF-8, not NUL-terminated, `len` bytes; nothing allocates. */
#ifndef KILN_CONTRACT_FORMAT_H
#define KILN_CONTRACT_FORMAT_H

#include <stdbool.h>
#include <stddef.h>

typedef enum kiln_format {
	KILN_FORMAT_NONE = 0,  /* no check */
	KILN_FORMAT_EMAIL,     /* local@domain, RFC 5321 dot-atom local part, DNS domain */
	KILN_FORMAT_UUID,      /* 8-4-4-4-12 hex digits, any case */
	KILN_FORMAT_IPV4,      /* dotted quad, no leading zeros */
	KILN_FORMAT_IPV6,      /* RFC 4291 text form, incl. :: and embedded IPv4; no zone */
	KILN_FORMAT_URI,       /* RFC 3986 absolute URI: scheme ":" hier-part, valid %XX */
	KILN_FORMAT_HOSTNAME,  /* RFC 1123 host name */
	KILN_FORMAT_DATE,      /* RFC 3339 full-date YYYY-MM-DD, real calendar day */
	KILN_FORMAT_DATE_TIME, /* RFC 3339 date-time with offset (Z or +hh:mm) */
	KILN_FORMAT_TIME,      /* RFC 3339 partial-time, optional offset */
	KILN_FORMAT_BYTE,      /* base64 (RFC 4648, padded) */
} kiln_format;

/* Maps a contract's format name ("email", "date-time", ...) to its code.
 * Returns false when kiln does not know the name. "password" and "binary"
 * map to KILN_FORMAT_NONE (documentation-only formats in ODCS). */
bool kiln_format_from_name(const char *name, kiln_format *out);

/* Name as written in contracts; static storage. */
const char *kiln_format_name(kiln_format format);

/* true when s[0..len) is a valid value of `format` (always true for NONE). */
bool kiln_format_check(kiln_format format, const char *s, size_t len);

/* For tests: force the portable checks (false) or use the SSE2 ones where
 * the build has them (true, the default). The answers are the same. */
void kiln_format_allow_simd(bool allow);

/* RFC 3339 full-date -> seconds since 1970-01-01T00:00:00Z. */
bool kiln_format_parse_date(const char *s, size_t len, long double *out);

/* RFC 3339 date-time (offset required, 'T'/'t' separator, fraction kept)
 * -> seconds since the epoch, UTC. Leap second 60 is accepted. */
bool kiln_format_parse_date_time(const char *s, size_t len, long double *out);

/* RFC 3339 partial-time with optional offset -> seconds since midnight
 * (offset subtracted, result may fall outside 0..86400). */
bool kiln_format_parse_time(const char *s, size_t len, long double *out);

#endif
