/* Compares two compiled contracts (see compat.h): the contract-level keys
 * kiln reads, then both field trees walked together by field name, each
 * change classified by its code's one row in `codes` below. The rule behind
 * the rows (docs/QUALITY.md): a change breaks readers when it removes a
 * field, changes a type, tightens what a record may hold or changes how a
 * value is pseudonymised; loosening is compatible. Owns the change list and
 * an arena for its strings. */
#include "contract/compat.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/array.h"
#include "core/arena.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"

/* Enum values listed in one message before "and N more". */
#define ENUM_LISTED 12

typedef enum compat_code {
	CONTRACT_ID_CHANGED,
	SCHEMA_NAME_CHANGED,
	UNKNOWN_FIELDS_TIGHTENED,
	UNKNOWN_FIELDS_LOOSENED,
	CONTRACT_VERSION_CHANGED,
	API_VERSION_CHANGED,
	CONTRACT_NAME_CHANGED,
	CONTRACT_STATUS_CHANGED,
	FIELD_REMOVED,
	FIELD_ADDED,
	FIELD_ADDED_REQUIRED,
	TYPE_CHANGED,
	TYPE_NARROWED,
	TYPE_WIDENED,
	BECAME_REQUIRED,
	BECAME_OPTIONAL,
	ENUM_ADDED,
	ENUM_REMOVED,
	ENUM_VALUES_REMOVED,
	ENUM_VALUES_ADDED,
	PATTERN_ADDED,
	PATTERN_CHANGED,
	PATTERN_REMOVED,
	FORMAT_ADDED,
	FORMAT_CHANGED,
	FORMAT_REMOVED,
	INTEGER_FORMAT_NARROWED,
	INTEGER_FORMAT_CHANGED,
	INTEGER_FORMAT_WIDENED,
	BOUNDS_TIGHTENED,
	BOUNDS_LOOSENED,
	MULTIPLE_OF_TIGHTENED,
	MULTIPLE_OF_CHANGED,
	MULTIPLE_OF_LOOSENED,
	LENGTH_TIGHTENED,
	LENGTH_LOOSENED,
	ITEMS_TIGHTENED,
	ITEMS_LOOSENED,
	PROPERTY_COUNT_TIGHTENED,
	PROPERTY_COUNT_LOOSENED,
	CLASSIFICATION_CHANGED,
	PSEUDONYMISATION_CHANGED,
	PSEUDONYM_DOMAIN_CHANGED,
	PII_SCAN_CHANGED,
	UNIQUE_ADDED,
	UNIQUE_REMOVED,
	PRIMARY_KEY_ADDED,
	PRIMARY_KEY_REMOVED,
	PRIMARY_KEY_POSITION_CHANGED,
	UNIQUE_ITEMS_ADDED,
	UNIQUE_ITEMS_REMOVED,
	CODE_COUNT_
} compat_code;

/* One classification per code; docs/QUALITY.md has the same table with the
 * reason for each row. */
static const struct {
	const char *name;
	bool breaking;
} codes[CODE_COUNT_] = {
    [CONTRACT_ID_CHANGED] = {"contract_id_changed", true},
    [SCHEMA_NAME_CHANGED] = {"schema_name_changed", true},
    [UNKNOWN_FIELDS_TIGHTENED] = {"unknown_fields_tightened", true},
    [UNKNOWN_FIELDS_LOOSENED] = {"unknown_fields_loosened", false},
    [CONTRACT_VERSION_CHANGED] = {"contract_version_changed", false},
    [API_VERSION_CHANGED] = {"api_version_changed", false},
    [CONTRACT_NAME_CHANGED] = {"contract_name_changed", false},
    [CONTRACT_STATUS_CHANGED] = {"contract_status_changed", false},
    [FIELD_REMOVED] = {"field_removed", true},
    [FIELD_ADDED] = {"field_added", false},
    [FIELD_ADDED_REQUIRED] = {"field_added_required", true},
    [TYPE_CHANGED] = {"type_changed", true},
    [TYPE_NARROWED] = {"type_narrowed", true},
    [TYPE_WIDENED] = {"type_widened", true},
    [BECAME_REQUIRED] = {"became_required", true},
    [BECAME_OPTIONAL] = {"became_optional", false},
    [ENUM_ADDED] = {"enum_added", true},
    [ENUM_REMOVED] = {"enum_removed", false},
    [ENUM_VALUES_REMOVED] = {"enum_values_removed", true},
    [ENUM_VALUES_ADDED] = {"enum_values_added", false},
    [PATTERN_ADDED] = {"pattern_added", true},
    [PATTERN_CHANGED] = {"pattern_changed", true},
    [PATTERN_REMOVED] = {"pattern_removed", false},
    [FORMAT_ADDED] = {"format_added", true},
    [FORMAT_CHANGED] = {"format_changed", true},
    [FORMAT_REMOVED] = {"format_removed", false},
    [INTEGER_FORMAT_NARROWED] = {"integer_format_narrowed", true},
    [INTEGER_FORMAT_CHANGED] = {"integer_format_changed", true},
    [INTEGER_FORMAT_WIDENED] = {"integer_format_widened", false},
    [BOUNDS_TIGHTENED] = {"bounds_tightened", true},
    [BOUNDS_LOOSENED] = {"bounds_loosened", false},
    [MULTIPLE_OF_TIGHTENED] = {"multiple_of_tightened", true},
    [MULTIPLE_OF_CHANGED] = {"multiple_of_changed", true},
    [MULTIPLE_OF_LOOSENED] = {"multiple_of_loosened", false},
    [LENGTH_TIGHTENED] = {"length_tightened", true},
    [LENGTH_LOOSENED] = {"length_loosened", false},
    [ITEMS_TIGHTENED] = {"items_tightened", true},
    [ITEMS_LOOSENED] = {"items_loosened", false},
    [PROPERTY_COUNT_TIGHTENED] = {"property_count_tightened", true},
    [PROPERTY_COUNT_LOOSENED] = {"property_count_loosened", false},
    [CLASSIFICATION_CHANGED] = {"classification_changed", true},
    [PSEUDONYMISATION_CHANGED] = {"pseudonymisation_changed", true},
    [PSEUDONYM_DOMAIN_CHANGED] = {"pseudonym_domain_changed", true},
    [PII_SCAN_CHANGED] = {"pii_scan_changed", true},
    [UNIQUE_ADDED] = {"unique_added", true},
    [UNIQUE_REMOVED] = {"unique_removed", false},
    [PRIMARY_KEY_ADDED] = {"primary_key_added", true},
    [PRIMARY_KEY_REMOVED] = {"primary_key_removed", false},
    [PRIMARY_KEY_POSITION_CHANGED] = {"primary_key_position_changed", true},
    [UNIQUE_ITEMS_ADDED] = {"unique_items_added", true},
    [UNIQUE_ITEMS_REMOVED] = {"unique_items_removed", false},
};

typedef struct differ {
	kiln_contract_compat *out;
	kiln_arena *arena;
	size_t cap;
	int rc; /* the first failure (KILN_ENOMEM); later adds do nothing */
} differ;

static void add(differ *d, const char *path, compat_code code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void add(differ *d, const char *path, compat_code code, const char *fmt, ...)
{
	kiln_contract_compat *c = d->out;
	char *msg = NULL;
	va_list ap;
	int n;

	if (d->rc < 0)
		return;
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap); /* whole: a cut could split a UTF-8 sequence */
	va_end(ap);
	if (n < 0) {
		d->rc = KILN_ENOMEM;
		return;
	}
	if (KILN_ARRAY_GROW(c->changes, d->cap, c->count, NULL) < 0) {
		free(msg);
		d->rc = KILN_ENOMEM;
		return;
	}
	kiln_contract_change *ch = &c->changes[c->count];
	ch->path = kiln_arena_strndup(d->arena, path ? path : "", path ? strlen(path) : 0);
	ch->message = kiln_arena_strndup(d->arena, msg, (size_t)n);
	free(msg);
	if (!ch->path || !ch->message) {
		d->rc = KILN_ENOMEM;
		return;
	}
	ch->code = codes[code].name;
	ch->breaking = codes[code].breaking;
	c->count++;
	if (ch->breaking)
		c->breaking++;
}

/* ---- schema text in messages ------------------------------------------------------- */

/* s[0..len) in double quotes, '"', '\\' and control bytes escaped, so a
 * message stays on one line. */
static const char *quoted(differ *d, const char *s, size_t len)
{
	kiln_buf b = KILN_BUF_INIT(0);
	const char *r;
	int rc = kiln_buf_putc(&b, '"');

	for (size_t i = 0; i < len && rc == 0; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\')
			rc = kiln_buf_printf(&b, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			rc = kiln_buf_printf(&b, "\\x%02x", ch);
		else
			rc = kiln_buf_putc(&b, (char)ch);
	}
	if (rc == 0)
		rc = kiln_buf_putc(&b, '"');
	r = rc == 0 ? kiln_arena_strndup(d->arena, b.ptr, b.len) : NULL;
	kiln_buf_free(&b);
	if (!r)
		d->rc = KILN_ENOMEM;
	return r ? r : "?";
}

/* A contract's own word (id, version, classification): bare when it is one
 * plain token, else quoted; "none" for NULL. */
static const char *word(differ *d, const char *s)
{
	if (!s)
		return "none";
	if (*s &&
	    strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-:/@+") == strlen(s) &&
	    strcmp(s, "none") != 0)
		return s;
	return quoted(d, s, strlen(s));
}

/* A number from the contract in the fewest digits that read back as the
 * same value: 0.01 as 0.01, integers in full up to 1e18. */
static const char *number_text(differ *d, long double v)
{
	char text[64];
	const char *r;

	if (v == floorl(v) && fabsl(v) < 1e18L)
		snprintf(text, sizeof(text), "%.0Lf", v);
	else
		for (int digits = 1; digits <= LDBL_DECIMAL_DIG; digits++) {
			snprintf(text, sizeof(text), "%.*Lg", digits, v);
			if (strtold(text, NULL) == v)
				break;
		}
	r = kiln_arena_strndup(d->arena, text, strlen(text));
	if (!r)
		d->rc = KILN_ENOMEM;
	return r ? r : "?";
}

/* A date, timestamp or time bound back in RFC 3339 (UTC): dates and
 * timestamps are epoch seconds, times seconds since midnight. */
static const char *temporal_text(differ *d, kiln_ltype type, long double v)
{
	long double whole = floorl(v), frac = v - whole;
	char fraction[24] = "", text[80];
	const char *r;
	struct tm tm;
	time_t t;

	if (frac > 0) {
		snprintf(fraction, sizeof(fraction), "%.9Lf", frac); /* "0.250000000" */
		memmove(fraction, fraction + 1, strlen(fraction));   /* ".250000000" */
		for (size_t n = strlen(fraction); n > 2 && fraction[n - 1] == '0'; n--)
			fraction[n - 1] = '\0';
	}
	if (type == KILN_LTYPE_TIME) {
		if (whole < 0 || whole >= 86401)
			return number_text(d, v);
		long s = (long)whole;
		snprintf(text, sizeof(text), "%02ld:%02ld:%02ld%sZ", s / 3600, s / 60 % 60, s % 60, fraction);
	} else {
		if (fabsl(whole) > 1e15L)
			return number_text(d, v);
		t = (time_t)whole;
		if (!gmtime_r(&t, &tm))
			return number_text(d, v);
		if (type == KILN_LTYPE_DATE && !*fraction && !tm.tm_hour && !tm.tm_min && !tm.tm_sec)
			strftime(text, sizeof(text), "%Y-%m-%d", &tm);
		else {
			char base[64];
			strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
			snprintf(text, sizeof(text), "%s%sZ", base, fraction);
		}
	}
	r = kiln_arena_strndup(d->arena, text, strlen(text));
	if (!r)
		d->rc = KILN_ENOMEM;
	return r ? r : "?";
}

static const char *bound_text(differ *d, kiln_ltype type, const kiln_bound *b, bool lower)
{
	const char *v;

	if (!b->set)
		return "none";
	v = type == KILN_LTYPE_DATE || type == KILN_LTYPE_TIMESTAMP || type == KILN_LTYPE_TIME
	        ? temporal_text(d, type, b->value)
	        : number_text(d, b->value);
	v = kiln_arena_printf(d->arena, "%s %s",
	                      lower ? (b->exclusive ? ">" : ">=") : (b->exclusive ? "<" : "<="), v);
	if (!v)
		d->rc = KILN_ENOMEM;
	return v ? v : "?";
}

static const char *count_text(differ *d, int64_t n)
{
	const char *r;

	if (n < 0)
		return "none";
	r = kiln_arena_printf(d->arena, "%lld", (long long)n);
	if (!r)
		d->rc = KILN_ENOMEM;
	return r ? r : "?";
}

static const char *pseudo_name(kiln_pseudo_mode mode)
{
	switch (mode) {
	case KILN_PSEUDO_TOKEN:
		return "token";
	case KILN_PSEUDO_KEEP_DOMAIN:
		return "keep-domain";
	case KILN_PSEUDO_REDACT:
		return "redact";
	case KILN_PSEUDO_DROP:
		return "drop";
	case KILN_PSEUDO_KEEP:
		break;
	}
	return "keep";
}

static const char *int_format_text(differ *d, const kiln_field *f)
{
	const char *r;

	if (!f->int_bits)
		return "none";
	r = kiln_arena_printf(d->arena, "%c%u", f->int_unsigned ? 'u' : 'i', (unsigned)f->int_bits);
	if (!r)
		d->rc = KILN_ENOMEM;
	return r ? r : "?";
}

static const char *bool_text(bool b)
{
	return b ? "true" : "false";
}

/* ---- the rules, one comparison each ------------------------------------------------ */

static bool same_text(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* An explicit bound as the least (lower) or greatest (upper) value it
 * admits, so `exclusiveMinimum: 5` and `minimum: 6` on an integer compare
 * equal; other types keep the exclusive flag. */
typedef struct bound_key {
	bool set, exclusive;
	long double value;
} bound_key;

static bound_key bound_key_of(const kiln_bound *b, bool lower, bool integer)
{
	bound_key k = {b->set, b->exclusive, b->value};

	if (b->set && integer) {
		if (lower)
			k.value = b->exclusive ? floorl(b->value) + 1 : ceill(b->value);
		else
			k.value = b->exclusive ? ceill(b->value) - 1 : floorl(b->value);
		k.exclusive = false;
	}
	return k;
}

/* > 0 when bound a admits fewer values than b, < 0 when more, 0 the same. */
static int bound_tighter(const bound_key *a, const bound_key *b, bool lower)
{
	if (a->set != b->set)
		return a->set ? 1 : -1;
	if (!a->set)
		return 0;
	if (a->value != b->value)
		return (lower ? a->value > b->value : a->value < b->value) ? 1 : -1;
	if (a->exclusive != b->exclusive)
		return a->exclusive ? 1 : -1;
	return 0;
}

static void compare_bound(differ *d, const kiln_field *o, const kiln_field *n, bool lower)
{
	bool integer = n->type == KILN_LTYPE_INTEGER;
	const kiln_bound *ob = lower ? &o->minimum : &o->maximum, *nb = lower ? &n->minimum : &n->maximum;
	bound_key ok = bound_key_of(ob, lower, integer), nk = bound_key_of(nb, lower, integer);
	int t = bound_tighter(&nk, &ok, lower);

	if (t == 0)
		return;
	add(d, n->path, t > 0 ? BOUNDS_TIGHTENED : BOUNDS_LOOSENED, "%s %s -> %s",
	    lower ? "minimum" : "maximum", bound_text(d, o->type, ob, lower),
	    bound_text(d, n->type, nb, lower));
}

/* minLength/maxLength, minItems/maxItems, minProperties/maxProperties: -1
 * is unset, which admits as much as 0 (a minimum) or no limit (a maximum). */
static void compare_counts(differ *d, const kiln_field *n, int64_t omin, int64_t nmin, int64_t omax,
                           int64_t nmax, const char *min_key, const char *max_key, compat_code tightened,
                           compat_code loosened)
{
	int64_t a = omin < 0 ? 0 : omin, b = nmin < 0 ? 0 : nmin;

	if (a != b)
		add(d, n->path, b > a ? tightened : loosened, "%s %s -> %s", min_key, count_text(d, omin),
		    count_text(d, nmin));
	a = omax < 0 ? INT64_MAX : omax;
	b = nmax < 0 ? INT64_MAX : nmax;
	if (a != b)
		add(d, n->path, b < a ? tightened : loosened, "%s %s -> %s", max_key, count_text(d, omax),
		    count_text(d, nmax));
}

/* 1 when every multiple of `step` is a multiple of `base`, 0 when not. */
static int multiple_of(const kiln_field *step, const kiln_field *base)
{
	if (step->multiple_of_is_exact && base->multiple_of_is_exact)
		return kiln_decimal_is_multiple(&step->multiple_of_exact, &base->multiple_of_exact) == 1;
	long double q = step->multiple_of / base->multiple_of;
	return fabsl(q - roundl(q)) <= 1e-12L * fmaxl(1.0L, fabsl(q));
}

static void compare_multiple_of(differ *d, const kiln_field *o, const kiln_field *n)
{
	const char *from, *to;
	compat_code code;

	if (!(o->multiple_of > 0) && !(n->multiple_of > 0))
		return;
	if (!(o->multiple_of > 0))
		code = MULTIPLE_OF_TIGHTENED;
	else if (!(n->multiple_of > 0))
		code = MULTIPLE_OF_LOOSENED;
	else {
		bool tighter = multiple_of(n, o), looser = multiple_of(o, n);
		if (tighter && looser)
			return;
		code = tighter ? MULTIPLE_OF_TIGHTENED : looser ? MULTIPLE_OF_LOOSENED : MULTIPLE_OF_CHANGED;
	}
	from = o->multiple_of > 0 ? number_text(d, o->multiple_of) : "none";
	to = n->multiple_of > 0 ? number_text(d, n->multiple_of) : "none";
	add(d, n->path, code, "multipleOf %s -> %s", from, to);
}

/* Whether integer format a admits every value format b admits (no format
 * admits any integer). */
static bool int_format_contains(const kiln_field *a, const kiln_field *b)
{
	if (!a->int_bits)
		return true;
	if (!b->int_bits)
		return false;
	if (a->int_unsigned)
		return b->int_unsigned && b->int_bits <= a->int_bits;
	return b->int_unsigned ? b->int_bits < a->int_bits : b->int_bits <= a->int_bits;
}

static void compare_int_format(differ *d, const kiln_field *o, const kiln_field *n)
{
	bool widened = int_format_contains(n, o), narrowed = int_format_contains(o, n);

	if (widened && narrowed)
		return;
	add(d, n->path,
	    narrowed  ? INTEGER_FORMAT_NARROWED
	    : widened ? INTEGER_FORMAT_WIDENED
	              : INTEGER_FORMAT_CHANGED,
	    "format %s -> %s", int_format_text(d, o), int_format_text(d, n));
}

static void compare_string_rules(differ *d, const kiln_field *o, const kiln_field *n)
{
	if (o->pattern_text || n->pattern_text) {
		if (!o->pattern_text)
			add(d, n->path, PATTERN_ADDED, "pattern none -> %s",
			    quoted(d, n->pattern_text, strlen(n->pattern_text)));
		else if (!n->pattern_text)
			add(d, n->path, PATTERN_REMOVED, "pattern %s -> none",
			    quoted(d, o->pattern_text, strlen(o->pattern_text)));
		else if (strcmp(o->pattern_text, n->pattern_text) != 0)
			add(d, n->path, PATTERN_CHANGED, "pattern %s -> %s",
			    quoted(d, o->pattern_text, strlen(o->pattern_text)),
			    quoted(d, n->pattern_text, strlen(n->pattern_text)));
	}
	if (o->format != n->format)
		add(d, n->path,
		    o->format == KILN_FORMAT_NONE   ? FORMAT_ADDED
		    : n->format == KILN_FORMAT_NONE ? FORMAT_REMOVED
		                                    : FORMAT_CHANGED,
		    "format %s -> %s", kiln_format_name(o->format), kiln_format_name(n->format));
}

static bool enum_has(const kiln_field *f, const kiln_field *g, size_t j)
{
	for (size_t i = 0; i < f->enum_count; i++) {
		if (f->enum_kinds[i] != g->enum_kinds[j])
			continue;
		if (f->enum_kinds[i] == KILN_ENUM_NUMBER
		        ? f->enum_numbers[i] == g->enum_numbers[j]
		        : f->enum_lens[i] == g->enum_lens[j] &&
		              memcmp(f->enum_values[i], g->enum_values[j], f->enum_lens[i]) == 0)
			return true;
	}
	return false;
}

/* The values of f that `other` lacks (all of them when other is NULL), as
 * schema text: strings quoted, numbers as written. */
static const char *enum_list(differ *d, const kiln_field *f, const kiln_field *other, size_t *out_count)
{
	kiln_buf b = KILN_BUF_INIT(0);
	size_t listed = 0, more = 0;
	const char *r;
	int rc = 0;

	for (size_t i = 0; i < f->enum_count && rc == 0; i++) {
		if (other && enum_has(other, f, i))
			continue;
		if (listed == ENUM_LISTED) {
			more++;
			continue;
		}
		if (listed++)
			rc = kiln_buf_puts(&b, ", ");
		if (rc == 0 && f->enum_kinds[i] == KILN_ENUM_STRING)
			rc = kiln_buf_puts(&b, quoted(d, f->enum_values[i], f->enum_lens[i]));
		else if (rc == 0) /* a number as written, true or false */
			rc = kiln_buf_put(&b, f->enum_values[i], f->enum_lens[i]);
	}
	if (rc == 0 && more)
		rc = kiln_buf_printf(&b, " and %zu more", more);
	*out_count = listed + more;
	r = rc == 0 ? kiln_arena_strndup(d->arena, b.ptr ? b.ptr : "", b.len) : NULL;
	kiln_buf_free(&b);
	if (!r)
		d->rc = KILN_ENOMEM;
	return r ? r : "?";
}

static void compare_enum(differ *d, const kiln_field *o, const kiln_field *n)
{
	const char *list;
	size_t count;

	if (!o->enum_count && !n->enum_count)
		return;
	if (!o->enum_count) {
		add(d, n->path, ENUM_ADDED, "enum none -> [%s]", enum_list(d, n, NULL, &count));
		return;
	}
	if (!n->enum_count) {
		add(d, n->path, ENUM_REMOVED, "enum [%s] -> none", enum_list(d, o, NULL, &count));
		return;
	}
	list = enum_list(d, o, n, &count);
	if (count)
		add(d, n->path, ENUM_VALUES_REMOVED, "enum value%s removed: %s", count == 1 ? "" : "s", list);
	list = enum_list(d, n, o, &count);
	if (count)
		add(d, n->path, ENUM_VALUES_ADDED, "enum value%s added: %s", count == 1 ? "" : "s", list);
}

/* What decides a curated value whatever the field's type: required,
 * classification, pseudonymisation, the dataset-wide keys. */
static void compare_common(differ *d, const kiln_field *o, const kiln_field *n)
{
	bool tokenised = o->pseudo_mode == KILN_PSEUDO_TOKEN || o->pseudo_mode == KILN_PSEUDO_KEEP_DOMAIN ||
	                 n->pseudo_mode == KILN_PSEUDO_TOKEN || n->pseudo_mode == KILN_PSEUDO_KEEP_DOMAIN;

	if (o->required != n->required)
		add(d, n->path, n->required ? BECAME_REQUIRED : BECAME_OPTIONAL, "required %s -> %s",
		    bool_text(o->required), bool_text(n->required));
	if (!(o->classification && n->classification &&
	      strcasecmp(o->classification, n->classification) == 0) &&
	    !(!o->classification && !n->classification))
		add(d, n->path, CLASSIFICATION_CHANGED, "classification %s -> %s", word(d, o->classification),
		    word(d, n->classification));
	if (o->pseudo_mode != n->pseudo_mode)
		add(d, n->path, PSEUDONYMISATION_CHANGED, "pseudonymisation %s -> %s",
		    pseudo_name(o->pseudo_mode), pseudo_name(n->pseudo_mode));
	if (tokenised && !same_text(o->pseudo_domain, n->pseudo_domain))
		add(d, n->path, PSEUDONYM_DOMAIN_CHANGED, "pseudonymDomain %s -> %s",
		    word(d, o->pseudo_domain), word(d, n->pseudo_domain));
	if (o->pii_scan != n->pii_scan)
		add(d, n->path, PII_SCAN_CHANGED, "piiScan %s -> %s", bool_text(o->pii_scan),
		    bool_text(n->pii_scan));
	if (o->unique != n->unique)
		add(d, n->path, n->unique ? UNIQUE_ADDED : UNIQUE_REMOVED, "unique %s -> %s",
		    bool_text(o->unique), bool_text(n->unique));
	if (o->primary_key != n->primary_key)
		add(d, n->path, n->primary_key ? PRIMARY_KEY_ADDED : PRIMARY_KEY_REMOVED,
		    "primaryKey %s -> %s", bool_text(o->primary_key), bool_text(n->primary_key));
	else if (o->primary_key && o->primary_key_position != n->primary_key_position)
		add(d, n->path, PRIMARY_KEY_POSITION_CHANGED, "primaryKeyPosition %s -> %s",
		    count_text(d, o->primary_key_position), count_text(d, n->primary_key_position));
}

static void compare_field(differ *d, const kiln_field *o, const kiln_field *n);

/* An array without `items` holds any values: compared as a field of no type
 * and no rules at the items' path. */
static void any_items(kiln_field *out, const char *path)
{
	memset(out, 0, sizeof(*out));
	out->path = path;
	out->min_length = out->max_length = out->min_items = out->max_items = -1;
	out->min_properties = out->max_properties = -1;
	out->primary_key_position = -1;
}

static const kiln_field *find_child(const kiln_field *object, const kiln_field *like)
{
	return kiln_field_child(object, like->name, like->name_len, like->name_hash);
}

static void field_removed(differ *d, const kiln_field *o_parent, const kiln_field *n_parent,
                          const kiln_field *gone)
{
	const kiln_field *there =
	    gone->position < n_parent->child_count ? n_parent->children[gone->position] : NULL;

	/* a rename is a removal and an addition; the hint names the likely new name */
	if (there && there->type == gone->type && !find_child(o_parent, there))
		add(d, gone->path, FIELD_REMOVED,
		    "field removed (%s); renamed to %s? (added at its position, same type)",
		    kiln_ltype_name(gone->type), word(d, there->name));
	else
		add(d, gone->path, FIELD_REMOVED, "field removed (%s)", kiln_ltype_name(gone->type));
}

static void compare_children(differ *d, const kiln_field *o, const kiln_field *n)
{
	for (size_t i = 0; i < o->child_count; i++) {
		const kiln_field *oc = o->children[i], *nc = find_child(n, oc);
		if (nc)
			compare_field(d, oc, nc);
		else
			field_removed(d, o, n, oc);
	}
	for (size_t i = 0; i < n->child_count; i++) {
		const kiln_field *nc = n->children[i];
		if (find_child(o, nc))
			continue;
		add(d, nc->path, nc->required ? FIELD_ADDED_REQUIRED : FIELD_ADDED, "field added (%s, %s)",
		    kiln_ltype_name(nc->type), nc->required ? "required" : "optional");
	}
}

static void compare_type(differ *d, const kiln_field *o, const kiln_field *n)
{
	compat_code code = TYPE_CHANGED;

	if (n->type == KILN_LTYPE_ANY || (o->type == KILN_LTYPE_INTEGER && n->type == KILN_LTYPE_NUMBER))
		code = TYPE_WIDENED;
	else if (o->type == KILN_LTYPE_ANY || (o->type == KILN_LTYPE_NUMBER && n->type == KILN_LTYPE_INTEGER))
		code = TYPE_NARROWED;
	add(d, n->path, code, "type %s -> %s", kiln_ltype_name(o->type), kiln_ltype_name(n->type));
}

static void compare_field(differ *d, const kiln_field *o, const kiln_field *n)
{
	kiln_field none_o, none_n;

	if (d->rc < 0)
		return;
	if (o->type != n->type) {
		/* the old type's rules, children and items no longer apply: the
		 * type change says it, the rules of the new type are part of it */
		compare_type(d, o, n);
		compare_common(d, o, n);
		return;
	}
	compare_common(d, o, n);
	compare_enum(d, o, n);
	compare_string_rules(d, o, n);
	compare_counts(d, n, o->min_length, n->min_length, o->max_length, n->max_length, "minLength",
	               "maxLength", LENGTH_TIGHTENED, LENGTH_LOOSENED);
	compare_bound(d, o, n, true);
	compare_bound(d, o, n, false);
	compare_multiple_of(d, o, n);
	compare_int_format(d, o, n);
	compare_counts(d, n, o->min_properties, n->min_properties, o->max_properties, n->max_properties,
	               "minProperties", "maxProperties", PROPERTY_COUNT_TIGHTENED, PROPERTY_COUNT_LOOSENED);
	compare_counts(d, n, o->min_items, n->min_items, o->max_items, n->max_items, "minItems", "maxItems",
	               ITEMS_TIGHTENED, ITEMS_LOOSENED);
	if (o->unique_items != n->unique_items)
		add(d, n->path, n->unique_items ? UNIQUE_ITEMS_ADDED : UNIQUE_ITEMS_REMOVED,
		    "uniqueItems %s -> %s", bool_text(o->unique_items), bool_text(n->unique_items));
	if (o->type == KILN_LTYPE_OBJECT)
		compare_children(d, o, n);
	if (o->type == KILN_LTYPE_ARRAY && (o->items || n->items)) {
		const char *path = (o->items ? o->items : n->items)->path;
		if (!o->items)
			any_items(&none_o, path);
		if (!n->items)
			any_items(&none_n, path);
		compare_field(d, o->items ? o->items : &none_o, n->items ? n->items : &none_n);
	}
}

static void compare_contract(differ *d, const kiln_contract *o, const kiln_contract *n)
{
	if (strcmp(o->id, n->id) != 0)
		add(d, "", CONTRACT_ID_CHANGED, "id %s -> %s", word(d, o->id), word(d, n->id));
	if (!same_text(o->schema_name, n->schema_name))
		add(d, "", SCHEMA_NAME_CHANGED, "schema %s -> %s", word(d, o->schema_name),
		    word(d, n->schema_name));
	if (o->unknown_fields != n->unknown_fields)
		add(d, "",
		    n->unknown_fields == KILN_UNKNOWN_REJECT ? UNKNOWN_FIELDS_TIGHTENED
		                                             : UNKNOWN_FIELDS_LOOSENED,
		    "unknownFields %s -> %s", o->unknown_fields == KILN_UNKNOWN_REJECT ? "reject" : "allow",
		    n->unknown_fields == KILN_UNKNOWN_REJECT ? "reject" : "allow");
	if (strcmp(o->version, n->version) != 0)
		add(d, "", CONTRACT_VERSION_CHANGED, "version %s -> %s", word(d, o->version),
		    word(d, n->version));
	if (strcmp(o->api_version, n->api_version) != 0)
		add(d, "", API_VERSION_CHANGED, "apiVersion %s -> %s", word(d, o->api_version),
		    word(d, n->api_version));
	if (!same_text(o->name, n->name))
		add(d, "", CONTRACT_NAME_CHANGED, "name %s -> %s", word(d, o->name), word(d, n->name));
	if (strcmp(o->status, n->status) != 0)
		add(d, "", CONTRACT_STATUS_CHANGED, "status %s -> %s", word(d, o->status),
		    word(d, n->status));
	compare_field(d, o->root, n->root);
}

int kiln_contract_compat_diff(kiln_contract_compat **out, const kiln_contract *old_contract,
                              const kiln_contract *new_contract)
{
	differ d = {0};
	kiln_contract_compat *c;

	assert(old_contract && new_contract && old_contract->root && new_contract->root);
	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c || !(c->arena = kiln_arena_new())) {
		free(c);
		return kiln_error_set(KILN_ENOMEM, "out of memory comparing contracts");
	}
	d.out = c;
	d.arena = c->arena;
	compare_contract(&d, old_contract, new_contract);
	if (d.rc < 0) {
		kiln_contract_compat_free(c);
		return kiln_error_set(KILN_ENOMEM, "out of memory comparing contracts");
	}
	*out = c;
	return 0;
}

void kiln_contract_compat_free(kiln_contract_compat *compat)
{
	if (!compat)
		return;
	free(compat->changes);
	kiln_arena_free(compat->arena);
	free(compat);
}

const char *kiln_contract_compat_code(size_t i)
{
	return i < CODE_COUNT_ ? codes[i].name : NULL;
}

bool kiln_contract_compat_code_breaking(const char *code)
{
	for (size_t i = 0; i < CODE_COUNT_; i++)
		if (strcmp(codes[i].name, code) == 0)
			return codes[i].breaking;
	return false;
}

int kiln_contract_compat_breaking_list(kiln_buf *out, const kiln_contract_compat *c, size_t max)
{
	size_t shown = 0;
	int rc = 0;

	for (size_t i = 0; i < c->count && shown < max && rc == 0; i++)
		if (c->changes[i].breaking)
			rc = kiln_buf_printf(out, "%s%s %s", shown++ ? ", " : "",
			                     c->changes[i].path[0] ? c->changes[i].path : "contract",
			                     c->changes[i].code);
	if (rc == 0 && c->breaking > shown)
		rc = kiln_buf_puts(out, ", ...");
	return rc < 0 ? rc : kiln_buf_putc(out, '\0');
}
