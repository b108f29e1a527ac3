/* Shard writer (see writer.h). */
#include "shard/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/array.h"
#include "core/buf.h"
#include "shard/filter.h"
#include "shard/spool.h"
#include "shard/zstd_pool.h"
#include "core/error.h"

struct range {
	char *topic;
	int32_t partition;
	int64_t first, last;
};

/* A shard: filling, or closed and on its way to the store. */
struct job {
	kiln_spool spool; /* its JSON Lines */
	uint64_t records;
	struct range *ranges;
	size_t range_count, range_cap;
	kiln_filter_set tokens; /* of its records, for its filter */
};

struct kiln_shard_writer {
	kiln_store *store;
	kiln_shard_writer_options opt;
	ZSTD_CCtx *cctx; /* with zstd threads it streams the open shard (kiln_spool_stream) */
	struct job open; /* the filling shard */
	kiln_shard_entry *closed;
	size_t closed_count, closed_cap;

	/* background mode: `flight` is being stored while busy */
	pthread_t thread;
	bool started, busy, stop;
	int error; /* the first failure of the thread, and its message */
	char error_msg[512];
	struct job flight;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* broadcast: the writer's thread, its feeder and the caller wait on it */

	/* background mode: the open shard's bytes go into its spool (and zstd)
	 * on the feeder thread, `fed` while feed_busy; the caller stages them */
	pthread_t feeder;
	bool feeding, feed_busy, feed_stop;
	int feed_error; /* the first failure of the feeder, and its message */
	char feed_msg[512];
	kiln_buf stage, fed;
	uint64_t open_bytes; /* the open shard's size, staged bytes included */
};

/* What the caller stages before the feeder takes it */
#define FEED_BYTES (1u << 20)

static void free_ranges(struct range *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(r[i].topic);
}

static void job_free(struct job *j)
{
	free_ranges(j->ranges, j->range_count);
	free(j->ranges);
	kiln_filter_set_free(&j->tokens);
	kiln_spool_close(&j->spool);
}

/* A job's spool: with zstd threads it compresses as it fills with the
 * writer's context (kiln_spool_stream), so a shard's compression overlaps
 * its filling and its records never touch the disk uncompressed; a shard
 * is sealed before it goes to the background (kiln_shard_writer_flush),
 * so the one context serves the open shard only. */
static int job_open(kiln_shard_writer *w, struct job *j)
{
	int rc;

	if ((rc = kiln_spool_open(&j->spool, w->opt.spool_dir)) < 0)
		return rc;
	if (w->opt.zstd_threads)
		kiln_spool_stream(&j->spool, w->cctx, w->opt.level);
	return 0;
}

/* Compresses and stores a closed shard and lists its entry. */
static int store_job(kiln_shard_writer *w, struct job *j)
{
	kiln_shard_entry e = {0};
	kiln_source_range *sources;
	kiln_buf filter = KILN_BUF_INIT(0);
	int rc;

	sources = calloc(j->range_count ? j->range_count : 1, sizeof(*sources));
	if (!sources)
		return kiln_error_oom(NULL);
	e.raw_bytes = j->spool.size;
	if ((rc = kiln_filter_encode(&filter, &j->tokens)) < 0 ||
	    (rc = kiln_spool_store(&j->spool, w->store, w->cctx, w->opt.level, NULL, e.hash, &e.bytes)) < 0) {
		kiln_buf_free(&filter);
		free(sources);
		return rc;
	}
	e.filter = (const unsigned char *)filter.ptr; /* now owned by the entry */
	e.filter_len = filter.len;
	if (w->opt.filter_stored)
		w->opt.filter_stored(w->opt.filter_ctx, e.filter, e.filter_len);
	for (size_t i = 0; i < j->range_count; i++) {
		sources[i] = (kiln_source_range){.topic = j->ranges[i].topic,
		                                 .partition = j->ranges[i].partition,
		                                 .first = j->ranges[i].first,
		                                 .last = j->ranges[i].last};
		j->ranges[i].topic = NULL; /* now owned by the entry */
	}
	e.records = j->records;
	e.sources = sources;
	e.source_count = j->range_count;
	pthread_mutex_lock(&w->lock);
	if (KILN_ARRAY_GROW(w->closed, w->closed_cap, w->closed_count, NULL) < 0) {
		pthread_mutex_unlock(&w->lock);
		free(sources);
		free((void *)e.filter);
		return KILN_ENOMEM;
	}
	w->closed[w->closed_count++] = e;
	pthread_mutex_unlock(&w->lock);
	j->range_count = 0;
	j->records = 0;
	kiln_filter_set_clear(&j->tokens);
	return 0;
}

static void *feeder_thread(void *arg)
{
	kiln_shard_writer *w = arg;

	pthread_setname_np(pthread_self(), "shard-feed");
	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->feed_busy && !w->feed_stop)
			pthread_cond_wait(&w->cond, &w->lock);
		if (!w->feed_busy)
			break;
		pthread_mutex_unlock(&w->lock);
		int rc = kiln_spool_write(&w->open.spool, w->fed.ptr, w->fed.len);
		pthread_mutex_lock(&w->lock);
		if (rc < 0 && !w->feed_error) {
			w->feed_error = rc;
			snprintf(w->feed_msg, sizeof(w->feed_msg), "%s", kiln_error_last());
		}
		kiln_buf_reset(&w->fed);
		w->feed_busy = false;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Waits for the feeder to be idle (lock held): 0, or its first failure. */
static int feed_idle(kiln_shard_writer *w)
{
	while (w->feed_busy)
		pthread_cond_wait(&w->cond, &w->lock);
	return w->feed_error < 0 ? kiln_error_set(w->feed_error, "%s", w->feed_msg) : 0;
}

/* Hands the staged bytes to the feeder (once it is done with the last). */
static int feed_staged(kiln_shard_writer *w)
{
	kiln_buf swap;
	int rc;

	if (w->stage.len == 0)
		return 0;
	pthread_mutex_lock(&w->lock);
	if ((rc = feed_idle(w)) == 0) {
		swap = w->fed; /* emptied by the feeder: reuse its buffer */
		w->fed = w->stage;
		w->stage = swap;
		w->feed_busy = true;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/* Appends bytes to the open shard: staged for the feeder, or (no feeder)
 * into its spool at once. */
static int open_write(kiln_shard_writer *w, const char *bytes, size_t len)
{
	int rc;

	if (!w->feeding)
		return kiln_spool_write(&w->open.spool, bytes, len);
	if ((rc = kiln_buf_put(&w->stage, bytes, len)) < 0)
		return rc;
	w->open_bytes += len;
	return w->stage.len >= FEED_BYTES ? feed_staged(w) : 0;
}

/* Hands the whole of *lines to the feeder (feeding, nothing staged): its
 * buffer is swapped with the feeder's emptied one. */
static int open_take(kiln_shard_writer *w, kiln_buf *lines)
{
	size_t len = lines->len;
	kiln_buf swap;
	int rc;

	pthread_mutex_lock(&w->lock);
	if ((rc = feed_idle(w)) == 0) {
		swap = w->fed;
		w->fed = *lines;
		*lines = swap;
		w->feed_busy = true;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	if (rc == 0)
		w->open_bytes += len;
	return rc;
}

static uint64_t open_size(const kiln_shard_writer *w)
{
	return w->feeding ? w->open_bytes : w->open.spool.size;
}

static void *writer_thread(void *arg)
{
	kiln_shard_writer *w = arg;

	pthread_setname_np(pthread_self(), "shard-w");

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->busy && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		if (!w->busy)
			break;
		pthread_mutex_unlock(&w->lock);
		int rc = store_job(w, &w->flight);
		pthread_mutex_lock(&w->lock);
		if (rc < 0 && !w->error) {
			w->error = rc;
			snprintf(w->error_msg, sizeof(w->error_msg), "%s", kiln_error_last());
		}
		w->busy = false;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int kiln_shard_writer_new(kiln_shard_writer **out, kiln_store *store, const kiln_shard_writer_options *opt)
{
	kiln_shard_writer *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w)
		return kiln_error_oom(NULL);
	if (opt)
		w->opt = *opt;
	if (!w->opt.target_bytes)
		w->opt.target_bytes = KILN_SHARD_DEFAULT_TARGET;
	if (!w->opt.level)
		w->opt.level = 3;
	w->store = store;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->open.spool.fd = w->flight.spool.fd = -1;
	int rc = 0;
	if (!(w->cctx = ZSTD_createCCtx()))
		rc = kiln_error_oom(NULL);
	else if (w->opt.zstd_threads)
		rc = kiln_zstd_multithread(w->cctx, w->opt.zstd_threads, w->opt.zstd_pool);
	if (rc == 0)
		rc = job_open(w, &w->open);
	if (rc == 0 && w->opt.background)
		rc = job_open(w, &w->flight);
	if (rc < 0) {
		kiln_shard_writer_free(w);
		return rc;
	}
	if (w->opt.background) {
		if (pthread_create(&w->thread, NULL, writer_thread, w) != 0) {
			kiln_shard_writer_free(w);
			return kiln_error_set(KILN_EIO, "cannot start a shard writer thread");
		}
		w->started = true;
		if (pthread_create(&w->feeder, NULL, feeder_thread, w) != 0) {
			kiln_shard_writer_free(w);
			return kiln_error_set(KILN_EIO, "cannot start a shard writer thread");
		}
		w->feeding = true;
	}
	*out = w;
	return 0;
}

static void stop_thread(kiln_shard_writer *w)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->lock);
	while (w->busy)
		pthread_cond_wait(&w->cond, &w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	w->started = false;
	if (!w->feeding)
		return;
	pthread_mutex_lock(&w->lock);
	while (w->feed_busy)
		pthread_cond_wait(&w->cond, &w->lock);
	w->feed_stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->feeder, NULL);
	w->feeding = false;
}

void kiln_shard_writer_free(kiln_shard_writer *w)
{
	if (!w)
		return;
	stop_thread(w);
	for (size_t i = 0; i < w->closed_count; i++) {
		for (size_t j = 0; j < w->closed[i].source_count; j++)
			free((char *)w->closed[i].sources[j].topic);
		free((void *)w->closed[i].sources);
		free((void *)w->closed[i].filter);
	}
	free(w->closed);
	job_free(&w->open);
	job_free(&w->flight);
	kiln_buf_free(&w->stage);
	kiln_buf_free(&w->fed);
	ZSTD_freeCCtx(w->cctx);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

static int note_source(struct job *j, const char *topic, int32_t partition, int64_t offset)
{
	struct range *r;

	for (size_t i = j->range_count; i > 0; i--) {
		r = &j->ranges[i - 1];
		if (r->partition == partition && strcmp(r->topic, topic) == 0) {
			if (offset < r->first)
				r->first = offset;
			if (offset > r->last)
				r->last = offset;
			return 0;
		}
	}
	if (j->range_count == j->range_cap) {
		size_t cap = j->range_cap ? j->range_cap * 2 : 4;
		r = realloc(j->ranges, cap * sizeof(*r));
		if (!r)
			return kiln_error_oom(NULL);
		j->ranges = r;
		j->range_cap = cap;
	}
	r = &j->ranges[j->range_count];
	r->topic = strdup(topic);
	if (!r->topic)
		return kiln_error_oom(NULL);
	r->partition = partition;
	r->first = r->last = offset;
	j->range_count++;
	return 0;
}

int kiln_shard_writer_append(kiln_shard_writer *w, const char *line, size_t len, const char *topic,
                             int32_t partition, int64_t offset)
{
	struct job *j = &w->open;
	int rc;

	if ((rc = note_source(j, topic, partition, offset)) < 0 ||
	    (rc = kiln_filter_scan(&j->tokens, line, len)) < 0 || (rc = open_write(w, line, len)) < 0 ||
	    (rc = open_write(w, "\n", 1)) < 0)
		return rc;
	j->records++;
	if (open_size(w) >= w->opt.target_bytes)
		return kiln_shard_writer_flush(w);
	return 0;
}

uint64_t kiln_shard_writer_room(const kiln_shard_writer *w)
{
	/* past the target only while a failed close waits for its retry */
	if (open_size(w) >= w->opt.target_bytes)
		return 1;
	return w->opt.target_bytes - open_size(w);
}

/* A run, its tokens scanned here (list NULL) or found ahead in list; take:
 * the run is all of *take, which the feeder may have. */
static int append_run(kiln_shard_writer *w, const char *lines, size_t len, size_t count, const char *topic,
                      int32_t partition, int64_t first, int64_t last, const kiln_filter_set *list,
                      size_t list_first, size_t list_n, kiln_buf *take)
{
	struct job *j = &w->open;
	int rc;

	if (count == 0)
		return 0;
	if ((rc = note_source(j, topic, partition, first)) < 0 ||
	    (rc = note_source(j, topic, partition, last)) < 0 ||
	    (rc = list ? kiln_filter_add_digests(&j->tokens, list, list_first, list_n)
	               : kiln_filter_scan(&j->tokens, lines, len)) < 0 ||
	    (rc = take && w->feeding && w->stage.len == 0 && take->max == 0 ? open_take(w, take)
	                                                                    : open_write(w, lines, len)) < 0)
		return rc;
	j->records += count;
	if (open_size(w) >= w->opt.target_bytes)
		return kiln_shard_writer_flush(w);
	return 0;
}

int kiln_shard_writer_append_run(kiln_shard_writer *w, const char *lines, size_t len, size_t count,
                                 const char *topic, int32_t partition, int64_t first, int64_t last)
{
	return append_run(w, lines, len, count, topic, partition, first, last, NULL, 0, 0, NULL);
}

int kiln_shard_writer_append_run_tokens(kiln_shard_writer *w, const char *lines, size_t len, size_t count,
                                        const char *topic, int32_t partition, int64_t first, int64_t last,
                                        const kiln_filter_set *list, size_t list_first, size_t list_n)
{
	return append_run(w, lines, len, count, topic, partition, first, last, list, list_first, list_n,
	                  NULL);
}

int kiln_shard_writer_take_run(kiln_shard_writer *w, kiln_buf *lines, size_t count, const char *topic,
                               int32_t partition, int64_t first, int64_t last, const kiln_filter_set *list,
                               size_t list_first, size_t list_n)
{
	return append_run(w, lines->ptr, lines->len, count, topic, partition, first, last, list, list_first,
	                  list_n, lines);
}

int kiln_shard_writer_flush(kiln_shard_writer *w)
{
	struct job swap;
	int rc;

	if (w->open.records == 0)
		return 0;
	if (!w->started)
		return store_job(w, &w->open); /* on failure the shard stays open: a retry can flush again */
	if (w->feeding) {
		if ((rc = feed_staged(w)) < 0)
			return rc;
		pthread_mutex_lock(&w->lock);
		rc = feed_idle(w);
		pthread_mutex_unlock(&w->lock);
		if (rc < 0)
			return rc;
	}
	if ((rc = kiln_spool_seal(&w->open.spool)) < 0)
		return rc;
	pthread_mutex_lock(&w->lock);
	while (w->busy)
		pthread_cond_wait(&w->cond, &w->lock);
	rc = w->error;
	if (rc < 0)
		kiln_error_set(rc, "%s", w->error_msg); /* the message was set on the writer's thread */
	if (rc == 0) {
		swap = w->flight; /* emptied by the thread: reuse its buffers */
		w->flight = w->open;
		w->open = swap;
		w->open_bytes = w->open.spool.size;
		w->busy = true;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int kiln_shard_writer_finish(kiln_shard_writer *w)
{
	int rc = kiln_shard_writer_flush(w);

	if (!w->started)
		return rc;
	pthread_mutex_lock(&w->lock);
	while (w->busy)
		pthread_cond_wait(&w->cond, &w->lock);
	if (!rc && w->error)
		rc = kiln_error_set(w->error, "%s", w->error_msg);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

const kiln_shard_entry *kiln_shard_writer_shards(const kiln_shard_writer *w, size_t *out_count)
{
	*out_count = w->closed_count;
	return w->closed;
}
