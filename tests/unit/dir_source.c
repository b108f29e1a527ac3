/* Unit tests for the directory source's parts: a file's topic
 * (kiln_dir_topic, docs/FORMATS.md), which kind wrote a lineage entry and
 * which names a directory pipeline reads (ingest/source.c), and the
 * decompressing stream it reads files through (core/instream.c): only the
 * bytes the file had when opened, gzip members and zstd frames one after
 * another, and truncated or corrupt input as one error naming the file. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/instream.h"
#include "ingest/dir_source.h"
#include "ingest/source.h"

static void test_topic(void **state)
{
	kiln_buf b = KILN_BUF_INIT(0);

	(void)state;
	assert_int_equal(kiln_dir_topic(&b, "ev", "2026-12-06.jsonl.gz"), 0);
	assert_string_equal(b.ptr, "ev=2026-12-06.jsonl.gz");
	assert_int_equal(kiln_dir_topic(&b, "ev", "day 8 \xc3\xa9.jsonl"), 0);
	assert_string_equal(b.ptr, "ev=day=208=20=C3=A9.jsonl");
	/* '=' itself is escaped: the first '=' always ends the source's name */
	assert_int_equal(kiln_dir_topic(&b, "ev", "a=b~c%d"), 0);
	assert_string_equal(b.ptr, "ev=a=3Db=7Ec=25d");
	kiln_buf_free(&b);
}

static void test_entry_kind(void **state)
{
	kiln_pipeline p = {.source = &kiln_source_directory, .source_name = "ev"};
	kiln_lineage_entry dir = {.topic = "ev=a.jsonl", .path = "/in/a.jsonl"};
	kiln_lineage_entry file = {.topic = "ev", .path = "/in/ev.jsonl"};

	(void)state;
	assert_string_equal(kiln_source_entry_kind(&dir), "directory");
	assert_string_equal(kiln_source_entry_kind(&file), "file");
	assert_true(kiln_source_reads_name(&p, "ev=a.jsonl"));
	assert_false(kiln_source_reads_name(&p, "ev"));
	assert_false(kiln_source_reads_name(&p, "eve=a.jsonl"));
	assert_false(kiln_source_reads_name(&p, "e=a.jsonl"));
}

static int file_of(const void *p, size_t n)
{
	int fd = memfd_create("dir-source-test", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, n), (ssize_t)n);
	return fd;
}

/* All of the stream (up to 4 KiB) into out; the read's result. */
static ptrdiff_t read_all(int fd, size_t size, kiln_instream_kind kind, char *out, size_t cap)
{
	kiln_instream *s;
	size_t at = 0;
	ptrdiff_t n;

	assert_int_equal(kiln_instream_open(&s, fd, size, kind, "in/x"), 0);
	while ((n = kiln_instream_read(s, out + at, cap - at)) > 0)
		at += (size_t)n;
	kiln_instream_free(s);
	out[at] = '\0';
	return n < 0 ? n : (ptrdiff_t)at;
}

static size_t gzip_of(const char *text, unsigned char *out, size_t cap)
{
	z_stream z = {0};

	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (Bytef *)(uintptr_t)text;
	z.avail_in = (uInt)strlen(text);
	z.next_out = out;
	z.avail_out = (uInt)cap;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	deflateEnd(&z);
	return cap - z.avail_out;
}

static void test_plain_reads_its_size(void **state)
{
	char out[4096];
	int fd = file_of("a\nb\nc\n", 6);

	(void)state;
	/* opened when the file had 4 bytes: what came after is not read */
	assert_int_equal(read_all(fd, 4, KILN_INSTREAM_PLAIN, out, sizeof(out) - 1), 4);
	assert_string_equal(out, "a\nb\n");
	/* shorter than it was: an error, not a silent end */
	assert_true(read_all(fd, 10, KILN_INSTREAM_PLAIN, out, sizeof(out) - 1) == KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "in/x: shorter"));
	close(fd);
}

static void test_gzip_members(void **state)
{
	unsigned char z[512];
	char out[4096];
	size_t n = gzip_of("one\n", z, sizeof(z));
	int fd;

	(void)state;
	n += gzip_of("two\n", z + n, sizeof(z) - n);
	fd = file_of(z, n);
	assert_int_equal(read_all(fd, n, KILN_INSTREAM_GZIP, out, sizeof(out) - 1), 8);
	assert_string_equal(out, "one\ntwo\n");
	/* cut inside the second member */
	assert_true(read_all(fd, n - 3, KILN_INSTREAM_GZIP, out, sizeof(out) - 1) == KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "in/x: truncated: the file ends inside a gzip member");
	close(fd);
	z[12] ^= 0xff; /* in the first member's deflate data */
	fd = file_of(z, n);
	assert_true(read_all(fd, n, KILN_INSTREAM_GZIP, out, sizeof(out) - 1) == KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "in/x: corrupt gzip data"));
	close(fd);
}

static void test_zstd_frames(void **state)
{
	unsigned char z[512];
	char out[4096];
	size_t a = ZSTD_compress(z, sizeof(z), "one\n", 4, 3), b;
	int fd;

	(void)state;
	b = ZSTD_compress(z + a, sizeof(z) - a, "two\n", 4, 3);
	assert_false(ZSTD_isError(a) || ZSTD_isError(b));
	fd = file_of(z, a + b);
	assert_int_equal(read_all(fd, a + b, KILN_INSTREAM_ZSTD, out, sizeof(out) - 1), 8);
	assert_string_equal(out, "one\ntwo\n");
	assert_true(read_all(fd, a + 2, KILN_INSTREAM_ZSTD, out, sizeof(out) - 1) == KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "in/x: truncated: the file ends inside a zstd frame");
	close(fd);
	memcpy(z + a + b, "junk", 4); /* not a frame after the last one */
	fd = file_of(z, a + b + 4);
	assert_true(read_all(fd, a + b + 4, KILN_INSTREAM_ZSTD, out, sizeof(out) - 1) == KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "in/x: corrupt zstd data"));
	close(fd);
}

static void test_kind_of(void **state)
{
	(void)state;
	assert_int_equal(kiln_instream_kind_of("a.jsonl.gz"), KILN_INSTREAM_GZIP);
	assert_int_equal(kiln_instream_kind_of("a.jsonl.zst"), KILN_INSTREAM_ZSTD);
	assert_int_equal(kiln_instream_kind_of("a.jsonl"), KILN_INSTREAM_PLAIN);
	assert_int_equal(kiln_instream_kind_of("gz"), KILN_INSTREAM_PLAIN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_topic),
	    cmocka_unit_test(test_entry_kind),
	    cmocka_unit_test(test_plain_reads_its_size),
	    cmocka_unit_test(test_gzip_members),
	    cmocka_unit_test(test_zstd_frames),
	    cmocka_unit_test(test_kind_of),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
