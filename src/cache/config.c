/* cache.yaml loading (see cache.h; every key in docs/CACHE.md). The config
 * owns its document, its arena and the bearer token (malloc'd, zeroed when
 * the config is freed); the token is read here from token_file or
 * token_env, never from the YAML itself. */
#include "cache/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/error.h"
#include "core/secret.h"
#include "core/units.h"
#include "core/yaml_doc.h"
#include "store/config.h"

#define TOKEN_MAX 4096
/* the token line and whatever follows it; a larger file is not a token file */
#define TOKEN_FILE_MAX (64u << 10)
#define TOKEN_MIN      32 /* characters: 128 bits as hex (openssl rand -hex 16), more as base64 */

typedef struct loader {
	kiln_cache_config *c;
	const kiln_yaml_doc *doc;
	const char *dir; /* the config file's folder, "" for the current one */
	kiln_config cfg; /* doc, arena and dir for the typed key readers */
} loader;

static const char *const top_keys[] = {"store",
                                       "manifest",
                                       "dir",
                                       "size_limit",
                                       "watermarks",
                                       "pins",
                                       "concurrency",
                                       "peers",
                                       "listen",
                                       "token_file",
                                       "token_env",
                                       "sync_seconds",
                                       "connections_per_address",
                                       "misses_per_second",
                                       "scrub_rate",
                                       "log",
                                       NULL};
static const char *const watermark_keys[] = {"high", "low", NULL};
static const char *const log_keys[] = {"level", NULL};

/* The keys a map may hold; at the top, a secret-looking key gets its own
 * message (secrets come from token_file or token_env, never the file). */
static int check_keys(loader *l, const kiln_yaml_node *map, const char *section, const char *const *allowed)
{
	for (size_t i = 0; !section && map->kind == KILN_YAML_MAPPING && i < map->count; i++) {
		const char *key = map->keys[i]->value;

		if (strcmp(key, "token") == 0 || strstr(key, "secret") || strstr(key, "password"))
			return kiln_yaml_fail(
			    l->doc, map->keys[i], key,
			    "secrets do not belong in the cache config (use token_file or token_env)");
	}
	return kiln_config_check_keys(&l->cfg, map, section, allowed);
}

/* [a-z0-9][a-z0-9._-]{0,127}: dataset, branch and tag names (docs/VERSIONS.md). */
static bool name_ok(const char *s, size_t n)
{
	if (n == 0 || n > 128 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
		      s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

/* The items of a sequence, or of a comma/space separated scalar (what
 * --set pins=a@main,b@v3 gives), each passed to add(). */
static int each_item(loader *l, const kiln_yaml_node *n, const char *key,
                     int (*add)(loader *l, const kiln_yaml_node *at, const char *item))
{
	int rc;

	if (n->kind == KILN_YAML_SEQUENCE) {
		for (size_t i = 0; i < n->count; i++) {
			const char *s;
			if ((rc = kiln_yaml_string(l->doc, n->items[i], key, &s)) < 0 ||
			    (rc = add(l, n->items[i], s)) < 0)
				return rc;
		}
		return 0;
	}
	const char *list;
	if ((rc = kiln_yaml_string(l->doc, n, key, &list)) < 0)
		return rc;
	for (const char *c = list; *c;) {
		size_t len = strcspn(c, ", ");
		if (len && (rc = add(l, n, kiln_arena_strndup(l->c->arena, c, len))) < 0)
			return rc;
		c += len;
		c += strspn(c, ", ");
	}
	return 0;
}

static int push(loader *l, const char ***v, size_t *n, const char *s)
{
	const char **grown = kiln_arena_alloc(l->c->arena, (*n + 1) * sizeof(*grown));

	if (!grown)
		return kiln_error_oom(NULL);
	if (*n)
		memcpy(grown, *v, *n * sizeof(*grown));
	grown[(*n)++] = s;
	*v = grown;
	return 0;
}

static int add_pin(loader *l, const kiln_yaml_node *at, const char *pin)
{
	kiln_cache_config *c = l->c;
	const char *sep = strchr(pin, '@');
	size_t ds = sep ? (size_t)(sep - pin) : strlen(pin);

	if (!name_ok(pin, ds) || (sep && !name_ok(sep + 1, strlen(sep + 1))))
		return kiln_yaml_fail(l->doc, at, "pins",
		                      "\"%s\" is not DATASET@REF (lower-case letters, digits, '.', '_', '-': "
		                      "user-events@main, user-events@v3, user-events@<commit>)",
		                      pin);
	if (!sep)
		pin = kiln_arena_printf(c->arena, "%s@main", pin);
	for (size_t i = 0; i < c->pin_count; i++)
		if (strcmp(c->pins[i], pin) == 0)
			return kiln_yaml_fail(l->doc, at, "pins", "%s is pinned twice", pin);
	return push(l, &c->pins, &c->pin_count, pin);
}

static int add_peer(loader *l, const kiln_yaml_node *at, const char *peer)
{
	kiln_cache_config *c = l->c;
	const char *host;
	size_t n = strlen(peer);

	if (strncmp(peer, "http://", 7) == 0)
		host = peer + 7;
	else if (strncmp(peer, "https://", 8) == 0)
		host = peer + 8;
	else
		return kiln_yaml_fail(l->doc, at, "peers", "\"%s\" is not an http:// or https:// URL", peer);
	if (!*host || *host == '/' || strcspn(host, "/") > strcspn(host, "@?#"))
		return kiln_yaml_fail(l->doc, at, "peers",
		                      "\"%s\": expected http://HOST:PORT (no user, query or fragment)", peer);
	if (strcspn(host, "?# \t") != strlen(host))
		return kiln_yaml_fail(l->doc, at, "peers", "\"%s\": expected http://HOST:PORT", peer);
	while (n > 0 && peer[n - 1] == '/')
		n--;
	return push(l, &c->peers, &c->peer_count, kiln_arena_strndup(c->arena, peer, n));
}

/* The first line of a file only its owner may read, trimmed; read with
 * kiln_secret_read_file() (a FIFO or a device is refused, never waited on). */
static int read_token_file(loader *l, const kiln_yaml_node *at, const char *path, char **out)
{
	char *text = NULL, reason[512];
	size_t len = 0, end, start = 0;
	int rc = 0;

	if ((rc = kiln_secret_read_file(&text, &len, path, "token file", TOKEN_FILE_MAX)) < 0) {
		snprintf(reason, sizeof(reason), "%s", kiln_error_last());
		return kiln_yaml_fail(l->doc, at, "token_file", "%s", reason);
	}
	end = strcspn(text, "\r\n");
	while (start < end && (text[start] == ' ' || text[start] == '\t'))
		start++;
	while (end > start && (text[end - 1] == ' ' || text[end - 1] == '\t'))
		end--;
	if (end == start || end - start > TOKEN_MAX) {
		rc =
		    kiln_yaml_fail(l->doc, at, "token_file",
		                   "%s: the first line must hold the token (1 to %d bytes)", path, TOKEN_MAX);
		goto cleanup;
	}
	if (end - start < TOKEN_MIN) {
		rc = kiln_yaml_fail(l->doc, at, "token_file",
		                    "%s: the token is %zu characters; at least %d are needed (128 bits: "
		                    "openssl rand -hex 16)",
		                    path, end - start, TOKEN_MIN);
		goto cleanup;
	}
	if (!(*out = strndup(text + start, end - start)))
		rc = kiln_error_oom(NULL);
cleanup:
	kiln_secret_free(text, len);
	return rc;
}

static int load_token(loader *l, const kiln_yaml_node *root)
{
	const char *file = NULL, *env = NULL, *v;
	char *token = NULL;
	int rc;

	if ((rc = kiln_config_string(&l->cfg, root, NULL, "token_file", false, &file)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, root, NULL, "token_env", false, &env)) < 0)
		return rc;
	if (file && env)
		return kiln_yaml_fail(l->doc, kiln_yaml_get(root, "token_env"), "token_env",
		                      "set at most one of token_file and token_env");
	if (file) {
		if ((rc = read_token_file(l, kiln_yaml_get(root, "token_file"),
		                          kiln_config_resolve(&l->cfg, file), &token)) < 0)
			return rc;
	} else if (env) {
		if (!(v = getenv(env)) || !*v)
			return kiln_yaml_fail(l->doc, kiln_yaml_get(root, "token_env"), "token_env",
			                      "the environment variable %s is not set", env);
		if (strlen(v) > TOKEN_MAX || strcspn(v, "\r\n") != strlen(v))
			return kiln_yaml_fail(l->doc, kiln_yaml_get(root, "token_env"), "token_env",
			                      "%s must hold one line of 1 to %d bytes", env, TOKEN_MAX);
		if (strlen(v) < TOKEN_MIN)
			return kiln_yaml_fail(l->doc, kiln_yaml_get(root, "token_env"), "token_env",
			                      "%s holds a token of %zu characters; at least %d are needed "
			                      "(128 bits: openssl rand -hex 16)",
			                      env, strlen(v), TOKEN_MIN);
		if (!(token = strdup(v)))
			return kiln_error_oom(NULL);
	}
	l->c->token = token;
	return 0;
}

static int load_watermarks(loader *l, const kiln_yaml_node *root)
{
	const kiln_yaml_node *w = kiln_yaml_get(root, "watermarks");
	kiln_cache_config *c = l->c;
	int rc;

	c->high = 0.9;
	c->low = 0.8;
	if (!w || kiln_yaml_is_null(w))
		return 0;
	if ((rc = check_keys(l, w, "watermarks", watermark_keys)) < 0)
		return rc;
	for (int i = 0; i < 2; i++) {
		const char *key = i == 0 ? "high" : "low";
		const kiln_yaml_node *n = kiln_yaml_get(w, key);
		long double v = 0;

		if (!n || kiln_yaml_is_null(n))
			continue;
		if ((rc = kiln_yaml_number(l->doc, n, kiln_config_path(&l->cfg, "watermarks", key), &v)) < 0)
			return rc;
		if (!(v > 0 && v <= 1))
			return kiln_yaml_fail(l->doc, n, kiln_config_path(&l->cfg, "watermarks", key),
			                      "must be a fraction of size_limit above 0 and at most 1");
		*(i == 0 ? &c->high : &c->low) = (double)v;
	}
	if (!(c->low < c->high))
		return kiln_yaml_fail(l->doc, w, "watermarks", "low (%g) must be below high (%g)", c->low,
		                      c->high);
	return 0;
}

/* A URL libgit2 fetches (scheme://..., or scp-like host:path) rather than a local path. */
bool kiln_cache_manifest_is_url(const char *s)
{
	const char *colon = strchr(s, ':'), *slash = strchr(s, '/');

	return strstr(s, "://") || (colon && colon != s && (!slash || colon < slash));
}

static int load(loader *l)
{
	const kiln_yaml_node *root = kiln_yaml_root(l->doc), *n;
	const kiln_store_config_src src = {.doc = l->doc,
	                                   .arena = l->c->arena,
	                                   .dir = l->dir,
	                                   .docs = "docs/CACHE.md",
	                                   .file = "cache config"};
	kiln_cache_config *c = l->c;
	const char *size = NULL;
	int64_t v;
	long long bytes;
	int rc;

	if (!root)
		return kiln_yaml_fail(l->doc, NULL, "", "empty cache config");
	if ((rc = check_keys(l, root, NULL, top_keys)) < 0 ||
	    (rc = kiln_store_config_load(&src, root, "store", &c->store_url, &c->store)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, root, NULL, "manifest", true, &c->manifest)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, root, NULL, "dir", true, &c->dir)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, root, NULL, "size_limit", true, &size)) < 0)
		return rc;
	if (!*c->manifest)
		return kiln_yaml_fail(l->doc, kiln_yaml_get(root, "manifest"), "manifest",
		                      "must not be empty");
	if (!kiln_cache_manifest_is_url(c->manifest))
		c->manifest = kiln_config_resolve(&l->cfg, c->manifest);
	if (!*c->dir)
		return kiln_yaml_fail(l->doc, kiln_yaml_get(root, "dir"), "dir", "must not be empty");
	c->dir = kiln_config_resolve(&l->cfg, c->dir);
	if ((bytes = kiln_parse_size(size)) <= 0)
		return kiln_yaml_fail(l->doc, kiln_yaml_get(root, "size_limit"), "size_limit",
		                      "expected a size above 0 (e.g. 500G, 64M, 1048576)");
	c->size_limit = (uint64_t)bytes;
	if ((rc = load_watermarks(l, root)) < 0)
		return rc;
	if ((n = kiln_yaml_get(root, "pins")) && !kiln_yaml_is_null(n) &&
	    (rc = each_item(l, n, "pins", add_pin)) < 0)
		return rc;
	if ((n = kiln_yaml_get(root, "peers")) && !kiln_yaml_is_null(n) &&
	    (rc = each_item(l, n, "peers", add_peer)) < 0)
		return rc;
	v = 8;
	if ((rc = kiln_config_int(&l->cfg, root, NULL, "concurrency", 1, 256, &v)) < 0)
		return rc;
	c->concurrency = (unsigned)v;
	v = 60;
	if ((rc = kiln_config_int(&l->cfg, root, NULL, "sync_seconds", 1, 86400, &v)) < 0)
		return rc;
	c->sync_seconds = (unsigned)v;
	v = 256;
	if ((rc = kiln_config_int(&l->cfg, root, NULL, "connections_per_address", 1, 65535, &v)) < 0)
		return rc;
	c->connections_per_address = (unsigned)v;
	v = 100;
	if ((rc = kiln_config_int(&l->cfg, root, NULL, "misses_per_second", 1, 1000000, &v)) < 0)
		return rc;
	c->misses_per_second = (unsigned)v;
	{
		size_t rate = 16u << 20;

		if ((rc = kiln_config_size(&l->cfg, root, NULL, "scrub_rate", 0, &rate)) < 0)
			return rc;
		c->scrub_rate = rate;
	}
	c->listen = "127.0.0.1:9470";
	if ((rc = kiln_config_string(&l->cfg, root, NULL, "listen", false, &c->listen)) < 0)
		return rc;
	if (!strchr(c->listen, ':') || !c->listen[strcspn(c->listen, ":") + 1])
		return kiln_yaml_fail(l->doc, kiln_yaml_get(root, "listen"), "listen", "expected HOST:PORT");
	c->log_level = KILN_LOG_INFO;
	if ((n = kiln_yaml_get(root, "log")) && !kiln_yaml_is_null(n)) {
		const char *level = NULL;

		if ((rc = check_keys(l, n, "log", log_keys)) < 0 ||
		    (rc = kiln_config_string(&l->cfg, n, "log", "level", false, &level)) < 0)
			return rc;
		if (level && !kiln_log_level_parse(level, &c->log_level))
			return kiln_yaml_fail(l->doc, kiln_yaml_get(n, "level"), "log.level",
			                      "expected debug, info, warn or error");
	}
	return load_token(l, root);
}

int kiln_cache_config_load(kiln_cache_config **out, const char *path, char *const *sets, size_t n)
{
	kiln_cache_config *c = calloc(1, sizeof(*c));
	kiln_yaml_doc *doc = NULL;
	loader l = {0};
	int rc;

	*out = NULL;
	if (!c || !(c->arena = kiln_arena_new())) {
		free(c);
		return kiln_error_oom(NULL);
	}
	if ((rc = kiln_yaml_load_config(&doc, path, sets, n)) < 0)
		goto fail;
	c->doc = doc;
	c->file = kiln_arena_printf(c->arena, "%s", path);
	l.c = c;
	l.doc = doc;
	if (!c->file || !(l.dir = kiln_arena_dirname(c->arena, path))) {
		rc = kiln_error_oom(NULL);
		goto fail;
	}
	l.cfg = (kiln_config){.doc = doc, .arena = c->arena, .dir = l.dir, .docs = "docs/CACHE.md"};
	if ((rc = load(&l)) < 0)
		goto fail;
	*out = c;
	return 0;
fail:
	kiln_cache_config_free(c);
	return rc;
}

void kiln_cache_config_free(kiln_cache_config *config)
{
	if (!config)
		return;
	if (config->token) {
		char *t = (char *)config->token;

		explicit_bzero(t, strlen(t));
		free(t);
	}
	kiln_yaml_free(config->doc);
	kiln_arena_free(config->arena);
	free(config);
}
