/* `kiln quarantine replay`: the quarantined records of a dataset branch
 * run again through the pipeline as it is now (after a contract fix); those
 * that pass are curated as a run would (pseudonymise, split, shard) into one
 * snapshot commit on that branch, whose quarantine-replayed.json lists them
 * (manifest/replayed.h) so none is ever replayed twice; those that still
 * fail stay in the quarantine, untouched. lineage.json does not change: the
 * offsets were covered already (as quarantined). Dropping the replayed lines
 * from the quarantine objects is the caller's (erase/zones.h), with the
 * list this returns (docs/REPLAY.md). */
#ifndef KILN_INGEST_QUARANTINE_REPLAY_H
#define KILN_INGEST_QUARANTINE_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/reject.h"
#include "ingest/curate_run.h"
#include "ingest/pipeline.h"
#include "manifest/replayed.h"
#include "shard/quarantine.h"

typedef struct kiln_quarantine_replay_options {
	int code;     /* -1: every record; else only those whose first violation has this code */
	bool dry_run; /* validate and count only: nothing is written */
} kiln_quarantine_replay_options;

typedef struct kiln_quarantine_replay_result {
	kiln_run_result run; /* run.commit "" when nothing was committed */
	/* per first-violation code (as quarantined): records that pass now
	 * (committed, unless dry_run) and records that stay (still failing, or
	 * kept without their bytes) */
	uint64_t passed[KILN_REJECT_COUNT_], stay[KILN_REJECT_COUNT_];
	uint64_t passed_total, stay_total;
	uint64_t listed_lines; /* quarantine lines the branch's list holds already (skipped) */
	uint64_t objects;      /* quarantine objects read */
	/* the branch's replay list after the run (the tip's when it began, plus
	 * what this run committed): owned, kiln_quarantine_replay_result_free */
	kiln_replayed listed;
} kiln_quarantine_replay_result;

/* Replays the quarantine of pipeline->dataset@pipeline->branch: objects
 * quarantine/<topic>/<partition>/<dataset>/<branch>/..., and the older
 * quarantine/<topic>/<partition>/... of the pipeline's topics (a file
 * source's source.name). KILN_ENOTFOUND when the branch does not exist;
 * KILN_EINVALID for a quarantine object that does not decode (naming it);
 * KILN_EFENCED "... nothing committed" when another replay committed some
 * of the same records first; else the run's errors (key, contract, store,
 * manifest). out is zeroed first and holds the counts either way (free it). */
int kiln_quarantine_replay_run(const kiln_pipeline *pipeline, const kiln_quarantine_replay_options *options,
                               kiln_quarantine_replay_result *out);

/* Whether a replay of pipeline reads the quarantine object: one of its
 * dataset (kiln_quarantine_list's dataset filter) and branch, or an older
 * object without dataset or branch of one of the pipeline's topics. */
bool kiln_quarantine_replay_reads(const kiln_pipeline *pipeline, const kiln_quarantine_object *obj);

void kiln_quarantine_replay_result_free(kiln_quarantine_replay_result *result);

#endif
