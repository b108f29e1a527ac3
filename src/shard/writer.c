/* Shard writer (see writer.h). */
#include "shard/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/error.h"

#define OUT_CHUNK (1u << 20)

struct range {
	char *topic;
	int32_t partition;
	int64_t first, last;
};

struct kiln_shard_writer {
	kiln_store *store;
	kiln_shard_writer_options opt;
	ZSTD_CCtx *cctx;
	kiln_buf data;         /* the open shard's JSON Lines */
	uint64_t records;      /* in the open shard */
	struct range *ranges;  /* the open shard's sources */
	size_t range_count, range_cap;
	kiln_shard_entry *closed;
	size_t closed_count, closed_cap;
};

static const char *spool_dir(const char *dir)
{
	const char *t;

	if (dir)
		return dir;
	t = getenv("TMPDIR");
	return t && *t ? t : "/tmp";
}

int kiln_zstd_store(kiln_store *store, ZSTD_CCtx *cctx, int level, const char *dir, const char *key,
		    const void *data, size_t len, char out_hash[65], uint64_t *out_bytes)
{
	char path[4096], shard_key[128];
	unsigned char digest[32];
	crypto_generichash_state hs;
	ZSTD_inBuffer in = { data, len, 0 };
	char *chunk = NULL;
	uint64_t total = 0;
	size_t rest;
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/kiln-spool-XXXXXX", spool_dir(dir));
	fd = mkstemp(path);
	if (fd < 0)
		return kiln_error_set(KILN_EIO, "%s: cannot create a spool file: %s", spool_dir(dir), strerror(errno));
	chunk = malloc(OUT_CHUNK);
	if (!chunk) {
		rc = kiln_error_set(KILN_ENOMEM, "out of memory");
		goto cleanup;
	}
	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
	ZSTD_CCtx_setPledgedSrcSize(cctx, len);
	crypto_generichash_init(&hs, NULL, 0, sizeof(digest));
	do {
		ZSTD_outBuffer out = { chunk, OUT_CHUNK, 0 };
		rest = ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end);
		if (ZSTD_isError(rest)) {
			rc = kiln_error_set(KILN_EIO, "zstd: %s", ZSTD_getErrorName(rest));
			goto cleanup;
		}
		crypto_generichash_update(&hs, (const unsigned char *)chunk, out.pos);
		for (size_t off = 0; off < out.pos;) {
			ssize_t w = write(fd, chunk + off, out.pos - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				rc = kiln_error_set(KILN_EIO, "%s: write: %s", path, strerror(errno));
				goto cleanup;
			}
			off += (size_t)w;
		}
		total += out.pos;
	} while (rest != 0);
	crypto_generichash_final(&hs, digest, sizeof(digest));
	sodium_bin2hex(out_hash, 65, digest, sizeof(digest));
	*out_bytes = total;
	if (!key) {
		snprintf(shard_key, sizeof(shard_key), "shards/%.2s/%s.jsonl.zst", out_hash, out_hash);
		key = shard_key;
	}
	rc = kiln_store_put_file(store, key, path, total);
cleanup:
	free(chunk);
	close(fd);
	unlink(path);
	return rc;
}

int kiln_shard_writer_new(kiln_shard_writer **out, kiln_store *store, const kiln_shard_writer_options *opt)
{
	kiln_shard_writer *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w)
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	if (opt)
		w->opt = *opt;
	if (!w->opt.target_bytes)
		w->opt.target_bytes = KILN_SHARD_DEFAULT_TARGET;
	if (!w->opt.level)
		w->opt.level = 3;
	w->store = store;
	w->cctx = ZSTD_createCCtx();
	if (!w->cctx) {
		free(w);
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	}
	*out = w;
	return 0;
}

static void free_ranges(struct range *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(r[i].topic);
}

void kiln_shard_writer_free(kiln_shard_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->closed_count; i++) {
		for (size_t j = 0; j < w->closed[i].source_count; j++)
			free((char *)w->closed[i].sources[j].topic);
		free((void *)w->closed[i].sources);
	}
	free(w->closed);
	free_ranges(w->ranges, w->range_count);
	free(w->ranges);
	kiln_buf_free(&w->data);
	ZSTD_freeCCtx(w->cctx);
	free(w);
}

static int note_source(kiln_shard_writer *w, const char *topic, int32_t partition, int64_t offset)
{
	struct range *r;

	for (size_t i = w->range_count; i > 0; i--) {
		r = &w->ranges[i - 1];
		if (r->partition == partition && strcmp(r->topic, topic) == 0) {
			if (offset < r->first)
				r->first = offset;
			if (offset > r->last)
				r->last = offset;
			return 0;
		}
	}
	if (w->range_count == w->range_cap) {
		size_t cap = w->range_cap ? w->range_cap * 2 : 4;
		r = realloc(w->ranges, cap * sizeof(*r));
		if (!r)
			return kiln_error_set(KILN_ENOMEM, "out of memory");
		w->ranges = r;
		w->range_cap = cap;
	}
	r = &w->ranges[w->range_count];
	r->topic = strdup(topic);
	if (!r->topic)
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	r->partition = partition;
	r->first = r->last = offset;
	w->range_count++;
	return 0;
}

int kiln_shard_writer_append(kiln_shard_writer *w, const char *line, size_t len, const char *topic,
			     int32_t partition, int64_t offset)
{
	int rc;

	/* one allocation of the shard's size, touched only as it fills */
	if (!w->data.cap && (rc = kiln_buf_reserve(&w->data, w->opt.target_bytes + (1u << 20))) < 0)
		return rc;
	if ((rc = kiln_buf_reserve(&w->data, len + 1)) < 0 || (rc = note_source(w, topic, partition, offset)) < 0)
		return rc;
	memcpy(w->data.ptr + w->data.len, line, len);
	w->data.len += len;
	w->data.ptr[w->data.len++] = '\n';
	w->records++;
	if (w->data.len >= w->opt.target_bytes)
		return kiln_shard_writer_flush(w);
	return 0;
}

int kiln_shard_writer_flush(kiln_shard_writer *w)
{
	kiln_shard_entry *e;
	kiln_source_range *sources;
	int rc;

	if (w->records == 0)
		return 0;
	if (w->closed_count == w->closed_cap) {
		size_t cap = w->closed_cap ? w->closed_cap * 2 : 8;
		e = realloc(w->closed, cap * sizeof(*e));
		if (!e)
			return kiln_error_set(KILN_ENOMEM, "out of memory");
		w->closed = e;
		w->closed_cap = cap;
	}
	sources = calloc(w->range_count, sizeof(*sources));
	if (!sources)
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	e = &w->closed[w->closed_count];
	memset(e, 0, sizeof(*e));
	rc = kiln_zstd_store(w->store, w->cctx, w->opt.level, w->opt.spool_dir, NULL, w->data.ptr, w->data.len,
			     e->hash, &e->bytes);
	if (rc < 0) {
		free(sources);
		return rc; /* the open shard stays as it was: a retry can flush again */
	}
	for (size_t i = 0; i < w->range_count; i++) {
		sources[i] = (kiln_source_range){ .topic = w->ranges[i].topic, .partition = w->ranges[i].partition,
						  .first = w->ranges[i].first, .last = w->ranges[i].last };
		w->ranges[i].topic = NULL; /* now owned by the entry */
	}
	e->raw_bytes = w->data.len;
	e->records = w->records;
	e->sources = sources;
	e->source_count = w->range_count;
	w->closed_count++;
	w->range_count = 0;
	w->records = 0;
	kiln_buf_reset(&w->data);
	return 0;
}

const kiln_shard_entry *kiln_shard_writer_shards(const kiln_shard_writer *w, size_t *out_count)
{
	*out_count = w->closed_count;
	return w->closed;
}
