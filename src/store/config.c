/* The shared `store:` config section (see config.h): one parser for every
 * config that names a store, so a pipeline and a cache node accept the
 * same keys with the same messages. */
#include "store/config.h"

#include <stdint.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"

static const char *const store_keys[] = {"url",  "endpoint",         "region",      "style",
                                         "http", "credentials_file", "max_retries", NULL};

int kiln_store_config_load(const kiln_store_config_src *src, const kiln_yaml_node *parent,
                           const char *section, const char **out_url, kiln_store_options *out_options)
{
	const kiln_yaml_node *st = kiln_yaml_get(parent, section), *n;
	kiln_store_options *o = out_options;
	const kiln_config cfg = {.doc = src->doc, .arena = src->arena, .dir = src->dir, .docs = src->docs};
	const char *style = NULL, *url = NULL;
	int64_t retries = 0;
	int rc;

	if (!st || kiln_yaml_is_null(st))
		return kiln_yaml_fail(src->doc, parent, section, "required key is missing");
	if ((rc = kiln_config_check_keys(&cfg, st, section, store_keys)) < 0 ||
	    (rc = kiln_config_string(&cfg, st, section, "url", true, &url)) < 0 ||
	    (rc = kiln_config_string(&cfg, st, section, "endpoint", false, &o->endpoint)) < 0 ||
	    (rc = kiln_config_string(&cfg, st, section, "region", false, &o->region)) < 0 ||
	    (rc = kiln_config_string(&cfg, st, section, "style", false, &style)) < 0 ||
	    (rc = kiln_config_string(&cfg, st, section, "credentials_file", false, &o->credentials_file)) <
	        0 ||
	    (rc = kiln_config_int(&cfg, st, section, "max_retries", 0, 100, &retries)) < 0)
		return rc;
	o->max_retries = (int)retries;
	if ((n = kiln_yaml_get(st, "http")) &&
	    (rc = kiln_yaml_bool(src->doc, n, kiln_config_path(&cfg, section, "http"), &o->http)) < 0)
		return rc;
	if (style && strcmp(style, "virtual") == 0)
		o->virtual_host = true;
	else if (style && strcmp(style, "path") != 0)
		return kiln_yaml_fail(src->doc, kiln_yaml_get(st, "style"),
		                      kiln_config_path(&cfg, section, "style"), "expected path or virtual");
	o->credentials_file = kiln_config_resolve(&cfg, o->credentials_file);
	/* file://relative/dir is relative to the config file too */
	if (strncmp(url, "file://", 7) == 0 && url[7] != '/' && *src->dir)
		url = kiln_arena_printf(src->arena, "file://%s/%s", src->dir, url + 7);
	else if (strncmp(url, "file://", 7) != 0 && strncmp(url, "s3://", 5) != 0)
		return kiln_yaml_fail(src->doc, kiln_yaml_get(st, "url"),
		                      kiln_config_path(&cfg, section, "url"),
		                      "expected file://DIR or s3://BUCKET/PREFIX");
	/* credentials never sit in the config: refuse keys that look like them */
	for (size_t i = 0; i < st->count; i++)
		if (strstr(st->keys[i]->value, "secret") || strstr(st->keys[i]->value, "password"))
			return kiln_yaml_fail(src->doc, st->keys[i], section,
			                      "secrets do not belong in the %s", src->file);
	*out_url = url;
	return 0;
}
