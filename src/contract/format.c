/* String format checks for contract fields (email, uuid, ip addresses, uri,
 * hostname, RFC 3339 dates and times, base64) and the calendar parsing that
 * date and timestamp range checks share. Pure functions over `len` bytes:
 * no allocation, no locale, no NUL terminator expected. */
#include "contract/format.h"

#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

static const char *const names[] = {
    [KILN_FORMAT_NONE] = "none",         [KILN_FORMAT_EMAIL] = "email", [KILN_FORMAT_UUID] = "uuid",
    [KILN_FORMAT_IPV4] = "ipv4",         [KILN_FORMAT_IPV6] = "ipv6",   [KILN_FORMAT_URI] = "uri",
    [KILN_FORMAT_HOSTNAME] = "hostname", [KILN_FORMAT_DATE] = "date",   [KILN_FORMAT_DATE_TIME] = "date-time",
    [KILN_FORMAT_TIME] = "time",         [KILN_FORMAT_BYTE] = "byte",
};

#define FORMAT_COUNT (sizeof(names) / sizeof(names[0]))

#define SECONDS_PER_DAY 86400LL

/* ASCII character classes from one table (the C library's follow the
 * locale): digit, letter, hex digit, RFC 5322 atext (non-ASCII included),
 * RFC 3986 unreserved/gen-delims/sub-delims ('%' is handled apart). */
enum { C_DIGIT = 1, C_ALPHA = 2, C_HEX = 4, C_ATEXT = 8, C_URI = 16 };

static const uint8_t char_class[256] = {
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x18, 0x00, 0x18, 0x18, 0x08, 0x18, 0x18, 0x10, 0x10, 0x18, 0x18, 0x10, 0x18, 0x10, 0x18,
    0x1d, 0x1d, 0x1d, 0x1d, 0x1d, 0x1d, 0x1d, 0x1d, 0x1d, 0x1d, 0x10, 0x10, 0x00, 0x18, 0x00, 0x18,
    0x10, 0x1e, 0x1e, 0x1e, 0x1e, 0x1e, 0x1e, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a,
    0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x10, 0x00, 0x10, 0x08, 0x18,
    0x08, 0x1e, 0x1e, 0x1e, 0x1e, 0x1e, 0x1e, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a,
    0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x1a, 0x08, 0x08, 0x08, 0x18, 0x00,
    0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08,
    0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08,
    0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08,
    0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08,
    0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08,
    0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08,
    0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08,
    0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08, 0x08,
};

static inline bool is_digit(unsigned char c)
{
	return char_class[c] & C_DIGIT;
}

static inline bool is_alpha(unsigned char c)
{
	return char_class[c] & C_ALPHA;
}

static inline bool is_hex(unsigned char c)
{
	return char_class[c] & C_HEX;
}

static inline bool is_non_ascii(unsigned char c)
{
	return c >= 0x80;
}

static inline bool is_atext(unsigned char c)
{
	return char_class[c] & C_ATEXT;
}

static inline bool is_uri_char(unsigned char c)
{
	return char_class[c] & C_URI;
}

static inline bool is_label_char(unsigned char c, bool allow_non_ascii)
{
	return (char_class[c] & (C_ALPHA | C_DIGIT)) || (allow_non_ascii && is_non_ascii(c));
}

/* Exactly n ASCII digits as an unsigned value (n <= 9). */
static bool parse_digits(const char *s, size_t n, unsigned *out)
{
	unsigned v = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!is_digit((unsigned char)s[i]))
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	*out = v;
	return true;
}

/* Matches `lit` (lower case ASCII) ignoring ASCII case. */
static bool match_nocase(const char *s, size_t len, const char *lit)
{
	size_t n = strlen(lit), i;

	if (len < n)
		return false;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c - 'A' + 'a');
		if (c != (unsigned char)lit[i])
			return false;
	}
	return true;
}

/* --- network forms --- */

static bool check_ipv4(const char *s, size_t len)
{
	size_t i = 0;
	int octet;

	if (len < 7 || len > 15)
		return false;
	for (octet = 0; octet < 4; octet++) {
		size_t start = i;
		unsigned v = 0;

		if (octet > 0) {
			if (i >= len || s[i] != '.')
				return false;
			start = ++i;
		}
		while (i < len && is_digit((unsigned char)s[i]) && i - start < 3)
			v = v * 10 + (unsigned)(s[i++] - '0');
		if (i == start || v > 255)
			return false;
		if (s[start] == '0' && i - start > 1)
			return false;
	}
	return i == len;
}

static bool check_ipv6(const char *s, size_t len)
{
	size_t i = 0;
	int groups = 0;
	bool compressed = false;

	if (len < 2 || len > 45)
		return false;
	if (s[0] == ':') {
		if (s[1] != ':')
			return false;
		compressed = true;
		i = 2;
		if (i == len)
			return true;
	}
	for (;;) {
		size_t start = i;

		while (i < len && is_hex((unsigned char)s[i]) && i - start < 4)
			i++;
		if (i < len && s[i] == '.') {
			/* embedded IPv4: the last 32 bits, nothing after it */
			if (!check_ipv4(s + start, len - start))
				return false;
			groups += 2;
			break;
		}
		if (i == start)
			return false;
		groups++;
		if (i == len)
			break;
		if (s[i] != ':')
			return false;
		i++;
		if (i < len && s[i] == ':') {
			if (compressed)
				return false;
			compressed = true;
			i++;
			if (i == len)
				break;
		} else if (i == len) {
			return false;
		}
		if (groups >= 8)
			return false;
	}
	return compressed ? groups <= 7 : groups == 8;
}

/* Dot-separated labels of letters, digits and inner hyphens, 1..63 bytes
 * each, at most 253 bytes in all; counts the labels. No trailing dot. */
static bool check_labels(const char *s, size_t len, bool allow_non_ascii, int *nlabels)
{
	size_t i = 0;
	int count = 0;

	if (len == 0 || len > 253)
		return false;
	while (i <= len) {
		size_t start = i;

		while (i < len && s[i] != '.') {
			unsigned char c = (unsigned char)s[i];

			if (!is_label_char(c, allow_non_ascii) && c != '-')
				return false;
			i++;
		}
		if (i == start || i - start > 63)
			return false;
		if (s[start] == '-' || s[i - 1] == '-')
			return false;
		count++;
		i++; /* past the dot, or past the end */
	}
	*nlabels = count;
	return true;
}

static bool check_hostname(const char *s, size_t len)
{
	int nlabels;

	if (len > 0 && s[len - 1] == '.')
		len--;
	return check_labels(s, len, false, &nlabels);
}

static bool check_email_local(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > 64)
		return false;
	if (s[0] == '.' || s[len - 1] == '.')
		return false;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '.') {
			if (s[i - 1] == '.')
				return false;
		} else if (!is_atext(c)) {
			return false;
		}
	}
	return true;
}

static bool check_email_domain(const char *s, size_t len)
{
	int nlabels;

	if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
		s++;
		len -= 2;
		if (match_nocase(s, len, "ipv6:"))
			return check_ipv6(s + 5, len - 5);
		return check_ipv4(s, len);
	}
	return check_labels(s, len, true, &nlabels) && nlabels >= 2;
}

static bool check_email(const char *s, size_t len)
{
	const char *at;

	if (len == 0 || len > 254)
		return false;
	at = memchr(s, '@', len);
	if (at == NULL)
		return false;
	/* neither part admits a second '@' */
	return check_email_local(s, (size_t)(at - s)) &&
	       check_email_domain(at + 1, len - (size_t)(at - s) - 1);
}

static bool check_uri(const char *s, size_t len)
{
	size_t i;
	bool fragment = false;

	if (len == 0 || !is_alpha((unsigned char)s[0]))
		return false;
	for (i = 1; i < len && s[i] != ':'; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.')
			return false;
	}
	if (i == len)
		return false;
	for (i++; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '%') {
			if (len - i < 3 || !is_hex((unsigned char)s[i + 1]) ||
			    !is_hex((unsigned char)s[i + 2]))
				return false;
			i += 2;
		} else if (c == '#') {
			if (fragment)
				return false;
			fragment = true;
		} else if (!is_uri_char(c)) {
			return false;
		}
	}
	return true;
}

static bool check_uuid_portable(const char *s, size_t len)
{
	size_t i;

	if (len != 36)
		return false;
	for (i = 0; i < len; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!is_hex((unsigned char)s[i])) {
			return false;
		}
	}
	return true;
}

static bool is_base64(unsigned char c)
{
	return is_alpha(c) || is_digit(c) || c == '+' || c == '/';
}

static bool check_byte_portable(const char *s, size_t len)
{
	size_t i, pad = 0;

	if (len % 4 != 0)
		return false;
	if (len == 0)
		return true;
	while (pad < 2 && s[len - 1 - pad] == '=')
		pad++;
	for (i = 0; i < len - pad; i++) {
		if (!is_base64((unsigned char)s[i]))
			return false;
	}
	return true;
}

/* 1 unless a test forced the portable checks (kiln_format_allow_simd). */
static int allow_simd = 1;

void kiln_format_allow_simd(bool allow)
{
	__atomic_store_n(&allow_simd, allow ? 1 : 0, __ATOMIC_RELAXED);
}

#ifdef __SSE2__
/* Per byte of v: lo <= byte <= hi, as signed bytes (so bytes >= 0x80, being
 * negative, are in no ASCII range). */
static inline __m128i in_range(__m128i v, char lo, char hi)
{
	return _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8((char)(lo - 1))),
	                     _mm_cmplt_epi8(v, _mm_set1_epi8((char)(hi + 1))));
}

/* Bit i set when byte i of s[0..16) is an ASCII hex digit. */
static inline unsigned hex_bits(const char *s)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
	__m128i lower =
	    _mm_or_si128(v, _mm_set1_epi8(0x20)); /* 'A'-'F' -> 'a'-'f'; nothing else lands there */

	return (unsigned)_mm_movemask_epi8(_mm_or_si128(in_range(v, '0', '9'), in_range(lower, 'a', 'f')));
}

static inline unsigned dash_bits(const char *s)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);

	return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('-')));
}

/* 8-4-4-4-12 hex digits in three 16-byte loads: s[0..16) (dashes at 8, 13),
 * s[16..32) (dashes at 18, 23) and s[20..36) (dash at 23). */
static bool check_uuid_sse2(const char *s)
{
	return ((hex_bits(s) & 0xDEFFu) | (dash_bits(s) & 0x2100u)) == 0xFFFFu &&
	       ((hex_bits(s + 16) & 0xFF7Bu) | (dash_bits(s + 16) & 0x0084u)) == 0xFFFFu &&
	       ((hex_bits(s + 20) & 0xFFF7u) | (dash_bits(s + 20) & 0x0008u)) == 0xFFFFu;
}

/* Bit i set when byte i of s[0..16) is in the base64 alphabet (no '='). */
static inline unsigned base64_bits(const char *s)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
	__m128i m =
	    _mm_or_si128(_mm_or_si128(in_range(v, 'A', 'Z'), in_range(v, 'a', 'z')), in_range(v, '0', '9'));

	m = _mm_or_si128(
	    m, _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('+')), _mm_cmpeq_epi8(v, _mm_set1_epi8('/'))));
	return (unsigned)_mm_movemask_epi8(m);
}
#endif

static bool check_uuid(const char *s, size_t len)
{
#ifdef __SSE2__
	if (len == 36 && __atomic_load_n(&allow_simd, __ATOMIC_RELAXED))
		return check_uuid_sse2(s);
#endif
	return check_uuid_portable(s, len);
}

static bool check_byte(const char *s, size_t len)
{
#ifdef __SSE2__
	size_t i = 0, pad = 0, n;

	if (len % 4 != 0 || !__atomic_load_n(&allow_simd, __ATOMIC_RELAXED))
		return check_byte_portable(s, len);
	if (len == 0)
		return true;
	while (pad < 2 && s[len - 1 - pad] == '=')
		pad++;
	n = len - pad;
	for (; n - i >= 16; i += 16)
		if (base64_bits(s + i) != 0xFFFFu)
			return false;
	for (; i < n; i++)
		if (!is_base64((unsigned char)s[i]))
			return false;
	return true;
#else
	return check_byte_portable(s, len);
#endif
}

/* --- calendar --- */

static bool is_leap(unsigned y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned days_in_month(unsigned y, unsigned m)
{
	static const unsigned char days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
 * (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* YYYY-MM-DD in s[0..10) -> days since the epoch. */
static bool parse_full_date(const char *s, int64_t *days)
{
	unsigned y, m, d;

	if (!parse_digits(s, 4, &y) || s[4] != '-' || !parse_digits(s + 5, 2, &m) || s[7] != '-' ||
	    !parse_digits(s + 8, 2, &d))
		return false;
	if (m < 1 || m > 12 || d < 1 || d > days_in_month(y, m))
		return false;
	*days = days_from_civil((int64_t)y, m, d);
	return true;
}

/* HH:MM:SS[.frac] at the start of s -> whole seconds, fraction, bytes used. */
static bool parse_partial_time(const char *s, size_t len, int64_t *secs, long double *frac, size_t *used)
{
	unsigned h, m, sec, f = 0, scale = 1;
	size_t i = 8;

	if (len < 8 || !parse_digits(s, 2, &h) || s[2] != ':' || !parse_digits(s + 3, 2, &m) || s[5] != ':' ||
	    !parse_digits(s + 6, 2, &sec))
		return false;
	if (h > 23 || m > 59 || sec > 60)
		return false;
	if (i < len && s[i] == '.') {
		size_t start = ++i;

		while (i < len && is_digit((unsigned char)s[i]) && i - start < 9) {
			f = f * 10 + (unsigned)(s[i++] - '0');
			scale *= 10;
		}
		if (i == start)
			return false;
	}
	*secs = (int64_t)h * 3600 + (int64_t)m * 60 + sec;
	*frac = f ? (long double)f / (long double)scale : 0.0L; /* no x87 division for whole seconds */
	*used = i;
	return true;
}

/* The whole of s is "Z"/"z" or "+hh:mm"/"-hh:mm" -> offset east of UTC. */
static bool parse_offset(const char *s, size_t len, int64_t *offset)
{
	unsigned h, m;

	if (len == 1 && (s[0] == 'Z' || s[0] == 'z')) {
		*offset = 0;
		return true;
	}
	if (len != 6 || (s[0] != '+' && s[0] != '-') || !parse_digits(s + 1, 2, &h) || s[3] != ':' ||
	    !parse_digits(s + 4, 2, &m))
		return false;
	if (h > 23 || m > 59)
		return false;
	*offset = ((int64_t)h * 3600 + (int64_t)m * 60) * (s[0] == '-' ? -1 : 1);
	return true;
}

bool kiln_format_parse_date(const char *s, size_t len, long double *out)
{
	int64_t days;

	if (s == NULL || len != 10 || !parse_full_date(s, &days))
		return false;
	if (out)
		*out = (long double)(days * SECONDS_PER_DAY);
	return true;
}

bool kiln_format_parse_date_time(const char *s, size_t len, long double *out)
{
	int64_t days, secs, offset;
	long double frac;
	size_t used;

	if (s == NULL || len < 20 || !parse_full_date(s, &days))
		return false;
	if (s[10] != 'T' && s[10] != 't')
		return false;
	if (!parse_partial_time(s + 11, len - 11, &secs, &frac, &used))
		return false;
	if (!parse_offset(s + 11 + used, len - 11 - used, &offset))
		return false;
	if (out)
		*out = (long double)(days * SECONDS_PER_DAY + secs - offset) + frac;
	return true;
}

bool kiln_format_parse_time(const char *s, size_t len, long double *out)
{
	int64_t secs, offset = 0;
	long double frac;
	size_t used;

	if (s == NULL || len < 8 || !parse_partial_time(s, len, &secs, &frac, &used))
		return false;
	if (used < len && !parse_offset(s + used, len - used, &offset))
		return false;
	if (out)
		*out = (long double)(secs - offset) + frac;
	return true;
}

/* --- names and dispatch --- */

bool kiln_format_from_name(const char *name, kiln_format *out)
{
	size_t i;

	if (name == NULL)
		return false;
	if (strcmp(name, "password") == 0 || strcmp(name, "binary") == 0) {
		*out = KILN_FORMAT_NONE;
		return true;
	}
	/* "none" is kiln's own name for no check, not a contract format */
	for (i = 1; i < FORMAT_COUNT; i++) {
		if (strcmp(name, names[i]) == 0) {
			*out = (kiln_format)i;
			return true;
		}
	}
	return false;
}

const char *kiln_format_name(kiln_format format)
{
	if ((unsigned)format >= FORMAT_COUNT)
		return "unknown";
	return names[format];
}

bool kiln_format_check(kiln_format format, const char *s, size_t len)
{
	if (format == KILN_FORMAT_NONE)
		return true;
	if (s == NULL && len != 0)
		return false;
	switch (format) {
	case KILN_FORMAT_EMAIL:
		return check_email(s, len);
	case KILN_FORMAT_UUID:
		return check_uuid(s, len);
	case KILN_FORMAT_IPV4:
		return check_ipv4(s, len);
	case KILN_FORMAT_IPV6:
		return check_ipv6(s, len);
	case KILN_FORMAT_URI:
		return check_uri(s, len);
	case KILN_FORMAT_HOSTNAME:
		return check_hostname(s, len);
	case KILN_FORMAT_DATE:
		return kiln_format_parse_date(s, len, NULL);
	case KILN_FORMAT_DATE_TIME:
		return kiln_format_parse_date_time(s, len, NULL);
	case KILN_FORMAT_TIME:
		return kiln_format_parse_time(s, len, NULL);
	case KILN_FORMAT_BYTE:
		return check_byte(s, len);
	case KILN_FORMAT_NONE:
		break;
	}
	return false;
}
