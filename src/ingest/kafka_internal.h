/* What the modules of a Kafka run share (kafka_run.c drives the run; the
 * librdkafka client, the dead-letter producer, watermark queries, the run's
 * metrics, its HTTP endpoints and the drain watchdog each live in a
 * kafka_<part>.c of their own): the run's state, struct krun, owned by the
 * thread that calls kiln_kafka_run, and what each module exports to it.
 * Threads and per-partition state: see the opening comment of kafka_run.c. */
#ifndef KILN_INGEST_KAFKA_INTERNAL_H
#define KILN_INGEST_KAFKA_INTERNAL_H

#include <librdkafka/rdkafka.h>
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
#include "ingest/kafka_run.h"
#include "ingest/run_setup.h"
#include "ingest/sink.h"
#include "shard/quarantine.h"
#include "shard/writer.h"

struct watermarks;

struct part {
	char *topic;
	int32_t partition;
	bool assigned, eof;
	int64_t committed, consumed, position;
	uint64_t gaps, skipped; /* lineage's, plus ours */
	bool move_pending;      /* lineage moves without records (a skipped gap, a start at the end) */
	int64_t start_at;       /* start: latest, no lineage: the end when first assigned (-1: not yet) */
	kiln_batch *open;
	kiln_gauge *lag;
};

struct metrics {
	kiln_metrics *m;
	kiln_counter *in, *valid, *bytes, *commits, *commit_failures, *commit_retries, *gaps, *gap_offsets,
	    *dead_letters, *rebalances, *abandoned, *compactions;
	kiln_counter *quarantined[KILN_REJECT_COUNT_];
	kiln_histogram *batch_seconds, *snapshot_seconds;
	kiln_gauge *partitions, *up, *loose_objects;
};

struct krun {
	const kiln_pipeline *p;
	const kiln_kafka_run_options *o;
	kiln_run_setup setup;
	rd_kafka_t *rk, *dlq;
	rd_kafka_topic_t **topics; /* a handle per subscribed topic (see kafka_client.c) */
	size_t topic_count;
	kiln_sink sink; /* the curate pool, the shard writers and the quarantine */
	struct part **parts;
	size_t nparts, parts_cap;
	kiln_stats delta; /* since the last snapshot */
	uint64_t pending; /* records consumed since the last snapshot */
	int64_t last_snapshot_ms;
	int64_t drain_until_ms; /* when the watchdog ends the drain (0: not draining) */
	int fatal;              /* a gap under on_gap: stop, or another reason to end the run */
	bool ever_assigned;     /* the group gave this member an assignment (even an empty one) */
	bool reached;           /* a broker answered (metadata or an assignment) */
	char fatal_msg[512];
	char failing[512];           /* why the last snapshot or batch failed, until a commit ("": none) */
	struct watermarks *wm_stuck; /* a watermark query that outlived its wait, or NULL */
	_Atomic int dlq_failed;
	kiln_run_result *out;
	struct metrics mx;
	kiln_http_server *http;
	/* snapshot requests from the HTTP threads */
	pthread_mutex_t req_lock;
	pthread_cond_t req_cond;
	uint64_t req_asked, req_done;
	char req_commit[41];
	int req_rc;
	char req_error[512];
	_Atomic int64_t heartbeat_ms;
	/* SIGHUP reloads (kafka_reload.c); the watchdog thread sends WATCHDOG=1 */
	bool ready;                /* READY=1 sent */
	kiln_pipeline *reloaded;   /* the pipeline as last reloaded, NULL: as started (p) */
	uint64_t snapshot_records; /* the snapshot policy in force (p's, or reloaded) */
	unsigned snapshot_seconds;
	struct kiln_kafka_watchdog *drain; /* its seconds follow snapshot.drain_seconds */
};

static inline int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* kafka_run.c: librdkafka's rebalance callback (opaque: the struct krun). */
void kiln_kafka_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *list,
                          void *opaque);

/* kafka_client.c: the consumer (subscribed to the pipeline's topics) and,
 * with a dead-letter topic, its producer, with kiln's settings and the
 * pipeline's source.options. */
int kiln_kafka_client_open(struct krun *r);
void kiln_kafka_client_free_topics(struct krun *r);
bool kiln_kafka_client_close(struct krun *r, int64_t deadline);
bool kiln_kafka_client_unreachable(struct krun *r, int64_t started);

/* kafka_dead_letter.c: rejected records copied to source.dead_letter_topic. */
void kiln_kafka_dead_letter_delivered(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque);
int kiln_kafka_dead_letter_send(struct krun *r, const kiln_batch *b, const kiln_batch_reject *x);
int kiln_kafka_dead_letter_flush(struct krun *r);

/* kafka_watermarks.c: watermark queries bounded in time. */
void kiln_kafka_watermarks_unref(struct watermarks *w);
bool kiln_kafka_watermarks_free_to_ask(struct krun *r);
rd_kafka_resp_err_t kiln_kafka_watermarks_query(struct krun *r, const struct part *pt, int64_t *lo,
                                                int64_t *hi);

/* kafka_metrics.c: the run's counters, histograms and gauges, and the
 * daemon's (core/daemon_metrics.h; build_info NULL: no kiln_build_info). */
int kiln_kafka_metrics_new(struct metrics *mx, const kiln_build_info *build_info);
void kiln_kafka_metrics_update_lag(struct krun *r);
/* After a snapshot: the branch's profile against the drift baseline
 * (promote.drift.baseline, else the highest vN) as gauges per field. A
 * failure is logged, never the run's. */
void kiln_kafka_metrics_update_drift(struct krun *r);

/* kafka_http.c: GET /metrics, GET /healthz and POST /v1/snapshot. */
int kiln_kafka_http_start(struct krun *r);
void kiln_kafka_http_stop(struct krun *r);
bool kiln_kafka_snapshot_requested(struct krun *r, uint64_t *ticket);
void kiln_kafka_snapshot_answered(struct krun *r, uint64_t ticket, int rc);

/* kafka_watchdog.c: the drain's deadline and the service manager's watchdog. */
/* Ends the process drain_seconds after a stop was asked for (a signal, or
 * the main loop ending), whatever the main thread is blocked in: nothing is
 * lost, the next run reads again what was not committed. It watches from
 * the start, so a stop that arrives while librdkafka holds the main thread
 * (a rebalance callback, a broker that is gone) is bounded too.
 *
 * It also sends the systemd watchdog's WATCHDOG=1 (core/notify.h), so a
 * loop turn that blocks for a while (a snapshot waiting on a stalled store,
 * which the store's stall limit and retries end) does not starve it: it
 * kicks while the main loop's heartbeat is younger than
 * KILN_KAFKA_STUCK_SECONDS, and stops kicking once a turn (setup, a poll, a
 * snapshot) has taken longer, so the manager restarts a run that is stuck.
 * Only this thread kicks. */
#define KILN_KAFKA_STUCK_SECONDS 300

struct kiln_kafka_watchdog {
	volatile sig_atomic_t *stop;
	_Atomic unsigned seconds;
	_Atomic bool draining, done;
	_Atomic int64_t deadline_ms;   /* -1 until a stop is seen */
	_Atomic int64_t *heartbeat_ms; /* the main loop's last turn (now_ms) */
	kiln_notify_watchdog notify;   /* kicked from the watchdog thread only */
};

int64_t kiln_kafka_watchdog_deadline(struct kiln_kafka_watchdog *w);
void *kiln_kafka_watchdog(void *arg);

/* kafka_reload.c: on SIGHUP, the pipeline file loaded again (with the
 * run's --set overrides) and what may change while running applied: log.*
 * and snapshot.*; one log line names the keys applied and the changed keys
 * ignored (they need a restart), never a value. A file that no longer
 * loads is refused with its file:line:col error and the run goes on as it
 * was. Brackets the reload with RELOADING=1 and READY=1. */
void kiln_kafka_reload(struct krun *r);

#endif
