/* Unit tests for src/quality/: the sketches against exact figures computed
 * here (quantiles within the relative accuracy, distinct counts within four
 * standard errors, moments to rounding), merging (a merge of two halves is
 * the sketch of the whole), and profiles of a contract: what is profiled
 * for personal fields (never a value), categories, missing counts, and the
 * profile.json codec (parse then render gives the same bytes). */
#define _GNU_SOURCE /* memmem */
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
#include "quality/drift.h"
#include "quality/profile.h"
#include "quality/sketch.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* a deterministic generator (xorshift64*) */
static uint64_t rng = 88172645463325252ull;
static double uniform(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (double)((rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static void test_quantiles_within_alpha(void **state)
{
	enum { N = 100000 };
	static double v[N];
	static const double qs[] = {0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1};
	kiln_ddsketch dd = {0};
	kiln_moments m = {0};
	double sum = 0, sq = 0;

	(void)state;
	for (int i = 0; i < N; i++) {
		/* a skewed mix: log-normal-ish positives, some negatives, some zeros */
		double u = uniform();
		v[i] = i % 10 == 0 ? 0 : i % 7 == 0 ? -exp(8 * u) : exp(12 * u) - 1 + 1e-3;
		assert_int_equal(kiln_dd_add(&dd, v[i]), 0);
		kiln_moments_add(&m, v[i]);
		sum += v[i];
	}
	qsort(v, N, sizeof(v[0]), cmp_double);
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		double want = v[(size_t)floor(qs[i] * (N - 1))], got = kiln_dd_quantile(&dd, qs[i]);
		assert_true(fabs(got - want) <= KILN_DD_ALPHA * fabs(want) + 1e-12);
	}
	for (int i = 0; i < N; i++)
		sq += (v[i] - sum / N) * (v[i] - sum / N);
	assert_int_equal(m.count, N);
	assert_true(fabs(m.mean - sum / N) <= 1e-9 * fabs(sum / N));
	assert_true(fabs(kiln_moments_variance(&m) - sq / N) <= 1e-9 * sq / N);
	assert_true(m.min == v[0] && m.max == v[N - 1]);
	assert_int_equal(kiln_dd_count(&dd), N);
	kiln_dd_free(&dd);
}

static void test_merge_is_the_whole(void **state)
{
	kiln_ddsketch a = {0}, b = {0}, all = {0};
	kiln_hll ha = {0}, hb = {0}, hall = {0};
	kiln_moments ma = {0}, mb = {0}, mall = {0};
	char key[32];

	(void)state;
	for (int i = 0; i < 50000; i++) {
		double x = (uniform() - 0.3) * 1e6;
		int n = snprintf(key, sizeof(key), "k%d", i % 30000);
		kiln_dd_add(i % 3 ? &a : &b, x);
		kiln_dd_add(&all, x);
		kiln_hll_add(i % 3 ? &ha : &hb, kiln_hll_hash(key, (size_t)n));
		kiln_hll_add(&hall, kiln_hll_hash(key, (size_t)n));
		kiln_moments_add(i % 3 ? &ma : &mb, x);
		kiln_moments_add(&mall, x);
	}
	assert_int_equal(kiln_dd_merge(&a, &b), 0);
	assert_int_equal(kiln_hll_merge(&ha, &hb), 0);
	kiln_moments_merge(&ma, &mb);
	assert_int_equal(a.zero, all.zero);
	assert_int_equal(a.pos.len, all.pos.len);
	assert_int_equal(a.pos.offset, all.pos.offset);
	assert_memory_equal(a.pos.counts, all.pos.counts, all.pos.len * sizeof(uint64_t));
	assert_memory_equal(a.neg.counts, all.neg.counts, all.neg.len * sizeof(uint64_t));
	assert_memory_equal(ha.reg, hall.reg, KILN_HLL_REGISTERS);
	assert_true(fabs(ma.mean - mall.mean) <= 1e-9 * fabs(mall.mean));
	assert_true(fabs(kiln_moments_variance(&ma) - kiln_moments_variance(&mall)) <=
	            1e-9 * kiln_moments_variance(&mall));
	kiln_dd_free(&a);
	kiln_dd_free(&b);
	kiln_dd_free(&all);
	kiln_hll_free(&ha);
	kiln_hll_free(&hb);
	kiln_hll_free(&hall);
}

static void test_distinct_within_error(void **state)
{
	static const unsigned sizes[] = {1, 10, 100, 1000, 5000, 20000, 100000, 400000};
	char key[32];

	(void)state;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		kiln_hll h = {0};
		double err;

		for (unsigned i = 0; i < sizes[s] * 2; i++) { /* every value twice */
			int n = snprintf(key, sizeof(key), "p1_%08u", i % sizes[s]);
			assert_int_equal(kiln_hll_add(&h, kiln_hll_hash(key, (size_t)n)), 0);
		}
		err = fabs((double)kiln_hll_estimate(&h) - sizes[s]) / sizes[s];
		/* 1.04 / sqrt(4096) = 1.6 % standard error (about 1 % below 1000
		 * values, where linear counting answers): within four */
		assert_true(err <= 4 * 0.01625);
		kiln_hll_free(&h);
	}
}

static void test_dd_bins_bounded(void **state)
{
	kiln_ddsketch dd = {0};

	(void)state;
	/* magnitudes from 1e-9 to 1e300: more buckets than kept; the largest stay exact */
	for (int e = -9; e <= 300; e++)
		for (int k = 1; k <= 9; k++)
			assert_int_equal(kiln_dd_add(&dd, k * pow(10, e)), 0);
	assert_true(dd.pos.len <= KILN_DD_MAX_BINS);
	assert_int_equal(kiln_dd_count(&dd), 310 * 9);
	assert_true(fabs(kiln_dd_quantile(&dd, 1) - 9e300) <= KILN_DD_ALPHA * 9e300);
	kiln_dd_free(&dd);
}

static const char CONTRACT[] = "apiVersion: v3.0.2\n"
                               "kind: DataContract\n"
                               "id: urn:test:profile\n"
                               "version: 1.0.0\n"
                               "status: active\n"
                               "schema:\n"
                               "  - name: events\n"
                               "    properties:\n"
                               "      - name: user\n"
                               "        logicalType: string\n"
                               "        classification: pii\n"
                               "      - name: kind\n"
                               "        logicalType: string\n"
                               "        customProperties:\n"
                               "          - property: enum\n"
                               "            value: [a, b, c]\n"
                               "      - name: ok\n"
                               "        logicalType: boolean\n"
                               "      - name: n\n"
                               "        logicalType: number\n"
                               "      - name: note\n"
                               "        logicalType: string\n"
                               "      - name: dev\n"
                               "        logicalType: object\n"
                               "        properties:\n"
                               "          - name: os\n"
                               "            logicalType: string\n";

static const kiln_field *child(const kiln_field *f, const char *name)
{
	for (size_t i = 0; i < f->child_count; i++)
		if (strcmp(f->children[i]->name, name) == 0)
			return f->children[i];
	return NULL;
}

static void add(kiln_profile *p, const kiln_profile_schema *s, const kiln_field *f, kiln_json_type t,
                uint32_t flags, const char *text)
{
	assert_int_equal(kiln_profile_add_value(p, s, f, t, flags, text, strlen(text)), 0);
}

static void test_profile_of_a_contract(void **state)
{
	kiln_contract *c = NULL;
	kiln_profile_schema *s = NULL;
	kiln_profile p, total, added, again;
	kiln_buf out = {0}, out2 = {0};
	const kiln_field *root;
	const kiln_profile_field *f;

	(void)state;
	assert_int_equal(kiln_contract_load_buffer(&c, "t.yaml", CONTRACT, strlen(CONTRACT), NULL), 0);
	root = c->root;
	assert_int_equal(kiln_profile_schema_new(&s, c), 0);
	assert_int_equal(kiln_profile_init(&p, s), 0);
	for (int i = 0; i < 10; i++) {
		char user[32], n[32];
		p.records++;
		snprintf(user, sizeof(user), "p1_canary%d", i % 4);
		add(&p, s, child(root, "user"), KILN_JSON_STRING, 0, user);
		add(&p, s, child(root, "kind"), KILN_JSON_STRING, 0, i % 3 == 0 ? "a" : "b");
		add(&p, s, child(root, "ok"), i % 2 ? KILN_JSON_TRUE : KILN_JSON_FALSE, 0,
		    i % 2 ? "true" : "false");
		snprintf(n, sizeof(n), "%d.5", i);
		if (i < 8)
			add(&p, s, child(root, "n"), KILN_JSON_NUMBER, 0, n);
		else
			add(&p, s, child(root, "n"), KILN_JSON_NULL, 0, "null");
		if (i < 5)
			add(&p, s, child(root, "note"), KILN_JSON_STRING, KILN_JSON_ESCAPED,
			    "caf\\u00e9 \\u65e5");
		if (i < 6) {
			add(&p, s, child(root, "dev"), KILN_JSON_OBJECT_BEGIN, 0, "{");
			if (i < 3)
				add(&p, s, child(child(root, "dev"), "os"), KILN_JSON_STRING, 0, "linux");
		}
	}
	f = kiln_profile_find(&p, "user");
	assert_non_null(f);
	assert_true(f->tokens);
	assert_int_equal(f->present, 10);
	assert_int_equal(kiln_hll_estimate(&f->distinct), 4);
	assert_int_equal(f->len_sum, 0); /* no lengths for personal fields */
	assert_int_equal(f->cat_count, 0);
	f = kiln_profile_find(&p, "kind");
	assert_int_equal(f->cat_count, 3);
	assert_string_equal(f->cat_names[0], "a");
	assert_int_equal(f->cat_counts[0], 4);
	assert_int_equal(f->cat_counts[1], 6);
	assert_int_equal(f->cat_counts[2], 0);
	f = kiln_profile_find(&p, "ok");
	assert_int_equal(f->cat_counts[0], 5); /* false */
	assert_int_equal(f->cat_counts[1], 5); /* true */
	f = kiln_profile_find(&p, "n");
	assert_int_equal(f->types[KILN_PTYPE_NULL], 2);
	assert_int_equal(f->types[KILN_PTYPE_NUMBER], 8);
	assert_true(f->num.mean == 4.0 && f->num.min == 0.5 && f->num.max == 7.5);
	f = kiln_profile_find(&p, "note");
	assert_int_equal(kiln_profile_missing(&p, f), 5);
	assert_int_equal(f->len_min, 6); /* "café 日": 6 code points */
	assert_int_equal(f->len_max, 6);
	f = kiln_profile_find(&p, "dev.os");
	assert_string_equal(f->parent, "dev");
	assert_int_equal(kiln_profile_missing(&p, f), 3); /* of 6 dev objects */
	assert_int_equal(kiln_profile_missing(&p, kiln_profile_find(&p, "dev")), 4);

	/* profile.json: parse what was rendered, render again: the same bytes */
	assert_int_equal(kiln_profile_render_file(&out, &p, &p), 0);
	assert_null(memmem(out.ptr, out.len, "canary", 6)); /* no personal value, not even a token */
	assert_int_equal(kiln_profile_parse_file(out.ptr, out.len, "t", &total, &added), 0);
	assert_int_equal(kiln_profile_render_file(&out2, &total, &added), 0);
	assert_int_equal(out.len, out2.len);
	assert_memory_equal(out.ptr, out2.ptr, out.len);

	/* merging a profile with itself doubles the counts, keeps the distinct */
	assert_int_equal(kiln_profile_init(&again, s), 0);
	assert_int_equal(kiln_profile_merge(&again, &total), 0);
	assert_int_equal(kiln_profile_merge(&again, &added), 0);
	assert_int_equal(again.records, 20);
	f = kiln_profile_find(&again, "kind");
	assert_int_equal(f->cat_counts[1], 12);
	assert_int_equal(kiln_hll_estimate(&kiln_profile_find(&again, "user")->distinct), 4);

	/* a broken file: one line naming it */
	kiln_profile_free(&total);
	assert_int_equal(kiln_profile_parse_file("{\"format\":\"x\"}", 14, "m:profile.json", &total, NULL),
	                 KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "m:profile.json: format is not kiln-profile-v1"));
	assert_int_equal(kiln_profile_parse_file("{\"format\":", 10, "m:profile.json", &total, NULL),
	                 KILN_EINVALID);

	kiln_profile_free(&p);
	kiln_profile_free(&total);
	kiln_profile_free(&added);
	kiln_profile_free(&again);
	kiln_buf_free(&out);
	kiln_buf_free(&out2);
	kiln_profile_schema_free(s);
	kiln_contract_free(c);
}

/* A contract of one schema object "events" whose properties are `props`
 * (YAML, indented for a property list); the caller frees it. */
static kiln_contract *contract_of(const char *props)
{
	kiln_buf y = {0};
	kiln_contract *c = NULL;

	assert_int_equal(kiln_buf_printf(&y,
	                                 "apiVersion: v3.1.0\nkind: DataContract\nid: urn:test:p\n"
	                                 "version: 1.0.0\nstatus: active\nschema:\n  - name: events\n"
	                                 "    properties:\n%s",
	                                 props),
	                 0);
	assert_int_equal(kiln_contract_load_buffer(&c, "t.yaml", y.ptr, y.len, NULL), 0);
	kiln_buf_free(&y);
	return c;
}

/* Issue 25, item 9: categories are found by binary search, so an enum of
 * 40,000 values over 40,000 records, a merge and a drift of such profiles
 * take at most ceil(log2(k + 1)) + 1 comparisons per value or category
 * (they took k/2 on average: 8e8 here, 39 s for `kiln run`). */
static void test_categories_scale(void **state)
{
	enum { K = 40000, PER = 17 /* ceil(log2(40001)) + 1 */ };
	kiln_buf props = {0};
	kiln_contract *c;
	kiln_profile_schema *s = NULL;
	kiln_profile p, q;
	const kiln_profile_field *f;
	uint64_t before;
	char v[16];

	(void)state;
	assert_int_equal(kiln_buf_puts(&props, "      - name: kind\n        logicalType: string\n"
	                                       "        customProperties:\n          - property: enum\n"
	                                       "            value: ["),
	                 0);
	for (int i = 0; i < K; i++)
		assert_int_equal(kiln_buf_printf(&props, "%sv%d", i ? ", " : "", i), 0);
	assert_int_equal(kiln_buf_puts(&props, "]\n      - name: n\n        logicalType: number\n"
	                                       "        customProperties:\n          - property: enum\n"
	                                       "            value: [3, 1, 2.5]\n"),
	                 0);
	assert_int_equal(kiln_buf_putc(&props, '\0'), 0);
	c = contract_of(props.ptr);
	assert_int_equal(kiln_profile_schema_new(&s, c), 0);
	assert_int_equal(kiln_profile_init(&p, s), 0);
	before = kiln_profile_category_probes();
	for (int i = 0; i < K; i++) {
		int at = (int)((uint64_t)i * 7919 % K); /* every value once, not in enum order */
		p.records++;
		snprintf(v, sizeof(v), "v%d", at);
		add(&p, s, child(c->root, "kind"), KILN_JSON_STRING, 0, v);
	}
	assert_true(kiln_profile_category_probes() - before <= (uint64_t)K * PER);
	f = kiln_profile_find(&p, "kind");
	assert_int_equal(f->cat_count, K);
	for (int i = 0; i < K; i++)
		assert_int_equal(f->cat_counts[i], 1);
	/* numbers match by value, as the validator compares them */
	add(&p, s, child(c->root, "n"), KILN_JSON_NUMBER, 0, "1.0");
	add(&p, s, child(c->root, "n"), KILN_JSON_NUMBER, 0, "2.5e0");
	add(&p, s, child(c->root, "n"), KILN_JSON_NUMBER, 0, "4");
	f = kiln_profile_find(&p, "n");
	assert_string_equal(f->cat_names[1], "1");
	assert_int_equal(f->cat_counts[0], 0);
	assert_int_equal(f->cat_counts[1], 1);
	assert_int_equal(f->cat_counts[2], 1);

	/* a merge: a lookup per category */
	assert_int_equal(kiln_profile_init(&q, s), 0);
	before = kiln_profile_category_probes();
	assert_int_equal(kiln_profile_merge(&q, &p), 0);
	assert_int_equal(kiln_profile_merge(&q, &p), 0);
	assert_true(kiln_profile_category_probes() - before <= 2 * (uint64_t)(K + 3) * PER);
	f = kiln_profile_find(&q, "kind");
	assert_int_equal(f->cat_count, K);
	assert_int_equal(f->cat_counts[K - 1], 2);

	/* drift over the categories: a lookup each way */
	before = kiln_profile_category_probes();
	assert_true(kiln_drift_psi(&p, kiln_profile_find(&p, "kind"), &q, kiln_profile_find(&q, "kind")) <
	            1e-9);
	assert_true(kiln_profile_category_probes() - before <= 2 * (uint64_t)K * PER);

	kiln_profile_free(&p);
	kiln_profile_free(&q);
	kiln_profile_schema_free(s);
	kiln_contract_free(c);
	kiln_buf_free(&props);
}

/* Issue 25, item 15: past KILN_PROFILE_MAX_FIELDS fields a profile counts
 * the rest as omitted and keeps no sketch of them; profile.json says so. */
static void test_field_cap(void **state)
{
	enum { N = KILN_PROFILE_MAX_FIELDS + 76 };
	kiln_buf props = {0}, out = {0}, out2 = {0};
	kiln_contract *c;
	kiln_profile_schema *s = NULL;
	kiln_profile p, total;

	(void)state;
	for (int i = 0; i < N; i++)
		assert_int_equal(
		    kiln_buf_printf(&props, "      - name: f%d\n        logicalType: string\n", i), 0);
	assert_int_equal(kiln_buf_putc(&props, '\0'), 0);
	c = contract_of(props.ptr);
	assert_int_equal(kiln_profile_schema_new(&s, c), 0);
	assert_int_equal(kiln_profile_init(&p, s), 0);
	assert_int_equal(p.count, KILN_PROFILE_MAX_FIELDS);
	assert_int_equal(p.omitted, 76);
	p.records = 1;
	add(&p, s, child(c->root, "f0"), KILN_JSON_STRING, 0, "x");
	add(&p, s, child(c->root, "f1100"), KILN_JSON_STRING, 0, "x"); /* not profiled */
	assert_null(kiln_profile_find(&p, "f1100"));
	assert_int_equal(kiln_profile_render_file(&out, &p, &p), 0);
	assert_non_null(memmem(out.ptr, out.len, "\"records\":1,\"omitted\":76,", 25));
	assert_int_equal(kiln_profile_parse_file(out.ptr, out.len, "t", &total, NULL), 0);
	assert_int_equal(total.omitted, 76);
	assert_int_equal(kiln_profile_render_file(&out2, &total, &p), 0);
	assert_int_equal(out.len, out2.len);
	assert_memory_equal(out.ptr, out2.ptr, out.len);
	kiln_profile_free(&p);
	kiln_profile_free(&total);
	kiln_profile_schema_free(s);
	kiln_contract_free(c);
	kiln_buf_free(&props);
	kiln_buf_free(&out);
	kiln_buf_free(&out2);
}

/* Issue 25, item 10: a profile that cannot be one kiln wrote for the
 * version is refused, naming the figure. */
static void test_profile_check(void **state)
{
	kiln_contract *c = NULL;
	kiln_profile_schema *s = NULL;
	kiln_profile p;
	kiln_profile_field *f;

	(void)state;
	assert_int_equal(kiln_contract_load_buffer(&c, "t.yaml", CONTRACT, strlen(CONTRACT), NULL), 0);
	assert_int_equal(kiln_profile_schema_new(&s, c), 0);
	assert_int_equal(kiln_profile_init(&p, s), 0);
	for (int i = 0; i < 10; i++) {
		char n[32];
		p.records++;
		add(&p, s, child(c->root, "user"), KILN_JSON_STRING, 0, "p1_x");
		add(&p, s, child(c->root, "kind"), KILN_JSON_STRING, 0, i % 3 == 0 ? "a" : "b");
		snprintf(n, sizeof(n), "%d.5", i);
		add(&p, s, child(c->root, "n"), KILN_JSON_NUMBER, 0, n);
		add(&p, s, child(c->root, "note"), KILN_JSON_STRING, 0, i ? "abc" : "");
	}
	assert_int_equal(kiln_profile_check(&p, &p, 10, "v"), 0);
	assert_int_equal(kiln_profile_check(&p, NULL, 12, "v"), 0); /* earlier commits unprofiled */
#define REFUSED(what)                                                                                        \
	do {                                                                                                 \
		assert_int_equal(kiln_profile_check(&p, NULL, 10, "v:profile.json"), KILN_EINVALID);         \
		assert_non_null(strstr(kiln_error_last(), what));                                            \
	} while (0)
	/* more records than stats.json has valid ones; added more than total */
	assert_int_equal(kiln_profile_check(&p, NULL, 9, "v:profile.json"), KILN_EINVALID);
	assert_string_equal(kiln_error_last(),
	                    "v:profile.json: total holds 10 records, stats.json 9 valid ones");
	p.records = 11;
	assert_int_equal(kiln_profile_check(&p, &p, 12, "v"), 0);
	p.records = 10;
	f = (kiln_profile_field *)kiln_profile_find(&p, "kind");
	f->present++, f->types[KILN_PTYPE_STRING]++;
	REFUSED("v:profile.json: total: field kind: more values than records");
	f->present--;
	REFUSED("field kind: its types do not sum to its values");
	f->types[KILN_PTYPE_STRING]--;
	f->cat_counts[2] = 1;
	REFUSED("field kind: its categories count more than its values");
	f->cat_counts[2] = 0;
	f = (kiln_profile_field *)kiln_profile_find(&p, "user");
	f->len_sum = 40;
	REFUSED("field user: profiled by tokens, yet it has figures of values");
	f->len_sum = 0;
	f = (kiln_profile_field *)kiln_profile_find(&p, "n");
	f->num.count = 9;
	REFUSED("field n: its number sketch does not count its numbers");
	f->num.count = 10;
	f->num.max = 6;
	REFUSED("field n: its quantiles fall outside [min, max]");
	f->num.max = 9.5;
	f->num.mean = 10;
	REFUSED("field n: its numbers' min, mean, max or variance disagree");
	f->num.mean = 5;
	f = (kiln_profile_field *)kiln_profile_find(&p, "note");
	f->len_min = 1;
	REFUSED("field note: its string lengths disagree with its string count");
	f->len_min = 0;
	assert_int_equal(kiln_profile_check(&p, NULL, 10, "v"), 0);
#undef REFUSED
	kiln_profile_free(&p);
	kiln_profile_schema_free(s);
	kiln_contract_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quantiles_within_alpha),
	    cmocka_unit_test(test_merge_is_the_whole),
	    cmocka_unit_test(test_distinct_within_error),
	    cmocka_unit_test(test_dd_bins_bounded),
	    cmocka_unit_test(test_profile_of_a_contract),
	    cmocka_unit_test(test_categories_scale),
	    cmocka_unit_test(test_field_cap),
	    cmocka_unit_test(test_profile_check),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
