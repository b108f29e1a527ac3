/* A source: where a run's records come from, as one row of function
 * pointers with the pipeline keys it owns (like a Fluent Bit input plugin
 * and its config map). kiln_ingest_run (ingest/ingest_loop.h) drives a
 * source into the one sink every run shares (ingest/sink.h):
 *
 *   open -> read (batches into the curate pool) -> [pool drained] -> end
 *        -> [shards finished, quarantine flushed] -> lineage -> [commit]
 *        -> committed -> close
 *
 * Adding a source is one new file with its row and one line in source.c's
 * registry, where the pipeline loader finds it by source.kind and checks
 * the source.* keys against its option_keys. The Kafka source
 * (ingest/kafka_run.h) is not a row yet: it runs for ever, commits many
 * snapshots and is driven by rebalances; it shares the sink, not the loop,
 * and the pipeline loader reads its keys itself (KILN_SOURCE_KAFKA_KIND). */
#ifndef KILN_INGEST_SOURCE_H
#define KILN_INGEST_SOURCE_H

#include "ingest/curate_pool.h"
#include "ingest/pipeline.h"
#include "manifest/manifest.h"

#define KILN_SOURCE_VERSION 1

struct kiln_ingest;

/* What `open` and `end` return besides errors. */
#define KILN_SOURCE_GO   1 /* go on: read (open), commit what was read (end) */
#define KILN_SOURCE_DONE 0 /* the run ends here, successfully, nothing (more) committed */

typedef struct kiln_source {
	unsigned version;               /* KILN_SOURCE_VERSION */
	const char *kind;               /* its source.kind */
	const char *const *option_keys; /* the source.* keys it reads, NULL-terminated */

	/* Finds where to resume (the branch's lineage.json, in->setup) and opens
	 * the input; *out is the source's state, set even when open fails.
	 * args: the source's own (NULL for most). KILN_SOURCE_GO, or
	 * KILN_SOURCE_DONE to end the run before anything is written. */
	int (*open)(void **out, struct kiln_ingest *in, const void *args);
	/* Reads every record into batches (kiln_curate_pool_batch on
	 * in->sink.pool) and submits them in offset order. */
	int (*read)(void *src, struct kiln_ingest *in);
	/* Optional: called on each curated batch before the sink gets it. */
	void (*prepare)(void *src, kiln_batch *b);
	/* Everything read was delivered: KILN_SOURCE_GO, or
	 * KILN_SOURCE_DONE (e.g. nothing new; the source pushed or reported). */
	int (*end)(void *src, struct kiln_ingest *in);
	/* The lineage entries (fenced) the commit records: sets
	 * snap->lineage and lineage_count (owned by the source). */
	int (*lineage)(void *src, struct kiln_ingest *in, kiln_snapshot *snap);
	/* Optional: the commit's result, which it may turn into another error. */
	int (*committed)(void *src, struct kiln_ingest *in, int rc);
	/* Frees the state (NULL is fine); the pool is still open. */
	void (*close)(void *src, struct kiln_ingest *in);
} kiln_source;

/* The rows (curate_run.c, dir_source.c, replay_run.c). */
extern const kiln_source kiln_source_file;
extern const kiln_source kiln_source_stdin;
extern const kiln_source kiln_source_directory;
extern const kiln_source kiln_source_replay;

/* The source.kind of a Kafka source, the one kind that is not a row. */
#define KILN_SOURCE_KAFKA_KIND "kafka"

/* The path a stdin source's lineage.json entries carry (with "bytes" 0 and
 * the fingerprint of no bytes): it tells them from a Kafka partition's. A
 * file source is never named "-" (that path is stdin). */
#define KILN_SOURCE_STDIN_PATH "-"

/* The topic of a directory source's file: <source.name>=<file name>, the
 * name's bytes outside [A-Za-z0-9._-] written =XX (docs/FORMATS.md). No
 * other source's names hold '=' (source.name and Kafka topics refuse it). */
#define KILN_SOURCE_DIR_SEP '='

/* The kind of source that wrote a lineage.json entry: "directory" (a path,
 * and a topic with KILN_SOURCE_DIR_SEP), "file" (a path), "stdin"
 * (KILN_SOURCE_STDIN_PATH) or KILN_SOURCE_KAFKA_KIND (no path; stdin
 * entries of a kiln before issue 25 look the same). Static. */
const char *kiln_source_entry_kind(const kiln_lineage_entry *entry);

/* Whether the pipeline reads the topic `name`: one of its source.topics
 * (Kafka), its source.name (file, stdin), or a file of its folder
 * (directory: <source.name>=...). */
bool kiln_source_reads_name(const kiln_pipeline *pipeline, const char *name);

/* A position is never shared across source kinds: KILN_EINVALID when
 * `branch`'s lineage.json has an entry for a name the pipeline reads (its
 * topics, or its source.name) that another kind of source wrote; 0 when
 * none (or the branch does not exist). Runs check it before they read. */
int kiln_source_check_lineage(kiln_manifest *manifest, const kiln_pipeline *pipeline, const char *branch);

/* Settings a run would trip on late or leak: KILN_EINVALID when a file
 * or directory source's path (lineage.json records it, a JSON string) is not valid
 * UTF-8, or when a Kafka source's brokers hold user:password@ (shown
 * redacted); else 0. */
int kiln_source_check_settings(const kiln_pipeline *pipeline);

/* The row a pipeline's source.kind names ("file", "stdin", "directory"), or NULL for
 * any other kind (KILN_SOURCE_KAFKA_KIND included). The rows are static. */
const kiln_source *kiln_source_find(const char *kind);
/* The registry in order: row number i, NULL past the last one. */
const kiln_source *kiln_source_at(size_t i);

#endif
