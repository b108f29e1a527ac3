/* Structured log lines (see log.h). A line is built in a fixed buffer on the
 * stack, never allocated: strings are cut so that the closing "}\n" always
 * fits, and a field that no longer fits is left out whole. */
#include "core/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LINE_BYTES  (16u << 10)      /* a whole line, newline included */
#define LINE_END    (LINE_BYTES - 2) /* room kept for "}\n" */
#define STR_MAX     (4u << 10)       /* bytes of one string kept before "…" */
#define ELLIPSIS    "\xe2\x80\xa6"
#define REPLACEMENT "\xef\xbf\xbd" /* U+FFFD */

static _Atomic int log_min_level = KILN_LOG_INFO;
static _Atomic bool log_json = true;
static _Atomic int log_fd = 2;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

typedef struct line {
	size_t len;
	char buf[LINE_BYTES];
} line;

void kiln_log_setup(bool json, kiln_log_level min_level)
{
	atomic_store(&log_json, json);
	atomic_store(&log_min_level, (int)min_level);
}

bool kiln_log_level_parse(const char *name, kiln_log_level *out)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(name, level_names[i]) == 0) {
			*out = (kiln_log_level)i;
			return true;
		}
	return false;
}

void kiln_log_set_fd(int fd)
{
	atomic_store(&log_fd, fd);
}

bool kiln_log_enabled(kiln_log_level level)
{
	return (int)level >= atomic_load_explicit(&log_min_level, memory_order_relaxed);
}

static bool put(line *l, const char *s, size_t n)
{
	if (n > LINE_END - l->len)
		return false;
	memcpy(l->buf + l->len, s, n);
	l->len += n;
	return true;
}

static bool puts_(line *l, const char *s)
{
	return put(l, s, strlen(s));
}

/* Length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms,
 * no surrogates, nothing past U+10FFFF) starting s[0..n), 0 if none. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	uint32_t cp, min;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2, cp = s[0] & 0x1fu, min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3, cp = s[0] & 0x0fu, min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4, cp = s[0] & 0x07u, min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3fu);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* The two-character JSON escape of c, or NULL. */
static const char *short_escape(unsigned char c)
{
	switch (c) {
	case '"':
		return "\\\"";
	case '\\':
		return "\\\\";
	case '\n':
		return "\\n";
	case '\r':
		return "\\r";
	case '\t':
		return "\\t";
	default:
		return NULL;
	}
}

/* s[0..n) JSON-escaped, without quotes. Cut between characters (and ending
 * in "…") once it takes STR_MAX bytes or where the line would no longer keep
 * `keep` bytes free; false only when not even the "…" fits. */
static bool put_escaped(line *l, const char *str, size_t n, size_t keep)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t tail = strlen(ELLIPSIS) + keep, start = l->len;
	bool cut = false;

	if (tail > LINE_END - l->len)
		return false;
	for (size_t i = 0; i < n;) {
		const char *piece = short_escape(s[i]);
		char u[8];
		size_t k, adv = 1;

		if (piece) {
			k = 2;
		} else if (s[i] < 0x20) {
			snprintf(u, sizeof(u), "\\u%04x", s[i]);
			piece = u;
			k = 6;
		} else if (s[i] < 0x80) {
			piece = str + i;
			k = 1;
		} else if ((adv = utf8_seq(s + i, n - i)) == 0) {
			piece = REPLACEMENT;
			k = strlen(REPLACEMENT);
			adv = 1;
		} else {
			piece = str + i;
			k = adv;
		}
		if (k + tail > LINE_END - l->len || l->len - start + k > STR_MAX) {
			cut = true;
			break;
		}
		memcpy(l->buf + l->len, piece, k);
		l->len += k;
		i += adv;
	}
	if (cut)
		put(l, ELLIPSIS, strlen(ELLIPSIS));
	return true;
}

/* A JSON string with its quotes. */
static bool put_string(line *l, const char *s)
{
	return put(l, "\"", 1) && put_escaped(l, s, strlen(s), 1) && put(l, "\"", 1);
}

/* Plain text: a value as is when it is printable ASCII without spaces,
 * quotes, backslashes or '=', else as a quoted JSON string. */
static bool put_text_value(line *l, const char *s)
{
	size_t n = strlen(s);
	bool bare = n > 0 && n <= STR_MAX;

	for (size_t i = 0; bare && i < n; i++)
		bare = s[i] > ' ' && s[i] < 0x7f && s[i] != '"' && s[i] != '\\' && s[i] != '=';
	return bare ? put(l, s, n) : put_string(l, s);
}

static bool put_field(line *l, bool json, const kiln_log_field *f)
{
	if (json) {
		if (!put(l, ",\"", 2) || !put_escaped(l, f->key, strlen(f->key), 2) || !put(l, "\":", 2))
			return false;
	} else if (!put(l, " ", 1) || !put_escaped(l, f->key, strlen(f->key), 1) || !put(l, "=", 1)) {
		return false;
	}
	if (f->is_num) {
		char num[32];

		snprintf(num, sizeof(num), "%lld", f->num);
		return puts_(l, num);
	}
	if (!f->str)
		return puts_(l, "null");
	return json ? put_string(l, f->str) : put_text_value(l, f->str);
}

static void put_timestamp(line *l)
{
	struct timespec ts;
	struct tm tm;
	char text[64];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
	         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	puts_(l, text);
}

static void write_line(const line *l)
{
	int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
	size_t off = 0;

	while (off < l->len) {
		ssize_t n = write(fd, l->buf + off, l->len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		off += (size_t)n;
	}
}

void kiln_log_write(kiln_log_level level, const char *event, const char *msg, const kiln_log_field *fields,
                    size_t n)
{
	bool json = atomic_load_explicit(&log_json, memory_order_relaxed);
	const char *level_name = (unsigned)level < 4 ? level_names[level] : "error";
	int saved_errno = errno;
	line l;

	if (!kiln_log_enabled(level))
		return;
	l.len = 0;
	if (!event)
		event = "log";
	if (json) {
		puts_(&l, "{\"ts\":\"");
		put_timestamp(&l);
		puts_(&l, "\",\"level\":\"");
		puts_(&l, level_name);
		puts_(&l, "\",\"event\":");
		put_string(&l, event);
	} else {
		put_timestamp(&l);
		puts_(&l, " ");
		puts_(&l, level_name);
		puts_(&l, " ");
		put_escaped(&l, event, strlen(event), 2);
	}
	if (msg) {
		size_t before = l.len;
		bool ok = json ? puts_(&l, ",\"msg\":") && put_string(&l, msg)
		               : puts_(&l, ": ") && put_escaped(&l, msg, strlen(msg), 1);

		if (!ok)
			l.len = before;
	}
	for (size_t i = 0; i < n; i++) {
		size_t before = l.len;

		if (!fields[i].key)
			continue;
		if (!put_field(&l, json, &fields[i])) {
			l.len = before; /* left out whole; so are the fields after it */
			break;
		}
	}
	/* LINE_END keeps these two bytes free */
	if (json)
		l.buf[l.len++] = '}';
	l.buf[l.len++] = '\n';
	write_line(&l);
	errno = saved_errno;
}

bool kiln_log_limiter_allow_at(kiln_log_limiter *lim, double seconds, uint64_t now_ns,
                               uint64_t *suppressed_out)
{
	uint64_t next = atomic_load(&lim->next_ns), interval;

	if (!(seconds > 0))
		interval = 0;
	else if (seconds >= 1e9)
		interval = (uint64_t)1e18;
	else
		interval = (uint64_t)(seconds * 1e9);
	/* one thread wins the slot; the others count as dropped */
	if (now_ns < next || !atomic_compare_exchange_strong(&lim->next_ns, &next, now_ns + interval)) {
		atomic_fetch_add(&lim->suppressed, 1);
		return false;
	}
	*suppressed_out = atomic_exchange(&lim->suppressed, 0);
	return true;
}

bool kiln_log_limiter_allow(kiln_log_limiter *lim, double seconds, uint64_t *suppressed_out)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return kiln_log_limiter_allow_at(
	    lim, seconds, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec, suppressed_out);
}
