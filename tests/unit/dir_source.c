/* Unit tests for the directory source's parts: a file's topic
 * (kiln_dir_topic, docs/FORMATS.md), which kind wrote a lineage entry and
 * which names a directory pipeline reads (ingest/source.c), and the
 * decompressing stream it reads files through (core/instream.c): only the
 * bytes the file had when opened, gzip members and zstd frames one after
 * another, and truncated or corrupt input as one error naming the file;
 * the scan the long-running mode repeats: a file read and not yet
 * committed stays READ across scans (never read twice), a changed file is
 * reported once per run (`fresh` once). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "fixture.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/instream.h"
#include "ingest/dir_source.h"
#include "ingest/source.h"
#include "manifest/format.h"

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

	(void)state;
	/* an entry written before "source" existed: the kind its shape tells */
	assert_string_equal(kiln_mfmt_lineage_kind_of_shape("ev=a.jsonl", "/in/a.jsonl"), "directory");
	assert_string_equal(kiln_mfmt_lineage_kind_of_shape("ev", "/in/ev.jsonl"), "file");
	assert_string_equal(kiln_source_directory.kind, KILN_LINEAGE_DIRECTORY);
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

static char tmpdir[64];

static const kiln_dir_file *listed(const kiln_dir *d, const char *name)
{
	for (size_t i = 0; i < d->count; i++)
		if (strcmp(d->files[i].name, name) == 0)
			return &d->files[i];
	fail_msg("%s is not listed", name);
	return NULL;
}

/* Three scans of one folder, as a running source makes them: a.jsonl read
 * (READ) stays READ with what was read, though the branch has no entry for
 * it; b.jsonl, committed at another size, is CHANGED every time but fresh
 * (reported) only the first; a dot-file is never listed. */
static void test_rescan_keeps_read_reports_once(void **state)
{
	char *in = kiln_test_path(tmpdir, "in"), *git = kiln_test_path(tmpdir, "scan.git");
	char *a = kiln_test_path(in, "a.jsonl"), *b = kiln_test_path(in, "b.jsonl"),
	     *dot = kiln_test_path(in, ".c.jsonl");
	kiln_pipeline p = {.dataset = "ds",
	                   .branch = "main",
	                   .source_path = in,
	                   .source_config = &(kiln_dir_config){.glob = "*.jsonl"},
	                   .source_name = "ev"};
	kiln_lineage_entry entry = {.source = KILN_LINEAGE_DIRECTORY,
	                            .topic = "ev=b.jsonl",
	                            .next = 1,
	                            .path = b,
	                            .bytes = 1,
	                            .fenced = true,
	                            .expect_next = -1};
	kiln_snapshot snap = {
	    .dataset = "ds", .branch = "main", .dataset_json = "{}", .lineage = &entry, .lineage_count = 1};
	char prefix[65], commit[41];
	kiln_dir d = {.p = &p};
	kiln_manifest *m;
	kiln_dir_file *f;

	(void)state;
	assert_int_equal(mkdir(in, 0700), 0);
	kiln_test_write_file(a, "{}\n{}\n", 0600);
	kiln_test_write_file(b, "{}\n", 0600);
	kiln_test_write_file(dot, "{}\n", 0600);
	kiln_test_hash(prefix, "ab", '1');
	entry.prefix_blake2b = prefix;
	assert_int_equal(kiln_manifest_open(&m, git), 0);
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);

	assert_int_equal(kiln_dir_scan(&d, m), 0);
	assert_int_equal(d.count, 2);
	assert_int_equal(listed(&d, "a.jsonl")->state, KILN_DIR_NEW);
	assert_int_equal(listed(&d, "b.jsonl")->state, KILN_DIR_CHANGED);
	assert_true(listed(&d, "b.jsonl")->fresh);
	/* a.jsonl read, not committed */
	f = (kiln_dir_file *)listed(&d, "a.jsonl");
	f->state = KILN_DIR_READ;
	f->lines = 2;
	f->size = 6;
	memcpy(f->prefix, prefix, sizeof(prefix));

	for (int scan = 2; scan <= 3; scan++) {
		assert_int_equal(kiln_dir_scan(&d, m), 0);
		f = (kiln_dir_file *)listed(&d, "a.jsonl");
		assert_int_equal(f->state, KILN_DIR_READ);
		assert_int_equal(f->lines, 2);
		assert_string_equal(f->prefix, prefix);
		assert_int_equal(listed(&d, "b.jsonl")->state, KILN_DIR_CHANGED);
		assert_false(listed(&d, "b.jsonl")->fresh);
	}
	/* forgotten (abandon): NEW again on the next scan */
	f->state = KILN_DIR_NEW;
	assert_int_equal(kiln_dir_scan(&d, m), 0);
	assert_int_equal(listed(&d, "a.jsonl")->state, KILN_DIR_NEW);

	kiln_dir_clear(&d);
	kiln_manifest_close(m);
	free(in);
	free(git);
	free(a);
	free(b);
	free(dot);
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
	    cmocka_unit_test(test_rescan_keeps_read_reports_once),
	};
	return kiln_test_git_main(tests, tmpdir, "dir-source", NULL, NULL);
}
