/* Quarantine objects (see quarantine.h): the writer (one open object at a
 * time: a record from another topic/partition closes the open one first),
 * the one encoder of a line, its decoder (lines from zst_lines.h, each
 * parsed with the strict JSON scanner, memory bounded by one line) and the
 * lister of both name shapes. */
#include "shard/quarantine.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "core/base64.h"
#include "core/array.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "shard/spool.h"
#include "shard/zst_lines.h"

#define LINE_MAX_ ((size_t)1 << 30) /* longest line decoded (a zstd bomb stops here) */
#define OBJ_MAX   ((size_t)1 << 30) /* largest object kiln_quarantine_read loads */
#define SUFFIX    ".jsonl.zst"

struct kiln_quarantine {
	kiln_store *store;
	const char *dataset, *branch;
	ZSTD_CCtx *cctx;
	size_t target;
	int level;
	const char *spool_dir;
	kiln_spool lines;
	char *topic;
	int32_t partition;
	int64_t first, last;
	uint64_t objects;
	kiln_buf line; /* the line being written */
};

int kiln_quarantine_new(kiln_quarantine **out, kiln_store *store, const char *dataset, const char *branch,
                        size_t target, int level, const char *spool_dir)
{
	kiln_quarantine *q = calloc(1, sizeof(*q));

	*out = NULL;
	int rc;

	if (!q || !(q->cctx = ZSTD_createCCtx())) {
		free(q);
		return kiln_error_oom(NULL);
	}
	if ((rc = kiln_spool_open(&q->lines, spool_dir)) < 0) {
		ZSTD_freeCCtx(q->cctx);
		free(q);
		return rc;
	}
	q->store = store;
	q->dataset = dataset;
	q->branch = branch;
	q->target = target ? target : (64u << 20);
	q->level = level ? level : 3;
	q->spool_dir = spool_dir;
	*out = q;
	return 0;
}

void kiln_quarantine_free(kiln_quarantine *q)
{
	if (!q)
		return;
	ZSTD_freeCCtx(q->cctx);
	kiln_spool_close(&q->lines);
	kiln_buf_free(&q->line);
	free(q->topic);
	free(q);
}

int kiln_quarantine_flush(kiln_quarantine *q)
{
	char key[1024], hash[65];
	uint64_t bytes;
	int rc;

	if (!q->lines.size)
		return 0;
	if ((size_t)snprintf(key, sizeof(key), "quarantine/%s/%d/%s/%s/%lld-%lld.jsonl.zst", q->topic,
	                     (int)q->partition, q->dataset, q->branch, (long long)q->first,
	                     (long long)q->last) >= sizeof(key))
		return kiln_error_set(KILN_EINVALID, "quarantine: topic %s: object name too long", q->topic);
	rc = kiln_spool_store(&q->lines, q->store, q->cctx, q->level, key, hash, &bytes);
	if (rc < 0)
		return rc;
	q->objects++;
	return 0;
}

int kiln_quarantine_render_line(kiln_buf *b, const kiln_quarantine_line *l)
{
	const char *topic = l->topic ? l->topic : "";
	int rc;

	if (l->violation_count < 1 || l->violation_count > KILN_VIOLATIONS_MAX ||
	    l->count < l->violation_count || !kiln_utf8_valid(topic, strlen(topic)))
		return kiln_error_set(KILN_EINVALID,
		                      "quarantine: a line holds 1 to %d violations, a count no smaller and "
		                      "a UTF-8 topic",
		                      KILN_VIOLATIONS_MAX);
	if ((rc = kiln_buf_puts(b, "{\"topic\":")) < 0 ||
	    (rc = kiln_buf_put_json_string(b, topic, strlen(topic))) < 0 ||
	    (rc = kiln_buf_printf(b, ",\"partition\":%d,\"offset\":%lld,\"code\":\"%s\",\"path\":",
	                          (int)l->partition, (long long)l->offset, kiln_reject_name(l->code))) < 0 ||
	    (rc = kiln_buf_put_json_string(b, l->path, strlen(l->path))) < 0 ||
	    (rc = kiln_buf_puts(b, ",\"violations\":[")) < 0)
		return rc;
	for (size_t i = 0; i < l->violation_count; i++) {
		const kiln_violation *v = &l->violations[i];

		if ((rc = kiln_buf_printf(b, "%s{\"code\":\"%s\",\"path\":", i ? "," : "",
		                          kiln_reject_name(v->code))) < 0 ||
		    (rc = kiln_buf_put_json_string(b, v->path, strlen(v->path))) < 0 ||
		    (rc = kiln_buf_putc(b, '}')) < 0)
			return rc;
	}
	if ((rc = kiln_buf_printf(b, "],\"count\":%" PRIu64, l->count)) < 0)
		return rc;
	if (l->record_null) {
		rc = kiln_buf_puts(b, ",\"record\":null");
	} else if (kiln_utf8_valid(l->record ? l->record : "", l->record_len)) {
		if ((rc = kiln_buf_puts(b, ",\"record\":")) == 0)
			rc = kiln_buf_put_json_string(b, l->record ? l->record : "", l->record_len);
	} else {
		size_t need = sodium_base64_ENCODED_LEN(l->record_len, sodium_base64_VARIANT_ORIGINAL);

		if ((rc = kiln_buf_puts(b, ",\"record_base64\":\"")) < 0 ||
		    (rc = kiln_buf_reserve(b, need)) < 0)
			return rc;
		sodium_bin2base64(b->ptr + b->len, need, l->record, l->record_len,
		                  sodium_base64_VARIANT_ORIGINAL);
		b->len += need - 1; /* need counts the NUL */
		rc = kiln_buf_putc(b, '"');
	}
	return rc < 0 ? rc : kiln_buf_puts(b, "}\n");
}

int kiln_quarantine_add(kiln_quarantine *q, const char *topic, int32_t partition, int64_t offset,
                        const kiln_report *report, const char *raw, size_t raw_len)
{
	kiln_quarantine_line l = {
	    .topic = topic,
	    .partition = partition,
	    .offset = offset,
	    .code = report->v[0].code,
	    .path = report->v[0].path,
	    .violations = report->v,
	    .violation_count = report->kept,
	    .count = report->count,
	    .record = raw,
	    .record_len = raw ? raw_len : 0,
	    .record_null = !raw,
	};
	int rc;

	if (q->lines.size && (partition != q->partition || strcmp(topic, q->topic) != 0) &&
	    (rc = kiln_quarantine_flush(q)) < 0)
		return rc;
	kiln_buf_reset(&q->line);
	if (!q->lines.size) {
		char *t = strdup(topic);
		if (!t)
			return kiln_error_oom(NULL);
		free(q->topic);
		q->topic = t;
		q->partition = partition;
		q->first = offset;
	}
	q->last = offset;
	if ((rc = kiln_quarantine_render_line(&q->line, &l)) < 0 ||
	    (rc = kiln_spool_write(&q->lines, q->line.ptr, q->line.len)) < 0)
		return rc;
	return q->lines.size >= q->target ? kiln_quarantine_flush(q) : 0;
}

uint64_t kiln_quarantine_objects(const kiln_quarantine *q)
{
	return q->objects;
}

/* --- decoding ------------------------------------------------------------ */

typedef struct q_decoder {
	const char *where;
	uint64_t line; /* 1-based number of the line being decoded */
	kiln_json_scanner *scanner;
	kiln_buf scratch; /* decoded strings of the current line (never moves during a line) */
	kiln_violation v[KILN_VIOLATIONS_MAX];
	int (*cb)(void *ctx, const kiln_quarantine_line *line);
	void *ctx;
} q_decoder;

static int bad(const q_decoder *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(const q_decoder *d, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return kiln_error_set(KILN_EINVALID, "%s: line %" PRIu64 ": %s", d->where, d->line, msg);
}

static int next_token(q_decoder *d, kiln_json_token *t)
{
	size_t off = 0;
	kiln_reject code;
	int rc = kiln_json_next(d->scanner, t);

	if (rc > 0)
		return 0;
	if (rc == 0)
		return bad(d, "the line ends early");
	code = kiln_json_scanner_error(d->scanner, &off, NULL);
	return bad(d, "invalid JSON (%s) at byte %zu", kiln_reject_name(code), off + 1);
}

/* A member's decoded name into name[0..cap) ("" when it does not fit). */
static size_t member_name(const kiln_json_token *t, char *name, size_t cap)
{
	size_t n = kiln_json_unescape(name, cap, t);

	return n == (size_t)-1 ? 0 : n;
}

static bool is(const char *name, size_t len, const char *want)
{
	return len == strlen(want) && memcmp(name, want, len) == 0;
}

/* The decoded bytes of a string token, NUL-terminated, carved from scratch
 * (room: a line's decoded strings and their NULs never exceed the line). */
static int take_string(q_decoder *d, const kiln_json_token *t, const char *member, const char **out,
                       size_t *out_len)
{
	kiln_buf *s = &d->scratch;
	char *p = s->ptr + s->len;
	size_t room = s->cap - s->len, n;

	if (t->type != KILN_JSON_STRING)
		return bad(d, "\"%s\" is not a string", member);
	n = kiln_json_unescape(p, room, t);
	if (n == (size_t)-1 || n >= room)
		return bad(d, "\"%s\" does not fit its line", member); /* not reached: decoded <= raw */
	p[n] = '\0';
	s->len += n + 1;
	*out = p;
	*out_len = n;
	return 0;
}

static int take_int(q_decoder *d, const kiln_json_token *t, const char *member, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (t->type != KILN_JSON_NUMBER || !(t->flags & KILN_JSON_INTEGER) || t->len == 0 || t->ptr[0] == '-')
		return bad(d, "\"%s\" is not a non-negative integer", member);
	for (size_t i = 0; i < t->len; i++) {
		unsigned digit = (unsigned)(t->ptr[i] - '0');

		if (digit > 9 || v > (max - digit) / 10)
			return bad(d, "\"%s\" is out of range", member);
		v = v * 10 + digit;
	}
	*out = v;
	return 0;
}

/* A code name: one of core/reject.h's, not "none". */
static int take_code(q_decoder *d, const kiln_json_token *t, const char *member, kiln_reject *out)
{
	char name[32];
	size_t n = t->type == KILN_JSON_STRING ? kiln_json_unescape(name, sizeof(name), t) : (size_t)-1;

	*out = n == (size_t)-1 ? KILN_REJECT_COUNT_ : kiln_reject_parse(name, n);
	if (*out == KILN_REJECT_COUNT_ || *out == KILN_REJECT_NONE)
		return bad(d, "\"%s\" is not a rejection code", member);
	return 0;
}

/* A field path into path[KILN_PATH_MAX] (the validator keeps no longer one). */
static int take_path(q_decoder *d, const kiln_json_token *t, const char *member, char *path)
{
	size_t n = t->type == KILN_JSON_STRING ? kiln_json_unescape(path, KILN_PATH_MAX, t) : (size_t)-1;

	if (t->type != KILN_JSON_STRING)
		return bad(d, "\"%s\" is not a string", member);
	if (n == (size_t)-1 || n >= KILN_PATH_MAX || memchr(path, '\0', n))
		return bad(d, "\"%s\" is longer than %d bytes or holds a NUL byte", member,
		           KILN_PATH_MAX - 1);
	path[n] = '\0';
	return 0;
}

/* The "violations" array, after its '['. */
static int decode_violations(q_decoder *d, size_t *out_n)
{
	kiln_json_token t, v;
	size_t n = 0;

	for (;;) {
		bool has_code = false, has_path = false;
		char name[16], label[48];
		int rc;

		if ((rc = next_token(d, &t)) < 0)
			return rc;
		if (t.type == KILN_JSON_ARRAY_END)
			break;
		if (t.type != KILN_JSON_OBJECT_BEGIN)
			return bad(d, "violation %zu is not an object", n);
		if (n == KILN_VIOLATIONS_MAX)
			return bad(d, "more than %d violations", KILN_VIOLATIONS_MAX);
		memset(&d->v[n], 0, sizeof(d->v[n]));
		for (;;) {
			size_t len;

			if ((rc = next_token(d, &t)) < 0)
				return rc;
			if (t.type == KILN_JSON_OBJECT_END)
				break;
			len = member_name(&t, name, sizeof(name));
			if ((rc = next_token(d, &v)) < 0)
				return rc;
			if (is(name, len, "code") && !has_code) {
				has_code = true;
				snprintf(label, sizeof(label), "violations[%zu].code", n);
				rc = take_code(d, &v, label, &d->v[n].code);
			} else if (is(name, len, "path") && !has_path) {
				has_path = true;
				snprintf(label, sizeof(label), "violations[%zu].path", n);
				rc = take_path(d, &v, label, d->v[n].path);
			} else {
				return bad(d, "violation %zu: unknown or doubled member at byte %zu", n,
				           t.offset + 1);
			}
			if (rc < 0)
				return rc;
		}
		if (!has_code || !has_path)
			return bad(d, "violation %zu lacks \"%s\"", n, has_code ? "path" : "code");
		n++;
	}
	if (!n)
		return bad(d, "\"violations\" is empty");
	*out_n = n;
	return 0;
}

enum {
	M_TOPIC = 1u << 0,
	M_PARTITION = 1u << 1,
	M_OFFSET = 1u << 2,
	M_CODE = 1u << 3,
	M_PATH = 1u << 4,
	M_VIOLATIONS = 1u << 5,
	M_COUNT = 1u << 6,
	M_RECORD = 1u << 7,
	M_ALL = (1u << 8) - 1,
};

static int decode_line(void *ctx, uint64_t number, const char *text, size_t len)
{
	q_decoder *d = ctx;
	kiln_quarantine_line l = {0};
	kiln_json_token t, v;
	unsigned seen = 0, bit;
	char name[16], path[KILN_PATH_MAX] = "";
	size_t nlen, slen = 0;
	uint64_t x = 0;
	int rc;

	d->line = number;
	kiln_buf_reset(&d->scratch);
	if ((rc = kiln_buf_reserve(&d->scratch, len + 1)) < 0)
		return rc;
	kiln_json_scanner_reset(d->scanner, text, len);
	if ((rc = next_token(d, &t)) < 0)
		return rc;
	if (t.type != KILN_JSON_OBJECT_BEGIN)
		return bad(d, "not a JSON object");
	for (;;) {
		if ((rc = next_token(d, &t)) < 0)
			return rc;
		if (t.type == KILN_JSON_OBJECT_END)
			break;
		nlen = member_name(&t, name, sizeof(name));
		if ((rc = next_token(d, &v)) < 0)
			return rc;
		if (is(name, nlen, "topic")) {
			bit = M_TOPIC;
			if ((rc = take_string(d, &v, "topic", &l.topic, &slen)) < 0)
				return rc;
			if (!slen || memchr(l.topic, '\0', slen))
				return bad(d, "\"topic\" is empty or holds a NUL byte");
		} else if (is(name, nlen, "partition")) {
			bit = M_PARTITION;
			if ((rc = take_int(d, &v, "partition", INT32_MAX, &x)) < 0)
				return rc;
			l.partition = (int32_t)x;
		} else if (is(name, nlen, "offset")) {
			bit = M_OFFSET;
			if ((rc = take_int(d, &v, "offset", INT64_MAX, &x)) < 0)
				return rc;
			l.offset = (int64_t)x;
		} else if (is(name, nlen, "code")) {
			bit = M_CODE;
			if ((rc = take_code(d, &v, "code", &l.code)) < 0)
				return rc;
		} else if (is(name, nlen, "path")) {
			bit = M_PATH;
			if ((rc = take_path(d, &v, "path", path)) < 0)
				return rc;
		} else if (is(name, nlen, "violations")) {
			bit = M_VIOLATIONS;
			if (v.type != KILN_JSON_ARRAY_BEGIN)
				return bad(d, "\"violations\" is not an array");
			if (!(seen & bit) && (rc = decode_violations(d, &l.violation_count)) < 0)
				return rc;
		} else if (is(name, nlen, "count")) {
			bit = M_COUNT;
			if ((rc = take_int(d, &v, "count", UINT64_MAX, &l.count)) < 0)
				return rc;
		} else if (is(name, nlen, "record")) {
			bit = M_RECORD;
			if (seen & bit)
				return bad(d, "both \"record\" and \"record_base64\"");
			if (v.type == KILN_JSON_NULL)
				l.record_null = true;
			else if ((rc = take_string(d, &v, "record", (const char **)&l.record,
			                           &l.record_len)) < 0)
				return rc;
		} else if (is(name, nlen, "record_base64")) {
			kiln_buf *s = &d->scratch;

			bit = M_RECORD;
			if (seen & bit)
				return bad(d, "both \"record\" and \"record_base64\"");
			if (v.type != KILN_JSON_STRING || (v.flags & KILN_JSON_ESCAPED) ||
			    kiln_base64_decode((unsigned char *)s->ptr + s->len, s->cap - s->len, v.ptr,
			                       v.len, NULL, &l.record_len) != 0)
				return bad(
				    d, "\"record_base64\" is not valid base64 (standard alphabet, padded)");
			l.record = s->ptr + s->len;
			l.record_base64 = true;
			s->len += l.record_len;
		} else {
			return bad(d, "unknown member at byte %zu", t.offset + 1);
		}
		if (seen & bit) /* the scanner refuses duplicate keys; this is for clarity */
			return bad(d, "doubled member at byte %zu", t.offset + 1);
		seen |= bit;
	}
	if (kiln_json_next(d->scanner, &t) != 0) {
		size_t off = 0;
		kiln_reject code = kiln_json_scanner_error(d->scanner, &off, NULL);
		return bad(d, "invalid JSON (%s) at byte %zu", kiln_reject_name(code), off + 1);
	}
	if (seen != M_ALL)
		return bad(d, "lacks \"%s\"",
		           !(seen & M_TOPIC)        ? "topic"
		           : !(seen & M_PARTITION)  ? "partition"
		           : !(seen & M_OFFSET)     ? "offset"
		           : !(seen & M_CODE)       ? "code"
		           : !(seen & M_PATH)       ? "path"
		           : !(seen & M_VIOLATIONS) ? "violations"
		           : !(seen & M_COUNT)      ? "count"
		                                    : "record");
	if (l.code != d->v[0].code || strcmp(path, d->v[0].path) != 0)
		return bad(d, "\"code\" and \"path\" are not those of the first violation");
	if (l.count < l.violation_count)
		return bad(d, "\"count\" is below the number of violations listed");
	l.path = d->v[0].path;
	l.violations = d->v;
	if (!l.record_null && !l.record)
		l.record = "";
	return d->cb(d->ctx, &l);
}

int kiln_quarantine_decode(const void *zst, size_t len, const char *where,
                           int (*cb)(void *ctx, const kiln_quarantine_line *line), void *ctx)
{
	q_decoder d = {.where = where, .cb = cb, .ctx = ctx, .scratch = KILN_BUF_INIT(0)};
	int rc;

	if (!(d.scanner = kiln_json_scanner_new(NULL)))
		return kiln_error_oom(NULL);
	rc = kiln_zst_lines(zst, len, where, LINE_MAX_, decode_line, &d);
	kiln_json_scanner_free(d.scanner);
	kiln_buf_free(&d.scratch);
	return rc;
}

int kiln_quarantine_read(kiln_store *store, const char *key,
                         int (*cb)(void *ctx, const kiln_quarantine_line *line), void *ctx)
{
	kiln_buf b = KILN_BUF_INIT(OBJ_MAX);
	int rc = kiln_store_get(store, key, kiln_buf_sink, &b);

	if (rc == KILN_ELIMIT)
		rc = kiln_error_set(KILN_ELIMIT, "%s: larger than %zu bytes", key, OBJ_MAX);
	else if (rc == 0)
		rc = kiln_quarantine_decode(b.ptr ? b.ptr : "", b.len, key, cb, ctx);
	kiln_buf_free(&b);
	return rc;
}

int kiln_quarantine_put(kiln_store *store, const char *key, const kiln_buf *lines, int level)
{
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	kiln_spool spool = {.fd = -1};
	char hash[65];
	uint64_t bytes;
	int rc;

	if (!cctx)
		return kiln_error_oom(NULL);
	if ((rc = kiln_spool_open(&spool, NULL)) == 0 &&
	    (rc = kiln_spool_write(&spool, lines->ptr, lines->len)) == 0)
		rc = kiln_spool_store(&spool, store, cctx, level ? level : 3, key, hash, &bytes);
	kiln_spool_close(&spool);
	ZSTD_freeCCtx(cctx);
	return rc;
}

/* --- listing ------------------------------------------------------------- */

typedef struct q_entry {
	char *key;
	kiln_quarantine_object obj; /* strings point into names */
	char *names;                /* topic\0[dataset\0branch\0] */
} q_entry;

typedef struct q_listing {
	q_entry *v;
	size_t n, cap;
	const char *dataset;
} q_listing;

/* s[0..n) as a canonical decimal 0..max (no sign, no leading zero). */
static bool parse_decimal(const char *s, size_t n, int64_t max, int64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || (n > 1 && s[0] == '0'))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned digit = (unsigned)(s[i] - '0');

		if (digit > 9 || v > ((uint64_t)max - digit) / 10)
			return false;
		v = v * 10 + digit;
	}
	*out = (int64_t)v;
	return true;
}

/* quarantine/<topic>/<partition>/[<dataset>/<branch>/]<first>-<last>.jsonl.zst:
 * fills e (names allocated) or returns false (0 with names NULL on OOM). */
static bool parse_key(const char *key, q_entry *e)
{
	const char *seg[5];
	size_t len[5], n = 0;
	const char *p = key + strlen("quarantine/"), *dash, *name;
	int64_t part;
	char *w;

	if (strncmp(key, "quarantine/", strlen("quarantine/")) != 0)
		return false;
	for (;;) {
		const char *slash = strchr(p, '/');

		if (n == 5)
			return false;
		seg[n] = p;
		len[n] = slash ? (size_t)(slash - p) : strlen(p);
		if (!len[n])
			return false;
		n++;
		if (!slash)
			break;
		p = slash + 1;
	}
	if (n != 3 && n != 5)
		return false;
	name = seg[n - 1];
	if (!parse_decimal(seg[1], len[1], INT32_MAX, &part) || !(dash = strchr(name, '-')) ||
	    !parse_decimal(name, (size_t)(dash - name), INT64_MAX, &e->obj.first) ||
	    len[n - 1] <= (size_t)(dash + 1 - name) + strlen(SUFFIX) ||
	    strcmp(name + len[n - 1] - strlen(SUFFIX), SUFFIX) != 0 ||
	    !parse_decimal(dash + 1, len[n - 1] - (size_t)(dash + 1 - name) - strlen(SUFFIX), INT64_MAX,
	                   &e->obj.last) ||
	    e->obj.first > e->obj.last)
		return false;
	e->obj.partition = (int32_t)part;
	if (!(w = e->names = malloc(len[0] + (n == 5 ? len[2] + len[3] + 2 : 0) + 1)))
		return true;
	e->obj.topic = memcpy(w, seg[0], len[0]);
	w[len[0]] = '\0';
	w += len[0] + 1;
	if (n == 5) {
		e->obj.dataset = memcpy(w, seg[2], len[2]);
		w[len[2]] = '\0';
		w += len[2] + 1;
		e->obj.branch = memcpy(w, seg[3], len[3]);
		w[len[3]] = '\0';
	}
	return true;
}

static int on_key(void *ctx, const char *key, uint64_t size, int64_t mtime)
{
	q_listing *l = ctx;
	q_entry e = {0};

	if (!parse_key(key, &e))
		return 0;
	if (!e.names || !(e.key = strdup(key))) {
		free(e.names);
		return kiln_error_oom(NULL);
	}
	if (l->dataset && e.obj.dataset && strcmp(l->dataset, e.obj.dataset) != 0) {
		free(e.names);
		free(e.key);
		return 0;
	}
	e.obj.size = size;
	e.obj.mtime = mtime;
	if (KILN_ARRAY_GROW(l->v, l->cap, l->n, NULL) < 0) {
		free(e.names);
		free(e.key);
		return KILN_ENOMEM;
	}
	l->v[l->n++] = e;
	return 0;
}

static int entry_cmp(const void *pa, const void *pb)
{
	return strcmp(((const q_entry *)pa)->key, ((const q_entry *)pb)->key);
}

int kiln_quarantine_list(kiln_store *store, const char *topic, const char *dataset,
                         int (*cb)(void *ctx, const kiln_quarantine_object *obj), void *ctx)
{
	q_listing l = {.dataset = dataset};
	char prefix[512];
	int rc, len;

	if (topic && (!*topic || strchr(topic, '/')))
		return kiln_error_set(KILN_EINVALID,
		                      "quarantine: a topic must be a non-empty name without '/'");
	len = topic ? snprintf(prefix, sizeof(prefix), "quarantine/%s/", topic)
	            : snprintf(prefix, sizeof(prefix), "quarantine/");
	if (len < 0 || (size_t)len >= sizeof(prefix))
		return kiln_error_set(KILN_EINVALID, "quarantine: topic name too long");
	rc = kiln_store_list(store, prefix, on_key, &l);
	if (rc == 0 && l.n) {
		qsort(l.v, l.n, sizeof(*l.v), entry_cmp);
		for (size_t i = 0; i < l.n && rc == 0; i++) {
			l.v[i].obj.key = l.v[i].key;
			rc = cb(ctx, &l.v[i].obj);
		}
	}
	for (size_t i = 0; i < l.n; i++) {
		free(l.v[i].key);
		free(l.v[i].names);
	}
	free(l.v);
	return rc;
}
