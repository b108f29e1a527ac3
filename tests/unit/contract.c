/* Unit tests for src/contract/contract.c: compiling contracts/user-events.yaml
 * into the field table, the digest, and every rejected contract, each error
 * checked for its "file:line:col: key.path" prefix and its message. Most
 * contracts are built around a properties block: the header below puts the
 * first property on line 9, its "name" key at column 9. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "core/error.h"
#include "core/json.h"

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

/* --- helpers --- */

static char *with_properties(const char *props)
{
	size_t head = strlen(HEAD SCHEMA_OPEN), len = strlen(props);
	char *text = malloc(head + len + 1);

	assert_non_null(text);
	memcpy(text, HEAD SCHEMA_OPEN, head);
	memcpy(text + head, props, len + 1);
	return text;
}

static kiln_contract *load_opts(const char *text, const kiln_contract_options *options)
{
	kiln_contract *k = NULL;
	int rc = kiln_contract_load_buffer(&k, "t.yaml", text, strlen(text), options);

	if (rc != 0)
		fail_msg("unexpected failure (%d): %s", rc, kiln_error_last());
	assert_non_null(k);
	return k;
}

static kiln_contract *load_ok(const char *text)
{
	return load_opts(text, NULL);
}

static kiln_contract *props_ok(const char *props)
{
	char *text = with_properties(props);
	kiln_contract *k = load_ok(text);

	free(text);
	return k;
}

/* The error must start with `prefix` ("t.yaml:9:9: schema[0]...") and
 * contain `word`. */
static void load_fails_opts(const char *text, const kiln_contract_options *options, const char *prefix,
                            const char *word)
{
	kiln_contract *k = (kiln_contract *)1;
	int rc;

	kiln_error_clear();
	rc = kiln_contract_load_buffer(&k, "t.yaml", text, strlen(text), options);
	if (rc != KILN_EINVALID)
		fail_msg("expected KILN_EINVALID, got %d (%s)", rc, kiln_error_last());
	assert_null(k);
	assert_int_equal(kiln_error_last_code(), KILN_EINVALID);
	if (strncmp(kiln_error_last(), prefix, strlen(prefix)) != 0)
		fail_msg("error \"%s\" does not start with \"%s\"", kiln_error_last(), prefix);
	if (!strstr(kiln_error_last(), word))
		fail_msg("error \"%s\" does not mention \"%s\"", kiln_error_last(), word);
}

static void load_fails(const char *text, const char *prefix, const char *word)
{
	load_fails_opts(text, NULL, prefix, word);
}

static void props_fail(const char *props, const char *prefix, const char *word)
{
	char *text = with_properties(props);

	load_fails(text, prefix, word);
	free(text);
}

static const kiln_field *child(const kiln_field *object, const char *name)
{
	const kiln_field *f =
	    kiln_field_child(object, name, strlen(name), kiln_json_hash(name, strlen(name)));

	if (!f)
		fail_msg("no field \"%s\"", name);
	return f;
}

static void assert_bound(const kiln_bound *b, long double value, bool exclusive)
{
	assert_true(b->set);
	if (b->exclusive != exclusive)
		fail_msg("bound %.6Lf: exclusive is %d, want %d", b->value, b->exclusive, exclusive);
	if (fabsl(b->value - value) > 1e-9L * fmaxl(1.0L, fabsl(value)))
		fail_msg("bound is %.9Lf, want %.9Lf", b->value, value);
}

static void assert_enum(const kiln_field *f, size_t i, const char *value)
{
	assert_true(i < f->enum_count);
	assert_int_equal(f->enum_lens[i], strlen(value));
	assert_memory_equal(f->enum_values[i], value, strlen(value));
}

/* --- the example contract --- */

static void test_user_events(void **state)
{
	kiln_contract *k = NULL;
	const kiln_field *root, *f, *device;

	(void)state;
	if (kiln_contract_load(&k, KILN_SRCDIR "/contracts/user-events.yaml", NULL) != 0)
		fail_msg("%s", kiln_error_last());
	assert_non_null(k);
	assert_string_equal(k->api_version, "v3.1.0");
	assert_string_equal(k->kind, "DataContract");
	assert_string_equal(k->id, "user-events");
	assert_string_equal(k->name, "User events");
	assert_string_equal(k->version, "1.2.0");
	assert_string_equal(k->status, "active");
	assert_string_equal(k->schema_name, "user_event");
	assert_int_equal(k->unknown_fields, KILN_UNKNOWN_REJECT);
	assert_non_null(strstr(k->file, "contracts/user-events.yaml"));
	/* two patterns: country and device.os_version */
	assert_int_equal(k->pattern_count, 2);

	root = k->root;
	assert_non_null(root);
	assert_int_equal(root->type, KILN_LTYPE_OBJECT);
	assert_int_equal(root->child_count, 15);
	/* event_id, event_type, occurred_at, user_id, consent, device */
	assert_int_equal(root->required_count, 6);
	/* 15 at the root, 3 in device */
	assert_int_equal(k->seen_slots, 18);

	f = child(root, "event_id");
	assert_int_equal(f->type, KILN_LTYPE_STRING);
	assert_true(f->required && f->unique && f->primary_key);
	assert_int_equal(f->primary_key_position, 1);
	assert_int_equal(f->format, KILN_FORMAT_UUID);
	assert_int_equal(f->position, 0);
	assert_string_equal(f->path, "event_id");
	assert_int_equal(f->pseudo_mode, KILN_PSEUDO_KEEP);
	assert_null(f->classification);

	f = child(root, "event_type");
	assert_true(f->required);
	assert_int_equal(f->enum_count, 6);
	assert_enum(f, 0, "page_view");
	assert_enum(f, 5, "logout");
	assert_int_equal(f->enum_kinds[0], KILN_ENUM_STRING);

	f = child(root, "occurred_at");
	assert_int_equal(f->type, KILN_LTYPE_TIMESTAMP);
	assert_bound(&f->minimum, 1420070400.0L, false);
	assert_false(f->maximum.set);

	f = child(root, "received_date");
	assert_int_equal(f->type, KILN_LTYPE_DATE);
	assert_false(f->required);
	assert_bound(&f->minimum, 1420070400.0L, false);
	assert_bound(&f->maximum, 4102444800.0L, true); /* 2100-01-01 */

	f = child(root, "user_id");
	assert_true(f->required);
	assert_string_equal(f->classification, "pii");
	assert_int_equal(f->pseudo_mode, KILN_PSEUDO_TOKEN);
	assert_string_equal(f->pseudo_domain, "user");
	assert_int_equal(f->min_length, 1);
	assert_int_equal(f->max_length, 64);
	assert_false(f->pii_scan);

	f = child(root, "email");
	assert_int_equal(f->pseudo_mode, KILN_PSEUDO_KEEP_DOMAIN);
	assert_string_equal(f->pseudo_domain, "email"); /* defaults to the name */
	assert_int_equal(f->format, KILN_FORMAT_EMAIL);
	assert_int_equal(f->min_length, -1);
	assert_int_equal(f->max_length, 254);

	f = child(root, "client_ip");
	assert_int_equal(f->pseudo_mode, KILN_PSEUDO_TOKEN); /* classification pii */
	assert_string_equal(f->pseudo_domain, "ip");
	assert_int_equal(f->format, KILN_FORMAT_IPV4);

	f = child(root, "session_ms");
	assert_int_equal(f->type, KILN_LTYPE_INTEGER);
	assert_bound(&f->minimum, 0, false);
	assert_bound(&f->maximum, 86400000.0L, false);
	assert_true(f->multiple_of == 0);

	f = child(root, "amount");
	assert_int_equal(f->type, KILN_LTYPE_NUMBER);
	assert_bound(&f->minimum, 0, false);
	assert_bound(&f->maximum, 1000000.0L, true);
	assert_true(fabsl(f->multiple_of - 0.01L) < 1e-12L);

	f = child(root, "consent");
	assert_int_equal(f->type, KILN_LTYPE_BOOLEAN);
	assert_true(f->required);

	f = child(root, "country");
	assert_non_null(f->pattern);
	assert_string_equal(f->pattern_text, "^[A-Z]{2}$");

	f = child(root, "message");
	assert_true(f->pii_scan);
	assert_string_equal(f->classification, "restricted");
	assert_int_equal(f->pseudo_mode, KILN_PSEUDO_KEEP);
	assert_int_equal(f->max_length, 2000);

	f = child(root, "page_url");
	assert_int_equal(f->format, KILN_FORMAT_URI);

	device = child(root, "device");
	assert_int_equal(device->type, KILN_LTYPE_OBJECT);
	assert_true(device->required);
	assert_int_equal(device->child_count, 3);
	assert_int_equal(device->required_count, 1);
	assert_string_equal(device->path, "device");
	f = child(device, "os");
	assert_true(f->required);
	assert_string_equal(f->path, "device.os");
	assert_int_equal(f->enum_count, 6);
	assert_enum(f, 1, "ios");
	f = child(device, "os_version");
	assert_false(f->required);
	assert_string_equal(f->pattern_text, "^[0-9]+(\\.[0-9]+){0,3}$");
	assert_string_equal(f->path, "device.os_version");
	f = child(device, "model");
	assert_int_equal(f->max_length, 64);
	assert_int_equal(f->position, 2);

	f = child(root, "tags");
	assert_int_equal(f->type, KILN_LTYPE_ARRAY);
	assert_int_equal(f->max_items, 16);
	assert_int_equal(f->min_items, -1);
	assert_non_null(f->items);
	assert_null(f->items->name);
	assert_int_equal(f->items->type, KILN_LTYPE_STRING);
	assert_int_equal(f->items->min_length, 1);
	assert_int_equal(f->items->max_length, 32);
	assert_string_equal(f->items->path, "tags[]");

	kiln_contract_free(k);
}

static void test_field_child(void **state)
{
	kiln_contract *k;
	const kiln_field *root, *device;
	const char *name;

	(void)state;
	if (kiln_contract_load(&k, KILN_SRCDIR "/contracts/user-events.yaml", NULL) != 0)
		fail_msg("%s", kiln_error_last());
	root = k->root;
	for (size_t i = 0; i < root->child_count; i++) {
		name = root->children[i]->name;
		assert_ptr_equal(
		    kiln_field_child(root, name, strlen(name), kiln_json_hash(name, strlen(name))),
		    root->children[i]);
		assert_int_equal(root->children[i]->position, i);
		assert_int_equal(root->children[i]->name_hash, kiln_json_hash(name, strlen(name)));
	}
	/* misses: unknown, a prefix, a longer key, a nested name at the root */
	assert_null(kiln_field_child(root, "nope", 4, kiln_json_hash("nope", 4)));
	assert_null(kiln_field_child(root, "user", 4, kiln_json_hash("user", 4)));
	assert_null(kiln_field_child(root, "user_idx", 8, kiln_json_hash("user_idx", 8)));
	assert_null(kiln_field_child(root, "os", 2, kiln_json_hash("os", 2)));
	/* the key bytes need not be NUL-terminated */
	assert_ptr_equal(kiln_field_child(root, "emailXYZ", 5, kiln_json_hash("email", 5)),
	                 child(root, "email"));
	device = child(root, "device");
	assert_ptr_equal(kiln_field_child(device, "os", 2, kiln_json_hash("os", 2)), device->children[0]);
	/* a scalar field has no children */
	assert_null(kiln_field_child(child(root, "email"), "x", 1, kiln_json_hash("x", 1)));
	kiln_contract_free(k);

	/* many children: the index grows and every one is found */
	{
		char props[64 * 64], *p = props;
		for (int i = 0; i < 40; i++)
			p += sprintf(p, "      - name: f%d\n        logicalType: integer\n", i);
		k = props_ok(props);
		assert_int_equal(k->root->child_count, 40);
		for (int i = 0; i < 40; i++) {
			char key[8];
			int n = snprintf(key, sizeof(key), "f%d", i);
			const kiln_field *f =
			    kiln_field_child(k->root, key, (size_t)n, kiln_json_hash(key, (size_t)n));
			assert_non_null(f);
			assert_int_equal(f->position, i);
		}
		assert_null(kiln_field_child(k->root, "f40", 3, kiln_json_hash("f40", 3)));
		kiln_contract_free(k);
	}
}

static void test_digest(void **state)
{
	const char *a = HEAD SCHEMA_OPEN "      - name: a\n";
	const char *b = HEAD SCHEMA_OPEN "      - name: b\n";
	kiln_contract *k1, *k2, *k3;

	(void)state;
	k1 = load_ok(a);
	k2 = load_ok(a);
	k3 = load_ok(b);
	assert_int_equal(strlen(k1->digest_hex), 64);
	assert_int_equal(strspn(k1->digest_hex, "0123456789abcdef"), 64);
	assert_string_equal(k1->digest_hex, k2->digest_hex);
	assert_memory_equal(k1->digest, k2->digest, sizeof(k1->digest));
	assert_string_not_equal(k1->digest_hex, k3->digest_hex);
	/* a comment changes the bytes, so the digest too */
	kiln_contract_free(k2);
	k2 = load_ok(HEAD SCHEMA_OPEN "      - name: a\n# note\n");
	assert_string_not_equal(k1->digest_hex, k2->digest_hex);
	kiln_contract_free(k1);
	kiln_contract_free(k2);
	kiln_contract_free(k3);
}

/* --- top level --- */

static void test_empty_document(void **state)
{
	(void)state;
	load_fails("", "t.yaml: ", "empty contract");
	load_fails("# only a comment\n", "t.yaml: ", "empty contract");
}

static void test_root_not_mapping(void **state)
{
	(void)state;
	load_fails("- a\n- b\n", "t.yaml:1:1: ", "expected a mapping");
	load_fails("just text\n", "t.yaml:1:1: ", "expected a mapping");
}

static void test_unknown_top_level_key(void **state)
{
	(void)state;
	load_fails(HEAD "colour: blue\n" SCHEMA_OPEN "      - name: a\n",
	           "t.yaml:6:1: colour: ", "unknown key");
}

static void test_missing_required_keys(void **state)
{
	(void)state;
	load_fails("kind: DataContract\nid: t\nversion: 1.0.0\nstatus: active\n",
	           "t.yaml:1:1: apiVersion: ", "required key is missing");
	load_fails("apiVersion: v3.1.0\nid: t\nversion: 1.0.0\nstatus: active\n",
	           "t.yaml:1:1: kind: ", "required key is missing");
	load_fails("apiVersion: v3.1.0\nkind: DataContract\nversion: 1.0.0\nstatus: active\n",
	           "t.yaml:1:1: id: ", "required key is missing");
	load_fails("apiVersion: v3.1.0\nkind: DataContract\nid: t\nstatus: active\n",
	           "t.yaml:1:1: version: ", "required key is missing");
	load_fails("apiVersion: v3.1.0\nkind: DataContract\nid: t\nversion: 1.0.0\n",
	           "t.yaml:1:1: status: ", "required key is missing");
	/* present but null is missing too, reported where the null is */
	load_fails("apiVersion: v3.1.0\nkind: DataContract\nid: ~\nversion: 1.0.0\nstatus: active\n",
	           "t.yaml:3:5: id: ", "required key is missing");
	load_fails(
	    "apiVersion: v3.1.0\nkind: DataContract\nid: ''\nversion: 1.0.0\nstatus: active\n" SCHEMA_OPEN
	    "      - name: a\n",
	    "t.yaml:3:5: id: ", "must not be empty");
}

static void test_api_version(void **state)
{
	static const char *const rejected[] = {"v2.2.0", "v3.2.0",     "v3.0",    "v3.1.",
	                                       "3.1.0",  "v3.1.0-rc1", "v3.10.0", "v4.0.0"};
	static const char *const accepted[] = {"v3.0.0", "v3.0.2", "v3.1.0", "v3.1.12"};
	char text[512];
	kiln_contract *k;

	(void)state;
	for (size_t i = 0; i < sizeof(rejected) / sizeof(rejected[0]); i++) {
		snprintf(text, sizeof(text),
		         "apiVersion: %s\nkind: DataContract\nid: t\nversion: 1.0.0\n"
		         "status: active\n" SCHEMA_OPEN "      - name: a\n",
		         rejected[i]);
		load_fails(text, "t.yaml:1:13: apiVersion: ", "unsupported ODCS version");
	}
	for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
		snprintf(text, sizeof(text),
		         "apiVersion: %s\nkind: DataContract\nid: t\nversion: 1.0.0\n"
		         "status: active\n" SCHEMA_OPEN "      - name: a\n",
		         accepted[i]);
		k = load_ok(text);
		assert_string_equal(k->api_version, accepted[i]);
		kiln_contract_free(k);
	}
}

static void test_kind(void **state)
{
	(void)state;
	load_fails(
	    "apiVersion: v3.1.0\nkind: DataProduct\nid: t\nversion: 1.0.0\nstatus: active\n" SCHEMA_OPEN
	    "      - name: a\n",
	    "t.yaml:2:7: kind: ", "must be DataContract");
}

static void test_no_schema(void **state)
{
	(void)state;
	load_fails(HEAD, "t.yaml:1:1: schema: ", "required key is missing");
	load_fails(HEAD "schema: []\n", "t.yaml:6:9: schema: ", "at least one schema object");
	load_fails(HEAD "schema: {name: rec}\n", "t.yaml:6:9: schema: ", "expected a list");
	load_fails(HEAD "schema:\n  - logicalType: object\n",
	           "t.yaml:7:5: schema[0].name: ", "required key is missing");
}

static void test_schema_object(void **state)
{
	kiln_contract *k;

	(void)state;
	load_fails(HEAD "schema:\n  - name: rec\n    logicalType: array\n",
	           "t.yaml:8:18: schema[0].logicalType: ", "must be object");
	load_fails(HEAD "schema:\n  - name: rec\n    rows: 3\n",
	           "t.yaml:8:5: schema[0].rows: ", "unknown key");
	/* logicalType object and no properties at all are fine */
	k = load_ok(HEAD "schema:\n  - name: rec\n    logicalType: object\n    physicalType: table\n");
	assert_int_equal(k->root->child_count, 0);
	assert_int_equal(k->root->type, KILN_LTYPE_OBJECT);
	kiln_contract_free(k);
}

static void test_schema_selection(void **state)
{
	const char *text = HEAD "schema:\n"
	                        "  - name: first\n"
	                        "    properties:\n"
	                        "      - name: a\n"
	                        "  - name: second\n"
	                        "    properties:\n"
	                        "      - name: b\n"
	                        "      - name: c\n";
	kiln_contract_options opt = {0};
	kiln_contract *k;

	(void)state;
	k = load_ok(text);
	assert_string_equal(k->schema_name, "first");
	assert_int_equal(k->root->child_count, 1);
	kiln_contract_free(k);

	opt.schema = "second";
	k = load_opts(text, &opt);
	assert_string_equal(k->schema_name, "second");
	assert_int_equal(k->root->child_count, 2);
	assert_non_null(child(k->root, "c"));
	kiln_contract_free(k);

	opt.schema = "third";
	load_fails_opts(text, &opt, "t.yaml:7:3: schema: ", "no schema object named \"third\"");
}

/* --- properties --- */

static void test_property_name(void **state)
{
	(void)state;
	props_fail("      - logicalType: string\n",
	           "t.yaml:9:9: schema[0].properties[0].name: ", "required key is missing");
	props_fail("      - name: ''\n", "t.yaml:9:15: schema[0].properties[0].name: ", "must not be empty");
	props_fail("      - name: a\n      - name: b\n      - name: a\n",
	           "t.yaml:11:15: schema[0].properties[2].name: ", "defined twice");
	props_fail("      - just a string\n", "t.yaml:9:9: schema[0].properties[0]: ", "expected a mapping");
	props_fail("        name: a\n", "t.yaml:9:9: schema[0].properties: ", "expected a list");
}

static void test_unknown_property_key(void **state)
{
	(void)state;
	props_fail("      - name: a\n        logicalType: string\n        maxLength: 3\n",
	           "t.yaml:11:9: schema[0].properties[0].maxLength: ", "unknown key in a property");
}

static void test_unknown_logical_type(void **state)
{
	(void)state;
	props_fail("      - name: a\n        logicalType: varchar\n",
	           "t.yaml:10:22: schema[0].properties[0].logicalType: ", "unknown logical type");
}

static void test_option_not_for_type(void **state)
{
	(void)state;
	props_fail("      - name: a\n        logicalType: integer\n        logicalTypeOptions:\n"
	           "          minLength: 1\n",
	           "t.yaml:12:11: schema[0].properties[0].logicalTypeOptions.minLength: ", "unknown key");
	props_fail("      - name: a\n        logicalType: boolean\n        logicalTypeOptions:\n"
	           "          minimum: 1\n",
	           "t.yaml:12:11: schema[0].properties[0].logicalTypeOptions.minimum: ", "unknown key");
	props_fail("      - name: a\n        logicalType: string\n        logicalTypeOptions:\n"
	           "          maxItems: 1\n",
	           "t.yaml:12:11: schema[0].properties[0].logicalTypeOptions.maxItems: ", "unknown key");
	props_fail("      - name: a\n        logicalType: string\n        logicalTypeOptions: [1]\n",
	           "t.yaml:11:29: schema[0].properties[0].logicalTypeOptions: ", "expected a mapping");
}

static void test_options_without_type(void **state)
{
	kiln_contract *k;

	(void)state;
	props_fail("      - name: a\n        logicalTypeOptions:\n          maxLength: 3\n",
	           "t.yaml:11:11: schema[0].properties[0].logicalTypeOptions: ", "need a logicalType");
	/* empty options are harmless */
	k = props_ok("      - name: a\n        logicalTypeOptions: {}\n");
	assert_int_equal(k->root->children[0]->type, KILN_LTYPE_ANY);
	kiln_contract_free(k);
}

static void test_lengths(void **state)
{
	kiln_contract *k;

	(void)state;
	props_fail(
	    "      - name: a\n        logicalType: string\n        logicalTypeOptions:\n"
	    "          minLength: -1\n",
	    "t.yaml:12:22: schema[0].properties[0].logicalTypeOptions.minLength: ", "must not be negative");
	props_fail("      - name: a\n        logicalType: string\n        logicalTypeOptions:\n"
	           "          minLength: 5\n          maxLength: 4\n",
	           "t.yaml:12:11: schema[0].properties[0].logicalTypeOptions: ",
	           "minLength is greater than maxLength");
	/* bounds no value can meet are contract errors, not silent rejections */
	props_fail("      - name: a\n        logicalType: integer\n        logicalTypeOptions:\n"
	           "          minimum: 5\n          maximum: 4\n",
	           "t.yaml:12:11: schema[0].properties[0].logicalTypeOptions: ",
	           "between the minimum and the maximum");
	props_fail("      - name: a\n        logicalType: number\n        logicalTypeOptions:\n"
	           "          minimum: 5\n          exclusiveMaximum: 5\n",
	           "t.yaml:12:11: schema[0].properties[0].logicalTypeOptions: ",
	           "between the minimum and the maximum");
	props_fail("      - name: a\n        logicalType: object\n        logicalTypeOptions:\n"
	           "          minProperties: 3\n          maxProperties: 2\n",
	           "t.yaml:12:11: schema[0].properties[0].logicalTypeOptions: ",
	           "minProperties is greater than maxProperties");
	props_fail("      - name: a\n        logicalType: string\n        logicalTypeOptions:\n"
	           "          maxLength: 1.5\n",
	           "t.yaml:12:22: schema[0].properties[0].logicalTypeOptions.maxLength: ", "integer");
	props_fail("      - name: a\n        logicalType: array\n        logicalTypeOptions:\n"
	           "          minItems: 3\n          maxItems: 2\n",
	           "t.yaml:12:11: schema[0].properties[0].logicalTypeOptions: ",
	           "minItems is greater than maxItems");
	k = props_ok("      - name: a\n        logicalType: string\n        logicalTypeOptions:\n"
	             "          minLength: 3\n          maxLength: 3\n");
	assert_int_equal(k->root->children[0]->min_length, 3);
	assert_int_equal(k->root->children[0]->max_length, 3);
	kiln_contract_free(k);
}

static void test_invalid_pattern(void **state)
{
	(void)state;
	props_fail("      - name: a\n        logicalType: string\n        logicalTypeOptions:\n"
	           "          pattern: \"ab(c\"\n",
	           "t.yaml:12:20: schema[0].properties[0].logicalTypeOptions.pattern: ",
	           "invalid pattern at offset 4: missing closing parenthesis");
	props_fail("      - name: a\n        logicalType: string\n        logicalTypeOptions:\n"
	           "          pattern: \"[a-\"\n",
	           "t.yaml:12:20: schema[0].properties[0].logicalTypeOptions.pattern: ", "offset");
}

static void test_unknown_string_format(void **state)
{
	kiln_contract *k;

	(void)state;
	props_fail(
	    "      - name: a\n        logicalType: string\n        logicalTypeOptions:\n"
	    "          format: phone\n",
	    "t.yaml:12:19: schema[0].properties[0].logicalTypeOptions.format: ", "unknown string format");
	k = props_ok("      - name: a\n        logicalType: string\n        logicalTypeOptions:\n"
	             "          format: password\n");
	assert_int_equal(k->root->children[0]->format, KILN_FORMAT_NONE);
	kiln_contract_free(k);
}

static void test_integer_format(void **state)
{
	static const char *const bad[] = {"i7", "u", "i", "int", "u256", "i16x", "x8"};
	char props[256];
	kiln_contract *k;
	const kiln_field *f;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(props, sizeof(props),
		         "      - name: a\n        logicalType: integer\n"
		         "        logicalTypeOptions:\n          format: %s\n",
		         bad[i]);
		props_fail(props, "t.yaml:12:19: schema[0].properties[0].logicalTypeOptions.format: ",
		           "unknown integer format");
	}
	props_fail(
	    "      - name: a\n        logicalType: number\n        logicalTypeOptions:\n"
	    "          format: i32\n",
	    "t.yaml:12:19: schema[0].properties[0].logicalTypeOptions.format: ", "unknown number format");

	k = props_ok("      - name: a\n        logicalType: integer\n        logicalTypeOptions:\n"
	             "          format: u8\n"
	             "      - name: b\n        logicalType: integer\n        logicalTypeOptions:\n"
	             "          format: i16\n"
	             "      - name: c\n        logicalType: integer\n        logicalTypeOptions:\n"
	             "          format: u8\n          minimum: 10\n          exclusiveMaximum: 100\n"
	             "      - name: d\n        logicalType: integer\n        logicalTypeOptions:\n"
	             "          format: i64\n"
	             "      - name: e\n        logicalType: number\n        logicalTypeOptions:\n"
	             "          format: f64\n");
	/* formats are kept apart from the bounds and checked digit by digit */
	f = child(k->root, "a");
	assert_int_equal(f->int_bits, 8);
	assert_true(f->int_unsigned);
	assert_false(f->minimum.set);
	f = child(k->root, "b");
	assert_int_equal(f->int_bits, 16);
	assert_false(f->int_unsigned);
	/* tighter bounds from the contract stay */
	f = child(k->root, "c");
	assert_bound(&f->minimum, 10, false);
	assert_bound(&f->maximum, 100, true);
	f = child(k->root, "d");
	assert_int_equal(f->int_bits, 64);
	assert_false(f->maximum.set);
	assert_false(child(k->root, "e")->minimum.set);
	kiln_contract_free(k);
}

static void test_properties_on_non_object(void **state)
{
	(void)state;
	props_fail(
	    "      - name: a\n        logicalType: string\n        properties:\n          - name: b\n",
	    "t.yaml:12:11: schema[0].properties[0].properties: ", "properties need logicalType: object");
	props_fail("      - name: a\n        properties:\n          - name: b\n",
	           "t.yaml:11:11: schema[0].properties[0].properties: ", "logicalType: object");
}

static void test_items_on_non_array(void **state)
{
	(void)state;
	props_fail(
	    "      - name: a\n        logicalType: object\n        items:\n          logicalType: string\n",
	    "t.yaml:12:11: schema[0].properties[0].items: ", "items need logicalType: array");
	/* errors inside items name the items path */
	props_fail(
	    "      - name: a\n        logicalType: array\n        items:\n          logicalType: text\n",
	    "t.yaml:12:24: schema[0].properties[0].items.logicalType: ", "unknown logical type");
}

static void test_enum_errors(void **state)
{
	(void)state;
	props_fail("      - name: a\n        logicalType: string\n        customProperties:\n"
	           "          - property: enum\n            value: red\n",
	           "t.yaml:13:20: schema[0].properties[0].customProperties[0].value: ", "expected a list");
	props_fail("      - name: a\n        logicalType: string\n        customProperties:\n"
	           "          - property: enum\n            value: []\n",
	           "t.yaml:13:20: schema[0].properties[0].customProperties[0].value: ", "at least one value");
	props_fail("      - name: a\n        logicalType: string\n        customProperties:\n"
	           "          - property: enum\n            value: [a, [b]]\n",
	           "t.yaml:13:24: schema[0].properties[0].customProperties[0].value[1]: ", "must be scalars");
	props_fail("      - name: a\n        logicalType: string\n        customProperties:\n"
	           "          - property: enum\n            value: [a, ~]\n",
	           "t.yaml:13:24: schema[0].properties[0].customProperties[0].value[1]: ", "must be scalars");
	props_fail("      - name: a\n        logicalType: object\n        customProperties:\n"
	           "          - property: enum\n            value: [a]\n",
	           "t.yaml:13:20: schema[0].properties[0].customProperties[0].value: ", "scalar fields only");
	props_fail("      - name: a\n        logicalType: integer\n        customProperties:\n"
	           "          - property: enum\n            value: [1, two]\n",
	           "t.yaml:13:24: schema[0].properties[0].customProperties[0].value[1]: ", "number");
	props_fail(
	    "      - name: a\n        logicalType: string\n        customProperties:\n"
	    "          - property: enum\n",
	    "t.yaml:12:13: schema[0].properties[0].customProperties[0].value: ", "required key is missing");
	/* kiln's own `enum` key */
	props_fail("      - name: a\n        logicalType: string\n        enum: red\n",
	           "t.yaml:11:15: schema[0].properties[0].enum: ", "expected a list");
}

static void test_enum_values(void **state)
{
	kiln_contract *k;
	const kiln_field *f;

	(void)state;
	k = props_ok("      - name: i\n        logicalType: integer\n        customProperties:\n"
	             "          - property: enum\n            value: [1, -20, 300]\n"
	             "      - name: n\n        logicalType: number\n        enum: [0.5, 2, 1e3]\n"
	             "      - name: s\n        logicalType: string\n        enum: ['a b', \"\\u00e9\", 7]\n");
	f = child(k->root, "i");
	assert_int_equal(f->enum_count, 3);
	assert_non_null(f->enum_numbers);
	assert_true(f->enum_numbers[0] == 1);
	assert_true(f->enum_numbers[1] == -20);
	assert_true(f->enum_numbers[2] == 300);
	assert_enum(f, 1, "-20");
	f = child(k->root, "n");
	assert_non_null(f->enum_numbers);
	assert_true(f->enum_numbers[0] == 0.5L);
	assert_true(f->enum_numbers[2] == 1000);
	assert_int_equal(f->enum_kinds[0], KILN_ENUM_NUMBER);
	f = child(k->root, "s");
	assert_int_equal(f->enum_kinds[2], KILN_ENUM_STRING); /* "7" on a string field is text */
	assert_enum(f, 0, "a b");
	assert_enum(f, 1, "\xc3\xa9");
	assert_enum(f, 2, "7");
	kiln_contract_free(k);
}

static void test_custom_properties_errors(void **state)
{
	(void)state;
	props_fail("      - name: a\n        logicalType: string\n        customProperties:\n"
	           "          property: piiScan\n",
	           "t.yaml:12:11: schema[0].properties[0].customProperties: ", "expected a list");
	props_fail("      - name: a\n        logicalType: string\n        customProperties:\n"
	           "          - value: true\n",
	           "t.yaml:12:13: schema[0].properties[0].customProperties[0].property: ",
	           "required key is missing");
	props_fail("      - name: a\n        logicalType: string\n        customProperties:\n"
	           "          - pseudonymisation\n",
	           "t.yaml:12:13: schema[0].properties[0].customProperties[0]: ", "expected a mapping");
	props_fail("      - name: a\n        logicalType: string\n        customProperties:\n"
	           "          - property: pseudonymisation\n            value: hash\n",
	           "t.yaml:13:20: schema[0].properties[0].customProperties[0].value: ",
	           "unknown pseudonymisation mode");
	props_fail("      - name: a\n        logicalType: string\n        customProperties:\n"
	           "          - property: pseudonymDomain\n            value: ''\n",
	           "t.yaml:13:20: schema[0].properties[0].customProperties[0].value: ", "must not be empty");
	props_fail("      - name: a\n        logicalType: string\n        customProperties:\n"
	           "          - property: piiScan\n            value: maybe\n",
	           "t.yaml:13:20: schema[0].properties[0].customProperties[0].value: ", "true or false");
	props_fail(
	    "      - name: a\n        logicalType: string\n        customProperties:\n"
	    "          - property: pseudonymisation\n",
	    "t.yaml:12:13: schema[0].properties[0].customProperties[0].value: ", "required key is missing");
	/* top-level customProperties follow the same shape */
	load_fails(HEAD "customProperties:\n  - value: allow\n" SCHEMA_OPEN "      - name: a\n",
	           "t.yaml:7:5: customProperties[0].property: ", "required key is missing");
	load_fails(HEAD "customProperties: allow\n" SCHEMA_OPEN "      - name: a\n",
	           "t.yaml:6:19: customProperties: ", "expected a list");
}

static void test_pseudonymisation(void **state)
{
	kiln_contract *k;
	const kiln_field *f;

	(void)state;
	k = props_ok(
	    "      - name: a\n        logicalType: string\n        classification: PII\n"
	    "      - name: b\n        logicalType: string\n        classification: pii\n"
	    "        customProperties:\n          - property: pseudonymisation\n            value: keep\n"
	    "      - name: c\n        logicalType: object\n        customProperties:\n"
	    "          - property: pseudonymisation\n            value: redact\n"
	    "      - name: d\n        logicalType: array\n        customProperties:\n"
	    "          - property: pseudonymization\n            value: drop\n"
	    "      - name: e\n        logicalType: string\n        classification: confidential\n"
	    "      - name: f\n        customProperties:\n          - property: piiScan\n"
	    "            value: true\n"
	    "      - name: g\n        logicalType: integer\n        classification: pii\n");
	f = child(k->root, "a");
	assert_int_equal(f->pseudo_mode, KILN_PSEUDO_TOKEN);
	assert_string_equal(f->pseudo_domain, "a");
	f = child(k->root, "b");
	assert_int_equal(f->pseudo_mode, KILN_PSEUDO_KEEP);
	assert_int_equal(child(k->root, "c")->pseudo_mode, KILN_PSEUDO_REDACT);
	assert_int_equal(child(k->root, "d")->pseudo_mode, KILN_PSEUDO_DROP);
	assert_int_equal(child(k->root, "e")->pseudo_mode, KILN_PSEUDO_KEEP);
	assert_true(child(k->root, "f")->pii_scan);
	assert_int_equal(child(k->root, "g")->pseudo_mode, KILN_PSEUDO_TOKEN);
	kiln_contract_free(k);
}

static void test_token_on_object(void **state)
{
	(void)state;
	props_fail("      - name: a\n        logicalType: object\n        customProperties:\n"
	           "          - property: pseudonymisation\n            value: token\n",
	           "t.yaml:9:9: schema[0].properties[0]: ", "cannot be tokenised");
	/* classification pii on an array would mean token */
	props_fail("      - name: a\n        logicalType: array\n        classification: pii\n",
	           "t.yaml:9:9: schema[0].properties[0]: ", "array fields cannot be tokenised");
	props_fail("      - name: a\n        logicalType: object\n        customProperties:\n"
	           "          - property: pseudonymisation\n            value: keep-domain\n",
	           "t.yaml:9:9: schema[0].properties[0]: ", "cannot be tokenised");
}

static void test_keep_domain_on_integer(void **state)
{
	(void)state;
	props_fail("      - name: a\n        logicalType: integer\n        customProperties:\n"
	           "          - property: pseudonymisation\n            value: keep-domain\n",
	           "t.yaml:9:9: schema[0].properties[0]: ", "keep-domain needs a string field");
}

static void test_pii_scan_on_integer(void **state)
{
	(void)state;
	props_fail("      - name: a\n        logicalType: integer\n        customProperties:\n"
	           "          - property: piiScan\n            value: true\n",
	           "t.yaml:9:9: schema[0].properties[0]: ", "piiScan applies to string fields");
}

static void test_unknown_fields_policy(void **state)
{
	kiln_contract *k;

	(void)state;
	load_fails(HEAD "customProperties:\n  - property: unknownFields\n    value: ignore\n" SCHEMA_OPEN
	                "      - name: a\n",
	           "t.yaml:8:12: customProperties[0].value: ", "expected reject or allow");
	load_fails(HEAD "customProperties:\n  - property: unknownFields\n" SCHEMA_OPEN "      - name: a\n",
	           "t.yaml:7:5: customProperties[0].value: ", "required key is missing");
	k = load_ok(HEAD "customProperties:\n  - property: owner\n    value: me\n"
	                 "  - property: unknownFields\n    value: allow\n" SCHEMA_OPEN "      - name: a\n");
	assert_int_equal(k->unknown_fields, KILN_UNKNOWN_ALLOW);
	kiln_contract_free(k);
	k = load_ok(HEAD "customProperties:\n  - property: unknownFields\n    value: reject\n" SCHEMA_OPEN
	                 "      - name: a\n");
	assert_int_equal(k->unknown_fields, KILN_UNKNOWN_REJECT);
	kiln_contract_free(k);
}

static void test_required_list(void **state)
{
	kiln_contract *k;
	const kiln_field *obj;

	(void)state;
	props_fail("      - name: o\n        logicalType: object\n        logicalTypeOptions:\n"
	           "          required: [x, y]\n        properties:\n          - name: x\n",
	           "t.yaml:12:25: schema[0].properties[0].logicalTypeOptions.required[1]: ",
	           "no property named \"y\"");
	props_fail("      - name: o\n        logicalType: object\n        logicalTypeOptions:\n"
	           "          required: x\n        properties:\n          - name: x\n",
	           "t.yaml:12:21: schema[0].properties[0].logicalTypeOptions.required: ", "expected a list");
	k = props_ok("      - name: o\n        logicalType: object\n        logicalTypeOptions:\n"
	             "          required: [y]\n          maxProperties: 4\n          minProperties: 1\n"
	             "        properties:\n          - name: x\n          - name: y\n");
	obj = child(k->root, "o");
	assert_int_equal(obj->required_count, 1);
	assert_true(child(obj, "y")->required);
	assert_false(child(obj, "x")->required);
	assert_int_equal(obj->max_properties, 4);
	assert_int_equal(obj->min_properties, 1);
	kiln_contract_free(k);
}

static void test_exclusive_flag_without_bound(void **state)
{
	(void)state;
	props_fail("      - name: a\n        logicalType: number\n        logicalTypeOptions:\n"
	           "          exclusiveMinimum: true\n",
	           "t.yaml:12:29: schema[0].properties[0].logicalTypeOptions.exclusiveMinimum: ",
	           "minimum is missing");
	props_fail("      - name: a\n        logicalType: integer\n        logicalTypeOptions:\n"
	           "          exclusiveMaximum: true\n",
	           "t.yaml:12:29: schema[0].properties[0].logicalTypeOptions.exclusiveMaximum: ",
	           "maximum is missing");
	props_fail("      - name: a\n        logicalType: number\n        logicalTypeOptions:\n"
	           "          minimum: ten\n",
	           "t.yaml:12:20: schema[0].properties[0].logicalTypeOptions.minimum: ", "number");
	props_fail("      - name: a\n        logicalType: number\n        logicalTypeOptions:\n"
	           "          multipleOf: 0\n",
	           "t.yaml:12:23: schema[0].properties[0].logicalTypeOptions.multipleOf: ", "greater than 0");
}

static void test_exclusive_bounds(void **state)
{
	kiln_contract *k;
	const kiln_field *f;

	(void)state;
	k = props_ok("      - name: v30\n        logicalType: number\n        logicalTypeOptions:\n"
	             "          minimum: 5\n          exclusiveMinimum: true\n"
	             "          maximum: 10\n          exclusiveMaximum: false\n"
	             "      - name: v31\n        logicalType: number\n        logicalTypeOptions:\n"
	             "          exclusiveMinimum: 5\n          exclusiveMaximum: 10.5\n"
	             "      - name: mixed\n        logicalType: integer\n        logicalTypeOptions:\n"
	             "          minimum: 6\n          exclusiveMinimum: 5\n"
	             "          maximum: 10\n          exclusiveMaximum: 10\n");
	f = child(k->root, "v30");
	assert_bound(&f->minimum, 5, true);
	assert_bound(&f->maximum, 10, false);
	f = child(k->root, "v31");
	assert_bound(&f->minimum, 5, true);
	assert_bound(&f->maximum, 10.5L, true);
	/* the tighter of an inclusive and an exclusive bound wins */
	f = child(k->root, "mixed");
	assert_bound(&f->minimum, 6, false);
	assert_bound(&f->maximum, 10, true);
	kiln_contract_free(k);
}

static void test_temporal_bounds(void **state)
{
	kiln_contract *k;
	const kiln_field *f;

	(void)state;
	k = props_ok(
	    "      - name: d\n        logicalType: date\n        logicalTypeOptions:\n"
	    "          minimum: \"2015-01-01\"\n          maximum: \"2015-01-02\"\n"
	    "      - name: ts\n        logicalType: timestamp\n        logicalTypeOptions:\n"
	    "          minimum: \"2015-01-01T01:00:00+01:00\"\n          exclusiveMaximum: \"2015-01-02\"\n"
	    "      - name: t\n        logicalType: time\n        logicalTypeOptions:\n"
	    "          minimum: \"08:00:00\"\n          maximum: \"18:30:00\"\n"
	    "          format: HH:mm:ss\n");
	f = child(k->root, "d");
	assert_bound(&f->minimum, 1420070400.0L, false);
	assert_bound(&f->maximum, 1420156800.0L, false);
	f = child(k->root, "ts");
	assert_bound(&f->minimum, 1420070400.0L, false);
	assert_bound(&f->maximum, 1420156800.0L, true);
	f = child(k->root, "t");
	assert_bound(&f->minimum, 8 * 3600, false);
	assert_bound(&f->maximum, 18 * 3600 + 30 * 60, false);
	kiln_contract_free(k);

	props_fail(
	    "      - name: d\n        logicalType: date\n        logicalTypeOptions:\n"
	    "          minimum: \"2015-02-30\"\n",
	    "t.yaml:12:20: schema[0].properties[0].logicalTypeOptions.minimum: ", "not a valid date bound");
	props_fail("      - name: d\n        logicalType: timestamp\n        logicalTypeOptions:\n"
	           "          maximum: yesterday\n",
	           "t.yaml:12:20: schema[0].properties[0].logicalTypeOptions.maximum: ",
	           "not a valid timestamp bound");
}

static void test_nested_paths(void **state)
{
	kiln_contract *k;
	const kiln_field *o, *arr;

	(void)state;
	k = props_ok("      - name: o\n        logicalType: object\n        properties:\n"
	             "          - name: list\n            logicalType: array\n            items:\n"
	             "              logicalType: object\n              properties:\n"
	             "                - name: leaf\n                  logicalType: string\n"
	             "                  required: true\n");
	o = child(k->root, "o");
	arr = child(o, "list");
	assert_string_equal(arr->path, "o.list");
	assert_non_null(arr->items);
	assert_int_equal(arr->items->type, KILN_LTYPE_OBJECT);
	assert_string_equal(arr->items->path, "o.list[]");
	assert_string_equal(child(arr->items, "leaf")->path, "o.list[].leaf");
	assert_int_equal(arr->items->required_count, 1);
	/* seen slots: o at the root, list in o, leaf in the items */
	assert_int_equal(k->seen_slots, 3);
	kiln_contract_free(k);

	props_fail("      - name: o\n        logicalType: object\n        properties:\n"
	           "          - name: x\n            logicalType: string\n            bogus: 1\n",
	           "t.yaml:14:13: schema[0].properties[0].properties[0].bogus: ", "unknown key");
}

/* kiln_contract_field_at: the dotted paths split.key takes. Steps go
 * through objects only; a path into an array or a scalar is refused naming
 * the field where it stopped with its file:line:col; a top-level name that
 * holds the whole path wins; the first dropped or redacted field on the way
 * is reported. The properties: customer (line 9) with customer_id and a
 * dropped secret, items (line 20, an array of objects with id), "a.b",
 * plain (an integer, line 29), gone (a redacted object holding inner). */
static void test_field_at(void **state)
{
	kiln_contract *k;
	const kiln_field *f, *hidden;

	(void)state;
	k = props_ok("      - name: customer\n        logicalType: object\n        properties:\n"
	             "          - name: customer_id\n            logicalType: string\n"
	             "            classification: pii\n"
	             "          - name: secret\n            logicalType: string\n"
	             "            customProperties:\n              - property: pseudonymisation\n"
	             "                value: drop\n"
	             "      - name: items\n        logicalType: array\n        items:\n"
	             "          logicalType: object\n          properties:\n"
	             "            - name: id\n              logicalType: string\n"
	             "      - name: a.b\n        logicalType: string\n"
	             "      - name: plain\n        logicalType: integer\n"
	             "      - name: gone\n        logicalType: object\n        customProperties:\n"
	             "          - property: pseudonymisation\n            value: redact\n"
	             "        properties:\n          - name: inner\n            logicalType: string\n");

	assert_int_equal(kiln_contract_field_at(&f, &hidden, k, "customer.customer_id"), 0);
	assert_ptr_equal(f, child(child(k->root, "customer"), "customer_id"));
	assert_string_equal(f->path, "customer.customer_id");
	assert_null(hidden);
	assert_int_equal(kiln_contract_field_at(&f, NULL, k, "plain"), 0);
	assert_ptr_equal(f, child(k->root, "plain"));
	assert_int_equal(kiln_contract_field_at(&f, &hidden, k, "a.b"), 0); /* the whole name */
	assert_ptr_equal(f, child(k->root, "a.b"));
	assert_null(hidden);

	assert_int_equal(kiln_contract_field_at(&f, &hidden, k, "customer.secret"), 0);
	assert_ptr_equal(hidden, f);
	assert_int_equal(kiln_contract_field_at(&f, &hidden, k, "gone.inner"), 0);
	assert_ptr_equal(hidden, child(k->root, "gone"));
	assert_string_equal(f->path, "gone.inner");

	assert_int_equal(kiln_contract_field_at(&f, &hidden, k, "items.id"), KILN_EINVALID);
	assert_null(f);
	assert_string_equal(kiln_error_last(), "\"items.id\" goes through the array \"items\" (t.yaml:20:9): "
	                                       "a path cannot step into an array");
	assert_int_equal(kiln_contract_field_at(&f, NULL, k, "plain.x"), KILN_EINVALID);
	assert_string_equal(kiln_error_last(),
	                    "\"plain.x\" goes through \"plain\" (t.yaml:29:9), which has no properties "
	                    "(logicalType integer)");
	assert_int_equal(kiln_contract_field_at(&f, NULL, k, "customer.customer_id.x"), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "through \"customer.customer_id\" (t.yaml:12:13)"));
	assert_int_equal(kiln_contract_field_at(&f, NULL, k, "nope.x"), KILN_ENOTFOUND);
	assert_string_equal(kiln_error_last(), "the contract t.yaml has no top-level field \"nope\"");
	assert_int_equal(kiln_contract_field_at(&f, NULL, k, "customer.nope"), KILN_ENOTFOUND);
	assert_string_equal(kiln_error_last(), "\"customer\" (t.yaml:9:9) has no property \"nope\"");
	assert_int_equal(kiln_contract_field_at(&f, NULL, k, "customer."), KILN_ENOTFOUND);
	assert_int_equal(kiln_contract_field_at(&f, NULL, k, ""), KILN_ENOTFOUND);
	kiln_contract_free(k);
}

static void test_yaml_syntax_error(void **state)
{
	(void)state;
	load_fails(HEAD "schema: [a, b\n", "t.yaml:7:1: ", "did not find expected ',' or ']'");
	load_fails(HEAD "schema:\n  - name: rec\n    properties: [\n",
	           "t.yaml:9:1: ", "did not find expected");
	load_fails("apiVersion: v3.1.0\nkind: DataContract\n  id: t\n",
	           "t.yaml:3:5: ", "mapping values are not allowed");
	/* duplicate keys are YAML-level errors too */
	load_fails(HEAD "id: u\n" SCHEMA_OPEN "      - name: a\n", "t.yaml:6:1: ", "duplicate key \"id\"");
}

/* 22 levels of anchors, each level's properties referencing the level below
 * twice: a 3 KB file whose tree, walked with aliases expanded, has about
 * 2^22 properties (compiling it took 8.7 GB). The YAML loader refuses it
 * by position before the compiler walks it; the process stays small. */
static void test_alias_fan_out(void **state)
{
	size_t cap = 8192, len;
	char *props = malloc(cap), *next = malloc(cap), *text;
	kiln_contract *k = (kiln_contract *)1;
	struct rusage ru;

	(void)state;
	assert_non_null(props);
	assert_non_null(next);
	snprintf(props, cap, "[{name: leaf, logicalType: string}]");
	for (int level = 1; level <= 22; level++) {
		snprintf(next, cap,
		         "[{name: a, logicalType: object, properties: &l%d %s}, "
		         "{name: b, logicalType: object, properties: *l%d}]",
		         level - 1, props, level - 1);
		memcpy(props, next, strlen(next) + 1);
	}
	len = strlen(props);
	assert_true(len < 3 * 1024);
	text = malloc(strlen(HEAD) + 64 + len);
	assert_non_null(text);
	sprintf(text, HEAD "schema:\n  - name: rec\n    properties: %s\n", props);
	assert_int_equal(kiln_contract_load_buffer(&k, "t.yaml", text, strlen(text), NULL), KILN_EINVALID);
	assert_null(k);
	assert_non_null(strstr(kiln_error_last(), "t.yaml:8:"));
	assert_non_null(strstr(kiln_error_last(), "nodes with aliases expanded"));
	/* ru_maxrss is the process's peak in KiB: far below the gigabytes the walk took */
	assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
	assert_true(ru.ru_maxrss < 256 * 1024);
	free(text);
	free(next);
	free(props);
}

static void test_load_missing_file(void **state)
{
	kiln_contract *k = (kiln_contract *)1;

	(void)state;
	assert_int_equal(kiln_contract_load(&k, KILN_SRCDIR "/contracts/no-such-contract.yaml", NULL),
	                 KILN_ENOTFOUND);
	assert_null(k);
	assert_int_equal(kiln_error_last_code(), KILN_ENOTFOUND);
	assert_non_null(strstr(kiln_error_last(), "no-such-contract.yaml"));

	/* a directory is not a contract */
	k = (kiln_contract *)1;
	assert_true(kiln_contract_load(&k, KILN_SRCDIR "/contracts", NULL) < 0);
	assert_null(k);

	/* errors in a file name the file */
	k = (kiln_contract *)1;
	assert_int_equal(kiln_contract_load(&k, KILN_SRCDIR "/samples/user-events.jsonl", NULL),
	                 KILN_EINVALID);
	assert_null(k);
	assert_non_null(strstr(kiln_error_last(), "samples/user-events.jsonl:"));

	kiln_contract_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_user_events),
	    cmocka_unit_test(test_field_child),
	    cmocka_unit_test(test_digest),
	    cmocka_unit_test(test_empty_document),
	    cmocka_unit_test(test_root_not_mapping),
	    cmocka_unit_test(test_unknown_top_level_key),
	    cmocka_unit_test(test_missing_required_keys),
	    cmocka_unit_test(test_api_version),
	    cmocka_unit_test(test_kind),
	    cmocka_unit_test(test_no_schema),
	    cmocka_unit_test(test_schema_object),
	    cmocka_unit_test(test_schema_selection),
	    cmocka_unit_test(test_property_name),
	    cmocka_unit_test(test_unknown_property_key),
	    cmocka_unit_test(test_unknown_logical_type),
	    cmocka_unit_test(test_option_not_for_type),
	    cmocka_unit_test(test_options_without_type),
	    cmocka_unit_test(test_lengths),
	    cmocka_unit_test(test_invalid_pattern),
	    cmocka_unit_test(test_unknown_string_format),
	    cmocka_unit_test(test_integer_format),
	    cmocka_unit_test(test_properties_on_non_object),
	    cmocka_unit_test(test_items_on_non_array),
	    cmocka_unit_test(test_enum_errors),
	    cmocka_unit_test(test_enum_values),
	    cmocka_unit_test(test_custom_properties_errors),
	    cmocka_unit_test(test_pseudonymisation),
	    cmocka_unit_test(test_token_on_object),
	    cmocka_unit_test(test_keep_domain_on_integer),
	    cmocka_unit_test(test_pii_scan_on_integer),
	    cmocka_unit_test(test_unknown_fields_policy),
	    cmocka_unit_test(test_required_list),
	    cmocka_unit_test(test_exclusive_flag_without_bound),
	    cmocka_unit_test(test_exclusive_bounds),
	    cmocka_unit_test(test_temporal_bounds),
	    cmocka_unit_test(test_nested_paths),
	    cmocka_unit_test(test_field_at),
	    cmocka_unit_test(test_yaml_syntax_error),
	    cmocka_unit_test(test_load_missing_file),
	    cmocka_unit_test(test_alias_fan_out),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
