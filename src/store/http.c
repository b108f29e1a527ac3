/* The http:// and https:// store: a kiln cache node (`kiln cache serve`)
 * read through libcurl. Read-only, and it holds only shards: key
 * "shards/<hh>/<hash>.jsonl.zst" is GET BASE/v1/shards/<hash>; any other
 * key names no object here (get KILN_ENOTFOUND, stat 0); put_file, remove
 * and list are KILN_EINVALID. The bearer token comes from KILN_CACHE_TOKEN
 * (read at open, zeroed on close), goes only in the Authorization header and
 * never into a message; redirects are not followed, so it goes nowhere else.
 * Connection failures and 5xx answers are retried with exponential backoff;
 * a get that broke off resumes with a Range request (a shard never changes
 * under its name). The store keeps a pool of curl handles (store/curl.h) so several
 * threads may share it. Callers verify what they read (the reader hashes
 * every shard). */
#include "store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/error.h"
#include "store/curl.h"

#define DEFAULT_RETRIES 5
#define TOKEN_ENV       "KILN_CACHE_TOKEN"
#define TOKEN_MAX       4096

typedef struct http_store {
	kiln_store base;
	char *root;               /* "http://host:port[/path]", no trailing '/' */
	char *auth;               /* "Authorization: Bearer <token>", or NULL; zeroed on close */
	bool as_peer;             /* send X-Kiln-Peer: 1 */
	const char *token_source; /* where the token came from, for messages */
	int max_retries;
	kiln_curl_pool pool;
} http_store;

/* One operation across its attempts. */
typedef struct http_call {
	http_store *s;
	const char *key;
	char url[256];
	CURL *curl;
	/* get */
	kiln_store_sink sink;
	void *sink_ctx;
	uint64_t delivered; /* bytes the sink has taken */
	uint64_t total;     /* the object's size, from the first 200 answer; 0 = not known */
	uint64_t from;      /* this attempt asked for the bytes from here on */
	uint64_t skip;      /* bytes of this answer the sink already has (a 200 to a Range request) */
	bool started;       /* this attempt's first byte of body arrived */
	bool aborted;       /* the sink stopped the transfer... */
	int abort_rc;       /* ...and this is what get returns */
	/* each attempt */
	long status;
	CURLcode cc;
	char curl_err[CURL_ERROR_SIZE];
	char body[160]; /* the start of an error answer, printable */
	size_t body_len;
} http_call;

extern const kiln_store_backend kiln_store_http_backend;
extern const kiln_store_backend kiln_store_https_backend;

static int read_only(const kiln_store *store)
{
	return kiln_error_set(KILN_EINVALID, "%s: a cache node is read-only", store->url);
}

/* --- open / close ---------------------------------------------------------- */

static void http_close(kiln_store *store)
{
	http_store *s = (http_store *)store;

	kiln_curl_pool_free(&s->pool);
	if (s->auth) {
		explicit_bzero(s->auth, strlen(s->auth));
		free(s->auth);
	}
	free(s->root);
	free(s->base.url);
	free(s);
}

static bool url_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
	       c == '-' || c == '_' || c == ':' || c == '/' || c == '[' || c == ']' || c == '~';
}

static int open_scheme(kiln_store **out, const char *url, const kiln_store_options *options,
                       const kiln_store_backend *backend)
{
	const char *host = strstr(url, "://") + 3, *token;
	http_store *s;
	size_t len;
	int rc;

	*out = NULL;
	if ((rc = kiln_curl_init()) < 0)
		return rc;
	if (!*host || *host == '/' || *host == ':')
		return kiln_error_set(KILN_EINVALID, "store URL '%s' names no host (%s://HOST[:PORT])", url,
		                      backend->scheme);
	for (const char *p = host; *p; p++)
		if (!url_char(*p))
			return kiln_error_set(
			    KILN_EINVALID,
			    "store URL '%.80s': a cache node URL is %s://HOST[:PORT][/PATH] "
			    "(no query, fragment or escapes)",
			    url, backend->scheme);
	s = calloc(1, sizeof(*s));
	if (!s)
		return kiln_error_oom(NULL);
	kiln_curl_pool_init(&s->pool);
	s->base.backend = backend;
	s->base.url = strdup(url);
	s->root = strdup(url);
	if (!s->base.url || !s->root) {
		rc = kiln_error_oom(NULL);
		goto cleanup;
	}
	len = strlen(s->root);
	while (len > 0 && s->root[len - 1] == '/')
		s->root[--len] = '\0';
	if (len + 80 >= sizeof(((http_call *)0)->url)) {
		rc = kiln_error_set(KILN_EINVALID, "store URL '%.80s...' is too long", url);
		goto cleanup;
	}
	token = options->bearer_token ? options->bearer_token : getenv(TOKEN_ENV);
	s->token_source = options->bearer_token ? "the configured token" : TOKEN_ENV;
	s->as_peer = options->as_peer;
	if (token && *token) {
		for (const char *p = token; *p; p++)
			if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e) {
				rc = kiln_error_set(
				    KILN_EINVALID,
				    "%s: %s holds a space or control character; a bearer token is "
				    "printable ASCII",
				    url, s->token_source);
				goto cleanup;
			}
		if (strlen(token) > TOKEN_MAX) {
			rc = kiln_error_set(KILN_EINVALID, "%s: %s is longer than %d bytes", url,
			                    s->token_source, TOKEN_MAX);
			goto cleanup;
		}
		if (asprintf(&s->auth, "Authorization: Bearer %s", token) < 0) {
			s->auth = NULL;
			rc = kiln_error_oom(NULL);
			goto cleanup;
		}
	}
	s->max_retries = options->max_retries > 0 ? options->max_retries : DEFAULT_RETRIES;
	*out = &s->base;
	return 0;
cleanup:
	http_close(&s->base);
	return rc;
}

static int http_open(kiln_store **out, const char *url, const kiln_store_options *options)
{
	return open_scheme(out, url, options, &kiln_store_http_backend);
}

static int https_open(kiln_store **out, const char *url, const kiln_store_options *options)
{
	return open_scheme(out, url, options, &kiln_store_https_backend);
}

/* --- keys ------------------------------------------------------------------- */

static bool hex64(const char *p)
{
	for (int i = 0; i < 64; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	return true;
}

/* "shards/<hh>/<hash>.jsonl.zst" -> the hash (64 lower-case hex, <hh> its
 * first two), or NULL for any other key. */
static const char *shard_hash(const char *key)
{
	static const char pre[] = "shards/", suf[] = ".jsonl.zst";
	const char *h = key + sizeof(pre) - 1 + 3;

	if (strlen(key) != sizeof(pre) - 1 + 3 + 64 + sizeof(suf) - 1 ||
	    strncmp(key, pre, sizeof(pre) - 1) != 0 || h[-1] != '/' || !hex64(h) ||
	    memcmp(h - 3, h, 2) != 0 || strcmp(h + 64, suf) != 0)
		return NULL;
	return h;
}

static int not_a_shard(const kiln_store *store, const char *key)
{
	return kiln_error_set(KILN_ENOTFOUND,
	                      "%s: no object '%s' (a cache node holds only shards/<hh>/<hash>.jsonl.zst)",
	                      store->url, key);
}

/* --- requests, retries, errors ---------------------------------------------------- */

static bool ok_status(long status)
{
	return status == 200 || status == 206;
}

static void keep_body(http_call *c, const char *data, size_t len)
{
	for (size_t i = 0; i < len && c->body_len + 1 < sizeof(c->body); i++) {
		char ch = data[i];

		c->body[c->body_len++] = (ch >= 0x20 && ch < 0x7f) ? ch : ' ';
	}
	c->body[c->body_len] = '\0';
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *ctx)
{
	http_call *c = ctx;
	size_t len = size * nmemb;
	long status = 0;
	int rc;

	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (!ok_status(status) || !c->sink) {
		keep_body(c, data, len); /* an error answer: for the message, never the sink */
		return len;
	}
	if (!c->started) {
		c->started = true;
		if (status == 200) {
			curl_off_t cl = -1;

			curl_easy_getinfo(c->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
			if (cl >= 0)
				c->total = (uint64_t)cl;
			c->skip = c->from; /* the whole object again: drop what the sink has */
		}
	}
	if (c->skip > 0) {
		size_t n = c->skip < len ? (size_t)c->skip : len;

		c->skip -= n;
		data += n;
		if (len == n)
			return len;
		rc = c->sink(c->sink_ctx, data, len - n);
		if (rc == 0)
			c->delivered += len - n;
	} else {
		rc = c->sink(c->sink_ctx, data, len);
		if (rc == 0)
			c->delivered += len;
	}
	if (rc != 0) {
		c->aborted = true;
		c->abort_rc = rc;
		return 0; /* CURLE_WRITE_ERROR */
	}
	return len;
}

static bool retriable(const http_call *c)
{
	return kiln_curl_retriable(c->cc, c->status);
}

static const char *reason(long status)
{
	switch (status) {
	case 400:
		return " Bad Request";
	case 401:
		return " Unauthorized";
	case 403:
		return " Forbidden";
	case 404:
		return " Not Found";
	case 408:
		return " Request Timeout";
	case 416:
		return " Range Not Satisfiable";
	case 429:
		return " Too Many Requests";
	case 500:
		return " Internal Server Error";
	case 502:
		return " Bad Gateway";
	case 503:
		return " Service Unavailable";
	case 504:
		return " Gateway Timeout";
	default:
		return "";
	}
}

/* The message for a failed call; names the request URL and the key, never the token. */
static int fail(const http_call *c, int attempts)
{
	char what[256];
	const char *hint = "";
	char hint_buf[96];
	int code = KILN_EINVALID;

	if (c->cc != CURLE_OK)
		snprintf(what, sizeof(what), "%s", c->curl_err[0] ? c->curl_err : curl_easy_strerror(c->cc));
	else
		snprintf(what, sizeof(what), "HTTP %ld%s%s%.120s", c->status, reason(c->status),
		         c->body_len ? ": " : "", c->body);
	if (retriable(c))
		return kiln_error_set(KILN_ERETRY, "%s (key %s): %s, gave up after %d attempt%s", c->url,
		                      c->key, what, attempts, attempts == 1 ? "" : "s");
	if (c->cc == CURLE_OK && (c->status == 401 || c->status == 403))
		snprintf(hint_buf, sizeof(hint_buf),
		         c->s->auth ? " (the node refused %s)" : " (the node wants a token: set %s)",
		         c->s->auth ? c->s->token_source : TOKEN_ENV),
		    hint = hint_buf;
	else if (c->cc == CURLE_OK && c->status == 404)
		code = KILN_ENOTFOUND;
	else if (c->cc == CURLE_OK && c->status >= 300 && c->status < 400)
		hint = " (redirects are not followed)";
	return kiln_error_set(code, "%s (key %s): %s%s", c->url, c->key, what, hint);
}

/* One request on c->curl: GET (sink set), or HEAD. from > 0 asks for the
 * bytes from there on. */
static void attempt(http_call *c, uint64_t from)
{
	struct curl_slist *headers = NULL, *h;
	CURL *e = c->curl;

	kiln_curl_request(e, c->url, c->curl_err);
	c->status = 0;
	c->body_len = 0;
	c->body[0] = '\0';
	c->skip = 0;
	c->from = from;
	c->started = false;
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
	if (!c->sink)
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	if (from > 0) {
		char range[48];

		snprintf(range, sizeof(range), "%" PRIu64 "-", from);
		curl_easy_setopt(e, CURLOPT_RANGE, range);
	}
	if (c->s->auth && !(headers = curl_slist_append(NULL, c->s->auth))) {
		c->cc = CURLE_OUT_OF_MEMORY;
		return;
	}
	if ((h = curl_slist_append(headers, "Accept-Encoding: identity")))
		headers = h;
	if (c->s->as_peer && (h = curl_slist_append(headers, "X-Kiln-Peer: 1")))
		headers = h;
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
	c->cc = curl_easy_perform(e);
	if (c->cc == CURLE_OK || c->cc == CURLE_WRITE_ERROR || c->cc == CURLE_PARTIAL_FILE)
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &c->status);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
	if (headers) {
		for (h = headers; h; h = h->next)
			explicit_bzero(h->data, strlen(h->data));
		curl_slist_free_all(headers);
	}
}

static int run(http_call *c, bool get)
{
	int n;

	c->curl = kiln_curl_take(&c->s->pool);
	if (!c->curl)
		return kiln_error_oom(NULL);
	for (n = 0;; n++) {
		attempt(c, get ? c->delivered : 0);
		if (c->aborted) {
			kiln_curl_give(&c->s->pool, c->curl);
			return c->abort_rc;
		}
		if (c->cc == CURLE_OUT_OF_MEMORY) {
			curl_easy_cleanup(c->curl);
			return kiln_error_oom(NULL);
		}
		if (c->cc == CURLE_OK && ok_status(c->status))
			break;
		if (get && c->total > 0 && c->delivered == c->total)
			break; /* every byte arrived; only the ending failed */
		if (!retriable(c) || n >= c->s->max_retries) {
			int rc = fail(c, n + 1);

			kiln_curl_give(&c->s->pool, c->curl);
			return rc;
		}
		kiln_retry_sleep(&kiln_store_retry, (unsigned)n + 1);
	}
	kiln_curl_give(&c->s->pool, c->curl);
	return 0;
}

static int build_url(http_call *c, const char *hash)
{
	int n = snprintf(c->url, sizeof(c->url), "%s/v1/shards/%.64s", c->s->root, hash);

	if (n < 0 || (size_t)n >= sizeof(c->url))
		return kiln_error_set(KILN_EINVALID, "%s: URL too long", c->s->base.url);
	return 0;
}

/* --- get / stat ---------------------------------------------------------------------- */

static int http_get(kiln_store *store, const char *key, kiln_store_sink sink, void *ctx)
{
	http_call c = {.s = (http_store *)store, .key = key, .sink = sink, .sink_ctx = ctx};
	const char *hash = shard_hash(key);
	int rc;

	if (!hash)
		return not_a_shard(store, key);
	if ((rc = build_url(&c, hash)) < 0)
		return rc;
	return run(&c, true);
}

static int http_stat(kiln_store *store, const char *key, uint64_t *out_size)
{
	http_call c = {.s = (http_store *)store, .key = key};
	const char *hash = shard_hash(key);
	curl_off_t len = -1;
	int rc;

	if (!hash)
		return 0;
	if ((rc = build_url(&c, hash)) < 0)
		return rc;
	c.curl = kiln_curl_take(&c.s->pool);
	if (!c.curl)
		return kiln_error_oom(NULL);
	for (int n = 0;; n++) {
		attempt(&c, 0);
		if (c.cc == CURLE_OUT_OF_MEMORY) {
			curl_easy_cleanup(c.curl);
			return kiln_error_oom(NULL);
		}
		if (c.cc == CURLE_OK && c.status == 404) {
			rc = 0;
			break;
		}
		if (c.cc == CURLE_OK && c.status == 200) {
			curl_easy_getinfo(c.curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
			if (len < 0)
				rc = kiln_error_set(KILN_EINVALID,
				                    "%s (key %s): HEAD answered without Content-Length",
				                    c.url, key);
			else {
				if (out_size)
					*out_size = (uint64_t)len;
				rc = 1;
			}
			break;
		}
		if (!retriable(&c) || n >= c.s->max_retries) {
			rc = fail(&c, n + 1);
			break;
		}
		kiln_retry_sleep(&kiln_store_retry, (unsigned)n + 1);
	}
	kiln_curl_give(&c.s->pool, c.curl);
	return rc;
}

static int http_put_file(kiln_store *store, const char *key, const char *path, uint64_t size)
{
	(void)key;
	(void)path;
	(void)size;
	return read_only(store);
}

static int http_remove(kiln_store *store, const char *key)
{
	(void)key;
	return read_only(store);
}

static int http_list(kiln_store *store, const char *prefix, kiln_store_key_cb cb, void *ctx)
{
	(void)prefix;
	(void)cb;
	(void)ctx;
	return read_only(store);
}

const kiln_store_backend kiln_store_http_backend = {
    .version = KILN_STORE_BACKEND_VERSION,
    .scheme = "http",
    .config_url = NULL, /* a cache node is read, never a config's store */
    .options = NULL,    /* bearer_token and as_peer are set by the cache, not a config */
    .open = http_open,
    .put_file = http_put_file,
    .get = http_get,
    .stat = http_stat,
    .remove = http_remove,
    .list = http_list,
    .close = http_close,
};

const kiln_store_backend kiln_store_https_backend = {
    .version = KILN_STORE_BACKEND_VERSION,
    .scheme = "https",
    .config_url = NULL, /* a cache node is read, never a config's store */
    .options = NULL,    /* bearer_token and as_peer are set by the cache, not a config */
    .open = https_open,
    .put_file = http_put_file,
    .get = http_get,
    .stat = http_stat,
    .remove = http_remove,
    .list = http_list,
    .close = http_close,
};
