/* What every file of the cache uses and that uses nothing of theirs: the
 * path of a cached shard, the names of temporaries under tmp/, a commit
 * id's shape, and the two gauges kept as their values change
 * (cache/internal.h). */
#include "cache/internal.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "core/metrics.h"
#include "shard/object.h"

static _Atomic unsigned long tmp_counter;

void kiln_cache_shard_path(const kiln_cache *cache, const char *hash, char *out)
{
	kiln_shard_name(out, PATH_MAX, cache->dir, hash, NULL);
}

bool kiln_cache_hex40(const char *s)
{
	for (int i = 0; i < 40; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[40] == '\0';
}

void kiln_cache_tmp_name(const kiln_cache *c, char *out, const char *what)
{
	snprintf(out, PATH_MAX, "%s/tmp/%s-%ld-%lu", c->dir, what, (long)getpid(),
	         (unsigned long)atomic_fetch_add(&tmp_counter, 1));
}

void kiln_cache_refresh_lag(kiln_cache *c)
{
	int64_t since;

	if (!c->m_sync_lag)
		return;
	pthread_mutex_lock(&c->lock);
	since = c->last_ok ? c->last_ok : c->opened;
	pthread_mutex_unlock(&c->lock);
	kiln_gauge_set(c->m_sync_lag, (double)(time(NULL) - since));
}

void kiln_cache_set_used(kiln_cache *c, uint64_t used)
{
	c->bytes_used = used;
	kiln_gauge_set(c->m_bytes_used, (double)used);
}
