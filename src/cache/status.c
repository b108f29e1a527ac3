/* The cache's reports (cache.h): kiln_cache_list (a version's shards and
 * whether each is cached) and kiln_cache_status (use, pins, the last sync). */
#include "core/units.h"
#include "cache/internal.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/error.h"

/* ---- list ------------------------------------------------------------------------ */

typedef struct list_ctx {
	kiln_cache *c;
	kiln_buf *out;
} list_ctx;

static int list_cb(void *ctx, const kiln_shard_entry *e)
{
	list_ctx *l = ctx;
	char path[PATH_MAX];
	struct stat st;
	bool cached;

	kiln_cache_shard_path(l->c, e->hash, path);
	cached = stat(path, &st) == 0 && S_ISREG(st.st_mode);
	return kiln_buf_printf(
	    l->out, "{\"shard\":\"%s\",\"bytes\":%" PRIu64 ",\"records\":%" PRIu64 ",\"cached\":%s}\n",
	    e->hash, e->bytes, e->records, cached ? "true" : "false");
}

int kiln_cache_list(kiln_cache *c, const char *dataset, const char *ref, const char *split, kiln_buf *out)
{
	list_ctx l = {.c = c, .out = out};
	kiln_version v;
	kiln_split s;
	char spec[512];
	size_t len = out->len;
	int rc;

	kiln_cache_refresh_lag(c);
	if (kiln_split_from_name(split, &s) < 0)
		return kiln_error_set(KILN_ENOTFOUND, "no split \"%.32s\" (train, dev or test)", split);
	if (strlen(dataset) > 128 || strlen(ref) > 256 || strchr(dataset, '@'))
		return kiln_error_set(KILN_EINVALID, "bad dataset or ref");
	snprintf(spec, sizeof(spec), "%s@%s", dataset, ref);
	pthread_mutex_lock(&c->list_lock);
	rc = kiln_version_resolve(c->list_manifest, spec, &v);
	if (rc == 0)
		rc = kiln_version_shards(c->list_manifest, &v, s, list_cb, &l);
	pthread_mutex_unlock(&c->list_lock);
	if (rc > 0)
		rc = kiln_error_set(KILN_EIO, "listing %s failed", spec);
	if (rc < 0)
		out->len = len;
	return rc;
}

/* ---- status ---------------------------------------------------------------------- */

typedef struct count_ctx {
	kiln_cache *c;
	uint64_t shards, bytes, pinned, pinned_bytes;
} count_ctx;

static int count_cb(void *ctx, const char *hash, int at, const char *name, const struct stat *st)
{
	count_ctx *k = ctx;
	char h[65];

	(void)at;
	(void)name;
	memcpy(h, hash, 64);
	h[64] = '\0';
	k->shards++;
	k->bytes += (uint64_t)st->st_size;
	pthread_mutex_lock(&k->c->lock);
	if (kiln_cache_is_pinned(k->c, h)) {
		k->pinned++;
		k->pinned_bytes += (uint64_t)st->st_size;
	}
	pthread_mutex_unlock(&k->c->lock);
	return 0;
}

static void iso_time(char *out, size_t cap, int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ,"NAME":"<RFC 3339>","NAME_unix":N, or both null when t is 0 (never) */
static int json_time(kiln_buf *out, const char *name, int64_t t)
{
	char iso[32];

	if (!t)
		return kiln_buf_printf(out, ",\"%s\":null,\"%s_unix\":null", name, name);
	iso_time(iso, sizeof(iso), t);
	return kiln_buf_printf(out, ",\"%s\":\"%s\",\"%s_unix\":%" PRId64, name, iso, name, t);
}

/* s as a JSON string, null when empty. */
static int json_string(kiln_buf *out, const char *s)
{
	return *s ? kiln_buf_put_json_text(out, s, strlen(s)) : kiln_buf_puts(out, "null");
}

static int json_pin(kiln_buf *out, const cache_pin *p)
{
	int rc = kiln_buf_puts(out, "{\"pin\":");

	rc |= kiln_buf_put_json_text(out, p->spec, strlen(p->spec));
	rc |= kiln_buf_puts(out, ",\"dataset\":");
	rc |= json_string(out, p->dataset);
	rc |= kiln_buf_printf(out, ",\"resolved\":%s,\"ref\":", p->version.commit[0] ? "true" : "false");
	rc |= json_string(out, p->version.commit[0] ? p->version.ref : "");
	rc |= kiln_buf_puts(out, ",\"commit\":");
	rc |= json_string(out, p->version.commit);
	rc |= kiln_buf_printf(
	    out, ",\"follows\":%s,\"ready\":%s,\"shards\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"view_commit\":",
	    p->follows ? "true" : "false", p->ready ? "true" : "false", p->shards, p->bytes);
	rc |= json_string(out, p->shown);
	rc |= kiln_buf_printf(out,
	                      ",\"fetched\":%" PRIu64 ",\"fetched_bytes\":%" PRIu64 ",\"error\":", p->fetched,
	                      p->fetched_bytes);
	rc |= json_string(out, p->error);
	return rc | kiln_buf_putc(out, '}');
}

int kiln_cache_status_json(kiln_cache *c, kiln_buf *out)
{
	const kiln_cache_config *cfg = c->config;
	count_ctx k = {.c = c};
	size_t len = out->len;
	int rc;

	kiln_cache_refresh_lag(c);
	if ((rc = kiln_cache_scan(c, count_cb, &k)) < 0)
		return rc;
	rc = kiln_buf_puts(out, "{\"dir\":");
	rc |= kiln_buf_put_json_text(out, c->dir, strlen(c->dir));
	rc |= kiln_buf_printf(
	    out,
	    ",\"size_limit\":%" PRIu64 ",\"used_bytes\":%" PRIu64 ",\"high_watermark\":%g"
	    ",\"low_watermark\":%g,\"high_bytes\":%" PRIu64 ",\"low_bytes\":%" PRIu64 ",\"shards\":%" PRIu64
	    ",\"pinned_shards\":%" PRIu64 ",\"pinned_bytes\":%" PRIu64,
	    cfg->size_limit, k.bytes, cfg->high, cfg->low, (uint64_t)(cfg->high * (double)cfg->size_limit),
	    (uint64_t)(cfg->low * (double)cfg->size_limit), k.shards, k.pinned, k.pinned_bytes);
	pthread_mutex_lock(&c->lock);
	rc |= kiln_buf_printf(out, ",\"pins_known\":%s,\"pins\":[", c->pinned_known ? "true" : "false");
	for (size_t i = 0; i < cfg->pin_count; i++) {
		rc |= kiln_buf_puts(out, i ? ",\n" : "\n");
		rc |= json_pin(out, &c->pins[i]);
	}
	rc |= kiln_buf_puts(out, cfg->pin_count ? "\n],\"last_sync\":" : "],\"last_sync\":");
	if (!c->last_time) {
		rc |= kiln_buf_puts(out, "null");
	} else {
		rc |= kiln_buf_printf(out, "{\"ok\":%s", c->last_rc == 0 ? "true" : "false");
		rc |= json_time(out, "time", c->last_time);
		rc |= kiln_buf_puts(out, ",\"error\":");
		rc |= c->last_rc == 0 ? kiln_buf_puts(out, "null") : json_string(out, c->last_msg);
		rc |= json_time(out, "last_ok_time", c->last_ok);
		rc |= kiln_buf_printf(out,
		                      ",\"fetched\":%" PRIu64 ",\"fetched_bytes\":%" PRIu64
		                      ",\"evicted\":%" PRIu64 ",\"evicted_bytes\":%" PRIu64
		                      ",\"failed\":%" PRIu64 "}",
		                      c->last.fetched, c->last.fetched_bytes, c->last.evicted,
		                      c->last.evicted_bytes, c->last.failed);
	}
	rc |= kiln_buf_printf(out, ",\"peers\":%zu,\"token_set\":%s}\n", cfg->peer_count,
	                      cfg->token ? "true" : "false");
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		out->len = len;
	return rc < 0 ? kiln_error_oom(NULL) : 0;
}

int kiln_cache_status(kiln_cache *c, kiln_buf *out)
{
	const kiln_cache_config *cfg = c->config;
	count_ctx k = {.c = c};
	char used[32], limit[32], high[32], low[32], pb[32];
	int rc;

	kiln_cache_refresh_lag(c);
	if ((rc = kiln_cache_scan(c, count_cb, &k)) < 0)
		return rc;
	kiln_size_human(used, sizeof(used), k.bytes, false);
	kiln_size_human(limit, sizeof(limit), cfg->size_limit, false);
	kiln_size_human(high, sizeof(high), (uint64_t)(cfg->high * (double)cfg->size_limit), false);
	kiln_size_human(low, sizeof(low), (uint64_t)(cfg->low * (double)cfg->size_limit), false);
	kiln_size_human(pb, sizeof(pb), k.pinned_bytes, false);
	kiln_buf_printf(out, "cache %s\n", c->dir);
	kiln_buf_printf(out, "  used %s of %s (%.1f%%); evicts above %.0f%% (%s) down to %.0f%% (%s)\n", used,
	                limit, 100.0 * (double)k.bytes / (double)cfg->size_limit, 100 * cfg->high, high,
	                100 * cfg->low, low);
	pthread_mutex_lock(&c->lock);
	kiln_buf_printf(out, "  shards %" PRIu64 ", pinned %" PRIu64 " (%s)%s\n", k.shards, k.pinned, pb,
	                c->pinned_known ? "" : " (pins not resolved yet: nothing is evicted)");
	for (size_t i = 0; i < cfg->pin_count; i++) {
		const cache_pin *p = &c->pins[i];
		char b[32];

		kiln_size_human(b, sizeof(b), p->bytes, false);
		if (!p->version.commit[0])
			kiln_buf_printf(out, "  pin %s: not resolved%s%s\n", p->spec, p->error[0] ? ": " : "",
			                p->error);
		else
			kiln_buf_printf(
			    out, "  pin %s: %.12s%s %s, %" PRIu64 " shards, %s%s%s%s%s%s\n", p->spec,
			    p->version.commit, p->follows ? " (follows the branch)" : "",
			    p->ready ? "ready" : "not ready", p->shards, b,
			    p->shown[0] && strcmp(p->shown, p->version.commit) != 0 ? " (view shows " : "",
			    p->shown[0] && strcmp(p->shown, p->version.commit) != 0 ? p->shown : "",
			    p->shown[0] && strcmp(p->shown, p->version.commit) != 0 ? ")" : "",
			    p->error[0] ? "; last sync: " : "", p->error);
	}
	if (!c->last_time) {
		kiln_buf_printf(out, "  last sync: never\n");
	} else {
		char t[32], f[32], e[32];

		iso_time(t, sizeof(t), c->last_time);
		kiln_buf_printf(out, "  last sync %s: %s%s\n", t,
		                c->last_rc == 0 ? "ok" : "failed: ", c->last_rc == 0 ? "" : c->last_msg);
		if (c->last_rc != 0 && c->last_ok) {
			iso_time(t, sizeof(t), c->last_ok);
			kiln_buf_printf(out, "  last fully successful sync %s\n", t);
		}
		kiln_size_human(f, sizeof(f), c->last.fetched_bytes, false);
		kiln_size_human(e, sizeof(e), c->last.evicted_bytes, false);
		kiln_buf_printf(out,
		                "  last sync fetched %" PRIu64 " shards (%s), evicted %" PRIu64
		                " (%s), %" PRIu64 " could not be fetched\n",
		                c->last.fetched, f, c->last.evicted, e, c->last.failed);
	}
	rc = kiln_buf_printf(out, "  peers %zu%s\n", cfg->peer_count, cfg->token ? ", bearer token set" : "");
	pthread_mutex_unlock(&c->lock);
	return rc;
}
