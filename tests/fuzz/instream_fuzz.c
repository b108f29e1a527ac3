/* libFuzzer target for the directory source's reader of foreign files:
 * core/instream.c (gzip and zstd decompression) under the line reader
 * (kiln_line_reader_new_stream), as src/ingest/dir_source.c uses them. The
 * first byte picks the kind (plain, gzip, zstd), the rest is the file as it
 * is. Every line must be well formed (numbered in order, at most the cap or
 * marked too long), the check pass (kiln_instream_check) and the line pass
 * must agree on whether the file reads whole, and an error must be one
 * line naming the file. Then the rest is compressed here with gzip (two
 * members) and zstd (two frames), and the lines read back must be those of
 * the plain bytes. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "core/error.h"
#include "core/instream.h"
#include "core/line_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LINE_MAX_BYTES 512
#define NAME           "fuzz/input.jsonl"

static int file_of(const void *p, size_t n)
{
	int fd = memfd_create("instream-fuzz", MFD_CLOEXEC);

	if (fd < 0)
		abort();
	for (size_t at = 0; at < n;) {
		ssize_t w = write(fd, (const char *)p + at, n - at);
		if (w <= 0)
			abort();
		at += (size_t)w;
	}
	return fd;
}

/* The lines of fd (size bytes, of kind) appended to out as len:bytes
 * records (a too-long line as "L"); 0, or the read's error. */
static int lines_of(int fd, size_t size, kiln_instream_kind kind, unsigned char **out, size_t *out_len)
{
	kiln_instream *s = NULL;
	kiln_line_reader *r = NULL;
	kiln_line line;
	uint64_t number = 0;
	int rc;

	*out = NULL;
	*out_len = 0;
	if (kiln_instream_open(&s, fd, size, kind, NAME) < 0 ||
	    kiln_line_reader_new_stream(&r, kiln_instream_read, s, LINE_MAX_BYTES) < 0)
		abort();
	while ((rc = kiln_line_reader_next(r, &line)) > 0) {
		size_t add = line.too_long ? 1 : line.len + 1;
		if (line.number != ++number || (line.too_long ? line.ptr != NULL || line.len <= LINE_MAX_BYTES
		                                              : line.len > LINE_MAX_BYTES))
			abort();
		if (!(*out = realloc(*out, *out_len + add + 1)))
			abort();
		if (line.too_long) {
			(*out)[(*out_len)++] = 'L';
		} else {
			memcpy(*out + *out_len, line.ptr, line.len);
			*out_len += line.len;
			(*out)[(*out_len)++] = '\n';
		}
	}
	kiln_line_reader_free(r);
	kiln_instream_free(s);
	return rc;
}

static void hostile(const uint8_t *data, size_t size)
{
	kiln_instream_kind kind = (kiln_instream_kind)(data[0] % 3);
	int fd = file_of(data + 1, size - 1), checked, read_rc;
	kiln_instream *s = NULL;
	unsigned char *got;
	size_t got_len;

	if (kiln_instream_open(&s, fd, size - 1, kind, NAME) < 0)
		abort();
	checked = kiln_instream_check(s);
	kiln_instream_free(s);
	read_rc = lines_of(fd, size - 1, kind, &got, &got_len);
	if ((checked < 0) != (read_rc < 0))
		abort(); /* the check pass and the read pass disagree */
	if (read_rc < 0) {
		const char *msg = kiln_error_last();
		if (strncmp(msg, NAME ": ", strlen(NAME ": ")) != 0 || strchr(msg, '\n'))
			abort();
	}
	free(got);
	close(fd);
}

/* gzip of p twice over (two members), into *out. */
static size_t gzip_twice(const uint8_t *p, size_t n, unsigned char **out)
{
	size_t cap = 2 * (compressBound((uLong)n) + 64), len = 0;

	if (!(*out = malloc(cap)))
		abort();
	for (int m = 0; m < 2; m++) {
		z_stream z = {0};
		size_t half = m == 0 ? n / 2 : n - n / 2;
		if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			abort();
		z.next_in = (Bytef *)(uintptr_t)(p + (m == 0 ? 0 : n / 2));
		z.avail_in = (uInt)half;
		z.next_out = *out + len;
		z.avail_out = (uInt)(cap - len);
		if (deflate(&z, Z_FINISH) != Z_STREAM_END)
			abort();
		len = cap - z.avail_out;
		deflateEnd(&z);
	}
	return len;
}

static size_t zstd_twice(const uint8_t *p, size_t n, unsigned char **out)
{
	size_t cap = 2 * ZSTD_compressBound(n), a, b;

	if (!(*out = malloc(cap)))
		abort();
	a = ZSTD_compress(*out, cap, p, n / 2, 1);
	if (ZSTD_isError(a))
		abort();
	b = ZSTD_compress(*out + a, cap - a, p + n / 2, n - n / 2, 1);
	if (ZSTD_isError(b))
		abort();
	return a + b;
}

static void round_trip(const uint8_t *p, size_t n)
{
	int fd = file_of(p, n);
	unsigned char *want, *got, *z;
	size_t want_len, got_len, zlen;

	if (lines_of(fd, n, KILN_INSTREAM_PLAIN, &want, &want_len) < 0)
		abort();
	close(fd);
	for (int k = 0; k < 2; k++) {
		zlen = k == 0 ? gzip_twice(p, n, &z) : zstd_twice(p, n, &z);
		fd = file_of(z, zlen);
		/* the halves split a line in two: compare the bytes, not the lines */
		if (lines_of(fd, zlen, k == 0 ? KILN_INSTREAM_GZIP : KILN_INSTREAM_ZSTD, &got, &got_len) <
		        0 ||
		    got_len != want_len || (want_len && memcmp(got, want, want_len) != 0))
			abort();
		free(got);
		free(z);
		close(fd);
	}
	free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	hostile(data, size);
	round_trip(data + 1, size - 1);
	return 0;
}
