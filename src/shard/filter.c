/* Token membership filters (see filter.h). */
#include "shard/filter.h"

#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define MAGIC     KILN_FILTER_NAME "\n"
#define MAGIC_LEN (sizeof(MAGIC) - 1)
#define HEADER    (MAGIC_LEN + 3 + 4 + 8 + 8)
/* sized for 5e-5 so that the rate measured stays under 1e-4 */
#define DESIGN_RATE 5e-5

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put_le(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++, v >>= 8)
		p[i] = (unsigned char)v;
}

static void digest(uint64_t out[2], const char *token, size_t len)
{
	unsigned char d[16];

	crypto_generichash(d, sizeof(d), (const unsigned char *)token, len, NULL, 0);
	out[0] = le64(d);
	out[1] = le64(d + 8) | 1;
}

void kiln_filter_set_free(kiln_filter_set *set)
{
	free(set->v);
	memset(set, 0, sizeof(*set));
}

void kiln_filter_set_clear(kiln_filter_set *set)
{
	set->count = set->sorted = 0;
}

static int pair_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

static inline bool pair_less(const uint64_t *x, const uint64_t *y)
{
	return x[0] < y[0] || (x[0] == y[0] && x[1] < y[1]);
}

static inline void pair_swap(uint64_t *x, uint64_t *y)
{
	uint64_t a = x[0], b = x[1];

	x[0] = y[0];
	x[1] = y[1];
	y[0] = a;
	y[1] = b;
}

/* Sorts v[0..n) in pair_cmp's order, as qsort would (repeats are equal in
 * both halves, so any correct sort gives the same bytes), without a call per
 * comparison: quicksort with a median-of-three pivot and Hoare's partition
 * (runs of one repeated token split evenly), the smaller side first so the
 * stack stays O(log n), insertion sort below 16. */
static void pair_sort(uint64_t (*v)[2], size_t n)
{
	while (n > 16) {
		size_t mid = (n - 1) / 2, i = 0, j = n - 1;
		uint64_t pivot[2];

		if (pair_less(v[mid], v[0]))
			pair_swap(v[mid], v[0]);
		if (pair_less(v[n - 1], v[mid])) {
			pair_swap(v[n - 1], v[mid]);
			if (pair_less(v[mid], v[0]))
				pair_swap(v[mid], v[0]);
		}
		pivot[0] = v[mid][0];
		pivot[1] = v[mid][1];
		for (;;) {
			while (pair_less(v[i], pivot))
				i++;
			while (pair_less(pivot, v[j]))
				j--;
			if (i >= j)
				break;
			pair_swap(v[i], v[j]);
			i++;
			j--;
		}
		/* v[0..j] <= pivot <= v[j+1..n) */
		if (j + 1 < n - j - 1) {
			pair_sort(v, j + 1);
			v += j + 1;
			n -= j + 1;
		} else {
			pair_sort(v + j + 1, n - j - 1);
			n = j + 1;
		}
	}
	for (size_t i = 1; i < n; i++) {
		uint64_t x[2] = {v[i][0], v[i][1]};
		size_t k = i;

		for (; k > 0 && pair_less(x, v[k - 1]); k--) {
			v[k][0] = v[k - 1][0];
			v[k][1] = v[k - 1][1];
		}
		v[k][0] = x[0];
		v[k][1] = x[1];
	}
}

/* Sorts and drops repeats. */
static void compact(kiln_filter_set *set)
{
	size_t n = 0;

	if (set->sorted == set->count)
		return;
	pair_sort(set->v, set->count);
	for (size_t i = 0; i < set->count; i++)
		if (n == 0 || pair_cmp(set->v[n - 1], set->v[i]) != 0) {
			set->v[n][0] = set->v[i][0];
			set->v[n][1] = set->v[i][1];
			n++;
		}
	set->count = set->sorted = n;
}

/* Room for one more digest: a full set is compacted first (when `compact`)
 * and grows unless that freed half of it. */
static int room(kiln_filter_set *set, bool compact_full)
{
	if (set->count < set->cap)
		return 0;
	if (compact_full)
		compact(set);
	if (!compact_full || set->count >= set->cap / 2) {
		size_t cap = set->cap ? set->cap * 2 : 256;
		uint64_t(*v)[2] = realloc(set->v, cap * sizeof(*v));

		if (!v)
			return kiln_error_oom("filter");
		set->v = v;
		set->cap = cap;
	}
	return 0;
}

int kiln_filter_add(kiln_filter_set *set, const char *token, size_t len)
{
	int rc;

	if ((rc = room(set, true)) < 0)
		return rc;
	digest(set->v[set->count++], token, len);
	return 0;
}

/* Below this many digests a set that digests are added to in bulk grows
 * instead of compacting: the sort of kiln_filter_encode (on the shard
 * writer's thread) is then the only one, and the run's delivery turn only
 * copies. Past it, repeats are dropped as the set fills (16 MiB). */
#define LAZY_DIGESTS ((size_t)1 << 20)

int kiln_filter_add_digests(kiln_filter_set *set, const kiln_filter_set *list, size_t first, size_t n)
{
	if (set->count + n > set->cap) {
		size_t cap = set->cap ? set->cap : 256, need = set->count + n;
		uint64_t(*v)[2];

		if (need > LAZY_DIGESTS) {
			compact(set);
			/* grows unless that freed half of it, as room() does */
			need = set->count + n > 2 * set->count ? set->count + n : 2 * set->count;
		}
		while (cap < need)
			cap *= 2;
		if (cap > set->cap) {
			if (!(v = realloc(set->v, cap * sizeof(*v))))
				return kiln_error_oom("filter");
			set->v = v;
			set->cap = cap;
		}
	}
	if (n)
		memcpy(set->v + set->count, list->v + first, n * sizeof(*set->v));
	set->count += n;
	return 0;
}

#ifdef __SSE2__
/* Bit i set when byte i of s[0..16) is in [a-z2-7] (as signed bytes: those
 * of 0x80 and above are negative and in neither range). */
static inline unsigned b32_bits(const char *s)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
	__m128i lower = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('a' - 1)),
	                              _mm_cmplt_epi8(v, _mm_set1_epi8('z' + 1)));
	__m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('2' - 1)),
	                              _mm_cmplt_epi8(v, _mm_set1_epi8('7' + 1)));

	return (unsigned)_mm_movemask_epi8(_mm_or_si128(lower, digit));
}
#else
static bool b32(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '2' && c <= '7');
}
#endif

/* Whether s[0..26) are all base32 characters. */
static bool b32_26(const char *s)
{
#ifdef __SSE2__
	/* s[0..16) and s[10..26): two loads cover the 26 */
	return (b32_bits(s) & b32_bits(s + 10)) == 0xFFFFu;
#else
	for (size_t i = 0; i < 26; i++)
		if (!b32((unsigned char)s[i]))
			return false;
	return true;
#endif
}

/* The start of a token whose '_' is at u, or SIZE_MAX. */
static size_t token_start(const char *t, size_t len, size_t u)
{
	size_t d = u;

	/* "p" and digits before the '_' first: most '_' of a line (in names
	 * such as "user_id") fail there, before the 26 characters are read */
	while (d > 0 && u - d < 10 && t[d - 1] >= '0' && t[d - 1] <= '9')
		d--;
	if (d == u || d == 0 || t[d - 1] != 'p' || len - u < 27)
		return SIZE_MAX;
	return b32_26(t + u + 1) ? d - 1 : SIZE_MAX;
}

/* Every token of text: added to the set, or (list) appended in order,
 * repeats kept. */
static int scan(kiln_filter_set *set, const char *text, size_t len, bool list)
{
	const char *p = text, *end = text + len;
	int rc;

	while (p < end && (p = memchr(p, '_', (size_t)(end - p)))) {
		size_t u = (size_t)(p - text), s = token_start(text, len, u);

		if (s != SIZE_MAX) {
			if ((rc = room(set, !list)) < 0)
				return rc;
			digest(set->v[set->count++], text + s, u + 27 - s);
		}
		p++;
	}
	return 0;
}

int kiln_filter_scan(kiln_filter_set *set, const char *text, size_t len)
{
	return scan(set, text, len, false);
}

int kiln_filter_collect(kiln_filter_set *list, const char *text, size_t len)
{
	return scan(list, text, len, true);
}

size_t kiln_filter_token_part(const char *text, size_t len)
{
	size_t u = 1;

	if (len < 29 || text[0] != 'p')
		return 0;
	while (u < len && u <= 10 && text[u] >= '0' && text[u] <= '9')
		u++;
	if (u == 1 || u >= len || text[u] != '_' || token_start(text, len, u) != 0)
		return 0;
	return u + 27;
}

int kiln_filter_encode(kiln_buf *out, kiln_filter_set *set)
{
	uint64_t n, m;
	uint32_t k;
	unsigned char *h, *bits;
	int rc;

	compact(set);
	n = set->count;
	m = n ? (uint64_t)ceil((double)n * -log(DESIGN_RATE) / (M_LN2 * M_LN2)) : 64;
	m = (m + 63) / 64 * 64;
	if (m / 8 > KILN_FILTER_MAX_BYTES)
		return kiln_error_set(KILN_EINVALID, "filter: %llu tokens are too many for one filter",
		                      (unsigned long long)n);
	k = n ? (uint32_t)lround((double)m / (double)n * M_LN2) : 1;
	if (k < 1)
		k = 1;
	if (k > KILN_FILTER_MAX_K)
		k = KILN_FILTER_MAX_K;
	if ((rc = kiln_buf_reserve(out, HEADER + (size_t)(m / 8))) < 0)
		return rc;
	h = (unsigned char *)out->ptr + out->len;
	memset(h, 0, HEADER + (size_t)(m / 8));
	memcpy(h, MAGIC, MAGIC_LEN);
	put_le(h + MAGIC_LEN + 3, k, 4);
	put_le(h + MAGIC_LEN + 7, n, 8);
	put_le(h + MAGIC_LEN + 15, m, 8);
	bits = h + HEADER;
	for (size_t i = 0; i < set->count; i++)
		for (uint32_t j = 0; j < k; j++) {
			uint64_t b = (set->v[i][0] + j * set->v[i][1]) % m;

			bits[b >> 3] |= (unsigned char)(1u << (b & 7));
		}
	out->len += HEADER + (size_t)(m / 8);
	return 0;
}

int kiln_filter_decode(kiln_filter *out, const void *bytes, size_t len, const char *where)
{
	const unsigned char *b = bytes;
	uint64_t k, m;

	memset(out, 0, sizeof(*out));
	if (len < HEADER || memcmp(b, MAGIC, MAGIC_LEN) != 0)
		return kiln_error_set(KILN_EINVALID, "%s: not a %s filter", where, KILN_FILTER_NAME);
	if (b[MAGIC_LEN] || b[MAGIC_LEN + 1] || b[MAGIC_LEN + 2])
		return kiln_error_set(KILN_EINVALID, "%s: reserved header bytes are not zero", where);
	k = le64(b + MAGIC_LEN + 3) & 0xffffffffu;
	m = le64(b + MAGIC_LEN + 15);
	if (k < 1 || k > KILN_FILTER_MAX_K)
		return kiln_error_set(KILN_EINVALID, "%s: %llu probes (1 to %u allowed)", where,
		                      (unsigned long long)k, KILN_FILTER_MAX_K);
	if (m < 64 || m % 64 || m / 8 > KILN_FILTER_MAX_BYTES)
		return kiln_error_set(KILN_EINVALID, "%s: %llu bits (a multiple of 64, at most %u bytes)",
		                      where, (unsigned long long)m, KILN_FILTER_MAX_BYTES);
	if (len - HEADER != m / 8)
		return kiln_error_set(KILN_EINVALID, "%s: %zu bytes of bits where the header says %llu",
		                      where, len - HEADER, (unsigned long long)(m / 8));
	out->k = (uint32_t)k;
	out->bits = m;
	out->tokens = le64(b + MAGIC_LEN + 7);
	out->bitmap = b + HEADER;
	return 0;
}

bool kiln_filter_may_hold(const kiln_filter *f, const char *token, size_t len)
{
	uint64_t d[2];

	digest(d, token, len);
	for (uint32_t j = 0; j < f->k; j++) {
		uint64_t b = (d[0] + j * d[1]) % f->bits;

		if (!(f->bitmap[b >> 3] & (1u << (b & 7))))
			return false;
	}
	return true;
}
