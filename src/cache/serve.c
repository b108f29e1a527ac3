/* The cache's HTTP routes (see serve.h) on kiln_http_server's event loop.
 * A shard already on disk is answered on the event-loop thread (open, then
 * sendfile); a miss, and any dataset listing, go to a worker thread, where
 * the cache may fetch, verify and wait. Names are checked after
 * libmicrohttpd has percent-decoded the path, so "..%2F" is a "../". The
 * token is kept only as a keyed BLAKE2b digest and compared in constant
 * time; neither it nor the Authorization header is ever logged; it is
 * checked before anything else a request may cause (a fetch, a log line).
 *
 * Misses are bounded before they reach peers and the origin: a hash found
 * absent everywhere is remembered for NEGATIVE_TTL_S in a table of
 * NEGATIVE_SLOTS entries (a keyed SipHash picks the slot, so a client cannot
 * aim at one; a newer miss overwrites an older one), and a token bucket lets
 * misses_per_second through (a burst of as many), answering the rest 503
 * with Retry-After: 1. A shard already cached never meets either. */
#include "cache/serve.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "core/error.h"
#include "core/http_server.h"
#include "core/log.h"
#include "cache/internal.h"
#include "shard/object.h"

#define SHARDS_PREFIX       "/v1/shards/"
#define DATASETS_PREFIX     "/v1/datasets/"
#define HASH_LEN            64
#define NAME_MAX_LEN        128
#define WORKERS             32u
#define CONNECTIONS_MAX     4096u
#define RETRY_AFTER_S       5
#define NEGATIVE_SLOTS      4096u
#define NEGATIVE_TTL_S      30
#define MISSES_DEFAULT      100u
#define PER_ADDRESS_DEFAULT 256u

static const int tracked_codes[] = {200, 206, 304, 400, 401, 404, 405, 410, 416, 500, 503, 507};
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
	kiln_counter *refused_recent, *refused_rate;

	/* the miss bounds, under miss_lock */
	pthread_mutex_t miss_lock;
	unsigned char slot_key[crypto_shorthash_KEYBYTES];
	struct {
		char hash[HASH_LEN];
		int64_t until_ms; /* 0: empty */
	} negative[NEGATIVE_SLOTS];
	double bucket, rate; /* misses that may go on now; refilled at `rate` per second */
	int64_t bucket_ms;
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
	/* a shard the cache cannot hold has its own line: the limit and the hash */
	if (rc == KILN_ELIMIT)
		KILN_LOG_EVERY(5, KILN_LOG_WARN, "shard_not_cached", kiln_error_last(),
		               KILN_F_INT("code", rc));
	else
		KILN_LOG_EVERY(5, KILN_LOG_WARN, event, kiln_error_last(), KILN_F_INT("code", rc));
	kiln_buf_reset(&res->body);
	if (rc == KILN_ERETRY) {
		kiln_http_response_add_header(res, "Retry-After", "%d", RETRY_AFTER_S);
		return text(res, 503, "temporarily unavailable\n");
	}
	if (rc == KILN_ELIMIT) /* larger than size_limit, or the cache full of pinned shards */
		return text(res, 507, "insufficient storage: the cache cannot hold this shard\n");
	return text(res, 500, "internal error\n");
}

/* --- miss bounds ------------------------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t negative_slot(const kiln_cache_server *s, const char *hash)
{
	unsigned char h[crypto_shorthash_BYTES];
	uint64_t v = 0;

	crypto_shorthash(h, (const unsigned char *)hash, HASH_LEN, s->slot_key);
	for (size_t i = 0; i < 8; i++)
		v = v << 8 | h[i];
	return (size_t)(v % NEGATIVE_SLOTS);
}

/* Whether hash was found absent everywhere less than NEGATIVE_TTL_S ago. */
static bool recently_absent(kiln_cache_server *s, const char *hash)
{
	size_t i = negative_slot(s, hash);
	bool hit;

	pthread_mutex_lock(&s->miss_lock);
	hit = s->negative[i].until_ms > now_ms() && memcmp(s->negative[i].hash, hash, HASH_LEN) == 0;
	pthread_mutex_unlock(&s->miss_lock);
	return hit;
}

static void remember_absent(kiln_cache_server *s, const char *hash)
{
	size_t i = negative_slot(s, hash);

	pthread_mutex_lock(&s->miss_lock);
	memcpy(s->negative[i].hash, hash, HASH_LEN);
	s->negative[i].until_ms = now_ms() + NEGATIVE_TTL_S * 1000;
	pthread_mutex_unlock(&s->miss_lock);
}

/* Takes one miss from the bucket; false when it is empty. */
static bool miss_allowed(kiln_cache_server *s)
{
	int64_t now = now_ms();
	bool ok;

	pthread_mutex_lock(&s->miss_lock);
	s->bucket += s->rate * (double)(now - s->bucket_ms) / 1000.0;
	if (s->bucket > s->rate)
		s->bucket = s->rate;
	s->bucket_ms = now;
	if ((ok = s->bucket >= 1.0))
		s->bucket -= 1.0;
	pthread_mutex_unlock(&s->miss_lock);
	return ok;
}

/* --- names -------------------------------------------------------------------- */

/* "<64 lower-case hex>", or a shard object's file name (shard/object.h), into hash. */
static bool shard_name(char hash[HASH_LEN + 1], const char *name)
{
	if (!kiln_shard_hash_valid(name))
		return kiln_shard_parse_file(name, hash, NULL);
	memcpy(hash, name, HASH_LEN + 1);
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

typedef enum { MATCH_NONE, MATCH_TAG, MATCH_ANY } match_kind;

/* Whether If-None-Match lists the tag `hash` (weak comparison, as RFC 9110
 * 13.1.2 asks) or "*" (which matches only a shard that exists). */
static match_kind none_match(const char *h, const char *hash)
{
	const char *p = h;

	for (;;) {
		const char *end;

		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (!*p)
			return MATCH_NONE;
		if (*p == '*')
			return MATCH_ANY;
		if (p[0] == 'W' && p[1] == '/')
			p += 2;
		if (*p != '"')
			return MATCH_NONE; /* not an entity-tag list: no match */
		if (!(end = strchr(p + 1, '"')))
			return MATCH_NONE;
		if ((size_t)(end - p - 1) == HASH_LEN && memcmp(p + 1, hash, HASH_LEN) == 0)
			return MATCH_TAG;
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

/* On a worker: the shard, filled when it is a miss the bounds let through.
 * 1 when the answer is already in res (404, 503). */
static int open_or_fill(kiln_cache_server *s, const kiln_http_request *req, const char *hash,
                        kiln_http_response *res, int *fd, uint64_t *size)
{
	int rc;

	if ((rc = kiln_cache_present(s->cache, hash, 0)) < 0)
		return (rc = failed(res, "shard_error", rc)) < 0 ? rc : 1;
	if (rc == 0 && recently_absent(s, hash)) {
		kiln_counter_add(s->refused_recent, 1);
		return text(res, 404, "no such shard\n") < 0 ? KILN_ENOMEM : 1;
	}
	if (rc == 0 && !miss_allowed(s)) {
		kiln_counter_add(s->refused_rate, 1);
		if ((rc = kiln_http_response_add_header(res, "Retry-After", "1")) < 0)
			return rc;
		return text(res, 503, "too many misses: try again later\n") < 0 ? KILN_ENOMEM : 1;
	}
	rc = kiln_cache_open_shard(s->cache, hash, true, kiln_http_request_header(req, "X-Kiln-Peer") != NULL,
	                           fd, size);
	if (rc == KILN_ENOTFOUND) {
		remember_absent(s, hash);
		return text(res, 404, "no such shard\n") < 0 ? KILN_ENOMEM : 1;
	}
	if (rc < 0)
		return (rc = failed(res, "shard_error", rc)) < 0 ? rc : 1;
	return 0;
}

static int on_shard(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	kiln_cache_server *s = ctx;
	char hash[HASH_LEN + 1];
	const char *inm, *range, *if_range;
	uint64_t size = 0, off = 0, len = 0;
	range_kind kind = RANGE_NONE;
	match_kind match = MATCH_NONE;
	int fd = -1, rc;

	if (!authorized(s, req))
		return unauthorized(res);
	if (!shard_name(hash, req->path + strlen(SHARDS_PREFIX)))
		return text(res, 400, "bad shard name: expected 64 lower-case hex digits\n");
	/* superseded by an erasure: gone for good, never served or fetched */
	if (kiln_cache_is_erased(s->cache, hash)) {
		res->content_type = "application/json";
		return text(res, 410,
		            "{\"error\":\"gone\",\"message\":\"this shard was erased (docs/ERASURE.md)\"}\n");
	}
	/* content-addressed: a client holding the tag holds the bytes; "*"
	 * matches only a shard that exists, so that one is looked up */
	if ((inm = kiln_http_request_header(req, "If-None-Match")))
		match = none_match(inm, hash);
	if (match == MATCH_TAG) {
		res->status = 304;
		return shard_headers(res, hash);
	}
	/* on the event loop only what needs no work; a miss, or a file that must
	 * be hashed again, goes to a worker */
	if (!req->can_block) {
		rc = kiln_cache_open_trusted(s->cache, hash, &fd, &size);
		if (rc == KILN_ENOTFOUND)
			return KILN_HTTP_BLOCKING;
		if (rc < 0)
			return failed(res, "shard_error", rc);
	} else if ((rc = open_or_fill(s, req, hash, res, &fd, &size)) != 0) {
		return rc < 0 ? rc : 0;
	}
	if (match == MATCH_ANY) {
		close(fd);
		res->status = 304;
		return shard_headers(res, hash);
	}
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
		return kiln_error_oom(NULL);
	s->cache = cache;
	s->metrics = metrics;
	pthread_mutex_init(&s->miss_lock, NULL);
	randombytes_buf(s->slot_key, sizeof(s->slot_key));
	s->rate = config->misses_per_second ? config->misses_per_second : MISSES_DEFAULT;
	s->bucket = s->rate;
	s->bucket_ms = now_ms();
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
		s->refused_recent = kiln_metrics_counter(
		    metrics, "kiln_cache_misses_refused_total",
		    "Shard misses answered without asking peers or the origin, by reason.",
		    "reason=\"recent\"");
		s->refused_rate = kiln_metrics_counter(
		    metrics, "kiln_cache_misses_refused_total",
		    "Shard misses answered without asking peers or the origin, by reason.",
		    "reason=\"rate\"");
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
		    .per_address_limit = config->connections_per_address ? config->connections_per_address
		                                                         : PER_ADDRESS_DEFAULT,
		    .on_answered = on_answered,
		    .on_answered_ctx = s,
		};

		rc = kiln_http_server_start_ex(&s->http, config->listen ? config->listen : "127.0.0.1:9470",
		                               routes, sizeof(routes) / sizeof(routes[0]), &o);
	}
	if (rc < 0) {
		pthread_mutex_destroy(&s->miss_lock);
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
	pthread_mutex_destroy(&s->miss_lock);
	sodium_memzero(s, sizeof(*s));
	free(s);
}
