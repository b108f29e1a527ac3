/* The s3:// store through libs3 (Debian's 2.0: Signature V2, one PUT per
 * object, no multipart). s3://BUCKET/PREFIX maps key K to object PREFIX/K.
 * Every request is blocking and retried with exponential backoff while the
 * failure is transient; a store holds its credentials (zeroed on close) and
 * never writes them into a message. libs3 exports unprefixed names, so
 * everything here is static except the backend. */
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libs3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/secret.h"

#define DEFAULT_RETRIES 5
#define CRED_FILE_MAX   (64u << 10)
#define LIST_PAGE       1000

typedef struct s3_store {
	kiln_store base;
	char *bucket;
	char *prefix; /* "" or "a/b/" */
	char *host;   /* for messages */
	char *endpoint;
	char *access_key;
	char *secret_key;
	S3BucketContext ctx;
	int max_retries;
	atomic_bool bucket_seen; /* a NoSuchKey answer proved the bucket exists */
} s3_store;

typedef struct list_entry {
	char *key; /* full object name */
	uint64_t size;
	int64_t mtime;
} list_entry;

/* One operation's state across its attempts. */
typedef struct s3_call {
	s3_store *s;
	const char *object; /* full object name (or list prefix) for messages */
	S3Status status;
	char server_msg[160];
	bool aborted; /* a callback of ours stopped the request... */
	int abort_rc; /* ...and this is what the operation returns */
	/* put */
	int fd;
	const char *path;
	uint64_t size, remaining;
	/* get */
	kiln_store_sink sink;
	void *sink_ctx;
	uint64_t delivered, total;
	bool have_total;
	char etag[128];
	/* head */
	uint64_t length;
	/* list */
	list_entry *page;
	size_t page_n, page_cap;
	const char *marker; /* list from after this name; NULL = from the start */
	bool truncated;
	char *next_marker;
} s3_call;

extern const kiln_store_backend kiln_store_s3_backend;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static S3Status init_status;

static void init_libs3(void)
{
	init_status = S3_initialize("kiln", S3_INIT_ALL, S3_DEFAULT_HOSTNAME);
}

static int oom(void)
{
	return kiln_error_set(KILN_ENOMEM, "out of memory");
}

static void free_secret(char *p)
{
	if (p) {
		explicit_bzero(p, strlen(p));
		free(p);
	}
}

/* --- credentials --------------------------------------------------------- */

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

/* Reads "access_key_id=..." and "secret_access_key=..." (or the aws_ names,
 * spaces around '=' allowed, '#' comments and [sections] skipped) from a
 * file only its owner can read, through kiln_secret_read_file() (a FIFO or a
 * device is refused, never waited on). */
static int read_credentials_file(s3_store *s, const char *file)
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
		eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = '\0';
		name = trim(line);
		value = trim(eq + 1);
		if (strcmp(name, "access_key_id") == 0 || strcmp(name, "aws_access_key_id") == 0)
			slot = &s->access_key;
		else if (strcmp(name, "secret_access_key") == 0 || strcmp(name, "aws_secret_access_key") == 0)
			slot = &s->secret_key;
		else
			continue;
		if (!*value)
			continue;
		free_secret(*slot);
		if (!(*slot = strdup(value))) {
			rc = oom();
			goto cleanup;
		}
	}
	if (!s->access_key || !s->secret_key)
		rc = kiln_error_set(KILN_EINVALID, "credentials file %s has no %s line", file,
		                    !s->access_key ? "access_key_id=" : "secret_access_key=");
cleanup:
	kiln_secret_free(buf, len);
	return rc;
}

static int load_credentials(s3_store *s, const kiln_store_options *options)
{
	const char *id, *secret;

	if (options->credentials_file)
		return read_credentials_file(s, options->credentials_file);
	id = getenv("AWS_ACCESS_KEY_ID");
	secret = getenv("AWS_SECRET_ACCESS_KEY");
	if (!id || !*id || !secret || !*secret)
		return kiln_error_set(KILN_EINVALID,
		                      "%s: no S3 credentials: %s is not set (set AWS_ACCESS_KEY_ID and "
		                      "AWS_SECRET_ACCESS_KEY, or name a 0600 credentials file)",
		                      s->base.url,
		                      !id || !*id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY");
	s->access_key = strdup(id);
	s->secret_key = strdup(secret);
	if (!s->access_key || !s->secret_key)
		return oom();
	return 0;
}

/* --- open / close -------------------------------------------------------- */

static void s3_close(kiln_store *store)
{
	s3_store *s = (s3_store *)store;

	free(s->bucket);
	free(s->prefix);
	free(s->host);
	free(s->endpoint);
	free_secret(s->access_key);
	free_secret(s->secret_key);
	free(s->base.url);
	free(s);
}

static int s3_open(kiln_store **out, const char *url, const kiln_store_options *options)
{
	const char *rest = url + strlen("s3://"), *slash;
	S3UriStyle style = options->virtual_host ? S3UriStyleVirtualHost : S3UriStylePath;
	s3_store *s;
	S3Status st;
	size_t plen;
	int rc;

	*out = NULL;
	pthread_once(&init_once, init_libs3);
	if (init_status != S3StatusOK)
		return kiln_error_set(KILN_EIO, "libs3 initialisation failed: %s",
		                      S3_get_status_name(init_status));
	s = calloc(1, sizeof(*s));
	if (!s)
		return oom();
	s->base.backend = &kiln_store_s3_backend;
	if (!(s->base.url = strdup(url))) {
		rc = oom();
		goto cleanup;
	}
	slash = strchr(rest, '/');
	s->bucket = slash ? strndup(rest, (size_t)(slash - rest)) : strdup(rest);
	s->prefix = strdup(slash ? slash + 1 : "");
	s->host = strdup(options->endpoint && *options->endpoint ? options->endpoint : S3_DEFAULT_HOSTNAME);
	if (options->endpoint && *options->endpoint)
		s->endpoint = strdup(options->endpoint);
	if (!s->bucket || !s->prefix || !s->host ||
	    (options->endpoint && *options->endpoint && !s->endpoint)) {
		rc = oom();
		goto cleanup;
	}
	if (strchr(s->host, '/') || strchr(s->host, '@') || !*s->host) {
		rc = kiln_error_set(
		    KILN_EINVALID,
		    "%s: S3 endpoint '%s' must be host[:port] (no scheme or path; plain HTTP is "
		    "the http option)",
		    url, strchr(s->host, '@') ? "(with user@, not shown)" : s->host);
		goto cleanup;
	}
	if (!*s->bucket) {
		rc =
		    kiln_error_set(KILN_EINVALID, "store URL '%s' names no bucket (s3://BUCKET/PREFIX)", url);
		goto cleanup;
	}
	if ((st = S3_validate_bucket_name(s->bucket, style)) != S3StatusOK) {
		rc = kiln_error_set(KILN_EINVALID,
		                    "store URL '%s': invalid bucket name for %s-style access (%s)", url,
		                    options->virtual_host ? "virtual-host" : "path", S3_get_status_name(st));
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
			rc = oom();
			goto cleanup;
		}
		free(s->prefix);
		s->prefix = p;
	}
	if ((rc = load_credentials(s, options)) < 0)
		goto cleanup;
	s->ctx.hostName = s->endpoint;
	s->ctx.bucketName = s->bucket;
	s->ctx.protocol = options->http ? S3ProtocolHTTP : S3ProtocolHTTPS;
	s->ctx.uriStyle = style;
	s->ctx.accessKeyId = s->access_key;
	s->ctx.secretAccessKey = s->secret_key;
	s->max_retries = options->max_retries > 0 ? options->max_retries : DEFAULT_RETRIES;
	*out = &s->base;
	return 0;
cleanup:
	s3_close(&s->base);
	return rc;
}

/* --- requests, retries, errors ------------------------------------------- */

static S3Status on_properties(const S3ResponseProperties *p, void *data)
{
	s3_call *c = data;

	c->length = p->contentLength;
	if (c->sink && c->delivered == 0) {
		c->total = p->contentLength;
		c->have_total = true;
		if (p->eTag && strlen(p->eTag) < sizeof(c->etag))
			strcpy(c->etag, p->eTag);
	}
	return S3StatusOK;
}

static void on_complete(S3Status status, const S3ErrorDetails *details, void *data)
{
	s3_call *c = data;
	size_t i = 0;

	c->status = status;
	c->server_msg[0] = '\0';
	if (details && details->message) {
		/* printable ASCII only, one line */
		for (const char *p = details->message; *p && i + 1 < sizeof(c->server_msg); p++)
			c->server_msg[i++] = (*p >= 0x20 && *p < 0x7f) ? *p : ' ';
		c->server_msg[i] = '\0';
	}
}

/* Transient: the network, the server's own failures (5xx, which libs3 2.0
 * reports as InternalError/SlowDown/unknown codes) and timeouts. */
static bool retriable(S3Status st)
{
	if (S3_status_is_retryable(st))
		return true;
	switch (st) {
	case S3StatusInternalError: /* libs3's name for most curl failures */
	case S3StatusNameLookupError:
	case S3StatusFailedToConnect:
	case S3StatusConnectionFailed:
	case S3StatusErrorInternalError:
	case S3StatusErrorOperationAborted:
	case S3StatusErrorRequestTimeout:
	case S3StatusErrorSlowDown:
	case S3StatusErrorIncompleteBody:
	case S3StatusErrorUnknown: /* e.g. 503 ServiceUnavailable, a code libs3 2.0 predates */
	case S3StatusHttpErrorUnknown:
		return true;
	default:
		return false;
	}
}

static const char *status_name(S3Status st)
{
	const char *name = S3_get_status_name(st);

	if (st >= S3StatusErrorAccessDenied && st <= S3StatusErrorUnknown && strncmp(name, "Error", 5) == 0)
		return name + 5;
	switch (st) {
	case S3StatusHttpErrorForbidden:
		return "HTTP 403 Forbidden";
	case S3StatusHttpErrorNotFound:
		return "HTTP 404 Not Found";
	case S3StatusHttpErrorBadRequest:
		return "HTTP 400 Bad Request";
	default:
		return name;
	}
}

static int fail(const s3_call *c, int attempts)
{
	const s3_store *s = c->s;
	S3Status st = c->status;
	const char *name = status_name(st), *hint = NULL;
	int code = KILN_EINVALID;

	switch (st) {
	case S3StatusErrorSignatureDoesNotMatch:
		hint = "check the secret key; libs3 2.0 signs with AWS Signature V2";
		break;
	case S3StatusErrorInvalidAccessKeyId:
		hint = "check the access key id";
		break;
	case S3StatusErrorAccessDenied:
	case S3StatusHttpErrorForbidden:
		hint = "check the credentials and the bucket's policy";
		break;
	case S3StatusErrorRequestTimeTooSkewed:
		hint = "check this machine's clock";
		break;
	case S3StatusErrorNoSuchBucket:
		code = KILN_ENOTFOUND;
		hint = "the bucket does not exist at this endpoint";
		break;
	case S3StatusErrorNoSuchKey:
	case S3StatusHttpErrorNotFound:
		code = KILN_ENOTFOUND;
		hint = "no such object";
		break;
	case S3StatusErrorPermanentRedirect:
	case S3StatusErrorTemporaryRedirect:
	case S3StatusHttpErrorMovedTemporarily:
		hint = "the bucket lives at another endpoint or region";
		break;
	case S3StatusServerFailedVerification:
		hint = "the endpoint's TLS certificate did not verify";
		break;
	default:
		break;
	}
	if (retriable(st)) {
		return kiln_error_set(KILN_ERETRY, "s3://%s/%s at %s: %s%s%s, gave up after %d attempt%s",
		                      s->bucket, c->object, s->host, name, c->server_msg[0] ? ": " : "",
		                      c->server_msg, attempts, attempts == 1 ? "" : "s");
	}
	if (hint)
		return kiln_error_set(code, "s3://%s/%s at %s: %s (%s)", s->bucket, c->object, s->host, name,
		                      hint);
	return kiln_error_set(code, "s3://%s/%s at %s: %s%s%s", s->bucket, c->object, s->host, name,
	                      c->server_msg[0] ? ": " : "", c->server_msg);
}

typedef int (*attempt_fn)(s3_call *c, int attempt);

/* Runs one attempt after another until success, a fatal status, a callback
 * abort, or max_retries retries. */
static int run(s3_call *c, attempt_fn attempt)
{
	int n;

	for (n = 0;; n++) {
		int rc;

		c->status = S3StatusInternalError;
		c->server_msg[0] = '\0';
		c->aborted = false;
		c->abort_rc = 0;
		rc = attempt(c, n);
		if (c->aborted)
			return c->abort_rc;
		if (rc < 0)
			return rc;
		if (rc > 0 || c->status == S3StatusOK)
			return 0;
		if (!retriable(c->status) || n >= c->s->max_retries)
			break;
		kiln_store_backoff(n);
	}
	return fail(c, n + 1);
}

static char *full_name(const s3_store *s, const char *key)
{
	char *name;

	if (asprintf(&name, "%s%s", s->prefix, key) < 0)
		return NULL;
	return name;
}

/* --- put ------------------------------------------------------------------ */

static int put_data(int size, char *buf, void *data)
{
	s3_call *c = data;
	size_t want;
	ssize_t n;

	if (c->remaining == 0)
		return 0;
	want = (uint64_t)size < c->remaining ? (size_t)size : (size_t)c->remaining;
	do
		n = read(c->fd, buf, want);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		c->aborted = true;
		c->abort_rc =
		    n < 0 ? kiln_error_set(KILN_EIO, "read %s: %s", c->path, strerror(errno))
		          : kiln_error_set(KILN_EIO, "%s: shrank to %" PRIu64 " bytes while being stored",
		                           c->path, c->size - c->remaining);
		return -1;
	}
	c->remaining -= (uint64_t)n;
	return (int)n;
}

static int put_attempt(s3_call *c, int attempt)
{
	static const S3PutObjectHandler handler = {{on_properties, on_complete}, put_data};

	(void)attempt;
	if (lseek(c->fd, 0, SEEK_SET) < 0)
		return kiln_error_set(KILN_EIO, "seek %s: %s", c->path, strerror(errno));
	c->remaining = c->size;
	S3_put_object(&c->s->ctx, c->object, c->size, NULL, NULL, &handler, c);
	return 0;
}

static int s3_put_file(kiln_store *store, const char *key, const char *path, uint64_t size)
{
	s3_call c = {.s = (s3_store *)store, .path = path, .size = size, .fd = -1};
	char *name;
	int rc;

	c.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (c.fd < 0)
		return kiln_error_set(errno == ENOENT ? KILN_ENOTFOUND : KILN_EIO, "%s: %s", path,
		                      strerror(errno));
	if ((rc = kiln_store_check_upload(c.fd, path, size)) < 0)
		goto cleanup;
	if (!(name = full_name(c.s, key))) {
		rc = oom();
		goto cleanup;
	}
	c.object = name;
	rc = run(&c, put_attempt);
	free(name);
cleanup:
	close(c.fd);
	return rc;
}

/* --- get ------------------------------------------------------------------ */

static S3Status get_data(int size, const char *buf, void *data)
{
	s3_call *c = data;
	int rc = c->sink(c->sink_ctx, buf, (size_t)size);

	if (rc != 0) {
		c->aborted = true;
		c->abort_rc = rc;
		return S3StatusAbortedByCallback;
	}
	c->delivered += (uint64_t)size;
	return S3StatusOK;
}

/* A retry resumes where the sink left off, with If-Match on the ETag of the
 * first response so a concurrent overwrite cannot splice two objects. */
static int get_attempt(s3_call *c, int attempt)
{
	static const S3GetObjectHandler handler = {{on_properties, on_complete}, get_data};
	S3GetConditions cond = {-1, -1, NULL, NULL};
	uint64_t start;

	if (attempt > 0 && c->delivered > 0) {
		if (c->have_total && c->delivered == c->total)
			return 1; /* everything arrived; only the ending failed */
		if (!c->etag[0])
			return kiln_error_set(KILN_ERETRY,
			                      "s3://%s/%s at %s: read failed after %" PRIu64
			                      " bytes and the object has no ETag to resume by",
			                      c->s->bucket, c->object, c->s->host, c->delivered);
		cond.ifMatchETag = c->etag;
	}
	start = c->delivered;
	c->length = 0;
	S3_get_object(&c->s->ctx, c->object, &cond, c->delivered, 0, NULL, &handler, c);
	/* libs3 2.0 reports a body cut short (CURLE_PARTIAL_FILE) as success */
	if (c->status == S3StatusOK && c->length > 0 && c->delivered - start != c->length) {
		c->status = S3StatusConnectionFailed;
		snprintf(c->server_msg, sizeof(c->server_msg),
		         "body cut short at %" PRIu64 " of %" PRIu64 " bytes", c->delivered - start,
		         c->length);
	}
	if (c->status == S3StatusErrorPreconditionFailed)
		return kiln_error_set(KILN_ERETRY, "s3://%s/%s at %s: the object changed while it was read",
		                      c->s->bucket, c->object, c->s->host);
	return 0;
}

static int s3_get(kiln_store *store, const char *key, kiln_store_sink sink, void *ctx)
{
	s3_call c = {.s = (s3_store *)store, .sink = sink, .sink_ctx = ctx, .fd = -1};
	char *name = full_name(c.s, key);
	int rc;

	if (!name)
		return oom();
	c.object = name;
	rc = run(&c, get_attempt);
	free(name);
	return rc;
}

/* --- stat / remove ----------------------------------------------------------- */

static int head_attempt(s3_call *c, int attempt)
{
	static const S3ResponseHandler handler = {on_properties, on_complete};

	(void)attempt;
	S3_head_object(&c->s->ctx, c->object, NULL, &handler, c);
	return 0;
}

static int discard(void *ctx, const void *data, size_t len)
{
	(void)ctx;
	(void)data;
	(void)len;
	return 0;
}

/* A HEAD answer has no body, so libs3 2.0 reports a missing bucket and a
 * missing key alike as HTTP 404. Until a NoSuchKey has proved the bucket
 * exists, one ranged GET tells them apart, so a mistyped bucket is an error
 * and not an empty store. */
static int bucket_missing(s3_store *s, const char *name)
{
	static const S3GetObjectHandler handler = {{on_properties, on_complete}, get_data};
	s3_call c = {.s = s, .object = name, .fd = -1, .sink = discard};

	if (atomic_load(&s->bucket_seen))
		return 0;
	S3_get_object(&s->ctx, name, NULL, 0, 1, NULL, &handler, &c);
	if (c.status == S3StatusErrorNoSuchBucket)
		return fail(&c, 1);
	if (c.status == S3StatusErrorNoSuchKey)
		atomic_store(&s->bucket_seen, true);
	return 0;
}

static int stat_object(s3_store *s, const char *name, uint64_t *out_size)
{
	s3_call c = {.s = s, .object = name, .fd = -1};
	int rc = run(&c, head_attempt);

	if (rc == KILN_ENOTFOUND &&
	    (c.status == S3StatusHttpErrorNotFound || c.status == S3StatusErrorNoSuchKey)) {
		kiln_error_clear();
		return bucket_missing(s, name);
	}
	if (rc < 0)
		return rc;
	atomic_store(&s->bucket_seen, true);
	if (out_size)
		*out_size = c.length;
	return 1;
}

static int s3_stat(kiln_store *store, const char *key, uint64_t *out_size)
{
	s3_store *s = (s3_store *)store;
	char *name = full_name(s, key);
	int rc;

	if (!name)
		return oom();
	rc = stat_object(s, name, out_size);
	free(name);
	return rc;
}

static int delete_attempt(s3_call *c, int attempt)
{
	static const S3ResponseHandler handler = {on_properties, on_complete};

	(void)attempt;
	S3_delete_object(&c->s->ctx, c->object, NULL, &handler, c);
	return 0;
}

/* S3 answers a DELETE of a missing key with success; a HEAD first gives the
 * same KILN_ENOTFOUND as the file store. */
static int s3_remove(kiln_store *store, const char *key)
{
	s3_store *s = (s3_store *)store;
	s3_call c = {.s = s, .fd = -1};
	char *name = full_name(s, key);
	int rc;

	if (!name)
		return oom();
	rc = stat_object(s, name, NULL);
	if (rc == 0)
		rc = kiln_error_set(KILN_ENOTFOUND, "s3://%s/%s at %s: no such object", s->bucket, name,
		                    s->host);
	if (rc == 1) {
		c.object = name;
		rc = run(&c, delete_attempt);
	}
	free(name);
	return rc;
}

/* --- list ----------------------------------------------------------------- */

static void page_reset(s3_call *c)
{
	for (size_t i = 0; i < c->page_n; i++)
		free(c->page[i].key);
	c->page_n = 0;
	c->truncated = false;
	free(c->next_marker);
	c->next_marker = NULL;
}

static S3Status list_data(int truncated, const char *next_marker, int count,
                          const S3ListBucketContent *contents, int prefixes, const char **common, void *data)
{
	s3_call *c = data;

	(void)prefixes;
	(void)common;
	c->truncated = truncated != 0;
	if (next_marker && *next_marker) {
		free(c->next_marker);
		if (!(c->next_marker = strdup(next_marker)))
			goto nomem;
	}
	for (int i = 0; i < count; i++) {
		if (c->page_n == c->page_cap) {
			size_t ncap = c->page_cap ? c->page_cap * 2 : 256;
			list_entry *np = realloc(c->page, ncap * sizeof(*np));

			if (!np)
				goto nomem;
			c->page = np;
			c->page_cap = ncap;
		}
		if (!(c->page[c->page_n].key = strdup(contents[i].key)))
			goto nomem;
		c->page[c->page_n].size = contents[i].size;
		c->page[c->page_n].mtime = contents[i].lastModified > 0 ? contents[i].lastModified : 0;
		c->page_n++;
	}
	return S3StatusOK;
nomem:
	c->aborted = true;
	c->abort_rc = oom();
	return S3StatusAbortedByCallback;
}

static int list_attempt(s3_call *c, int attempt)
{
	static const S3ListBucketHandler handler = {{on_properties, on_complete}, list_data};
	(void)attempt;
	page_reset(c);
	S3_list_bucket(&c->s->ctx, c->object, c->marker, NULL, LIST_PAGE, NULL, &handler, c);
	return 0;
}

static int s3_list(kiln_store *store, const char *prefix, kiln_store_key_cb cb, void *ctx)
{
	s3_store *s = (s3_store *)store;
	s3_call c = {.s = s, .fd = -1};
	char *full = full_name(s, prefix), *marker = NULL;
	size_t skip = strlen(s->prefix);
	int rc = 0;

	if (!full)
		return oom();
	c.object = full;
	for (;;) {
		const char *last = NULL;

		c.marker = marker;
		if ((rc = run(&c, list_attempt)) != 0)
			break;
		for (size_t i = 0; i < c.page_n && rc == 0; i++) {
			const char *name = c.page[i].key;

			last = name;
			if (strncmp(name, s->prefix, skip) != 0 || !kiln_store_key_valid(name + skip))
				continue; /* not ours: written by another tool */
			rc = cb(ctx, name + skip, c.page[i].size, c.page[i].mtime);
		}
		if (rc != 0 || !c.truncated)
			break;
		if (c.next_marker)
			last = c.next_marker;
		if (!last) {
			rc = kiln_error_set(KILN_EIO, "s3://%s/%s at %s: truncated listing with no marker",
			                    s->bucket, full, s->host);
			break;
		}
		free(marker);
		if (!(marker = strdup(last))) {
			rc = oom();
			break;
		}
	}
	page_reset(&c);
	free(c.page);
	free(marker);
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
};
