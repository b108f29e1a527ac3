/* Pipeline config loading (see pipeline.h; every key in docs/PIPELINES.md). */
#include "ingest/pipeline.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/error.h"
#include "core/units.h"
#include "core/yaml_doc.h"
#include "ingest/source.h"
#include "manifest/promote.h"
#include "manifest/format.h"
#include "core/secret.h"
#include "store/config.h"
#include "quality/drift.h"

typedef struct loader {
	kiln_pipeline *p;
	const kiln_yaml_doc *doc;
	const char *dir; /* the pipeline file's folder, "" for the current one */
	kiln_config cfg; /* doc, arena and dir for the typed key readers */
} loader;

/* openlineage: is read by src/openlineage/ (kiln_openlineage_open), which sits above this layer */
static const char *const top_keys[] = {"dataset",  "branch",       "contract", "schema",     "unknown_fields",
                                       "source",   "pseudonymise", "split",    "shards",     "store",
                                       "manifest", "workers",      "promote",  "snapshot",   "raw",
                                       "metrics",  "log",          "profile",  "quarantine", "retention",
                                       "dedup",    "openlineage",  NULL};
static const char *const snapshot_keys[] = {"records", "seconds", "drain_seconds", NULL};
static const char *const raw_keys[] = {"enabled", NULL};
static const char *const profile_keys[] = {"enabled", "categories", NULL};
static const char *const profile_category_keys[] = {"k", NULL};
static const char *const quarantine_keys[] = {"max_ratio", NULL};
static const char *const dedup_keys[] = {"key", "window", "max_keys", "replaces_key", NULL};
static const char *const retention_keys[] = {"raw", "quarantine", NULL};
static const char *const metrics_keys[] = {"listen", NULL};
static const char *const log_keys[] = {"format", "level", NULL};
static const char *const pseudo_keys[] = {"key_file", "key_env", "key_version", NULL};
static const char *const split_keys[] = {"key", "salt", "ratios", NULL};
static const char *const ratio_keys[] = {"train", "dev", "test", NULL};
static const char *const shard_keys[] = {"target_bytes", "zstd_level", "zstd_threads", NULL};
static const char *const promote_keys[] = {"min_records",
                                           "ratio_tolerance",
                                           "max_quarantine_rate",
                                           "contract_version",
                                           "contract_compatible",
                                           "drift",
                                           NULL};
static const char *const drift_keys[] = {"baseline", "max_psi", "max_null_rate_change", NULL};
static const char *const manifest_keys[] = {"repo",
                                            "remote",
                                            "author_name",
                                            "author_email",
                                            "signing_key",
                                            "compact_loose_objects",
                                            "compact_grace_seconds",
                                            NULL};

/* A topic-like name from a file name: [A-Za-z0-9._-], the rest as '_'. */
static const char *name_from_path(loader *l, const char *path)
{
	const char *base = strrchr(path, '/');
	char *s = kiln_arena_printf(l->p->arena, "%s", base ? base + 1 : path);

	for (char *c = s; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		      *c == '.' || *c == '_' || *c == '-'))
			*c = '_';
	if (!*s || s[0] == '.')
		return "file";
	return s;
}

static bool listed(const char *const *keys, const char *key)
{
	for (const char *const *k = keys; *k; k++)
		if (strcmp(*k, key) == 0)
			return true;
	return false;
}

/* Appends key to the NULL-terminated keys (room for it) unless it is there. */
static void add_key(const char **keys, size_t *n, const char *key)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp(keys[i], key) == 0)
			return;
	keys[(*n)++] = key;
	keys[*n] = NULL;
}

/* Every source.* key some source reads, NULL-terminated: the rows' keys in
 * registry order. NULL when out of memory. */
static const char *const *source_keys(loader *l)
{
	size_t n = 0, i = 0;
	const kiln_source *s;
	const char **keys;

	for (size_t j = 0; (s = kiln_source_at(j)); j++)
		for (const char *const *k = s->option_keys; *k; k++)
			n++;
	if (!(keys = kiln_arena_alloc(l->p->arena, (n + 1) * sizeof(*keys))))
		return NULL;
	keys[0] = NULL;
	for (size_t j = 0; (s = kiln_source_at(j)); j++)
		for (const char *const *k = s->option_keys; *k; k++)
			add_key(keys, &i, *k);
	return keys;
}

/* "file, stdin or kafka": the kinds a pipeline may name. */
static const char *source_kinds(loader *l)
{
	const kiln_source *s;
	const char *text = NULL;

	for (size_t j = 0; (s = kiln_source_at(j)); j++)
		text = !text                   ? s->kind
		       : kiln_source_at(j + 1) ? kiln_arena_printf(l->p->arena, "%s, %s", text, s->kind)
		                               : kiln_arena_printf(l->p->arena, "%s or %s", text, s->kind);
	return text;
}

/* "kafka": the kinds of the rows that land in the raw zone. */
static const char *raw_zone_kinds(loader *l)
{
	const kiln_source *s;
	const char *text = NULL;

	for (size_t j = 0; (s = kiln_source_at(j)); j++)
		if (s->raw_zone)
			text = text ? kiln_arena_printf(l->p->arena, "%s or %s", text, s->kind) : s->kind;
	return text ? text : "streaming";
}

/* The one other row that reads the source.* key `key`, or NULL (none, or
 * more than one). */
static const kiln_source *only_row_with(const char *key)
{
	const kiln_source *s, *found = NULL;

	for (size_t j = 0; (s = kiln_source_at(j)); j++) {
		if (!listed(s->option_keys, key))
			continue;
		if (found && s->option_keys != found->option_keys)
			return NULL;
		found = s;
	}
	return found;
}

static int load_source(loader *l, const kiln_yaml_node *root)
{
	const kiln_yaml_node *src = kiln_yaml_get(root, "source");
	kiln_pipeline *p = l->p;
	const char *kind = "file", *name = NULL;
	const char *const *keys;
	int64_t depth = 0;
	int rc;

	if (!src || kiln_yaml_is_null(src))
		return kiln_yaml_fail(l->doc, root, "source", "required key is missing");
	if (!(keys = source_keys(l)))
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	if ((rc = kiln_config_check_keys(&l->cfg, src, "source", keys)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, src, "source", "kind", false, &kind)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, src, "source", "name", false, &name)) < 0 ||
	    (rc = kiln_config_size(&l->cfg, src, "source", "max_record_bytes", 2, &p->max_record_bytes)) <
	        0 ||
	    (rc = kiln_config_int(&l->cfg, src, "source", "max_depth", 1, 100000, &depth)) < 0)
		return rc;
	p->max_depth = (uint32_t)depth;
	if (!(p->source = kiln_source_find(kind)))
		return kiln_yaml_fail(l->doc, kiln_yaml_get(src, "kind"), "source.kind",
		                      "unknown source kind \"%s\" (expected %s)", kind, source_kinds(l));
	/* the row reads its own keys (a file source's path, Kafka's brokers,
	 * topics, ...); it may name its input itself (Kafka: its first topic) */
	if (p->source->configure && (rc = p->source->configure(p, &l->cfg, src)) < 0)
		return rc;
	/* the keys it has are its row's */
	for (const char *const *k = keys; *k; k++) {
		const kiln_yaml_node *at = kiln_yaml_get(src, *k);
		const char *where;

		if (!at || listed(p->source->option_keys, *k))
			continue;
		where = kiln_config_path(&l->cfg, "source", *k);
		if (only_row_with(*k))
			return kiln_yaml_fail(l->doc, at, where, "only a %s source has this key",
			                      only_row_with(*k)->kind);
		return kiln_yaml_fail(l->doc, at, where, "not a key of a %s source", p->source->kind);
	}
	if (p->source_name) {
		/* named by its row */
	} else if (name) {
		for (const char *c = name; *c; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			      (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-'))
				return kiln_yaml_fail(l->doc, kiln_yaml_get(src, "name"), "source.name",
				                      "use letters, digits, '.', '_' and '-' only");
		if (!*name || name[0] == '.')
			return kiln_yaml_fail(l->doc, kiln_yaml_get(src, "name"), "source.name",
			                      "must not be empty or start with '.'");
		p->source_name = name;
	} else {
		p->source_name = p->source_path ? name_from_path(l, p->source_path) : p->source->kind;
	}
	return 0;
}

static int load_pseudonymise(loader *l, const kiln_yaml_node *root)
{
	const kiln_yaml_node *ps = kiln_yaml_get(root, "pseudonymise");
	kiln_pipeline *p = l->p;
	int64_t version = 1;
	int rc;

	if (!ps || kiln_yaml_is_null(ps))
		return kiln_yaml_fail(l->doc, root, "pseudonymise",
		                      "required key is missing (key_file or key_env)");
	if ((rc = kiln_config_check_keys(&l->cfg, ps, "pseudonymise", pseudo_keys)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, ps, "pseudonymise", "key_file", false, &p->key_file)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, ps, "pseudonymise", "key_env", false, &p->key_env)) < 0 ||
	    (rc = kiln_config_int(&l->cfg, ps, "pseudonymise", "key_version", 1, 4294967295LL, &version)) < 0)
		return rc;
	if (!p->key_file == !p->key_env)
		return kiln_yaml_fail(l->doc, ps, "pseudonymise",
		                      "set exactly one of key_file (a 0600 file with 64 hex characters) and "
		                      "key_env (the name of an environment variable)");
	p->key_file = kiln_config_resolve(&l->cfg, p->key_file);
	p->key_version = (unsigned)version;
	return 0;
}

static int load_split(loader *l, const kiln_yaml_node *root)
{
	const kiln_yaml_node *sp = kiln_yaml_get(root, "split"), *ratios;
	kiln_pipeline *p = l->p;
	int rc;

	if (!sp || kiln_yaml_is_null(sp))
		return kiln_yaml_fail(l->doc, root, "split", "required key is missing");
	if ((rc = kiln_config_check_keys(&l->cfg, sp, "split", split_keys)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, sp, "split", "key", true, &p->split_key)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, sp, "split", "salt", true, &p->split_salt)) < 0)
		return rc;
	p->split_key_node = kiln_yaml_get(sp, "key");
	ratios = kiln_yaml_get(sp, "ratios");
	if (!ratios || kiln_yaml_is_null(ratios))
		return kiln_yaml_fail(l->doc, sp, "split.ratios",
		                      "required key is missing (train, dev, test)");
	if ((rc = kiln_config_check_keys(&l->cfg, ratios, "split.ratios", ratio_keys)) < 0)
		return rc;
	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		const kiln_yaml_node *n = kiln_yaml_get(ratios, kiln_split_name(i));
		const char *path = kiln_config_path(&l->cfg, "split.ratios", kiln_split_name(i));
		long double v = 0;
		if (n && (rc = kiln_yaml_number(l->doc, n, path, &v)) < 0)
			return rc;
		p->ratios[i] = (double)v;
	}
	kiln_splitter check;
	if (kiln_splitter_init(&check, p->split_salt, p->ratios) < 0)
		return kiln_yaml_fail(l->doc, ratios, "split.ratios", "%s", kiln_error_last());
	return 0;
}

static int load_store(loader *l, const kiln_yaml_node *root)
{
	const kiln_store_config_src src = {.doc = l->doc,
	                                   .arena = l->p->arena,
	                                   .dir = l->dir,
	                                   .docs = "docs/PIPELINES.md",
	                                   .file = "pipeline file"};

	return kiln_store_config_load(&src, root, "store", &l->p->store_url, &l->p->store);
}

static int get_fraction(loader *l, const kiln_yaml_node *map, const char *section, const char *key,
                        double *out)
{
	const kiln_yaml_node *n = kiln_yaml_get(map, key);
	const char *path = kiln_config_path(&l->cfg, section, key);
	long double v;
	int rc;

	if (!n || kiln_yaml_is_null(n))
		return 0;
	if ((rc = kiln_yaml_number(l->doc, n, path, &v)) < 0)
		return rc;
	if (v < 0 || v > 1)
		return kiln_yaml_fail(l->doc, n, path, "must be between 0 and 1");
	*out = (double)v;
	return 0;
}

static int load_promote(loader *l, const kiln_yaml_node *root)
{
	const kiln_yaml_node *pr = kiln_yaml_get(root, "promote"), *mr;
	kiln_gates *g = &l->p->gates;
	int rc;

	kiln_gates_init(g);
	if (!pr || kiln_yaml_is_null(pr))
		return 0;
	if ((rc = kiln_config_check_keys(&l->cfg, pr, "promote", promote_keys)) < 0 ||
	    (rc = get_fraction(l, pr, "promote", "ratio_tolerance", &g->ratio_tolerance)) < 0 ||
	    (rc = get_fraction(l, pr, "promote", "max_quarantine_rate", &g->max_quarantine_rate)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, pr, "promote", "contract_version", false,
	                             &g->contract_version)) < 0)
		return rc;
	mr = kiln_yaml_get(pr, "min_records");
	if (mr && !kiln_yaml_is_null(mr)) {
		if ((rc = kiln_config_check_keys(&l->cfg, mr, "promote.min_records", ratio_keys)) < 0)
			return rc;
		for (int i = 0; i < KILN_SPLIT_COUNT; i++)
			if ((rc = kiln_config_int(&l->cfg, mr, "promote.min_records", kiln_split_name(i), 0,
			                          INT64_MAX, &g->min_records[i])) < 0)
				return rc;
	}
	mr = kiln_yaml_get(pr, "contract_compatible");
	if (mr && !kiln_yaml_is_null(mr) &&
	    (rc = kiln_yaml_bool(l->doc, mr, "promote.contract_compatible", &g->contract_compatible)) < 0)
		return rc;
	mr = kiln_yaml_get(pr, "drift");
	if (mr && !kiln_yaml_is_null(mr)) {
		g->drift = true;
		g->drift_max_psi = KILN_DRIFT_PSI_DEFAULT;
		g->drift_max_null_rate = KILN_DRIFT_NULL_RATE_DEFAULT;
		if ((rc = kiln_config_check_keys(&l->cfg, mr, "promote.drift", drift_keys)) < 0 ||
		    (rc = kiln_config_string(&l->cfg, mr, "promote.drift", "baseline", false,
		                             &g->drift_baseline)) < 0 ||
		    (rc = get_fraction(l, mr, "promote.drift", "max_psi", &g->drift_max_psi)) < 0 ||
		    (rc = get_fraction(l, mr, "promote.drift", "max_null_rate_change",
		                       &g->drift_max_null_rate)) < 0)
			return rc;
		if (!g->drift_baseline)
			g->drift_baseline = "previous";
		else if (strcmp(g->drift_baseline, "previous") != 0 &&
		         !kiln_promote_version_name_ok(g->drift_baseline))
			return kiln_yaml_fail(l->doc, kiln_yaml_get(mr, "baseline"), "promote.drift.baseline",
			                      "expected previous or a promoted version vN");
	}
	return 0;
}

/* snapshot:, raw:, metrics:, log: (how a long-running run behaves). */
/* retention.<zone>: an age ("30d") into *out (seconds). */
static int get_retention(loader *l, const kiln_yaml_node *map, const char *zone, int64_t *out)
{
	const kiln_yaml_node *n = kiln_yaml_get(map, zone);
	const char *path = kiln_config_path(&l->cfg, "retention", zone), *text = NULL;
	int rc;

	if (!n || kiln_yaml_is_null(n))
		return 0;
	if ((rc = kiln_config_string(&l->cfg, map, "retention", zone, false, &text)) < 0)
		return rc;
	if ((*out = kiln_parse_age(text)) < 0)
		return kiln_yaml_fail(l->doc, n, path, "expected an age such as 30d, 12h, 90m, 2w or 3600s");
	return 0;
}

/* A list of 1 to 16 distinct field paths at dedup.NAME (a single path
 * counts as a list of one): the paths and the nodes that set them. */
static int load_paths(loader *l, const kiln_yaml_node *keys, const char *name, const char ***out_paths,
                      const kiln_yaml_node *const **out_nodes, size_t *out_count)
{
	const kiln_yaml_node *const *items = &keys;
	kiln_pipeline *p = l->p;
	size_t count = 1;
	int rc;

	if (keys->kind == KILN_YAML_SEQUENCE) {
		items = (const kiln_yaml_node *const *)keys->items;
		count = keys->count;
	}
	if (count == 0 || count > 16)
		return kiln_yaml_fail(l->doc, keys, name, "name 1 to 16 field paths");
	const char **paths = kiln_arena_alloc(p->arena, count * sizeof(*paths));
	const kiln_yaml_node **nodes = kiln_arena_alloc(p->arena, count * sizeof(*nodes));
	if (!paths || !nodes)
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	for (size_t i = 0; i < count; i++) {
		nodes[i] = items[i];
		if ((rc = kiln_yaml_string(l->doc, items[i], name, &paths[i])) < 0)
			return rc;
		for (size_t j = 0; j < i; j++)
			if (strcmp(paths[i], paths[j]) == 0)
				return kiln_yaml_fail(l->doc, items[i], name, "\"%s\" is named twice",
				                      paths[i]);
	}
	*out_paths = paths;
	*out_nodes = nodes;
	*out_count = count;
	return 0;
}

/* dedup: {key: [field, ...], window: AGE, max_keys: N, replaces_key: [field,
 * ...]}, or dedup: {replaces_key: [...]} alone (ending dedup on a branch).
 * The fields are checked against the contract when the run opens it
 * (run_setup.c). */
static int load_dedup(loader *l, const kiln_yaml_node *root)
{
	const kiln_yaml_node *n = kiln_yaml_get(root, "dedup"), *keys, *replaces;
	const kiln_yaml_node *const *unused;
	kiln_pipeline *p = l->p;
	const char *window = NULL;
	int64_t max_keys = KILN_PIPELINE_DEDUP_MAX_KEYS;
	int rc;

	if (!n || kiln_yaml_is_null(n))
		return 0;
	if ((rc = kiln_config_check_keys(&l->cfg, n, "dedup", dedup_keys)) < 0)
		return rc;
	replaces = kiln_yaml_get(n, "replaces_key");
	if (replaces && !kiln_yaml_is_null(replaces) &&
	    (rc = load_paths(l, replaces, "dedup.replaces_key", &p->dedup_replaces, &unused,
	                     &p->dedup_replaces_count)) < 0)
		return rc;
	keys = kiln_yaml_get(n, "key");
	if ((!keys || kiln_yaml_is_null(keys)) && p->dedup_replaces_count && !kiln_yaml_get(n, "window") &&
	    !kiln_yaml_get(n, "max_keys"))
		return 0; /* dedup ends on the branch */
	if ((rc = kiln_config_string(&l->cfg, n, "dedup", "window", true, &window)) < 0)
		return rc;
	if ((p->dedup_window_ms = kiln_parse_age(window)) <= 0)
		return kiln_yaml_fail(l->doc, kiln_yaml_get(n, "window"), "dedup.window",
		                      "expected a positive age such as 7d, 12h, 90m, 2w or 3600s");
	p->dedup_window_ms *= 1000;
	if ((rc = kiln_config_int(&l->cfg, n, "dedup", "max_keys", 1, KILN_PIPELINE_DEDUP_MAX_KEYS_CAP,
	                          &max_keys)) < 0)
		return rc;
	p->dedup_max_keys = (size_t)max_keys;
	if (!keys || kiln_yaml_is_null(keys))
		return kiln_yaml_fail(l->doc, n, "dedup.key",
		                      "required key is missing (a list of field paths)");
	return load_paths(l, keys, "dedup.key", &p->dedup_keys, &p->dedup_key_nodes, &p->dedup_key_count);
}

/* quarantine.max_ratio and retention (the restricted zones over time). */
static int load_zones(loader *l, const kiln_yaml_node *root)
{
	const kiln_yaml_node *n;
	int rc;

	if ((n = kiln_yaml_get(root, "quarantine")) && !kiln_yaml_is_null(n)) {
		const kiln_yaml_node *r = kiln_yaml_get(n, "max_ratio");
		long double v;

		if ((rc = kiln_config_check_keys(&l->cfg, n, "quarantine", quarantine_keys)) < 0)
			return rc;
		if (r && !kiln_yaml_is_null(r)) {
			if ((rc = kiln_yaml_number(l->doc, r, "quarantine.max_ratio", &v)) < 0)
				return rc;
			if (!(v > 0 && v <= 1))
				return kiln_yaml_fail(l->doc, r, "quarantine.max_ratio",
				                      "must be greater than 0 and at most 1");
			l->p->quarantine_max_ratio = (double)v;
		}
	}
	if ((n = kiln_yaml_get(root, "retention")) && !kiln_yaml_is_null(n) &&
	    ((rc = kiln_config_check_keys(&l->cfg, n, "retention", retention_keys)) < 0 ||
	     (rc = get_retention(l, n, "raw", &l->p->retention_raw)) < 0 ||
	     (rc = get_retention(l, n, "quarantine", &l->p->retention_quarantine)) < 0))
		return rc;
	return 0;
}

static int load_operations(loader *l, const kiln_yaml_node *root)
{
	kiln_pipeline *p = l->p;
	const kiln_yaml_node *n;
	const char *format = NULL;
	int64_t v;
	int rc;

	p->snapshot_records = 100000;
	p->snapshot_seconds = 60;
	p->drain_seconds = 30;
	p->log_json = true;
	p->log_level = KILN_LOG_INFO;
	if (!p->batch_records)
		p->batch_records = 8192;
	if (!p->batch_bytes)
		p->batch_bytes = 1u << 20;
	if (!p->batch_ms)
		p->batch_ms = 100;
	if ((n = kiln_yaml_get(root, "snapshot")) && !kiln_yaml_is_null(n)) {
		if ((rc = kiln_config_check_keys(&l->cfg, n, "snapshot", snapshot_keys)) < 0)
			return rc;
		v = (int64_t)p->snapshot_records;
		if ((rc = kiln_config_int(&l->cfg, n, "snapshot", "records", 0, INT64_MAX, &v)) < 0)
			return rc;
		p->snapshot_records = (uint64_t)v;
		v = p->snapshot_seconds;
		if ((rc = kiln_config_int(&l->cfg, n, "snapshot", "seconds", 0, 86400, &v)) < 0)
			return rc;
		p->snapshot_seconds = (unsigned)v;
		v = p->drain_seconds;
		if ((rc = kiln_config_int(&l->cfg, n, "snapshot", "drain_seconds", 1, 3600, &v)) < 0)
			return rc;
		p->drain_seconds = (unsigned)v;
	}
	if ((n = kiln_yaml_get(root, "raw")) && !kiln_yaml_is_null(n)) {
		const kiln_yaml_node *e;
		if ((rc = kiln_config_check_keys(&l->cfg, n, "raw", raw_keys)) < 0)
			return rc;
		if ((e = kiln_yaml_get(n, "enabled")) &&
		    (rc = kiln_yaml_bool(l->doc, e, "raw.enabled", &p->raw_zone)) < 0)
			return rc;
		if (p->raw_zone && !p->source->raw_zone)
			return kiln_yaml_fail(l->doc, e ? e : n, "raw.enabled",
			                      "only a %s source has a raw zone", raw_zone_kinds(l));
	}
	p->profile = true;
	p->profile_categories_k = KILN_PROFILE_CATEGORIES_K;
	if ((n = kiln_yaml_get(root, "profile")) && !kiln_yaml_is_null(n)) {
		const kiln_yaml_node *e;
		if ((rc = kiln_config_check_keys(&l->cfg, n, "profile", profile_keys)) < 0)
			return rc;
		if ((e = kiln_yaml_get(n, "enabled")) &&
		    (rc = kiln_yaml_bool(l->doc, e, "profile.enabled", &p->profile)) < 0)
			return rc;
		if ((e = kiln_yaml_get(n, "categories")) && !kiln_yaml_is_null(e)) {
			const kiln_yaml_node *k;
			int64_t kv;
			if ((rc = kiln_config_check_keys(&l->cfg, e, "profile.categories",
			                                 profile_category_keys)) < 0)
				return rc;
			if ((k = kiln_yaml_get(e, "k"))) {
				if ((rc = kiln_yaml_int64(l->doc, k, "profile.categories.k", &kv)) < 0)
					return rc;
				if (kv < 1 || kv > KILN_PROFILE_CATEGORIES_K_MAX)
					return kiln_yaml_fail(l->doc, k, "profile.categories.k",
					                      "must be between 1 and %d",
					                      KILN_PROFILE_CATEGORIES_K_MAX);
				p->profile_categories_k = (uint32_t)kv;
			}
		}
	}
	if ((n = kiln_yaml_get(root, "metrics")) && !kiln_yaml_is_null(n)) {
		if ((rc = kiln_config_check_keys(&l->cfg, n, "metrics", metrics_keys)) < 0 ||
		    (rc = kiln_config_string(&l->cfg, n, "metrics", "listen", false, &p->metrics_listen)) < 0)
			return rc;
		if (p->metrics_listen && !*p->metrics_listen)
			p->metrics_listen = NULL;
	}
	if ((n = kiln_yaml_get(root, "log")) && !kiln_yaml_is_null(n)) {
		const char *level = NULL;

		if ((rc = kiln_config_check_keys(&l->cfg, n, "log", log_keys)) < 0 ||
		    (rc = kiln_config_string(&l->cfg, n, "log", "format", false, &format)) < 0 ||
		    (rc = kiln_config_string(&l->cfg, n, "log", "level", false, &level)) < 0)
			return rc;
		if (level && !kiln_log_level_parse(level, &p->log_level))
			return kiln_yaml_fail(l->doc, kiln_yaml_get(n, "level"), "log.level",
			                      "expected debug, info, warn or error");
		if (format && strcmp(format, "text") == 0)
			p->log_json = false;
		else if (format && strcmp(format, "json") != 0)
			return kiln_yaml_fail(l->doc, kiln_yaml_get(n, "format"), "log.format",
			                      "expected json or text");
	}
	return 0;
}

static int load(loader *l)
{
	const kiln_yaml_node *root = kiln_yaml_root(l->doc), *n;
	kiln_pipeline *p = l->p;
	const char *unknown = NULL;
	int64_t level = 0, zstd_threads = 0;
	int rc;

	if (!root)
		return kiln_yaml_fail(l->doc, NULL, "", "empty pipeline");
	if ((rc = kiln_config_check_keys(&l->cfg, root, NULL, top_keys)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, root, NULL, "dataset", true, &p->dataset)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, root, NULL, "branch", false, &p->branch)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, root, NULL, "contract", true, &p->contract)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, root, NULL, "schema", false, &p->schema)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, root, NULL, "unknown_fields", false, &unknown)) < 0)
		return rc;
	if (!kiln_mfmt_name_valid(p->dataset))
		return kiln_yaml_fail(
		    l->doc, kiln_yaml_get(root, "dataset"), "dataset",
		    "use lower-case letters, digits, '.', '_' and '-', starting with a letter or digit");
	if (!p->branch)
		p->branch = "main";
	else if (!kiln_mfmt_name_valid(p->branch))
		return kiln_yaml_fail(l->doc, kiln_yaml_get(root, "branch"), "branch",
		                      "use lower-case letters, digits, '.', '_' and '-'");
	p->contract = kiln_config_resolve(&l->cfg, p->contract);
	int64_t workers = 0;
	if ((rc = kiln_config_int(&l->cfg, root, NULL, "workers", 0, 64, &workers)) < 0)
		return rc;
	p->workers = (unsigned)workers;
	p->unknown_fields = -1;
	if (unknown && strcmp(unknown, "reject") == 0)
		p->unknown_fields = 0;
	else if (unknown && strcmp(unknown, "allow") == 0)
		p->unknown_fields = 1;
	else if (unknown)
		return kiln_yaml_fail(l->doc, kiln_yaml_get(root, "unknown_fields"), "unknown_fields",
		                      "expected reject or allow");

	if ((rc = load_source(l, root)) < 0 || (rc = load_pseudonymise(l, root)) < 0 ||
	    (rc = load_split(l, root)) < 0 || (rc = load_store(l, root)) < 0 ||
	    (rc = load_promote(l, root)) < 0)
		return rc;

	n = kiln_yaml_get(root, "shards");
	if (n && !kiln_yaml_is_null(n) &&
	    ((rc = kiln_config_check_keys(&l->cfg, n, "shards", shard_keys)) < 0 ||
	     (rc = kiln_config_size(&l->cfg, n, "shards", "target_bytes", 1024, &p->target_bytes)) < 0 ||
	     (rc = kiln_config_int(&l->cfg, n, "shards", "zstd_level", -7, 22, &level)) < 0 ||
	     (rc = kiln_config_int(&l->cfg, n, "shards", "zstd_threads", 0, 64, &zstd_threads)) < 0))
		return rc;
	p->zstd_level = level ? (int)level : 3;
	p->zstd_threads = (unsigned)zstd_threads;

	if ((rc = load_operations(l, root)) < 0 || (rc = load_zones(l, root)) < 0 ||
	    (rc = load_dedup(l, root)) < 0)
		return rc;

	n = kiln_yaml_get(root, "manifest");
	if (!n || kiln_yaml_is_null(n))
		return kiln_yaml_fail(l->doc, root, "manifest", "required key is missing (repo)");
	if ((rc = kiln_config_check_keys(&l->cfg, n, "manifest", manifest_keys)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, n, "manifest", "repo", true, &p->manifest_repo)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, n, "manifest", "author_name", false, &p->author_name)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, n, "manifest", "author_email", false, &p->author_email)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, n, "manifest", "signing_key", false, &p->signing_key_file)) <
	        0 ||
	    (rc = kiln_config_string(&l->cfg, n, "manifest", "remote", false, &p->manifest_remote)) < 0)
		return rc;
	/* automatic compaction (manifest/compact.h): like git's gc.auto */
	int64_t loose = 1000, grace = 300;
	if ((rc = kiln_config_int(&l->cfg, n, "manifest", "compact_loose_objects", 0, 100000000, &loose)) <
	        0 ||
	    (rc = kiln_config_int(&l->cfg, n, "manifest", "compact_grace_seconds", 10, 86400 * 14, &grace)) <
	        0)
		return rc;
	p->compact_loose_objects = (uint64_t)loose;
	p->compact_grace_seconds = (unsigned)grace;
	p->manifest_repo = kiln_config_resolve(&l->cfg, p->manifest_repo);
	/* a local remote path is relative like every path; URLs (scheme://, host:path) are not */
	if (p->manifest_remote && !strstr(p->manifest_remote, "://") &&
	    (!strchr(p->manifest_remote, ':') ||
	     (strchr(p->manifest_remote, '/') &&
	      strchr(p->manifest_remote, '/') < strchr(p->manifest_remote, ':'))))
		p->manifest_remote = kiln_config_resolve(&l->cfg, p->manifest_remote);
	p->signing_key_file = kiln_config_resolve(&l->cfg, p->signing_key_file);
	if (!p->max_record_bytes)
		p->max_record_bytes = 1u << 20;
	if (!p->max_depth)
		p->max_depth = 128;
	if (!p->target_bytes)
		p->target_bytes = 64u << 20;
	return 0;
}

static const char *const batch_keys[] = {"records", "bytes", "ms", NULL};

int kiln_pipeline_read_batch(kiln_pipeline *p, kiln_config *cfg, const kiln_yaml_node *src)
{
	const kiln_yaml_node *n = kiln_yaml_get(src, "batch");
	int64_t records = 0, ms = 0;
	int rc;

	if (!n || kiln_yaml_is_null(n))
		return 0;
	if ((rc = kiln_config_check_keys(cfg, n, "source.batch", batch_keys)) < 0 ||
	    (rc = kiln_config_int(cfg, n, "source.batch", "records", 1, 1000000, &records)) < 0 ||
	    (rc = kiln_config_size(cfg, n, "source.batch", "bytes", 1024, &p->batch_bytes)) < 0 ||
	    (rc = kiln_config_int(cfg, n, "source.batch", "ms", 1, 60000, &ms)) < 0)
		return rc;
	p->batch_records = (size_t)records;
	p->batch_ms = (unsigned)ms;
	return 0;
}

int kiln_pipeline_load(kiln_pipeline **out, const char *path, char *const *sets, size_t nsets)
{
	kiln_pipeline *p = calloc(1, sizeof(*p));
	kiln_yaml_doc *doc = NULL;
	loader l = {0};
	int rc;

	*out = NULL;
	if (!p || !(p->arena = kiln_arena_new())) {
		free(p);
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	}
	if ((rc = kiln_yaml_load_config(&doc, path, sets, nsets)) < 0)
		goto fail;
	p->doc = doc;
	p->file = kiln_arena_printf(p->arena, "%s", path);
	l.p = p;
	l.doc = doc;
	if (!p->file || !(l.dir = kiln_arena_dirname(p->arena, path))) {
		rc = kiln_error_set(KILN_ENOMEM, "out of memory");
		goto fail;
	}
	l.cfg = (kiln_config){.doc = doc, .arena = p->arena, .dir = l.dir, .docs = "docs/PIPELINES.md"};
	if ((rc = load(&l)) < 0)
		goto fail;
	*out = p;
	return 0;
fail:
	kiln_pipeline_free(p);
	return rc;
}

void kiln_pipeline_free(kiln_pipeline *p)
{
	if (!p)
		return;
	if (p->source && p->source->forget)
		p->source->forget(p);
	kiln_yaml_free(p->doc);
	kiln_arena_free(p->arena);
	free(p);
}
