/* Erasing a subject from the raw zone and the quarantine (see zones.h).
 * Per object: load it, decode it line by line, render the lines that stay
 * into a spool while counting the ones that go; then nothing (no match),
 * a rewrite under the same key (some stay) or a delete (none stay). An
 * object that does not decode is searched as bytes and deleted whole on a
 * match. */
#include "erase/zones.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "core/error.h"
#include "shard/quarantine.h"
#include "shard/spool.h"

#define OBJ_MAX ((size_t)1 << 30)
#define CHUNK   ((size_t)128 << 10)
#define LEVEL   3

/* One erasure over one zone: the subject, the options and the object being
 * rewritten. */
typedef struct zone_run {
	kiln_store *store;
	kiln_subject *s;
	bool dry_run;
	kiln_zone_stats st;
	ZSTD_CCtx *cctx;
	kiln_buf obj;  /* the object's bytes */
	kiln_buf line; /* a rendered line */
	kiln_spool kept_lines;
	uint64_t kept, matched;
	int rc; /* an error of ours inside a decoder's callback */
	/* quarantine */
	const char *dataset;
	kiln_zone_line_drop drop; /* NULL: the subject's lines go */
	void *drop_ctx;
	const kiln_quarantine_object *qobj; /* the object being read */
} zone_run;

static void wipe_buf(kiln_buf *b)
{
	if (b->ptr)
		sodium_memzero(b->ptr, b->cap);
	kiln_buf_free(b);
}

int kiln_zone_load(kiln_store *store, const char *key, kiln_buf *out)
{
	int rc;

	kiln_buf_reset(out);
	out->max = OBJ_MAX;
	rc = kiln_store_get(store, key, kiln_buf_sink, out);
	if (rc == KILN_ELIMIT)
		rc = kiln_error_set(KILN_ELIMIT, "%s: larger than %zu bytes", key, OBJ_MAX);
	return rc;
}

int kiln_zone_inflate(const void *zst, size_t len, kiln_buf *out)
{
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	ZSTD_inBuffer in = {zst, len, 0};
	int rc = 0;

	kiln_buf_reset(out);
	out->max = OBJ_MAX;
	if (!dctx)
		return kiln_error_oom(NULL);
	for (;;) {
		ZSTD_outBuffer o;
		size_t ret;

		if ((rc = kiln_buf_reserve(out, CHUNK)) < 0)
			break;
		o = (ZSTD_outBuffer){out->ptr + out->len, out->cap - out->len, 0};
		ret = ZSTD_decompressStream(dctx, &o, &in);
		out->len += o.pos;
		if (ZSTD_isError(ret)) {
			rc = kiln_error_set(KILN_EINVALID, "corrupt zstd frame: %s", ZSTD_getErrorName(ret));
			break;
		}
		if (ret == 0) {
			if (in.pos != in.size)
				rc = kiln_error_set(KILN_EINVALID, "bytes after the zstd frame");
			break;
		}
		if (in.pos == in.size && o.pos < o.size) {
			rc = kiln_error_set(KILN_EINVALID, "truncated zstd frame");
			break;
		}
	}
	ZSTD_freeDCtx(dctx);
	return rc;
}

bool kiln_zone_bytes_hold(kiln_subject *s, const void *bytes, size_t len)
{
	static const unsigned char magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
	kiln_buf plain = KILN_BUF_INIT(0);
	bool hit = kiln_subject_in_raw(s, bytes, len);

	if (!hit && len >= 4 && memcmp(bytes, magic, 4) == 0) {
		int rc = kiln_zone_inflate(bytes, len, &plain);
		if (rc == KILN_ENOMEM)
			hit = true; /* cannot tell: err on the side of erasing */
		else if (plain.len)
			hit = kiln_subject_in_raw(s, plain.ptr, plain.len);
	}
	wipe_buf(&plain);
	return hit;
}

/* --- the per-object rewrite ------------------------------------------------ */

static int run_init(zone_run *z, kiln_store *store, kiln_subject *s, bool dry_run)
{
	memset(z, 0, sizeof(*z));
	z->store = store;
	z->s = s;
	z->dry_run = dry_run;
	z->obj = (kiln_buf)KILN_BUF_INIT(OBJ_MAX);
	z->line = (kiln_buf)KILN_BUF_INIT(0);
	z->kept_lines.fd = -1;
	if (!(z->cctx = ZSTD_createCCtx()))
		return kiln_error_oom(NULL);
	return 0;
}

static void run_free(zone_run *z)
{
	ZSTD_freeCCtx(z->cctx);
	kiln_spool_close(&z->kept_lines);
	wipe_buf(&z->obj);
	wipe_buf(&z->line);
}

/* Starts an object: an empty spool for the lines that stay. */
static int object_begin(zone_run *z)
{
	z->kept = z->matched = 0;
	z->rc = 0;
	kiln_spool_close(&z->kept_lines);
	return z->dry_run ? 0 : kiln_spool_open(&z->kept_lines, NULL);
}

/* One decoded record: counted when it matches, else its line kept. */
static int object_record(zone_run *z, bool match)
{
	int rc;

	if (match) {
		z->matched++;
		return 0;
	}
	z->kept++;
	if (!z->dry_run && (rc = kiln_spool_write(&z->kept_lines, z->line.ptr, z->line.len)) < 0)
		return z->rc = rc;
	return 0;
}

/* After decoding `key`: decode_rc is what the decoder returned. */
static int object_end(zone_run *z, const char *key, int decode_rc)
{
	char hash[65];
	uint64_t bytes;
	int rc;

	z->st.objects++;
	if (z->rc < 0)
		return z->rc;
	if (decode_rc != 0 && decode_rc != KILN_EINVALID)
		return decode_rc;
	if (decode_rc == KILN_EINVALID) {
		/* not an object of its zone: searched as bytes, deleted whole on a
		 * match (without a subject: left as it is) */
		if (!z->s || !kiln_zone_bytes_hold(z->s, z->obj.ptr, z->obj.len))
			return 0;
		z->st.deleted++;
		z->st.records++;
		return z->dry_run ? 0 : kiln_store_remove(z->store, key);
	}
	if (!z->matched)
		return 0;
	z->st.records += z->matched;
	if (!z->kept) {
		z->st.deleted++;
		return z->dry_run ? 0 : kiln_store_remove(z->store, key);
	}
	z->st.rewritten++;
	if (z->dry_run)
		return 0;
	rc = kiln_spool_store(&z->kept_lines, z->store, z->cctx, LEVEL, key, hash, &bytes);
	return rc < 0 ? rc : 0;
}

/* --- raw zone ---------------------------------------------------------------- */

bool kiln_zone_raw_record_holds(kiln_subject *s, const kiln_raw_record *r)
{
	if ((!r->null_value && kiln_subject_in_raw(s, r->value, r->value_len)) ||
	    (!r->null_key && kiln_subject_in_raw(s, r->key, r->key_len)))
		return true;
	for (size_t i = 0; i < r->header_count; i++)
		if (!r->headers[i].null_value &&
		    kiln_subject_in_raw(s, r->headers[i].value, r->headers[i].value_len))
			return true;
	return false;
}

static int raw_record(void *ctx, const kiln_raw_record *r)
{
	zone_run *z = ctx;
	bool match = kiln_zone_raw_record_holds(z->s, r);
	int rc;

	if (!match) {
		kiln_buf_reset(&z->line);
		if ((rc = kiln_raw_render(&z->line, r)) < 0)
			return z->rc = rc;
	}
	return object_record(z, match);
}

static int raw_object(void *ctx, const char *key, const char *topic, int32_t partition, int64_t first,
                      int64_t last)
{
	zone_run *z = ctx;
	int rc;

	(void)topic;
	(void)partition;
	(void)first;
	(void)last;
	if ((rc = kiln_zone_load(z->store, key, &z->obj)) < 0)
		return rc == KILN_ENOTFOUND ? 0 : rc; /* gone since the listing */
	if ((rc = object_begin(z)) < 0)
		return rc;
	rc = kiln_raw_decode(z->obj.ptr ? z->obj.ptr : "", z->obj.len, key, raw_record, z);
	return object_end(z, key, rc);
}

int kiln_zone_erase_raw(kiln_store *store, kiln_subject *s, const char *const *topics, size_t n, bool dry_run,
                        kiln_zone_stats *out)
{
	zone_run z;
	int rc;

	if (out)
		memset(out, 0, sizeof(*out));
	if ((rc = run_init(&z, store, s, dry_run)) < 0)
		goto cleanup;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (!topics[i] || !*topics[i] || strchr(topics[i], '/'))
			continue; /* names no raw object */
		rc = kiln_raw_list(store, topics[i], -1, raw_object, &z);
	}
	if (out)
		*out = z.st;
cleanup:
	run_free(&z);
	return rc;
}

/* --- quarantine -------------------------------------------------------------- */

static int quarantine_line(void *ctx, const kiln_quarantine_line *line)
{
	zone_run *z = ctx;
	bool match = z->drop ? z->drop(z->drop_ctx, z->qobj, line)
	                     : line->record && !line->record_null &&
	                           kiln_subject_in_raw(z->s, line->record, line->record_len);
	int rc;

	if (!match) {
		kiln_buf_reset(&z->line);
		if ((rc = kiln_quarantine_render_line(&z->line, line)) < 0)
			return z->rc = rc;
	}
	return object_record(z, match);
}

static int quarantine_object(void *ctx, const kiln_quarantine_object *obj)
{
	zone_run *z = ctx;
	int rc;

	if (z->drop && !z->drop(z->drop_ctx, obj, NULL))
		return 0;
	if ((rc = kiln_zone_load(z->store, obj->key, &z->obj)) < 0)
		return rc == KILN_ENOTFOUND ? 0 : rc; /* gone since the listing */
	if ((rc = object_begin(z)) < 0)
		return rc;
	z->qobj = obj;
	rc = kiln_quarantine_decode(z->obj.ptr ? z->obj.ptr : "", z->obj.len, obj->key, quarantine_line, z);
	return object_end(z, obj->key, rc);
}

int kiln_zone_erase_quarantine(kiln_store *store, kiln_subject *s, const char *dataset,
                               const char *const *topics, size_t n, bool dry_run, kiln_zone_stats *out)
{
	zone_run z;
	int rc;

	if (out)
		memset(out, 0, sizeof(*out));
	if ((rc = run_init(&z, store, s, dry_run)) < 0)
		goto cleanup;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (!topics[i] || !*topics[i] || strchr(topics[i], '/'))
			continue; /* names no quarantine object */
		rc = kiln_quarantine_list(store, topics[i], dataset, quarantine_object, &z);
	}
	if (out)
		*out = z.st;
cleanup:
	run_free(&z);
	return rc;
}

int kiln_zone_drop_quarantine_lines(kiln_store *store, const char *dataset, kiln_zone_line_drop drop,
                                    void *ctx, bool dry_run, kiln_zone_stats *out)
{
	zone_run z;
	int rc;

	if (out)
		memset(out, 0, sizeof(*out));
	if ((rc = run_init(&z, store, NULL, dry_run)) < 0)
		goto cleanup;
	z.drop = drop;
	z.drop_ctx = ctx;
	rc = kiln_quarantine_list(store, NULL, dataset, quarantine_object, &z);
	if (out)
		*out = z.st;
cleanup:
	run_free(&z);
	return rc;
}
