/* Objects written through local spool files: bytes are appended to an
 * anonymous temporary file through a small buffer, then compressed as one
 * zstd frame (content size and checksum on) into a second anonymous one
 * while BLAKE2b-256 hashes the compressed bytes, and that file is stored
 * (through /proc/self/fd: a killed process leaves no file behind).
 * Memory stays at a few small buffers whatever the object's size, and the
 * store streams from a file, never from a whole-object buffer. A spool can
 * also compress as it fills (kiln_spool_stream). */
#ifndef KILN_SHARD_SPOOL_H
#define KILN_SHARD_SPOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <zstd.h>

#include "core/buf.h"
#include "store/store.h"

typedef struct kiln_spool {
	int fd;        /* anonymous (already unlinked) file, -1 when closed */
	uint64_t size; /* bytes appended since open or the last store */
	kiln_buf pending;
	const char *dir;
	/* streaming (kiln_spool_stream) */
	ZSTD_CCtx *stream; /* the context bytes are compressed with as they come, or NULL */
	int level;
	uint64_t stream_after; /* bytes held in memory before the frame begins */
	bool streaming;        /* the frame has begun: fd holds its bytes after KILN_SPOOL_ROOM */
	bool broken;           /* compressing or writing failed: the bytes are lost */
	bool sealed;           /* the frame is complete in fd from offset 0 (a failed store is retried) */
	uint64_t compressed;   /* bytes the frame has produced so far */
	char *chunk;           /* what compressing produces, on its way to fd */
} kiln_spool;

/* Bytes left free at the start of a streamed frame's file: the frame
 * header gets the content size there once it is known. */
#define KILN_SPOOL_ROOM 4

/* dir NULL: $TMPDIR, else /tmp. */
int kiln_spool_open(kiln_spool *spool, const char *dir);
void kiln_spool_close(kiln_spool *spool);

int kiln_spool_write(kiln_spool *spool, const void *data, size_t len);

/* Compresses bytes as they are written instead of spooling them: with
 * `cctx` in libzstd's multithreaded framing (kiln_zstd_multithread) at
 * `level`, the frame begins once more bytes than its window have come (the
 * first ones wait in memory) and its jobs run while the object fills; the
 * spool file then holds compressed bytes only. The frame is begun without a
 * content size and its header rewritten with it when the object closes,
 * which gives the bytes kiln_spool_store gives without streaming (the
 * blocks of the multithreaded framing do not depend on a pledged size
 * larger than the window; tests/unit/shard_writer.c compares both). Without
 * effect for a window over 8 MiB (levels 19 and up: too much to hold).
 * After a failure to compress or write, every later call fails: the
 * object's bytes are lost, the caller starts again (a new writer). */
void kiln_spool_stream(kiln_spool *spool, ZSTD_CCtx *cctx, int level);

/* A streaming spool's object, complete: the frame ended (or, for an
 * object that never began streaming, compressed at once from memory) into
 * the spool file. After it the spool needs its zstd context no more until
 * stored: kiln_spool_store then only hashes and stores, so the context can
 * begin the next object meanwhile. No effect on other spools. */
int kiln_spool_seal(kiln_spool *spool);

/* Compresses everything appended so far and stores it under `key`, or under
 * shards/<hh>/<hash>.jsonl.zst when key is NULL; then empties the spool for
 * reuse. On failure the spool keeps its bytes (a retry can store again). */
int kiln_spool_store(kiln_spool *spool, kiln_store *store, ZSTD_CCtx *cctx, int level, const char *key,
                     char out_hash[65], uint64_t *out_bytes);

#endif
