/* Unit tests for src/contract/validate.c: every rejection code with a valid
 * and an invalid record, the order, code and path of each violation, the
 * count beyond KILN_VIOLATIONS_MAX, syntax-level errors replacing contract
 * violations, validator reuse, and that no record value ever reaches a path.
 * Each record is copied into an exact-size heap buffer with no NUL, so a read
 * past its end trips AddressSanitizer, and is validated twice to check that
 * a reused validator gives the same report. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "contract/validate.h"
#include "core/error.h"

#define HEAD                                                                                                 \
	"apiVersion: v3.1.0\n"                                                                               \
	"kind: DataContract\n"                                                                               \
	"id: t\n"                                                                                            \
	"version: 1.0.0\n"                                                                                   \
	"status: active\n"

#define SCHEMA_OPEN                                                                                          \
	"schema:\n"                                                                                          \
	"  - name: rec\n"                                                                                    \
	"    properties:\n"

#define ALLOW_UNKNOWN "customProperties:\n  - property: unknownFields\n    value: allow\n"

/* A property at the root, its options and flags. */
#define PROP(name, type) "      - name: " name "\n        logicalType: " type "\n"
#define REQUIRED         "        required: true\n"
#define OPTS             "        logicalTypeOptions:\n"
#define OPT(key, value)  "          " key ": " value "\n"
#define ENUM(list)       "        customProperties:\n          - property: enum\n            value: " list "\n"
/* A property one object down. */
#define CHILDREN          "        properties:\n"
#define CHILD(name, type) "          - name: " name "\n            logicalType: " type "\n"
#define CHILD_REQUIRED    "            required: true\n"

/* --- helpers --- */

static kiln_contract *compile(const char *top, const char *props)
{
	size_t a = strlen(HEAD), b = strlen(top), c = strlen(SCHEMA_OPEN), d = strlen(props);
	char *text = malloc(a + b + c + d + 1);
	kiln_contract *k = NULL;
	int rc;

	assert_non_null(text);
	memcpy(text, HEAD, a);
	memcpy(text + a, top, b);
	memcpy(text + a + b, SCHEMA_OPEN, c);
	memcpy(text + a + b + c, props, d + 1);
	rc = kiln_contract_load_buffer(&k, "t.yaml", text, strlen(text), NULL);
	if (rc != 0)
		fail_msg("contract does not compile: %s", kiln_error_last());
	free(text);
	return k;
}

static kiln_validator *validator(const kiln_contract *k, const kiln_validator_options *options)
{
	kiln_validator *v = kiln_validator_new(k, options);

	assert_non_null(v);
	return v;
}

typedef struct want {
	kiln_reject code;
	const char *path;
} want;

#define W(code, path)                                                                                        \
	{                                                                                                    \
		KILN_REJECT_##code, path                                                                     \
	}

static void validate_exact(kiln_validator *v, const char *rec, size_t len, kiln_report *out)
{
	char *buf = malloc(len ? len : 1);
	size_t count;

	assert_non_null(buf);
	memcpy(buf, rec, len);
	memset(out, 0x5a, sizeof(*out));
	count = kiln_validate(v, buf, len, out);
	assert_int_equal(count, out->count);
	free(buf);
}

static void show(const kiln_report *r)
{
	for (size_t i = 0; i < r->kept; i++)
		print_error("  got %s %s @%zu\n", kiln_reject_name(r->v[i].code), r->v[i].path,
		            r->v[i].offset);
}

/* rec must give exactly the violations w[0..n) (all kept), in order. */
static void check_report(int line, kiln_validator *v, const char *rec, size_t len, const want *w, size_t n)
{
	kiln_report r1, r2;

	validate_exact(v, rec, len, &r1);
	if (r1.count != n || r1.kept != n) {
		show(&r1);
		fail_msg("line %d: %.*s: %zu violations (%zu kept), want %zu", line, (int)len, rec, r1.count,
		         r1.kept, n);
	}
	for (size_t i = 0; i < n; i++) {
		if (r1.v[i].code != w[i].code || strcmp(r1.v[i].path, w[i].path) != 0) {
			show(&r1);
			fail_msg("line %d: %.*s: violation %zu is %s %s, want %s %s", line, (int)len, rec, i,
			         kiln_reject_name(r1.v[i].code), r1.v[i].path, kiln_reject_name(w[i].code),
			         w[i].path);
		}
		if (r1.v[i].offset > len)
			fail_msg("line %d: offset %zu past the record (%zu bytes)", line, r1.v[i].offset,
			         len);
	}
	/* the same validator, again: the same report */
	validate_exact(v, rec, len, &r2);
	assert_int_equal(r2.count, r1.count);
	assert_int_equal(r2.kept, r1.kept);
	for (size_t i = 0; i < r1.kept; i++) {
		assert_int_equal(r2.v[i].code, r1.v[i].code);
		assert_int_equal(r2.v[i].offset, r1.v[i].offset);
		assert_string_equal(r2.v[i].path, r1.v[i].path);
	}
}

#define EXPECT(v, rec, ...)                                                                                  \
	do {                                                                                                 \
		const want w_[] = {__VA_ARGS__};                                                             \
		check_report(__LINE__, v, rec, strlen(rec), w_, sizeof(w_) / sizeof(w_[0]));                 \
	} while (0)

#define EXPECT_LEN(v, rec, len, ...)                                                                         \
	do {                                                                                                 \
		const want w_[] = {__VA_ARGS__};                                                             \
		check_report(__LINE__, v, rec, len, w_, sizeof(w_) / sizeof(w_[0]));                         \
	} while (0)

#define VALID(v, rec) check_report(__LINE__, v, rec, strlen(rec), NULL, 0)

/* --- type --- */

static void test_type_string(void **state)
{
	kiln_contract *k = compile("", PROP("s", "string"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"s\":\"x\"}");
	VALID(v, "{\"s\":\"\"}");
	VALID(v, "{}");
	VALID(v, " { \"s\" : \"a\\n\\\"b\" } ");
	EXPECT(v, "{\"s\":1}", W(TYPE, "s"));
	EXPECT(v, "{\"s\":true}", W(TYPE, "s"));
	EXPECT(v, "{\"s\":{}}", W(TYPE, "s"));
	EXPECT(v, "{\"s\":[\"a\"]}", W(TYPE, "s"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_type_integer(void **state)
{
	kiln_contract *k = compile("", PROP("i", "integer"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"i\":0}");
	VALID(v, "{\"i\":-12}");
	VALID(v, "{\"i\":-0}");
	VALID(v, "{\"i\":123456789012345678901234567890}"); /* no bounds: any size */
	EXPECT(v, "{\"i\":1.0}", W(TYPE, "i"));
	EXPECT(v, "{\"i\":1e2}", W(TYPE, "i"));
	EXPECT(v, "{\"i\":1E+2}", W(TYPE, "i"));
	EXPECT(v, "{\"i\":1.5}", W(TYPE, "i"));
	EXPECT(v, "{\"i\":\"1\"}", W(TYPE, "i"));
	EXPECT(v, "{\"i\":false}", W(TYPE, "i"));
	EXPECT(v, "{\"i\":[1]}", W(TYPE, "i"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_type_number(void **state)
{
	kiln_contract *k = compile("", PROP("n", "number"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"n\":1}");
	VALID(v, "{\"n\":-1.5}");
	VALID(v, "{\"n\":1e-3}");
	VALID(v, "{\"n\":1E+2}");
	VALID(v, "{\"n\":1e400}"); /* no bounds: any size */
	EXPECT(v, "{\"n\":\"1.5\"}", W(TYPE, "n"));
	EXPECT(v, "{\"n\":true}", W(TYPE, "n"));
	EXPECT(v, "{\"n\":{}}", W(TYPE, "n"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_type_boolean(void **state)
{
	kiln_contract *k = compile("", PROP("b", "boolean"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"b\":true}");
	VALID(v, "{\"b\":false}");
	EXPECT(v, "{\"b\":\"true\"}", W(TYPE, "b"));
	EXPECT(v, "{\"b\":0}", W(TYPE, "b"));
	EXPECT(v, "{\"b\":1}", W(TYPE, "b"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_type_date(void **state)
{
	kiln_contract *k = compile("", PROP("d", "date"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"d\":\"2024-02-29\"}");
	VALID(v, "{\"d\":\"2024\\u002d02-29\"}"); /* escapes are decoded first */
	EXPECT(v, "{\"d\":20240229}", W(TYPE, "d"));
	EXPECT(v, "{\"d\":\"2023-02-29\"}", W(FORMAT, "d"));
	EXPECT(v, "{\"d\":\"2024-2-1\"}", W(FORMAT, "d"));
	EXPECT(v, "{\"d\":\"2024-02-29T00:00:00Z\"}", W(FORMAT, "d"));
	EXPECT(v, "{\"d\":\"\"}", W(FORMAT, "d"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_type_timestamp(void **state)
{
	kiln_contract *k = compile("", PROP("ts", "timestamp"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"ts\":\"2024-01-01T00:00:00Z\"}");
	VALID(v, "{\"ts\":\"2024-01-01T23:59:59.123456+05:30\"}");
	VALID(v, "{\"ts\":\"2024-01-01t00:00:00-01:00\"}");
	EXPECT(v, "{\"ts\":1704067200}", W(TYPE, "ts"));
	EXPECT(v, "{\"ts\":\"2024-01-01T00:00:00\"}", W(FORMAT, "ts")); /* offset required */
	EXPECT(v, "{\"ts\":\"2024-01-01\"}", W(FORMAT, "ts"));
	EXPECT(v, "{\"ts\":\"2024-13-01T00:00:00Z\"}", W(FORMAT, "ts"));
	EXPECT(v, "{\"ts\":\"2024-01-01T24:00:00Z\"}", W(FORMAT, "ts"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_type_time(void **state)
{
	kiln_contract *k = compile("", PROP("t", "time"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"t\":\"12:34:56\"}");
	VALID(v, "{\"t\":\"12:34:56.789\"}");
	VALID(v, "{\"t\":\"12:34:56Z\"}");
	VALID(v, "{\"t\":\"23:59:59+01:00\"}");
	EXPECT(v, "{\"t\":123}", W(TYPE, "t"));
	EXPECT(v, "{\"t\":\"12:34\"}", W(FORMAT, "t"));
	EXPECT(v, "{\"t\":\"24:00:00\"}", W(FORMAT, "t"));
	EXPECT(v, "{\"t\":\"12:60:00\"}", W(FORMAT, "t"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_type_object(void **state)
{
	kiln_contract *k = compile("", PROP("o", "object") CHILDREN CHILD("x", "integer"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"o\":{}}");
	VALID(v, "{\"o\":{\"x\":1}}");
	EXPECT(v, "{\"o\":{\"x\":\"1\"}}", W(TYPE, "o.x"));
	EXPECT(v, "{\"o\":\"x\"}", W(TYPE, "o"));
	EXPECT(v, "{\"o\":1}", W(TYPE, "o"));
	/* a mismatched container's children are not checked */
	EXPECT(v, "{\"o\":[{\"x\":\"bad\",\"zz\":1}]}", W(TYPE, "o"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_type_array(void **state)
{
	kiln_contract *k =
	    compile("", PROP("a", "array") "        items:\n          logicalType: integer\n" PROP("untyped",
	                                                                                           "array"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"a\":[]}");
	VALID(v, "{\"a\":[1,2,3]}");
	VALID(v, "{\"a\":[null]}");
	VALID(v, "{\"untyped\":[1,\"x\",{\"y\":[true]},null]}"); /* no items: anything */
	EXPECT(v, "{\"a\":{}}", W(TYPE, "a"));
	EXPECT(v, "{\"a\":\"1,2\"}", W(TYPE, "a"));
	EXPECT(v, "{\"a\":[1,\"2\",3.5]}", W(TYPE, "a[1]"), W(TYPE, "a[2]"));
	EXPECT(v, "{\"untyped\":{}}", W(TYPE, "untyped"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* --- missing_required and null --- */

static void test_null_handling(void **state)
{
	kiln_contract *k = compile("", PROP("req", "string") REQUIRED PROP("opt", "string") PROP(
	                                   "n", "integer") PROP("o", "object") CHILDREN CHILD("x", "string"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"req\":\"x\",\"opt\":null,\"n\":null,\"o\":null}");
	VALID(v, "{\"req\":\"x\",\"o\":{\"x\":null}}");
	EXPECT(v, "{\"req\":null}", W(MISSING_REQUIRED, "req"));
	EXPECT(v, "{\"req\":null,\"opt\":1}", W(TYPE, "opt"), W(MISSING_REQUIRED, "req"));
	EXPECT(v, "{\"opt\":null}", W(MISSING_REQUIRED, "req"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_missing_required(void **state)
{
	kiln_contract *k =
	    compile("", PROP("a", "string") REQUIRED PROP("b", "integer") PROP("device", "object")
	                    REQUIRED CHILDREN CHILD("os", "string") CHILD_REQUIRED CHILD("model", "string")
	                        PROP("c", "boolean") REQUIRED);
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"a\":\"x\",\"device\":{\"os\":\"ios\"},\"c\":true}");
	VALID(v, "{\"c\":false,\"device\":{\"model\":\"m\",\"os\":\"ios\"},\"a\":\"\"}");
	/* reported at the object's end, in contract order */
	EXPECT(v, "{}", W(MISSING_REQUIRED, "a"), W(MISSING_REQUIRED, "device"), W(MISSING_REQUIRED, "c"));
	EXPECT(v, "{\"a\":\"x\",\"device\":{},\"c\":true}", W(MISSING_REQUIRED, "device.os"));
	EXPECT(v, "{\"a\":\"x\",\"device\":{\"os\":null},\"c\":true}", W(MISSING_REQUIRED, "device.os"));
	EXPECT(v, "{\"device\":{\"model\":\"m\"},\"c\":true}", W(MISSING_REQUIRED, "device.os"),
	       W(MISSING_REQUIRED, "a"));
	/* a null object is missing, its children are not looked at */
	EXPECT(v, "{\"a\":\"x\",\"device\":null,\"c\":true}", W(MISSING_REQUIRED, "device"));
	/* a mistyped required field is present: type, not missing */
	EXPECT(v, "{\"a\":1,\"device\":{\"os\":\"ios\"},\"c\":true}", W(TYPE, "a"));
	EXPECT(v, "{\"a\":\"x\",\"device\":[],\"c\":true}", W(TYPE, "device"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_required_list(void **state)
{
	kiln_contract *k = compile("", PROP("o", "object") OPTS OPT("required", "[y, z]") CHILDREN CHILD(
	                                   "x", "integer") CHILD("y", "integer") CHILD("z", "string"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{}");
	VALID(v, "{\"o\":{\"y\":1,\"z\":\"a\"}}");
	EXPECT(v, "{\"o\":{\"x\":1}}", W(MISSING_REQUIRED, "o.y"), W(MISSING_REQUIRED, "o.z"));
	EXPECT(v, "{\"o\":{\"y\":null,\"z\":\"a\"}}", W(MISSING_REQUIRED, "o.y"));
	EXPECT(v, "{\"o\":{\"z\":\"a\",\"y\":\"1\"}}", W(TYPE, "o.y"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* --- pattern --- */

static void test_pattern(void **state)
{
	kiln_contract *k = compile("", PROP("p", "string") OPTS OPT("pattern", "b") PROP("cc", "string")
	                                   OPTS OPT("pattern", "\"^[A-Z]{2}$\"") PROP("u", "string")
	                                       OPTS OPT("pattern", "\"^.{5}$\""));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	/* unanchored search */
	VALID(v, "{\"p\":\"abc\"}");
	VALID(v, "{\"p\":\"b\"}");
	EXPECT(v, "{\"p\":\"xyz\"}", W(PATTERN, "p"));
	EXPECT(v, "{\"p\":\"\"}", W(PATTERN, "p"));
	EXPECT(v, "{\"p\":\"B\"}", W(PATTERN, "p"));
	/* anchored */
	VALID(v, "{\"cc\":\"GB\"}");
	VALID(v, "{\"cc\":\"\\u0047B\"}"); /* matched after unescaping */
	EXPECT(v, "{\"cc\":\"GBR\"}", W(PATTERN, "cc"));
	EXPECT(v, "{\"cc\":\"xGB\"}", W(PATTERN, "cc"));
	EXPECT(v, "{\"cc\":\"gb\"}", W(PATTERN, "cc"));
	/* UTF mode: . is one code point */
	VALID(v, "{\"u\":\"h\xc3\xa9llo\"}");
	VALID(v, "{\"u\":\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80xyz\"}");
	EXPECT(v, "{\"u\":\"hello!\"}", W(PATTERN, "u"));
	/* a mistyped value is not matched */
	EXPECT(v, "{\"cc\":12}", W(TYPE, "cc"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* --- length --- */

static void test_length_strings(void **state)
{
	kiln_contract *k = compile("", PROP("s", "string") OPTS OPT("minLength", "2") OPT("maxLength", "5")
	                                   PROP("e", "string") OPTS OPT("maxLength", "0"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"s\":\"ab\"}");
	VALID(v, "{\"s\":\"abcde\"}");
	VALID(v, "{\"s\":\"h\xc3\xa9llo\"}");                     /* 6 bytes, 5 code points */
	VALID(v, "{\"s\":\"h\\u00e9llo\"}");                      /* escaped, 5 code points */
	VALID(v, "{\"s\":\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\"}"); /* 8 bytes, 2 code points */
	VALID(v, "{\"s\":\"\\ud83d\\ude00\\ud83d\\ude00\"}");     /* surrogate pairs: 2 */
	VALID(v, "{\"s\":\"\\\"\\\\\"}");                         /* two escapes, 2 */
	EXPECT(v, "{\"s\":\"a\"}", W(LENGTH, "s"));
	EXPECT(v, "{\"s\":\"\"}", W(LENGTH, "s"));
	EXPECT(v, "{\"s\":\"abcdef\"}", W(LENGTH, "s"));
	EXPECT(v, "{\"s\":\"h\xc3\xa9llo!\"}", W(LENGTH, "s"));
	EXPECT(v, "{\"s\":\"h\\u00e9llo!\"}", W(LENGTH, "s"));
	EXPECT(v, "{\"s\":\"\xf0\x9f\x98\x80\"}", W(LENGTH, "s"));
	EXPECT(v, "{\"s\":\"\\u00e9\"}", W(LENGTH, "s"));
	VALID(v, "{\"e\":\"\"}");
	EXPECT(v, "{\"e\":\" \"}", W(LENGTH, "e"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_length_items(void **state)
{
	kiln_contract *k =
	    compile("", PROP("tags", "array") OPTS OPT("minItems", "1")
	                    OPT("maxItems", "3") "        items:\n          logicalType: string\n"
	                                         "          logicalTypeOptions:\n            maxLength: 3\n");
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"tags\":[\"a\"]}");
	VALID(v, "{\"tags\":[\"a\",\"b\",\"abc\"]}");
	EXPECT(v, "{\"tags\":[]}", W(LENGTH, "tags"));
	EXPECT(v, "{\"tags\":[\"a\",\"b\",\"c\",\"d\"]}", W(LENGTH, "tags"));
	EXPECT(v, "{\"tags\":[\"abcd\"]}", W(LENGTH, "tags[0]"));
	/* the item when read, the array at its end */
	EXPECT(v, "{\"tags\":[\"a\",\"b\",\"c\",\"toolong\"]}", W(LENGTH, "tags[3]"), W(LENGTH, "tags"));
	/* nulls count as items */
	EXPECT(v, "{\"tags\":[null,null,null,null]}", W(LENGTH, "tags"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_length_properties(void **state)
{
	kiln_contract *k =
	    compile("", PROP("o", "object") OPTS OPT("minProperties", "1") OPT("maxProperties", "2")
	                    CHILDREN CHILD("a", "integer") CHILD("b", "integer") CHILD("c", "integer"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"o\":{\"a\":1}}");
	VALID(v, "{\"o\":{\"a\":1,\"c\":null}}");
	EXPECT(v, "{\"o\":{}}", W(LENGTH, "o"));
	EXPECT(v, "{\"o\":{\"a\":1,\"b\":2,\"c\":3}}", W(LENGTH, "o"));
	EXPECT(v, "{\"o\":{\"a\":1,\"zz\":2,\"b\":3}}", W(UNKNOWN_FIELD, "o.zz"), W(LENGTH, "o"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* --- range --- */

static void test_range_bounds(void **state)
{
	kiln_contract *k = compile(
	    "",
	    PROP("n", "number") OPTS OPT("minimum", "0") OPT("maximum", "10") PROP("xmin30", "number")
	        OPTS OPT("minimum", "5") OPT("exclusiveMinimum", "true") PROP("xmin31", "number")
	            OPTS OPT("exclusiveMinimum", "5") PROP("xmax30", "number") OPTS OPT("maximum", "10")
	                OPT("exclusiveMaximum", "true") PROP("xmax31", "number")
	                    OPTS OPT("exclusiveMaximum", "10") PROP("i", "integer") OPTS OPT("minimum", "-5")
	                        OPT("maximum", "5") PROP("neg", "number") OPTS OPT("maximum", "-0.5"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"n\":0,\"i\":-5}");
	VALID(v, "{\"n\":10,\"i\":5}");
	VALID(v, "{\"n\":5.5,\"i\":0}");
	VALID(v, "{\"n\":1e1}");
	VALID(v, "{\"n\":-0}");
	EXPECT(v, "{\"n\":-0.0001}", W(RANGE, "n"));
	EXPECT(v, "{\"n\":10.0001}", W(RANGE, "n"));
	EXPECT(v, "{\"n\":10.000000000000001}", W(RANGE, "n"));
	EXPECT(v, "{\"i\":-6}", W(RANGE, "i"));
	EXPECT(v, "{\"i\":6,\"n\":11}", W(RANGE, "i"), W(RANGE, "n"));
	/* v3.0 boolean and v3.1 value forms of the exclusive bounds */
	VALID(v, "{\"xmin30\":5.0001,\"xmin31\":5.0001,\"xmax30\":9.999,\"xmax31\":9.999}");
	EXPECT(v, "{\"xmin30\":5}", W(RANGE, "xmin30"));
	EXPECT(v, "{\"xmin31\":5}", W(RANGE, "xmin31"));
	EXPECT(v, "{\"xmin31\":5.0}", W(RANGE, "xmin31"));
	EXPECT(v, "{\"xmin30\":4,\"xmin31\":4}", W(RANGE, "xmin30"), W(RANGE, "xmin31"));
	EXPECT(v, "{\"xmax30\":10}", W(RANGE, "xmax30"));
	EXPECT(v, "{\"xmax31\":10}", W(RANGE, "xmax31"));
	EXPECT(v, "{\"xmax31\":1e1}", W(RANGE, "xmax31"));
	VALID(v, "{\"neg\":-0.5}");
	VALID(v, "{\"neg\":-5e-1}");
	EXPECT(v, "{\"neg\":-0.49}", W(RANGE, "neg"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_range_multiple_of(void **state)
{
	kiln_contract *k =
	    compile("", PROP("m", "number") OPTS OPT("multipleOf", "0.01") PROP("mi", "integer")
	                    OPTS OPT("multipleOf", "5") PROP("half", "number") OPTS OPT("multipleOf", "0.5"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"m\":19.99}");
	VALID(v, "{\"m\":0}");
	VALID(v, "{\"m\":-0.03}");
	VALID(v, "{\"m\":1e-2}");
	VALID(v, "{\"m\":123456.78}");
	VALID(v, "{\"m\":0.3}");
	EXPECT(v, "{\"m\":19.995}", W(RANGE, "m"));
	EXPECT(v, "{\"m\":0.001}", W(RANGE, "m"));
	EXPECT(v, "{\"m\":-1.005}", W(RANGE, "m"));
	VALID(v, "{\"mi\":10}");
	VALID(v, "{\"mi\":-15}");
	VALID(v, "{\"mi\":0}");
	VALID(v, "{\"mi\":9223372036854775805}");
	EXPECT(v, "{\"mi\":7}", W(RANGE, "mi"));
	EXPECT(v, "{\"mi\":-1}", W(RANGE, "mi"));
	EXPECT(v, "{\"mi\":9223372036854775806}", W(RANGE, "mi"));
	VALID(v, "{\"half\":2.5}");
	VALID(v, "{\"half\":3}");
	EXPECT(v, "{\"half\":2.25}", W(RANGE, "half"));
	/* regressions: a relative tolerance let large decimals and integers past
	 * 2^63 through; the check is exact decimal arithmetic now */
	EXPECT(v, "{\"m\":5000000.005}", W(RANGE, "m"));
	EXPECT(v, "{\"m\":123456789.123}", W(RANGE, "m"));
	EXPECT(v, "{\"m\":999999.9905}", W(RANGE, "m"));
	VALID(v, "{\"m\":123456789012345678.99}");
	VALID(v, "{\"m\":1e50}");
	EXPECT(v, "{\"m\":1e-50}", W(RANGE, "m"));
	EXPECT(v, "{\"mi\":10000000000000000001}", W(RANGE, "mi"));
	EXPECT(v, "{\"mi\":18446744073709551611}", W(RANGE, "mi"));
	VALID(v, "{\"mi\":18446744073709551615}");
	VALID(v, "{\"mi\":-18446744073709551615}");
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* Regression: `$` matched before a final newline (PCRE2's default); JSON
 * Schema's `$` is the end of the value. */
/* A pattern that backtracks catastrophically, ^(a+)+$ on "aaa...ab",
 * stops at kiln's PCRE2 match limit (KILN_PATTERN_MATCH_LIMIT, not PCRE2's
 * default of 10,000,000) and the value is rejected as pattern_limit, not as
 * a plain pattern mismatch; values the pattern decides quickly are not. */
static void test_pattern_limit(void **state)
{
	kiln_contract *k = compile("", PROP("p", "string") OPTS OPT("pattern", "\"^(a+)+$\"")
	                                   PROP("q", "string") OPTS OPT("pattern", "\"^[a-z]+$\""));
	kiln_validator *v = validator(k, NULL);
	char rec[2048];

	(void)state;
	VALID(v, "{\"p\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}");
	EXPECT(v, "{\"p\":\"aaab\"}", W(PATTERN, "p"));
	EXPECT(v, "{\"p\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\"}", W(PATTERN_LIMIT, "p"));
	/* next to other violations, in record order */
	EXPECT(v, "{\"q\":\"A\",\"p\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\"}", W(PATTERN, "q"),
	       W(PATTERN_LIMIT, "p"));
	/* a long value through a linear pattern stays within the limits */
	memcpy(rec, "{\"q\":\"", 6);
	memset(rec + 6, 'z', 2000);
	memcpy(rec + 2006, "\"}", 3);
	VALID(v, rec);
	assert_string_equal(kiln_reject_name(KILN_REJECT_PATTERN_LIMIT), "pattern_limit");
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_pattern_dollar_is_end(void **state)
{
	kiln_contract *k = compile("", PROP("cc", "string") OPTS OPT("pattern", "\"^[A-Z]{2}$\""));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"cc\":\"GB\"}");
	EXPECT(v, "{\"cc\":\"GB\\n\"}", W(PATTERN, "cc"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* Regression: on a field without logicalType, enum entries compared as text
 * whatever the JSON type; each entry now matches values of its own kind. */
static void test_enum_any_type(void **state)
{
	kiln_contract *k = compile("", "      - name: a\n" ENUM("[1, x, true, \"2\"]"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"a\":1}");
	VALID(v, "{\"a\":1.0}");
	VALID(v, "{\"a\":\"x\"}");
	VALID(v, "{\"a\":true}");
	VALID(v, "{\"a\":\"2\"}");
	EXPECT(v, "{\"a\":\"1\"}", W(ENUM, "a"));
	EXPECT(v, "{\"a\":2}", W(ENUM, "a"));
	EXPECT(v, "{\"a\":\"true\"}", W(ENUM, "a"));
	EXPECT(v, "{\"a\":false}", W(ENUM, "a"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* Regression: an escaped duplicate of a known field was shown as <key>. */
static void test_duplicate_escaped_known_key(void **state)
{
	kiln_contract *k =
	    compile("", PROP("a", "integer") PROP("o", "object") CHILDREN CHILD("os", "integer"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	EXPECT(v, "{\"a\":1,\"\\u0061\":2}", W(DUPLICATE_KEY, "a"));
	EXPECT(v, "{\"o\":{\"os\":1,\"\\u006fs\":2}}", W(DUPLICATE_KEY, "o.os"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_range_integer_format(void **state)
{
	kiln_contract *k =
	    compile("", PROP("u8", "integer") OPTS OPT("format", "u8") PROP("i8", "integer")
	                    OPTS OPT("format", "i8") PROP("u64", "integer") OPTS OPT("format", "u64")
	                        PROP("i64", "integer") OPTS OPT("format", "i64"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"u8\":0,\"i8\":-128}");
	VALID(v, "{\"u8\":255,\"i8\":127}");
	EXPECT(v, "{\"u8\":256}", W(RANGE, "u8"));
	EXPECT(v, "{\"u8\":-1}", W(RANGE, "u8"));
	EXPECT(v, "{\"i8\":-129}", W(RANGE, "i8"));
	EXPECT(v, "{\"i8\":128}", W(RANGE, "i8"));
	VALID(v, "{\"u64\":18446744073709551615}");
	EXPECT(v, "{\"u64\":18446744073709551616}", W(RANGE, "u64"));
	VALID(v, "{\"i64\":-9223372036854775808}");
	VALID(v, "{\"i64\":9223372036854775807}");
	EXPECT(v, "{\"i64\":9223372036854775808}", W(RANGE, "i64"));
	EXPECT(v, "{\"i64\":-9223372036854775809}", W(RANGE, "i64"));
	VALID(v, "{\"u64\":-0}");
	kiln_validator_free(v);
	kiln_contract_free(k);

	/* regression: 128-bit limits have no exact long double; now exact */
	k = compile("", PROP("u128", "integer") OPTS OPT("format", "u128") PROP("i128", "integer")
	                    OPTS OPT("format", "i128"));
	v = validator(k, NULL);
	VALID(v, "{\"u128\":340282366920938463463374607431768211455}");
	EXPECT(v, "{\"u128\":340282366920938463463374607431768211456}", W(RANGE, "u128"));
	EXPECT(v, "{\"u128\":340282366920938463463374607431768211457}", W(RANGE, "u128"));
	EXPECT(v, "{\"u128\":1000000000000000000000000000000000000000}", W(RANGE, "u128"));
	VALID(v, "{\"i128\":170141183460469231731687303715884105727}");
	VALID(v, "{\"i128\":-170141183460469231731687303715884105728}");
	EXPECT(v, "{\"i128\":170141183460469231731687303715884105728}", W(RANGE, "i128"));
	EXPECT(v, "{\"i128\":-170141183460469231731687303715884105729}", W(RANGE, "i128"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_range_huge_numbers(void **state)
{
	kiln_contract *k =
	    compile("", PROP("n", "number") OPTS OPT("minimum", "-1000000") OPT("maximum", "1000000")
	                    PROP("i", "integer") OPTS OPT("maximum", "1000"));
	kiln_validator *v = validator(k, NULL);
	char rec[600];
	size_t len;

	(void)state;
	EXPECT(v, "{\"n\":1e400}", W(RANGE, "n"));
	EXPECT(v, "{\"n\":-1e400}", W(RANGE, "n"));
	EXPECT(v, "{\"n\":1e5000}", W(RANGE, "n")); /* past long double: infinity */
	EXPECT(v, "{\"n\":-1e5000}", W(RANGE, "n"));
	VALID(v, "{\"n\":1e-5000}"); /* underflows to zero */
	VALID(v, "{\"n\":999999.99999999999999999999}");
	EXPECT(v, "{\"i\":1e400}", W(TYPE, "i"));
	EXPECT(v, "{\"i\":100000000000000000000000000}", W(RANGE, "i"));
	/* a number longer than any stack buffer */
	len = (size_t)snprintf(rec, sizeof(rec), "{\"n\":1");
	memset(rec + len, '0', 400);
	len += 400;
	memcpy(rec + len, "}", 2);
	EXPECT(v, rec, W(RANGE, "n"));
	len = (size_t)snprintf(rec, sizeof(rec), "{\"n\":0.");
	memset(rec + len, '0', 400);
	len += 400;
	memcpy(rec + len, "1}", 3);
	VALID(v, rec);
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_range_temporal(void **state)
{
	kiln_contract *k =
	    compile("", PROP("d", "date") OPTS OPT("minimum", "\"2015-01-01\"")
	                    OPT("exclusiveMaximum", "\"2100-01-01\"") PROP("ts", "timestamp")
	                        OPTS OPT("minimum", "\"2015-01-01T00:00:00Z\"") PROP("t", "time")
	                            OPTS OPT("minimum", "\"08:00:00\"") OPT("maximum", "\"18:00:00\""));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"d\":\"2015-01-01\"}");
	VALID(v, "{\"d\":\"2099-12-31\"}");
	EXPECT(v, "{\"d\":\"2014-12-31\"}", W(RANGE, "d"));
	EXPECT(v, "{\"d\":\"2100-01-01\"}", W(RANGE, "d"));
	/* malformed is format, never range */
	EXPECT(v, "{\"d\":\"1999-02-30\"}", W(FORMAT, "d"));
	VALID(v, "{\"ts\":\"2015-01-01T00:00:00Z\"}");
	VALID(v, "{\"ts\":\"2015-01-01T00:30:00-01:00\"}");
	EXPECT(v, "{\"ts\":\"2014-12-31T23:59:59.999Z\"}", W(RANGE, "ts"));
	EXPECT(v, "{\"ts\":\"2015-01-01T01:00:00+02:00\"}", W(RANGE, "ts")); /* 2014-12-31T23:00Z */
	EXPECT(v, "{\"ts\":\"1970-01-01T00:00:00Z\"}", W(RANGE, "ts"));
	VALID(v, "{\"t\":\"08:00:00\"}");
	VALID(v, "{\"t\":\"12:00:00\"}");
	VALID(v, "{\"t\":\"18:00:00\"}");
	EXPECT(v, "{\"t\":\"07:59:59\"}", W(RANGE, "t"));
	EXPECT(v, "{\"t\":\"18:00:00.001\"}", W(RANGE, "t"));
	EXPECT(v, "{\"t\":\"09:00:00+02:00\"}", W(RANGE, "t")); /* 07:00 UTC */
	EXPECT(v, "{\"t\":\"9:00:00\"}", W(FORMAT, "t"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* --- enum --- */

static void test_enum_strings(void **state)
{
	kiln_contract *k = compile("", PROP("e", "string") ENUM("[red, green, 'a b', \"caf\\u00e9\"]")
	                                   PROP("k", "string") "        enum: [x, y]\n");
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"e\":\"red\"}");
	VALID(v, "{\"e\":\"green\"}");
	VALID(v, "{\"e\":\"a b\"}");
	VALID(v, "{\"e\":\"\\u0072ed\"}"); /* escaped, equal after decoding */
	VALID(v, "{\"e\":\"a\\u0020b\"}");
	VALID(v, "{\"e\":\"caf\xc3\xa9\"}");
	VALID(v, "{\"e\":\"caf\\u00e9\"}");
	EXPECT(v, "{\"e\":\"Red\"}", W(ENUM, "e"));
	EXPECT(v, "{\"e\":\"re\"}", W(ENUM, "e"));
	EXPECT(v, "{\"e\":\"reddish\"}", W(ENUM, "e"));
	EXPECT(v, "{\"e\":\"\"}", W(ENUM, "e"));
	EXPECT(v, "{\"e\":\"cafe\"}", W(ENUM, "e"));
	EXPECT(v, "{\"e\":1}", W(TYPE, "e"));
	VALID(v, "{\"k\":\"y\"}");
	EXPECT(v, "{\"k\":\"z\"}", W(ENUM, "k"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_enum_numbers(void **state)
{
	kiln_contract *k = compile("", PROP("n", "number") ENUM("[1, 2.5, -3]") PROP("i", "integer")
	                                   ENUM("[1, 2]") PROP("b", "boolean") ENUM("[true]"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"n\":1}");
	VALID(v, "{\"n\":1.0}");
	VALID(v, "{\"n\":1e0}");
	VALID(v, "{\"n\":10e-1}");
	VALID(v, "{\"n\":2.50}");
	VALID(v, "{\"n\":25e-1}");
	VALID(v, "{\"n\":-3.000}");
	EXPECT(v, "{\"n\":3}", W(ENUM, "n"));
	EXPECT(v, "{\"n\":1.0000001}", W(ENUM, "n"));
	EXPECT(v, "{\"n\":\"1\"}", W(TYPE, "n"));
	VALID(v, "{\"i\":2}");
	EXPECT(v, "{\"i\":3}", W(ENUM, "i"));
	EXPECT(v, "{\"i\":1.0}", W(TYPE, "i"));
	VALID(v, "{\"b\":true}");
	EXPECT(v, "{\"b\":false}", W(ENUM, "b"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* --- format --- */

static void test_format(void **state)
{
	kiln_contract *k = compile(
	    "", PROP("email", "string") OPTS OPT("format", "email") PROP("uuid", "string")
	            OPTS OPT("format", "uuid") PROP("ip4", "string") OPTS OPT("format", "ipv4")
	                PROP("ip6", "string") OPTS OPT("format", "ipv6") PROP("uri", "string")
	                    OPTS OPT("format", "uri") PROP("dt", "string") OPTS OPT("format", "date-time")
	                        PROP("host", "string") OPTS OPT("format", "hostname") PROP("pw", "string")
	                            OPTS OPT("format", "password"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"email\":\"anna.smith@example.com\"}");
	VALID(v, "{\"email\":\"anna\\u0040example.com\"}"); /* checked after unescaping */
	EXPECT(v, "{\"email\":\"not-an-email\"}", W(FORMAT, "email"));
	EXPECT(v, "{\"email\":\"a@@example.com\"}", W(FORMAT, "email"));
	EXPECT(v, "{\"email\":\"\"}", W(FORMAT, "email"));
	VALID(v, "{\"uuid\":\"123e4567-e89b-12d3-a456-426614174000\"}");
	VALID(v, "{\"uuid\":\"123E4567-E89B-12D3-A456-426614174000\"}");
	EXPECT(v, "{\"uuid\":\"123e4567e89b12d3a456426614174000\"}", W(FORMAT, "uuid"));
	EXPECT(v, "{\"uuid\":\"123e4567-e89b-12d3-a456-42661417400g\"}", W(FORMAT, "uuid"));
	VALID(v, "{\"ip4\":\"192.168.0.1\"}");
	EXPECT(v, "{\"ip4\":\"192.168.0.01\"}", W(FORMAT, "ip4"));
	EXPECT(v, "{\"ip4\":\"256.0.0.1\"}", W(FORMAT, "ip4"));
	EXPECT(v, "{\"ip4\":\"1.2.3\"}", W(FORMAT, "ip4"));
	VALID(v, "{\"ip6\":\"2001:db8::1\"}");
	VALID(v, "{\"ip6\":\"::ffff:192.0.2.1\"}");
	VALID(v, "{\"ip6\":\"::\"}");
	EXPECT(v, "{\"ip6\":\"2001:db8:::1\"}", W(FORMAT, "ip6"));
	EXPECT(v, "{\"ip6\":\"fe80::1%eth0\"}", W(FORMAT, "ip6"));
	EXPECT(v, "{\"ip6\":\"192.168.0.1\"}", W(FORMAT, "ip6"));
	VALID(v, "{\"uri\":\"https://example.com/a?b=c#d\"}");
	VALID(v, "{\"uri\":\"urn:isbn:0451450523\"}");
	EXPECT(v, "{\"uri\":\"example.com/path\"}", W(FORMAT, "uri"));
	EXPECT(v, "{\"uri\":\"http://x/%zz\"}", W(FORMAT, "uri"));
	VALID(v, "{\"dt\":\"2024-01-01T00:00:00Z\"}");
	VALID(v, "{\"dt\":\"2024-01-01T00:00:00.5+01:00\"}");
	EXPECT(v, "{\"dt\":\"2024-01-01T00:00:00\"}", W(FORMAT, "dt"));
	EXPECT(v, "{\"dt\":\"2024-01-01\"}", W(FORMAT, "dt"));
	VALID(v, "{\"host\":\"www.example.com\"}");
	EXPECT(v, "{\"host\":\"-bad-.example.com\"}", W(FORMAT, "host"));
	VALID(v, "{\"pw\":\"anything at all\"}");
	/* a format is not checked on a mistyped value */
	EXPECT(v, "{\"email\":42}", W(TYPE, "email"));
	EXPECT(v, "{\"email\":\"x\",\"uuid\":\"y\",\"ip4\":\"z\"}", W(FORMAT, "email"), W(FORMAT, "uuid"),
	       W(FORMAT, "ip4"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* --- unknown_field --- */

static void test_unknown_field_reject(void **state)
{
	kiln_contract *k =
	    compile("", PROP("a", "string") PROP("o", "object") CHILDREN CHILD("x", "integer"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	assert_int_equal(k->unknown_fields, KILN_UNKNOWN_REJECT);
	VALID(v, "{\"a\":\"x\",\"o\":{\"x\":1}}");
	EXPECT(v, "{\"a\":\"x\",\"b\":2}", W(UNKNOWN_FIELD, "b"));
	EXPECT(v, "{\"b\":2,\"a\":3}", W(UNKNOWN_FIELD, "b"), W(TYPE, "a"));
	EXPECT(v, "{\"o\":{\"x\":1,\"y\":2}}", W(UNKNOWN_FIELD, "o.y"));
	/* case matters */
	EXPECT(v, "{\"A\":\"x\"}", W(UNKNOWN_FIELD, "A"));
	/* known fields written with escapes are known */
	VALID(v, "{\"\\u0061\":\"x\",\"\\u006f\":{\"\\u0078\":1}}");
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_unknown_field_allow(void **state)
{
	kiln_contract *reject =
	    compile("", PROP("a", "string") PROP("o", "object") CHILDREN CHILD("x", "integer"));
	kiln_contract *allow =
	    compile(ALLOW_UNKNOWN, PROP("a", "string") PROP("o", "object") CHILDREN CHILD("x", "integer"));
	kiln_validator_options opt = {.unknown_fields = -1};
	kiln_validator *v;

	(void)state;
	assert_int_equal(allow->unknown_fields, KILN_UNKNOWN_ALLOW);

	/* the contract allows */
	v = validator(allow, NULL);
	VALID(v, "{\"a\":\"x\",\"b\":2,\"alice@example.com\":{\"c\":[1]}}");
	VALID(v, "{\"o\":{\"x\":1,\"y\":\"z\"}}");
	/* known fields are still checked */
	EXPECT(v, "{\"a\":1,\"b\":2,\"o\":{\"x\":\"1\",\"y\":2}}", W(TYPE, "a"), W(TYPE, "o.x"));
	kiln_validator_free(v);
	v = validator(allow, &opt);
	VALID(v, "{\"a\":\"x\",\"b\":2}");
	kiln_validator_free(v);

	/* the validator option overrides the contract, both ways */
	opt.unknown_fields = KILN_UNKNOWN_ALLOW;
	v = validator(reject, &opt);
	VALID(v, "{\"a\":\"x\",\"b\":2,\"o\":{\"y\":1}}");
	kiln_validator_free(v);
	opt.unknown_fields = -1;
	v = validator(reject, &opt);
	EXPECT(v, "{\"a\":\"x\",\"b\":2}", W(UNKNOWN_FIELD, "b"));
	kiln_validator_free(v);
	opt.unknown_fields = KILN_UNKNOWN_REJECT;
	v = validator(allow, &opt);
	EXPECT(v, "{\"a\":\"x\",\"b\":2}", W(UNKNOWN_FIELD, "b"));
	kiln_validator_free(v);

	kiln_contract_free(reject);
	kiln_contract_free(allow);
}

static void test_unknown_key_names(void **state)
{
	kiln_contract *k = compile("", PROP("o", "object"));
	kiln_validator *v = validator(k, NULL);
	char rec[256];
	kiln_report r;

	(void)state;
	EXPECT(v, "{\"user_name\":1}", W(UNKNOWN_FIELD, "user_name"));
	EXPECT(v, "{\"_x-1\":1}", W(UNKNOWN_FIELD, "_x-1"));
	EXPECT(v, "{\"alice@example.com\":1}", W(UNKNOWN_FIELD, "<key>"));
	EXPECT(v, "{\"9lives\":1}", W(UNKNOWN_FIELD, "<key>"));
	EXPECT(v, "{\"-x\":1}", W(UNKNOWN_FIELD, "<key>"));
	EXPECT(v, "{\"a b\":1}", W(UNKNOWN_FIELD, "<key>"));
	EXPECT(v, "{\"a.b\":1}", W(UNKNOWN_FIELD, "<key>"));
	EXPECT(v, "{\"\":1}", W(UNKNOWN_FIELD, "<key>"));
	EXPECT(v, "{\"h\xc3\xa9llo\":1}", W(UNKNOWN_FIELD, "<key>"));
	EXPECT(v, "{\"+44 20 7946 0958\":1}", W(UNKNOWN_FIELD, "<key>"));
	/* escaped keys are never shown, even when they decode to an identifier */
	EXPECT(v, "{\"ab\\u0063\":1}", W(UNKNOWN_FIELD, "<key>"));
	EXPECT(v, "{\"o\":{\"bob@example.org\":1,\"nick\":2}}", W(UNKNOWN_FIELD, "o.<key>"),
	       W(UNKNOWN_FIELD, "o.nick"));
	/* at most 64 bytes */
	memset(rec, 0, sizeof(rec));
	memcpy(rec, "{\"", 2);
	memset(rec + 2, 'k', 64);
	memcpy(rec + 66, "\":1}", 4);
	validate_exact(v, rec, strlen(rec), &r);
	assert_int_equal(r.count, 1);
	assert_int_equal(r.v[0].code, KILN_REJECT_UNKNOWN_FIELD);
	assert_int_equal(strlen(r.v[0].path), 64);
	assert_int_equal(strspn(r.v[0].path, "k"), 64);
	memset(rec + 2, 'k', 65);
	memcpy(rec + 67, "\":1}", 4);
	EXPECT(v, rec, W(UNKNOWN_FIELD, "<key>"));

	/* the raw text never shows, whatever else the path holds */
	snprintf(rec, sizeof(rec), "{\"alice@example.com\":1,\"o\":{\"alice@example.com\":2}}");
	validate_exact(v, rec, strlen(rec), &r);
	assert_int_equal(r.count, 2);
	for (size_t i = 0; i < r.kept; i++) {
		assert_null(strstr(r.v[i].path, "alice"));
		assert_null(strchr(r.v[i].path, '@'));
	}
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* --- not_object and syntax-level errors --- */

static void test_not_object(void **state)
{
	kiln_contract *k = compile("", PROP("a", "string") REQUIRED);
	kiln_validator *v = validator(k, NULL);

	(void)state;
	EXPECT(v, "[]", W(NOT_OBJECT, "$"));
	EXPECT(v, "[1,{\"a\":2,\"zz\":3}]", W(NOT_OBJECT, "$"));
	EXPECT(v, "\"str\"", W(NOT_OBJECT, "$"));
	EXPECT(v, "42", W(NOT_OBJECT, "$"));
	EXPECT(v, "-1.5e3", W(NOT_OBJECT, "$"));
	EXPECT(v, "true", W(NOT_OBJECT, "$"));
	EXPECT(v, "null", W(NOT_OBJECT, "$"));
	EXPECT(v, " [ ] ", W(NOT_OBJECT, "$"));
	VALID(v, "{\"a\":\"x\"}");
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_json_syntax(void **state)
{
	kiln_contract *k = compile("", PROP("a", "string") REQUIRED PROP("i", "integer"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	EXPECT(v, "", W(JSON_SYNTAX, "$"));
	EXPECT(v, "   ", W(JSON_SYNTAX, "$"));
	EXPECT(v, "{", W(JSON_SYNTAX, "$"));
	EXPECT(v, "{\"a\":\"x\",}", W(JSON_SYNTAX, "$"));
	EXPECT(v, "{\"a\":\"x\"} {}", W(JSON_SYNTAX, "$"));
	EXPECT(v, "{'a':'x'}", W(JSON_SYNTAX, "$"));
	EXPECT(v, "{\"a\":\"x\",\"i\":01}", W(JSON_SYNTAX, "$"));
	EXPECT(v, "{\"a\":\"x\",\"i\":NaN}", W(JSON_SYNTAX, "$"));
	/* contract violations found before the error are dropped */
	EXPECT(v, "{\"i\":\"x\",\"zz\":1,\"a\":", W(JSON_SYNTAX, "$"));
	EXPECT(v, "[1,2", W(JSON_SYNTAX, "$"));
	VALID(v, "{\"a\":\"x\"}\n");
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_invalid_utf8(void **state)
{
	kiln_contract *k = compile("", PROP("s", "string") PROP("i", "integer"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	EXPECT(v, "{\"s\":\"\xff\"}", W(INVALID_UTF8, "$"));
	EXPECT(v, "{\"s\":\"\xc3\x28\"}", W(INVALID_UTF8, "$"));
	EXPECT(v, "{\"s\":\"\xed\xa0\x80\"}", W(INVALID_UTF8, "$")); /* encoded surrogate */
	EXPECT(v, "{\"s\":\"\\ud800\"}", W(INVALID_UTF8, "$"));      /* lone surrogate escape */
	EXPECT(v, "{\"i\":\"x\",\"zz\":1,\"s\":\"\xc0\xaf\"}", W(INVALID_UTF8, "$"));
	EXPECT(v, "{\"\xfe\":1}", W(INVALID_UTF8, "$"));
	VALID(v, "{\"s\":\"\\ud83d\\ude00\"}");
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_duplicate_key(void **state)
{
	kiln_contract *k =
	    compile("", PROP("a", "integer") PROP("i", "integer") PROP("device", "object")
	                    CHILDREN CHILD("os", "string")
	                        PROP("items", "array") "        items:\n          logicalType: object\n"
	                                               "          properties:\n            - name: name\n");
	kiln_validator *v = validator(k, NULL);

	(void)state;
	EXPECT(v, "{\"a\":1,\"a\":2}", W(DUPLICATE_KEY, "a"));
	EXPECT(v, "{\"device\":{\"os\":\"x\",\"os\":\"y\"}}", W(DUPLICATE_KEY, "device.os"));
	/* replaces the violations found before it */
	EXPECT(v, "{\"i\":\"notint\",\"zz\":1,\"device\":{\"os\":1,\"os\":2}}",
	       W(DUPLICATE_KEY, "device.os"));
	EXPECT(v, "{\"items\":[{\"name\":1},{\"name\":2,\"name\":3}]}", W(DUPLICATE_KEY, "items[1].name"));
	/* unknown keys: shown only when identifier-like */
	EXPECT(v, "{\"zz\":1,\"zz\":2}", W(DUPLICATE_KEY, "zz"));
	EXPECT(v, "{\"alice@example.com\":1,\"alice@example.com\":2}", W(DUPLICATE_KEY, "<key>"));
	/* keys are compared after unescaping */
	EXPECT(v, "{\"zz\":1,\"\\u007a\\u007a\":2}", W(DUPLICATE_KEY, "<key>"));
	EXPECT(v, "{\"\\u007a\\u007a\":1,\"zz\":2}", W(DUPLICATE_KEY, "zz"));
	/* within one object only */
	VALID(v, "{\"device\":{\"os\":\"x\"},\"items\":[{\"name\":1},{\"name\":2}]}");
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_too_deep(void **state)
{
	kiln_contract *k = compile("", "      - name: any\n" PROP("i", "integer"));
	kiln_validator_options opt = {.limits = {.max_depth = 3}, .unknown_fields = -1};
	kiln_validator *v = validator(k, &opt);
	char rec[600];
	size_t n = 0;

	(void)state;
	VALID(v, "{\"any\":[[1]]}");
	EXPECT(v, "{\"any\":[[[1]]]}", W(TOO_DEEP, "$"));
	EXPECT(v, "{\"i\":\"x\",\"zz\":1,\"any\":{\"a\":{\"b\":{}}}}", W(TOO_DEEP, "$"));
	kiln_validator_free(v);

	/* the default limit is 128 */
	v = validator(k, NULL);
	n = (size_t)snprintf(rec, sizeof(rec), "{\"any\":");
	memset(rec + n, '[', 127);
	memset(rec + n + 127, ']', 127);
	n += 254;
	memcpy(rec + n, "}", 2);
	VALID(v, rec);
	n = (size_t)snprintf(rec, sizeof(rec), "{\"any\":");
	memset(rec + n, '[', 128);
	memset(rec + n + 128, ']', 128);
	n += 256;
	memcpy(rec + n, "}", 2);
	EXPECT(v, rec, W(TOO_DEEP, "$"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_too_large(void **state)
{
	kiln_contract *k = compile("", PROP("s", "string") PROP("i", "integer"));
	kiln_validator_options opt = {.limits = {.max_bytes = 16}, .unknown_fields = -1};
	kiln_validator *v = validator(k, &opt);
	kiln_report r;

	(void)state;
	VALID(v, "{\"s\":\"12345678\"}"); /* 16 bytes */
	EXPECT(v, "{\"s\":\"123456789\"}", W(TOO_LARGE, "$"));
	EXPECT(v, "{\"i\":\"x\",\"zz\":12}", W(TOO_LARGE, "$"));
	validate_exact(v, "{\"s\":\"123456789\"}", 17, &r);
	assert_int_equal(r.v[0].offset, 16);
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* --- structure --- */

static void test_array_of_objects(void **state)
{
	kiln_contract *k = compile(
	    "",
	    PROP("items", "array")
	        OPTS OPT("maxItems",
	                 "3") "        items:\n          logicalType: object\n          properties:\n"
	                      "            - name: name\n              logicalType: string\n"
	                      "              required: true\n"
	                      "            - name: qty\n              logicalType: integer\n"
	                      "              logicalTypeOptions:\n                minimum: 1\n" PROP(
	                          "matrix", "array") "        items:\n          logicalType: array\n"
	                                             "          items:\n            logicalType: integer\n");
	kiln_validator *v = validator(k, NULL);

	(void)state;
	VALID(v, "{\"items\":[{\"name\":\"a\",\"qty\":1},{\"name\":\"b\"}]}");
	EXPECT(v, "{\"items\":[{\"name\":\"a\",\"qty\":1},{\"qty\":\"x\"}]}", W(TYPE, "items[1].qty"),
	       W(MISSING_REQUIRED, "items[1].name"));
	EXPECT(v, "{\"items\":[{\"name\":\"a\"},{\"name\":\"b\",\"extra\":1}]}",
	       W(UNKNOWN_FIELD, "items[1].extra"));
	EXPECT(v, "{\"items\":[{\"name\":1},{\"name\":\"b\",\"qty\":0},{}]}", W(TYPE, "items[0].name"),
	       W(RANGE, "items[1].qty"), W(MISSING_REQUIRED, "items[2].name"));
	EXPECT(v, "{\"items\":[1,null,{\"name\":\"a\"}]}", W(TYPE, "items[0]"));
	EXPECT(v, "{\"items\":[{},{},{},{\"name\":\"d\"}]}", W(MISSING_REQUIRED, "items[0].name"),
	       W(MISSING_REQUIRED, "items[1].name"), W(MISSING_REQUIRED, "items[2].name"),
	       W(LENGTH, "items"));
	/* arrays of arrays */
	VALID(v, "{\"matrix\":[[1,2],[],[3]]}");
	EXPECT(v, "{\"matrix\":[[1,2],[3,\"4\"],5]}", W(TYPE, "matrix[1][1]"), W(TYPE, "matrix[2]"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_any_type(void **state)
{
	kiln_contract *k = compile("", "      - name: any\n        required: true\n");
	kiln_validator *v = validator(k, NULL);

	(void)state;
	assert_int_equal(k->root->children[0]->type, KILN_LTYPE_ANY);
	VALID(v, "{\"any\":1}");
	VALID(v, "{\"any\":-1.5e300}");
	VALID(v, "{\"any\":\"x\"}");
	VALID(v, "{\"any\":true}");
	VALID(v, "{\"any\":[1,{\"a\":\"b\"},[null]]}");
	VALID(v, "{\"any\":{\"x\":{\"y\":1},\"alice@example.com\":2}}");
	EXPECT(v, "{\"any\":null}", W(MISSING_REQUIRED, "any"));
	EXPECT(v, "{}", W(MISSING_REQUIRED, "any"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_unchecked_subtrees(void **state)
{
	kiln_contract *k = compile("", PROP("o", "object") CHILDREN CHILD("x", "integer")
	                                   CHILD_REQUIRED PROP("i", "integer"));
	kiln_contract *allow = compile(ALLOW_UNKNOWN, PROP("o", "object") CHILDREN CHILD("x", "integer")
	                                                  CHILD_REQUIRED PROP("i", "integer"));
	kiln_validator *v = validator(k, NULL);

	(void)state;
	/* under an unknown field: nothing below it is checked */
	EXPECT(v, "{\"zz\":{\"o\":{\"x\":\"bad\"},\"i\":\"bad\",\"a\":[1,{\"q\":2}]}}",
	       W(UNKNOWN_FIELD, "zz"));
	EXPECT(v, "{\"zz\":[{\"x\":\"bad\"},{\"zz\":1}],\"i\":1}", W(UNKNOWN_FIELD, "zz"));
	/* under a mismatched type: neither unknown keys nor missing children */
	EXPECT(v, "{\"o\":[{\"x\":\"bad\",\"zz\":1},{}],\"i\":2}", W(TYPE, "o"));
	EXPECT(v, "{\"i\":{\"x\":\"bad\",\"zz\":{}}}", W(TYPE, "i"));
	/* and the fields after the subtree are checked again */
	EXPECT(v, "{\"zz\":{\"i\":1},\"i\":\"bad\"}", W(UNKNOWN_FIELD, "zz"), W(TYPE, "i"));
	kiln_validator_free(v);
	v = validator(allow, NULL);
	VALID(v, "{\"zz\":{\"o\":{\"x\":\"bad\"},\"i\":\"bad\"},\"o\":{\"x\":1,\"extra\":{\"x\":\"bad\"}}}");
	EXPECT(v, "{\"zz\":{\"i\":1},\"i\":\"bad\",\"o\":{}}", W(TYPE, "i"), W(MISSING_REQUIRED, "o.x"));
	kiln_validator_free(v);
	kiln_contract_free(k);
	kiln_contract_free(allow);
}

/* --- reports --- */

static void test_many_violations(void **state)
{
	char props[2048], *p = props;
	char rec[16384];
	size_t n;
	kiln_contract *k;
	kiln_validator *v;
	kiln_report r;

	(void)state;
	for (int i = 0; i < 12; i++)
		p += sprintf(p, "      - name: f%d\n        logicalType: integer\n", i);
	k = compile("", props);
	v = validator(k, NULL);

	/* twelve type errors: eight kept in order, all counted */
	n = 0;
	rec[n++] = '{';
	for (int i = 0; i < 12; i++)
		n += (size_t)sprintf(rec + n, "%s\"f%d\":\"x\"", i ? "," : "", i);
	rec[n++] = '}';
	validate_exact(v, rec, n, &r);
	assert_int_equal(r.count, 12);
	assert_int_equal(r.kept, KILN_VIOLATIONS_MAX);
	for (int i = 0; i < KILN_VIOLATIONS_MAX; i++) {
		char name[8];
		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(r.v[i].code, KILN_REJECT_TYPE);
		assert_string_equal(r.v[i].path, name);
	}

	/* a thousand unknown keys */
	n = 0;
	rec[n++] = '{';
	for (int i = 0; i < 1000; i++)
		n += (size_t)sprintf(rec + n, "%s\"u%d\":%d", i ? "," : "", i, i);
	rec[n++] = '}';
	validate_exact(v, rec, n, &r);
	assert_int_equal(r.count, 1000);
	assert_int_equal(r.kept, KILN_VIOLATIONS_MAX);
	assert_string_equal(r.v[7].path, "u7");
	for (int i = 0; i < KILN_VIOLATIONS_MAX; i++)
		assert_int_equal(r.v[i].code, KILN_REJECT_UNKNOWN_FIELD);

	/* a syntax error after many violations: one violation */
	rec[n - 1] = ',';
	validate_exact(v, rec, n, &r);
	assert_int_equal(r.count, 1);
	assert_int_equal(r.kept, 1);
	assert_int_equal(r.v[0].code, KILN_REJECT_JSON_SYNTAX);
	assert_string_equal(r.v[0].path, "$");

	/* exactly the maximum */
	n = 0;
	rec[n++] = '{';
	for (int i = 0; i < KILN_VIOLATIONS_MAX; i++)
		n += (size_t)sprintf(rec + n, "%s\"f%d\":1.5", i ? "," : "", i);
	rec[n++] = '}';
	validate_exact(v, rec, n, &r);
	assert_int_equal(r.count, KILN_VIOLATIONS_MAX);
	assert_int_equal(r.kept, KILN_VIOLATIONS_MAX);
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_reuse(void **state)
{
	kiln_contract *k = compile("", PROP("req", "string") REQUIRED PROP("o", "object")
	                                   CHILDREN CHILD("x", "integer") CHILD_REQUIRED);
	kiln_validator *v = validator(k, NULL);
	static const char *const records[] = {
	    "{\"req\":\"a\",\"o\":{\"x\":1}}",
	    "{}",
	    "{\"o\":{}}",
	    "{\"req\":1,",
	    "[1]",
	    "{\"req\":\"a\",\"req\":\"b\"}",
	    "{\"req\":\"a\",\"o\":{\"x\":\"1\",\"zz\":[{}]}}",
	};
	kiln_report first[7], again;

	(void)state;
	for (size_t i = 0; i < 7; i++)
		validate_exact(v, records[i], strlen(records[i]), &first[i]);
	assert_int_equal(first[0].count, 0);
	assert_int_equal(first[1].count, 1);
	assert_int_equal(first[2].count, 2);
	assert_int_equal(first[3].count, 1);
	assert_int_equal(first[4].count, 1);
	assert_int_equal(first[5].count, 1);
	assert_int_equal(first[6].count, 2);
	/* in reverse and twice over: what one record sets (seen fields, depth,
	 * errors) never carries into the next */
	for (int round = 0; round < 2; round++) {
		for (size_t j = 7; j-- > 0;) {
			validate_exact(v, records[j], strlen(records[j]), &again);
			assert_int_equal(again.count, first[j].count);
			assert_int_equal(again.kept, first[j].kept);
			for (size_t i = 0; i < again.kept; i++) {
				assert_int_equal(again.v[i].code, first[j].v[i].code);
				assert_int_equal(again.v[i].offset, first[j].v[i].offset);
				assert_string_equal(again.v[i].path, first[j].v[i].path);
			}
		}
	}
	/* a valid record after one that set every seen flag, then one that sets none */
	VALID(v, "{\"req\":\"a\",\"o\":{\"x\":1}}");
	EXPECT(v, "{}", W(MISSING_REQUIRED, "req"));
	EXPECT(v, "{\"req\":\"a\",\"o\":{}}", W(MISSING_REQUIRED, "o.x"));
	kiln_validator_free(v);
	kiln_validator_free(NULL);
	kiln_contract_free(k);
}

static void test_report_single(void **state)
{
	kiln_report r;

	(void)state;
	memset(&r, 0x5a, sizeof(r));
	kiln_report_single(&r, KILN_REJECT_TOO_LARGE, 1234);
	assert_int_equal(r.count, 1);
	assert_int_equal(r.kept, 1);
	assert_int_equal(r.v[0].code, KILN_REJECT_TOO_LARGE);
	assert_int_equal(r.v[0].offset, 1234);
	assert_string_equal(r.v[0].path, "$");
	kiln_report_single(&r, KILN_REJECT_JSON_SYNTAX, 0);
	assert_int_equal(r.count, 1);
	assert_int_equal(r.v[0].code, KILN_REJECT_JSON_SYNTAX);
	assert_int_equal(r.v[0].offset, 0);
}

static void test_offsets(void **state)
{
	kiln_contract *k = compile("", PROP("a", "integer") PROP("b", "object")
	                                   REQUIRED CHILDREN CHILD("c", "string") CHILD_REQUIRED);
	kiln_validator *v = validator(k, NULL);
	const char *rec = "{\"a\":\"x\",\"zz\":1,\"b\":{}}";
	kiln_report r;

	(void)state;
	validate_exact(v, rec, strlen(rec), &r);
	assert_int_equal(r.count, 3);
	assert_int_equal(r.v[0].code, KILN_REJECT_TYPE);
	assert_int_equal(r.v[0].offset, 5); /* the value's quote */
	assert_int_equal(r.v[1].code, KILN_REJECT_UNKNOWN_FIELD);
	assert_int_equal(r.v[1].offset, 9); /* the key's quote */
	assert_int_equal(r.v[2].code, KILN_REJECT_MISSING_REQUIRED);
	assert_int_equal(r.v[2].offset, 21); /* the object's end */
	assert_string_equal(r.v[2].path, "b.c");
	kiln_validator_free(v);
	kiln_contract_free(k);
}

static void test_long_paths(void **state)
{
	char props[1024], name[241];
	kiln_contract *k;
	kiln_validator *v;
	char rec[1024];
	kiln_report r;
	size_t len;

	(void)state;
	memset(name, 'n', 240);
	name[240] = '\0';
	snprintf(props, sizeof(props),
	         "      - name: %s\n        logicalType: object\n        properties:\n"
	         "          - name: leaf\n            logicalType: integer\n",
	         name);
	k = compile("", props);
	v = validator(k, NULL);
	snprintf(rec, sizeof(rec), "{\"%s\":{\"leaf\":\"x\",\"more_than_fits\":1}}", name);
	validate_exact(v, rec, strlen(rec), &r);
	assert_int_equal(r.count, 2);
	/* 245 bytes fit */
	assert_int_equal(r.v[0].code, KILN_REJECT_TYPE);
	assert_int_equal(strlen(r.v[0].path), 245);
	assert_memory_equal(r.v[0].path, name, 240);
	assert_string_equal(r.v[0].path + 240, ".leaf");
	/* 255 do not: cut, marked with "..." */
	assert_int_equal(r.v[1].code, KILN_REJECT_UNKNOWN_FIELD);
	len = strlen(r.v[1].path);
	assert_true(len < KILN_PATH_MAX && len > 240);
	assert_memory_equal(r.v[1].path, name, 240);
	assert_string_equal(r.v[1].path + len - 3, "...");
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* No value from a record reaches a path, whatever the violation. */
static void test_values_never_in_paths(void **state)
{
	kiln_contract *k = compile(
	    "", PROP("code", "string") OPTS OPT("pattern", "\"^[0-9]+$\"") PROP("colour", "string")
	            ENUM("[red, green]") PROP("mail", "string") OPTS OPT("format", "email")
	                PROP("short", "string") OPTS OPT("maxLength", "3") PROP("count", "integer")
	                    PROP("when", "timestamp")
	                        PROP("nums", "array") "        items:\n          logicalType: integer\n" PROP(
	                            "o", "object") CHILDREN CHILD("s", "boolean"));
	kiln_validator *v = validator(k, NULL);
	const char *rec = "{\"code\":\"SECRET-1\",\"colour\":\"SECRET-2\",\"mail\":\"SECRET-3\","
	                  "\"short\":\"SECRET-4\",\"count\":\"SECRET-5\",\"when\":\"SECRET-6\","
	                  "\"nums\":[\"SECRET-7\"],\"o\":{\"s\":\"SECRET-8\"},\"extra\":\"SECRET-9\","
	                  "\"a@b.c\":\"SECRET-10\",\"o2\":{\"SECRET-11 \":\"SECRET-12\"}}";
	kiln_report r;

	(void)state;
	validate_exact(v, rec, strlen(rec), &r);
	assert_true(r.count >= 10);
	assert_int_equal(r.kept, KILN_VIOLATIONS_MAX);
	for (size_t i = 0; i < r.kept; i++)
		if (strstr(r.v[i].path, "SECRET"))
			fail_msg("violation %zu path \"%s\" holds a value", i, r.v[i].path);
	/* the same past the kept eight, by checking the record piece by piece */
	EXPECT(v, "{\"extra\":\"SECRET-9\",\"a@b.c\":\"SECRET-10\",\"o2\":{\"SECRET-11 \":\"SECRET-12\"}}",
	       W(UNKNOWN_FIELD, "extra"), W(UNKNOWN_FIELD, "<key>"), W(UNKNOWN_FIELD, "o2"));
	EXPECT(v, "{\"o\":{\"s\":\"SECRET-8\",\"SECRET 13\":1}}", W(TYPE, "o.s"),
	       W(UNKNOWN_FIELD, "o.<key>"));
	EXPECT(v, "{\"o\":{\"SECRET 14\":1,\"SECRET 14\":2}}", W(DUPLICATE_KEY, "o.<key>"));
	kiln_validator_free(v);
	kiln_contract_free(k);
}

/* --- the example contract and its samples --- */

static char *slurp(const char *path, size_t *out_len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		fail_msg("cannot open %s", path);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*out_len = (size_t)n;
	return buf;
}

static void test_user_events_samples(void **state)
{
	kiln_contract *k = NULL;
	kiln_validator *v;
	kiln_report r;
	size_t len, elen, lines = 0;
	char *text, *expected, *line, *next, *eline;
	char got[4096] = "";
	size_t used = 0;

	(void)state;
	if (kiln_contract_load(&k, KILN_SRCDIR "/contracts/user-events.yaml", NULL) != 0)
		fail_msg("%s", kiln_error_last());
	v = validator(k, NULL);

	text = slurp(KILN_SRCDIR "/samples/user-events.jsonl", &len);
	for (line = text; line < text + len; line = next + 1) {
		next = memchr(line, '\n', (size_t)(text + len - line));
		if (!next)
			next = text + len;
		if (kiln_validate(v, line, (size_t)(next - line), &r) != 0)
			fail_msg("sample line %zu: %s %s", lines + 1, kiln_reject_name(r.v[0].code),
			         r.v[0].path);
		lines++;
	}
	assert_int_equal(lines, 200);
	free(text);

	/* every violation of the invalid sample, as "LINE CODE PATH" lines */
	text = slurp(KILN_SRCDIR "/samples/user-events-invalid.jsonl", &len);
	expected = slurp(KILN_SRCDIR "/samples/user-events-invalid.expected", &elen);
	lines = 0;
	for (line = text; line < text + len; line = next + 1) {
		next = memchr(line, '\n', (size_t)(text + len - line));
		if (!next)
			next = text + len;
		lines++;
		kiln_validate(v, line, (size_t)(next - line), &r);
		for (size_t i = 0; i < r.kept; i++)
			used += (size_t)snprintf(got + used, sizeof(got) - used, "%zu %s %s\n", lines,
			                         kiln_reject_name(r.v[i].code), r.v[i].path);
		assert_true(used < sizeof(got));
	}
	assert_int_equal(lines, 15);
	eline = expected;
	assert_string_equal(got, eline);
	free(text);
	free(expected);
	kiln_validator_free(v);
	kiln_contract_free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_type_string),
	    cmocka_unit_test(test_type_integer),
	    cmocka_unit_test(test_type_number),
	    cmocka_unit_test(test_type_boolean),
	    cmocka_unit_test(test_type_date),
	    cmocka_unit_test(test_type_timestamp),
	    cmocka_unit_test(test_type_time),
	    cmocka_unit_test(test_type_object),
	    cmocka_unit_test(test_type_array),
	    cmocka_unit_test(test_null_handling),
	    cmocka_unit_test(test_missing_required),
	    cmocka_unit_test(test_required_list),
	    cmocka_unit_test(test_pattern),
	    cmocka_unit_test(test_length_strings),
	    cmocka_unit_test(test_length_items),
	    cmocka_unit_test(test_length_properties),
	    cmocka_unit_test(test_range_bounds),
	    cmocka_unit_test(test_range_multiple_of),
	    cmocka_unit_test(test_pattern_dollar_is_end),
	    cmocka_unit_test(test_pattern_limit),
	    cmocka_unit_test(test_enum_any_type),
	    cmocka_unit_test(test_duplicate_escaped_known_key),
	    cmocka_unit_test(test_range_integer_format),
	    cmocka_unit_test(test_range_huge_numbers),
	    cmocka_unit_test(test_range_temporal),
	    cmocka_unit_test(test_enum_strings),
	    cmocka_unit_test(test_enum_numbers),
	    cmocka_unit_test(test_format),
	    cmocka_unit_test(test_unknown_field_reject),
	    cmocka_unit_test(test_unknown_field_allow),
	    cmocka_unit_test(test_unknown_key_names),
	    cmocka_unit_test(test_not_object),
	    cmocka_unit_test(test_json_syntax),
	    cmocka_unit_test(test_invalid_utf8),
	    cmocka_unit_test(test_duplicate_key),
	    cmocka_unit_test(test_too_deep),
	    cmocka_unit_test(test_too_large),
	    cmocka_unit_test(test_array_of_objects),
	    cmocka_unit_test(test_any_type),
	    cmocka_unit_test(test_unchecked_subtrees),
	    cmocka_unit_test(test_many_violations),
	    cmocka_unit_test(test_reuse),
	    cmocka_unit_test(test_report_single),
	    cmocka_unit_test(test_offsets),
	    cmocka_unit_test(test_long_paths),
	    cmocka_unit_test(test_values_never_in_paths),
	    cmocka_unit_test(test_user_events_samples),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
