/* The cursor's read-ahead thread (see loader.h). One job at a time: the
 * shard `id` is fetched into memory (kiln_shard_fetch checks its hash and
 * size), then decompressed into `text`, sized from the manifest's raw bytes.
 * Nothing of a shard reaches the caller unless its bytes are verified. */
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_d_stableOutBuffer: decoded straight into the text */
#include "reader/loader.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/error.h"
#include "shard/fetch.h"

struct kiln_loader {
	kiln_store *store;
	pthread_t thread;
	bool started, quit;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* the job: shard `id` (copied from the caller's entry), busy while
	 * loading, held once loaded (rc its outcome) */
	kiln_reader_shard shard;
	size_t id;
	bool busy, held;
	int rc;
	char err[1024];
	kiln_buf z, text;
	size_t lines; /* text's lines (the last may lack its '\n') */
	ZSTD_DCtx *dctx;
};

/* The newlines in text[0..len). Counted here, while the text is still in
 * this core's cache, so that the reader can hand out a shard's lines
 * without a scan. */
static size_t count_newlines(const char *text, size_t len)
{
	const unsigned char *p = (const unsigned char *)text, *end = p + len;
	size_t n = 0;

#ifdef __SSE2__
	const __m128i nl = _mm_set1_epi8('\n'), zero = _mm_setzero_si128();

	while (end - p >= 16) {
		/* each lane counts down by one per newline, at most 255 rounds,
		 * then the lanes are summed */
		size_t rounds = (size_t)(end - p) / 16 < 255 ? (size_t)(end - p) / 16 : 255;
		__m128i acc = zero, sums;

		for (size_t i = 0; i < rounds; i++, p += 16)
			acc = _mm_sub_epi8(
			    acc, _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)p), nl));
		sums = _mm_sad_epu8(acc, zero);
		n += (size_t)_mm_cvtsi128_si32(sums) + (size_t)_mm_cvtsi128_si32(_mm_srli_si128(sums, 8));
	}
#endif
	for (; p < end; p++)
		n += *p == '\n';
	return n;
}

/* Compressed bytes handed to zstd at a time: about 1 MiB of text each (in a
 * core's L2), counted while it is in cache; a block split between two
 * slices is copied by zstd, so slices hold many blocks. */
#define SLICE ((size_t)256 << 10)

/* Decompresses z straight into text (all frames), whose room is the
 * manifest's raw bytes + 1, a slice at a time, counting lines as they come:
 * 0, 1 when the text does not fit (the frames decide: inflate streams it
 * again), or an error for a corrupt or truncated frame. */
static int inflate_direct(kiln_loader *l)
{
	ZSTD_outBuffer out = {l->text.ptr, l->text.cap, 0};
	ZSTD_inBuffer in = {l->z.ptr, 0, 0};
	size_t last = 0, newlines = 0;

	ZSTD_DCtx_reset(l->dctx, ZSTD_reset_session_only);
	if (ZSTD_isError(ZSTD_DCtx_setParameter(l->dctx, ZSTD_d_stableOutBuffer, 1)))
		return 1;
	while (in.pos < l->z.len || last != 0) {
		size_t before = out.pos, was = in.pos;

		in.size = l->z.len - in.pos > SLICE ? in.pos + SLICE : l->z.len;
		last = ZSTD_decompressStream(l->dctx, &out, &in);
		if (ZSTD_isError(last)) {
			if (ZSTD_getErrorCode(last) == ZSTD_error_dstSize_tooSmall)
				return 1;
			return kiln_error_set(KILN_EINVALID, "shard %s: zstd: %s", l->shard.hash,
			                      ZSTD_getErrorName(last));
		}
		newlines += count_newlines(l->text.ptr + before, out.pos - before);
		if (in.pos == l->z.len && last != 0 && out.pos == before && in.pos == was)
			return kiln_error_set(KILN_EINVALID, "shard %s: the zstd frame is truncated",
			                      l->shard.hash);
		if (out.pos == out.size && last != 0)
			return 1; /* more text than the manifest says */
	}
	l->text.len = out.pos;
	l->lines = newlines + (out.pos && l->text.ptr[out.pos - 1] != '\n');
	return 0;
}

/* Decompresses z into text (all frames; a truncated one is an error) and
 * counts its lines. */
static int inflate(kiln_loader *l)
{
	ZSTD_inBuffer in = {l->z.ptr, l->z.len, 0};
	size_t last = 0;
	int rc;

	kiln_buf_reset(&l->text);
	if ((rc = kiln_buf_reserve(&l->text, l->shard.raw_bytes ? l->shard.raw_bytes + 1 : l->z.len * 4)) < 0)
		return rc;
	/* the manifest's size: straight into text */
	if (l->shard.raw_bytes && (rc = inflate_direct(l)) <= 0)
		return rc;
	/* more text than the manifest says (or no size): streamed, the frames decide */
	ZSTD_DCtx_reset(l->dctx, ZSTD_reset_session_only);
	ZSTD_DCtx_setParameter(l->dctx, ZSTD_d_stableOutBuffer, 0);
	kiln_buf_reset(&l->text);
	while (in.pos < in.size || last != 0) {
		ZSTD_outBuffer out;
		size_t before = in.pos;

		if (l->text.cap == l->text.len &&
		    (rc = kiln_buf_reserve(&l->text, ZSTD_DStreamOutSize())) < 0)
			return rc; /* more than the manifest's raw bytes: the frame decides */
		out = (ZSTD_outBuffer){l->text.ptr + l->text.len, l->text.cap - l->text.len, 0};
		last = ZSTD_decompressStream(l->dctx, &out, &in);
		if (ZSTD_isError(last))
			return kiln_error_set(KILN_EINVALID, "shard %s: zstd: %s", l->shard.hash,
			                      ZSTD_getErrorName(last));
		l->text.len += out.pos;
		if (in.pos == in.size && last != 0 && out.pos == 0 && in.pos == before)
			return kiln_error_set(KILN_EINVALID, "shard %s: the zstd frame is truncated",
			                      l->shard.hash);
	}
	l->lines =
	    count_newlines(l->text.ptr, l->text.len) + (l->text.len && l->text.ptr[l->text.len - 1] != '\n');
	return 0;
}

static int load(kiln_loader *l)
{
	kiln_shard_request f = {.hash = l->shard.hash,
	                        .bytes = l->shard.bytes,
	                        .limit = l->shard.bytes,
	                        .sink = kiln_buf_sink,
	                        .ctx = &l->z};
	int rc;

	kiln_buf_reset(&l->z);
	if (!l->dctx && !(l->dctx = ZSTD_createDCtx()))
		return kiln_error_oom(NULL);
	if ((rc = kiln_buf_reserve(&l->z, l->shard.bytes)) < 0 || (rc = kiln_shard_fetch(l->store, &f)) < 0)
		return rc;
	return inflate(l);
}

static void *run(void *arg)
{
	kiln_loader *l = arg;

	pthread_setname_np(pthread_self(), "kiln-loader");

	pthread_mutex_lock(&l->lock);
	for (;;) {
		int rc;

		while (!l->busy && !l->quit)
			pthread_cond_wait(&l->cond, &l->lock);
		if (l->quit)
			break;
		pthread_mutex_unlock(&l->lock);
		rc = load(l);
		pthread_mutex_lock(&l->lock);
		l->rc = rc;
		snprintf(l->err, sizeof(l->err), "%s", rc < 0 ? kiln_error_last() : "");
		if (rc < 0) /* a failed load keeps no memory */
			kiln_buf_free(&l->text);
		kiln_buf_reset(&l->z); /* kept for the next shard: fresh pages cost more than the copy */
		l->busy = false;
		l->held = true;
		pthread_cond_broadcast(&l->cond);
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

int kiln_loader_new(kiln_loader **out, kiln_store *store)
{
	kiln_loader *l;

	*out = NULL;
	if (!(l = calloc(1, sizeof(*l))))
		return kiln_error_oom(NULL);
	l->store = store;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	*out = l;
	return 0;
}

void kiln_loader_free(kiln_loader *l)
{
	if (!l)
		return;
	if (l->started) {
		pthread_mutex_lock(&l->lock);
		l->quit = true;
		pthread_cond_broadcast(&l->cond);
		pthread_mutex_unlock(&l->lock);
		pthread_join(l->thread, NULL);
	}
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->cond);
	kiln_buf_free(&l->z);
	kiln_buf_free(&l->text);
	ZSTD_freeDCtx(l->dctx);
	free(l);
}

/* Called with the lock held: the thread is idle. */
static int start_locked(kiln_loader *l, const kiln_reader_shard *s, size_t id)
{
	if (!l->started) {
		if (pthread_create(&l->thread, NULL, run, l) != 0)
			return kiln_error_set(KILN_ENOMEM, "the shard read-ahead thread could not start");
		l->started = true;
	}
	l->shard = *s;
	l->id = id;
	l->held = false;
	l->busy = true;
	pthread_cond_broadcast(&l->cond);
	return 0;
}

int kiln_loader_start(kiln_loader *l, const kiln_reader_shard *s, size_t id)
{
	int rc = 0;

	pthread_mutex_lock(&l->lock);
	if (!((l->busy || l->held) && l->id == id)) {
		while (l->busy)
			pthread_cond_wait(&l->cond, &l->lock);
		rc = start_locked(l, s, id);
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

int kiln_loader_take(kiln_loader *l, const kiln_reader_shard *s, size_t id, kiln_buf *text, size_t *lines)
{
	kiln_buf t;
	int rc;

	if ((rc = kiln_loader_start(l, s, id)) < 0)
		return rc;
	pthread_mutex_lock(&l->lock);
	while (l->busy)
		pthread_cond_wait(&l->cond, &l->lock);
	l->held = false; /* taken: a later take of this id loads it again */
	if ((rc = l->rc) < 0) {
		kiln_error_set(rc, "%s", l->err);
	} else {
		t = *text;
		*text = l->text;
		l->text = t;
		kiln_buf_reset(&l->text);
		*lines = l->lines;
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}
