/* Objects written through local spool files: bytes are appended to an
 * anonymous temporary file through a small buffer, then compressed as one
 * zstd frame (content size and checksum on) into a second temporary file
 * while BLAKE2b-256 hashes the compressed bytes, and that file is stored.
 * Memory stays at a few small buffers whatever the object's size, and the
 * store streams from a file, never from a whole-object buffer. */
#ifndef KILN_SHARD_SPOOL_H
#define KILN_SHARD_SPOOL_H

#include <stdint.h>
#include <zstd.h>

#include "core/buf.h"
#include "store/store.h"

typedef struct kiln_spool {
	int fd;        /* anonymous (already unlinked) file, -1 when closed */
	uint64_t size; /* bytes appended since open or the last store */
	kiln_buf pending;
	const char *dir;
} kiln_spool;

/* dir NULL: $TMPDIR, else /tmp. */
int kiln_spool_open(kiln_spool *spool, const char *dir);
void kiln_spool_close(kiln_spool *spool);

int kiln_spool_write(kiln_spool *spool, const void *data, size_t len);

/* Compresses everything appended so far and stores it under `key`, or under
 * shards/<hh>/<hash>.jsonl.zst when key is NULL; then empties the spool for
 * reuse. On failure the spool keeps its bytes (a retry can store again). */
int kiln_spool_store(kiln_spool *spool, kiln_store *store, ZSTD_CCtx *cctx, int level, const char *key,
                     char out_hash[65], uint64_t *out_bytes);

#endif
