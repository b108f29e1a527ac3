/* What a sync pass leaves behind (cache.h kiln_cache_last_sync,
 * kiln_cache_sync_report): the last pass's statistics and each pin's state,
 * and <dir>/last-sync, the file that `kiln cache status` reads in another
 * process (written whole under tmp/ and renamed into place). */
#include "core/units.h"
#include "cache/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fs.h"

#define STATE_NAME "last-sync"

/* ---- reports ---------------------------------------------------------------------- */

void kiln_cache_last_sync(kiln_cache *c, kiln_cache_sync_stats *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->last;
	pthread_mutex_unlock(&c->lock);
}

int kiln_cache_sync_report(kiln_cache *c, kiln_buf *out)
{
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->config->pin_count && rc == 0; i++) {
		const cache_pin *p = &c->pins[i];
		char b[32], f[32];

		kiln_size_human(b, sizeof(b), p->bytes, false);
		kiln_size_human(f, sizeof(f), p->fetched_bytes, false);
		if (!p->version.commit[0])
			rc = kiln_buf_printf(out, "%s - failed: %s\n", p->spec, p->error);
		else
			rc = kiln_buf_printf(
			    out, "%s %.12s %s %" PRIu64 " shards %s (fetched %" PRIu64 ", %s)%s%s\n", p->spec,
			    p->version.commit, p->ready ? "ready" : "not-ready", p->shards, b, p->fetched, f,
			    p->error[0] ? ": " : "", p->error);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* ---- the last-sync file -------------------------------------------------------------- */

static void one_line(char *s)
{
	for (; *s; s++)
		if (*s == '\n' || *s == '\r')
			*s = ' ';
}

int kiln_cache_state_save(kiln_cache *c)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	kiln_buf b = KILN_BUF_INIT(1u << 20);
	int rc;

	pthread_mutex_lock(&c->lock);
	one_line(c->last_msg);
	kiln_buf_printf(&b, "kiln-cache-state 1\ntime %lld\nok %lld\nrc %d\nmessage %s\n",
	                (long long)c->last_time, (long long)c->last_ok, c->last_rc, c->last_msg);
	kiln_buf_printf(&b,
	                "stats %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
	                " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
	                c->last.pins, c->last.pins_ready, c->last.shards, c->last.bytes, c->last.fetched,
	                c->last.fetched_bytes, c->last.peer_bytes, c->last.origin_bytes, c->last.failed,
	                c->last.evicted, c->last.evicted_bytes, c->last.repaired);
	for (size_t i = 0; i < c->config->pin_count; i++) {
		cache_pin *p = &c->pins[i];

		one_line(p->error);
		kiln_buf_printf(&b, "pin %s %s %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %s %s\n",
		                p->spec, p->version.commit[0] ? p->version.commit : "-", p->ready ? 1 : 0,
		                p->shards, p->bytes, p->fetched, p->fetched_bytes,
		                p->shown[0] ? p->shown : "-", p->error);
	}
	pthread_mutex_unlock(&c->lock);
	if (!b.ptr)
		return kiln_error_oom("cache");
	snprintf(path, sizeof(path), "%s/" STATE_NAME, c->dir);
	kiln_cache_tmp_name(c, tmp, "state");
	rc = kiln_fs_write_atomic_via(path, tmp, b.ptr, b.len, 0644);
	kiln_buf_free(&b);
	return rc;
}

void kiln_cache_state_load(kiln_cache *c)
{
	char path[PATH_MAX], line[2048];
	FILE *f;

	snprintf(path, sizeof(path), "%s/" STATE_NAME, c->dir);
	if (!(f = fopen(path, "re")))
		return;
	if (!fgets(line, sizeof(line), f) || strcmp(line, "kiln-cache-state 1\n") != 0) {
		fclose(f);
		return;
	}
	pthread_mutex_lock(&c->lock);
	while (fgets(line, sizeof(line), f)) {
		long long t;
		char spec[400], commit[64], shown[64];
		int ready, used = 0;
		uint64_t shards, bytes, fetched, fetched_bytes;

		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "time %lld", &t) == 1)
			c->last_time = t;
		else if (sscanf(line, "ok %lld", &t) == 1)
			c->last_ok = t;
		else if (sscanf(line, "rc %d", &c->last_rc) == 1)
			continue;
		else if (strncmp(line, "message ", 8) == 0)
			snprintf(c->last_msg, sizeof(c->last_msg), "%s", line + 8);
		else if (sscanf(line,
		                "stats %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
		                " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
		                &c->last.pins, &c->last.pins_ready, &c->last.shards, &c->last.bytes,
		                &c->last.fetched, &c->last.fetched_bytes, &c->last.peer_bytes,
		                &c->last.origin_bytes, &c->last.failed, &c->last.evicted,
		                &c->last.evicted_bytes, &c->last.repaired) == 12)
			continue;
		else if (sscanf(line,
		                "pin %399s %63s %d %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %63s %n",
		                spec, commit, &ready, &shards, &bytes, &fetched, &fetched_bytes, shown,
		                &used) >= 8) {
			for (size_t i = 0; i < c->config->pin_count; i++) {
				cache_pin *p = &c->pins[i];

				if (strcmp(p->spec, spec) != 0)
					continue;
				if (kiln_cache_hex40(commit)) {
					snprintf(p->version.dataset, sizeof(p->version.dataset), "%s",
					         p->dataset);
					memcpy(p->version.commit, commit, 41);
				}
				p->ready = ready == 1;
				p->shards = shards;
				p->bytes = bytes;
				p->fetched = fetched;
				p->fetched_bytes = fetched_bytes;
				if (used > 0)
					snprintf(p->error, sizeof(p->error), "%s", line + used);
			}
		}
	}
	pthread_mutex_unlock(&c->lock);
	fclose(f);
}
