/* What openlineage.c (the section, the events) and queue.c (the queue
 * folder and delivery) share. The handle's invariants: `cfg` does not
 * change after kiln_openlineage_open; the queue folder is written by
 * whoever emits (one file per event, atomically) and sent by the one
 * process holding its .lock (flock), so two commands sending at once do
 * not send the same file twice; the counters are atomics read by /metrics. */
#ifndef KILN_OPENLINEAGE_INTERNAL_H
#define KILN_OPENLINEAGE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "contract/contract.h"
#include "core/buf.h"
#include "ingest/pipeline.h"
#include "manifest/manifest.h"
#include "openlineage/openlineage.h"

typedef struct kiln_ol_config {
	const char *url;  /* the HTTP transport: POST each event here, or */
	const char *file; /* the file transport: append each as a JSON line, or */
	const char
	    *kafka_topic; /* the Kafka transport: produce each to this topic of the pipeline's brokers */
	const char *token_file; /* http: "Authorization: Bearer <its content>" */
	const char *namespace_; /* the job's namespace */
	const char *queue_dir;
	uint64_t queue_max_bytes;
	int64_t timeout_ms; /* one request's limit, and what close waits at most */
} kiln_ol_config;

/* The position a range began at, per source/topic/partition. */
typedef struct kiln_ol_position {
	char *topic, *path;
	int32_t partition;
	int64_t next;
} kiln_ol_position;

struct kiln_openlineage {
	kiln_ol_config cfg;
	const kiln_pipeline *p;
	char *token;          /* NULL for the file transport */
	char url_shown[4200]; /* cfg.url with any user information redacted: what logs name */
	size_t token_len;
	char producer[160];
	char job_name[300];
	char repo_ns[4200];      /* the manifest repository: the output datasets' namespace */
	char input_ns[600];      /* kafka://broker, file://host, ... */
	char *schema_facets;     /* rendered once from the contract ("" when it does not load) */
	kiln_manifest *manifest; /* opened when first needed (profiles, positions) */

	/* the current run */
	char run_id[37];
	const char *job_type;
	bool streaming, open, started; /* a run open; its START emitted */
	int64_t run_start_ms;
	kiln_ol_position *pos;
	size_t pos_count;
	bool pos_read;

	/* delivery */
	unsigned seq;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;
	atomic_bool stopping; /* stop, read by the sender between events */
	bool refused_logged;
	void *kafka; /* rd_kafka_t *, the Kafka transport's, made when first needed */
	atomic_uint_fast64_t kafka_delivered, kafka_failed; /* its delivery reports */
	atomic_uint_fast64_t queued, sent, dropped_full, refused, failed_sends;
};

/* Writes one event to the queue (atomically, 0600), then drops the oldest
 * events while the queue holds more than queue_max_bytes; never fails the
 * caller (a write error is logged and counted). Wakes the sender. */
void kiln_ol_enqueue(kiln_openlineage *ol, const kiln_buf *event);
/* Sends the queue oldest first until it is empty (1), an attempt fails
 * transiently (0: the rest stay), another process holds the queue (0), or
 * deadline_ms (monotonic) passes (0), or *abort turns true (0; NULL: no
 * abort). A permanent refusal (4xx other than 408 and 429) drops the
 * event, logged once per handle. */
int kiln_ol_send_queue(kiln_openlineage *ol, int64_t deadline_ms, const atomic_bool *abort);
/* Flushes and destroys the Kafka transport's producer (within timeout_ms). */
void kiln_ol_producer_close(kiln_openlineage *ol);
/* The sender thread's body. */
void *kiln_ol_sender(void *ol);
/* close's last sending: tries again after transient failures while
 * timeout_ms lasts (an endpoint that is down answers at once: one try). */
void kiln_ol_flush(kiln_openlineage *ol);
int64_t kiln_ol_now_ms(void);  /* monotonic */
int64_t kiln_ol_wall_ms(void); /* since the epoch */

/* emit.c, for the commands' events (emit_versions.c) */
struct kiln_ol_dataset;
struct kiln_version;
struct kiln_stats;
/* Renders and queues one event of the open run. */
void kiln_ol_emit(kiln_openlineage *ol, const char *type, int64_t time_ms, const char *error,
                  const struct kiln_ol_dataset *in, size_t n_in, const struct kiln_ol_dataset *outs,
                  size_t n_out);
/* Opens the run (a new runId) if none is, and emits its START once. */
void kiln_ol_ensure_started(kiln_openlineage *ol);
/* The version, schema and data quality facets of a dataset version. */
int kiln_ol_version_facets(kiln_openlineage *ol, kiln_buf *f, const struct kiln_version *v,
                           const char *version, uint64_t bytes, uint64_t files);
uint64_t kiln_ol_split_bytes(const struct kiln_stats *s);

#endif
