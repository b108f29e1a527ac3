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
	bool sync; /* no thread: the caller loads each shard when it takes it */
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
	kiln_buf ends; /* the offsets of text's newlines (size_t each) */
	ZSTD_DCtx *dctx;
};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define NEWLINES_AVX2 1
#include <immintrin.h>

/* find_newlines' loop 64 bytes at a time with AVX2, for a CPU that has it
 * (checked at run time): the newlines' positions in text[from..) as long as
 * 64 bytes are left; returns where it stopped (the caller scans the rest). */
__attribute__((target("avx2"))) static size_t newlines_avx2(kiln_buf *ends, const char *text, size_t from,
                                                            size_t to, int *rc)
{
	const __m256i nl = _mm256_set1_epi8('\n');
	size_t at = from;

	*rc = 0;
	for (; to - at >= 64; at += 64) {
		const __m256i *p = (const __m256i *)(const void *)(text + at);
		uint64_t mask =
		    (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_loadu_si256(p), nl)) |
		    (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_loadu_si256(p + 1), nl))
		        << 32;
		size_t *out;

		if (!mask)
			continue;
		if (ends->cap - ends->len < 64 * sizeof(size_t) &&
		    (*rc = kiln_buf_reserve(ends, 64 * sizeof(size_t))) < 0)
			return at;
		out = (size_t *)(void *)(ends->ptr + ends->len);
		for (; mask; mask &= mask - 1)
			*out++ = at + (size_t)__builtin_ctzll(mask);
		ends->len = (size_t)((char *)out - ends->ptr);
	}
	return at;
}
#endif

/* Appends the offsets of the newlines in text[from..to) to ends (size_t
 * each). Found here, while the text is still in this core's cache, so that
 * the reader hands out a shard's lines, and a batch's record lengths, without
 * a scan. 0, or KILN_ENOMEM. */
static int find_newlines(kiln_buf *ends, const char *text, size_t from, size_t to)
{
	const unsigned char *base = (const unsigned char *)text, *p, *end = base + to;
	int rc;

#ifdef NEWLINES_AVX2
	if (__builtin_cpu_supports("avx2")) {
		from = newlines_avx2(ends, text, from, to, &rc);
		if (rc < 0)
			return rc;
	}
#endif
	p = base + from;
#ifdef __SSE2__
	const __m128i nl = _mm_set1_epi8('\n');

	for (; end - p >= 16; p += 16) {
		unsigned mask = (unsigned)_mm_movemask_epi8(
		    _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)p), nl));
		size_t *out;

		if (!mask)
			continue;
		if (ends->cap - ends->len < 16 * sizeof(size_t) &&
		    (rc = kiln_buf_reserve(ends, 16 * sizeof(size_t))) < 0)
			return rc;
		out = (size_t *)(void *)(ends->ptr + ends->len);
		for (; mask; mask &= mask - 1)
			*out++ = (size_t)(p - base) + (size_t)__builtin_ctz(mask);
		ends->len = (size_t)((char *)out - ends->ptr);
	}
#endif
	for (; p < end; p++)
		if (*p == '\n') {
			size_t at = (size_t)(p - base);

			if ((rc = kiln_buf_put(ends, &at, sizeof(at))) < 0)
				return rc;
		}
	return 0;
}

/* A text's lines: its newlines, and one more when it does not end with one. */
static size_t count_lines(const kiln_buf *text, const kiln_buf *ends)
{
	return ends->len / sizeof(size_t) + (text->len && text->ptr[text->len - 1] != '\n');
}

/* Compressed bytes handed to zstd at a time: about 1 MiB of text each (in a
 * core's L2), counted while it is in cache; a block split between two
 * slices is copied by zstd, so slices hold many blocks. */
#define SLICE ((size_t)256 << 10)

/* Decompresses z straight into text (all frames), whose room is the
 * manifest's raw bytes + 1, a slice at a time, finding newlines as they come:
 * 0, 1 when the text does not fit (the frames decide: inflate streams it
 * again), or an error for a corrupt or truncated frame. */
static int inflate_direct(kiln_loader *l)
{
	ZSTD_outBuffer out = {l->text.ptr, l->text.cap, 0};
	ZSTD_inBuffer in = {l->z.ptr, 0, 0};
	size_t last = 0;
	int rc;

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
		if ((rc = find_newlines(&l->ends, l->text.ptr, before, out.pos)) < 0)
			return rc;
		if (in.pos == l->z.len && last != 0 && out.pos == before && in.pos == was)
			return kiln_error_set(KILN_EINVALID, "shard %s: the zstd frame is truncated",
			                      l->shard.hash);
		if (out.pos == out.size && last != 0)
			return 1; /* more text than the manifest says */
	}
	l->text.len = out.pos;
	return 0;
}

/* Decompresses z into text (all frames; a truncated one is an error) and
 * finds its newlines. */
static int inflate(kiln_loader *l)
{
	ZSTD_inBuffer in = {l->z.ptr, l->z.len, 0};
	size_t last = 0;
	int rc;

	kiln_buf_reset(&l->text);
	kiln_buf_reset(&l->ends);
	if ((rc = kiln_buf_reserve(&l->text, l->shard.raw_bytes ? l->shard.raw_bytes + 1 : l->z.len * 4)) < 0)
		return rc;
	/* room for the manifest's count of newlines (no more than the text's bytes) */
	if ((rc = kiln_buf_reserve(
	         &l->ends,
	         ((l->shard.records < l->shard.raw_bytes ? l->shard.records : l->shard.raw_bytes) + 1) *
	             sizeof(size_t))) < 0)
		return rc;
	/* the manifest's size: straight into text */
	if (l->shard.raw_bytes && (rc = inflate_direct(l)) <= 0)
		return rc;
	/* more text than the manifest says (or no size): streamed, the frames decide */
	ZSTD_DCtx_reset(l->dctx, ZSTD_reset_session_only);
	ZSTD_DCtx_setParameter(l->dctx, ZSTD_d_stableOutBuffer, 0);
	kiln_buf_reset(&l->text);
	kiln_buf_reset(&l->ends);
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
	return find_newlines(&l->ends, l->text.ptr, 0, l->text.len);
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
		if (rc < 0) { /* a failed load keeps no memory */
			kiln_buf_free(&l->text);
			kiln_buf_free(&l->ends);
		}
		kiln_buf_reset(&l->z); /* kept for the next shard: fresh pages cost more than the copy */
		l->busy = false;
		l->held = true;
		pthread_cond_broadcast(&l->cond);
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

int kiln_loader_new(kiln_loader **out, kiln_store *store, bool sync)
{
	kiln_loader *l;

	*out = NULL;
	if (!(l = calloc(1, sizeof(*l))))
		return kiln_error_oom(NULL);
	l->store = store;
	l->sync = sync;
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
	kiln_buf_free(&l->ends);
	ZSTD_freeDCtx(l->dctx);
	free(l);
}

/* Called with the lock held: the thread is idle. */
static int start_locked(kiln_loader *l, const kiln_reader_shard *s, size_t id)
{
	if (l->sync) { /* loaded by the take */
		l->shard = *s;
		l->id = id;
		l->held = true;
		l->busy = false;
		l->rc = 1;
		return 0;
	}
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

int kiln_loader_take(kiln_loader *l, const kiln_reader_shard *s, size_t id, kiln_buf *text, kiln_buf *ends,
                     size_t *lines)
{
	kiln_buf t;
	int rc;

	if ((rc = kiln_loader_start(l, s, id)) < 0)
		return rc;
	pthread_mutex_lock(&l->lock);
	while (l->busy)
		pthread_cond_wait(&l->cond, &l->lock);
	if (l->sync && l->rc == 1) { /* not loaded yet: here, in the caller's thread */
		l->rc = load(l);
		kiln_buf_reset(&l->z);
		if (l->rc < 0) {
			snprintf(l->err, sizeof(l->err), "%s", kiln_error_last());
			kiln_buf_free(&l->text);
			kiln_buf_free(&l->ends);
		}
	}
	l->held = false; /* taken: a later take of this id loads it again */
	if ((rc = l->rc) < 0) {
		kiln_error_set(rc, "%s", l->err);
	} else {
		t = *text;
		*text = l->text;
		l->text = t;
		kiln_buf_reset(&l->text);
		t = *ends;
		*ends = l->ends;
		l->ends = t;
		kiln_buf_reset(&l->ends);
		*lines = count_lines(text, ends);
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}
