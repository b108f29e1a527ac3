/* A replay from the raw zone onto a new branch (see replay_run.h).
 *
 * Per topic/partition of the source branch's lineage.json (for the
 * pipeline's topics): the raw objects are listed (raw.h sorts them by first,
 * then last offset) and their names checked against lineage first, so
 * records known to be missing stop the replay before anything is written;
 * then the calling thread decodes them in order into batches for the curate
 * pool (ingest/curate_pool.h), feeding each offset below `next` once
 * (objects overlap where a crashed run's batches were consumed again with
 * other boundaries), and the results go to the shard writers and the
 * quarantine as in curate_run.c. One snapshot commit creates the branch.
 * This is the replay source (ingest/source.h) driven by the ingest loop. */
#include "ingest/replay_run.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/buf.h"
#include "core/error.h"
#include "ingest/curate_pool.h"
#include "ingest/ingest_loop.h"
#include "ingest/kafka_run.h"
#include "manifest/version.h"
#include "shard/raw.h"

#define BATCH_BYTES   (1u << 20)
#define BATCH_RECORDS 8192

struct object {
	char *key;
	int64_t first, last;
};

/* One topic/partition to replay: [start, next) minus `skipped` offsets is
 * what the source branch covered; `fed` is the offset after the last record
 * handed to the pool (older ones are duplicates from overlapping objects). */
struct part {
	char *topic;
	int32_t partition;
	int64_t next;
	uint64_t skipped, gaps;
	struct object *objects;
	size_t object_count, object_cap;
	int64_t start;
	uint64_t expected; /* next - start - skipped */
	uint64_t listed;   /* offsets in [start, next) that object names cover */
	uint64_t found;    /* distinct offsets fed */
	int64_t fed;
};

struct replay_args {
	const kiln_replay_options *o;
	kiln_replay_result *out;
};

/* The replay source's state (kiln_source_replay). */
struct replay {
	const kiln_pipeline *p;
	const kiln_replay_options *o;
	kiln_replay_result *out;
	kiln_ingest *in;
	kiln_lineage_entry *lineage; /* what the commit records */
	struct part *parts;
	size_t part_count, part_cap;
	struct part *cur;               /* the partition being fed */
	kiln_batch *open;               /* its batch being filled */
	int rc;                         /* an error of ours inside a decode callback */
	kiln_schema_registry *registry; /* a Kafka pipeline of Avro records */
};

static void warn(struct replay *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void warn(struct replay *r, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (!r->o->warn)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	r->o->warn(r->o->warn_ctx, line);
}

static void parts_free(struct replay *r)
{
	for (size_t i = 0; i < r->part_count; i++) {
		struct part *pt = &r->parts[i];
		for (size_t j = 0; j < pt->object_count; j++)
			free(pt->objects[j].key);
		free(pt->objects);
		free(pt->topic);
	}
	free(r->parts);
	r->parts = NULL;
	r->part_count = r->part_cap = 0;
}

/* ---- what to replay ------------------------------------------------------- */

static int note_lineage(void *ctx, const kiln_lineage_entry *e)
{
	struct replay *r = ctx;
	struct part *pt;

	/* the raw zone holds the records of the pipeline's kind (Kafka, http) only: a file's entry of
	 * a topic's name is not replayed */
	if (strcmp(e->source, r->p->source->kind) != 0 || !kiln_source_reads_name(r->p, e->topic))
		return 0;
	if (KILN_ARRAY_GROW(r->parts, r->part_cap, r->part_count, NULL) < 0)
		return KILN_ENOMEM;
	pt = &r->parts[r->part_count];
	memset(pt, 0, sizeof(*pt));
	if (!(pt->topic = strdup(e->topic)))
		return kiln_error_oom(NULL);
	pt->partition = e->partition;
	pt->next = e->next;
	pt->skipped = e->skipped;
	pt->gaps = e->gaps;
	r->part_count++;
	return 0;
}

/* 1 when refs/heads/<dataset>/<branch> holds a kiln commit (every one
 * writes dataset.json), 0 when not. */
static int branch_exists(kiln_manifest *m, const char *dataset, const char *branch)
{
	kiln_buf probe = KILN_BUF_INIT(0);
	int rc = kiln_manifest_read(m, dataset, branch, "dataset.json", &probe);

	kiln_buf_free(&probe);
	return rc;
}

static int check_branches(kiln_manifest *m, const kiln_pipeline *p, const char *from)
{
	int rc;

	if ((rc = branch_exists(m, p->dataset, p->branch)) < 0)
		return rc;
	if (rc)
		return kiln_error_set(
		    KILN_EINVALID,
		    "%s@%s already exists (refs/heads/%s/%s in %s); a replay makes a new branch: "
		    "give another one with --set branch=NAME",
		    p->dataset, p->branch, p->dataset, p->branch, p->manifest_repo);
	if ((rc = branch_exists(m, p->dataset, from)) < 0)
		return rc;
	if (!rc)
		return kiln_error_set(KILN_ENOTFOUND, "%s@%s: no such branch (refs/heads/%s/%s in %s)",
		                      p->dataset, from, p->dataset, from, p->manifest_repo);
	return 0;
}

static int note_object(void *ctx, const char *key, const char *topic, int32_t partition, int64_t first,
                       int64_t last)
{
	struct part *pt = ctx;
	struct object *o;

	(void)topic;
	(void)partition;
	if (first >= pt->next)
		return 0; /* read by a run that did not commit it */
	if (KILN_ARRAY_GROW(pt->objects, pt->object_cap, pt->object_count, NULL) < 0)
		return KILN_ENOMEM;
	o = &pt->objects[pt->object_count];
	if (!(o->key = strdup(key)))
		return kiln_error_oom(NULL);
	o->first = first;
	o->last = last;
	pt->object_count++;
	return 0;
}

/* Lists a partition's objects and counts the offsets their names cover.
 * A pipeline with source.start: latest began each partition where it was
 * then, so there the first object sets the start; else it is offset 0. */
static int list_part(struct replay *r, struct part *pt)
{
	int64_t at;
	uint64_t below;
	int rc;

	if ((rc = kiln_raw_list(r->in->setup.store, pt->topic, pt->partition, note_object, pt)) < 0)
		return rc;
	pt->start = r->p->source->starts_late && r->p->source->starts_late(r->p) && pt->object_count
	                ? pt->objects[0].first
	                : 0;
	below = (uint64_t)(pt->next - pt->start);
	pt->expected = below > pt->skipped ? below - pt->skipped : 0;
	at = pt->start;
	for (size_t i = 0; i < pt->object_count; i++) {
		int64_t lo = pt->objects[i].first > at ? pt->objects[i].first : at;
		int64_t hi = pt->objects[i].last < pt->next - 1 ? pt->objects[i].last : pt->next - 1;
		if (hi >= lo) {
			pt->listed += (uint64_t)(hi - lo + 1);
			at = hi + 1;
		}
	}
	pt->fed = pt->start;
	return 0;
}

/* ---- feeding the pool ----------------------------------------------------- */

/* Where a tombstone's rec[] points: validated as no bytes, like kiln run's,
 * and told from an empty value by its address when quarantined. */
static const char tombstone[] = "";

static int submit_open(struct replay *r)
{
	kiln_batch *b = r->open;
	const char *base;

	if (!b)
		return 0;
	r->open = NULL;
	/* rec[] held offsets into b->in; now it stops moving */
	base = b->in.ptr ? b->in.ptr : "";
	for (size_t i = 0; i < b->count; i++)
		if (b->rec[i] != tombstone)
			b->rec[i] = b->too_long[i] ? NULL : base + (uintptr_t)b->rec[i];
	return kiln_curate_pool_submit(r->in->sink.pool, b);
}

static int feed(struct replay *r, const kiln_raw_record *rec)
{
	struct part *pt = r->cur;
	kiln_batch *b = r->open;
	size_t i;
	int rc;

	if (!b) {
		if (!(b = kiln_curate_pool_batch(r->in->sink.pool)))
			return kiln_error_oom(NULL);
		b->topic = pt->topic;
		b->partition = pt->partition;
		b->keep_raw = false; /* the raw zone already holds these bytes */
		b->source_ctx = pt;
		kiln_kafka_decode_batch(b, r->registry);
		r->open = b;
	}
	if ((rc = kiln_batch_reserve(b)) < 0)
		return rc;
	i = b->count;
	b->offset[i] = rec->offset;
	b->len[i] = rec->value_len;
	b->too_long[i] = rec->value_len > r->p->max_record_bytes;
	b->rec[i] = rec->null_value ? tombstone : (const char *)(uintptr_t)b->in.len;
	if (!b->too_long[i] && rec->value_len && (rc = kiln_buf_put(&b->in, rec->value, rec->value_len)) < 0)
		return rc;
	b->count++;
	b->bytes += rec->value_len;
	pt->fed = rec->offset + 1;
	pt->found++;
	if (b->count >= BATCH_RECORDS || b->bytes >= BATCH_BYTES)
		return submit_open(r);
	return 0;
}

static int on_record(void *ctx, const kiln_raw_record *rec)
{
	struct replay *r = ctx;
	struct part *pt = r->cur;

	if (rec->offset < pt->fed || rec->offset >= pt->next)
		return 0;
	if (rec->partition != pt->partition || strcmp(rec->topic, pt->topic) != 0)
		return r->rc = kiln_error_set(KILN_EINVALID,
		                              "raw zone: an object under raw/%s/%" PRId32
		                              "/ holds a record of another "
		                              "topic or partition",
		                              pt->topic, pt->partition);
	if ((r->rc = feed(r, rec)) < 0)
		return r->rc;
	return 0;
}

static int replay_part(struct replay *r, struct part *pt)
{
	int rc;

	r->cur = pt;
	for (size_t i = 0; i < pt->object_count; i++) {
		const struct object *o = &pt->objects[i];

		if (o->last < pt->fed)
			continue; /* every offset in it was fed already */
		rc = kiln_raw_read(r->in->setup.store, o->key, on_record, r);
		if (r->rc < 0)
			return r->rc;
		if (rc == KILN_EINVALID || rc == KILN_ENOTFOUND) {
			/* its records (or the rest of them) count as missing */
			warn(r, "%s", kiln_error_last());
			continue;
		}
		if (rc < 0)
			return rc;
	}
	rc = submit_open(r);
	r->cur = NULL;
	return rc;
}

/* Before a curated batch is landed: a tombstone's quarantine line says
 * null, an empty value "" (as kiln run's). */
static void replay_prepare(void *src, kiln_batch *b)
{
	(void)src;
	for (size_t i = 0; i < b->reject_count; i++)
		if (b->rec[b->rejects[i].index] == tombstone)
			b->rec[b->rejects[i].index] = NULL;
}

/* ---- the run -------------------------------------------------------------- */

/* Warns about every partition with fewer offsets than expected (by the
 * object names before reading, by the records fed after); returns the total
 * missing. */
static uint64_t count_missing(struct replay *r, bool after_reading)
{
	uint64_t total = 0;

	for (size_t i = 0; i < r->part_count; i++) {
		const struct part *pt = &r->parts[i];
		uint64_t have = after_reading ? pt->found : pt->listed;
		uint64_t missing = pt->expected > have ? pt->expected - have : 0;

		total += missing;
		if (!missing ||
		    (after_reading && pt->expected > pt->listed && missing <= pt->expected - pt->listed))
			continue; /* nothing missing, or nothing not already told */
		warn(r,
		     "%s/%" PRId32 ": %" PRIu64 " records missing from the raw zone: %s %" PRIu64
		     " of offsets %" PRId64 "-%" PRId64 " (lineage.json of %s: next %" PRId64 ", %" PRIu64
		     " skipped)",
		     pt->topic, pt->partition, missing,
		     after_reading ? "its objects hold" : "its object names cover", have, pt->start,
		     pt->next - 1, r->o->from, pt->next, pt->skipped);
	}
	return total;
}

/* Which partitions, from options->from's lineage.json, and what is missing
 * by the object names: refused before anything is written. */
static int replay_open(void **out, kiln_ingest *in, const void *args)
{
	const struct replay_args *a = args;
	const kiln_pipeline *p = in->p;
	struct replay *r = calloc(1, sizeof(*r));
	size_t name_count = 0;
	const char *const *names = p->source->names ? p->source->names(p, &name_count) : NULL;
	int rc;

	*out = r;
	if (!r)
		return kiln_error_oom(NULL);
	*r = (struct replay){.p = p, .o = a->o, .out = a->out, .in = in};
	if ((rc = kiln_kafka_registry_open(p, &r->registry)) < 0 ||
	    (rc = check_branches(in->setup.manifest, p, r->o->from)) < 0 ||
	    (rc = kiln_manifest_lineage(in->setup.manifest, p->dataset, r->o->from, note_lineage, r)) < 0)
		return rc;
	if (r->part_count == 0)
		return kiln_error_set(
		    KILN_EINVALID, "%s@%s: lineage.json has no offsets of the pipeline's topics (%s%s)",
		    p->dataset, r->o->from, name_count ? names[0] : "", name_count > 1 ? ", ..." : "");
	r->out->partitions = r->part_count;
	for (size_t i = 0; i < r->part_count; i++)
		if ((rc = list_part(r, &r->parts[i])) < 0)
			return rc;
	r->out->missing = count_missing(r, false);
	return r->out->missing && !r->o->allow_missing ? KILN_SOURCE_DONE : KILN_SOURCE_GO;
}

static int replay_read(void *src, kiln_ingest *in)
{
	struct replay *r = src;
	int rc;

	(void)in;
	for (size_t i = 0; i < r->part_count; i++)
		if ((rc = replay_part(r, &r->parts[i])) < 0)
			return rc;
	return 0;
}

/* What the objects really held (a corrupt one, offsets Kafka skipped). */
static int replay_end(void *src, kiln_ingest *in)
{
	struct replay *r = src;

	(void)in;
	r->out->missing = count_missing(r, true);
	return r->out->missing && !r->o->allow_missing ? KILN_SOURCE_DONE : KILN_SOURCE_GO;
}

/* The one snapshot: lineage = the source branch's, fenced on the target
 * having no entry (it did not exist when the replay began). */
static int replay_lineage(void *src, kiln_ingest *in, kiln_snapshot *snap)
{
	struct replay *r = src;

	(void)in;
	if (!(r->lineage = calloc(r->part_count, sizeof(*r->lineage))))
		return kiln_error_oom(NULL);
	for (size_t i = 0; i < r->part_count; i++) {
		const struct part *pt = &r->parts[i];
		r->lineage[i] = (kiln_lineage_entry){.source = r->p->source->kind,
		                                     .topic = pt->topic,
		                                     .partition = pt->partition,
		                                     .next = pt->next,
		                                     .skipped = pt->skipped,
		                                     .gaps = pt->gaps,
		                                     .fenced = true,
		                                     .expect_next = -1};
	}
	snap->lineage = r->lineage;
	snap->lineage_count = r->part_count;
	return 0;
}

static int replay_committed(void *src, kiln_ingest *in, int rc)
{
	(void)src;
	if (rc == KILN_EFENCED || rc == KILN_EMODIFIED)
		rc =
		    kiln_error_set(KILN_EINVALID, "%s@%s was created while the replay ran; nothing committed",
		                   in->p->dataset, in->p->branch);
	return rc;
}

static void replay_close(void *src, kiln_ingest *in)
{
	struct replay *r = src;

	if (!r)
		return;
	if (in->sink.pool)
		kiln_curate_pool_recycle(in->sink.pool, r->open);
	parts_free(r);
	free(r->lineage);
	kiln_schema_registry_free(r->registry);
	free(r);
}

/* A replay reads a Kafka pipeline's source.* keys (its topics), not Kafka. */
static const char *const replay_keys[] = {"kind", "topics", "start", "max_record_bytes", "max_depth", NULL};

const kiln_source kiln_source_replay = {
    .version = KILN_SOURCE_VERSION,
    .kind = "replay",
    .option_keys = replay_keys,
    .open = replay_open,
    .read = replay_read,
    .prepare = replay_prepare,
    .end = replay_end,
    .lineage = replay_lineage,
    .committed = replay_committed,
    .close = replay_close,
};

int kiln_replay_run(const kiln_pipeline *p, const kiln_replay_options *o, kiln_replay_result *out)
{
	kiln_manifest *probe = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!p->source->raw_zone)
		return kiln_error_set(
		    KILN_EINVALID,
		    "%s: source.kind %s has no raw zone; a replay rebuilds the branch of a kafka or "
		    "http source from its raw zone",
		    p->file, p->source->kind);
	if (!o->from || !*o->from)
		return kiln_error_set(KILN_EINVALID, "replay: no source branch (--from BRANCH)");
	if (strcmp(o->from, p->branch) == 0)
		return kiln_error_set(
		    KILN_EINVALID,
		    "%s: the target branch %s is the one replayed (--from); give a new one with "
		    "--set branch=NAME",
		    p->file, p->branch);
	/* refuse before loading keys or creating anything when the repository
	 * is here already (with manifest.remote it is checked after the fetch) */
	if (!p->manifest_remote && kiln_version_open(&probe, p->manifest_repo) == 0) {
		rc = check_branches(probe, p, o->from);
		kiln_manifest_close(probe);
		if (rc < 0)
			return rc;
	}
	return kiln_ingest_run(&kiln_source_replay, &(struct replay_args){.o = o, .out = out}, p, &out->run);
}
