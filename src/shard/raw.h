/* The raw zone: every consumed Kafka batch, byte-exact, before curation. One
 * zstd-compressed JSON Lines object per batch (all of one topic/partition) at
 * raw/<topic>/<partition>/<first>-<last>.jsonl.zst, a name derived from the
 * batch alone, so a replay overwrites the same object with the same bytes.
 * Each line holds one message's topic, partition, offset, timestamp, key,
 * value and headers; bytes that are not UTF-8 are base64-encoded, so decoding
 * gives back exactly what was consumed (docs/FORMATS.md, "Raw zone"). The raw
 * zone lives in the restricted on-prem zone: it holds the original data. */
#ifndef KILN_SHARD_RAW_H
#define KILN_SHARD_RAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "store/store.h"

typedef struct kiln_raw_header {
	const char *name;
	size_t name_len;
	const void *value;
	size_t value_len;
	bool null_value;
} kiln_raw_header;

typedef struct kiln_raw_record {
	const char *topic; /* NUL-terminated */
	int32_t partition;
	int64_t offset;
	int64_t timestamp;  /* ms since epoch; meaningful when timestamp_type != 0 */
	int timestamp_type; /* 0 none, 1 create time, 2 log-append time (librdkafka's RD_KAFKA_TIMESTAMP_*
	                       numbering) */
	const void *key;
	size_t key_len;
	bool null_key;
	const void *value;
	size_t value_len;
	bool null_value;
	const kiln_raw_header *headers;
	size_t header_count;
} kiln_raw_record;

/* One per thread: owns a reused ZSTD_CCtx, a spool file and line buffers. */
typedef struct kiln_raw_writer kiln_raw_writer;

/* level 0 = 3; spool_dir NULL = $TMPDIR or /tmp. store and spool_dir are
 * borrowed for the writer's life. */
int kiln_raw_writer_new(kiln_raw_writer **out, kiln_store *store, int level, const char *spool_dir);
void kiln_raw_writer_free(kiln_raw_writer *w);

/* Writes one object holding recs[0..n) — all of one topic/partition, offsets
 * strictly ascending — at raw/<topic>/<partition>/<first>-<last>.jsonl.zst
 * (first/last = offsets of recs[0] and recs[n-1], decimal, no padding),
 * overwriting an object of that name (a replay writes the same bytes).
 * out_key (may be NULL) receives the key. The records' bytes are only read
 * during the call. KILN_EINVALID for an empty batch, mixed topics or
 * partitions, offsets not ascending, a topic that cannot name an object, or
 * an unknown timestamp_type; store errors as kiln_store_put_file. */
int kiln_raw_write(kiln_raw_writer *w, const kiln_raw_record *recs, size_t n, char out_key[512]);

/* Appends r as one line of an object (with its '\n') to out: exactly the
 * bytes kiln_raw_write stores for it. */
int kiln_raw_render(kiln_buf *out, const kiln_raw_record *r);

/* Decodes an object's bytes (whole object), calling cb per record in order;
 * the record and everything it points to live until cb returns. A
 * non-zero return from cb stops decoding and is returned. A corrupt object
 * is KILN_EINVALID with a message naming `where` (and the line number),
 * never a value: input that is not exactly one complete zstd frame with a
 * matching checksum is refused before cb is first called; a malformed line
 * (bad JSON, bad base64, a missing, doubled or unknown member) stops
 * decoding there, after the records before it were passed to cb. */
int kiln_raw_decode(const void *zst, size_t len, const char *where,
                    int (*cb)(void *ctx, const kiln_raw_record *r), void *ctx);

/* Reads the object `key` from the store and decodes it (errors name the key). */
int kiln_raw_read(kiln_store *store, const char *key, int (*cb)(void *ctx, const kiln_raw_record *r),
                  void *ctx);

/* Lists the raw objects of topic (NULL = all topics) and partition (-1 =
 * all), calling cb(ctx, key, topic, partition, first, last) sorted by topic
 * (bytewise), partition, first offset, then last offset. Keys under raw/
 * whose name does not parse are skipped. The strings passed to cb live until
 * it returns; a non-zero return stops the listing and is returned. */
int kiln_raw_list(kiln_store *store, const char *topic, int32_t partition,
                  int (*cb)(void *ctx, const char *key, const char *topic, int32_t partition, int64_t first,
                            int64_t last),
                  void *ctx);

/* One raw object as the store lists it. */
typedef struct kiln_raw_object {
	const char *key, *topic;
	int32_t partition;
	int64_t first, last;
	uint64_t size;
	int64_t mtime; /* seconds since the epoch, 0 when the store cannot tell */
} kiln_raw_object;

/* kiln_raw_list with each object's size and store mtime, in the same order. */
int kiln_raw_list_objects(kiln_store *store, const char *topic, int32_t partition,
                          int (*cb)(void *ctx, const kiln_raw_object *obj), void *ctx);

#endif
