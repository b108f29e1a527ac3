/* Reads newline-delimited records (JSON Lines) from a file descriptor in
 * large blocks. Lines are handed out borrowed from the reader's buffer until
 * the next call; a line longer than the cap is skipped to its newline and
 * reported as too long, so memory stays bounded whatever the input. */
#ifndef KILN_CORE_LINE_READER_H
#define KILN_CORE_LINE_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kiln_line {
	const char *ptr;   /* without the '\n'; NULL when too_long */
	size_t len;        /* bytes of the line (counted even when too long) */
	uint64_t number;   /* 1-based line number */
	size_t offset_end; /* byte offset in the stream just past the line's '\n' */
	bool too_long;
} kiln_line;

typedef struct kiln_line_reader kiln_line_reader;

/* `fd` stays the caller's. max_line 0 means 1 MiB. */
int kiln_line_reader_new(kiln_line_reader **out, int fd, size_t max_line);
/* The same over a stream: read_fn(ctx, buf, cap) returns the bytes it put
 * in buf (at most cap), 0 at the end, or a negative error code (with the
 * error set), which kiln_line_reader_next returns. */
typedef ptrdiff_t (*kiln_line_read_fn)(void *ctx, void *buf, size_t cap);
int kiln_line_reader_new_stream(kiln_line_reader **out, kiln_line_read_fn read_fn, void *ctx,
                                size_t max_line);
void kiln_line_reader_free(kiln_line_reader *reader);

/* 1 with a line in *out, 0 at end of input, KILN_EIO on a read error. A last
 * line without a newline is still a line; an empty input has none. */
int kiln_line_reader_next(kiln_line_reader *reader, kiln_line *out);

#endif
