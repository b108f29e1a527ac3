/* The curate stage every source shares: batches of records of one
 * topic/partition go in, in order; worker threads write each batch to the
 * raw zone (when the batch carries raw records), then validate, pseudonymise
 * and split its records; the pool's owner gets the results back in
 * submission order through its consume callback, on its own thread.
 *
 * Batch states: free (on the pool's free list) -> filling (owned by the
 * source) -> submitted (in the ring: filled, taken by a worker, done) ->
 * consumed -> released (borrowed records given back) -> free. At most RING
 * batches are submitted at once, so memory stays bounded whatever the input
 * size. Any error makes the caller abandon: every submitted batch is then
 * released unconsumed. Worker threads are named "curate-N". */
#ifndef KILN_INGEST_CURATE_POOL_H
#define KILN_INGEST_CURATE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/contract.h"
#include "contract/validate.h"
#include "core/buf.h"
#include "ingest/pipeline.h"
#include "manifest/manifest.h"
#include "mask/curate.h"
#include "mask/key.h"
#include "quality/profile.h"
#include "shard/quarantine.h"
#include "shard/raw.h"
#include "shard/split.h"
#include "shard/writer.h"
#include "store/store.h"

typedef struct kiln_batch_reject {
	size_t index; /* the record's index in its batch */
	kiln_report report;
} kiln_batch_reject;

typedef struct kiln_batch {
	/* input, set by the source: count records of one topic/partition, in
	 * ascending offset order */
	const char *topic;
	int32_t partition;
	size_t count, cap;
	const char **rec; /* the record's bytes (NULL when too_long) */
	size_t *len;
	int64_t *offset;
	bool *too_long;
	bool keep_raw;        /* write the batch to the raw zone before curating it */
	kiln_raw_record *raw; /* when keep_raw: per record what the raw zone keeps */
	size_t raw_cap;
	kiln_buf in;     /* for sources that copy records (rec[] may point into it) */
	void **borrowed; /* per record, what release() gives back (e.g. a Kafka message) */
	void (*release)(struct kiln_batch *b); /* NULL: nothing borrowed */
	uint64_t bytes;                        /* sum of len */
	int64_t opened_ms; /* monotonic time of the first record (for batch latency and timeouts) */
	void *source_ctx;  /* the source's (e.g. its partition) */
	/* Optional, set by the source: turns each record into the JSON the
	 * contract validates (Avro, ingest/schema_registry.h), on the worker:
	 * 0 with the JSON appended to out (at most max_out bytes), 1 when the
	 * record is rejected (report set), a negative code to fail the batch.
	 * rec[] (what the raw zone and the quarantine keep) stays as it is. */
	int (*decode)(void *ctx, const char *rec, size_t len, size_t max_out, kiln_buf *out,
	              kiln_report *report);
	void *decode_ctx;
	kiln_buf decoded; /* the worker's output of decode */

	/* results, set by a worker */
	kiln_buf out[KILN_SPLIT_COUNT];      /* curated records, each ending in '\n', back to back */
	size_t *out_index[KILN_SPLIT_COUNT]; /* the input record of each curated one */
	size_t *out_len[KILN_SPLIT_COUNT];   /* bytes of each, its newline included */
	size_t out_count[KILN_SPLIT_COUNT], out_cap[KILN_SPLIT_COUNT];
	/* the token digests of each split's curated records, in order
	 * (kiln_filter_collect), and per record where its digests end; valid
	 * when tokens_listed and no dedup moved records since (else the shard
	 * writer scans the records itself) */
	kiln_filter_set tokens[KILN_SPLIT_COUNT];
	size_t *tokens_end[KILN_SPLIT_COUNT];
	bool tokens_listed;
	kiln_batch_reject *rejects;
	size_t reject_count, reject_cap;
	char raw_key[512];    /* the raw object written, "" when none */
	kiln_profile profile; /* of the curated records (when the pool profiles without dedup) */
	bool profiled;
	/* when the pool dedups: per input record, a curated one's key hash
	 * (ingest/dedup_filter.h); when it also profiles, the curated values of
	 * each curated record, values[value_first[i] .. + value_n[i]), for the
	 * sink to profile the records that are not duplicates */
	unsigned char (*dedup_hash)[16];
	bool deduped; /* the sink ran it through the index (kiln_sink_dedup) */
	size_t *value_first, *value_n;
	size_t dedup_cap;
	kiln_curate_value *values;
	size_t value_count, value_cap;

	/* the pool's */
	int state;
	uint64_t seq;
	int rc;
	char err[512];
	struct kiln_batch *next_free;
} kiln_batch;

/* Room for one more record (grows the per-record arrays). */
int kiln_batch_reserve(kiln_batch *b);

/* Hands a processed batch on: its rejected records to the quarantine, its
 * curated ones to their split's shard writer, in input order; adds its
 * counts to *d (records_in, valid, quarantined, by code, per split) and its
 * profile to *profile (when both have one). A split's curated bytes that
 * go to its writer in one run may be taken by the writer (b->out[s] is
 * then another, empty buffer: kiln_shard_writer_take_run). */
int kiln_batch_deliver(kiln_batch *b, kiln_shard_writer *const writers[KILN_SPLIT_COUNT],
                       kiln_quarantine *quarantine, kiln_stats *d, kiln_profile *profile);

typedef int (*kiln_batch_consume)(void *ctx, kiln_batch *b);
/* Fills an empty batch with the next records of the input: 1 (records in
 * b), 0 (the end of the input, b left empty) or a negative error code with
 * the error set. */
typedef int (*kiln_batch_fill)(void *ctx, kiln_batch *b);

typedef struct kiln_curate_pool_options {
	const kiln_pipeline *pipeline;
	const kiln_contract *contract;
	const kiln_key *key;
	const kiln_splitter *splitter;
	const kiln_field *split_field;
	const kiln_profile_schema *profile; /* profile the curated records; NULL: no profile */
	unsigned workers;                   /* >= 1 */
	kiln_store *raw_store;              /* where batches with raw records are written; NULL: nowhere */
	/* dedup (dedup_field_count 0: none): each curated record's key hash, a
	 * keyed BLAKE2b-128 (key: dedup_key) of the values of these fields;
	 * a record without a value for one is quarantined as missing_required
	 * with its path */
	const kiln_field *const *dedup_fields;
	const char *const *dedup_paths;
	size_t dedup_field_count;
	const unsigned char *dedup_key; /* 32 bytes */
	kiln_batch_consume consume;     /* called in submission order on the owner's thread */
	void *ctx;
	/* consume on the workers instead: still in submission order and one
	 * batch at a time, by the worker that finds the oldest batch done (its
	 * first failure is returned by the owner's next submit, poll or drain);
	 * the owner's thread then only reads and submits. consume must not use
	 * what the owner's thread touches meanwhile. */
	bool deliver_on_workers;
} kiln_curate_pool_options;

typedef struct kiln_curate_pool kiln_curate_pool;

/* Starts the workers. Everything in options must outlive the pool. */
int kiln_curate_pool_new(kiln_curate_pool **out, const kiln_curate_pool_options *options);
/* Abandons what is in flight and stops the workers; NULL is fine. */
void kiln_curate_pool_free(kiln_curate_pool *pool);

/* A free, empty batch (owned by the caller until submitted or recycled);
 * NULL when out of memory. */
kiln_batch *kiln_curate_pool_batch(kiln_curate_pool *pool);
/* Gives a batch back unsubmitted (its borrowed records released). */
void kiln_curate_pool_recycle(kiln_curate_pool *pool, kiln_batch *b);
/* Hands a filled batch to the workers, waiting for a ring slot and
 * consuming finished batches meanwhile. An empty batch is recycled. The
 * first error of a worker or of consume is returned (then abandon). */
int kiln_curate_pool_submit(kiln_curate_pool *pool, kiln_batch *b);
/* Consumes every finished batch without waiting (keeps latency low while a
 * source idles). */
int kiln_curate_pool_poll(kiln_curate_pool *pool);
/* Waits until every submitted batch is processed and consumed. */
int kiln_curate_pool_drain(kiln_curate_pool *pool);

/* CPU time the workers spent in their serial turns so far: filling batches
 * (kiln_curate_pool_pull) and delivering them (deliver_on_workers), one
 * worker at a time. With the owner thread's own CPU time it is the run's
 * serial part (bench/table.sh's serial-share row). */
uint64_t kiln_curate_pool_turns_cpu_ns(kiln_curate_pool *pool);
/* deliver_on_workers only: the workers fill the batches too, so the
 * calling thread neither reads nor delivers. A worker whose turn it is
 * (one at a time, in sequence, while the ring has room) calls fill for the
 * next batch, then curates it itself; batches are consumed as with submit.
 * Returns 0 once fill gave the end of the input and every batch was
 * consumed, or the first error of fill, a worker or consume (then
 * abandon); either way no fill is in flight when it returns. The calling
 * thread sleeps meanwhile; fill may touch what it touches before and
 * after, not during. */
int kiln_curate_pool_pull(kiln_curate_pool *pool, kiln_batch_fill fill, void *ctx);
/* Waits for the workers to finish what they hold and releases every
 * submitted batch without consuming it. The pool can be used again. */
void kiln_curate_pool_abandon(kiln_curate_pool *pool);

#endif
