/* Unit tests for structured logging (src/core/log.c): lines captured in a
 * temporary file and parsed back with the JSON scanner: fields, escaping of
 * quotes, control characters and broken UTF-8, the 4 KiB cut, level
 * filtering, plain text lines, the rate limiter on a fake clock and from
 * several threads, and whole lines when threads log at once. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "core/log.h"

static int log_file = -1;
static kiln_json_scanner *scanner;
static char captured[4 << 20];

static int setup(void **state)
{
	char path[] = "/tmp/kiln-log-XXXXXX";

	log_file = mkstemp(path);
	assert_true(log_file >= 0);
	unlink(path);
	kiln_log_set_fd(log_file);
	kiln_log_setup(true, KILN_LOG_DEBUG);
	scanner = kiln_json_scanner_new(NULL);
	assert_non_null(scanner);
	return 0;
}

static int teardown(void **state)
{
	kiln_log_set_fd(2);
	kiln_log_setup(true, KILN_LOG_INFO);
	close(log_file);
	kiln_json_scanner_free(scanner);
	return 0;
}

/* Everything logged since the last call, NUL-terminated; empties the file. */
static const char *take(size_t *out_len)
{
	off_t end = lseek(log_file, 0, SEEK_END);
	ssize_t n;

	assert_true(end >= 0 && (size_t)end < sizeof(captured));
	n = pread(log_file, captured, (size_t)end, 0);
	assert_int_equal(n, end);
	captured[n] = '\0';
	assert_int_equal(ftruncate(log_file, 0), 0);
	assert_int_equal(lseek(log_file, 0, SEEK_SET), 0);
	if (out_len)
		*out_len = (size_t)n;
	return captured;
}

/* Exactly one line, valid JSON; returns it without the newline in line[]. */
static size_t one_line(char *line, size_t cap)
{
	size_t len;
	const char *text = take(&len);

	assert_true(len > 0);
	assert_int_equal(text[len - 1], '\n');
	assert_null(memchr(text, '\n', len - 1));
	assert_true(len <= cap);
	memcpy(line, text, len - 1);
	line[len - 1] = '\0';
	assert_int_equal(kiln_json_check(scanner, line, len - 1), KILN_REJECT_NONE);
	return len - 1;
}

/* The decoded string at `key` (NULL when absent); out must hold the line. */
static const char *str_at(const char *line, const char *key, char *out, size_t cap)
{
	kiln_json_token tok;
	size_t n;

	if (kiln_json_lookup(scanner, line, strlen(line), key, &tok) != 1)
		return NULL;
	assert_int_equal(tok.type, KILN_JSON_STRING);
	n = kiln_json_unescape(out, cap - 1, &tok);
	assert_true(n != (size_t)-1);
	out[n] = '\0';
	return out;
}

/* The raw token text at `key` (a number or literal). */
static const char *raw_at(const char *line, const char *key, char *out, size_t cap)
{
	kiln_json_token tok;

	if (kiln_json_lookup(scanner, line, strlen(line), key, &tok) != 1)
		return NULL;
	assert_true(tok.len < cap);
	memcpy(out, tok.ptr, tok.len);
	out[tok.len] = '\0';
	return out;
}

static void test_fields(void **state)
{
	char line[1024], v[1024];

	errno = EAGAIN;
	KILN_LOG(KILN_LOG_WARN, "store_error", "put failed", KILN_F_STR("store", "s3"),
	         KILN_F_INT("attempt", 3), KILN_F_INT("offset", -9000000000LL), KILN_F_STR("etag", NULL));
	assert_int_equal(errno, EAGAIN);
	one_line(line, sizeof(line));
	assert_memory_equal(line, "{\"ts\":\"", 7);
	assert_string_equal(str_at(line, "level", v, sizeof(v)), "warn");
	assert_string_equal(str_at(line, "event", v, sizeof(v)), "store_error");
	assert_string_equal(str_at(line, "msg", v, sizeof(v)), "put failed");
	assert_string_equal(str_at(line, "store", v, sizeof(v)), "s3");
	assert_string_equal(raw_at(line, "attempt", v, sizeof(v)), "3");
	assert_string_equal(raw_at(line, "offset", v, sizeof(v)), "-9000000000");
	assert_string_equal(raw_at(line, "etag", v, sizeof(v)), "null");
	/* 2026-11-30T03:30:00.123Z */
	str_at(line, "ts", v, sizeof(v));
	assert_int_equal(strlen(v), 24);
	assert_int_equal(v[4], '-');
	assert_int_equal(v[10], 'T');
	assert_int_equal(v[19], '.');
	assert_int_equal(v[23], 'Z');
	assert_non_null(strstr(line, "\"msg\":\"put failed\",\"store\":\"s3\",\"attempt\":3,"));
}

static void test_no_fields_no_msg(void **state)
{
	char line[1024], v[1024];

	KILN_LOG(KILN_LOG_INFO, "started", NULL);
	one_line(line, sizeof(line));
	assert_string_equal(str_at(line, "event", v, sizeof(v)), "started");
	assert_null(str_at(line, "msg", v, sizeof(v)));
	assert_non_null(strstr(line, "\",\"level\":\"info\",\"event\":\"started\"}"));
	assert_int_equal(line[strlen(line) - 1], '}');

	/* a field without a key is skipped */
	KILN_LOG(KILN_LOG_INFO, "started", "m", KILN_F_STR(NULL, "x"), KILN_F_INT("n", 1));
	one_line(line, sizeof(line));
	assert_non_null(strstr(line, "\"msg\":\"m\",\"n\":1}"));
}

static void test_escaping(void **state)
{
	char line[1024], v[1024];

	KILN_LOG(KILN_LOG_ERROR, "ev\"ent", "q\" b\\ nl\n cr\r tab\t c\x01 del\x7f",
	         KILN_F_STR("k\"ey", "\x1f"));
	one_line(line, sizeof(line));
	assert_non_null(strstr(line, "\"event\":\"ev\\\"ent\""));
	assert_non_null(strstr(line, "\"msg\":\"q\\\" b\\\\ nl\\n cr\\r tab\\t c\\u0001 del\x7f\""));
	assert_non_null(strstr(line, "\"k\\\"ey\":\"\\u001f\""));
	assert_string_equal(str_at(line, "msg", v, sizeof(v)), "q\" b\\ nl\n cr\r tab\t c\x01 del\x7f");
}

static void test_invalid_utf8(void **state)
{
	char line[1024], v[1024];

	/* valid 2-, 3- and 4-byte characters stay; a stray continuation byte,
	 * 0xff, an overlong '/', a surrogate and a cut sequence do not */
	KILN_LOG(KILN_LOG_INFO, "utf8",
	         "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\x80|\xff|\xc0\xaf|\xed\xa0\x80|\xe2\x82");
	one_line(line, sizeof(line));
	assert_string_equal(
	    str_at(line, "msg", v, sizeof(v)),
	    "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\xef\xbf\xbd|\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|"
	    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd");
}

static void test_long_strings(void **state)
{
	static char big[10000], line[40000], v[40000];
	size_t n;

	memset(big, 'a', sizeof(big) - 1);
	KILN_LOG(KILN_LOG_INFO, "long", big, KILN_F_INT("after", 7));
	one_line(line, sizeof(line));
	str_at(line, "msg", v, sizeof(v));
	assert_int_equal(strlen(v), 4096 + 3);
	assert_string_equal(v + 4096, "\xe2\x80\xa6");
	assert_string_equal(raw_at(line, "after", v, sizeof(v)), "7");

	/* the cut does not split a character: 'x' then 2-byte characters */
	big[0] = 'x';
	for (size_t i = 1; i + 2 < sizeof(big); i += 2)
		memcpy(big + i, "\xc3\xa9", 2);
	big[sizeof(big) - 2] = '\0';
	KILN_LOG(KILN_LOG_INFO, "long", big);
	one_line(line, sizeof(line));
	str_at(line, "msg", v, sizeof(v));
	assert_int_equal(strlen(v), 4095 + 3);
	assert_null(strstr(v, "\xef\xbf\xbd"));

	/* control characters grow 6x: a string is cut at 4 KiB as written
	 * (682 characters), the line stays within 16 KiB and valid, and the
	 * fields that no longer fit are left out whole */
	memset(big, '\x02', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	KILN_LOG(KILN_LOG_INFO, "long", "m", KILN_F_STR("a", big), KILN_F_STR("b", big), KILN_F_STR("c", big),
	         KILN_F_STR("d", big), KILN_F_STR("e", big), KILN_F_INT("f", 1));
	n = one_line(line, sizeof(line));
	assert_true(n + 1 <= 16384);
	assert_non_null(str_at(line, "a", v, sizeof(v)));
	assert_int_equal(strlen(v), 682 + 3);
	assert_string_equal(v + 682, "\xe2\x80\xa6");
	assert_non_null(str_at(line, "c", v, sizeof(v)));
	assert_string_equal(v + strlen(v) - 3, "\xe2\x80\xa6");
	assert_null(str_at(line, "f", v, sizeof(v)));

	/* an enormous event name still gives a valid line */
	KILN_LOG(KILN_LOG_INFO, big, big, KILN_F_STR("a", big));
	n = one_line(line, sizeof(line));
	assert_true(n + 1 <= 16384);
}

static void test_levels(void **state)
{
	size_t len;
	char line[1024], v[1024];

	kiln_log_setup(true, KILN_LOG_WARN);
	assert_false(kiln_log_enabled(KILN_LOG_INFO));
	assert_true(kiln_log_enabled(KILN_LOG_WARN));
	KILN_LOG(KILN_LOG_DEBUG, "d", NULL);
	KILN_LOG(KILN_LOG_INFO, "i", NULL);
	take(&len);
	assert_int_equal(len, 0);
	KILN_LOG(KILN_LOG_ERROR, "e", NULL);
	one_line(line, sizeof(line));
	assert_string_equal(str_at(line, "level", v, sizeof(v)), "error");
	KILN_LOG(KILN_LOG_DEBUG, "d", NULL);
	kiln_log_write(KILN_LOG_INFO, "i", NULL, NULL, 0);
	take(&len);
	assert_int_equal(len, 0);

	kiln_log_setup(true, KILN_LOG_DEBUG);
	KILN_LOG(KILN_LOG_DEBUG, "d", NULL);
	one_line(line, sizeof(line));
	assert_string_equal(str_at(line, "level", v, sizeof(v)), "debug");
}

static void test_text_lines(void **state)
{
	const char *text;

	kiln_log_setup(false, KILN_LOG_INFO);
	KILN_LOG(KILN_LOG_WARN, "store_error", "put failed\n", KILN_F_STR("store", "s3"),
	         KILN_F_INT("attempt", 3), KILN_F_STR("note", "a b"), KILN_F_STR("empty", ""));
	text = take(NULL);
	assert_int_equal(text[23], 'Z');
	assert_string_equal(text + 24,
	                    " warn store_error: put failed\\n store=s3 attempt=3 note=\"a b\" empty=\"\"\n");
	KILN_LOG(KILN_LOG_INFO, "started", NULL);
	text = take(NULL);
	assert_string_equal(text + 24, " info started\n");
	kiln_log_setup(true, KILN_LOG_DEBUG);
}

static void test_every(void **state)
{
	char line[1024], v[64];
	const char *text;
	size_t len, lines = 0;

	for (int i = 0; i < 5; i++)
		KILN_LOG_EVERY(3600, KILN_LOG_WARN, "slow", "again", KILN_F_INT("i", i));
	one_line(line, sizeof(line));
	assert_string_equal(raw_at(line, "i", v, sizeof(v)), "0");
	assert_null(raw_at(line, "suppressed", v, sizeof(v)));

	/* zero fields, and an interval of 0 lets every line through */
	for (int i = 0; i < 3; i++)
		KILN_LOG_EVERY(0, KILN_LOG_WARN, "fast", NULL);
	text = take(&len);
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	assert_int_equal(lines, 3);
	assert_null(strstr(text, "suppressed"));

	/* the line after a pause carries the count dropped before it */
	for (int i = 0; i < 5; i++) {
		if (i == 4)
			usleep(300 * 1000);
		KILN_LOG_EVERY(0.2, KILN_LOG_ERROR, "flaky", "x", KILN_F_INT("i", i));
	}
	text = take(&len);
	assert_non_null(strstr(text, "\"msg\":\"x\",\"i\":0}\n"));
	assert_non_null(strstr(text, "\"msg\":\"x\",\"suppressed\":3,\"i\":4}\n"));
}

static void test_limiter_fake_clock(void **state)
{
	kiln_log_limiter lim = {0};
	uint64_t s = 99;
	const uint64_t sec = 1000000000u;

	assert_true(kiln_log_limiter_allow_at(&lim, 5, 0, &s));
	assert_int_equal(s, 0);
	for (int i = 0; i < 3; i++)
		assert_false(kiln_log_limiter_allow_at(&lim, 5, 1 * sec, &s));
	assert_false(kiln_log_limiter_allow_at(&lim, 5, 5 * sec - 1, &s));
	assert_true(kiln_log_limiter_allow_at(&lim, 5, 5 * sec, &s));
	assert_int_equal(s, 4);
	assert_false(kiln_log_limiter_allow_at(&lim, 5, 6 * sec, &s));
	assert_true(kiln_log_limiter_allow_at(&lim, 5, 60 * sec, &s));
	assert_int_equal(s, 1);
	assert_true(kiln_log_limiter_allow_at(&lim, 5, 120 * sec, &s));
	assert_int_equal(s, 0);
	/* fractional seconds */
	assert_true(kiln_log_limiter_allow_at(&lim, 0.25, 130 * sec, &s));
	assert_false(kiln_log_limiter_allow_at(&lim, 0.25, 130 * sec + sec / 5, &s));
	assert_true(kiln_log_limiter_allow_at(&lim, 0.25, 130 * sec + sec / 4, &s));
	assert_int_equal(s, 1);
}

#define THREADS 4
#define CALLS   20000

static kiln_log_limiter shared_lim;
static _Atomic uint64_t allowed, reported;

static void *limiter_thread(void *arg)
{
	uint64_t s;

	for (uint64_t i = 0; i < CALLS; i++) {
		/* time moves on every 1000 calls per thread: a few slots open */
		if (kiln_log_limiter_allow_at(&shared_lim, 1.0, (i / 1000) * 1000000000u, &s)) {
			atomic_fetch_add(&allowed, 1);
			atomic_fetch_add(&reported, s);
		}
	}
	return NULL;
}

static void test_limiter_threads(void **state)
{
	pthread_t t[THREADS];
	uint64_t s = 0;

	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, limiter_thread, NULL), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	assert_true(kiln_log_limiter_allow_at(&shared_lim, 1.0, UINT64_C(1) << 62, &s));
	/* every call was either written or counted exactly once */
	assert_int_equal(atomic_load(&allowed) + atomic_load(&reported) + s, THREADS * CALLS);
	assert_true(atomic_load(&allowed) >= 1 && atomic_load(&allowed) <= CALLS / 1000);
}

static void *writer_thread(void *arg)
{
	char msg[3000];

	memset(msg, 'a' + (int)(intptr_t)arg, sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	for (int i = 0; i < 100; i++)
		KILN_LOG(KILN_LOG_INFO, "burst", msg, KILN_F_INT("i", i));
	return NULL;
}

static void test_threads_whole_lines(void **state)
{
	pthread_t t[THREADS];
	size_t len, lines = 0;
	const char *text, *p;

	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, writer_thread, (void *)(intptr_t)i), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	text = take(&len);
	for (p = text; p < text + len; lines++) {
		const char *nl = memchr(p, '\n', (size_t)(text + len - p));

		assert_non_null(nl);
		assert_int_equal(kiln_json_check(scanner, p, (size_t)(nl - p)), KILN_REJECT_NONE);
		p = nl + 1;
	}
	assert_int_equal(lines, THREADS * 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fields),
	    cmocka_unit_test(test_no_fields_no_msg),
	    cmocka_unit_test(test_escaping),
	    cmocka_unit_test(test_invalid_utf8),
	    cmocka_unit_test(test_long_strings),
	    cmocka_unit_test(test_levels),
	    cmocka_unit_test(test_text_lines),
	    cmocka_unit_test(test_every),
	    cmocka_unit_test(test_limiter_fake_clock),
	    cmocka_unit_test(test_limiter_threads),
	    cmocka_unit_test(test_threads_whole_lines),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
