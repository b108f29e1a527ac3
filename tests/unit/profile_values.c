/* Profile figures of issue 28 (src/quality/profile_values.c, sketch.c):
 * quantiles within [min, max] and distinct counts within the values; the
 * categories a string field without an enum gets from the data (exact
 * while at most k names, none past k or for a value the PII detectors
 * flag; merges associative); instants of date and timestamp fields; and a
 * profile.json written before these figures (tests/fixtures, made by
 * main's kiln on 2026-12-07) still read, checked and merged. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "core/buf.h"
#include "core/error.h"
#include "mask/screen.h"
#include "quality/drift.h"
#include "quality/profile.h"
#include "quality/sketch.h"

static const char CONTRACT[] = "apiVersion: v3.0.2\n"
                               "kind: DataContract\n"
                               "id: urn:test:values\n"
                               "version: 1.0.0\n"
                               "status: active\n"
                               "schema:\n"
                               "  - name: events\n"
                               "    properties:\n"
                               "      - name: country\n"
                               "        logicalType: string\n"
                               "        logicalTypeOptions:\n"
                               "          pattern: \"^[A-Z]{2}$\"\n"
                               "      - name: n\n"
                               "        logicalType: number\n"
                               "      - name: id\n"
                               "        logicalType: string\n"
                               "      - name: at\n"
                               "        logicalType: timestamp\n"
                               "      - name: day\n"
                               "        logicalType: date\n"
                               "      - name: user\n"
                               "        logicalType: string\n"
                               "        classification: pii\n";

typedef struct fixture {
	kiln_contract *c;
	kiln_profile_schema *s;
} fixture;

static void setup_k(fixture *fx, uint32_t k)
{
	kiln_pii_screen *screen = NULL;

	assert_int_equal(kiln_contract_load_buffer(&fx->c, "t.yaml", CONTRACT, strlen(CONTRACT), NULL), 0);
	assert_int_equal(kiln_profile_schema_new(&fx->s, fx->c), 0);
	assert_int_equal(kiln_pii_screen_new(&screen), 0);
	assert_int_equal(
	    kiln_profile_schema_set_categories(fx->s, k, kiln_pii_screen_flags, screen, kiln_pii_screen_free),
	    0);
}

static void teardown(fixture *fx)
{
	kiln_profile_schema_free(fx->s);
	kiln_contract_free(fx->c);
}

static const kiln_field *field(const fixture *fx, const char *name)
{
	for (size_t i = 0; i < fx->c->root->child_count; i++)
		if (strcmp(fx->c->root->children[i]->name, name) == 0)
			return fx->c->root->children[i];
	fail_msg("no field %s", name);
	return NULL;
}

static void add(kiln_profile *p, const fixture *fx, const char *name, kiln_json_type t, const char *text)
{
	p->records++;
	assert_int_equal(kiln_profile_add_value(p, fx->s, field(fx, name), t, false, text, strlen(text)), 0);
}

static char *render(const kiln_profile *p)
{
	kiln_buf b = KILN_BUF_INIT(0);

	assert_int_equal(kiln_profile_render(&b, p), 0);
	assert_int_equal(kiln_buf_put(&b, "", 1), 0);
	return b.ptr;
}

/* One value, 100: DDSketch's bucket stands for 100.46..., outside [100, 100]. */
static void test_quantiles_within_min_max(void **state)
{
	fixture fx = {0};
	kiln_profile p;
	const kiln_profile_field *f;
	char *text;

	(void)state;
	setup_k(&fx, 20);
	assert_int_equal(kiln_profile_init(&p, fx.s), 0);
	add(&p, &fx, "n", KILN_JSON_NUMBER, "100");
	f = kiln_profile_find(&p, "n");
	assert_true(kiln_dd_quantile(&f->dd, 0.5) != 100); /* what the sketch alone answers */
	for (double q = 0; q <= 1; q += 0.125)
		assert_true(kiln_profile_quantile(f, q) == 100);
	text = render(&p);
	assert_non_null(strstr(text,
	                       "\"quantiles\":{\"p01\":100,\"p05\":100,\"p25\":100,\"p50\":100,\"p75\":100,"
	                       "\"p95\":100,\"p99\":100}"));
	free(text);
	kiln_profile_free(&p);
	teardown(&fx);
}

/* Distinct strings: HyperLogLog overestimates some counts; the figure never
 * passes the values it counted (and this stream shows the overestimate). */
static void test_distinct_within_values(void **state)
{
	fixture fx = {0};
	kiln_profile p;
	const kiln_profile_field *f;
	bool over_seen = false;
	char v[32];

	(void)state;
	setup_k(&fx, 20);
	assert_int_equal(kiln_profile_init(&p, fx.s), 0);
	f = kiln_profile_find(&p, "id");
	for (int i = 1; i <= 30000; i++) {
		snprintf(v, sizeof(v), "id-%d", i);
		add(&p, &fx, "id", KILN_JSON_STRING, v);
		if (i % 100 == 0) {
			over_seen = over_seen || kiln_hll_estimate(&f->distinct) > (uint64_t)i;
			assert_true(kiln_profile_distinct(f) <= (uint64_t)i);
		}
	}
	assert_true(over_seen);
	assert_true(f->cat_over && f->cat_count == 0); /* 30000 names > k */
	kiln_profile_free(&p);
	teardown(&fx);
}

static void add_countries(kiln_profile *p, const fixture *fx, const char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		add(p, fx, "country", KILN_JSON_STRING, v[i]);
}

/* k = 3: exact counts while three names; a fourth ends them; merges in any
 * grouping give the same bytes; a personal value ends them too. */
static void test_categories_from_the_data(void **state)
{
	static const char *const a[] = {"DE", "FR", "DE", "DE"}, *const b[] = {"FR", "IT"},
	                         *const c[] = {"IT", "DE"}, *const d[] = {"ES"};
	fixture fx = {0};
	kiln_profile pa, pb, pc, pd, left, right, all;
	const kiln_profile_field *f;
	char *t1, *t2;

	(void)state;
	setup_k(&fx, 3);
	assert_int_equal(kiln_profile_init(&pa, fx.s), 0);
	assert_int_equal(kiln_profile_init(&pb, fx.s), 0);
	assert_int_equal(kiln_profile_init(&pc, fx.s), 0);
	assert_int_equal(kiln_profile_init(&pd, fx.s), 0);
	add_countries(&pa, &fx, a, 4);
	add_countries(&pb, &fx, b, 2);
	add_countries(&pc, &fx, c, 2);
	add_countries(&pd, &fx, d, 1);
	/* (a + b) + c against a + (b + c) */
	assert_int_equal(kiln_profile_init(&left, fx.s), 0);
	assert_int_equal(kiln_profile_merge(&left, &pa), 0);
	assert_int_equal(kiln_profile_merge(&left, &pb), 0);
	assert_int_equal(kiln_profile_merge(&left, &pc), 0);
	assert_int_equal(kiln_profile_init(&right, fx.s), 0);
	assert_int_equal(kiln_profile_merge(&right, &pb), 0);
	assert_int_equal(kiln_profile_merge(&right, &pc), 0);
	assert_int_equal(kiln_profile_init(&all, fx.s), 0);
	assert_int_equal(kiln_profile_merge(&all, &pa), 0);
	assert_int_equal(kiln_profile_merge(&all, &right), 0);
	t1 = render(&left);
	t2 = render(&all);
	assert_string_equal(t1, t2);
	assert_non_null(strstr(t1, "\"categories\":{\"DE\":4,\"FR\":2,\"IT\":2},\"categories_k\":3"));
	f = kiln_profile_find(&left, "country");
	assert_int_equal(kiln_profile_distinct(f), 3); /* exact */
	free(t1);
	free(t2);
	/* a fourth name: no categories, whichever side brings it */
	assert_int_equal(kiln_profile_merge(&left, &pd), 0);
	f = kiln_profile_find(&left, "country");
	assert_true(f->cat_over && f->cat_count == 0);
	assert_int_equal(kiln_profile_merge(&pd, &all), 0);
	assert_true(kiln_profile_find(&pd, "country")->cat_over);
	t1 = render(&left);
	t2 = render(&pd);
	assert_null(strstr(t1, "categories"));
	assert_string_equal(t1, t2);
	free(t1);
	free(t2);
	/* a value the detectors flag (an email address) is never a name */
	kiln_profile_clear(&pa);
	assert_false(kiln_profile_find(&pa, "country")->cat_over);
	add(&pa, &fx, "country", KILN_JSON_STRING, "DE");
	add(&pa, &fx, "country", KILN_JSON_STRING, "zelda.canary@example.com");
	t1 = render(&pa);
	assert_null(strstr(t1, "zelda"));
	assert_null(strstr(t1, "categories"));
	free(t1);
	/* personal (pii) fields never get categories */
	add(&pb, &fx, "user", KILN_JSON_STRING, "u1");
	assert_int_equal(kiln_profile_find(&pb, "user")->cat_count, 0);
	kiln_profile_free(&pa);
	kiln_profile_free(&pb);
	kiln_profile_free(&pc);
	kiln_profile_free(&pd);
	kiln_profile_free(&left);
	kiln_profile_free(&right);
	kiln_profile_free(&all);
	teardown(&fx);
}

/* A shift to a new category at 2/3 is flagged by PSI, as for an enum. */
static void test_drift_over_categories(void **state)
{
	fixture fx = {0};
	kiln_profile base, now;
	kiln_drift d;
	static const char *const mix[] = {"DE", "FR", "IT", "ES"};

	(void)state;
	setup_k(&fx, 20);
	assert_int_equal(kiln_profile_init(&base, fx.s), 0);
	assert_int_equal(kiln_profile_init(&now, fx.s), 0);
	for (int i = 0; i < 600; i++) {
		add(&base, &fx, "country", KILN_JSON_STRING, mix[i % 4]);
		add(&now, &fx, "country", KILN_JSON_STRING, i % 3 ? "BR" : mix[i % 4]);
	}
	assert_int_equal(kiln_drift_compare(&d, &base, &now, NULL), 0);
	for (size_t i = 0; i < d.count; i++)
		if (strcmp(d.fields[i].path, "country") == 0) {
			assert_true(d.fields[i].psi > 1);
			assert_true(d.fields[i].flagged);
		}
	kiln_drift_free(&d);
	/* the baseline's mix of the same: no PSI to speak of, not flagged */
	assert_int_equal(kiln_drift_compare(&d, &base, &base, NULL), 0);
	for (size_t i = 0; i < d.count; i++)
		if (strcmp(d.fields[i].path, "country") == 0)
			assert_true(d.fields[i].psi == 0 && !d.fields[i].flagged);
	kiln_drift_free(&d);
	/* past k distinct values now: no categories to compare, flagged as such */
	for (int i = 0; i < 25; i++) {
		char v[8];
		snprintf(v, sizeof(v), "C%c", 'A' + i);
		add(&now, &fx, "country", KILN_JSON_STRING, v);
	}
	assert_true(kiln_profile_find(&now, "country")->cat_over);
	assert_int_equal(kiln_drift_compare(&d, &base, &now, NULL), 0);
	for (size_t i = 0; i < d.count; i++)
		if (strcmp(d.fields[i].path, "country") == 0) {
			assert_true(d.fields[i].flagged);
			assert_string_equal(
			    d.fields[i].why,
			    "categories: 4 in the baseline, now past 20 distinct values (or a personal one)");
		}
	kiln_drift_free(&d);
	kiln_profile_free(&base);
	kiln_profile_free(&now);
	teardown(&fx);
}

/* Instants: exact at one-second buckets, the same sketch in any merge
 * order, widened buckets past 2048 seconds, dates as dates, round trip. */
static void test_times(void **state)
{
	kiln_tsketch a = {0}, b = {0}, all = {0}, ab = {0};
	fixture fx = {0};
	kiln_profile p, total, added;
	kiln_buf file = KILN_BUF_INIT(0);
	const kiln_profile_field *f;
	char *text, *again;

	(void)state;
	for (int64_t i = 0; i < 1000; i++) {
		int64_t ms = 1764000000000 + i * 1000 + (i % 7) * 10;
		assert_int_equal(kiln_ts_add(i % 2 ? &a : &b, ms), 0);
		assert_int_equal(kiln_ts_add(&all, ms), 0);
	}
	assert_int_equal(all.shift, 0);
	assert_int_equal(kiln_ts_quantile(&all, 0.5), 1764000000000 + 499 * 1000);
	assert_int_equal(kiln_ts_quantile(&all, 0), all.min_ms);
	assert_int_equal(kiln_ts_quantile(&all, 1), all.max_ms);
	assert_int_equal(kiln_ts_merge(&ab, &a), 0);
	assert_int_equal(kiln_ts_merge(&ab, &b), 0);
	assert_int_equal(ab.shift, all.shift);
	assert_int_equal(ab.offset, all.offset);
	assert_int_equal(ab.len, all.len);
	assert_memory_equal(ab.counts, all.counts, all.len * sizeof(uint64_t));
	/* a day apart: 86400 s in at most 2048 buckets of 2^6 s */
	assert_int_equal(kiln_ts_add(&all, 1764000000000 + 86400000), 0);
	assert_int_equal(all.shift, 6);
	assert_int_equal(all.count, 1001);
	kiln_ts_free(&a);
	kiln_ts_free(&b);
	kiln_ts_free(&all);
	kiln_ts_free(&ab);

	setup_k(&fx, 20);
	assert_int_equal(kiln_profile_init(&p, fx.s), 0);
	add(&p, &fx, "at", KILN_JSON_STRING, "2026-11-30T10:00:00Z");
	add(&p, &fx, "at", KILN_JSON_STRING, "2026-11-30T12:00:00.250+02:00");
	add(&p, &fx, "at", KILN_JSON_STRING, "2026-12-01T00:00:00Z");
	add(&p, &fx, "day", KILN_JSON_STRING, "2026-01-31");
	add(&p, &fx, "day", KILN_JSON_STRING, "2025-02-01");
	text = render(&p);
	assert_non_null(strstr(text,
	                       "\"time\":{\"count\":3,\"min\":\"2026-11-30T10:00:00Z\",\"max\":"
	                       "\"2026-12-01T00:00:00Z\",\"quantiles\":{\"p01\":\"2026-11-30T10:00:00Z\""));
	/* 12:00:00.250+02:00 is the median; 14 hours span 2048 buckets of 2^5 s */
	assert_non_null(strstr(text, "\"p50\":\"2026-11-30T10:00:"));
	assert_non_null(strstr(text, "\"sketch\":{\"shift\":5,"));
	assert_non_null(strstr(text, "\"time\":{\"count\":2,\"min\":\"2025-02-01\",\"max\":\"2026-01-31\""));
	assert_null(strstr(text, "\"categories_k\"")); /* no categories for times */
	/* profile.json round trip: the same bytes */
	assert_int_equal(kiln_profile_render_file(&file, &p, &p), 0);
	assert_int_equal(kiln_profile_parse_file(file.ptr, file.len, "t", &total, &added), 0);
	assert_int_equal(kiln_profile_check(&total, &added, p.records, "t"), 0);
	f = kiln_profile_find(&total, "day");
	assert_true(f->time && f->date && f->tm.count == 2);
	again = render(&total);
	assert_string_equal(text, again);
	free(text);
	free(again);
	kiln_buf_free(&file);
	kiln_profile_free(&total);
	kiln_profile_free(&added);
	kiln_profile_free(&p);
	teardown(&fx);
}

static char *read_fixture(const char *name, size_t *len)
{
	char path[4096];
	FILE *fp;
	char *text;
	long n;

	snprintf(path, sizeof(path), "%s/tests/fixtures/%s", KILN_SRCDIR, name);
	assert_non_null(fp = fopen(path, "rb"));
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	rewind(fp);
	assert_non_null(text = malloc((size_t)n + 1));
	assert_int_equal(fread(text, 1, (size_t)n, fp), (size_t)n);
	fclose(fp);
	*len = (size_t)n;
	return text;
}

/* profile.json as kiln wrote it before categories from the data and times
 * (bench-orders, 40 records): read, checked, merged with a new profile
 * (its strings never counted: no categories, no times after the merge). */
static void test_profile_json_before_categories(void **state)
{
	size_t len;
	char *text = read_fixture("profile-before-categories.json", &len), *out;
	kiln_profile total = {0}, added = {0};
	const kiln_profile_field *f;

	(void)state;
	if (kiln_profile_parse_file(text, len, "fixture", &total, &added) < 0)
		fail_msg("%s", kiln_error_last());
	assert_int_equal(kiln_profile_check(&total, &added, 40, "fixture"), 0);
	f = kiln_profile_find(&total, "shipping.address.country");
	assert_non_null(f);
	assert_true(f->cat_over && f->cat_count == 0 && !f->time);
	f = kiln_profile_find(&total, "status"); /* an enum: its categories as ever */
	assert_true(f->cat_count > 0 && !f->cat_k && !f->cat_over);
	assert_int_equal(kiln_profile_merge(&total, &added), 0);
	f = kiln_profile_find(&total, "shipping.address.country");
	assert_true(f->cat_over && f->cat_count == 0);
	out = render(&total);
	assert_null(strstr(out, "\"time\""));
	free(out);
	kiln_profile_free(&total);
	kiln_profile_free(&added);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quantiles_within_min_max),
	    cmocka_unit_test(test_distinct_within_values),
	    cmocka_unit_test(test_categories_from_the_data),
	    cmocka_unit_test(test_drift_over_categories),
	    cmocka_unit_test(test_times),
	    cmocka_unit_test(test_profile_json_before_categories),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
