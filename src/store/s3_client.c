/* S3 over libcurl with Signature V4 (see s3_client.h). */
#include "store/s3_client.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/error.h"
#include "store/curl.h"
#include "store/s3_xml.h"
#include "store/store.h"

#define DEFAULT_RETRIES 5
#define BODY_MAX        (8u << 20) /* an answer kept in memory (a list page, an error) */
#define MAX_EXTRA       8
#define LIST_MAX_PAGES  100000u     /* 100 million keys: a listing that goes on past it is refused */
#define STALE_UPLOAD_S  (24 * 3600) /* an upload started longer ago than this is abandoned */

struct kiln_s3_client {
	char *endpoint, *bucket, *region;
	char *host; /* the Host header: endpoint, or bucket.endpoint */
	bool http, virtual_host;
	char *access_key, *secret_key, *token; /* zeroed on free */
	int max_retries;
	uint64_t part_size;      /* a put above it is a multipart upload */
	atomic_bool bucket_seen; /* a NoSuchKey answer proved the bucket exists */
	kiln_curl_pool pool;
};

/* One request across its attempts. */
struct call {
	kiln_s3_client *s;
	const char *method; /* GET, HEAD, PUT, DELETE */
	const char *key;    /* "" for the bucket */
	const char *about;  /* the key messages name, when not key (a bucket request for a key) */
	kiln_sigv4_pair query[MAX_EXTRA];
	size_t query_count;
	const char *payload_sha256;
	CURL *curl;
	/* upload: a file's bytes from offset, or a body in memory */
	int fd;
	uint64_t offset, size, sent;
	const char *upload;
	char etag[128]; /* the answer's ETag header */
	/* download: to a sink, or kept in body */
	kiln_store_sink sink;
	void *sink_ctx;
	char if_match[128]; /* the ETag of the answer the sink got bytes of: a resume asks for it */
	uint64_t delivered, total, skip;
	bool started, aborted;
	int abort_rc;
	kiln_buf body;
	bool too_big;      /* the answer's body went past BODY_MAX: refused */
	bool error_in_200; /* a 2xx answer whose body is an <Error> (S3 can answer so) */
	bool create_only;  /* PUT with If-None-Match: *: refused (412) when the key exists */
	/* each attempt */
	long status;
	CURLcode cc;
	char curl_err[CURL_ERROR_SIZE];
	curl_off_t length; /* Content-Length of the answer, -1 unknown */
};

static void free_secret(char *p)
{
	if (p)
		sodium_memzero(p, strlen(p));
	free(p);
}

int kiln_s3_client_new(kiln_s3_client **out, const kiln_s3_config *cfg)
{
	kiln_s3_client *s;
	const kiln_sigv4_credentials *cr = &cfg->credentials;
	int rc;

	*out = NULL;
	if ((rc = kiln_curl_init()) < 0)
		return rc;
	if (!cfg->endpoint || !*cfg->endpoint || !cfg->bucket || !*cfg->bucket)
		return kiln_error_set(KILN_EINVALID, "S3: an endpoint and a bucket are needed");
	if (!cr->access_key || !*cr->access_key || !cr->secret_key || !*cr->secret_key)
		return kiln_error_set(KILN_EINVALID, "S3: no credentials for %s", cfg->endpoint);
	if (!(s = calloc(1, sizeof(*s))))
		return kiln_error_oom(NULL);
	kiln_curl_pool_init(&s->pool);
	s->endpoint = strdup(cfg->endpoint);
	s->bucket = strdup(cfg->bucket);
	s->region = strdup(cfg->region && *cfg->region ? cfg->region : "us-east-1");
	s->access_key = strdup(cr->access_key);
	s->secret_key = strdup(cr->secret_key);
	s->token = cr->session_token && *cr->session_token ? strdup(cr->session_token) : NULL;
	s->http = cfg->http;
	s->virtual_host = cfg->virtual_host;
	s->max_retries = cfg->max_retries > 0 ? cfg->max_retries : DEFAULT_RETRIES;
	s->part_size = cfg->part_size ? cfg->part_size : KILN_S3_DEFAULT_PART_SIZE;
	if (s->part_size < KILN_S3_MIN_PART_SIZE)
		s->part_size = KILN_S3_MIN_PART_SIZE;
	if (cfg->virtual_host ? asprintf(&s->host, "%s.%s", cfg->bucket, cfg->endpoint) < 0
	                      : !(s->host = strdup(cfg->endpoint)))
		s->host = NULL;
	if (!s->endpoint || !s->bucket || !s->region || !s->access_key || !s->secret_key || !s->host ||
	    (cr->session_token && *cr->session_token && !s->token)) {
		kiln_s3_client_free(s);
		return kiln_error_oom(NULL);
	}
	*out = s;
	return 0;
}

void kiln_s3_client_free(kiln_s3_client *s)
{
	if (!s)
		return;
	kiln_curl_pool_free(&s->pool);
	free(s->endpoint);
	free(s->bucket);
	free(s->region);
	free(s->host);
	free_secret(s->access_key);
	free_secret(s->secret_key);
	free_secret(s->token);
	free(s);
}

/* --- one attempt ------------------------------------------------------------ */

static size_t on_data(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct call *c = ctx;
	size_t len = size * nmemb;
	long status = 0;
	int rc;

	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (!c->sink || (status != 200 && status != 206)) {
		/* an error answer or a listing: kept whole (up to BODY_MAX) */
		if (kiln_buf_put(&c->body, data, len) == 0)
			return len;
		c->too_big = c->body.len + len > BODY_MAX;
		return 0; /* CURLE_WRITE_ERROR */
	}
	if (!c->started) {
		c->started = true;
		if (status == 200) {
			curl_off_t cl = -1;

			curl_easy_getinfo(c->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
			c->total = cl >= 0 ? (uint64_t)cl : 0;
			c->skip = c->delivered; /* the whole object again: drop what the sink has */
			snprintf(c->if_match, sizeof(c->if_match), "%s", c->etag);
		}
	}
	if (c->skip >= len) {
		c->skip -= len;
		return len;
	}
	data += c->skip;
	rc = c->sink(c->sink_ctx, data, len - (size_t)c->skip);
	if (rc != 0) {
		c->aborted = true;
		c->abort_rc = rc;
		return 0; /* CURLE_WRITE_ERROR */
	}
	c->delivered += len - (size_t)c->skip;
	c->skip = 0;
	return len;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *ctx)
{
	struct call *c = ctx;
	size_t want = size * nmemb;
	ssize_t n;

	if (c->size - c->sent < want)
		want = (size_t)(c->size - c->sent);
	if (want == 0)
		return 0;
	if (c->upload) {
		memcpy(buf, c->upload + c->sent, want);
		c->sent += want;
		return want;
	}
	do
		n = pread(c->fd, buf, want, (off_t)(c->offset + c->sent));
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return CURL_READFUNC_ABORT; /* the file shrank or failed: not retried */
	c->sent += (uint64_t)n;
	return (size_t)n;
}

static int on_seek(void *ctx, curl_off_t offset, int origin)
{
	struct call *c = ctx;

	if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > c->size)
		return CURL_SEEKFUNC_CANTSEEK;
	c->sent = (uint64_t)offset;
	return CURL_SEEKFUNC_OK;
}

/* Keeps the ETag header of the answer (a part's, for completing). */
static size_t on_header(char *line, size_t size, size_t nmemb, void *ctx)
{
	struct call *c = ctx;
	size_t len = size * nmemb, n;
	const char *v = line + 5;

	if (len <= 5 || strncasecmp(line, "etag:", 5) != 0)
		return len;
	n = len - 5;
	while (n && (*v == ' ' || *v == '\t'))
		v++, n--;
	while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
		n--;
	snprintf(c->etag, sizeof(c->etag), "%.*s", (int)n, v);
	return len;
}

/* The request's URL: scheme, host, the path encoded once, the query as signed. */
static int request_url(struct call *c, kiln_buf *url, kiln_buf *path)
{
	kiln_s3_client *s = c->s;
	int rc;

	if ((rc = kiln_buf_printf(path, s->virtual_host ? "/%s" : "/%s/%s",
	                          s->virtual_host ? c->key : s->bucket, c->key)) < 0 ||
	    (rc = kiln_buf_printf(url, "%s://%s", s->http ? "http" : "https", s->host)) < 0 ||
	    (rc = kiln_sigv4_encode_path(url, path->ptr)) < 0)
		return rc;
	if (c->query_count && ((rc = kiln_buf_putc(url, '?')) < 0 ||
	                       (rc = kiln_sigv4_query(url, c->query, c->query_count)) < 0))
		return rc;
	return kiln_buf_putc(url, '\0');
}

static struct curl_slist *add(struct curl_slist *list, const char *line, bool *failed)
{
	struct curl_slist *next = curl_slist_append(list, line);

	if (!next)
		*failed = true;
	return next ? next : list;
}

static void free_headers(struct curl_slist *list)
{
	for (struct curl_slist *h = list; h; h = h->next)
		sodium_memzero(h->data, strlen(h->data));
	curl_slist_free_all(list);
}

static void attempt(struct call *c)
{
	kiln_s3_client *s = c->s;
	kiln_sigv4_credentials cr = {s->access_key, s->secret_key, s->token};
	kiln_buf url = {0}, path = {0};
	char host[512];
	kiln_sigv4_signed sig;
	struct curl_slist *headers = NULL;
	bool failed = false;
	CURL *e = c->curl;

	c->status = 0;
	c->cc = CURLE_OK;
	c->curl_err[0] = '\0';
	c->length = -1;
	c->sent = 0;
	c->skip = 0;
	c->started = false;
	c->etag[0] = '\0';
	c->too_big = false;
	c->error_in_200 = false;
	kiln_buf_reset(&c->body);
	c->body.max = BODY_MAX;
	if (request_url(c, &url, &path) < 0) {
		c->cc = CURLE_OUT_OF_MEMORY;
		goto done;
	}
	kiln_sigv4_request r = {.method = c->method,
	                        .host = s->host,
	                        .path = path.ptr,
	                        .query = c->query,
	                        .query_count = c->query_count,
	                        .payload_sha256 = c->payload_sha256,
	                        .region = s->region,
	                        .service = "s3",
	                        .now = time(NULL)};
	if (kiln_sigv4_sign(&sig, &r, &cr) < 0) {
		c->cc = CURLE_OUT_OF_MEMORY;
		goto done;
	}
	snprintf(host, sizeof(host), "Host: %s", s->host);
	headers = add(headers, host, &failed);
	headers = add(headers, sig.authorization, &failed);
	headers = add(headers, sig.amz_date, &failed);
	headers = add(headers, sig.content_sha256, &failed);
	if (s->token)
		headers = add(headers, sig.security_token.ptr, &failed);
	headers = add(headers, "Expect:", &failed); /* no 100-continue round trip */
	if (c->create_only)
		headers = add(headers, "If-None-Match: *", &failed);
	if (c->sink && c->delivered > 0) {
		/* a resume: the rest of the same object, or 412 if it was replaced */
		char if_match[160];

		snprintf(if_match, sizeof(if_match), "If-Match: %s", c->if_match);
		headers = add(headers, if_match, &failed);
	}
	kiln_sigv4_signed_free(&sig);
	if (failed) {
		c->cc = CURLE_OUT_OF_MEMORY;
		goto done;
	}
	kiln_curl_request(e, url.ptr, c->curl_err);
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
	if (strcmp(c->method, "HEAD") == 0) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (strcmp(c->method, "PUT") == 0 || c->upload) {
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)c->size);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(e, CURLOPT_READDATA, c);
		curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(e, CURLOPT_SEEKDATA, c);
		if (strcmp(c->method, "PUT") != 0)
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, c->method); /* a POST with a body */
	} else if (strcmp(c->method, "GET") != 0) {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, c->method);
	}
	if (c->sink && c->delivered > 0) {
		char range[48];

		snprintf(range, sizeof(range), "%" PRIu64 "-", c->delivered);
		curl_easy_setopt(e, CURLOPT_RANGE, range);
	}
	c->cc = curl_easy_perform(e);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &c->status);
	curl_easy_getinfo(e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &c->length);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
	if (c->cc == CURLE_OK && c->status >= 200 && c->status < 300 && !c->sink && c->body.len) {
		char code[64];

		/* S3 can answer 200 and still fail, in the body */
		c->error_in_200 =
		    kiln_s3_xml_find(c->body.ptr, c->body.len, "Error/Code", code, sizeof(code));
	}
done:
	free_headers(headers);
	kiln_buf_free(&url);
	kiln_buf_free(&path);
}

/* --- retries and messages --------------------------------------------------- */

static bool retriable(const struct call *c)
{
	if (c->aborted || c->too_big)
		return false;
	if (c->create_only && c->cc == CURLE_OK && c->status == 409)
		return true; /* ConditionalRequestConflict: another conditional write was in flight */
	return c->error_in_200 || kiln_curl_retriable(c->cc, c->status);
}

static const char *hint(const kiln_s3_client *s, const char *code, long status)
{
	static const struct {
		const char *code, *hint;
	} hints[] = {
	    {"SignatureDoesNotMatch", "check the secret key"},
	    {"InvalidAccessKeyId", "check the access key id"},
	    {"InvalidToken", "check the session token"},
	    {"ExpiredToken", "the session token expired: get new credentials"},
	    {"RequestTimeTooSkewed", "check this machine's clock: S3 allows 15 minutes"},
	    {"AccessDenied", "check the credentials and the bucket's policy"},
	    {"NoSuchBucket", "the bucket does not exist at this endpoint"},
	    {"AuthorizationHeaderMalformed", "check the region"},
	    {"PermanentRedirect", "the bucket lives at another endpoint or region"},
	    {"TemporaryRedirect", "the bucket answers at another endpoint: set the endpoint or region"},
	};

	/* AWS answers a temporary key sent without its session token with
	 * InvalidAccessKeyId, not InvalidToken */
	if (strcmp(code, "InvalidAccessKeyId") == 0 && !s->token)
		return strncmp(s->access_key, "ASIA", 4) == 0
		           ? "a temporary access key needs its session token: check the session token"
		           : "check the access key id, and the session token if the credentials are "
		             "temporary";
	for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++)
		if (strcmp(code, hints[i].code) == 0)
			return hints[i].hint;
	if (status >= 300 && status < 400)
		return "redirects are not followed: set the endpoint or region";
	return NULL;
}

static int fail(const struct call *c, int attempts)
{
	const kiln_s3_client *s = c->s;
	const char *key = c->about ? c->about : c->key;
	char code[64] = "", msg[200] = "", what[320];
	const char *h;
	int kind = KILN_EINVALID;

	if (c->too_big) {
		return kiln_error_set(KILN_EINVALID,
		                      "%s s3://%s/%s at %s: HTTP %ld with a body over %u MiB: refused",
		                      c->method, s->bucket, key, s->endpoint, c->status, BODY_MAX >> 20);
	} else if (c->cc != CURLE_OK && c->cc != CURLE_WRITE_ERROR) {
		snprintf(what, sizeof(what), "%s", c->curl_err[0] ? c->curl_err : curl_easy_strerror(c->cc));
	} else {
		kiln_s3_xml_find(c->body.ptr, c->body.len, "Error/Code", code, sizeof(code));
		kiln_s3_xml_find(c->body.ptr, c->body.len, "Error/Message", msg, sizeof(msg));
		if (c->status == 404 && !code[0])
			snprintf(code, sizeof(code), "NoSuchKey"); /* a HEAD answer has no body */
		snprintf(what, sizeof(what), "HTTP %ld%s%s%s%s", c->status, code[0] ? " " : "", code,
		         msg[0] ? ": " : "", msg);
		if (c->status == 404 && strcmp(code, "NoSuchBucket") != 0)
			kind = KILN_ENOTFOUND;
		if (c->status == 412 && c->sink)
			return kiln_error_set(KILN_ERETRY,
			                      "%s s3://%s/%s at %s: the object changed while it was read",
			                      c->method, s->bucket, key, s->endpoint);
		if (c->status == 412 && c->create_only)
			return kiln_error_set(
			    KILN_EMODIFIED, "%s s3://%s/%s at %s: the object exists already (If-None-Match)",
			    c->method, s->bucket, key, s->endpoint);
	}
	if (retriable(c))
		return kiln_error_set(KILN_ERETRY, "%s s3://%s/%s at %s: %s, gave up after %d attempt%s",
		                      c->method, s->bucket, key, s->endpoint, what, attempts,
		                      attempts == 1 ? "" : "s");
	if ((h = hint(s, code, c->status)))
		return kiln_error_set(kind, "%s s3://%s/%s at %s: %s (%s)", c->method, s->bucket, key,
		                      s->endpoint, what, h);
	return kiln_error_set(kind, "%s s3://%s/%s at %s: %s", c->method, s->bucket, key, s->endpoint, what);
}

static bool done_ok(const struct call *c)
{
	if (c->cc != CURLE_OK || c->error_in_200)
		return false;
	return c->status >= 200 && c->status < 300;
}

/* Attempts until success, a failure not worth retrying, or max_retries. */
static int run(struct call *c)
{
	int n, rc = 0;

	if (!(c->curl = kiln_curl_take(&c->s->pool)))
		return kiln_error_oom(NULL);
	for (n = 0;; n++) {
		attempt(c);
		if (c->aborted) {
			rc = c->abort_rc;
			break;
		}
		if (c->cc == CURLE_OUT_OF_MEMORY) {
			rc = kiln_error_oom(NULL);
			break;
		}
		if (done_ok(c))
			break;
		if (c->sink && c->total > 0 && c->delivered == c->total)
			break; /* every byte arrived; only the ending failed */
		if (c->sink && c->delivered > 0 && !c->if_match[0]) {
			rc = kiln_error_set(KILN_ERETRY,
			                    "%s s3://%s/%s at %s: read failed after %" PRIu64
			                    " bytes and the object has no ETag to resume by",
			                    c->method, c->s->bucket, c->key, c->s->endpoint, c->delivered);
			break;
		}
		if (!retriable(c) || n >= c->s->max_retries) {
			rc = fail(c, n + 1);
			break;
		}
		kiln_retry_sleep(&kiln_store_retry, (unsigned)n + 1);
	}
	kiln_curl_give(&c->s->pool, c->curl);
	return rc;
}

static void call_init(struct call *c, kiln_s3_client *s, const char *method, const char *key)
{
	memset(c, 0, sizeof(*c));
	c->s = s;
	c->method = method;
	c->key = key;
	c->fd = -1;
	c->payload_sha256 = KILN_SIGV4_EMPTY_SHA256;
}

/* --- objects ------------------------------------------------------------------ */

/* The hex SHA-256 of size bytes of a file from offset. */
static int file_sha256(int fd, const char *path, uint64_t offset, uint64_t size, char out[65])
{
	crypto_hash_sha256_state st;
	unsigned char digest[crypto_hash_sha256_BYTES], buf[1 << 16];
	uint64_t at = offset, end = offset + size;

	crypto_hash_sha256_init(&st);
	while (at < end) {
		size_t want = end - at < sizeof(buf) ? (size_t)(end - at) : sizeof(buf);
		ssize_t n = pread(fd, buf, want, (off_t)at);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return kiln_error_set(KILN_EIO, "%s: read: %s", path,
			                      n < 0 ? strerror(errno) : "short");
		crypto_hash_sha256_update(&st, buf, (size_t)n);
		at += (uint64_t)n;
	}
	crypto_hash_sha256_final(&st, digest);
	sodium_bin2hex(out, 65, digest, sizeof(digest));
	return 0;
}

/* PUT of size bytes of fd from offset: the object, or a part of an upload. */
static int put_range(kiln_s3_client *s, const char *key, int fd, const char *path, uint64_t offset,
                     uint64_t size, const kiln_sigv4_pair *query, size_t query_count, char etag[128],
                     bool create_only)
{
	struct call c;
	char sha[65];
	int rc;

	if ((rc = file_sha256(fd, path, offset, size, sha)) < 0)
		return rc;
	call_init(&c, s, "PUT", key);
	c.fd = fd;
	c.offset = offset;
	c.size = size;
	c.payload_sha256 = sha;
	c.create_only = create_only;
	for (size_t i = 0; i < query_count; i++)
		c.query[c.query_count++] = query[i];
	rc = run(&c);
	if (etag)
		snprintf(etag, 128, "%s", c.etag);
	kiln_buf_free(&c.body);
	if (rc == 0 && etag && !etag[0])
		return kiln_error_set(KILN_EIO, "PUT s3://%s/%s at %s: a part's answer without an ETag",
		                      s->bucket, key, s->endpoint);
	return rc;
}

/* POST (create or complete an upload) with body; the answer in *answer. */
static int post(kiln_s3_client *s, const char *key, kiln_sigv4_pair q, const char *body, kiln_buf *answer)
{
	struct call c;
	char sha[65];
	int rc;

	kiln_sigv4_sha256_hex(sha, body, strlen(body));
	call_init(&c, s, "POST", key);
	c.query[c.query_count++] = q;
	c.upload = body;
	c.size = strlen(body);
	c.payload_sha256 = sha;
	rc = run(&c);
	*answer = c.body;
	return rc;
}

static void abort_upload(kiln_s3_client *s, const char *key, const char *upload_id)
{
	struct call c;

	call_init(&c, s, "DELETE", key);
	c.query[c.query_count++] = (kiln_sigv4_pair){"uploadId", upload_id};
	run(&c); /* best effort: one left is aborted by the next put of its key */
	kiln_buf_free(&c.body);
}

struct stale {
	kiln_s3_client *s;
	const char *key;
	char found[1024], id[1024];
	int64_t initiated; /* 0: not given */
	time_t now;
};

static int64_t parse_time(const char *t);

static int stale_upload(void *ctx, const char *path, const char *text, size_t len)
{
	struct stale *st = ctx;

	(void)len;
	if (text && strcmp(path, "ListMultipartUploadsResult/Upload/Key") == 0)
		snprintf(st->found, sizeof(st->found), "%s", text);
	else if (text && strcmp(path, "ListMultipartUploadsResult/Upload/UploadId") == 0)
		snprintf(st->id, sizeof(st->id), "%s", text);
	else if (text && strcmp(path, "ListMultipartUploadsResult/Upload/Initiated") == 0)
		st->initiated = parse_time(text);
	else if (!text && strcmp(path, "ListMultipartUploadsResult/Upload") == 0) {
		/* only an upload known to be old: one of unknown age may be a live
		 * upload of another process putting the same key */
		if (strcmp(st->found, st->key) == 0 && st->id[0] && st->initiated > 0 &&
		    (int64_t)st->now - st->initiated > STALE_UPLOAD_S)
			abort_upload(st->s, st->key, st->id);
		st->found[0] = st->id[0] = '\0';
		st->initiated = 0;
	}
	return 0;
}

/* Aborts the uploads of exactly this key that earlier attempts left (a
 * process killed mid-upload) once they are older than STALE_UPLOAD_S, so
 * that a live upload of the same key by another process (two pushes at
 * once) is never cut: a key's bytes never change under its name, so
 * nothing of value is lost. The clocks agree within the 15 minutes
 * Signature V4 allows. */
static int abort_stale_uploads(kiln_s3_client *s, const char *key)
{
	struct stale st = {.s = s, .key = key, .now = time(NULL)};
	struct call c;
	int rc;

	call_init(&c, s, "GET", "");
	c.about = key;
	c.query[c.query_count++] = (kiln_sigv4_pair){"uploads", ""};
	c.query[c.query_count++] = (kiln_sigv4_pair){"prefix", key};
	if ((rc = run(&c)) == 0) {
		rc = kiln_s3_xml_walk(c.body.ptr, c.body.len, stale_upload, &st);
	} else if (c.status == 501) {
		kiln_error_clear(); /* a service that cannot list uploads: none to abort by name */
		rc = 0;
	}
	kiln_buf_free(&c.body);
	return rc;
}

/* Uploads the parts; the CompleteMultipartUpload body into *complete. */
static int put_parts(kiln_s3_client *s, const char *key, int fd, const char *path, uint64_t size,
                     const char *upload_id, kiln_buf *complete)
{
	char etag[128], number[16];
	uint32_t parts = (uint32_t)((size + s->part_size - 1) / s->part_size);
	int rc = kiln_buf_puts(complete, "<CompleteMultipartUpload>");

	for (uint32_t n = 1; rc == 0 && n <= parts; n++) {
		uint64_t at = (uint64_t)(n - 1) * s->part_size;
		kiln_sigv4_pair q[2] = {{"partNumber", number}, {"uploadId", upload_id}};

		snprintf(number, sizeof(number), "%" PRIu32, n);
		if ((rc = put_range(s, key, fd, path, at, size - at < s->part_size ? size - at : s->part_size,
		                    q, 2, etag, false)) == 0)
			rc = kiln_buf_printf(
			    complete, "<Part><PartNumber>%" PRIu32 "</PartNumber><ETag>%s</ETag></Part>", n,
			    etag);
	}
	if (rc == 0 && (rc = kiln_buf_puts(complete, "</CompleteMultipartUpload>")) == 0)
		rc = kiln_buf_putc(complete, '\0');
	return rc;
}

static int put_multipart(kiln_s3_client *s, const char *key, int fd, const char *path, uint64_t size)
{
	kiln_buf answer = {0}, complete = {0};
	char upload_id[1024];
	int rc;

	if ((size + s->part_size - 1) / s->part_size > 10000)
		return kiln_error_set(KILN_EINVALID,
		                      "s3://%s/%s: %" PRIu64 " bytes need more than 10000 parts", s->bucket,
		                      key, size);
	if ((rc = abort_stale_uploads(s, key)) < 0)
		return rc;
	rc = post(s, key, (kiln_sigv4_pair){"uploads", ""}, "", &answer);
	if (rc == 0 && !kiln_s3_xml_find(answer.ptr, answer.len, "InitiateMultipartUploadResult/UploadId",
	                                 upload_id, sizeof(upload_id)))
		rc = kiln_error_set(KILN_EIO, "POST s3://%s/%s at %s: no UploadId in the answer", s->bucket,
		                    key, s->endpoint);
	kiln_buf_free(&answer);
	if (rc < 0)
		return rc;
	if ((rc = put_parts(s, key, fd, path, size, upload_id, &complete)) == 0) {
		/* a 200 with an <Error> inside is a failure (run() retries it) */
		rc = post(s, key, (kiln_sigv4_pair){"uploadId", upload_id}, complete.ptr, &answer);
		kiln_buf_free(&answer);
	}
	kiln_buf_free(&complete);
	if (rc < 0) {
		char msg[512];
		int code_rc = kiln_error_last_code();

		snprintf(msg, sizeof(msg), "%s", kiln_error_last());
		abort_upload(s, key, upload_id); /* nothing of it stays visible or billed */
		kiln_error_set(code_rc, "%s", msg);
	}
	return rc;
}

static int put_file(kiln_s3_client *s, const char *key, const char *path, uint64_t size, bool create_only)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return kiln_error_set(errno == ENOENT ? KILN_ENOTFOUND : KILN_EIO, "%s: %s", path,
		                      strerror(errno));
	if ((rc = kiln_store_check_upload(fd, path, size)) == 0)
		rc = size > s->part_size && !create_only
		         ? put_multipart(s, key, fd, path, size)
		         : put_range(s, key, fd, path, 0, size, NULL, 0, NULL, create_only);
	close(fd);
	return rc;
}

int kiln_s3_put_file(kiln_s3_client *s, const char *key, const char *path, uint64_t size)
{
	return put_file(s, key, path, size, false);
}

int kiln_s3_put_file_new(kiln_s3_client *s, const char *key, const char *path, uint64_t size)
{
	if (size > KILN_S3_MAX_PUT)
		return kiln_error_set(KILN_EINVALID,
		                      "PUT s3://%s/%s: %" PRIu64 " bytes is over one PUT's 5 GiB, which a "
		                      "create-only put needs",
		                      s->bucket, key, size);
	return put_file(s, key, path, size, true);
}

int kiln_s3_get(kiln_s3_client *s, const char *key, kiln_store_sink sink, void *ctx)
{
	struct call c;
	int rc;

	call_init(&c, s, "GET", key);
	c.sink = sink;
	c.sink_ctx = ctx;
	rc = run(&c);
	kiln_buf_free(&c.body);
	return rc;
}

static int stop_at_once(void *ctx, const void *data, size_t len)
{
	(void)ctx, (void)data, (void)len;
	return 1;
}

int kiln_s3_head(kiln_s3_client *s, const char *key, uint64_t *out_size)
{
	struct call c, why;
	int rc, diag;

	call_init(&c, s, "HEAD", key);
	rc = run(&c);
	if (rc == 0) {
		*out_size = c.length >= 0 ? (uint64_t)c.length : 0;
		atomic_store(&s->bucket_seen, true);
	}
	kiln_buf_free(&c.body);
	if (rc == 0 || c.cc != CURLE_OK || c.status < 400 || c.status >= 500 ||
	    (c.status == 404 && atomic_load(&s->bucket_seen)))
		return rc;
	/* an answer to HEAD has no body, so no error code: a GET of the same
	 * object says why (SignatureDoesNotMatch, InvalidToken, and for a 404
	 * NoSuchBucket, until a NoSuchKey has shown the bucket exists) */
	call_init(&why, s, "GET", key);
	why.sink = stop_at_once;
	diag = run(&why);
	kiln_buf_free(&why.body);
	if (diag == KILN_ENOTFOUND)
		atomic_store(&s->bucket_seen, true);
	return diag < 0 ? diag : rc;
}

int kiln_s3_delete(kiln_s3_client *s, const char *key)
{
	struct call c;
	int rc;

	call_init(&c, s, "DELETE", key);
	rc = run(&c);
	kiln_buf_free(&c.body);
	return rc == KILN_ENOTFOUND ? 0 : rc;
}

/* --- listing ------------------------------------------------------------------ */

struct page {
	kiln_s3_list_cb cb;
	void *ctx;
	char key[1024];
	uint64_t size;
	int64_t mtime;
	bool truncated, bad_key;
	char next[1024];
};

static int64_t parse_time(const char *t)
{
	struct tm tm = {0};

	if (!strptime(t, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	return (int64_t)timegm(&tm);
}

static int page_event(void *ctx, const char *path, const char *text, size_t len)
{
	struct page *p = ctx;

	(void)len;
	if (!text) {
		if (strcmp(path, "ListBucketResult/Contents") != 0)
			return 0;
		if (!kiln_s3_xml_url_decode(p->key) || !p->key[0]) {
			p->bad_key = true;
			return 1;
		}
		int rc = p->cb(p->ctx, p->key, p->size, p->mtime);
		p->key[0] = '\0';
		p->size = 0;
		p->mtime = 0;
		return rc;
	}
	if (strcmp(path, "ListBucketResult/Contents/Key") == 0)
		snprintf(p->key, sizeof(p->key), "%s", text);
	else if (strcmp(path, "ListBucketResult/Contents/Size") == 0)
		p->size = strtoull(text, NULL, 10);
	else if (strcmp(path, "ListBucketResult/Contents/LastModified") == 0)
		p->mtime = parse_time(text);
	else if (strcmp(path, "ListBucketResult/IsTruncated") == 0)
		p->truncated = strcmp(text, "true") == 0;
	else if (strcmp(path, "ListBucketResult/NextContinuationToken") == 0)
		snprintf(p->next, sizeof(p->next), "%s", text);
	return 0;
}

int kiln_s3_list(kiln_s3_client *s, const char *prefix, kiln_s3_list_cb cb, void *ctx)
{
	struct page p = {.cb = cb, .ctx = ctx};
	char token[1024] = "";
	unsigned pages = 0;
	int rc;

	do {
		struct call c;

		call_init(&c, s, "GET", "");
		c.about = prefix ? prefix : ""; /* messages name the prefix listed */
		c.query[c.query_count++] = (kiln_sigv4_pair){"list-type", "2"};
		c.query[c.query_count++] = (kiln_sigv4_pair){"encoding-type", "url"};
		c.query[c.query_count++] = (kiln_sigv4_pair){"prefix", prefix ? prefix : ""};
		if (token[0])
			c.query[c.query_count++] = (kiln_sigv4_pair){"continuation-token", token};
		rc = run(&c);
		p.truncated = false;
		p.next[0] = '\0';
		if (rc == 0)
			rc = kiln_s3_xml_walk(c.body.ptr, c.body.len, page_event, &p);
		kiln_buf_free(&c.body);
		if (p.bad_key)
			return kiln_error_set(KILN_EINVALID,
			                      "GET s3://%s/%s at %s: a listed key that is not URL-encoded",
			                      s->bucket, prefix ? prefix : "", s->endpoint);
		if (rc != 0)
			return rc;
		if (p.truncated && !p.next[0])
			return kiln_error_set(KILN_EINVALID,
			                      "GET s3://%s/%s at %s: a truncated listing without a token",
			                      s->bucket, prefix ? prefix : "", s->endpoint);
		/* a server that answers the same page forever is not followed */
		if (p.truncated && strcmp(p.next, token) == 0)
			return kiln_error_set(KILN_EINVALID,
			                      "GET s3://%s/%s at %s: a truncated listing whose next token is "
			                      "the one just sent",
			                      s->bucket, prefix ? prefix : "", s->endpoint);
		if (p.truncated && ++pages >= LIST_MAX_PAGES)
			return kiln_error_set(
			    KILN_ELIMIT, "GET s3://%s/%s at %s: a listing of more than %u pages: refused",
			    s->bucket, prefix ? prefix : "", s->endpoint, LIST_MAX_PAGES);
		snprintf(token, sizeof(token), "%s", p.next);
	} while (p.truncated);
	return 0;
}
