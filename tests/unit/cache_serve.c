/* Unit tests for the cache's HTTP front (src/cache/serve.c) against a fake
 * of the cache calls it makes (kiln_cache_open_shard and _open_trusted, kiln_cache_list),
 * driven by libcurl: whole shards, HEAD, single ranges of every form and
 * the ones ignored or unsatisfiable, If-None-Match and If-Range, a miss
 * filled on a worker thread (and X-Kiln-Peer), transient and hard errors,
 * names refused before the cache sees them (percent-decoded traversal
 * included), dataset listings, /metrics counts, /healthz, and the bearer
 * token (never logged, checked before the cache is asked anything, Range
 * requests included); "*"
 * in If-None-Match for a shard that is nowhere, a shard the cache cannot
 * hold (507), a recent miss answered without asking the cache again. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "cache/cache.h"
#include "cache/serve.h"
#include "core/error.h"
#include "core/log.h"
#include "core/metrics.h"

#define SHARD_SIZE 5000

/* Hashes: present on disk, fillable from "the origin", failing. */
#define H_LOCAL   "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define H_REMOTE  "1111111111111111111111111111111111111111111111111111111111111111"
#define H_ABSENT  "2222222222222222222222222222222222222222222222222222222222222222"
#define H_RETRY   "3333333333333333333333333333333333333333333333333333333333333333"
#define H_BROKEN  "4444444444444444444444444444444444444444444444444444444444444444"
#define H_HUGE    "5555555555555555555555555555555555555555555555555555555555555555"
#define H_GONE    "6666666666666666666666666666666666666666666666666666666666666666"
#define H_NOWHERE "7777777777777777777777777777777777777777777777777777777777777777"

static char tmpdir[64];
static char shard_bytes[SHARD_SIZE];

/* --- the fake cache ----------------------------------------------------- */

static struct {
	pthread_mutex_t lock;
	int opens_nofill, opens_fill, fills, from_peer, presents;
	pthread_t nofill_thread, fill_thread;
	int lists;
	char last_list[256];
} fake = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void shard_path(char *out, size_t cap, const char *hash)
{
	snprintf(out, cap, "%s/%s", tmpdir, hash);
}

int kiln_cache_open_shard(kiln_cache *cache, const char *hash, bool fill, bool from_peer, int *out_fd,
                          uint64_t *out_size)
{
	char path[256];
	struct stat st;
	int fd;

	assert_int_equal(strlen(hash), 64);
	pthread_mutex_lock(&fake.lock);
	if (fill) {
		fake.opens_fill++;
		fake.fill_thread = pthread_self();
	} else {
		fake.opens_nofill++;
		fake.nofill_thread = pthread_self();
	}
	fake.from_peer += from_peer;
	pthread_mutex_unlock(&fake.lock);
	if (strcmp(hash, H_RETRY) == 0)
		return kiln_error_set(KILN_ERETRY, "origin: connection refused (token hunter2)");
	if (strcmp(hash, H_BROKEN) == 0)
		return kiln_error_set(KILN_EIO, "/secret/path: disk on fire");
	if (strcmp(hash, H_HUGE) == 0 && fill)
		return kiln_error_set(KILN_ELIMIT, "shard " H_HUGE
		                                   " from the origin is larger than the cache's size_limit "
		                                   "(1.0 KiB): not cached");
	shard_path(path, sizeof(path), hash);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		if (!fill || strcmp(hash, H_REMOTE) != 0)
			return kiln_error_set(KILN_ENOTFOUND, "no shard");
		usleep(50 * 1000); /* a download */
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, shard_bytes, sizeof(shard_bytes)), (ssize_t)sizeof(shard_bytes));
		close(fd);
		pthread_mutex_lock(&fake.lock);
		fake.fills++;
		pthread_mutex_unlock(&fake.lock);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	*out_fd = fd;
	*out_size = (uint64_t)st.st_size;
	return 0;
}

int kiln_cache_present(kiln_cache *cache, const char *hash, uint64_t bytes)
{
	char path[256];

	assert_int_equal(bytes, 0);
	pthread_mutex_lock(&fake.lock);
	fake.presents++;
	pthread_mutex_unlock(&fake.lock);
	if (strcmp(hash, H_RETRY) == 0)
		return kiln_error_set(KILN_ERETRY, "origin: connection refused (token hunter2)");
	if (strcmp(hash, H_BROKEN) == 0)
		return kiln_error_set(KILN_EIO, "/secret/path: disk on fire");
	shard_path(path, sizeof(path), hash);
	return access(path, F_OK) == 0;
}

/* no shard of these tests was erased (tests/integration/cache_erase.sh) */
bool kiln_cache_is_erased(kiln_cache *cache, const char *hash)
{
	(void)cache;
	(void)hash;
	return false;
}

int kiln_cache_open_trusted(kiln_cache *cache, const char *hash, int *out_fd, uint64_t *out_size)
{
	return kiln_cache_open_shard(cache, hash, false, false, out_fd, out_size);
}

int kiln_cache_list(kiln_cache *cache, const char *dataset, const char *ref, const char *split, kiln_buf *out)
{
	pthread_mutex_lock(&fake.lock);
	fake.lists++;
	snprintf(fake.last_list, sizeof(fake.last_list), "%s %s %s", dataset, ref, split);
	pthread_mutex_unlock(&fake.lock);
	if (strcmp(dataset, "user-events") != 0 || strcmp(split, "train") != 0)
		return kiln_error_set(KILN_ENOTFOUND, "no such dataset");
	if (strcmp(ref, "broken") == 0)
		return kiln_error_set(KILN_EIO, "manifest unreadable");
	return kiln_buf_printf(out, "{\"shard\":\"%s\",\"bytes\":%d,\"records\":7,\"cached\":true}\n",
	                       H_LOCAL, SHARD_SIZE);
}

/* --- the client ---------------------------------------------------------- */

typedef struct reply {
	long status;
	char body[16384];
	size_t len;
	char headers[4096];
	size_t hlen;
} reply;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	reply *r = ud;
	size_t len = size * n;

	assert_true(r->len + len < sizeof(r->body));
	memcpy(r->body + r->len, p, len);
	r->len += len;
	r->body[r->len] = '\0';
	return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	reply *r = ud;
	size_t len = size * n;

	if (r->hlen + len < sizeof(r->headers)) {
		memcpy(r->headers + r->hlen, p, len);
		r->hlen += len;
		r->headers[r->hlen] = '\0';
	}
	return len;
}

static kiln_cache_server *server;

/* GET (or HEAD, or another method) of target, as sent (no dot-segment
 * clean-up), with extra header lines (NULL-terminated, or NULL). */
static void fetch(reply *r, const char *method, const char *target, const char *const *extra)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char url[512];

	assert_non_null(c);
	memset(r, 0, sizeof(*r));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)kiln_cache_serve_port(server), target);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "GET") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	for (size_t i = 0; extra && extra[i]; i++)
		hdrs = curl_slist_append(hdrs, extra[i]);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
}

static void get(reply *r, const char *target)
{
	fetch(r, "GET", target, NULL);
}

/* GET target with one header line. */
static void get_h(reply *r, const char *target, const char *line)
{
	const char *const extra[] = {line, NULL};

	fetch(r, "GET", target, extra);
}

static const char *header(const reply *r, const char *name, char *out, size_t cap)
{
	size_t n = strlen(name);

	out[0] = '\0';
	for (const char *p = r->headers; *p;) {
		const char *eol = strstr(p, "\r\n");

		if (!eol)
			break;
		if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
			const char *v = p + n + 1;

			while (*v == ' ')
				v++;
			snprintf(out, cap, "%.*s", (int)(eol - v), v);
			break;
		}
		p = eol + 2;
	}
	return out;
}

/* --- fixtures ------------------------------------------------------------- */

static kiln_metrics *metrics;
static int log_fd = -1;
static char log_path[128];

static kiln_cache_server *start(const char *token)
{
	kiln_cache_config config = {.listen = "127.0.0.1:0", .token = token};
	kiln_cache_server *s;

	assert_int_equal(kiln_cache_serve_start(&s, (kiln_cache *)&fake, &config, metrics), 0);
	assert_true(kiln_cache_serve_port(s) > 0);
	return s;
}

static int setup(void **state)
{
	char path[256];
	int fd;

	for (size_t i = 0; i < sizeof(shard_bytes); i++)
		shard_bytes[i] = (char)(i * 131 + i / 256);
	shard_path(path, sizeof(path), H_LOCAL);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, shard_bytes, sizeof(shard_bytes)), (ssize_t)sizeof(shard_bytes));
	close(fd);
	snprintf(log_path, sizeof(log_path), "%s/log", tmpdir);
	log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	kiln_log_setup(true, KILN_LOG_DEBUG);
	kiln_log_set_fd(log_fd);
	assert_int_equal(kiln_metrics_new(&metrics), 0);
	server = start(NULL);
	return 0;
}

static int teardown(void **state)
{
	kiln_cache_serve_stop(server);
	kiln_metrics_free(metrics);
	kiln_log_set_fd(2);
	close(log_fd);
	return 0;
}

/* --- tests ---------------------------------------------------------------- */

static void test_whole_shard(void **state)
{
	static reply r;
	char v[256];

	get(&r, "/v1/shards/" H_LOCAL);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, SHARD_SIZE);
	assert_memory_equal(r.body, shard_bytes, SHARD_SIZE);
	assert_string_equal(header(&r, "Content-Type", v, sizeof(v)), "application/zstd");
	assert_string_equal(header(&r, "ETag", v, sizeof(v)), "\"" H_LOCAL "\"");
	assert_string_equal(header(&r, "Accept-Ranges", v, sizeof(v)), "bytes");
	assert_string_equal(header(&r, "Cache-Control", v, sizeof(v)), "public, max-age=31536000, immutable");
	assert_string_equal(header(&r, "Content-Length", v, sizeof(v)), "5000");
	assert_string_equal(header(&r, "Content-Range", v, sizeof(v)), "");

	get(&r, "/v1/shards/" H_LOCAL ".jsonl.zst");
	assert_int_equal(r.status, 200);
	assert_memory_equal(r.body, shard_bytes, SHARD_SIZE);

	fetch(&r, "HEAD", "/v1/shards/" H_LOCAL, NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, 0);
	assert_string_equal(header(&r, "Content-Length", v, sizeof(v)), "5000");
	assert_string_equal(header(&r, "ETag", v, sizeof(v)), "\"" H_LOCAL "\"");
}

static void expect_range(const char *range, long status, uint64_t off, uint64_t len,
                         const char *content_range)
{
	static reply r;
	char line[256], v[256];

	snprintf(line, sizeof(line), "Range: %s", range);
	get_h(&r, "/v1/shards/" H_LOCAL, line);
	assert_int_equal(r.status, status);
	assert_string_equal(header(&r, "Content-Range", v, sizeof(v)), content_range);
	if (status == 416)
		return;
	assert_int_equal(r.len, len);
	assert_memory_equal(r.body, shard_bytes + off, len);
}

static void test_ranges(void **state)
{
	static reply r;
	char v[256];

	expect_range("bytes=0-99", 206, 0, 100, "bytes 0-99/5000");
	expect_range("bytes=4999-4999", 206, 4999, 1, "bytes 4999-4999/5000");
	expect_range("bytes=100-", 206, 100, 4900, "bytes 100-4999/5000");
	expect_range("bytes=4000-99999", 206, 4000, 1000, "bytes 4000-4999/5000");
	expect_range("bytes=-50", 206, 4950, 50, "bytes 4950-4999/5000");
	expect_range("bytes=-9999", 206, 0, 5000, "bytes 0-4999/5000");
	expect_range("BYTES = 10-19", 206, 10, 10, "bytes 10-19/5000");
	/* unsatisfiable */
	expect_range("bytes=5000-", 416, 0, 0, "bytes */5000");
	expect_range("bytes=5000-6000", 416, 0, 0, "bytes */5000");
	expect_range("bytes=-0", 416, 0, 0, "bytes */5000");
	expect_range("bytes=99999999999999999999999999-", 416, 0, 0, "bytes */5000");
	/* ignored: the whole file */
	expect_range("bytes=0-1,5-6", 200, 0, 5000, "");
	expect_range("bytes=5-2", 200, 0, 5000, "");
	expect_range("items=0-1", 200, 0, 5000, "");
	expect_range("bytes=x-1", 200, 0, 5000, "");
	expect_range("bytes=1-2x", 200, 0, 5000, "");
	expect_range("bytes=", 200, 0, 5000, "");

	/* HEAD with a range */
	{
		const char *const extra[] = {"Range: bytes=10-19", NULL};

		fetch(&r, "HEAD", "/v1/shards/" H_LOCAL, extra);
		assert_int_equal(r.status, 206);
		assert_int_equal(r.len, 0);
		assert_string_equal(header(&r, "Content-Length", v, sizeof(v)), "10");
	}
	/* If-Range: the range only for the same entity */
	{
		const char *const same[] = {"Range: bytes=10-19", "If-Range: \"" H_LOCAL "\"", NULL};
		const char *const other[] = {"Range: bytes=10-19", "If-Range: \"abc\"", NULL};

		fetch(&r, "GET", "/v1/shards/" H_LOCAL, same);
		assert_int_equal(r.status, 206);
		assert_int_equal(r.len, 10);
		fetch(&r, "GET", "/v1/shards/" H_LOCAL, other);
		assert_int_equal(r.status, 200);
		assert_int_equal(r.len, 5000);
	}
}

static void test_not_modified(void **state)
{
	static const char *const match[] = {
	    "If-None-Match: \"" H_LOCAL "\"",
	    "If-None-Match: W/\"" H_LOCAL "\"",
	    "If-None-Match: *",
	    "If-None-Match: \"abc\", \"" H_LOCAL "\"",
	};
	static reply r;
	char v[256];

	for (size_t i = 0; i < sizeof(match) / sizeof(match[0]); i++) {
		get_h(&r, "/v1/shards/" H_LOCAL, match[i]);
		assert_int_equal(r.status, 304);
		assert_int_equal(r.len, 0);
		assert_string_equal(header(&r, "ETag", v, sizeof(v)), "\"" H_LOCAL "\"");
	}
	get_h(&r, "/v1/shards/" H_LOCAL, "If-None-Match: \"abc\"");
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, 5000);
	get_h(&r, "/v1/shards/" H_LOCAL, "If-None-Match: \"" H_ABSENT "\"");
	assert_int_equal(r.status, 200);
	/* "*" matches any current representation: there is none */
	get_h(&r, "/v1/shards/" H_NOWHERE, "If-None-Match: *");
	assert_int_equal(r.status, 404);
	get_h(&r, "/v1/shards/" H_NOWHERE, "If-None-Match: \"abc\", *");
	assert_int_equal(r.status, 404);
	fetch(&r, "HEAD", "/v1/shards/" H_NOWHERE, (const char *const[]){"If-None-Match: *", NULL});
	assert_int_equal(r.status, 404);
	/* ...and a tag naming the hash needs no lookup */
	get_h(&r, "/v1/shards/" H_NOWHERE, "If-None-Match: \"" H_NOWHERE "\"");
	assert_int_equal(r.status, 304);
}

static void test_too_large(void **state)
{
	static reply r;
	char line[4096];
	bool logged = false;
	FILE *f;

	get(&r, "/v1/shards/" H_HUGE);
	assert_int_equal(r.status, 507);
	assert_string_equal(r.body, "insufficient storage: the cache cannot hold this shard\n");
	/* the log says what it is: the limit and the shard, not the origin's fault */
	assert_non_null(f = fopen(log_path, "r"));
	while (fgets(line, sizeof(line), f))
		if (strstr(line, H_HUGE) && strstr(line, "larger than the cache's size_limit (1.0 KiB)"))
			logged = true;
	fclose(f);
	assert_true(logged);
}

static void test_recent_miss(void **state)
{
	static reply r;
	char path[256];
	int fills, presents;

	get(&r, "/v1/shards/" H_GONE);
	assert_int_equal(r.status, 404);
	pthread_mutex_lock(&fake.lock);
	fills = fake.opens_fill;
	presents = fake.presents;
	pthread_mutex_unlock(&fake.lock);
	/* remembered: not asked to fill again */
	for (int i = 0; i < 3; i++) {
		get(&r, "/v1/shards/" H_GONE);
		assert_int_equal(r.status, 404);
	}
	pthread_mutex_lock(&fake.lock);
	assert_int_equal(fake.opens_fill, fills);
	assert_int_equal(fake.presents, presents + 3);
	pthread_mutex_unlock(&fake.lock);
	/* once it is in the cache (a sync), it is served whatever was remembered */
	shard_path(path, sizeof(path), H_GONE);
	assert_int_equal(access(path, F_OK), -1);
	{
		char local[256];

		shard_path(local, sizeof(local), H_LOCAL);
		assert_int_equal(link(local, path), 0);
	}
	get(&r, "/v1/shards/" H_GONE);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, SHARD_SIZE);
}

static void test_miss_filled_on_worker(void **state)
{
	static reply r;

	pthread_mutex_lock(&fake.lock);
	fake.opens_fill = fake.opens_nofill = fake.fills = fake.from_peer = 0;
	pthread_mutex_unlock(&fake.lock);
	get(&r, "/v1/shards/" H_REMOTE);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, SHARD_SIZE);
	assert_memory_equal(r.body, shard_bytes, SHARD_SIZE);
	pthread_mutex_lock(&fake.lock);
	assert_int_equal(fake.opens_nofill, 1); /* tried on the event loop... */
	assert_int_equal(fake.opens_fill, 1);   /* ...filled on a worker */
	assert_false(pthread_equal(fake.nofill_thread, fake.fill_thread));
	assert_int_equal(fake.fills, 1);
	assert_int_equal(fake.from_peer, 0);
	pthread_mutex_unlock(&fake.lock);

	/* now a hit: no worker (and no fill, so being a peer does not matter) */
	get_h(&r, "/v1/shards/" H_REMOTE, "X-Kiln-Peer: node-2");
	assert_int_equal(r.status, 200);
	pthread_mutex_lock(&fake.lock);
	assert_int_equal(fake.opens_fill, 1);
	assert_int_equal(fake.from_peer, 0);
	pthread_mutex_unlock(&fake.lock);

	/* absent everywhere */
	get_h(&r, "/v1/shards/" H_ABSENT, "X-Kiln-Peer: node-2");
	assert_int_equal(r.status, 404);
	pthread_mutex_lock(&fake.lock);
	assert_int_equal(fake.opens_fill, 2);
	assert_int_equal(fake.from_peer, 1); /* the worker's fill call said from_peer */
	pthread_mutex_unlock(&fake.lock);
	fetch(&r, "HEAD", "/v1/shards/" H_ABSENT, NULL);
	assert_int_equal(r.status, 404);
}

static void test_errors(void **state)
{
	static reply r;
	char v[64];

	get(&r, "/v1/shards/" H_RETRY);
	assert_int_equal(r.status, 503);
	assert_string_equal(header(&r, "Retry-After", v, sizeof(v)), "5");
	assert_null(strstr(r.body, "refused"));
	get(&r, "/v1/shards/" H_BROKEN);
	assert_int_equal(r.status, 500);
	assert_null(strstr(r.body, "secret"));
	assert_string_equal(r.body, "internal error\n");
}

static void test_bad_names(void **state)
{
	static const char *const bad[] = {
	    "/v1/shards/",
	    "/v1/shards/ABC",
	    "/v1/shards/..%2F..%2Fetc%2Fpasswd",
	    "/v1/shards/../../etc/passwd",
	    "/v1/shards/%2e%2e/%2e%2e/etc/passwd",
	    "/v1/shards/0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
	    "/v1/shards/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
	    "/v1/shards/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0",
	    "/v1/shards/" H_LOCAL "/",
	    "/v1/shards/" H_LOCAL "/x",
	    "/v1/shards/" H_LOCAL ".jsonl",
	    "/v1/shards/" H_LOCAL ".jsonl.zst.tmp",
	    "/v1/shards/" H_LOCAL "%2F",
	    "/v1/shards//" H_LOCAL,
	    "/v1/shards/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg",
	};
	static reply r;
	int before;

	pthread_mutex_lock(&fake.lock);
	before = fake.opens_fill + fake.opens_nofill;
	pthread_mutex_unlock(&fake.lock);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		get(&r, bad[i]);
		if (r.status != 400)
			fail_msg("%s: %ld", bad[i], r.status);
	}
	/* %00 stops at the server */
	get(&r, "/v1/shards/" H_LOCAL "%00");
	assert_int_equal(r.status, 400);
	pthread_mutex_lock(&fake.lock);
	assert_int_equal(fake.opens_fill + fake.opens_nofill, before); /* none reached the cache */
	pthread_mutex_unlock(&fake.lock);

	/* another method: 405 */
	fetch(&r, "POST", "/v1/shards/" H_LOCAL, NULL);
	assert_int_equal(r.status, 405);
	fetch(&r, "DELETE", "/v1/shards/" H_LOCAL, NULL);
	assert_int_equal(r.status, 405);
}

static void test_datasets(void **state)
{
	static const char *const bad[] = {
	    "/v1/datasets/",
	    "/v1/datasets/user-events",
	    "/v1/datasets/user-events/main",
	    "/v1/datasets/user-events/main/",
	    "/v1/datasets/user-events/main/train/x",
	    "/v1/datasets/User-Events/main/train",
	    "/v1/datasets/user-events/../train",
	    "/v1/datasets/user-events/main/..",
	    "/v1/datasets/user-events/main/..%2F..%2Fx",
	    "/v1/datasets/.user-events/main/train",
	    "/v1/datasets/user-events//train",
	    "/v1/datasets/user-events/ma%20in/train",
	    "/v1/datasets/user-events/refs%2Fheads%2Fmain/train",
	};
	static reply r;
	char v[256];

	get(&r, "/v1/datasets/user-events/main/train");
	assert_int_equal(r.status, 200);
	assert_string_equal(header(&r, "Content-Type", v, sizeof(v)), "application/x-ndjson");
	assert_string_equal(r.body,
	                    "{\"shard\":\"" H_LOCAL "\",\"bytes\":5000,\"records\":7,\"cached\":true}\n");
	assert_string_equal(fake.last_list, "user-events main train");
	get(&r, "/v1/datasets/user-events/0123456789abcdef0123456789abcdef01234567/train");
	assert_int_equal(r.status, 200);
	get(&r, "/v1/datasets/user-events/v3/train");
	assert_int_equal(r.status, 200);
	assert_string_equal(fake.last_list, "user-events v3 train");
	fetch(&r, "HEAD", "/v1/datasets/user-events/v3/train", NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, 0);

	get(&r, "/v1/datasets/user-events/main/test");
	assert_int_equal(r.status, 404);
	get(&r, "/v1/datasets/nope/main/train");
	assert_int_equal(r.status, 404);
	get(&r, "/v1/datasets/user-events/broken/train");
	assert_int_equal(r.status, 500);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		get(&r, bad[i]);
		if (r.status != 400)
			fail_msg("%s: %ld", bad[i], r.status);
	}
}

static void test_other_routes(void **state)
{
	static reply r;
	char v[256];

	get(&r, "/healthz");
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "ok");
	get(&r, "/nope");
	assert_int_equal(r.status, 404);
	get(&r, "/v1/shards");
	assert_int_equal(r.status, 404);
	fetch(&r, "POST", "/nope", NULL);
	assert_int_equal(r.status, 404);
	get(&r, "/a/../b");
	assert_int_equal(r.status, 400);
	get(&r, "/a/..%2Fb");
	assert_int_equal(r.status, 400);
	get(&r, "/..");
	assert_int_equal(r.status, 400);
	get(&r, "/a..b");
	assert_int_equal(r.status, 404);
	fetch(&r, "POST", "/healthz", NULL);
	assert_int_equal(r.status, 405);
	assert_string_equal(header(&r, "Allow", v, sizeof(v)), "GET, HEAD");
}

/* The value of `series` in an exposition, or -1. */
static long long series(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; (p = strstr(p, name)); p += n)
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return atoll(p + n + 1);
	return -1;
}

/* Reads /metrics until its 200 count is the previous read's plus one (that
 * read alone): nothing asked earlier is still being counted (a request is
 * counted once its answer is out, which a loaded machine may delay). Returns
 * the count the last read showed; *reads gets how many reads it took. */
static long long settled_ok(reply *r, int *reads)
{
	long long last = -1, ok = -1;

	for (*reads = 1; *reads <= 200; ++*reads) {
		get(r, "/metrics");
		ok = series(r->body, "kiln_cache_requests_total{code=\"200\"}");
		if (last >= 0 && ok == last + 1)
			return ok;
		last = ok;
		usleep(25 * 1000);
	}
	fail_msg("the request counters never settled");
	return ok;
}

static void test_metrics(void **state)
{
	static reply r;
	long long ok, bytes, not_found;
	int reads;

	ok = settled_ok(&r, &reads);
	assert_int_equal(r.status, 200);
	bytes = series(r.body, "kiln_cache_served_bytes_total");
	not_found = series(r.body, "kiln_cache_requests_total{code=\"404\"}");
	assert_true(ok > 0 && bytes > 0 && not_found > 0);
	assert_true(series(r.body, "kiln_cache_requests_total{code=\"416\"}") > 0);

	get(&r, "/v1/shards/" H_LOCAL);
	get_h(&r, "/v1/shards/" H_LOCAL, "Range: bytes=0-9");
	fetch(&r, "HEAD", "/v1/shards/" H_LOCAL, NULL);
	get(&r, "/v1/nope");
	/* the last /metrics read above, the whole GET, the HEAD, and every
	 * /metrics read before the last one here */
	assert_int_equal(settled_ok(&r, &reads), ok + 3 + (reads - 1));
	assert_int_equal(series(r.body, "kiln_cache_served_bytes_total"), bytes + 5000 + 10);
	assert_int_equal(series(r.body, "kiln_cache_requests_total{code=\"404\"}"), not_found + 1);
}

static void test_token(void **state)
{
	static const char *const extra_ok[] = {"Authorization: Bearer s3cret-t0ken", NULL};
	kiln_cache_server *saved = server;
	static reply r;
	char v[256], line[4096];
	int lines = 0, errors = 0;
	FILE *f;

	server = start("s3cret-t0ken");
	get(&r, "/healthz");
	assert_int_equal(r.status, 200);
	pthread_mutex_lock(&fake.lock);
	fake.opens_fill = fake.opens_nofill = fake.presents = fake.lists = 0;
	pthread_mutex_unlock(&fake.lock);
	static const char *const guarded[] = {"/v1/shards/" H_LOCAL,
	                                      "/v1/shards/ABC",
	                                      "/v1/datasets/user-events/main/train",
	                                      "/metrics",
	                                      "/nope",
	                                      "/a/../b",
	                                      "/v1/shards/" H_RETRY};
	static const char *const wrong[] = {NULL,
	                                    "Authorization: Bearer s3cret-t0ke",
	                                    "Authorization: Bearer s3cret-t0kenX",
	                                    "Authorization: Basic czNjcmV0LXQwa2Vu",
	                                    "Authorization: s3cret-t0ken",
	                                    "Authorization: Bearer",
	                                    "Authorization: Bearer "};
	for (size_t i = 0; i < sizeof(guarded) / sizeof(guarded[0]); i++) {
		for (size_t j = 0; j < sizeof(wrong) / sizeof(wrong[0]); j++) {
			const char *const extra[] = {wrong[j], NULL};

			fetch(&r, "GET", guarded[i], wrong[j] ? extra : NULL);
			if (r.status != 401)
				fail_msg("%s with %s: %ld", guarded[i], wrong[j] ? wrong[j] : "nothing",
				         r.status);
			assert_string_equal(header(&r, "WWW-Authenticate", v, sizeof(v)), "Bearer");
		}
	}
	/* a Range request (with or without If-Range, GET or HEAD) is no way around it */
	static const char *const ranged[][2] = {{"Range: bytes=0-9", "Accept: */*"},
	                                        {"Range: bytes=-5", "Accept: */*"},
	                                        {"Range: bytes=0-9", "If-Range: \"" H_LOCAL "\""}};
	static const char *const methods[] = {"GET", "HEAD"};
	for (size_t i = 0; i < sizeof(ranged) / sizeof(ranged[0]); i++)
		for (size_t j = 0; j < sizeof(wrong) / sizeof(wrong[0]); j++)
			for (size_t k = 0; k < 2; k++) {
				const char *const extra[] = {ranged[i][0], ranged[i][1], wrong[j], NULL};

				fetch(&r, methods[k], "/v1/shards/" H_LOCAL, extra);
				if (r.status != 401)
					fail_msg("%s with %s, %s and %s: %ld", methods[k], ranged[i][0],
					         ranged[i][1], wrong[j] ? wrong[j] : "no token", r.status);
			}
	/* every refusal came before the cache was asked anything */
	pthread_mutex_lock(&fake.lock);
	assert_int_equal(fake.opens_fill + fake.opens_nofill + fake.presents + fake.lists, 0);
	pthread_mutex_unlock(&fake.lock);
	fetch(&r, "GET", "/v1/shards/" H_LOCAL, extra_ok);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, SHARD_SIZE);
	{
		const char *const ranged_ok[] = {"Authorization: Bearer s3cret-t0ken", "Range: bytes=0-9",
		                                 NULL};

		fetch(&r, "GET", "/v1/shards/" H_LOCAL, ranged_ok);
		assert_int_equal(r.status, 206);
		assert_int_equal(r.len, 10);
	}
	get_h(&r, "/v1/shards/" H_LOCAL,
	      "Authorization: bearer s3cret-t0ken"); /* the scheme is case-insensitive */
	assert_int_equal(r.status, 200);
	fetch(&r, "GET", "/metrics", extra_ok);
	assert_int_equal(r.status, 200);
	fetch(&r, "GET", "/v1/datasets/user-events/main/train", extra_ok);
	assert_int_equal(r.status, 200);
	fetch(&r, "GET", "/v1/shards/ABC", extra_ok);
	assert_int_equal(r.status, 400);
	fetch(&r, "GET", "/v1/shards/" H_RETRY, extra_ok);
	assert_int_equal(r.status, 503);
	fetch(&r, "GET", "/nope", extra_ok);
	assert_int_equal(r.status, 404);
	kiln_cache_serve_stop(server);
	server = saved;

	/* neither the token nor the header in the log, which has lines */
	assert_non_null(f = fopen(log_path, "r"));
	while (fgets(line, sizeof(line), f)) {
		assert_null(strstr(line, "s3cret"));
		assert_null(strstr(line, "czNjcmV0"));
		lines++;
		errors += strstr(line, "\"shard_error\"") != NULL;
	}
	fclose(f);
	assert_true(lines > 0 && errors > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_whole_shard),  cmocka_unit_test(test_ranges),
	    cmocka_unit_test(test_not_modified), cmocka_unit_test(test_miss_filled_on_worker),
	    cmocka_unit_test(test_errors),       cmocka_unit_test(test_bad_names),
	    cmocka_unit_test(test_datasets),     cmocka_unit_test(test_other_routes),
	    cmocka_unit_test(test_metrics),      cmocka_unit_test(test_token),
	    cmocka_unit_test(test_too_large),    cmocka_unit_test(test_recent_miss),
	};
	int rc;

	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = kiln_test_main(tests, tmpdir, "cache-serve", setup, teardown);
	curl_global_cleanup();
	return rc;
}
