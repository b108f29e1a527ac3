/* Push targets (see push.h; every key in docs/PUSH.md): a targets file
 * names each target's store (its `store:` section is read by the same code
 * as a pipeline's, so credentials come from the environment or a 0600 file,
 * never from the file itself), where the manifest goes in it, the price per
 * GB the estimate uses, and how many uploads run at once. */
#include "push/push.h"

#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/error.h"
#include "core/yaml_doc.h"
#include "store/config.h"
#include "store/store.h"

struct kiln_push_target_owned {
	kiln_yaml_doc *doc;
	kiln_arena *arena;
};

static const char *const target_keys[] = {"store",    "manifest_prefix", "price_per_gb",
                                          "currency", "concurrency",     NULL};

void kiln_push_target_free(kiln_push_target *t)
{
	if (!t)
		return;
	if (t->owned) {
		kiln_yaml_free(t->owned->doc);
		kiln_arena_free(t->owned->arena);
		free(t->owned);
	}
	free(t);
}

static int load_target(kiln_push_target *t, const kiln_config *cfg, const kiln_yaml_node *node,
                       const char *section)
{
	kiln_store_config_src src = {.doc = cfg->doc,
	                             .arena = cfg->arena,
	                             .dir = cfg->dir,
	                             .docs = "docs/PUSH.md",
	                             .file = "targets file",
	                             .path = kiln_config_path(cfg, section, "store")};
	const kiln_yaml_node *price;
	int64_t concurrency = KILN_PUSH_DEFAULT_CONCURRENCY;
	int rc;

	if (!src.path)
		return kiln_error_oom(NULL);
	if ((rc = kiln_config_check_keys(cfg, node, section, target_keys)) < 0 ||
	    (rc = kiln_store_config_load(&src, node, "store", &t->url, &t->store)) < 0 ||
	    (rc = kiln_config_string(cfg, node, section, "manifest_prefix", false, &t->manifest_prefix)) <
	        0 ||
	    (rc = kiln_config_string(cfg, node, section, "currency", false, &t->currency)) < 0 ||
	    (rc = kiln_config_int(cfg, node, section, "concurrency", 1, 64, &concurrency)) < 0)
		return rc;
	t->concurrency = (unsigned)concurrency;
	if ((price = kiln_yaml_get(node, "price_per_gb")) && !kiln_yaml_is_null(price)) {
		long double v = 0;

		if ((rc = kiln_yaml_number(cfg->doc, price, kiln_config_path(cfg, section, "price_per_gb"),
		                           &v)) < 0)
			return rc;
		if (v < 0)
			return kiln_yaml_fail(cfg->doc, price, kiln_config_path(cfg, section, "price_per_gb"),
			                      "must not be negative");
		t->price_per_gb = (double)v;
	}
	if (!kiln_store_key_valid(t->manifest_prefix))
		return kiln_yaml_fail(cfg->doc, kiln_yaml_get(node, "manifest_prefix"),
		                      kiln_config_path(cfg, section, "manifest_prefix"),
		                      "expected a store key prefix such as manifest.git");
	return 0;
}

int kiln_push_target_load(kiln_push_target **out, const char *path, const char *name, char *const *sets,
                          size_t nsets)
{
	kiln_push_target *t = calloc(1, sizeof(*t));
	kiln_config cfg = {.docs = "docs/PUSH.md"};
	const kiln_yaml_node *root, *targets, *node;
	const char *section;
	int rc;

	*out = NULL;
	if (!t || !(t->owned = calloc(1, sizeof(*t->owned))) || !(t->owned->arena = kiln_arena_new())) {
		kiln_push_target_free(t);
		return kiln_error_oom(NULL);
	}
	t->name = name;
	t->manifest_prefix = KILN_PUSH_MANIFEST_PREFIX;
	t->currency = "";
	t->concurrency = KILN_PUSH_DEFAULT_CONCURRENCY;
	if (strstr(name, "://")) { /* a store URL: its options from the environment */
		if (!kiln_store_backend_find(name)) {
			rc = kiln_error_set(KILN_EINVALID, "'%s': no store of that kind (file://, s3://)",
			                    name);
			goto fail;
		}
		t->url = name;
		*out = t;
		return 0;
	}
	if (!path) {
		rc = kiln_error_set(KILN_EINVALID,
		                    "target '%s': no targets file (give --targets FILE or set KILN_TARGETS), "
		                    "or name a store URL",
		                    name);
		goto fail;
	}
	if ((rc = kiln_yaml_load_config(&t->owned->doc, path, sets, nsets)) < 0)
		goto fail;
	cfg.doc = t->owned->doc;
	cfg.arena = t->owned->arena;
	if (!(cfg.dir = kiln_arena_dirname(cfg.arena, path))) {
		rc = kiln_error_oom(NULL);
		goto fail;
	}
	root = kiln_yaml_root(cfg.doc);
	if (!root || root->kind != KILN_YAML_MAPPING) {
		rc = kiln_yaml_fail(cfg.doc, root, "", "expected a mapping with a targets: section");
		goto fail;
	}
	static const char *const top_keys[] = {"targets", NULL};
	if ((rc = kiln_config_check_keys(&cfg, root, NULL, top_keys)) < 0)
		goto fail;
	targets = kiln_yaml_get(root, "targets");
	if (!targets || targets->kind != KILN_YAML_MAPPING) {
		rc = kiln_yaml_fail(cfg.doc, targets ? targets : root, "targets",
		                    "expected a mapping of target names");
		goto fail;
	}
	if (!(node = kiln_yaml_get(targets, name)) || node->kind != KILN_YAML_MAPPING) {
		rc = node ? kiln_yaml_fail(cfg.doc, node, name, "expected a mapping")
		          : kiln_error_set(KILN_EINVALID, "%s: no target named '%s'", path, name);
		goto fail;
	}
	if (!(section = kiln_arena_printf(cfg.arena, "targets.%s", name))) {
		rc = kiln_error_oom(NULL);
		goto fail;
	}
	if ((rc = load_target(t, &cfg, node, section)) < 0)
		goto fail;
	*out = t;
	return 0;
fail:
	kiln_push_target_free(t);
	return rc;
}
