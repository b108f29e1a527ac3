/* Block-buffered line reader with a per-line cap (see line_reader.h).
 * Invariant: buf[start..fill) holds bytes read but not yet handed out. */
#include "core/line_reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

#define BLOCK (1u << 20)
/* Bytes asked of one read(2): a caller scans what it got right after the
 * copy, while those bytes are still in the core's L2 cache (a 4 MiB read
 * would have been evicted to memory before the first line is looked at). */
#define READ_CHUNK (256u << 10)

struct kiln_line_reader {
	int fd;
	kiln_line_read_fn read; /* NULL: read(2) on fd */
	void *ctx;
	size_t max_line;
	char *buf;
	size_t cap, start, fill;
	uint64_t line_no;
	size_t consumed; /* stream offset of buf[start] */
	bool eof;
};

int kiln_line_reader_new(kiln_line_reader **out, int fd, size_t max_line)
{
	kiln_line_reader *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r)
		return kiln_error_oom(NULL);
	r->fd = fd;
	r->max_line = max_line ? max_line : (1u << 20);
	r->cap = r->max_line + 1 + 4 * BLOCK;
	r->buf = malloc(r->cap);
	if (!r->buf) {
		free(r);
		return kiln_error_oom(NULL);
	}
	*out = r;
	return 0;
}

int kiln_line_reader_new_stream(kiln_line_reader **out, kiln_line_read_fn read_fn, void *ctx, size_t max_line)
{
	int rc = kiln_line_reader_new(out, -1, max_line);

	if (rc == 0) {
		(*out)->read = read_fn;
		(*out)->ctx = ctx;
	}
	return rc;
}

void kiln_line_reader_free(kiln_line_reader *r)
{
	if (!r)
		return;
	free(r->buf);
	free(r);
}

/* Moves pending bytes to the front and reads more. Returns bytes read, 0 at
 * end of input, or KILN_EIO. */
static ssize_t refill(kiln_line_reader *r)
{
	ssize_t n;

	if (r->start > 0) {
		memmove(r->buf, r->buf + r->start, r->fill - r->start);
		r->fill -= r->start;
		r->start = 0;
	}
	if (r->eof || r->fill == r->cap)
		return 0;
	if (r->read) {
		if ((n = r->read(r->ctx, r->buf + r->fill, r->cap - r->fill)) < 0)
			return n;
	} else {
		size_t want = r->cap - r->fill < READ_CHUNK ? r->cap - r->fill : READ_CHUNK;
		do
			n = read(r->fd, r->buf + r->fill, want);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return kiln_error_set(KILN_EIO, "read: %s", strerror(errno));
	}
	if (n == 0)
		r->eof = true;
	r->fill += (size_t)n;
	return n;
}

static void hand_out(kiln_line_reader *r, kiln_line *out, size_t len, size_t advance)
{
	out->ptr = r->buf + r->start;
	out->len = len;
	out->too_long = false;
	out->number = ++r->line_no;
	r->start += advance;
	r->consumed += advance;
	out->offset_end = r->consumed;
}

/* Discards the rest of an over-long line; len counts what was seen. */
static int skip_long_line(kiln_line_reader *r, kiln_line *out, size_t seen)
{
	for (;;) {
		char *nl = memchr(r->buf + r->start, '\n', r->fill - r->start);
		if (nl) {
			size_t n = (size_t)(nl - (r->buf + r->start));
			r->start += n + 1;
			r->consumed += n + 1;
			seen += n;
			break;
		}
		seen += r->fill - r->start;
		r->consumed += r->fill - r->start;
		r->start = r->fill;
		ssize_t got = refill(r);
		if (got < 0)
			return (int)got;
		if (got == 0)
			break;
	}
	out->ptr = NULL;
	out->len = seen;
	out->too_long = true;
	out->number = ++r->line_no;
	out->offset_end = r->consumed;
	return 1;
}

int kiln_line_reader_next(kiln_line_reader *r, kiln_line *out)
{
	size_t scanned = 0;

	for (;;) {
		size_t avail = r->fill - r->start;
		char *nl = memchr(r->buf + r->start + scanned, '\n', avail - scanned);

		if (nl) {
			size_t len = (size_t)(nl - (r->buf + r->start));
			if (len > r->max_line)
				return skip_long_line(r, out, 0);
			hand_out(r, out, len, len + 1);
			return 1;
		}
		scanned = avail;
		if (avail > r->max_line)
			return skip_long_line(r, out, 0);
		ssize_t got = refill(r);
		if (got < 0)
			return (int)got;
		if (got == 0) {
			if (r->fill == r->start)
				return 0;
			hand_out(r, out, r->fill - r->start, r->fill - r->start);
			return 1;
		}
	}
}
