/* Unit test for the HTTP server's libmicrohttpd logger
 * (src/core/http_server.c): at debug level, starting and stopping a server
 * in either mode logs no complaint from libmicrohttpd (it names an option
 * given in the wrong place, "MHD_OPTION_EXTERNAL_LOGGER is not the first
 * option specified"). stderr goes to a file for the test's length. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/http_server.h"
#include "core/log.h"

static int on_healthz(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	(void)ctx;
	(void)req;
	return kiln_buf_puts(&res->body, "ok");
}

/* Starts and stops a server in `mode` with stderr in a file; returns what was logged. */
static char *logged_by_server(kiln_http_mode mode)
{
	const kiln_http_route routes[] = {{"GET", "/healthz", on_healthz, NULL}};
	kiln_http_server_options o = {.mode = mode};
	kiln_http_server *s = NULL;
	FILE *log = tmpfile();
	int saved = dup(STDERR_FILENO);
	char *text;
	long n;

	assert_non_null(log);
	assert_true(saved >= 0);
	fflush(stderr);
	assert_true(dup2(fileno(log), STDERR_FILENO) >= 0);
	kiln_log_setup(false, KILN_LOG_DEBUG);
	assert_int_equal(kiln_http_server_start_ex(&s, "127.0.0.1:0", routes, 1, &o), 0);
	kiln_http_server_stop(s);
	fflush(stderr);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	n = ftell(log);
	assert_true(n >= 0);
	text = calloc(1, (size_t)n + 1);
	assert_non_null(text);
	rewind(log);
	assert_int_equal(fread(text, 1, (size_t)n, log), (size_t)n);
	fclose(log);
	return text;
}

static void no_complaint(kiln_http_mode mode)
{
	char *text = logged_by_server(mode);

	if (strstr(text, "MHD_OPTION") || strstr(text, "not the first"))
		fail_msg("libmicrohttpd complained at debug level: %s", text);
	free(text);
}

static void test_thread_per_connection(void **state)
{
	(void)state;
	no_complaint(KILN_HTTP_THREAD_PER_CONNECTION);
}

static void test_event_loop(void **state)
{
	(void)state;
	no_complaint(KILN_HTTP_EVENT_LOOP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_thread_per_connection),
	    cmocka_unit_test(test_event_loop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
