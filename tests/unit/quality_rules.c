/* Unit tests for the ODCS quality rules (src/contract/quality.c) and their
 * gate (kiln_gates_quality): a rule kiln cannot read is refused with its
 * file, line and column instead of passing as "not run" (a misspelt key,
 * an unknown type, no metric, a threshold beyond a double); free-text
 * rules are not run and never counted as passed; errors found against a
 * profile name the rule's file, line and column. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "contract/quality.h"
#include "core/buf.h"
#include "core/error.h"
#include "ingest/gates.h"
#include "quality/profile.h"

/* A contract whose schema object has `rules` (YAML list items at four
 * spaces) and whose property kind (an enum) has `kind_rules`. */
static int load(kiln_contract **c, kiln_quality_rules *out, const char *rules, const char *kind_rules)
{
	kiln_buf y = {0};
	int rc;

	assert_int_equal(kiln_buf_printf(&y,
	                                 "apiVersion: v3.1.0\nkind: DataContract\nid: urn:test:q\n"
	                                 "version: 1.0.0\nstatus: active\nschema:\n  - name: events\n"
	                                 "    quality:\n%s"
	                                 "    properties:\n"
	                                 "      - name: kind\n        logicalType: string\n"
	                                 "        customProperties:\n          - property: enum\n"
	                                 "            value: [a, b, c]\n"
	                                 "        quality:\n%s"
	                                 "      - name: note\n        logicalType: string\n",
	                                 rules, kind_rules),
	                 0);
	assert_int_equal(kiln_contract_load_buffer(c, "q.yaml", y.ptr, y.len, NULL), 0);
	kiln_buf_free(&y);
	rc = kiln_quality_rules_load(out, *c);
	return rc;
}

static const char *const ROWS = "      - {id: rows, metric: rowCount, mustBeGreaterThan: 0}\n";
static const char *const KIND = "          - {id: k, metric: nullValues, mustBe: 0}\n";

static void refused(const char *rules, const char *kind_rules, const char *message)
{
	kiln_contract *c = NULL;
	kiln_quality_rules r;

	assert_int_equal(load(&c, &r, rules, kind_rules), KILN_EINVALID);
	if (!strstr(kiln_error_last(), message))
		fail_msg("got: %s\nwanted: %s", kiln_error_last(), message);
	kiln_quality_rules_free(&r);
	kiln_contract_free(c);
}

static void test_unreadable_rules_refused(void **state)
{
	(void)state;
	/* a misspelt metric key: was a free-text rule, "not run: pass" */
	refused("      - {id: rows, metirc: rowCount, mustBeGreaterThan: 0}\n", KIND,
	        "q.yaml:9:20: schema[0].quality[0].metirc: not a key of an ODCS quality rule");
	/* no metric at all: a rule without type is a library rule */
	refused("      - {id: rows, mustBeGreaterThan: 0}\n", KIND,
	        "q.yaml:9:9: schema[0].quality[0].metric: a library rule needs a metric");
	/* a type ODCS does not define */
	refused("      - {id: rows, type: bogus, description: x}\n", KIND,
	        "q.yaml:9:26: schema[0].quality[0].type: expected library, text, sql or custom");
	/* a threshold that a double cannot hold: infinity, refused as .inf is */
	refused(ROWS, "          - {id: k, metric: nullValues, mustBeLessThan: 1e400}\n",
	        "q.yaml:17:57: schema[0].properties[0].quality[0].mustBeLessThan: a threshold beyond a "
	        "double's range");
	refused(ROWS, "          - {id: k, metric: nullValues, mustBeBetween: [0, -1e999]}\n",
	        "mustBeBetween: a threshold beyond a double's range");
}

static void test_text_rules_not_passed(void **state)
{
	kiln_contract *c = NULL;
	kiln_quality_rules r;
	kiln_profile p = {0};
	kiln_profile_schema *s = NULL;
	kiln_stats st = {.records_in = 3, .valid = 3};
	kiln_gate_result out[4];

	(void)state;
	assert_int_equal(load(&c, &r,
	                      "      - {id: prose, type: text, description: rows are unique}\n"
	                      "      - {id: q, type: sql, query: SELECT 1, mustBe: 1}\n",
	                      KIND),
	                 0);
	assert_int_equal(r.count, 3);
	assert_int_equal(kiln_profile_schema_new(&s, c), 0);
	assert_int_equal(kiln_profile_init(&p, s), 0);
	p.records = 3;
	assert_int_equal(kiln_gates_quality(&r, &p, &st, out), 3);
	assert_true(out[0].not_run);
	assert_string_equal(out[0].line, "quality prose (type text): not run by kiln");
	assert_true(out[1].not_run);
	assert_string_equal(out[1].line, "quality q (type sql): not run by kiln");
	assert_false(out[2].not_run);
	assert_true(out[2].pass);
	kiln_profile_free(&p);
	kiln_profile_schema_free(s);
	kiln_quality_rules_free(&r);
	kiln_contract_free(c);
}

/* Errors found when the gate runs a rule name its file, line and column. */
static void test_gate_errors_name_the_place(void **state)
{
	kiln_contract *c = NULL;
	kiln_quality_rules r;
	kiln_profile p = {0};
	kiln_profile_schema *s = NULL;
	kiln_stats st = {.records_in = 3, .valid = 3};
	kiln_gate_result out[4];

	(void)state;
	assert_int_equal(load(&c, &r, ROWS, "          - {id: inv, metric: invalidValues, mustBe: 0}\n"), 0);
	assert_int_equal(kiln_profile_schema_new(&s, c), 0);
	assert_int_equal(kiln_profile_init(&p, s), 0);
	assert_int_equal(kiln_gates_quality(&r, &p, &st, out), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "q.yaml:17:13: quality rule inv (invalidValues on kind): "
	                                          "needs arguments.validValues"));
	kiln_profile_free(&p);
	kiln_profile_schema_free(s);
	kiln_quality_rules_free(&r);
	kiln_contract_free(c);
}

/* invalidValues: the categories outside validValues, with many values */
static void test_invalid_values(void **state)
{
	kiln_contract *c = NULL;
	kiln_quality_rules r;
	kiln_profile p = {0};
	kiln_profile_schema *s = NULL;
	kiln_stats st = {.records_in = 6, .valid = 6};
	kiln_gate_result out[4];
	static const char *const values[] = {"a", "b", "b", "c", "c", "c"};

	(void)state;
	assert_int_equal(load(&c, &r, ROWS,
	                      "          - id: inv\n            metric: invalidValues\n"
	                      "            arguments: {validValues: [c, a, x, a, null]}\n"
	                      "            mustBeLessThan: 3\n"),
	                 0);
	assert_int_equal(kiln_profile_schema_new(&s, c), 0);
	assert_int_equal(kiln_profile_init(&p, s), 0);
	for (int i = 0; i < 6; i++) {
		p.records++;
		assert_int_equal(kiln_profile_add_value(&p, s, c->root->children[0], KILN_JSON_STRING, false,
		                                        values[i], 1),
		                 0);
	}
	assert_int_equal(kiln_gates_quality(&r, &p, &st, out), 2);
	assert_string_equal(out[1].line,
	                    "quality inv (invalidValues of kind): 2 rows mustBeLessThan 3: pass");
	kiln_profile_free(&p);
	kiln_profile_schema_free(s);
	kiln_quality_rules_free(&r);
	kiln_contract_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unreadable_rules_refused),
	    cmocka_unit_test(test_text_rules_not_passed),
	    cmocka_unit_test(test_gate_errors_name_the_place),
	    cmocka_unit_test(test_invalid_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
