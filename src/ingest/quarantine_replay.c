/* A quarantine replay (see quarantine_replay.h), the quarantine source
 * driven by the ingest loop.
 *
 * open: the branch's replay list, then every quarantine object of the
 * dataset/branch is decoded; lines the list holds, lines of another code
 * (--code), lines seen already in another object and lines without their
 * bytes are left; the others' records are copied into one buffer and
 * sorted by topic, partition, source kind and offset. A line is known by
 * its object's source kind with its topic, partition and offset: a file and
 * a Kafka topic of one name quarantine records at the same offsets. read:
 * batches of one partition and kind each go to the curate pool. prepare: a curated record is counted and
 * noted for the list; a rejected one is dropped from the batch, so the
 * sink writes no quarantine line for it (its old line stays where it is).
 * The commit adds the noted offsets to quarantine-replayed.json, moves
 * their counts from quarantined to valid in stats.json and leaves
 * lineage.json alone. */
#include "ingest/quarantine_replay.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/buf.h"
#include "core/error.h"
#include "ingest/curate_pool.h"
#include "ingest/ingest_loop.h"
#include "ingest/kafka_run.h"
#include "shard/quarantine.h"

#define BATCH_BYTES   (1u << 20)
#define BATCH_RECORDS 8192

/* One record to replay: its bytes at data[at, at+len). */
struct qrec {
	const char *source; /* a part source of `seen`, or NULL (an object named without one) */
	const char *topic;  /* a part topic of `seen` (stable: parts never free their topic) */
	int32_t partition;
	int64_t offset;
	kiln_reject code; /* its first violation when quarantined */
	size_t at, len;
};

struct qreplay_args {
	const kiln_quarantine_replay_options *o;
	kiln_quarantine_replay_result *out;
};

typedef struct qreplay {
	const kiln_pipeline *p;
	const kiln_quarantine_replay_options *o;
	kiln_quarantine_replay_result *out;
	kiln_ingest *in;
	kiln_replayed seen;  /* offsets collected (a line in two objects is replayed once) */
	kiln_replayed taken; /* offsets curated: what the commit lists */
	kiln_buf data;       /* the records' bytes */
	struct qrec *recs;
	size_t n, cap;
	const char *obj_source;         /* the kind of the object being read (NULL: none in its name) */
	int rc;                         /* an error of ours inside a decode callback */
	kiln_schema_registry *registry; /* a Kafka pipeline of Avro records */
} qreplay;

/* ---- collecting ------------------------------------------------------------- */

bool kiln_quarantine_replay_reads(const kiln_pipeline *p, const kiln_quarantine_object *obj)
{
	if (obj->dataset)
		return strcmp(obj->dataset, p->dataset) == 0 && strcmp(obj->branch, p->branch) == 0;
	return kiln_source_reads_name(p, obj->topic);
}

static int on_line(void *ctx, const kiln_quarantine_line *l)
{
	qreplay *r = ctx;
	struct qrec *q;

	if (r->o->code >= 0 && (int)l->code != r->o->code)
		return 0;
	if (kiln_replayed_has(&r->out->listed, r->obj_source, l->topic, l->partition, l->offset)) {
		r->out->listed_lines++;
		return 0;
	}
	if (kiln_replayed_has(&r->seen, r->obj_source, l->topic, l->partition, l->offset))
		return 0;
	if ((r->rc = kiln_replayed_add(&r->seen, r->obj_source, l->topic, l->partition, l->offset)) < 0)
		return r->rc;
	if (l->record_null) {
		r->out->stay[l->code]++;
		r->out->stay_total++;
		return 0;
	}
	if (KILN_ARRAY_GROW(r->recs, r->cap, r->n, NULL) < 0)
		return r->rc = KILN_ENOMEM;
	q = &r->recs[r->n];
	*q = (struct qrec){.partition = l->partition,
	                   .offset = l->offset,
	                   .code = l->code,
	                   .at = r->data.len,
	                   .len = l->record_len};
	/* the strings `seen` keeps (its part was just made or found) */
	for (size_t i = 0; i < r->seen.n; i++) {
		const kiln_replayed_part *sp = &r->seen.parts[i];

		if (sp->partition == l->partition && strcmp(sp->topic, l->topic) == 0 &&
		    (sp->source && r->obj_source ? strcmp(sp->source, r->obj_source) == 0
		                                 : sp->source == r->obj_source)) {
			q->topic = sp->topic;
			q->source = sp->source;
		}
	}
	if (l->record_len && (r->rc = kiln_buf_put(&r->data, l->record, l->record_len)) < 0)
		return r->rc;
	r->n++;
	return 0;
}

static int on_object(void *ctx, const kiln_quarantine_object *obj)
{
	qreplay *r = ctx;
	int rc;

	if (!kiln_quarantine_replay_reads(r->p, obj))
		return 0;
	r->out->objects++;
	r->obj_source = obj->source;
	rc = kiln_quarantine_read(r->in->setup.store, obj->key, on_line, r);
	r->obj_source = NULL;
	if (r->rc < 0)
		return r->rc;
	return rc == KILN_ENOTFOUND ? 0 : rc; /* gone since the listing: a concurrent cleanup */
}

static int qrec_cmp(const void *a, const void *b)
{
	const struct qrec *x = a, *y = b;
	int c = strcmp(x->topic, y->topic);

	if (c)
		return c;
	if (x->partition != y->partition)
		return (x->partition > y->partition) - (x->partition < y->partition);
	if (x->source != y->source && (!x->source || !y->source))
		return (x->source != NULL) - (y->source != NULL);
	if (x->source && (c = strcmp(x->source, y->source)) != 0)
		return c;
	return (x->offset > y->offset) - (x->offset < y->offset);
}

/* The branch must exist (its stats.json counts the quarantined records). */
static int qreplay_open(void **out, kiln_ingest *in, const void *args)
{
	const struct qreplay_args *a = args;
	const kiln_pipeline *p = in->p;
	kiln_buf probe = KILN_BUF_INIT(0);
	qreplay *r = calloc(1, sizeof(*r));
	int rc;

	*out = r;
	if (!r)
		return kiln_error_oom(NULL);
	*r = (qreplay){.p = p, .o = a->o, .out = a->out, .in = in, .data = KILN_BUF_INIT(0)};
	if ((rc = kiln_kafka_registry_open(p, &r->registry)) < 0)
		return rc;
	rc = kiln_manifest_read(in->setup.manifest, p->dataset, p->branch, "dataset.json", &probe);
	kiln_buf_free(&probe);
	if (rc < 0)
		return rc;
	if (rc == 0)
		return kiln_error_set(KILN_ENOTFOUND, "%s@%s: no such branch (refs/heads/%s/%s in %s)",
		                      p->dataset, p->branch, p->dataset, p->branch, p->manifest_repo);
	if ((rc = kiln_manifest_replayed(in->setup.manifest, p->dataset, p->branch, &r->out->listed)) < 0 ||
	    (rc = kiln_quarantine_list(in->setup.store, NULL, p->dataset, on_object, r)) < 0)
		return rc;
	if (r->n)
		qsort(r->recs, r->n, sizeof(*r->recs), qrec_cmp);
	return r->n ? KILN_SOURCE_GO : KILN_SOURCE_DONE;
}

/* ---- feeding ---------------------------------------------------------------- */

static int qreplay_read(void *src, kiln_ingest *in)
{
	qreplay *r = src;
	kiln_batch *b = NULL;
	int rc;

	(void)in;
	for (size_t i = 0; i < r->n; i++) {
		const struct qrec *q = &r->recs[i];
		size_t k;

		/* one batch, one source kind: offsets ascend within it */
		if (b && (b->partition != q->partition || strcmp(b->topic, q->topic) != 0 ||
		          ((const struct qrec *)b->source_ctx)->source != q->source ||
		          b->count >= BATCH_RECORDS || b->bytes >= BATCH_BYTES)) {
			rc = kiln_curate_pool_submit(r->in->sink.pool, b);
			b = NULL;
			if (rc < 0)
				return rc;
		}
		if (!b) {
			if (!(b = kiln_curate_pool_batch(r->in->sink.pool)))
				return kiln_error_oom(NULL);
			b->topic = q->topic;
			b->partition = q->partition;
			b->keep_raw = false;
			b->source_ctx = (void *)q; /* record k of the batch is q[k] */
			kiln_kafka_decode_batch(b, r->registry);
		}
		if ((rc = kiln_batch_reserve(b)) < 0) {
			kiln_curate_pool_recycle(r->in->sink.pool, b);
			return rc;
		}
		k = b->count++;
		b->offset[k] = q->offset;
		b->len[k] = q->len;
		b->too_long[k] = q->len > r->p->max_record_bytes;
		b->rec[k] = b->too_long[k] ? NULL : (r->data.ptr ? r->data.ptr + q->at : "");
		b->bytes += q->len;
	}
	return b ? kiln_curate_pool_submit(r->in->sink.pool, b) : 0;
}

/* A curated batch: its curated records counted and noted, its rejected ones
 * dropped (they stay in the quarantine as they are). A dry run keeps
 * nothing. */
static void qreplay_prepare(void *src, kiln_batch *b)
{
	qreplay *r = src;
	const struct qrec *q = b->source_ctx;

	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		for (size_t k = 0; k < b->out_count[s]; k++) {
			const struct qrec *x = &q[b->out_index[s][k]];

			r->out->passed[x->code]++;
			r->out->passed_total++;
			if (!r->o->dry_run && r->rc == 0)
				r->rc = kiln_replayed_add(&r->taken, x->source, x->topic, x->partition,
				                          x->offset);
		}
		if (r->o->dry_run) {
			b->out_count[s] = 0;
			b->out[s].len = 0;
		}
	}
	for (size_t i = 0; i < b->reject_count; i++) {
		r->out->stay[q[b->rejects[i].index].code]++;
		r->out->stay_total++;
	}
	b->reject_count = 0;
	if (r->o->dry_run)
		b->profiled = false;
}

static int qreplay_end(void *src, kiln_ingest *in)
{
	qreplay *r = src;

	(void)in;
	if (r->rc < 0)
		return r->rc;
	return r->o->dry_run || r->out->passed_total == 0 ? KILN_SOURCE_DONE : KILN_SOURCE_GO;
}

/* No lineage entry (the offsets were covered already); the list and the
 * counts moved from quarantined to valid instead of what a run adds. */
static int qreplay_lineage(void *src, kiln_ingest *in, kiln_snapshot *snap)
{
	qreplay *r = src;

	(void)in;
	snap->lineage = NULL;
	snap->lineage_count = 0;
	snap->replayed = &r->taken;
	memcpy(snap->unquarantined, r->out->passed, sizeof(snap->unquarantined));
	snap->delta.records_in = 0;
	snap->delta.quarantined = 0;
	memset(snap->delta.quarantined_by_code, 0, sizeof(snap->delta.quarantined_by_code));
	return 0;
}

static int qreplay_committed(void *src, kiln_ingest *in, int rc)
{
	qreplay *r = src;

	if (rc == KILN_EFENCED)
		return kiln_error_set(KILN_EFENCED,
		                      "%s@%s: another quarantine replay committed some of these records "
		                      "first; nothing committed (run it again)",
		                      in->p->dataset, in->p->branch);
	if (rc < 0)
		return rc;
	return kiln_replayed_merge(&r->out->listed, &r->taken, NULL);
}

static void qreplay_close(void *src, kiln_ingest *in)
{
	qreplay *r = src;

	(void)in;
	if (!r)
		return;
	kiln_replayed_free(&r->seen);
	kiln_replayed_free(&r->taken);
	kiln_buf_free(&r->data);
	free(r->recs);
	kiln_schema_registry_free(r->registry);
	free(r);
}

/* Not in the registry: no pipeline names it (kiln quarantine replay runs it). */
static const kiln_source quarantine_source = {
    .version = KILN_SOURCE_VERSION,
    .kind = "quarantine",
    .option_keys = NULL,
    .open = qreplay_open,
    .read = qreplay_read,
    .prepare = qreplay_prepare,
    .end = qreplay_end,
    .lineage = qreplay_lineage,
    .committed = qreplay_committed,
    .close = qreplay_close,
};

int kiln_quarantine_replay_run(const kiln_pipeline *p, const kiln_quarantine_replay_options *o,
                               kiln_quarantine_replay_result *out)
{
	memset(out, 0, sizeof(*out));
	return kiln_ingest_run(&quarantine_source, &(struct qreplay_args){.o = o, .out = out}, p, &out->run);
}

void kiln_quarantine_replay_result_free(kiln_quarantine_replay_result *result)
{
	if (result)
		kiln_replayed_free(&result->listed);
}
