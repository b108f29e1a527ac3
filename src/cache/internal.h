/* What cache.c (the shard store: fill, evict), open.c (open, close),
 * scrub.c (verify, the scrub), status.c (list, status), sync.c (pins,
 * downloads, views) and last_sync.c (the last-sync file) share:
 * the cache handle itself.
 *
 * Invariants (checked by assert_cache_state in cache.c in debug builds):
 * - a file under shards/ was verified before it was renamed there; one whose
 *   mtime is not KILN_CACHE_MTIME is hashed again before it is used, one
 *   whose size is not its pinned size (the manifest's bytes) is corrupt;
 * - bytes_used is the sum of the sizes of the files under shards/ as this
 *   process last saw them (an eviction scan resets it to the truth);
 * - at most one flight per hash is in `flights`; a flight leaves the list
 *   when done and is freed by whoever drops its last reference;
 * - `pinned` is sorted by key and holds every shard (with its size) of every
 *   version a pin resolves to or a pin's view still shows; while
 *   !pinned_known nothing is evicted.
 * - the scrub thread (scrub_running) only reads shards and removes corrupt
 *   ones as any reader would; scrub_stop under `lock` ends it.
 * Locks: `lock` guards flights, pinned, bytes_used, high, low, pins[] and the
 * last-sync fields; evict_lock serialises eviction scans; list_lock the list handle on
 * the manifest; sync_fd (flock) one sync per cache directory across
 * processes. Never take evict_lock or list_lock while holding `lock`. */
#ifndef KILN_CACHE_INTERNAL_H
#define KILN_CACHE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

#include "cache/cache.h"
#include "manifest/version.h"

/* The mtime of a published shard: 1 s past the epoch. */
#define KILN_CACHE_MTIME 1

typedef struct cache_flight {
	struct cache_flight *next;
	char hash[65];
	bool done;
	int rc;
	char msg[512]; /* the owner's error message, re-set in each waiter */
	unsigned refs;
} cache_flight;

/* A shard a pin's version lists: what sync downloads and views link. */
typedef struct cache_entry {
	char hash[65];
	uint64_t bytes;
} cache_entry;

/* A pinned shard: its hash as bytes (the sort key, first) and size. */
typedef struct cache_pinned {
	unsigned char key[32];
	uint64_t bytes;
} cache_pinned;

typedef struct cache_listing {
	char commit[41];
	cache_entry *v;                    /* splits one after another, each in manifest order */
	size_t count[KILN_SPLIT_COUNT], n; /* n: all splits */
} cache_listing;

typedef struct cache_pin {
	const char *spec; /* config->pins[i], "ds@ref" */
	char dataset[129];
	char ref[160];                   /* after '@': the name of its link in views/<ds>/ */
	kiln_version version;            /* the last resolution; commit "" when never resolved */
	bool follows;                    /* a branch: a later sync may move it */
	bool ready;                      /* views/<ds>/<commit>/ready exists for version */
	char shown[41];                  /* the commit views/<ds>/<ref> points at, "" when none */
	uint64_t shards, bytes;          /* of version */
	uint64_t fetched, fetched_bytes; /* the last sync's downloads for it */
	char error[512];                 /* the last sync's problem with it, "" when none */
} cache_pin;

struct kiln_cache {
	const kiln_cache_config *config;
	char *dir;           /* config->dir without trailing '/' */
	char *manifest_path; /* the repository opened (config->manifest or <dir>/manifest.git) */
	bool remote;         /* config->manifest is a URL fetched into <dir>/manifest.git */
	kiln_store *store;
	kiln_manifest *manifest;      /* sync's handle (fetches go into it) */
	kiln_manifest *list_manifest; /* kiln_cache_list's handle */
	int lock_fd;                  /* <dir>/lock: shared while open, exclusive to clean tmp/ */
	int sync_fd;                  /* <dir>/sync.lock */
	int64_t opened;

	pthread_mutex_t lock, evict_lock, list_lock;
	pthread_cond_t cond;
	cache_flight *flights;
	cache_pinned *pinned;
	size_t npinned;
	bool pinned_known;
	bool nothing_evictable; /* the last scan found no unpinned shard and none was published since */
	uint64_t bytes_used;
	double high, low;   /* the watermarks in force: config's, or a reload's */
	cache_pin *pins;    /* config->pin_count */
	kiln_store **peers; /* config->peer_count http(s) stores, asked as a peer (store/http.c) */

	/* the last sync (also persisted in <dir>/last-sync for other processes) */
	int64_t last_time, last_ok;
	int last_rc;
	char last_msg[512];
	kiln_cache_sync_stats last;

	/* this process's totals (also without a metrics registry) */
	_Atomic uint64_t n_fills_peer, n_fills_origin, n_bytes_peer, n_bytes_origin, n_evicted,
	    n_evicted_bytes, n_corrupt, n_scrubbed_bytes;

	/* shards an erasure superseded (<dir>/erased, read again when it
	 * changes): never served nor fetched; under `lock` */
	char (*erased)[65];
	size_t nerased;
	struct timespec erased_mtime;
	off_t erased_size;
	ino_t erased_ino;

	/* the background scrub (kiln_cache_scrub_start) */
	pthread_t scrub_thread;
	bool scrub_running, scrub_stop; /* scrub_stop under `lock`, signalled on scrub_cond */
	pthread_cond_t scrub_cond;

	kiln_counter *m_hits, *m_misses, *m_fill_peer, *m_fill_origin, *m_fills_peer, *m_fills_origin,
	    *m_evictions, *m_corrupt, *m_sync_failures, *m_scrubbed_bytes, *m_scrub_passes;
	kiln_gauge *m_bytes_used, *m_sync_lag;
};

/* The shard store's helpers that scrub.c and status.c share with cache.c. */

/* Calls cb for each regular file under shards/ with a shard's name in its
 * fan-out directory: hash (NUL-terminated), the directory's fd and the
 * file's name there; cb's non-zero return stops the scan and is returned. */
typedef int (*kiln_cache_scan_cb)(void *ctx, const char *hash, int at, const char *name,
                                  const struct stat *st);
int kiln_cache_scan(kiln_cache *cache, kiln_cache_scan_cb cb, void *ctx);

/* The mtime says the file is as verified when it was published. */
bool kiln_cache_published(const struct stat *st);

/* Whether the whole file at fd hashes to hash: 1 yes, 0 no, < 0 on a read error. */
int kiln_cache_hash_matches(int fd, const char *hash, const char *path);

/* Removes the corrupt file at path if it is still the one seen (counted, logged). */
void kiln_cache_drop_corrupt(kiln_cache *cache, const char *path, const char *hash, const struct stat *seen);

/* Called with `lock` held. */
bool kiln_cache_is_pinned(const kiln_cache *cache, const char *hash);

/* The size the manifest gives hash when it is pinned, else 0 (unknown); takes `lock`. */
uint64_t kiln_cache_pinned_bytes(kiln_cache *cache, const char *hash);

/* bytes_used and its gauge; called with `lock` held (or before the cache is shared). */
void kiln_cache_set_used(kiln_cache *cache, uint64_t used);

/* Erasures (erased.c). The file <dir>/erased lists, one per line, the
 * hashes of the shards the erasure ledgers of the manifest name as
 * superseded. is_erased reads it again when it changed (another process's
 * sync): true when hash is listed. apply (sync, under sync.lock) rewrites
 * the list from the ledgers, removes those shards' files and the views of
 * superseded commits; *out_dropped counts the files removed. */
bool kiln_cache_is_erased(kiln_cache *cache, const char *hash);
int kiln_cache_apply_erasures(kiln_cache *cache, uint64_t *out_dropped);

/* "<dir>/shards/<hh>/<hash>.jsonl.zst" into out (PATH_MAX). */
void kiln_cache_shard_path(const kiln_cache *cache, const char *hash, char *out);

/* Fetches hash (expected bytes, 0 when unknown) unless a verified copy is
 * there, joining a fetch of it already in flight: peers first unless
 * from_peer, then the origin. KILN_ELIMIT when the cache is full. */
int kiln_cache_fill(kiln_cache *cache, const char *hash, uint64_t bytes, bool from_peer);

/* When bytes_used + need is above high * size_limit, evicts least-recently-
 * used unpinned shards until it is at most low * size_limit (or none is
 * left). Nothing is evicted while the pinned set is unknown. */
int kiln_cache_evict(kiln_cache *cache, uint64_t need);

/* Replaces the pinned set (a sorted copy of the distinct entries[0..n):
 * hashes and sizes); takes `lock`. */
int kiln_cache_set_pinned(kiln_cache *cache, const cache_entry *const *entries, size_t n);

/* Lists a version's shards, every split (manifest order). */
int kiln_cache_listing(kiln_manifest *manifest, const kiln_version *version, cache_listing *out);
void kiln_cache_listing_free(cache_listing *listing);

/* Resolves the pins in the manifest as it is (no fetch) to learn the
 * pinned set and each pin's view at open. */
int kiln_cache_pins_init(kiln_cache *cache);

/* A local path or a URL libgit2 fetches (scheme://..., scp-like host:path). */
bool kiln_cache_manifest_is_url(const char *manifest);

/* Reads and writes <dir>/last-sync (last_sync.c). */
void kiln_cache_state_load(kiln_cache *cache);
int kiln_cache_state_save(kiln_cache *cache);

/* seconds since the last fully successful sync into the gauge. */
void kiln_cache_refresh_lag(kiln_cache *cache);

/* s is a commit id: 40 lower-case hex digits. */
bool kiln_cache_hex40(const char *s);

/* "<dir>/tmp/<what>-<pid>-<n>" into out (PATH_MAX), unique in this process. */
void kiln_cache_tmp_name(const kiln_cache *cache, char *out, const char *what);

#endif
