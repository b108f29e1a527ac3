/* The dedup index and its segment codec (see dedup.h). Two open-addressing
 * tables of 24-byte slots, linear probing: committed keys with their time,
 * pending keys. Keys are keyed BLAKE2b output, uniform already, so their
 * first 8 bytes are the probe hash. */
#include "manifest/dedup.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"

#define MAGIC   "KILNDDP1"
#define MIN_CAP 1024

typedef struct slot {
	unsigned char key[KILN_DEDUP_HASH_LEN];
	int64_t ms; /* 0: empty */
} slot;

typedef struct table {
	slot *v;
	size_t cap, count; /* cap: 0 or a power of two */
} table;

struct kiln_dedup {
	int64_t window_ms;
	size_t max_keys; /* 0: no bound */
	table committed;
	int64_t oldest_ms; /* the least time among committed keys (INT64_MAX: none) */
	table pending;
	unsigned char (*list)[KILN_DEDUP_HASH_LEN]; /* the pending keys, in arrival order */
	size_t list_cap;
	bool sorted;
};

static uint64_t load64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void store64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (unsigned char)v;
}

static slot *table_find(const table *t, const unsigned char *key)
{
	size_t mask = t->cap - 1;

	if (!t->cap)
		return NULL;
	for (size_t i = (size_t)load64(key) & mask;; i = (i + 1) & mask) {
		if (t->v[i].ms == 0)
			return &t->v[i];
		if (memcmp(t->v[i].key, key, KILN_DEDUP_HASH_LEN) == 0)
			return &t->v[i];
	}
}

static int table_resize(table *t, size_t cap)
{
	table n = {calloc(cap, sizeof(slot)), cap, 0};

	if (!n.v)
		return kiln_error_oom("dedup index");
	for (size_t i = 0; i < t->cap; i++)
		if (t->v[i].ms) {
			*table_find(&n, t->v[i].key) = t->v[i];
			n.count++;
		}
	free(t->v);
	*t = n;
	return 0;
}

/* The slot of key, empty when absent, with room for one more key. */
static int table_slot(table *t, const unsigned char *key, slot **out)
{
	int rc;

	if ((t->count + 1) * 4 > t->cap * 3 && (rc = table_resize(t, t->cap ? t->cap * 2 : MIN_CAP)) < 0)
		return rc;
	*out = table_find(t, key);
	return 0;
}

static void table_free(table *t)
{
	free(t->v);
	memset(t, 0, sizeof(*t));
}

int kiln_dedup_new(kiln_dedup **out, int64_t window_ms)
{
	kiln_dedup *d;

	*out = NULL;
	if (window_ms <= 0)
		return kiln_error_set(KILN_EINVALID, "dedup index: the window must be positive");
	if (!(d = calloc(1, sizeof(*d))))
		return kiln_error_oom("dedup index");
	d->window_ms = window_ms;
	d->oldest_ms = INT64_MAX;
	*out = d;
	return 0;
}

void kiln_dedup_free(kiln_dedup *d)
{
	if (!d)
		return;
	table_free(&d->committed);
	table_free(&d->pending);
	free(d->list);
	free(d);
}

int kiln_dedup_seen(kiln_dedup *d, const unsigned char key[KILN_DEDUP_HASH_LEN], int64_t now_ms)
{
	const slot *c = table_find(&d->committed, key);
	slot *p;
	int rc;

	if (c && c->ms && c->ms >= now_ms - d->window_ms)
		return 1;
	if ((rc = table_slot(&d->pending, key, &p)) < 0)
		return rc;
	if (p->ms)
		return 1;
	if (d->max_keys && d->committed.count + d->pending.count >= d->max_keys)
		return kiln_error_set(KILN_ELIMIT, "dedup index: %zu keys held, its bound", d->max_keys);
	if ((rc = KILN_ARRAY_GROW(d->list, d->list_cap, d->pending.count, "dedup index")) < 0)
		return rc;
	memcpy(p->key, key, KILN_DEDUP_HASH_LEN);
	p->ms = 1;
	memcpy(d->list[d->pending.count++], key, KILN_DEDUP_HASH_LEN);
	d->sorted = false;
	return 0;
}

int kiln_dedup_add(kiln_dedup *d, const unsigned char key[KILN_DEDUP_HASH_LEN], int64_t committed_ms)
{
	slot *s;
	int rc;

	if (committed_ms <= 0)
		return kiln_error_set(KILN_EINVALID, "dedup index: commit time %" PRId64 " is not positive",
		                      committed_ms);
	if ((rc = table_slot(&d->committed, key, &s)) < 0)
		return rc;
	if (!s->ms && d->max_keys && d->committed.count >= d->max_keys)
		return kiln_error_set(KILN_ELIMIT, "dedup index: %zu keys held, its bound", d->max_keys);
	if (!s->ms) {
		memcpy(s->key, key, KILN_DEDUP_HASH_LEN);
		d->committed.count++;
	}
	if (s->ms < committed_ms)
		s->ms = committed_ms;
	if (committed_ms < d->oldest_ms)
		d->oldest_ms = committed_ms;
	return 0;
}

static int key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, KILN_DEDUP_HASH_LEN);
}

const unsigned char (*kiln_dedup_pending(kiln_dedup *d, size_t *out_count))[KILN_DEDUP_HASH_LEN]
{
	*out_count = d->pending.count;
	if (!d->pending.count)
		return NULL;
	if (!d->sorted)
		qsort(d->list, d->pending.count, KILN_DEDUP_HASH_LEN, key_cmp);
	d->sorted = true;
	return (const unsigned char(*)[KILN_DEDUP_HASH_LEN])d->list;
}

/* Drops the committed keys older than cutoff (one pass, a new table). */
static int prune(kiln_dedup *d, int64_t cutoff)
{
	table n = {0};
	int64_t oldest = INT64_MAX;
	size_t keep = 0, cap = MIN_CAP;

	if (d->oldest_ms >= cutoff)
		return 0;
	for (size_t i = 0; i < d->committed.cap; i++)
		keep += d->committed.v[i].ms >= cutoff;
	while ((keep + 1) * 4 > cap * 3) /* 3/8 to 3/4 full, as growth keeps it */
		cap *= 2;
	if (!(n.v = calloc(cap, sizeof(slot))))
		return kiln_error_oom("dedup index");
	n.cap = cap;
	for (size_t i = 0; i < d->committed.cap; i++) {
		const slot *s = &d->committed.v[i];

		if (!s->ms || s->ms < cutoff)
			continue;
		*table_find(&n, s->key) = *s;
		n.count++;
		if (s->ms < oldest)
			oldest = s->ms;
	}
	table_free(&d->committed);
	d->committed = n;
	d->oldest_ms = oldest;
	return 0;
}

int kiln_dedup_commit(kiln_dedup *d, int64_t committed_ms)
{
	int rc;

	for (size_t i = 0; i < d->pending.count; i++)
		if ((rc = kiln_dedup_add(d, d->list[i], committed_ms)) < 0)
			return rc;
	kiln_dedup_rollback(d);
	return prune(d, committed_ms - d->window_ms);
}

void kiln_dedup_rollback(kiln_dedup *d)
{
	if (d->pending.cap)
		memset(d->pending.v, 0, d->pending.cap * sizeof(slot));
	d->pending.count = 0;
	d->sorted = false;
}

void kiln_dedup_clear(kiln_dedup *d)
{
	kiln_dedup_rollback(d);
	table_free(&d->committed);
	d->oldest_ms = INT64_MAX;
}

int64_t kiln_dedup_window_ms(const kiln_dedup *d)
{
	return d->window_ms;
}

void kiln_dedup_set_max_keys(kiln_dedup *d, size_t max_keys)
{
	d->max_keys = max_keys;
}

size_t kiln_dedup_max_keys(const kiln_dedup *d)
{
	return d->max_keys;
}

size_t kiln_dedup_committed_count(const kiln_dedup *d)
{
	return d->committed.count;
}

size_t kiln_dedup_pending_count(const kiln_dedup *d)
{
	return d->pending.count;
}

/* ---- segments --------------------------------------------------------------- */

int kiln_dedup_segment_encode(kiln_buf *out, const unsigned char (*keys)[KILN_DEDUP_HASH_LEN], size_t count,
                              int64_t committed_ms)
{
	unsigned char head[KILN_DEDUP_SEGMENT_HEADER];
	int rc;

	memcpy(head, MAGIC, 8);
	store64(head + 8, (uint64_t)committed_ms);
	store64(head + 16, count);
	if ((rc = kiln_buf_put(out, head, sizeof(head))) < 0)
		return rc;
	return count ? kiln_buf_put(out, keys, count * KILN_DEDUP_HASH_LEN) : 0;
}

int kiln_dedup_segment_decode(const void *bytes, size_t len, const char *where, int64_t *out_ms,
                              const unsigned char (**out_keys)[KILN_DEDUP_HASH_LEN], size_t *out_count)
{
	const unsigned char *p = bytes;
	uint64_t ms, count;

	*out_keys = NULL;
	*out_count = 0;
	*out_ms = 0;
	if (len < KILN_DEDUP_SEGMENT_HEADER || memcmp(p, MAGIC, 8) != 0)
		return kiln_error_set(KILN_EINVALID, "%s: not a dedup segment (no %s header)", where, MAGIC);
	ms = load64(p + 8);
	count = load64(p + 16);
	if (ms == 0 || ms > INT64_MAX)
		return kiln_error_set(KILN_EINVALID, "%s: commit time out of range", where);
	if (count != (len - KILN_DEDUP_SEGMENT_HEADER) / KILN_DEDUP_HASH_LEN ||
	    (len - KILN_DEDUP_SEGMENT_HEADER) % KILN_DEDUP_HASH_LEN)
		return kiln_error_set(KILN_EINVALID,
		                      "%s: %zu bytes after the header do not hold the %" PRIu64
		                      " keys it counts",
		                      where, len - KILN_DEDUP_SEGMENT_HEADER, count);
	p += KILN_DEDUP_SEGMENT_HEADER;
	for (uint64_t i = 1; i < count; i++)
		if (memcmp(p + (i - 1) * KILN_DEDUP_HASH_LEN, p + i * KILN_DEDUP_HASH_LEN,
		           KILN_DEDUP_HASH_LEN) >= 0)
			return kiln_error_set(KILN_EINVALID,
			                      "%s: key %" PRIu64 " is not above the one before it", where, i);
	*out_ms = (int64_t)ms;
	*out_keys = (const unsigned char(*)[KILN_DEDUP_HASH_LEN])p;
	*out_count = (size_t)count;
	return 0;
}

void kiln_dedup_segment_name(char *out, size_t cap, int64_t committed_ms, const unsigned char id[8])
{
	snprintf(out, cap, "%013" PRId64 "-%02x%02x%02x%02x%02x%02x%02x%02x%s", committed_ms, id[0], id[1],
	         id[2], id[3], id[4], id[5], id[6], id[7], KILN_DEDUP_EXTENSION);
}

int64_t kiln_dedup_segment_name_ms(const char *name)
{
	int64_t ms = 0;
	size_t i;

	for (i = 0; i < 13; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -1;
		ms = ms * 10 + (name[i] - '0');
	}
	if (name[i++] != '-')
		return -1;
	for (size_t j = 0; j < 16; j++, i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return -1;
	if (strcmp(name + i, KILN_DEDUP_EXTENSION) != 0 || ms == 0)
		return -1;
	return ms;
}
