/* `kiln replay`: rebuilds a Kafka pipeline's curated shards from the raw
 * zone, without reading Kafka, onto a new dataset branch (after a contract
 * fix or a key rotation). Every offset the source branch's lineage.json
 * covers is read back from raw/ once, curated with the pipeline as it is
 * now, and committed in one snapshot whose lineage.json holds the source
 * branch's `next` offsets, so a later `kiln run` on the new branch goes on
 * exactly where the source branch stopped (docs/REPLAY.md). */
#ifndef KILN_INGEST_REPLAY_RUN_H
#define KILN_INGEST_REPLAY_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ingest/curate_run.h"
#include "ingest/pipeline.h"

typedef struct kiln_replay_options {
	const char *from;   /* the branch of pipeline->dataset to replay; != pipeline->branch */
	bool allow_missing; /* commit even when records are missing from the raw zone */
	/* called on the caller's thread with one line per problem found (records
	 * missing from a partition, a corrupt raw object); names topics,
	 * partitions, offsets and object keys, never a record's value. NULL:
	 * not told. */
	void (*warn)(void *ctx, const char *line);
	void *warn_ctx;
} kiln_replay_options;

typedef struct kiln_replay_result {
	kiln_run_result run; /* run.commit "" when missing records stopped the replay */
	uint64_t missing;    /* offsets below a partition's next found in no raw object
	                        (beyond those lineage.json counts as skipped) */
	size_t partitions;   /* topic/partitions replayed */
} kiln_replay_result;

/* Replays pipeline's topics from options->from onto pipeline->branch.
 * KILN_EINVALID (nothing written) when the source is not kafka, the target
 * branch equals options->from or already exists, or options->from has no
 * lineage for the pipeline's topics; KILN_ENOTFOUND when options->from does
 * not exist. When records are missing and !allow_missing, returns 0 with
 * out->run.commit "" and out->missing > 0: nothing is committed (the missing
 * objects are found by listing, before anything is written, unless an
 * object turns out corrupt or shorter than its name says). Otherwise the
 * run's errors (key, contract, store, manifest). */
int kiln_replay_run(const kiln_pipeline *pipeline, const kiln_replay_options *options,
                    kiln_replay_result *out);

#endif
