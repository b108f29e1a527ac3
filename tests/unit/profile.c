/* Unit tests for src/quality/: the sketches against exact figures computed
 * here (quantiles within the relative accuracy, distinct counts within four
 * standard errors, moments to rounding), merging (a merge of two halves is
 * the sketch of the whole), and profiles of a contract: what is profiled
 * for personal fields (never a value), categories, missing counts, and the
 * profile.json codec (parse then render gives the same bytes); a profile
 * recomputed from a version's curated records (kiln_profile_add_curated)
 * against the one kiln_curate_run wrote for it. */
#define _GNU_SOURCE /* memmem */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "kiln/reader.h"
#include "contract/contract.h"
#include "contract/validate.h"
#include "core/buf.h"
#include "core/error.h"
#include "ingest/curate_run.h"
#include "ingest/pipeline.h"
#include "manifest/manifest.h"
#include "manifest/version.h"
#include "mask/screen.h"
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

/* ---- a profile recomputed from curated records ---------------------------- */

static char tmpdir[PATH_MAX];

/* Every way the curator changes a value: a string and an integer turned
 * into tokens, an email keeping its domain, a date dropped, an object and a
 * string redacted, free text scanned, escapes kept as written (values and
 * keys), nulls, nested objects, array items, and unknown fields (allowed,
 * not profiled). */
static const char CURATED_CONTRACT[] =
    "apiVersion: v3.0.2\n"
    "kind: DataContract\n"
    "id: urn:test:curated\n"
    "version: 1.0.0\n"
    "status: active\n"
    "customProperties:\n"
    "  - property: unknownFields\n"
    "    value: allow\n"
    "schema:\n"
    "  - name: ev\n"
    "    properties:\n"
    "      - {name: id, logicalType: string, required: true}\n"
    "      - {name: user, logicalType: string, required: true, classification: pii}\n"
    "      - {name: cust_no, logicalType: integer, classification: pii}\n"
    "      - name: email\n"
    "        logicalType: string\n"
    "        classification: pii\n"
    "        logicalTypeOptions: {format: email}\n"
    "        customProperties: [{property: pseudonymisation, value: keep-domain}]\n"
    "      - name: birth\n"
    "        logicalType: date\n"
    "        classification: pii\n"
    "        customProperties: [{property: pseudonymisation, value: drop}]\n"
    "      - name: secret\n"
    "        logicalType: object\n"
    "        customProperties: [{property: pseudonymisation, value: redact}]\n"
    "        properties: [{name: a, logicalType: integer}]\n"
    "      - name: pin\n"
    "        logicalType: string\n"
    "        customProperties: [{property: pseudonymisation, value: redact}]\n"
    "      - name: kind\n"
    "        logicalType: string\n"
    "        customProperties: [{property: enum, value: [a, b, c]}]\n"
    "      - {name: ok, logicalType: boolean}\n"
    "      - {name: amount, logicalType: number}\n"
    "      - {name: n, logicalType: integer}\n"
    "      - name: note\n"
    "        logicalType: string\n"
    "        customProperties: [{property: piiScan, value: true}]\n"
    "      - {name: plain, logicalType: string}\n"
    "      - name: dev\n"
    "        logicalType: object\n"
    "        properties:\n"
    "          - {name: os, logicalType: string}\n"
    "          - {name: model, logicalType: string}\n"
    "      - name: tags\n"
    "        logicalType: array\n"
    "        items: {logicalType: string}\n";

/* Record i of the input (a few of them invalid: quarantined, in no shard). */
static void curated_input_record(kiln_buf *b, int i)
{
	kiln_buf_printf(b, "{\"id\":\"r%d\",", i);
	if (i % 7 == 3)
		kiln_buf_printf(b, "\"us\\u0065r\":\"us\\u0065r-%d\"", i % 37); /* escaped key and value */
	else
		kiln_buf_printf(b, "\"user\":\"user-%d\"", i % 37);
	if (i % 5)
		kiln_buf_printf(b, ",\"cust_no\":%d", i % 50);
	else if (i % 10 == 0)
		kiln_buf_puts(b, ",\"cust_no\":null");
	if (i % 3 == 0)
		kiln_buf_printf(b, ",\"email\":\"Name%d@Example.com\"", i % 20);
	if (i % 4 == 1)
		kiln_buf_puts(b, ",\"birth\":\"1990-04-12\"");
	if (i % 6 == 2)
		kiln_buf_printf(b, ",\"secret\":{\"a\":%d}", i);
	if (i % 8 == 5)
		kiln_buf_printf(b, ",\"pin\":\"%04d\"", i);
	kiln_buf_printf(b, ",\"kind\":\"%s\"", i == 17 || i == 650 ? "zzz" : i % 3 == 1 ? "b" : "a");
	if (i % 2)
		kiln_buf_printf(b, ",\"ok\":%s", i % 4 == 1 ? "true" : "false");
	kiln_buf_printf(b, ",\"amount\":%d.%02d", i * 37 % 1000, i % 100);
	if (i % 9 == 0)
		kiln_buf_puts(b, ",\"n\":null");
	else
		kiln_buf_printf(b, ",\"n\":%d", i * i % 1013 - 300);
	if (i % 5 != 4) {
		kiln_buf_puts(b, ",\"note\":\"");
		if (i % 4 == 0)
			kiln_buf_printf(b, "call me at ann%d@mail.example today", i);
		else if (i % 4 == 1)
			kiln_buf_printf(b, "caf\\u00e9 \\\"%d\\\"", i);
		else if (i % 4 == 2)
			kiln_buf_printf(b, "nothing personal %d", i);
		else
			kiln_buf_printf(b, "two: a%d@x.example, +44 20 7946 0958", i);
		kiln_buf_putc(b, '"');
	}
	if (i % 11 == 0)
		kiln_buf_printf(b, ",\"plain\":\"tab\\there %d\"", i);
	else if (i % 11 == 1)
		kiln_buf_puts(b, ",\"plain\":\"\"");
	kiln_buf_printf(b, ",\"dev\":{\"os\":\"%s\"", i % 3 ? "linux" : "ios");
	if (i % 4)
		kiln_buf_printf(b, ",\"model\":\"m%d\"", i % 13);
	kiln_buf_putc(b, '}');
	if (i % 3 != 2) {
		kiln_buf_puts(b, ",\"tags\":[");
		for (int t = 0; t < i % 4; t++)
			kiln_buf_printf(b, "%s\"t%d\"", t ? "," : "", (i + t) % 6);
		kiln_buf_putc(b, ']');
	}
	if (i % 10 == 7)
		kiln_buf_printf(b, ",\"zz\":{\"q\":[%d]}", i); /* unknown: kept, not profiled */
	kiln_buf_puts(b, "}\n");
}

static void curated_write_input(int records)
{
	kiln_buf b = KILN_BUF_INIT(0);
	char path[PATH_MAX + 64];

	for (int i = 0; i < records; i++)
		curated_input_record(&b, i);
	assert_int_equal(kiln_buf_put(&b, "", 1), 0);
	snprintf(path, sizeof(path), "%s/in.jsonl", tmpdir);
	kiln_test_write_file(path, b.ptr, 0644);
	kiln_buf_free(&b);
}

/* The numbers after each `"mean":` and `"variance":` of text, cut out
 * (replaced by "#") into vals: moments are floating-point summaries whose
 * last bits depend on the order values were added and merged in, and on
 * the variance's round trip through profile.json (sketch.h: "the moments up
 * to floating-point rounding"); everything else must match byte for byte. */
static char *cut_moments(const char *text, double *vals, size_t cap, size_t *n)
{
	char *out = malloc(strlen(text) + 1), *o = out;
	const char *at = text;

	assert_non_null(out);
	*n = 0;
	while (*at) {
		const char *name = NULL;

		if (strncmp(at, "\"mean\":", 7) == 0)
			name = "\"mean\":";
		else if (strncmp(at, "\"variance\":", 11) == 0)
			name = "\"variance\":";
		if (!name) {
			*o++ = *at++;
			continue;
		}
		char *end;
		memcpy(o, name, strlen(name));
		o += strlen(name);
		at += strlen(name);
		assert_true(*n < cap);
		vals[(*n)++] = strtod(at, &end);
		assert_true(end > at);
		at = end;
		*o++ = '#';
	}
	*o = '\0';
	return out;
}

static void assert_same_profile(const kiln_profile *want, const kiln_profile *got)
{
	kiln_buf a = KILN_BUF_INIT(0), b = KILN_BUF_INIT(0);
	double va[256], vb[256];
	size_t na, nb;
	char *ca, *cb;

	assert_int_equal(kiln_profile_render(&a, want), 0);
	assert_int_equal(kiln_profile_render(&b, got), 0);
	assert_int_equal(kiln_buf_put(&a, "", 1), 0);
	assert_int_equal(kiln_buf_put(&b, "", 1), 0);
	ca = cut_moments(a.ptr, va, 256, &na);
	cb = cut_moments(b.ptr, vb, 256, &nb);
	assert_string_equal(cb, ca);
	assert_int_equal(nb, na);
	assert_true(na >= 4); /* amount's and n's mean and variance */
	for (size_t i = 0; i < na; i++)
		if (fabs(va[i] - vb[i]) > 1e-9 * fmax(1, fabs(va[i])))
			fail_msg("moment %zu: %.17g recomputed, %.17g written", i, vb[i], va[i]);
	free(ca);
	free(cb);
	kiln_buf_free(&a);
	kiln_buf_free(&b);
}

/* The total profile of version `spec` recomputed from its records read as
 * `kiln cat` reads them (each split, shard after shard), into *out. */
static void recompute(const kiln_contract *contract, const kiln_profile_schema *schema, const char *spec,
                      kiln_profile *out, uint64_t *records)
{
	char repo[PATH_MAX + 16], store[PATH_MAX + 16];
	kiln_validator *validator = kiln_validator_new(contract, NULL);
	kiln_reader *r = NULL;

	assert_non_null(validator);
	snprintf(repo, sizeof(repo), "%s/m.git", tmpdir);
	snprintf(store, sizeof(store), "file://%s/store", tmpdir);
	if (kiln_reader_open(&r, repo, spec, store, NULL) != 0)
		fail_msg("reader: %s", kiln_error_last());
	assert_int_equal(kiln_profile_init(out, schema), 0);
	*records = 0;
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		kiln_cursor_options o = {.version = KILN_CURSOR_OPTIONS_VERSION, .split = (kiln_split)s};
		kiln_cursor *c = NULL;
		const char *line;
		size_t len;
		int rc;

		assert_int_equal(kiln_cursor_open(&c, r, &o), 0);
		while ((rc = kiln_cursor_next(c, &line, &len)) == 1) {
			if (kiln_profile_add_curated(out, schema, validator, line, len) != 0)
				fail_msg("add_curated: %s", kiln_error_last());
			(*records)++;
		}
		assert_int_equal(rc, 0);
		kiln_cursor_close(c);
	}
	kiln_reader_close(r);
	kiln_validator_free(validator);
}

/* The profile kiln_curate_run wrote for a version (its total), recomputed
 * from the version's records: the same, but for the rounding of the
 * moments. Two runs (the second's total merges the first's), two workers
 * and small shards (each batch's profile merged), both versions checked. */
static void test_profile_recomputed_from_curated(void **state)
{
	char path[PATH_MAX + 64], yaml[1024], commits[2][41], spec[96];
	kiln_contract *contract = NULL;
	kiln_profile_schema *schema = NULL;
	kiln_manifest *m = NULL;
	kiln_pipeline *p = NULL;

	(void)state;
	snprintf(path, sizeof(path), "%s/key", tmpdir);
	kiln_test_write_file(path, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n",
	                     0600);
	snprintf(path, sizeof(path), "%s/c.yaml", tmpdir);
	kiln_test_write_file(path, CURATED_CONTRACT, 0644);
	snprintf(yaml, sizeof(yaml),
	         "dataset: ev\ncontract: c.yaml\nsource: {kind: file, path: in.jsonl, name: ev}\n"
	         "pseudonymise: {key_file: key}\n"
	         "split: {key: user, salt: s1, ratios: {train: 0.6, dev: 0.2, test: 0.2}}\n"
	         "shards: {target_bytes: 16K}\nworkers: 2\n"
	         "store: {url: file://store}\nmanifest: {repo: m.git}\n");
	snprintf(path, sizeof(path), "%s/p.yaml", tmpdir);
	kiln_test_write_file(path, yaml, 0644);
	for (int run = 0; run < 2; run++) {
		kiln_run_result r;

		curated_write_input(run ? 800 : 500);
		if (kiln_pipeline_load(&p, path, NULL, 0) != 0)
			fail_msg("pipeline: %s", kiln_error_last());
		memset(&r, 0, sizeof(r));
		if (kiln_curate_run(p, NULL, &r) != 0)
			fail_msg("run %d: %s", run + 1, kiln_error_last());
		assert_int_equal(r.delta.quarantined, 1); /* kind "zzz" */
		memcpy(commits[run], r.commit, 41);
		kiln_pipeline_free(p);
		p = NULL;
	}
	assert_int_equal(
	    kiln_contract_load_buffer(&contract, "c.yaml", CURATED_CONTRACT, strlen(CURATED_CONTRACT), NULL),
	    0);
	assert_int_equal(kiln_profile_schema_new(&schema, contract), 0);
	{ /* categories from the data as the run counts them */
		kiln_pii_screen *screen = NULL;
		assert_int_equal(kiln_pii_screen_new(&screen), 0);
		assert_int_equal(kiln_profile_schema_set_categories(schema, KILN_PROFILE_CATEGORIES_K,
		                                                    kiln_pii_screen_flags, screen,
		                                                    kiln_pii_screen_free),
		                 0);
	}
	snprintf(path, sizeof(path), "%s/m.git", tmpdir);
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	for (int v = 0; v < 2; v++) {
		kiln_profile written = {0}, again = {0};
		kiln_version version;
		uint64_t records;

		snprintf(spec, sizeof(spec), "ev@%s", commits[v]);
		/* profile.json's total, read and checked as kiln profile does */
		assert_int_equal(kiln_version_resolve(m, spec, &version), 0);
		if (kiln_version_profile(m, &version, spec, &written, NULL) != 1)
			fail_msg("profile.json: %s", kiln_error_last());
		recompute(contract, schema, spec, &again, &records);
		assert_int_equal(records, v ? 798 : 499);
		assert_int_equal(again.records, records);
		assert_same_profile(&written, &again);
		/* what the curator changed is there as it left it */
		assert_true(kiln_profile_find(&again, "cust_no")->types[KILN_PTYPE_STRING] > 0); /* tokens */
		assert_true(kiln_profile_find(&again, "cust_no")->types[KILN_PTYPE_NULL] > 0);
		assert_int_equal(kiln_profile_find(&again, "cust_no")->types[KILN_PTYPE_INTEGER], 0);
		assert_true(kiln_profile_find(&again, "secret")->types[KILN_PTYPE_STRING] > 0); /* redacted */
		assert_int_equal(kiln_profile_find(&again, "secret")->types[KILN_PTYPE_OBJECT], 0);
		assert_int_equal(kiln_profile_find(&again, "birth")->present, 0); /* dropped */
		assert_true(kiln_profile_find(&again, "note")->empty +
		                kiln_profile_find(&again, "note")->present >
		            0);
		assert_true(kiln_profile_find(&again, "tags[]")->present > 0);
		assert_true(kiln_profile_find(&again, "dev.model")->present > 0);
		assert_true(kiln_profile_find(&again, "plain")->empty > 0);
		kiln_profile_free(&written);
		kiln_profile_free(&again);
	}
	kiln_manifest_close(m);
	kiln_profile_schema_free(schema);
	kiln_contract_free(contract);
}

/* Lines that are not curated records are refused, and add nothing. */
static void test_add_curated_refuses_non_records(void **state)
{
	static const char *const bad[] = {"{\"user\":", "[1]", "{\"a\":1,\"a\":2}", "\"x\""};
	kiln_contract *c = NULL;
	kiln_profile_schema *s = NULL;
	kiln_validator *v;
	kiln_profile p;

	(void)state;
	assert_int_equal(kiln_contract_load_buffer(&c, "t.yaml", CONTRACT, strlen(CONTRACT), NULL), 0);
	assert_int_equal(kiln_profile_schema_new(&s, c), 0);
	assert_int_equal(kiln_profile_init(&p, s), 0);
	assert_non_null(v = kiln_validator_new(c, NULL));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(kiln_profile_add_curated(&p, s, v, bad[i], strlen(bad[i])), KILN_EINVALID);
		assert_non_null(strstr(kiln_error_last(), "profile: a curated record is not a JSON object"));
	}
	assert_int_equal(p.records, 0);
	for (size_t i = 0; i < p.count; i++)
		assert_int_equal(p.fields[i].present, 0);
	/* a token where the contract wants a number is a curated record */
	assert_int_equal(kiln_profile_add_curated(&p, s, v, "{\"n\":\"p1_abc\",\"user\":\"p1_x\"}", 28), 0);
	assert_int_equal(p.records, 1);
	assert_int_equal(kiln_profile_find(&p, "n")->types[KILN_PTYPE_STRING], 1);
	kiln_validator_free(v);
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
	    cmocka_unit_test(test_add_curated_refuses_non_records),
	    cmocka_unit_test(test_profile_recomputed_from_curated),
	};
	return kiln_test_main(tests, tmpdir, "profile", NULL, NULL);
}
