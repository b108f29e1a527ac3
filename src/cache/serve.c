/* The cache's HTTP routes (see serve.h) on kiln_http_server's event loop.
 * A shard already on disk is answered on the event-loop thread (open, then
 * sendfile); a miss, and any dataset listing, go to a worker thread, where
 * the cache may fetch, verify and wait. Names are checked after
 * libmicrohttpd has percent-decoded the path, so "..%2F" is a "../". The
 * token is kept only as a keyed BLAKE2b digest and compared in constant
 * time; neither it nor the Authorization header is ever logged. */
#include "cache/serve.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sodium.h>

#include "core/error.h"
#include "core/http_server.h"
#include "core/log.h"

#define SHARDS_PREFIX   "/v1/shards/"
#define DATASETS_PREFIX "/v1/datasets/"
#define HASH_LEN        64
#define NAME_MAX_LEN    128
#define WORKERS         32u
#define CONNECTIONS_MAX 4096u
#define RETRY_AFTER_S   5

static const int tracked_codes[] = {200, 206, 304, 400, 401, 404, 405, 416, 500, 503};
#define NCODES (sizeof(tracked_codes) / sizeof(tracked_codes[0]))

struct kiln_cache_server {
	kiln_http_server *http;
	kiln_cache *cache;
	kiln_metrics *metrics;
	bool auth;
	unsigned char token_key[crypto_generichash_KEYBYTES];
	unsigned char token_digest[crypto_generichash_BYTES];
	kiln_counter *requests[NCODES];
	kiln_counter *served_bytes;
};

/* --- answers ---------------------------------------------------------------- */

static int text(kiln_http_response *res, int status, const char *msg)
{
	res->status = status;
	return kiln_buf_puts(&res->body, msg);
}

/* Constant time in the token: both sides are hashed, the digests compared. */
static bool authorized(const kiln_cache_server *s, const kiln_http_request *req)
{
	unsigned char digest[crypto_generichash_BYTES];
	const char *h = req->authorization, *cred;

	if (!s->auth)
		return true;
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return false;
	for (cred = h + 7; *cred == ' '; cred++)
		;
	crypto_generichash(digest, sizeof(digest), (const unsigned char *)cred, strlen(cred), s->token_key,
	                   sizeof(s->token_key));
	return sodium_memcmp(digest, s->token_digest, sizeof(digest)) == 0;
}

static int unauthorized(kiln_http_response *res)
{
	int rc = kiln_http_response_add_header(res, "WWW-Authenticate", "Bearer");

	return rc < 0 ? rc : text(res, 401, "unauthorized\n");
}

/* 503 for a transient failure (the origin or a peer away), else 500; the
 * message goes to the log, not to the client. */
static int failed(kiln_http_response *res, const char *event, int rc)
{
	KILN_LOG_EVERY(5, KILN_LOG_WARN, event, kiln_error_last(), KILN_F_INT("code", rc));
	kiln_buf_reset(&res->body);
	if (rc == KILN_ERETRY) {
		kiln_http_response_add_header(res, "Retry-After", "%d", RETRY_AFTER_S);
		return text(res, 503, "temporarily unavailable\n");
	}
	return text(res, 500, "internal error\n");
}

/* --- names -------------------------------------------------------------------- */

static bool is_lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* "<64 lower-case hex>" or the same followed by ".jsonl.zst" into hash. */
static bool shard_name(char hash[HASH_LEN + 1], const char *name)
{
	size_t n = strlen(name);

	if (!(n == HASH_LEN || (n == HASH_LEN + 10 && strcmp(name + HASH_LEN, ".jsonl.zst") == 0)) ||
	    !is_lower_hex(name, HASH_LEN))
		return false;
	memcpy(hash, name, HASH_LEN);
	hash[HASH_LEN] = '\0';
	return true;
}

/* [a-z0-9][a-z0-9._-]*, at most NAME_MAX_LEN bytes: a dataset, split or ref
 * (a branch, vN, or a 40-hex commit all fit). */
static bool plain_name(const char *s, size_t n)
{
	if (n == 0 || n > NAME_MAX_LEN || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
		      s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

static bool has_dotdot_segment(const char *path)
{
	for (const char *p = path; (p = strstr(p, "..")); p += 2)
		if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
			return true;
	return false;
}

/* --- conditional and range requests ------------------------------------------ */

static const char *skip_ows(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* Whether If-None-Match lists "*" or the tag `hash` (weak comparison, as
 * RFC 9110 13.1.2 asks). */
static bool none_match(const char *h, const char *hash)
{
	const char *p = h;

	for (;;) {
		const char *end;

		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (!*p)
			return false;
		if (*p == '*')
			return true;
		if (p[0] == 'W' && p[1] == '/')
			p += 2;
		if (*p != '"')
			return false; /* not an entity-tag list: no match */
		if (!(end = strchr(p + 1, '"')))
			return false;
		if ((size_t)(end - p - 1) == HASH_LEN && memcmp(p + 1, hash, HASH_LEN) == 0)
			return true;
		p = end + 1;
	}
}

typedef enum { RANGE_NONE, RANGE_ONE, RANGE_UNSATISFIABLE } range_kind;

/* Digits at *pp into *out (saturating at UINT64_MAX); false when none. */
static bool parse_u64(const char **pp, uint64_t *out)
{
	const char *p = *pp;
	uint64_t v = 0;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v > (UINT64_MAX - 9) / 10 ? UINT64_MAX : v * 10 + (uint64_t)(*p - '0');
	*pp = p;
	*out = v;
	return true;
}

/* One range of a `size`-byte file from a Range header (RFC 9110 14.1.2):
 * "bytes=a-b", "bytes=a-", "bytes=-n". Several ranges, another unit or
 * bad syntax give RANGE_NONE (the whole file, which the RFC allows). */
static range_kind parse_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len)
{
	const char *p = skip_ows(h);
	uint64_t a, b;

	if (strncasecmp(p, "bytes", 5) != 0)
		return RANGE_NONE;
	p = skip_ows(p + 5);
	if (*p++ != '=')
		return RANGE_NONE;
	p = skip_ows(p);
	if (*p == '-') { /* the last b bytes */
		p++;
		if (!parse_u64(&p, &b) || *skip_ows(p))
			return RANGE_NONE;
		if (b == 0 || size == 0)
			return RANGE_UNSATISFIABLE;
		*len = b < size ? b : size;
		*off = size - *len;
		return RANGE_ONE;
	}
	if (!parse_u64(&p, &a) || *p++ != '-')
		return RANGE_NONE;
	if (*skip_ows(p) == '\0') {
		b = UINT64_MAX;
	} else if (!parse_u64(&p, &b) || *skip_ows(p) || b < a) {
		return RANGE_NONE;
	}
	if (a >= size)
		return RANGE_UNSATISFIABLE;
	if (b >= size)
		b = size - 1;
	*off = a;
	*len = b - a + 1;
	return RANGE_ONE;
}

/* --- routes ------------------------------------------------------------------ */

static int shard_headers(kiln_http_response *res, const char *hash)
{
	int rc;

	if ((rc = kiln_http_response_add_header(res, "ETag", "\"%s\"", hash)) < 0 ||
	    (rc = kiln_http_response_add_header(res, "Cache-Control",
	                                        "public, max-age=31536000, immutable")) < 0)
		return rc;
	return 0;
}

static int on_shard(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	kiln_cache_server *s = ctx;
	char hash[HASH_LEN + 1];
	const char *inm, *range, *if_range;
	uint64_t size = 0, off = 0, len = 0;
	range_kind kind = RANGE_NONE;
	int fd = -1, rc;

	if (!authorized(s, req))
		return unauthorized(res);
	if (!shard_name(hash, req->path + strlen(SHARDS_PREFIX)))
		return text(res, 400, "bad shard name: expected 64 lower-case hex digits\n");
	/* content-addressed: a client holding the tag holds the bytes */
	if ((inm = kiln_http_request_header(req, "If-None-Match")) && none_match(inm, hash)) {
		res->status = 304;
		return shard_headers(res, hash);
	}
	/* on the event loop only what needs no work; a miss, or a file that must
	 * be hashed again, goes to a worker */
	rc = req->can_block ? kiln_cache_open_shard(s->cache, hash, true,
	                                            kiln_http_request_header(req, "X-Kiln-Peer") != NULL, &fd, &size)
	                    : kiln_cache_open_trusted(s->cache, hash, &fd, &size);
	if (rc == KILN_ENOTFOUND && !req->can_block)
		return KILN_HTTP_BLOCKING;
	if (rc == KILN_ENOTFOUND)
		return text(res, 404, "no such shard\n");
	if (rc < 0)
		return failed(res, "shard_error", rc);
	res->fd = fd; /* the server closes it from here on */
	res->offset = 0;
	res->length = size;
	if ((rc = shard_headers(res, hash)) < 0 ||
	    (rc = kiln_http_response_add_header(res, "Accept-Ranges", "bytes")) < 0)
		return rc;
	if_range = kiln_http_request_header(req, "If-Range");
	if ((range = kiln_http_request_header(req, "Range")) &&
	    (!if_range || (strlen(if_range) == HASH_LEN + 2 && if_range[0] == '"' &&
	                   memcmp(if_range + 1, hash, HASH_LEN) == 0 && if_range[HASH_LEN + 1] == '"')))
		kind = parse_range(range, size, &off, &len);
	if (kind == RANGE_UNSATISFIABLE) {
		close(res->fd);
		res->fd = -1;
		if ((rc = kiln_http_response_add_header(res, "Content-Range", "bytes */%" PRIu64, size)) < 0)
			return rc;
		return text(res, 416, "range not satisfiable\n");
	}
	res->content_type = "application/zstd";
	if (kind == RANGE_ONE) {
		res->status = 206;
		res->offset = off;
		res->length = len;
		return kiln_http_response_add_header(
		    res, "Content-Range", "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1, size);
	}
	return 0;
}

static int on_dataset(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	kiln_cache_server *s = ctx;
	const char *p = req->path + strlen(DATASETS_PREFIX), *slash1, *slash2;
	char ds[NAME_MAX_LEN + 1], ref[NAME_MAX_LEN + 1], split[NAME_MAX_LEN + 1];
	int rc;

	if (!authorized(s, req))
		return unauthorized(res);
	if (!(slash1 = strchr(p, '/')) || !(slash2 = strchr(slash1 + 1, '/')) || strchr(slash2 + 1, '/') ||
	    !plain_name(p, (size_t)(slash1 - p)) || !plain_name(slash1 + 1, (size_t)(slash2 - slash1 - 1)) ||
	    !plain_name(slash2 + 1, strlen(slash2 + 1)))
		return text(res, 400, "bad dataset path: expected /v1/datasets/<dataset>/<ref>/<split>\n");
	if (!req->can_block)
		return KILN_HTTP_BLOCKING; /* reads the manifest */
	snprintf(ds, sizeof(ds), "%.*s", (int)(slash1 - p), p);
	snprintf(ref, sizeof(ref), "%.*s", (int)(slash2 - slash1 - 1), slash1 + 1);
	snprintf(split, sizeof(split), "%s", slash2 + 1);
	rc = kiln_cache_list(s->cache, ds, ref, split, &res->body);
	if (rc == KILN_ENOTFOUND) {
		kiln_buf_reset(&res->body);
		return text(res, 404, "no such dataset, ref or split\n");
	}
	if (rc < 0)
		return failed(res, "list_error", rc);
	res->content_type = "application/x-ndjson";
	return 0;
}

static int on_metrics(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	kiln_cache_server *s = ctx;

	if (!authorized(s, req))
		return unauthorized(res);
	res->content_type = "text/plain; version=0.0.4; charset=utf-8";
	return s->metrics ? kiln_metrics_render(s->metrics, &res->body) : 0;
}

static int on_healthz(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	return kiln_buf_puts(&res->body, "ok");
}

static int on_other(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	kiln_cache_server *s = ctx;

	if (!authorized(s, req))
		return unauthorized(res);
	if (has_dotdot_segment(req->path))
		return text(res, 400, "bad path\n");
	return text(res, 404, "not found\n");
}

static void on_answered(void *ctx, const char *route, int status, uint64_t body_bytes)
{
	kiln_cache_server *s = ctx;
	size_t i;

	for (i = 0; i < NCODES && tracked_codes[i] != status; i++)
		;
	if (i < NCODES) {
		kiln_counter_add(s->requests[i], 1);
	} else if (s->metrics) {
		char labels[32];

		/* rare: registered on first use (a mutex) */
		snprintf(labels, sizeof(labels), "code=\"%d\"", status);
		kiln_counter_add(kiln_metrics_counter(s->metrics, "kiln_cache_requests_total", NULL, labels),
		                 1);
	}
	if (route && strcmp(route, SHARDS_PREFIX "*") == 0)
		kiln_counter_add(s->served_bytes, body_bytes);
}

/* Connections the descriptor limit leaves room for: each may hold a socket
 * and a shard, the soft limit raised to the hard one first. */
static unsigned connection_limit(void)
{
	struct rlimit rl;
	rlim_t room;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 256;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t want = rl.rlim_max == RLIM_INFINITY ? 2 * CONNECTIONS_MAX + 256 : rl.rlim_max;

		rl.rlim_cur = want;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	room = rl.rlim_cur > 256 ? (rl.rlim_cur - 128) / 2 : 64;
	return room < CONNECTIONS_MAX ? (unsigned)room : CONNECTIONS_MAX;
}

int kiln_cache_serve_start(kiln_cache_server **out, kiln_cache *cache, const kiln_cache_config *config,
                           kiln_metrics *metrics)
{
	kiln_cache_server *s;
	int rc;

	*out = NULL;
	if (sodium_init() < 0)
		return kiln_error_set(KILN_EIO, "libsodium cannot start");
	if (!(s = calloc(1, sizeof(*s))))
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	s->cache = cache;
	s->metrics = metrics;
	if (config->token && config->token[0]) {
		s->auth = true;
		randombytes_buf(s->token_key, sizeof(s->token_key));
		crypto_generichash(s->token_digest, sizeof(s->token_digest),
		                   (const unsigned char *)config->token, strlen(config->token), s->token_key,
		                   sizeof(s->token_key));
	}
	if (metrics) {
		for (size_t i = 0; i < NCODES; i++) {
			char labels[32];

			snprintf(labels, sizeof(labels), "code=\"%d\"", tracked_codes[i]);
			s->requests[i] =
			    kiln_metrics_counter(metrics, "kiln_cache_requests_total",
			                         "HTTP requests answered, by status code.", labels);
		}
		s->served_bytes =
		    kiln_metrics_counter(metrics, "kiln_cache_served_bytes_total",
		                         "Shard bytes sent in answers that went out whole.", NULL);
	}
	{
		const kiln_http_route routes[] = {
		    {"GET", SHARDS_PREFIX "*", on_shard, s},
		    {"GET", DATASETS_PREFIX "*", on_dataset, s},
		    {"GET", "/metrics", on_metrics, s},
		    {"GET", "/healthz", on_healthz, s},
		    {"*", "/*", on_other, s},
		};
		kiln_http_server_options o = {
		    .mode = KILN_HTTP_EVENT_LOOP,
		    .workers = WORKERS,
		    .connection_limit = connection_limit(),
		    .on_answered = on_answered,
		    .on_answered_ctx = s,
		};

		rc = kiln_http_server_start_ex(&s->http, config->listen ? config->listen : "127.0.0.1:9470",
		                               routes, sizeof(routes) / sizeof(routes[0]), &o);
	}
	if (rc < 0) {
		sodium_memzero(s, sizeof(*s));
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

uint16_t kiln_cache_serve_port(const kiln_cache_server *s)
{
	return s ? kiln_http_server_port(s->http) : 0;
}

void kiln_cache_serve_stop(kiln_cache_server *s)
{
	if (!s)
		return;
	kiln_http_server_stop(s->http);
	sodium_memzero(s, sizeof(*s));
	free(s);
}
