/* Unit tests for the HTTP server (src/core/http_server.c), driven by libcurl
 * in the same process: GET, HEAD, POST with and without a body, query and
 * Authorization, 404, 405 and its Allow header, a failing handler, a slow
 * handler that does not hold up others, stop waiting for handlers, port 0,
 * a port already taken and bad listen addresses. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <pthread.h>
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
	char body[8192];
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

/* method "HEAD" uses CURLOPT_NOBODY; body non-NULL sends it. Returns the
 * curl result; the reply in *r. */
static CURLcode fetch(reply *r, uint16_t port, const char *method, const char *target, const char *body,
                      size_t body_len, const char *auth)
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
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
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
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	}
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	return cc;
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
	};
	int rc;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = cmocka_run_group_tests(tests, setup, teardown);
	curl_global_cleanup();
	return rc;
}
