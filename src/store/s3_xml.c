/* S3's XML answers (see s3_xml.h). */
#include "store/s3_xml.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"

#define PATH_CAP 512

struct walker {
	const char *xml, *p, *end;
	char path[PATH_CAP];
	size_t depth;
	size_t mark[KILN_S3_XML_DEPTH + 1]; /* path length before each open element */
	bool has_child[KILN_S3_XML_DEPTH + 1];
	kiln_buf text;
	kiln_s3_xml_cb cb;
	void *ctx;
};

static int bad(const struct walker *w, const char *what)
{
	return kiln_error_set(KILN_EINVALID, "S3 answer: %s at byte %td", what, w->p - w->xml);
}

/* Skips to just after `until`; false when it never comes. */
static bool skip_past(struct walker *w, const char *until)
{
	size_t n = strlen(until);

	for (; w->end - w->p >= (ptrdiff_t)n; w->p++)
		if (memcmp(w->p, until, n) == 0) {
			w->p += n;
			return true;
		}
	return false;
}

static int put_utf8(kiln_buf *b, uint32_t cp)
{
	char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (char)cp, n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
	} else {
		u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | (cp >> 12 & 0x3F));
		u[2] = (char)(0x80 | (cp >> 6 & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
	}
	return kiln_buf_put(b, u, n);
}

/* An entity at w->p ('&'), decoded onto the text. */
static int entity(struct walker *w)
{
	static const struct {
		const char *name;
		char c;
	} named[] = {{"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''}};
	const char *q = w->p + 1;

	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		size_t n = strlen(named[i].name);
		if (w->end - q >= (ptrdiff_t)n && memcmp(q, named[i].name, n) == 0) {
			w->p = q + n;
			return kiln_buf_putc(&w->text, named[i].c);
		}
	}
	if (q < w->end && *q == '#') {
		bool hex = ++q < w->end && (*q == 'x' || *q == 'X');
		uint32_t cp = 0;
		int digits = 0;

		for (q += hex; q < w->end && *q != ';' && digits < 8; q++, digits++) {
			int d = *q >= '0' && *q <= '9'          ? *q - '0'
			        : hex && *q >= 'a' && *q <= 'f' ? *q - 'a' + 10
			        : hex && *q >= 'A' && *q <= 'F' ? *q - 'A' + 10
			                                        : -1;
			if (d < 0)
				return bad(w, "a malformed character reference");
			cp = cp * (hex ? 16 : 10) + (uint32_t)d;
		}
		if (q == w->end || *q != ';' || digits == 0 || cp == 0 || cp > 0x10FFFF ||
		    (cp >= 0xD800 && cp <= 0xDFFF))
			return bad(w, "a malformed character reference");
		w->p = q + 1;
		return put_utf8(&w->text, cp);
	}
	return bad(w, "an unknown entity");
}

/* A byte of an element name: S3's names are ASCII letters, digits and
 * "_.:-"; anything else (a NUL, '<', '&', a byte above 0x7F) would let two
 * different names read as one path. */
static bool name_byte(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '.' || c == ':' || c == '-';
}

static int start_tag(struct walker *w)
{
	const char *name = ++w->p, *q;
	size_t n, at;
	bool empty;

	while (w->p < w->end && *w->p != '>' && *w->p != '/' && *w->p != ' ' && *w->p != '\t' &&
	       *w->p != '\r' && *w->p != '\n')
		if (name_byte(*w->p))
			w->p++;
		else
			return bad(w, "an invalid element name");
	n = (size_t)(w->p - name);
	if (!(q = memchr(w->p, '>', (size_t)(w->end - w->p))) || n == 0)
		return bad(w, "a tag left open");
	empty = q[-1] == '/';
	w->p = q + 1;
	if (w->depth == KILN_S3_XML_DEPTH)
		return bad(w, "elements nested too deep");
	at = w->depth ? w->mark[w->depth] : 0;
	if (w->depth)
		w->has_child[w->depth] = true;
	if (at + 1 + n >= sizeof(w->path))
		return bad(w, "an element path too long");
	w->depth++;
	w->mark[w->depth] = at + (w->depth > 1) + n;
	w->has_child[w->depth] = false;
	if (w->depth > 1)
		w->path[at++] = '/';
	memcpy(w->path + at, name, n);
	w->path[at + n] = '\0';
	kiln_buf_reset(&w->text);
	if (!empty)
		return 0;
	int rc = w->cb(w->ctx, w->path, "", 0);
	if (rc == 0)
		rc = w->cb(w->ctx, w->path, NULL, 0);
	w->depth--;
	w->path[w->depth ? w->mark[w->depth] : 0] = '\0';
	return rc;
}

static int end_tag(struct walker *w)
{
	const char *name = w->p + 2, *q = memchr(name, '>', (size_t)(w->end - name));
	size_t at = w->depth > 1 ? w->mark[w->depth - 1] + 1 : 0;
	int rc = 0;

	if (!q || w->depth == 0)
		return bad(w, "an end tag without its start");
	while (q > name && (q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\r' || q[-1] == '\n'))
		q--;
	if ((size_t)(q - name) != w->mark[w->depth] - at || memcmp(w->path + at, name, (size_t)(q - name)))
		return bad(w, "a mismatched end tag");
	w->p = memchr(q, '>', (size_t)(w->end - q)) + 1;
	if (!w->has_child[w->depth]) {
		if ((rc = kiln_buf_putc(&w->text, '\0')) < 0)
			return rc;
		rc = w->cb(w->ctx, w->path, w->text.ptr, w->text.len - 1);
	}
	if (rc == 0)
		rc = w->cb(w->ctx, w->path, NULL, 0);
	kiln_buf_reset(&w->text);
	w->depth--;
	w->path[w->depth ? w->mark[w->depth] : 0] = '\0';
	return rc;
}

static int walk(struct walker *w)
{
	int rc;

	while (w->p < w->end) {
		char c = *w->p;

		if (c == '<' && w->end - w->p >= 9 && memcmp(w->p, "<![CDATA[", 9) == 0) {
			const char *body = w->p + 9;
			if (!skip_past(w, "]]>"))
				return bad(w, "a CDATA section left open");
			if (memchr(body, '\0', (size_t)(w->p - 3 - body)))
				return bad(w, "a NUL byte");
			rc = kiln_buf_put(&w->text, body, (size_t)(w->p - 3 - body));
		} else if (c == '<' && w->end - w->p >= 4 && memcmp(w->p, "<!--", 4) == 0) {
			rc = skip_past(w, "-->") ? 0 : bad(w, "a comment left open");
		} else if (c == '<' && w->end - w->p >= 2 && (w->p[1] == '?' || w->p[1] == '!')) {
			rc = skip_past(w, ">") ? 0 : bad(w, "a declaration left open");
		} else if (c == '<' && w->end - w->p >= 2 && w->p[1] == '/') {
			rc = end_tag(w);
		} else if (c == '<') {
			rc = start_tag(w);
		} else if (c == '&') {
			rc = entity(w);
		} else {
			if (w->depth == 0 && c != ' ' && c != '\t' && c != '\r' && c != '\n')
				return bad(w, "text outside the root element");
			if (c == '\0')
				return bad(w, "a NUL byte"); /* not a character XML allows */
			rc = kiln_buf_putc(&w->text, c);
			w->p++;
		}
		if (rc != 0)
			return rc;
	}
	return w->depth ? bad(w, "an element left open") : 0;
}

int kiln_s3_xml_walk(const char *xml, size_t len, kiln_s3_xml_cb cb, void *ctx)
{
	if (!xml || len == 0)
		return kiln_error_set(KILN_EINVALID, "S3 answer: empty where XML was expected");
	struct walker w = {.xml = xml, .p = xml, .end = xml + len, .cb = cb, .ctx = ctx};
	int rc = walk(&w);

	kiln_buf_free(&w.text);
	return rc;
}

struct find {
	const char *path;
	char *out;
	size_t cap;
};

static int find_leaf(void *ctx, const char *path, const char *text, size_t len)
{
	struct find *f = ctx;

	if (!text || strcmp(path, f->path) != 0)
		return 0;
	snprintf(f->out, f->cap, "%.*s", (int)len, text);
	return 1;
}

bool kiln_s3_xml_find(const char *xml, size_t len, const char *path, char *out, size_t cap)
{
	struct find f = {path, out, cap};

	return kiln_s3_xml_walk(xml, len, find_leaf, &f) == 1;
}

bool kiln_s3_xml_url_decode(char *s)
{
	char *out = s;

	for (; *s; s++) {
		int hi, lo;

		if (*s != '%') {
			*out++ = *s;
			continue;
		}
#define HEXVAL(c)                                                                                            \
	((c) >= '0' && (c) <= '9'   ? (c) - '0'                                                              \
	 : (c) >= 'a' && (c) <= 'f' ? (c) - 'a' + 10                                                         \
	 : (c) >= 'A' && (c) <= 'F' ? (c) - 'A' + 10                                                         \
	                            : -1)
		if ((hi = HEXVAL(s[1])) < 0 || (lo = HEXVAL(s[2])) < 0 || (hi | lo) == 0)
			return false;
#undef HEXVAL
		*out++ = (char)(hi << 4 | lo);
		s += 2;
	}
	*out = '\0';
	return true;
}
