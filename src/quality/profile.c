/* Data profiles (see profile.h): accumulation from curated values, merge,
 * and the profile.json codec (docs/FORMATS.md). */
#include "quality/profile.h"

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/base64.h"
#include "core/array.h"
#include "core/error.h"
#include "quality/profile_internal.h"

/* the quantiles profile.json lists (the sketch answers any other) */
static const double QUANTILES[] = {0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99};
static const char *const QUANTILE_NAMES[] = {"p01", "p05", "p25", "p50", "p75", "p95", "p99"};
#define QUANTILE_COUNT (sizeof(QUANTILES) / sizeof(QUANTILES[0]))

static const char *const PTYPE_NAMES[KILN_PTYPE_COUNT_] = {"null",   "boolean", "integer", "number",
                                                           "string", "object",  "array"};

const char *kiln_ptype_name(kiln_ptype t)
{
	return t < KILN_PTYPE_COUNT_ ? PTYPE_NAMES[t] : "?";
}

/* ---- schema ---- */

/* A field's enum values sorted for lookup: strings and booleans by (kind,
 * length, bytes), numbers by value; each entry the enum index. */
struct schema_field {
	const kiln_field *field;
	const char *path, *parent;
	bool tokens, item;
	bool infer, time, date; /* categories from the data; instants; dates */
	uint32_t *by_text, *by_number;
	size_t text_count, number_count;
	/* the text entries again, hashed (kiln_hll_hash of the text, the hash
	 * a string value has already): open addressing, UINT32_MAX empty, each
	 * text once, as the first of its equal entries */
	uint32_t *text_table, table_mask;
};

struct kiln_profile_schema {
	struct schema_field *v;
	size_t count, cap;
	uint64_t omitted;     /* fields past KILN_PROFILE_MAX_FIELDS */
	uint32_t *slot_of_id; /* kiln_field.id -> index in v (UINT32_MAX: none) */
	uint32_t ids;
	uint32_t cat_k; /* categories from the data (with a screen) */
	kiln_profile_screen_fn screen;
	void *screen_ctx;
	void (*free_screen_ctx)(void *);
};

static bool personal(const kiln_field *f)
{
	return f->pseudo_mode != KILN_PSEUDO_KEEP || f->pii_scan ||
	       (f->classification && strcasecmp(f->classification, "pii") == 0);
}

static int schema_walk(kiln_profile_schema *s, const kiln_field *f, const char *parent, bool tokens,
                       bool item)
{
	int rc;

	if (s->count >= KILN_PROFILE_MAX_FIELDS) {
		s->omitted++;
		goto children;
	}
	if (KILN_ARRAY_GROW(s->v, s->cap, s->count, NULL) < 0)
		return KILN_ENOMEM;
	tokens = tokens || personal(f);
	{
		bool date = f->type == KILN_LTYPE_DATE || f->format == KILN_FORMAT_DATE;
		bool time = !tokens &&
		            (date || f->type == KILN_LTYPE_TIMESTAMP || f->format == KILN_FORMAT_DATE_TIME);
		bool infer = !tokens && !time && f->type == KILN_LTYPE_STRING && !f->enum_count;
		s->v[s->count++] = (struct schema_field){.field = f,
		                                         .path = f->path,
		                                         .parent = parent,
		                                         .tokens = tokens,
		                                         .item = item,
		                                         .infer = infer,
		                                         .time = time,
		                                         .date = date && time};
	}
children:
	tokens = tokens || personal(f);
	for (size_t i = 0; i < f->child_count; i++)
		if ((rc = schema_walk(s, f->children[i], f->path, tokens, false)) < 0)
			return rc;
	if (f->items && (rc = schema_walk(s, f->items, f->path, tokens, true)) < 0)
		return rc;
	return 0;
}

/* The enum order of sort_enum's array: (kind, length, bytes) for strings
 * and booleans, the value for numbers. */
static _Thread_local const kiln_field *sorting; /* qsort has no context argument */

static int text_key_cmp(const kiln_field *f, uint32_t e, kiln_enum_kind kind, const char *v, size_t n)
{
	if (f->enum_kinds[e] != kind)
		return f->enum_kinds[e] < kind ? -1 : 1;
	if (f->enum_lens[e] != n)
		return f->enum_lens[e] < n ? -1 : 1;
	return memcmp(f->enum_values[e], v, n);
}

static int by_text_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c =
	    text_key_cmp(sorting, x, sorting->enum_kinds[y], sorting->enum_values[y], sorting->enum_lens[y]);

	return c ? c : (x > y) - (x < y);
}

static int by_number_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	double u = (double)sorting->enum_numbers[x], v = (double)sorting->enum_numbers[y];

	return u < v ? -1 : u > v ? 1 : (x > y) - (x < y);
}

/* sf's text entries into text_table, in sorted order: of equal entries
 * (kind, bytes) the first, the one enum_find's binary search finds. */
static int hash_enum(struct schema_field *sf)
{
	const kiln_field *f = sf->field;
	size_t size = 8;

	if (!sf->text_count)
		return 0;
	while (size < 2 * sf->text_count)
		size *= 2;
	if (size > UINT32_MAX || !(sf->text_table = malloc(size * sizeof(uint32_t))))
		return kiln_error_oom(NULL);
	memset(sf->text_table, 0xff, size * sizeof(uint32_t));
	sf->table_mask = (uint32_t)(size - 1);
	for (size_t i = 0; i < sf->text_count; i++) {
		uint32_t e = sf->by_text[i];
		uint32_t at = (uint32_t)kiln_hll_hash(f->enum_values[e], f->enum_lens[e]) & sf->table_mask;

		if (i > 0 && text_key_cmp(f, sf->by_text[i - 1], f->enum_kinds[e], f->enum_values[e],
		                          f->enum_lens[e]) == 0)
			continue; /* equal to the one before: that one is in */
		while (sf->text_table[at] != UINT32_MAX)
			at = (at + 1) & sf->table_mask;
		sf->text_table[at] = e;
	}
	return 0;
}

/* sf's enum values sorted (qsort of the enum indices, once per schema). */
static int sort_enum(struct schema_field *sf)
{
	const kiln_field *f = sf->field;

	if (!f->enum_count || f->enum_count > UINT32_MAX)
		return 0;
	if (!(sf->by_text = malloc(f->enum_count * sizeof(uint32_t))) ||
	    !(sf->by_number = malloc(f->enum_count * sizeof(uint32_t))))
		return kiln_error_oom(NULL);
	for (uint32_t e = 0; e < f->enum_count; e++)
		if (f->enum_kinds[e] == KILN_ENUM_NUMBER)
			sf->by_number[sf->number_count++] = e;
		else
			sf->by_text[sf->text_count++] = e;
	sorting = f;
	qsort(sf->by_text, sf->text_count, sizeof(uint32_t), by_text_cmp);
	qsort(sf->by_number, sf->number_count, sizeof(uint32_t), by_number_cmp);
	sorting = NULL;
	return hash_enum(sf);
}

int kiln_profile_schema_new(kiln_profile_schema **out, const kiln_contract *contract)
{
	kiln_profile_schema *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (!s)
		return kiln_error_oom(NULL);
	for (size_t i = 0; i < contract->root->child_count; i++)
		if ((rc = schema_walk(s, contract->root->children[i], NULL, false, false)) < 0) {
			kiln_profile_schema_free(s);
			return rc;
		}
	for (size_t i = 0; i < s->count; i++)
		if (!s->v[i].tokens && (rc = sort_enum(&s->v[i])) < 0) {
			kiln_profile_schema_free(s);
			return rc;
		}
	s->ids = contract->field_count + 1;
	if (!(s->slot_of_id = malloc(s->ids * sizeof(*s->slot_of_id)))) {
		kiln_profile_schema_free(s);
		return kiln_error_oom(NULL);
	}
	memset(s->slot_of_id, 0xff, s->ids * sizeof(*s->slot_of_id));
	for (size_t i = 0; i < s->count; i++)
		if (s->v[i].field->id < s->ids)
			s->slot_of_id[s->v[i].field->id] = (uint32_t)i;
	*out = s;
	return 0;
}

int kiln_profile_schema_set_categories(kiln_profile_schema *s, uint32_t k, kiln_profile_screen_fn screen,
                                       void *ctx, void (*free_ctx)(void *))
{
	if (s->free_screen_ctx)
		s->free_screen_ctx(s->screen_ctx);
	s->screen = NULL;
	s->screen_ctx = NULL;
	s->free_screen_ctx = NULL;
	if (k < 1 || k > KILN_PROFILE_CATEGORIES_K_MAX) {
		if (free_ctx)
			free_ctx(ctx);
		return kiln_error_set(KILN_EINVALID, "profile: categories k %u is not in 1..%d", k,
		                      KILN_PROFILE_CATEGORIES_K_MAX);
	}
	s->cat_k = k;
	s->screen = screen;
	s->screen_ctx = ctx;
	s->free_screen_ctx = free_ctx;
	return 0;
}

void kiln_profile_schema_free(kiln_profile_schema *s)
{
	if (!s)
		return;
	if (s->free_screen_ctx)
		s->free_screen_ctx(s->screen_ctx);
	for (size_t i = 0; i < s->count; i++) {
		free(s->v[i].by_text);
		free(s->v[i].text_table);
		free(s->v[i].by_number);
	}
	free(s->v);
	free(s->slot_of_id);
	free(s);
}

static long schema_index(const kiln_profile_schema *s, const kiln_field *f)
{
	return f->id < s->ids && s->slot_of_id[f->id] != UINT32_MAX ? (long)s->slot_of_id[f->id] : -1;
}

/* ---- profiles ---- */

void kiln_profile_field_free(kiln_profile_field *f)
{
	free(f->path);
	free(f->parent);
	kiln_dd_free(&f->dd);
	kiln_ts_free(&f->tm);
	kiln_hll_free(&f->distinct);
	for (size_t i = 0; i < f->cat_count; i++)
		free(f->cat_names[i]);
	free(f->cat_names);
	free(f->cat_counts);
	free(f->cat_index);
	memset(f, 0, sizeof(*f));
}

static void field_clear(kiln_profile_field *f)
{
	f->present = 0;
	memset(f->types, 0, sizeof(f->types));
	memset(&f->num, 0, sizeof(f->num));
	kiln_dd_free(&f->dd);
	f->len_min = f->len_max = f->len_sum = f->empty = 0;
	kiln_ts_free(&f->tm);
	if (f->distinct.reg)
		memset(f->distinct.reg, 0, KILN_HLL_REGISTERS);
	f->distinct.pending = 0;
	if (f->cat_k) {
		kiln_profile_drop_categories(f);
		f->cat_over = false;
	} else if (f->cat_counts) {
		memset(f->cat_counts, 0, f->cat_count * sizeof(*f->cat_counts));
	}
}

/* A new field at the end of p (path copied); *out its address. */
static int append_field(kiln_profile *p, const char *path, const char *parent, kiln_profile_field **out)
{
	kiln_profile_field *f;

	if (KILN_ARRAY_GROW(p->fields, p->cap, p->count, NULL) < 0)
		return KILN_ENOMEM;
	f = &p->fields[p->count];
	memset(f, 0, sizeof(*f));
	if (!(f->path = strdup(path)) || (parent && !(f->parent = strdup(parent)))) {
		kiln_profile_field_free(f);
		return kiln_error_oom(NULL);
	}
	p->count++;
	*out = f;
	return 0;
}

int kiln_profile_init(kiln_profile *p, const kiln_profile_schema *s)
{
	int rc;

	memset(p, 0, sizeof(*p));
	p->omitted = s->omitted;
	for (size_t i = 0; i < s->count; i++) {
		const struct schema_field *sf = &s->v[i];
		kiln_profile_field *f = NULL;

		if ((rc = append_field(p, sf->path, sf->parent, &f)) < 0)
			goto fail;
		f->tokens = sf->tokens;
		f->item = sf->item;
		f->time = sf->time;
		f->date = sf->date;
		f->cat_k = sf->infer && s->screen ? s->cat_k : 0;
		if (f->tokens || f->cat_k)
			continue;
		for (size_t e = 0; e < sf->field->enum_count; e++)
			if ((rc = kiln_profile_add_category(f, sf->field->enum_values[e],
			                                    sf->field->enum_lens[e], 0)) < 0)
				goto fail;
		if (!sf->field->enum_count && sf->field->type == KILN_LTYPE_BOOLEAN &&
		    ((rc = kiln_profile_add_category(f, "false", 5, 0)) < 0 ||
		     (rc = kiln_profile_add_category(f, "true", 4, 0)) < 0))
			goto fail;
	}
	return 0;
fail:
	kiln_profile_free(p);
	return rc;
}

void kiln_profile_free(kiln_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->count; i++)
		kiln_profile_field_free(&p->fields[i]);
	free(p->fields);
	memset(p, 0, sizeof(*p));
}

void kiln_profile_clear(kiln_profile *p)
{
	p->records = 0;
	for (size_t i = 0; i < p->count; i++)
		field_clear(&p->fields[i]);
}

/* Continuation bytes (10xxxxxx) among the 8 bytes of w: a flag per byte,
 * summed by a multiply (a popcount instruction is not in the baseline
 * x86-64 the build targets). */
static uint64_t continuations8(uint64_t w)
{
	if (!(w & 0x8080808080808080ull))
		return 0; /* ASCII */
	return (((w & ~(w << 1) & 0x8080808080808080ull) >> 7) * 0x0101010101010101ull) >> 56;
}

/* Code points of UTF-8 text (valid: the validator checked it). */
static uint64_t code_points(const char *s, size_t n)
{
	uint64_t continuation = 0, w;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&w, s + i, 8);
		continuation += continuations8(w);
	}
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (i < n && n >= 8) {
		/* the last word of s, the bytes counted already shifted out */
		memcpy(&w, s + n - 8, 8);
		return n - continuation - continuations8(w >> (8 * (8 - (n - i))));
	}
#endif
	for (; i < n; i++)
		continuation += ((unsigned char)s[i] & 0xC0) == 0x80;
	return n - continuation;
}

static void add_length(kiln_profile_field *f, uint64_t len)
{
	if (f->types[KILN_PTYPE_STRING] == 1 || len < f->len_min)
		f->len_min = len;
	if (len > f->len_max)
		f->len_max = len;
	f->len_sum += len;
	f->empty += len == 0;
}

/* The enum index of a value by binary search of sf's sorted enum: the
 * first of equal entries, as a scan in enum order would find; -1 when
 * none matches. */
static long enum_find(const struct schema_field *sf, kiln_json_type type, const char *v, size_t n,
                      double number, uint64_t hash)
{
	const kiln_field *cf = sf->field;
	const uint32_t *order = type == KILN_JSON_NUMBER ? sf->by_number : sf->by_text;
	size_t lo = 0, hi = type == KILN_JSON_NUMBER ? sf->number_count : sf->text_count;
	kiln_enum_kind kind = type == KILN_JSON_STRING ? KILN_ENUM_STRING : KILN_ENUM_BOOLEAN;
	size_t count = hi;

	if (type == KILN_JSON_TRUE || type == KILN_JSON_FALSE) {
		v = type == KILN_JSON_TRUE ? "true" : "false";
		n = strlen(v);
		hash = kiln_hll_hash(v, n);
	}
	if (type != KILN_JSON_NUMBER && sf->text_table) {
		/* the same entry as the search below, by the value's hash */
		for (uint32_t at = (uint32_t)hash & sf->table_mask;; at = (at + 1) & sf->table_mask) {
			uint32_t e = sf->text_table[at];
			if (e == UINT32_MAX)
				return -1;
			kiln_profile_probe();
			if (text_key_cmp(cf, e, kind, v, n) == 0)
				return (long)e;
		}
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c;

		kiln_profile_probe();
		if (type == KILN_JSON_NUMBER) {
			double x = (double)cf->enum_numbers[order[mid]];
			c = x < number ? -1 : x > number ? 1 : 0;
		} else {
			c = text_key_cmp(cf, order[mid], kind, v, n);
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == count)
		return -1;
	if (type == KILN_JSON_NUMBER)
		return (double)cf->enum_numbers[order[lo]] == number ? (long)order[lo] : -1;
	return text_key_cmp(cf, order[lo], kind, v, n) == 0 ? (long)order[lo] : -1;
}

static void count_category(kiln_profile_field *f, const struct schema_field *sf, kiln_json_type type,
                           const char *v, size_t n, double number, uint64_t hash)
{
	const kiln_field *cf = sf->field;
	long e = -1;

	if (!f->cat_count)
		return;
	if (!cf->enum_count) { /* a boolean field: false, true */
		if (type == KILN_JSON_FALSE || type == KILN_JSON_TRUE)
			f->cat_counts[type == KILN_JSON_TRUE]++;
		return;
	}
	e = enum_find(sf, type, v, n, number, hash);
	if (e >= 0 && (size_t)e < f->cat_count)
		f->cat_counts[e]++;
}

/* 10^0 .. 10^22: every one an exact double */
static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A JSON number (valid: the validator checked it) as strtod reads it, for
 * the shapes that need no strtod: an integer or a decimal fraction, no
 * exponent, with at most 15 digits in all. Its digits and the power of ten
 * are exact doubles, so the one division rounds once, to the double
 * nearest the number, as strtod's result is (Clinger's fast path).
 * *integer: no fraction. false: another shape, nothing set. */
static bool fast_number(const char *t, size_t len, double *out, bool *integer)
{
	uint64_t m = 0;
	size_t digits = 0, fraction = 0;
	bool point = false, negative;

	if (len == 0 || len > 17)
		return false;
	negative = t[0] == '-';
	for (size_t i = negative; i < len; i++) {
		unsigned char c = (unsigned char)t[i];
		if (c >= '0' && c <= '9') {
			m = m * 10 + (c - '0');
			digits++;
			fraction += point;
		} else if (c == '.' && !point) {
			point = true;
		} else {
			return false; /* an exponent */
		}
	}
	if (digits == 0 || digits > 15)
		return false;
	*out = negative ? -((double)m / POW10[fraction]) : (double)m / POW10[fraction];
	*integer = !point;
	return true;
}

int kiln_profile_add_value(kiln_profile *p, const kiln_profile_schema *s, const kiln_field *cf,
                           kiln_json_type type, bool escaped, const char *text, size_t len)
{
	long index = cf ? schema_index(s, cf) : -1;
	kiln_profile_field *f;
	char small[256], *big = NULL;
	const char *v = text;
	size_t n = len;
	double number = 0;
	uint64_t hash;
	bool integer;
	int rc = 0;

	if (index < 0 || (size_t)index >= p->count)
		return 0; /* outside the contract (allowed unknown fields): not profiled */
	f = &p->fields[index];
	if ((size_t)index + 1 < p->count) {
		/* records mostly follow the contract's order: the next value's
		 * field is likely the next one (its first members, a hint) */
		__builtin_prefetch(f + 1, 1);
		__builtin_prefetch((const char *)(f + 1) + 64, 1);
		__builtin_prefetch((const char *)(f + 1) + 128, 1);
	}
	f->present++;
	switch (type) {
	case KILN_JSON_NULL:
		f->types[KILN_PTYPE_NULL]++;
		return 0;
	case KILN_JSON_TRUE:
	case KILN_JSON_FALSE:
		f->types[KILN_PTYPE_BOOLEAN]++;
		if (!f->tokens)
			count_category(f, &s->v[index], type, NULL, 0, 0, 0);
		return 0;
	case KILN_JSON_OBJECT_BEGIN:
		f->types[KILN_PTYPE_OBJECT]++;
		return 0;
	case KILN_JSON_ARRAY_BEGIN:
		f->types[KILN_PTYPE_ARRAY]++;
		return 0;
	case KILN_JSON_STRING:
		f->types[KILN_PTYPE_STRING]++;
		if (escaped) {
			kiln_json_token t = {
			    .type = KILN_JSON_STRING, .flags = KILN_JSON_ESCAPED, .ptr = text, .len = len};
			char *d = len <= sizeof(small) ? small : (big = malloc(len));
			if (!d)
				return kiln_error_oom(NULL);
			n = kiln_json_unescape(d, len, &t);
			v = d;
		}
		hash = kiln_hll_hash(v, n);
		rc = kiln_hll_add(&f->distinct, hash);
		if (rc == 0 && !f->tokens) {
			add_length(f, code_points(v, n));
			if (f->time)
				rc = kiln_profile_add_time(f, v, n);
			if (rc == 0 && f->cat_k)
				rc = kiln_profile_infer_add(f, s->screen, s->screen_ctx, v, n);
			else if (f->cat_count)
				count_category(f, &s->v[index], type, v, n, 0, hash);
		}
		free(big);
		return rc;
	case KILN_JSON_NUMBER:
		if (!fast_number(text, len, &number, &integer)) {
			integer =
			    !memchr(text, '.', len) && !memchr(text, 'e', len) && !memchr(text, 'E', len);
			number = 0;
			if (len < sizeof(small)) {
				memcpy(small, text, len);
				small[len] = '\0';
				number = strtod(small, NULL);
			}
		}
		f->types[integer ? KILN_PTYPE_INTEGER : KILN_PTYPE_NUMBER]++;
		if ((rc = kiln_hll_add(&f->distinct, kiln_hll_hash(text, len))) < 0 || f->tokens)
			return rc;
		if (isfinite(number)) {
			kiln_moments_add(&f->num, number);
			rc = kiln_dd_add(&f->dd, number);
		}
		count_category(f, &s->v[index], type, NULL, 0, number, 0);
		return rc;
	default:
		return 0;
	}
}

static kiln_profile_field *find(kiln_profile *p, const char *path, size_t hint)
{
	if (hint < p->count && strcmp(p->fields[hint].path, path) == 0)
		return &p->fields[hint];
	for (size_t i = 0; i < p->count; i++)
		if (strcmp(p->fields[i].path, path) == 0)
			return &p->fields[i];
	return NULL;
}

const kiln_profile_field *kiln_profile_find(const kiln_profile *p, const char *path)
{
	return find((kiln_profile *)p, path, 0);
}

/* b's category counts into a's by name, names only b has appended in b's
 * order: a lookup each, O((ka + kb) log(ka + kb)). */
static int merge_categories(kiln_profile_field *a, const kiln_profile_field *b)
{
	long *at;
	size_t known = a->cat_count;
	int rc = 0;

	if (!b->cat_count)
		return 0;
	if (!(at = malloc(b->cat_count * sizeof(*at))))
		return kiln_error_oom(NULL);
	for (size_t i = 0; i < b->cat_count; i++)
		if ((at[i] = kiln_profile_category(a, b->cat_names[i], strlen(b->cat_names[i]))) < 0 &&
		    known && !a->cat_index) {
			rc = kiln_error_oom(NULL);
			goto done;
		}
	for (size_t i = 0; i < b->cat_count; i++) {
		if (at[i] < 0) {
			at[i] = (long)a->cat_count;
			if ((rc = kiln_profile_add_category(a, b->cat_names[i], strlen(b->cat_names[i]), 0)) <
			    0)
				goto done;
		}
		a->cat_counts[at[i]] += b->cat_counts[i];
	}
done:
	free(at);
	return rc;
}

static int merge_field(kiln_profile_field *a, const kiln_profile_field *b)
{
	int rc;

	if (b->types[KILN_PTYPE_STRING] && (!a->types[KILN_PTYPE_STRING] || b->len_min < a->len_min))
		a->len_min = b->len_min;
	if (b->len_max > a->len_max)
		a->len_max = b->len_max;
	a->len_sum += b->len_sum;
	a->empty += b->empty;
	a->present += b->present;
	for (int t = 0; t < KILN_PTYPE_COUNT_; t++)
		a->types[t] += b->types[t];
	a->tokens = a->tokens || b->tokens;
	a->time = a->time || b->time;
	a->date = a->date || b->date;
	kiln_moments_merge(&a->num, &b->num);
	if ((rc = kiln_dd_merge(&a->dd, &b->dd)) < 0 || (rc = kiln_ts_merge(&a->tm, &b->tm)) < 0 ||
	    (rc = kiln_hll_merge(&a->distinct, &b->distinct)) < 0)
		return rc;
	if (a->cat_k || b->cat_k || a->cat_over || b->cat_over)
		return kiln_profile_infer_merge(a, b, merge_categories);
	return merge_categories(a, b);
}

int kiln_profile_merge(kiln_profile *into, const kiln_profile *from)
{
	int rc;

	into->records += from->records;
	if (from->omitted > into->omitted)
		into->omitted = from->omitted;
	for (size_t i = 0; i < from->count; i++) {
		const kiln_profile_field *b = &from->fields[i];
		kiln_profile_field *a = find(into, b->path, i);

		if (!a) {
			if ((rc = append_field(into, b->path, b->parent, &a)) < 0)
				return rc;
			a->item = b->item;
		}
		if ((rc = merge_field(a, b)) < 0)
			return rc;
	}
	return 0;
}

uint64_t kiln_profile_missing(const kiln_profile *p, const kiln_profile_field *f)
{
	const kiln_profile_field *parent;
	uint64_t base;

	if (f->item)
		return 0;
	if (!f->parent) {
		base = p->records;
	} else {
		parent = kiln_profile_find(p, f->parent);
		base = parent ? parent->types[KILN_PTYPE_OBJECT] : 0;
	}
	return base > f->present ? base - f->present : 0;
}

/* ---- render ---- */

/* The shortest of %.15g, %.16g, %.17g that reads back as x. */
static int put_double(kiln_buf *out, double x)
{
	char text[40];

	if (!isfinite(x))
		x = 0;
	if (x == floor(x) && fabs(x) < 9007199254740992.0)
		return kiln_buf_printf(out, "%.0f", x);
	for (int digits = 15; digits <= 17; digits++) {
		snprintf(text, sizeof(text), "%.*g", digits, x);
		if (strtod(text, NULL) == x)
			break;
	}
	return kiln_buf_puts(out, text);
}

static int put_store(kiln_buf *out, const kiln_dd_store *st)
{
	int rc = kiln_buf_printf(out, "{\"offset\":%d,\"counts\":[", st->len ? st->offset : 0);

	for (uint32_t i = 0; rc == 0 && i < st->len; i++)
		rc = kiln_buf_printf(out, "%s%llu", i ? "," : "", (unsigned long long)st->counts[i]);
	return rc < 0 ? rc : kiln_buf_puts(out, "]}");
}

static int render_number(kiln_buf *out, const kiln_profile_field *f)
{
	int rc;

	if ((rc = kiln_buf_printf(
	         out, ",\"number\":{\"count\":%llu,\"min\":", (unsigned long long)f->num.count)) < 0 ||
	    (rc = put_double(out, f->num.min)) < 0 || (rc = kiln_buf_puts(out, ",\"max\":")) < 0 ||
	    (rc = put_double(out, f->num.max)) < 0 || (rc = kiln_buf_puts(out, ",\"mean\":")) < 0 ||
	    (rc = put_double(out, f->num.mean)) < 0 || (rc = kiln_buf_puts(out, ",\"variance\":")) < 0 ||
	    (rc = put_double(out, kiln_moments_variance(&f->num))) < 0 ||
	    (rc = kiln_buf_puts(out, ",\"quantiles\":{")) < 0)
		return rc;
	for (size_t q = 0; q < QUANTILE_COUNT; q++)
		if ((rc = kiln_buf_printf(out, "%s\"%s\":", q ? "," : "", QUANTILE_NAMES[q])) < 0 ||
		    (rc = put_double(out, kiln_profile_quantile(f, QUANTILES[q]))) < 0)
			return rc;
	if ((rc = kiln_buf_printf(out, "},\"sketch\":{\"alpha\":%g,\"zero\":%llu,\"positive\":",
	                          KILN_DD_ALPHA, (unsigned long long)f->dd.zero)) < 0 ||
	    (rc = put_store(out, &f->dd.pos)) < 0 || (rc = kiln_buf_puts(out, ",\"negative\":")) < 0 ||
	    (rc = put_store(out, &f->dd.neg)) < 0)
		return rc;
	return kiln_buf_puts(out, "}}");
}

/* The registers as base64: all of them ("registers"), or, when fewer than
 * a quarter are set, each set one as 3 bytes, index (big-endian 16 bits)
 * and value ("sparse"). */
static int render_distinct(kiln_buf *out, const kiln_profile_field *f)
{
	uint8_t reg[KILN_HLL_REGISTERS], sparse[KILN_HLL_REGISTERS / 4 * 3];
	const uint8_t *bin = reg;
	size_t n = 0, bin_len = KILN_HLL_REGISTERS, b64;
	int rc;

	for (uint32_t i = 0; i < KILN_HLL_REGISTERS; i++)
		reg[i] = kiln_hll_register(&f->distinct, i);
	for (uint32_t i = 0; i < KILN_HLL_REGISTERS && n < sizeof(sparse); i++)
		if (reg[i]) {
			sparse[n++] = (uint8_t)(i >> 8);
			sparse[n++] = (uint8_t)i;
			sparse[n++] = reg[i];
		}
	if (n < sizeof(sparse)) {
		bin = sparse;
		bin_len = n;
	}
	b64 = sodium_base64_ENCODED_LEN(bin_len, sodium_base64_VARIANT_ORIGINAL);
	if ((rc = kiln_buf_printf(out, ",\"distinct\":{\"estimate\":%llu,\"%s\":\"",
	                          (unsigned long long)kiln_profile_distinct(f),
	                          bin == sparse ? "sparse" : "registers")) < 0 ||
	    (rc = kiln_buf_reserve(out, b64)) < 0)
		return rc;
	sodium_bin2base64(out->ptr + out->len, b64, bin, bin_len, sodium_base64_VARIANT_ORIGINAL);
	out->len += b64 - 1;
	return kiln_buf_puts(out, "\"}");
}

static int render_field(kiln_buf *out, const kiln_profile *p, const kiln_profile_field *f)
{
	uint64_t strings = f->types[KILN_PTYPE_STRING];
	int rc;

	if ((rc = kiln_buf_puts(out, "{\"path\":")) < 0 ||
	    (rc = kiln_buf_put_json_string(out, f->path, strlen(f->path))) < 0)
		return rc;
	if (f->parent && ((rc = kiln_buf_puts(out, ",\"parent\":")) < 0 ||
	                  (rc = kiln_buf_put_json_string(out, f->parent, strlen(f->parent))) < 0))
		return rc;
	if ((rc = kiln_buf_printf(out,
	                          ",\"profiled\":\"%s\",\"item\":%s,\"present\":%llu,\"missing\":%llu,"
	                          "\"null\":%llu,\"types\":{",
	                          f->tokens ? "tokens" : "values", f->item ? "true" : "false",
	                          (unsigned long long)f->present,
	                          (unsigned long long)kiln_profile_missing(p, f),
	                          (unsigned long long)f->types[KILN_PTYPE_NULL])) < 0)
		return rc;
	for (int t = 0; t < KILN_PTYPE_COUNT_; t++)
		if ((rc = kiln_buf_printf(out, "%s\"%s\":%llu", t ? "," : "", PTYPE_NAMES[t],
		                          (unsigned long long)f->types[t])) < 0)
			return rc;
	if ((rc = kiln_buf_puts(out, "}")) < 0)
		return rc;
	if (!f->tokens && f->num.count && (rc = render_number(out, f)) < 0)
		return rc;
	if (!f->tokens && strings &&
	    (rc = kiln_buf_printf(out,
	                          ",\"string\":{\"count\":%llu,\"empty\":%llu,\"length_min\":%llu,"
	                          "\"length_max\":%llu,\"length_sum\":%llu,\"length_mean\":",
	                          (unsigned long long)strings, (unsigned long long)f->empty,
	                          (unsigned long long)f->len_min, (unsigned long long)f->len_max,
	                          (unsigned long long)f->len_sum)) == 0)
		if ((rc = put_double(out, (double)f->len_sum / (double)strings)) == 0)
			rc = kiln_buf_puts(out, "}");
	if (rc < 0)
		return rc;
	if (!f->tokens && f->time && strings && f->tm.count == strings &&
	    (rc = kiln_profile_render_time(out, f, QUANTILES, QUANTILE_NAMES, QUANTILE_COUNT)) < 0)
		return rc;
	if (f->distinct.reg && (rc = render_distinct(out, f)) < 0)
		return rc;
	if (f->cat_count && f->cat_k)
		return (rc = kiln_profile_render_inferred(out, f)) < 0 ? rc : kiln_buf_puts(out, "}");
	if (f->cat_count) {
		if ((rc = kiln_buf_puts(out, ",\"categories\":{")) < 0)
			return rc;
		for (size_t i = 0; i < f->cat_count; i++)
			if ((rc = kiln_buf_puts(out, i ? "," : "")) < 0 ||
			    (rc = kiln_buf_put_json_string(out, f->cat_names[i], strlen(f->cat_names[i]))) <
			        0 ||
			    (rc = kiln_buf_printf(out, ":%llu", (unsigned long long)f->cat_counts[i])) < 0)
				return rc;
		if ((rc = kiln_buf_puts(out, "}")) < 0)
			return rc;
	}
	return kiln_buf_puts(out, "}");
}

int kiln_profile_render(kiln_buf *out, const kiln_profile *p)
{
	int rc = kiln_buf_printf(out, "{\"records\":%llu,", (unsigned long long)p->records);

	if (rc == 0 && p->omitted)
		rc = kiln_buf_printf(out, "\"omitted\":%llu,", (unsigned long long)p->omitted);
	if (rc == 0)
		rc = kiln_buf_puts(out, "\"fields\":[");

	for (size_t i = 0; rc == 0 && i < p->count; i++)
		if ((rc = kiln_buf_puts(out, i ? ",\n" : "\n")) == 0)
			rc = render_field(out, p, &p->fields[i]);
	return rc < 0 ? rc : kiln_buf_puts(out, "]}");
}

int kiln_profile_render_file(kiln_buf *out, const kiln_profile *total, const kiln_profile *added)
{
	int rc;

	if ((rc = kiln_buf_puts(out, "{\"format\":\"" KILN_PROFILE_FORMAT "\",\n\"total\":")) < 0 ||
	    (rc = kiln_profile_render(out, total)) < 0 || (rc = kiln_buf_puts(out, ",\n\"added\":")) < 0 ||
	    (rc = kiln_profile_render(out, added)) < 0)
		return rc;
	return kiln_buf_puts(out, "}\n");
}
