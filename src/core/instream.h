/* A file's bytes as they were before compression, by the file's name:
 * NAME.gz is gzip (one or more members, zlib), NAME.zst zstd (one or more
 * frames), anything else is read as it is. A stream reads at most `size`
 * bytes of its file (its size when it was opened: what a writer appends
 * meanwhile is not half read) with pread, so the fd's offset is untouched
 * and one fd can be read twice. Compressed bytes that are corrupt, or end
 * inside a member or frame, fail with one line naming the file
 * (KILN_EINVALID). Its read function is a kiln_line_read_fn, so
 * kiln_line_reader_new_stream reads the lines of a compressed file. */
#ifndef KILN_CORE_INSTREAM_H
#define KILN_CORE_INSTREAM_H

#include <stddef.h>
#include <stdint.h>

typedef enum kiln_instream_kind {
	KILN_INSTREAM_PLAIN,
	KILN_INSTREAM_GZIP,
	KILN_INSTREAM_ZSTD,
} kiln_instream_kind;

typedef struct kiln_instream kiln_instream;

/* The kind a file name says: ".gz" gzip, ".zst" zstd, else plain. */
kiln_instream_kind kiln_instream_kind_of(const char *name);

/* `fd` stays the caller's; `name` (copied) names the file in messages. */
int kiln_instream_open(kiln_instream **out, int fd, uint64_t size, kiln_instream_kind kind, const char *name);
void kiln_instream_free(kiln_instream *stream);

/* Up to cap decompressed bytes into buf: how many (0 at the end), or a
 * negative error code with the error set. `stream` is a kiln_instream. */
ptrdiff_t kiln_instream_read(void *stream, void *buf, size_t cap);

/* Reads the stream to its end, dropping the bytes: 0 when the whole file
 * decompresses, else the first error. Checks a compressed file before any
 * of its lines is used. */
int kiln_instream_check(kiln_instream *stream);

#endif
