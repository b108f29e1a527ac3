/* Typed config keys (see config.h). */
#include "core/config.h"

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
	if (!path || path[0] == '/' || !*c->dir)
		return path;
	return kiln_arena_printf(c->arena, "%s/%s", c->dir, path);
}
