/* Unit tests for src/contract/compat.c: one case per change class, each
 * comparing two contracts written inline that differ in that one rule and
 * checking the code, the breaking flag and the message (old -> new); no
 * change between identical contracts or ones that differ only in their
 * descriptions and examples; and docs/QUALITY.md's table agrees with the
 * code's classification, row by row. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/compat.h"
#include "contract/contract.h"
#include "core/error.h"

#define HEAD                                                                                                 \
	"apiVersion: v3.1.0\n"                                                                               \
	"kind: DataContract\n"                                                                               \
	"id: t\n"                                                                                            \
	"version: 1.0.0\n"                                                                                   \
	"status: active\n"                                                                                   \
	"schema:\n"                                                                                          \
	"  - name: rec\n"                                                                                    \
	"    properties:\n"

/* --- helpers --- */

static kiln_contract *load(const char *name, const char *text)
{
	kiln_contract *k = NULL;

	if (kiln_contract_load_buffer(&k, name, text, strlen(text), NULL) != 0)
		fail_msg("%s does not load: %s", name, kiln_error_last());
	return k;
}

static kiln_contract_compat *diff_texts(const char *old_text, const char *new_text)
{
	kiln_contract *o = load("old.yaml", old_text), *n = load("new.yaml", new_text);
	kiln_contract_compat *d = NULL;

	assert_int_equal(kiln_contract_compat_diff(&d, o, n), 0);
	assert_non_null(d);
	kiln_contract_free(o);
	kiln_contract_free(n);
	return d;
}

/* Two contracts made of HEAD and a properties block each. */
static kiln_contract_compat *diff_props(const char *old_props, const char *new_props)
{
	char *o = malloc(strlen(HEAD) + strlen(old_props) + 1),
	     *n = malloc(strlen(HEAD) + strlen(new_props) + 1);
	kiln_contract_compat *d;

	assert_non_null(o);
	assert_non_null(n);
	strcpy(o, HEAD);
	strcat(o, old_props);
	strcpy(n, HEAD);
	strcat(n, new_props);
	d = diff_texts(o, n);
	free(o);
	free(n);
	return d;
}

static void dump(const kiln_contract_compat *d)
{
	for (size_t i = 0; i < d->count; i++)
		print_message("  [%zu] %s %s %s: %s\n", i, d->changes[i].breaking ? "breaking" : "compatible",
		              d->changes[i].path, d->changes[i].code, d->changes[i].message);
}

/* The change at `path` with `code`: its breaking flag must be `breaking` and,
 * when message is not NULL, its message exactly that. */
static void expect(const kiln_contract_compat *d, const char *path, const char *code, bool breaking,
                   const char *message)
{
	for (size_t i = 0; i < d->count; i++) {
		const kiln_contract_change *c = &d->changes[i];
		if (strcmp(c->path, path) != 0 || strcmp(c->code, code) != 0)
			continue;
		if (c->breaking != breaking)
			fail_msg("%s %s: breaking is %d, want %d", path, code, c->breaking, breaking);
		if (message && strcmp(c->message, message) != 0)
			fail_msg("%s %s: message \"%s\", want \"%s\"", path, code, c->message, message);
		assert_int_equal(kiln_contract_compat_code_breaking(code), breaking);
		return;
	}
	dump(d);
	fail_msg("no change %s at \"%s\"", code, path);
}

static void expect_count(const kiln_contract_compat *d, size_t count, size_t breaking)
{
	if (d->count != count || d->breaking != breaking) {
		dump(d);
		fail_msg("%zu changes (%zu breaking), want %zu (%zu breaking)", d->count, d->breaking, count,
		         breaking);
	}
}

/* old and new properties differ in exactly one change: path, code, flag, message. */
static void one_change(const char *old_props, const char *new_props, const char *path, const char *code,
                       bool breaking, const char *message)
{
	kiln_contract_compat *d = diff_props(old_props, new_props);

	expect(d, path, code, breaking, message);
	expect_count(d, 1, breaking ? 1 : 0);
	kiln_contract_compat_free(d);
}

/* One change old -> new, and the reverse change new -> old. */
static void both_ways(const char *a, const char *b, const char *path, const char *code_ab, bool breaking_ab,
                      const char *message_ab, const char *code_ba, bool breaking_ba, const char *message_ba)
{
	one_change(a, b, path, code_ab, breaking_ab, message_ab);
	one_change(b, a, path, code_ba, breaking_ba, message_ba);
}

#define STR(name, extra)                                                                                     \
	"      - name: " name "\n"                                                                           \
	"        logicalType: string\n" extra

/* --- no change --- */

static void test_identical(void **state)
{
	kiln_contract *k = NULL;
	kiln_contract_compat *d = NULL;

	(void)state;
	if (kiln_contract_load(&k, KILN_SRCDIR "/contracts/user-events.yaml", NULL) != 0)
		fail_msg("%s", kiln_error_last());
	assert_int_equal(kiln_contract_compat_diff(&d, k, k), 0);
	expect_count(d, 0, 0);
	kiln_contract_compat_free(d);
	kiln_contract_free(k);

	d = diff_props(STR("a", ""), STR("a", ""));
	expect_count(d, 0, 0);
	kiln_contract_compat_free(d);
	kiln_contract_compat_free(NULL);
}

/* Descriptions, examples, tags, businessName, property order... decide
 * neither validation nor curation: no change, and no example in any output. */
static void test_description_only(void **state)
{
	static const char old_text[] = HEAD "      - name: email\n"
	                                    "        logicalType: string\n"
	                                    "        description: The user's address.\n"
	                                    "        examples: [alice@example.com]\n"
	                                    "      - name: n\n"
	                                    "        logicalType: integer\n";
	static const char new_text[] = "apiVersion: v3.1.0\n"
	                               "kind: DataContract\n"
	                               "id: t\n"
	                               "version: 1.0.0\n"
	                               "status: active\n"
	                               "description:\n"
	                               "  purpose: Now documented.\n"
	                               "tags: [docs]\n"
	                               "schema:\n"
	                               "  - name: rec\n"
	                               "    description: One record.\n"
	                               "    properties:\n"
	                               "      - name: n\n"
	                               "        logicalType: integer\n"
	                               "        businessName: A number\n"
	                               "      - name: email\n"
	                               "        logicalType: string\n"
	                               "        description: Where we write to the user.\n"
	                               "        examples: [bob@example.org]\n";
	kiln_contract_compat *d;

	(void)state;
	d = diff_texts(old_text, new_text);
	expect_count(d, 0, 0);
	kiln_contract_compat_free(d);
}

/* --- the contract's own keys --- */

static char *contract_text(const char *api, const char *id, const char *version, const char *status,
                           const char *extra, const char *schema_name)
{
	char *s = NULL;

	assert_true(asprintf(&s,
	                     "apiVersion: %s\nkind: DataContract\nid: %s\nversion: %s\nstatus: %s\n%s"
	                     "schema:\n  - name: %s\n    properties:\n      - name: a\n        logicalType: "
	                     "string\n",
	                     api, id, version, status, extra, schema_name) > 0);
	return s;
}

static void contract_change(char *o, char *n, const char *code, bool breaking, const char *message)
{
	kiln_contract_compat *d = diff_texts(o, n);

	expect(d, "", code, breaking, message);
	expect_count(d, 1, breaking ? 1 : 0);
	kiln_contract_compat_free(d);
	free(o);
	free(n);
}

static void test_contract_keys(void **state)
{
	static const char allow[] = "customProperties:\n  - property: unknownFields\n    value: allow\n";

	(void)state;
	contract_change(contract_text("v3.1.0", "t", "1.0.0", "active", "", "rec"),
	                contract_text("v3.1.0", "u", "1.0.0", "active", "", "rec"), "contract_id_changed",
	                true, "id t -> u");
	contract_change(contract_text("v3.1.0", "t", "1.0.0", "active", "", "rec"),
	                contract_text("v3.1.0", "t", "1.0.0", "active", "", "event"), "schema_name_changed",
	                true, "schema rec -> event");
	contract_change(contract_text("v3.1.0", "t", "1.0.0", "active", allow, "rec"),
	                contract_text("v3.1.0", "t", "1.0.0", "active", "", "rec"),
	                "unknown_fields_tightened", true, "unknownFields allow -> reject");
	contract_change(contract_text("v3.1.0", "t", "1.0.0", "active", "", "rec"),
	                contract_text("v3.1.0", "t", "1.0.0", "active", allow, "rec"),
	                "unknown_fields_loosened", false, "unknownFields reject -> allow");
	contract_change(contract_text("v3.1.0", "t", "1.0.0", "active", "", "rec"),
	                contract_text("v3.1.0", "t", "1.1.0", "active", "", "rec"),
	                "contract_version_changed", false, "version 1.0.0 -> 1.1.0");
	contract_change(contract_text("v3.0.2", "t", "1.0.0", "active", "", "rec"),
	                contract_text("v3.1.0", "t", "1.0.0", "active", "", "rec"), "api_version_changed",
	                false, "apiVersion v3.0.2 -> v3.1.0");
	contract_change(contract_text("v3.1.0", "t", "1.0.0", "active", "", "rec"),
	                contract_text("v3.1.0", "t", "1.0.0", "active", "name: Events\n", "rec"),
	                "contract_name_changed", false, "name none -> Events");
	contract_change(contract_text("v3.1.0", "t", "1.0.0", "active", "", "rec"),
	                contract_text("v3.1.0", "t", "1.0.0", "deprecated", "", "rec"),
	                "contract_status_changed", false, "status active -> deprecated");
}

/* --- fields --- */

static void test_field_removed_added(void **state)
{
	kiln_contract_compat *d;

	(void)state;
	one_change(STR("a", "") STR("b", ""), STR("a", ""), "b", "field_removed", true,
	           "field removed (string)");
	one_change(STR("a", ""), STR("a", "") STR("b", ""), "b", "field_added", false,
	           "field added (string, optional)");
	one_change(STR("a", ""), STR("a", "") STR("b", "        required: true\n"), "b",
	           "field_added_required", true, "field added (string, required)");

	/* a rename: removed (with the hint) and added */
	d = diff_props(STR("a", "") STR("b", ""), STR("a", "") STR("c", ""));
	expect(d, "b", "field_removed", true,
	       "field removed (string); renamed to c? (added at its position, same type)");
	expect(d, "c", "field_added", false, "field added (string, optional)");
	expect_count(d, 2, 1);
	kiln_contract_compat_free(d);

	/* no hint when the field at its position has another type */
	d = diff_props(STR("a", "") STR("b", ""),
	               STR("a", "") "      - name: c\n        logicalType: integer\n");
	expect(d, "b", "field_removed", true, "field removed (string)");
	expect_count(d, 2, 1);
	kiln_contract_compat_free(d);
}

static void test_type(void **state)
{
	(void)state;
	both_ways(STR("a", ""), "      - name: a\n        logicalType: integer\n", "a", "type_changed", true,
	          "type string -> integer", "type_changed", true, "type integer -> string");
	both_ways("      - name: a\n        logicalType: number\n",
	          "      - name: a\n        logicalType: integer\n", "a", "type_narrowed", true,
	          "type number -> integer", "type_widened", true, "type integer -> number");
	both_ways("      - name: a\n", STR("a", ""), "a", "type_narrowed", true, "type any -> string",
	          "type_widened", true, "type string -> any");
	/* the old type's rules go with it: one change, not one per rule */
	one_change(STR("a", "        logicalTypeOptions:\n          maxLength: 3\n"),
	           "      - name: a\n        logicalType: integer\n        logicalTypeOptions:\n          "
	           "minimum: 0\n",
	           "a", "type_changed", true, "type string -> integer");
}

static void test_required(void **state)
{
	(void)state;
	both_ways(STR("a", ""), STR("a", "        required: true\n"), "a", "became_required", true,
	          "required false -> true", "became_optional", false, "required true -> false");
}

static void test_enum(void **state)
{
	kiln_contract_compat *d;

	(void)state;
	both_ways(STR("a", ""), STR("a", "        enum: [x, y]\n"), "a", "enum_added", true,
	          "enum none -> [\"x\", \"y\"]", "enum_removed", false, "enum [\"x\", \"y\"] -> none");
	both_ways(STR("a", "        enum: [x, y, z]\n"), STR("a", "        enum: [x]\n"), "a",
	          "enum_values_removed", true, "enum values removed: \"y\", \"z\"", "enum_values_added",
	          false, "enum values added: \"y\", \"z\"");
	/* the custom-property spelling compiles to the same rule */
	d = diff_props(
	    STR("a", "        enum: [x, y]\n"),
	    STR("a", "        customProperties:\n          - property: enum\n            value: [y, x]\n"));
	expect_count(d, 0, 0);
	kiln_contract_compat_free(d);
	/* numbers compare by value: 1 and 1.0 are one value */
	d = diff_props("      - name: n\n        logicalType: number\n        enum: [1, 2.5]\n",
	               "      - name: n\n        logicalType: number\n        enum: [1.0, 2.5, 3]\n");
	expect(d, "n", "enum_values_added", false, "enum value added: 3");
	expect_count(d, 1, 0);
	kiln_contract_compat_free(d);
	/* both at once: one breaking, one compatible change */
	d = diff_props(STR("a", "        enum: [x, y]\n"), STR("a", "        enum: [x, z]\n"));
	expect(d, "a", "enum_values_removed", true, "enum value removed: \"y\"");
	expect(d, "a", "enum_values_added", false, "enum value added: \"z\"");
	expect_count(d, 2, 1);
	kiln_contract_compat_free(d);
}

#define OPTS(lines) "        logicalTypeOptions:\n" lines

static void test_pattern(void **state)
{
	(void)state;
	both_ways(STR("a", ""), STR("a", OPTS("          pattern: \"^[A-Z]{2}$\"\n")), "a", "pattern_added",
	          true, "pattern none -> \"^[A-Z]{2}$\"", "pattern_removed", false,
	          "pattern \"^[A-Z]{2}$\" -> none");
	one_change(STR("a", OPTS("          pattern: \"^[A-Z]{2}$\"\n")),
	           STR("a", OPTS("          pattern: \"^[A-Z]{3}$\"\n")), "a", "pattern_changed", true,
	           "pattern \"^[A-Z]{2}$\" -> \"^[A-Z]{3}$\"");
	/* a long pattern is shown whole */
	char long_pattern[2001], *a = NULL, *b = NULL;
	memset(long_pattern, 'x', 2000);
	long_pattern[2000] = '\0';
	assert_true(asprintf(&a, STR("a", "")) > 0);
	assert_true(asprintf(&b, STR("a", OPTS("          pattern: \"%s\"\n")), long_pattern) > 0);
	kiln_contract_compat *d = diff_props(a, b);
	expect_count(d, 1, 1);
	assert_int_equal(strlen(d->changes[0].message), strlen("pattern none -> \"\"") + 2000);
	kiln_contract_compat_free(d);
	free(a);
	free(b);
	/* a loosened pattern is a changed pattern too: kiln does not compare languages */
	one_change(STR("a", OPTS("          pattern: \"^a$\"\n")),
	           STR("a", OPTS("          pattern: \"^a|b$\"\n")), "a", "pattern_changed", true, NULL);
}

static void test_format(void **state)
{
	(void)state;
	both_ways(STR("a", ""), STR("a", OPTS("          format: email\n")), "a", "format_added", true,
	          "format none -> email", "format_removed", false, "format email -> none");
	one_change(STR("a", OPTS("          format: ipv4\n")), STR("a", OPTS("          format: ipv6\n")),
	           "a", "format_changed", true, "format ipv4 -> ipv6");
}

#define INT(name, opts) "      - name: " name "\n        logicalType: integer\n" opts

static void test_integer_format(void **state)
{
	(void)state;
	both_ways(INT("n", OPTS("          format: i64\n")), INT("n", OPTS("          format: i32\n")), "n",
	          "integer_format_narrowed", true, "format i64 -> i32", "integer_format_widened", false,
	          "format i32 -> i64");
	both_ways(INT("n", ""), INT("n", OPTS("          format: u8\n")), "n", "integer_format_narrowed",
	          true, "format none -> u8", "integer_format_widened", false, "format u8 -> none");
	/* u8 fits in i16; i8 and u8 hold values the other lacks */
	one_change(INT("n", OPTS("          format: i16\n")), INT("n", OPTS("          format: u8\n")), "n",
	           "integer_format_narrowed", true, NULL);
	one_change(INT("n", OPTS("          format: i8\n")), INT("n", OPTS("          format: u8\n")), "n",
	           "integer_format_changed", true, "format i8 -> u8");
}

static void test_bounds(void **state)
{
	kiln_contract_compat *d;

	(void)state;
	both_ways(INT("n", OPTS("          minimum: 0\n")), INT("n", OPTS("          minimum: 10\n")), "n",
	          "bounds_tightened", true, "minimum >= 0 -> >= 10", "bounds_loosened", false,
	          "minimum >= 10 -> >= 0");
	both_ways(INT("n", ""), INT("n", OPTS("          maximum: 100\n")), "n", "bounds_tightened", true,
	          "maximum none -> <= 100", "bounds_loosened", false, "maximum <= 100 -> none");
	/* an exclusive bound at the same value admits less */
	one_change(
	    "      - name: x\n        logicalType: number\n" OPTS("          maximum: 1000000\n"),
	    "      - name: x\n        logicalType: number\n" OPTS("          exclusiveMaximum: 1000000\n"),
	    "x", "bounds_tightened", true, "maximum <= 1000000 -> < 1000000");
	one_change("      - name: x\n        logicalType: number\n" OPTS("          minimum: 0.5\n"),
	           "      - name: x\n        logicalType: number\n" OPTS("          minimum: 0.25\n"), "x",
	           "bounds_loosened", false, "minimum >= 0.5 -> >= 0.25");
	/* on integers, > 5 is >= 6: no change */
	d = diff_props(INT("n", OPTS("          exclusiveMinimum: 5\n")),
	               INT("n", OPTS("          minimum: 6\n")));
	expect_count(d, 0, 0);
	kiln_contract_compat_free(d);
	/* dates and timestamps in RFC 3339 */
	one_change("      - name: d\n        logicalType: date\n" OPTS("          minimum: \"2015-01-01\"\n"),
	           "      - name: d\n        logicalType: date\n" OPTS("          minimum: \"2020-02-29\"\n"),
	           "d", "bounds_tightened", true, "minimum >= 2015-01-01 -> >= 2020-02-29");
	one_change("      - name: t\n        logicalType: timestamp\n" OPTS(
	               "          exclusiveMaximum: \"2100-01-01T00:00:00Z\"\n"),
	           "      - name: t\n        logicalType: timestamp\n" OPTS(
	               "          exclusiveMaximum: \"2030-06-01T12:30:00.5+02:00\"\n"),
	           "t", "bounds_tightened", true,
	           "maximum < 2100-01-01T00:00:00Z -> < 2030-06-01T10:30:00.5Z");
	one_change("      - name: t\n        logicalType: time\n" OPTS("          minimum: \"08:00:00Z\"\n"),
	           "      - name: t\n        logicalType: time\n" OPTS("          minimum: \"07:00:00Z\"\n"),
	           "t", "bounds_loosened", false, "minimum >= 08:00:00Z -> >= 07:00:00Z");
}

static void test_multiple_of(void **state)
{
#define NUM(opts) "      - name: x\n        logicalType: number\n" opts
	(void)state;
	both_ways(NUM(""), NUM(OPTS("          multipleOf: 0.01\n")), "x", "multiple_of_tightened", true,
	          "multipleOf none -> 0.01", "multiple_of_loosened", false, "multipleOf 0.01 -> none");
	both_ways(NUM(OPTS("          multipleOf: 0.01\n")), NUM(OPTS("          multipleOf: 0.05\n")), "x",
	          "multiple_of_tightened", true, "multipleOf 0.01 -> 0.05", "multiple_of_loosened", false,
	          "multipleOf 0.05 -> 0.01");
	one_change(NUM(OPTS("          multipleOf: 0.02\n")), NUM(OPTS("          multipleOf: 0.03\n")), "x",
	           "multiple_of_changed", true, "multipleOf 0.02 -> 0.03");
#undef NUM
}

static void test_counts(void **state)
{
	static const char arr[] = "      - name: l\n        logicalType: array\n";
	static const char obj[] = "      - name: o\n        logicalType: object\n";
	char a[512], b[512];

	(void)state;
	both_ways(STR("a", OPTS("          maxLength: 64\n")), STR("a", OPTS("          maxLength: 32\n")),
	          "a", "length_tightened", true, "maxLength 64 -> 32", "length_loosened", false,
	          "maxLength 32 -> 64");
	both_ways(STR("a", ""), STR("a", OPTS("          minLength: 1\n")), "a", "length_tightened", true,
	          "minLength none -> 1", "length_loosened", false, "minLength 1 -> none");
	snprintf(a, sizeof(a), "%s", arr);
	snprintf(b, sizeof(b), "%s" OPTS("          maxItems: 16\n"), arr);
	both_ways(a, b, "l", "items_tightened", true, "maxItems none -> 16", "items_loosened", false,
	          "maxItems 16 -> none");
	snprintf(a, sizeof(a), "%s" OPTS("          minItems: 1\n"), arr);
	snprintf(b, sizeof(b), "%s" OPTS("          minItems: 2\n"), arr);
	both_ways(a, b, "l", "items_tightened", true, "minItems 1 -> 2", "items_loosened", false,
	          "minItems 2 -> 1");
	snprintf(a, sizeof(a), "%s", obj);
	snprintf(b, sizeof(b), "%s" OPTS("          maxProperties: 4\n"), obj);
	both_ways(a, b, "o", "property_count_tightened", true, "maxProperties none -> 4",
	          "property_count_loosened", false, "maxProperties 4 -> none");
	/* minLength 0 admits what no minLength admits: no change */
	kiln_contract_compat *d =
	    diff_props(STR("a", OPTS("          minLength: 0\n          maxLength: 5\n")),
	               STR("a", OPTS("          maxLength: 5\n")));
	expect_count(d, 0, 0);
	kiln_contract_compat_free(d);
}

static void test_unique_items(void **state)
{
	static const char a[] = "      - name: l\n        logicalType: array\n";
	static const char b[] =
	    "      - name: l\n        logicalType: array\n" OPTS("          uniqueItems: true\n");

	(void)state;
	both_ways(a, b, "l", "unique_items_added", true, "uniqueItems false -> true", "unique_items_removed",
	          false, "uniqueItems true -> false");
}

#define CUSTOM(prop, value)                                                                                  \
	"        customProperties:\n          - property: " prop "\n            value: " value "\n"

static void test_classification_and_pseudonymisation(void **state)
{
	kiln_contract_compat *d;

	(void)state;
	/* public -> restricted: the mode stays keep */
	one_change(STR("a", "        classification: public\n"),
	           STR("a", "        classification: restricted\n"), "a", "classification_changed", true,
	           "classification public -> restricted");
	one_change(STR("a", ""), STR("a", "        classification: internal\n"), "a",
	           "classification_changed", true, "classification none -> internal");
	/* pii -> public: the value was a token, now it is kept */
	d = diff_props(STR("a", "        classification: pii\n"),
	               STR("a", "        classification: public\n"));
	expect(d, "a", "classification_changed", true, "classification pii -> public");
	expect(d, "a", "pseudonymisation_changed", true, "pseudonymisation token -> keep");
	expect_count(d, 2, 2);
	kiln_contract_compat_free(d);
	/* the same mode written out: no change */
	d = diff_props(STR("a", "        classification: pii\n"),
	               STR("a", "        classification: PII\n" CUSTOM("pseudonymisation", "token")));
	expect_count(d, 0, 0);
	kiln_contract_compat_free(d);

	one_change(STR("a", "        classification: pii\n"),
	           STR("a", "        classification: pii\n" CUSTOM("pseudonymisation", "redact")), "a",
	           "pseudonymisation_changed", true, "pseudonymisation token -> redact");
	/* tokens no longer join: the domain defaults to the field name */
	one_change(STR("user_id", "        classification: pii\n"),
	           STR("user_id", "        classification: pii\n" CUSTOM("pseudonymDomain", "user")),
	           "user_id", "pseudonym_domain_changed", true, "pseudonymDomain user_id -> user");
	/* a domain on a field kept as is changes nothing */
	d = diff_props(STR("a", ""), STR("a", CUSTOM("pseudonymDomain", "user")));
	expect_count(d, 0, 0);
	kiln_contract_compat_free(d);
	both_ways(STR("m", ""), STR("m", CUSTOM("piiScan", "true")), "m", "pii_scan_changed", true,
	          "piiScan false -> true", "pii_scan_changed", true, "piiScan true -> false");
}

static void test_keys(void **state)
{
	(void)state;
	both_ways(STR("a", ""), STR("a", "        unique: true\n"), "a", "unique_added", true,
	          "unique false -> true", "unique_removed", false, "unique true -> false");
	both_ways(STR("a", ""), STR("a", "        primaryKey: true\n"), "a", "primary_key_added", true,
	          "primaryKey false -> true", "primary_key_removed", false, "primaryKey true -> false");
	one_change(STR("a", "        primaryKey: true\n        primaryKeyPosition: 1\n"),
	           STR("a", "        primaryKey: true\n        primaryKeyPosition: 2\n"), "a",
	           "primary_key_position_changed", true, "primaryKeyPosition 1 -> 2");
}

/* Objects and array items recurse, each change at its field path. */
static void test_nested(void **state)
{
	static const char old_props[] = "      - name: device\n"
	                                "        logicalType: object\n"
	                                "        properties:\n"
	                                "          - name: os\n"
	                                "            logicalType: string\n"
	                                "          - name: model\n"
	                                "            logicalType: string\n"
	                                "      - name: tags\n"
	                                "        logicalType: array\n"
	                                "        items:\n"
	                                "          logicalType: string\n"
	                                "          logicalTypeOptions:\n"
	                                "            maxLength: 32\n"
	                                "      - name: any_list\n"
	                                "        logicalType: array\n";
	static const char new_props[] = "      - name: device\n"
	                                "        logicalType: object\n"
	                                "        properties:\n"
	                                "          - name: os\n"
	                                "            logicalType: integer\n"
	                                "          - name: ram\n"
	                                "            logicalType: integer\n"
	                                "      - name: tags\n"
	                                "        logicalType: array\n"
	                                "        items:\n"
	                                "          logicalType: string\n"
	                                "          logicalTypeOptions:\n"
	                                "            maxLength: 64\n"
	                                "      - name: any_list\n"
	                                "        logicalType: array\n"
	                                "        items:\n"
	                                "          logicalType: string\n";
	kiln_contract_compat *d;

	(void)state;
	d = diff_props(old_props, new_props);
	expect(d, "device.os", "type_changed", true, "type string -> integer");
	expect(d, "device.model", "field_removed", true, NULL);
	expect(d, "device.ram", "field_added", false, "field added (integer, optional)");
	expect(d, "tags[]", "length_loosened", false, "maxLength 32 -> 64");
	expect(d, "any_list[]", "type_narrowed", true, "type any -> string");
	expect_count(d, 5, 3);
	/* depth first in old's order, each object's added fields after its others */
	assert_string_equal(d->changes[0].path, "device.os");
	assert_string_equal(d->changes[1].path, "device.model");
	assert_string_equal(d->changes[2].path, "device.ram");
	assert_string_equal(d->changes[3].path, "tags[]");
	kiln_contract_compat_free(d);

	/* required through the object's logicalTypeOptions.required list */
	d = diff_props("      - name: o\n        logicalType: object\n        properties:\n"
	               "          - name: k\n            logicalType: string\n",
	               "      - name: o\n        logicalType: object\n"
	               "        logicalTypeOptions:\n          required: [k]\n        properties:\n"
	               "          - name: k\n            logicalType: string\n");
	expect(d, "o.k", "became_required", true, "required false -> true");
	expect_count(d, 1, 1);
	kiln_contract_compat_free(d);
}

/* user-events.yaml and an edited copy: every change the edits make. */
static void test_user_events_edited(void **state)
{
	FILE *f;
	char *text, *edited;
	long len;
	kiln_contract *o, *n;
	kiln_contract_compat *d = NULL;

	(void)state;
	assert_non_null(f = fopen(KILN_SRCDIR "/contracts/user-events.yaml", "rb"));
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	assert_true((len = ftell(f)) > 0);
	rewind(f);
	assert_non_null(text = calloc(1, (size_t)len + 1));
	assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	assert_non_null(edited = strdup(text));
	/* version 1.2.0 -> 1.3.0; country's pattern ^[A-Z]{2}$ -> ^[A-Z]{3}$ (same length) */
	char *p = strstr(edited, "version: 1.2.0");
	assert_non_null(p);
	p[strlen("version: 1.")] = '3';
	assert_non_null(p = strstr(edited, "^[A-Z]{2}$"));
	p[7] = '3';
	o = load("user-events.yaml", text);
	n = load("user-events-next.yaml", edited);
	assert_int_equal(kiln_contract_compat_diff(&d, o, n), 0);
	expect(d, "", "contract_version_changed", false, "version 1.2.0 -> 1.3.0");
	expect(d, "country", "pattern_changed", true, "pattern \"^[A-Z]{2}$\" -> \"^[A-Z]{3}$\"");
	expect_count(d, 2, 1);
	assert_string_equal(d->changes[0].path, ""); /* the contract's own keys first */
	kiln_contract_compat_free(d);
	kiln_contract_free(o);
	kiln_contract_free(n);
	free(text);
	free(edited);
}

/* A message stays on one line whatever the schema text holds. */
static void test_one_line(void **state)
{
	kiln_contract_compat *d;

	(void)state;
	d = diff_props(STR("a", "        enum: [x]\n"),
	               STR("a", "        enum: [x, \"two\\nlines \\\"q\\\"\"]\n"));
	expect(d, "a", "enum_values_added", false, "enum value added: \"two\\x0alines \\\"q\\\"\"");
	kiln_contract_compat_free(d);
}

/* docs/QUALITY.md's "Change codes" table lists every code once, as the
 * code classifies it: "| `code` | breaking |" or "| `code` | compatible |". */
static void test_docs_table(void **state)
{
	FILE *f;
	char line[2048];
	size_t known = 0, listed = 0;
	unsigned char seen[256] = {0};

	(void)state;
	assert_non_null(f = fopen(KILN_SRCDIR "/docs/QUALITY.md", "r"));
	bool in_table = false;
	while (fgets(line, sizeof(line), f)) {
		char code[128], cls[32];
		if (line[0] == '#') {
			in_table = strncmp(line, "### Change codes", 16) == 0;
			continue;
		}
		if (!in_table || strncmp(line, "| `", 3) != 0)
			continue;
		if (sscanf(line, "| `%127[a-z_]` | %31[a-z] |", code, cls) != 2)
			fail_msg("docs/QUALITY.md: a row of the codes table reads otherwise: %s", line);
		size_t i = 0;
		while (kiln_contract_compat_code(i) && strcmp(kiln_contract_compat_code(i), code) != 0)
			i++;
		if (!kiln_contract_compat_code(i))
			fail_msg("docs/QUALITY.md lists %s, which kiln does not know", code);
		assert_true(i < sizeof(seen));
		if (seen[i]++)
			fail_msg("docs/QUALITY.md lists %s twice", code);
		if (strcmp(cls, kiln_contract_compat_code_breaking(code) ? "breaking" : "compatible") != 0)
			fail_msg("docs/QUALITY.md: %s is %s, the code says otherwise", code, cls);
		listed++;
	}
	fclose(f);
	while (kiln_contract_compat_code(known))
		known++;
	assert_int_equal(listed, known);
	assert_null(kiln_contract_compat_code(known));
	assert_false(kiln_contract_compat_code_breaking("no_such_code"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_identical),
	    cmocka_unit_test(test_description_only),
	    cmocka_unit_test(test_contract_keys),
	    cmocka_unit_test(test_field_removed_added),
	    cmocka_unit_test(test_type),
	    cmocka_unit_test(test_required),
	    cmocka_unit_test(test_enum),
	    cmocka_unit_test(test_pattern),
	    cmocka_unit_test(test_format),
	    cmocka_unit_test(test_integer_format),
	    cmocka_unit_test(test_bounds),
	    cmocka_unit_test(test_multiple_of),
	    cmocka_unit_test(test_counts),
	    cmocka_unit_test(test_unique_items),
	    cmocka_unit_test(test_classification_and_pseudonymisation),
	    cmocka_unit_test(test_keys),
	    cmocka_unit_test(test_nested),
	    cmocka_unit_test(test_user_events_edited),
	    cmocka_unit_test(test_one_line),
	    cmocka_unit_test(test_docs_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
