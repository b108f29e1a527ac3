/* The Kafka source (see kafka_run.h).
 *
 * Threads: the calling thread polls the consumer, fills one open batch per
 * partition with borrowed messages (rd_kafka_message_destroy when the batch
 * has been consumed into spooled shards and quarantine), submits batches to
 * the curate pool, consumes its results, and commits snapshots; librdkafka's
 * rebalance callback runs on it too, inside rd_kafka_consumer_poll. The HTTP
 * server's threads only read metrics and ask for snapshots.
 *
 * Per partition: `committed` is lineage.json's next at the branch tip as
 * this run last saw it (-1: no entry); `consumed` is the offset after the
 * last record handed to the shard writers (-1: none since the last
 * snapshot); `position` is the next offset expected from the broker (older
 * ones are stale and dropped). A snapshot commits every partition with
 * consumed >= 0 (or a skipped gap), fenced on committed. Any failure
 * abandons everything since the last snapshot and seeks every owned
 * partition back to committed, so nothing is lost and nothing is
 * committed twice. */
#include "ingest/kafka_run.h"

#include <errno.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/http_server.h"
#include "core/log.h"
#include "core/metrics.h"
#include "ingest/curate_pool.h"
#include "ingest/run_setup.h"
#include "manifest/remote.h"
#include "manifest/version.h"
#include "shard/quarantine.h"
#include "shard/writer.h"

struct part {
	char *topic;
	int32_t partition;
	bool assigned, eof;
	int64_t committed, consumed, position;
	uint64_t gaps, skipped; /* lineage's, plus ours */
	bool move_pending;      /* lineage moves without records (a skipped gap, a start at the end) */
	int64_t start_at;       /* start: latest, no lineage: the end when first assigned (-1: not yet) */
	kiln_batch *open;
	kiln_gauge *lag;
};

struct metrics {
	kiln_metrics *m;
	kiln_counter *in, *valid, *bytes, *commits, *commit_failures, *commit_retries, *gaps, *gap_offsets, *dead_letters,
		*rebalances, *abandoned;
	kiln_counter *quarantined[KILN_REJECT_COUNT_];
	kiln_histogram *batch_seconds, *snapshot_seconds;
	kiln_gauge *partitions, *up;
};

struct krun {
	const kiln_pipeline *p;
	const kiln_kafka_run_options *o;
	kiln_run_setup setup;
	rd_kafka_t *rk, *dlq;
	kiln_curate_pool *pool;
	kiln_shard_writer *writers[KILN_SPLIT_COUNT];
	kiln_quarantine *quarantine;
	struct part **parts;
	size_t nparts, parts_cap;
	kiln_stats delta; /* since the last snapshot */
	uint64_t pending;  /* records consumed since the last snapshot */
	int64_t last_snapshot_ms;
	int64_t drain_until_ms; /* when the watchdog ends the drain (0: not draining) */
	int fatal;           /* a gap under on_gap: stop, or another reason to end the run */
	bool ever_assigned;  /* the group gave this member an assignment (even an empty one) */
	bool reached;        /* a broker answered (metadata or an assignment) */
	char fatal_msg[512];
	char failing[512];   /* why the last snapshot or batch failed, until a commit ("": none) */
	struct watermarks *wm_stuck; /* a watermark query that outlived its wait, or NULL */
	_Atomic int dlq_failed;
	kiln_run_result *out;
	struct metrics mx;
	kiln_http_server *http;
	/* snapshot requests from the HTTP threads */
	pthread_mutex_t req_lock;
	pthread_cond_t req_cond;
	uint64_t req_asked, req_done;
	char req_commit[41];
	int req_rc;
	char req_error[512];
	_Atomic int64_t heartbeat_ms;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- partitions ----------------------------------------------------------- */

static struct part *part_find(struct krun *r, const char *topic, int32_t partition)
{
	for (size_t i = 0; i < r->nparts; i++)
		if (r->parts[i]->partition == partition && strcmp(r->parts[i]->topic, topic) == 0)
			return r->parts[i];
	return NULL;
}

static struct part *part_get(struct krun *r, const char *topic, int32_t partition)
{
	struct part *pt = part_find(r, topic, partition);
	kiln_buf labels = KILN_BUF_INIT(0);

	if (pt)
		return pt;
	if (r->nparts == r->parts_cap) {
		size_t cap = r->parts_cap ? r->parts_cap * 2 : 16;
		struct part **v = realloc(r->parts, cap * sizeof(*v));
		if (!v)
			return NULL;
		r->parts = v;
		r->parts_cap = cap;
	}
	if (!(pt = calloc(1, sizeof(*pt))) || !(pt->topic = strdup(topic))) {
		free(pt);
		return NULL;
	}
	pt->partition = partition;
	pt->committed = pt->consumed = pt->position = pt->start_at = -1;
	kiln_buf_puts(&labels, "topic=");
	kiln_metrics_label_value(&labels, topic);
	kiln_buf_printf(&labels, ",partition=\"%" PRId32 "\"", partition);
	kiln_buf_putc(&labels, '\0');
	if (labels.ptr)
		pt->lag = kiln_metrics_gauge(r->mx.m, "kiln_consumer_lag",
					     "Records in the partition not yet consumed (high watermark - position)",
					     labels.ptr);
	kiln_buf_free(&labels);
	r->parts[r->nparts++] = pt;
	return pt;
}

struct lineage_seen {
	struct krun *r;
	const rd_kafka_topic_partition_list_t *only; /* NULL: every known partition */
};

static bool listed(const rd_kafka_topic_partition_list_t *list, const struct part *pt)
{
	for (int i = 0; list && i < list->cnt; i++)
		if (list->elems[i].partition == pt->partition && strcmp(list->elems[i].topic, pt->topic) == 0)
			return true;
	return false;
}

static int note_lineage(void *ctx, const kiln_lineage_entry *e)
{
	struct lineage_seen *s = ctx;
	struct part *pt = part_find(s->r, e->topic, e->partition);

	if (pt && (!s->only || listed(s->only, pt))) {
		pt->committed = e->next;
		pt->gaps = e->gaps;
		pt->skipped = e->skipped;
	}
	return 0;
}

/* committed := lineage.json at the branch tip, for the partitions listed
 * (NULL: every known one). */
static int read_lineage(struct krun *r, const rd_kafka_topic_partition_list_t *only)
{
	struct lineage_seen s = { r, only };

	for (size_t i = 0; i < r->nparts; i++)
		if (!only || listed(only, r->parts[i])) {
			r->parts[i]->committed = -1;
			r->parts[i]->gaps = r->parts[i]->skipped = 0;
		}
	return kiln_manifest_lineage(r->setup.manifest, r->p->dataset, r->p->branch, note_lineage, &s);
}

/* ---- what a snapshot holds ------------------------------------------------ */

static void writers_free(struct krun *r)
{
	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		kiln_shard_writer_free(r->writers[i]);
		r->writers[i] = NULL;
	}
	kiln_quarantine_free(r->quarantine);
	r->quarantine = NULL;
}

static int writers_new(struct krun *r)
{
	const kiln_pipeline *p = r->p;
	kiln_shard_writer_options wopt = { .target_bytes = p->target_bytes, .level = p->zstd_level, .background = true };
	int rc;

	writers_free(r);
	if ((rc = kiln_quarantine_new(&r->quarantine, r->setup.store, p->dataset, p->branch,
				       p->target_bytes, p->zstd_level, NULL)) < 0)
		return rc;
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		if ((rc = kiln_shard_writer_new(&r->writers[i], r->setup.store, &wopt)) < 0)
			return rc;
	return 0;
}

/* ---- the dead-letter topic ------------------------------------------------ */

static void dlq_delivered(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct krun *r = opaque;
	static kiln_log_limiter lim;
	uint64_t suppressed;

	(void)rk;
	if (!m->err)
		return;
	r->dlq_failed = 1;
	if (kiln_log_limiter_allow(&lim, 10, &suppressed))
		KILN_LOG(KILN_LOG_WARN, "dead_letter_error", rd_kafka_err2str(m->err),
			 KILN_F_STR("topic", r->p->dead_letter_topic), KILN_F_INT("suppressed", suppressed));
}

/* The original record, its key and headers, plus kiln.* reason headers. */
static int dead_letter(struct krun *r, const kiln_batch *b, const kiln_batch_reject *x)
{
	const rd_kafka_message_t *m = b->borrowed[x->index];
	rd_kafka_headers_t *orig = NULL, *h;
	char num[32];
	rd_kafka_resp_err_t err;

	if (rd_kafka_message_headers(m, &orig) == RD_KAFKA_RESP_ERR_NO_ERROR && orig)
		h = rd_kafka_headers_copy(orig);
	else
		h = rd_kafka_headers_new(6);
	const kiln_violation *v = &x->report.v[0];
	rd_kafka_header_add(h, "kiln.reason", -1, kiln_reject_name(v->code), -1);
	rd_kafka_header_add(h, "kiln.path", -1, v->path, -1);
	rd_kafka_header_add(h, "kiln.source.topic", -1, b->topic, -1);
	snprintf(num, sizeof(num), "%" PRId32, b->partition);
	rd_kafka_header_add(h, "kiln.source.partition", -1, num, -1);
	snprintf(num, sizeof(num), "%" PRId64, b->offset[x->index]);
	rd_kafka_header_add(h, "kiln.source.offset", -1, num, -1);
	for (;;) {
		err = rd_kafka_producev(r->dlq, RD_KAFKA_V_TOPIC(r->p->dead_letter_topic),
					RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
					RD_KAFKA_V_VALUE(m->payload, m->len), RD_KAFKA_V_KEY(m->key, m->key_len),
					RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
		if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
			break;
		rd_kafka_poll(r->dlq, 100);
	}
	if (err) {
		rd_kafka_headers_destroy(h);
		return kiln_error_set(KILN_ERETRY, "%s: dead-letter topic %s: %s", r->p->brokers,
				      r->p->dead_letter_topic, rd_kafka_err2str(err));
	}
	kiln_counter_add(r->mx.dead_letters, 1);
	return 0;
}

/* ---- consuming curated batches (the pool's callback) ---------------------- */

static int consume(void *ctx, kiln_batch *b)
{
	struct krun *r = ctx;
	struct part *pt = b->source_ctx;
	int rc;

	/* a tombstone (null value) was validated as no bytes; its quarantine
	 * line says null, an empty value "" */
	for (size_t i = 0; i < b->reject_count; i++)
		if (!((const rd_kafka_message_t *)b->borrowed[b->rejects[i].index])->payload)
			b->rec[b->rejects[i].index] = NULL;
	if ((rc = kiln_batch_deliver(b, r->writers, r->quarantine, &r->delta)) < 0)
		return rc;
	for (size_t i = 0; i < b->reject_count; i++) {
		kiln_counter_add(r->mx.quarantined[b->rejects[i].report.v[0].code], 1);
		if (r->dlq && (rc = dead_letter(r, b, &b->rejects[i])) < 0)
			return rc;
	}
	r->pending += b->count;
	pt->consumed = b->offset[b->count - 1] + 1;
	kiln_counter_add(r->mx.in, b->count);
	kiln_counter_add(r->mx.valid, b->count - b->reject_count);
	kiln_counter_add(r->mx.bytes, b->bytes);
	kiln_histogram_observe(r->mx.batch_seconds, (double)(now_ms() - b->opened_ms) / 1000.0);
	return 0;
}

static void release_messages(kiln_batch *b)
{
	for (size_t i = 0; i < b->count; i++)
		rd_kafka_message_destroy(b->borrowed[i]);
}

/* ---- batches -------------------------------------------------------------- */

static int submit(struct krun *r, struct part *pt)
{
	kiln_batch *b = pt->open;
	uintptr_t base = (uintptr_t)b->in.ptr;

	pt->open = NULL;
	/* header arrays were laid out in b->in as offsets; now it stops moving */
	for (size_t i = 0; b->keep_raw && i < b->count; i++)
		if (b->raw[i].header_count)
			b->raw[i].headers = (const kiln_raw_header *)(base + (uintptr_t)b->raw[i].headers);
	return kiln_curate_pool_submit(r->pool, b);
}

/* Adds a message to its partition's open batch (taking ownership). */
static int add_message(struct krun *r, struct part *pt, rd_kafka_message_t *m)
{
	const kiln_pipeline *p = r->p;
	kiln_batch *b = pt->open;
	kiln_raw_record *raw;
	rd_kafka_headers_t *hdrs = NULL;
	rd_kafka_timestamp_type_t tstype;
	size_t i;
	int rc;

	if (!b) {
		if (!(b = kiln_curate_pool_batch(r->pool))) {
			rd_kafka_message_destroy(m);
			return kiln_error_set(KILN_ENOMEM, "out of memory");
		}
		b->topic = pt->topic;
		b->partition = pt->partition;
		b->keep_raw = p->raw_zone;
		b->release = release_messages;
		b->source_ctx = pt;
		b->opened_ms = now_ms();
		pt->open = b;
	}
	if ((rc = kiln_batch_reserve(b)) < 0 || (b->keep_raw && b->raw_cap <= b->count)) {
		rd_kafka_message_destroy(m);
		return rc < 0 ? rc : kiln_error_set(KILN_ENOMEM, "out of memory");
	}
	i = b->count++;
	b->borrowed[i] = m;
	b->offset[i] = m->offset;
	b->len[i] = m->len;
	b->too_long[i] = m->len > p->max_record_bytes;
	b->rec[i] = b->too_long[i] ? NULL : m->payload ? m->payload : "";
	b->bytes += m->len;
	if (b->keep_raw) {
		raw = &b->raw[i];
		memset(raw, 0, sizeof(*raw));
		raw->topic = pt->topic;
		raw->partition = pt->partition;
		raw->offset = m->offset;
		raw->timestamp = rd_kafka_message_timestamp(m, &tstype);
		raw->timestamp_type = tstype == RD_KAFKA_TIMESTAMP_CREATE_TIME	   ? 1
				      : tstype == RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME ? 2
										     : 0;
		raw->key = m->key;
		raw->key_len = m->key_len;
		raw->null_key = m->key == NULL;
		raw->value = m->payload;
		raw->value_len = m->len;
		raw->null_value = m->payload == NULL;
		if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR && hdrs) {
			size_t n = rd_kafka_header_cnt(hdrs);
			size_t at = (b->in.len + 7) & ~(size_t)7;
			kiln_raw_header h;

			while (b->in.len < at)
				if ((rc = kiln_buf_putc(&b->in, 0)) < 0)
					return rc;
			for (size_t k = 0; k < n; k++) {
				const char *name;
				const void *value;
				size_t size;

				rd_kafka_header_get_all(hdrs, k, &name, &value, &size);
				h = (kiln_raw_header){ .name = name, .name_len = strlen(name), .value = value,
						       .value_len = size, .null_value = value == NULL };
				if ((rc = kiln_buf_put(&b->in, (const char *)&h, sizeof(h))) < 0)
					return rc;
			}
			raw->headers = (const kiln_raw_header *)(uintptr_t)at;
			raw->header_count = n;
		}
	}
	pt->position = m->offset + 1;
	pt->eof = false;
	if (b->count >= p->batch_records || b->bytes >= p->batch_bytes)
		return submit(r, pt);
	return 0;
}

/* Submits the open batches that have waited batch_ms (all with force). */
static int submit_due(struct krun *r, bool force)
{
	int64_t now = now_ms();
	int rc;

	for (size_t i = 0; i < r->nparts; i++) {
		struct part *pt = r->parts[i];
		if (pt->open && (force || now - pt->open->opened_ms >= (int64_t)r->p->batch_ms) &&
		    (rc = submit(r, pt)) < 0)
			return rc;
	}
	return 0;
}

/* ---- seeking -------------------------------------------------------------- */

static int64_t start_offset(const struct krun *r, const struct part *pt)
{
	if (pt->committed >= 0)
		return pt->committed;
	return r->p->start_latest ? RD_KAFKA_OFFSET_END : RD_KAFKA_OFFSET_BEGINNING;
}

/* rd_kafka_query_watermark_offsets does not keep its timeout while the
 * broker is gone (librdkafka 2.0.2 waits for it to come back), and it runs
 * on the main thread, inside the rebalance callback too. So each query runs
 * on a thread of its own while the main thread waits at most WATERMARK_MS,
 * and no longer once a stop is asked for. A query still running then keeps
 * its thread (and a reference to this struct); until it ends, no other is
 * started, and at the end the consumer is left open rather than destroyed
 * under it. */
#define WATERMARK_MS 10000

struct watermarks {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	rd_kafka_t *rk;
	char *topic;
	int32_t partition;
	int64_t lo, hi;
	rd_kafka_resp_err_t err;
	bool done;
	int refs; /* the query thread's and the waiter's */
};

static void watermarks_unref(struct watermarks *w)
{
	bool last;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	last = --w->refs == 0;
	pthread_mutex_unlock(&w->lock);
	if (!last)
		return;
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w->topic);
	free(w);
}

static void *watermarks_thread(void *arg)
{
	struct watermarks *w = arg;
	int64_t lo = -1, hi = -1;
	rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(w->rk, w->topic, w->partition, &lo, &hi, WATERMARK_MS);

	pthread_mutex_lock(&w->lock);
	w->lo = lo;
	w->hi = hi;
	w->err = err;
	w->done = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	watermarks_unref(w);
	return NULL;
}

/* A stuck query that has ended since is forgotten. true: none is stuck. */
static bool watermarks_free_to_ask(struct krun *r)
{
	bool done;

	if (!r->wm_stuck)
		return true;
	pthread_mutex_lock(&r->wm_stuck->lock);
	done = r->wm_stuck->done;
	pthread_mutex_unlock(&r->wm_stuck->lock);
	if (!done)
		return false;
	watermarks_unref(r->wm_stuck);
	r->wm_stuck = NULL;
	return true;
}

/* The partition's oldest and next offsets from the broker, waiting at most
 * WATERMARK_MS (RD_KAFKA_RESP_ERR__TIMED_OUT past that, or once stopping). */
static rd_kafka_resp_err_t query_watermarks(struct krun *r, const struct part *pt, int64_t *lo, int64_t *hi)
{
	struct watermarks *w;
	pthread_t thread;
	int64_t until = now_ms() + WATERMARK_MS;
	rd_kafka_resp_err_t err;
	bool stuck;

	if (*r->o->stop || !watermarks_free_to_ask(r))
		return RD_KAFKA_RESP_ERR__TIMED_OUT;
	if (!(w = calloc(1, sizeof(*w))) || !(w->topic = strdup(pt->topic))) {
		free(w);
		return RD_KAFKA_RESP_ERR__FAIL;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->rk = r->rk;
	w->partition = pt->partition;
	w->refs = 2;
	if (pthread_create(&thread, NULL, watermarks_thread, w) != 0) {
		w->refs = 1;
		watermarks_unref(w);
		return RD_KAFKA_RESP_ERR__FAIL;
	}
	pthread_detach(thread);
	pthread_mutex_lock(&w->lock);
	while (!w->done && !*r->o->stop && now_ms() < until) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000L; /* a stop is seen within 0.1 s */
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&w->cond, &w->lock, &ts);
	}
	stuck = !w->done;
	err = stuck ? RD_KAFKA_RESP_ERR__TIMED_OUT : w->err;
	*lo = w->lo;
	*hi = w->hi;
	pthread_mutex_unlock(&w->lock);
	if (stuck)
		r->wm_stuck = w; /* our reference, until it ends */
	else
		watermarks_unref(w);
	return err;
}

/* Decides where an assigned partition resumes (pt->position; -1: its
 * beginning) from lineage and the partition's watermarks:
 *  - no lineage: the beginning, or with start: latest the end as it is now
 *    (kept across retries, and committed by the next snapshot even without
 *    records, so a restart does not jump again);
 *  - lineage older than the oldest offset: a gap, handled by on_gap (stop:
 *    the run ends; skip: resume at the oldest, the gap committed in lineage);
 *  - lineage past the end: the topic was recreated or truncated; the branch
 *    cannot follow it (the run ends, whatever on_gap says). */
static void plan_resume(struct krun *r, struct part *pt)
{
	int64_t lo = 0, hi = 0;
	rd_kafka_resp_err_t err;

	pt->move_pending = false;
	pt->position = pt->committed;
	if (pt->committed < 0 && !r->p->start_latest)
		return;
	err = query_watermarks(r, pt, &lo, &hi);
	if (err) {
		KILN_LOG(KILN_LOG_WARN, "watermarks_unknown", rd_kafka_err2str(err), KILN_F_STR("brokers", r->p->brokers),
			 KILN_F_STR("topic", pt->topic), KILN_F_INT("partition", pt->partition));
		return;
	}
	if (pt->committed < 0) {
		if (pt->start_at < 0)
			pt->start_at = hi;
		pt->position = pt->start_at;
		pt->move_pending = true;
		return;
	}
	if (pt->committed > hi) {
		KILN_LOG(KILN_LOG_ERROR, "behind_lineage", "the partition ends before the resume offset",
			 KILN_F_STR("topic", pt->topic), KILN_F_INT("partition", pt->partition),
			 KILN_F_INT("resume", pt->committed), KILN_F_INT("end", hi));
		r->fatal = KILN_EINVALID;
		snprintf(r->fatal_msg, sizeof(r->fatal_msg),
			 "%s: %s/%" PRId32 " ends at offset %" PRId64 ", before %" PRId64
			 " where lineage.json on %s/%s resumes: the topic was recreated or truncated; "
			 "curate it onto a new branch or dataset",
			 r->p->brokers, pt->topic, pt->partition, hi, pt->committed, r->p->dataset, r->p->branch);
		return;
	}
	if (pt->committed >= lo)
		return;
	kiln_counter_add(r->mx.gaps, 1);
	kiln_counter_add(r->mx.gap_offsets, (uint64_t)(lo - pt->committed));
	KILN_LOG(KILN_LOG_ERROR, "gap", "the resume offset has expired from the topic",
		 KILN_F_STR("topic", pt->topic), KILN_F_INT("partition", pt->partition),
		 KILN_F_INT("first", pt->committed), KILN_F_INT("last", lo - 1),
		 KILN_F_STR("policy", r->p->on_gap == KILN_GAP_SKIP ? "skip" : "stop"));
	if (r->p->on_gap != KILN_GAP_SKIP) {
		r->fatal = KILN_EINVALID;
		snprintf(r->fatal_msg, sizeof(r->fatal_msg),
			 "%s: %s/%" PRId32 ": offsets %" PRId64 "-%" PRId64
			 " expired before they were read (source.on_gap: stop; set skip to go on from %" PRId64
			 ", recorded in lineage.json)",
			 r->p->brokers, pt->topic, pt->partition, pt->committed, lo - 1, lo);
		return;
	}
	pt->gaps++;
	pt->skipped += (uint64_t)(lo - pt->committed);
	pt->move_pending = true;
	pt->position = lo;
}

/* Where an assigned partition resumes. */
static int64_t resume_offset(const struct krun *r, const struct part *pt)
{
	return pt->position >= 0 ? pt->position : start_offset(r, pt);
}

/* Seeks every assigned partition back to where it resumes. */
static void seek_back(struct krun *r)
{
	rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)r->nparts + 1);
	rd_kafka_error_t *error;

	for (size_t i = 0; i < r->nparts; i++) {
		struct part *pt = r->parts[i];
		if (!pt->assigned)
			continue;
		rd_kafka_topic_partition_list_add(list, pt->topic, pt->partition)->offset = resume_offset(r, pt);
		pt->eof = false;
	}
	if (list->cnt && (error = rd_kafka_seek_partitions(r->rk, list, 10000))) {
		KILN_LOG(KILN_LOG_WARN, "seek_error", rd_kafka_error_string(error));
		rd_kafka_error_destroy(error);
	}
	rd_kafka_topic_partition_list_destroy(list);
}

/* Drops everything since the last snapshot and reads it again. */
static int abandon(struct krun *r, const char *why)
{
	int rc;

	kiln_counter_add(r->mx.abandoned, 1);
	KILN_LOG(KILN_LOG_WARN, "abandoned", why, KILN_F_INT("records", r->pending));
	kiln_curate_pool_abandon(r->pool);
	for (size_t i = 0; i < r->nparts; i++) {
		kiln_curate_pool_recycle(r->pool, r->parts[i]->open);
		r->parts[i]->open = NULL;
		r->parts[i]->consumed = -1;
		r->parts[i]->move_pending = false;
	}
	memset(&r->delta, 0, sizeof(r->delta));
	r->pending = 0;
	r->last_snapshot_ms = now_ms();
	if ((rc = writers_new(r)) < 0 || (rc = read_lineage(r, NULL)) < 0)
		return rc;
	for (size_t i = 0; i < r->nparts; i++)
		if (r->parts[i]->assigned)
			plan_resume(r, r->parts[i]);
	seek_back(r);
	return 0;
}

/* ---- snapshots ------------------------------------------------------------ */

static void update_lag(struct krun *r)
{
	for (size_t i = 0; i < r->nparts; i++) {
		struct part *pt = r->parts[i];
		int64_t lo, hi;
		if (!pt->assigned || !pt->lag)
			continue;
		if (rd_kafka_get_watermark_offsets(r->rk, pt->topic, pt->partition, &lo, &hi) == 0 && hi >= 0) {
			int64_t at = pt->position >= 0 ? pt->position : pt->committed >= 0 ? pt->committed : lo;
			kiln_gauge_set(pt->lag, (double)(hi > at ? hi - at : 0));
		}
	}
}

/* Commits what was consumed since the last snapshot. 1: committed, 0:
 * nothing to commit, < 0: failed (the caller abandons). */
static int snapshot(struct krun *r, const char *why)
{
	kiln_snapshot snap = { 0 };
	kiln_lineage_entry *lineage = NULL;
	kiln_stats *d = &r->delta;
	size_t n = 0, shards = 0;
	int64_t started = now_ms();
	char commit[41] = "";
	int rc;

	if ((rc = submit_due(r, true)) < 0 || (rc = kiln_curate_pool_drain(r->pool)) < 0)
		return rc;
	r->last_snapshot_ms = now_ms();
	if (!(lineage = calloc(r->nparts ? r->nparts : 1, sizeof(*lineage))))
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	for (size_t i = 0; i < r->nparts; i++) {
		struct part *pt = r->parts[i];
		if (pt->consumed < 0 && !pt->move_pending)
			continue;
		lineage[n++] = (kiln_lineage_entry){
			.topic = pt->topic, .partition = pt->partition,
			.next = pt->consumed >= 0 ? pt->consumed : pt->position,
			.gaps = pt->gaps, .skipped = pt->skipped, .fenced = true, .expect_next = pt->committed,
		};
	}
	if (n == 0) {
		free(lineage);
		return 0;
	}
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		if ((rc = kiln_shard_writer_finish(r->writers[i])) < 0)
			goto done;
	if ((rc = kiln_quarantine_flush(r->quarantine)) < 0)
		goto done;
	if (r->dlq) {
		/* up to 30 s, less when draining: a broker that is gone must not
		 * use up drain_seconds (the snapshot then fails, nothing is lost) */
		int64_t flush_ms = 30000;
		if (r->drain_until_ms && r->drain_until_ms - now_ms() - 1000 < flush_ms)
			flush_ms = r->drain_until_ms - now_ms() - 1000;
		rd_kafka_flush(r->dlq, flush_ms > 0 ? (int)flush_ms : 0);
		if (rd_kafka_outq_len(r->dlq) > 0 || r->dlq_failed) {
			r->dlq_failed = 0;
			rc = kiln_error_set(KILN_ERETRY, "%s: dead-letter topic %s: not every record was delivered",
					    r->p->brokers, r->p->dead_letter_topic);
			goto done;
		}
	}
	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		snap.shards[i] = kiln_shard_writer_shards(r->writers[i], &snap.shard_count[i]);
		d->splits[i].shards = snap.shard_count[i];
		d->splits[i].bytes = d->splits[i].raw_bytes = 0;
		for (size_t j = 0; j < snap.shard_count[i]; j++) {
			d->splits[i].bytes += snap.shards[i][j].bytes;
			d->splits[i].raw_bytes += snap.shards[i][j].raw_bytes;
		}
		shards += snap.shard_count[i];
	}
	snap.lineage = lineage;
	snap.lineage_count = n;
	snap.delta = *d;
	/* another member moving the branch or holding its lock is retried in
	 * there, on the new tip, where the fence is checked again */
	uint64_t retries_before = r->setup.commit_retries;
	rc = kiln_run_setup_commit(&r->setup, &snap, commit);
	kiln_counter_add(r->mx.commit_retries, r->setup.commit_retries - retries_before);
	if (rc < 0)
		goto done;

	/* on the branch: move on, and tell Kafka (for lag monitoring only) */
	rd_kafka_topic_partition_list_t *offsets = rd_kafka_topic_partition_list_new((int)n);
	for (size_t i = 0; i < n; i++) {
		struct part *pt = part_find(r, lineage[i].topic, lineage[i].partition);
		pt->committed = lineage[i].next;
		pt->consumed = -1;
		pt->move_pending = false;
		if (pt->assigned)
			rd_kafka_topic_partition_list_add(offsets, pt->topic, pt->partition)->offset = pt->committed;
	}
	if (offsets->cnt)
		rd_kafka_commit(r->rk, offsets, 1);
	rd_kafka_topic_partition_list_destroy(offsets);
	kiln_run_result *o = r->out;
	o->delta.records_in += d->records_in;
	o->delta.valid += d->valid;
	o->delta.quarantined += d->quarantined;
	for (int c = 0; c < KILN_REJECT_COUNT_; c++)
		o->delta.quarantined_by_code[c] += d->quarantined_by_code[c];
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		o->delta.splits[s].records += d->splits[s].records;
		o->delta.splits[s].shards += d->splits[s].shards;
		o->delta.splits[s].bytes += d->splits[s].bytes;
		o->delta.splits[s].raw_bytes += d->splits[s].raw_bytes;
	}
	o->shards += shards;
	o->quarantine_objects += kiln_quarantine_objects(r->quarantine);
	memcpy(o->commit, commit, sizeof(commit));
	kiln_counter_add(r->mx.commits, 1);
	kiln_histogram_observe(r->mx.snapshot_seconds, (double)(now_ms() - started) / 1000.0);
	KILN_LOG(KILN_LOG_INFO, "snapshot", why, KILN_F_STR("commit", commit), KILN_F_INT("records", d->records_in),
		 KILN_F_INT("valid", d->valid), KILN_F_INT("quarantined", d->quarantined),
		 KILN_F_INT("shards", shards), KILN_F_INT("partitions", n));
	memset(d, 0, sizeof(*d));
	r->pending = 0;
	r->failing[0] = '\0';
	rc = writers_new(r);
	if (rc == 0)
		rc = 1;
done:
	if (rc < 0)
		kiln_counter_add(r->mx.commit_failures, 1);
	update_lag(r);
	free(lineage);
	return rc;
}

/* After a snapshot or a batch failed (kiln_error_last() says why): logs
 * EVENT, keeps the reason for `kiln snapshot` until the next commit, and
 * reads again from the last commit. < 0 only for a fatal error. */
static int failed(struct krun *r, const char *event, const char *why, int64_t retry_ms)
{
	snprintf(r->failing, sizeof(r->failing), "%s", kiln_error_last());
	if (retry_ms >= 0)
		KILN_LOG(KILN_LOG_WARN, event, r->failing, KILN_F_INT("retry_ms", retry_ms));
	else
		KILN_LOG(KILN_LOG_WARN, event, r->failing);
	return abandon(r, why);
}

/* ---- rebalances ----------------------------------------------------------- */

static void on_assign(struct krun *r, rd_kafka_topic_partition_list_t *list)
{
	int rc;

	for (int i = 0; i < list->cnt; i++)
		if (!part_get(r, list->elems[i].topic, list->elems[i].partition)) {
			r->fatal = KILN_ENOMEM;
			snprintf(r->fatal_msg, sizeof(r->fatal_msg), "out of memory");
		}
	/* partitions this run already owns keep their state; the lineage of
	 * new ones is read at the tip (another member may have moved them,
	 * here or, with manifest.remote, there) */
	if (r->p->manifest_remote &&
	    kiln_manifest_fetch(r->setup.manifest, r->p->manifest_remote, r->p->dataset) < 0)
		KILN_LOG(KILN_LOG_WARN, "fetch_failed", kiln_error_last());
	if ((rc = read_lineage(r, list)) < 0) {
		r->fatal = rc;
		snprintf(r->fatal_msg, sizeof(r->fatal_msg), "%s", kiln_error_last());
	}
	for (int i = 0; i < list->cnt; i++) {
		struct part *pt = part_find(r, list->elems[i].topic, list->elems[i].partition);

		if (!pt)
			continue;
		pt->assigned = true;
		pt->consumed = -1;
		pt->start_at = -1;
		pt->eof = false;
		plan_resume(r, pt);
		list->elems[i].offset = resume_offset(r, pt);
		KILN_LOG(KILN_LOG_INFO, "assigned", NULL, KILN_F_STR("topic", pt->topic),
			 KILN_F_INT("partition", pt->partition), KILN_F_INT("resume", list->elems[i].offset));
	}
	kiln_gauge_add(r->mx.partitions, list->cnt);
}

static void on_revoke(struct krun *r, rd_kafka_topic_partition_list_t *list, bool lost)
{
	int rc = 0;

	/* hand the partitions over committed: the next owner resumes where this
	 * run stopped. A lost assignment cannot be committed (another member may
	 * own it already): abandon, the fence would refuse it anyway. */
	if (!lost)
		rc = snapshot(r, "rebalance");
	for (int i = 0; i < list->cnt; i++) {
		struct part *pt = part_find(r, list->elems[i].topic, list->elems[i].partition);
		if (!pt)
			continue;
		kiln_curate_pool_recycle(r->pool, pt->open);
		pt->open = NULL;
		pt->assigned = false;
		pt->consumed = -1;
		pt->move_pending = false;
		kiln_gauge_set(pt->lag, 0); /* its new owner reports it */
		KILN_LOG(KILN_LOG_INFO, "revoked", lost ? "lost" : NULL, KILN_F_STR("topic", pt->topic),
			 KILN_F_INT("partition", pt->partition), KILN_F_INT("committed", pt->committed));
	}
	/* what is abandoned is read again only from the partitions still owned:
	 * those revoked are neither asked for watermarks nor sought (with the
	 * broker gone, the query would hold the callback) */
	if (lost)
		rc = abandon(r, "the assignment was lost");
	else if (rc < 0 && rc != KILN_EINVALID && rc != KILN_ENOMEM)
		rc = failed(r, "snapshot_failed", "the snapshot failed; reading again from the last commit", -1);
	if (rc < 0 && !r->fatal) {
		r->fatal = rc;
		snprintf(r->fatal_msg, sizeof(r->fatal_msg), "%s", kiln_error_last());
	}
	kiln_gauge_add(r->mx.partitions, -(double)list->cnt);
}

static void rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *list, void *opaque)
{
	struct krun *r = opaque;
	bool cooperative = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
	rd_kafka_error_t *error = NULL;

	kiln_counter_add(r->mx.rebalances, 1);
	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		r->ever_assigned = true;
		on_assign(r, list);
		if (cooperative)
			error = rd_kafka_incremental_assign(rk, list);
		else
			rd_kafka_assign(rk, list);
	} else {
		on_revoke(r, list, rd_kafka_assignment_lost(rk));
		if (cooperative)
			error = rd_kafka_incremental_unassign(rk, list);
		else
			rd_kafka_assign(rk, NULL);
	}
	if (error) {
		KILN_LOG(KILN_LOG_ERROR, "rebalance_error", rd_kafka_error_string(error));
		rd_kafka_error_destroy(error);
	}
}

/* Messages fetched but never polled when the consumer closes: close_consumer
 * serves the close queue with callbacks, and librdkafka aborts on a message
 * there when no consume callback is set (rd_kafka_q_serve: "res !=
 * RD_KAFKA_OP_RES_PASS", seen with the store failing and the broker gone).
 * librdkafka frees them; the next owner reads them again. */
static void drop_unread(rd_kafka_message_t *m, void *opaque)
{
	(void)m;
	(void)opaque;
}

static void kafka_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	static kiln_log_limiter lim;
	uint64_t suppressed;
	struct krun *r = opaque;

	(void)rk;
	if (kiln_log_limiter_allow(&lim, 10, &suppressed))
		KILN_LOG(err == RD_KAFKA_RESP_ERR__FATAL ? KILN_LOG_ERROR : KILN_LOG_WARN, "broker_error", reason,
			 KILN_F_STR("brokers", r->p->brokers), KILN_F_STR("code", rd_kafka_err2name(err)),
			 KILN_F_INT("suppressed", suppressed));
}

static void kafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	static kiln_log_limiter lim;
	uint64_t suppressed;

	(void)rk;
	if (level <= 4 && kiln_log_limiter_allow(&lim, 10, &suppressed))
		KILN_LOG(level <= 3 ? KILN_LOG_ERROR : KILN_LOG_WARN, "librdkafka", buf, KILN_F_STR("facility", fac),
			 KILN_F_INT("suppressed", suppressed));
}

/* ---- HTTP: /metrics, /healthz, POST /v1/snapshot --------------------------- */

static int http_metrics(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	struct krun *r = ctx;

	(void)req;
	res->content_type = "text/plain; version=0.0.4; charset=utf-8";
	return kiln_metrics_render(r->mx.m, &res->body);
}

static int http_healthz(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	struct krun *r = ctx;
	int64_t idle = now_ms() - r->heartbeat_ms;

	(void)req;
	res->content_type = "text/plain; charset=utf-8";
	if (r->fatal || idle > 60000) {
		res->status = 503;
		return kiln_buf_printf(&res->body, "unhealthy: %s\n", r->fatal ? "stopping" : "main loop stalled");
	}
	res->status = 200;
	return kiln_buf_puts(&res->body, "ok\n");
}

static int http_snapshot(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	struct krun *r = ctx;
	struct timespec until;
	uint64_t ticket;
	int rc = 0;

	(void)req;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 120;
	pthread_mutex_lock(&r->req_lock);
	ticket = ++r->req_asked;
	while (r->req_done < ticket && rc == 0)
		rc = pthread_cond_timedwait(&r->req_cond, &r->req_lock, &until);
	res->content_type = "application/json";
	if (r->req_done < ticket) {
		res->status = 504;
		kiln_buf_puts(&res->body, "{\"error\":\"the snapshot did not finish within 120 s\"}\n");
	} else if (r->req_rc < 0) {
		res->status = 500;
		kiln_buf_puts(&res->body, "{\"error\":");
		kiln_buf_put_json_string(&res->body, r->req_error, strlen(r->req_error));
		kiln_buf_puts(&res->body, "}\n");
	} else {
		res->status = 200;
		kiln_buf_printf(&res->body, "{\"commit\":\"%s\",\"dataset\":\"%s\",\"branch\":\"%s\"}\n", r->req_commit,
				r->p->dataset, r->p->branch);
	}
	pthread_mutex_unlock(&r->req_lock);
	return 0;
}

static bool snapshot_requested(struct krun *r, uint64_t *ticket)
{
	pthread_mutex_lock(&r->req_lock);
	*ticket = r->req_asked;
	pthread_mutex_unlock(&r->req_lock);
	return *ticket > r->req_done;
}

/* Answers the requests up to TICKET with what the snapshot did (RC, and
 * kiln_error_last() when it failed). Nothing new while what was read since
 * the last commit could not be committed (r->failing) is a failure too: the
 * tip is not what was asked for. */
static void snapshot_answered(struct krun *r, uint64_t ticket, int rc)
{
	kiln_version tip = { 0 };
	char spec[300], error[512] = "";

	if (rc < 0)
		snprintf(error, sizeof(error), "%s", kiln_error_last());
	else if (rc == 0 && r->failing[0]) {
		rc = KILN_ERETRY;
		snprintf(error, sizeof(error), "%s", r->failing);
	}
	/* nothing new: the answer is the branch as it is */
	snprintf(spec, sizeof(spec), "%s@%s", r->p->dataset, r->p->branch);
	if (rc >= 0 && !r->out->commit[0] && kiln_version_resolve(r->setup.manifest, spec, &tip) < 0)
		tip.commit[0] = '\0';
	pthread_mutex_lock(&r->req_lock);
	r->req_done = ticket;
	r->req_rc = rc;
	memcpy(r->req_error, error, sizeof(error));
	memcpy(r->req_commit, r->out->commit[0] ? r->out->commit : tip.commit, sizeof(r->req_commit));
	pthread_cond_broadcast(&r->req_cond);
	pthread_mutex_unlock(&r->req_lock);
}

static int metrics_new(struct metrics *mx)
{
	static const double batch_bounds[] = { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
	static const double snap_bounds[] = { 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
	int rc;

	if ((rc = kiln_metrics_new(&mx->m)) < 0)
		return rc;
	mx->in = kiln_metrics_counter(mx->m, "kiln_records_in_total", "Records consumed", NULL);
	mx->valid = kiln_metrics_counter(mx->m, "kiln_records_valid_total", "Records curated into shards", NULL);
	for (int c = 1; c < KILN_REJECT_COUNT_; c++) {
		char labels[96];
		snprintf(labels, sizeof(labels), "code=\"%s\"", kiln_reject_name((kiln_reject)c));
		mx->quarantined[c] = kiln_metrics_counter(mx->m, "kiln_records_quarantined_total",
							  "Records quarantined, by reason code", labels);
	}
	mx->bytes = kiln_metrics_counter(mx->m, "kiln_bytes_in_total", "Record bytes consumed", NULL);
	mx->batch_seconds = kiln_metrics_histogram(mx->m, "kiln_batch_seconds",
						   "From a batch's first record to its records being spooled", NULL,
						   batch_bounds, sizeof(batch_bounds) / sizeof(batch_bounds[0]));
	mx->snapshot_seconds = kiln_metrics_histogram(mx->m, "kiln_snapshot_seconds",
						      "Time to finish shards and commit a snapshot", NULL, snap_bounds,
						      sizeof(snap_bounds) / sizeof(snap_bounds[0]));
	mx->commits = kiln_metrics_counter(mx->m, "kiln_commits_total", "Snapshots committed", NULL);
	mx->commit_failures =
		kiln_metrics_counter(mx->m, "kiln_commit_failures_total", "Snapshots that failed (then read again)", NULL);
	mx->commit_retries = kiln_metrics_counter(mx->m, "kiln_commit_retries_total",
						  "Snapshot commits tried again (another member moved the branch or held its lock)",
						  NULL);
	mx->abandoned = kiln_metrics_counter(mx->m, "kiln_abandoned_total",
					     "Times the work since the last snapshot was dropped to be read again", NULL);
	mx->gaps = kiln_metrics_counter(mx->m, "kiln_gaps_total", "Resume offsets found expired from the topic", NULL);
	mx->gap_offsets = kiln_metrics_counter(mx->m, "kiln_gap_offsets_total", "Offsets in those gaps", NULL);
	mx->dead_letters = kiln_metrics_counter(mx->m, "kiln_dead_letters_total", "Records sent to the dead-letter topic", NULL);
	mx->rebalances = kiln_metrics_counter(mx->m, "kiln_rebalances_total", "Assignments and revocations", NULL);
	mx->partitions = kiln_metrics_gauge(mx->m, "kiln_partitions_assigned", "Partitions this member owns", NULL);
	mx->up = kiln_metrics_gauge(mx->m, "kiln_up", "1 while the run consumes", NULL);
	return 0;
}

/* ---- the consumer --------------------------------------------------------- */

static int kafka_set(rd_kafka_conf_t *conf, const kiln_pipeline *p, const char *name, const char *value)
{
	char err[512];

	if (rd_kafka_conf_set(conf, name, value, err, sizeof(err)) != RD_KAFKA_CONF_OK)
		return kiln_error_set(KILN_EINVALID, "%s: source.options.%s: %s", p->file, name, err);
	return 0;
}

static int kafka_conf(rd_kafka_conf_t **out, const kiln_pipeline *p, bool consumer)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	int rc;

	*out = NULL;
	if ((rc = kafka_set(conf, p, "bootstrap.servers", p->brokers)) < 0 ||
	    (rc = kafka_set(conf, p, "client.id", "kiln")) < 0)
		goto fail;
	if (consumer &&
	    ((rc = kafka_set(conf, p, "group.id", p->group)) < 0 ||
	     (rc = kafka_set(conf, p, "enable.auto.commit", "false")) < 0 ||
	     (rc = kafka_set(conf, p, "enable.auto.offset.store", "false")) < 0 ||
	     (rc = kafka_set(conf, p, "partition.assignment.strategy", "cooperative-sticky")) < 0 ||
	     (rc = kafka_set(conf, p, "auto.offset.reset", "error")) < 0 ||
	     (rc = kafka_set(conf, p, "enable.partition.eof", "true")) < 0))
		goto fail;
	if (!consumer && ((rc = kafka_set(conf, p, "enable.idempotence", "true")) < 0))
		goto fail;
	/* prefetch less than librdkafka's 64 MiB: batches hold messages (and
	 * the fetch buffers they live in) until their records are spooled */
	if (consumer && (rc = kafka_set(conf, p, "queued.max.messages.kbytes", "16384")) < 0)
		goto fail;
	for (size_t i = 0; i < p->kafka_option_count; i++) {
		/* consumer-only or producer-only properties are warnings for the other */
		char err[512];
		rd_kafka_conf_res_t res =
			rd_kafka_conf_set(conf, p->kafka_options[i].name, p->kafka_options[i].value, err, sizeof(err));
		if (res != RD_KAFKA_CONF_OK) {
			rc = kiln_error_set(KILN_EINVALID, "%s: source.options.%s: %s", p->file,
					    p->kafka_options[i].name, err);
			goto fail;
		}
	}
	*out = conf;
	return 0;
fail:
	rd_kafka_conf_destroy(conf);
	return rc;
}

static int open_kafka(struct krun *r)
{
	const kiln_pipeline *p = r->p;
	rd_kafka_conf_t *conf = NULL;
	rd_kafka_topic_partition_list_t *topics;
	rd_kafka_resp_err_t err;
	char errstr[512];
	int rc;

	if ((rc = kafka_conf(&conf, p, true)) < 0)
		return rc;
	rd_kafka_conf_set_opaque(conf, r);
	rd_kafka_conf_set_rebalance_cb(conf, rebalance);
	rd_kafka_conf_set_consume_cb(conf, drop_unread); /* only close_consumer serves with callbacks */
	rd_kafka_conf_set_error_cb(conf, kafka_error);
	rd_kafka_conf_set_log_cb(conf, kafka_log);
	if (!(r->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr)))) {
		rd_kafka_conf_destroy(conf);
		return kiln_error_set(KILN_EINVALID, "%s: %s", p->brokers, errstr);
	}
	rd_kafka_poll_set_consumer(r->rk);
	topics = rd_kafka_topic_partition_list_new((int)p->topic_count);
	for (size_t i = 0; i < p->topic_count; i++)
		rd_kafka_topic_partition_list_add(topics, p->topics[i], RD_KAFKA_PARTITION_UA);
	err = rd_kafka_subscribe(r->rk, topics);
	rd_kafka_topic_partition_list_destroy(topics);
	if (err)
		return kiln_error_set(KILN_EINVALID, "%s: subscribe: %s", p->brokers, rd_kafka_err2str(err));
	if (p->dead_letter_topic) {
		if ((rc = kafka_conf(&conf, p, false)) < 0)
			return rc;
		rd_kafka_conf_set_opaque(conf, r);
		rd_kafka_conf_set_dr_msg_cb(conf, dlq_delivered);
		rd_kafka_conf_set_error_cb(conf, kafka_error);
		rd_kafka_conf_set_log_cb(conf, kafka_log);
		if (!(r->dlq = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr)))) {
			rd_kafka_conf_destroy(conf);
			return kiln_error_set(KILN_EINVALID, "%s: %s", p->brokers, errstr);
		}
	}
	return 0;
}

/* A message or an event from the consumer. */
static int handle(struct krun *r, rd_kafka_message_t *m)
{
	const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : NULL;
	struct part *pt = topic ? part_find(r, topic, m->partition) : NULL;
	static kiln_log_limiter lim;
	uint64_t suppressed;

	if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
		if (pt)
			pt->eof = true;
		rd_kafka_message_destroy(m);
		return 0;
	}
	if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET || m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE) {
		/* the position expired while this run read the partition */
		rd_kafka_message_destroy(m);
		if (!pt)
			return 0;
		return abandon(r, "a partition's position expired from the topic");
	}
	if (m->err) {
		if (kiln_log_limiter_allow(&lim, 10, &suppressed))
			KILN_LOG(KILN_LOG_WARN, "consume_error", rd_kafka_message_errstr(m),
				 KILN_F_STR("brokers", r->p->brokers), KILN_F_STR("code", rd_kafka_err2name(m->err)),
				 KILN_F_INT("suppressed", suppressed));
		rd_kafka_message_destroy(m);
		return 0;
	}
	if (!pt || !pt->assigned || (pt->position >= 0 && m->offset < pt->position)) {
		/* stale: fetched before a seek back, or for a partition no longer owned */
		rd_kafka_message_destroy(m);
		return 0;
	}
	return add_message(r, pt, m);
}

static bool moves_pending(const struct krun *r)
{
	for (size_t i = 0; i < r->nparts; i++)
		if (r->parts[i]->assigned && r->parts[i]->move_pending)
			return true;
	return false;
}

static bool caught_up(const struct krun *r)
{
	size_t assigned = 0;

	for (size_t i = 0; i < r->nparts; i++) {
		const struct part *pt = r->parts[i];
		if (!pt->assigned)
			continue;
		if (!pt->eof || pt->open)
			return false;
		assigned++;
	}
	return assigned > 0;
}

/* Ends the process drain_seconds after a stop was asked for (a signal, or
 * the main loop ending), whatever the main thread is blocked in: nothing is
 * lost, the next run reads again what was not committed. It watches from
 * the start, so a stop that arrives while librdkafka holds the main thread
 * (a rebalance callback, a broker that is gone) is bounded too. */
struct watchdog {
	volatile sig_atomic_t *stop;
	unsigned seconds;
	_Atomic bool draining, done;
	_Atomic int64_t deadline_ms; /* -1 until a stop is seen */
};

static int64_t watchdog_deadline(struct watchdog *w)
{
	int64_t none = -1;

	atomic_compare_exchange_strong(&w->deadline_ms, &none, now_ms() + (int64_t)w->seconds * 1000);
	return w->deadline_ms;
}

static void *watchdog(void *arg)
{
	struct watchdog *w = arg;

	while (!w->done) {
		if ((*w->stop || w->draining) && now_ms() >= watchdog_deadline(w)) {
			KILN_LOG(KILN_LOG_ERROR, "drain_timeout",
				 "the last snapshot did not finish in time; exiting without it",
				 KILN_F_INT("drain_seconds", w->seconds));
			_exit(3);
		}
		usleep(50000);
	}
	return NULL;
}

/* Leaves the group within CLOSE_MS (less when the drain ends sooner). With
 * the coordinator gone, rd_kafka_consumer_close would wait for it (about
 * session.timeout.ms, longer while the broker is down): the close runs in
 * the background instead, and a consumer that has not closed by then is
 * left open, like one that never had an assignment (below). */
#define CLOSE_MS 10000

static bool close_consumer(struct krun *r, int64_t deadline)
{
	rd_kafka_queue_t *q = rd_kafka_queue_new(r->rk);
	rd_kafka_error_t *error = rd_kafka_consumer_close_queue(r->rk, q);
	int64_t until = now_ms() + CLOSE_MS;
	bool closed = false;

	if (deadline - 500 < until)
		until = deadline - 500;
	if (error) {
		KILN_LOG(KILN_LOG_WARN, "close_error", rd_kafka_error_string(error));
		rd_kafka_error_destroy(error);
	} else {
		/* serves the revocation (on_revoke) through the rebalance callback */
		while (!(closed = rd_kafka_consumer_closed(r->rk)) && now_ms() < until)
			rd_kafka_queue_poll_callback(q, 100);
	}
	rd_kafka_queue_destroy(q);
	return closed;
}

/* With --stop-at-end, true (and the run fatal) once source.connect_timeout
 * has passed since STARTED without a broker answering: no metadata (so no
 * cluster id) and no assignment. */
static bool unreachable(struct krun *r, int64_t started)
{
	char *cluster = rd_kafka_clusterid(r->rk, 0);

	if (cluster || r->ever_assigned) {
		rd_kafka_mem_free(r->rk, cluster);
		r->reached = true;
		return false;
	}
	if (now_ms() - started < (int64_t)r->p->connect_timeout * 1000)
		return false;
	r->fatal = KILN_EIO;
	snprintf(r->fatal_msg, sizeof(r->fatal_msg),
		 "%s: no broker answered within source.connect_timeout (%u s); nothing was read", r->p->brokers,
		 r->p->connect_timeout);
	return true;
}

#define POLL_RUN 1024

static int loop(struct krun *r)
{
	const kiln_pipeline *p = r->p;
	int64_t backoff_ms = 0, started = now_ms();
	int rc;

	r->last_snapshot_ms = started;
	while (!*r->o->stop && !r->fatal) {
		uint64_t ticket = 0;
		bool asked = snapshot_requested(r, &ticket) || (r->o->snapshot && *r->o->snapshot);
		int64_t now = now_ms();
		bool waiting = r->pending || moves_pending(r);
		bool due = (p->snapshot_records && r->pending >= p->snapshot_records) ||
			   (p->snapshot_seconds && waiting &&
			    now - r->last_snapshot_ms >= (int64_t)p->snapshot_seconds * 1000);

		r->heartbeat_ms = now;
		if (asked || due) {
			if (r->o->snapshot)
				*r->o->snapshot = 0;
			rc = snapshot(r, asked ? "requested" : "policy");
			if (rc < 0 && (rc == KILN_EINVALID || rc == KILN_ENOMEM))
				return rc;
			if (ticket)
				snapshot_answered(r, ticket, rc);
			if (rc < 0) {
				backoff_ms = backoff_ms ? (backoff_ms * 2 > 30000 ? 30000 : backoff_ms * 2) : 500;
				if ((rc = failed(r, "snapshot_failed", "the snapshot failed; reading again from the last commit",
						 backoff_ms)) < 0)
					return rc;
				for (int64_t t = 0; t < backoff_ms && !*r->o->stop; t += 100)
					usleep(100000);
				continue;
			}
			backoff_ms = 0;
		}
		/* what is queued now, up to POLL_RUN messages, then the periodic work */
		rd_kafka_message_t *m = rd_kafka_consumer_poll(r->rk, 20);
		for (int k = 1; m; k++) {
			if ((rc = handle(r, m)) < 0)
				goto fail;
			m = k < POLL_RUN ? rd_kafka_consumer_poll(r->rk, 0) : NULL;
		}
		if ((rc = submit_due(r, false)) < 0 || (rc = kiln_curate_pool_poll(r->pool)) < 0)
			goto fail;
		if (r->o->stop_at_end && caught_up(r))
			break; /* the last snapshot follows */
		if (r->o->stop_at_end && !r->reached && unreachable(r, started))
			break;
		if (now / 1000 != now_ms() / 1000)
			update_lag(r);
		continue;
fail:
		if (rc == KILN_EINVALID || rc == KILN_ENOMEM)
			return rc;
		backoff_ms = backoff_ms ? (backoff_ms * 2 > 30000 ? 30000 : backoff_ms * 2) : 500;
		if ((rc = failed(r, "batch_failed", "a batch could not be landed; reading again from the last commit",
				 backoff_ms)) < 0)
			return rc;
		for (int64_t t = 0; t < backoff_ms && !*r->o->stop; t += 100)
			usleep(100000);
	}
	return 0;
}

/* A consumer kiln may not close (librdkafka issue #4312, below). */
static rd_kafka_t *volatile left_open; /* volatile: the store must stay, for leak checkers */

int kiln_kafka_run(const kiln_pipeline *p, const kiln_kafka_run_options *o, kiln_run_result *out)
{
	struct krun *r = calloc(1, sizeof(*r));
	static volatile sig_atomic_t never;
	kiln_kafka_run_options opts = *o;
	struct watchdog dog = { .seconds = p->drain_seconds, .deadline_ms = -1 };
	pthread_t dog_thread;
	bool dog_started = false;
	uint64_t ticket;
	int rc, final;

	memset(out, 0, sizeof(*out));
	if (!r)
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	if (!opts.stop)
		opts.stop = &never;
	r->p = p;
	r->o = &opts;
	r->out = out;
	dog.stop = opts.stop;
	dog_started = pthread_create(&dog_thread, NULL, watchdog, &dog) == 0;
	pthread_mutex_init(&r->req_lock, NULL);
	pthread_cond_init(&r->req_cond, NULL);
	r->heartbeat_ms = now_ms();
	if ((rc = metrics_new(&r->mx)) < 0 || (rc = kiln_run_setup_open(&r->setup, p)) < 0 || (rc = writers_new(r)) < 0)
		goto cleanup;
	kiln_curate_pool_options popt = { .pipeline = p, .contract = r->setup.contract, .key = &r->setup.key,
					  .splitter = &r->setup.splitter, .split_field = r->setup.split_field,
					  .workers = kiln_curate_worker_count(p),
					  .raw_store = p->raw_zone ? r->setup.store : NULL, .consume = consume, .ctx = r };
	if ((rc = kiln_curate_pool_new(&r->pool, &popt)) < 0)
		goto cleanup;
	if (p->metrics_listen) {
		const kiln_http_route routes[] = {
			{ "GET", "/metrics", http_metrics, r },
			{ "GET", "/healthz", http_healthz, r },
			{ "POST", "/v1/snapshot", http_snapshot, r },
		};
		if ((rc = kiln_http_server_start(&r->http, p->metrics_listen, routes, 3)) < 0)
			goto cleanup;
		KILN_LOG(KILN_LOG_INFO, "listening", NULL, KILN_F_STR("listen", p->metrics_listen),
			 KILN_F_INT("port", kiln_http_server_port(r->http)));
	}
	if ((rc = open_kafka(r)) < 0)
		goto cleanup;
	kiln_gauge_set(r->mx.up, 1);
	KILN_LOG(KILN_LOG_INFO, "started", NULL, KILN_F_STR("dataset", p->dataset), KILN_F_STR("branch", p->branch),
		 KILN_F_STR("brokers", p->brokers), KILN_F_STR("group", p->group));

	rc = loop(r);

	/* the drain: commit what was consumed, then leave the group */
	dog.draining = true;
	r->drain_until_ms = watchdog_deadline(&dog);
	final = snapshot(r, *opts.stop ? "stopping" : "finished");
	if (final < 0) {
		KILN_LOG(KILN_LOG_ERROR, "snapshot_failed", kiln_error_last());
		if (rc == 0)
			rc = final;
	}
	if (snapshot_requested(r, &ticket)) /* asked for during the loop's last turn or the drain */
		snapshot_answered(r, ticket, final);
	kiln_gauge_set(r->mx.up, 0);
	/* closing the consumer revokes: nothing is pending, so nothing commits.
	 * librdkafka before 2.3 aborts closing a cooperative-sticky member that
	 * never had an assignment (librdkafka issue #4312): such a member holds
	 * nothing, so it leaves without closing (the coordinator drops it after
	 * session.timeout.ms). The same for a close the group does not answer
	 * in time, and for a consumer a watermark query still holds. */
	if (!r->ever_assigned && rd_kafka_version() < 0x020300ff) {
		KILN_LOG(KILN_LOG_INFO, "left_unclosed", "never assigned; librdkafka < 2.3 cannot close such a member");
		left_open = r->rk; /* not destroyed either, for the same reason; still reachable */
		r->rk = NULL;
	} else if (!watermarks_free_to_ask(r)) {
		KILN_LOG(KILN_LOG_INFO, "left_unclosed", "a watermark query still waits for the broker; leaving without closing");
		left_open = r->rk;
		r->rk = NULL;
	} else if (!close_consumer(r, r->drain_until_ms)) {
		KILN_LOG(KILN_LOG_INFO, "left_unclosed", "the group did not answer in time; leaving without closing");
		left_open = r->rk;
		r->rk = NULL;
	}
	if (r->fatal && rc == 0)
		rc = kiln_error_set(r->fatal, "%s", r->fatal_msg);
	KILN_LOG(KILN_LOG_INFO, "stopped", rc < 0 ? kiln_error_last() : NULL, KILN_F_INT("records", out->delta.records_in),
		 KILN_F_STR("commit", out->commit));

cleanup:
	kiln_http_server_stop(r->http);
	pthread_mutex_lock(&r->req_lock);
	if (r->req_done < r->req_asked) {
		r->req_rc = KILN_EIO;
		snprintf(r->req_error, sizeof(r->req_error), "the run stopped before the snapshot");
	}
	r->req_done = r->req_asked;
	pthread_cond_broadcast(&r->req_cond);
	pthread_mutex_unlock(&r->req_lock);
	if (r->pool)
		kiln_curate_pool_abandon(r->pool);
	for (size_t i = 0; i < r->nparts; i++) {
		if (r->pool)
			kiln_curate_pool_recycle(r->pool, r->parts[i]->open);
		free(r->parts[i]->topic);
		free(r->parts[i]);
	}
	free(r->parts);
	kiln_curate_pool_free(r->pool);
	if (r->rk)
		rd_kafka_destroy(r->rk);
	if (r->dlq) {
		rd_kafka_flush(r->dlq, 5000);
		rd_kafka_purge(r->dlq, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		rd_kafka_destroy(r->dlq);
	}
	watermarks_unref(r->wm_stuck);
	writers_free(r);
	kiln_run_setup_close(&r->setup);
	kiln_metrics_free(r->mx.m);
	pthread_mutex_destroy(&r->req_lock);
	pthread_cond_destroy(&r->req_cond);
	free(r);
	if (dog_started) {
		dog.done = true;
		pthread_join(dog_thread, NULL);
	}
	return rc;
}
