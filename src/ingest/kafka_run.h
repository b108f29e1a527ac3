/* `kiln run` on a Kafka source: a long-running member of a consumer group
 * that lands each batch in the raw zone, curates it, and commits snapshots
 * (every N records, every T seconds, on request, on SIGTERM) whose
 * lineage.json moves each partition it owns from the offset it read there,
 * compare-and-swap, so whatever is consumed is committed exactly once or
 * consumed again (docs/STREAMING.md). */
#ifndef KILN_INGEST_KAFKA_RUN_H
#define KILN_INGEST_KAFKA_RUN_H

#include <signal.h>
#include <stdbool.h>

#include "ingest/curate_run.h"
#include "ingest/pipeline.h"

typedef struct kiln_kafka_run_options {
	/* snapshot and return once every assigned partition is read to its end */
	bool stop_at_end;
	/* set asynchronously (signal handlers): drain, snapshot and return */
	volatile sig_atomic_t *stop;
	/* set asynchronously: take a snapshot now */
	volatile sig_atomic_t *snapshot;
} kiln_kafka_run_options;

/* Runs until stopped. out: totals over every snapshot this run committed,
 * and the last commit ("" when none). Returns 0 after a clean stop, or a
 * negative error (a gap under on_gap: stop, a config or key error, a drain
 * that could not commit). */
int kiln_kafka_run(const kiln_pipeline *pipeline, const kiln_kafka_run_options *options,
                   kiln_run_result *out);

#endif
