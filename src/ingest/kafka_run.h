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

#include "core/daemon_metrics.h"
#include "ingest/curate_run.h"
#include "ingest/pipeline.h"

typedef struct kiln_kafka_run_options {
	/* snapshot and return once every assigned partition is read to its end */
	bool stop_at_end;
	/* set asynchronously (signal handlers): drain, snapshot and return */
	volatile sig_atomic_t *stop;
	/* set asynchronously: take a snapshot now */
	volatile sig_atomic_t *snapshot;
	/* set asynchronously (SIGHUP): load the pipeline file again with these
	 * --set overrides and apply what can change while running (log.*,
	 * snapshot.*; see kafka_reload.c) */
	volatile sig_atomic_t *reload;
	char *const *sets;
	size_t set_count;
	/* kiln_build_info on /metrics (NULL: not served) */
	const kiln_build_info *build_info;
} kiln_kafka_run_options;

/* The version of the librdkafka loaded at run time ("2.0.2"), static. */
const char *kiln_kafka_librdkafka_version(void);

/* Runs until stopped. out: totals over every snapshot this run committed,
 * and the last commit ("" when none). Returns 0 after a clean stop, or a
 * negative error (a gap under on_gap: stop, a config or key error, a drain
 * that could not commit). */
int kiln_kafka_run(const kiln_pipeline *pipeline, const kiln_kafka_run_options *options,
                   kiln_run_result *out);

/* One topic as the brokers describe it: its partition count, or -1 and why
 * not (error). A negative return stops the probe with that status. */
typedef int (*kiln_kafka_topic_cb)(void *ctx, const char *topic, int partitions, const char *error);

/* For kiln check: asks the pipeline's brokers (with its source.options)
 * for the cluster's metadata within timeout_ms, creating no topic and
 * joining no group, then reports each source topic and the dead-letter
 * topic when there is one. *out_brokers: the brokers the cluster lists.
 * KILN_EIO when no broker answered. */
int kiln_kafka_probe(const kiln_pipeline *pipeline, int timeout_ms, int *out_brokers, kiln_kafka_topic_cb cb,
                     void *ctx);

#endif
