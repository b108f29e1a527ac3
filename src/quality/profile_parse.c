/* profile.json read back (kiln_profile_parse_file: the decoder of what
 * profile.c's kiln_profile_render_file writes, docs/FORMATS.md) and the
 * sanity checks of a parsed or accumulated profile (kiln_profile_check). */
#include "quality/profile_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"
#include "core/array.h"
#include "core/error.h"

/* ---- parse ---- */

typedef struct preader {
	kiln_json_scanner *sc;
	const char *where;
	kiln_json_token t;
} preader;

static int bad(preader *r, const char *what)
{
	return kiln_error_set(KILN_EINVALID, "%s: %s", r->where, what);
}

static int next(preader *r)
{
	int rc = kiln_json_next(r->sc, &r->t);

	if (rc < 0 || r->t.type == KILN_JSON_NONE) {
		size_t at = 0;
		kiln_reject code = kiln_json_scanner_error(r->sc, &at, NULL);
		return kiln_error_set(KILN_EINVALID, "%s: not JSON (%s at byte %zu)", r->where,
		                      code ? kiln_reject_name(code) : "end of text", at);
	}
	return 0;
}

static int skip(preader *r)
{
	uint32_t depth = 0;
	int rc;

	do {
		if ((rc = next(r)) < 0)
			return rc;
		if (r->t.type == KILN_JSON_OBJECT_BEGIN || r->t.type == KILN_JSON_ARRAY_BEGIN)
			depth++;
		else if (r->t.type == KILN_JSON_OBJECT_END || r->t.type == KILN_JSON_ARRAY_END)
			depth--;
	} while (depth);
	return 0;
}

static bool key_is(const preader *r, const char *k)
{
	return r->t.len == strlen(k) && memcmp(r->t.ptr, k, r->t.len) == 0;
}

static int expect(preader *r, kiln_json_type type, const char *what)
{
	int rc = next(r);

	if (rc < 0)
		return rc;
	return r->t.type == type ? 0 : bad(r, what);
}

static int read_u64(preader *r, uint64_t *out)
{
	char *end;
	char text[32];
	int rc;

	if ((rc = expect(r, KILN_JSON_NUMBER, "a count is not a number")) < 0)
		return rc;
	if (!(r->t.flags & KILN_JSON_INTEGER) || r->t.ptr[0] == '-' || r->t.len >= sizeof(text))
		return bad(r, "a count is not a non-negative integer");
	memcpy(text, r->t.ptr, r->t.len);
	text[r->t.len] = '\0';
	*out = strtoull(text, &end, 10);
	return 0;
}

static int read_double(preader *r, double *out)
{
	char text[64];
	int rc;

	if ((rc = expect(r, KILN_JSON_NUMBER, "a figure is not a number")) < 0)
		return rc;
	if (r->t.len >= sizeof(text))
		return bad(r, "a figure is too long");
	memcpy(text, r->t.ptr, r->t.len);
	text[r->t.len] = '\0';
	*out = strtod(text, NULL);
	return 0;
}

static int read_string(preader *r, char **out)
{
	int rc;

	if ((rc = expect(r, KILN_JSON_STRING, "a name is not a string")) < 0)
		return rc;
	if (!(*out = malloc(r->t.len + 1)))
		return kiln_error_oom(NULL);
	(*out)[kiln_json_unescape(*out, r->t.len, &r->t)] = '\0';
	return 0;
}

/* The object after a key: calls each(r, ctx) on every key token. */
static int read_object(preader *r, int (*each)(preader *r, void *ctx), void *ctx)
{
	int rc;

	if ((rc = expect(r, KILN_JSON_OBJECT_BEGIN, "expected an object")) < 0)
		return rc;
	for (;;) {
		if ((rc = next(r)) < 0)
			return rc;
		if (r->t.type == KILN_JSON_OBJECT_END)
			return 0;
		if ((rc = each(r, ctx)) < 0)
			return rc;
	}
}

struct store_ctx {
	kiln_ddsketch *dd;
	bool negative;
	int32_t offset; /* rendered before "counts" */
};

static int store_key(preader *r, void *ctx)
{
	struct store_ctx *c = ctx;
	int rc;

	if (key_is(r, "offset")) {
		double v;
		if ((rc = read_double(r, &v)) < 0)
			return rc;
		if (v < -100000 || v > 100000)
			return bad(r, "a sketch bucket offset is out of range");
		c->offset = (int32_t)v;
		return 0;
	}
	if (!key_is(r, "counts"))
		return skip(r);
	if ((rc = expect(r, KILN_JSON_ARRAY_BEGIN, "sketch counts are not an array")) < 0)
		return rc;
	for (int32_t i = 0;; i++) {
		uint64_t n;
		char text[32];

		if ((rc = next(r)) < 0)
			return rc;
		if (r->t.type == KILN_JSON_ARRAY_END)
			return 0;
		if (r->t.type != KILN_JSON_NUMBER || !(r->t.flags & KILN_JSON_INTEGER) ||
		    r->t.len >= sizeof(text))
			return bad(r, "a sketch count is not an integer");
		memcpy(text, r->t.ptr, r->t.len);
		text[r->t.len] = '\0';
		n = strtoull(text, NULL, 10);
		if ((rc = kiln_dd_add_bucket(c->dd, c->negative, c->offset + i, n)) < 0)
			return rc;
	}
}

static int sketch_key(preader *r, void *ctx)
{
	kiln_ddsketch *dd = ctx;
	struct store_ctx sc = {dd, false, 0};

	if (key_is(r, "zero"))
		return read_u64(r, &dd->zero);
	if (key_is(r, "positive") || key_is(r, "negative")) {
		sc.negative = key_is(r, "negative");
		return read_object(r, store_key, &sc);
	}
	return skip(r);
}

static int number_key(preader *r, void *ctx)
{
	kiln_profile_field *f = ctx;
	double variance;
	int rc;

	if (key_is(r, "count"))
		return read_u64(r, &f->num.count);
	if (key_is(r, "min"))
		return read_double(r, &f->num.min);
	if (key_is(r, "max"))
		return read_double(r, &f->num.max);
	if (key_is(r, "mean"))
		return read_double(r, &f->num.mean);
	if (key_is(r, "variance")) {
		if ((rc = read_double(r, &variance)) < 0)
			return rc;
		f->num.m2 = variance * (double)f->num.count; /* count comes first */
		return 0;
	}
	if (key_is(r, "sketch"))
		return read_object(r, sketch_key, &f->dd);
	return skip(r);
}

static int string_key(preader *r, void *ctx)
{
	kiln_profile_field *f = ctx;

	if (key_is(r, "length_min"))
		return read_u64(r, &f->len_min);
	if (key_is(r, "length_max"))
		return read_u64(r, &f->len_max);
	if (key_is(r, "length_sum"))
		return read_u64(r, &f->len_sum);
	if (key_is(r, "empty"))
		return read_u64(r, &f->empty);
	return skip(r);
}

static int distinct_key(preader *r, void *ctx)
{
	kiln_profile_field *f = ctx;
	uint8_t bin[KILN_HLL_REGISTERS];
	size_t bin_len = 0;
	bool sparse = key_is(r, "sparse");
	int rc;

	if (!sparse && !key_is(r, "registers"))
		return skip(r);
	if ((rc = expect(r, KILN_JSON_STRING, "distinct registers are not a string")) < 0)
		return rc;
	if (!f->distinct.reg && !(f->distinct.reg = calloc(KILN_HLL_REGISTERS, 1)))
		return kiln_error_oom(NULL);
	if (kiln_base64_decode(bin, sizeof(bin), r->t.ptr, r->t.len, NULL, &bin_len) != 0 ||
	    (sparse ? bin_len % 3 != 0 : bin_len != KILN_HLL_REGISTERS))
		return bad(r, sparse ? "sparse registers are not base64 of 3-byte entries"
		                     : "registers are not base64 of 4096 bytes");
	if (!sparse) {
		memcpy(f->distinct.reg, bin, KILN_HLL_REGISTERS);
		return 0;
	}
	for (size_t i = 0; i < bin_len; i += 3) {
		uint32_t at = (uint32_t)bin[i] << 8 | bin[i + 1];
		if (at >= KILN_HLL_REGISTERS)
			return bad(r, "a sparse register index is out of range");
		f->distinct.reg[at] = bin[i + 2];
	}
	return 0;
}

/* "time": min and max come before "sketch" (as rendered) */
struct time_ctx {
	kiln_profile_field *f;
	bool min, max;
	uint64_t count; /* as written; the buckets must sum to it */
};

static int read_instant(preader *r, struct time_ctx *c, int64_t *out)
{
	int rc;

	if ((rc = expect(r, KILN_JSON_STRING, "a time is not a string")) < 0)
		return rc;
	if (!kiln_profile_parse_time(r->t.ptr, r->t.len, out))
		return bad(r, "a time is not an RFC 3339 date or date-time");
	c->f->date = r->t.len == 10;
	return 0;
}

static int time_sketch_key(preader *r, void *ctx)
{
	struct time_ctx *c = ctx;
	kiln_tsketch *s = &c->f->tm;
	uint64_t shift = 0;
	double offset = 0;
	int rc;

	if (key_is(r, "shift")) {
		if ((rc = read_u64(r, &shift)) < 0)
			return rc;
		if (shift > 40)
			return bad(r, "a time sketch's shift is out of range");
		s->shift = (uint32_t)shift;
		return 0;
	}
	if (key_is(r, "offset")) {
		if ((rc = read_double(r, &offset)) < 0)
			return rc;
		if (!(fabs(offset) < 1e15))
			return bad(r, "a time sketch's offset is out of range");
		s->offset = (int64_t)offset;
		return 0;
	}
	if (!key_is(r, "counts"))
		return skip(r);
	if (!c->min || !c->max)
		return bad(r, "a time sketch before its min and max");
	if (c->f->tm.min_ms > c->f->tm.max_ms)
		return bad(r, "a time's min is after its max");
	if ((rc = expect(r, KILN_JSON_ARRAY_BEGIN, "time sketch counts are not an array")) < 0)
		return rc;
	if (s->counts)
		return bad(r, "a time sketch has two counts");
	{
		uint32_t shift_at = s->shift;
		int64_t first = s->offset;

		s->shift = 0;
		s->offset = 0;
		s->count = 0;
		for (int64_t i = 0;; i++) {
			uint64_t n;
			char text[32];

			if ((rc = next(r)) < 0)
				return rc;
			if (r->t.type == KILN_JSON_ARRAY_END)
				break;
			if (r->t.type != KILN_JSON_NUMBER || !(r->t.flags & KILN_JSON_INTEGER) ||
			    r->t.ptr[0] == '-' || r->t.len >= sizeof(text) || i >= KILN_TS_MAX_BINS)
				return bad(r, "a time sketch count is not a count");
			memcpy(text, r->t.ptr, r->t.len);
			text[r->t.len] = '\0';
			n = strtoull(text, NULL, 10);
			if (n && (rc = kiln_ts_add_bucket(s, shift_at, first + i, n)) < 0)
				return bad(r, "a time sketch bucket lies outside its min and max");
		}
	}
	return 0;
}

static int time_key(preader *r, void *ctx)
{
	struct time_ctx *c = ctx;
	kiln_profile_field *f = c->f;
	int rc;

	if (key_is(r, "count"))
		return read_u64(r, &c->count);
	if (key_is(r, "min")) {
		c->min = true;
		return read_instant(r, c, &f->tm.min_ms);
	}
	if (key_is(r, "max")) {
		c->max = true;
		return read_instant(r, c, &f->tm.max_ms);
	}
	if (key_is(r, "sketch")) {
		if ((rc = read_object(r, time_sketch_key, c)) < 0)
			return rc;
		if (c->min && c->max && f->tm.min_ms > f->tm.max_ms)
			return bad(r, "a time's min is after its max");
		return 0;
	}
	return skip(r);
}

static int types_key(preader *r, void *ctx)
{
	kiln_profile_field *f = ctx;

	for (int t = 0; t < KILN_PTYPE_COUNT_; t++)
		if (key_is(r, kiln_ptype_name((kiln_ptype)t)))
			return read_u64(r, &f->types[t]);
	return skip(r);
}

static int category_key(preader *r, void *ctx)
{
	kiln_profile_field *f = ctx;
	char *name = malloc(r->t.len + 1);
	uint64_t n;
	int rc;

	if (!name)
		return kiln_error_oom(NULL);
	name[kiln_json_unescape(name, r->t.len, &r->t)] = '\0';
	if ((rc = read_u64(r, &n)) == 0)
		rc = kiln_profile_add_category(f, name, strlen(name), n);
	free(name);
	return rc;
}

static int field_key(preader *r, void *ctx)
{
	kiln_profile_field *f = ctx;
	int rc;

	if (key_is(r, "path")) {
		free(f->path);
		return read_string(r, &f->path);
	}
	if (key_is(r, "parent")) {
		free(f->parent);
		return read_string(r, &f->parent);
	}
	if (key_is(r, "profiled")) {
		if ((rc = expect(r, KILN_JSON_STRING, "profiled is not a string")) < 0)
			return rc;
		f->tokens = r->t.len == 6 && memcmp(r->t.ptr, "tokens", 6) == 0;
		return 0;
	}
	if (key_is(r, "item")) {
		if ((rc = next(r)) < 0)
			return rc;
		f->item = r->t.type == KILN_JSON_TRUE;
		return 0;
	}
	if (key_is(r, "present"))
		return read_u64(r, &f->present);
	if (key_is(r, "types"))
		return read_object(r, types_key, f);
	if (key_is(r, "number"))
		return read_object(r, number_key, f);
	if (key_is(r, "string"))
		return read_object(r, string_key, f);
	if (key_is(r, "distinct"))
		return read_object(r, distinct_key, f);
	if (key_is(r, "categories"))
		return read_object(r, category_key, f);
	if (key_is(r, "categories_k")) {
		uint64_t k;
		if ((rc = read_u64(r, &k)) < 0)
			return rc;
		if (k < 1 || k > KILN_PROFILE_CATEGORIES_K_MAX)
			return bad(r, "categories_k is out of range");
		f->cat_k = (uint32_t)k;
		return 0;
	}
	if (key_is(r, "time")) {
		struct time_ctx c = {f, false, false, 0};
		f->time = true;
		if (f->tm.count || f->tm.counts)
			return bad(r, "a field has two times");
		if ((rc = read_object(r, time_key, &c)) < 0)
			return rc;
		if (c.count != f->tm.count)
			return bad(r, "a time sketch does not count its times");
		return 0;
	}
	return skip(r);
}

static int profile_key(preader *r, void *ctx)
{
	kiln_profile *p = ctx;
	int rc;

	if (key_is(r, "records"))
		return read_u64(r, &p->records);
	if (key_is(r, "omitted"))
		return read_u64(r, &p->omitted);
	if (!key_is(r, "fields"))
		return skip(r);
	if ((rc = expect(r, KILN_JSON_ARRAY_BEGIN, "fields is not an array")) < 0)
		return rc;
	for (;;) {
		kiln_profile_field f = {0};

		if ((rc = next(r)) < 0)
			return rc;
		if (r->t.type == KILN_JSON_ARRAY_END)
			return 0;
		if (r->t.type != KILN_JSON_OBJECT_BEGIN)
			return bad(r, "a field is not an object");
		for (;;) {
			if ((rc = next(r)) < 0 || r->t.type == KILN_JSON_OBJECT_END)
				break;
			if ((rc = field_key(r, &f)) < 0)
				break;
		}
		if (rc == 0 && !f.path)
			rc = bad(r, "a field has no path");
		/* strings of a values field without categories: their names
		 * were never counted (a profile.json before categories from the
		 * data) or passed k, and never can be again */
		if (!f.tokens && !f.cat_count && f.types[KILN_PTYPE_STRING])
			f.cat_over = true;
		if (f.cat_k && f.cat_over)
			rc = bad(r, "categories_k without categories");
		if (rc == 0)
			rc = KILN_ARRAY_GROW(p->fields, p->cap, p->count, NULL);
		if (rc < 0) {
			kiln_profile_field_free(&f);
			return rc;
		}
		p->fields[p->count++] = f;
	}
}

struct file_ctx {
	kiln_profile *total, *added;
	bool format;
};

static int file_key(preader *r, void *ctx)
{
	struct file_ctx *c = ctx;
	kiln_profile scratch = {0};
	int rc;

	if (key_is(r, "format")) {
		if ((rc = expect(r, KILN_JSON_STRING, "format is not a string")) < 0)
			return rc;
		if (r->t.len != strlen(KILN_PROFILE_FORMAT) ||
		    memcmp(r->t.ptr, KILN_PROFILE_FORMAT, r->t.len) != 0)
			return bad(r, "format is not " KILN_PROFILE_FORMAT);
		c->format = true;
		return 0;
	}
	if (key_is(r, "total") || key_is(r, "added")) {
		kiln_profile *p = key_is(r, "total") ? c->total : c->added;
		rc = read_object(r, profile_key, p ? p : &scratch);
		kiln_profile_free(&scratch);
		return rc;
	}
	return skip(r);
}

int kiln_profile_parse_file(const char *text, size_t len, const char *where, kiln_profile *total,
                            kiln_profile *added)
{
	kiln_json_limits limits = {0};
	preader r = {.where = where};
	struct file_ctx c = {total, added, false};
	int rc;

	if (total)
		memset(total, 0, sizeof(*total));
	if (added)
		memset(added, 0, sizeof(*added));
	if (!(r.sc = kiln_json_scanner_new(&limits)))
		return kiln_error_oom(NULL);
	kiln_json_scanner_reset(r.sc, text, len);
	rc = read_object(&r, file_key, &c);
	if (rc == 0 && !c.format)
		rc = bad(&r, "no format");
	kiln_json_scanner_free(r.sc);
	if (rc < 0) {
		kiln_profile_free(total);
		kiln_profile_free(added);
	}
	return rc;
}

/* ---- checks ---- */

static int insane(const char *where, const char *part, const kiln_profile_field *f, const char *what)
{
	return kiln_error_set(KILN_EINVALID, "%s: %s: field %s: %s", where, part, f->path, what);
}

/* The value of the sketch's lowest or highest non-empty bucket. */
static double sketch_end(const kiln_ddsketch *dd, bool highest)
{
	return kiln_dd_quantile(dd, highest ? 1.0 : 0.0);
}

static int check_field(const kiln_profile *p, const kiln_profile_field *f, const char *where,
                       const char *part)
{
	uint64_t types = 0, strings = f->types[KILN_PTYPE_STRING], cats = 0, base;
	uint64_t numbers = f->types[KILN_PTYPE_INTEGER] + f->types[KILN_PTYPE_NUMBER], most;

	for (int t = 0; t < KILN_PTYPE_COUNT_; t++) {
		if (f->types[t] > f->present || types + f->types[t] < types)
			return insane(where, part, f, "its types do not sum to its values");
		types += f->types[t];
	}
	if (types != f->present)
		return insane(where, part, f, "its types do not sum to its values");
	if (!f->item) {
		const kiln_profile_field *parent = f->parent ? kiln_profile_find(p, f->parent) : NULL;
		base = !f->parent ? p->records : parent ? parent->types[KILN_PTYPE_OBJECT] : UINT64_MAX;
		if (f->present > base)
			return insane(where, part, f, "more values than records (or enclosing objects)");
	}
	if (f->tokens &&
	    (f->num.count || kiln_dd_count(&f->dd) || f->len_max || f->len_sum || f->empty || f->cat_count))
		return insane(where, part, f, "profiled by tokens, yet it has figures of values");
	if (f->num.count > numbers || kiln_dd_count(&f->dd) != f->num.count)
		return insane(where, part, f, "its number sketch does not count its numbers");
	if (f->num.count) {
		double slack_lo = KILN_DD_ALPHA * fabs(f->num.min) + KILN_DD_MIN_ABS,
		       slack_hi = KILN_DD_ALPHA * fabs(f->num.max) + KILN_DD_MIN_ABS;
		if (!isfinite(f->num.min) || !isfinite(f->num.max) || !isfinite(f->num.mean) ||
		    !(f->num.m2 >= 0) || f->num.min > f->num.max || f->num.mean < f->num.min - slack_lo ||
		    f->num.mean > f->num.max + slack_hi)
			return insane(where, part, f, "its numbers' min, mean, max or variance disagree");
		if (sketch_end(&f->dd, false) < f->num.min - slack_lo ||
		    sketch_end(&f->dd, true) > f->num.max + slack_hi)
			return insane(where, part, f, "its quantiles fall outside [min, max]");
	}
	if (strings == 0 && (f->len_min || f->len_max || f->len_sum || f->empty))
		return insane(where, part, f, "string figures without strings");
	if (strings && (f->empty > strings || f->len_min > f->len_max || f->len_sum < f->len_min ||
	                (f->len_max && f->len_sum / f->len_max > strings) || (f->empty && f->len_min) ||
	                (f->empty == strings && f->len_max)))
		return insane(where, part, f, "its string lengths disagree with its string count");
	if (f->cat_k) {
		uint64_t sum = 0;
		for (size_t i = 0; i < f->cat_count; i++)
			sum += f->cat_counts[i];
		if (f->cat_count > f->cat_k || sum != strings)
			return insane(where, part, f,
			              "its categories from the data do not count its strings");
	}
	if (f->tm.count && (f->tokens || f->tm.count > strings || f->tm.min_ms > f->tm.max_ms))
		return insane(where, part, f, "its times do not count its strings");
	most = f->present - f->types[KILN_PTYPE_NULL];
	for (size_t i = 0; i < f->cat_count; i++) {
		if (f->cat_counts[i] > most || cats + f->cat_counts[i] > most)
			return insane(where, part, f, "its categories count more than its values");
		cats += f->cat_counts[i];
	}
	return 0;
}

static int check_profile(const kiln_profile *p, const char *where, const char *part)
{
	int rc;

	for (size_t i = 0; i < p->count; i++)
		if ((rc = check_field(p, &p->fields[i], where, part)) < 0)
			return rc;
	return 0;
}

int kiln_profile_check(const kiln_profile *total, const kiln_profile *added, uint64_t valid,
                       const char *where)
{
	int rc;

	if (total->records > valid)
		return kiln_error_set(KILN_EINVALID,
		                      "%s: total holds %llu records, stats.json %llu valid ones", where,
		                      (unsigned long long)total->records, (unsigned long long)valid);
	if (added && added->records > total->records)
		return kiln_error_set(KILN_EINVALID, "%s: added holds %llu records, total only %llu", where,
		                      (unsigned long long)added->records, (unsigned long long)total->records);
	if ((rc = check_profile(total, where, "total")) < 0)
		return rc;
	return added ? check_profile(added, where, "added") : 0;
}
