/* What the engine's modules and the streaming rows share: the run's state,
 * struct kiln_engine, owned by the thread that calls kiln_engine_run, and
 * what each engine module exports. engine.c drives the run (the loop, the
 * snapshot policy and commit, backoff, the drain); engine_http.c serves
 * /metrics, /healthz and /v1/snapshot; engine_metrics.c registers the
 * run's metrics and the drift gauges; engine_watchdog.c is the drain's
 * deadline and the service manager's watchdog; engine_reload.c is SIGHUP.
 * A row reads the fields below and calls the kiln_engine_* functions; it
 * keeps its own state behind its void *. */
#ifndef KILN_INGEST_ENGINE_INTERNAL_H
#define KILN_INGEST_ENGINE_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "core/http_server.h"
#include "core/metrics.h"
#include "core/notify.h"
#include "ingest/curate_pool.h"
#include "ingest/engine.h"
#include "ingest/run_setup.h"
#include "ingest/sink.h"
#include "ingest/source.h"
#include "shard/quarantine.h"

/* The run's own metrics; a row registers its own (kiln_source.stream.open). */
struct kiln_engine_metrics {
	kiln_metrics *m;
	kiln_counter *in, *valid, *bytes, *commits, *commit_failures, *commit_retries, *abandoned,
	    *compactions;
	kiln_counter *quarantined[KILN_REJECT_COUNT_];
	kiln_histogram *batch_seconds, *snapshot_seconds;
	kiln_gauge *up, *loose_objects;
};

struct kiln_engine {
	const kiln_pipeline *p;
	const kiln_engine_options *o; /* o->stop is never NULL */
	const kiln_source *source;
	void *src; /* the row's state */
	kiln_run_setup setup;
	kiln_sink sink;     /* the curate pool, the shard writers and the quarantine */
	kiln_stats delta;   /* since the last snapshot */
	uint64_t pending;   /* records consumed since the last snapshot */
	int64_t started_ms; /* when the loop started */
	int64_t last_snapshot_ms;
	int64_t drain_until_ms; /* when the watchdog ends the drain (0: not draining) */
	int fatal;              /* a reason to end the run (the row's: a gap under on_gap: stop, ...) */
	bool ready;             /* READY=1 sent (the row says when: Kafka on its first assignment) */
	bool finished;          /* --stop-at-end: the last snapshot landed in the loop (none in the drain) */
	char fatal_msg[512];
	char failing[512]; /* why the last snapshot or batch failed, until a commit ("": none) */
	kiln_run_result *out;
	struct kiln_engine_metrics mx;
	kiln_http_server *http;
	/* snapshot requests from the HTTP threads */
	pthread_mutex_t req_lock;
	pthread_cond_t req_cond;
	uint64_t req_asked, req_done;
	char req_commit[41];
	int req_rc;
	char req_error[512];
	_Atomic int64_t heartbeat_ms;
	/* SIGHUP reloads (engine_reload.c); the watchdog thread sends WATCHDOG=1 */
	kiln_pipeline *reloaded;   /* the pipeline as last reloaded, NULL: as started (p) */
	uint64_t snapshot_records; /* the snapshot policy in force (p's, or reloaded) */
	unsigned snapshot_seconds;
	struct kiln_engine_watchdog *drain; /* its seconds follow snapshot.drain_seconds */
};

static inline int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- engine.c: what a row calls ------------------------------------------ */

/* What was read is durable before a commit, in either mode: the shards
 * finished, the quarantine flushed, and the shards listed in snap. The
 * number of shards, or an error. */
int kiln_engine_land(kiln_sink *sink, kiln_snapshot *snap);
/* Commits what was consumed since the last snapshot (flush, drain the
 * pool, the row's positions, seal, commit, the row's committed). 1:
 * committed, 0: nothing to commit, < 0: failed (the caller abandons). */
int kiln_engine_snapshot(kiln_engine *e, const char *why);
/* Drops everything since the last snapshot (the pool, the open shards, the
 * counts) and has the row read it again (its abandon). */
int kiln_engine_abandon(kiln_engine *e, const char *why);
/* After a snapshot or a batch failed (kiln_error_last() says why): logs
 * EVENT, keeps the reason for `kiln snapshot` until the next commit, and
 * abandons. retry_ms < 0: not logged. < 0 only for a fatal error. */
int kiln_engine_failed(kiln_engine *e, const char *event, const char *why, int64_t retry_ms);
/* Ends the run after this loop turn with rc and a message (the first one
 * set wins). */
void kiln_engine_fatal(kiln_engine *e, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- engine_metrics.c ----------------------------------------------------- */

/* The run's counters, histograms and gauges up to kiln_abandoned_total. */
int kiln_engine_metrics_new(struct kiln_engine_metrics *mx);
/* The rest after the row's own: kiln_up, and the daemon's
 * (core/daemon_metrics.h; build_info NULL: no kiln_build_info). */
int kiln_engine_metrics_finish(struct kiln_engine_metrics *mx, const kiln_build_info *build_info);
/* After a snapshot: the branch's profile against the drift baseline
 * (promote.drift.baseline, else the highest vN) as gauges per field. A
 * failure is logged, never the run's. */
void kiln_engine_metrics_update_drift(kiln_engine *e);

/* ---- engine_http.c: GET /metrics, GET /healthz and POST /v1/snapshot ------ */

int kiln_engine_http_start(kiln_engine *e);
void kiln_engine_http_stop(kiln_engine *e);
bool kiln_engine_snapshot_requested(kiln_engine *e, uint64_t *ticket);
/* Asks the loop for a snapshot, as POST /v1/snapshot does, without waiting
 * for it (a row: an HTTP source with POSTs waiting for their commit). */
void kiln_engine_request_snapshot(kiln_engine *e);
void kiln_engine_snapshot_answered(kiln_engine *e, uint64_t ticket, int rc);

/* ---- engine_watchdog.c: the drain's deadline and the manager's watchdog --- */
/* Ends the process drain_seconds after a stop was asked for (a signal, or
 * the main loop ending), whatever the main thread is blocked in: nothing is
 * lost, the next run reads again what was not committed. It watches from
 * the start, so a stop that arrives while the row holds the main thread
 * (a rebalance callback, a broker that is gone) is bounded too.
 *
 * It also sends the systemd watchdog's WATCHDOG=1 (core/notify.h), so a
 * loop turn that blocks for a while (a snapshot waiting on a stalled store,
 * which the store's stall limit and retries end) does not starve it: it
 * kicks while the main loop's heartbeat is younger than
 * KILN_ENGINE_STUCK_SECONDS, and stops kicking once a turn (setup, a poll,
 * a snapshot) has taken longer, so the manager restarts a run that is
 * stuck. Only this thread kicks. */
#define KILN_ENGINE_STUCK_SECONDS 300

struct kiln_engine_watchdog {
	volatile sig_atomic_t *stop;
	_Atomic unsigned seconds;
	_Atomic bool draining, done;
	_Atomic int64_t deadline_ms;   /* -1 until a stop is seen */
	_Atomic int64_t *heartbeat_ms; /* the main loop's last turn (now_ms) */
	kiln_notify_watchdog notify;   /* kicked from the watchdog thread only */
};

int64_t kiln_engine_watchdog_deadline(struct kiln_engine_watchdog *w);
void *kiln_engine_watchdog(void *arg);

/* ---- engine_reload.c ------------------------------------------------------ */
/* On SIGHUP, the pipeline file loaded again (with the run's --set
 * overrides) and what may change while running applied: log.* and
 * snapshot.*; one log line names the keys applied and the changed keys
 * ignored (they need a restart), never a value. A file that no longer
 * loads is refused with its file:line:col error and the run goes on as it
 * was. Brackets the reload with RELOADING=1 and READY=1. */
void kiln_engine_reload(kiln_engine *e);

#endif
