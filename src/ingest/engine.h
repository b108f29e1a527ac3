/* The run engine: `kiln run` over any source row (ingest/source.h). A row
 * with streaming callbacks (Kafka, directory) runs until stopped, committing a
 * snapshot every N records, every T seconds, on request (SIGUSR1, POST
 * /v1/snapshot) and on the drain (SIGTERM), each compare-and-swap on the
 * branch with the lineage the row fences; a one-shot row (file, stdin)
 * commits once at the end of its input (kiln_ingest_run). The engine owns
 * the snapshot policy, the commit, backoff, the control HTTP listener, the
 * service manager's notify and watchdog, SIGHUP reloads and the drain
 * (engine*.c); the row owns its input and its positions. */
#ifndef KILN_INGEST_ENGINE_H
#define KILN_INGEST_ENGINE_H

#include <signal.h>
#include <stdbool.h>

#include "core/daemon_metrics.h"
#include "core/retry.h"
#include "ingest/curate_run.h"
#include "ingest/pipeline.h"

typedef struct kiln_engine_options {
	/* snapshot and return once the source has read everything there is
	 * (a streaming row's at_end) */
	bool stop_at_end;
	/* set asynchronously (signal handlers): drain, snapshot and return */
	volatile sig_atomic_t *stop;
	/* set asynchronously: take a snapshot now */
	volatile sig_atomic_t *snapshot;
	/* set asynchronously (SIGHUP): load the pipeline file again with these
	 * --set overrides and apply what can change while running (log.*,
	 * snapshot.*; see engine_reload.c) */
	volatile sig_atomic_t *reload;
	char *const *sets;
	size_t set_count;
	/* kiln_build_info on /metrics (NULL: not served) */
	const kiln_build_info *build_info;
	/* a one-shot file or stdin run's progress (NULL: none) */
	const struct kiln_run_progress *progress;
	/* a streaming run's hooks (NULL: none), called with hook_ctx: after
	 * each snapshot commit, on the engine's thread, with the commit, what
	 * it added, its shards and the positions it recorded (borrowed for the
	 * call); and once with the run's /metrics registry before it is
	 * served, to add series (a negative return fails the run) */
	void (*committed)(void *ctx, const char *commit, const kiln_stats *delta, size_t shards,
	                  const kiln_lineage_entry *positions, size_t count);
	int (*metrics)(void *ctx, kiln_metrics *m);
	void *hook_ctx;
} kiln_engine_options;

/* Whether the pipeline's source streams (runs until stopped, committing
 * many snapshots) rather than committing once at the end of its input. */
bool kiln_engine_streams(const kiln_pipeline *pipeline);
/* Whether it can stop once it has read everything there is
 * (kiln_engine_options.stop_at_end): a streaming row with at_end. */
bool kiln_engine_stops_at_end(const kiln_pipeline *pipeline);

/* Runs the pipeline's source row. A streaming row runs until stopped: out
 * holds the totals over every snapshot this run committed, and the last
 * commit ("" when none); 0 after a clean stop, or a negative error (the
 * row's fatal error, a config or key error, a drain that could not
 * commit). A one-shot row is kiln_curate_run (o is not used). */
int kiln_engine_run(const kiln_pipeline *pipeline, const kiln_engine_options *options, kiln_run_result *out);

/* The wait after the n-th failed snapshot or batch in a row (a landed
 * snapshot resets n): 500 ms, doubling, 30 s at most. */
extern const kiln_retry_policy kiln_engine_retry;

#endif
