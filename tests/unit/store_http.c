/* The http:// store (a cache node) against a tiny server in the test
 * (src/core/http_server.h, one route per shard hash): get streams a small
 * and a multi-chunk object, stat is HEAD (size, 404 = absent), 5xx answers
 * and refused connections are retried then KILN_ERETRY, a flaky node
 * succeeds after retries, the bearer token from KILN_CACHE_TOKEN (401
 * without or with a wrong one, never in a message), a sink that stops,
 * keys that are not shards, read-only calls and bad URLs; and, against a
 * raw socket server that cuts a body short, the get that resumes with a
 * Range request (answered 206, or 200 with the whole object again). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "core/error.h"
#include "core/http_server.h"
#include "store/store.h"

#define H_SMALL "aa00000000000000000000000000000000000000000000000000000000000001"
#define H_LARGE "bb00000000000000000000000000000000000000000000000000000000000002"
#define H_FAIL  "cc00000000000000000000000000000000000000000000000000000000000003"
#define H_FLAKY "dd00000000000000000000000000000000000000000000000000000000000004"
#define H_AUTH  "ee00000000000000000000000000000000000000000000000000000000000005"
#define H_NONE  "ff00000000000000000000000000000000000000000000000000000000000006"

#define TOKEN     "s3cret-t0ken"
#define LARGE_LEN (3u << 20)

static char *large;
static kiln_http_server *server;
static char base[64];
static _Atomic int fail_calls, flaky_calls;

static char key_buf[6][100];

/* "shards/<hh>/<hash>.jsonl.zst" for a hash */
static const char *key_of(int slot, const char *hash)
{
	snprintf(key_buf[slot], sizeof(key_buf[slot]), "shards/%.2s/%s.jsonl.zst", hash, hash);
	return key_buf[slot];
}

static int on_small(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	(void)ctx;
	(void)req;
	res->content_type = "application/zstd";
	return kiln_buf_puts(&res->body, "small shard bytes\n");
}

static int on_large(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	(void)ctx;
	(void)req;
	return kiln_buf_put(&res->body, large, LARGE_LEN);
}

static int on_fail(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	(void)ctx;
	(void)req;
	atomic_fetch_add(&fail_calls, 1);
	res->status = 500;
	return kiln_buf_puts(&res->body, "origin unreachable");
}

static int on_flaky(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	(void)ctx;
	(void)req;
	if (atomic_fetch_add(&flaky_calls, 1) < 2) {
		res->status = 503;
		return kiln_buf_puts(&res->body, "busy");
	}
	return kiln_buf_puts(&res->body, "flaky but fine");
}

static int on_auth(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	(void)ctx;
	if (!req->authorization || strcmp(req->authorization, "Bearer " TOKEN) != 0) {
		res->status = 401;
		return kiln_buf_puts(&res->body, "unauthorized");
	}
	return kiln_buf_puts(&res->body, "secret shard");
}

static const kiln_http_route routes[] = {
    {"GET", "/v1/shards/" H_SMALL, on_small, NULL}, {"GET", "/v1/shards/" H_LARGE, on_large, NULL},
    {"GET", "/v1/shards/" H_FAIL, on_fail, NULL},   {"GET", "/v1/shards/" H_FLAKY, on_flaky, NULL},
    {"GET", "/v1/shards/" H_AUTH, on_auth, NULL},
};

typedef struct collected {
	char *data;
	size_t len, cap;
	int calls;
	int stop_after; /* > 0: the sink returns 42 on this call */
} collected;

static int sink(void *ctx, const void *data, size_t len)
{
	collected *c = ctx;

	c->calls++;
	if (c->stop_after > 0 && c->calls == c->stop_after)
		return 42;
	if (c->len + len > c->cap) {
		c->cap = (c->len + len) * 2;
		c->data = realloc(c->data, c->cap);
		assert_non_null(c->data);
	}
	memcpy(c->data + c->len, data, len);
	c->len += len;
	return 0;
}

static kiln_store *open_store(const char *url, int retries)
{
	kiln_store_options opt = {.max_retries = retries};
	kiln_store *s = NULL;

	assert_int_equal(kiln_store_open(&s, url, &opt), 0);
	return s;
}

static int group_setup(void **state)
{
	(void)state;
	unsetenv("http_proxy");
	unsetenv("HTTP_PROXY");
	unsetenv("all_proxy");
	unsetenv("ALL_PROXY");
	unsetenv("KILN_CACHE_TOKEN");
	large = malloc(LARGE_LEN);
	assert_non_null(large);
	for (size_t i = 0; i < LARGE_LEN; i++)
		large[i] = (char)(i * 7 + i / 4096);
	assert_int_equal(
	    kiln_http_server_start(&server, "127.0.0.1:0", routes, sizeof(routes) / sizeof(routes[0])), 0);
	snprintf(base, sizeof(base), "http://127.0.0.1:%u", (unsigned)kiln_http_server_port(server));
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	kiln_http_server_stop(server);
	free(large);
	return 0;
}

static void test_get_small(void **state)
{
	kiln_store *s = open_store(base, 0);
	collected c = {0};

	(void)state;
	assert_int_equal(kiln_store_get(s, key_of(0, H_SMALL), sink, &c), 0);
	assert_int_equal(c.len, strlen("small shard bytes\n"));
	assert_memory_equal(c.data, "small shard bytes\n", c.len);
	free(c.data);
	kiln_store_close(s);
}

static void test_get_large_in_chunks(void **state)
{
	char url[80];
	kiln_store *s;
	collected c = {0};

	(void)state;
	snprintf(url, sizeof(url), "%s/", base); /* a trailing '/' is fine */
	s = open_store(url, 0);
	assert_int_equal(kiln_store_get(s, key_of(0, H_LARGE), sink, &c), 0);
	assert_int_equal(c.len, LARGE_LEN);
	assert_memory_equal(c.data, large, LARGE_LEN);
	assert_true(c.calls > 1);
	/* again on the pooled handle */
	c.len = 0;
	assert_int_equal(kiln_store_get(s, key_of(0, H_LARGE), sink, &c), 0);
	assert_int_equal(c.len, LARGE_LEN);
	free(c.data);
	kiln_store_close(s);
}

static void test_stat(void **state)
{
	kiln_store *s = open_store(base, 0);
	uint64_t size = 0;

	(void)state;
	assert_int_equal(kiln_store_stat(s, key_of(0, H_LARGE), &size), 1);
	assert_int_equal(size, LARGE_LEN);
	assert_int_equal(kiln_store_stat(s, key_of(0, H_SMALL), NULL), 1);
	assert_int_equal(kiln_store_stat(s, key_of(0, H_NONE), &size), 0);
	kiln_store_close(s);
}

static void test_get_missing(void **state)
{
	kiln_store *s = open_store(base, 0);
	collected c = {0};

	(void)state;
	assert_int_equal(kiln_store_get(s, key_of(0, H_NONE), sink, &c), KILN_ENOTFOUND);
	assert_int_equal(c.len, 0); /* the 404 page never reaches the sink */
	assert_non_null(strstr(kiln_error_last(), "/v1/shards/" H_NONE));
	assert_non_null(strstr(kiln_error_last(), "404"));
	kiln_store_close(s);
}

static void test_500_retried_then_eretry(void **state)
{
	kiln_store *s = open_store(base, 2);
	collected c = {0};
	uint64_t size;

	(void)state;
	atomic_store(&fail_calls, 0);
	assert_int_equal(kiln_store_get(s, key_of(0, H_FAIL), sink, &c), KILN_ERETRY);
	assert_int_equal(atomic_load(&fail_calls), 3);
	assert_int_equal(c.len, 0);
	assert_non_null(strstr(kiln_error_last(), base));
	assert_non_null(strstr(kiln_error_last(), key_of(0, H_FAIL)));
	assert_non_null(strstr(kiln_error_last(), "HTTP 500"));
	assert_non_null(strstr(kiln_error_last(), "3 attempts"));
	atomic_store(&fail_calls, 0);
	assert_int_equal(kiln_store_stat(s, key_of(0, H_FAIL), &size), KILN_ERETRY);
	assert_int_equal(atomic_load(&fail_calls), 3);
	kiln_store_close(s);
}

static void test_flaky_succeeds(void **state)
{
	kiln_store *s = open_store(base, 3);
	collected c = {0};

	(void)state;
	atomic_store(&flaky_calls, 0);
	assert_int_equal(kiln_store_get(s, key_of(0, H_FLAKY), sink, &c), 0);
	assert_int_equal(atomic_load(&flaky_calls), 3);
	assert_int_equal(c.len, strlen("flaky but fine"));
	assert_memory_equal(c.data, "flaky but fine", c.len);
	free(c.data);
	kiln_store_close(s);
}

static void test_connection_refused(void **state)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char url[64];
	kiln_store *s;
	collected c = {0};

	(void)state;
	/* a port bound but not listening refuses connections */
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
	s = open_store(url, 1);
	assert_int_equal(kiln_store_get(s, key_of(0, H_SMALL), sink, &c), KILN_ERETRY);
	assert_non_null(strstr(kiln_error_last(), url));
	assert_non_null(strstr(kiln_error_last(), "2 attempts"));
	kiln_store_close(s);
	close(fd);
}

static void test_token(void **state)
{
	kiln_store *s;
	collected c = {0};

	(void)state;
	/* no token */
	s = open_store(base, 0);
	assert_int_equal(kiln_store_get(s, key_of(0, H_AUTH), sink, &c), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "401"));
	assert_non_null(strstr(kiln_error_last(), "KILN_CACHE_TOKEN"));
	assert_int_equal(c.len, 0);
	kiln_store_close(s);
	/* a wrong one: refused, and not in the message */
	setenv("KILN_CACHE_TOKEN", "wr0ng-t0ken", 1);
	s = open_store(base, 0);
	assert_int_equal(kiln_store_get(s, key_of(0, H_AUTH), sink, &c), KILN_EINVALID);
	assert_null(strstr(kiln_error_last(), "wr0ng"));
	assert_int_equal(c.len, 0);
	kiln_store_close(s);
	/* the right one */
	setenv("KILN_CACHE_TOKEN", TOKEN, 1);
	s = open_store(base, 0);
	assert_int_equal(kiln_store_get(s, key_of(0, H_AUTH), sink, &c), 0);
	assert_int_equal(c.len, strlen("secret shard"));
	assert_int_equal(kiln_store_stat(s, key_of(0, H_AUTH), NULL), 1);
	/* other shards take the header too */
	assert_int_equal(kiln_store_stat(s, key_of(0, H_SMALL), NULL), 1);
	kiln_store_close(s);
	/* a token with a newline could inject a header */
	setenv("KILN_CACHE_TOKEN", "abc\r\nX-Evil: 1", 1);
	assert_int_equal(kiln_store_open(&s, base, NULL), KILN_EINVALID);
	assert_null(s);
	assert_null(strstr(kiln_error_last(), "abc"));
	unsetenv("KILN_CACHE_TOKEN");
	free(c.data);
}

static void test_sink_stops(void **state)
{
	kiln_store *s = open_store(base, 3);
	collected c = {.stop_after = 2};

	(void)state;
	assert_int_equal(kiln_store_get(s, key_of(0, H_LARGE), sink, &c), 42);
	assert_int_equal(c.calls, 2);
	free(c.data);
	kiln_store_close(s);
}

static void test_keys_that_are_not_shards(void **state)
{
	kiln_store *s = open_store(base, 0);
	collected c = {0};
	static const char *const keys[] = {
	    "quarantine/user-events/0/1-2.jsonl.zst",
	    "shards/ab/" H_SMALL ".jsonl.zst", /* <hh> is not the hash's start */
	    "shards/AA/AA00000000000000000000000000000000000000000000000000000000000001.jsonl.zst",
	    "shards/aa/aa0000000000000000000000000000000000000000000000000000000000001.jsonl.zst",
	    "shards/aa/" H_SMALL ".jsonl",
	    "shards/aa/" H_SMALL ".jsonl.zst.x",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		assert_int_equal(kiln_store_get(s, keys[i], sink, &c), KILN_ENOTFOUND);
		assert_non_null(strstr(kiln_error_last(), "only shards/"));
		assert_int_equal(kiln_store_stat(s, keys[i], NULL), 0);
	}
	assert_int_equal(c.calls, 0);
	/* the front end's key check still comes first */
	assert_int_equal(kiln_store_get(s, "shards/../x", sink, &c), KILN_EINVALID);
	kiln_store_close(s);
}

static int key_cb(void *ctx, const char *key, uint64_t size, int64_t mtime)
{
	(void)ctx;
	(void)mtime;
	(void)key;
	(void)size;
	return 0;
}

static void test_read_only(void **state)
{
	kiln_store *s = open_store(base, 0);

	(void)state;
	assert_int_equal(kiln_store_put_file(s, key_of(0, H_SMALL), "/etc/hostname", 1), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "a cache node is read-only"));
	assert_non_null(strstr(kiln_error_last(), base));
	assert_int_equal(kiln_store_remove(s, key_of(0, H_SMALL)), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "a cache node is read-only"));
	assert_int_equal(kiln_store_list(s, "shards/", key_cb, NULL), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "a cache node is read-only"));
	kiln_store_close(s);
}

static void test_bad_urls(void **state)
{
	static const char *const bad[] = {
	    "http://",     "http:///x",       "http://:80", "http://h/?q=1",
	    "http://h/#f", "http://h/%2e%2e", "http://h w", "http://user:pw@h:1",
	};
	kiln_store *s;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(kiln_store_open(&s, bad[i], NULL), KILN_EINVALID);
		assert_null(s);
	}
	assert_null(strstr(kiln_error_last(), "pw"));
	/* https opens (no request yet) */
	assert_int_equal(kiln_store_open(&s, "https://cache.example:9470", NULL), 0);
	kiln_store_close(s);
}

/* --- a raw server: answers connection i with replies[i], then closes it -- */

typedef struct raw_server {
	int fd;
	uint16_t port;
	const char *replies[4];
	size_t reply_len[4];
	int n;
	char requests[4][1024]; /* what each connection sent */
	pthread_t thread;
} raw_server;

static void *raw_serve(void *arg)
{
	raw_server *r = arg;

	for (int i = 0; i < r->n; i++) {
		int c = accept(r->fd, NULL, NULL);
		size_t len = 0;

		if (c < 0)
			break;
		while (len + 1 < sizeof(r->requests[i]) && !strstr(r->requests[i], "\r\n\r\n")) {
			ssize_t k = read(c, r->requests[i] + len, sizeof(r->requests[i]) - 1 - len);

			if (k <= 0)
				break;
			len += (size_t)k;
			r->requests[i][len] = '\0';
		}
		(void)!write(c, r->replies[i], r->reply_len[i]);
		close(c);
	}
	return NULL;
}

static void raw_start(raw_server *r)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);

	r->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(r->fd >= 0);
	assert_int_equal(bind(r->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(r->fd, 8), 0);
	assert_int_equal(getsockname(r->fd, (struct sockaddr *)&a, &alen), 0);
	r->port = ntohs(a.sin_port);
	for (int i = 0; i < r->n; i++)
		r->reply_len[i] = strlen(r->replies[i]);
	assert_int_equal(pthread_create(&r->thread, NULL, raw_serve, r), 0);
}

static void raw_stop(raw_server *r)
{
	pthread_join(r->thread, NULL);
	close(r->fd);
}

static void resume_case(const char *second, const char *want_range)
{
	raw_server r = {
	    .n = 2,
	    .replies = {"HTTP/1.1 200 OK\r\nContent-Length: 20\r\nConnection: close\r\n\r\n0123456789",
	                second}};
	collected c = {0};
	char url[64];
	kiln_store *s;

	raw_start(&r);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)r.port);
	s = open_store(url, 2);
	assert_int_equal(kiln_store_get(s, key_of(0, H_SMALL), sink, &c), 0);
	raw_stop(&r);
	assert_int_equal(c.len, 20);
	assert_memory_equal(c.data, "0123456789abcdefghij", 20);
	assert_non_null(strstr(r.requests[0], "GET /v1/shards/" H_SMALL " HTTP/1.1\r\n"));
	assert_null(strstr(r.requests[0], "Range:"));
	assert_non_null(strstr(r.requests[1], want_range));
	free(c.data);
	kiln_store_close(s);
}

static void test_cut_short_resumes_with_range(void **state)
{
	(void)state;
	resume_case("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 10-19/20\r\nContent-Length: 10\r\n"
	            "Connection: close\r\n\r\nabcdefghij",
	            "Range: bytes=10-\r\n");
}

static void test_cut_short_then_whole_object(void **state)
{
	(void)state;
	/* a server that ignores Range sends it all again: the sink gets no byte twice */
	resume_case("HTTP/1.1 200 OK\r\nContent-Length: 20\r\nConnection: close\r\n\r\n0123456789abcdefghij",
	            "Range: bytes=10-\r\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_get_small),
	    cmocka_unit_test(test_get_large_in_chunks),
	    cmocka_unit_test(test_stat),
	    cmocka_unit_test(test_get_missing),
	    cmocka_unit_test(test_500_retried_then_eretry),
	    cmocka_unit_test(test_flaky_succeeds),
	    cmocka_unit_test(test_connection_refused),
	    cmocka_unit_test(test_token),
	    cmocka_unit_test(test_sink_stops),
	    cmocka_unit_test(test_keys_that_are_not_shards),
	    cmocka_unit_test(test_read_only),
	    cmocka_unit_test(test_bad_urls),
	    cmocka_unit_test(test_cut_short_resumes_with_range),
	    cmocka_unit_test(test_cut_short_then_whole_object),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
