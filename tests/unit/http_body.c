/* Unit tests for request bodies kept by the HTTP server
 * (kiln_http_server_options.body_max, src/core/http_server.c), driven by
 * libcurl in the same process: an empty body, a small one, one in many
 * chunks (kept byte-exact), one announced over the limit (answered before
 * it is read), one sent chunked past the limit (too large, the rest
 * dropped); a server without body_max hands the handler no body; in both
 * threading modes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/http_server.h"

#define LIMIT 100000

/* Answers "LEN SUM" (the body's length and byte sum), or 413 when too large. */
static int on_body(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	unsigned long long sum = 0;

	(void)ctx;
	if (req->body_too_large) {
		res->status = 413;
		return kiln_buf_puts(&res->body, "too large");
	}
	if (!req->body)
		return kiln_buf_printf(&res->body, "none %zu", req->body_len);
	for (size_t i = 0; i < req->body_len; i++)
		sum += (unsigned char)req->body[i];
	return kiln_buf_printf(&res->body, "%zu %llu", req->body_len, sum);
}

typedef struct reply {
	long status;
	char body[256];
	size_t len;
} reply;

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
	reply *r = ud;
	size_t len = size * n;

	if (r->len + len < sizeof(r->body)) {
		memcpy(r->body + r->len, p, len);
		r->len += len;
		r->body[r->len] = '\0';
	}
	return len;
}

struct upload {
	const char *data;
	size_t len, at;
};

static size_t on_read(char *p, size_t size, size_t n, void *ud)
{
	struct upload *u = ud;
	size_t len = size * n < u->len - u->at ? size * n : u->len - u->at;

	memcpy(p, u->data + u->at, len);
	u->at += len;
	return len;
}

/* POSTs body (chunked: without a Content-Length); the curl result. */
static CURLcode post(reply *r, uint16_t port, const char *body, size_t len, bool chunked)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	struct upload u = {body, len, 0};
	char url[128];
	CURLcode cc;

	assert_non_null(c);
	memset(r, 0, sizeof(*r));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/in", (unsigned)port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (chunked) {
		hdrs = curl_slist_append(hdrs, "Transfer-Encoding: chunked");
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, &u);
	} else {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	return cc;
}

static void expect_kept(uint16_t port, const char *body, size_t len, bool chunked)
{
	unsigned long long sum = 0;
	char want[64];
	reply r;

	for (size_t i = 0; i < len; i++)
		sum += (unsigned char)body[i];
	snprintf(want, sizeof(want), "%zu %llu", len, sum);
	if (len == 0)
		snprintf(want, sizeof(want), "none 0");
	assert_int_equal(post(&r, port, body, len, chunked), CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, want);
}

static void run_mode(kiln_http_mode mode)
{
	static const kiln_http_route routes[] = {{"POST", "/in", on_body, NULL}};
	kiln_http_server_options opts = {.mode = mode, .threads = 2, .workers = 2, .body_max = LIMIT};
	static char big[LIMIT + 50000];
	kiln_http_server *s;
	uint16_t port;
	reply r;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + i % 26);
	assert_int_equal(kiln_http_server_start_ex(&s, "127.0.0.1:0", routes, 1, &opts), 0);
	port = kiln_http_server_port(s);

	expect_kept(port, NULL, 0, false);
	expect_kept(port, "{\"x\":1}\n", 8, false);
	expect_kept(port, big, LIMIT, false); /* many chunks, the limit itself */
	expect_kept(port, big + 7, 70000, true);

	/* announced over the limit: answered before the body is read */
	assert_int_equal(post(&r, port, big, LIMIT + 1, false), CURLE_OK);
	assert_int_equal(r.status, 413);
	/* chunked past the limit: too large once the bytes pass it */
	assert_int_equal(post(&r, port, big, sizeof(big), true), CURLE_OK);
	assert_int_equal(r.status, 413);
	/* the server still answers */
	expect_kept(port, "a\nb", 3, false);
	kiln_http_server_stop(s);

	/* without body_max the handler gets no body */
	opts.body_max = 0;
	assert_int_equal(kiln_http_server_start_ex(&s, "127.0.0.1:0", routes, 1, &opts), 0);
	assert_int_equal(post(&r, kiln_http_server_port(s), "{\"x\":1}\n", 8, false), CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "none 0");
	kiln_http_server_stop(s);
}

static void test_thread_per_connection(void **state)
{
	(void)state;
	run_mode(KILN_HTTP_THREAD_PER_CONNECTION);
}

static void test_event_loop(void **state)
{
	(void)state;
	run_mode(KILN_HTTP_EVENT_LOOP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_thread_per_connection),
	    cmocka_unit_test(test_event_loop),
	};

	curl_global_init(CURL_GLOBAL_DEFAULT);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
