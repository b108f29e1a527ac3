/* Unit tests for the Avro decoder (contract/avro.h): every type's JSON form
 * (logical types to the exact text the contract's formats expect, decimals
 * without float rounding, unions unwrapped, shortest round-trip doubles),
 * and hostile bytes rejected with avro_decode and the field path: truncated
 * and 11-byte varints, negative and oversized lengths (a 2 GB string
 * declared in a 10-byte record), union and enum indexes out of range,
 * trailing bytes, recursion past the bound, NaN as not_finite, and output
 * over the limit as too_large. Plus schemas avro-c refuses. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/avro.h"
#include "core/error.h"

typedef struct enc {
	unsigned char b[4096];
	size_t n;
} enc;

static void put_long(enc *e, int64_t v)
{
	uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
	do {
		e->b[e->n++] = (unsigned char)((z & 0x7f) | (z > 0x7f ? 0x80 : 0));
		z >>= 7;
	} while (z);
}

static void put_bytes(enc *e, const void *s, size_t n)
{
	put_long(e, (int64_t)n);
	memcpy(e->b + e->n, s, n);
	e->n += n;
}

static void put_double(enc *e, double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	for (int i = 0; i < 8; i++)
		e->b[e->n++] = (unsigned char)(u >> (8 * i));
}

static kiln_avro_schema *schema(const char *json)
{
	kiln_avro_schema *s = NULL;
	if (kiln_avro_schema_parse(&s, "test", json, strlen(json)) < 0)
		fail_msg("schema: %s", kiln_error_last());
	return s;
}

/* Decodes e with s: the JSON (static), or NULL with *err. */
static const char *decode(kiln_avro_schema *s, const enc *e, size_t max_out, kiln_avro_error *err)
{
	static kiln_buf out;
	kiln_buf_reset(&out);
	if (kiln_avro_decode(kiln_avro_schema_root(s), e->b, e->n, max_out, &out, err) < 0)
		return NULL;
	kiln_buf_putc(&out, '\0');
	return out.ptr;
}

static const char *all_types =
    "{\"type\":\"record\",\"name\":\"Ev\",\"namespace\":\"t\",\"fields\":["
    "{\"name\":\"n\",\"type\":\"null\"},"
    "{\"name\":\"b\",\"type\":\"boolean\"},"
    "{\"name\":\"i\",\"type\":\"int\"},"
    "{\"name\":\"l\",\"type\":\"long\"},"
    "{\"name\":\"f\",\"type\":\"float\"},"
    "{\"name\":\"d\",\"type\":\"double\"},"
    "{\"name\":\"by\",\"type\":\"bytes\"},"
    "{\"name\":\"s\",\"type\":\"string\"},"
    "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"Col\",\"symbols\":[\"RED\",\"GREEN\"]}},"
    "{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":\"long\"}},"
    "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":\"string\"}},"
    "{\"name\":\"u\",\"type\":[\"null\",\"string\"]},"
    "{\"name\":\"fx\",\"type\":{\"type\":\"fixed\",\"name\":\"F2\",\"size\":2}},"
    "{\"name\":\"dt\",\"type\":{\"type\":\"int\",\"logicalType\":\"date\"}},"
    "{\"name\":\"tm\",\"type\":{\"type\":\"int\",\"logicalType\":\"time-millis\"}},"
    "{\"name\":\"tu\",\"type\":{\"type\":\"long\",\"logicalType\":\"time-micros\"}},"
    "{\"name\":\"ts\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}},"
    "{\"name\":\"tsu\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}},"
    "{\"name\":\"dec\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":9,\"scale\":2}}"
    ","
    "{\"name\":\"decf\",\"type\":{\"type\":\"fixed\",\"name\":\"D8\",\"size\":8,\"logicalType\":\"decimal\","
    "\"precision\":18,\"scale\":4}},"
    "{\"name\":\"id\",\"type\":{\"type\":\"string\",\"logicalType\":\"uuid\"}},"
    "{\"name\":\"inner\",\"type\":{\"type\":\"record\",\"name\":\"In\",\"fields\":[{\"name\":\"x\",\"type\":"
    "\"Col\"}]}}"
    "]}";

static void test_every_type(void **state)
{
	(void)state;
	kiln_avro_schema *s = schema(all_types);
	kiln_avro_error err;
	enc e = {0};
	float f = 0.1f;
	uint32_t fu;

	e.b[e.n++] = 1;          /* b */
	put_long(&e, -3);        /* i */
	put_long(&e, 1LL << 40); /* l */
	memcpy(&fu, &f, 4);
	for (int i = 0; i < 4; i++) /* f */
		e.b[e.n++] = (unsigned char)(fu >> (8 * i));
	put_double(&e, 0.1);          /* d */
	put_bytes(&e, "\x00\xff", 2); /* by */
	put_bytes(&e, "h\"i\n", 4);   /* s */
	put_long(&e, 1);              /* e */
	put_long(&e, -2);             /* a: a block of 2 with its byte size */
	put_long(&e, 2);
	put_long(&e, 1);
	put_long(&e, -1);
	put_long(&e, 0);
	put_long(&e, 1); /* m */
	put_bytes(&e, "k", 1);
	put_bytes(&e, "v", 1);
	put_long(&e, 0);
	put_long(&e, 1); /* u: the string branch */
	put_bytes(&e, "x", 1);
	e.b[e.n++] = 'a'; /* fx */
	e.b[e.n++] = 'b';
	put_long(&e, 20455);           /* 2026-01-02 */
	put_long(&e, 3723004);         /* 01:02:03.004 */
	put_long(&e, 3723000005LL);    /* 01:02:03.000005 */
	put_long(&e, 1767323045123LL); /* 2026-01-02T03:04:05.123Z */
	put_long(&e, 1767323045123456LL);
	put_bytes(&e, "\xfe\x0c", 2);                             /* -500 -> -5.00 */
	memcpy(e.b + e.n, "\x00\x00\x00\x00\x00\x00\x30\x39", 8); /* 12345 -> 1.2345 */
	e.n += 8;
	put_bytes(&e, "6f1c0f64-8f6b-4a8e-9c63-0b2b0d3c2f11", 36);
	put_long(&e, 0); /* inner.x */
	const char *j = decode(s, &e, 1 << 20, &err);
	if (!j)
		fail_msg("%s at %s", err.what, err.path);
	assert_string_equal(
	    j, "{\"n\":null,\"b\":true,\"i\":-3,\"l\":1099511627776,\"f\":0.1,\"d\":0.1,\"by\":\"AP8=\","
	       "\"s\":\"h\\\"i\\n\",\"e\":\"GREEN\",\"a\":[1,-1],\"m\":{\"k\":\"v\"},\"u\":\"x\",\"fx\":"
	       "\"YWI=\","
	       "\"dt\":\"2026-01-02\",\"tm\":\"01:02:03.004\",\"tu\":\"01:02:03.000005\","
	       "\"ts\":\"2026-01-02T03:04:05.123Z\",\"tsu\":\"2026-01-02T03:04:05.123456Z\",\"dec\":-5.00,"
	       "\"decf\":1.2345,\"id\":\"6f1c0f64-8f6b-4a8e-9c63-0b2b0d3c2f11\",\"inner\":{\"x\":\"RED\"}}");
	kiln_avro_schema_free(s);
}

static void test_edges(void **state)
{
	(void)state;
	kiln_avro_schema *s =
	    schema("{\"type\":\"record\",\"name\":\"R\",\"fields\":["
	           "{\"name\":\"ts\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}},"
	           "{\"name\":\"dec\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":"
	           "4,\"scale\":3}},"
	           "{\"name\":\"d\",\"type\":\"double\"}]}");
	kiln_avro_error err;
	enc e = {0};

	put_long(&e, -1);         /* one millisecond before the epoch */
	put_bytes(&e, "\x07", 1); /* 7 -> 0.007 */
	put_double(&e, 1e300);
	const char *j = decode(s, &e, 1 << 20, &err);
	assert_non_null(j);
	assert_string_equal(j, "{\"ts\":\"1969-12-31T23:59:59.999Z\",\"dec\":0.007,\"d\":1e+300}");

	e.n = 0;
	put_long(&e, 0);
	put_bytes(&e, "\xff", 1); /* -1 -> -0.001 */
	put_double(&e, NAN);
	assert_null(decode(s, &e, 1 << 20, &err));
	assert_int_equal(err.code, KILN_REJECT_NOT_FINITE);
	assert_string_equal(err.path, "d");

	e.n = 0;
	put_long(&e, 0);
	put_bytes(&e, "\x27\x10", 2); /* 10000: 5 digits, precision 4 */
	put_double(&e, 1);
	assert_null(decode(s, &e, 1 << 20, &err));
	assert_int_equal(err.code, KILN_REJECT_AVRO_DECODE);
	assert_string_equal(err.path, "dec");
	kiln_avro_schema_free(s);
}

/* The widest decimal a schema may declare: scale 200, so 201 digits. */
static void test_decimal_scale_bound(void **state)
{
	(void)state;
	kiln_avro_schema *s = schema("{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":200,"
	                             "\"scale\":200}");
	kiln_avro_error err;
	char want[256] = "-0.";
	enc e = {0};

	put_bytes(&e, "\xff", 1); /* -1 */
	memset(want + 3, '0', 199);
	strcpy(want + 3 + 199, "1");
	const char *j = decode(s, &e, 1 << 20, &err);
	assert_non_null(j);
	assert_string_equal(j, want);
	kiln_avro_schema_free(s);
}

static void expect_decode_error(kiln_avro_schema *s, const enc *e, const char *path, const char *what)
{
	kiln_avro_error err;

	if (decode(s, e, 1 << 20, &err))
		fail_msg("decoded: expected %s", what);
	assert_int_equal(err.code, KILN_REJECT_AVRO_DECODE);
	assert_string_equal(err.path, path);
	if (!strstr(err.what, what))
		fail_msg("'%s' says nothing of '%s'", err.what, what);
}

static void test_hostile(void **state)
{
	(void)state;
	kiln_avro_schema *s = schema("{\"type\":\"record\",\"name\":\"R\",\"fields\":["
	                             "{\"name\":\"s\",\"type\":\"string\"},"
	                             "{\"name\":\"u\",\"type\":[\"null\",\"long\"]},"
	                             "{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":\"null\"}}]}");
	enc e = {0};

	e.b[e.n++] = 0x80; /* a varint cut short */
	expect_decode_error(s, &e, "s", "truncated varint");
	e.n = 0;
	for (int i = 0; i < 11; i++)
		e.b[e.n++] = 0x80;
	e.b[e.n++] = 0;
	expect_decode_error(s, &e, "s", "longer than 10 bytes");
	e.n = 0;
	put_long(&e, -5);
	expect_decode_error(s, &e, "s", "negative length");
	e.n = 0;
	put_long(&e, 2LL << 30); /* a 2 GB string in a few bytes */
	e.b[e.n++] = 'x';
	expect_decode_error(s, &e, "s", "beyond the record");
	e.n = 0;
	put_bytes(&e, "\xc3\x28", 2);
	expect_decode_error(s, &e, "s", "not UTF-8");
	e.n = 0;
	put_bytes(&e, "ok", 2);
	put_long(&e, 2); /* union index 2 of 2 branches */
	expect_decode_error(s, &e, "u", "union index");
	e.n = 0;
	put_bytes(&e, "ok", 2);
	put_long(&e, 0);
	put_long(&e, 0);
	e.b[e.n++] = 0; /* a byte left over */
	expect_decode_error(s, &e, "$", "bytes left");

	/* a block of 2^62 nulls: each writes "null," so the output bound ends it */
	kiln_avro_error err;
	e.n = 0;
	put_bytes(&e, "ok", 2);
	put_long(&e, 0);
	put_long(&e, 1LL << 62);
	assert_null(decode(s, &e, 4096, &err));
	assert_int_equal(err.code, KILN_REJECT_TOO_LARGE);
	assert_string_equal(err.path, "a[814]");
	kiln_avro_schema_free(s);
}

static void test_recursion(void **state)
{
	(void)state;
	kiln_avro_schema *s = schema("{\"type\":\"record\",\"name\":\"Node\",\"fields\":["
	                             "{\"name\":\"next\",\"type\":[\"null\",\"Node\"]}]}");
	kiln_avro_error err;
	enc e = {0};

	for (int i = 0; i < 3; i++)
		put_long(&e, 1);
	put_long(&e, 0);
	const char *j = decode(s, &e, 1 << 20, &err);
	assert_non_null(j);
	assert_string_equal(j, "{\"next\":{\"next\":{\"next\":{\"next\":null}}}}");
	e.n = 0;
	for (int i = 0; i < 200; i++)
		put_long(&e, 1);
	put_long(&e, 0);
	assert_null(decode(s, &e, 1 << 20, &err));
	assert_int_equal(err.code, KILN_REJECT_AVRO_DECODE);
	assert_non_null(strstr(err.what, "deeper"));
	kiln_avro_schema_free(s);
}

static void test_bad_schemas(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"x\",\"type\":\"Nope\"}]}",
	    "{\"type\":\"bogus\"}",
	    "[",
	    "{\"type\":\"bytes\",\"logicalType\":\"decimal\"}",
	    "{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":201,\"scale\":200}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kiln_avro_schema *s = NULL;
		assert_int_equal(kiln_avro_schema_parse(&s, "bad", bad[i], strlen(bad[i])), KILN_EINVALID);
		assert_null(s);
		assert_non_null(strstr(kiln_error_last(), "bad"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_type),  cmocka_unit_test(test_edges),
	    cmocka_unit_test(test_hostile),     cmocka_unit_test(test_recursion),
	    cmocka_unit_test(test_bad_schemas), cmocka_unit_test(test_decimal_scale_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
