/* Unit tests for contract inference (src/contract/infer.c): the YAML for
 * small samples, written out in full so a reader can check each line
 * against the rules of docs/CONTRACTS.md ("Inferring a contract"), with a
 * stand-in detector: a string holding "#pii" is personal, the whole value
 * when it starts with it. */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "contract/infer.h"
#include "contract/validate.h"
#include "core/buf.h"
#include "core/error.h"

static char tmpdir[4096];

#define HEADER(n)                                                                                            \
	"# Inferred by `kiln contract infer` from " n ": review it before use.\n"                            \
	"# Types, required fields and formats are what every record showed; enums\n"                         \
	"# list the values of low-cardinality strings; classification: pii and\n"                            \
	"# piiScan are suggested where kiln's PII detectors fired or a field's name\n"                       \
	"# identifies a person (docs/CONTRACTS.md, \"Inferring a contract\").\n"                             \
	"apiVersion: v3.1.0\nkind: DataContract\nid: t\nname: t\nversion: 0.1.0\nstatus: draft\n"

static int stand_in(void *ctx, const char *s, size_t len)
{
	(void)ctx;
	if (len >= 4 && memcmp(s, "#pii", 4) == 0)
		return KILN_INFER_DETECT_WHOLE;
	for (size_t i = 0; i + 4 <= len; i++)
		if (memcmp(s + i, "#pii", 4) == 0)
			return KILN_INFER_DETECT_INSIDE;
	return KILN_INFER_DETECT_NONE;
}

static kiln_infer *infer_new(bool pii, size_t max_enum)
{
	kiln_infer *in = NULL;

	assert_int_equal(kiln_infer_new(&in, &(kiln_infer_options){.name = "t",
	                                                           .classify_pii = pii,
	                                                           .detect = stand_in,
	                                                           .max_enum = max_enum}),
	                 0);
	return in;
}

/* Adds each line of `lines` (records separated by '\n'), then checks the
 * rendering against `want` and that every record is valid against it. */
static void assert_infers(kiln_infer *in, const char *lines, const char *want)
{
	kiln_buf yaml = KILN_BUF_INIT(0);
	kiln_contract *k = NULL;
	kiln_validator *v;
	uint64_t n = 0;

	for (const char *p = lines; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		assert_int_equal(kiln_infer_add(in, p, len, "t.jsonl", ++n), 0);
		p += len + (nl != NULL);
	}
	assert_int_equal(kiln_infer_render(in, &yaml), 0);
	assert_int_equal(kiln_buf_putc(&yaml, '\0'), 0);
	assert_string_equal(yaml.ptr, want);
	assert_int_equal(kiln_contract_load_buffer(&k, "t.yaml", yaml.ptr, yaml.len - 1, NULL), 0);
	assert_non_null(v = kiln_validator_new(k, &(kiln_validator_options){.unknown_fields = -1}));
	for (const char *p = lines; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		kiln_report r;
		assert_int_equal(kiln_validate(v, p, len, &r), 0);
		p += len + (nl != NULL);
	}
	kiln_validator_free(v);
	kiln_contract_free(k);
	kiln_buf_free(&yaml);
	kiln_infer_free(in);
}

/* integer, number (1.5 and 2 mixed), boolean; required = present and not
 * null in both records (b is absent from one, e only null). */
static void test_types_and_required(void **state)
{
	(void)state;
	assert_infers(
	    infer_new(true, 20),
	    "{\"a\":1,\"b\":\"x\",\"c\":true,\"d\":1.5}\n"
	    "{\"a\":-2,\"c\":false,\"d\":2,\"e\":null}",
	    HEADER("2 records") "schema:\n  - name: t\n    logicalType: object\n    properties:\n"
	                        "      - name: a\n        logicalType: integer\n        required: true\n"
	                        "      - name: b\n        logicalType: string\n"
	                        "      - name: c\n        logicalType: boolean\n        required: true\n"
	                        "      - name: d\n        logicalType: number\n        required: true\n"
	                        "      - name: e\n");
}

/* status: 2 values each seen twice, an enum (most frequent first, then by
 * bytes); once: seen once each, none; tags items an enum of their own
 * ("y" quoted: YAML 1.1 reads a plain y as a boolean);
 * when: a date-time in every record, so a format and no enum; code
 * mixes a string and a number: any value. */
static void test_formats_enums_items(void **state)
{
	(void)state;
	assert_infers(
	    infer_new(true, 20),
	    "{\"status\":\"paid\",\"once\":\"a\",\"tags\":[\"x\",\"y\"],\"when\":\"2026-01-02T03:04:05Z\","
	    "\"code\":1}\n"
	    "{\"status\":\"open\",\"once\":\"b\",\"tags\":[\"x\"],\"when\":\"2026-01-02T03:04:05Z\",\"code\":"
	    "\"1\"}\n"
	    "{\"status\":\"paid\",\"once\":\"c\",\"tags\":[\"y\"],\"when\":\"2026-01-02T03:04:05Z\"}\n"
	    "{\"status\":\"open\",\"once\":\"d\",\"tags\":[],\"when\":\"2026-01-02T03:04:05Z\"}",
	    HEADER("4 records") "schema:\n  - name: t\n    logicalType: object\n    properties:\n"
	                        "      - name: status\n        logicalType: string\n        required: true\n"
	                        "        customProperties:\n          - property: enum\n"
	                        "            value: [open, paid]\n"
	                        "      - name: once\n        logicalType: string\n        required: true\n"
	                        "      - name: tags\n        logicalType: array\n        required: true\n"
	                        "        items:\n          logicalType: string\n          customProperties:\n"
	                        "            - property: enum\n              value: [x, \"y\"]\n"
	                        "      - name: when\n        logicalType: string\n        required: true\n"
	                        "        logicalTypeOptions:\n          format: date-time\n"
	                        "      - name: code\n");
}

/* who: every value detected whole: pii, no enum though two values repeat;
 * note: detected inside: piiScan; user_id: pii by its name; nested
 * objects keep their own required; with --pii none (the second sample)
 * nothing is classified and still no enum holds a flagged value. */
static void test_personal(void **state)
{
	static const char sample[] =
	    "{\"who\":\"#pii-a\",\"note\":\"hi #pii-a\",\"user_id\":7,\"o\":{\"k\":\"v\"}}\n"
	    "{\"who\":\"#pii-b\",\"note\":\"ok\",\"user_id\":8,\"o\":{}}\n"
	    "{\"who\":\"#pii-a\",\"note\":\"ok\",\"user_id\":7,\"o\":{\"k\":\"v\"}}\n"
	    "{\"who\":\"#pii-b\",\"note\":\"ok\",\"user_id\":8,\"o\":{\"k\":\"v\"}}";

	(void)state;
	assert_infers(
	    infer_new(true, 20), sample,
	    HEADER("4 records") "schema:\n  - name: t\n    logicalType: object\n    properties:\n"
	                        "      - name: who\n        logicalType: string\n        required: true\n"
	                        "        classification: pii\n"
	                        "      - name: note\n        logicalType: string\n        required: true\n"
	                        "        customProperties:\n          - property: piiScan\n"
	                        "            value: true\n"
	                        "      - name: user_id\n        logicalType: integer\n"
	                        "        required: true\n        classification: pii\n"
	                        "      - name: o\n        logicalType: object\n        required: true\n"
	                        "        properties:\n          - name: k\n            logicalType: string\n"
	                        "            customProperties:\n              - property: enum\n"
	                        "                value: [v]\n");
	assert_infers(
	    infer_new(false, 20), sample,
	    HEADER("4 records") "schema:\n  - name: t\n    logicalType: object\n    properties:\n"
	                        "      - name: who\n        logicalType: string\n        required: true\n"
	                        "      - name: note\n        logicalType: string\n        required: true\n"
	                        "      - name: user_id\n        logicalType: integer\n"
	                        "        required: true\n"
	                        "      - name: o\n        logicalType: object\n        required: true\n"
	                        "        properties:\n          - name: k\n            logicalType: string\n"
	                        "            customProperties:\n              - property: enum\n"
	                        "                value: [v]\n");
}

/* A key a detector flags: inside an object, the object is no longer listed
 * (any value); at the top level the key is left out and unknown fields are
 * allowed. Names YAML would read as another type are quoted. */
static void test_unlisted_keys_and_quoting(void **state)
{
	(void)state;
	assert_infers(
	    infer_new(true, 20),
	    "{\"m\":{\"a\":1},\"#pii-x\":1,\"yes\":\"on\",\"1x\":true}\n"
	    "{\"m\":{\"#pii-y\":2},\"yes\":\"on\",\"1x\":false}",
	    HEADER(
	        "2 records") "# Some keys were not listed (too many, or they look personal):\n"
	                     "customProperties:\n  - property: unknownFields\n    value: allow\n"
	                     "schema:\n  - name: t\n    logicalType: object\n    properties:\n"
	                     "      - name: m\n        required: true\n"
	                     "        description: \"an object whose keys are not listed (a map, or "
	                     "keys that look personal): any value\"\n"
	                     "      - name: \"yes\"\n        logicalType: string\n        required: true\n"
	                     "        customProperties:\n          - property: enum\n"
	                     "            value: [\"on\"]\n"
	                     "      - name: \"1x\"\n        logicalType: boolean\n        required: true\n");
}

/* A refused record changes nothing; the error names file:line:col and the
 * code, never a value. */
static void test_refused_records(void **state)
{
	kiln_infer *in = infer_new(true, 20);
	kiln_buf yaml = KILN_BUF_INIT(0);

	(void)state;
	assert_int_equal(kiln_infer_render(in, &yaml), KILN_EINVALID);
	assert_int_equal(kiln_infer_add(in, "{\"a\":\"secret\",\"b\":[1,}", 22, "s.jsonl", 3), KILN_EINVALID);
	assert_string_equal(kiln_error_last(),
	                    "s.jsonl:3:22: json_syntax: each line of a sample must be one JSON object");
	assert_int_equal(kiln_infer_add(in, " [1]", 4, "s.jsonl", 4), KILN_EINVALID);
	assert_string_equal(kiln_error_last(),
	                    "s.jsonl:4:2: not_object: each line of a sample must be one JSON object");
	assert_int_equal(kiln_infer_add(in, "{\"a\":1,\"a\":2}", 13, "s.jsonl", 5), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "s.jsonl:5:"));
	assert_non_null(strstr(kiln_error_last(), "duplicate_key"));
	assert_int_equal(kiln_infer_records(in), 0);
	kiln_buf_free(&yaml);
	assert_infers(
	    in, "{\"c\":1}",
	    HEADER("1 record") "schema:\n  - name: t\n    logicalType: object\n    properties:\n"
	                       "      - name: c\n        logicalType: integer\n        required: true\n");
	in = NULL;
	assert_int_equal(kiln_infer_new(&in, &(kiln_infer_options){.name = "a b"}), KILN_EINVALID);
	assert_null(in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_types_and_required), cmocka_unit_test(test_formats_enums_items),
	    cmocka_unit_test(test_personal),           cmocka_unit_test(test_unlisted_keys_and_quoting),
	    cmocka_unit_test(test_refused_records),
	};

	return kiln_test_main(tests, tmpdir, "infer", NULL, NULL);
}
