/* Unit tests for the HTTP server (src/core/http_server.c), driven by libcurl
 * in the same process: GET, HEAD, POST with and without a body, query and
 * Authorization, 404, 405 and its Allow header, a failing handler, a slow
 * handler that does not hold up others, stop waiting for handlers, port 0,
 * a port already taken and bad listen addresses; prefix routes, request and
 * response headers, file-descriptor bodies (ranges, HEAD, the descriptor
 * closed), %00 in the target, and the event-loop mode: blocking calls moved
 * to workers, answered-request counts, the connection limit; slowloris:
 * many connections from one address trickling a request head leave
 * /healthz answering another address, and the head deadline closes a
 * trickling connection that the idle timeout would keep. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/http_server.h"
#include "core/metrics.h"

typedef struct reply {
	long status;
	char body[16384];
	size_t len;
	char headers[4096];
	size_t hlen;
} reply;

/* What the handlers saw. */
static struct {
	_Atomic int flushes;
	char query[256];
	char authorization[256];
	bool query_null, authorization_null;
	_Atomic bool slow_done;
} seen;

static kiln_metrics *metrics;
static kiln_counter *scrapes;

static int on_healthz(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	return kiln_buf_puts(&res->body, "ok");
}

static int on_metrics(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	kiln_counter_add(scrapes, 1);
	res->content_type = "text/plain; version=0.0.4; charset=utf-8";
	return kiln_metrics_render(ctx, &res->body);
}

static int on_flush(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	atomic_fetch_add(&seen.flushes, 1);
	seen.query_null = !req->query;
	seen.authorization_null = !req->authorization;
	snprintf(seen.query, sizeof(seen.query), "%s", req->query ? req->query : "");
	snprintf(seen.authorization, sizeof(seen.authorization), "%s",
	         req->authorization ? req->authorization : "");
	res->status = 202;
	return kiln_buf_printf(&res->body, "%s %s flushing", req->method, req->path);
}

static int on_fail(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	kiln_buf_puts(&res->body, "half a body");
	return kiln_error_set(KILN_EIO, "disk on fire");
}

static int on_slow(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	usleep(700 * 1000);
	atomic_store(&seen.slow_done, true);
	return kiln_buf_puts(&res->body, "slow");
}

static int on_both(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	return kiln_buf_puts(&res->body, req->method);
}

static const kiln_http_route routes[] = {
    {"GET", "/healthz", on_healthz, NULL}, {"GET", "/metrics", on_metrics, NULL}, /* ctx set in setup */
    {"POST", "/flush", on_flush, NULL},    {"GET", "/fail", on_fail, NULL},
    {"GET", "/slow", on_slow, NULL},       {"PUT", "/both", on_both, NULL},
    {"POST", "/both", on_both, NULL},
};

static kiln_http_server *server;

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

static long fetch_timeout_ms = 10000;
static const char *fetch_from; /* source address (CURLOPT_INTERFACE), NULL for the default */

/* method "HEAD" uses CURLOPT_NOBODY; body non-NULL sends it; extra: more
 * header lines, NULL-terminated (or NULL). Returns the curl result; the
 * reply in *r. */
static CURLcode fetch_ex(reply *r, uint16_t port, const char *method, const char *target, const char *body,
                         size_t body_len, const char *auth, const char *const *extra)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char url[512];
	CURLcode cc;

	assert_non_null(c);
	memset(r, 0, sizeof(*r));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)port, target);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, fetch_timeout_ms);
	if (fetch_from)
		curl_easy_setopt(c, CURLOPT_INTERFACE, fetch_from);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	if (strcmp(method, "HEAD") == 0) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	} else if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	if (auth) {
		char line[300];

		snprintf(line, sizeof(line), "Authorization: %s", auth);
		hdrs = curl_slist_append(hdrs, line);
	}
	for (size_t i = 0; extra && extra[i]; i++)
		hdrs = curl_slist_append(hdrs, extra[i]);
	if (hdrs)
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	return cc;
}

static CURLcode fetch(reply *r, uint16_t port, const char *method, const char *target, const char *body,
                      size_t body_len, const char *auth)
{
	return fetch_ex(r, port, method, target, body, body_len, auth, NULL);
}

static void get(reply *r, const char *method, const char *target)
{
	assert_int_equal(fetch(r, kiln_http_server_port(server), method, target, NULL, 0, NULL), CURLE_OK);
}

/* The value of header `name` in r (case-insensitive), "" when absent. */
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

static int setup(void **state)
{
	kiln_http_route copy[sizeof(routes) / sizeof(routes[0])];

	assert_int_equal(kiln_metrics_new(&metrics), 0);
	scrapes = kiln_metrics_counter(metrics, "kiln_scrapes_total", "Scrapes served.", NULL);
	memcpy(copy, routes, sizeof(routes));
	copy[1].ctx = metrics;
	assert_int_equal(kiln_http_server_start(&server, "127.0.0.1:0", copy, sizeof(copy) / sizeof(copy[0])),
	                 0);
	assert_true(kiln_http_server_port(server) > 0);
	return 0;
}

static int teardown(void **state)
{
	kiln_http_server_stop(server);
	kiln_metrics_free(metrics);
	return 0;
}

static void test_healthz(void **state)
{
	reply r;
	char v[256];

	get(&r, "GET", "/healthz");
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "ok");
	assert_string_equal(header(&r, "Content-Type", v, sizeof(v)), "text/plain; charset=utf-8");

	get(&r, "HEAD", "/healthz");
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, 0);
	assert_string_equal(header(&r, "Content-Length", v, sizeof(v)), "2");

	/* a query string does not change the route */
	get(&r, "GET", "/healthz?verbose=1");
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "ok");
}

static void test_metrics(void **state)
{
	reply r;
	char v[256];

	get(&r, "GET", "/metrics");
	get(&r, "GET", "/metrics");
	assert_int_equal(r.status, 200);
	assert_string_equal(header(&r, "Content-Type", v, sizeof(v)),
	                    "text/plain; version=0.0.4; charset=utf-8");
	assert_string_equal(r.body, "# HELP kiln_scrapes_total Scrapes served.\n"
	                            "# TYPE kiln_scrapes_total counter\n"
	                            "kiln_scrapes_total 2\n");
}

static void test_not_found_and_not_allowed(void **state)
{
	reply r;
	char v[256];

	get(&r, "GET", "/nope");
	assert_int_equal(r.status, 404);
	get(&r, "GET", "/healthz/");
	assert_int_equal(r.status, 404);
	get(&r, "POST", "/nope");
	assert_int_equal(r.status, 404);

	get(&r, "DELETE", "/healthz");
	assert_int_equal(r.status, 405);
	assert_string_equal(header(&r, "Allow", v, sizeof(v)), "GET, HEAD");
	get(&r, "GET", "/flush");
	assert_int_equal(r.status, 405);
	assert_string_equal(header(&r, "Allow", v, sizeof(v)), "POST");
	get(&r, "HEAD", "/flush");
	assert_int_equal(r.status, 405);
	get(&r, "GET", "/both");
	assert_int_equal(r.status, 405);
	assert_string_equal(header(&r, "Allow", v, sizeof(v)), "PUT, POST");
	get(&r, "PUT", "/both");
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "PUT");
}

static void test_post(void **state)
{
	uint16_t port = kiln_http_server_port(server);
	static char big[200000];
	reply r;

	/* no body, no query, no Authorization */
	assert_int_equal(fetch(&r, port, "POST", "/flush", NULL, 0, NULL), CURLE_OK);
	assert_int_equal(r.status, 202);
	assert_string_equal(r.body, "POST /flush flushing");
	assert_true(seen.query_null);
	assert_true(seen.authorization_null);

	/* a small body is read and dropped; query as sent */
	assert_int_equal(fetch(&r, port, "POST", "/flush?force=1&why=a%20b", "{\"x\":1}", 7, "Bearer t0k"),
	                 CURLE_OK);
	assert_int_equal(r.status, 202);
	assert_false(seen.query_null);
	assert_string_equal(seen.query, "force=1&why=a%20b");
	assert_string_equal(seen.authorization, "Bearer t0k");

	/* a larger body arrives in several chunks */
	memset(big, 'b', sizeof(big));
	assert_int_equal(fetch(&r, port, "POST", "/flush?", big, sizeof(big), NULL), CURLE_OK);
	assert_int_equal(r.status, 202);
	assert_string_equal(seen.query, "");
	assert_false(seen.query_null);
	assert_int_equal(atomic_load(&seen.flushes), 3);
}

static void test_handler_error(void **state)
{
	reply r;
	char v[256];

	get(&r, "GET", "/fail");
	assert_int_equal(r.status, 500);
	assert_string_equal(r.body, "disk on fire\n");
	assert_string_equal(header(&r, "Content-Type", v, sizeof(v)), "text/plain; charset=utf-8");
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *slow_client(void *arg)
{
	reply *r = arg;

	fetch(r, kiln_http_server_port(server), "GET", "/slow", NULL, 0, NULL);
	return NULL;
}

static void test_slow_handler(void **state)
{
	static reply slow;
	pthread_t t;
	reply r;
	double t0;

	atomic_store(&seen.slow_done, false);
	assert_int_equal(pthread_create(&t, NULL, slow_client, &slow), 0);
	usleep(100 * 1000);
	t0 = now_s();
	get(&r, "GET", "/metrics");
	assert_int_equal(r.status, 200);
	assert_true(now_s() - t0 < 0.5);
	assert_false(atomic_load(&seen.slow_done));
	pthread_join(t, NULL);
	assert_int_equal(slow.status, 200);
	assert_string_equal(slow.body, "slow");
}

static void test_stop_waits(void **state)
{
	static const kiln_http_route slow_only[] = {{"GET", "/slow", on_slow, NULL}};
	kiln_http_server *s, *saved = server;
	static reply slow;
	pthread_t t;

	assert_int_equal(kiln_http_server_start(&s, "localhost:0", slow_only, 1), 0);
	server = s; /* slow_client asks `server` */
	atomic_store(&seen.slow_done, false);
	assert_int_equal(pthread_create(&t, NULL, slow_client, &slow), 0);
	usleep(200 * 1000);
	kiln_http_server_stop(s);
	assert_true(atomic_load(&seen.slow_done));
	pthread_join(t, NULL);
	server = saved;
	kiln_http_server_stop(NULL);
}

static void test_port_in_use(void **state)
{
	kiln_http_server *s = (kiln_http_server *)1;
	char listen[64], expect[128];
	uint16_t port = kiln_http_server_port(server);

	snprintf(listen, sizeof(listen), "127.0.0.1:%u", (unsigned)port);
	assert_int_equal(kiln_http_server_start(&s, listen, routes, 1), KILN_EIO);
	assert_null(s);
	snprintf(expect, sizeof(expect), "%s: cannot listen: Address already in use", listen);
	assert_string_equal(kiln_error_last(), expect);
}

static void test_bad_listen(void **state)
{
	static const char *const bad[] = {"",
	                                  "9464",
	                                  ":9464",
	                                  "127.0.0.1:",
	                                  "127.0.0.1:x",
	                                  "127.0.0.1:65536",
	                                  "127.0.0.1:123456",
	                                  "1.2.3:80",
	                                  "example.com:80",
	                                  "::1:80",
	                                  "127.0.0.1:-1"};
	kiln_http_server *s;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(kiln_http_server_start(&s, bad[i], routes, 1), KILN_EINVALID);
		assert_null(s);
		assert_non_null(strstr(kiln_error_last(), "expected HOST:PORT"));
		assert_memory_equal(kiln_error_last(), bad[i], strlen(bad[i]));
	}
	/* an address this host does not have */
	assert_int_equal(kiln_http_server_start(&s, "192.0.2.1:0", routes, 1), KILN_EIO);
	assert_string_equal(kiln_error_last(), "192.0.2.1:0: cannot listen: Cannot assign requested address");
}

/* --- prefix routes, headers, file bodies -------------------------------- */

static char file_path[] = "/tmp/kiln-http-test-XXXXXX";
static char file_bytes[300000];

static int on_echo(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	const char *peer = kiln_http_request_header(req, "x-kiln-peer");
	const char *range = kiln_http_request_header(req, "Range");

	return kiln_buf_printf(&res->body, "%s %s %s peer=%s range=%s", (const char *)ctx, req->method,
	                       req->path, peer ? peer : "(none)", range ? range : "(none)");
}

/* Serves file_path: the whole file, or ?OFFSET,LENGTH of it. */
static int on_file(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	unsigned long long off = 0, len = sizeof(file_bytes);
	int rc;

	if (req->query && sscanf(req->query, "%llu,%llu", &off, &len) != 2)
		return kiln_error_set(KILN_EINVALID, "bad query");
	if ((res->fd = open(file_path, O_RDONLY | O_CLOEXEC)) < 0)
		return kiln_error_set(KILN_EIO, "cannot open");
	res->offset = off;
	res->length = len;
	res->content_type = "application/zstd";
	if ((rc = kiln_http_response_add_header(res, "ETag", "\"%s\"", "abc")) < 0 ||
	    (rc = kiln_http_response_add_header(res, "Accept-Ranges", "bytes")) < 0)
		return rc;
	if (req->query) {
		res->status = 206;
		return kiln_http_response_add_header(res, "Content-Range", "bytes %llu-%llu/%zu", off,
		                                     off + len - 1, sizeof(file_bytes));
	}
	return 0;
}

/* Opens the file, then fails: the server must still close it. */
static int on_file_fail(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	res->fd = open(file_path, O_RDONLY | O_CLOEXEC);
	return kiln_error_set(KILN_EIO, "gave up");
}

static const kiln_http_route more_routes[] = {
    {"GET", "/pre/*", on_echo, "pre"},
    {"GET", "/pre/exact", on_echo, "exact"},
    {"GET", "/pre/deeper/*", on_echo, "deeper"},
    {"*", "/any", on_echo, "any"},
    {"GET", "/file", on_file, NULL},
    {"GET", "/file-fail", on_file_fail, NULL},
};

/* How many descriptors of this process are open on file_path. */
static size_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	size_t n = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char link[300], target[256];
		ssize_t len;

		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		if (len > 0) {
			target[len] = '\0';
			n += strcmp(target, file_path) == 0;
		}
	}
	closedir(d);
	return n;
}

/* Waits up to 2 s for the descriptors open on the file to fall back to n
 * (the server closes it once the answer is out, maybe after the client has
 * it). */
static void expect_fds(size_t n)
{
	for (int i = 0; i < 200 && open_fds() != n; i++)
		usleep(10 * 1000);
	assert_int_equal(open_fds(), n);
}

static kiln_http_server *more_server(const kiln_http_server_options *o)
{
	kiln_http_server *s;

	assert_int_equal(kiln_http_server_start_ex(&s, "127.0.0.1:0", more_routes,
	                                           sizeof(more_routes) / sizeof(more_routes[0]), o),
	                 0);
	return s;
}

static void make_file(void)
{
	int fd;

	if (file_bytes[0])
		return;
	for (size_t i = 0; i < sizeof(file_bytes); i++)
		file_bytes[i] = (char)('a' + (i * 7 + i / 251) % 26);
	fd = mkstemp(file_path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, file_bytes, sizeof(file_bytes)), (ssize_t)sizeof(file_bytes));
	close(fd);
}

static void test_prefix_routes(void **state)
{
	kiln_http_server *s = more_server(NULL);
	uint16_t port = kiln_http_server_port(s);
	reply r;
	char v[256];

	assert_int_equal(fetch(&r, port, "GET", "/pre/", NULL, 0, NULL), CURLE_OK);
	assert_string_equal(r.body, "pre GET /pre/ peer=(none) range=(none)");
	assert_int_equal(fetch(&r, port, "GET", "/pre/a/b?x=1", NULL, 0, NULL), CURLE_OK);
	assert_string_equal(r.body, "pre GET /pre/a/b peer=(none) range=(none)");
	/* exact wins over the prefix; the longer prefix over the shorter */
	assert_int_equal(fetch(&r, port, "GET", "/pre/exact", NULL, 0, NULL), CURLE_OK);
	assert_string_equal(r.body, "exact GET /pre/exact peer=(none) range=(none)");
	assert_int_equal(fetch(&r, port, "GET", "/pre/exactly", NULL, 0, NULL), CURLE_OK);
	assert_string_equal(r.body, "pre GET /pre/exactly peer=(none) range=(none)");
	assert_int_equal(fetch(&r, port, "GET", "/pre/deeper/x", NULL, 0, NULL), CURLE_OK);
	assert_string_equal(r.body, "deeper GET /pre/deeper/x peer=(none) range=(none)");
	/* the path is decoded before matching */
	assert_int_equal(fetch(&r, port, "GET", "/pre%2Fdeeper%2Fy", NULL, 0, NULL), CURLE_OK);
	assert_string_equal(r.body, "deeper GET /pre/deeper/y peer=(none) range=(none)");
	assert_int_equal(fetch(&r, port, "GET", "/pre", NULL, 0, NULL), CURLE_OK);
	assert_int_equal(r.status, 404);
	assert_int_equal(fetch(&r, port, "POST", "/pre/a", NULL, 0, NULL), CURLE_OK);
	assert_int_equal(r.status, 405);
	assert_string_equal(header(&r, "Allow", v, sizeof(v)), "GET, HEAD");
	/* method "*" */
	assert_int_equal(fetch(&r, port, "DELETE", "/any", NULL, 0, NULL), CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "any DELETE /any peer=(none) range=(none)");
	/* %00 never reaches a handler */
	assert_int_equal(fetch(&r, port, "GET", "/pre/a%00b", NULL, 0, NULL), CURLE_OK);
	assert_int_equal(r.status, 400);
	kiln_http_server_stop(s);
}

static void test_request_headers(void **state)
{
	static const char *const extra[] = {"X-Kiln-Peer: node-2", "Range: bytes=1-2", NULL};
	kiln_http_server *s = more_server(NULL);
	reply r;

	assert_int_equal(fetch_ex(&r, kiln_http_server_port(s), "GET", "/pre/h", NULL, 0, NULL, extra),
	                 CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "pre GET /pre/h peer=node-2 range=bytes=1-2");
	kiln_http_server_stop(s);
}

static void test_add_header(void **state)
{
	kiln_http_response res = {.fd = -1};
	char big[KILN_HTTP_HEADER_VALUE_MAX + 1];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(kiln_http_response_add_header(&res, "Content-Length", "1"), KILN_EINVALID);
	assert_int_equal(kiln_http_response_add_header(&res, "date", "now"), KILN_EINVALID);
	assert_int_equal(kiln_http_response_add_header(&res, "X-A", "a\r\nX-Evil: 1"), KILN_EINVALID);
	assert_int_equal(kiln_http_response_add_header(&res, "X-A", "%s", big), KILN_ELIMIT);
	big[KILN_HTTP_HEADER_VALUE_MAX - 1] = '\0';
	assert_int_equal(kiln_http_response_add_header(&res, "X-A", "%s", big), 0);
	assert_int_equal(res.header_count, 1);
	for (int i = 1; i < KILN_HTTP_HEADERS_MAX; i++)
		assert_int_equal(kiln_http_response_add_header(&res, "X-N", "%d", i), 0);
	assert_int_equal(kiln_http_response_add_header(&res, "X-N", "one more"), KILN_ELIMIT);
	assert_int_equal(res.header_count, KILN_HTTP_HEADERS_MAX);
	assert_string_equal(res.headers[3].value, "3");
}

static void check_file_bodies(kiln_http_server *s)
{
	uint16_t port = kiln_http_server_port(s);
	static reply r; /* too big for a thread's stack */
	char v[256];
	size_t fds = open_fds();

	assert_int_equal(fds, 0);

	assert_int_equal(fetch(&r, port, "GET", "/file?0,8000", NULL, 0, NULL), CURLE_OK);
	assert_int_equal(r.status, 206);
	assert_int_equal(r.len, 8000);
	assert_memory_equal(r.body, file_bytes, 8000);
	assert_string_equal(header(&r, "Content-Range", v, sizeof(v)), "bytes 0-7999/300000");
	assert_string_equal(header(&r, "Content-Type", v, sizeof(v)), "application/zstd");
	assert_string_equal(header(&r, "ETag", v, sizeof(v)), "\"abc\"");
	assert_string_equal(header(&r, "Accept-Ranges", v, sizeof(v)), "bytes");
	assert_string_equal(header(&r, "Content-Length", v, sizeof(v)), "8000");

	assert_int_equal(fetch(&r, port, "GET", "/file?291807,8193", NULL, 0, NULL), CURLE_OK);
	assert_int_equal(r.status, 206);
	assert_int_equal(r.len, 8193);
	assert_memory_equal(r.body, file_bytes + 291807, 8193);

	assert_int_equal(fetch(&r, port, "GET", "/file?5,0", NULL, 0, NULL), CURLE_OK);
	assert_int_equal(r.len, 0);

	/* HEAD: the length of the whole body, no body */
	assert_int_equal(fetch(&r, port, "HEAD", "/file", NULL, 0, NULL), CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, 0);
	assert_string_equal(header(&r, "Content-Length", v, sizeof(v)), "300000");

	/* a failing handler's descriptor is closed too */
	assert_int_equal(fetch(&r, port, "GET", "/file-fail", NULL, 0, NULL), CURLE_OK);
	assert_int_equal(r.status, 500);
	assert_string_equal(r.body, "gave up\n");
	expect_fds(fds);
}

/* The whole file, read by a client in a thread (its body is bigger than a
 * reply). */
typedef struct counted {
	size_t base, got;
} counted;

/* Compares what arrives with file_bytes from c->base on. */
static size_t on_count(char *p, size_t size, size_t n, void *ud)
{
	counted *c = ud;
	size_t len = size * n;

	for (size_t i = 0; i < len; i++)
		if (c->base + c->got + i >= sizeof(file_bytes) || p[i] != file_bytes[c->base + c->got + i])
			return 0;
	c->got += len;
	return len;
}

/* GET target on s, its body compared with file_bytes from base; returns
 * the bytes that matched. */
static size_t get_counted(kiln_http_server *s, const char *target, size_t base)
{
	counted got = {base, 0};
	char url[128];
	CURL *c = curl_easy_init();

	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)kiln_http_server_port(s), target);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_count);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_cleanup(c);
	return got.got;
}

static void test_file_body(void **state)
{
	kiln_http_server *s;

	make_file();
	s = more_server(NULL);
	check_file_bodies(s);
	/* past the in-memory size: sendfile, whole and from an offset */
	assert_int_equal(get_counted(s, "/file", 0), sizeof(file_bytes));
	assert_int_equal(get_counted(s, "/file?100001,150000", 100001), 150000);
	assert_int_equal(get_counted(s, "/file?16383,16385", 16383), 16385);
	kiln_http_server_stop(s);
}

/* --- event loop ----------------------------------------------------------- */

static struct {
	_Atomic int answered[600];
	_Atomic uint64_t bytes;
	_Atomic int blocking_calls, fast_calls;
} loop_seen;

static void on_answered(void *ctx, const char *route, int status, uint64_t body_bytes)
{
	assert_true(status >= 100 && status < 600);
	if (status == 404)
		assert_null(route);
	else
		assert_non_null(route);
	if (status == 201)
		assert_string_equal(route, "/slow");
	atomic_fetch_add(&loop_seen.answered[status], 1);
	atomic_fetch_add(&loop_seen.bytes, body_bytes);
}

/* Answers at once on the event loop, sleeps on a worker. */
static int on_maybe_slow(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	if (!req->can_block) {
		kiln_buf_puts(&res->body, "dropped");
		return KILN_HTTP_BLOCKING;
	}
	atomic_fetch_add(&loop_seen.blocking_calls, 1);
	usleep(700 * 1000);
	atomic_store(&seen.slow_done, true);
	res->status = 201;
	kiln_http_response_add_header(res, "X-Worker", "yes");
	return kiln_buf_printf(&res->body, "slow %s", req->query ? req->query : "");
}

static int on_fast(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	assert_false(req->can_block);
	atomic_fetch_add(&loop_seen.fast_calls, 1);
	return kiln_buf_puts(&res->body, "fast");
}

/* Asks to block where it already may: a programming error, a 500. */
static int on_always_blocking(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	return KILN_HTTP_BLOCKING;
}

static const kiln_http_route loop_routes[] = {
    {"GET", "/slow", on_maybe_slow, NULL},
    {"GET", "/fast", on_fast, NULL},
    {"GET", "/file", on_file, NULL},
    {"GET", "/file-fail", on_file_fail, NULL},
    {"GET", "/always", on_always_blocking, NULL},
};

static kiln_http_server *loop_server(unsigned threads, unsigned workers, unsigned limit)
{
	kiln_http_server_options o = {.mode = KILN_HTTP_EVENT_LOOP,
	                              .threads = threads,
	                              .workers = workers,
	                              .connection_limit = limit,
	                              .on_answered = on_answered};
	kiln_http_server *s;

	assert_int_equal(kiln_http_server_start_ex(&s, "127.0.0.1:0", loop_routes,
	                                           sizeof(loop_routes) / sizeof(loop_routes[0]), &o),
	                 0);
	return s;
}

static void test_event_loop(void **state)
{
	kiln_http_server *saved = server, *s;
	static reply slow;
	pthread_t t;
	reply r;
	char v[64];
	double t0;

	make_file();
	memset(&loop_seen, 0, sizeof(loop_seen));
	/* one event-loop thread: a blocking call must not hold it */
	server = s = loop_server(1, 2, 0);
	atomic_store(&seen.slow_done, false);
	assert_int_equal(pthread_create(&t, NULL, slow_client, &slow), 0);
	usleep(100 * 1000);
	t0 = now_s();
	get(&r, "GET", "/fast");
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "fast");
	assert_true(now_s() - t0 < 0.5);
	assert_false(atomic_load(&seen.slow_done));
	pthread_join(t, NULL);
	assert_int_equal(slow.status, 201);
	assert_string_equal(slow.body, "slow ");
	assert_string_equal(header(&slow, "X-Worker", v, sizeof(v)), "yes");
	assert_int_equal(atomic_load(&loop_seen.blocking_calls), 1);

	get(&r, "HEAD", "/slow");
	assert_int_equal(r.status, 201);
	assert_int_equal(r.len, 0);
	assert_string_equal(header(&r, "Content-Length", v, sizeof(v)), "5");

	check_file_bodies(s);

	get(&r, "GET", "/always");
	assert_int_equal(r.status, 500);
	assert_non_null(strstr(r.body, "where it may block"));
	get(&r, "GET", "/nope");
	assert_int_equal(r.status, 404);

	/* the counts come from the completion hook, maybe after the reply */
	for (int i = 0; i < 200 && atomic_load(&loop_seen.answered[404]) == 0; i++)
		usleep(10 * 1000);
	assert_int_equal(atomic_load(&loop_seen.answered[200]), 2); /* /fast, HEAD /file */
	assert_int_equal(atomic_load(&loop_seen.answered[201]), 2); /* /slow, HEAD /slow */
	assert_int_equal(atomic_load(&loop_seen.answered[206]), 3);
	assert_int_equal(atomic_load(&loop_seen.answered[500]), 2);
	assert_int_equal(atomic_load(&loop_seen.answered[404]), 1);
	/* 4 + 5 + 8000 + 8193 + 0 + 8 + the 500's message + 10: HEAD counts no bytes */
	assert_true(atomic_load(&loop_seen.bytes) > 16220 && atomic_load(&loop_seen.bytes) < 16400);
	/* sendfile from the event loop */
	assert_int_equal(get_counted(s, "/file?1,299999", 1), 299999);
	kiln_http_server_stop(s);
	server = saved;
}

static uint16_t slow_port;

static void *slow_client_q(void *arg)
{
	reply *r = arg;

	fetch(r, slow_port, "GET", "/slow?q", NULL, 0, NULL);
	return NULL;
}

/* Stopping with calls queued and running: each is answered first. */
static void test_event_loop_stop(void **state)
{
	kiln_http_server *s;
	static reply slow[3];
	pthread_t t[3];

	memset(&loop_seen, 0, sizeof(loop_seen));
	s = loop_server(2, 2, 0); /* two workers: one call waits in the queue */
	slow_port = kiln_http_server_port(s);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&t[i], NULL, slow_client_q, &slow[i]), 0);
	usleep(300 * 1000);
	kiln_http_server_stop(s);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&loop_seen.blocking_calls), 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(slow[i].status, 201);
		assert_string_equal(slow[i].body, "slow q");
	}
	/* stopped: nothing listens */
	assert_int_equal(fetch(&slow[0], slow_port, "GET", "/fast", NULL, 0, NULL), CURLE_COULDNT_CONNECT);
}

static int connect_to(uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void test_connection_limit(void **state)
{
	kiln_http_server *s = loop_server(1, 1, 2);
	uint16_t port = kiln_http_server_port(s);
	int a = connect_to(port), b = connect_to(port);
	reply r;

	usleep(100 * 1000);
	/* two idle connections take the limit: a third waits, unanswered */
	fetch_timeout_ms = 500;
	assert_int_equal(fetch(&r, port, "GET", "/fast", NULL, 0, NULL), CURLE_OPERATION_TIMEDOUT);
	fetch_timeout_ms = 10000;
	close(a);
	usleep(100 * 1000);
	assert_int_equal(fetch(&r, port, "GET", "/fast", NULL, 0, NULL), CURLE_OK);
	assert_int_equal(r.status, 200);
	close(b);
	kiln_http_server_stop(s);
}

/* --- slowloris ------------------------------------------------------------ */

#define SLOW_HEAD "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "

/* n connections from 127.0.0.1 (the default source) that each sent part
 * of a request head; their descriptors into fds. */
static void open_trickling(int *fds, size_t n, uint16_t port)
{
	for (size_t i = 0; i < n; i++) {
		fds[i] = connect_to(port);
		/* a connection the server accepted and closed at once may refuse it */
		(void)!send(fds[i], SLOW_HEAD, strlen(SLOW_HEAD), MSG_NOSIGNAL);
	}
}

/* /healthz from another address (127.0.0.2: all of 127/8 is loopback)
 * while one address holds more connections than the server has slots. */
static void healthz_under_attack(kiln_http_server *s, size_t attackers)
{
	uint16_t port = kiln_http_server_port(s);
	int *fds = calloc(attackers, sizeof(*fds));
	reply r;

	assert_non_null(fds);
	open_trickling(fds, attackers, port);
	fetch_from = "127.0.0.2";
	assert_int_equal(fetch(&r, port, "GET", "/healthz", NULL, 0, NULL), CURLE_OK);
	fetch_from = NULL;
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "ok");
	for (size_t i = 0; i < attackers; i++)
		close(fds[i]);
	free(fds);
}

/* The metrics server's settings (kiln_http_server_start): more attackers
 * than its connection slots. */
static void test_slowloris_thread_per_connection(void **state)
{
	kiln_http_server *s;

	assert_int_equal(kiln_http_server_start(&s, "127.0.0.1:0", routes, 1), 0);
	healthz_under_attack(s, 300);
	kiln_http_server_stop(s);
}

static void test_slowloris_event_loop(void **state)
{
	kiln_http_server_options o = {.mode = KILN_HTTP_EVENT_LOOP,
	                              .threads = 2,
	                              .workers = 1,
	                              .connection_limit = 32,
	                              .per_address_limit = 8};
	kiln_http_server *s;

	assert_int_equal(kiln_http_server_start_ex(&s, "127.0.0.1:0", routes, 1, &o), 0);
	healthz_under_attack(s, 100);
	kiln_http_server_stop(s);
}

/* Sends a header byte every 100 ms (the idle timeout never fires) until
 * the server closes the connection; false when it is still open after
 * `bytes` bytes. */
static bool trickle_until_closed(uint16_t port, unsigned bytes)
{
	int fd = connect_to(port);
	bool closed = false;

	assert_int_equal(send(fd, SLOW_HEAD, strlen(SLOW_HEAD), MSG_NOSIGNAL), (ssize_t)strlen(SLOW_HEAD));
	for (unsigned i = 0; i < bytes && !closed; i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		char c;

		if (poll(&p, 1, 100) > 0) {
			closed = recv(fd, &c, 1, 0) <= 0; /* the end, or a reset */
			assert_true(closed);              /* no answer to half a head */
		} else if (send(fd, "a", 1, MSG_NOSIGNAL) != 1) {
			closed = true;
		}
	}
	close(fd);
	return closed;
}

static void test_head_deadline(void **state)
{
	for (int mode = 0; mode < 2; mode++) {
		kiln_http_server_options o = {.mode = mode ? KILN_HTTP_EVENT_LOOP
		                                           : KILN_HTTP_THREAD_PER_CONNECTION,
		                              .threads = 1,
		                              .workers = 1,
		                              .idle_timeout_s = 120,
		                              .head_timeout_s = 1};
		kiln_http_server *s;
		reply r;

		assert_int_equal(kiln_http_server_start_ex(&s, "127.0.0.1:0", routes, 1, &o), 0);
		/* closed within about a second; 300 bytes take 30 s and more */
		assert_true(trickle_until_closed(kiln_http_server_port(s), 300));
		/* a request sent whole is still answered */
		assert_int_equal(fetch(&r, kiln_http_server_port(s), "GET", "/healthz", NULL, 0, NULL),
		                 CURLE_OK);
		assert_int_equal(r.status, 200);
		kiln_http_server_stop(s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_healthz),
	    cmocka_unit_test(test_metrics),
	    cmocka_unit_test(test_not_found_and_not_allowed),
	    cmocka_unit_test(test_post),
	    cmocka_unit_test(test_handler_error),
	    cmocka_unit_test(test_slow_handler),
	    cmocka_unit_test(test_stop_waits),
	    cmocka_unit_test(test_port_in_use),
	    cmocka_unit_test(test_bad_listen),
	    cmocka_unit_test(test_prefix_routes),
	    cmocka_unit_test(test_request_headers),
	    cmocka_unit_test(test_add_header),
	    cmocka_unit_test(test_file_body),
	    cmocka_unit_test(test_event_loop),
	    cmocka_unit_test(test_event_loop_stop),
	    cmocka_unit_test(test_connection_limit),
	    cmocka_unit_test(test_slowloris_thread_per_connection),
	    cmocka_unit_test(test_slowloris_event_loop),
	    cmocka_unit_test(test_head_deadline),
	};
	int rc;

	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = cmocka_run_group_tests(tests, setup, teardown);
	curl_global_cleanup();
	if (file_bytes[0])
		unlink(file_path);
	return rc;
}
