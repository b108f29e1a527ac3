/* `kiln cache serve`'s HTTP front (docs/CACHE.md): shards by hash with
 * ranges and validators, a pinned version's shard list, /metrics and
 * /healthz, behind an optional bearer token. It owns the HTTP server and
 * its request metrics; the cache, config and metrics stay the caller's and
 * must outlive it. */
#ifndef KILN_CACHE_SERVE_H
#define KILN_CACHE_SERVE_H

#include <stdint.h>

#include "cache/cache.h"
#include "core/metrics.h"

typedef struct kiln_cache_server kiln_cache_server;

/* Serves `cache` on config->listen (port 0 picks one: see
 * kiln_cache_serve_port) on an event loop with a thread per CPU, misses
 * filled on worker threads; config's values are copied (it need not
 * outlive the call). Routes:
 *   GET|HEAD /v1/shards/<64 lower-case hex>[.jsonl.zst]
 *       200 (application/zstd, strong ETag "<hash>", immutable), 206 for
 *       one byte range, 416 for an unsatisfiable one, 304 for an
 *       If-None-Match naming the hash (or "*" when the shard exists), 404
 *       when the shard is nowhere (remembered for 30 s), 503 when misses
 *       come faster than config->misses_per_second, 507 when the cache
 *       cannot hold the shard, 400 for another name
 *   GET      /v1/datasets/<ds>/<ref>/<split>   kiln_cache_list as NDJSON
 *   GET      /metrics, /healthz
 * anything else 404 (400 with a ".." segment). With config->token every
 * route but /healthz wants "Authorization: Bearer <token>" (401). metrics
 * may be NULL. */
int kiln_cache_serve_start(kiln_cache_server **out, kiln_cache *cache, const kiln_cache_config *config,
                           kiln_metrics *metrics);

/* The port listened on. */
uint16_t kiln_cache_serve_port(const kiln_cache_server *server);

/* Stops serving, waiting for requests in flight. NULL is fine. */
void kiln_cache_serve_stop(kiln_cache_server *server);

#endif
