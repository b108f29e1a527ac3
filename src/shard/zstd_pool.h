/* libzstd's multithreaded framing for shards: a frame compressed in jobs of
 * KILN_ZSTD_JOB_BYTES of input, each job on any thread, so the bytes are the
 * same for any thread count >= 1 (they differ from the single-threaded
 * framing, and would from another job size: it is part of the format,
 * docs/FORMATS.md). Measured on 126 MB of records at level 3 and 4 threads,
 * 1 MiB jobs compress 0.1 % smaller than libzstd's default (8 MiB at that
 * level), as fast, in 60 MB less memory. One pool of threads is shared by a
 * run's split writers, so a run never starts more compression threads than
 * it asked for. */
#ifndef KILN_SHARD_ZSTD_POOL_H
#define KILN_SHARD_ZSTD_POOL_H

#include <zstd.h>

#define KILN_ZSTD_JOB_BYTES (1 << 20)

typedef struct kiln_zstd_pool kiln_zstd_pool;

/* A pool of `threads` compression threads (>= 1). */
int kiln_zstd_pool_new(kiln_zstd_pool **out, unsigned threads);
void kiln_zstd_pool_free(kiln_zstd_pool *pool);

/* Puts cctx in the multithreaded framing with up to `threads` (>= 1) jobs in
 * flight, run on `pool`'s threads (NULL: threads of its own). The setting
 * survives ZSTD_reset_session_only; the pool must outlive the context's
 * use. KILN_EINVALID when libzstd was built without threads. */
int kiln_zstd_multithread(ZSTD_CCtx *cctx, unsigned threads, kiln_zstd_pool *pool);

/* The version of the libzstd loaded at run time ("1.5.4"), static. */
const char *kiln_zstd_version(void);

#endif
