/* Capped growable buffer (see buf.h). */
#include "core/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"

int kiln_buf_reserve(kiln_buf *b, size_t extra)
{
	size_t need = b->len + extra, cap;
	char *p;

	if (need < b->len || (b->max && need > b->max))
		return kiln_error_set(KILN_ELIMIT, "buffer limit of %zu bytes reached", b->max);
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	if (b->max && cap > b->max)
		cap = b->max;
	p = realloc(b->ptr, cap);
	if (!p)
		return kiln_error_set(KILN_ENOMEM, "out of memory (buffer of %zu bytes)", cap);
	b->ptr = p;
	b->cap = cap;
	return 0;
}

int kiln_buf_put_slow(kiln_buf *b, const void *data, size_t len)
{
	int rc = kiln_buf_reserve(b, len);

	if (rc < 0)
		return rc;
	if (len)
		memcpy(b->ptr + b->len, data, len);
	b->len += len;
	return 0;
}

int kiln_buf_puts(kiln_buf *b, const char *s)
{
	return kiln_buf_put(b, s, strlen(s));
}

int kiln_buf_printf(kiln_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return kiln_error_set(KILN_EINVALID, "bad format");
	if ((rc = kiln_buf_reserve(b, (size_t)n + 1)) < 0)
		return rc;
	va_start(ap, fmt);
	vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int kiln_buf_put_json_string(kiln_buf *b, const char *s, size_t n)
{
	int rc;

	if ((rc = kiln_buf_putc(b, '"')) < 0 || (rc = kiln_buf_put_json_chars(b, s, n)) < 0)
		return rc;
	return kiln_buf_putc(b, '"');
}

int kiln_buf_put_json_chars(kiln_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	int rc = kiln_buf_reserve(b, n);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc = 0;

		switch (c) {
		case '"':
			esc = '"';
			break;
		case '\\':
			esc = '\\';
			break;
		case '\n':
			esc = 'n';
			break;
		case '\r':
			esc = 'r';
			break;
		case '\t':
			esc = 't';
			break;
		case '\b':
			esc = 'b';
			break;
		case '\f':
			esc = 'f';
			break;
		default:
			break;
		}
		if (esc) {
			char e[2] = {'\\', esc};
			if ((rc = kiln_buf_put(b, e, 2)) < 0)
				return rc;
		} else if (c < 0x20) {
			char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			if ((rc = kiln_buf_put(b, e, 6)) < 0)
				return rc;
		} else if ((rc = kiln_buf_putc(b, (char)c)) < 0) {
			return rc;
		}
	}
	return 0;
}

/* The length of the UTF-8 sequence a lead byte starts (0: not a lead byte). */
static size_t utf8_length(unsigned char c)
{
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return 2;
	if (c >= 0xe0 && c <= 0xef)
		return 3;
	if (c >= 0xf0 && c <= 0xf4)
		return 4;
	return 0;
}

int kiln_buf_put_json_text(kiln_buf *b, const char *s, size_t n)
{
	size_t i = 0, start = 0;
	int rc;

	if (kiln_utf8_valid(s, n))
		return kiln_buf_put_json_string(b, s, n);
	if ((rc = kiln_buf_putc(b, '"')) < 0)
		return rc;
	while (i < n) {
		size_t len = utf8_length((unsigned char)s[i]);

		if (len && i + len <= n && kiln_utf8_valid(s + i, len)) {
			i += len;
			continue;
		}
		/* the valid run before the bad byte, then U+FFFD for it */
		if ((rc = kiln_buf_put_json_chars(b, s + start, i - start)) < 0 ||
		    (rc = kiln_buf_puts(b, "\\ufffd")) < 0)
			return rc;
		start = ++i;
	}
	if ((rc = kiln_buf_put_json_chars(b, s + start, n - start)) < 0)
		return rc;
	return kiln_buf_putc(b, '"');
}

void kiln_buf_free(kiln_buf *b)
{
	free(b->ptr);
	b->ptr = NULL;
	b->len = b->cap = 0;
}

int kiln_buf_sink(void *ctx, const void *data, size_t len)
{
	return kiln_buf_put(ctx, data, len);
}
