/* Moments, DDSketch and HyperLogLog (see sketch.h; the formulas are in
 * docs/QUALITY.md). */
#include "quality/sketch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"

/* ---- moments (Welford; Chan et al. to merge) ---- */

void kiln_moments_add(kiln_moments *m, double x)
{
	double d;

	if (m->count == 0 || x < m->min)
		m->min = x;
	if (m->count == 0 || x > m->max)
		m->max = x;
	m->count++;
	d = x - m->mean;
	m->mean += d / (double)m->count;
	m->m2 += d * (x - m->mean);
}

void kiln_moments_merge(kiln_moments *a, const kiln_moments *b)
{
	double n, d;

	if (b->count == 0)
		return;
	if (a->count == 0) {
		*a = *b;
		return;
	}
	n = (double)a->count + (double)b->count;
	d = b->mean - a->mean;
	a->m2 += b->m2 + d * d * (double)a->count * (double)b->count / n;
	a->mean += d * (double)b->count / n;
	a->count += b->count;
	if (b->min < a->min)
		a->min = b->min;
	if (b->max > a->max)
		a->max = b->max;
}

double kiln_moments_variance(const kiln_moments *m)
{
	return m->count < 2 ? 0 : m->m2 / (double)m->count;
}

/* ---- DDSketch ---- */

static double dd_gamma(void)
{
	return (1 + KILN_DD_ALPHA) / (1 - KILN_DD_ALPHA);
}

int32_t kiln_dd_index(double magnitude)
{
	return (int32_t)ceil(log(magnitude) / log(dd_gamma()));
}

double kiln_dd_value(int32_t index)
{
	double g = dd_gamma();

	/* the bucket holds (g^(i-1), g^i]: this is within alpha of both ends */
	return 2 * pow(g, index) / (g + 1);
}

/* Makes room for bucket `index`, collapsing the smallest magnitudes into
 * the lowest kept bucket when the store would pass KILN_DD_MAX_BINS. */
static int store_slot(kiln_dd_store *st, int32_t index, uint64_t **out)
{
	if (st->len == 0) {
		if (!st->counts) {
			st->cap = 64;
			if (!(st->counts = calloc(st->cap, sizeof(*st->counts))))
				return kiln_error_oom(NULL);
		}
		st->offset = index;
		st->len = 1;
		*out = &st->counts[0];
		return 0;
	}
	int64_t lo = st->offset, hi = (int64_t)st->offset + st->len - 1;
	int64_t nlo = index < lo ? index : lo, nhi = index > hi ? index : hi;

	if (nhi - nlo + 1 > KILN_DD_MAX_BINS) {
		/* keep the largest magnitudes */
		nlo = nhi - KILN_DD_MAX_BINS + 1;
		if (index < nlo) {
			index = (int32_t)nlo;
		}
	} else if (nlo < lo && (uint64_t)(nhi - nlo + 1) <= st->cap) {
		/* a new lowest bucket, room enough: the counts move up in place
		 * (what the copy below would give, nothing collapsed) */
		uint32_t by = (uint32_t)(lo - nlo);
		memmove(st->counts + by, st->counts, st->len * sizeof(*st->counts));
		memset(st->counts, 0, by * sizeof(*st->counts));
		st->offset = (int32_t)nlo;
		st->len = (uint32_t)(nhi - nlo + 1);
		*out = &st->counts[0];
		return 0;
	}
	if ((uint64_t)(nhi - nlo + 1) > st->cap || nlo != lo) {
		uint32_t len = (uint32_t)(nhi - nlo + 1), cap = st->cap;
		uint64_t *counts;

		while (cap < len)
			cap *= 2;
		if (!(counts = calloc(cap, sizeof(*counts))))
			return kiln_error_oom(NULL);
		for (int64_t i = lo; i <= hi; i++) {
			int64_t at = i < nlo ? nlo : i; /* collapsed into the lowest kept */
			counts[at - nlo] += st->counts[i - lo];
		}
		free(st->counts);
		st->counts = counts;
		st->cap = cap;
		st->offset = (int32_t)nlo;
		st->len = len;
	} else if (nhi > hi) {
		st->len = (uint32_t)(nhi - nlo + 1);
	}
	*out = &st->counts[index - st->offset];
	return 0;
}

int kiln_dd_add_bucket(kiln_ddsketch *s, bool negative, int32_t index, uint64_t count)
{
	uint64_t *slot = NULL;
	int rc;

	if (count == 0)
		return 0;
	if ((rc = store_slot(negative ? &s->neg : &s->pos, index, &slot)) < 0)
		return rc;
	*slot += count;
	return 0;
}

int kiln_dd_add(kiln_ddsketch *s, double x)
{
	double a = fabs(x);

	if (!(a >= KILN_DD_MIN_ABS)) { /* also NaN, which JSON cannot hold anyway */
		s->zero++;
		return 0;
	}
	if (isinf(a))
		a = 1.7976931348623157e308;
	return kiln_dd_add_bucket(s, x < 0, kiln_dd_index(a), 1);
}

static int merge_store(kiln_ddsketch *into, bool negative, const kiln_dd_store *st)
{
	kiln_dd_store *to = negative ? &into->neg : &into->pos;
	int rc;

	if (to->len && st->len && st->offset >= to->offset &&
	    (int64_t)st->offset + st->len <= (int64_t)to->offset + to->len) {
		/* inside the buckets in use: each add below would find its slot
		 * as it is (the thread that delivers merges a batch's sketch so) */
		uint64_t *at = to->counts + (st->offset - to->offset);
		for (uint32_t i = 0; i < st->len; i++)
			at[i] += st->counts[i];
		return 0;
	}
	/* largest magnitudes first: a collapse then lands where it would have */
	for (uint32_t i = st->len; i > 0; i--)
		if ((rc = kiln_dd_add_bucket(into, negative, st->offset + (int32_t)i - 1,
		                             st->counts[i - 1])) < 0)
			return rc;
	return 0;
}

int kiln_dd_merge(kiln_ddsketch *into, const kiln_ddsketch *from)
{
	int rc;

	into->zero += from->zero;
	if ((rc = merge_store(into, false, &from->pos)) < 0)
		return rc;
	return merge_store(into, true, &from->neg);
}

static uint64_t store_count(const kiln_dd_store *st)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < st->len; i++)
		n += st->counts[i];
	return n;
}

uint64_t kiln_dd_count(const kiln_ddsketch *s)
{
	return s->zero + store_count(&s->pos) + store_count(&s->neg);
}

double kiln_dd_quantile(const kiln_ddsketch *s, double q)
{
	uint64_t n = kiln_dd_count(s), rank, seen = 0;

	if (n == 0)
		return 0;
	if (q < 0)
		q = 0;
	if (q > 1)
		q = 1;
	rank = (uint64_t)floor(q * (double)(n - 1));
	/* ascending values: negatives from the largest magnitude down, zero, positives up */
	for (uint32_t i = s->neg.len; i > 0; i--) {
		seen += s->neg.counts[i - 1];
		if (seen > rank)
			return -kiln_dd_value(s->neg.offset + (int32_t)i - 1);
	}
	seen += s->zero;
	if (seen > rank)
		return 0;
	for (uint32_t i = 0; i < s->pos.len; i++) {
		seen += s->pos.counts[i];
		if (seen > rank)
			return kiln_dd_value(s->pos.offset + (int32_t)i);
	}
	return s->pos.len ? kiln_dd_value(s->pos.offset + (int32_t)s->pos.len - 1) : 0;
}

void kiln_dd_free(kiln_ddsketch *s)
{
	free(s->pos.counts);
	free(s->neg.counts);
	memset(s, 0, sizeof(*s));
}

/* ---- times ---- */

static int64_t ts_seconds(int64_t ms)
{
	return ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
}

/* floor(sec / 2^shift) (an arithmetic shift floors negatives too) */
static int64_t ts_bucket(int64_t sec, uint32_t shift)
{
	return shift >= 63 ? (sec < 0 ? -1 : 0) : sec >> shift;
}

/* Lays s out for [min_ms, max_ms] at the smallest shift >= s->shift and
 * >= min_shift that keeps it within KILN_TS_MAX_BINS buckets, the counts
 * held so far moved to their wider buckets. */
void kiln_ts_settle(kiln_tsketch *s)
{
	if (s->pending)
		s->counts[s->pending - 1]++;
	s->pending = 0;
}

static int ts_layout(kiln_tsketch *s, int64_t min_ms, int64_t max_ms, uint32_t min_shift)
{
	uint32_t shift = s->shift > min_shift ? s->shift : min_shift, len, cap;
	int64_t lo = ts_seconds(min_ms), hi = ts_seconds(max_ms), offset;
	uint64_t *counts;

	kiln_ts_settle(s); /* the buckets may move */
	if (min_ms > max_ms)
		return kiln_error_set(KILN_EINVALID, "time sketch: min after max");
	while (ts_bucket(hi, shift) - ts_bucket(lo, shift) + 1 > KILN_TS_MAX_BINS)
		shift++;
	offset = ts_bucket(lo, shift);
	len = (uint32_t)(ts_bucket(hi, shift) - offset + 1);
	if (s->counts && shift == s->shift && offset == s->offset && len <= s->cap) {
		s->len = len;
		return 0;
	}
	if (s->counts && shift == s->shift && offset < s->offset && len <= s->cap) {
		/* a new lowest bucket, room enough: the counts move up in place
		 * (what the copy below would give at the same shift) */
		uint32_t by = (uint32_t)(s->offset - offset);
		memmove(s->counts + by, s->counts, s->len * sizeof(*s->counts));
		memset(s->counts, 0, by * sizeof(*s->counts));
		s->len = len;
		s->offset = offset;
		return 0;
	}
	/* room to grow (at most KILN_TS_MAX_BINS): a sketch filled value by
	 * value widens a bucket at a time, mostly in place then */
	cap = len < 32 ? 64 : len * 2;
	cap = cap > KILN_TS_MAX_BINS ? (len > KILN_TS_MAX_BINS ? len : KILN_TS_MAX_BINS) : cap;
	if (!(counts = calloc(cap, sizeof(*counts))))
		return kiln_error_oom(NULL);
	for (uint32_t i = 0; i < s->len; i++) {
		int64_t at = ts_bucket(s->offset + (int64_t)i, shift - s->shift) - offset;
		counts[at] += s->counts[i];
	}
	free(s->counts);
	s->counts = counts;
	s->cap = cap;
	s->len = len;
	s->shift = shift;
	s->offset = offset;
	return 0;
}

int kiln_ts_add_bucket(kiln_tsketch *s, uint32_t shift, int64_t index, uint64_t count)
{
	int64_t at;
	int rc;

	if (shift > 40) /* 2^40 s: 34,000 years, more than RFC 3339 spans */
		return kiln_error_set(KILN_EINVALID, "time sketch: bucket width out of range");
	if ((!s->counts || s->shift < shift) && (rc = ts_layout(s, s->min_ms, s->max_ms, shift)) < 0)
		return rc;
	at = ts_bucket(index, s->shift - shift) - s->offset;
	if (at < 0 || at >= (int64_t)s->len)
		return kiln_error_set(KILN_EINVALID, "time sketch: a bucket outside [min, max]");
	s->counts[at] += count;
	s->count += count;
	return 0;
}

int kiln_ts_add(kiln_tsketch *s, int64_t ms)
{
	int64_t lo, hi;
	int rc;

	if (s->count && s->counts && ms >= s->min_ms && ms <= s->max_ms) {
		/* inside [min, max]: the layout for them holds it (what ts_layout
		 * would find, unchanged); the bucket's line is fetched now and
		 * written at the next add, as a HyperLogLog register is */
		uint32_t at = (uint32_t)(ts_bucket(ts_seconds(ms), s->shift) - s->offset);
		__builtin_prefetch(&s->counts[at], 1);
		kiln_ts_settle(s);
		s->pending = at + 1;
		s->count++;
		return 0;
	}
	lo = s->count && s->min_ms < ms ? s->min_ms : ms;
	hi = s->count && s->max_ms > ms ? s->max_ms : ms;
	if ((rc = ts_layout(s, lo, hi, 0)) < 0)
		return rc;
	s->min_ms = lo;
	s->max_ms = hi;
	s->counts[ts_bucket(ts_seconds(ms), s->shift) - s->offset]++;
	s->count++;
	return 0;
}

int kiln_ts_merge(kiln_tsketch *a, const kiln_tsketch *b)
{
	int64_t lo, hi;
	int rc;

	if (!b->count)
		return 0;
	lo = a->count && a->min_ms < b->min_ms ? a->min_ms : b->min_ms;
	hi = a->count && a->max_ms > b->max_ms ? a->max_ms : b->max_ms;
	if ((rc = ts_layout(a, lo, hi, b->shift)) < 0)
		return rc;
	a->min_ms = lo;
	a->max_ms = hi;
	for (uint32_t i = 0; i < b->len; i++)
		a->counts[ts_bucket(b->offset + (int64_t)i, a->shift - b->shift) - a->offset] +=
		    kiln_ts_bucket_count(b, i);
	a->count += b->count;
	return 0;
}

int64_t kiln_ts_quantile(const kiln_tsketch *s, double q)
{
	uint64_t rank, seen = 0;
	int64_t v = s->max_ms;

	if (!s->count)
		return 0;
	q = q < 0 ? 0 : q > 1 ? 1 : q;
	rank = (uint64_t)floor(q * (double)(s->count - 1));
	if (rank == 0 || rank == s->count - 1)
		return rank ? s->max_ms : s->min_ms; /* the ends are known exactly */
	for (uint32_t i = 0; i < s->len; i++) {
		seen += kiln_ts_bucket_count(s, i);
		if (seen > rank) {
			int64_t start = (s->offset + (int64_t)i) * ((int64_t)1 << s->shift);
			v = start * 1000 + (s->shift ? ((int64_t)1 << s->shift) * 500 : 0);
			break;
		}
	}
	return v < s->min_ms ? s->min_ms : v > s->max_ms ? s->max_ms : v;
}

void kiln_ts_free(kiln_tsketch *s)
{
	free(s->counts);
	memset(s, 0, sizeof(*s));
}

/* ---- HyperLogLog (Flajolet et al. 2007, with linear counting below 5/2 m) ---- */

uint64_t kiln_hll_hash(const char *v, size_t n)
{
	/* kiln_json_hash, then the splitmix64 finaliser: every bit mixed */
	uint64_t z = kiln_json_hash(v, n);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int hll_ready(kiln_hll *h)
{
	if (!h->reg && !(h->reg = calloc(KILN_HLL_REGISTERS, 1)))
		return kiln_error_oom(NULL);
	return 0;
}

/* The pending add written (a max: adds commute, so the registers are
 * those of adding at once). */
void kiln_hll_settle(kiln_hll *h)
{
	uint32_t idx = h->pending >> 8;
	uint8_t rank = (uint8_t)h->pending;

	if (!h->pending)
		return;
	if (rank > h->reg[idx])
		h->reg[idx] = rank;
	h->pending = 0;
}

int kiln_hll_add(kiln_hll *h, uint64_t hash)
{
	uint32_t idx = (uint32_t)(hash >> (64 - KILN_HLL_P));
	uint64_t w = (hash << KILN_HLL_P) | (1ull << (KILN_HLL_P - 1)); /* bounds the rank */
	uint8_t rank = (uint8_t)(__builtin_clzll(w) + 1);
	int rc;

	if ((rc = hll_ready(h)) < 0)
		return rc;
	/* a register line is seldom in the cache (the profile's registers,
	 * 4 KiB a field, share it with the records streaming past): fetch it
	 * now, write it at the next add, by when it has come */
	__builtin_prefetch(h->reg + idx, 1);
	kiln_hll_settle(h);
	h->pending = idx << 8 | rank;
	return 0;
}

int kiln_hll_merge(kiln_hll *into, const kiln_hll *from)
{
	uint8_t *restrict a;
	const uint8_t *restrict b;
	int rc;

	if (into == from) {
		kiln_hll_settle(into); /* a merge into itself: nothing to add */
		return 0;
	}
	if (!from->reg)
		return 0;
	if ((rc = hll_ready(into)) < 0)
		return rc;
	kiln_hll_settle(into);
	/* an unconditional max over local pointers: the compiler makes it a
	 * vector max (the merge runs once per batch and field on the thread
	 * that delivers) */
	a = into->reg;
	b = from->reg;
	for (uint32_t i = 0; i < KILN_HLL_REGISTERS; i++)
		a[i] = b[i] > a[i] ? b[i] : a[i];
	if (from->pending && (uint8_t)from->pending > a[from->pending >> 8])
		a[from->pending >> 8] = (uint8_t)from->pending;
	return 0;
}

uint64_t kiln_hll_estimate(const kiln_hll *h)
{
	const double m = KILN_HLL_REGISTERS;
	double sum = 0, e;
	uint32_t zeros = 0;

	if (!h->reg)
		return 0;
	for (uint32_t i = 0; i < KILN_HLL_REGISTERS; i++) {
		uint8_t r = kiln_hll_register(h, i);
		sum += ldexp(1.0, -r);
		zeros += r == 0;
	}
	e = (0.7213 / (1 + 1.079 / m)) * m * m / sum;
	if (e <= 2.5 * m && zeros)
		e = m * log(m / zeros);
	return (uint64_t)llround(e);
}

void kiln_hll_free(kiln_hll *h)
{
	free(h->reg);
	h->reg = NULL;
	h->pending = 0;
}
