/* The s3:// store: an adapter from the kiln_store interface to the SigV4
 * client (s3_client.h). s3://BUCKET/PREFIX maps key K to object PREFIX/K.
 * This file reads what the client needs from the URL, the store options
 * and the environment (credentials, session token), and gives the store
 * interface its meaning on S3 (a listing skips keys kiln did not write; a
 * remove of a missing key is KILN_ENOTFOUND). Requests, retries, signing
 * and messages are the client's. */
#include "store/store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/secret.h"
#include "store/s3_client.h"

#define CRED_FILE_MAX (64u << 10)

typedef struct s3_store {
	kiln_store base;
	kiln_s3_client *client;
	char *bucket;
	char *prefix; /* "" or "a/b/" */
	char *endpoint;
} s3_store;

extern const kiln_store_backend kiln_store_s3_backend;

/* --- credentials --------------------------------------------------------- */

typedef struct credentials {
	char *access_key, *secret_key, *session_token; /* zeroed on free */
} credentials;

static void free_secret(char *p)
{
	if (p) {
		explicit_bzero(p, strlen(p));
		free(p);
	}
}

static void credentials_free(credentials *c)
{
	free_secret(c->access_key);
	free_secret(c->secret_key);
	free_secret(c->session_token);
}

static char *trim(char *p)
{
	char *end;

	while (*p == ' ' || *p == '\t')
		p++;
	end = p + strlen(p);
	while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		*--end = '\0';
	return p;
}

/* Reads "access_key_id=", "secret_access_key=" and "session_token=" (or the
 * aws_ names, spaces around '=' allowed, '#' comments and [sections]
 * skipped) from a file only its owner can read, through
 * kiln_secret_read_file() (a FIFO or a device is refused, never waited on). */
static int read_credentials_file(credentials *cr, const char *file)
{
	char *buf = NULL, *line, *save = NULL;
	size_t len = 0;
	int rc;

	if ((rc = kiln_secret_read_file(&buf, &len, file, "credentials file", CRED_FILE_MAX)) < 0)
		return rc;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *eq, *name, *value, **slot;

		line = trim(line);
		if (!*line || *line == '#' || *line == ';' || *line == '[')
			continue;
		if (!(eq = strchr(line, '=')))
			continue;
		*eq = '\0';
		name = trim(line);
		value = trim(eq + 1);
		if (strncmp(name, "aws_", 4) == 0)
			name += 4;
		if (strcmp(name, "access_key_id") == 0)
			slot = &cr->access_key;
		else if (strcmp(name, "secret_access_key") == 0)
			slot = &cr->secret_key;
		else if (strcmp(name, "session_token") == 0)
			slot = &cr->session_token;
		else
			continue;
		if (!*value)
			continue;
		free_secret(*slot);
		if (!(*slot = strdup(value))) {
			rc = kiln_error_oom(NULL);
			goto cleanup;
		}
	}
	if (!cr->access_key || !cr->secret_key)
		rc = kiln_error_set(KILN_EINVALID, "credentials file %s has no %s line", file,
		                    !cr->access_key ? "access_key_id=" : "secret_access_key=");
cleanup:
	kiln_secret_free(buf, len);
	return rc;
}

/* The credentials file when the options name one, else AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY and (temporary credentials) AWS_SESSION_TOKEN. */
static int load_credentials(credentials *cr, const char *url, const kiln_store_options *options)
{
	const char *id, *secret, *token;

	if (options->credentials_file)
		return read_credentials_file(cr, options->credentials_file);
	id = getenv("AWS_ACCESS_KEY_ID");
	secret = getenv("AWS_SECRET_ACCESS_KEY");
	token = getenv("AWS_SESSION_TOKEN");
	if (!id || !*id || !secret || !*secret)
		return kiln_error_set(KILN_EINVALID,
		                      "%s: no S3 credentials: %s is not set (set AWS_ACCESS_KEY_ID and "
		                      "AWS_SECRET_ACCESS_KEY, or name a 0600 credentials file)",
		                      url, !id || !*id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY");
	cr->access_key = strdup(id);
	cr->secret_key = strdup(secret);
	cr->session_token = token && *token ? strdup(token) : NULL;
	if (!cr->access_key || !cr->secret_key || (token && *token && !cr->session_token))
		return kiln_error_oom(NULL);
	return 0;
}

/* --- open / close -------------------------------------------------------- */

/* S3's bucket naming rules: 3 to 63 of [a-z0-9.-], starting and ending with a
 * letter or digit. Path-style addressing also reaches the older names that
 * some on-prem services still allow (upper case, '_', up to 255). */
static bool bucket_valid(const char *b, bool virtual_host)
{
	size_t n = strlen(b), max = virtual_host ? 63 : 255;

	if (n < 3 || n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = b[i];
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '-';

		if (!virtual_host)
			ok = ok || (ch >= 'A' && ch <= 'Z') || ch == '_';
		if (!ok)
			return false;
	}
	return b[0] != '.' && b[0] != '-' && b[n - 1] != '.' && b[n - 1] != '-' && !strstr(b, "..");
}

static void s3_close(kiln_store *store)
{
	s3_store *s = (s3_store *)store;

	kiln_s3_client_free(s->client);
	free(s->bucket);
	free(s->prefix);
	free(s->endpoint);
	free(s->base.url);
	free(s);
}

/* The region: the options', else $AWS_REGION or $AWS_DEFAULT_REGION (as
 * AWS's own tools read them), else us-east-1. */
static const char *region_of(const kiln_store_options *options)
{
	const char *r = options->region;

	if (!r || !*r)
		r = getenv("AWS_REGION");
	if (!r || !*r)
		r = getenv("AWS_DEFAULT_REGION");
	return r && *r ? r : "us-east-1";
}

/* The endpoint the options name; else $AWS_ENDPOINT_URL_S3 or
 * $AWS_ENDPOINT_URL ("http://host:port" or "https://host", as AWS's tools
 * read them; http:// sets *http); else AWS's for the region. */
static int endpoint_of(char **out, bool *http, const char *url, const kiln_store_options *options)
{
	const char *e = options->endpoint, *from = "S3 endpoint";

	*http = options->http;
	if (!e || !*e) {
		const char *env = getenv("AWS_ENDPOINT_URL_S3");

		from = "AWS_ENDPOINT_URL_S3";
		if (!env || !*env) {
			env = getenv("AWS_ENDPOINT_URL");
			from = "AWS_ENDPOINT_URL";
		}
		if (env && *env) {
			size_t n;

			if (strncmp(env, "http://", 7) == 0)
				*http = true, e = env + 7;
			else if (strncmp(env, "https://", 8) == 0)
				e = env + 8;
			else
				return kiln_error_set(
				    KILN_EINVALID, "%s: %s must be http://HOST[:PORT] or https://HOST[:PORT]",
				    url, from);
			n = strcspn(e, "/");
			if (e[n] && e[n + 1])
				return kiln_error_set(KILN_EINVALID, "%s: %s must name no path", url, from);
			if (!(*out = strndup(e, n)))
				return kiln_error_oom(NULL);
			e = *out;
			goto check;
		}
	}
	if (!e || !*e) {
		const char *region = region_of(options);

		if (strcmp(region, "us-east-1") == 0)
			*out = strdup("s3.amazonaws.com");
		else if (asprintf(out, "s3.%s.amazonaws.com", region) < 0)
			*out = NULL;
		return *out ? 0 : kiln_error_oom(NULL);
	}
	if (!(*out = strdup(e)))
		return kiln_error_oom(NULL);
check:
	if (!**out || strchr(*out, '/') || strchr(*out, '@') || strchr(*out, '?') || strchr(*out, '#'))
		return kiln_error_set(
		    KILN_EINVALID,
		    "%s: %s '%s' must be host[:port] (no scheme or path; plain HTTP is the http option)", url,
		    from, strchr(*out, '@') ? "(with user@, not shown)" : *out);
	return 0;
}

static int s3_open(kiln_store **out, const char *url, const kiln_store_options *options)
{
	const char *rest = url + strlen("s3://"), *slash = strchr(rest, '/');
	credentials cr = {0};
	kiln_s3_config cfg = {0};
	s3_store *s;
	size_t plen;
	int rc;

	*out = NULL;
	if (!(s = calloc(1, sizeof(*s))))
		return kiln_error_oom(NULL);
	s->base.backend = &kiln_store_s3_backend;
	s->base.url = strdup(url);
	s->bucket = slash ? strndup(rest, (size_t)(slash - rest)) : strdup(rest);
	s->prefix = strdup(slash ? slash + 1 : "");
	if (!s->base.url || !s->bucket || !s->prefix) {
		rc = kiln_error_oom(NULL);
		goto cleanup;
	}
	if (!*s->bucket) {
		rc =
		    kiln_error_set(KILN_EINVALID, "store URL '%s' names no bucket (s3://BUCKET/PREFIX)", url);
		goto cleanup;
	}
	if (!bucket_valid(s->bucket, options->virtual_host)) {
		rc = kiln_error_set(KILN_EINVALID, "store URL '%s': invalid bucket name for %s-style access",
		                    url, options->virtual_host ? "virtual-host" : "path");
		goto cleanup;
	}
	/* the prefix, without its trailing '/'s, must be a key; keep one '/' */
	plen = strlen(s->prefix);
	while (plen > 0 && s->prefix[plen - 1] == '/')
		s->prefix[--plen] = '\0';
	if (plen > 0) {
		char *p;

		if (!kiln_store_key_valid(s->prefix)) {
			rc = kiln_error_set(KILN_EINVALID, "store URL '%s': invalid prefix", url);
			goto cleanup;
		}
		if (asprintf(&p, "%s/", s->prefix) < 0) {
			rc = kiln_error_oom(NULL);
			goto cleanup;
		}
		free(s->prefix);
		s->prefix = p;
	}
	if ((rc = endpoint_of(&s->endpoint, &cfg.http, url, options)) < 0 ||
	    (rc = load_credentials(&cr, url, options)) < 0)
		goto cleanup;
	cfg.endpoint = s->endpoint;
	cfg.virtual_host = options->virtual_host;
	cfg.bucket = s->bucket;
	cfg.region = region_of(options);
	cfg.credentials = (kiln_sigv4_credentials){cr.access_key, cr.secret_key, cr.session_token};
	cfg.max_retries = options->max_retries;
	cfg.part_size = (uint64_t)options->part_size_mb << 20;
	if ((rc = kiln_s3_client_new(&s->client, &cfg)) < 0)
		goto cleanup;
	credentials_free(&cr);
	*out = &s->base;
	return 0;
cleanup:
	credentials_free(&cr);
	s3_close(&s->base);
	return rc;
}

/* --- objects -------------------------------------------------------------- */

static char *full_name(const s3_store *s, const char *key)
{
	char *name;

	if (asprintf(&name, "%s%s", s->prefix, key) < 0)
		return NULL;
	return name;
}

static int s3_put_file(kiln_store *store, const char *key, const char *path, uint64_t size)
{
	s3_store *s = (s3_store *)store;
	char *name = full_name(s, key);
	int rc;

	if (!name)
		return kiln_error_oom(NULL);
	rc = kiln_s3_put_file(s->client, name, path, size);
	free(name);
	return rc;
}

static int s3_put_file_new(kiln_store *store, const char *key, const char *path, uint64_t size)
{
	s3_store *s = (s3_store *)store;
	char *name = full_name(s, key);
	int rc;

	if (!name)
		return kiln_error_oom(NULL);
	rc = kiln_s3_put_file_new(s->client, name, path, size);
	free(name);
	return rc;
}

static int s3_get(kiln_store *store, const char *key, kiln_store_sink sink, void *ctx)
{
	s3_store *s = (s3_store *)store;
	char *name = full_name(s, key);
	int rc;

	if (!name)
		return kiln_error_oom(NULL);
	rc = kiln_s3_get(s->client, name, sink, ctx);
	free(name);
	return rc;
}

static int stat_object(s3_store *s, const char *name, uint64_t *out_size)
{
	uint64_t size = 0;
	int rc = kiln_s3_head(s->client, name, &size);

	if (rc == KILN_ENOTFOUND) {
		kiln_error_clear();
		return 0;
	}
	if (rc < 0)
		return rc;
	if (out_size)
		*out_size = size;
	return 1;
}

static int s3_stat(kiln_store *store, const char *key, uint64_t *out_size)
{
	s3_store *s = (s3_store *)store;
	char *name = full_name(s, key);
	int rc;

	if (!name)
		return kiln_error_oom(NULL);
	rc = stat_object(s, name, out_size);
	free(name);
	return rc;
}

/* S3 answers a DELETE of a missing key with success; a HEAD first gives the
 * same KILN_ENOTFOUND as the file store. */
static int s3_remove(kiln_store *store, const char *key)
{
	s3_store *s = (s3_store *)store;
	char *name = full_name(s, key);
	int rc;

	if (!name)
		return kiln_error_oom(NULL);
	rc = stat_object(s, name, NULL);
	if (rc == 0)
		rc = kiln_error_set(KILN_ENOTFOUND, "s3://%s/%s at %s: no such object", s->bucket, name,
		                    s->endpoint);
	else if (rc == 1)
		rc = kiln_s3_delete(s->client, name);
	free(name);
	return rc;
}

/* --- list ----------------------------------------------------------------- */

typedef struct list_ctx {
	size_t skip; /* the store's prefix */
	kiln_store_key_cb cb;
	void *ctx;
} list_ctx;

static int list_one(void *ctx, const char *name, uint64_t size, int64_t mtime)
{
	list_ctx *l = ctx;

	if (!kiln_store_key_valid(name + l->skip))
		return 0; /* not ours: written by another tool */
	return l->cb(l->ctx, name + l->skip, size, mtime);
}

static int s3_list(kiln_store *store, const char *prefix, kiln_store_key_cb cb, void *ctx)
{
	s3_store *s = (s3_store *)store;
	list_ctx l = {.skip = strlen(s->prefix), .cb = cb, .ctx = ctx};
	char *full = full_name(s, prefix);
	int rc;

	if (!full)
		return kiln_error_oom(NULL);
	rc = kiln_s3_list(s->client, full, list_one, &l);
	free(full);
	return rc;
}

/* The store.* keys of an s3:// store (docs/STORES.md). */
static const kiln_store_option s3_options[] = {
    {.key = "endpoint", .kind = KILN_STORE_OPTION_STRING, .offset = offsetof(kiln_store_options, endpoint)},
    {.key = "region", .kind = KILN_STORE_OPTION_STRING, .offset = offsetof(kiln_store_options, region)},
    {.key = "style",
     .kind = KILN_STORE_OPTION_CHOICE,
     .offset = offsetof(kiln_store_options, virtual_host),
     .choices = {"path", "virtual"}},
    {.key = "credentials_file",
     .kind = KILN_STORE_OPTION_PATH,
     .offset = offsetof(kiln_store_options, credentials_file)},
    {.key = "max_retries",
     .kind = KILN_STORE_OPTION_INT,
     .offset = offsetof(kiln_store_options, max_retries),
     .lo = 0,
     .hi = 100},
    {.key = "http", .kind = KILN_STORE_OPTION_BOOL, .offset = offsetof(kiln_store_options, http)},
    {.key = "part_size_mb",
     .kind = KILN_STORE_OPTION_INT,
     .offset = offsetof(kiln_store_options, part_size_mb),
     .lo = 5,
     .hi = 5120},
    {.key = NULL},
};

const kiln_store_backend kiln_store_s3_backend = {
    .version = KILN_STORE_BACKEND_VERSION,
    .scheme = "s3",
    .config_url = "s3://BUCKET/PREFIX",
    .options = s3_options,
    .open = s3_open,
    .put_file = s3_put_file,
    .get = s3_get,
    .stat = s3_stat,
    .remove = s3_remove,
    .list = s3_list,
    .close = s3_close,
    .put_file_new = s3_put_file_new,
};
