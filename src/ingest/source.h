/* A source: where a run's records come from, as one row of function
 * pointers with the pipeline keys it owns (like a Fluent Bit input plugin
 * and its config map). Every row delivers into the one sink every run
 * shares (ingest/sink.h); the run engine (ingest/engine.h) drives it in
 * one of two modes.
 *
 * One-shot (file, stdin, replay): kiln_ingest_run (ingest/ingest_loop.h)
 * reads the input once and commits at its end:
 *
 *   open -> read (batches into the curate pool) -> [pool drained] -> end
 *        -> [shards finished, quarantine flushed] -> lineage -> [commit]
 *        -> committed -> close
 *
 * Streaming (Kafka; a directory source that picks up new files until
 * SIGTERM; http, which acknowledges POSTed batches after their snapshot):
 * the row sets `stream`, and the engine runs it until stopped.
 * The engine owns what every long-running source needs: the snapshot
 * policy (snapshot.records, snapshot.seconds, on request by SIGUSR1 or
 * POST /v1/snapshot, on the drain), the commit (compare-and-swap on the
 * branch, fenced on the positions the row gives), backoff after a failure,
 * the control listener (/metrics, /healthz, /v1/snapshot), notify and the
 * watchdog, SIGHUP reloads (log.*, snapshot.*) and the SIGTERM drain:
 *
 *   stream.open (state, metrics) -> [setup, sink, listener] -> stream.start
 *   loop: [policy: snapshot] -> stream.poll (batches submitted) -> [pool
 *         polled: prepare, deliver, stream.delivered] -> stream.at_end
 *         (--stop-at-end) -> stream.tick
 *   snapshot: stream.flush -> [pool drained] -> stream.positions (fenced
 *         lineage; none: nothing to commit) -> [shards, quarantine] ->
 *         stream.seal -> [commit] -> stream.committed
 *   failure (a batch or a snapshot): [pool abandoned, sink renewed] ->
 *         stream.abandon (seek back to the last commit) -> [backoff]
 *   drain: [last snapshot] -> stream.stop (leave) -> stream.close
 *   --stop-at-end: once at_end, the last snapshot is taken in the loop
 *         (one another writer fenced is abandoned and read again) and
 *         the drain has nothing left to commit
 *
 * A row may also call into the engine from inside its poll
 * (engine_internal.h): kiln_engine_snapshot (Kafka, before a rebalance
 * hands partitions over), kiln_engine_abandon, kiln_engine_fatal.
 *
 * Adding a source is one new file with its row and its settings' struct
 * (declared in its header) and one line in source.c's registry, where the
 * pipeline loader finds it by source.kind, checks the source.* keys
 * against its option_keys and has it read them into that struct
 * (configure, with file:line:col errors; kiln_pipeline.source_config);
 * kiln check asks it (check). pipeline.h holds no row's own field.
 * Nothing outside the rows and this registry asks which kind a source is
 * (a lineage.json entry names the kind that wrote it: "source", the row's
 * kind), nor reads another row's source_config. */
#ifndef KILN_INGEST_SOURCE_H
#define KILN_INGEST_SOURCE_H

#include "ingest/curate_pool.h"
#include "ingest/pipeline.h"
#include "manifest/manifest.h"

#define KILN_SOURCE_VERSION 2

struct kiln_ingest;
struct kiln_config;
struct kiln_yaml_node;
typedef struct kiln_engine kiln_engine; /* ingest/engine_internal.h */
typedef struct kiln_metrics kiln_metrics;

/* What `open` and `end` return besides errors. */
#define KILN_SOURCE_GO   1 /* go on: read (open), commit what was read (end) */
#define KILN_SOURCE_DONE 0 /* the run ends here, successfully, nothing (more) committed */

/* A streaming row's callbacks (kiln_source.stream); those marked optional
 * may be NULL. `src` is the row's state from open. A negative return is an
 * error (kiln_error_set): KILN_EINVALID and KILN_ENOMEM end the run, any
 * other abandons what was read since the last commit and backs off. */
typedef struct kiln_source_stream {
	/* The row's state (*out, set even when open fails) and its metrics,
	 * registered on m, where /metrics lists them; no I/O yet. */
	int (*open)(void **out, kiln_engine *e, kiln_metrics *m);
	/* Connects, once the run's setup, sink and listener are up. */
	int (*start)(void *src, kiln_engine *e);
	/* Reads what arrives within timeout_ms into batches
	 * (kiln_curate_pool_batch on e->sink.pool) and submits those that are
	 * due (full, or older than source.batch.ms), in offset order per
	 * position. */
	int (*poll)(void *src, kiln_engine *e, int timeout_ms);
	/* Optional (--stop-at-end): everything there is has been read; the
	 * last snapshot follows. Without it --stop-at-end is refused. */
	bool (*at_end)(void *src, kiln_engine *e);
	/* Submits every open batch (a snapshot drains the pool next). */
	int (*flush)(void *src, kiln_engine *e);
	/* Optional: lineage moves without records wait (snapshot.seconds
	 * commits them, as it commits records). */
	bool (*moves_pending)(void *src);
	/* A curated batch reached the sink: the row's position moves past it
	 * (and, say, its rejects go to a dead-letter topic). */
	int (*delivered)(void *src, kiln_engine *e, kiln_batch *b);
	/* The snapshot's lineage: one entry per position that moved since the
	 * last commit, fenced (expect_next: the branch's as the row last saw
	 * it). *out: calloc'ed, the engine frees it; *n 0: nothing to commit. */
	int (*positions)(void *src, kiln_engine *e, kiln_lineage_entry **out, size_t *n);
	/* Optional: just before the commit, what the row sent elsewhere is
	 * delivered (dead letters); an error fails the snapshot. */
	int (*seal)(void *src, kiln_engine *e);
	/* The commit landed with these entries: they fence the next one (an
	 * HTTP source acknowledges its batches here; e->out->commit holds the
	 * commit's id). */
	void (*committed)(void *src, kiln_engine *e, const kiln_lineage_entry *lineage, size_t n);
	/* The engine dropped what was read since the last commit (the pool is
	 * abandoned): the row drops its open batches, reads the lineage again
	 * and seeks back to it. */
	int (*abandon)(void *src, kiln_engine *e);
	/* Optional: about once a second and after each snapshot (gauges). */
	void (*tick)(void *src, kiln_engine *e);
	/* Optional: after the drain's last snapshot, leaves (a consumer group)
	 * by e->drain_until_ms. */
	void (*stop)(void *src, kiln_engine *e);
	/* Frees the state (NULL is fine); the pool is still open. */
	void (*close)(void *src, kiln_engine *e);
} kiln_source_stream;

/* What kiln check is told about a source: check ("source", "brokers",
 * "topic"), whether it passed, and a one-line message (no secret). */
typedef void (*kiln_source_say)(void *ctx, const char *check, bool ok, const char *message);

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
	/* Optional: called on each curated batch before the sink gets it
	 * (after kiln_sink_dedup: with dedup, duplicates are rejects already). */
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

	/* Version 2. */
	/* NULL: one-shot (open ... close above, driven by kiln_ingest_run);
	 * else the row streams and the engine drives it (open, read, end,
	 * lineage, committed and close above are NULL; prepare is used). */
	const kiln_source_stream *stream;
	/* It can land what it reads in the raw zone (raw.enabled, on by
	 * default), which kiln replay rebuilds a branch from. */
	bool raw_zone;
	/* Optional: reads its source.* keys beyond kind, name,
	 * max_record_bytes and max_depth (which the loader reads) into its own
	 * settings, a struct it allocates on p->arena and sets as
	 * p->source_config (source.path and source.batch, which several rows
	 * share, into the pipeline's fields), each error at file:line:col with
	 * the key's path; may set source_name (else the loader sets it from
	 * source.name after). It may pick another row (a file source with path
	 * "-" is stdin). */
	int (*configure)(kiln_pipeline *p, struct kiln_config *cfg, const struct kiln_yaml_node *src);
	/* Optional: the names it reads (lineage.json's topic); NULL: source_name. */
	bool (*reads_name)(const kiln_pipeline *p, const char *name);
	/* Optional: settings a run would trip on late or leak (credentials
	 * where they would be logged): KILN_EINVALID, shown redacted. */
	int (*settings)(const kiln_pipeline *p);
	/* What kiln check calls a problem with its settings ("source"). */
	const char *check_name;
	/* For kiln check, after settings passed: probes the input (a file is
	 * readable, brokers answer within timeout_ms and list the topics)
	 * and says what it found, once or more. */
	void (*check)(const kiln_pipeline *p, int timeout_ms, kiln_source_say say, void *ctx);
	/* It reads a folder of files (source_path): kiln run reports the files
	 * it read (kiln_run_result.files_read, files_changed). */
	bool reads_files;
	/* Optional: wipes the secrets its settings hold (Kafka's source.options
	 * read from NAME_file); kiln_pipeline_free calls it before the arena
	 * that holds them goes. */
	void (*forget)(const kiln_pipeline *p);
	/* Optional: whether a position without lineage began where its input
	 * then was, not at offset 0 (Kafka's source.start: latest): kiln replay
	 * starts such a position at its first raw object. */
	bool (*starts_late)(const kiln_pipeline *p);
	/* Optional: the names it reads when they are a fixed list (Kafka's
	 * source.topics), *n of them; kiln replay names them when the branch's
	 * lineage.json has none of them. */
	const char *const *(*names)(const kiln_pipeline *p, size_t *n);
	/* Optional, NULL-terminated: its keys whose values are secrets
	 * (Kafka: librdkafka's sensitive source.options properties); kiln
	 * check never prints them. */
	const char *const *secret_keys;
} kiln_source;

/* The rows (curate_run.c, dir_source.c with dir_run.c, replay_run.c, kafka_run.c,
 * http_source.c). */
extern const kiln_source kiln_source_file;
extern const kiln_source kiln_source_stdin;
extern const kiln_source kiln_source_directory;
extern const kiln_source kiln_source_replay;
extern const kiln_source kiln_source_kafka;
extern const kiln_source kiln_source_http;

/* The source.kind of a Kafka source, the "source" of its lineage.json
 * entries (as each row's kind is its entries'). */
#define KILN_SOURCE_KAFKA_KIND KILN_LINEAGE_KAFKA

/* The path a stdin source's lineage.json entries carry (with "bytes" 0 and
 * the fingerprint of no bytes): entries written before "source" existed
 * tell stdin from a Kafka partition by it. A file source is never named
 * "-" (that path is stdin). */
#define KILN_SOURCE_STDIN_PATH KILN_LINEAGE_STDIN_PATH

/* The topic of a directory source's file: <source.name>=<file name>, the
 * name's bytes outside [A-Za-z0-9._-] written =XX (docs/FORMATS.md). No
 * other source's names hold '=' (source.name and Kafka topics refuse it),
 * which tells a directory's entries written before "source" existed. */
#define KILN_SOURCE_DIR_SEP KILN_LINEAGE_DIR_SEP

/* Whether the pipeline reads the topic `name`: its row's reads_name (Kafka:
 * one of its source.topics; directory: <source.name>=...), else its
 * source.name (file, stdin). */
bool kiln_source_reads_name(const kiln_pipeline *pipeline, const char *name);

/* Settings a run would trip on late or leak, the row's settings:
 * KILN_EINVALID when a file or directory source's path (lineage.json
 * records it, a JSON string) is not valid UTF-8, or when a Kafka source's
 * brokers hold user:password@ (shown redacted); else 0. */
int kiln_source_check_settings(const kiln_pipeline *pipeline);

/* Whether some row lists key among its secret_keys: kiln check prints
 * "<redacted>" for its value. */
bool kiln_source_secret_key(const char *key);

/* The row a pipeline's source.kind names ("file", "stdin", "directory", "kafka", "http"), or
 * NULL for any other kind. The rows are static. */
const kiln_source *kiln_source_find(const char *kind);
/* The registry in order: row number i, NULL past the last one. */
const kiln_source *kiln_source_at(size_t i);

#endif
