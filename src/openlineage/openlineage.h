/* OpenLineage events for an orchestrator (docs/LINEAGE.md): what `kiln run`
 * commits, `kiln promote` tags, `kiln push` sends and `kiln erase` rewrites,
 * as RunEvents (START, then COMPLETE or FAIL) of the job kiln.<pipeline>.
 * The pipeline's `openlineage:` section says where they go: an HTTP(S)
 * endpoint (the OpenLineage HTTP transport, a bearer token from a 0600
 * file), a topic of a Kafka pipeline's brokers, or a file of JSON lines.
 * Every event is first written to a bounded queue folder, one file per
 * event, and sent from there (by a thread in a streaming run, at the end
 * of a one-shot command), so an endpoint that is down never fails or
 * delays a commit; a later command sends what an earlier one queued (at
 * least once: a receiver dedupes by runId and eventType). No event carries
 * a value from a record. */
#ifndef KILN_OPENLINEAGE_OPENLINEAGE_H
#define KILN_OPENLINEAGE_OPENLINEAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/metrics.h"
#include "erase/erase.h"
#include "ingest/curate_run.h"
#include "ingest/gates.h"
#include "ingest/pipeline.h"
#include "manifest/manifest.h"
#include "manifest/promote.h"
#include "manifest/version.h"
#include "push/push.h"

typedef struct kiln_openlineage kiln_openlineage;

/* Reads the pipeline's `openlineage:` section (errors at file:line:col,
 * a token file that group or others may read refused): *out is NULL when
 * the pipeline has none (then every function below does nothing).
 * version (kiln's) names kiln in the events' producer. */
int kiln_openlineage_open(kiln_openlineage **out, const kiln_pipeline *pipeline, const char *version);
/* Stops the sender thread and, after kiln_openlineage_begin (a command
 * that emits), sends what the queue holds within the section's timeout_ms
 * (what is left stays queued for a later command); frees. */
void kiln_openlineage_close(kiln_openlineage *ol);

/* A streaming run's sender: a thread that sends the queue as events
 * arrive, retrying with backoff while the endpoint is down or answers 5xx. */
int kiln_openlineage_start_sender(kiln_openlineage *ol);
/* kiln_openlineage_* series on a run's /metrics (docs/METRICS.md); ol
 * outlives m. */
int kiln_openlineage_metrics(kiln_openlineage *ol, kiln_metrics *m);

/* The job's run begins: START (job_type "RUN", "PROMOTE", "PUSH", "ERASE";
 * streaming: a Kafka or directory run). */
void kiln_openlineage_begin(kiln_openlineage *ol, const char *job_type, bool streaming);
/* It failed: FAIL with the message (one line, no record value in it, as
 * every kiln error). */
void kiln_openlineage_fail(kiln_openlineage *ol, const char *message);

/* A run's snapshot commit: COMPLETE with its inputs (the positions after
 * it; the run's earlier positions give where each range began) and its
 * output, DATASET@<branch> at the commit. In a streaming run the next
 * snapshot is a run of its own, whose START is dated when this one ended. */
void kiln_openlineage_run_commit(kiln_openlineage *ol, const char *commit, const kiln_stats *delta,
                                 size_t shards, const kiln_lineage_entry *positions, size_t count);
/* The end of `kiln run`: a one-shot run's commit (r->commit "" when none),
 * or, after a streaming run's last commit, nothing more; rc < 0: FAIL. */
void kiln_openlineage_run_end(kiln_openlineage *ol, const kiln_run_result *r, bool streaming, int rc,
                              const char *error);

/* `kiln promote` tagged v as version_name (tag_id the tag object). */
void kiln_openlineage_promoted(kiln_openlineage *ol, const kiln_version *v, const char *version_name,
                               const char *tag_id, const kiln_promote_inputs *in,
                               const kiln_gate_result *gates, size_t gate_count);
/* `kiln push` sent the version to the target. */
void kiln_openlineage_pushed(kiln_openlineage *ol, const kiln_push_result *res,
                             const kiln_push_target *target);
/* `kiln erase` rewrote the dataset's refs: counts and versions only. */
void kiln_openlineage_erased(kiln_openlineage *ol, const char *dataset, const kiln_erase_report *report);

#endif
