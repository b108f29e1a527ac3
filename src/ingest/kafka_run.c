/* The Kafka source: a streaming row of the run engine (ingest/engine.h,
 * kiln_source_kafka below; see kafka_run.h). The engine owns the snapshot
 * policy, the commit, backoff, the HTTP listener, notify, reload and the
 * drain; this row owns the consumer group, rebalances, where each
 * partition resumes (gaps, start: latest), the fenced lineage per
 * snapshot, seeking back after a failed one, dead letters and lag.
 *
 * Threads: the engine's thread polls the consumer (the row's poll), fills
 * one open batch per partition with borrowed messages
 * (rd_kafka_message_destroy when the batch has been consumed into spooled
 * shards and quarantine) and submits batches to the curate pool;
 * librdkafka's rebalance callback runs on it too, inside
 * rd_kafka_consumer_poll.
 *
 * Per partition: `committed` is lineage.json's next at the branch tip as
 * this run last saw it (-1: no entry); `consumed` is the offset after the
 * last record handed to the shard writers (-1: none since the last
 * snapshot); `position` is the next offset expected from the broker (older
 * ones are stale and dropped). A snapshot commits every partition with
 * consumed >= 0 (or a skipped gap), fenced on committed. Any failure
 * abandons everything since the last snapshot and seeks every owned
 * partition back to committed, so nothing is lost and nothing is
 * committed twice.
 *
 * The records land through the sink every source shares (ingest/sink.h);
 * the librdkafka clients, the dead-letter producer, watermark queries and
 * the row's metrics are kafka_<part>.c beside this file
 * (kafka_internal.h). */
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

#include "core/array.h"
#include "core/error.h"
#include "core/log.h"
#include "core/notify.h"
#include "ingest/kafka_internal.h"
#include "manifest/remote.h"

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
	if (KILN_ARRAY_GROW(r->parts, r->parts_cap, r->nparts, NULL) < 0)
		return NULL;
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
		pt->lag = kiln_metrics_gauge(
		    r->e->mx.m, "kiln_consumer_lag",
		    "Records in the partition not yet consumed (high watermark - position)", labels.ptr);
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
	struct part *pt = strcmp(e->source, KILN_LINEAGE_KAFKA) == 0 ? part_find(s->r, e->topic, e->partition)
	                                                             : NULL; /* a file's, say, of that name */

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
	struct lineage_seen s = {r, only};

	for (size_t i = 0; i < r->nparts; i++)
		if (!only || listed(only, r->parts[i])) {
			r->parts[i]->committed = -1;
			r->parts[i]->gaps = r->parts[i]->skipped = 0;
		}
	return kiln_manifest_lineage(r->e->setup.manifest, r->p->dataset, r->p->branch, note_lineage, &s);
}

/* ---- consuming curated batches (the engine's consume) --------------------- */

/* A tombstone (null value) was validated as no bytes; its quarantine line
 * says null, an empty value "". */
static void kafka_prepare(void *src, kiln_batch *b)
{
	(void)src;
	for (size_t i = 0; i < b->reject_count; i++)
		if (!((const rd_kafka_message_t *)b->borrowed[b->rejects[i].index])->payload)
			b->rec[b->rejects[i].index] = NULL;
}

static int kafka_delivered(void *src, kiln_engine *e, kiln_batch *b)
{
	struct krun *r = src;
	struct part *pt = b->source_ctx;

	(void)e;
	for (size_t i = 0; r->dlq && i < b->reject_count; i++) {
		int rc = kiln_kafka_dead_letter_send(r, b, &b->rejects[i]);
		if (rc < 0)
			return rc;
	}
	pt->consumed = b->offset[b->count - 1] + 1;
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
	return kiln_curate_pool_submit(r->e->sink.pool, b);
}

/* b->decode with source.format: avro (on the curate workers). */
static int decode_avro(void *ctx, const char *rec, size_t len, size_t max_out, kiln_buf *out,
                       kiln_report *report)
{
	return kiln_schema_registry_decode(ctx, rec, len, max_out, out, report);
}

int kiln_kafka_registry_open(const kiln_pipeline *p, kiln_schema_registry **out)
{
	const kiln_kafka_config *c = p->source == &kiln_source_kafka ? p->source_config : NULL;

	*out = NULL;
	return c && c->avro ? kiln_schema_registry_new(out, &c->registry) : 0;
}

void kiln_kafka_decode_batch(kiln_batch *b, kiln_schema_registry *reg)
{
	b->decode = reg ? decode_avro : NULL;
	b->decode_ctx = reg;
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
		if (!(b = kiln_curate_pool_batch(r->e->sink.pool))) {
			rd_kafka_message_destroy(m);
			return kiln_error_oom(NULL);
		}
		b->topic = pt->topic;
		b->partition = pt->partition;
		b->keep_raw = p->raw_zone;
		b->release = release_messages;
		b->source_ctx = pt;
		b->opened_ms = now_ms();
		kiln_kafka_decode_batch(b, r->registry);
		pt->open = b;
	}
	if ((rc = kiln_batch_reserve(b)) < 0 || (b->keep_raw && b->raw_cap <= b->count)) {
		rd_kafka_message_destroy(m);
		return rc < 0 ? rc : kiln_error_oom(NULL);
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
		raw->timestamp_type = tstype == RD_KAFKA_TIMESTAMP_CREATE_TIME       ? 1
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
				h = (kiln_raw_header){.name = name,
				                      .name_len = strlen(name),
				                      .value = value,
				                      .value_len = size,
				                      .null_value = value == NULL};
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

/* With --stop-at-end: a partition has been read to its end once its
 * position reaches the high watermark librdkafka holds from its last fetch
 * (no round trip to the broker), or at the end-of-partition event (an
 * empty partition, or one ending in transaction markers), which librdkafka
 * sends only after a fetch that waited fetch.wait.max.ms in vain. */
static bool at_end(const struct krun *r, const struct part *pt)
{
	int64_t lo, hi;

	if (pt->eof)
		return true;
	if (pt->position < 0 ||
	    rd_kafka_get_watermark_offsets(r->rk, pt->topic, pt->partition, &lo, &hi) != 0 || hi < 0)
		return false;
	return pt->position >= hi;
}

/* Submits the open batches that have waited batch_ms, or with --stop-at-end
 * reached their partition's end (all with force). */
static int submit_due(struct krun *r, bool force)
{
	int64_t now = now_ms();
	int rc;

	for (size_t i = 0; i < r->nparts; i++) {
		struct part *pt = r->parts[i];
		if (pt->open &&
		    (force || now - pt->open->opened_ms >= (int64_t)r->p->batch_ms ||
		     (r->e->o->stop_at_end && at_end(r, pt))) &&
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
	return r->c->start_latest ? RD_KAFKA_OFFSET_END : RD_KAFKA_OFFSET_BEGINNING;
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
	if (pt->committed < 0 && !r->c->start_latest)
		return;
	err = kiln_kafka_watermarks_query(r, pt, &lo, &hi);
	if (err) {
		KILN_LOG(KILN_LOG_WARN, "watermarks_unknown", rd_kafka_err2str(err),
		         KILN_F_STR("brokers", r->c->brokers), KILN_F_STR("topic", pt->topic),
		         KILN_F_INT("partition", pt->partition));
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
		r->e->fatal = KILN_EINVALID;
		snprintf(r->e->fatal_msg, sizeof(r->e->fatal_msg),
		         "%s: %s/%" PRId32 " ends at offset %" PRId64 ", before %" PRId64
		         " where lineage.json on %s/%s resumes: the topic was recreated or truncated; "
		         "curate it onto a new branch or dataset",
		         r->c->brokers, pt->topic, pt->partition, hi, pt->committed, r->p->dataset,
		         r->p->branch);
		return;
	}
	if (pt->committed >= lo)
		return;
	kiln_counter_add(r->mx.gaps, 1);
	kiln_counter_add(r->mx.gap_offsets, (uint64_t)(lo - pt->committed));
	KILN_LOG(KILN_LOG_ERROR, "gap", "the resume offset has expired from the topic",
	         KILN_F_STR("topic", pt->topic), KILN_F_INT("partition", pt->partition),
	         KILN_F_INT("first", pt->committed), KILN_F_INT("last", lo - 1),
	         KILN_F_STR("policy", r->c->on_gap == KILN_GAP_SKIP ? "skip" : "stop"));
	if (r->c->on_gap != KILN_GAP_SKIP) {
		r->e->fatal = KILN_EINVALID;
		snprintf(
		    r->e->fatal_msg, sizeof(r->e->fatal_msg),
		    "%s: %s/%" PRId32 ": offsets %" PRId64 "-%" PRId64
		    " expired before they were read (source.on_gap: stop; set skip to go on from %" PRId64
		    ", recorded in lineage.json)",
		    r->c->brokers, pt->topic, pt->partition, pt->committed, lo - 1, lo);
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
		rd_kafka_topic_partition_list_add(list, pt->topic, pt->partition)->offset =
		    resume_offset(r, pt);
		pt->eof = false;
	}
	if (list->cnt && (error = rd_kafka_seek_partitions(r->rk, list, 10000))) {
		KILN_LOG(KILN_LOG_WARN, "seek_error", rd_kafka_error_string(error));
		rd_kafka_error_destroy(error);
	}
	rd_kafka_topic_partition_list_destroy(list);
}

/* The engine dropped everything since the last snapshot: the open batches
 * go too, and every owned partition is read again from the last commit. */
static int kafka_abandon(void *src, kiln_engine *e)
{
	struct krun *r = src;
	int rc;

	for (size_t i = 0; i < r->nparts; i++) {
		kiln_curate_pool_recycle(e->sink.pool, r->parts[i]->open);
		r->parts[i]->open = NULL;
		r->parts[i]->consumed = -1;
		r->parts[i]->move_pending = false;
	}
	if ((rc = read_lineage(r, NULL)) < 0)
		return rc;
	for (size_t i = 0; i < r->nparts; i++)
		if (r->parts[i]->assigned)
			plan_resume(r, r->parts[i]);
	seek_back(r);
	return 0;
}

/* ---- snapshots ------------------------------------------------------------ */

/* Every open batch submitted (a snapshot drains the pool next). */
static int kafka_flush(void *src, kiln_engine *e)
{
	(void)e;
	return submit_due(src, true);
}

/* A snapshot commits every partition with consumed >= 0 (or a skipped gap,
 * a start at the end), fenced on committed. */
static int kafka_positions(void *src, kiln_engine *e, kiln_lineage_entry **out, size_t *count)
{
	struct krun *r = src;
	kiln_lineage_entry *lineage;
	size_t n = 0;

	(void)e;
	*out = NULL;
	*count = 0;
	if (!(lineage = calloc(r->nparts ? r->nparts : 1, sizeof(*lineage))))
		return kiln_error_oom(NULL);
	for (size_t i = 0; i < r->nparts; i++) {
		struct part *pt = r->parts[i];
		if (pt->consumed < 0 && !pt->move_pending)
			continue;
		lineage[n++] = (kiln_lineage_entry){
		    .source = KILN_LINEAGE_KAFKA,
		    .topic = pt->topic,
		    .partition = pt->partition,
		    .next = pt->consumed >= 0 ? pt->consumed : pt->position,
		    .gaps = pt->gaps,
		    .skipped = pt->skipped,
		    .fenced = true,
		    .expect_next = pt->committed,
		};
	}
	*out = lineage;
	*count = n;
	return 0;
}

/* Before the commit: every dead letter delivered. */
static int kafka_seal(void *src, kiln_engine *e)
{
	struct krun *r = src;

	(void)e;
	return r->dlq ? kiln_kafka_dead_letter_flush(r) : 0;
}

/* On the branch: move on, and tell Kafka (for lag monitoring only). */
static void kafka_committed(void *src, kiln_engine *e, const kiln_lineage_entry *lineage, size_t n)
{
	struct krun *r = src;
	rd_kafka_topic_partition_list_t *offsets = rd_kafka_topic_partition_list_new((int)n);

	(void)e;
	for (size_t i = 0; i < n; i++) {
		struct part *pt = part_find(r, lineage[i].topic, lineage[i].partition);
		pt->committed = lineage[i].next;
		pt->consumed = -1;
		pt->move_pending = false;
		if (pt->assigned)
			rd_kafka_topic_partition_list_add(offsets, pt->topic, pt->partition)->offset =
			    pt->committed;
	}
	if (offsets->cnt)
		rd_kafka_commit(r->rk, offsets, 1);
	rd_kafka_topic_partition_list_destroy(offsets);
}

/* ---- rebalances ----------------------------------------------------------- */

static void on_assign(struct krun *r, rd_kafka_topic_partition_list_t *list)
{
	int rc;

	for (int i = 0; i < list->cnt; i++)
		if (!part_get(r, list->elems[i].topic, list->elems[i].partition)) {
			r->e->fatal = KILN_ENOMEM;
			snprintf(r->e->fatal_msg, sizeof(r->e->fatal_msg), "out of memory");
		}
	/* partitions this run already owns keep their state; the lineage of
	 * new ones is read at the tip (another member may have moved them,
	 * here or, with manifest.remote, there) */
	if (r->p->manifest_remote &&
	    kiln_manifest_fetch(r->e->setup.manifest, r->p->manifest_remote, r->p->dataset) < 0)
		KILN_LOG(KILN_LOG_WARN, "fetch_failed", kiln_error_last());
	if ((rc = read_lineage(r, list)) < 0) {
		r->e->fatal = rc;
		snprintf(r->e->fatal_msg, sizeof(r->e->fatal_msg), "%s", kiln_error_last());
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
		rc = kiln_engine_snapshot(r->e, "rebalance");
	for (int i = 0; i < list->cnt; i++) {
		struct part *pt = part_find(r, list->elems[i].topic, list->elems[i].partition);
		if (!pt)
			continue;
		kiln_curate_pool_recycle(r->e->sink.pool, pt->open);
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
		rc = kiln_engine_abandon(r->e, "the assignment was lost");
	else if (rc < 0 && rc != KILN_EINVALID && rc != KILN_ENOMEM)
		rc = kiln_engine_failed(r->e, "snapshot_failed",
		                        "the snapshot failed; reading again from the last commit", -1);
	if (rc < 0 && !r->e->fatal) {
		r->e->fatal = rc;
		snprintf(r->e->fatal_msg, sizeof(r->e->fatal_msg), "%s", kiln_error_last());
	}
	kiln_gauge_add(r->mx.partitions, -(double)list->cnt);
}

void kiln_kafka_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *list,
                          void *opaque)
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
		/* ready once the group has given this member its share (maybe none) */
		kiln_notifyf("%sSTATUS=consuming: %d partition(s) assigned by the last rebalance",
		             r->e->ready ? "" : "READY=1\n", list->cnt);
		r->e->ready = true;
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
	if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
	    m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE) {
		/* the position expired while this run read the partition */
		rd_kafka_message_destroy(m);
		if (!pt)
			return 0;
		return kiln_engine_abandon(r->e, "a partition's position expired from the topic");
	}
	if (m->err) {
		if (kiln_log_limiter_allow(&lim, 10, &suppressed))
			KILN_LOG(KILN_LOG_WARN, "consume_error", rd_kafka_message_errstr(m),
			         KILN_F_STR("brokers", r->c->brokers),
			         KILN_F_STR("code", rd_kafka_err2name(m->err)),
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

static bool kafka_moves_pending(void *src)
{
	const struct krun *r = src;

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
		if (pt->open || !at_end(r, pt))
			return false;
		assigned++;
	}
	return assigned > 0;
}

/* With --stop-at-end: every assigned partition read to its end, or no
 * broker answered within source.connect_timeout (the run is fatal). */
static bool kafka_at_end(void *src, kiln_engine *e)
{
	struct krun *r = src;

	return caught_up(r) || (!r->reached && kiln_kafka_client_unreachable(r, e->started_ms));
}

#define POLL_RUN 1024

/* What is queued now, up to POLL_RUN messages, then the batches due. */
static int kafka_poll(void *src, kiln_engine *e, int timeout_ms)
{
	struct krun *r = src;
	rd_kafka_message_t *m = rd_kafka_consumer_poll(r->rk, timeout_ms);

	(void)e;
	for (int k = 1; m; k++) {
		int rc = handle(r, m);
		if (rc < 0)
			return rc;
		m = k < POLL_RUN ? rd_kafka_consumer_poll(r->rk, 0) : NULL;
	}
	return submit_due(r, false);
}

static void kafka_tick(void *src, kiln_engine *e)
{
	(void)e;
	kiln_kafka_metrics_update_lag(src);
}

/* ---- the row -------------------------------------------------------------- */

/* A consumer kiln may not close (librdkafka issue #4312, below). */
static rd_kafka_t *volatile left_open; /* volatile: the store must stay, for leak checkers */

static int kafka_open(void **out, kiln_engine *e, kiln_metrics *m)
{
	struct krun *r = calloc(1, sizeof(*r));

	*out = r;
	if (!r)
		return kiln_error_oom(NULL);
	r->e = e;
	r->p = e->p;
	r->c = e->p->source_config;
	int rc = kiln_kafka_registry_open(r->p, &r->registry);
	return rc < 0 ? rc : kiln_kafka_metrics_new(&r->mx, m);
}

static int kafka_start(void *src, kiln_engine *e)
{
	const kiln_pipeline *p = e->p;
	const kiln_kafka_config *c = p->source_config;
	int rc;

	if ((rc = kiln_kafka_client_open(src, kiln_kafka_rebalance)) < 0)
		return rc;
	KILN_LOG(KILN_LOG_INFO, "started", NULL, KILN_F_STR("dataset", p->dataset),
	         KILN_F_STR("branch", p->branch), KILN_F_STR("brokers", c->brokers),
	         KILN_F_STR("group", c->group));
	return 0;
}

/* After the drain's snapshot: closing the consumer revokes, but nothing is
 * pending, so nothing commits. librdkafka before 2.3 aborts closing a
 * cooperative-sticky member that never had an assignment (librdkafka issue
 * #4312): such a member holds nothing, so it leaves without closing (the
 * coordinator drops it after session.timeout.ms). The same for a close the
 * group does not answer in time, and for a consumer a watermark query
 * still holds. */
static void kafka_stop(void *src, kiln_engine *e)
{
	struct krun *r = src;

	if (!r->ever_assigned && rd_kafka_version() < 0x020300ff) {
		KILN_LOG(KILN_LOG_INFO, "left_unclosed",
		         "never assigned; librdkafka < 2.3 cannot close such a member");
		left_open = r->rk; /* not destroyed either, for the same reason; still reachable */
		r->rk = NULL;
	} else if (!kiln_kafka_watermarks_free_to_ask(r)) {
		KILN_LOG(KILN_LOG_INFO, "left_unclosed",
		         "a watermark query still waits for the broker; leaving without closing");
		left_open = r->rk;
		r->rk = NULL;
	} else if (!kiln_kafka_client_close(r, e->drain_until_ms)) {
		KILN_LOG(KILN_LOG_INFO, "left_unclosed",
		         "the group did not answer in time; leaving without closing");
		left_open = r->rk;
		r->rk = NULL;
	}
}

static void kafka_close(void *src, kiln_engine *e)
{
	struct krun *r = src;

	if (!r)
		return;
	for (size_t i = 0; i < r->nparts; i++) {
		if (e->sink.pool)
			kiln_curate_pool_recycle(e->sink.pool, r->parts[i]->open);
		free(r->parts[i]->topic);
		free(r->parts[i]);
	}
	free(r->parts);
	kiln_kafka_client_free_topics(r);
	if (r->rk)
		rd_kafka_destroy(r->rk);
	if (r->dlq) {
		rd_kafka_flush(r->dlq, 5000);
		rd_kafka_purge(r->dlq, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		rd_kafka_destroy(r->dlq);
	}
	kiln_kafka_watermarks_unref(r->wm_stuck);
	kiln_schema_registry_free(r->registry);
	free(r);
}

static const kiln_source_stream kafka_stream = {
    .open = kafka_open,
    .start = kafka_start,
    .poll = kafka_poll,
    .at_end = kafka_at_end,
    .flush = kafka_flush,
    .moves_pending = kafka_moves_pending,
    .delivered = kafka_delivered,
    .positions = kafka_positions,
    .seal = kafka_seal,
    .committed = kafka_committed,
    .abandon = kafka_abandon,
    .tick = kafka_tick,
    .stop = kafka_stop,
    .close = kafka_close,
};

const kiln_source kiln_source_kafka = {
    .version = KILN_SOURCE_VERSION,
    .kind = KILN_SOURCE_KAFKA_KIND,
    .option_keys = kiln_kafka_option_keys,
    .prepare = kafka_prepare,
    .stream = &kafka_stream,
    .raw_zone = true,
    .configure = kiln_kafka_configure,
    .reads_name = kiln_kafka_reads_name,
    .settings = kiln_kafka_settings,
    .check_name = "brokers",
    .check = kiln_kafka_check,
    .forget = kiln_kafka_forget,
    .starts_late = kiln_kafka_starts_late,
    .names = kiln_kafka_names,
    .secret_keys = kiln_kafka_secret_options,
};
