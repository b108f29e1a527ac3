/* Single-pass record validation against a compiled contract (see validate.h).
 *
 * frames[i] describes the container opened at JSON depth i: the field it is
 * checked against (NULL: unchecked, e.g. under an unknown field or after a
 * type mismatch), the key or index of the value being read in it, and a
 * count of members. For object fields the seen map holds one byte per child
 * (at field->seen_base), cleared when the object opens and read when it
 * closes to find missing required children. The path of a violation is
 * rendered from the frames only when a violation is recorded. */
#include "contract/validate.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct frame {
	const kiln_field *field; /* NULL: unchecked subtree */
	const kiln_field *child; /* object: field of the current key, NULL if unknown */
	const char *key;         /* object: raw bytes of the current key */
	uint32_t key_len;
	uint32_t key_flags;
	bool is_object;
	uint32_t count; /* keys or items so far */
};

struct kiln_validator {
	const kiln_contract *contract;
	kiln_json_scanner *scanner;
	kiln_unknown_policy unknown;
	uint32_t max_depth;
	struct frame *frames;
	uint8_t *seen;
	char *scratch;
	size_t scratch_cap;
	pcre2_match_data *match;
	pcre2_match_context *match_limits;
	kiln_report *report;
	char path_key[KILN_PATH_MAX];
};

#define DEFAULT_MAX_BYTES (1u << 20)

kiln_validator *kiln_validator_new(const kiln_contract *contract, const kiln_validator_options *options)
{
	kiln_validator *v = calloc(1, sizeof(*v));
	kiln_json_limits limits = {0};

	if (!v)
		return NULL;
	if (options)
		limits = options->limits;
	if (!limits.max_depth)
		limits.max_depth = KILN_JSON_DEFAULT_DEPTH;
	if (!limits.max_bytes)
		limits.max_bytes = DEFAULT_MAX_BYTES;
	v->contract = contract;
	v->unknown = options && options->unknown_fields >= 0 ? (kiln_unknown_policy)options->unknown_fields
	                                                     : contract->unknown_fields;
	v->max_depth = limits.max_depth;
	v->scanner = kiln_json_scanner_new(&limits);
	v->frames = calloc((size_t)limits.max_depth + 1, sizeof(*v->frames));
	v->seen = calloc((size_t)contract->seen_slots + 1, 1);
	v->match = pcre2_match_data_create(1, NULL);
	v->match_limits = pcre2_match_context_create(NULL);
	if (!v->scanner || !v->frames || !v->seen || !v->match || !v->match_limits) {
		kiln_validator_free(v);
		return NULL;
	}
	if (pcre2_set_match_limit(v->match_limits, KILN_PATTERN_MATCH_LIMIT) != 0 ||
	    pcre2_set_depth_limit(v->match_limits, KILN_PATTERN_DEPTH_LIMIT) != 0) {
		kiln_validator_free(v);
		return NULL;
	}
	return v;
}

void kiln_validator_free(kiln_validator *v)
{
	if (!v)
		return;
	kiln_json_scanner_free(v->scanner);
	free(v->frames);
	free(v->seen);
	free(v->scratch);
	pcre2_match_data_free(v->match);
	pcre2_match_context_free(v->match_limits);
	free(v);
}

/* --- paths ------------------------------------------------------------------ */

typedef struct path_buf {
	char *s;
	size_t len;
	bool full;
} path_buf;

static void path_put(path_buf *p, const char *s, size_t n)
{
	if (p->full)
		return;
	if (p->len + n + 4 >= KILN_PATH_MAX) {
		memcpy(p->s + p->len, "...", 4);
		p->len += 3;
		p->full = true;
		return;
	}
	memcpy(p->s + p->len, s, n);
	p->len += n;
	p->s[p->len] = '\0';
}

/* A key that is not a contract field could be anything a producer put there,
 * personal data included: it is shown only when it looks like an identifier. */
static bool identifier_like(const char *s, size_t n)
{
	if (n == 0 || n > 64 ||
	    !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

static void path_key(path_buf *p, const kiln_field *known, const char *key, size_t n, uint32_t flags)
{
	if (p->len)
		path_put(p, ".", 1);
	if (known)
		path_put(p, known->name, known->name_len);
	else if (!(flags & KILN_JSON_ESCAPED) && identifier_like(key, n))
		path_put(p, key, n);
	else
		path_put(p, "<key>", 5);
}

static void path_index(path_buf *p, uint32_t index)
{
	char buf[16];
	int n = snprintf(buf, sizeof(buf), "[%u]", index);
	path_put(p, buf, (size_t)n);
}

/* Path of the current slot of frames[0..depth), then `.extra` if given. */
static void render_path(const kiln_validator *v, uint32_t depth, const kiln_field *extra, char *out)
{
	path_buf p = {.s = out, .len = 0};

	out[0] = '\0';
	for (uint32_t i = 0; i < depth; i++) {
		const struct frame *f = &v->frames[i];
		if (f->is_object)
			path_key(&p, f->child, f->key, f->key_len, f->key_flags);
		else
			path_index(&p, f->count ? f->count - 1 : 0);
	}
	if (extra)
		path_key(&p, extra, NULL, 0, 0);
	if (p.len == 0)
		memcpy(out, "$", 2);
}

static void add(kiln_validator *v, kiln_reject code, size_t offset, uint32_t depth, const kiln_field *extra)
{
	kiln_report *r = v->report;

	if (r->kept < KILN_VIOLATIONS_MAX) {
		kiln_violation *x = &r->v[r->kept++];
		x->code = code;
		x->offset = offset;
		render_path(v, depth, extra, x->path);
	}
	r->count++;
}

void kiln_report_single(kiln_report *r, kiln_reject code, size_t offset)
{
	r->count = r->kept = 1;
	r->v[0].code = code;
	r->v[0].offset = offset;
	memcpy(r->v[0].path, "$", 2);
}

/* --- value checks ----------------------------------------------------------- */

static const char *decoded(kiln_validator *v, const kiln_json_token *t, size_t *out_len)
{
	if (!(t->flags & KILN_JSON_ESCAPED)) {
		*out_len = t->len;
		return t->ptr;
	}
	if (v->scratch_cap < t->len) {
		char *p = realloc(v->scratch, t->len);
		if (!p)
			return NULL;
		v->scratch = p;
		v->scratch_cap = t->len;
	}
	*out_len = kiln_json_unescape(v->scratch, v->scratch_cap, t);
	return v->scratch;
}

static bool bound_ok(const kiln_field *f, long double x)
{
	if (isnan(x))
		return false;
	if (f->minimum.set && (f->minimum.exclusive ? !(x > f->minimum.value) : !(x >= f->minimum.value)))
		return false;
	if (f->maximum.set && (f->maximum.exclusive ? !(x < f->maximum.value) : !(x <= f->maximum.value)))
		return false;
	return true;
}

/* s[0..n) among the field's enum entries of `kind` (text compare). */
static bool enum_has_text(const kiln_field *f, kiln_enum_kind kind, const char *s, size_t n)
{
	for (size_t i = 0; i < f->enum_count; i++)
		if (f->enum_lens[i] == n && f->enum_kinds[i] == kind &&
		    kiln_json_bytes_equal(f->enum_values[i], s, n))
			return true;
	return false;
}

static bool enum_has_number(const kiln_field *f, long double x)
{
	for (size_t i = 0; i < f->enum_count; i++)
		if (f->enum_kinds[i] == KILN_ENUM_NUMBER && f->enum_numbers[i] == x)
			return true;
	return false;
}

/* A JSON number of at most 18 significant digits and no exponent, as the
 * integer mant * 10^-frac (number_fast's reading). */
typedef struct small_number {
	uint64_t mant;
	int frac;
} small_number;

/* small: the token as number_fast read it, NULL when it could not. */
static bool multiple_ok(const kiln_field *f, const kiln_json_token *t, long double x,
                        const small_number *small)
{
	kiln_decimal d;
	int exact;

	if (f->multiple_of_is_exact && small &&
	    (exact = kiln_decimal_is_multiple_u64(small->mant, small->frac, &f->multiple_of_exact)) >= 0)
		return exact;
	if (f->multiple_of_is_exact && kiln_decimal_parse(t->ptr, t->len, &d) &&
	    (exact = kiln_decimal_is_multiple(&d, &f->multiple_of_exact)) >= 0)
		return exact;
	/* beyond 38 significant digits: as close as long double can tell */
	long double r = fmodl(fabsl(x), f->multiple_of);
	return r <= f->multiple_of * 1e-9L || f->multiple_of - r <= f->multiple_of * 1e-9L;
}

/* Exact value of a JSON number with at most 18 significant digits and no
 * exponent: the mantissa and the power of ten are both exact in a long
 * double, so one correctly rounded division gives what strtold would. */
static bool number_fast(const char *p, size_t n, long double *out, small_number *small)
{
	static const long double pow10[] = {1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,
	                                    1e7L,  1e8L,  1e9L,  1e10L, 1e11L, 1e12L, 1e13L,
	                                    1e14L, 1e15L, 1e16L, 1e17L, 1e18L};
	uint64_t m = 0;
	size_t i = 0, digits = 0, frac = 0;
	bool neg = false, in_frac = false;

	if (p[0] == '-') {
		neg = true;
		i = 1;
	}
	for (; i < n; i++) {
		char c = p[i];
		if (c == '.') {
			in_frac = true;
			continue;
		}
		if (c < '0' || c > '9')
			return false; /* exponent: leave it to strtold */
		if (++digits > 18)
			return false;
		m = m * 10 + (uint64_t)(c - '0');
		frac += in_frac;
	}
	*out = neg ? -(long double)m : (long double)m;
	if (frac)
		*out /= pow10[frac]; /* an integer needs no division (by 1, exact) */
	small->mant = m;
	small->frac = (int)frac;
	return true;
}

/* The integer token t (no fraction, no exponent) fits the field's iN/uN
 * format: compared digit by digit with the limit, exact at 128 bits. */
static bool int_format_ok(const kiln_field *f, const kiln_json_token *t)
{
	static const char *const max_unsigned[] = {"255", "65535", "4294967295", "18446744073709551615",
	                                           "340282366920938463463374607431768211455"};
	static const char *const max_signed[] = {"127", "32767", "2147483647", "9223372036854775807",
	                                         "170141183460469231731687303715884105727"};
	static const char *const min_signed[] = {"128", "32768", "2147483648", "9223372036854775808",
	                                         "170141183460469231731687303715884105728"};
	int i = f->int_bits == 8    ? 0
	        : f->int_bits == 16 ? 1
	        : f->int_bits == 32 ? 2
	        : f->int_bits == 64 ? 3
	                            : 4;
	bool neg = t->ptr[0] == '-';
	const char *digits = t->ptr + neg;
	size_t n = t->len - neg;
	const char *limit;
	size_t ln;

	if (neg && n == 1 && digits[0] == '0')
		return true; /* -0 */
	limit = f->int_unsigned ? (neg ? NULL : max_unsigned[i]) : (neg ? min_signed[i] : max_signed[i]);
	if (!limit)
		return false;
	ln = strlen(limit);
	return n < ln || (n == ln && memcmp(digits, limit, n) <= 0); /* JSON integers have no leading zeros */
}

/* The value of a number number_fast leaves (an exponent, more than 18
 * digits): strtold on a NUL-terminated copy. Out of line, so its buffer is
 * no part of the hot path's frame. false when out of memory. */
static __attribute__((noinline)) bool number_slow(kiln_validator *v, const kiln_json_token *t,
                                                  long double *out)
{
	char buf[64];
	char *text = buf;

	if (t->len >= sizeof(buf)) {
		if (v->scratch_cap < t->len + 1) {
			char *p = realloc(v->scratch, t->len + 1);
			if (!p)
				return false;
			v->scratch = p;
			v->scratch_cap = t->len + 1;
		}
		text = v->scratch;
	}
	memcpy(text, t->ptr, t->len);
	text[t->len] = '\0';
	*out = strtold(text, NULL);
	return true;
}

static void check_number(kiln_validator *v, const kiln_field *f, const kiln_json_token *t, uint32_t depth)
{
	long double x;
	small_number small = {0, 0};
	bool fast;

	if (f->int_bits && !int_format_ok(f, t))
		add(v, KILN_REJECT_RANGE, t->offset, depth, NULL);
	if (!f->minimum.set && !f->maximum.set && !f->multiple_of && !f->enum_count)
		return;
	if (!(fast = number_fast(t->ptr, t->len, &x, &small)) && !number_slow(v, t, &x))
		return;
	if (!bound_ok(f, x) || (f->multiple_of && !multiple_ok(f, t, x, fast ? &small : NULL)))
		add(v, KILN_REJECT_RANGE, t->offset, depth, NULL);
	if (f->enum_count && !enum_has_number(f, x))
		add(v, KILN_REJECT_ENUM, t->offset, depth, NULL);
}

/* The scanner validated the UTF-8 already, so PCRE2 need not check it again.
 * NONE on a match, PATTERN when there is none, PATTERN_LIMIT when PCRE2
 * gave up first (match or depth limit, JIT stack, memory). */
static kiln_reject pattern_match(kiln_validator *v, const kiln_field *f, const char *s, size_t n)
{
	int rc;

	if (f->pattern_jit)
		rc = pcre2_jit_match(f->pattern, (PCRE2_SPTR)s, n, 0, 0, v->match, v->match_limits);
	else
		rc = pcre2_match(f->pattern, (PCRE2_SPTR)s, n, 0, PCRE2_NO_UTF_CHECK, v->match,
		                 v->match_limits);
	if (rc >= 0)
		return KILN_REJECT_NONE;
	return rc == PCRE2_ERROR_NOMATCH ? KILN_REJECT_PATTERN : KILN_REJECT_PATTERN_LIMIT;
}

static void check_string(kiln_validator *v, const kiln_field *f, const kiln_json_token *t, uint32_t depth)
{
	size_t n;
	const char *s;

	bool temporal =
	    f->type == KILN_LTYPE_DATE || f->type == KILN_LTYPE_TIMESTAMP || f->type == KILN_LTYPE_TIME;

	if (!temporal && f->min_length < 0 && f->max_length < 0 && !f->pattern && !f->format &&
	    !f->enum_count)
		return;
	s = decoded(v, t, &n);
	if (!s)
		return;
	if (temporal) {
		long double x;
		bool ok = f->type == KILN_LTYPE_DATE        ? kiln_format_parse_date(s, n, &x)
		          : f->type == KILN_LTYPE_TIMESTAMP ? kiln_format_parse_date_time(s, n, &x)
		                                            : kiln_format_parse_time(s, n, &x);
		if (!ok)
			add(v, KILN_REJECT_FORMAT, t->offset, depth, NULL);
		else if (!bound_ok(f, x))
			add(v, KILN_REJECT_RANGE, t->offset, depth, NULL);
	}
	if (f->min_length >= 0 || f->max_length >= 0) {
		size_t cps = (t->flags & KILN_JSON_ASCII) && !(t->flags & KILN_JSON_ESCAPED)
		                 ? n
		                 : kiln_utf8_count(s, n);
		if ((f->min_length >= 0 && cps < (size_t)f->min_length) ||
		    (f->max_length >= 0 && cps > (size_t)f->max_length))
			add(v, KILN_REJECT_LENGTH, t->offset, depth, NULL);
	}
	if (f->format && !kiln_format_check(f->format, s, n))
		add(v, KILN_REJECT_FORMAT, t->offset, depth, NULL);
	if (f->pattern) {
		kiln_reject code = pattern_match(v, f, s, n);

		if (code != KILN_REJECT_NONE)
			add(v, code, t->offset, depth, NULL);
	}
	if (f->enum_count && !enum_has_text(f, KILN_ENUM_STRING, s, n))
		add(v, KILN_REJECT_ENUM, t->offset, depth, NULL);
}

static bool type_matches(kiln_ltype type, const kiln_json_token *t)
{
	switch (type) {
	case KILN_LTYPE_ANY:
		return true;
	case KILN_LTYPE_STRING:
	case KILN_LTYPE_DATE:
	case KILN_LTYPE_TIMESTAMP:
	case KILN_LTYPE_TIME:
		return t->type == KILN_JSON_STRING;
	case KILN_LTYPE_INTEGER:
		return t->type == KILN_JSON_NUMBER && (t->flags & KILN_JSON_INTEGER);
	case KILN_LTYPE_NUMBER:
		return t->type == KILN_JSON_NUMBER;
	case KILN_LTYPE_BOOLEAN:
		return t->type == KILN_JSON_TRUE || t->type == KILN_JSON_FALSE;
	case KILN_LTYPE_OBJECT:
		return t->type == KILN_JSON_OBJECT_BEGIN;
	case KILN_LTYPE_ARRAY:
		return t->type == KILN_JSON_ARRAY_BEGIN;
	}
	return false;
}

/* Checks a value token against its field; returns the field its children are
 * checked against (for containers), or NULL. */
static const kiln_field *check_value(kiln_validator *v, const kiln_field *f, const kiln_json_token *t,
                                     uint32_t depth)
{
	if (!f || t->type == KILN_JSON_NULL)
		return NULL;
	if (!type_matches(f->type, t)) {
		add(v, KILN_REJECT_TYPE, t->offset, depth, NULL);
		return NULL;
	}
	switch (t->type) {
	case KILN_JSON_STRING:
		check_string(v, f, t, depth);
		break;
	case KILN_JSON_NUMBER:
		check_number(v, f, t, depth);
		break;
	case KILN_JSON_TRUE:
	case KILN_JSON_FALSE:
		if (f->enum_count && !enum_has_text(f, KILN_ENUM_BOOLEAN, t->ptr, t->len))
			add(v, KILN_REJECT_ENUM, t->offset, depth, NULL);
		break;
	case KILN_JSON_OBJECT_BEGIN:
		return f->type == KILN_LTYPE_OBJECT ? f : NULL;
	case KILN_JSON_ARRAY_BEGIN:
		return f->type == KILN_LTYPE_ARRAY ? f : NULL;
	default:
		break;
	}
	return NULL;
}

/* --- the pass ----------------------------------------------------------------- */

static void on_key(kiln_validator *v, struct frame *fr, const kiln_json_token *t, uint32_t depth)
{
	const kiln_field *child = NULL;

	fr->key = t->ptr;
	fr->key_len = (uint32_t)t->len;
	fr->key_flags = t->flags;
	fr->count++;
	fr->child = NULL;
	if (!fr->field)
		return;
	if (t->flags & KILN_JSON_ESCAPED) {
		size_t n;
		const char *s = decoded(v, t, &n);
		if (s)
			child = kiln_field_child(fr->field, s, n, t->key_hash);
	} else {
		child = kiln_field_child(fr->field, t->ptr, t->len, t->key_hash);
	}
	fr->child = child;
	if (!child && v->unknown == KILN_UNKNOWN_REJECT)
		add(v, KILN_REJECT_UNKNOWN_FIELD, t->offset, depth, NULL);
}

static void on_object_end(kiln_validator *v, const struct frame *fr, const kiln_json_token *t, uint32_t depth)
{
	const kiln_field *f = fr->field;

	/* a child's position is its index among the children: the seen map is
	 * read without loading the child, which only a missing one needs */
	for (size_t i = 0; i < f->required_count; i++)
		if (!v->seen[f->seen_base + f->required_children[i]])
			add(v, KILN_REJECT_MISSING_REQUIRED, t->offset, depth,
			    f->children[f->required_children[i]]);
	if ((f->min_properties >= 0 && fr->count < (uint64_t)f->min_properties) ||
	    (f->max_properties >= 0 && fr->count > (uint64_t)f->max_properties))
		add(v, KILN_REJECT_LENGTH, t->offset, depth, NULL);
}

size_t kiln_validate(kiln_validator *v, const char *record, size_t len, kiln_report *out)
{
	return kiln_validate_hook(v, record, len, out, NULL, NULL);
}

/* The scanner's kiln_json_next runs once per token: have the compiler (with
 * link-time optimisation) inline it here rather than call it. */
__attribute__((flatten)) size_t kiln_validate_hook(kiln_validator *v, const char *record, size_t len,
                                                   kiln_report *out, kiln_token_hook hook, void *ctx)
{
	kiln_json_token t;
	uint32_t depth = 0; /* open containers */
	int rc;

	out->count = out->kept = 0;
	v->report = out;
	kiln_json_scanner_reset(v->scanner, record, len);

	while ((rc = kiln_json_next(v->scanner, &t)) > 0) {
		struct frame *top = depth ? &v->frames[depth - 1] : NULL;
		const kiln_field *f, *sub;

		switch (t.type) {
		case KILN_JSON_KEY:
			on_key(v, top, &t, depth);
			if (hook && hook(ctx, &t, top->child) < 0)
				hook = NULL; /* the consumer failed: it keeps its error, validation goes on */
			continue;
		case KILN_JSON_OBJECT_END:
			if (top->field)
				on_object_end(v, top, &t, depth - 1);
			if (hook && hook(ctx, &t, NULL) < 0)
				hook = NULL;
			depth--;
			continue;
		case KILN_JSON_ARRAY_END:
			if (hook && hook(ctx, &t, NULL) < 0)
				hook = NULL;
			f = top->field;
			if (f && ((f->min_items >= 0 && top->count < (uint64_t)f->min_items) ||
			          (f->max_items >= 0 && top->count > (uint64_t)f->max_items)))
				add(v, KILN_REJECT_LENGTH, t.offset, depth - 1, NULL);
			depth--;
			continue;
		default:
			break;
		}

		/* a value: find the field it is checked against */
		if (!top) {
			if (t.type != KILN_JSON_OBJECT_BEGIN) {
				add(v, KILN_REJECT_NOT_OBJECT, t.offset, 0, NULL);
				f = NULL;
			} else {
				f = v->contract->root;
			}
		} else if (top->is_object) {
			f = top->child;
			if (f && t.type != KILN_JSON_NULL)
				v->seen[top->field->seen_base + f->position] = 1;
		} else {
			top->count++;
			f = top->field ? top->field->items : NULL;
		}
		if (hook && hook(ctx, &t, f) < 0)
			hook = NULL;
		sub = top || !f ? check_value(v, f, &t, depth) : f;

		if (t.type == KILN_JSON_OBJECT_BEGIN || t.type == KILN_JSON_ARRAY_BEGIN) {
			struct frame *fr = &v->frames[depth++];
			fr->field = sub;
			fr->child = NULL;
			fr->is_object = t.type == KILN_JSON_OBJECT_BEGIN;
			fr->count = 0;
			if (sub && fr->is_object && sub->child_count)
				memset(v->seen + sub->seen_base, 0, sub->child_count);
		}
	}
	if (rc < 0) {
		size_t offset;
		kiln_json_token dup;
		kiln_reject code = kiln_json_scanner_error(v->scanner, &offset, &dup);

		out->count = out->kept = 0;
		if (code == KILN_REJECT_DUPLICATE_KEY) {
			/* the key's path: the frames so far, with the duplicate as last key */
			struct frame *top = &v->frames[depth - 1];
			top->key = dup.ptr;
			top->key_len = (uint32_t)dup.len;
			top->key_flags = dup.flags;
			top->child = NULL;
			if (top->field) {
				size_t n;
				const char *key = decoded(v, &dup, &n);
				if (key)
					top->child = kiln_field_child(top->field, key, n, dup.key_hash);
			}
			add(v, code, offset, depth, NULL);
		} else {
			kiln_report_single(out, code, offset);
		}
	}
	v->report = NULL;
	return out->count;
}
