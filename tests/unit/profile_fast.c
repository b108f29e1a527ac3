/* The profile's fast paths of issue 29 (src/quality/profile.c,
 * profile_values.c, profile_categories.c, sketch.c) against the slow ways
 * they stand in for, so that profile.json keeps its bytes: enum values
 * found by hash as the binary search found them; string lengths in code
 * points counted a word at a time (the tail too) against a byte loop;
 * numbers read without strtod against strtod, bit for bit (-0 included),
 * and the integer/number split; instants floored without floorl against
 * floorl; a time sketch filled in any order (an add inside [min, max]
 * skips the layout, its bucket written at the next add) against one filled
 * in ascending order (every add lays it out); a DDSketch merged into one
 * whose buckets hold its own against the sketch of every value, and its
 * buckets (a new lowest one moved in place) against kiln_dd_index; the
 * HyperLogLog registers with their write put off to the next add against
 * adding at once, and its merge against an elementwise max. */
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
#include "contract/format.h"
#include "core/buf.h"
#include "quality/profile.h"
#include "quality/profile_internal.h"
#include "quality/sketch.h"

static const char CONTRACT[] = "apiVersion: v3.0.2\n"
                               "kind: DataContract\n"
                               "id: urn:test:fast\n"
                               "version: 1.0.0\n"
                               "status: active\n"
                               "schema:\n"
                               "  - name: events\n"
                               "    properties:\n"
                               "      - name: s\n"
                               "        logicalType: string\n"
                               "      - name: n\n"
                               "        logicalType: number\n";

/* a deterministic generator (xorshift64*) */
static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

typedef struct fixture {
	kiln_contract *c;
	kiln_profile_schema *s;
	kiln_profile p;
} fixture;

static void setup(fixture *fx)
{
	assert_int_equal(kiln_contract_load_buffer(&fx->c, "t.yaml", CONTRACT, strlen(CONTRACT), NULL), 0);
	assert_int_equal(kiln_profile_schema_new(&fx->s, fx->c), 0);
	assert_int_equal(kiln_profile_init(&fx->p, fx->s), 0);
}

static void teardown(fixture *fx)
{
	kiln_profile_free(&fx->p);
	kiln_profile_schema_free(fx->s);
	kiln_contract_free(fx->c);
}

static const kiln_profile_field *pfield(const fixture *fx, const char *name)
{
	const kiln_profile_field *f = kiln_profile_find(&fx->p, name);
	assert_non_null(f);
	return f;
}

static const kiln_field *cfield(const fixture *fx, const char *name)
{
	for (size_t i = 0; i < fx->c->root->child_count; i++)
		if (strcmp(fx->c->root->children[i]->name, name) == 0)
			return fx->c->root->children[i];
	fail_msg("no field %s", name);
	return NULL;
}

/* Enum values counted through the hashed table as the binary search
 * counted them: the first of equal entries, a string "true" apart from the
 * boolean, nothing for a value outside; and an enum of 300 values. */
static void test_enum_lookup(void **state)
{
	static const char head[] = "apiVersion: v3.0.2\n"
	                           "kind: DataContract\n"
	                           "id: urn:test:enum\n"
	                           "version: 1.0.0\n"
	                           "status: active\n"
	                           "schema:\n"
	                           "  - name: events\n"
	                           "    properties:\n"
	                           "      - name: k\n"
	                           "        customProperties:\n"
	                           "          - property: enum\n"
	                           "            value: [x, \"true\", true, x, yy, false]\n"
	                           "      - name: big\n"
	                           "        logicalType: string\n"
	                           "        customProperties:\n"
	                           "          - property: enum\n"
	                           "            value: [";
	static const uint64_t want[] = {2, 1, 3, 0, 1, 1};
	kiln_buf yaml = KILN_BUF_INIT(0);
	fixture fx = {0};
	const kiln_profile_field *f;
	char v[16];

	(void)state;
	assert_int_equal(kiln_buf_puts(&yaml, head), 0);
	for (int i = 0; i < 300; i++)
		assert_int_equal(kiln_buf_printf(&yaml, "%sv%d", i ? ", " : "", i), 0);
	assert_int_equal(kiln_buf_puts(&yaml, "]\n"), 0);
	assert_int_equal(kiln_contract_load_buffer(&fx.c, "t.yaml", yaml.ptr, yaml.len, NULL), 0);
	assert_int_equal(kiln_profile_schema_new(&fx.s, fx.c), 0);
	assert_int_equal(kiln_profile_init(&fx.p, fx.s), 0);
	const kiln_field *k = cfield(&fx, "k"), *big = cfield(&fx, "big");
	assert_int_equal(kiln_profile_add_value(&fx.p, fx.s, k, KILN_JSON_STRING, false, "x", 1), 0);
	assert_int_equal(kiln_profile_add_value(&fx.p, fx.s, k, KILN_JSON_STRING, false, "x", 1), 0);
	assert_int_equal(kiln_profile_add_value(&fx.p, fx.s, k, KILN_JSON_STRING, false, "true", 4), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(kiln_profile_add_value(&fx.p, fx.s, k, KILN_JSON_TRUE, false, "true", 4), 0);
	assert_int_equal(kiln_profile_add_value(&fx.p, fx.s, k, KILN_JSON_FALSE, false, "false", 5), 0);
	assert_int_equal(kiln_profile_add_value(&fx.p, fx.s, k, KILN_JSON_STRING, false, "yy", 2), 0);
	assert_int_equal(kiln_profile_add_value(&fx.p, fx.s, k, KILN_JSON_STRING, false, "zz", 2), 0);
	assert_int_equal(kiln_profile_add_value(&fx.p, fx.s, k, KILN_JSON_STRING, false, "y", 1), 0);
	f = pfield(&fx, "k");
	assert_int_equal(f->cat_count, 6);
	for (int i = 0; i < 6; i++)
		assert_int_equal(f->cat_counts[i], want[i]);
	for (int i = 0; i < 300; i++) {
		int n = snprintf(v, sizeof(v), "v%d", i);
		for (int j = 0; j <= i % 3; j++)
			assert_int_equal(
			    kiln_profile_add_value(&fx.p, fx.s, big, KILN_JSON_STRING, false, v, (size_t)n),
			    0);
	}
	assert_int_equal(kiln_profile_add_value(&fx.p, fx.s, big, KILN_JSON_STRING, false, "v300", 4), 0);
	f = pfield(&fx, "big");
	assert_int_equal(f->cat_count, 300);
	for (int i = 0; i < 300; i++)
		assert_int_equal(f->cat_counts[i], (uint64_t)(i % 3 + 1));
	kiln_buf_free(&yaml);
	teardown(&fx);
}

/* Strings of 0 to 40 bytes, ASCII mixed with 2-, 3- and 4-byte sequences
 * at every position: each one's length is its bytes that are not
 * continuation bytes, whatever is left after the last whole word. */
static void test_lengths(void **state)
{
	static const char *const pieces[] = {"a", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x99\x82", "~"};
	fixture fx = {0};
	char text[64];

	(void)state;
	setup(&fx);
	for (int round = 0; round < 4000; round++) {
		size_t n = 0, want = 0;
		uint64_t before = pfield(&fx, "s")->len_sum;
		size_t target = (size_t)(next() % 41);

		while (n < target) {
			const char *piece = pieces[round % 3 ? next() % 5 : 0]; /* a third all ASCII */
			size_t len = strlen(piece);
			if (n + len > target)
				piece = "z", len = 1;
			memcpy(text + n, piece, len);
			n += len;
		}
		for (size_t i = 0; i < n; i++)
			want += ((unsigned char)text[i] & 0xC0) != 0x80;
		assert_int_equal(
		    kiln_profile_add_value(&fx.p, fx.s, cfield(&fx, "s"), KILN_JSON_STRING, false, text, n),
		    0);
		assert_int_equal(pfield(&fx, "s")->len_sum - before, want);
	}
	teardown(&fx);
}

/* One number into a fresh profile: its min (the value, as the profile
 * read it) bit for bit strtod's, and counted as an integer or a number as
 * its text says. */
static void check_number(const char *text)
{
	fixture fx = {0};
	const kiln_profile_field *f;
	double want = strtod(text, NULL), got;
	bool integer = !strpbrk(text, ".eE");

	setup(&fx);
	assert_int_equal(kiln_profile_add_value(&fx.p, fx.s, cfield(&fx, "n"), KILN_JSON_NUMBER, false, text,
	                                        strlen(text)),
	                 0);
	f = pfield(&fx, "n");
	got = f->num.min;
	if (memcmp(&got, &want, sizeof(got)) != 0)
		fail_msg("%s: read as %.17g, strtod says %.17g", text, got, want);
	assert_int_equal(f->types[KILN_PTYPE_INTEGER], integer);
	assert_int_equal(f->types[KILN_PTYPE_NUMBER], !integer);
	teardown(&fx);
}

static void test_numbers(void **state)
{
	static const char *const fixed[] = {"0",
	                                    "-0",
	                                    "-0.0",
	                                    "7",
	                                    "-42",
	                                    "0.1",
	                                    "0.3",
	                                    "-2.675",
	                                    "1.005",
	                                    "123456789012345",
	                                    "-999999999999999",
	                                    "9007199254740993", /* 16 digits: strtod's */
	                                    "12345678901234567890",
	                                    "0.000000000000001",
	                                    "0.0000000000000001",
	                                    "1234567.12345678",
	                                    "99999999.9999999",
	                                    "1e5",
	                                    "2.5E-3",
	                                    "-1.7976931348623157e308",
	                                    "4.9e-324",
	                                    "0.1e1"};
	char text[40];

	(void)state;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		check_number(fixed[i]);
	/* decimals of 1 to 17 digits with the point anywhere */
	for (int i = 0; i < 3000; i++) {
		int digits = 1 + (int)(next() % 17), point = (int)(next() % (unsigned)digits), n = 0;
		if (next() % 2)
			text[n++] = '-';
		for (int d = 0; d < digits; d++) {
			if (d == point && d > 0)
				text[n++] = '.';
			text[n++] = (char)('0' + (d == 0 && point != 1 ? 1 + next() % 9 : next() % 10));
		}
		text[n] = '\0';
		check_number(text);
	}
}

/* The instant kiln_profile_parse_time gave before issue 29: floorl. */
static bool floorl_time(const char *s, size_t len, int64_t *out)
{
	long double t;

	if (!(len == 10 ? kiln_format_parse_date(s, len, &t) : kiln_format_parse_date_time(s, len, &t)))
		return false;
	t = floorl(t * 1000);
	if (!(t > -1e17L && t < 1e17L))
		return false;
	*out = (int64_t)t;
	return true;
}

static void test_instants(void **state)
{
	static const char *const fixed[] = {"1970-01-01",
	                                    "1969-12-31",
	                                    "0001-01-01",
	                                    "9999-12-31",
	                                    "1970-01-01T00:00:00Z",
	                                    "1969-12-31T23:59:59.999Z",
	                                    "1969-12-31T23:59:59.9999999Z",
	                                    "2025-06-26T20:58:01.391Z",
	                                    "2025-09-14T09:00:36.389-05:00",
	                                    "2016-12-31T23:59:60.5+01:00",
	                                    "0001-01-01T00:00:00.001+23:59",
	                                    "9999-12-31T23:59:59.999999999-23:59",
	                                    "2025-02-30",
	                                    "2025-01-01T24:00:00Z",
	                                    "not a time"};
	char text[64];
	int64_t want = 0, got = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		bool ok = floorl_time(fixed[i], strlen(fixed[i]), &want);
		assert_int_equal(kiln_profile_parse_time(fixed[i], strlen(fixed[i]), &got), ok);
		if (ok && got != want)
			fail_msg("%s: %lld, floorl gives %lld", fixed[i], (long long)got, (long long)want);
	}
	for (int i = 0; i < 200000; i++) {
		uint64_t r = next();
		int n = snprintf(text, sizeof(text), "%04u-%02u-%02uT%02u:%02u:%02u",
		                 (unsigned)(1 + r % 9999), (unsigned)(1 + (r >> 14) % 12),
		                 (unsigned)(1 + (r >> 18) % 28), (unsigned)((r >> 23) % 24),
		                 (unsigned)((r >> 28) % 60), (unsigned)((r >> 34) % 60));
		int fraction = (int)((r >> 40) % 10); /* 0: none, else that many digits */
		if (fraction)
			n += snprintf(text + n, sizeof(text) - (size_t)n, ".%0*llu", fraction,
			              (unsigned long long)(next() % 1000000000ull) %
			                  (unsigned long long)pow(10, fraction));
		if ((r >> 44) % 3 == 0)
			snprintf(text + n, sizeof(text) - (size_t)n, "Z");
		else
			snprintf(text + n, sizeof(text) - (size_t)n, "%c%02u:%02u", (r >> 46) % 2 ? '+' : '-',
			         (unsigned)((r >> 47) % 24), (unsigned)((r >> 52) % 60));
		assert_true(floorl_time(text, strlen(text), &want));
		assert_true(kiln_profile_parse_time(text, strlen(text), &got));
		if (got != want)
			fail_msg("%s: %lld, floorl gives %lld", text, (long long)got, (long long)want);
	}
}

/* The same sketch: read through kiln_ts_bucket_count (a pending add
 * included), then settled. */
static void assert_same_tsketch(kiln_tsketch *a, kiln_tsketch *b)
{
	assert_int_equal(a->count, b->count);
	assert_int_equal(a->min_ms, b->min_ms);
	assert_int_equal(a->max_ms, b->max_ms);
	assert_int_equal(a->shift, b->shift);
	assert_int_equal(a->offset, b->offset);
	assert_int_equal(a->len, b->len);
	for (uint32_t i = 0; i < a->len; i++)
		assert_int_equal(kiln_ts_bucket_count(a, i), kiln_ts_bucket_count(b, i));
	for (int q = 0; q <= 20; q++)
		assert_int_equal(kiln_ts_quantile(a, q / 20.0), kiln_ts_quantile(b, q / 20.0));
	kiln_ts_settle(a);
	kiln_ts_settle(b);
	assert_memory_equal(a->counts, b->counts, a->len * sizeof(*a->counts));
}

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return (a > b) - (a < b);
}

/* In any order most adds land inside [min, max] (no layout); in ascending
 * order every new value is a new max (a layout each): the same sketch. */
static void test_time_sketch_any_order(void **state)
{
	enum { N = 20000 };
	static int64_t v[N];
	static const int64_t spans[] = {1000, 86400000, 31536000000, 3153600000000000};

	(void)state;
	for (size_t s = 0; s < sizeof(spans) / sizeof(spans[0]); s++) {
		kiln_tsketch any = {0}, up = {0};
		for (int i = 0; i < N; i++) {
			v[i] = 1700000000000 - spans[s] / 3 + (int64_t)(next() % (uint64_t)spans[s]);
			assert_int_equal(kiln_ts_add(&any, v[i]), 0);
		}
		qsort(v, N, sizeof(v[0]), cmp_i64);
		for (int i = 0; i < N; i++)
			assert_int_equal(kiln_ts_add(&up, v[i]), 0);
		/* a merge takes the other's pending add */
		kiln_tsketch merged = {0};
		assert_int_equal(kiln_ts_merge(&merged, &any), 0);
		assert_same_tsketch(&merged, &up);
		kiln_ts_free(&merged);
		assert_int_not_equal(any.pending, 0);
		assert_same_tsketch(&any, &up);
		kiln_ts_free(&any);
		kiln_ts_free(&up);
	}
}

static void assert_same_store(const kiln_dd_store *a, const kiln_dd_store *b)
{
	assert_int_equal(a->len, b->len);
	assert_int_equal(a->offset, b->offset);
	assert_memory_equal(a->counts, b->counts, a->len * sizeof(*a->counts));
}

/* A sketch merged into one whose buckets in use hold all of its own (the
 * elementwise sum) and one that reaches past them (a bucket at a time),
 * against the sketch of every value added one by one. */
static void test_dd_merge_inside(void **state)
{
	kiln_ddsketch wide = {0}, inside = {0}, past = {0}, all = {0};

	(void)state;
	for (int i = 0; i < 20000; i++) {
		double u = (double)(next() >> 11) / 9007199254740992.0;
		double x = i % 4 == 0 ? 10 + 90 * u : 1 + 999 * u;
		if (i % 9 == 0)
			x = -x;
		assert_int_equal(kiln_dd_add(i % 4 == 0 ? &inside : &wide, x), 0);
		assert_int_equal(kiln_dd_add(&all, x), 0);
	}
	for (int i = 0; i < 100; i++) {
		double x = 1e6 + i;
		assert_int_equal(kiln_dd_add(&past, x), 0);
	}
	assert_int_equal(kiln_dd_merge(&wide, &inside), 0);
	assert_same_store(&wide.pos, &all.pos);
	assert_same_store(&wide.neg, &all.neg);
	for (int i = 0; i < 100; i++)
		assert_int_equal(kiln_dd_add(&all, 1e6 + i), 0);
	assert_int_equal(kiln_dd_merge(&wide, &past), 0);
	assert_same_store(&wide.pos, &all.pos);
	assert_int_equal(kiln_dd_count(&wide), kiln_dd_count(&all));
	kiln_dd_free(&wide);
	kiln_dd_free(&inside);
	kiln_dd_free(&past);
	kiln_dd_free(&all);
}

/* What kiln_hll_add did before its write was put off to the next add. */
static void add_now(uint8_t *reg, uint64_t hash)
{
	uint32_t idx = (uint32_t)(hash >> (64 - KILN_HLL_P));
	uint8_t rank = (uint8_t)(__builtin_clzll((hash << KILN_HLL_P) | (1ull << (KILN_HLL_P - 1))) + 1);

	if (rank > reg[idx])
		reg[idx] = rank;
}

static void assert_registers(const kiln_hll *h, const uint8_t *want)
{
	for (uint32_t i = 0; i < KILN_HLL_REGISTERS; i++)
		if (kiln_hll_register(h, i) != want[i])
			fail_msg("register %u: %u, want %u", i, kiln_hll_register(h, i), want[i]);
}

/* The registers (the add put off included) are those of adding at once;
 * a merge takes the other's pending add; the estimate sees it too. */
/* Values added in random order (new lowest buckets moved up in place)
 * land in the buckets kiln_dd_index names, counted here directly. */
static void test_dd_buckets(void **state)
{
	enum { N = 20000, SPAN = 1400 };
	static uint64_t want[SPAN];
	kiln_ddsketch dd = {0};
	int32_t base = kiln_dd_index(0.5);

	(void)state;
	for (int i = 0; i < N; i++) {
		double x = 0.5 + (double)(next() % 100000000) / 97.0;
		want[kiln_dd_index(x) - base]++;
		assert_int_equal(kiln_dd_add(&dd, x), 0);
	}
	for (int32_t i = 0; i < SPAN; i++) {
		int32_t at = base + i - dd.pos.offset;
		uint64_t got = at >= 0 && at < (int32_t)dd.pos.len ? dd.pos.counts[at] : 0;
		if (got != want[i])
			fail_msg("bucket %d: %llu, want %llu", base + i, (unsigned long long)got,
			         (unsigned long long)want[i]);
	}
	assert_int_equal(kiln_dd_count(&dd), N);
	kiln_dd_free(&dd);
}

static void test_hll_pending_add(void **state)
{
	kiln_hll a = {0}, b = {0}, one = {0}, settled = {0};
	static uint8_t ra[KILN_HLL_REGISTERS], rb[KILN_HLL_REGISTERS];
	uint64_t hash = 0;

	(void)state;
	for (int i = 0; i < 3000; i++) {
		uint64_t x = next(), y = next();
		assert_int_equal(kiln_hll_add(&a, x), 0);
		assert_int_equal(kiln_hll_add(&b, y), 0);
		add_now(ra, x);
		add_now(rb, y);
		if (i % 500 == 0)
			assert_registers(&a, ra);
	}
	assert_registers(&a, ra);
	/* one value only: pending, reg all zero, yet counted */
	for (hash = next(); (uint8_t)(__builtin_clzll((hash << KILN_HLL_P) | 2048) + 1) < 3; hash = next())
		;
	assert_int_equal(kiln_hll_add(&one, hash), 0);
	assert_int_equal(kiln_hll_estimate(&one), 1);
	assert_int_not_equal(one.pending, 0);
	assert_int_equal(kiln_hll_merge(&settled, &one), 0);
	assert_int_equal(settled.reg[hash >> (64 - KILN_HLL_P)],
	                 (uint8_t)(__builtin_clzll((hash << KILN_HLL_P) | 2048) + 1));
	kiln_hll_free(&settled);
	/* a merge: b's pending add lands in a */
	for (uint32_t i = 0; i < KILN_HLL_REGISTERS; i++)
		ra[i] = rb[i] > ra[i] ? rb[i] : ra[i];
	assert_int_not_equal(b.pending, 0);
	assert_int_equal(kiln_hll_merge(&a, &b), 0);
	assert_registers(&a, ra);
	assert_int_equal(kiln_hll_merge(&a, &a), 0); /* into itself: unchanged */
	assert_registers(&a, ra);
	kiln_hll_settle(&a);
	assert_int_equal(a.pending, 0);
	assert_memory_equal(a.reg, ra, sizeof(ra));
	kiln_hll_settle(&b);
	assert_memory_equal(b.reg, rb, sizeof(rb));
	kiln_hll_free(&a);
	kiln_hll_free(&b);
	kiln_hll_free(&one);
}

static void test_hll_merge_is_max(void **state)
{
	kiln_hll a = {0}, b = {0}, empty = {0};
	uint8_t want[KILN_HLL_REGISTERS];

	(void)state;
	for (int i = 0; i < 3000; i++) {
		assert_int_equal(kiln_hll_add(&a, next()), 0);
		assert_int_equal(kiln_hll_add(&b, next()), 0);
	}
	kiln_hll_settle(&a);
	kiln_hll_settle(&b);
	for (uint32_t i = 0; i < KILN_HLL_REGISTERS; i++)
		want[i] = a.reg[i] > b.reg[i] ? a.reg[i] : b.reg[i];
	assert_int_equal(kiln_hll_merge(&a, &b), 0);
	assert_memory_equal(a.reg, want, sizeof(want));
	assert_int_equal(kiln_hll_merge(&empty, &a), 0); /* into an empty one: a copy */
	assert_memory_equal(empty.reg, want, sizeof(want));
	kiln_hll_free(&a);
	kiln_hll_free(&b);
	kiln_hll_free(&empty);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_enum_lookup),
	    cmocka_unit_test(test_lengths),
	    cmocka_unit_test(test_numbers),
	    cmocka_unit_test(test_instants),
	    cmocka_unit_test(test_time_sketch_any_order),
	    cmocka_unit_test(test_dd_merge_inside),
	    cmocka_unit_test(test_dd_buckets),
	    cmocka_unit_test(test_hll_pending_add),
	    cmocka_unit_test(test_hll_merge_is_max),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
