/* The shared `store:` config section (see config.h): one parser for every
 * config that names a store, so a pipeline and a cache node accept the
 * same keys with the same messages. */
#include "store/config.h"

#include <stdint.h>
#include <string.h>

#include "core/error.h"

static const char *const store_keys[] = {"url",  "endpoint",         "region",      "style",
                                         "http", "credentials_file", "max_retries", NULL};

static const char *path_of(const kiln_store_config_src *src, const char *section, const char *key)
{
	return kiln_arena_printf(src->arena, "%s.%s", section, key);
}

static int check_keys(const kiln_store_config_src *src, const kiln_yaml_node *map, const char *section)
{
	if (map->kind != KILN_YAML_MAPPING)
		return kiln_yaml_fail(src->doc, map, section, "expected a mapping");
	for (size_t i = 0; i < map->count; i++) {
		const char *const *a;
		for (a = store_keys; *a; a++)
			if (strcmp(*a, map->keys[i]->value) == 0)
				break;
		if (!*a)
			return kiln_yaml_fail(src->doc, map->keys[i],
			                      path_of(src, section, map->keys[i]->value),
			                      "unknown key (see %s)", src->docs);
	}
	return 0;
}

static int get_string(const kiln_store_config_src *src, const kiln_yaml_node *map, const char *section,
                      const char *key, bool required, const char **out)
{
	const kiln_yaml_node *n = kiln_yaml_get(map, key);

	if (!n || kiln_yaml_is_null(n)) {
		if (required)
			return kiln_yaml_fail(src->doc, map, path_of(src, section, key),
			                      "required key is missing");
		return 0;
	}
	return kiln_yaml_string(src->doc, n, path_of(src, section, key), out);
}

static const char *resolve(const kiln_store_config_src *src, const char *path)
{
	if (!path || path[0] == '/' || !*src->dir)
		return path;
	return kiln_arena_printf(src->arena, "%s/%s", src->dir, path);
}

int kiln_store_config_load(const kiln_store_config_src *src, const kiln_yaml_node *parent,
                           const char *section, const char **out_url, kiln_store_options *out_options)
{
	const kiln_yaml_node *st = kiln_yaml_get(parent, section), *n;
	kiln_store_options *o = out_options;
	const char *style = NULL, *url = NULL;
	int64_t retries = 0;
	int rc;

	if (!st || kiln_yaml_is_null(st))
		return kiln_yaml_fail(src->doc, parent, section, "required key is missing");
	if ((rc = check_keys(src, st, section)) < 0 ||
	    (rc = get_string(src, st, section, "url", true, &url)) < 0 ||
	    (rc = get_string(src, st, section, "endpoint", false, &o->endpoint)) < 0 ||
	    (rc = get_string(src, st, section, "region", false, &o->region)) < 0 ||
	    (rc = get_string(src, st, section, "style", false, &style)) < 0 ||
	    (rc = get_string(src, st, section, "credentials_file", false, &o->credentials_file)) < 0)
		return rc;
	if ((n = kiln_yaml_get(st, "max_retries")) && !kiln_yaml_is_null(n)) {
		const char *where = path_of(src, section, "max_retries");

		if ((rc = kiln_yaml_int64(src->doc, n, where, &retries)) < 0)
			return rc;
		if (retries < 0 || retries > 100)
			return kiln_yaml_fail(src->doc, n, where, "must be between %lld and %lld", 0LL,
			                      100LL);
	}
	o->max_retries = (int)retries;
	if ((n = kiln_yaml_get(st, "http")) &&
	    (rc = kiln_yaml_bool(src->doc, n, path_of(src, section, "http"), &o->http)) < 0)
		return rc;
	if (style && strcmp(style, "virtual") == 0)
		o->virtual_host = true;
	else if (style && strcmp(style, "path") != 0)
		return kiln_yaml_fail(src->doc, kiln_yaml_get(st, "style"), path_of(src, section, "style"),
		                      "expected path or virtual");
	o->credentials_file = resolve(src, o->credentials_file);
	/* file://relative/dir is relative to the config file too */
	if (strncmp(url, "file://", 7) == 0 && url[7] != '/' && *src->dir)
		url = kiln_arena_printf(src->arena, "file://%s/%s", src->dir, url + 7);
	else if (strncmp(url, "file://", 7) != 0 && strncmp(url, "s3://", 5) != 0)
		return kiln_yaml_fail(src->doc, kiln_yaml_get(st, "url"), path_of(src, section, "url"),
		                      "expected file://DIR or s3://BUCKET/PREFIX");
	/* credentials never sit in the config: refuse keys that look like them */
	for (size_t i = 0; i < st->count; i++)
		if (strstr(st->keys[i]->value, "secret") || strstr(st->keys[i]->value, "password"))
			return kiln_yaml_fail(src->doc, st->keys[i], section,
			                      "secrets do not belong in the %s", src->file);
	*out_url = url;
	return 0;
}
