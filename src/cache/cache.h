/* Cache nodes (`kiln cache`): pinned dataset versions kept on local disk
 * near GPUs. A cache directory holds
 *   shards/<hh>/<hash>.jsonl.zst       verified, content-addressed copies
 *   views/<ds>/<version>/<split>/NNNNN.jsonl.zst   hard links, per pinned version
 *   views/<ds>/<version>/ready         written once a view is complete
 *   views/<ds>/<ref> -> <version>      a symlink per pin (its ref as written: main, v3)
 * where <version> is the 40-hex commit and NNNNN the shard's 0-based index
 * in manifest (hash) order. A view is built under tmp/ and renamed into
 * place with its ready marker; a pin's link moves (rename of a new link)
 * only to a ready view, so views/<ds>/main/<split>/ always reads whole.
 *   tmp/                               downloads in progress (never served)
 *   manifest.git                       the fetched manifest repository (remote manifests)
 *   last-sync                          the last sync's time, outcome and pins (for `status`)
 *   lock, sync.lock                    flock(2) files: open caches, one sync at a time
 * A shard is published (renamed into shards/) only after its BLAKE2b-256
 * matches its name, with its mtime set to 1 s past the epoch: a file whose
 * mtime differs was written after publication (corrupted, truncated) and
 * is hashed again before it is served, removed and fetched again when it no
 * longer matches. Its atime records its last use (least-recently-used
 * eviction). Least-recently-used unpinned shards are evicted above
 * the high watermark down to the low one; a shard of a pinned version never
 * is. Misses are filled from peers first, then the origin store; concurrent
 * misses for one shard fetch it once. */
#ifndef KILN_CACHE_CACHE_H
#define KILN_CACHE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/log.h"
#include "core/metrics.h"
#include "store/store.h"

/* cache.yaml (docs/CACHE.md). Secrets never come from the file: the bearer
 * token comes from token_file (0600) or token_env. */
typedef struct kiln_cache_config {
	const char *file;      /* the config file, as given */
	const char *store_url; /* the origin store */
	kiln_store_options store;
	const char *manifest; /* a local bare repository path, or a URL fetched into <dir>/manifest.git */
	const char *dir;      /* the cache directory (created) */
	uint64_t size_limit;  /* bytes of shards/ */
	double high, low;     /* watermarks, fractions of size_limit (default 0.9, 0.8) */
	const char **pins;    /* "ds@main" follows the branch; "ds@v3", "ds@<commit>" stay */
	size_t pin_count;
	unsigned concurrency; /* parallel downloads (default 8) */
	const char **peers;   /* base URLs of other cache nodes, "http://host:port" */
	size_t peer_count;
	const char *listen;    /* HOST:PORT for `kiln cache serve` (default 127.0.0.1:9470) */
	const char *token;     /* bearer token, or NULL (no auth); read from token_file/token_env */
	unsigned sync_seconds; /* `serve`: sync every this many seconds (default 60) */
	unsigned connections_per_address; /* `serve`: per client address (default 256) */
	unsigned misses_per_second;       /* `serve`: misses sent to peers and the origin (default 100) */
	uint64_t scrub_rate;              /* bytes/s the background scrub hashes (default 16 MiB, 0: off) */
	kiln_log_level log_level;         /* `serve`: log.level (default info) */
	struct kiln_yaml_doc *doc;        /* owns the strings above */
	struct kiln_arena *arena;
} kiln_cache_config;

/* Loads `path` (${NAME} expansion and --set overrides as for pipelines);
 * errors name file:line:col and the key. */
int kiln_cache_config_load(kiln_cache_config **out, const char *path, char *const *sets, size_t n);
void kiln_cache_config_free(kiln_cache_config *config);

typedef struct kiln_cache kiln_cache;

/* Opens (creating) the cache directory for `config` (which must outlive the
 * cache), the origin store and the manifest. metrics may be NULL; when set,
 * the cache registers and updates kiln_cache_* series in it. */
int kiln_cache_open(kiln_cache **out, const kiln_cache_config *config, kiln_metrics *metrics);
void kiln_cache_close(kiln_cache *cache);

/* The watermarks eviction uses from now on (a reload; 0 < low < high <= 1,
 * as a loaded config guarantees). */
void kiln_cache_set_watermarks(kiln_cache *cache, double high, double low);

typedef struct kiln_cache_progress {
	uint64_t shards_total, shards_done;
	uint64_t bytes_total, bytes_done;
	const char *version; /* "ds@<12 hex>" being synced */
} kiln_cache_progress;

/* One sync pass: fetch the manifest (remote), resolve every pin, download
 * the shards they reference that are missing (concurrency threads; peers
 * first, then the origin; each verified before it is published), build each
 * pinned version's view and its ready marker, drop views of versions no pin
 * resolves to any more, then evict down to the low watermark. A full disk
 * (size_limit or ENOSPC) stops filling: the pass returns KILN_ELIMIT with
 * the views completed so far kept and served. progress (may be NULL) is
 * called from the calling thread now and then. Safe to call while the cache
 * serves (from one thread at a time). */
int kiln_cache_sync(kiln_cache *cache, void (*progress)(void *ctx, const kiln_cache_progress *p), void *ctx);

/* The shard `hash` (64 lower-case hex; the caller validates it) for
 * serving: *out_fd is an open read-only descriptor (the caller closes it)
 * of the verified file, *out_size its size. On a miss, with fill, it is
 * fetched (peers first unless from_peer, then the origin), verified and
 * published first; concurrent misses for one hash wait for one fetch.
 * KILN_ENOTFOUND when absent and not fillable. Marks the shard used now. */
int kiln_cache_open_shard(kiln_cache *cache, const char *hash, bool fill, bool from_peer, int *out_fd,
                          uint64_t *out_size);

/* The same for a shard that needs no work: present and not written since
 * it was published. KILN_ENOTFOUND when absent or when it must be hashed
 * again first (then call kiln_cache_open_shard, off any event loop). Never
 * blocks on more than an open and an fstat. */
int kiln_cache_open_trusted(kiln_cache *cache, const char *hash, int *out_fd, uint64_t *out_size);

/* 1 when shards/ holds a verified copy of hash (a file whose mtime is not
 * KILN_CACHE_MTIME is hashed first, and removed when it does not match; one
 * whose size is not `bytes`, or when bytes is 0 its pinned size, is
 * removed), 0 when not, < 0 on an I/O error. */
int kiln_cache_present(kiln_cache *cache, const char *hash, uint64_t bytes);

/* GET /v1/datasets/<ds>/<ref>/<split>: the version's shards of `split` as
 * JSON Lines appended to out, one per shard in manifest order:
 *   {"shard":"<hash>","bytes":N,"records":N,"cached":true}
 * KILN_ENOTFOUND for an unknown dataset, ref or split. */
int kiln_cache_list(kiln_cache *cache, const char *dataset, const char *ref, const char *split,
                    kiln_buf *out);

/* A human summary (`kiln cache status`): size used against the limit and
 * watermarks, shards, pinned shards, each pin's version and whether its
 * view is ready, the last sync's time and outcome. */
int kiln_cache_status(kiln_cache *cache, kiln_buf *out);

/* The same as one JSON document (`kiln cache status --json`, docs/JSON.md),
 * appended to out with its newline: sizes in bytes, each pin with its
 * dataset, ref, commit and view, the last sync with its time as RFC 3339
 * and Unix seconds. */
int kiln_cache_status_json(kiln_cache *cache, kiln_buf *out);

/* The last sync pass of this cache (this process), in numbers: what
 * `kiln cache sync` prints. */
typedef struct kiln_cache_sync_stats {
	uint64_t pins, pins_ready;       /* pins configured; pins whose view is ready */
	uint64_t shards, bytes;          /* distinct shards the pins reference */
	uint64_t fetched, fetched_bytes; /* downloaded by the pass */
	uint64_t peer_bytes, origin_bytes;
	uint64_t failed; /* shards no source could give */
	uint64_t evicted, evicted_bytes;
	uint64_t repaired;        /* view links replaced by a refetched shard */
	uint64_t manifest_errors; /* failed manifest fetches, pins that did not resolve */
} kiln_cache_sync_stats;

void kiln_cache_last_sync(kiln_cache *cache, kiln_cache_sync_stats *out);

/* One line per pin about the last sync pass, appended to out:
 *   user-events@main abc123def456 ready 12 shards 3.4 GiB (fetched 2, 1.1 GiB)
 *   user-events@v9 - failed: user-events@v9: no branch, tag or commit of that name */
int kiln_cache_sync_report(kiln_cache *cache, kiln_buf *out);

/* Brings kiln_cache_sync_lag_seconds up to date (open_shard, list and
 * status do it too): call before rendering /metrics. */
void kiln_cache_refresh_metrics(kiln_cache *cache);

/* Verifies every cached shard's hash (corrupt or truncated files are
 * removed, and refetched by the next sync); returns how many were bad. */
int kiln_cache_verify(kiln_cache *cache, uint64_t *out_bad);

/* Starts a thread that hashes every cached shard again, pass after pass
 * (a pause of 60 s between two), reading no more than config->scrub_rate
 * bytes per second; a shard whose hash or pinned size is wrong is removed
 * (kiln_cache_corrupt_total) and, when pinned, fetched again at once. The
 * thread reads with O_NOATIME (use stays as it was). Nothing when
 * scrub_rate is 0 or it runs already. kiln_cache_close stops it. */
int kiln_cache_scrub_start(kiln_cache *cache);

/* Stops the scrub thread, waiting for it (the shard being hashed is left
 * as it is). NULL, or a cache not scrubbing, is fine. */
void kiln_cache_scrub_stop(kiln_cache *cache);

#endif
