/* Growable byte buffer with a cap (like curl's dynbuf): appends fail with
 * KILN_ELIMIT instead of growing past `max`, so no input can make memory
 * grow without bound. Reused: kiln_buf_reset keeps the allocation. */
#ifndef KILN_CORE_BUF_H
#define KILN_CORE_BUF_H

#include <stddef.h>
#include <string.h>

typedef struct kiln_buf {
	char *ptr;
	size_t len, cap;
	size_t max; /* 0: no cap */
} kiln_buf;

#define KILN_BUF_INIT(max_)                                                                                  \
	{                                                                                                    \
		NULL, 0, 0, (max_)                                                                           \
	}

int kiln_buf_reserve(kiln_buf *buf, size_t extra);
int kiln_buf_put_slow(kiln_buf *buf, const void *data, size_t len);

/* Appends (inline while it fits: these run for every token of every record). */
static inline int kiln_buf_put(kiln_buf *buf, const void *data, size_t len)
{
	if (buf->cap - buf->len < len)
		return kiln_buf_put_slow(buf, data, len);
	if (len)
		memcpy(buf->ptr + buf->len, data, len);
	buf->len += len;
	return 0;
}

static inline int kiln_buf_putc(kiln_buf *buf, char c)
{
	if (buf->len == buf->cap)
		return kiln_buf_put_slow(buf, &c, 1);
	buf->ptr[buf->len++] = c;
	return 0;
}
int kiln_buf_puts(kiln_buf *buf, const char *s);

/* A kiln_store_sink that appends to the kiln_buf at ctx (up to its max). */
int kiln_buf_sink(void *ctx, const void *data, size_t len);
int kiln_buf_printf(kiln_buf *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0..n) (valid UTF-8) as a JSON string with quotes: escapes '"', '\\' and
 * control characters, everything else verbatim. */
int kiln_buf_put_json_string(kiln_buf *buf, const char *s, size_t n);
/* The same without the quotes (a part of a string being written). */
int kiln_buf_put_json_chars(kiln_buf *buf, const char *s, size_t n);
/* kiln_buf_put_json_string for text that may not be UTF-8 (a file name, a
 * message from another tool): each byte that is not part of a valid UTF-8
 * sequence is written as \ufffd, so the result is always valid JSON. */
int kiln_buf_put_json_text(kiln_buf *buf, const char *s, size_t n);
static inline void kiln_buf_reset(kiln_buf *buf)
{
	buf->len = 0;
}
void kiln_buf_free(kiln_buf *buf);

#endif
