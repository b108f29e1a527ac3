/* Raw zone objects (see raw.h): the writer renders a batch's lines into its
 * spool and stores them as one zstd frame; the decoder takes the object's
 * lines from zst_lines.h (whole frame checked first, memory at one line)
 * and parses each with the strict JSON scanner. */
#include "shard/raw.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "core/base64.h"
#include "core/array.h"
#include "core/error.h"
#include "core/json.h"
#include "shard/spool.h"
#include "shard/zst_lines.h"

#define RAW_LINE_MAX ((size_t)1 << 30) /* longest line decoded (a zstd bomb stops here) */
#define RAW_OBJ_MAX  ((size_t)1 << 30) /* largest object kiln_raw_read loads */
#define SUFFIX       ".jsonl.zst"

static const char *const timestamp_types[] = {"none", "create", "log_append"};

struct kiln_raw_writer {
	kiln_store *store;
	ZSTD_CCtx *cctx;
	int level;
	const char *spool_dir;
	kiln_spool lines; /* the object being written; empty between writes */
	kiln_buf line;
};

/* --- writing ------------------------------------------------------------- */

int kiln_raw_writer_new(kiln_raw_writer **out, kiln_store *store, int level, const char *spool_dir)
{
	kiln_raw_writer *w = calloc(1, sizeof(*w));
	int rc;

	*out = NULL;
	if (!w || !(w->cctx = ZSTD_createCCtx())) {
		free(w);
		return kiln_error_oom(NULL);
	}
	if ((rc = kiln_spool_open(&w->lines, spool_dir)) < 0) {
		ZSTD_freeCCtx(w->cctx);
		free(w);
		return rc;
	}
	w->store = store;
	w->level = level ? level : 3;
	w->spool_dir = spool_dir;
	*out = w;
	return 0;
}

void kiln_raw_writer_free(kiln_raw_writer *w)
{
	if (!w)
		return;
	ZSTD_freeCCtx(w->cctx);
	kiln_spool_close(&w->lines);
	kiln_buf_free(&w->line);
	free(w);
}

/* ,"name":"text" | ,"name_base64":"..." | ,"name":null (no comma when first) */
static int put_bytes(kiln_buf *b, bool first, const char *name, const void *data, size_t len, bool null)
{
	size_t need;
	int rc;

	if ((rc = kiln_buf_printf(b, "%s\"%s", first ? "" : ",", name)) < 0)
		return rc;
	if (null)
		return kiln_buf_puts(b, "\":null");
	if (kiln_utf8_valid(data, len)) {
		if ((rc = kiln_buf_put(b, "\":", 2)) < 0)
			return rc;
		return kiln_buf_put_json_string(b, data, len);
	}
	need = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
	if ((rc = kiln_buf_puts(b, "_base64\":\"")) < 0 || (rc = kiln_buf_reserve(b, need)) < 0)
		return rc;
	sodium_bin2base64(b->ptr + b->len, need, data, len, sodium_base64_VARIANT_ORIGINAL);
	b->len += need - 1; /* need counts the NUL */
	return kiln_buf_putc(b, '"');
}

int kiln_raw_render(kiln_buf *b, const kiln_raw_record *r)
{
	int rc;

	if (r->timestamp_type < 0 || r->timestamp_type > 2)
		return kiln_error_set(KILN_EINVALID, "raw: unknown timestamp_type %d", r->timestamp_type);
	if ((rc = kiln_buf_puts(b, "{\"topic\":")) < 0 ||
	    (rc = kiln_buf_put_json_string(b, r->topic, strlen(r->topic))) < 0 ||
	    (rc = kiln_buf_printf(b, ",\"partition\":%" PRId32 ",\"offset\":%" PRId64, r->partition,
	                          r->offset)) < 0)
		return rc;
	if (r->timestamp_type && (rc = kiln_buf_printf(b, ",\"timestamp\":%" PRId64, r->timestamp)) < 0)
		return rc;
	if ((rc = kiln_buf_printf(b, ",\"timestamp_type\":\"%s\"", timestamp_types[r->timestamp_type])) < 0 ||
	    (rc = put_bytes(b, false, "key", r->key, r->key_len, r->null_key)) < 0 ||
	    (rc = put_bytes(b, false, "value", r->value, r->value_len, r->null_value)) < 0)
		return rc;
	if (r->header_count) {
		if ((rc = kiln_buf_puts(b, ",\"headers\":[")) < 0)
			return rc;
		for (size_t i = 0; i < r->header_count; i++) {
			const kiln_raw_header *h = &r->headers[i];

			if ((rc = kiln_buf_puts(b, i ? ",{" : "{")) < 0 ||
			    (rc = put_bytes(b, true, "name", h->name, h->name_len, false)) < 0 ||
			    (rc = put_bytes(b, false, "value", h->value, h->value_len, h->null_value)) < 0 ||
			    (rc = kiln_buf_putc(b, '}')) < 0)
				return rc;
		}
		if ((rc = kiln_buf_putc(b, ']')) < 0)
			return rc;
	}
	return kiln_buf_puts(b, "}\n");
}

/* The object key for a batch, after checking the batch is one. */
static int batch_key(const kiln_raw_record *recs, size_t n, char key[512])
{
	const char *topic;
	int len;

	if (!n)
		return kiln_error_set(KILN_EINVALID, "raw: empty batch");
	topic = recs[0].topic;
	if (!topic || !*topic || strchr(topic, '/'))
		return kiln_error_set(KILN_EINVALID, "raw: a topic must be a non-empty name without '/'");
	if (recs[0].partition < 0 || recs[0].offset < 0)
		return kiln_error_set(KILN_EINVALID, "raw: topic %.64s: negative partition or offset", topic);
	for (size_t i = 0; i < n; i++) {
		const kiln_raw_record *r = &recs[i];

		if (r->partition != recs[0].partition ||
		    (r->topic != topic && (!r->topic || strcmp(r->topic, topic))))
			return kiln_error_set(KILN_EINVALID,
			                      "raw: topic %.64s partition %" PRId32
			                      ": a batch holds one topic/partition (record %zu differs)",
			                      topic, recs[0].partition, i);
		if (i && r->offset <= recs[i - 1].offset)
			return kiln_error_set(KILN_EINVALID,
			                      "raw: topic %.64s partition %" PRId32
			                      ": offsets not strictly ascending at record %zu",
			                      topic, recs[0].partition, i);
		if (r->timestamp_type < 0 || r->timestamp_type > 2)
			return kiln_error_set(KILN_EINVALID, "raw: unknown timestamp_type %d",
			                      r->timestamp_type);
	}
	len = snprintf(key, 512, "raw/%s/%" PRId32 "/%" PRId64 "-%" PRId64 SUFFIX, topic, recs[0].partition,
	               recs[0].offset, recs[n - 1].offset);
	if (len < 0 || len >= 512 || !kiln_store_key_valid(key))
		return kiln_error_set(KILN_EINVALID,
		                      "raw: topic %.64s cannot name an object (letters, digits, "
		                      "'.', '_', '-' and '=' only)",
		                      topic);
	return 0;
}

int kiln_raw_write(kiln_raw_writer *w, const kiln_raw_record *recs, size_t n, char out_key[512])
{
	char key[512], hash[65];
	uint64_t bytes;
	int rc;

	if ((rc = batch_key(recs, n, key)) < 0)
		return rc;
	/* a failed write or store left bytes behind: start a fresh spool */
	if (w->lines.fd < 0 || w->lines.size) {
		kiln_spool_close(&w->lines);
		if ((rc = kiln_spool_open(&w->lines, w->spool_dir)) < 0)
			return rc;
	}
	for (size_t i = 0; i < n; i++) {
		kiln_buf_reset(&w->line);
		if ((rc = kiln_raw_render(&w->line, &recs[i])) < 0 ||
		    (rc = kiln_spool_write(&w->lines, w->line.ptr, w->line.len)) < 0)
			return rc;
	}
	if ((rc = kiln_spool_store(&w->lines, w->store, w->cctx, w->level, key, hash, &bytes)) < 0)
		return rc;
	if (out_key)
		memcpy(out_key, key, strlen(key) + 1);
	return 0;
}

/* --- decoding ------------------------------------------------------------ */

typedef struct raw_decoder {
	const char *where;
	uint64_t line; /* 1-based number of the line being decoded */
	kiln_json_scanner *scanner;
	kiln_buf scratch; /* decoded strings of the current line (never moves during a line) */
	kiln_raw_header *headers;
	size_t headers_cap;
	int (*cb)(void *ctx, const kiln_raw_record *r);
	void *ctx;
} raw_decoder;

static int bad(const raw_decoder *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(const raw_decoder *d, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return kiln_error_set(KILN_EINVALID, "%s: line %" PRIu64 ": %s", d->where, d->line, msg);
}

static int next_token(raw_decoder *d, kiln_json_token *t)
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

/* A member's decoded name into name[0..cap); an over-long name is returned
 * as "" (never a known member). */
static const char *member_name(const kiln_json_token *t, char *name, size_t cap, size_t *out_len)
{
	size_t n = kiln_json_unescape(name, cap, t);

	*out_len = n == (size_t)-1 ? 0 : n;
	return name;
}

static bool is(const char *name, size_t len, const char *want)
{
	return len == strlen(want) && memcmp(name, want, len) == 0;
}

/* The decoded bytes of a string token, NUL-terminated, carved from scratch. */
static int take_string(raw_decoder *d, const kiln_json_token *t, const char *member, const char **out,
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

static int take_base64(raw_decoder *d, const kiln_json_token *t, const char *member, const char **out,
                       size_t *out_len)
{
	kiln_buf *s = &d->scratch;
	char *p = s->ptr + s->len;
	size_t n;

	if (t->type != KILN_JSON_STRING || (t->flags & KILN_JSON_ESCAPED))
		return bad(d, "\"%s\" is not a plain base64 string", member);
	if (kiln_base64_decode((unsigned char *)p, s->cap - s->len, t->ptr, t->len, NULL, &n) != 0)
		return bad(d, "\"%s\" is not valid base64 (standard alphabet, padded)", member);
	s->len += n;
	*out = p;
	*out_len = n;
	return 0;
}

/* A key or value: string, base64 string, or (plain name only) null. */
static int take_bytes(raw_decoder *d, const kiln_json_token *t, bool base64, const char *member,
                      const void **out, size_t *out_len, bool *out_null)
{
	const char *p = NULL;
	size_t n = 0;
	int rc;

	*out_null = false;
	if (!base64 && t->type == KILN_JSON_NULL) {
		*out_null = true;
	} else if ((rc = base64 ? take_base64(d, t, member, &p, &n) : take_string(d, t, member, &p, &n)) <
	           0) {
		return rc;
	}
	*out = p;
	*out_len = n;
	return 0;
}

static int take_int(raw_decoder *d, const kiln_json_token *t, const char *member, int64_t min, int64_t max,
                    int64_t *out)
{
	const char *p = t->ptr, *end = t->ptr + t->len;
	bool neg = false;
	uint64_t v = 0, lim;
	int64_t x;

	if (t->type != KILN_JSON_NUMBER || !(t->flags & KILN_JSON_INTEGER))
		return bad(d, "\"%s\" is not an integer", member);
	if (p < end && *p == '-') {
		neg = true;
		p++;
	}
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (; p < end; p++) {
		unsigned digit = (unsigned)(*p - '0');

		if (digit > 9 || v > (lim - digit) / 10)
			return bad(d, "\"%s\" is out of range", member);
		v = v * 10 + digit;
	}
	x = !neg ? (int64_t)v : v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
	if (x < min || x > max)
		return bad(d, "\"%s\" is out of range", member);
	*out = x;
	return 0;
}

/* The members of one header object, after its '{'. */
static int decode_header(raw_decoder *d, kiln_raw_header *h, size_t i)
{
	kiln_json_token t, v;
	bool has_name = false, has_value = false;
	char name[16], label[64];
	size_t len;

	memset(h, 0, sizeof(*h));
	for (;;) {
		int rc;

		if ((rc = next_token(d, &t)) < 0)
			return rc;
		if (t.type == KILN_JSON_OBJECT_END)
			break;
		member_name(&t, name, sizeof(name), &len);
		if ((rc = next_token(d, &v)) < 0)
			return rc;
		if (is(name, len, "name") || is(name, len, "name_base64")) {
			snprintf(label, sizeof(label), "headers[%zu].%.*s", i, (int)len, name);
			if (has_name)
				return bad(d, "header %zu has both \"name\" and \"name_base64\"", i);
			has_name = true;
			rc = len == 4 ? take_string(d, &v, label, &h->name, &h->name_len)
			              : take_base64(d, &v, label, &h->name, &h->name_len);
		} else if (is(name, len, "value") || is(name, len, "value_base64")) {
			snprintf(label, sizeof(label), "headers[%zu].%.*s", i, (int)len, name);
			if (has_value)
				return bad(d, "header %zu has both \"value\" and \"value_base64\"", i);
			has_value = true;
			rc = take_bytes(d, &v, len != 5, label, &h->value, &h->value_len, &h->null_value);
		} else {
			return bad(d, "header %zu: unknown member at byte %zu", i, t.offset + 1);
		}
		if (rc < 0)
			return rc;
	}
	if (!has_name || !has_value)
		return bad(d, "header %zu lacks \"%s\"", i, has_name ? "value" : "name");
	return 0;
}

/* The "headers" array, after its '['. */
static int decode_headers(raw_decoder *d, size_t *out_n)
{
	kiln_json_token t;
	size_t n = 0;

	for (;;) {
		int rc;

		if ((rc = next_token(d, &t)) < 0)
			return rc;
		if (t.type == KILN_JSON_ARRAY_END)
			break;
		if (t.type != KILN_JSON_OBJECT_BEGIN)
			return bad(d, "header %zu is not an object", n);
		if (KILN_ARRAY_GROW(d->headers, d->headers_cap, n, NULL) < 0)
			return KILN_ENOMEM;
		if ((rc = decode_header(d, &d->headers[n], n)) < 0)
			return rc;
		n++;
	}
	*out_n = n;
	return 0;
}

enum {
	M_TOPIC = 1u << 0,
	M_PARTITION = 1u << 1,
	M_OFFSET = 1u << 2,
	M_TIMESTAMP = 1u << 3,
	M_TYPE = 1u << 4,
	M_KEY = 1u << 5,
	M_VALUE = 1u << 6,
	M_HEADERS = 1u << 7,
};

static int decode_line(raw_decoder *d, const char *text, size_t len)
{
	kiln_raw_record r = {0};
	kiln_json_token t, v;
	unsigned seen = 0, bit;
	size_t nlen = 0, topic_len = 0, nh = 0;
	char name[16];
	int64_t x;
	int rc;

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
		member_name(&t, name, sizeof(name), &nlen);
		if ((rc = next_token(d, &v)) < 0)
			return rc;
		if (is(name, nlen, "topic")) {
			bit = M_TOPIC;
			if ((rc = take_string(d, &v, "topic", &r.topic, &topic_len)) < 0)
				return rc;
			if (!topic_len || memchr(r.topic, '\0', topic_len))
				return bad(d, "\"topic\" is empty or holds a NUL byte");
		} else if (is(name, nlen, "partition")) {
			bit = M_PARTITION;
			if ((rc = take_int(d, &v, "partition", 0, INT32_MAX, &x)) < 0)
				return rc;
			r.partition = (int32_t)x;
		} else if (is(name, nlen, "offset")) {
			bit = M_OFFSET;
			if ((rc = take_int(d, &v, "offset", 0, INT64_MAX, &r.offset)) < 0)
				return rc;
		} else if (is(name, nlen, "timestamp")) {
			bit = M_TIMESTAMP;
			if ((rc = take_int(d, &v, "timestamp", INT64_MIN, INT64_MAX, &r.timestamp)) < 0)
				return rc;
		} else if (is(name, nlen, "timestamp_type")) {
			char type[16];
			size_t tlen =
			    v.type == KILN_JSON_STRING ? kiln_json_unescape(type, sizeof(type), &v) : 0;

			bit = M_TYPE;
			r.timestamp_type = -1;
			for (int i = 0; i < 3 && tlen != (size_t)-1; i++)
				if (is(type, tlen, timestamp_types[i]))
					r.timestamp_type = i;
			if (r.timestamp_type < 0)
				return bad(
				    d, "\"timestamp_type\" is not \"none\", \"create\" or \"log_append\"");
		} else if (is(name, nlen, "key") || is(name, nlen, "key_base64")) {
			bit = M_KEY;
			if (seen & M_KEY)
				return bad(d, "both \"key\" and \"key_base64\"");
			if ((rc = take_bytes(d, &v, nlen != 3, nlen == 3 ? "key" : "key_base64", &r.key,
			                     &r.key_len, &r.null_key)) < 0)
				return rc;
		} else if (is(name, nlen, "value") || is(name, nlen, "value_base64")) {
			bit = M_VALUE;
			if (seen & M_VALUE)
				return bad(d, "both \"value\" and \"value_base64\"");
			if ((rc = take_bytes(d, &v, nlen != 5, nlen == 5 ? "value" : "value_base64", &r.value,
			                     &r.value_len, &r.null_value)) < 0)
				return rc;
		} else if (is(name, nlen, "headers")) {
			bit = M_HEADERS;
			if (v.type != KILN_JSON_ARRAY_BEGIN)
				return bad(d, "\"headers\" is not an array");
			if ((rc = decode_headers(d, &nh)) < 0)
				return rc;
		} else {
			return bad(d, "unknown member at byte %zu", t.offset + 1);
		}
		seen |= bit;
	}
	if (kiln_json_next(d->scanner, &t) != 0) {
		size_t off = 0;
		kiln_reject code = kiln_json_scanner_error(d->scanner, &off, NULL);
		return bad(d, "invalid JSON (%s) at byte %zu", kiln_reject_name(code), off + 1);
	}
	if ((seen & (M_TOPIC | M_PARTITION | M_OFFSET | M_TYPE | M_KEY | M_VALUE)) !=
	    (M_TOPIC | M_PARTITION | M_OFFSET | M_TYPE | M_KEY | M_VALUE))
		return bad(d, "lacks \"%s\"",
		           !(seen & M_TOPIC)       ? "topic"
		           : !(seen & M_PARTITION) ? "partition"
		           : !(seen & M_OFFSET)    ? "offset"
		           : !(seen & M_TYPE)      ? "timestamp_type"
		           : !(seen & M_KEY)       ? "key"
		                                   : "value");
	if (!(seen & M_TIMESTAMP) != (r.timestamp_type == 0))
		return bad(d,
		           "\"timestamp\" must be present exactly when \"timestamp_type\" is not \"none\"");
	r.headers = nh ? d->headers : NULL;
	r.header_count = nh;
	return d->cb(d->ctx, &r);
}

static int on_line(void *ctx, uint64_t number, const char *text, size_t len)
{
	raw_decoder *d = ctx;

	d->line = number;
	return decode_line(d, text, len);
}

int kiln_raw_decode(const void *zst, size_t len, const char *where,
                    int (*cb)(void *ctx, const kiln_raw_record *r), void *ctx)
{
	raw_decoder d = {.where = where, .cb = cb, .ctx = ctx, .scratch = KILN_BUF_INIT(0)};
	int rc;

	if (!(d.scanner = kiln_json_scanner_new(NULL)))
		return kiln_error_oom(NULL);
	rc = kiln_zst_lines(zst, len, where, RAW_LINE_MAX, on_line, &d);
	kiln_json_scanner_free(d.scanner);
	kiln_buf_free(&d.scratch);
	free(d.headers);
	return rc;
}

static int sink_append(void *ctx, const void *data, size_t len)
{
	return kiln_buf_put(ctx, data, len);
}

int kiln_raw_read(kiln_store *store, const char *key, int (*cb)(void *ctx, const kiln_raw_record *r),
                  void *ctx)
{
	kiln_buf b = KILN_BUF_INIT(RAW_OBJ_MAX);
	int rc = kiln_store_get(store, key, sink_append, &b);

	if (rc == KILN_ELIMIT)
		rc = kiln_error_set(KILN_ELIMIT, "%s: larger than %zu bytes", key, RAW_OBJ_MAX);
	else if (rc == 0)
		rc = kiln_raw_decode(b.ptr ? b.ptr : "", b.len, key, cb, ctx);
	kiln_buf_free(&b);
	return rc;
}

/* --- listing ------------------------------------------------------------- */

typedef struct raw_entry {
	char *key, *topic;
	int32_t partition;
	int64_t first, last;
	uint64_t size;
	int64_t mtime;
} raw_entry;

typedef struct raw_listing {
	raw_entry *v;
	size_t n, cap;
	int32_t partition; /* -1: any */
} raw_listing;

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

/* raw/<topic>/<partition>/<first>-<last>.jsonl.zst */
static bool parse_key(const char *key, raw_entry *e)
{
	const char *topic = key + 4, *p, *f, *dash, *l;
	size_t rest;
	int64_t part;

	if (strncmp(key, "raw/", 4) != 0 || !(p = strchr(topic, '/')) || p == topic ||
	    !(f = strchr(++p, '/')) || !parse_decimal(p, (size_t)(f - p), INT32_MAX, &part) ||
	    !(dash = strchr(++f, '-')) || !parse_decimal(f, (size_t)(dash - f), INT64_MAX, &e->first))
		return false;
	l = dash + 1;
	rest = strlen(l);
	if (rest <= strlen(SUFFIX) || strcmp(l + rest - strlen(SUFFIX), SUFFIX) != 0 ||
	    !parse_decimal(l, rest - strlen(SUFFIX), INT64_MAX, &e->last) || e->first > e->last)
		return false;
	e->partition = (int32_t)part;
	e->topic = strndup(topic, (size_t)(p - 1 - topic));
	return true;
}

static int on_key(void *ctx, const char *key, uint64_t size, int64_t mtime)
{
	raw_listing *l = ctx;
	raw_entry e;

	if (!parse_key(key, &e))
		return 0;
	e.size = size;
	e.mtime = mtime;
	if (!e.topic || !(e.key = strdup(key))) {
		free(e.topic);
		return kiln_error_oom(NULL);
	}
	if (l->partition >= 0 && e.partition != l->partition) {
		free(e.topic);
		free(e.key);
		return 0;
	}
	if (KILN_ARRAY_GROW(l->v, l->cap, l->n, NULL) < 0) {
		free(e.topic);
		free(e.key);
		return KILN_ENOMEM;
	}
	l->v[l->n++] = e;
	return 0;
}

static int entry_cmp(const void *pa, const void *pb)
{
	const raw_entry *a = pa, *b = pb;
	int c = strcmp(a->topic, b->topic);

	if (c)
		return c;
	if (a->partition != b->partition)
		return a->partition < b->partition ? -1 : 1;
	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	return a->last < b->last ? -1 : a->last > b->last;
}

int kiln_raw_list_objects(kiln_store *store, const char *topic, int32_t partition,
                          int (*cb)(void *ctx, const kiln_raw_object *obj), void *ctx)
{
	raw_listing l = {.partition = partition < 0 ? -1 : partition};
	char prefix[512];
	int rc, len;

	if (topic && (!*topic || strchr(topic, '/')))
		return kiln_error_set(KILN_EINVALID, "raw: a topic must be a non-empty name without '/'");
	if (!topic)
		len = snprintf(prefix, sizeof(prefix), "raw/");
	else if (partition < 0)
		len = snprintf(prefix, sizeof(prefix), "raw/%s/", topic);
	else
		len = snprintf(prefix, sizeof(prefix), "raw/%s/%" PRId32 "/", topic, partition);
	if (len < 0 || (size_t)len >= sizeof(prefix))
		return kiln_error_set(KILN_EINVALID, "raw: topic name too long");
	rc = kiln_store_list(store, prefix, on_key, &l);
	if (rc == 0 && l.n) {
		qsort(l.v, l.n, sizeof(*l.v), entry_cmp);
		for (size_t i = 0; i < l.n && rc == 0; i++) {
			const raw_entry *e = &l.v[i];
			kiln_raw_object o = {e->key,  e->topic, e->partition, e->first,
			                     e->last, e->size,  e->mtime};

			rc = cb(ctx, &o);
		}
	}
	for (size_t i = 0; i < l.n; i++) {
		free(l.v[i].key);
		free(l.v[i].topic);
	}
	free(l.v);
	return rc;
}

typedef struct list_adapter {
	int (*cb)(void *ctx, const char *key, const char *topic, int32_t partition, int64_t first,
	          int64_t last);
	void *ctx;
} list_adapter;

static int adapt(void *ctx, const kiln_raw_object *o)
{
	const list_adapter *a = ctx;

	return a->cb(a->ctx, o->key, o->topic, o->partition, o->first, o->last);
}

int kiln_raw_list(kiln_store *store, const char *topic, int32_t partition,
                  int (*cb)(void *ctx, const char *key, const char *topic, int32_t partition, int64_t first,
                            int64_t last),
                  void *ctx)
{
	list_adapter a = {cb, ctx};

	return kiln_raw_list_objects(store, topic, partition, adapt, &a);
}
