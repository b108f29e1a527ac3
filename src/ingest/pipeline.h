/* Pipeline configs (pipelines/NAME.yaml, docs/PIPELINES.md): what `kiln run`
 * reads, validates, pseudonymises, splits, shards, stores and commits.
 * ${NAME} and ${NAME:-default} are expanded from the environment and
 * --set dotted.key=value overrides apply before the config is read; every
 * error names file:line:col (or --set) and the key. Relative paths are
 * relative to the pipeline file's folder. No secret is ever read from the
 * config: keys and credentials come from files or the environment. */
#ifndef KILN_INGEST_PIPELINE_H
#define KILN_INGEST_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "ingest/gates.h"
#include "shard/split.h"
#include "store/store.h"

struct kiln_source;

struct kiln_config;

/* dedup.max_keys: its default (10 million committed keys take 384 MiB,
 * docs/PIPELINES.md "Dedup by key") and the largest value accepted */
#define KILN_PIPELINE_DEDUP_MAX_KEYS     10000000
#define KILN_PIPELINE_DEDUP_MAX_KEYS_CAP 4000000000LL

typedef struct kiln_pipeline {
	const char *file;    /* the pipeline file, as given */
	const char *dataset; /* [a-z0-9][a-z0-9._-]* */
	const char *branch;  /* default "main" */

	const char *contract; /* path */
	const char *schema;   /* schema object name or NULL */
	int unknown_fields;   /* -1: the contract's setting; else kiln_unknown_policy */

	/* the row that reads it (kiln_source_find, ingest/source.h) */
	const struct kiln_source *source;
	/* the row's own typed settings, made by its configure on the arena (the
	 * directory's kiln_dir_config, Kafka's kiln_kafka_config, http's
	 * kiln_http_config); NULL for a row without keys of its own */
	const void *source_config;
	const char *source_path; /* file and stdin sources; directory sources: the folder */
	const char *source_name; /* the topic name in lineage, quarantine and shard sources (Kafka: its first
	                            topic) */
	/* the streaming rows that batch what arrives (kafka, http: source.batch,
	 * read by each row's configure; the loader sets the defaults after) */
	size_t batch_records; /* a batch closes at this many records (default 8192), */
	size_t batch_bytes;   /* or bytes (default 1 MiB), */
	unsigned batch_ms;    /* or this long after its first record (default 100) */
	bool raw_zone;        /* write consumed batches to raw/ (default true for kafka, http) */
	/* snapshot policy (streaming sources): commit after this many records, at least this
	 * often while records arrive, and drain within drain_seconds on SIGTERM */
	uint64_t snapshot_records;  /* default 100000; 0 = no count trigger */
	unsigned snapshot_seconds;  /* default 60; 0 = no time trigger */
	unsigned drain_seconds;     /* default 30 */
	const char *metrics_listen; /* HOST:PORT for /metrics, /healthz, /v1/snapshot; NULL: none */
	bool log_json;              /* JSON log lines on stderr (default); false: plain text */
	kiln_log_level log_level;   /* the least severe level logged (default info) */
	size_t max_record_bytes;    /* default 1 MiB */
	uint32_t max_depth;         /* default 128 */

	const char *key_file; /* exactly one of key_file / key_env */
	const char *key_env;
	unsigned key_version; /* default 1 */

	const char *split_key;                       /* a field path: "user_id", "customer.customer_id" */
	const struct kiln_yaml_node *split_key_node; /* where it was set, for messages */
	const char *split_salt;
	double ratios[KILN_SPLIT_COUNT];

	/* dedup: (docs/PIPELINES.md): a record whose key fields' values were
	 * committed on the branch within dedup_window_ms, or came earlier in
	 * the run, is quarantined as duplicate. dedup_key_count 0: no dedup. */
	const char **dedup_keys;                             /* field paths, as split.key's */
	const struct kiln_yaml_node *const *dedup_key_nodes; /* where each was set, for messages */
	size_t dedup_key_count;
	int64_t dedup_window_ms;
	size_t dedup_max_keys; /* the index's bound, committed and pending keys together */
	/* dedup.replaces_key: the key of the branch's index that this
	 * pipeline's dedup.key (or, without one, its end of dedup) replaces;
	 * without it a branch last committed with another key is refused */
	const char **dedup_replaces;
	size_t dedup_replaces_count;

	size_t target_bytes;   /* default 64 MiB */
	int zstd_level;        /* default 3 */
	unsigned zstd_threads; /* shards.zstd_threads; 0: one per CPU (the bytes do not depend on it) */

	const char *store_url;
	kiln_store_options store;

	unsigned workers;              /* validate/curate threads; 0 = one per CPU */
	bool profile;                  /* profile.enabled: a data profile per version (default true) */
	uint32_t profile_categories_k; /* profile.categories.k: categories from the data (default 20) */

	kiln_gates gates; /* promote: release gates for `kiln promote` */

	/* quarantine.max_ratio: a snapshot whose quarantined share of the records
	 * it read exceeds this is not committed (0: no limit; else in (0, 1]) */
	double quarantine_max_ratio;
	/* retention.raw / retention.quarantine: seconds after which `kiln gc
	 * --retention` collects a zone's objects once committed (0: kept forever) */
	int64_t retention_raw, retention_quarantine;

	const char *manifest_repo;
	const char
	    *manifest_remote; /* NULL, or a repository runs fetch from and push to (manifest/remote.h) */
	const char *author_name, *author_email;
	const char *signing_key_file; /* kiln keygen's private key file; NULL: unsigned commits */
	/* manifest.compact_loose_objects: after a commit, compact the repository
	 * when it has this many more loose objects than the last compaction left
	 * (default 1000; 0: never); manifest.compact_grace_seconds: unreachable
	 * objects younger than this stay (default 300) */
	uint64_t compact_loose_objects;
	unsigned compact_grace_seconds;

	struct kiln_yaml_doc *doc; /* owns the strings above */
	struct kiln_arena *arena;
} kiln_pipeline;

/* Loads `path`, applying `sets` ("dotted.key=value", count n) after
 * expanding the environment. */
int kiln_pipeline_load(kiln_pipeline **out, const char *path, char *const *sets, size_t n);
void kiln_pipeline_free(kiln_pipeline *pipeline);

/* For the rows that batch what arrives (Kafka, http): reads src's
 * source.batch {records, bytes, ms} into the pipeline's batch_* (0 where
 * unset: the loader's defaults follow), each error at file:line:col. */
int kiln_pipeline_read_batch(kiln_pipeline *pipeline, struct kiln_config *cfg,
                             const struct kiln_yaml_node *src);

#endif
