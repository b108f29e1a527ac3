/* Shards: curated records for one split, appended as JSON Lines to an open
 * shard that closes at target_bytes (or on flush) into one zstd frame with
 * content size and checksum, named by the BLAKE2b-256 of its compressed
 * bytes and stored once at shards/<hh>/<hash>.jsonl.zst.
 *
 * States: empty (no open record) -> filling (a spool file holds records, sources
 * track the offsets they came from) -> closed (compressed, stored, entry
 * listed) -> empty. With zstd_threads, libzstd's threads (a pool shared by
 * the writers) compress a shard while it fills (shard/spool.h,
 * kiln_spool_stream); without, it is compressed when it closes. In the
 * background mode a closed shard is sealed (its frame ended, on the
 * caller's thread), then hashed and stored on the writer's own thread while
 * the next one fills (two spools, one zstd context, at most one shard in
 * flight), and the open shard's bytes are staged by the caller and put into
 * its spool (and zstd) on a feeder thread, 1 MiB at a time, so an append
 * costs the caller one copy; a failure there is returned by a later append
 * or flush. Shards are spooled on disk, so memory does
 * not depend on target_bytes. Each closed shard's entry carries its token
 * filter (shard/filter.h: the tokens its records hold), owned by the
 * writer; the snapshot commit stores it beside the shard lists. */
#ifndef KILN_SHARD_WRITER_H
#define KILN_SHARD_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#include "shard/filter.h"
#include "shard/object.h"
#include "store/store.h"

#define KILN_SHARD_DEFAULT_TARGET (64u << 20)

typedef struct kiln_shard_writer_options {
	size_t target_bytes;   /* uncompressed bytes at which a shard closes; 0 = 64 MiB */
	int level;             /* zstd level; 0 = 3 */
	const char *spool_dir; /* shards are spooled here; NULL = $TMPDIR or /tmp */
	bool background; /* compress and store closed shards on the writer's own thread, feed the open one on
	                    another */
	/* >= 1: libzstd's multithreaded framing with up to this many threads
	 * (shard/zstd_pool.h: the bytes do not depend on the number); 0: the
	 * single-threaded framing */
	unsigned zstd_threads;
	struct kiln_zstd_pool *zstd_pool; /* the threads to use (shared), or NULL */
	/* called with each stored shard's filter (shard/filter.h), on the
	 * thread that stored it (the writer's own in the background mode),
	 * e.g. to write it where the commit will want it; NULL: none */
	void (*filter_stored)(void *ctx, const unsigned char *filter, size_t len);
	void *filter_ctx;
} kiln_shard_writer_options;

typedef struct kiln_shard_writer kiln_shard_writer;

/* `store` must outlive the writer. */
int kiln_shard_writer_new(kiln_shard_writer **out, kiln_store *store,
                          const kiln_shard_writer_options *options);
void kiln_shard_writer_free(kiln_shard_writer *writer);

/* Appends one record (no newline) that came from topic/partition/offset. */
int kiln_shard_writer_append(kiln_shard_writer *writer, const char *line, size_t len, const char *topic,
                             int32_t partition, int64_t offset);

/* Bytes the open shard takes before it closes (always > 0). */
uint64_t kiln_shard_writer_room(const kiln_shard_writer *writer);

/* Appends `count` records at once, each ending in '\n' (len covers them
 * all), from topic/partition, offsets first..last. The shard closes after
 * the run if it reached target_bytes, so a run that ends with the record
 * filling kiln_shard_writer_room() gives the shards single appends would. */
int kiln_shard_writer_append_run(kiln_shard_writer *writer, const char *lines, size_t len, size_t count,
                                 const char *topic, int32_t partition, int64_t first, int64_t last);
/* The same, the run's token digests found ahead of time (kiln_filter_collect
 * of each of its lines, in order): list->v[list_first .. + list_n). The
 * shard and its filter are those of kiln_shard_writer_append_run; only the
 * scan and the hashing are not done here (a curate worker did them). */
int kiln_shard_writer_append_run_tokens(kiln_shard_writer *writer, const char *lines, size_t len,
                                        size_t count, const char *topic, int32_t partition, int64_t first,
                                        int64_t last, const kiln_filter_set *list, size_t list_first,
                                        size_t list_n);
/* The same (list NULL: the tokens scanned here), the run being all of
 * `lines` (len covers it): in the background mode, with nothing staged,
 * the writer takes the buffer itself for its feeder (no copy) and leaves
 * an empty one of its own in *lines; otherwise the bytes are copied and
 * *lines stays. lines must be a kiln_buf the writer may keep and free. */
int kiln_shard_writer_take_run(kiln_shard_writer *writer, kiln_buf *lines, size_t count, const char *topic,
                               int32_t partition, int64_t first, int64_t last, const kiln_filter_set *list,
                               size_t list_first, size_t list_n);

/* Closes the open shard if it holds a record. In the background mode the
 * shard is handed to the writer's thread (waiting while it still works on
 * the previous one) and a failure there is returned by a later call. */
int kiln_shard_writer_flush(kiln_shard_writer *writer);

/* Flushes and waits until every closed shard is stored; returns the first
 * error of any of them. Call before kiln_shard_writer_shards(). */
int kiln_shard_writer_finish(kiln_shard_writer *writer);

/* Every shard stored so far, in closing order (owned by the writer). */
const kiln_shard_entry *kiln_shard_writer_shards(const kiln_shard_writer *writer, size_t *out_count);

#endif
