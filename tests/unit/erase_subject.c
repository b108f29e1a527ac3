/* Unit tests for src/erase/subject.c and src/erase/zones.c: a subject's
 * needles against known answers, the curated and raw matchers on the forms
 * a person's data takes (escaped, case-changed, non-UTF-8, cut short, not
 * JSON, only a token), --subjects files, the ledger id, and erasing from a
 * raw zone and a quarantine in a file store.
 *
 * Known answers: key = bytes 0x00..0x1f, version 1, recomputed from
 * docs/FORMATS.md with /usr/bin/python3 (as tests/integration/curate_check.py
 * does):
 *   tok(d, v) = "p1_" + b32lower(HMAC-SHA-256(key, d + "\x1f" + v)[:16])
 *   tok("customer", "C-1001")          = p1_ywd2osczrl6czew7p66qqreiuy
 *   tok("customer", "C-2002")          = p1_ziaknlvaajlskhnsrxz4o5n7xi
 *   tok("num_id", "12345")             = p1_wln4y2dmskhqoyaqjuc6vfr4wq
 *   tok("email", "alice@example.com")  = p1_6zmfes34ky7kpcyeellgleqy2q
 *   tok("contact", "bob")              = p1_f64p7ez5zpmdhmpcagtgcdeaua
 *   tok("email", "bob@example.org")    = p1_n3w5laqek5i2w5z2xf5rslifwy
 *   tok("phone", "+4915112345678")     = p1_b2vztkbjvxvebh5upgtce2fszy
 *   K = blake2b(b"kiln erasure subject v1", digest_size=32, key=key)
 *   ledger({customer_id=C-1001}) = blake2b(tok("customer","C-1001") + "\n",
 *       digest_size=32, key=K).hexdigest()
 *     = a4a51364c45670bc4b97838955f1b5f47cb0bfa44eb1a8c2cc24ec764e9080e5 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "fixture.h"
#include "contract/contract.h"
#include "core/error.h"
#include "erase/scan.h"
#include "erase/subject.h"
#include "erase/zones.h"
#include "mask/key.h"
#include "shard/quarantine.h"
#include "shard/raw.h"

#define T_C1001   "p1_ywd2osczrl6czew7p66qqreiuy"
#define T_C2002   "p1_ziaknlvaajlskhnsrxz4o5n7xi"
#define T_NUM     "p1_wln4y2dmskhqoyaqjuc6vfr4wq"
#define T_ALICE   "p1_6zmfes34ky7kpcyeellgleqy2q"
#define T_BOB     "p1_f64p7ez5zpmdhmpcagtgcdeaua"
#define T_BOB_DET "p1_n3w5laqek5i2w5z2xf5rslifwy"
#define T_PHONE   "p1_b2vztkbjvxvebh5upgtce2fszy"
#define LEDGER    "a4a51364c45670bc4b97838955f1b5f47cb0bfa44eb1a8c2cc24ec764e9080e5"

static char tmp[PATH_MAX];
static kiln_contract *contract;
static kiln_key test_key;

static const char contract_yaml[] = "apiVersion: v3.1.0\n"
                                    "kind: DataContract\n"
                                    "id: erase-test\n"
                                    "name: Erase test\n"
                                    "version: 1.0.0\n"
                                    "status: active\n"
                                    "schema:\n"
                                    "  - name: rec\n"
                                    "    logicalType: object\n"
                                    "    properties:\n"
                                    "      - name: customer_id\n"
                                    "        logicalType: string\n"
                                    "        classification: pii\n"
                                    "        customProperties:\n"
                                    "          - property: pseudonymDomain\n"
                                    "            value: customer\n"
                                    "      - name: num_id\n"
                                    "        logicalType: integer\n"
                                    "        classification: pii\n"
                                    "      - name: email\n"
                                    "        logicalType: string\n"
                                    "        classification: pii\n"
                                    "        logicalTypeOptions:\n"
                                    "          format: email\n"
                                    "      - name: contact\n"
                                    "        logicalType: string\n"
                                    "        classification: pii\n"
                                    "        logicalTypeOptions:\n"
                                    "          format: email\n"
                                    "        customProperties:\n"
                                    "          - property: pseudonymisation\n"
                                    "            value: keep-domain\n"
                                    "      - name: note\n"
                                    "        logicalType: string\n"
                                    "        customProperties:\n"
                                    "          - property: piiScan\n"
                                    "            value: true\n"
                                    "      - name: city\n"
                                    "        logicalType: string\n"
                                    "      - name: customer\n"
                                    "        logicalType: object\n"
                                    "        properties:\n"
                                    "          - name: phone\n"
                                    "            logicalType: string\n"
                                    "            classification: pii\n";

static int setup(void **state)
{
	unsigned char bytes[32];

	(void)state;
	for (int i = 0; i < 32; i++)
		bytes[i] = (unsigned char)i;
	kiln_key_init(&test_key, bytes, 1);
	if (kiln_contract_load_buffer(&contract, "erase-test.yaml", contract_yaml, strlen(contract_yaml),
	                              NULL) < 0) {
		fprintf(stderr, "%s\n", kiln_error_last());
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	kiln_contract_free(contract);
	kiln_key_wipe(&test_key);
	return 0;
}

/* A subject of the given identifiers, resolved against the test contract. */
static kiln_subject *subject_of(const char *const *ids)
{
	kiln_subject *s;

	assert_int_equal(kiln_subject_new(&s), 0);
	for (; *ids; ids++)
		assert_int_equal(kiln_subject_add(s, *ids, "test"), 0);
	assert_int_equal(kiln_subject_resolve(s, contract, &test_key), 0);
	assert_int_equal(kiln_subject_finish(s, "ds"), 0);
	return s;
}

static bool has_needle(const kiln_subject *s, const char *want)
{
	for (size_t i = 0; i < kiln_subject_token_count(s); i++) {
		size_t n;
		const char *t = kiln_subject_token(s, i, &n);
		if (n == strlen(want) && memcmp(t, want, n) == 0)
			return true;
	}
	return false;
}

static bool raw_has(kiln_subject *s, const char *text)
{
	return kiln_subject_in_raw(s, text, strlen(text));
}

static bool curated_has(const kiln_subject *s, const char *text)
{
	return kiln_subject_in_curated(s, text, strlen(text));
}

static void test_needles(void **state)
{
	const char *ids[] = {"customer_id=C-1001",
	                     "num_id=12345",
	                     "email=Alice@Example.COM",
	                     "contact= Bob@Example.org",
	                     "customer.phone=+4915112345678",
	                     NULL};
	kiln_subject *s = subject_of(ids);
	size_t prev_len = 0;
	const char *prev = NULL;

	(void)state;
	assert_true(has_needle(s, T_C1001));
	assert_true(has_needle(s, T_NUM));
	assert_true(has_needle(s, T_ALICE)); /* email format: trimmed, lower-cased; and the detector's */
	assert_true(has_needle(s, T_BOB "@example.org")); /* keep-domain: local part's token, domain kept */
	assert_true(has_needle(s, T_PHONE)); /* nested field, domain = its name "phone"; and the detector's */
	assert_false(has_needle(s, T_BOB_DET)); /* " Bob@..." is not one whole detector match */
	assert_int_equal(kiln_subject_token_count(s), 5);
	for (size_t i = 0; i < kiln_subject_token_count(s); i++) { /* sorted, distinct */
		size_t n;
		const char *t = kiln_subject_token(s, i, &n);
		if (prev) {
			int c = memcmp(prev, t, n < prev_len ? n : prev_len);
			assert_true(c < 0 || (c == 0 && prev_len < n));
		}
		prev = t;
		prev_len = n;
	}
	kiln_subject_free(s);

	/* a detector match as the whole value: its detector-domain token too */
	const char *ids2[] = {"contact=Bob@Example.org", NULL};
	s = subject_of(ids2);
	assert_true(has_needle(s, T_BOB "@example.org"));
	assert_true(has_needle(s, T_BOB_DET));
	kiln_subject_free(s);
}

static void test_add_and_finish(void **state)
{
	kiln_subject *s;

	(void)state;
	assert_int_equal(kiln_subject_new(&s), 0);
	assert_int_equal(kiln_subject_add(s, T_C1001, "w"), 0);
	assert_int_equal(kiln_subject_add(s, T_BOB "@example.org", "w"), 0);
	assert_int_equal(kiln_subject_add(s, "p1_tooshort", "w"), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "w: not a token"));
	assert_int_equal(kiln_subject_add(s, "secret-alice@example.com", "w"), KILN_EINVALID);
	assert_null(strstr(kiln_error_last(), "alice"));
	assert_int_equal(kiln_subject_add(s, "=alice", "w"), KILN_EINVALID);
	assert_int_equal(kiln_subject_add(s, "city=", "w"), KILN_EINVALID);
	assert_int_equal(kiln_subject_ledger_id(s, (char[65]){0}), KILN_EINVALID); /* no resolve yet */
	assert_int_equal(kiln_subject_add(s, "city=Secretville", "w"), 0);
	assert_int_equal(kiln_subject_resolve(s, contract, &test_key), 0);
	/* tokens given as tokens are needles as they are */
	assert_true(has_needle(s, T_C1001));
	assert_true(has_needle(s, T_BOB "@example.org"));
	/* city is a field, but not a pseudonymised one */
	assert_int_equal(kiln_subject_finish(s, "people"), KILN_EINVALID);
	assert_string_equal(kiln_error_last(),
	                    "subject: city: not a pseudonymised field of any contract of people");
	kiln_subject_free(s);
}

static void test_in_curated(void **state)
{
	const char *ids[] = {"customer_id=C-1001", "contact=bob@example.org", NULL};
	kiln_subject *s = subject_of(ids);

	(void)state;
	assert_true(curated_has(s, "{\"customer_id\":\"" T_C1001 "\",\"x\":1}"));
	assert_true(curated_has(s, "{\"note\":\"met " T_C1001 " today\"}"));
	assert_true(curated_has(s, T_C1001));
	assert_true(curated_has(s, "{\"contact\":\"" T_BOB "@example.org\"}"));
	/* inside a longer token or word: no match */
	assert_false(curated_has(s, "{\"c\":\"x" T_C1001 "\"}"));
	assert_false(curated_has(s, "{\"c\":\"" T_C1001 "a\"}"));
	assert_false(curated_has(s, "{\"c\":\"" T_C1001 "_\"}"));
	assert_false(curated_has(s, "{\"c\":\"_" T_C1001 "\"}"));
	assert_false(curated_has(s, "{\"c\":\"" T_C2002 "\"}"));
	/* the keep-domain needle needs its domain */
	assert_false(curated_has(s, "{\"contact\":\"" T_BOB "@example.com\"}"));
	kiln_subject_free(s);
}

static void test_in_raw(void **state)
{
	const char *ids[] = {"email=alice@example.com", "num_id=12345", NULL};
	kiln_subject *s = subject_of(ids);
	const char binary[] = "\xff\xfe name=ALICE@example.com \xff";

	(void)state;
	assert_true(raw_has(s, "{\"email\":\"alice@example.com\"}"));
	assert_true(raw_has(s, "{\"email\":\"\\u0061lice@EXAMPLE.com\"}")); /* escaped, case-changed */
	assert_true(raw_has(s, "{\"email\":\"  ALICE@example.COM \"}"));    /* trimmed */
	assert_true(raw_has(s, "{\"other\":\"alice\\u0040example.com\",\"n\":1}")); /* any string */
	assert_true(raw_has(s, "{\"email\":\"alice@example.com\",\"na"));           /* cut short */
	assert_true(raw_has(s, "{\"email\":\"alice@exam"
	                       "ple.com")); /* cut in the literal, no closing quote */
	assert_true(raw_has(s, "mail from Alice@Example.com, thanks"));  /* not JSON */
	assert_true(kiln_subject_in_raw(s, binary, sizeof(binary) - 1)); /* not UTF-8 */
	assert_false(raw_has(s, "mail from xalice@example.com, thanks"));
	assert_false(raw_has(s, "{\"email\":\"malice@example.com\"}"));
	assert_false(raw_has(s, "{\"email\":\"alice@example.co\"}"));
	/* a number id: equal values only, never inside a longer number */
	assert_true(raw_has(s, "{\"num_id\":12345}"));
	assert_true(raw_has(s, "{\"num_id\":\"12345\"}"));
	assert_false(raw_has(s, "{\"num_id\":123456}"));
	assert_false(raw_has(s, "{\"num_id\":-12345}"));
	assert_false(raw_has(s, "{\"num_id\":12345.5}"));
	assert_true(raw_has(s, "id=12345;"));
	assert_false(raw_has(s, "id=123456;"));
	assert_false(raw_has(s, "id=a12345;"));
	assert_false(raw_has(s, ""));
	kiln_subject_free(s);

	/* a token alone: found by recomputing the tokens of the values */
	const char *tok[] = {T_C1001, T_BOB "@example.org", NULL};
	s = subject_of(tok);
	assert_true(raw_has(s, "{\"customer_id\":\"C-1001\"}"));
	assert_true(raw_has(s, "{\"customer_id\":\"C-10\\u00301\"}"));
	assert_true(raw_has(s, "{\"x\":[\"C-1001\"]"));
	assert_false(raw_has(s, "{\"customer_id\":\"C-1002\"}"));
	assert_true(raw_has(s, "{\"contact\":\" BOB@example.ORG\"}")); /* keep-domain form recomputed */
	assert_false(raw_has(s, "{\"contact\":\"bob@example.com\"}"));
	kiln_subject_free(s);

	/* free-text mentions: the detector's token */
	const char *phone[] = {"customer.phone=+4915112345678", NULL};
	s = subject_of(phone);
	assert_true(raw_has(s, "{\"note\":\"call me at +49 151 12345678 please\"}"));
	assert_true(raw_has(s, "{\"note\":\"call me at \\u002b4915112345678\"}"));
	assert_false(raw_has(s, "{\"note\":\"call me at +49 151 12345679 please\"}"));
	kiln_subject_free(s);
}

static void test_subjects_file(void **state)
{
	static const char text[] = "# people to forget\r\n"
	                           "customer_id=C-1001\r\n"
	                           "email=alice@example.com\r\n"
	                           "\r\n"
	                           "  \t\n"
	                           "# the second one\n"
	                           "customer_id=C-2002\n"
	                           "\n";
	kiln_subject **v;
	size_t n;

	(void)state;
	assert_int_equal(kiln_subjects_parse(text, strlen(text), "subjects.txt", &v, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(kiln_subject_resolve(v[0], contract, &test_key), 0);
	assert_int_equal(kiln_subject_resolve(v[1], contract, &test_key), 0);
	assert_true(has_needle(v[0], T_C1001));
	assert_true(has_needle(v[0], T_ALICE));
	assert_false(has_needle(v[0], T_C2002));
	assert_true(has_needle(v[1], T_C2002));
	assert_int_equal(kiln_subject_token_count(v[1]), 1);
	for (size_t i = 0; i < n; i++)
		kiln_subject_free(v[i]);
	free(v);

	static const char bad[] = "customer_id=C-1001\n\n# x\nalice-secret@example.com\n";
	assert_int_equal(kiln_subjects_parse(bad, strlen(bad), "s.txt", &v, &n), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "s.txt:4: "));
	assert_null(strstr(kiln_error_last(), "secret"));
	assert_null(v);
	static const char nul[] = "customer_id=C-1\0x\n";
	assert_int_equal(kiln_subjects_parse(nul, sizeof(nul) - 1, "s.txt", &v, &n), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "s.txt:1: holds a NUL byte");
	assert_int_equal(kiln_subjects_parse("# only\n\n", 8, "s.txt", &v, &n), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "s.txt: names no subject");
}

static void test_ledger_id(void **state)
{
	const char *ids[] = {"customer_id=C-1001", NULL};
	kiln_subject *a = subject_of(ids), *b = subject_of(ids);
	char ia[65], ib[65];

	(void)state;
	assert_int_equal(kiln_subject_ledger_id(a, ia), 0);
	assert_int_equal(kiln_subject_ledger_id(b, ib), 0);
	assert_string_equal(ia, LEDGER);
	assert_string_equal(ia, ib);
	assert_null(strstr(ia, T_C1001 + 3));
	kiln_subject_free(a);
	kiln_subject_free(b);
}

/* --- zones ----------------------------------------------------------------- */

typedef struct lines {
	kiln_buf text; /* every decoded record rendered again */
	size_t n;
} lines;

static int raw_collect(void *ctx, const kiln_raw_record *r)
{
	lines *l = ctx;

	l->n++;
	return kiln_raw_render(&l->text, r);
}

static kiln_store *open_store(const char *name)
{
	char url[PATH_MAX + 16];
	kiln_store *store;

	snprintf(url, sizeof(url), "file://%s/%s", tmp, name);
	assert_int_equal(kiln_store_open(&store, url, NULL), 0);
	return store;
}

static kiln_raw_record raw_rec(int64_t offset, const char *value)
{
	return (kiln_raw_record){.topic = "orders",
	                         .partition = 0,
	                         .offset = offset,
	                         .timestamp = 1700000000000 + offset,
	                         .timestamp_type = 1,
	                         .key = "k",
	                         .key_len = 1,
	                         .value = value,
	                         .value_len = strlen(value)};
}

static bool object_exists(const char *store, const char *key)
{
	char path[PATH_MAX * 2];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s/%s", tmp, store, key);
	return stat(path, &st) == 0;
}

static char *object_bytes(const char *store, const char *key, size_t *out_len)
{
	char path[PATH_MAX * 2];
	FILE *f;
	char *p;
	long n;

	snprintf(path, sizeof(path), "%s/%s/%s", tmp, store, key);
	assert_non_null(f = fopen(path, "rb"));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	p = malloc((size_t)n + 1);
	assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*out_len = (size_t)n;
	return p;
}

static void put_object(const char *store, const char *key, const char *text)
{
	char path[PATH_MAX * 2];

	snprintf(path, sizeof(path), "%s/%s/%s", tmp, store, key);
	kiln_test_write_file(path, text, 0600);
}

static void test_erase_raw(void **state)
{
	kiln_store *store = open_store("raw");
	kiln_raw_writer *w;
	const char *ids[] = {"email=alice@example.com", NULL};
	kiln_subject *s = subject_of(ids);
	kiln_raw_record mixed[] = {raw_rec(10, "{\"email\":\"bob@example.org\",\"n\":1}"),
	                           raw_rec(11, "{\"email\":\"\\u0061lice@EXAMPLE.com\",\"n\":2}"),
	                           raw_rec(12, "{\"email\":\"carol@example.net\",\"n\":3}"),
	                           raw_rec(13, "not json, from Alice@example.com")};
	kiln_raw_record only[] = {raw_rec(20, "{\"email\":\"alice@example.com\"}")};
	kiln_raw_record none[] = {raw_rec(30, "{\"email\":\"dave@example.org\"}")};
	kiln_raw_header h = {.name = "from", .name_len = 4, .value = "alice@example.com", .value_len = 17};
	kiln_raw_record by_header = raw_rec(40, "{}");
	const char *topics[] = {"orders", "absent"};
	kiln_zone_stats st;
	lines got = {KILN_BUF_INIT(0), 0};
	kiln_buf want = KILN_BUF_INIT(0);
	char *before, *after;
	size_t before_len, after_len;

	(void)state;
	by_header.headers = &h;
	by_header.header_count = 1;
	assert_int_equal(kiln_raw_writer_new(&w, store, 0, NULL), 0);
	assert_int_equal(kiln_raw_write(w, mixed, 4, NULL), 0);
	assert_int_equal(kiln_raw_write(w, only, 1, NULL), 0);
	assert_int_equal(kiln_raw_write(w, none, 1, NULL), 0);
	assert_int_equal(kiln_raw_write(w, &by_header, 1, NULL), 0);
	kiln_raw_writer_free(w);
	/* objects that do not decode: searched as bytes */
	{
		char d[PATH_MAX * 2];
		snprintf(d, sizeof(d), "%s/raw/raw/orders/1", tmp);
		assert_int_equal(mkdir(d, 0700), 0);
	}
	put_object("raw", "raw/orders/1/0-1.jsonl.zst", "garbage with alice@example.com inside");
	put_object("raw", "raw/orders/1/2-3.jsonl.zst", "garbage without the person");

	/* dry run: counts, nothing changes */
	before = object_bytes("raw", "raw/orders/0/10-13.jsonl.zst", &before_len);
	assert_int_equal(kiln_zone_erase_raw(store, s, topics, 2, true, &st), 0);
	assert_int_equal(st.objects, 6);
	assert_int_equal(st.rewritten, 1);
	assert_int_equal(st.deleted, 3);
	assert_int_equal(st.records, 5);
	after = object_bytes("raw", "raw/orders/0/10-13.jsonl.zst", &after_len);
	assert_int_equal(before_len, after_len);
	assert_memory_equal(before, after, before_len);
	free(after);
	assert_true(object_exists("raw", "raw/orders/0/20-20.jsonl.zst"));
	assert_true(object_exists("raw", "raw/orders/1/0-1.jsonl.zst"));

	assert_int_equal(kiln_zone_erase_raw(store, s, topics, 2, false, &st), 0);
	assert_int_equal(st.objects, 6);
	assert_int_equal(st.rewritten, 1);
	assert_int_equal(st.deleted, 3);
	assert_int_equal(st.records, 5);
	/* the other records, byte-identical, under the same key */
	assert_int_equal(kiln_raw_read(store, "raw/orders/0/10-13.jsonl.zst", raw_collect, &got), 0);
	assert_int_equal(got.n, 2);
	assert_int_equal(kiln_raw_render(&want, &mixed[0]), 0);
	assert_int_equal(kiln_raw_render(&want, &mixed[2]), 0);
	assert_int_equal(got.text.len, want.len);
	assert_memory_equal(got.text.ptr, want.ptr, want.len);
	assert_false(object_exists("raw", "raw/orders/0/20-20.jsonl.zst"));
	assert_false(object_exists("raw", "raw/orders/0/40-40.jsonl.zst"));
	assert_false(object_exists("raw", "raw/orders/1/0-1.jsonl.zst"));
	assert_true(object_exists("raw", "raw/orders/1/2-3.jsonl.zst"));
	after = object_bytes("raw", "raw/orders/0/30-30.jsonl.zst", &after_len);
	free(after);

	/* idempotent: a second erasure finds nothing */
	assert_int_equal(kiln_zone_erase_raw(store, s, topics, 2, false, &st), 0);
	assert_int_equal(st.objects, 3);
	assert_int_equal(st.rewritten + st.deleted + st.records, 0);

	free(before);
	kiln_buf_free(&got.text);
	kiln_buf_free(&want);
	kiln_subject_free(s);
	kiln_store_close(store);
}

typedef struct qlines {
	kiln_buf text; /* every decoded line rendered again */
	size_t n;
	int64_t offsets[8];
} qlines;

static int quarantine_collect(void *ctx, const kiln_quarantine_line *line)
{
	qlines *l = ctx;

	if (l->n < 8)
		l->offsets[l->n] = line->offset;
	l->n++;
	return kiln_quarantine_render_line(&l->text, line);
}

static kiln_report report_of(kiln_reject code, const char *path)
{
	kiln_report r = {.count = 1, .kept = 1};

	r.v[0].code = code;
	snprintf(r.v[0].path, sizeof(r.v[0].path), "%s", path);
	return r;
}

/* Writes the quarantine objects of test_erase_quarantine and test_scan into
 * the store: orders/0 (ds/main) with four records, two of them the
 * subject's; orders/1 (ds/main) with only the subject's; orders/2 (other/main)
 * of another dataset with the subject's; orders/3 (ds/dev) with none. */
static void write_quarantine(kiln_store *store)
{
	kiln_quarantine *q;
	kiln_report type = report_of(KILN_REJECT_TYPE, "email"),
	            pattern = report_of(KILN_REJECT_PATTERN, "n");
	static const char bin[] = "\xff\xfe ALICE@example.com \xff";

	assert_int_equal(kiln_quarantine_new(&q, store, "ds", "main", NULL, 0, 0, NULL), 0);
	assert_int_equal(kiln_quarantine_add(q, "orders", 0, 5, &type, "{\"email\":1}", 11), 0);
	assert_int_equal(kiln_quarantine_add(q, "orders", 0, 6, &type, bin, sizeof(bin) - 1), 0);
	assert_int_equal(kiln_quarantine_add(q, "orders", 0, 7, &pattern, NULL, 0), 0);
	assert_int_equal(kiln_quarantine_add(q, "orders", 0, 8, &pattern,
	                                     "{\"email\":\"alice@example.com\",\"n\":\"x", 35),
	                 0);
	assert_int_equal(
	    kiln_quarantine_add(q, "orders", 1, 9, &type, "{\"email\":\"Alice@example.com\"}", 29), 0);
	assert_int_equal(kiln_quarantine_flush(q), 0);
	kiln_quarantine_free(q);
	assert_int_equal(kiln_quarantine_new(&q, store, "other", "main", NULL, 0, 0, NULL), 0);
	assert_int_equal(
	    kiln_quarantine_add(q, "orders", 2, 1, &type, "{\"email\":\"alice@example.com\"}", 29), 0);
	assert_int_equal(kiln_quarantine_flush(q), 0);
	kiln_quarantine_free(q);
	assert_int_equal(kiln_quarantine_new(&q, store, "ds", "dev", NULL, 0, 0, NULL), 0);
	assert_int_equal(kiln_quarantine_add(q, "orders", 3, 1, &type, "{\"email\":\"eve@example.com\"}", 27),
	                 0);
	assert_int_equal(kiln_quarantine_flush(q), 0);
	kiln_quarantine_free(q);
	/* an object of the older name (no dataset, no branch) */
	{
		kiln_violation v = type.v[0];
		kiln_quarantine_line l = {.topic = "orders",
		                          .partition = 4,
		                          .offset = 1,
		                          .code = v.code,
		                          .path = v.path,
		                          .violations = &v,
		                          .violation_count = 1,
		                          .count = 1,
		                          .record = "x ALICE@example.com",
		                          .record_len = 19};
		kiln_buf lines = KILN_BUF_INIT(0);

		assert_int_equal(kiln_quarantine_render_line(&lines, &l), 0);
		assert_int_equal(kiln_quarantine_put(store, "quarantine/orders/4/1-1.jsonl.zst", &lines, 0),
		                 0);
		kiln_buf_free(&lines);
	}
}

static void test_erase_quarantine(void **state)
{
	kiln_store *store = open_store("quarantine");
	const char *ids[] = {"email=alice@example.com", NULL};
	kiln_subject *s = subject_of(ids);
	const char *topics[] = {"orders"};
	const char *kept_key = "quarantine/orders/0/ds/main/5-8.jsonl.zst";
	qlines before = {KILN_BUF_INIT(0), 0, {0}}, after = {KILN_BUF_INIT(0), 0, {0}};
	kiln_zone_stats st;
	char *b1, *b2;
	size_t n1, n2;

	(void)state;
	write_quarantine(store);
	assert_int_equal(kiln_quarantine_read(store, kept_key, quarantine_collect, &before), 0);
	assert_int_equal(before.n, 4);

	b1 = object_bytes("quarantine", kept_key, &n1);
	assert_int_equal(kiln_zone_erase_quarantine(store, s, "ds", topics, 1, true, &st), 0);
	/* ds/main 0 and 1, ds/dev 3, the older name 4: not the other dataset's */
	assert_int_equal(st.objects, 4);
	assert_int_equal(st.rewritten, 1);
	assert_int_equal(st.deleted, 2);
	assert_int_equal(st.records, 4);
	b2 = object_bytes("quarantine", kept_key, &n2);
	assert_int_equal(n1, n2);
	assert_memory_equal(b1, b2, n1);
	free(b1);
	free(b2);

	assert_int_equal(kiln_zone_erase_quarantine(store, s, "ds", topics, 1, false, &st), 0);
	assert_int_equal(st.rewritten, 1);
	assert_int_equal(st.deleted, 2);
	assert_int_equal(st.records, 4);
	/* the other lines (the one with a null record included), byte-identical */
	assert_int_equal(kiln_quarantine_read(store, kept_key, quarantine_collect, &after), 0);
	assert_int_equal(after.n, 2);
	assert_int_equal(after.offsets[0], 5);
	assert_int_equal(after.offsets[1], 7);
	{
		const char *l2 = memchr(before.text.ptr, '\n', before.text.len) + 1;
		const char *l3 = memchr(l2, '\n', before.text.len - (size_t)(l2 - before.text.ptr)) + 1;
		const char *l4 = memchr(l3, '\n', before.text.len - (size_t)(l3 - before.text.ptr)) + 1;
		size_t first = (size_t)(l2 - before.text.ptr), third = (size_t)(l4 - l3);

		assert_int_equal(after.text.len, first + third);
		assert_memory_equal(after.text.ptr, before.text.ptr, first);
		assert_memory_equal(after.text.ptr + first, l3, third);
	}
	assert_false(object_exists("quarantine", "quarantine/orders/1/ds/main/9-9.jsonl.zst"));
	assert_true(object_exists("quarantine", "quarantine/orders/2/other/main/1-1.jsonl.zst"));
	assert_true(object_exists("quarantine", "quarantine/orders/3/ds/dev/1-1.jsonl.zst"));
	assert_false(object_exists("quarantine", "quarantine/orders/4/1-1.jsonl.zst"));

	kiln_buf_free(&before.text);
	kiln_buf_free(&after.text);
	kiln_subject_free(s);
	kiln_store_close(store);
}

typedef struct hits {
	char keys[8][256];
	uint64_t records[8];
	size_t n;
} hits;

static int on_hit(void *ctx, const kiln_scan_hit *h)
{
	hits *x = ctx;

	if (x->n < 8) {
		snprintf(x->keys[x->n], sizeof(x->keys[0]), "%s", h->key);
		x->records[x->n] = h->record;
	}
	x->n++;
	return 0;
}

static void put_zst(const char *store, const char *key, const char *text)
{
	char path[PATH_MAX * 2];
	size_t cap = ZSTD_compressBound(strlen(text)), n;
	char *z = malloc(cap);
	FILE *f;

	n = ZSTD_compress(z, cap, text, strlen(text), 3);
	assert_false(ZSTD_isError(n));
	snprintf(path, sizeof(path), "%s/%s/%s", tmp, store, key);
	assert_non_null(f = fopen(path, "wb"));
	assert_int_equal(fwrite(z, 1, n, f), n);
	fclose(f);
	free(z);
}

static void test_scan(void **state)
{
	kiln_store *store = open_store("scan");
	const char *ids[] = {"email=alice@example.com", "customer_id=C-1001", NULL};
	kiln_subject *s = subject_of(ids);
	kiln_raw_writer *w;
	kiln_raw_record recs[] = {raw_rec(1, "{\"x\":1}"), raw_rec(2, "{\"customer_id\":\"C-1001\"}")};
	const char *topics[] = {"orders"};
	hits h = {0};
	uint64_t objects;
	char d[PATH_MAX * 2];

	(void)state;
	snprintf(d, sizeof(d), "%s/scan/shards", tmp);
	assert_int_equal(mkdir(d, 0700), 0);
	snprintf(d, sizeof(d), "%s/scan/shards/ab", tmp);
	assert_int_equal(mkdir(d, 0700), 0);
	put_zst("scan", "shards/ab/ab01.jsonl.zst",
	        "{\"customer_id\":\"p1_aaaaaaaaaaaaaaaaaaaaaaaaaa\"}\n"
	        "{\"customer_id\":\"" T_C1001 "\"}\n"
	        "{\"note\":\"left by alice@example.com\"}\n");
	put_zst("scan", "shards/ab/ab02.jsonl.zst", "{\"customer_id\":\"p1_aaaaaaaaaaaaaaaaaaaaaaaaaa\"}\n");
	put_object("scan", "shards/ab/ab03.jsonl.zst", "not zstd: " T_C1001);
	assert_int_equal(kiln_raw_writer_new(&w, store, 0, NULL), 0);
	assert_int_equal(kiln_raw_write(w, recs, 2, NULL), 0);
	kiln_raw_writer_free(w);
	write_quarantine(store);

	assert_int_equal(kiln_erase_scan_store(store, s, on_hit, &h, &objects), 9);
	assert_int_equal(objects, 9);
	assert_string_equal(h.keys[0], "shards/ab/ab01.jsonl.zst");
	assert_int_equal(h.records[0], 1);
	assert_string_equal(h.keys[1], "shards/ab/ab01.jsonl.zst");
	assert_int_equal(h.records[1], 2);
	assert_string_equal(h.keys[2], "shards/ab/ab03.jsonl.zst");
	assert_string_equal(h.keys[3], "raw/orders/0/1-2.jsonl.zst");
	assert_int_equal(h.records[3], 1);

	/* after erasing the zones, the shards are all that is left to find */
	assert_int_equal(kiln_zone_erase_raw(store, s, topics, 1, false, NULL), 0);
	assert_int_equal(kiln_zone_erase_quarantine(store, s, NULL, topics, 1, false, NULL), 0);
	h.n = 0;
	assert_int_equal(kiln_erase_scan_store(store, s, on_hit, &h, &objects), 3);
	kiln_subject_free(s);
	kiln_store_close(store);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_needles),       cmocka_unit_test(test_add_and_finish),
	    cmocka_unit_test(test_in_curated),    cmocka_unit_test(test_in_raw),
	    cmocka_unit_test(test_subjects_file), cmocka_unit_test(test_ledger_id),
	    cmocka_unit_test(test_erase_raw),     cmocka_unit_test(test_erase_quarantine),
	    cmocka_unit_test(test_scan),
	};

	return kiln_test_main(tests, tmp, "erase-subject", setup, teardown);
}
