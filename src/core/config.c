/* Typed config keys (see config.h). */
#include "core/config.h"

#include <stdio.h>
#include <string.h>

#include "core/units.h"

const char *kiln_config_path(const kiln_config *c, const char *section, const char *key)
{
	return section ? kiln_arena_printf(c->arena, "%s.%s", section, key) : key;
}

int kiln_config_check_keys(const kiln_config *c, const kiln_yaml_node *map, const char *section,
                           const char *const *allowed)
{
	if (map->kind != KILN_YAML_MAPPING)
		return kiln_yaml_fail(c->doc, map, section ? section : "", "expected a mapping");
	for (size_t i = 0; i < map->count; i++) {
		const char *const *a;

		for (a = allowed; *a; a++)
			if (strcmp(*a, map->keys[i]->value) == 0)
				break;
		if (!*a)
			return kiln_yaml_fail(c->doc, map->keys[i],
			                      kiln_config_path(c, section, map->keys[i]->value),
			                      "unknown key (see %s)", c->docs);
	}
	return 0;
}

int kiln_config_string(const kiln_config *c, const kiln_yaml_node *map, const char *section, const char *key,
                       bool required, const char **out)
{
	const kiln_yaml_node *n = map ? kiln_yaml_get(map, key) : NULL;

	if (!n || kiln_yaml_is_null(n)) {
		if (required)
			return kiln_yaml_fail(c->doc, map, kiln_config_path(c, section, key),
			                      "required key is missing");
		return 0;
	}
	return kiln_yaml_string(c->doc, n, kiln_config_path(c, section, key), out);
}

int kiln_config_int(const kiln_config *c, const kiln_yaml_node *map, const char *section, const char *key,
                    int64_t lo, int64_t hi, int64_t *out)
{
	const kiln_yaml_node *n = map ? kiln_yaml_get(map, key) : NULL;
	int rc;

	if (!n || kiln_yaml_is_null(n))
		return 0;
	if ((rc = kiln_yaml_int64(c->doc, n, kiln_config_path(c, section, key), out)) < 0)
		return rc;
	if (*out < lo || *out > hi)
		return kiln_yaml_fail(c->doc, n, kiln_config_path(c, section, key),
		                      "must be between %lld and %lld", (long long)lo, (long long)hi);
	return 0;
}

int kiln_config_size(const kiln_config *c, const kiln_yaml_node *map, const char *section, const char *key,
                     size_t min, size_t *out)
{
	const kiln_yaml_node *n = map ? kiln_yaml_get(map, key) : NULL;
	long long v;

	if (!n || kiln_yaml_is_null(n))
		return 0;
	if (n->kind != KILN_YAML_SCALAR || (v = kiln_parse_size(n->value)) < (long long)min)
		return kiln_yaml_fail(c->doc, n, kiln_config_path(c, section, key),
		                      "expected a size of at least %zu bytes (e.g. 65536, 64k, 64M)", min);
	*out = (size_t)v;
	return 0;
}

const char *kiln_config_resolve(const kiln_config *c, const char *path)
{
	const kiln_yaml_node *n;

	if (!path || path[0] == '/' || !*c->dir)
		return path;
	if ((n = kiln_yaml_find_value(c->doc, path)) && n->cwd_relative)
		return path; /* from the environment or --set: the working directory's */
	return kiln_arena_printf(c->arena, "%s/%s", c->dir, path);
}

static bool same_node(const kiln_yaml_node *a, const kiln_yaml_node *b)
{
	if (!a || !b || a->kind != b->kind || a->count != b->count)
		return a == b;
	if (a->kind == KILN_YAML_SCALAR)
		return a->len == b->len && memcmp(a->value, b->value, a->len) == 0;
	for (size_t i = 0; i < a->count; i++) {
		if (a->kind == KILN_YAML_SEQUENCE
		        ? !same_node(a->items[i], b->items[i])
		        : !same_node(a->items[i], kiln_yaml_get(b, a->keys[i]->value)))
			return false;
	}
	return true;
}

static void changed(const kiln_yaml_node *a, const kiln_yaml_node *b, char *path, size_t len, size_t cap,
                    kiln_config_changed_cb cb, void *ctx)
{
	if (!(a && b && a->kind == KILN_YAML_MAPPING && b->kind == KILN_YAML_MAPPING)) {
		if (!same_node(a, b))
			cb(ctx, len ? path : "(document)");
		return;
	}
	for (int pass = 0; pass < 2; pass++) {
		const kiln_yaml_node *from = pass ? b : a, *other = pass ? a : b;

		for (size_t i = 0; i < from->count; i++) {
			const char *key = from->keys[i]->value;
			int n = snprintf(path + len, cap - len, "%s%s", len ? "." : "", key);
			size_t at = n < 0 || (size_t)n >= cap - len ? cap - 1 : len + (size_t)n;

			if (!pass)
				changed(from->items[i], kiln_yaml_get(other, key), path, at, cap, cb, ctx);
			else if (!kiln_yaml_get(other, key))
				cb(ctx, path); /* added */
			path[len] = '\0';
		}
	}
}

void kiln_config_changed(const kiln_yaml_node *before, const kiln_yaml_node *after, kiln_config_changed_cb cb,
                         void *ctx)
{
	char path[512] = "";

	changed(before, after, path, 0, sizeof(path), cb, ctx);
}

typedef struct reload_report {
	kiln_buf *buf;
	const char *const *live;
	bool want_live; /* collect the live sections' keys (else the others') */
	size_t start;   /* where this list starts in buf */
} reload_report;

static bool is_live(const char *const *live, const char *path)
{
	for (const char *const *s = live; *s; s++) {
		size_t n = strlen(*s);

		if (strncmp(path, *s, n) == 0 && (path[n] == '\0' || path[n] == '.'))
			return true;
	}
	return false;
}

static void note_change(void *ctx, const char *path)
{
	reload_report *rep = ctx;

	if (is_live(rep->live, path) != rep->want_live)
		return;
	if (rep->buf->len > rep->start)
		kiln_buf_putc(rep->buf, ',');
	kiln_buf_puts(rep->buf, path);
}

void kiln_config_reload_report(const kiln_yaml_node *started, const kiln_yaml_node *last,
                               const kiln_yaml_node *next, const char *const *live, kiln_buf *buf,
                               const char **applied_out, const char **ignored_out)
{
	reload_report rep = {buf, live, true, 0};
	size_t applied_end;

	buf->len = 0;
	kiln_config_changed(last, next, note_change, &rep);
	kiln_buf_putc(buf, '\0');
	applied_end = buf->len;
	rep = (reload_report){buf, live, false, applied_end};
	kiln_config_changed(started, next, note_change, &rep);
	if (kiln_buf_putc(buf, '\0') < 0 || !buf->ptr) {
		*applied_out = *ignored_out = "";
		return;
	}
	*applied_out = buf->ptr;
	*ignored_out = buf->ptr + applied_end;
}
