/* The verifying scan (see scan.h). The keys are listed first, then each
 * object is loaded whole and searched: shards line by line after
 * decompression, raw and quarantine objects record by record through their
 * zones' decoders. */
#include "erase/scan.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/buf.h"
#include "core/error.h"
#include "erase/zones.h"
#include "shard/quarantine.h"
#include "shard/raw.h"

typedef struct key_list {
	char **v;
	size_t n, cap;
} key_list;

typedef struct scan {
	kiln_subject *s;
	int (*cb)(void *ctx, const kiln_scan_hit *hit);
	void *ctx;
	const char *key;
	uint64_t record; /* records decoded in the current object */
	int64_t hits;
	int rc; /* cb's non-zero return */
} scan;

static int on_key(void *ctx, const char *key, uint64_t size, int64_t mtime)
{
	key_list *l = ctx;

	(void)size;
	(void)mtime;
	if (KILN_ARRAY_GROW(l->v, l->cap, l->n, NULL) < 0)
		return KILN_ENOMEM;
	if (!(l->v[l->n] = strdup(key)))
		return kiln_error_oom(NULL);
	l->n++;
	return 0;
}

static int hit(scan *sc, uint64_t record)
{
	kiln_scan_hit h = {sc->key, record};
	int rc;

	sc->hits++;
	if ((rc = sc->cb ? sc->cb(sc->ctx, &h) : 0) != 0)
		sc->rc = rc;
	return rc;
}

/* Bytes that do not decode as their zone's object: the needles as bytes
 * (kiln_subject_in_curated), then kiln_zone_bytes_hold, then the needles in
 * what a zstd frame decompresses to (as far as it goes). */
static bool undecodable_hold(scan *sc, const char *p, size_t n)
{
	kiln_buf plain = KILN_BUF_INIT(0);
	bool hold = kiln_subject_in_curated(sc->s, p, n) || kiln_zone_bytes_hold(sc->s, p, n);

	if (!hold) {
		(void)kiln_zone_inflate(p, n, &plain);
		hold = plain.len && kiln_subject_in_curated(sc->s, plain.ptr, plain.len);
	}
	if (plain.ptr)
		sodium_memzero(plain.ptr, plain.cap);
	kiln_buf_free(&plain);
	return hold;
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int scan_shard(scan *sc, const kiln_buf *obj)
{
	kiln_buf plain = KILN_BUF_INIT(0);
	uint64_t record = 0;
	size_t at = 0;
	int rc = 0;

	if ((rc = kiln_zone_inflate(obj->ptr ? obj->ptr : "", obj->len, &plain)) < 0) {
		if (rc != KILN_ENOMEM)
			rc = undecodable_hold(sc, obj->ptr ? obj->ptr : "", obj->len) ? hit(sc, 0) : 0;
		goto cleanup;
	}
	while (at < plain.len && rc == 0) {
		const char *p = plain.ptr + at, *nl = memchr(p, '\n', plain.len - at);
		size_t n = nl ? (size_t)(nl - p) : plain.len - at;

		if (kiln_subject_in_curated(sc->s, p, n) || kiln_subject_in_raw(sc->s, p, n))
			rc = hit(sc, record);
		record++;
		at += n + 1;
	}
cleanup:
	if (plain.ptr)
		sodium_memzero(plain.ptr, plain.cap);
	kiln_buf_free(&plain);
	return rc;
}

static int raw_record(void *ctx, const kiln_raw_record *r)
{
	scan *sc = ctx;
	uint64_t record = sc->record++;

	return kiln_zone_raw_record_holds(sc->s, r) ? hit(sc, record) : 0;
}

static int quarantine_line(void *ctx, const kiln_quarantine_line *line)
{
	scan *sc = ctx;
	uint64_t record = sc->record++;

	return line->record && !line->record_null &&
	               kiln_subject_in_raw(sc->s, line->record, line->record_len)
	           ? hit(sc, record)
	           : 0;
}

/* A raw or quarantine object: decoded record by record; one that does not
 * decode is searched as bytes. */
static int scan_zone(scan *sc, const kiln_buf *obj, bool raw)
{
	const char *p = obj->ptr ? obj->ptr : "";
	int rc;

	sc->record = 0;
	rc = raw ? kiln_raw_decode(p, obj->len, sc->key, raw_record, sc)
	         : kiln_quarantine_decode(p, obj->len, sc->key, quarantine_line, sc);
	if (sc->rc)
		return sc->rc;
	if (rc == KILN_EINVALID)
		return undecodable_hold(sc, p, obj->len) ? hit(sc, sc->record) : 0;
	return rc;
}

int64_t kiln_erase_scan_store(kiln_store *store, kiln_subject *s,
                              int (*cb)(void *ctx, const kiln_scan_hit *hit), void *ctx,
                              uint64_t *out_objects)
{
	static const char *const prefixes[] = {"shards/", "raw/", "quarantine/"};
	kiln_buf obj = KILN_BUF_INIT(0);
	key_list keys = {0};
	scan sc = {.s = s, .cb = cb, .ctx = ctx};
	uint64_t objects = 0;
	int rc = 0;

	for (size_t p = 0; p < 3 && rc == 0; p++) {
		size_t from = keys.n;

		if ((rc = kiln_store_list(store, prefixes[p], on_key, &keys)) < 0)
			break;
		qsort(keys.v + from, keys.n - from, sizeof(*keys.v), key_cmp);
		for (size_t i = from; i < keys.n && rc == 0; i++) {
			sc.key = keys.v[i];
			if ((rc = kiln_zone_load(store, sc.key, &obj)) == KILN_ENOTFOUND) {
				rc = 0; /* gone since the listing */
				continue;
			}
			if (rc < 0)
				break;
			objects++;
			rc = p == 0 ? scan_shard(&sc, &obj) : scan_zone(&sc, &obj, p == 1);
		}
	}
	for (size_t i = 0; i < keys.n; i++)
		free(keys.v[i]);
	free(keys.v);
	if (obj.ptr)
		sodium_memzero(obj.ptr, obj.cap);
	kiln_buf_free(&obj);
	if (out_objects)
		*out_objects = objects;
	return rc ? rc : sc.hits;
}
