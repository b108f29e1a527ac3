/* Avro schemas (avro.h): avro-c parses and resolves the JSON first (a
 * schema it refuses is refused, with its message); the JSON is then read
 * again as a YAML document (JSON is YAML) into kiln's own tree, which keeps
 * the logical types avro-c 1.11 drops. Named types are registered before
 * their fields are read, so a record may refer to itself (the decoder
 * bounds the depth). */
#include "contract/avro.h"

#include <avro.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/yaml_doc.h"

struct kiln_avro_schema {
	kiln_arena *arena;
	kiln_avro_node *root;
	kiln_yaml_doc *doc; /* names, symbols and docs point into it */
	/* named types seen so far, by full name */
	kiln_avro_node **named;
	size_t named_count, named_cap;
};

typedef struct compiler {
	kiln_avro_schema *s;
	const kiln_yaml_doc *doc;
} compiler;

static const struct {
	const char *name;
	kiln_avro_type type;
} primitives[] = {
    {"null", KILN_AVRO_NULL},   {"boolean", KILN_AVRO_BOOLEAN}, {"int", KILN_AVRO_INT},
    {"long", KILN_AVRO_LONG},   {"float", KILN_AVRO_FLOAT},     {"double", KILN_AVRO_DOUBLE},
    {"bytes", KILN_AVRO_BYTES}, {"string", KILN_AVRO_STRING},
};

static kiln_avro_node *node_new(compiler *c, kiln_avro_type type)
{
	kiln_avro_node *n = kiln_arena_alloc(c->s->arena, sizeof(*n));

	if (n) {
		memset(n, 0, sizeof(*n));
		n->type = type;
	}
	return n;
}

static kiln_avro_node *find_named(const kiln_avro_schema *s, const char *name, const char *ns)
{
	char full[512];

	if (ns && *ns && !strchr(name, '.')) {
		snprintf(full, sizeof(full), "%s.%s", ns, name);
		for (size_t i = 0; i < s->named_count; i++)
			if (strcmp(s->named[i]->name, full) == 0)
				return s->named[i];
	}
	for (size_t i = 0; i < s->named_count; i++) {
		const char *n = s->named[i]->name, *dot = strrchr(n, '.');
		if (strcmp(n, name) == 0 || (!strchr(name, '.') && dot && strcmp(dot + 1, name) == 0))
			return s->named[i];
	}
	return NULL;
}

static int add_named(compiler *c, kiln_avro_node *n)
{
	kiln_avro_schema *s = c->s;

	if (s->named_count == s->named_cap) {
		size_t cap = s->named_cap ? s->named_cap * 2 : 16;
		kiln_avro_node **p = realloc(s->named, cap * sizeof(*p));
		if (!p)
			return kiln_error_oom(NULL);
		s->named = p;
		s->named_cap = cap;
	}
	s->named[s->named_count++] = n;
	return 0;
}

static const char *str_of(const kiln_yaml_node *map, const char *key)
{
	const kiln_yaml_node *v = kiln_yaml_get(map, key);
	return v && v->kind == KILN_YAML_SCALAR ? v->value : NULL;
}

static int compile(compiler *c, const kiln_yaml_node *y, const char *ns, const char *path,
                   kiln_avro_node **out);

static int logical_of(compiler *c, const kiln_yaml_node *y, const char *path, kiln_avro_node *n)
{
	const char *lt = str_of(y, "logicalType");
	int64_t v;
	int rc;

	if (!lt)
		return 0;
	if (strcmp(lt, "date") == 0 && n->type == KILN_AVRO_INT)
		n->logical = KILN_AVRO_DATE;
	else if (strcmp(lt, "time-millis") == 0 && n->type == KILN_AVRO_INT)
		n->logical = KILN_AVRO_TIME_MILLIS;
	else if (strcmp(lt, "time-micros") == 0 && n->type == KILN_AVRO_LONG)
		n->logical = KILN_AVRO_TIME_MICROS;
	else if (strcmp(lt, "timestamp-millis") == 0 && n->type == KILN_AVRO_LONG)
		n->logical = KILN_AVRO_TIMESTAMP_MILLIS;
	else if (strcmp(lt, "timestamp-micros") == 0 && n->type == KILN_AVRO_LONG)
		n->logical = KILN_AVRO_TIMESTAMP_MICROS;
	else if (strcmp(lt, "uuid") == 0 && n->type == KILN_AVRO_STRING)
		n->logical = KILN_AVRO_UUID;
	else if (strcmp(lt, "decimal") == 0 && (n->type == KILN_AVRO_BYTES || n->type == KILN_AVRO_FIXED)) {
		const kiln_yaml_node *p = kiln_yaml_get(y, "precision"), *s = kiln_yaml_get(y, "scale");
		if (!p)
			return kiln_yaml_fail(c->doc, y, path, "a decimal needs a precision");
		if ((rc = kiln_yaml_int64(c->doc, p, path, &v)) < 0)
			return rc;
		if (v < 1 || v > KILN_AVRO_DECIMAL_MAX_DIGITS)
			return kiln_yaml_fail(c->doc, p, path, "precision must be 1 to %d",
			                      KILN_AVRO_DECIMAL_MAX_DIGITS);
		n->precision = (int)v;
		v = 0;
		if (s && (rc = kiln_yaml_int64(c->doc, s, path, &v)) < 0)
			return rc;
		if (v < 0 || v > n->precision)
			return kiln_yaml_fail(c->doc, s, path, "scale must be 0 to the precision");
		n->scale = (int)v;
		n->logical = KILN_AVRO_DECIMAL;
	}
	/* any other: the underlying type, as the Avro specification says */
	return 0;
}

static int compile_named(compiler *c, const kiln_yaml_node *y, const char *ns, const char *path,
                         kiln_avro_type type, kiln_avro_node **out)
{
	const char *name = str_of(y, "name"), *nns = str_of(y, "namespace");
	kiln_avro_node *n;
	int rc;

	if (!name)
		return kiln_yaml_fail(c->doc, y, path, "a named type needs a name");
	if (nns)
		ns = nns;
	if (!(n = node_new(c, type)))
		return kiln_error_oom(NULL);
	n->name = strchr(name, '.') || !ns || !*ns ? kiln_arena_strndup(c->s->arena, name, strlen(name))
	                                           : kiln_arena_printf(c->s->arena, "%s.%s", ns, name);
	n->doc = str_of(y, "doc");
	if (!n->name || (rc = add_named(c, n)) < 0)
		return kiln_error_oom(NULL);
	if (strchr(name, '.'))
		ns = kiln_arena_strndup(c->s->arena, name, (size_t)(strrchr(name, '.') - name));
	*out = n;
	if (type == KILN_AVRO_FIXED) {
		const kiln_yaml_node *sz = kiln_yaml_get(y, "size");
		if (!sz || (rc = kiln_yaml_int64(c->doc, sz, path, &n->size)) < 0 || n->size < 0)
			return kiln_yaml_fail(c->doc, y, path, "a fixed needs a size");
		return logical_of(c, y, path, n);
	}
	const kiln_yaml_node *list = kiln_yaml_get(y, type == KILN_AVRO_ENUM ? "symbols" : "fields");
	if (!list || list->kind != KILN_YAML_SEQUENCE)
		return kiln_yaml_fail(c->doc, y, path,
		                      type == KILN_AVRO_ENUM ? "an enum needs symbols"
		                                             : "a record needs fields");
	n->count = list->count;
	n->names = kiln_arena_alloc(c->s->arena, (list->count + 1) * sizeof(*n->names));
	n->children = kiln_arena_alloc(c->s->arena, (list->count + 1) * sizeof(*n->children));
	if (!n->names || !n->children)
		return kiln_error_oom(NULL);
	for (size_t i = 0; i < list->count; i++) {
		const kiln_yaml_node *f = list->items[i];
		if (type == KILN_AVRO_ENUM) {
			if ((rc = kiln_yaml_string(c->doc, f, path, &n->names[i])) < 0)
				return rc;
			continue;
		}
		const char *fname = str_of(f, "name");
		const kiln_yaml_node *ft = kiln_yaml_get(f, "type");
		if (!fname || !ft)
			return kiln_yaml_fail(c->doc, f, path, "a field needs a name and a type");
		n->names[i] = fname;
		char *sub = kiln_arena_printf(c->s->arena, "%s.%s", path, fname);
		if (!sub)
			return kiln_error_oom(NULL);
		if ((rc = compile(c, ft, ns, sub, &n->children[i])) < 0)
			return rc;
	}
	return 0;
}

static int compile(compiler *c, const kiln_yaml_node *y, const char *ns, const char *path,
                   kiln_avro_node **out)
{
	int rc;

	if (y->kind == KILN_YAML_SCALAR) {
		for (size_t i = 0; i < sizeof(primitives) / sizeof(primitives[0]); i++)
			if (strcmp(y->value, primitives[i].name) == 0)
				return (*out = node_new(c, primitives[i].type)) ? 0 : kiln_error_oom(NULL);
		if ((*out = find_named(c->s, y->value, ns)))
			return 0;
		return kiln_yaml_fail(c->doc, y, path, "unknown type");
	}
	if (y->kind == KILN_YAML_SEQUENCE) {
		kiln_avro_node *n = node_new(c, KILN_AVRO_UNION);
		if (!n ||
		    !(n->children = kiln_arena_alloc(c->s->arena, (y->count + 1) * sizeof(*n->children))))
			return kiln_error_oom(NULL);
		n->count = y->count;
		for (size_t i = 0; i < y->count; i++)
			if ((rc = compile(c, y->items[i], ns, path, &n->children[i])) < 0)
				return rc;
		*out = n;
		return 0;
	}
	const char *t = str_of(y, "type");
	const kiln_yaml_node *tn = kiln_yaml_get(y, "type");
	if (!tn)
		return kiln_yaml_fail(c->doc, y, path, "a type needs \"type\"");
	if (!t)
		return compile(c, tn, ns, path, out);
	if (strcmp(t, "record") == 0 || strcmp(t, "error") == 0)
		return compile_named(c, y, ns, path, KILN_AVRO_RECORD, out);
	if (strcmp(t, "enum") == 0)
		return compile_named(c, y, ns, path, KILN_AVRO_ENUM, out);
	if (strcmp(t, "fixed") == 0)
		return compile_named(c, y, ns, path, KILN_AVRO_FIXED, out);
	if (strcmp(t, "array") == 0 || strcmp(t, "map") == 0) {
		bool array = strcmp(t, "array") == 0;
		const kiln_yaml_node *sub = kiln_yaml_get(y, array ? "items" : "values");
		kiln_avro_node *n = node_new(c, array ? KILN_AVRO_ARRAY : KILN_AVRO_MAP);
		if (!sub)
			return kiln_yaml_fail(c->doc, y, path,
			                      array ? "an array needs items" : "a map needs values");
		if (!n || !(n->children = kiln_arena_alloc(c->s->arena, sizeof(*n->children))))
			return kiln_error_oom(NULL);
		n->count = 1;
		*out = n;
		char *p = kiln_arena_printf(c->s->arena, array ? "%s[]" : "%s{}", path);
		return p ? compile(c, sub, ns, p, &n->children[0]) : kiln_error_oom(NULL);
	}
	if ((rc = compile(c, tn, ns, path, out)) < 0)
		return rc;
	if ((*out)->name || (*out)->logical != KILN_AVRO_PLAIN)
		return 0;
	/* a primitive with attributes ({"type": "long", "logicalType": ...}) */
	kiln_avro_node *n = node_new(c, (*out)->type);
	if (!n)
		return kiln_error_oom(NULL);
	*out = n;
	return logical_of(c, y, path, n);
}

int kiln_avro_schema_parse(kiln_avro_schema **out, const char *name, const char *json, size_t len)
{
	kiln_avro_schema *s;
	kiln_yaml_doc *doc = NULL;
	avro_schema_t check = NULL;
	int rc;

	*out = NULL;
	if (avro_schema_from_json_length(json, len, &check) != 0) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%s", avro_strerror());
		msg[strcspn(msg, "\n")] = '\0';
		return kiln_error_set(KILN_EINVALID, "%s: not an Avro schema: %s", name, msg);
	}
	avro_schema_decref(check);
	if ((rc = kiln_yaml_load_buffer(&doc, name, json, len)) < 0)
		return rc;
	if (!(s = calloc(1, sizeof(*s))) || !(s->arena = kiln_arena_new())) {
		free(s);
		kiln_yaml_free(doc);
		return kiln_error_oom(NULL);
	}
	s->doc = doc;
	compiler c = {.s = s, .doc = doc};
	if (!kiln_yaml_root(doc))
		rc = kiln_error_set(KILN_EINVALID, "%s: empty schema", name);
	else
		rc = compile(&c, kiln_yaml_root(doc), NULL, "$", &s->root);
	if (rc < 0) {
		kiln_avro_schema_free(s);
		return rc;
	}
	free(s->named); /* only compiling needs them */
	s->named = NULL;
	s->named_count = s->named_cap = 0;
	*out = s;
	return 0;
}

int kiln_avro_schema_load_file(kiln_avro_schema **out, const char *path)
{
	kiln_buf text = {0};
	char chunk[65536];
	size_t n;
	int rc = 0;
	FILE *f = fopen(path, "rb");

	*out = NULL;
	if (!f)
		return kiln_error_set(KILN_ENOTFOUND, "%s: cannot open: %s", path, strerror(errno));
	while (rc == 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		rc = text.len + n > (16u << 20)
		         ? kiln_error_set(KILN_EINVALID, "%s: larger than 16 MiB", path)
		         : kiln_buf_put(&text, chunk, n);
	if (rc == 0 && ferror(f))
		rc = kiln_error_set(KILN_EIO, "%s: cannot read: %s", path, strerror(errno));
	fclose(f);
	if (rc == 0)
		rc = kiln_avro_schema_parse(out, path, text.ptr ? text.ptr : "", text.len);
	kiln_buf_free(&text);
	return rc;
}

const kiln_avro_node *kiln_avro_schema_root(const kiln_avro_schema *s)
{
	return s->root;
}

void kiln_avro_schema_free(kiln_avro_schema *s)
{
	if (!s)
		return;
	kiln_yaml_free(s->doc);
	kiln_arena_free(s->arena);
	free(s->named);
	free(s);
}
