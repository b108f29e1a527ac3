/* The shared zstd thread pool (see zstd_pool.h). ZSTD_createThreadPool and
 * ZSTD_CCtx_refThreadPool are in libzstd's static-linking section of the
 * API; Debian's libzstd.so.1 exports them (1.5.x). */
#define ZSTD_STATIC_LINKING_ONLY
#include "shard/zstd_pool.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/error.h"

struct kiln_zstd_pool {
	ZSTD_threadPool *threads;
};

int kiln_zstd_pool_new(kiln_zstd_pool **out, unsigned threads)
{
	kiln_zstd_pool *p = calloc(1, sizeof(*p));
	char name[16] = "";

	*out = NULL;
	if (!p)
		return kiln_error_oom(NULL);
	/* libzstd starts the pool's threads here, and a thread starts with its
	 * creator's name: they are "zstd" (ps, /proc/PID/task/N/comm) */
	pthread_getname_np(pthread_self(), name, sizeof(name));
	pthread_setname_np(pthread_self(), "zstd");
	p->threads = ZSTD_createThreadPool(threads ? threads : 1);
	pthread_setname_np(pthread_self(), name);
	if (!p->threads) {
		free(p);
		return kiln_error_set(KILN_ENOMEM, "zstd: cannot start %u compression threads", threads);
	}
	*out = p;
	return 0;
}

void kiln_zstd_pool_free(kiln_zstd_pool *pool)
{
	if (!pool)
		return;
	ZSTD_freeThreadPool(pool->threads);
	free(pool);
}

int kiln_zstd_multithread(ZSTD_CCtx *cctx, unsigned threads, kiln_zstd_pool *pool)
{
	size_t rc = ZSTD_CCtx_setParameter(cctx, ZSTD_c_nbWorkers, threads ? (int)threads : 1);

	if (!ZSTD_isError(rc))
		rc = ZSTD_CCtx_setParameter(cctx, ZSTD_c_jobSize, KILN_ZSTD_JOB_BYTES);
	if (ZSTD_isError(rc))
		return kiln_error_set(KILN_EINVALID, "zstd: multithreaded compression: %s",
		                      ZSTD_getErrorName(rc));
	if (pool && ZSTD_isError(rc = ZSTD_CCtx_refThreadPool(cctx, pool->threads)))
		return kiln_error_set(KILN_EINVALID, "zstd: thread pool: %s", ZSTD_getErrorName(rc));
	return 0;
}

const char *kiln_zstd_version(void)
{
	return ZSTD_versionString();
}
