/* Decompressing file streams (see instream.h). */
#include "core/instream.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "core/error.h"

#define IN_BLOCK (1u << 16)

struct kiln_instream {
	int fd;
	uint64_t size, pos; /* the bytes to read, and how many were */
	kiln_instream_kind kind;
	char *name;
	unsigned char in[IN_BLOCK];
	size_t in_len, in_pos;
	bool in_end;   /* all `size` bytes are in `in` or used */
	bool in_frame; /* a gzip member or zstd frame began and has not ended */
	z_stream z;
	bool z_ready;
	ZSTD_DCtx *zd;
};

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

kiln_instream_kind kiln_instream_kind_of(const char *name)
{
	if (ends_with(name, ".gz"))
		return KILN_INSTREAM_GZIP;
	if (ends_with(name, ".zst"))
		return KILN_INSTREAM_ZSTD;
	return KILN_INSTREAM_PLAIN;
}

int kiln_instream_open(kiln_instream **out, int fd, uint64_t size, kiln_instream_kind kind, const char *name)
{
	kiln_instream *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s || !(s->name = strdup(name))) {
		free(s);
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	}
	s->fd = fd;
	s->size = size;
	s->kind = kind;
	if (kind == KILN_INSTREAM_GZIP) {
		if (inflateInit2(&s->z, 15 + 16) != Z_OK) { /* 16: gzip framing only */
			kiln_instream_free(s);
			return kiln_error_set(KILN_ENOMEM, "%s: cannot start zlib", name);
		}
		s->z_ready = true;
	} else if (kind == KILN_INSTREAM_ZSTD && !(s->zd = ZSTD_createDCtx())) {
		kiln_instream_free(s);
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	}
	*out = s;
	return 0;
}

void kiln_instream_free(kiln_instream *s)
{
	if (!s)
		return;
	if (s->z_ready)
		inflateEnd(&s->z);
	ZSTD_freeDCtx(s->zd);
	free(s->name);
	free(s);
}

/* Reads up to cap more of the file's first `size` bytes at pos. */
static ptrdiff_t read_raw(kiln_instream *s, void *buf, size_t cap)
{
	size_t want = s->size - s->pos < cap ? (size_t)(s->size - s->pos) : cap;
	ssize_t n;

	if (!want)
		return 0;
	do
		n = pread(s->fd, buf, want, (off_t)s->pos);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return kiln_error_set(KILN_EIO, "%s: read: %s", s->name, strerror(errno));
	if (n == 0)
		return kiln_error_set(KILN_EINVALID,
		                      "%s: shorter (%llu bytes) than when it was opened (%llu)", s->name,
		                      (unsigned long long)s->pos, (unsigned long long)s->size);
	s->pos += (uint64_t)n;
	return n;
}

/* More compressed bytes in `in` when it is used up: 0, or an error. */
static int fill_in(kiln_instream *s)
{
	ptrdiff_t n;

	if (s->in_pos < s->in_len || s->in_end)
		return 0;
	if ((n = read_raw(s, s->in, sizeof(s->in))) < 0)
		return (int)n;
	s->in_pos = 0;
	s->in_len = (size_t)n;
	s->in_end = n == 0;
	return 0;
}

static const char *kind_name(const kiln_instream *s)
{
	return s->kind == KILN_INSTREAM_GZIP ? "gzip" : "zstd";
}

/* One step of the decoder over what `in` holds (maybe nothing, to flush):
 * the bytes it wrote to buf, or an error. */
static ptrdiff_t decode(kiln_instream *s, void *buf, size_t cap)
{
	size_t avail = s->in_len - s->in_pos;

	if (s->kind == KILN_INSTREAM_GZIP) {
		int zr;

		if (!s->in_frame) {
			if (!avail)
				return 0;
			inflateReset(&s->z);
			s->in_frame = true;
		}
		s->z.next_in = s->in + s->in_pos;
		s->z.avail_in = (uInt)avail;
		s->z.next_out = buf;
		s->z.avail_out = cap > UINT32_MAX ? UINT32_MAX : (uInt)cap;
		zr = inflate(&s->z, Z_NO_FLUSH);
		s->in_pos += avail - s->z.avail_in;
		if (zr == Z_STREAM_END)
			s->in_frame = false;
		else if (zr != Z_OK && zr != Z_BUF_ERROR)
			return kiln_error_set(KILN_EINVALID, "%s: corrupt gzip data at byte %llu (%s)",
			                      s->name, (unsigned long long)(s->pos - (s->in_len - s->in_pos)),
			                      s->z.msg ? s->z.msg : "inflate failed");
		return (ptrdiff_t)((cap > UINT32_MAX ? UINT32_MAX : cap) - s->z.avail_out);
	}
	ZSTD_inBuffer zin = {s->in + s->in_pos, avail, 0};
	ZSTD_outBuffer zout = {buf, cap, 0};
	size_t zr;

	if (!s->in_frame && !avail)
		return 0;
	zr = ZSTD_decompressStream(s->zd, &zout, &zin);
	s->in_pos += zin.pos;
	if (ZSTD_isError(zr))
		return kiln_error_set(KILN_EINVALID, "%s: corrupt zstd data at byte %llu (%s)", s->name,
		                      (unsigned long long)(s->pos - (s->in_len - s->in_pos)),
		                      ZSTD_getErrorName(zr));
	s->in_frame = zr != 0;
	return (ptrdiff_t)zout.pos;
}

ptrdiff_t kiln_instream_read(void *stream, void *buf, size_t cap)
{
	kiln_instream *s = stream;

	if (s->kind == KILN_INSTREAM_PLAIN)
		return read_raw(s, buf, cap);
	if (!cap)
		return 0;
	for (;;) {
		ptrdiff_t n;
		int rc;

		if ((rc = fill_in(s)) < 0)
			return rc;
		if ((n = decode(s, buf, cap)) != 0)
			return n;
		if (s->in_end && s->in_pos == s->in_len) {
			if (s->in_frame)
				return kiln_error_set(
				    KILN_EINVALID, "%s: truncated: the file ends inside a %s %s", s->name,
				    kind_name(s), s->kind == KILN_INSTREAM_GZIP ? "member" : "frame");
			return 0;
		}
	}
}

int kiln_instream_check(kiln_instream *s)
{
	static _Thread_local char sink[1 << 16];
	ptrdiff_t n;

	while ((n = kiln_instream_read(s, sink, sizeof(sink))) > 0)
		;
	return n < 0 ? (int)n : 0;
}
