/* What the modules of the Kafka row share (kafka_run.c is the row; the
 * librdkafka client, the dead-letter producer, watermark queries and the
 * row's metrics each live in a kafka_<part>.c of their own): the row's
 * state, struct krun, owned by the thread that runs the engine
 * (engine_internal.h), and what each module exports to it. Threads and
 * per-partition state: see the opening comment of kafka_run.c. */
#ifndef KILN_INGEST_KAFKA_INTERNAL_H
#define KILN_INGEST_KAFKA_INTERNAL_H

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "core/metrics.h"
#include "ingest/curate_pool.h"
#include "ingest/engine_internal.h"
#include "ingest/kafka_run.h"

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

/* The row's own metrics (kafka_metrics.c); the run's are the engine's. */
struct metrics {
	kiln_counter *gaps, *gap_offsets, *dead_letters, *rebalances;
	kiln_gauge *partitions;
};

/* The Kafka row's state (kiln_source_kafka's void *). */
struct krun {
	kiln_engine *e; /* the run: its options, setup, sink, fatal error */
	const kiln_pipeline *p;
	const kiln_kafka_config *c; /* p's, the row's settings */
	rd_kafka_t *rk, *dlq;
	rd_kafka_topic_t **topics; /* a handle per subscribed topic (see kafka_client.c) */
	size_t topic_count;
	struct part **parts;
	size_t nparts, parts_cap;
	bool ever_assigned;          /* the group gave this member an assignment (even an empty one) */
	bool reached;                /* a broker answered (metadata or an assignment) */
	struct watermarks *wm_stuck; /* a watermark query that outlived its wait, or NULL */
	_Atomic int dlq_failed;
	struct metrics mx;
	kiln_schema_registry *registry; /* source.format: avro; NULL for JSON */
};

/* kafka_run.c: librdkafka's rebalance callback (opaque: the struct krun). */
void kiln_kafka_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *list,
                          void *opaque);

/* kafka_config.c: the row's keys (kiln_source.option_keys), reading them
 * into its kiln_kafka_config (configure), refusing brokers with
 * credentials (settings), the topics it reads (reads_name, names), kiln
 * check's probe (check), wiping the secret options (forget) and whether
 * it starts at the end (starts_late). */
extern const char *const kiln_kafka_option_keys[];
/* librdkafka's sensitive properties among source.options (the row's secret_keys). */
extern const char *const kiln_kafka_secret_options[];
int kiln_kafka_configure(kiln_pipeline *p, struct kiln_config *cfg, const struct kiln_yaml_node *src);
bool kiln_kafka_reads_name(const kiln_pipeline *p, const char *name);
int kiln_kafka_settings(const kiln_pipeline *p);
void kiln_kafka_check(const kiln_pipeline *p, int timeout_ms, kiln_source_say say, void *ctx);
void kiln_kafka_forget(const kiln_pipeline *p);
bool kiln_kafka_starts_late(const kiln_pipeline *p);
const char *const *kiln_kafka_names(const kiln_pipeline *p, size_t *n);

/* kafka_client.c: the consumer (subscribed to the pipeline's topics) and,
 * with a dead-letter topic, its producer, with kiln's settings and the
 * pipeline's source.options; rebalance is the consumer's rebalance callback
 * (the run's, kiln_kafka_rebalance: handed in, so the client never calls
 * into kafka_run.c). */
int kiln_kafka_client_open(struct krun *r,
                           void (*rebalance)(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                             rd_kafka_topic_partition_list_t *list, void *opaque));
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

/* kafka_metrics.c: the row's counters and gauges, and each owned
 * partition's lag. */
int kiln_kafka_metrics_new(struct metrics *mx, kiln_metrics *m);
void kiln_kafka_metrics_update_lag(struct krun *r);

#endif
