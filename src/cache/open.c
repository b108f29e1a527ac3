/* Opening and closing a cache directory (cache.h kiln_cache_open,
 * kiln_cache_close): the config checked, shards/, tmp/ and views/ made,
 * the locks taken (tmp/ emptied when no other process has it open), the
 * metrics registered, the store, peers and manifest opened, what is cached
 * summed and the last sync and the pins read back. Also the sync-lag gauge. */
#include "cache/internal.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fs.h"

static int sum_cb(void *ctx, const char *hash, int at, const char *name, const struct stat *st)
{
	(void)hash;
	(void)at;
	(void)name;
	*(uint64_t *)ctx += (uint64_t)st->st_size;
	return 0;
}

static void register_metrics(kiln_cache *c, kiln_metrics *m)
{
	if (!m)
		return;
	c->m_hits =
	    kiln_metrics_counter(m, "kiln_cache_hits_total", "Shard requests served from the cache", NULL);
	c->m_misses = kiln_metrics_counter(m, "kiln_cache_misses_total",
	                                   "Shard requests the cache did not hold (filled or refused)", NULL);
	c->m_fill_peer = kiln_metrics_counter(m, "kiln_cache_fill_bytes_total",
	                                      "Bytes downloaded and verified into the cache, by source",
	                                      "source=\"peer\"");
	c->m_fill_origin = kiln_metrics_counter(m, "kiln_cache_fill_bytes_total",
	                                        "Bytes downloaded and verified into the cache, by source",
	                                        "source=\"origin\"");
	c->m_fills_peer = kiln_metrics_counter(
	    m, "kiln_cache_fills_total", "Shards downloaded into the cache, by source", "source=\"peer\"");
	c->m_fills_origin = kiln_metrics_counter(
	    m, "kiln_cache_fills_total", "Shards downloaded into the cache, by source", "source=\"origin\"");
	c->m_evictions = kiln_metrics_counter(m, "kiln_cache_evictions_total",
	                                      "Unpinned shards evicted (least recently used first)", NULL);
	c->m_corrupt =
	    kiln_metrics_counter(m, "kiln_cache_corrupt_total",
	                         "Cached shards found corrupt or truncated (removed, fetched again)", NULL);
	c->m_bytes_used =
	    kiln_metrics_gauge(m, "kiln_cache_used_bytes", "Bytes of shards in the cache", NULL);
	c->m_sync_lag = kiln_metrics_gauge(m, "kiln_cache_sync_lag_seconds",
	                                   "Seconds since the last fully successful sync", NULL);
	c->m_sync_failures = kiln_metrics_counter(m, "kiln_cache_sync_failures_total",
	                                          "Sync passes that did not complete every pin", NULL);
	c->m_scrubbed_bytes =
	    kiln_metrics_counter(m, "kiln_cache_scrubbed_bytes_total",
	                         "Bytes of cached shards hashed again by the background scrub", NULL);
	c->m_scrub_passes =
	    kiln_metrics_counter(m, "kiln_cache_scrub_passes_total",
	                         "Background scrub passes over every cached shard completed", NULL);
}

void kiln_cache_refresh_metrics(kiln_cache *c)
{
	kiln_cache_refresh_lag(c);
}

/* Empties tmp/ when no other process has the cache open. */
static int lock_and_clean(kiln_cache *c)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/lock", c->dir);
	if ((c->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
		return kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/sync.lock", c->dir);
	if ((c->sync_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
		return kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
	if (flock(c->lock_fd, LOCK_EX | LOCK_NB) == 0) {
		DIR *d;

		snprintf(path, sizeof(path), "%s/tmp", c->dir);
		if ((d = opendir(path))) {
			struct dirent *e;
			char child[PATH_MAX];

			while ((e = readdir(d)))
				if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
				    (size_t)snprintf(child, sizeof(child), "%s/%s", path, e->d_name) <
				        sizeof(child))
					kiln_fs_remove_tree(child);
			closedir(d);
		}
	}
	while (flock(c->lock_fd, LOCK_SH) < 0)
		if (errno != EINTR)
			return kiln_error_set(KILN_EIO, "%s/lock: %s", c->dir, strerror(errno));
	return 0;
}

int kiln_cache_open(kiln_cache **out, const kiln_cache_config *config, kiln_metrics *metrics)
{
	kiln_cache *c;
	char path[PATH_MAX];
	uint64_t used = 0;
	size_t n;
	int rc;

	*out = NULL;
	if (sodium_init() < 0)
		return kiln_error_set(KILN_EIO, "libsodium failed to initialise");
	if (!config->dir || !*config->dir || !config->size_limit ||
	    !(config->low > 0 && config->low < config->high) || config->high > 1)
		return kiln_error_set(KILN_EINVALID,
		                      "cache: bad config (dir, size_limit and watermarks are required)");
	if (!(c = calloc(1, sizeof(*c))))
		return kiln_error_oom("cache");
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->evict_lock, NULL);
	pthread_mutex_init(&c->list_lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	{
		pthread_condattr_t attr;

		pthread_condattr_init(&attr);
		pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
		pthread_cond_init(&c->scrub_cond, &attr);
		pthread_condattr_destroy(&attr);
	}
	c->lock_fd = c->sync_fd = -1;
	c->config = config;
	c->high = config->high;
	c->low = config->low;
	c->opened = (int64_t)time(NULL);
	n = strlen(config->dir);
	while (n > 1 && config->dir[n - 1] == '/')
		n--;
	if (!(c->dir = strndup(config->dir, n)) ||
	    !(c->pins = calloc(config->pin_count ? config->pin_count : 1, sizeof(*c->pins)))) {
		rc = kiln_error_oom("cache");
		goto fail;
	}
	if (strlen(c->dir) > PATH_MAX - 256) {
		rc = kiln_error_set(KILN_EINVALID, "cache dir %s: path too long", c->dir);
		goto fail;
	}
	for (const char *const *sub = (const char *const[]){"shards", "tmp", "views", NULL}; *sub; sub++) {
		snprintf(path, sizeof(path), "%s/%s", c->dir, *sub);
		if ((rc = kiln_fs_mkdir_p(path, 0755)) < 0)
			goto fail;
	}
	if ((rc = lock_and_clean(c)) < 0)
		goto fail;
	register_metrics(c, metrics);
	if ((rc = kiln_store_open(&c->store, config->store_url, &config->store)) < 0)
		goto fail;
	if (config->peer_count && !(c->peers = calloc(config->peer_count, sizeof(*c->peers)))) {
		rc = kiln_error_oom("cache");
		goto fail;
	}
	for (size_t i = 0; i < config->peer_count; i++) {
		/* one quick retry: a peer that fails is passed over for the origin */
		kiln_store_options peer = {.bearer_token = config->token, .as_peer = true, .max_retries = 1};

		if ((rc = kiln_store_open(&c->peers[i], config->peers[i], &peer)) < 0)
			goto fail;
	}
	c->remote = kiln_cache_manifest_is_url(config->manifest);
	if (c->remote) {
		snprintf(path, sizeof(path), "%s/manifest.git", c->dir);
		if (!(c->manifest_path = strdup(path))) {
			rc = kiln_error_oom("cache");
			goto fail;
		}
		if ((rc = kiln_manifest_open(&c->manifest, path)) < 0 ||
		    (rc = kiln_manifest_open(&c->list_manifest, path)) < 0)
			goto fail;
	} else {
		if (!(c->manifest_path = strdup(config->manifest))) {
			rc = kiln_error_oom("cache");
			goto fail;
		}
		if ((rc = kiln_version_open(&c->manifest, config->manifest)) < 0 ||
		    (rc = kiln_version_open(&c->list_manifest, config->manifest)) < 0)
			goto fail;
	}
	for (size_t i = 0; i < config->pin_count; i++) {
		cache_pin *p = &c->pins[i];
		const char *at = strchr(config->pins[i], '@');

		p->spec = config->pins[i];
		snprintf(p->dataset, sizeof(p->dataset), "%.*s", (int)(at - p->spec), p->spec);
		snprintf(p->ref, sizeof(p->ref), "%s", at + 1);
	}
	if ((rc = kiln_cache_scan(c, sum_cb, &used)) < 0)
		goto fail;
	kiln_cache_set_used(c, used);
	kiln_cache_state_load(c);
	if ((rc = kiln_cache_pins_init(c)) < 0)
		goto fail;
	kiln_cache_refresh_lag(c);
	*out = c;
	return 0;
fail:
	kiln_cache_close(c);
	return rc;
}

void kiln_cache_close(kiln_cache *c)
{
	if (!c)
		return;
	kiln_cache_scrub_stop(c);
	assert(!c->flights);
	kiln_manifest_close(c->manifest);
	kiln_manifest_close(c->list_manifest);
	kiln_store_close(c->store);
	for (size_t i = 0; c->peers && i < c->config->peer_count; i++)
		kiln_store_close(c->peers[i]);
	free(c->peers);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	if (c->sync_fd >= 0)
		close(c->sync_fd);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->evict_lock);
	pthread_mutex_destroy(&c->list_lock);
	pthread_cond_destroy(&c->cond);
	pthread_cond_destroy(&c->scrub_cond);
	free(c->erased);
	free(c->pinned);
	free(c->pins);
	free(c->manifest_path);
	free(c->dir);
	free(c);
}
