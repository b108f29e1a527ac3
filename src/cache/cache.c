/* The cache's shard store (cache.h, internal.h): serving shards (verify on
 * a changed mtime, mark used), filling misses from peers and the origin with
 * one fetch per hash in flight, publishing verified downloads atomically,
 * least-recently-used eviction of unpinned shards. open.c opens and closes
 * a cache directory, scrub.c checks what is cached (verify, the background
 * scrub), status.c reports it (list, status); sync.c owns pins and views. */
#include "core/array.h"
#include "core/units.h"
#include "cache/internal.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "shard/fetch.h"
#include "shard/object.h"

#define CHUNK (1u << 20)

bool kiln_cache_published(const struct stat *st)
{
	return st->st_mtim.tv_sec == KILN_CACHE_MTIME && st->st_mtim.tv_nsec == 0;
}

static bool disk_full(int err)
{
	return err == ENOSPC || err == EDQUOT;
}

static int write_failed(const kiln_cache *c, const char *hash, int err)
{
	if (disk_full(err))
		return kiln_error_set(KILN_ELIMIT,
		                      "cache %s: disk full while writing shard %s (%s): filling stopped",
		                      c->dir, hash, strerror(err));
	return kiln_error_set(KILN_EIO, "cache %s: shard %s: %s", c->dir, hash, strerror(err));
}

/* Whether the whole file at fd hashes to hash: 1 yes, 0 no, < 0 on a read error. */
int kiln_cache_hash_matches(int fd, const char *hash, const char *path)
{
	kiln_shard_check check;
	char *buf = malloc(CHUNK);

	if (!buf)
		return kiln_error_oom("cache");
	kiln_shard_check_init(&check);
	for (;;) {
		ssize_t got = pread(fd, buf, CHUNK, (off_t)check.size);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			free(buf);
			return kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
		}
		if (got == 0)
			break;
		kiln_shard_check_update(&check, buf, (size_t)got);
	}
	free(buf);
	return kiln_shard_check_final(&check, hash, 0) == KILN_SHARD_OK;
}

/* ---- invariants (internal.h) -------------------------------------------------- */

/* Called with `lock` held. */
static void assert_cache_state(const kiln_cache *c)
{
#ifndef NDEBUG
	for (size_t i = 1; i < c->npinned; i++)
		assert(memcmp(c->pinned[i - 1].key, c->pinned[i].key, 32) < 0);
	for (const cache_flight *f = c->flights; f; f = f->next) {
		assert(!f->done && f->refs > 0 && strlen(f->hash) == 64);
		for (const cache_flight *g = f->next; g; g = g->next)
			assert(strcmp(f->hash, g->hash) != 0);
	}
	assert(c->pinned_known || c->npinned == 0);
#else
	(void)c;
#endif
}

/* ---- the pinned set --------------------------------------------------------- */

static int cmp32(const void *a, const void *b)
{
	return memcmp(a, b, 32);
}

/* The pinned entry of hash, NULL when it is not pinned. Called with `lock` held. */
static const cache_pinned *find_pinned(const kiln_cache *c, const char *hash)
{
	unsigned char key[32];

	if (!c->npinned || sodium_hex2bin(key, sizeof(key), hash, 64, NULL, NULL, NULL) != 0)
		return NULL;
	return bsearch(key, c->pinned, c->npinned, sizeof(*c->pinned), cmp32);
}

/* Called with `lock` held. */
bool kiln_cache_is_pinned(const kiln_cache *c, const char *hash)
{
	return find_pinned(c, hash) != NULL;
}

/* The size the manifest gives hash when it is pinned, else 0 (unknown). */
uint64_t kiln_cache_pinned_bytes(kiln_cache *c, const char *hash)
{
	const cache_pinned *p;
	uint64_t bytes;

	pthread_mutex_lock(&c->lock);
	p = find_pinned(c, hash);
	bytes = p ? p->bytes : 0;
	pthread_mutex_unlock(&c->lock);
	return bytes;
}

int kiln_cache_set_pinned(kiln_cache *c, const cache_entry *const *entries, size_t n)
{
	cache_pinned *v = n ? malloc(n * sizeof(*v)) : NULL;
	size_t k = 0;

	if (n && !v)
		return kiln_error_oom("cache");
	for (size_t i = 0; i < n; i++)
		if (sodium_hex2bin(v[k].key, 32, entries[i]->hash, 64, NULL, NULL, NULL) == 0)
			v[k++].bytes = entries[i]->bytes;
	if (k)
		qsort(v, k, sizeof(*v), cmp32);
	if (k) { /* distinct keys */
		size_t j = 0;

		for (size_t i = 1; i < k; i++)
			if (memcmp(v[i].key, v[j].key, 32) != 0)
				v[++j] = v[i];
		k = j + 1;
	}
	pthread_mutex_lock(&c->lock);
	free(c->pinned);
	c->pinned = v;
	c->npinned = k;
	c->pinned_known = true;
	c->nothing_evictable = false;
	assert_cache_state(c);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* ---- scanning shards/ ------------------------------------------------------- */

int kiln_cache_scan(kiln_cache *c, kiln_cache_scan_cb cb, void *ctx)
{
	char sub[PATH_MAX];

	for (int i = 0; i < 256; i++) {
		struct dirent *e;
		DIR *d;
		int rc;

		snprintf(sub, sizeof(sub), "%s/" KILN_SHARD_DIR "%02x", c->dir, i);
		if (!(d = opendir(sub))) {
			if (errno == ENOENT)
				continue;
			return kiln_error_set(KILN_EIO, "%s: %s", sub, strerror(errno));
		}
		while ((e = readdir(d))) {
			struct stat st;
			char hash[65];

			if (!kiln_shard_parse_file(e->d_name, hash, NULL) ||
			    strncmp(hash, sub + strlen(sub) - 2, 2) != 0)
				continue;
			if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			    !S_ISREG(st.st_mode))
				continue;
			if ((rc = cb(ctx, hash, dirfd(d), e->d_name, &st)) != 0) {
				closedir(d);
				return rc;
			}
		}
		closedir(d);
	}
	return 0;
}

/* ---- eviction ----------------------------------------------------------------- */

typedef struct victim {
	char hash[65];
	struct timespec atime;
	ino_t ino;
	uint64_t size;
} victim;

typedef struct victims {
	victim *v;
	size_t n, cap;
	uint64_t total;
} victims;

static int victim_cb(void *ctx, const char *hash, int at, const char *name, const struct stat *st)
{
	victims *vs = ctx;

	(void)at;
	(void)name;
	vs->total += (uint64_t)st->st_size;
	if (KILN_ARRAY_GROW(vs->v, vs->cap, vs->n, "cache") < 0)
		return KILN_ENOMEM;
	memcpy(vs->v[vs->n].hash, hash, 64);
	vs->v[vs->n].hash[64] = '\0';
	vs->v[vs->n].atime = st->st_atim;
	vs->v[vs->n].ino = st->st_ino;
	vs->v[vs->n].size = (uint64_t)st->st_size;
	vs->n++;
	return 0;
}

static int by_atime(const void *a, const void *b)
{
	const victim *x = a, *y = b;

	if (x->atime.tv_sec != y->atime.tv_sec)
		return x->atime.tv_sec < y->atime.tv_sec ? -1 : 1;
	if (x->atime.tv_nsec != y->atime.tv_nsec)
		return x->atime.tv_nsec < y->atime.tv_nsec ? -1 : 1;
	return strcmp(x->hash, y->hash);
}

/* kiln_cache_evict, never evicting `keep` (a shard just filled for a reader; may be NULL). */
static int evict(kiln_cache *c, uint64_t need, const char *keep)
{
	const double limit = (double)c->config->size_limit;
	victims vs = {0};
	uint64_t evicted = 0, freed = 0;
	size_t k = 0;
	double low;
	bool skip;
	int rc;

	pthread_mutex_lock(&c->evict_lock);
	pthread_mutex_lock(&c->lock);
	skip = !c->pinned_known || c->nothing_evictable || (double)(c->bytes_used + need) <= c->high * limit;
	low = c->low;
	pthread_mutex_unlock(&c->lock);
	if (skip) {
		pthread_mutex_unlock(&c->evict_lock);
		return 0;
	}
	if ((rc = kiln_cache_scan(c, victim_cb, &vs)) < 0)
		goto cleanup;
	/* the scan is the truth: publishes racing with it are counted by the next one */
	pthread_mutex_lock(&c->lock);
	kiln_cache_set_used(c, vs.total);
	for (size_t i = 0; i < vs.n; i++)
		if (!kiln_cache_is_pinned(c, vs.v[i].hash) && !(keep && memcmp(keep, vs.v[i].hash, 64) == 0))
			vs.v[k++] = vs.v[i];
	pthread_mutex_unlock(&c->lock);
	vs.n = k;
	if (vs.n)
		qsort(vs.v, vs.n, sizeof(*vs.v), by_atime);
	k = 0;
	while (k < vs.n && (double)(vs.total + need) > low * limit) {
		victim *v = &vs.v[k++];
		char path[PATH_MAX];
		struct stat st;

		kiln_cache_shard_path(c, v->hash, path);
		pthread_mutex_lock(&c->lock);
		if (!kiln_cache_is_pinned(c, v->hash) && lstat(path, &st) == 0 && st.st_ino == v->ino &&
		    unlink(path) == 0) {
			kiln_cache_set_used(c, c->bytes_used > (uint64_t)st.st_size
			                           ? c->bytes_used - (uint64_t)st.st_size
			                           : 0);
			vs.total -= vs.total > v->size ? v->size : vs.total;
			evicted++;
			freed += (uint64_t)st.st_size;
		}
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_lock(&c->lock);
	if (k == vs.n && !keep && (double)(vs.total + need) > low * limit)
		c->nothing_evictable = true;
	pthread_mutex_unlock(&c->lock);
	if (evicted) {
		kiln_counter_add(c->m_evictions, evicted);
		atomic_fetch_add(&c->n_evicted, evicted);
		atomic_fetch_add(&c->n_evicted_bytes, freed);
		KILN_LOG(KILN_LOG_INFO, "cache_evicted", "evicted least-recently-used unpinned shards",
		         KILN_F_INT("shards", evicted), KILN_F_INT("bytes", freed),
		         KILN_F_INT("used", vs.total));
	}
	rc = 0;
cleanup:
	free(vs.v);
	pthread_mutex_unlock(&c->evict_lock);
	return rc;
}

void kiln_cache_set_watermarks(kiln_cache *c, double high, double low)
{
	pthread_mutex_lock(&c->lock);
	c->high = high;
	c->low = low;
	c->nothing_evictable = false; /* judged against the old low watermark */
	pthread_mutex_unlock(&c->lock);
}

int kiln_cache_evict(kiln_cache *c, uint64_t need)
{
	return evict(c, need, NULL);
}

/* Room for `need` more bytes (0: unknown): evicts, then KILN_ELIMIT when
 * even that leaves the cache at or over its size limit. */
static int make_room(kiln_cache *c, uint64_t need)
{
	uint64_t used, limit = c->config->size_limit;
	int rc;

	if ((rc = kiln_cache_evict(c, need)) < 0)
		return rc;
	pthread_mutex_lock(&c->lock);
	used = c->bytes_used;
	pthread_mutex_unlock(&c->lock);
	if (used + need > limit || (need == 0 && used >= limit)) {
		char u[32], l[32];

		kiln_size_human(u, sizeof(u), used, false);
		kiln_size_human(l, sizeof(l), limit, false);
		return kiln_error_set(
		    KILN_ELIMIT,
		    "cache %s is full: %s used of size_limit %s and nothing evictable: filling stopped",
		    c->dir, u, l);
	}
	return 0;
}

/* ---- fetching ----------------------------------------------------------------- */

/* The temporary file a fetch writes to. */
typedef struct sink_ctx {
	kiln_cache *c;
	int fd;
	uint64_t size;
	uint64_t cache_limit; /* the shard's size is not known: size_limit, else 0 */
	const char *hash;
	const char *source; /* for messages: "peer http://..." or "the origin" */
} sink_ctx;

static int sink_reset(sink_ctx *s)
{
	if (ftruncate(s->fd, 0) < 0 || lseek(s->fd, 0, SEEK_SET) < 0)
		return kiln_error_set(KILN_EIO, "cache %s: temporary file: %s", s->c->dir, strerror(errno));
	s->size = 0;
	return 0;
}

static int sink_write(void *ctx, const void *data, size_t len)
{
	sink_ctx *s = ctx;
	const char *p = data;

	s->size += len;
	if (s->cache_limit && s->size > s->cache_limit) {
		char limit[32];

		kiln_size_human(limit, sizeof(limit), s->cache_limit, false);
		return kiln_error_set(
		    KILN_ELIMIT, "shard %s from %s is larger than the cache's size_limit (%s): not cached",
		    s->hash, s->source, limit);
	}
	while (len) {
		ssize_t w = write(s->fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return write_failed(s->c, s->hash, errno);
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* The shard from `store` (a peer: store/http.c, GET /v1/shards/<hash> with
 * X-Kiln-Peer, the cache's token, one retry; or the origin) into the
 * temporary file, verified. */
static int fetch_from(kiln_store *store, sink_ctx *s, uint64_t bytes)
{
	kiln_shard_request f = {
	    .hash = s->hash, .bytes = bytes, .limit = bytes, .from = s->source, .sink = sink_write, .ctx = s};

	return kiln_shard_fetch(store, &f);
}

/* Renames the verified download at tmp (open as fd) to final. */
static int publish(kiln_cache *c, int fd, const char *tmp, const char *final, const char *hash, uint64_t size)
{
	const struct timespec times[2] = {{0, UTIME_NOW}, {KILN_CACHE_MTIME, 0}};
	char sub[PATH_MAX];
	struct stat old;
	bool had;

	if (futimens(fd, times) < 0)
		return kiln_error_set(KILN_EIO, "%s: %s", tmp, strerror(errno));
	if (fsync(fd) < 0)
		return write_failed(c, hash, errno);
	snprintf(sub, sizeof(sub), "%s", final);
	*strrchr(sub, '/') = '\0'; /* its fan-out directory */
	if (mkdir(sub, 0755) < 0 && errno != EEXIST)
		return write_failed(c, hash, errno);
	pthread_mutex_lock(&c->lock);
	had = lstat(final, &old) == 0 && S_ISREG(old.st_mode);
	if (rename(tmp, final) < 0) {
		int err = errno;

		pthread_mutex_unlock(&c->lock);
		return write_failed(c, hash, err);
	}
	kiln_cache_set_used(c,
	                    c->bytes_used + size -
	                        (had && c->bytes_used >= (uint64_t)old.st_size ? (uint64_t)old.st_size : 0));
	if (!kiln_cache_is_pinned(c, hash))
		c->nothing_evictable = false;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* One fetch of hash: peers (unless from_peer), then the origin. */
static int fetch(kiln_cache *c, const char *hash, uint64_t bytes, bool from_peer)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	sink_ctx s = {.c = c, .fd = -1, .hash = hash};
	const char *source = NULL;
	struct stat st;
	int rc;

	kiln_cache_shard_path(c, hash, final);
	if (stat(final, &st) == 0 && kiln_cache_published(&st))
		return 0; /* published meanwhile (another process) */
	if ((rc = make_room(c, bytes)) < 0)
		return rc;
	snprintf(tmp, sizeof(tmp), "%s/tmp/%.64s.XXXXXX", c->dir, hash);
	if ((s.fd = mkostemp(tmp, O_CLOEXEC)) < 0)
		return write_failed(c, hash, errno);
	/* readable by training jobs running as other users (views are hard
	 * links to it); curated shards hold no personal data, and the cache
	 * directory's own mode decides who may enter it */
	if (fchmod(s.fd, 0644) < 0) {
		rc = write_failed(c, hash, errno);
		close(s.fd);
		unlink(tmp);
		return rc;
	}
	s.cache_limit = bytes ? 0 : c->config->size_limit;
	for (size_t i = 0; !from_peer && i < c->config->peer_count; i++) {
		const char *peer = c->config->peers[i];
		char where[600];

		snprintf(where, sizeof(where), "peer %s", peer);
		s.source = where;
		if ((rc = fetch_from(c->peers[i], &s, bytes)) == 0) {
			source = "peer";
			break;
		}
		if (rc == KILN_ELIMIT || rc == KILN_ENOMEM)
			goto cleanup;
		KILN_LOG(rc == KILN_ENOTFOUND ? KILN_LOG_DEBUG : KILN_LOG_WARN, "cache_peer_failed",
		         kiln_error_last(), KILN_F_STR("peer", peer), KILN_F_STR("shard", hash));
		if ((rc = sink_reset(&s)) < 0)
			goto cleanup;
	}
	if (!source) {
		s.source = "the origin";
		if ((rc = fetch_from(c->store, &s, bytes)) < 0) {
			/* absent at the origin is the caller's to report (a 404, a failed pin) */
			if (rc != KILN_ELIMIT)
				KILN_LOG(rc == KILN_ENOTFOUND ? KILN_LOG_DEBUG : KILN_LOG_WARN,
				         "cache_fetch_failed", kiln_error_last(), KILN_F_STR("shard", hash));
			goto cleanup;
		}
		source = "origin";
	}
	if ((rc = publish(c, s.fd, tmp, final, hash, s.size)) < 0)
		goto cleanup;
	/* a fill of unknown size may have passed the high watermark */
	if (!bytes)
		evict(c, 0, hash);
	if (strcmp(source, "peer") == 0) {
		kiln_counter_add(c->m_fill_peer, s.size);
		kiln_counter_add(c->m_fills_peer, 1);
		atomic_fetch_add(&c->n_bytes_peer, s.size);
		atomic_fetch_add(&c->n_fills_peer, 1);
	} else {
		kiln_counter_add(c->m_fill_origin, s.size);
		kiln_counter_add(c->m_fills_origin, 1);
		atomic_fetch_add(&c->n_bytes_origin, s.size);
		atomic_fetch_add(&c->n_fills_origin, 1);
	}
cleanup:
	close(s.fd);
	if (rc < 0)
		unlink(tmp);
	return rc;
}

/* A shard an erasure superseded is never fetched again, from anywhere. */
static int refuse_erased(kiln_cache *c, const char *hash)
{
	return kiln_cache_is_erased(c, hash)
	           ? kiln_error_set(KILN_ENOTFOUND, "shard %s was erased (docs/ERASURE.md)", hash)
	           : 0;
}

int kiln_cache_fill(kiln_cache *c, const char *hash, uint64_t bytes, bool from_peer)
{
	cache_flight *f, **pp;
	int rc;

	if ((rc = refuse_erased(c, hash)) < 0)
		return rc;
	pthread_mutex_lock(&c->lock);
	for (f = c->flights; f; f = f->next)
		if (strcmp(f->hash, hash) == 0)
			break;
	if (f) {
		f->refs++;
		while (!f->done)
			pthread_cond_wait(&c->cond, &c->lock);
		rc = f->rc;
		if (rc < 0)
			kiln_error_set(rc, "%s", f->msg);
		if (--f->refs == 0)
			free(f);
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	if (!(f = calloc(1, sizeof(*f)))) {
		pthread_mutex_unlock(&c->lock);
		return kiln_error_oom("cache");
	}
	memcpy(f->hash, hash, 64);
	f->refs = 1;
	f->next = c->flights;
	c->flights = f;
	assert_cache_state(c);
	pthread_mutex_unlock(&c->lock);

	rc = fetch(c, hash, bytes, from_peer);

	pthread_mutex_lock(&c->lock);
	f->done = true;
	f->rc = rc;
	if (rc < 0)
		snprintf(f->msg, sizeof(f->msg), "%s", kiln_error_last());
	for (pp = &c->flights; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	pthread_cond_broadcast(&c->cond);
	if (--f->refs == 0)
		free(f);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* ---- verified reads ----------------------------------------------------------- */

/* Removes the corrupt file at path if it is still the one seen. */
void kiln_cache_drop_corrupt(kiln_cache *c, const char *path, const char *hash, const struct stat *seen)
{
	struct stat now;

	pthread_mutex_lock(&c->lock);
	if (lstat(path, &now) == 0 && now.st_ino == seen->st_ino && now.st_dev == seen->st_dev &&
	    unlink(path) == 0)
		kiln_cache_set_used(
		    c, c->bytes_used > (uint64_t)now.st_size ? c->bytes_used - (uint64_t)now.st_size : 0);
	pthread_mutex_unlock(&c->lock);
	kiln_counter_add(c->m_corrupt, 1);
	atomic_fetch_add(&c->n_corrupt, 1);
	KILN_LOG(KILN_LOG_WARN, "cache_corrupt_shard", "a cached shard no longer matches its hash: removed",
	         KILN_F_STR("shard", hash), KILN_F_INT("bytes", now.st_size));
}

static int open_noatime(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOATIME);

	if (fd < 0 && errno == EPERM)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd;
}

/* The verified file of hash: 0 with *out_fd, KILN_ENOTFOUND when absent
 * (or corrupt: then removed). bytes: its size, 0 for the pinned size or
 * none known. */
static int open_verified(kiln_cache *c, const char *hash, bool may_hash, uint64_t bytes, int *out_fd,
                         struct stat *out_st)
{
	char path[PATH_MAX];
	struct stat st;
	int fd, rc;

	*out_fd = -1;
	kiln_cache_shard_path(c, hash, path);
	if ((fd = open_noatime(path)) < 0) {
		if (errno == ENOENT)
			return kiln_error_set(KILN_ENOTFOUND, "shard %.64s is not in the cache", hash);
		return kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
	}
	if (fstat(fd, &st) < 0) {
		rc = kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
		close(fd);
		return rc;
	}
	if (!bytes)
		bytes = kiln_cache_pinned_bytes(c, hash);
	if (bytes && S_ISREG(st.st_mode) && (uint64_t)st.st_size != bytes) {
		/* the mtime cannot vouch for it: truncated or grown */
		close(fd);
		kiln_cache_drop_corrupt(c, path, hash, &st);
		return kiln_error_set(KILN_ENOTFOUND,
		                      "shard %.64s had %lld bytes in the cache, not %" PRIu64 " (removed)",
		                      hash, (long long)st.st_size, bytes);
	}
	if (!kiln_cache_published(&st) && !may_hash) {
		close(fd);
		return kiln_error_set(KILN_ENOTFOUND, "shard %.64s must be hashed again before it is served",
		                      hash);
	}
	if (!kiln_cache_published(&st)) {
		/* written after publication: is it still the shard? */
		rc = S_ISREG(st.st_mode) ? kiln_cache_hash_matches(fd, hash, path) : 0;
		if (rc < 0) {
			close(fd);
			return rc;
		}
		if (rc == 0) {
			close(fd);
			kiln_cache_drop_corrupt(c, path, hash, &st);
			return kiln_error_set(KILN_ENOTFOUND,
			                      "shard %.64s was corrupt in the cache (removed)", hash);
		}
		const struct timespec times[2] = {{0, UTIME_OMIT}, {KILN_CACHE_MTIME, 0}};
		if (futimens(fd, times) == 0)
			st.st_mtim = times[1];
	}
	*out_fd = fd;
	*out_st = st;
	return 0;
}

int kiln_cache_open_trusted(kiln_cache *c, const char *hash, int *out_fd, uint64_t *out_size)
{
	static const struct timespec used_now[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
	struct stat st;
	int rc;

	*out_fd = -1;
	*out_size = 0;
	if (!kiln_shard_hash_valid(hash))
		return kiln_error_set(KILN_EINVALID, "a shard hash is 64 lower-case hex digits");
	if ((rc = open_verified(c, hash, false, 0, out_fd, &st)) < 0)
		return rc;
	kiln_counter_add(c->m_hits, 1);
	futimens(*out_fd, used_now);
	*out_size = (uint64_t)st.st_size;
	return 0;
}

int kiln_cache_present(kiln_cache *c, const char *hash, uint64_t bytes)
{
	char path[PATH_MAX];
	struct stat st;
	int fd, rc;

	kiln_cache_shard_path(c, hash, path);
	if (stat(path, &st) < 0)
		return errno == ENOENT ? 0 : kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
	if (!bytes)
		bytes = kiln_cache_pinned_bytes(c, hash);
	if (S_ISREG(st.st_mode) && kiln_cache_published(&st) && (!bytes || (uint64_t)st.st_size == bytes))
		return 1;
	rc = open_verified(c, hash, true, bytes, &fd, &st);
	if (rc == KILN_ENOTFOUND)
		return 0;
	if (rc < 0)
		return rc;
	close(fd);
	return 1;
}

int kiln_cache_open_shard(kiln_cache *c, const char *hash, bool fill, bool from_peer, int *out_fd,
                          uint64_t *out_size)
{
	static const struct timespec used_now[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
	struct stat st;
	bool missed = false;
	int rc = KILN_ENOTFOUND;

	*out_fd = -1;
	*out_size = 0;
	if (!kiln_shard_hash_valid(hash))
		return kiln_error_set(KILN_EINVALID, "a shard hash is 64 lower-case hex digits");
	if ((rc = refuse_erased(c, hash)) < 0)
		return rc;
	kiln_cache_refresh_lag(c);
	/* a fill can lose its file to an eviction before we open it: try again */
	for (int attempt = 0; attempt < 3; attempt++) {
		rc = open_verified(c, hash, true, 0, out_fd, &st);
		if (rc == 0) {
			kiln_counter_add(missed ? c->m_misses : c->m_hits, 1);
			futimens(*out_fd, used_now);
			*out_size = (uint64_t)st.st_size;
			return 0;
		}
		if (rc != KILN_ENOTFOUND || !fill)
			break;
		missed = true;
		if ((rc = kiln_cache_fill(c, hash, 0, from_peer)) < 0)
			break;
	}
	kiln_counter_add(c->m_misses, 1);
	return rc;
}
