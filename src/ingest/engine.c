/* The run engine (see engine.h): a streaming row's loop, the snapshot
 * policy (records, seconds, on request, on the drain), the commit fenced on
 * the row's positions, backoff and the drain. The calling thread polls the
 * row (its callbacks, Kafka's rebalances, run inside the poll), consumes
 * the pool and commits; any failure abandons everything since the last
 * commit and the row seeks back to it: nothing lost, nothing twice. */
#include "ingest/engine.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/notify.h"
#include "ingest/engine_internal.h"

bool kiln_engine_streams(const kiln_pipeline *p)
{
	return p->source && p->source->stream;
}

bool kiln_engine_stops_at_end(const kiln_pipeline *p)
{
	return kiln_engine_streams(p) && p->source->stream->at_end;
}

void kiln_engine_fatal(kiln_engine *e, int rc, const char *fmt, ...)
{
	va_list ap;

	if (e->fatal)
		return;
	e->fatal = rc;
	va_start(ap, fmt);
	vsnprintf(e->fatal_msg, sizeof(e->fatal_msg), fmt, ap);
	va_end(ap);
}

/* ---- consuming curated batches (the pool's callback) ---------------------- */

static int consume(void *ctx, kiln_batch *b)
{
	kiln_engine *e = ctx;
	int rc;

	if ((rc = kiln_sink_dedup(&e->sink, b)) < 0)
		return rc;
	if (e->source->prepare)
		e->source->prepare(e->src, b);
	if ((rc = kiln_sink_deliver(&e->sink, b)) < 0)
		return rc;
	for (size_t i = 0; i < b->reject_count; i++)
		kiln_counter_add(e->mx.quarantined[b->rejects[i].report.v[0].code], 1);
	if ((rc = e->source->stream->delivered(e->src, e, b)) < 0)
		return rc;
	e->pending += b->count;
	kiln_counter_add(e->mx.in, b->count);
	kiln_counter_add(e->mx.valid, b->count - b->reject_count);
	kiln_counter_add(e->mx.bytes, b->bytes);
	kiln_histogram_observe(e->mx.batch_seconds, (double)(now_ms() - b->opened_ms) / 1000.0);
	return 0;
}

/* ---- abandoning ----------------------------------------------------------- */

int kiln_engine_abandon(kiln_engine *e, const char *why)
{
	int rc;

	kiln_counter_add(e->mx.abandoned, 1);
	KILN_LOG(KILN_LOG_WARN, "abandoned", why, KILN_F_INT("records", e->pending));
	kiln_curate_pool_abandon(e->sink.pool);
	memset(&e->delta, 0, sizeof(e->delta));
	e->pending = 0;
	e->last_snapshot_ms = now_ms();
	if ((rc = kiln_sink_renew(&e->sink)) < 0)
		return rc;
	return e->source->stream->abandon(e->src, e);
}

int kiln_engine_failed(kiln_engine *e, const char *event, const char *why, int64_t retry_ms)
{
	snprintf(e->failing, sizeof(e->failing), "%s", kiln_error_last());
	if (retry_ms >= 0)
		KILN_LOG(KILN_LOG_WARN, event, e->failing, KILN_F_INT("retry_ms", retry_ms));
	else
		KILN_LOG(KILN_LOG_WARN, event, e->failing);
	return kiln_engine_abandon(e, why);
}

/* ---- snapshots ------------------------------------------------------------ */

int kiln_engine_land(kiln_sink *sink, kiln_snapshot *snap)
{
	int rc;

	if ((rc = kiln_sink_finish_shards(sink)) < 0 || (rc = kiln_sink_flush_quarantine(sink)) < 0)
		return rc;
	return (int)kiln_sink_shards(sink, snap);
}

/* Adds a snapshot's delta to the run's totals. */
static void add_delta(kiln_run_result *o, const kiln_stats *d)
{
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
}

int kiln_engine_snapshot(kiln_engine *e, const char *why)
{
	const kiln_source_stream *s = e->source->stream;
	kiln_snapshot snap = {0};
	kiln_lineage_entry *lineage = NULL;
	kiln_stats *d = &e->delta;
	size_t n = 0, shards = 0;
	int64_t started = now_ms();
	char commit[41] = "";
	int rc;

	if ((rc = s->flush(e->src, e)) < 0 || (rc = kiln_curate_pool_drain(e->sink.pool)) < 0)
		return rc;
	e->last_snapshot_ms = now_ms();
	if ((rc = s->positions(e->src, e, &lineage, &n)) < 0)
		return rc;
	if (n == 0) {
		free(lineage);
		return 0;
	}
	if ((rc = kiln_engine_land(&e->sink, &snap)) < 0)
		goto done;
	shards = (size_t)rc;
	if (s->seal && (rc = s->seal(e->src, e)) < 0)
		goto done;
	snap.lineage = lineage;
	snap.lineage_count = n;
	/* another member moving the branch or holding its lock is retried in
	 * there, on the new tip, where the fence is checked again */
	uint64_t retries_before = e->setup.commit_retries, compactions_before = e->setup.compactions;
	rc = kiln_run_setup_commit(&e->setup, &snap, commit);
	kiln_counter_add(e->mx.commit_retries, e->setup.commit_retries - retries_before);
	kiln_counter_add(e->mx.compactions, e->setup.compactions - compactions_before);
	kiln_gauge_set(e->mx.loose_objects, (double)e->setup.loose_objects);
	if (rc < 0)
		goto done;

	/* on the branch: the row moves on (e->out->commit is the commit) */
	memcpy(e->out->commit, commit, sizeof(commit));
	s->committed(e->src, e, lineage, n);
	add_delta(e->out, d);
	e->out->shards += shards;
	e->out->quarantine_objects += kiln_quarantine_objects(e->sink.quarantine);
	kiln_counter_add(e->mx.commits, 1);
	kiln_histogram_observe(e->mx.snapshot_seconds, (double)(now_ms() - started) / 1000.0);
	kiln_engine_metrics_update_drift(e);
	if (e->o->committed)
		e->o->committed(e->o->hook_ctx, commit, d, shards, lineage, n);
	kiln_notifyf("STATUS=consuming: snapshot %.12s committed %llu record(s) (%s)", commit,
	             (unsigned long long)d->records_in, why);
	KILN_LOG(KILN_LOG_INFO, "snapshot", why, KILN_F_STR("commit", commit),
	         KILN_F_INT("records", d->records_in), KILN_F_INT("valid", d->valid),
	         KILN_F_INT("quarantined", d->quarantined), KILN_F_INT("shards", shards),
	         KILN_F_INT("partitions", n));
	memset(d, 0, sizeof(*d));
	e->pending = 0;
	e->failing[0] = '\0';
	rc = kiln_sink_renew(&e->sink);
	if (rc == 0)
		rc = 1;
done:
	if (rc < 0)
		kiln_counter_add(e->mx.commit_failures, 1);
	if (s->tick)
		s->tick(e->src, e);
	free(lineage);
	return rc;
}

/* ---- the loop ------------------------------------------------------------- */

/* Waits backoff_ms, heartbeating, unless a stop is asked for. */
static void back_off(kiln_engine *e, int64_t backoff_ms)
{
	for (int64_t t = 0; t < backoff_ms && !*e->o->stop; t += 100) {
		e->heartbeat_ms = now_ms();
		usleep(100000);
	}
}

const kiln_retry_policy kiln_engine_retry = {.first_us = 500000, .max_us = 30000000};

/* The last snapshot (--stop-at-end) failed with rc: the run ends with it,
 * what was read since the last commit dropped (the drain finds nothing). */
static int last_failed(kiln_engine *e, int rc)
{
	char why[512];

	snprintf(why, sizeof(why), "%s", kiln_error_last());
	KILN_LOG(KILN_LOG_ERROR, "snapshot_failed", why);
	(void)kiln_engine_abandon(e, "the last snapshot failed");
	return kiln_error_set(rc, "%s", why);
}

static int loop(kiln_engine *e)
{
	const kiln_source_stream *s = e->source->stream;
	int64_t backoff_ms;
	unsigned failures = 0; /* in a row: until a snapshot lands */
	int rc;

	e->started_ms = now_ms();
	e->last_snapshot_ms = e->started_ms;
	while (!*e->o->stop && !e->fatal) {
		uint64_t ticket = 0;
		bool asked =
		    kiln_engine_snapshot_requested(e, &ticket) || (e->o->snapshot && *e->o->snapshot);
		int64_t now = now_ms();
		bool waiting = e->pending || (s->moves_pending && s->moves_pending(e->src));
		bool due = (e->snapshot_records && e->pending >= e->snapshot_records) ||
		           (e->snapshot_seconds && waiting &&
		            now - e->last_snapshot_ms >= (int64_t)e->snapshot_seconds * 1000);

		e->heartbeat_ms = now; /* the watchdog thread kicks while this moves */
		if (e->o->reload && *e->o->reload) {
			*e->o->reload = 0;
			kiln_engine_reload(e);
		}
		if (asked || due) {
			if (e->o->snapshot)
				*e->o->snapshot = 0;
			rc = kiln_engine_snapshot(e, asked ? "requested" : "policy");
			if (rc < 0 && (rc == KILN_EINVALID || rc == KILN_ENOMEM))
				return rc;
			if (ticket)
				kiln_engine_snapshot_answered(e, ticket, rc);
			if (rc < 0) {
				backoff_ms =
				    (int64_t)(kiln_retry_delay_us(&kiln_engine_retry, ++failures, 0) / 1000);
				if ((rc = kiln_engine_failed(
				         e, "snapshot_failed",
				         "the snapshot failed; reading again from the last commit",
				         backoff_ms)) < 0)
					return rc;
				back_off(e, backoff_ms);
				continue;
			}
			failures = 0;
		}
		/* what has arrived, then the periodic work */
		if ((rc = s->poll(e->src, e, 20)) < 0 || (rc = kiln_curate_pool_poll(e->sink.pool)) < 0)
			goto fail;
		if (e->o->stop_at_end && s->at_end && s->at_end(e->src, e)) {
			/* the last snapshot; one another writer fenced (it committed
			 * some of it first) is read again from the new tip */
			if ((rc = kiln_engine_snapshot(e, "finished")) >= 0) {
				e->finished = true;
				return 0;
			}
			if (rc != KILN_EFENCED)
				return last_failed(e, rc);
			backoff_ms = (int64_t)(kiln_retry_delay_us(&kiln_engine_retry, ++failures, 0) / 1000);
			if ((rc = kiln_engine_failed(
			         e, "snapshot_failed",
			         "the snapshot was fenced; reading again from the new tip", backoff_ms)) < 0)
				return rc;
			back_off(e, backoff_ms);
			continue;
		}
		if (s->tick && now / 1000 != now_ms() / 1000)
			s->tick(e->src, e);
		continue;
	fail:
		if (rc == KILN_EINVALID || rc == KILN_ENOMEM)
			return rc;
		backoff_ms = (int64_t)(kiln_retry_delay_us(&kiln_engine_retry, ++failures, 0) / 1000);
		if ((rc = kiln_engine_failed(
		         e, "batch_failed", "a batch could not be landed; reading again from the last commit",
		         backoff_ms)) < 0)
			return rc;
		back_off(e, backoff_ms);
	}
	return 0;
}

/* The drain: commit what was consumed, then the row leaves. */
static int drain(kiln_engine *e, struct kiln_engine_watchdog *dog, int rc)
{
	uint64_t ticket;
	int final;

	kiln_notify("STOPPING=1\nSTATUS=draining: committing the last snapshot");
	dog->draining = true;
	e->drain_until_ms = kiln_engine_watchdog_deadline(dog);
	final = e->finished ? 0 : kiln_engine_snapshot(e, *e->o->stop ? "stopping" : "finished");
	if (final < 0) {
		KILN_LOG(KILN_LOG_ERROR, "snapshot_failed", kiln_error_last());
		if (rc == 0)
			rc = final;
	}
	if (kiln_engine_snapshot_requested(e,
	                                   &ticket)) /* asked for during the loop's last turn or the drain */
		kiln_engine_snapshot_answered(e, ticket, final);
	kiln_gauge_set(e->mx.up, 0);
	if (e->source->stream->stop)
		e->source->stream->stop(e->src, e);
	if (e->fatal && rc == 0)
		rc = kiln_error_set(e->fatal, "%s", e->fatal_msg);
	KILN_LOG(KILN_LOG_INFO, "stopped", rc < 0 ? kiln_error_last() : NULL,
	         KILN_F_INT("records", e->out->delta.records_in), KILN_F_STR("commit", e->out->commit));
	return rc;
}

static int run_stream(const kiln_source *source, const kiln_pipeline *p, const kiln_engine_options *o,
                      kiln_run_result *out)
{
	kiln_engine *e = calloc(1, sizeof(*e));
	static volatile sig_atomic_t never;
	kiln_engine_options opts = *o;
	struct kiln_engine_watchdog dog = {.seconds = p->drain_seconds, .deadline_ms = -1};
	pthread_t dog_thread;
	bool dog_started = false;
	int rc;

	if (!e)
		return kiln_error_oom(NULL);
	if (!opts.stop)
		opts.stop = &never;
	e->p = p;
	e->o = &opts;
	e->source = source;
	e->out = out;
	dog.stop = opts.stop;
	e->heartbeat_ms = now_ms();
	dog.heartbeat_ms = &e->heartbeat_ms;
	kiln_notify_watchdog_init(&dog.notify);
	dog_started = pthread_create(&dog_thread, NULL, kiln_engine_watchdog, &dog) == 0;
	pthread_mutex_init(&e->req_lock, NULL);
	pthread_cond_init(&e->req_cond, NULL);
	e->snapshot_records = p->snapshot_records;
	e->snapshot_seconds = p->snapshot_seconds;
	e->drain = &dog;
	kiln_sink_options sopt = {.delta = &e->delta, .consume = consume, .ctx = e, .raw_zone = p->raw_zone};
	if ((rc = kiln_engine_metrics_new(&e->mx)) < 0 ||
	    (rc = source->stream->open(&e->src, e, e->mx.m)) < 0 ||
	    (opts.metrics && (rc = opts.metrics(opts.hook_ctx, e->mx.m)) < 0) ||
	    (rc = kiln_engine_metrics_finish(&e->mx, opts.build_info)) < 0 ||
	    (rc = kiln_run_setup_open(&e->setup, p)) < 0 ||
	    (rc = kiln_sink_open(&e->sink, &e->setup, &sopt)) < 0 || (rc = kiln_engine_http_start(e)) < 0 ||
	    (rc = source->stream->start(e->src, e)) < 0)
		goto cleanup;
	kiln_gauge_set(e->mx.up, 1);
	rc = drain(e, &dog, loop(e));

cleanup:
	kiln_engine_http_stop(e);
	if (e->sink.pool)
		kiln_curate_pool_abandon(e->sink.pool);
	source->stream->close(e->src, e);
	kiln_sink_close(&e->sink);
	kiln_run_setup_close(&e->setup);
	kiln_metrics_free(e->mx.m);
	kiln_pipeline_free(e->reloaded);
	pthread_mutex_destroy(&e->req_lock);
	pthread_cond_destroy(&e->req_cond);
	free(e);
	if (dog_started) {
		dog.done = true;
		pthread_join(dog_thread, NULL);
	}
	return rc;
}

int kiln_engine_run(const kiln_pipeline *p, const kiln_engine_options *o, kiln_run_result *out)
{
	assert(p->source && p->source->version == KILN_SOURCE_VERSION);
	memset(out, 0, sizeof(*out));
	if (!p->source->stream)
		return kiln_curate_run(p, o->progress, out);
	return run_stream(p->source, p, o, out);
}
