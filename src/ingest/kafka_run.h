/* The Kafka source, kiln_source_kafka (ingest/source.h), a streaming row
 * of the run engine (ingest/engine.h): a long-running member of a consumer
 * group that lands each batch in the raw zone, curates it, and has the
 * engine commit snapshots (every N records, every T seconds, on request,
 * on SIGTERM) whose lineage.json moves each partition it owns from the
 * offset it read there, compare-and-swap, so whatever is consumed is
 * committed exactly once or consumed again (docs/STREAMING.md). What this
 * header adds: the librdkafka version and the brokers' probe. */
#ifndef KILN_INGEST_KAFKA_RUN_H
#define KILN_INGEST_KAFKA_RUN_H

#include "ingest/pipeline.h"

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

#endif
