/* Avro binary to JSON (avro.h; the mapping is docs/STREAMING.md's): a
 * reader that walks the schema tree over the record's bytes. Every length
 * and count is checked against the bytes left before anything is read or
 * allocated, varints stop at 10 bytes, the depth at KILN_AVRO_MAX_DEPTH and
 * the output at max_out, so a hostile record costs at most its limit. The
 * error says where (the field path) and what, never a value. */
#include "contract/avro.h"

#include <math.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"

typedef struct reader {
	const unsigned char *p, *end, *start;
	size_t max_out;
	kiln_buf *out;
	kiln_avro_error *err;
	char path[256];
	size_t path_len;
} reader;

static int fail(reader *r, kiln_reject code, const char *what)
{
	r->err->code = code;
	r->err->offset = (size_t)(r->p - r->start);
	r->err->what = what;
	snprintf(r->err->path, sizeof(r->err->path), "%s", r->path_len ? r->path : "$");
	return KILN_EINVALID;
}

static int put(reader *r, const void *s, size_t n)
{
	if (r->out->len + n > r->max_out)
		return fail(r, KILN_REJECT_TOO_LARGE, "decoded record larger than the record limit");
	return kiln_buf_put(r->out, s, n);
}

static int puts_(reader *r, const char *s)
{
	return put(r, s, strlen(s));
}

/* A zigzag varint of at most 10 bytes. */
static int read_long(reader *r, int64_t *out)
{
	uint64_t v = 0;

	for (int shift = 0; shift < 70; shift += 7) {
		if (r->p >= r->end)
			return fail(r, KILN_REJECT_AVRO_DECODE, "truncated varint");
		unsigned char b = *r->p++;
		if (shift == 63 && (b & 0x7e))
			return fail(r, KILN_REJECT_AVRO_DECODE, "varint overflows 64 bits");
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
			return 0;
		}
	}
	return fail(r, KILN_REJECT_AVRO_DECODE, "varint longer than 10 bytes");
}

static int read_int(reader *r, int64_t *out)
{
	int rc = read_long(r, out);
	if (rc == 0 && (*out < INT32_MIN || *out > INT32_MAX))
		return fail(r, KILN_REJECT_AVRO_DECODE, "int out of range");
	return rc;
}

/* A length: not negative, not beyond the bytes left. */
static int read_len(reader *r, size_t *out)
{
	int64_t n;
	int rc = read_long(r, &n);

	if (rc < 0)
		return rc;
	if (n < 0)
		return fail(r, KILN_REJECT_AVRO_DECODE, "negative length");
	if ((uint64_t)n > (uint64_t)(r->end - r->p))
		return fail(r, KILN_REJECT_AVRO_DECODE, "length beyond the record's end");
	*out = (size_t)n;
	return 0;
}

static int put_base64(reader *r, const unsigned char *s, size_t n)
{
	size_t need = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	int rc;

	if (r->out->len + need + 2 > r->max_out)
		return fail(r, KILN_REJECT_TOO_LARGE, "decoded record larger than the record limit");
	if ((rc = kiln_buf_reserve(r->out, need + 2)) < 0)
		return rc;
	r->out->ptr[r->out->len++] = '"';
	sodium_bin2base64(r->out->ptr + r->out->len, need, s, n, sodium_base64_VARIANT_ORIGINAL);
	r->out->len += need - 1;
	r->out->ptr[r->out->len++] = '"';
	return 0;
}

/* The shortest text that reads back as the same number. */
static int put_double(reader *r, double d, bool single)
{
	char s[40];

	if (!isfinite(d))
		return fail(r, KILN_REJECT_NOT_FINITE,
		            single ? "float is NaN or infinite" : "double is NaN or infinite");
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(s, sizeof(s), "%.*g", prec, d);
		if (single ? strtof(s, NULL) == (float)d : strtod(s, NULL) == d)
			break;
	}
	return puts_(r, s);
}

/* days since 1970-01-01 to a civil date (H. Hinnant's algorithm) */
static void civil(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* days: a date; with_time: then the time of day in units of 1/per seconds */
static int put_datetime(reader *r, int64_t days, bool with_time, int64_t in_day, int64_t per, int digits)
{
	int64_t y;
	unsigned m, d;
	char s[64];

	if (days < -719162 || days > 2932896) /* 0001-01-01 .. 9999-12-31 */
		return fail(r, KILN_REJECT_AVRO_DECODE, "date out of range (years 1 to 9999)");
	civil(days, &y, &m, &d);
	if (!with_time) {
		snprintf(s, sizeof(s), "\"%04d-%02u-%02u\"", (int)y, m, d);
		return puts_(r, s);
	}
	int64_t secs = in_day / per, frac = in_day % per;
	snprintf(s, sizeof(s), "\"%04d-%02u-%02uT%02d:%02d:%02d.%0*lldZ\"", (int)y, m, d, (int)(secs / 3600),
	         (int)(secs / 60 % 60), (int)(secs % 60), digits, (long long)frac);
	return puts_(r, s);
}

static int put_time(reader *r, int64_t t, int64_t per, int digits)
{
	char s[40];

	if (t < 0 || t >= 86400 * per)
		return fail(r, KILN_REJECT_AVRO_DECODE, "time of day out of range");
	int64_t secs = t / per;
	snprintf(s, sizeof(s), "\"%02d:%02d:%02d.%0*lld\"", (int)(secs / 3600), (int)(secs / 60 % 60),
	         (int)(secs % 60), digits, (long long)(t % per));
	return puts_(r, s);
}

/* A two's-complement big-endian unscaled value as a JSON number with
 * exactly scale digits after the point. */
static int put_decimal(reader *r, const kiln_avro_node *n, const unsigned char *b, size_t len)
{
	unsigned char mag[KILN_AVRO_DECIMAL_MAX_BYTES];
	/* digits: at most 155 of the value, or scale + 1 zeros and digits, the
	 * schema's scale being at most KILN_AVRO_DECIMAL_MAX_DIGITS */
	char digits[KILN_AVRO_DECIMAL_MAX_DIGITS + 2], text[KILN_AVRO_DECIMAL_MAX_DIGITS + 4];
	size_t nd = 0, t = 0;
	bool neg = len && (b[0] & 0x80);

	if (len == 0)
		return fail(r, KILN_REJECT_AVRO_DECODE, "decimal without bytes");
	if (len > KILN_AVRO_DECIMAL_MAX_BYTES)
		return fail(r, KILN_REJECT_AVRO_DECODE, "decimal longer than 64 bytes");
	memcpy(mag, b, len);
	if (neg) { /* magnitude: invert and add one */
		int carry = 1;
		for (size_t i = len; i-- > 0;) {
			int v = (unsigned char)~mag[i] + carry;
			mag[i] = (unsigned char)v;
			carry = v >> 8;
		}
	}
	for (;;) { /* repeated division by 10 */
		bool zero = true;
		unsigned rem = 0;
		for (size_t i = 0; i < len; i++) {
			unsigned cur = (rem << 8) | mag[i];
			mag[i] = (unsigned char)(cur / 10);
			rem = cur % 10;
			zero = zero && mag[i] == 0;
		}
		digits[nd++] = (char)('0' + rem);
		if (zero)
			break;
	}
	if ((int)nd > n->precision && !(nd == 1 && digits[0] == '0'))
		return fail(r, KILN_REJECT_AVRO_DECODE, "decimal has more digits than its precision");
	while ((int)nd <= n->scale && nd < sizeof(digits))
		digits[nd++] = '0';
	if (neg)
		text[t++] = '-';
	for (size_t i = nd; i-- > 0;) {
		text[t++] = digits[i];
		if (n->scale && i == (size_t)n->scale)
			text[t++] = '.';
	}
	return put(r, text, t);
}

static int path_push(reader *r, const char *name, bool index, size_t i, size_t *saved)
{
	int k;

	*saved = r->path_len;
	if (index)
		k = snprintf(r->path + r->path_len, sizeof(r->path) - r->path_len, "[%zu]", i);
	else
		k = snprintf(r->path + r->path_len, sizeof(r->path) - r->path_len, "%s%s",
		             r->path_len ? "." : "", name);
	if (k > 0)
		r->path_len =
		    r->path_len + (size_t)k < sizeof(r->path) ? r->path_len + (size_t)k : sizeof(r->path) - 1;
	return 0;
}

static void path_pop(reader *r, size_t saved)
{
	r->path_len = saved;
	r->path[saved] = '\0';
}

static int value(reader *r, const kiln_avro_node *n, int depth);

/* Array or map blocks: a count (negative: then a byte size), 0 ends. */
static int blocks(reader *r, const kiln_avro_node *n, int depth)
{
	bool map = n->type == KILN_AVRO_MAP;
	size_t i = 0, saved;
	int64_t count, skip;
	int rc;

	if ((rc = put(r, map ? "{" : "[", 1)) < 0)
		return rc;
	for (;;) {
		if ((rc = read_long(r, &count)) < 0)
			return rc;
		if (count == 0)
			break;
		if (count < 0) {
			if (count == INT64_MIN)
				return fail(r, KILN_REJECT_AVRO_DECODE, "block count out of range");
			count = -count;
			if ((rc = read_long(r, &skip)) < 0)
				return rc;
			if (skip < 0 || (uint64_t)skip > (uint64_t)(r->end - r->p))
				return fail(r, KILN_REJECT_AVRO_DECODE, "block size beyond the record's end");
		}
		/* each item writes at least one byte: the output bound ends a
		 * count of empty items */
		for (int64_t k = 0; k < count; k++, i++) {
			if (i && (rc = put(r, ",", 1)) < 0)
				return rc;
			if (map) {
				size_t len;
				if ((rc = read_len(r, &len)) < 0)
					return rc;
				if (!kiln_utf8_valid((const char *)r->p, len))
					return fail(r, KILN_REJECT_AVRO_DECODE, "map key is not UTF-8");
				if (r->out->len + len + 3 > r->max_out)
					return fail(r, KILN_REJECT_TOO_LARGE,
					            "decoded record larger than the record limit");
				if ((rc = kiln_buf_put_json_string(r->out, (const char *)r->p, len)) < 0 ||
				    (rc = put(r, ":", 1)) < 0)
					return rc;
				r->p += len;
				path_push(r, "{}", false, 0, &saved);
			} else {
				path_push(r, NULL, true, i, &saved);
			}
			if ((rc = value(r, n->children[0], depth + 1)) < 0)
				return rc;
			path_pop(r, saved);
		}
	}
	return put(r, map ? "}" : "]", 1);
}

static int value(reader *r, const kiln_avro_node *n, int depth)
{
	int64_t v;
	size_t len, saved;
	int rc;

	if (depth > KILN_AVRO_MAX_DEPTH)
		return fail(r, KILN_REJECT_AVRO_DECODE, "nested deeper than 64 levels");
	switch (n->type) {
	case KILN_AVRO_NULL:
		return puts_(r, "null");
	case KILN_AVRO_BOOLEAN:
		if (r->p >= r->end)
			return fail(r, KILN_REJECT_AVRO_DECODE, "truncated boolean");
		if (*r->p > 1)
			return fail(r, KILN_REJECT_AVRO_DECODE, "boolean is neither 0 nor 1");
		return puts_(r, *r->p++ ? "true" : "false");
	case KILN_AVRO_INT:
	case KILN_AVRO_LONG: {
		char s[32];
		if ((rc = n->type == KILN_AVRO_INT ? read_int(r, &v) : read_long(r, &v)) < 0)
			return rc;
		switch (n->logical) {
		case KILN_AVRO_DATE:
			return put_datetime(r, v, false, 0, 1, 0);
		case KILN_AVRO_TIME_MILLIS:
			return put_time(r, v, 1000, 3);
		case KILN_AVRO_TIME_MICROS:
			return put_time(r, v, 1000000, 6);
		case KILN_AVRO_TIMESTAMP_MILLIS:
		case KILN_AVRO_TIMESTAMP_MICROS: {
			int64_t per = n->logical == KILN_AVRO_TIMESTAMP_MILLIS ? 86400000LL : 86400000000LL;
			int64_t days = floor_div(v, per);
			return put_datetime(r, days, true, v - days * per,
			                    n->logical == KILN_AVRO_TIMESTAMP_MILLIS ? 1000 : 1000000,
			                    n->logical == KILN_AVRO_TIMESTAMP_MILLIS ? 3 : 6);
		}
		default:
			snprintf(s, sizeof(s), "%lld", (long long)v);
			return puts_(r, s);
		}
	}
	case KILN_AVRO_FLOAT: {
		float f;
		if (r->end - r->p < 4)
			return fail(r, KILN_REJECT_AVRO_DECODE, "truncated float");
		uint32_t u = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 |
		             (uint32_t)r->p[3] << 24;
		memcpy(&f, &u, 4);
		r->p += 4;
		return put_double(r, f, true);
	}
	case KILN_AVRO_DOUBLE: {
		double d;
		uint64_t u = 0;
		if (r->end - r->p < 8)
			return fail(r, KILN_REJECT_AVRO_DECODE, "truncated double");
		for (int i = 7; i >= 0; i--)
			u = u << 8 | r->p[i];
		memcpy(&d, &u, 8);
		r->p += 8;
		return put_double(r, d, false);
	}
	case KILN_AVRO_BYTES:
	case KILN_AVRO_FIXED: {
		const unsigned char *b = r->p;
		if (n->type == KILN_AVRO_BYTES) {
			if ((rc = read_len(r, &len)) < 0)
				return rc;
			b = r->p;
		} else {
			if ((uint64_t)n->size > (uint64_t)(r->end - r->p))
				return fail(r, KILN_REJECT_AVRO_DECODE, "truncated fixed");
			len = (size_t)n->size;
		}
		r->p += len;
		return n->logical == KILN_AVRO_DECIMAL ? put_decimal(r, n, b, len) : put_base64(r, b, len);
	}
	case KILN_AVRO_STRING:
		if ((rc = read_len(r, &len)) < 0)
			return rc;
		if (!kiln_utf8_valid((const char *)r->p, len))
			return fail(r, KILN_REJECT_AVRO_DECODE, "string is not UTF-8");
		if (r->out->len + len + 2 > r->max_out)
			return fail(r, KILN_REJECT_TOO_LARGE, "decoded record larger than the record limit");
		if ((rc = kiln_buf_put_json_string(r->out, (const char *)r->p, len)) < 0)
			return rc;
		if (r->out->len > r->max_out) /* escapes grew it */
			return fail(r, KILN_REJECT_TOO_LARGE, "decoded record larger than the record limit");
		r->p += len;
		return 0;
	case KILN_AVRO_RECORD:
		if ((rc = put(r, "{", 1)) < 0)
			return rc;
		for (size_t i = 0; i < n->count; i++) {
			if ((i && (rc = put(r, ",", 1)) < 0) ||
			    (rc = kiln_buf_put_json_string(r->out, n->names[i], strlen(n->names[i]))) < 0 ||
			    (rc = put(r, ":", 1)) < 0)
				return rc;
			path_push(r, n->names[i], false, 0, &saved);
			if ((rc = value(r, n->children[i], depth + 1)) < 0)
				return rc;
			path_pop(r, saved);
		}
		return put(r, "}", 1);
	case KILN_AVRO_ENUM:
		if ((rc = read_long(r, &v)) < 0)
			return rc;
		if (v < 0 || (uint64_t)v >= n->count)
			return fail(r, KILN_REJECT_AVRO_DECODE, "enum index out of range");
		return kiln_buf_put_json_string(r->out, n->names[v], strlen(n->names[v]));
	case KILN_AVRO_ARRAY:
	case KILN_AVRO_MAP:
		return blocks(r, n, depth);
	case KILN_AVRO_UNION:
		if ((rc = read_long(r, &v)) < 0)
			return rc;
		if (v < 0 || (uint64_t)v >= n->count)
			return fail(r, KILN_REJECT_AVRO_DECODE, "union index out of range");
		return value(r, n->children[v], depth + 1);
	}
	return fail(r, KILN_REJECT_AVRO_DECODE, "unknown type");
}

int kiln_avro_decode(const kiln_avro_node *root, const unsigned char *data, size_t len, size_t max_out,
                     kiln_buf *out, kiln_avro_error *err)
{
	reader r = {.p = data,
	            .end = data + len,
	            .start = data,
	            .max_out = out->len + max_out,
	            .out = out,
	            .err = err};
	int rc;

	memset(err, 0, sizeof(*err));
	if ((rc = value(&r, root, 0)) < 0)
		return rc;
	if (r.p != r.end)
		return fail(&r, KILN_REJECT_AVRO_DECODE, "bytes left after the record");
	return 0;
}
