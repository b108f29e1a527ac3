/* Unit tests for the line reader (src/core/line_reader.c): lines with and
 * without a final newline, empty input and empty lines, CRLF, numbers and
 * offsets, the per-line cap at its edge and far past it, and inputs larger
 * than the reader's buffer, read from temporary files and from pipes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "core/line_reader.h"

#define MIB ((size_t)1 << 20)

static void write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, data, len);

		if (n < 0 && errno == EINTR)
			continue;
		assert_true(n > 0);
		data += n;
		len -= (size_t)n;
	}
}

/* A temporary file holding data[0..len), positioned at its start. */
static int file_with(const char *data, size_t len)
{
	char path[] = "/tmp/kiln-line-reader-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	write_all(fd, data, len);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

/* The read end of a pipe fed data[0..len) by a child process in writes of
 * at most `chunk` bytes (so reads come back short); *out_pid to reap. */
static int pipe_with(const char *data, size_t len, size_t chunk, pid_t *out_pid)
{
	int fds[2];
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		for (size_t done = 0; done < len;) {
			size_t n = len - done < chunk ? len - done : chunk;
			ssize_t w = write(fds[1], data + done, n);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				_exit(1);
			done += (size_t)w;
		}
		_exit(0);
	}
	close(fds[1]);
	*out_pid = pid;
	return fds[0];
}

static void reap(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static kiln_line_reader *reader_on(int fd, size_t max_line)
{
	kiln_line_reader *r = NULL;

	assert_int_equal(kiln_line_reader_new(&r, fd, max_line), 0);
	assert_non_null(r);
	return r;
}

static void expect_line(kiln_line_reader *r, const char *text, uint64_t number, size_t offset_end)
{
	kiln_line line;

	memset(&line, 0xA5, sizeof(line));
	assert_int_equal(kiln_line_reader_next(r, &line), 1);
	assert_false(line.too_long);
	assert_int_equal(line.number, number);
	assert_int_equal(line.offset_end, offset_end);
	assert_int_equal(line.len, strlen(text));
	assert_non_null(line.ptr);
	assert_memory_equal(line.ptr, text, line.len);
}

static void expect_too_long(kiln_line_reader *r, size_t len, uint64_t number, size_t offset_end)
{
	kiln_line line;

	memset(&line, 0xA5, sizeof(line));
	assert_int_equal(kiln_line_reader_next(r, &line), 1);
	assert_true(line.too_long);
	assert_null(line.ptr);
	assert_int_equal(line.len, len);
	assert_int_equal(line.number, number);
	assert_int_equal(line.offset_end, offset_end);
}

static void expect_end(kiln_line_reader *r)
{
	kiln_line line;

	assert_int_equal(kiln_line_reader_next(r, &line), 0);
	assert_int_equal(kiln_line_reader_next(r, &line), 0);
}

/* Runs `check` on a reader over data[0..len): from a file, then from a pipe
 * written in small chunks. */
typedef void (*reader_check)(kiln_line_reader *r);

static void on_file_and_pipe(const char *data, size_t len, size_t max_line, reader_check check)
{
	kiln_line_reader *r;
	pid_t pid;
	int fd;

	fd = file_with(data, len);
	r = reader_on(fd, max_line);
	check(r);
	kiln_line_reader_free(r);
	close(fd);

	fd = pipe_with(data, len, 4093, &pid);
	r = reader_on(fd, max_line);
	check(r);
	kiln_line_reader_free(r);
	close(fd);
	reap(pid);
}

static void check_no_final_newline(kiln_line_reader *r)
{
	expect_line(r, "a", 1, 2);
	expect_line(r, "bc", 2, 5);
	expect_line(r, "{\"x\":1}", 3, 12);
	expect_end(r);
}

static void test_no_final_newline(void **state)
{
	static const char data[] = "a\nbc\n{\"x\":1}";

	(void)state;
	on_file_and_pipe(data, sizeof(data) - 1, 0, check_no_final_newline);
}

static void check_final_newline(kiln_line_reader *r)
{
	expect_line(r, "a", 1, 2);
	expect_line(r, "bc", 2, 5);
	expect_line(r, "{\"x\":1}", 3, 13);
	expect_end(r);
}

static void test_final_newline(void **state)
{
	static const char data[] = "a\nbc\n{\"x\":1}\n";

	(void)state;
	on_file_and_pipe(data, sizeof(data) - 1, 0, check_final_newline);
}

static void check_empty_input(kiln_line_reader *r)
{
	expect_end(r);
}

static void test_empty_input(void **state)
{
	(void)state;
	on_file_and_pipe("", 0, 0, check_empty_input);
}

static void check_empty_lines(kiln_line_reader *r)
{
	expect_line(r, "", 1, 1);
	expect_line(r, "", 2, 2);
	expect_line(r, "x", 3, 4);
	expect_line(r, "", 4, 5);
	expect_line(r, "", 5, 6);
	expect_line(r, "y", 6, 8);
	expect_end(r);
}

static void test_empty_lines(void **state)
{
	static const char data[] = "\n\nx\n\n\ny\n";

	(void)state;
	on_file_and_pipe(data, sizeof(data) - 1, 0, check_empty_lines);
}

static void check_single_newline(kiln_line_reader *r)
{
	expect_line(r, "", 1, 1);
	expect_end(r);
}

static void test_single_newline(void **state)
{
	(void)state;
	on_file_and_pipe("\n", 1, 0, check_single_newline);
}

static void check_crlf(kiln_line_reader *r)
{
	expect_line(r, "a\r", 1, 3);
	expect_line(r, "\r", 2, 5);
	expect_line(r, "bc\r", 3, 9);
	expect_line(r, "d\r", 4, 11);
	expect_end(r);
}

static void test_crlf(void **state)
{
	static const char data[] = "a\r\n\r\nbc\r\nd\r";

	(void)state;
	on_file_and_pipe(data, sizeof(data) - 1, 0, check_crlf);
}

static void check_nul_bytes(kiln_line_reader *r)
{
	kiln_line line;

	assert_int_equal(kiln_line_reader_next(r, &line), 1);
	assert_int_equal(line.len, 3);
	assert_memory_equal(line.ptr, "a\0b", 3);
	expect_line(r, "c", 2, 6);
	expect_end(r);
}

static void test_nul_bytes(void **state)
{
	(void)state;
	on_file_and_pipe("a\0b\nc\n", 6, 0, check_nul_bytes);
}

static void check_max_line_edge(kiln_line_reader *r)
{
	expect_line(r, "12345678", 1, 9);
	expect_too_long(r, 9, 2, 19);
	expect_line(r, "ok", 3, 22);
	expect_too_long(r, 20, 4, 43);
	expect_line(r, "", 5, 44);
	expect_line(r, "abcdefgh", 6, 52);
	expect_end(r);
}

static void test_max_line_edge(void **state)
{
	static const char data[] = "12345678\n123456789\nok\n12345678901234567890\n\nabcdefgh";

	(void)state;
	on_file_and_pipe(data, sizeof(data) - 1, 8, check_max_line_edge);
}

static void check_too_long_last(kiln_line_reader *r)
{
	expect_line(r, "a", 1, 2);
	expect_too_long(r, 9, 2, 11);
	expect_end(r);
}

static void test_too_long_without_final_newline(void **state)
{
	static const char data[] = "a\n123456789";

	(void)state;
	on_file_and_pipe(data, sizeof(data) - 1, 8, check_too_long_last);
}

/* A line of `n` bytes of 'x' with a newline, then "normal\n". */
static char *long_line_input(size_t n, size_t *out_len)
{
	char *data = malloc(n + 8);

	assert_non_null(data);
	memset(data, 'x', n);
	memcpy(data + n, "\nnormal\n", 8);
	*out_len = n + 8;
	return data;
}

static size_t long_line_len;

static void check_long_line(kiln_line_reader *r)
{
	expect_too_long(r, long_line_len, 1, long_line_len + 1);
	expect_line(r, "normal", 2, long_line_len + 8);
	expect_end(r);
}

static void test_very_long_line(void **state)
{
	size_t len;
	char *data;

	(void)state;
	/* 5 MiB over a 1 MiB cap: from a pipe it takes many short reads */
	long_line_len = 5 * MIB;
	data = long_line_input(long_line_len, &len);
	on_file_and_pipe(data, len, MIB, check_long_line);
	free(data);

	/* 12 MiB: longer than the whole buffer, so a file takes refills too */
	long_line_len = 12 * MIB;
	data = long_line_input(long_line_len, &len);
	on_file_and_pipe(data, len, MIB, check_long_line);
	free(data);
}

static size_t default_cap_total;

static void check_default_cap(kiln_line_reader *r)
{
	expect_line(r, "a", 1, 2);
	{
		kiln_line line;

		assert_int_equal(kiln_line_reader_next(r, &line), 1);
		assert_false(line.too_long);
		assert_int_equal(line.len, MIB);
		assert_int_equal(line.number, 2);
		assert_int_equal(line.offset_end, 2 + MIB + 1);
		for (size_t i = 0; i < MIB; i++)
			if (line.ptr[i] != 'y')
				fail_msg("byte %zu of the 1 MiB line is 0x%02x", i,
				         (unsigned char)line.ptr[i]);
	}
	expect_too_long(r, MIB + 1, 3, 2 + MIB + 1 + MIB + 2);
	expect_line(r, "b", 4, default_cap_total);
	expect_end(r);
}

static void test_default_cap(void **state)
{
	size_t len = 2 + MIB + 1 + MIB + 2 + 1;
	char *data = malloc(len), *p = data;

	(void)state;
	/* max_line 0 means 1 MiB: a line of exactly 1 MiB passes, one more byte does not */
	assert_non_null(data);
	memcpy(p, "a\n", 2);
	p += 2;
	memset(p, 'y', MIB);
	p += MIB;
	*p++ = '\n';
	memset(p, 'z', MIB + 1);
	p += MIB + 1;
	*p++ = '\n';
	*p++ = 'b';
	assert_int_equal((size_t)(p - data), len);
	default_cap_total = len;
	on_file_and_pipe(data, len, 0, check_default_cap);
	free(data);
}

/* Line i of the many-lines input: a length and content derived from i. */
static size_t many_line(uint32_t i, char *out)
{
	size_t len = (i * 7919u) % 97;
	uint32_t x = i * 2654435761u;

	for (size_t k = 0; k < len; k++) {
		x = x * 1103515245u + 12345u;
		out[k] = (char)(' ' + (x >> 16) % 95); /* printable, never '\n' */
	}
	return len;
}

#define MANY_LINES 300000u

static char *many_lines_input(size_t *out_len)
{
	size_t cap = (size_t)MANY_LINES * 98, len = 0;
	char *data = malloc(cap);

	assert_non_null(data);
	for (uint32_t i = 0; i < MANY_LINES; i++) {
		len += many_line(i, data + len);
		data[len++] = '\n';
	}
	*out_len = len;
	return data;
}

static void check_many_lines(kiln_line_reader *r)
{
	char want[128];
	size_t end = 0;

	for (uint32_t i = 0; i < MANY_LINES; i++) {
		size_t n = many_line(i, want);
		kiln_line line;

		if (kiln_line_reader_next(r, &line) != 1)
			fail_msg("line %u missing", i + 1);
		end += n + 1;
		if (line.too_long || line.len != n || line.number != i + 1 || line.offset_end != end ||
		    memcmp(line.ptr, want, n) != 0)
			fail_msg("line %u: len %zu (want %zu), number %llu, offset_end %zu (want %zu)", i + 1,
			         line.len, n, (unsigned long long)line.number, line.offset_end, end);
	}
	expect_end(r);
}

static void test_many_lines(void **state)
{
	size_t len;
	char *data = many_lines_input(&len);

	(void)state;
	/* well past the 1 MiB block and the whole buffer */
	assert_true(len > 10 * MIB);
	on_file_and_pipe(data, len, 0, check_many_lines);
	free(data);
}

static void test_read_error(void **state)
{
	kiln_line_reader *r;
	kiln_line line;
	int fds[2];

	(void)state;
	/* a descriptor that cannot be read: the write end of a pipe */
	assert_int_equal(pipe(fds), 0);
	r = reader_on(fds[1], 0);
	assert_int_equal(kiln_line_reader_next(r, &line), KILN_EIO);
	assert_int_equal(kiln_error_last_code(), KILN_EIO);
	kiln_line_reader_free(r);
	close(fds[0]);
	close(fds[1]);
	kiln_line_reader_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_no_final_newline),
	    cmocka_unit_test(test_final_newline),
	    cmocka_unit_test(test_empty_input),
	    cmocka_unit_test(test_empty_lines),
	    cmocka_unit_test(test_single_newline),
	    cmocka_unit_test(test_crlf),
	    cmocka_unit_test(test_nul_bytes),
	    cmocka_unit_test(test_max_line_edge),
	    cmocka_unit_test(test_too_long_without_final_newline),
	    cmocka_unit_test(test_very_long_line),
	    cmocka_unit_test(test_default_cap),
	    cmocka_unit_test(test_many_lines),
	    cmocka_unit_test(test_read_error),
	};

	/* a reader that stopped early must not kill the test with SIGPIPE */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
