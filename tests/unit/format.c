/* Unit tests for src/contract/format.c: every format's valid and invalid
 * forms, calendar edges, offsets and fractions, and the name mapping. Each
 * value is copied into an exact-size heap buffer with no NUL, so a read past
 * `len` trips AddressSanitizer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "contract/format.h"

static bool check_exact(kiln_format format, const char *str, size_t len)
{
	char *buf = malloc(len ? len : 1);
	bool ok;

	assert_non_null(buf);
	memcpy(buf, str, len);
	ok = kiln_format_check(format, buf, len);
	free(buf);
	return ok;
}

static bool check(kiln_format format, const char *str)
{
	return check_exact(format, str, strlen(str));
}

#define VALID(fmt, str)                                                                                      \
	do {                                                                                                 \
		if (!check(fmt, str))                                                                        \
			fail_msg("%s should be valid: \"%s\"", kiln_format_name(fmt), str);                  \
	} while (0)

#define INVALID(fmt, str)                                                                                    \
	do {                                                                                                 \
		if (check(fmt, str))                                                                         \
			fail_msg("%s should be invalid: \"%s\"", kiln_format_name(fmt), str);                \
	} while (0)

typedef bool (*parse_fn)(const char *, size_t, long double *);

static long double parse_ok(parse_fn fn, const char *str)
{
	size_t len = strlen(str);
	char *buf = malloc(len);
	long double v = -12345.0L;

	assert_non_null(buf);
	memcpy(buf, str, len);
	if (!fn(buf, len, &v))
		fail_msg("should parse: \"%s\"", str);
	free(buf);
	return v;
}

#define assert_seconds(fn, str, expected)                                                                    \
	do {                                                                                                 \
		long double got_ = parse_ok(fn, str);                                                        \
		if (fabsl(got_ - (long double)(expected)) > 1e-6L)                                           \
			fail_msg("\"%s\": got %.9Lf, want %.9Lf", str, got_, (long double)(expected));       \
	} while (0)

/* "c" repeated n times into buf at *pos. */
static void put(char *buf, size_t *pos, char c, size_t n)
{
	memset(buf + *pos, c, n);
	*pos += n;
}

/* --- names --- */

static void test_from_name(void **state)
{
	static const struct {
		const char *name;
		kiln_format format;
	} cases[] = {
	    {"email", KILN_FORMAT_EMAIL},   {"uuid", KILN_FORMAT_UUID},
	    {"ipv4", KILN_FORMAT_IPV4},     {"ipv6", KILN_FORMAT_IPV6},
	    {"uri", KILN_FORMAT_URI},       {"hostname", KILN_FORMAT_HOSTNAME},
	    {"date", KILN_FORMAT_DATE},     {"date-time", KILN_FORMAT_DATE_TIME},
	    {"time", KILN_FORMAT_TIME},     {"byte", KILN_FORMAT_BYTE},
	    {"password", KILN_FORMAT_NONE}, {"binary", KILN_FORMAT_NONE},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		kiln_format f = KILN_FORMAT_BYTE;

		if (cases[i].format == KILN_FORMAT_BYTE)
			f = KILN_FORMAT_NONE;
		assert_true(kiln_format_from_name(cases[i].name, &f));
		assert_int_equal(f, cases[i].format);
	}
}

static void test_from_name_unknown(void **state)
{
	kiln_format f = KILN_FORMAT_URI;

	(void)state;
	assert_false(kiln_format_from_name("Email", &f));
	assert_false(kiln_format_from_name("datetime", &f));
	assert_false(kiln_format_from_name("date_time", &f));
	assert_false(kiln_format_from_name("uri-reference", &f));
	assert_false(kiln_format_from_name("none", &f));
	assert_false(kiln_format_from_name("", &f));
	assert_false(kiln_format_from_name("email ", &f));
	assert_false(kiln_format_from_name(NULL, &f));
	assert_int_equal(f, KILN_FORMAT_URI); /* untouched on failure */
}

static void test_name(void **state)
{
	kiln_format f = KILN_FORMAT_NONE;
	int i;

	(void)state;
	assert_string_equal(kiln_format_name(KILN_FORMAT_NONE), "none");
	assert_string_equal(kiln_format_name(KILN_FORMAT_DATE_TIME), "date-time");
	assert_string_equal(kiln_format_name(KILN_FORMAT_BYTE), "byte");
	assert_string_equal(kiln_format_name((kiln_format)99), "unknown");
	assert_string_equal(kiln_format_name((kiln_format)-1), "unknown");
	for (i = KILN_FORMAT_EMAIL; i <= KILN_FORMAT_BYTE; i++) {
		assert_true(kiln_format_from_name(kiln_format_name((kiln_format)i), &f));
		assert_int_equal(f, i);
	}
}

static void test_none_and_unknown_code(void **state)
{
	(void)state;
	assert_true(kiln_format_check(KILN_FORMAT_NONE, "anything at all", 15));
	assert_true(kiln_format_check(KILN_FORMAT_NONE, NULL, 0));
	assert_true(kiln_format_check(KILN_FORMAT_NONE, NULL, 5));
	assert_false(kiln_format_check((kiln_format)99, "x", 1));
	assert_false(kiln_format_check(KILN_FORMAT_EMAIL, NULL, 3));
	assert_false(kiln_format_check(KILN_FORMAT_EMAIL, NULL, 0));
	assert_true(kiln_format_check(KILN_FORMAT_BYTE, NULL, 0));
}

/* --- email --- */

static void test_email_valid(void **state)
{
	(void)state;
	VALID(KILN_FORMAT_EMAIL, "joe@example.com");
	VALID(KILN_FORMAT_EMAIL, "a@b.c");
	VALID(KILN_FORMAT_EMAIL, "first.last@sub.example.co.uk");
	VALID(KILN_FORMAT_EMAIL, "user+tag@example.com");
	VALID(KILN_FORMAT_EMAIL, "!#$%&'*+-/=?^_`{|}~@example.com");
	VALID(KILN_FORMAT_EMAIL, "x@a-b.example");
	VALID(KILN_FORMAT_EMAIL, "x@123.example");
	VALID(KILN_FORMAT_EMAIL, "j\xc3\xb6rg@b\xc3\xbc"
	                         "cher.de");
	VALID(KILN_FORMAT_EMAIL,
	      "\xe7\x94\xa8\xe6\x88\xb7@\xe4\xbe\x8b\xe5\xad\x90.\xe5\x85\xac\xe5\x8f\xb8");
	VALID(KILN_FORMAT_EMAIL, "joe@[192.168.0.1]");
	VALID(KILN_FORMAT_EMAIL, "joe@[IPv6:2001:db8::1]");
	VALID(KILN_FORMAT_EMAIL, "joe@[ipv6:::1]");
}

static void test_email_invalid(void **state)
{
	(void)state;
	INVALID(KILN_FORMAT_EMAIL, "");
	INVALID(KILN_FORMAT_EMAIL, "@");
	INVALID(KILN_FORMAT_EMAIL, "joe");
	INVALID(KILN_FORMAT_EMAIL, "joe@");
	INVALID(KILN_FORMAT_EMAIL, "@example.com");
	INVALID(KILN_FORMAT_EMAIL, "joe@@example.com");
	INVALID(KILN_FORMAT_EMAIL, "a@b@example.com");
	INVALID(KILN_FORMAT_EMAIL, ".joe@example.com");
	INVALID(KILN_FORMAT_EMAIL, "joe.@example.com");
	INVALID(KILN_FORMAT_EMAIL, "jo..e@example.com");
	INVALID(KILN_FORMAT_EMAIL, "jo e@example.com");
	INVALID(KILN_FORMAT_EMAIL, "\"joe\"@example.com");
	INVALID(KILN_FORMAT_EMAIL, "jo(e)@example.com");
	INVALID(KILN_FORMAT_EMAIL, "joe@localhost");
	INVALID(KILN_FORMAT_EMAIL, "joe@example.com.");
	INVALID(KILN_FORMAT_EMAIL, "joe@.example.com");
	INVALID(KILN_FORMAT_EMAIL, "joe@example..com");
	INVALID(KILN_FORMAT_EMAIL, "joe@-example.com");
	INVALID(KILN_FORMAT_EMAIL, "joe@example-.com");
	INVALID(KILN_FORMAT_EMAIL, "joe@exa_mple.com");
	INVALID(KILN_FORMAT_EMAIL, "joe@example.com ");
	INVALID(KILN_FORMAT_EMAIL, "joe@[192.168.0.256]");
	INVALID(KILN_FORMAT_EMAIL, "joe@[2001:db8::1]");
	INVALID(KILN_FORMAT_EMAIL, "joe@[IPv6:2001:db8::g]");
	INVALID(KILN_FORMAT_EMAIL, "joe@[192.168.0.1");
	INVALID(KILN_FORMAT_EMAIL, "joe@[]");
}

static void test_email_lengths(void **state)
{
	char buf[300];
	size_t n = 0;

	(void)state;
	/* local part: 64 ok, 65 not */
	put(buf, &n, 'a', 64);
	memcpy(buf + n, "@example.com", 12);
	assert_true(check_exact(KILN_FORMAT_EMAIL, buf, n + 12));
	n = 0;
	put(buf, &n, 'a', 65);
	memcpy(buf + n, "@example.com", 12);
	assert_false(check_exact(KILN_FORMAT_EMAIL, buf, n + 12));

	/* label: 63 ok, 64 not */
	n = 0;
	memcpy(buf, "a@", 2);
	n = 2;
	put(buf, &n, 'b', 63);
	memcpy(buf + n, ".com", 4);
	assert_true(check_exact(KILN_FORMAT_EMAIL, buf, n + 4));
	n = 2;
	put(buf, &n, 'b', 64);
	memcpy(buf + n, ".com", 4);
	assert_false(check_exact(KILN_FORMAT_EMAIL, buf, n + 4));

	/* whole address: 64 + 1 + 189 = 254 ok, 255 not */
	n = 0;
	put(buf, &n, 'a', 64);
	put(buf, &n, '@', 1);
	put(buf, &n, 'b', 63);
	put(buf, &n, '.', 1);
	put(buf, &n, 'c', 63);
	put(buf, &n, '.', 1);
	put(buf, &n, 'd', 61);
	assert_int_equal(n, 254);
	assert_true(check_exact(KILN_FORMAT_EMAIL, buf, n));
	put(buf, &n, 'd', 1);
	assert_false(check_exact(KILN_FORMAT_EMAIL, buf, n));
}

/* --- uuid --- */

static void test_uuid(void **state)
{
	(void)state;
	VALID(KILN_FORMAT_UUID, "123e4567-e89b-12d3-a456-426614174000");
	VALID(KILN_FORMAT_UUID, "123E4567-E89B-12D3-A456-426614174000");
	VALID(KILN_FORMAT_UUID, "00000000-0000-0000-0000-000000000000");
	VALID(KILN_FORMAT_UUID, "FFFFFFFF-ffff-FfFf-fFfF-abcdefABCDEF");
	INVALID(KILN_FORMAT_UUID, "");
	INVALID(KILN_FORMAT_UUID, "123e4567e89b12d3a456426614174000");
	INVALID(KILN_FORMAT_UUID, "123e4567-e89b-12d3-a456-42661417400");
	INVALID(KILN_FORMAT_UUID, "123e4567-e89b-12d3-a456-4266141740000");
	INVALID(KILN_FORMAT_UUID, "123e4567-e89b-12d3-a456-42661417400g");
	INVALID(KILN_FORMAT_UUID, "123e4567-e89b12d3-a456-4266-14174000");
	INVALID(KILN_FORMAT_UUID, "{123e4567-e89b-12d3-a456-426614174000}");
	INVALID(KILN_FORMAT_UUID, "123e4567_e89b_12d3_a456_426614174000");
}

/* --- ipv4 --- */

static void test_ipv4(void **state)
{
	(void)state;
	VALID(KILN_FORMAT_IPV4, "0.0.0.0");
	VALID(KILN_FORMAT_IPV4, "192.168.0.1");
	VALID(KILN_FORMAT_IPV4, "255.255.255.255");
	VALID(KILN_FORMAT_IPV4, "10.0.100.9");
	INVALID(KILN_FORMAT_IPV4, "");
	INVALID(KILN_FORMAT_IPV4, "256.0.0.0");
	INVALID(KILN_FORMAT_IPV4, "1.2.3.999");
	INVALID(KILN_FORMAT_IPV4, "01.2.3.4");
	INVALID(KILN_FORMAT_IPV4, "1.2.3.00");
	INVALID(KILN_FORMAT_IPV4, "1.2.3");
	INVALID(KILN_FORMAT_IPV4, "1.2.3.4.5");
	INVALID(KILN_FORMAT_IPV4, "1.2.3.4.");
	INVALID(KILN_FORMAT_IPV4, ".1.2.3.4");
	INVALID(KILN_FORMAT_IPV4, "1..2.3");
	INVALID(KILN_FORMAT_IPV4, "1.2.3.4 ");
	INVALID(KILN_FORMAT_IPV4, "+1.2.3.4");
	INVALID(KILN_FORMAT_IPV4, "1.2.3.a");
	INVALID(KILN_FORMAT_IPV4, "0x7f.0.0.1");
	INVALID(KILN_FORMAT_IPV4, "1.2.3.1234");
	INVALID(KILN_FORMAT_IPV4, "\xd9\xa3.1.1.1");
}

/* --- ipv6 --- */

static void test_ipv6_valid(void **state)
{
	(void)state;
	VALID(KILN_FORMAT_IPV6, "::");
	VALID(KILN_FORMAT_IPV6, "::1");
	VALID(KILN_FORMAT_IPV6, "1::");
	VALID(KILN_FORMAT_IPV6, "2001:db8::ff00:42:8329");
	VALID(KILN_FORMAT_IPV6, "2001:0DB8:0000:0000:0000:FF00:0042:8329");
	VALID(KILN_FORMAT_IPV6, "1:2:3:4:5:6:7:8");
	VALID(KILN_FORMAT_IPV6, "1:2:3:4:5:6:7::");
	VALID(KILN_FORMAT_IPV6, "::2:3:4:5:6:7:8");
	VALID(KILN_FORMAT_IPV6, "1::8");
	VALID(KILN_FORMAT_IPV6, "::ffff:192.0.2.128");
	VALID(KILN_FORMAT_IPV6, "::192.0.2.128");
	VALID(KILN_FORMAT_IPV6, "1:2:3:4:5:6:1.2.3.4");
	VALID(KILN_FORMAT_IPV6, "1::5:6:1.2.3.4");
	VALID(KILN_FORMAT_IPV6, "0000:0000:0000:0000:0000:ffff:255.255.255.255");
}

static void test_ipv6_invalid(void **state)
{
	(void)state;
	INVALID(KILN_FORMAT_IPV6, "");
	INVALID(KILN_FORMAT_IPV6, ":");
	INVALID(KILN_FORMAT_IPV6, ":::");
	INVALID(KILN_FORMAT_IPV6, ":1::");
	INVALID(KILN_FORMAT_IPV6, "1:");
	INVALID(KILN_FORMAT_IPV6, "1::2::3");
	INVALID(KILN_FORMAT_IPV6, "1:::2");
	INVALID(KILN_FORMAT_IPV6, "1:2:3:4:5:6:7");
	INVALID(KILN_FORMAT_IPV6, "1:2:3:4:5:6:7:8:9");
	INVALID(KILN_FORMAT_IPV6, "1:2:3:4:5:6:7:8::");
	INVALID(KILN_FORMAT_IPV6, "::1:2:3:4:5:6:7:8");
	INVALID(KILN_FORMAT_IPV6, "1:2:3:4::5:6:7:8");
	INVALID(KILN_FORMAT_IPV6, "12345::");
	INVALID(KILN_FORMAT_IPV6, "g::1");
	INVALID(KILN_FORMAT_IPV6, "fe80::1%eth0");
	INVALID(KILN_FORMAT_IPV6, "[::1]");
	INVALID(KILN_FORMAT_IPV6, " ::1");
	INVALID(KILN_FORMAT_IPV6, "1.2.3.4");
	INVALID(KILN_FORMAT_IPV6, "::1.2.3");
	INVALID(KILN_FORMAT_IPV6, "::1.2.3.256");
	INVALID(KILN_FORMAT_IPV6, "::01.2.3.4");
	INVALID(KILN_FORMAT_IPV6, "::1.2.3.4:1");
	INVALID(KILN_FORMAT_IPV6, "1:2:3:4:5:6:7:1.2.3.4");
	INVALID(KILN_FORMAT_IPV6, "1:2:3:4:5:6:7:8:1.2.3.4");
	INVALID(KILN_FORMAT_IPV6, "::ffff:1234.1.1.1");
	INVALID(KILN_FORMAT_IPV6, "0000:0000:0000:0000:0000:ffff:255.255.255.2550");
}

/* --- uri --- */

static void test_uri(void **state)
{
	(void)state;
	VALID(KILN_FORMAT_URI, "http://example.com");
	VALID(KILN_FORMAT_URI, "https://user:pw@example.com:8443/a/b?c=d&e=f#frag");
	VALID(KILN_FORMAT_URI, "urn:isbn:0451450523");
	VALID(KILN_FORMAT_URI, "mailto:joe@example.com");
	VALID(KILN_FORMAT_URI, "http://[2001:db8::1]/");
	VALID(KILN_FORMAT_URI, "s3://bucket/key%20with%2Fescapes");
	VALID(KILN_FORMAT_URI, "git+ssh://host/repo.git");
	VALID(KILN_FORMAT_URI, "a.b-c+d:");
	VALID(KILN_FORMAT_URI, "x:!$&'()*+,;=-._~");
	VALID(KILN_FORMAT_URI, "http://e.com/#a/b?c");
	INVALID(KILN_FORMAT_URI, "");
	INVALID(KILN_FORMAT_URI, "example.com");
	INVALID(KILN_FORMAT_URI, "/relative/path");
	INVALID(KILN_FORMAT_URI, "//example.com/");
	INVALID(KILN_FORMAT_URI, ":nothing");
	INVALID(KILN_FORMAT_URI, "1http://example.com");
	INVALID(KILN_FORMAT_URI, "ht_tp://example.com");
	INVALID(KILN_FORMAT_URI, "http://exa mple.com");
	INVALID(KILN_FORMAT_URI, "http://example.com/\xc3\xa9");
	INVALID(KILN_FORMAT_URI, "http://example.com/%");
	INVALID(KILN_FORMAT_URI, "http://example.com/%2");
	INVALID(KILN_FORMAT_URI, "http://example.com/%zz");
	INVALID(KILN_FORMAT_URI, "http://example.com/a#b#c");
	INVALID(KILN_FORMAT_URI, "http://example.com/<a>");
	INVALID(KILN_FORMAT_URI, "http://example.com/a\\b");
	INVALID(KILN_FORMAT_URI, "http://example.com/{a}");
	INVALID(KILN_FORMAT_URI, "http://example.com/\"");
}

/* --- hostname --- */

static void test_hostname(void **state)
{
	(void)state;
	VALID(KILN_FORMAT_HOSTNAME, "localhost");
	VALID(KILN_FORMAT_HOSTNAME, "example.com");
	VALID(KILN_FORMAT_HOSTNAME, "example.com.");
	VALID(KILN_FORMAT_HOSTNAME, "a-b.c-d.e");
	VALID(KILN_FORMAT_HOSTNAME, "3com.com");
	VALID(KILN_FORMAT_HOSTNAME, "XN--BCHER-KVA.example");
	VALID(KILN_FORMAT_HOSTNAME, "a");
	INVALID(KILN_FORMAT_HOSTNAME, "");
	INVALID(KILN_FORMAT_HOSTNAME, ".");
	INVALID(KILN_FORMAT_HOSTNAME, ".example.com");
	INVALID(KILN_FORMAT_HOSTNAME, "example..com");
	INVALID(KILN_FORMAT_HOSTNAME, "example.com..");
	INVALID(KILN_FORMAT_HOSTNAME, "-example.com");
	INVALID(KILN_FORMAT_HOSTNAME, "example-.com");
	INVALID(KILN_FORMAT_HOSTNAME, "exa_mple.com");
	INVALID(KILN_FORMAT_HOSTNAME, "exa mple.com");
	INVALID(KILN_FORMAT_HOSTNAME, "b\xc3\xbc"
	                              "cher.de");
	INVALID(KILN_FORMAT_HOSTNAME, "host:80");
}

static void test_hostname_lengths(void **state)
{
	char buf[300];
	size_t n = 0;

	(void)state;
	put(buf, &n, 'a', 63);
	assert_true(check_exact(KILN_FORMAT_HOSTNAME, buf, n));
	put(buf, &n, 'a', 1);
	assert_false(check_exact(KILN_FORMAT_HOSTNAME, buf, n));

	/* 63.63.63.61 = 253 ok; with trailing dot ok; 254 not */
	n = 0;
	put(buf, &n, 'a', 63);
	put(buf, &n, '.', 1);
	put(buf, &n, 'b', 63);
	put(buf, &n, '.', 1);
	put(buf, &n, 'c', 63);
	put(buf, &n, '.', 1);
	put(buf, &n, 'd', 61);
	assert_int_equal(n, 253);
	assert_true(check_exact(KILN_FORMAT_HOSTNAME, buf, n));
	buf[n] = '.';
	assert_true(check_exact(KILN_FORMAT_HOSTNAME, buf, n + 1));
	buf[n] = 'd';
	assert_false(check_exact(KILN_FORMAT_HOSTNAME, buf, n + 1));
}

/* --- date --- */

static void test_date(void **state)
{
	(void)state;
	VALID(KILN_FORMAT_DATE, "2024-01-31");
	VALID(KILN_FORMAT_DATE, "2000-02-29");
	VALID(KILN_FORMAT_DATE, "2024-02-29");
	VALID(KILN_FORMAT_DATE, "2023-04-30");
	VALID(KILN_FORMAT_DATE, "0000-01-01");
	VALID(KILN_FORMAT_DATE, "0000-02-29");
	VALID(KILN_FORMAT_DATE, "9999-12-31");
	INVALID(KILN_FORMAT_DATE, "");
	INVALID(KILN_FORMAT_DATE, "1900-02-29");
	INVALID(KILN_FORMAT_DATE, "2023-02-29");
	INVALID(KILN_FORMAT_DATE, "2100-02-29");
	INVALID(KILN_FORMAT_DATE, "2024-02-30");
	INVALID(KILN_FORMAT_DATE, "2023-04-31");
	INVALID(KILN_FORMAT_DATE, "2023-06-31");
	INVALID(KILN_FORMAT_DATE, "2023-09-31");
	INVALID(KILN_FORMAT_DATE, "2023-11-31");
	INVALID(KILN_FORMAT_DATE, "2023-01-32");
	INVALID(KILN_FORMAT_DATE, "2023-00-10");
	INVALID(KILN_FORMAT_DATE, "2023-13-10");
	INVALID(KILN_FORMAT_DATE, "2023-01-00");
	INVALID(KILN_FORMAT_DATE, "2023-1-01");
	INVALID(KILN_FORMAT_DATE, "23-01-01");
	INVALID(KILN_FORMAT_DATE, "12023-01-01");
	INVALID(KILN_FORMAT_DATE, "2023/01/01");
	INVALID(KILN_FORMAT_DATE, "2023-01-01T00:00:00Z");
	INVALID(KILN_FORMAT_DATE, "2023-01-01 ");
	INVALID(KILN_FORMAT_DATE, "+023-01-01");
	INVALID(KILN_FORMAT_DATE, "2023-0a-01");
}

static void test_parse_date(void **state)
{
	(void)state;
	assert_seconds(kiln_format_parse_date, "1970-01-01", 0);
	assert_seconds(kiln_format_parse_date, "1970-01-02", 86400);
	assert_seconds(kiln_format_parse_date, "1969-12-31", -86400);
	assert_seconds(kiln_format_parse_date, "2000-01-01", 946684800LL);
	assert_seconds(kiln_format_parse_date, "2000-02-29", 951782400LL);
	assert_seconds(kiln_format_parse_date, "2000-03-01", 951868800LL);
	assert_seconds(kiln_format_parse_date, "2038-01-19", 2147472000LL);
	assert_seconds(kiln_format_parse_date, "0000-01-01", -62167219200LL);
	assert_seconds(kiln_format_parse_date, "9999-12-31", 253402214400LL);
}

/* --- date-time --- */

static void test_date_time_valid(void **state)
{
	(void)state;
	VALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56Z");
	VALID(KILN_FORMAT_DATE_TIME, "2024-03-01t12:34:56z");
	VALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56+05:30");
	VALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56-08:00");
	VALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56-00:00");
	VALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56+23:59");
	VALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56.1Z");
	VALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56.123456789Z");
	VALID(KILN_FORMAT_DATE_TIME, "2024-03-01T00:00:00.000+01:00");
	VALID(KILN_FORMAT_DATE_TIME, "1998-12-31T23:59:60Z");
	VALID(KILN_FORMAT_DATE_TIME, "2000-02-29T23:59:59Z");
}

static void test_date_time_invalid(void **state)
{
	(void)state;
	INVALID(KILN_FORMAT_DATE_TIME, "");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01 12:34:56Z");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01_12:34:56Z");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34Z");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T24:00:00Z");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:60:00Z");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:61Z");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56.Z");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56.1234567890Z");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56,5Z");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56+24:00");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56+05:60");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56+0530");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56+05");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56UTC");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56Z ");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T12:34:56ZZ");
	INVALID(KILN_FORMAT_DATE_TIME, "2023-02-29T12:34:56Z");
	INVALID(KILN_FORMAT_DATE_TIME, "1900-02-29T00:00:00Z");
	INVALID(KILN_FORMAT_DATE_TIME, "2023-04-31T00:00:00Z");
	INVALID(KILN_FORMAT_DATE_TIME, "2024-03-01T1:34:56Z");
}

static void test_parse_date_time(void **state)
{
	long double v = 0;

	(void)state;
	assert_seconds(kiln_format_parse_date_time, "1970-01-01T00:00:00Z", 0);
	assert_seconds(kiln_format_parse_date_time, "1970-01-01T01:00:00+01:00", 0);
	assert_seconds(kiln_format_parse_date_time, "1969-12-31T19:00:00-05:00", 0);
	assert_seconds(kiln_format_parse_date_time, "1970-01-01T00:00:00-01:30", 5400);
	assert_seconds(kiln_format_parse_date_time, "1970-01-01T05:30:00+05:30", 0);
	assert_seconds(kiln_format_parse_date_time, "2000-01-01T00:00:00Z", 946684800LL);
	assert_seconds(kiln_format_parse_date_time, "2000-01-01T00:00:00.5Z", 946684800.5L);
	assert_seconds(kiln_format_parse_date_time, "2000-01-01T00:00:00.25+00:00", 946684800.25L);
	assert_seconds(kiln_format_parse_date_time, "1999-12-31T23:59:59.999z", 946684799.999L);
	/* leap second lands on the next day's first second */
	assert_seconds(kiln_format_parse_date_time, "1998-12-31T23:59:60Z", 915148800LL);
	assert_seconds(kiln_format_parse_date_time, "1998-12-31T15:59:60-08:00", 915148800LL);

	/* nine fraction digits keep nanoseconds */
	assert_true(kiln_format_parse_date_time("1970-01-01T00:00:00.123456789Z", 30, &v));
	assert_true(fabsl(v - 0.123456789L) < 1e-12L);
	assert_true(kiln_format_parse_date_time("2024-03-01T12:34:56.000000001Z", 30, &v));
	assert_true(fabsl(v - (1709296496.0L + 1e-9L)) < 1e-10L);

	v = 42;
	assert_false(kiln_format_parse_date_time("1970-01-01 00:00:00Z", 20, &v));
	assert_false(kiln_format_parse_date_time(NULL, 0, &v));
	assert_true(v == 42); /* untouched on failure */
}

/* --- time --- */

static void test_time(void **state)
{
	(void)state;
	VALID(KILN_FORMAT_TIME, "00:00:00");
	VALID(KILN_FORMAT_TIME, "23:59:59");
	VALID(KILN_FORMAT_TIME, "23:59:60");
	VALID(KILN_FORMAT_TIME, "12:34:56.789");
	VALID(KILN_FORMAT_TIME, "12:34:56Z");
	VALID(KILN_FORMAT_TIME, "12:34:56z");
	VALID(KILN_FORMAT_TIME, "12:34:56+01:00");
	VALID(KILN_FORMAT_TIME, "12:34:56.123456789-23:59");
	INVALID(KILN_FORMAT_TIME, "");
	INVALID(KILN_FORMAT_TIME, "12:34");
	INVALID(KILN_FORMAT_TIME, "24:00:00");
	INVALID(KILN_FORMAT_TIME, "12:60:00");
	INVALID(KILN_FORMAT_TIME, "12:00:61");
	INVALID(KILN_FORMAT_TIME, "1:02:03");
	INVALID(KILN_FORMAT_TIME, "12:34:56.");
	INVALID(KILN_FORMAT_TIME, "12:34:56.1234567890");
	INVALID(KILN_FORMAT_TIME, "12:34:56+1:00");
	INVALID(KILN_FORMAT_TIME, "12:34:56+24:00");
	INVALID(KILN_FORMAT_TIME, "12:34:56 ");
	INVALID(KILN_FORMAT_TIME, "T12:34:56");
	INVALID(KILN_FORMAT_TIME, "12:34:56ZZ");
	INVALID(KILN_FORMAT_TIME, "12-34-56");
}

static void test_parse_time(void **state)
{
	(void)state;
	assert_seconds(kiln_format_parse_time, "00:00:00", 0);
	assert_seconds(kiln_format_parse_time, "12:00:00", 43200);
	assert_seconds(kiln_format_parse_time, "12:00:00Z", 43200);
	assert_seconds(kiln_format_parse_time, "23:59:60", 86400);
	assert_seconds(kiln_format_parse_time, "01:02:03.5", 3723.5L);
	assert_seconds(kiln_format_parse_time, "00:30:00+01:00", -1800);
	assert_seconds(kiln_format_parse_time, "23:00:00-02:00", 90000);
	assert_seconds(kiln_format_parse_time, "10:15:00.25+10:15", 0.25L);
}

/* --- byte --- */

static void test_byte(void **state)
{
	(void)state;
	VALID(KILN_FORMAT_BYTE, "");
	VALID(KILN_FORMAT_BYTE, "Zg==");
	VALID(KILN_FORMAT_BYTE, "Zm8=");
	VALID(KILN_FORMAT_BYTE, "Zm9v");
	VALID(KILN_FORMAT_BYTE, "Zm9vYmFy");
	VALID(KILN_FORMAT_BYTE, "+/+/AZaz09==");
	INVALID(KILN_FORMAT_BYTE, "Zg");
	INVALID(KILN_FORMAT_BYTE, "Zg=");
	INVALID(KILN_FORMAT_BYTE, "Zm9vY");
	INVALID(KILN_FORMAT_BYTE, "Z===");
	INVALID(KILN_FORMAT_BYTE, "====");
	INVALID(KILN_FORMAT_BYTE, "Zg==Zg==");
	INVALID(KILN_FORMAT_BYTE, "Z=g=");
	INVALID(KILN_FORMAT_BYTE, "Zm9v\n");
	INVALID(KILN_FORMAT_BYTE, "Zm 9");
	INVALID(KILN_FORMAT_BYTE, "Zm-_");
	INVALID(KILN_FORMAT_BYTE, "Zm9\xc3");
}

/* --- len is honoured, not a NUL --- */

static void test_len_not_nul(void **state)
{
	long double v;

	(void)state;
	assert_true(kiln_format_check(KILN_FORMAT_IPV4, "1.2.3.45", 7));
	assert_false(kiln_format_check(KILN_FORMAT_IPV4, "1.2.3.4", 6));
	assert_true(kiln_format_check(KILN_FORMAT_EMAIL, "a@b.co@x", 6));
	assert_true(kiln_format_check(KILN_FORMAT_UUID, "123e4567-e89b-12d3-a456-426614174000xyz", 36));
	assert_true(kiln_format_check(KILN_FORMAT_DATE, "2024-01-01T", 10));
	assert_true(kiln_format_check(KILN_FORMAT_HOSTNAME, "a.b c", 3));
	assert_true(kiln_format_check(KILN_FORMAT_BYTE, "Zm9v!", 4));
	assert_true(kiln_format_parse_time("12:00:00+01:00", 8, &v));
	assert_true(v == 43200);
	/* embedded NUL is just an invalid byte */
	assert_false(kiln_format_check(KILN_FORMAT_HOSTNAME, "a\0b", 3));
	assert_false(kiln_format_check(KILN_FORMAT_URI, "a:b\0c", 5));
	assert_false(kiln_format_check(KILN_FORMAT_EMAIL, "a\0b@c.de", 8));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_from_name),
	    cmocka_unit_test(test_from_name_unknown),
	    cmocka_unit_test(test_name),
	    cmocka_unit_test(test_none_and_unknown_code),
	    cmocka_unit_test(test_email_valid),
	    cmocka_unit_test(test_email_invalid),
	    cmocka_unit_test(test_email_lengths),
	    cmocka_unit_test(test_uuid),
	    cmocka_unit_test(test_ipv4),
	    cmocka_unit_test(test_ipv6_valid),
	    cmocka_unit_test(test_ipv6_invalid),
	    cmocka_unit_test(test_uri),
	    cmocka_unit_test(test_hostname),
	    cmocka_unit_test(test_hostname_lengths),
	    cmocka_unit_test(test_date),
	    cmocka_unit_test(test_parse_date),
	    cmocka_unit_test(test_date_time_valid),
	    cmocka_unit_test(test_date_time_invalid),
	    cmocka_unit_test(test_parse_date_time),
	    cmocka_unit_test(test_time),
	    cmocka_unit_test(test_parse_time),
	    cmocka_unit_test(test_byte),
	    cmocka_unit_test(test_len_not_nul),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
