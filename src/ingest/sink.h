/* Where every source's records go: the curate pool, whose results are
 * handed in order to one shard writer per split and to the quarantine,
 * then a snapshot of the finished shards for the manifest commit
 * (kiln_run_setup_commit, fenced on the lineage the source gives). One
 * sink per run; a long-running source renews its writers after each
 * snapshot. The sink owns the pool, the writers and the quarantine; the
 * run setup and the stats it adds to are the caller's. */
#ifndef KILN_INGEST_SINK_H
#define KILN_INGEST_SINK_H

#include <stddef.h>

#include "ingest/curate_pool.h"
#include "ingest/run_setup.h"
#include "manifest/manifest.h"
#include "shard/quarantine.h"
#include "shard/writer.h"
#include "shard/zstd_pool.h"

typedef struct kiln_sink {
	kiln_run_setup *setup;
	kiln_curate_pool *pool;
	kiln_shard_writer *writers[KILN_SPLIT_COUNT];
	kiln_zstd_pool *zstd; /* the split writers' compression threads */
	kiln_quarantine *quarantine;
	kiln_stats *delta;                   /* what was delivered since the last snapshot (the caller's) */
	kiln_profile_schema *profile_schema; /* NULL: the pipeline does not profile */
	kiln_profile profile;                /* of what was delivered since the last snapshot */
} kiln_sink;

typedef struct kiln_sink_options {
	kiln_stats *delta;          /* counts added by kiln_sink_deliver and kiln_sink_shards */
	kiln_batch_consume consume; /* the pool's callback; NULL: kiln_sink_deliver */
	void *ctx;                  /* its ctx (NULL consume: unused) */
	bool deliver_on_workers;    /* the pool's workers call it (curate_pool.h) */
	bool raw_zone;              /* batches with raw records are written to setup's store */
} kiln_sink_options;

/* Opens the writers, the quarantine and the pool (setup open, and outliving
 * the sink). On failure what was opened stays for kiln_sink_close. */
int kiln_sink_open(kiln_sink *out, kiln_run_setup *setup, const kiln_sink_options *options);
/* Stops the pool (abandoning what is in flight) and frees the writers; a
 * zeroed sink is fine. */
void kiln_sink_close(kiln_sink *s);

/* The compression threads a run uses: shards.zstd_threads, else one per
 * online CPU (1..64). */
unsigned kiln_zstd_thread_count(const kiln_pipeline *p);

/* New, empty writers and quarantine: what the old ones held is dropped
 * (after a snapshot committed it, or to read it again); with dedup, keys
 * delivered but not committed are dropped too (the index loaded again from
 * the branch tip). */
int kiln_sink_renew(kiln_sink *s);
/* With dedup, moves a curated batch's duplicates from its splits to its
 * rejects (ingest/dedup_filter.h), once; before a source's prepare sees the
 * batch (a quarantine replay then keeps a duplicate in the quarantine). */
int kiln_sink_dedup(kiln_sink *s, kiln_batch *b);
/* Hands a curated batch to the quarantine and the writers (counts to delta),
 * after kiln_sink_dedup. */
int kiln_sink_deliver(kiln_sink *s, kiln_batch *b);
/* Finishes every split's shards (uploaded once this returns 0). */
int kiln_sink_finish_shards(kiln_sink *s);
/* Flushes the quarantine's last object. */
int kiln_sink_flush_quarantine(kiln_sink *s);
/* Lists the finished shards in snap (borrowed from the writers until they
 * are renewed or closed), sets delta's per-split shard counts and sizes,
 * snap->delta and snap->profile (the sink's, until renewed); returns how
 * many shards. */
size_t kiln_sink_shards(kiln_sink *s, kiln_snapshot *snap);

#endif
