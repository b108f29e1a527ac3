/* Compiles an ODCS v3 contract (YAML) into kiln's field table (see
 * contract.h). Everything the compiled contract points to lives in its arena,
 * except the PCRE2 patterns, which are listed and freed with it. Keys ODCS
 * does not define are rejected, each error naming file:line:col and the key
 * path; parts kiln does not use (servers, team, quality, ...) are accepted
 * as ODCS allows them and otherwise ignored. */
#include "contract/contract.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <math.h>
#include <pcre2.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/json.h"
#include "core/yaml_doc.h"

#define MAX_CONTRACT_BYTES (16u << 20)

typedef struct compiler {
	const kiln_yaml_doc *doc;
	kiln_contract *contract;
	kiln_arena *arena;
	size_t patterns_cap;
} compiler;

static const char *const top_level_keys[] = {
    "version",
    "kind",
    "apiVersion",
    "id",
    "name",
    "tenant",
    "tags",
    "status",
    "servers",
    "dataProduct",
    "description",
    "domain",
    "schema",
    "support",
    "price",
    "team",
    "roles",
    "slaDefaultElement",
    "slaProperties",
    "authoritativeDefinitions",
    "customProperties",
    "contractCreatedTs",
    NULL,
};

static const char *const schema_object_keys[] = {
    "id",
    "name",
    "physicalType",
    "description",
    "businessName",
    "authoritativeDefinitions",
    "tags",
    "customProperties",
    "logicalType",
    "physicalName",
    "dataGranularityDescription",
    "properties",
    "quality",
    "relationships",
    NULL,
};

/* `enum` is kiln's extension (ODCS has none); customProperties `enum` is the
 * ODCS-conformant spelling of the same rule. */
static const char *const property_keys[] = {
    "id",
    "name",
    "physicalType",
    "description",
    "businessName",
    "authoritativeDefinitions",
    "tags",
    "customProperties",
    "primaryKey",
    "primaryKeyPosition",
    "logicalType",
    "logicalTypeOptions",
    "required",
    "unique",
    "partitioned",
    "partitionKeyPosition",
    "classification",
    "encryptedName",
    "transformSourceObjects",
    "transformLogic",
    "transformDescription",
    "examples",
    "criticalDataElement",
    "quality",
    "properties",
    "items",
    "physicalName",
    "relationships",
    "enum",
    NULL,
};

static const char *const string_options[] = {"minLength", "maxLength", "pattern", "format", NULL};
static const char *const temporal_options[] = {
    "format",           "minimum",  "maximum",         "exclusiveMinimum",
    "exclusiveMaximum", "timezone", "defaultTimezone", NULL};
static const char *const numeric_options[] = {"multipleOf",       "minimum", "maximum", "exclusiveMinimum",
                                              "exclusiveMaximum", "format",  NULL};
static const char *const object_options[] = {"maxProperties", "minProperties", "required", NULL};
static const char *const array_options[] = {"maxItems", "minItems", "uniqueItems", NULL};
static const char *const no_options[] = {NULL};

static const struct {
	const char *name;
	kiln_ltype type;
	const char *const *options;
} ltypes[] = {
    {"string", KILN_LTYPE_STRING, string_options},  {"integer", KILN_LTYPE_INTEGER, numeric_options},
    {"number", KILN_LTYPE_NUMBER, numeric_options}, {"boolean", KILN_LTYPE_BOOLEAN, no_options},
    {"date", KILN_LTYPE_DATE, temporal_options},    {"timestamp", KILN_LTYPE_TIMESTAMP, temporal_options},
    {"time", KILN_LTYPE_TIME, temporal_options},    {"object", KILN_LTYPE_OBJECT, object_options},
    {"array", KILN_LTYPE_ARRAY, array_options},
};

const char *kiln_ltype_name(kiln_ltype type)
{
	for (size_t i = 0; i < sizeof(ltypes) / sizeof(ltypes[0]); i++)
		if (ltypes[i].type == type)
			return ltypes[i].name;
	return "any";
}

static int fail(compiler *c, const kiln_yaml_node *node, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(compiler *c, const kiln_yaml_node *node, const char *path, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return kiln_yaml_fail(c->doc, node, path, "%s", msg);
}

static const char *join(compiler *c, const char *path, const char *key)
{
	return path && *path ? kiln_arena_printf(c->arena, "%s.%s", path, key)
	                     : kiln_arena_printf(c->arena, "%s", key);
}

static bool in_list(const char *const *list, const char *key)
{
	for (; *list; list++)
		if (strcmp(*list, key) == 0)
			return true;
	return false;
}

/* Every key of `map` must be in `allowed`. */
static int check_keys(compiler *c, const kiln_yaml_node *map, const char *path, const char *const *allowed,
                      const char *what)
{
	for (size_t i = 0; i < map->count; i++)
		if (!in_list(allowed, map->keys[i]->value))
			return fail(c, map->keys[i], join(c, path, map->keys[i]->value), "unknown key in %s",
			            what);
	return 0;
}

static int expect_kind(compiler *c, const kiln_yaml_node *node, const char *path, kiln_yaml_kind kind)
{
	static const char *const names[] = {"a scalar", "a list", "a mapping"};

	if (node->kind != kind)
		return fail(c, node, path, "expected %s", names[kind]);
	return 0;
}

static int get_string(compiler *c, const kiln_yaml_node *map, const char *key, const char *path,
                      bool required, const char **out)
{
	const kiln_yaml_node *n = kiln_yaml_get(map, key);

	*out = NULL;
	if (!n || kiln_yaml_is_null(n)) {
		if (required)
			return fail(c, n ? n : map, join(c, path, key), "required key is missing");
		return 0;
	}
	return kiln_yaml_string(c->doc, n, join(c, path, key), out);
}

static int get_bool(compiler *c, const kiln_yaml_node *map, const char *key, const char *path, bool *out)
{
	const kiln_yaml_node *n = kiln_yaml_get(map, key);

	if (!n || kiln_yaml_is_null(n))
		return 0;
	return kiln_yaml_bool(c->doc, n, join(c, path, key), out);
}

static int get_count(compiler *c, const kiln_yaml_node *map, const char *key, const char *path, int64_t *out)
{
	const kiln_yaml_node *n = kiln_yaml_get(map, key);
	int rc;

	*out = -1;
	if (!n || kiln_yaml_is_null(n))
		return 0;
	if ((rc = kiln_yaml_int64(c->doc, n, join(c, path, key), out)) < 0)
		return rc;
	if (*out < 0)
		return fail(c, n, join(c, path, key), "must not be negative");
	return 0;
}

/* A bound for `type`: numbers for numeric fields, RFC 3339 text for dates,
 * timestamps and times. */
static int parse_bound_value(compiler *c, const kiln_yaml_node *n, const char *path, kiln_ltype type,
                             long double *out)
{
	const char *s = NULL;
	bool ok;
	int rc;

	if (type == KILN_LTYPE_INTEGER || type == KILN_LTYPE_NUMBER)
		return kiln_yaml_number(c->doc, n, path, out);
	if ((rc = kiln_yaml_string(c->doc, n, path, &s)) < 0)
		return rc;
	switch (type) {
	case KILN_LTYPE_DATE:
		ok = kiln_format_parse_date(s, n->len, out);
		break;
	case KILN_LTYPE_TIMESTAMP:
		ok = kiln_format_parse_date_time(s, n->len, out) || kiln_format_parse_date(s, n->len, out);
		break;
	default:
		ok = kiln_format_parse_time(s, n->len, out);
		break;
	}
	if (!ok)
		return fail(c, n, path, "not a valid %s bound", kiln_ltype_name(type));
	return 0;
}

/* minimum/maximum with v3.0 boolean or v3.1 value exclusives; when both an
 * inclusive and an exclusive value are given the tighter one wins. */
static int compile_bound(compiler *c, const kiln_yaml_node *opts, const char *path, kiln_ltype type,
                         const char *inclusive_key, const char *exclusive_key, bool lower, kiln_bound *out)
{
	const kiln_yaml_node *inc = kiln_yaml_get(opts, inclusive_key);
	const kiln_yaml_node *exc = kiln_yaml_get(opts, exclusive_key);
	const char *exc_path = join(c, path, exclusive_key);
	int rc;

	if (inc && !kiln_yaml_is_null(inc)) {
		if ((rc = parse_bound_value(c, inc, join(c, path, inclusive_key), type, &out->value)) < 0)
			return rc;
		out->set = true;
	}
	if (!exc || kiln_yaml_is_null(exc))
		return 0;
	if (exc->kind == KILN_YAML_SCALAR && !exc->quoted &&
	    (strcasecmp(exc->value, "true") == 0 || strcasecmp(exc->value, "false") == 0)) {
		bool b;
		if ((rc = kiln_yaml_bool(c->doc, exc, exc_path, &b)) < 0)
			return rc;
		if (b && !out->set)
			return fail(c, exc, exc_path, "exclusive flag set but %s is missing", inclusive_key);
		out->exclusive = b;
		return 0;
	}
	long double v;
	if ((rc = parse_bound_value(c, exc, exc_path, type, &v)) < 0)
		return rc;
	if (!out->set || (lower ? v >= out->value : v <= out->value)) {
		out->set = true;
		out->exclusive = true;
		out->value = v;
	}
	return 0;
}

static int compile_pattern(compiler *c, kiln_field *f, const kiln_yaml_node *n, const char *path)
{
	int rc, errcode;
	PCRE2_SIZE erroff;
	pcre2_code *re;

	if ((rc = kiln_yaml_string(c->doc, n, path, &f->pattern_text)) < 0)
		return rc;
	/* JSON Schema semantics: `$` is the end of the value, never before a final newline */
	re = pcre2_compile((PCRE2_SPTR)f->pattern_text, n->len, PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY,
	                   &errcode, &erroff, NULL);
	if (!re) {
		PCRE2_UCHAR msg[160];
		pcre2_get_error_message(errcode, msg, sizeof(msg));
		return fail(c, n, path, "invalid pattern at offset %zu: %s", (size_t)erroff, (char *)msg);
	}
	/* without JIT (some platforms) the interpreter runs the same pattern */
	f->pattern_jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
	if (c->contract->pattern_count == c->patterns_cap) {
		size_t cap = c->patterns_cap ? c->patterns_cap * 2 : 8;
		void **p = realloc(c->contract->patterns, cap * sizeof(*p));
		if (!p) {
			pcre2_code_free(re);
			return kiln_error_oom("compiling the contract");
		}
		c->contract->patterns = p;
		c->patterns_cap = cap;
	}
	c->contract->patterns[c->contract->pattern_count++] = re;
	f->pattern = re;
	return 0;
}

/* Integer formats i8..i128 / u8..u128 (checked exactly, digit by digit). */
static int parse_int_format(compiler *c, kiln_field *f, const kiln_yaml_node *n, const char *path,
                            const char *name)
{
	char *end;
	long bits;

	if ((name[0] != 'i' && name[0] != 'u') || !name[1] || name[1] == '-' || name[1] == '+')
		goto bad;
	bits = strtol(name + 1, &end, 10);
	if (*end || (bits != 8 && bits != 16 && bits != 32 && bits != 64 && bits != 128))
		goto bad;
	f->int_bits = (uint8_t)bits;
	f->int_unsigned = name[0] == 'u';
	return 0;
bad:
	return fail(c, n, path, "unknown integer format (expected i8..i128 or u8..u128)");
}

static int compile_options(compiler *c, kiln_field *f, const kiln_yaml_node *opts, const char *path,
                           const char *const *allowed)
{
	const kiln_yaml_node *n;
	const char *fmt = NULL;
	int rc;

	if ((rc = expect_kind(c, opts, path, KILN_YAML_MAPPING)) < 0)
		return rc;
	if (f->type == KILN_LTYPE_ANY && opts->count > 0)
		return fail(c, opts, path, "logicalTypeOptions need a logicalType");
	if ((rc = check_keys(c, opts, path, allowed, "logicalTypeOptions")) < 0)
		return rc;

	if ((rc = get_count(c, opts, "minLength", path, &f->min_length)) < 0 ||
	    (rc = get_count(c, opts, "maxLength", path, &f->max_length)) < 0 ||
	    (rc = get_count(c, opts, "minItems", path, &f->min_items)) < 0 ||
	    (rc = get_count(c, opts, "maxItems", path, &f->max_items)) < 0 ||
	    (rc = get_count(c, opts, "minProperties", path, &f->min_properties)) < 0 ||
	    (rc = get_count(c, opts, "maxProperties", path, &f->max_properties)) < 0 ||
	    (rc = get_bool(c, opts, "uniqueItems", path, &f->unique_items)) < 0)
		return rc;
	if ((n = kiln_yaml_get(opts, "pattern")) && !kiln_yaml_is_null(n) &&
	    (rc = compile_pattern(c, f, n, join(c, path, "pattern"))) < 0)
		return rc;
	if (in_list(allowed, "minimum") &&
	    ((rc = compile_bound(c, opts, path, f->type, "minimum", "exclusiveMinimum", true, &f->minimum)) <
	         0 ||
	     (rc = compile_bound(c, opts, path, f->type, "maximum", "exclusiveMaximum", false, &f->maximum)) <
	         0))
		return rc;
	if ((n = kiln_yaml_get(opts, "multipleOf")) && !kiln_yaml_is_null(n)) {
		if ((rc = kiln_yaml_number(c->doc, n, join(c, path, "multipleOf"), &f->multiple_of)) < 0)
			return rc;
		if (!(f->multiple_of > 0))
			return fail(c, n, join(c, path, "multipleOf"), "must be greater than 0");
		f->multiple_of_is_exact = kiln_decimal_parse(n->value, n->len, &f->multiple_of_exact);
	}
	if ((rc = get_string(c, opts, "format", path, false, &fmt)) < 0)
		return rc;
	if (fmt) {
		const char *fpath = join(c, path, "format");
		n = kiln_yaml_get(opts, "format");
		if (f->type == KILN_LTYPE_STRING) {
			if (!kiln_format_from_name(fmt, &f->format))
				return fail(c, n, fpath,
				            "unknown string format (known: email, uuid, ipv4, ipv6, uri, "
				            "hostname, date, date-time, time, byte, password, binary)");
		} else if (f->type == KILN_LTYPE_INTEGER) {
			if ((rc = parse_int_format(c, f, n, fpath, fmt)) < 0)
				return rc;
		} else if (f->type == KILN_LTYPE_NUMBER) {
			if (strcmp(fmt, "f32") != 0 && strcmp(fmt, "f64") != 0)
				return fail(c, n, fpath, "unknown number format (expected f32 or f64)");
		}
		/* date, timestamp and time formats describe a display pattern: values
		 * are always checked as RFC 3339 */
	}
	if (f->min_length >= 0 && f->max_length >= 0 && f->min_length > f->max_length)
		return fail(c, opts, path, "minLength is greater than maxLength");
	if (f->min_items >= 0 && f->max_items >= 0 && f->min_items > f->max_items)
		return fail(c, opts, path, "minItems is greater than maxItems");
	if (f->min_properties >= 0 && f->max_properties >= 0 && f->min_properties > f->max_properties)
		return fail(c, opts, path, "minProperties is greater than maxProperties");
	if (f->minimum.set && f->maximum.set &&
	    (f->minimum.value > f->maximum.value ||
	     (f->minimum.value == f->maximum.value && (f->minimum.exclusive || f->maximum.exclusive))))
		return fail(c, opts, path, "no value lies between the minimum and the maximum");
	return 0;
}

static int compile_enum(compiler *c, kiln_field *f, const kiln_yaml_node *list, const char *path)
{
	int rc;

	if ((rc = expect_kind(c, list, path, KILN_YAML_SEQUENCE)) < 0)
		return rc;
	if (list->count == 0)
		return fail(c, list, path, "enum needs at least one value");
	if (f->type == KILN_LTYPE_OBJECT || f->type == KILN_LTYPE_ARRAY)
		return fail(c, list, path, "enum applies to scalar fields only");
	f->enum_count = list->count;
	f->enum_values = kiln_arena_alloc(c->arena, list->count * sizeof(*f->enum_values));
	f->enum_lens = kiln_arena_alloc(c->arena, list->count * sizeof(*f->enum_lens));
	f->enum_numbers = kiln_arena_alloc(c->arena, list->count * sizeof(*f->enum_numbers));
	f->enum_kinds = kiln_arena_alloc(c->arena, list->count * sizeof(*f->enum_kinds));
	if (!f->enum_values || !f->enum_lens || !f->enum_numbers || !f->enum_kinds)
		return kiln_error_oom("compiling the contract");
	for (size_t i = 0; i < list->count; i++) {
		const kiln_yaml_node *v = list->items[i];
		const char *ipath = kiln_arena_printf(c->arena, "%s[%zu]", path, i);
		kiln_enum_kind kind = KILN_ENUM_STRING;
		bool b;

		if (v->kind != KILN_YAML_SCALAR || kiln_yaml_is_null(v))
			return fail(c, v, ipath, "enum values must be scalars");
		f->enum_values[i] = v->value;
		f->enum_lens[i] = v->len;
		switch (f->type) {
		case KILN_LTYPE_INTEGER:
		case KILN_LTYPE_NUMBER:
			kind = KILN_ENUM_NUMBER;
			break;
		case KILN_LTYPE_BOOLEAN:
			kind = KILN_ENUM_BOOLEAN;
			break;
		case KILN_LTYPE_ANY: /* the YAML scalar's own type decides */
			if (!v->quoted && kiln_yaml_number(c->doc, v, ipath, &f->enum_numbers[i]) == 0)
				kind = KILN_ENUM_NUMBER;
			else if (!v->quoted && kiln_yaml_bool(c->doc, v, ipath, &b) == 0)
				kind = KILN_ENUM_BOOLEAN;
			break;
		default:
			break;
		}
		if (kind == KILN_ENUM_NUMBER &&
		    (rc = kiln_yaml_number(c->doc, v, ipath, &f->enum_numbers[i])) < 0)
			return rc;
		if (kind == KILN_ENUM_BOOLEAN) {
			if ((rc = kiln_yaml_bool(c->doc, v, ipath, &b)) < 0)
				return rc;
			f->enum_values[i] = b ? "true" : "false";
			f->enum_lens[i] = b ? 4 : 5;
		}
		f->enum_kinds[i] = (uint8_t)kind;
	}
	kiln_error_clear(); /* probing the scalar types above may have set it */
	return 0;
}

static int parse_pseudo_mode(compiler *c, kiln_field *f, const kiln_yaml_node *v, const char *path)
{
	static const struct {
		const char *name;
		kiln_pseudo_mode mode;
	} modes[] = {
	    {"token", KILN_PSEUDO_TOKEN},   {"keep-domain", KILN_PSEUDO_KEEP_DOMAIN},
	    {"redact", KILN_PSEUDO_REDACT}, {"drop", KILN_PSEUDO_DROP},
	    {"keep", KILN_PSEUDO_KEEP},
	};
	const char *s;
	int rc;

	if ((rc = kiln_yaml_string(c->doc, v, path, &s)) < 0)
		return rc;
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (strcmp(s, modes[i].name) == 0) {
			f->pseudo_mode = modes[i].mode;
			return 0;
		}
	}
	return fail(c, v, path,
	            "unknown pseudonymisation mode (expected token, keep-domain, redact, drop or keep)");
}

/* customProperties: a list of {property, value[, description]}. */
static int compile_custom(compiler *c, kiln_field *f, const kiln_yaml_node *list, const char *path,
                          bool *mode_set)
{
	int rc;

	if ((rc = expect_kind(c, list, path, KILN_YAML_SEQUENCE)) < 0)
		return rc;
	for (size_t i = 0; i < list->count; i++) {
		const kiln_yaml_node *item = list->items[i], *v;
		const char *ipath = kiln_arena_printf(c->arena, "%s[%zu]", path, i);
		const char *prop, *vpath;

		if ((rc = expect_kind(c, item, ipath, KILN_YAML_MAPPING)) < 0 ||
		    (rc = get_string(c, item, "property", ipath, true, &prop)) < 0)
			return rc;
		v = kiln_yaml_get(item, "value");
		vpath = join(c, ipath, "value");
		if (!f) /* contract level: only unknownFields matters to kiln */
			continue;
		if (strcmp(prop, "pseudonymisation") == 0 || strcmp(prop, "pseudonymization") == 0) {
			if (!v)
				return fail(c, item, vpath, "required key is missing");
			if ((rc = parse_pseudo_mode(c, f, v, vpath)) < 0)
				return rc;
			*mode_set = true;
		} else if (strcmp(prop, "pseudonymDomain") == 0) {
			if (!v)
				return fail(c, item, vpath, "required key is missing");
			if ((rc = kiln_yaml_string(c->doc, v, vpath, &f->pseudo_domain)) < 0)
				return rc;
			if (!*f->pseudo_domain)
				return fail(c, v, vpath, "must not be empty");
		} else if (strcmp(prop, "piiScan") == 0) {
			if (!v)
				return fail(c, item, vpath, "required key is missing");
			if ((rc = kiln_yaml_bool(c->doc, v, vpath, &f->pii_scan)) < 0)
				return rc;
		} else if (strcmp(prop, "enum") == 0) {
			if (!v)
				return fail(c, item, vpath, "required key is missing");
			if ((rc = compile_enum(c, f, v, vpath)) < 0)
				return rc;
		}
	}
	return 0;
}

static int compile_property(compiler *c, kiln_field *f, const kiln_yaml_node *node, const char *ypath,
                            const char *fpath, bool is_item);

static int compile_children(compiler *c, kiln_field *f, const kiln_yaml_node *list, const char *ypath)
{
	int rc;

	if ((rc = expect_kind(c, list, ypath, KILN_YAML_SEQUENCE)) < 0)
		return rc;
	f->child_count = list->count;
	f->children = kiln_arena_alloc(c->arena, (list->count + 1) * sizeof(*f->children));
	if (!f->children)
		return kiln_error_oom("compiling the contract");
	for (size_t i = 0; i < list->count; i++) {
		const char *ipath = kiln_arena_printf(c->arena, "%s[%zu]", ypath, i);
		const char *name;
		kiln_field *child = kiln_arena_alloc(c->arena, sizeof(*child));

		if (!child || !ipath)
			return kiln_error_oom("compiling the contract");
		if ((rc = expect_kind(c, list->items[i], ipath, KILN_YAML_MAPPING)) < 0 ||
		    (rc = get_string(c, list->items[i], "name", ipath, true, &name)) < 0)
			return rc;
		if (!*name)
			return fail(c, kiln_yaml_get(list->items[i], "name"), join(c, ipath, "name"),
			            "must not be empty");
		const char *fpath =
		    f->path && *f->path ? kiln_arena_printf(c->arena, "%s.%s", f->path, name) : name;
		if ((rc = compile_property(c, child, list->items[i], ipath, fpath, false)) < 0)
			return rc;
		for (size_t j = 0; j < i; j++)
			if (f->children[j]->name_len == child->name_len &&
			    memcmp(f->children[j]->name, child->name, child->name_len) == 0)
				return fail(c, kiln_yaml_get(list->items[i], "name"), join(c, ipath, "name"),
				            "property \"%s\" is defined twice", name);
		child->position = (uint32_t)i;
		f->children[i] = child;
	}
	return 0;
}

/* Children index, required list and seen-map slots for an OBJECT field. */
static int index_children(compiler *c, kiln_field *f)
{
	uint32_t size = 4;

	while (size < f->child_count * 2)
		size *= 2;
	f->child_index = kiln_arena_alloc(c->arena, size * sizeof(*f->child_index));
	f->required_children = kiln_arena_alloc(c->arena, (f->child_count + 1) * sizeof(uint32_t));
	if (!f->child_index || !f->required_children)
		return kiln_error_oom("compiling the contract");
	f->child_index_mask = size - 1;
	f->seen_base = c->contract->seen_slots;
	c->contract->seen_slots += (uint32_t)f->child_count;
	for (size_t i = 0; i < f->child_count; i++) {
		uint32_t slot = (uint32_t)f->children[i]->name_hash & f->child_index_mask;
		while (f->child_index[slot].child)
			slot = (slot + 1) & f->child_index_mask;
		f->child_index[slot].hash = f->children[i]->name_hash;
		f->child_index[slot].child = f->children[i];
		if (f->children[i]->required)
			f->required_children[f->required_count++] = (uint32_t)i;
	}
	return 0;
}

/* logicalTypeOptions.required on an object: names of children that must be present. */
static int apply_required_list(compiler *c, kiln_field *f, const kiln_yaml_node *opts, const char *path)
{
	const kiln_yaml_node *list = kiln_yaml_get(opts, "required");
	const char *rpath = join(c, path, "required");
	int rc;

	if (!list || kiln_yaml_is_null(list))
		return 0;
	if ((rc = expect_kind(c, list, rpath, KILN_YAML_SEQUENCE)) < 0)
		return rc;
	for (size_t i = 0; i < list->count; i++) {
		const char *name;
		const char *ipath = kiln_arena_printf(c->arena, "%s[%zu]", rpath, i);
		size_t j;
		if ((rc = kiln_yaml_string(c->doc, list->items[i], ipath, &name)) < 0)
			return rc;
		for (j = 0; j < f->child_count; j++)
			if (strcmp(f->children[j]->name, name) == 0)
				break;
		if (j == f->child_count)
			return fail(c, list->items[i], ipath, "no property named \"%s\"", name);
		f->children[j]->required = true;
	}
	return 0;
}

static int compile_property(compiler *c, kiln_field *f, const kiln_yaml_node *node, const char *ypath,
                            const char *fpath, bool is_item)
{
	const kiln_yaml_node *n, *opts;
	const char *lt = NULL, *name = NULL;
	bool mode_set = false;
	int64_t pkpos = -1;
	int rc;

	if ((rc = expect_kind(c, node, ypath, KILN_YAML_MAPPING)) < 0 ||
	    (rc = check_keys(c, node, ypath, property_keys, "a property")) < 0)
		return rc;
	f->id = ++c->contract->field_count;
	f->line = node->line;
	f->column = node->column;
	f->path = fpath;
	f->min_length = f->max_length = f->min_items = f->max_items = -1;
	f->min_properties = f->max_properties = -1;
	f->primary_key_position = -1;

	if ((rc = get_string(c, node, "name", ypath, !is_item, &name)) < 0)
		return rc;
	if (!is_item) {
		f->name = name;
		f->name_len = strlen(name);
		f->name_hash = kiln_json_hash(name, f->name_len);
	}
	if ((rc = get_string(c, node, "logicalType", ypath, false, &lt)) < 0)
		return rc;
	const char *const *allowed = no_options;
	if (lt) {
		size_t i;
		for (i = 0; i < sizeof(ltypes) / sizeof(ltypes[0]); i++)
			if (strcmp(lt, ltypes[i].name) == 0)
				break;
		if (i == sizeof(ltypes) / sizeof(ltypes[0]))
			return fail(c, kiln_yaml_get(node, "logicalType"), join(c, ypath, "logicalType"),
			            "unknown logical type \"%s\" (expected string, integer, number, boolean, "
			            "date, timestamp, time, object or array)",
			            lt);
		f->type = ltypes[i].type;
		allowed = ltypes[i].options;
	}
	if ((rc = get_bool(c, node, "required", ypath, &f->required)) < 0 ||
	    (rc = get_bool(c, node, "unique", ypath, &f->unique)) < 0 ||
	    (rc = get_bool(c, node, "primaryKey", ypath, &f->primary_key)) < 0 ||
	    (rc = get_string(c, node, "classification", ypath, false, &f->classification)) < 0)
		return rc;
	if ((n = kiln_yaml_get(node, "primaryKeyPosition")) && !kiln_yaml_is_null(n)) {
		if ((rc = kiln_yaml_int64(c->doc, n, join(c, ypath, "primaryKeyPosition"), &pkpos)) < 0)
			return rc;
		f->primary_key_position = (int)pkpos;
	}
	if ((opts = kiln_yaml_get(node, "logicalTypeOptions")) && !kiln_yaml_is_null(opts) &&
	    (rc = compile_options(c, f, opts, join(c, ypath, "logicalTypeOptions"), allowed)) < 0)
		return rc;
	if ((n = kiln_yaml_get(node, "enum")) && (rc = compile_enum(c, f, n, join(c, ypath, "enum"))) < 0)
		return rc;
	if ((n = kiln_yaml_get(node, "customProperties")) && !kiln_yaml_is_null(n) &&
	    (rc = compile_custom(c, f, n, join(c, ypath, "customProperties"), &mode_set)) < 0)
		return rc;
	if (!mode_set && f->classification && strcasecmp(f->classification, "pii") == 0)
		f->pseudo_mode = KILN_PSEUDO_TOKEN;
	if (!f->pseudo_domain && f->name)
		f->pseudo_domain = f->name;
	if ((f->pseudo_mode == KILN_PSEUDO_TOKEN || f->pseudo_mode == KILN_PSEUDO_KEEP_DOMAIN) &&
	    (f->type == KILN_LTYPE_OBJECT || f->type == KILN_LTYPE_ARRAY))
		return fail(c, node, ypath,
		            "%s fields cannot be tokenised; pseudonymise their properties or items, or use "
		            "redact or drop",
		            kiln_ltype_name(f->type));
	if (f->pseudo_mode == KILN_PSEUDO_KEEP_DOMAIN && f->type != KILN_LTYPE_STRING)
		return fail(c, node, ypath, "keep-domain needs a string field with format email");
	if (f->pii_scan && f->type != KILN_LTYPE_STRING && f->type != KILN_LTYPE_ANY)
		return fail(c, node, ypath, "piiScan applies to string fields");

	n = kiln_yaml_get(node, "properties");
	if (n && !kiln_yaml_is_null(n)) {
		if (f->type != KILN_LTYPE_OBJECT)
			return fail(c, n, join(c, ypath, "properties"),
			            "properties need logicalType: object");
		if ((rc = compile_children(c, f, n, join(c, ypath, "properties"))) < 0)
			return rc;
	}
	if (f->type == KILN_LTYPE_OBJECT) {
		if (opts && !kiln_yaml_is_null(opts) &&
		    (rc = apply_required_list(c, f, opts, join(c, ypath, "logicalTypeOptions"))) < 0)
			return rc;
		if ((rc = index_children(c, f)) < 0)
			return rc;
	}
	n = kiln_yaml_get(node, "items");
	if (n && !kiln_yaml_is_null(n)) {
		if (f->type != KILN_LTYPE_ARRAY)
			return fail(c, n, join(c, ypath, "items"), "items need logicalType: array");
		f->items = kiln_arena_alloc(c->arena, sizeof(*f->items));
		if (!f->items)
			return kiln_error_oom("compiling the contract");
		/* items have no name: their pseudonym domain is the array's (its
		 * pseudonymDomain or its name) unless they set their own */
		f->items->pseudo_domain = f->pseudo_domain;
		if ((rc = compile_property(c, f->items, n, join(c, ypath, "items"),
		                           kiln_arena_printf(c->arena, "%s[]", fpath), true)) < 0)
			return rc;
	}
	return 0;
}

static int compile_schema(compiler *c, const kiln_yaml_node *root, const kiln_contract_options *opt)
{
	const kiln_yaml_node *list = kiln_yaml_get(root, "schema"), *obj = NULL, *n;
	kiln_contract *k = c->contract;
	const char *lt;
	const char *ypath = NULL;
	int rc;

	if (!list || kiln_yaml_is_null(list))
		return fail(c, root, "schema",
		            "required key is missing (kiln checks records against a schema object)");
	if ((rc = expect_kind(c, list, "schema", KILN_YAML_SEQUENCE)) < 0)
		return rc;
	if (list->count == 0)
		return fail(c, list, "schema", "needs at least one schema object");
	for (size_t i = 0; i < list->count; i++) {
		const char *ipath = kiln_arena_printf(c->arena, "schema[%zu]", i);
		const char *name;
		if ((rc = expect_kind(c, list->items[i], ipath, KILN_YAML_MAPPING)) < 0 ||
		    (rc = check_keys(c, list->items[i], ipath, schema_object_keys, "a schema object")) < 0 ||
		    (rc = get_string(c, list->items[i], "name", ipath, true, &name)) < 0 ||
		    (rc = get_string(c, list->items[i], "logicalType", ipath, false, &lt)) < 0)
			return rc;
		if (lt && strcmp(lt, "object") != 0)
			return fail(c, kiln_yaml_get(list->items[i], "logicalType"),
			            join(c, ipath, "logicalType"),
			            "a schema object's logicalType must be object");
		if (!obj && (!opt || !opt->schema || strcmp(opt->schema, name) == 0)) {
			obj = list->items[i];
			ypath = ipath;
			k->schema_name = name;
		}
	}
	if (!obj)
		return fail(c, list, "schema", "no schema object named \"%s\"", opt->schema);

	k->root = kiln_arena_alloc(c->arena, sizeof(*k->root));
	if (!k->root)
		return kiln_error_oom("compiling the contract");
	k->root->type = KILN_LTYPE_OBJECT;
	k->root->path = "";
	k->root->min_length = k->root->max_length = k->root->min_items = k->root->max_items = -1;
	k->root->min_properties = k->root->max_properties = -1;
	k->root->line = obj->line;
	k->root->column = obj->column;
	n = kiln_yaml_get(obj, "properties");
	if (n && !kiln_yaml_is_null(n) &&
	    (rc = compile_children(c, k->root, n, join(c, ypath, "properties"))) < 0)
		return rc;
	return index_children(c, k->root);
}

static int compile_contract(compiler *c, const kiln_contract_options *opt)
{
	const kiln_yaml_node *root = kiln_yaml_root(c->doc), *n;
	kiln_contract *k = c->contract;
	int rc;

	if (!root)
		return fail(c, NULL, "", "empty contract");
	if ((rc = expect_kind(c, root, "", KILN_YAML_MAPPING)) < 0 ||
	    (rc = check_keys(c, root, "", top_level_keys, "an ODCS contract")) < 0 ||
	    (rc = get_string(c, root, "apiVersion", "", true, &k->api_version)) < 0 ||
	    (rc = get_string(c, root, "kind", "", true, &k->kind)) < 0 ||
	    (rc = get_string(c, root, "id", "", true, &k->id)) < 0 ||
	    (rc = get_string(c, root, "version", "", true, &k->version)) < 0 ||
	    (rc = get_string(c, root, "status", "", true, &k->status)) < 0 ||
	    (rc = get_string(c, root, "name", "", false, &k->name)) < 0)
		return rc;
	/* v3.0.x and v3.1.x */
	const char *v = k->api_version;
	if (!(v[0] == 'v' && v[1] == '3' && v[2] == '.' && (v[3] == '0' || v[3] == '1') && v[4] == '.' &&
	      v[5] >= '0' && v[5] <= '9' && strspn(v + 5, "0123456789") == strlen(v + 5)))
		return fail(c, kiln_yaml_get(root, "apiVersion"), "apiVersion",
		            "unsupported ODCS version \"%s\" (kiln reads v3.0.x and v3.1.x)", v);
	if (strcmp(k->kind, "DataContract") != 0)
		return fail(c, kiln_yaml_get(root, "kind"), "kind", "must be DataContract");
	if (!*k->id)
		return fail(c, kiln_yaml_get(root, "id"), "id", "must not be empty");

	k->unknown_fields = KILN_UNKNOWN_REJECT;
	if ((n = kiln_yaml_get(root, "customProperties")) && !kiln_yaml_is_null(n)) {
		if ((rc = compile_custom(c, NULL, n, "customProperties", NULL)) < 0)
			return rc;
		for (size_t i = 0; i < n->count; i++) {
			const kiln_yaml_node *prop = kiln_yaml_get(n->items[i], "property");
			const kiln_yaml_node *val = kiln_yaml_get(n->items[i], "value");
			const char *vpath = kiln_arena_printf(c->arena, "customProperties[%zu].value", i);
			const char *s;
			if (strcmp(prop->value, "unknownFields") != 0)
				continue;
			if (!val)
				return fail(c, n->items[i], vpath, "required key is missing");
			if ((rc = kiln_yaml_string(c->doc, val, vpath, &s)) < 0)
				return rc;
			if (strcmp(s, "reject") == 0)
				k->unknown_fields = KILN_UNKNOWN_REJECT;
			else if (strcmp(s, "allow") == 0)
				k->unknown_fields = KILN_UNKNOWN_ALLOW;
			else
				return fail(c, val, vpath, "expected reject or allow");
		}
	}
	return compile_schema(c, root, opt);
}

int kiln_contract_load_buffer(kiln_contract **out, const char *name, const char *text, size_t len,
                              const kiln_contract_options *options)
{
	compiler c = {0};
	kiln_yaml_doc *doc = NULL;
	kiln_contract *k = NULL;
	int rc;

	*out = NULL;
	if ((rc = kiln_yaml_load_buffer(&doc, name, text, len)) < 0)
		return rc;
	k = calloc(1, sizeof(*k));
	if (!k || !(k->arena = kiln_arena_new())) {
		rc = kiln_error_oom("compiling the contract");
		goto cleanup;
	}
	c.doc = doc;
	c.contract = k;
	c.arena = k->arena;
	crypto_generichash(k->digest, sizeof(k->digest), (const unsigned char *)text, len, NULL, 0);
	sodium_bin2hex(k->digest_hex, sizeof(k->digest_hex), k->digest, sizeof(k->digest));
	k->file = kiln_arena_strndup(k->arena, name, strlen(name));
	k->text = kiln_arena_strndup(k->arena, text, len);
	k->text_len = len;
	if (!k->file || !k->text) {
		rc = kiln_error_oom("compiling the contract");
		goto cleanup;
	}
	if ((rc = compile_contract(&c, options)) < 0)
		goto cleanup;
	/* The compiled contract points into the document's strings: move them
	 * into the arena by keeping the document alive with the contract. */
	*out = k;
	k->doc = doc;
	doc = NULL;
	k = NULL;
cleanup:
	kiln_contract_free(k);
	kiln_yaml_free(doc);
	return rc;
}

int kiln_contract_load(kiln_contract **out, const char *path, const kiln_contract_options *options)
{
	struct stat st;
	char *text = NULL;
	size_t len = 0;
	ssize_t n;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return kiln_error_set(errno == ENOENT ? KILN_ENOTFOUND : KILN_EIO, "%s: cannot open: %s",
		                      path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > MAX_CONTRACT_BYTES) {
		rc = kiln_error_set(KILN_EINVALID, "%s: not a regular file of at most %u bytes", path,
		                    MAX_CONTRACT_BYTES);
		goto cleanup;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		rc = kiln_error_oom("compiling the contract");
		goto cleanup;
	}
	while (len < (size_t)st.st_size && (n = read(fd, text + len, (size_t)st.st_size - len)) > 0)
		len += (size_t)n;
	if (len != (size_t)st.st_size) {
		rc = kiln_error_set(KILN_EIO, "%s: short read", path);
		goto cleanup;
	}
	rc = kiln_contract_load_buffer(out, path, text, len, options);
cleanup:
	free(text);
	close(fd);
	return rc;
}

void kiln_contract_free(kiln_contract *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->pattern_count; i++)
		pcre2_code_free(k->patterns[i]);
	free(k->patterns);
	kiln_yaml_free(k->doc);
	kiln_arena_free(k->arena);
	free(k);
}
