/* The Kafka source, kiln_source_kafka (ingest/source.h), a streaming row
 * of the run engine (ingest/engine.h): a long-running member of a consumer
 * group that lands each batch in the raw zone, curates it, and has the
 * engine commit snapshots (every N records, every T seconds, on request,
 * on SIGTERM) whose lineage.json moves each partition it owns from the
 * offset it read there, compare-and-swap, so whatever is consumed is
 * committed exactly once or consumed again (docs/STREAMING.md). What this
 * header adds: the librdkafka version, the brokers' probe and a producer's
 * configuration. */
#ifndef KILN_INGEST_KAFKA_RUN_H
#define KILN_INGEST_KAFKA_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include "ingest/pipeline.h"
#include "ingest/schema_registry.h"

typedef enum kiln_gap_policy {
	KILN_GAP_STOP, /* log, count, exit non-zero: an operator decides */
	KILN_GAP_SKIP, /* log, count, record in lineage.json, go on from the oldest offset left */
} kiln_gap_policy;

typedef struct kiln_kafka_option {
	const char *name, *value;
	bool secret; /* value read from NAME_file: wiped when the pipeline is freed (the row's forget) */
} kiln_kafka_option;

/* The Kafka row's own settings (kiln_pipeline.source_config), read by its
 * configure (kafka_config.c) from source.*; source.batch is the pipeline's
 * (batch_*), shared with the http row. */
typedef struct kiln_kafka_config {
	const char *brokers;
	const char **topics;
	size_t topic_count;
	const char *group;
	const kiln_kafka_option *options; /* source.options, passed to librdkafka as they are */
	size_t option_count;
	bool start_latest; /* a partition without lineage starts at its end, not its beginning */
	kiln_gap_policy on_gap;
	const char *dead_letter_topic; /* NULL: none */
	unsigned connect_timeout;      /* --stop-at-end: give up when no broker answered in this many seconds
	                                  (default 30) */
	bool avro; /* source.format: avro (the Confluent wire format, decoded with the registry's schema) */
	kiln_schema_registry_config registry; /* source.schema_registry, with avro */
} kiln_kafka_config;

/* For what curates a Kafka pipeline's records again (kiln replay from the
 * raw zone, kiln quarantine replay): with source.format: avro, *out is a
 * schema registry client for the pipeline (else NULL, as for any other
 * pipeline), and kiln_kafka_decode_batch has a batch decoded with it on the
 * curate workers (nothing when reg is NULL). */
struct kiln_batch;
int kiln_kafka_registry_open(const kiln_pipeline *p, kiln_schema_registry **out);
void kiln_kafka_decode_batch(struct kiln_batch *b, kiln_schema_registry *reg);

/* The version of the librdkafka loaded at run time ("2.0.2"), static. */
const char *kiln_kafka_librdkafka_version(void);

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

/* A producer's configuration for a Kafka pipeline's brokers, as the run's
 * own producer (the dead-letter topic's) has it: bootstrap.servers,
 * client.id, idempotence and source.options (OpenLineage's Kafka transport,
 * docs/LINEAGE.md). The caller owns *out (rd_kafka_new takes it). */
struct rd_kafka_conf_s;
int kiln_kafka_producer_conf(struct rd_kafka_conf_s **out, const kiln_pipeline *pipeline);

#endif
