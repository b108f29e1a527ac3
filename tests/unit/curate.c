/* Unit tests for the curator (src/mask/curate.c) driven by the validator
 * as the ingest workers drive it (kiln_validate_hook + kiln_curate_token):
 * what a valid record becomes, field by field, with the expected tokens
 * recomputed from kiln_token() and the same key; and that no value of a
 * record (canaries: an email address, a user id, an IP) reaches an error
 * message, a log line or a violation path (what reject metrics and
 * quarantine lines are labelled with), valid records or not. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "contract/validate.h"
#include "core/error.h"
#include "core/log.h"
#include "mask/curate.h"
#include "mask/token.h"

#define CANARY_USER  "u-canary-4711"
#define CANARY_EMAIL "ann.canary@example.com"
#define CANARY_IP    "203.0.113.47"

static const char *const canaries[] = {CANARY_USER, "ann.canary", CANARY_IP, NULL};

typedef struct fixture {
	kiln_contract *contract;
	kiln_validator *validator;
	kiln_curator *curator;
	kiln_key key;
} fixture;

static int setup(void **state)
{
	static const unsigned char bytes[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
	                                        11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
	                                        22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
	fixture *f = calloc(1, sizeof(*f));
	const kiln_field *split;

	assert_non_null(f);
	assert_int_equal(kiln_contract_load(&f->contract, KILN_SRCDIR "/contracts/user-events.yaml", NULL),
	                 0);
	f->validator = kiln_validator_new(f->contract, &(kiln_validator_options){.unknown_fields = -1});
	assert_non_null(f->validator);
	kiln_key_init(&f->key, bytes, 1);
	split = kiln_field_child(f->contract->root, "user_id", 7, kiln_json_hash("user_id", 7));
	assert_non_null(split);
	assert_int_equal(kiln_curator_new(&f->curator, &(kiln_curator_options){.contract = f->contract,
	                                                                       .key = &f->key,
	                                                                       .split_field = split}),
	                 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;

	kiln_curator_free(f->curator);
	kiln_validator_free(f->validator);
	kiln_contract_free(f->contract);
	free(f);
	return 0;
}

/* Validates and curates one record: the violation count, the curated form
 * in *out (the caller frees it), kiln_curate_end's answer in *end_rc. */
static size_t curate(fixture *f, const char *record, kiln_buf *out, kiln_report *report, int *end_rc,
                     const char **split, size_t *split_len)
{
	size_t n;

	kiln_curate_begin(f->curator, out);
	n = kiln_validate_hook(f->validator, record, strlen(record), report, kiln_curate_token, f->curator);
	*end_rc = kiln_curate_end(f->curator, split, split_len);
	return n;
}

static void token(fixture *f, char out[KILN_TOKEN_MAX], const char *domain, const char *value)
{
	kiln_token(out, &f->key, domain, strlen(domain), value, strlen(value));
}

/* Each pseudonymisation of user-events.yaml: user_id a token of domain
 * "user" (also the split value), email keep-domain (the local part's
 * token of the field's domain, then "@example.com"), client_ip a token of
 * domain "ip", message scanned (the address inside it a token of the
 * detector's domain "email", normalised to lower case), the rest kept. */
static void test_valid_record_pseudonymised(void **state)
{
	fixture *f = *state;
	kiln_buf out = KILN_BUF_INIT(0);
	kiln_report report;
	char user[KILN_TOKEN_MAX], email_local[KILN_TOKEN_MAX], ip[KILN_TOKEN_MAX], in_text[KILN_TOKEN_MAX];
	char want[2048];
	const char *split;
	size_t split_len;
	int rc;

	token(f, user, "user", CANARY_USER);
	token(f, email_local, "email", "ann.canary");
	token(f, ip, "ip", CANARY_IP);
	token(f, in_text, "email", "ann.canary@example.com");
	assert_int_equal(curate(f,
	                        "{\"event_id\": \"1d2a44de-2d05-4d7e-a873-a6cff2672335\", "
	                        "\"event_type\": \"search\", \"occurred_at\": \"2025-09-14T09:00:36Z\", "
	                        "\"user_id\": \"" CANARY_USER "\", \"email\": \"Ann.Canary@example.com\", "
	                        "\"client_ip\": \"" CANARY_IP "\", \"consent\": true, "
	                        "\"message\": \"write to ANN.canary@example.com please\", "
	                        "\"device\": {\"os\": \"ios\"}, \"tags\": [\"a\", \"b\"]}",
	                        &out, &report, &rc, &split, &split_len),
	                 0);
	assert_int_equal(rc, 0);
	snprintf(want, sizeof(want),
	         "{\"event_id\":\"1d2a44de-2d05-4d7e-a873-a6cff2672335\",\"event_type\":\"search\","
	         "\"occurred_at\":\"2025-09-14T09:00:36Z\",\"user_id\":\"%s\",\"email\":\"%s@example.com\","
	         "\"client_ip\":\"%s\",\"consent\":true,\"message\":\"write to %s please\","
	         "\"device\":{\"os\":\"ios\"},\"tags\":[\"a\",\"b\"]}",
	         user, email_local, ip, in_text);
	assert_int_equal(out.len, strlen(want));
	assert_memory_equal(out.ptr, want, out.len);
	assert_int_equal(split_len, strlen(user));
	assert_memory_equal(split, user, split_len);
	assert_null(kiln_test_canary_in(out.ptr, out.len, canaries));
	kiln_buf_free(&out);
}

/* The same value always gives the same token; another value another one. */
static void test_tokens_are_stable(void **state)
{
	fixture *f = *state;
	kiln_buf a = KILN_BUF_INIT(0), b = KILN_BUF_INIT(0);
	kiln_report report;
	const char *split;
	size_t split_len;
	int rc;

#define REC(user)                                                                                            \
	"{\"event_id\":\"1d2a44de-2d05-4d7e-a873-a6cff2672335\",\"event_type\":\"click\","                   \
	"\"occurred_at\":\"2025-09-14T09:00:36Z\",\"user_id\":\"" user "\",\"consent\":false,"               \
	"\"device\":{\"os\":\"linux\"}}"
	assert_int_equal(curate(f, REC(CANARY_USER), &a, &report, &rc, &split, &split_len), 0);
	assert_int_equal(rc, 0);
	assert_int_equal(curate(f, REC(CANARY_USER), &b, &report, &rc, &split, &split_len), 0);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.ptr, b.ptr, a.len);
	kiln_buf_reset(&b);
	assert_int_equal(curate(f, REC("u-other"), &b, &report, &rc, &split, &split_len), 0);
	assert_true(a.len != b.len || memcmp(a.ptr, b.ptr, a.len) != 0);
#undef REC
	kiln_buf_free(&a);
	kiln_buf_free(&b);
}

/* Records that break the contract in ways that put a value near a message:
 * a bad email, an unknown field named like an address, a value too long, a
 * wrong type, broken JSON, a missing split key. */
static const char *const invalid_records[] = {
    "{\"event_id\":\"1d2a44de-2d05-4d7e-a873-a6cff2672335\",\"event_type\":\"search\","
    "\"occurred_at\":\"2025-09-14T09:00:36Z\",\"user_id\":\"" CANARY_USER "\",\"email\":\"" CANARY_USER
    "@\",\"consent\":true,\"device\":{\"os\":\"ios\"}}",
    "{\"event_id\":\"1d2a44de-2d05-4d7e-a873-a6cff2672335\",\"event_type\":\"search\","
    "\"occurred_at\":\"2025-09-14T09:00:36Z\",\"user_id\":\"" CANARY_USER "\",\"" CANARY_EMAIL
    "\":\"" CANARY_IP "\",\"consent\":true,\"device\":{\"os\":\"ios\"}}",
    "{\"event_id\":\"" CANARY_EMAIL "\",\"event_type\":\"" CANARY_USER "\",\"occurred_at\":\"" CANARY_IP
    "\",\"user_id\":\"" CANARY_USER "\",\"client_ip\":\"" CANARY_EMAIL "\",\"consent\":\"" CANARY_USER
    "\",\"device\":{\"os\":\"" CANARY_EMAIL "\"}}",
    "{\"user_id\":\"" CANARY_USER "\",\"message\":\"" CANARY_EMAIL "\",\"email\":\"" CANARY_EMAIL "\"",
    "{\"event_id\":\"1d2a44de-2d05-4d7e-a873-a6cff2672335\",\"event_type\":\"search\","
    "\"occurred_at\":\"2025-09-14T09:00:36Z\",\"email\":\"" CANARY_EMAIL "\",\"consent\":true,"
    "\"device\":{\"os\":\"ios\"}}",
    "[\"" CANARY_EMAIL "\", \"" CANARY_USER "\"]",
    "{\"user_id\":\"" CANARY_USER "\",\"user_id\":\"" CANARY_EMAIL "\"}",
};

static void assert_no_canary(const char *what, const char *text, size_t len)
{
	const char *hit = kiln_test_canary_in(text, len, canaries);

	if (hit)
		fail_msg("%s carries the record value %s: %.*s", what, hit, (int)len, text);
}

/* Invalid records: neither the violation paths nor kiln_error_last() after
 * kiln_curate_end carry a value. */
static void test_no_value_in_errors_or_paths(void **state)
{
	fixture *f = *state;

	for (size_t i = 0; i < sizeof(invalid_records) / sizeof(invalid_records[0]); i++) {
		kiln_buf out = KILN_BUF_INIT(0);
		kiln_report report;
		const char *split;
		size_t split_len;
		int rc;

		kiln_error_set(0, "%s", "");
		assert_true(curate(f, invalid_records[i], &out, &report, &rc, &split, &split_len) > 0 ||
		            rc == KILN_ENOTFOUND);
		for (size_t v = 0; v < report.kept; v++)
			assert_no_canary("a violation path", report.v[v].path, strlen(report.v[v].path));
		assert_no_canary("kiln_error_last()", kiln_error_last(), strlen(kiln_error_last()));
		kiln_buf_free(&out);
	}
}

/* No log line written while invalid records are curated (the log sink
 * captured at debug level) holds a value. The curator holds no metrics
 * registry: what reject counters and quarantine lines are labelled with is
 * the violation code and path, checked above. */
static void test_no_value_in_logs(void **state)
{
	fixture *f = *state;
	char path[] = "/tmp/kiln-curate-log-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	kiln_log_setup(true, KILN_LOG_DEBUG);
	kiln_log_set_fd(fd);
	for (size_t i = 0; i < sizeof(invalid_records) / sizeof(invalid_records[0]); i++) {
		kiln_buf out = KILN_BUF_INIT(0);
		kiln_report report;
		const char *split;
		size_t split_len;
		int rc;

		(void)curate(f, invalid_records[i], &out, &report, &rc, &split, &split_len);
		kiln_buf_free(&out);
	}
	kiln_log_set_fd(2);
	kiln_log_setup(true, KILN_LOG_INFO);
	close(fd);
	assert_null(kiln_test_canary_in_file(path, canaries));
	unlink(path);
}

/* Array items classified pii without a pseudonymDomain take the array's
 * name as their domain (they have no name of their own): a contract like
 * that used to crash the curator on a NULL domain. */
static void test_pii_array_items(void **state)
{
	static const char contract[] = "apiVersion: v3.0.2\nkind: DataContract\nid: arr\nversion: 1.0.0\n"
	                               "status: active\nschema:\n  - name: rec\n    logicalType: object\n"
	                               "    properties:\n      - name: id\n        logicalType: string\n"
	                               "      - name: emails\n        logicalType: array\n        items:\n"
	                               "          logicalType: string\n          classification: pii\n";
	fixture *f = *state;
	kiln_contract *c = NULL;
	kiln_validator *v;
	kiln_curator *cur = NULL;
	kiln_buf out = KILN_BUF_INIT(0);
	kiln_report report;
	char a[KILN_TOKEN_MAX], b[KILN_TOKEN_MAX], want[256];
	const char *split;
	size_t split_len;
	const kiln_field *emails;

	assert_int_equal(kiln_contract_load_buffer(&c, "arr.yaml", contract, sizeof(contract) - 1, NULL), 0);
	emails = kiln_field_child(c->root, "emails", 6, kiln_json_hash("emails", 6));
	assert_non_null(emails);
	assert_non_null(emails->items);
	assert_string_equal(emails->items->pseudo_domain, "emails");
	v = kiln_validator_new(c, NULL);
	assert_non_null(v);
	assert_int_equal(kiln_curator_new(&cur, &(kiln_curator_options){.contract = c, .key = &f->key}), 0);
	kiln_curate_begin(cur, &out);
	assert_int_equal(kiln_validate_hook(v, "{\"id\":\"a\",\"emails\":[\"x@y.com\",\"z\"]}", 35, &report,
	                                    kiln_curate_token, cur),
	                 0);
	assert_int_equal(kiln_curate_end(cur, &split, &split_len), 0); /* no split field asked for */
	token(f, a, "emails", "x@y.com");
	token(f, b, "emails", "z");
	snprintf(want, sizeof(want), "{\"id\":\"a\",\"emails\":[\"%s\",\"%s\"]}", a, b);
	assert_int_equal(out.len, strlen(want));
	assert_memory_equal(out.ptr, want, out.len);
	kiln_buf_free(&out);
	kiln_curator_free(cur);
	kiln_validator_free(v);
	kiln_contract_free(c);
}

/* A nested split key (split.key: customer.customer_id): the split value is
 * that field's curated value (its token in its domain: pseudonymDomain
 * "customer"); a record without customer, or a customer without
 * customer_id, has none (KILN_ENOTFOUND: quarantined as missing_required),
 * even when a top-level customer_id or another object's customer_id holds
 * a value. A nested pii field without pseudonymDomain takes its own name
 * as its domain (contact.customer_id: "customer_id"), not its path. */
static void test_nested_split_key(void **state)
{
	static const char contract[] =
	    "apiVersion: v3.0.2\nkind: DataContract\nid: nest\nversion: 1.0.0\n"
	    "status: active\nschema:\n  - name: rec\n    logicalType: object\n"
	    "    properties:\n      - name: id\n        logicalType: string\n"
	    "      - name: customer_id\n        logicalType: string\n"
	    "      - name: customer\n        logicalType: object\n        properties:\n"
	    "          - name: customer_id\n            logicalType: string\n"
	    "            classification: pii\n            customProperties:\n"
	    "              - property: pseudonymDomain\n                value: customer\n"
	    "          - name: name\n            logicalType: string\n"
	    "      - name: contact\n        logicalType: object\n        properties:\n"
	    "          - name: customer_id\n            logicalType: string\n"
	    "            classification: pii\n";
	static const char *const without[] = {
	    "{\"id\":\"2\"}",
	    "{\"id\":\"3\",\"customer\":{\"name\":\"x\"}}",
	    "{\"id\":\"4\",\"customer_id\":\"c-1\",\"customer\":{},\"contact\":{\"customer_id\":\"c-1\"}}",
	};
	fixture *f = *state;
	kiln_contract *c = NULL;
	kiln_validator *v;
	kiln_curator *cur = NULL;
	kiln_buf out = KILN_BUF_INIT(0);
	kiln_report report;
	char a[KILN_TOKEN_MAX], b[KILN_TOKEN_MAX], want[256];
	const char *split, *rec;
	size_t split_len;
	const kiln_field *key;

	assert_int_equal(kiln_contract_load_buffer(&c, "nest.yaml", contract, sizeof(contract) - 1, NULL), 0);
	assert_int_equal(kiln_contract_field_at(&key, NULL, c, "customer.customer_id"), 0);
	v = kiln_validator_new(c, NULL);
	assert_non_null(v);
	assert_int_equal(
	    kiln_curator_new(&cur,
	                     &(kiln_curator_options){.contract = c, .key = &f->key, .split_field = key}),
	    0);

	rec = "{\"id\":\"1\",\"customer\":{\"customer_id\":\"c-1\",\"name\":\"x\"},"
	      "\"contact\":{\"customer_id\":\"c-1\"}}";
	kiln_curate_begin(cur, &out);
	assert_int_equal(kiln_validate_hook(v, rec, strlen(rec), &report, kiln_curate_token, cur), 0);
	assert_int_equal(kiln_curate_end(cur, &split, &split_len), 0);
	token(f, a, "customer", "c-1");
	token(f, b, "customer_id", "c-1");
	snprintf(want, sizeof(want),
	         "{\"id\":\"1\",\"customer\":{\"customer_id\":\"%s\",\"name\":\"x\"},"
	         "\"contact\":{\"customer_id\":\"%s\"}}",
	         a, b);
	assert_int_equal(out.len, strlen(want));
	assert_memory_equal(out.ptr, want, out.len);
	assert_int_equal(split_len, strlen(a));
	assert_memory_equal(split, a, split_len);

	for (size_t i = 0; i < sizeof(without) / sizeof(without[0]); i++) {
		kiln_buf_reset(&out);
		kiln_curate_begin(cur, &out);
		assert_int_equal(
		    kiln_validate_hook(v, without[i], strlen(without[i]), &report, kiln_curate_token, cur),
		    0);
		assert_int_equal(kiln_curate_end(cur, &split, &split_len), KILN_ENOTFOUND);
		assert_non_null(strstr(kiln_error_last(), "customer.customer_id"));
	}
	kiln_buf_free(&out);
	kiln_curator_free(cur);
	kiln_validator_free(v);
	kiln_contract_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_valid_record_pseudonymised),
	    cmocka_unit_test(test_tokens_are_stable),
	    cmocka_unit_test(test_no_value_in_errors_or_paths),
	    cmocka_unit_test(test_no_value_in_logs),
	    cmocka_unit_test(test_pii_array_items),
	    cmocka_unit_test(test_nested_split_key),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
