/* Mergeable summaries of a stream of values, the parts of a data profile
 * (docs/QUALITY.md states each one's error): moments (count, min, max, mean,
 * variance), a relative-error quantile sketch (DDSketch: logarithmic buckets,
 * every quantile within 1% of the true value's magnitude) and a distinct
 * count (HyperLogLog, 4096 registers: 1.6% standard error). Merging two
 * summaries gives what one summary of both streams would hold (the sketches
 * exactly; the moments up to floating-point rounding), so workers and
 * snapshots summarise apart and combine later. */
#ifndef KILN_QUALITY_SKETCH_H
#define KILN_QUALITY_SKETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- moments ---- */

typedef struct kiln_moments {
	uint64_t count;
	double min, max, mean, m2; /* m2: sum of squared deviations from the mean */
} kiln_moments;

void kiln_moments_add(kiln_moments *m, double x);
void kiln_moments_merge(kiln_moments *into, const kiln_moments *from);
/* Population variance (0 for fewer than two values). */
double kiln_moments_variance(const kiln_moments *m);

/* ---- quantiles: DDSketch with relative accuracy KILN_DD_ALPHA ---- */

#define KILN_DD_ALPHA    0.01
#define KILN_DD_MAX_BINS 2048 /* per sign; beyond, the smallest magnitudes collapse */
#define KILN_DD_MIN_ABS  1e-9 /* smaller magnitudes count as zero */

typedef struct kiln_dd_store {
	int32_t offset; /* bucket index of counts[0] */
	uint32_t len;   /* buckets in use */
	uint32_t cap;
	uint64_t *counts;
} kiln_dd_store;

typedef struct kiln_ddsketch {
	uint64_t zero;          /* values of magnitude < KILN_DD_MIN_ABS */
	kiln_dd_store pos, neg; /* by bucket of |x| */
} kiln_ddsketch;

/* Bucket index of a magnitude >= KILN_DD_MIN_ABS, and the value a bucket
 * stands for (within KILN_DD_ALPHA of every magnitude it holds). */
int32_t kiln_dd_index(double magnitude);
double kiln_dd_value(int32_t index);

int kiln_dd_add(kiln_ddsketch *s, double x);
int kiln_dd_add_bucket(kiln_ddsketch *s, bool negative, int32_t index, uint64_t count);
int kiln_dd_merge(kiln_ddsketch *into, const kiln_ddsketch *from);
uint64_t kiln_dd_count(const kiln_ddsketch *s);
/* The q-quantile (0 <= q <= 1) of the values added: the value at rank
 * floor(q * (count - 1)); 0 when empty. */
double kiln_dd_quantile(const kiln_ddsketch *s, double q);
void kiln_dd_free(kiln_ddsketch *s);

/* ---- times: buckets of 2^shift seconds ---- */

#define KILN_TS_MAX_BINS 2048

/* Instants (milliseconds since the epoch, UTC) counted in buckets of
 * 2^shift seconds, shift the smallest that keeps [min, max] within
 * KILN_TS_MAX_BINS buckets: a function of min and max alone, so two
 * sketches merge into exactly the sketch of both streams. */
typedef struct kiln_tsketch {
	uint64_t count;
	int64_t min_ms, max_ms;
	uint32_t shift;
	int64_t offset; /* bucket index of counts[0]: floor(min seconds / 2^shift) */
	uint32_t len, cap;
	uint64_t *counts;
	uint32_t pending; /* 1 + the bucket of the latest add, not in counts yet (0: none) */
} kiln_tsketch;

/* Bucket i's count (the pending add included). */
static inline uint64_t kiln_ts_bucket_count(const kiln_tsketch *s, uint32_t i)
{
	return s->counts[i] + (s->pending == i + 1);
}

/* Counts an instant (count, min and max at once; its bucket asked of the
 * cache now and written at the next add or change of layout, so read the
 * buckets through kiln_ts_bucket_count or after kiln_ts_settle). */
int kiln_ts_add(kiln_tsketch *s, int64_t ms);
/* Writes the pending add into counts. */
void kiln_ts_settle(kiln_tsketch *s);
/* Adds count instants in bucket `index` of width 2^shift (a parsed
 * sketch; min and max set by the caller first). */
int kiln_ts_add_bucket(kiln_tsketch *s, uint32_t shift, int64_t index, uint64_t count);
int kiln_ts_merge(kiln_tsketch *into, const kiln_tsketch *from);
/* The instant at rank floor(q * (count - 1)): min and max at the ends,
 * else its bucket's start (its middle when buckets are wider than a
 * second) within [min, max]; 0 when empty. */
int64_t kiln_ts_quantile(const kiln_tsketch *s, double q);
void kiln_ts_free(kiln_tsketch *s);

/* ---- distinct values: HyperLogLog ---- */

#define KILN_HLL_P         12
#define KILN_HLL_REGISTERS (1u << KILN_HLL_P)

typedef struct kiln_hll {
	uint8_t *reg;     /* KILN_HLL_REGISTERS, NULL while empty */
	uint32_t pending; /* the latest add, not in reg yet: index << 8 | rank (0: none) */
} kiln_hll;

/* Adds a value by its 64-bit hash (kiln_hll_hash). Its register is asked
 * of the cache now and written at the next add (or kiln_hll_settle), so
 * that the add does not wait for the register's line: read the registers
 * through kiln_hll_register, or reg after kiln_hll_settle. */
int kiln_hll_add(kiln_hll *h, uint64_t hash);
/* Writes the pending add into reg. */
void kiln_hll_settle(kiln_hll *h);
/* Register i as the adds so far made it (the pending one included). */
static inline uint8_t kiln_hll_register(const kiln_hll *h, uint32_t i)
{
	uint8_t r = h->reg ? h->reg[i] : 0;

	if (h->pending && h->pending >> 8 == i && (uint8_t)h->pending > r)
		r = (uint8_t)h->pending;
	return r;
}
/* The hash of the value bytes v[0..n) that kiln_hll_add takes: part of the
 * profile format (registers of two profiles merge only under one hash). */
uint64_t kiln_hll_hash(const char *v, size_t n);
int kiln_hll_merge(kiln_hll *into, const kiln_hll *from);
uint64_t kiln_hll_estimate(const kiln_hll *h);
void kiln_hll_free(kiln_hll *h);

#endif
