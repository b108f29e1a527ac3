/* The shared `store:` config section (see config.h): one parser for every
 * config that names a store, so a pipeline and a cache node accept the
 * same keys with the same messages. The keys are the backends' own
 * (kiln_store_backend.options); this file knows only url and how each kind
 * of key is read. */
#include "store/config.h"

#include <stdint.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"

/* The backends a config's store.url may name (those with a config_url). */
static bool configurable(const kiln_store_backend *b)
{
	return b->config_url != NULL;
}

/* "url" and every key of every backend a config may name, NULL-terminated.
 * A key of another such backend than the URL's is accepted too (and read
 * as that backend declares it; the URL's backend ignores it), as it always
 * was: a url from ${KILN_STORE} may switch a config between file:// and
 * s3:// without touching its other keys. */
static const char *const *accepted_keys(kiln_arena *arena)
{
	size_t n = 1, i = 0;
	const kiln_store_backend *b;
	const char **keys;

	for (size_t j = 0; (b = kiln_store_backend_at(j)); j++)
		for (const kiln_store_option *o = b->options; configurable(b) && o && o->key; o++)
			n++;
	if (!(keys = kiln_arena_alloc(arena, (n + 1) * sizeof(*keys))))
		return NULL;
	keys[i++] = "url";
	for (size_t j = 0; (b = kiln_store_backend_at(j)); j++)
		for (const kiln_store_option *o = b->options; configurable(b) && o && o->key; o++)
			keys[i++] = o->key; /* a key two backends share is listed twice: harmless */
	keys[i] = NULL;
	return keys;
}

/* "expected file://DIR or s3://BUCKET/PREFIX", from the backends' rows. */
static const char *expected_urls(kiln_arena *arena)
{
	const kiln_store_backend *b;
	const char *text = NULL;
	size_t count = 0, seen = 0;

	for (size_t j = 0; (b = kiln_store_backend_at(j)); j++)
		count += configurable(b);
	for (size_t j = 0; (b = kiln_store_backend_at(j)); j++) {
		if (!configurable(b))
			continue;
		seen++;
		text = !text ? kiln_arena_printf(arena, "expected %s", b->config_url)
		             : kiln_arena_printf(arena, "%s%s%s", text, seen == count ? " or " : ", ",
		                                 b->config_url);
	}
	return text ? text : "no backend takes a config's store";
}

/* One key of a backend's row, by its kind, into its field of *o. */
static int read_option(const kiln_config *cfg, const kiln_yaml_node *st, const char *section,
                       const kiln_store_option *opt, kiln_store_options *o)
{
	char *field = (char *)o + opt->offset;
	const kiln_yaml_node *n = kiln_yaml_get(st, opt->key);
	const char *s = NULL;
	int64_t v;
	int rc;

	switch (opt->kind) {
	case KILN_STORE_OPTION_STRING:
		return kiln_config_string(cfg, st, section, opt->key, false, (const char **)(void *)field);
	case KILN_STORE_OPTION_PATH:
		if ((rc = kiln_config_string(cfg, st, section, opt->key, false,
		                             (const char **)(void *)field)) < 0)
			return rc;
		*(const char **)(void *)field = kiln_config_resolve(cfg, *(const char **)(void *)field);
		return 0;
	case KILN_STORE_OPTION_BOOL:
		return n ? kiln_yaml_bool(cfg->doc, n, kiln_config_path(cfg, section, opt->key),
		                          (bool *)field)
		         : 0;
	case KILN_STORE_OPTION_INT:
		v = *(int *)(void *)field;
		if ((rc = kiln_config_int(cfg, st, section, opt->key, opt->lo, opt->hi, &v)) < 0)
			return rc;
		*(int *)(void *)field = (int)v;
		return 0;
	case KILN_STORE_OPTION_CHOICE:
		if ((rc = kiln_config_string(cfg, st, section, opt->key, false, &s)) < 0 || !s)
			return rc;
		if (strcmp(s, opt->choices[0]) != 0 && strcmp(s, opt->choices[1]) != 0)
			return kiln_yaml_fail(cfg->doc, n, kiln_config_path(cfg, section, opt->key),
			                      "expected %s or %s", opt->choices[0], opt->choices[1]);
		*(bool *)field = strcmp(s, opt->choices[1]) == 0;
		return 0;
	}
	return kiln_error_set(KILN_EINVALID, "%s: unknown kind of store option", opt->key);
}

/* Every key of every backend a config may name, the URL's backend's first
 * (own; NULL when the URL names none) and a key two backends share once. */
static int read_options(const kiln_config *cfg, const kiln_yaml_node *st, const char *section,
                        const kiln_store_backend *own, kiln_store_options *o)
{
	const kiln_store_backend *b;
	int rc;

	for (const kiln_store_option *opt = own ? own->options : NULL; opt && opt->key; opt++)
		if ((rc = read_option(cfg, st, section, opt, o)) < 0)
			return rc;
	for (size_t j = 0; (b = kiln_store_backend_at(j)); j++) {
		if (b == own || !configurable(b))
			continue;
		for (const kiln_store_option *opt = b->options; opt && opt->key; opt++) {
			bool read = false;

			for (const kiln_store_option *mine = own ? own->options : NULL;
			     mine && mine->key && !read; mine++)
				read = strcmp(mine->key, opt->key) == 0;
			if (!read && (rc = read_option(cfg, st, section, opt, o)) < 0)
				return rc;
		}
	}
	return 0;
}

int kiln_store_config_load(const kiln_store_config_src *src, const kiln_yaml_node *parent,
                           const char *section, const char **out_url, kiln_store_options *out_options)
{
	const kiln_yaml_node *st = kiln_yaml_get(parent, section);
	const char *path = src->path ? src->path : section;
	const kiln_config cfg = {.doc = src->doc, .arena = src->arena, .dir = src->dir, .docs = src->docs};
	const kiln_store_backend *backend;
	const char *const *keys;
	const char *url = NULL;
	int rc;

	if (!st || kiln_yaml_is_null(st))
		return kiln_yaml_fail(src->doc, parent, path, "required key is missing");
	if (!(keys = accepted_keys(src->arena)))
		return kiln_error_oom(NULL);
	if ((rc = kiln_config_check_keys(&cfg, st, path, keys)) < 0 ||
	    (rc = kiln_config_string(&cfg, st, path, "url", true, &url)) < 0)
		return rc;
	if ((backend = kiln_store_backend_find(url)) && !configurable(backend))
		backend = NULL;
	/* the keys are read before the URL's scheme is judged, as they always were */
	if ((rc = read_options(&cfg, st, path, backend, out_options)) < 0)
		return rc;
	if (!backend)
		return kiln_yaml_fail(src->doc, kiln_yaml_get(st, "url"), kiln_config_path(&cfg, path, "url"),
		                      "%s", expected_urls(src->arena));
	/* file://relative/dir is relative to the config file too (to the
	 * working directory when the url came from the environment or --set) */
	if (backend->local_path) {
		const char *rest = strstr(url, "://") + 3;
		const kiln_yaml_node *un = kiln_yaml_get(st, "url");

		if (*rest != '/' && *src->dir && !(un && un->cwd_relative))
			url = kiln_arena_printf(src->arena, "%s://%s/%s", backend->scheme, src->dir, rest);
	}
	/* credentials never sit in the config: refuse keys that look like them */
	for (size_t i = 0; i < st->count; i++)
		if (strstr(st->keys[i]->value, "secret") || strstr(st->keys[i]->value, "password"))
			return kiln_yaml_fail(src->doc, st->keys[i], path, "secrets do not belong in the %s",
			                      src->file);
	*out_url = url;
	return 0;
}
