/* The cache's integrity checks (cache.h): kiln_cache_verify hashes every
 * cached shard once; the background scrub (kiln_cache_scrub_start) is a
 * thread hashing every cached shard again at config->scrub_rate bytes per
 * second, removing a bad one and fetching it again when it is pinned. */
#include "cache/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "shard/fetch.h"

#define SCRUB_CHUNK   (256u << 10)
#define SCRUB_PAUSE_S 60 /* between two scrub passes */

/* ---- verify --------------------------------------------------------------------- */

typedef struct verify_ctx {
	kiln_cache *c;
	uint64_t bad, checked;
	int err;
} verify_ctx;

static int verify_cb(void *ctx, const char *hash, int at, const char *name, const struct stat *st)
{
	verify_ctx *v = ctx;
	char path[PATH_MAX], h[65];
	int fd, rc;

	memcpy(h, hash, 64);
	h[64] = '\0';
	kiln_cache_shard_path(v->c, h, path);
	fd = openat(at, name, O_RDONLY | O_CLOEXEC | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = openat(at, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* evicted meanwhile */
	rc = kiln_cache_hash_matches(fd, h, path);
	if (rc == 1) {
		if (!kiln_cache_published(st)) {
			const struct timespec times[2] = {{0, UTIME_OMIT}, {KILN_CACHE_MTIME, 0}};
			futimens(fd, times);
		}
		v->checked++;
	} else if (rc == 0) {
		kiln_cache_drop_corrupt(v->c, path, h, st);
		v->bad++;
	} else if (!v->err) {
		v->err = rc;
	}
	close(fd);
	return 0;
}

int kiln_cache_verify(kiln_cache *c, uint64_t *out_bad)
{
	verify_ctx v = {.c = c};
	int rc;

	*out_bad = 0;
	if ((rc = kiln_cache_scan(c, verify_cb, &v)) < 0)
		return rc;
	*out_bad = v.bad;
	KILN_LOG(KILN_LOG_INFO, "cache_verified", "every cached shard hashed", KILN_F_INT("good", v.checked),
	         KILN_F_INT("bad", v.bad));
	return v.err;
}

/* ---- scrub ----------------------------------------------------------------------- */

typedef struct scrub_ctx {
	kiln_cache *c;
	int64_t start_ms; /* of the pass */
	uint64_t bytes;   /* hashed in the pass */
	uint64_t shards, bad;
} scrub_ctx;

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until `until_ms` (monotonic) or a stop; true when stopping. */
static bool scrub_wait(kiln_cache *c, int64_t until_ms)
{
	struct timespec ts = {.tv_sec = (time_t)(until_ms / 1000),
	                      .tv_nsec = (long)(until_ms % 1000) * 1000000};
	bool stop;

	pthread_mutex_lock(&c->lock);
	while (!c->scrub_stop && mono_ms() < until_ms)
		if (pthread_cond_timedwait(&c->scrub_cond, &c->lock, &ts) != 0)
			break;
	stop = c->scrub_stop;
	pthread_mutex_unlock(&c->lock);
	return stop;
}

/* Hashes one shard at the scrub's pace; a bad one is removed (and, when
 * pinned, fetched again at once). 1 to stop the scan. */
static int scrub_cb(void *ctx, const char *hash, int at, const char *name, const struct stat *seen)
{
	scrub_ctx *x = ctx;
	kiln_cache *c = x->c;
	kiln_shard_check check;
	char path[PATH_MAX], h[65];
	uint64_t expected;
	struct stat st;
	char *buf;
	int fd, stop = 0;

	memcpy(h, hash, 64);
	h[64] = '\0';
	kiln_cache_shard_path(c, h, path);
	fd = openat(at, name, O_RDONLY | O_CLOEXEC | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = openat(at, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* evicted meanwhile */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(buf = malloc(SCRUB_CHUNK))) {
		close(fd);
		return 0;
	}
	(void)seen;
	kiln_shard_check_init(&check);
	for (;;) {
		ssize_t n = pread(fd, buf, SCRUB_CHUNK, (off_t)check.size);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		kiln_shard_check_update(&check, buf, (size_t)n);
		x->bytes += (uint64_t)n;
		kiln_counter_add(c->m_scrubbed_bytes, (uint64_t)n);
		atomic_fetch_add(&c->n_scrubbed_bytes, (uint64_t)n);
		/* the pass may not run ahead of scrub_rate */
		if ((stop = scrub_wait(c, x->start_ms + (int64_t)(x->bytes * 1000 / c->config->scrub_rate))))
			break;
	}
	free(buf);
	if (stop) {
		close(fd);
		return 1;
	}
	expected = kiln_cache_pinned_bytes(c, h);
	x->shards++;
	if (kiln_shard_check_final(&check, h, expected) == KILN_SHARD_OK &&
	    check.size == (uint64_t)st.st_size) {
		if (!kiln_cache_published(&st)) {
			const struct timespec times[2] = {{0, UTIME_OMIT}, {KILN_CACHE_MTIME, 0}};
			futimens(fd, times);
		}
		close(fd);
		return 0;
	}
	close(fd);
	x->bad++;
	kiln_cache_drop_corrupt(c, path, h, &st);
	if (expected && kiln_cache_fill(c, h, expected, false) < 0)
		KILN_LOG(KILN_LOG_WARN, "cache_refetch_failed", kiln_error_last(), KILN_F_STR("shard", h));
	return 0;
}

static void *scrub_main(void *arg)
{
	kiln_cache *c = arg;

	pthread_setname_np(pthread_self(), "cache-scrub");

	for (;;) {
		scrub_ctx x = {.c = c, .start_ms = mono_ms()};
		int rc = kiln_cache_scan(c, scrub_cb, &x);

		if (rc == 1)
			break;
		if (rc == 0) {
			kiln_counter_add(c->m_scrub_passes, 1);
			KILN_LOG(x.bad ? KILN_LOG_WARN : KILN_LOG_INFO, "cache_scrubbed",
			         "every cached shard hashed again", KILN_F_INT("shards", x.shards),
			         KILN_F_INT("bytes", x.bytes), KILN_F_INT("bad", x.bad));
		} else {
			KILN_LOG_EVERY(3600, KILN_LOG_WARN, "cache_scrub_failed", kiln_error_last());
		}
		if (scrub_wait(c, mono_ms() + SCRUB_PAUSE_S * 1000))
			break;
	}
	return NULL;
}

int kiln_cache_scrub_start(kiln_cache *c)
{
	if (!c->config->scrub_rate || c->scrub_running)
		return 0;
	c->scrub_stop = false;
	if (pthread_create(&c->scrub_thread, NULL, scrub_main, c) != 0)
		return kiln_error_set(KILN_EIO, "cache %s: cannot start the scrub thread", c->dir);
	c->scrub_running = true;
	return 0;
}

void kiln_cache_scrub_stop(kiln_cache *c)
{
	if (!c || !c->scrub_running)
		return;
	pthread_mutex_lock(&c->lock);
	c->scrub_stop = true;
	pthread_cond_broadcast(&c->scrub_cond);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->scrub_thread, NULL);
	c->scrub_running = false;
}
