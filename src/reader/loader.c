/* The cursor's read-ahead thread (see loader.h). One job at a time: the
 * shard `id` is fetched into memory (kiln_shard_fetch checks its hash and
 * size), then decompressed into `text`, sized from the manifest's raw bytes.
 * Nothing of a shard reaches the caller unless its bytes are verified. */
#include "reader/loader.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

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
	ZSTD_DCtx *dctx;
};

/* Decompresses z into text (all frames; a truncated one is an error). */
static int inflate(kiln_loader *l)
{
	ZSTD_inBuffer in = {l->z.ptr, l->z.len, 0};
	size_t last = 0;
	int rc;

	kiln_buf_reset(&l->text);
	if ((rc = kiln_buf_reserve(&l->text, l->shard.raw_bytes ? l->shard.raw_bytes + 1 : l->z.len * 4)) < 0)
		return rc;
	if (l->shard.raw_bytes) { /* the manifest's size: all frames at once, straight into text */
		size_t n = ZSTD_decompressDCtx(l->dctx, l->text.ptr, l->text.cap, l->z.ptr, l->z.len);

		if (!ZSTD_isError(n)) {
			l->text.len = n;
			return 0;
		}
		if (ZSTD_getErrorCode(n) != ZSTD_error_dstSize_tooSmall)
			return kiln_error_set(KILN_EINVALID, "shard %s: zstd: %s", l->shard.hash,
			                      ZSTD_getErrorName(n));
		/* more text than the manifest says: streamed below, the frames decide */
	}
	ZSTD_DCtx_reset(l->dctx, ZSTD_reset_session_only);
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

int kiln_loader_take(kiln_loader *l, const kiln_reader_shard *s, size_t id, kiln_buf *text)
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
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}
