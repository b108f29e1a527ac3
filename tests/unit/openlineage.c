/* Unit tests for the OpenLineage event encoder (src/openlineage/event.c):
 * whole events and facets written out so a reader can check each byte
 * against the spec's RunEvent and facet schemas (tests/integration/
 * openlineage.sh validates real ones with python3-jsonschema), the UUID's
 * version and variant bits, the RFC 3339 times, and which contract fields
 * are marked personal. */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "core/buf.h"
#include "openlineage/event.h"

#define P    "https://github.com/kiln/kiln/releases/tag/v9.9"
#define SPEC "https://openlineage.io/spec/"

static void assert_buf(kiln_buf *b, const char *want)
{
	assert_int_equal(kiln_buf_putc(b, '\0'), 0);
	if (strcmp(b->ptr, want) != 0)
		fprintf(stderr, "got:  %s\nwant: %s\n", b->ptr, want);
	assert_string_equal(b->ptr, want);
}

/* a START: no facets but the job type; empty inputs and outputs */
static void test_start(void **state)
{
	kiln_buf b = KILN_BUF_INIT(0);
	kiln_ol_event e = {.type = "START",
	                   .run_id = "01234567-89ab-4cde-8f01-23456789abcd",
	                   .time_ms = 1796618820123, /* 2026-12-07T04:47:00.123Z */
	                   .producer = P,
	                   .job_namespace = "file://h/m.git",
	                   .job_name = "kiln.user-events",
	                   .job_type = "RUN"};

	(void)state;
	assert_int_equal(kiln_ol_event_render(&b, &e), 0);
	assert_buf(&b, "{\"eventType\":\"START\",\"eventTime\":\"2026-12-07T04:47:00.123Z\",\"producer\":\"" P
	               "\","
	               "\"schemaURL\":\"" SPEC "2-0-2/OpenLineage.json#/$defs/RunEvent\","
	               "\"run\":{\"runId\":\"01234567-89ab-4cde-8f01-23456789abcd\"},"
	               "\"job\":{\"namespace\":\"file://h/m.git\",\"name\":\"kiln.user-events\",\"facets\":{"
	               "\"jobType\":{\"_producer\":\"" P "\",\"_schemaURL\":\"" SPEC
	               "facets/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet\","
	               "\"processingType\":\"BATCH\",\"integration\":\"KILN\",\"jobType\":\"RUN\"}}},"
	               "\"inputs\":[],\"outputs\":[]}");
	kiln_buf_free(&b);
}

/* a FAIL of a streaming run: the error message facet (its quote escaped),
 * one input with its input facets, one output with dataset facets */
static void test_fail_with_datasets(void **state)
{
	kiln_buf b = KILN_BUF_INIT(0);
	kiln_ol_dataset in = {
	    .namespace_ = "kafka://b:9092", .name = "events", .io_facets = "\"x\":{\"a\":1}"};
	kiln_ol_dataset out = {.namespace_ = "file://h/m.git", .name = "ds@main", .facets = "\"y\":{}"};
	kiln_ol_event e = {.type = "FAIL",
	                   .run_id = "01234567-89ab-4cde-8f01-23456789abcd",
	                   .time_ms = 0,
	                   .producer = P,
	                   .job_namespace = "ns",
	                   .job_name = "kiln.p",
	                   .streaming = true,
	                   .job_type = "RUN",
	                   .error = "store: \"put\" failed",
	                   .inputs = &in,
	                   .input_count = 1,
	                   .outputs = &out,
	                   .output_count = 1};

	(void)state;
	assert_int_equal(kiln_ol_event_render(&b, &e), 0);
	assert_buf(
	    &b,
	    "{\"eventType\":\"FAIL\",\"eventTime\":\"1970-01-01T00:00:00.000Z\",\"producer\":\"" P "\","
	    "\"schemaURL\":\"" SPEC "2-0-2/OpenLineage.json#/$defs/RunEvent\","
	    "\"run\":{\"runId\":\"01234567-89ab-4cde-8f01-23456789abcd\",\"facets\":{"
	    "\"errorMessage\":{\"_producer\":\"" P "\",\"_schemaURL\":\"" SPEC
	    "facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet\","
	    "\"message\":\"store: \\\"put\\\" failed\",\"programmingLanguage\":\"C\"}}},"
	    "\"job\":{\"namespace\":\"ns\",\"name\":\"kiln.p\",\"facets\":{"
	    "\"jobType\":{\"_producer\":\"" P "\",\"_schemaURL\":\"" SPEC
	    "facets/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet\","
	    "\"processingType\":\"STREAMING\",\"integration\":\"KILN\",\"jobType\":\"RUN\"}}},"
	    "\"inputs\":[{\"namespace\":\"kafka://"
	    "b:9092\",\"name\":\"events\",\"inputFacets\":{\"x\":{\"a\":1}}}],"
	    "\"outputs\":[{\"namespace\":\"file://h/m.git\",\"name\":\"ds@main\",\"facets\":{\"y\":{}}}]}");
	kiln_buf_free(&b);
}

/* kiln's own facets point at their section of docs/LINEAGE.md (lower case) */
static void test_kiln_facet(void **state)
{
	kiln_buf b = KILN_BUF_INIT(0);

	(void)state;
	assert_int_equal(kiln_buf_putc(&b, '{'), 0);
	assert_int_equal(kiln_ol_kiln_facet_begin(&b, P, "kiln_dataQualityMetrics"), 0);
	assert_int_equal(kiln_buf_putc(&b, '}'), 0);
	assert_int_equal(kiln_ol_kiln_facet_begin(&b, P, "kiln_offsets"), 0);
	assert_buf(
	    &b, "{\"kiln_dataQualityMetrics\":{\"_producer\":\"" P "\",\"_schemaURL\":\"" KILN_OL_HOME
	        "/blob/main/docs/LINEAGE.md#kiln_dataqualitymetrics\"},\"kiln_offsets\":{\"_producer\":\"" P
	        "\",\"_schemaURL\":\"" KILN_OL_HOME "/blob/main/docs/LINEAGE.md#kiln_offsets\"");
	kiln_buf_free(&b);
}

static const char contract_yaml[] =
    "apiVersion: v3.1.0\nkind: DataContract\nid: c\nname: c\nversion: 2.0.0\n"
    "status: active\nschema:\n  - name: r\n    logicalType: object\n"
    "    properties:\n"
    "      - name: id\n        logicalType: integer\n"
    "      - name: email\n        logicalType: string\n"
    "        classification: pii\n"
    "      - name: who\n        logicalType: object\n"
    "        properties:\n"
    "          - name: ip\n            logicalType: string\n"
    "            customProperties:\n"
    "              - property: pseudonymisation\n                value: redact\n"
    "          - name: os\n            logicalType: string\n";

/* the schema facet: nested fields, the personal ones described as such and
 * listed by path in kiln_personalFields; no other field is marked */
static void test_schema_facets(void **state)
{
	kiln_contract *c = NULL;
	kiln_buf b = KILN_BUF_INIT(0);

	(void)state;
	assert_int_equal(kiln_contract_load_buffer(&c, "c.yaml", contract_yaml, strlen(contract_yaml), NULL),
	                 0);
	assert_true(kiln_ol_field_personal(c->root->children[1]));  /* email: classification pii */
	assert_false(kiln_ol_field_personal(c->root->children[0])); /* id */
	assert_int_equal(kiln_ol_schema_facets(&b, P, c), 0);
	assert_buf(&b,
	           "\"schema\":{\"_producer\":\"" P "\",\"_schemaURL\":\"" SPEC
	           "facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet\",\"fields\":["
	           "{\"name\":\"id\",\"type\":\"integer\",\"ordinal_position\":1},"
	           "{\"name\":\"email\",\"type\":\"string\",\"ordinal_position\":2,"
	           "\"description\":\"" KILN_OL_PERSONAL "\"},"
	           "{\"name\":\"who\",\"type\":\"object\",\"ordinal_position\":3,\"fields\":["
	           "{\"name\":\"ip\",\"type\":\"string\",\"ordinal_position\":1,"
	           "\"description\":\"" KILN_OL_PERSONAL "\"},"
	           "{\"name\":\"os\",\"type\":\"string\",\"ordinal_position\":2}]}]},"
	           "\"kiln_personalFields\":{\"_producer\":\"" P "\",\"_schemaURL\":\"" KILN_OL_HOME
	           "/blob/main/docs/LINEAGE.md#kiln_personalfields\",\"contract\":\"c\",\"contractVersion\":"
	           "\"2.0.0\",\"fields\":[\"email\",\"who.ip\"]}");
	kiln_buf_free(&b);
	kiln_contract_free(c);
}

/* version 4 (the 13th hex digit is 4), the RFC 4122 variant (the 17th is
 * 8, 9, a or b), lower-case hex in 8-4-4-4-12; two draws differ */
static void test_uuid(void **state)
{
	char a[37], b[37];

	(void)state;
	kiln_ol_uuid(a);
	kiln_ol_uuid(b);
	assert_int_equal(strlen(a), 36);
	assert_true(a[8] == '-' && a[13] == '-' && a[18] == '-' && a[23] == '-');
	assert_int_equal(a[14], '4');
	assert_non_null(strchr("89ab", a[19]));
	for (int i = 0; i < 36; i++)
		if (i != 8 && i != 13 && i != 18 && i != 23)
			assert_non_null(strchr("0123456789abcdef", a[i]));
	assert_string_not_equal(a, b);
}

/* 951782400000 ms is 2000-02-29T00:00:00Z (a leap day: 30 years of 365
 * days, 7 leap days from 1972 to 1996, 31 + 28 days of 2000: 11016 days) */
static void test_time(void **state)
{
	char t[64];

	(void)state;
	kiln_ol_time(t, 951782400000 + 7 * 1000 + 9);
	assert_string_equal(t, "2000-02-29T00:00:07.009Z");
	kiln_ol_time(t, 0);
	assert_string_equal(t, "1970-01-01T00:00:00.000Z");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_start),      cmocka_unit_test(test_fail_with_datasets),
	    cmocka_unit_test(test_kiln_facet), cmocka_unit_test(test_schema_facets),
	    cmocka_unit_test(test_uuid),       cmocka_unit_test(test_time),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
