/* `kiln gc`: finds the shard objects in the store that no kept version of the
 * manifest references (orphans of crashed runs, shards of pruned history),
 * reports them with their bytes, and with --apply deletes them, then compacts
 * the manifest and purges the git objects of versions an erasure superseded
 * (docs/ERASURE.md). A dry run unless --apply; quarantine/ and raw/ are
 * touched only by `kiln gc --retention`, which collects them after the
 * pipeline's retention once every offset they hold is committed
 * (ingest/retention.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/units.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "core/error.h"
#include "cli/source.h"
#include "manifest/compact.h"
#include "manifest/gc.h"
#include "ingest/retention.h"
#include "manifest/ledger.h"
#include "manifest/version.h"
#include "store/store.h"

static const char usage_text[] =
    "usage: kiln gc [--apply] [--keep tags|branches|younger-than=AGE]... [--grace AGE]\n"
    "               [--manifest REPO] [--store URL | --pipeline FILE] [-v] [--json]\n"
    "       kiln gc --retention --pipeline FILE [--apply] [--json]\n"
    "\n"
    "Marks every shard that a kept commit of any dataset in the manifest lists,\n"
    "lists shards/ in the store and reports every shard object nothing kept\n"
    "references: shards uploaded by runs that failed before their commit, and\n"
    "shards only dropped history referenced. Dry run unless --apply.\n"
    "\n"
    "Kept: the tip of every branch and every tag, always; and by default the\n"
    "whole history of every branch and tag. With --keep (repeatable, combined):\n"
    "  tags              the whole history of every tag (branch tips only)\n"
    "  branches          the whole history of every branch\n"
    "  younger-than=AGE  every commit younger than AGE (30d, 12h, 90m, 2w, 3600s)\n"
    "\n"
    "An unreferenced shard written less than the grace period ago (default 1h)\n"
    "is young, not orphaned: a run still writing may be about to commit it, so\n"
    "gc is safe to run while runs write (a run also checks, before it commits,\n"
    "that every shard it lists is still stored). With --apply the manifest\n"
    "repository is compacted too: reachable objects packed, unreachable ones\n"
    "older than the grace period pruned; and every object only versions\n"
    "superseded by `kiln erase` reached is removed at once (no grace), with the\n"
    "reflog entries naming them, and so are the shards they listed.\n"
    "quarantine/ and raw/ objects are collected only by --retention.\n"
    "\n"
    "--retention collects the restricted zones instead, after the pipeline's\n"
    "retention: {raw: AGE, quarantine: AGE} (docs/PIPELINES.md): a raw-zone or\n"
    "quarantine object whose store time is older than its zone's AGE is deleted\n"
    "only when every offset it holds is committed: for raw/<topic>/<partition>/..\n"
    "every branch of every dataset in the manifest whose lineage reads that\n"
    "Kafka topic/partition has moved past it (and at least one does), for a\n"
    "quarantine object its own dataset and branch has. Every object is reported\n"
    "(zone, key, age, deleted/expired/kept and why), then the counts per zone:\n"
    "  ZONE KEY AGE deleted|expired|kept (WHY)\n"
    "With --json, one line per object {\"zone\",\"key\",\"age_seconds\",\"bytes\",\n"
    "\"decision\":\"deleted\"|\"expired\"|\"kept\",\"why\",\"held_by\"} then\n"
    "{\"summary\":{...}} holding kiln_retention_deleted_objects_total per zone.\n"
    "Dry run unless --apply; kiln run never deletes them itself.\n"
    "\n"
    "With --json, JSON Lines on stdout: one object per key it lists (missing\n"
    "always; orphan or deleted, and unrecognised, with -v):\n"
    "  {\"kind\":\"orphan\"|\"deleted\"|\"missing\"|\"unrecognised\",\"key\":K,\"bytes\":N}\n"
    "then one last line {\"summary\":{...}} with every count of the text form\n"
    "and, with --apply, the manifest's compaction (docs/JSON.md).\n"
    "\n"
    "Options:\n"
    "      --apply           delete the orphans (default: only report them)\n"
    "  -k, --keep POLICY     what to keep besides the tips (see above)\n"
    "  -g, --grace AGE       keep unreferenced objects younger than AGE (default 1h;\n"
    "                        0 only when no run writes to this store or manifest)\n"
    "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
    "  -s, --store URL       the object store (default: $KILN_STORE)\n"
    "  -p, --pipeline FILE   take the store (with its S3 options) and the manifest\n"
    "                        from a pipeline file\n"
    "  -r, --retention       collect raw/ and quarantine/ after the pipeline's\n"
    "                        retention instead of shards (needs --pipeline)\n"
    "  -v, --verbose         list every orphan and every unrecognised key\n"
    "  -j, --json            JSON Lines: one object per listed key, then a summary\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on success, 1 when a kept version references shards the store\n"
    "lacks (listed as `missing KEY`), 2 on a usage, manifest or store error.\n";

typedef struct gc_print {
	bool verbose, apply, json;
	kiln_buf line; /* --json: the line being written */
} gc_print;

static void print_size(FILE *f, uint64_t bytes)
{
	char text[32];

	kiln_size_human(text, sizeof(text), bytes, true);
	fputs(text, f);
}

/* One listed key as a JSON line. */
static int object_json(gc_print *p, const char *kind, const char *key, uint64_t size, bool sized)
{
	int rc = kiln_buf_printf(&p->line, "{\"kind\":\"%s\",\"key\":", kind);

	rc |= kiln_cli_json_string(&p->line, key);
	if (sized)
		rc |= kiln_buf_printf(&p->line, ",\"bytes\":%" PRIu64, size);
	else
		rc |= kiln_buf_puts(&p->line, ",\"bytes\":null");
	rc |= kiln_buf_puts(&p->line, "}\n");
	return kiln_cli_put_buf(&p->line, rc);
}

static int on_object(void *ctx, kiln_gc_object what, const char *key, uint64_t size)
{
	gc_print *p = ctx;

	if (p->json && what == KILN_GC_MISSING)
		return object_json(p, "missing", key, 0, false);
	if (p->json && p->verbose)
		return object_json(p,
		                   what == KILN_GC_FOREIGN ? "unrecognised"
		                   : p->apply              ? "deleted"
		                                           : "orphan",
		                   key, size, true);
	if (p->json)
		return 0;
	switch (what) {
	case KILN_GC_MISSING:
		printf("missing %s\n", key);
		break;
	case KILN_GC_ORPHAN:
		if (p->verbose)
			printf("%s %s %" PRIu64 "\n", p->apply ? "deleted" : "orphan", key, size);
		break;
	case KILN_GC_FOREIGN:
		if (p->verbose)
			printf("unrecognised %s %" PRIu64 " (left alone)\n", key, size);
		break;
	}
	return 0;
}

typedef struct gc_opts {
	const char *repo, *store_url, *pipeline_file;
	kiln_gc_policy policy;
	bool keep_given, grace_given, retention;
	gc_print p;
} gc_opts;

/* --keep ARG into the gc_opts at out: 0, or the exit status of a bad one. */
static int parse_keep(const char *cmd, const char *arg, void *out)
{
	gc_opts *o = out;

	o->keep_given = true;
	if (strcmp(arg, "tags") == 0) {
		o->policy.keep_tags = true;
	} else if (strcmp(arg, "branches") == 0) {
		o->policy.keep_branches = true;
	} else if (strncmp(arg, "younger-than=", 13) == 0) {
		if ((o->policy.younger_than = kiln_parse_age(arg + 13)) < 0)
			return kiln_cli_fail(cmd,
			                     "--keep younger-than wants an age such as 30d, "
			                     "12h, 90m, 2w or 3600s, not '%s'",
			                     arg + 13);
	} else {
		return kiln_cli_fail(cmd, "--keep wants tags, branches or younger-than=AGE, not '%s'", arg);
	}
	return 0;
}

/* --grace AGE into the int64_t at out. */
static int parse_grace(const char *cmd, const char *arg, void *out)
{
	int64_t *grace = out;

	if (strcmp(arg, "0") == 0)
		*grace = 0;
	else if ((*grace = kiln_parse_age(arg)) < 0)
		return kiln_cli_fail(cmd, "--grace wants an age such as 1h, 90m, 2d or 0, not '%s'", arg);
	return 0;
}

/* -1 to go on, else the exit status. */
static int parse_options(gc_opts *o, int argc, char **argv)
{
	const kiln_cli_option rows[] = {
	    {.name = "apply", .kind = KILN_CLI_FLAG, .out = &o->policy.apply},
	    {.name = "keep", .letter = 'k', .kind = KILN_CLI_CUSTOM, .out = o, .parse = parse_keep},
	    {.name = "grace",
	     .letter = 'g',
	     .kind = KILN_CLI_CUSTOM,
	     .out = &o->policy.grace,
	     .seen = &o->grace_given,
	     .parse = parse_grace},
	    {.name = "retention", .letter = 'r', .kind = KILN_CLI_FLAG, .out = &o->retention},
	    {.name = "manifest", .letter = 'm', .kind = KILN_CLI_STRING, .out = &o->repo},
	    {.name = "store", .letter = 's', .kind = KILN_CLI_STRING, .out = &o->store_url},
	    {.name = "pipeline", .letter = 'p', .kind = KILN_CLI_STRING, .out = &o->pipeline_file},
	    {.name = "verbose", .letter = 'v', .kind = KILN_CLI_FLAG, .out = &o->p.verbose},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &o->p.json},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {.cmd = "gc", .usage = usage_text, .rows = rows};
	int status;

	if ((status = kiln_cli_parse(NULL, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	if (!o->keep_given)
		o->policy.keep_tags = o->policy.keep_branches = true;
	o->p.apply = o->policy.apply;
	return KILN_CLI_GO_ON;
}

/* The summary of a collection, less the manifest's compaction. */
static void print_gc_stats(const kiln_gc_stats *st, const kiln_gc_policy *policy)
{
	printf("kept: %" PRIu64 " commit%s from %" PRIu64 " ref%s, referencing %" PRIu64 " shards\n",
	       st->commits, st->commits == 1 ? "" : "s", st->refs, st->refs == 1 ? "" : "s", st->referenced);
	printf("store: %" PRIu64 " shards, %" PRIu64 " bytes (", st->objects, st->object_bytes);
	print_size(stdout, st->object_bytes);
	printf("); %" PRIu64 " referenced, %" PRIu64 " orphaned, %" PRIu64
	       " young (unreferenced, written in the "
	       "last %" PRId64 " s: kept)\n",
	       st->live, st->orphans, st->young, policy->grace);
	if (policy->apply) {
		printf("deleted: %" PRIu64 " shards, %" PRIu64 " bytes (", st->deleted, st->deleted_bytes);
		print_size(stdout, st->deleted_bytes);
		printf(")\n");
	} else {
		printf("reclaimable: %" PRIu64 " shards, %" PRIu64 " bytes (", st->orphans, st->orphan_bytes);
		print_size(stdout, st->orphan_bytes);
		printf(")%s\n", st->orphans ? "; dry run: nothing deleted, --apply deletes them" : "");
	}
}

/* The summary line of --json: every count, and with --apply (cs) the
 * manifest's compaction; in a dry run (purgeable) what it would purge. */
static int print_gc_json(gc_print *p, const kiln_gc_stats *st, const kiln_gc_policy *policy,
                         const kiln_compact_stats *cs, const uint64_t *purgeable)
{
	kiln_buf *b = &p->line;
	int rc =
	    kiln_buf_printf(b,
	                    "{\"summary\":{\"apply\":%s,\"policy\":{\"keep_tags\":%s,\"keep_branches\":%s,"
	                    "\"younger_than_seconds\":",
	                    policy->apply ? "true" : "false", policy->keep_tags ? "true" : "false",
	                    policy->keep_branches ? "true" : "false");

	if (policy->younger_than > 0)
		rc |= kiln_buf_printf(b, "%" PRId64, policy->younger_than);
	else
		rc |= kiln_buf_puts(b, "null");
	rc |= kiln_buf_printf(b,
	                      ",\"grace_seconds\":%" PRId64 "},\"refs\":%" PRIu64 ",\"commits\":%" PRIu64
	                      ",\"referenced\":%" PRIu64 ",\"objects\":%" PRIu64 ",\"object_bytes\":%" PRIu64
	                      ",\"live\":%" PRIu64 ",\"live_bytes\":%" PRIu64 ",\"orphans\":%" PRIu64
	                      ",\"orphan_bytes\":%" PRIu64 ",\"young\":%" PRIu64 ",\"young_bytes\":%" PRIu64
	                      ",\"deleted\":%" PRIu64 ",\"deleted_bytes\":%" PRIu64 ",\"missing\":%" PRIu64
	                      ",\"unrecognised\":%" PRIu64 ",\"manifest\":",
	                      policy->grace, st->refs, st->commits, st->referenced, st->objects,
	                      st->object_bytes, st->live, st->live_bytes, st->orphans, st->orphan_bytes,
	                      st->young, st->young_bytes, st->deleted, st->deleted_bytes, st->missing,
	                      st->foreign);
	if (cs)
		rc |= kiln_buf_printf(b,
		                      "{\"packed\":%" PRIu64 ",\"loose_removed\":%" PRIu64
		                      ",\"packs_removed\":%" PRIu64 ",\"loose_kept\":%" PRIu64
		                      ",\"packs_kept\":%" PRIu64 ",\"purged\":%" PRIu64 "}",
		                      cs->packed, cs->loose_removed, cs->packs_removed, cs->loose_kept,
		                      cs->packs_kept, cs->purged);
	else
		rc |= kiln_buf_puts(b, "null");
	rc |= kiln_buf_puts(b, ",\"purgeable\":");
	if (purgeable)
		rc |= kiln_buf_printf(b, "%" PRIu64, *purgeable);
	else
		rc |= kiln_buf_puts(b, "null");
	rc |= kiln_buf_puts(b, "}}\n");
	return kiln_cli_write_buf("gc", b, rc);
}

/* What the manifest's compaction does (--apply: packs the reachable
 * objects and purges what erasures superseded, into *cs) or would purge (a
 * dry run: *purgeable): 0, or the exit status with the message printed. */
static int compact_manifest(kiln_manifest *m, bool apply, int64_t grace, kiln_compact_stats *cs,
                            uint64_t *purgeable)
{
	char **ids = NULL;
	size_t n = 0;
	int rc;

	*purgeable = 0;
	if ((rc = kiln_ledger_superseded(m, &ids, &n)) == 0)
		rc = apply ? kiln_manifest_purge(m, (const char *const *)ids, n, grace, cs)
		           : kiln_manifest_purge_count(m, (const char *const *)ids, n, purgeable);
	kiln_ledger_ids_free(ids, n);
	return rc < 0 ? kiln_cli_fail("gc", "%s", kiln_error_last()) : 0;
}

/* What the compaction did, as text. */
static void print_compaction(const kiln_compact_stats *cs)
{
	printf("manifest: %" PRIu64 " reachable objects packed; removed %" PRIu64
	       " loose objects and %" PRIu64 " older packs; kept %" PRIu64 " loose objects and %" PRIu64
	       " packs younger than the grace "
	       "period\n",
	       cs->packed, cs->loose_removed, cs->packs_removed, cs->loose_kept, cs->packs_kept);
	printf("purged: %" PRIu64 " git objects of versions superseded by erasure\n", cs->purged);
}

/* The text form: the summary, the compaction (--apply), the other counts.
 * 0, or the exit status with the message printed. */
static int print_gc_text(kiln_manifest *m, const kiln_gc_stats *st, const kiln_gc_policy *policy)
{
	kiln_compact_stats cs;
	uint64_t purgeable;

	print_gc_stats(st, policy);
	if (compact_manifest(m, policy->apply, policy->grace, &cs, &purgeable) != 0)
		return KILN_EXIT_USAGE;
	if (policy->apply)
		print_compaction(&cs);
	else
		printf("purgeable: %" PRIu64 " git objects of versions superseded by erasure%s\n", purgeable,
		       purgeable ? "; dry run: nothing purged, --apply purges them" : "");
	if (st->foreign)
		printf("unrecognised: %" PRIu64 " keys under shards/ that are not shard names (left alone)\n",
		       st->foreign);
	printf("missing: %" PRIu64 " referenced shards not in the store\n", st->missing);
	printf("quarantine/ and raw/ objects are collected only by kiln gc --retention\n");
	return 0;
}

/* ---- --retention ---------------------------------------------------------- */

static const char *const why_kept[] = {
    [KILN_RETENTION_DELETE] = NULL,       [KILN_RETENTION_YOUNG] = "young",
    [KILN_RETENTION_UNDATED] = "undated", [KILN_RETENTION_UNCOMMITTED] = "uncommitted",
    [KILN_RETENTION_UNREAD] = "unread",   [KILN_RETENTION_NO_POLICY] = "no_retention",
};

/* An age for people: "40d", "5h", "12m", "9s". */
static void age_text(char out[32], int64_t age)
{
	if (age < 0)
		snprintf(out, 32, "undated");
	else if (age >= 86400)
		snprintf(out, 32, "%" PRId64 "d", age / 86400);
	else if (age >= 3600)
		snprintf(out, 32, "%" PRId64 "h", age / 3600);
	else if (age >= 60)
		snprintf(out, 32, "%" PRId64 "m", age / 60);
	else
		snprintf(out, 32, "%" PRId64 "s", age);
}

static int on_retention(void *ctx, const kiln_retention_object *o)
{
	gc_print *p = ctx;
	const char *zone = kiln_retention_zone_name(o->zone);
	const char *decision = o->verdict != KILN_RETENTION_DELETE ? "kept"
	                       : p->apply                          ? "deleted"
	                                                           : "expired";
	char age[32];

	if (p->json) {
		int rc = kiln_buf_printf(&p->line, "{\"zone\":\"%s\",\"key\":", zone);

		rc |= kiln_cli_json_string(&p->line, o->key);
		if (o->age >= 0)
			rc |= kiln_buf_printf(&p->line, ",\"age_seconds\":%" PRId64, o->age);
		else
			rc |= kiln_buf_puts(&p->line, ",\"age_seconds\":null");
		rc |= kiln_buf_printf(
		    &p->line, ",\"bytes\":%" PRIu64 ",\"decision\":\"%s\",\"why\":", o->size, decision);
		rc |= kiln_cli_json_string(&p->line, why_kept[o->verdict]);
		rc |= kiln_buf_puts(&p->line, ",\"held_by\":");
		rc |= kiln_cli_json_string(&p->line, o->why);
		rc |= kiln_buf_puts(&p->line, "}\n");
		return kiln_cli_put_buf(&p->line, rc);
	}
	age_text(age, o->age);
	printf("%s %s %s %s", zone, o->key, age, decision);
	switch (o->verdict) {
	case KILN_RETENTION_DELETE:
		break;
	case KILN_RETENTION_YOUNG:
		printf(" (younger than its retention)");
		break;
	case KILN_RETENTION_UNDATED:
		printf(" (the store cannot tell its age)");
		break;
	case KILN_RETENTION_UNCOMMITTED:
		printf(" (not yet committed: %s)", o->why);
		break;
	case KILN_RETENTION_UNREAD:
		printf(" (no branch reads its topic/partition)");
		break;
	case KILN_RETENTION_NO_POLICY:
		printf(" (no retention for %s)", zone);
		break;
	}
	putchar('\n');
	return ferror(stdout) ? kiln_error_set(KILN_EIO, "stdout: write error") : 0;
}

static int print_retention(gc_print *p, const kiln_retention_policy *policy, const kiln_retention_stats *st)
{
	kiln_buf *b = &p->line;
	int rc = 0;

	if (!p->json) {
		for (int z = 0; z < KILN_RETENTION_ZONES; z++)
			printf(
			    "%s: %" PRIu64 " objects, %" PRIu64 " %s (%" PRIu64 " bytes), %" PRIu64 " kept\n",
			    kiln_retention_zone_name((kiln_retention_zone)z), st->objects[z], st->expired[z],
			    policy->apply ? "deleted" : "expired", st->bytes[z], st->kept[z]);
		if (!policy->apply && (st->expired[0] || st->expired[1]))
			printf("dry run: nothing deleted, --apply deletes the expired objects\n");
		return 0;
	}
	rc |= kiln_buf_printf(b, "{\"summary\":{\"apply\":%s,\"retention_seconds\":{",
	                      policy->apply ? "true" : "false");
	for (int z = 0; z < KILN_RETENTION_ZONES; z++)
		rc |= policy->age[z]
		          ? kiln_buf_printf(b, "%s\"%s\":%" PRId64, z ? "," : "",
		                            kiln_retention_zone_name((kiln_retention_zone)z), policy->age[z])
		          : kiln_buf_printf(b, "%s\"%s\":null", z ? "," : "",
		                            kiln_retention_zone_name((kiln_retention_zone)z));
	rc |= kiln_buf_puts(b, "}");
	for (int z = 0; z < KILN_RETENTION_ZONES; z++)
		rc |= kiln_buf_printf(b,
		                      ",\"%s\":{\"objects\":%" PRIu64 ",\"expired\":%" PRIu64
		                      ",\"bytes\":%" PRIu64 ",\"kept\":%" PRIu64 "}",
		                      kiln_retention_zone_name((kiln_retention_zone)z), st->objects[z],
		                      st->expired[z], st->bytes[z], st->kept[z]);
	rc |= kiln_buf_printf(b,
	                      ",\"kiln_retention_deleted_objects_total\":{\"raw\":%" PRIu64
	                      ",\"quarantine\":%" PRIu64 "}}}\n",
	                      policy->apply ? st->expired[0] : 0, policy->apply ? st->expired[1] : 0);
	return kiln_cli_write_buf("gc", b, rc);
}

/* kiln gc --retention: the exit status. */
static int run_retention(gc_opts *o)
{
	kiln_retention_policy policy = {.apply = o->policy.apply};
	kiln_cli_source src = {.repo = o->repo, .store_url = o->store_url};
	kiln_retention_stats st;
	kiln_manifest *m = NULL;
	kiln_store *store = NULL;
	int status = KILN_EXIT_USAGE;

	if (o->keep_given || o->grace_given || o->p.verbose)
		return kiln_cli_fail(
		    "gc", "--keep, --grace and --verbose apply to shard collection, not --retention");
	if (!o->pipeline_file)
		return kiln_cli_fail("gc",
		                     "--retention needs --pipeline FILE (retention is a pipeline setting)");
	if (kiln_cli_source_resolve("gc", &src, o->pipeline_file) != 0)
		goto cleanup;
	policy.age[KILN_RETENTION_RAW] = src.pipeline->retention_raw;
	policy.age[KILN_RETENTION_QUARANTINE] = src.pipeline->retention_quarantine;
	if (kiln_version_open(&m, src.repo) < 0 ||
	    kiln_store_open(&store, src.store_url, src.store_options) < 0 ||
	    kiln_retention_collect(m, store, &policy, on_retention, &o->p, &st) < 0) {
		fflush(stdout);
		kiln_cli_fail("gc", "%s", kiln_error_last());
		goto cleanup;
	}
	if (print_retention(&o->p, &policy, &st) != 0)
		goto cleanup;
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("gc", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_store_close(store);
	kiln_manifest_close(m);
	kiln_cli_source_free(&src);
	return status;
}

int kiln_cmd_gc(int argc, char **argv)
{
	gc_opts o = {.policy = {.grace = 3600}, .p = {.line = KILN_BUF_INIT(0)}};
	kiln_compact_stats cs = {0};
	kiln_cli_source src = {0};
	kiln_manifest *m = NULL;
	kiln_store *store = NULL;
	kiln_gc_stats st;
	char **erased = NULL;
	size_t erased_count = 0;
	int status;

	if ((status = parse_options(&o, argc, argv)) >= 0)
		return status;
	if (o.retention) {
		status = run_retention(&o);
		kiln_buf_free(&o.p.line);
		return status;
	}
	status = KILN_EXIT_USAGE;
	src.repo = o.repo;
	src.store_url = o.store_url;
	if (kiln_cli_source_resolve("gc", &src, o.pipeline_file) != 0)
		goto cleanup;
	if (kiln_version_open(&m, src.repo) < 0 ||
	    kiln_store_open(&store, src.store_url, src.store_options) < 0) {
		kiln_cli_fail("gc", "%s", kiln_error_last());
		goto cleanup;
	}
	/* the shards erasures superseded go without a grace period */
	if (kiln_ledger_superseded_shards(m, &erased, &erased_count) < 0) {
		kiln_cli_fail("gc", "%s", kiln_error_last());
		goto cleanup;
	}
	o.policy.erased = (const char *const *)erased;
	o.policy.erased_count = erased_count;
	if (kiln_gc(m, store, &o.policy, on_object, &o.p, &st) < 0) {
		kiln_cli_fail("gc", "%s", kiln_error_last());
		goto cleanup;
	}
	if (o.p.json) {
		/* the summary also when the compaction failed (its "manifest" null) */
		uint64_t purgeable;
		int compacted = compact_manifest(m, o.policy.apply, o.policy.grace, &cs, &purgeable);

		if (print_gc_json(&o.p, &st, &o.policy, o.policy.apply && compacted == 0 ? &cs : NULL,
		                  !o.policy.apply && compacted == 0 ? &purgeable : NULL) != 0 ||
		    compacted != 0)
			goto cleanup;
	} else if (print_gc_text(m, &st, &o.policy) != 0) {
		goto cleanup;
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("gc", "stdout: write error");
		goto cleanup;
	}
	status = st.missing ? KILN_EXIT_INVALID : KILN_EXIT_OK;
cleanup:
	kiln_ledger_ids_free(erased, erased_count);
	kiln_buf_free(&o.p.line);
	kiln_store_close(store);
	kiln_manifest_close(m);
	kiln_cli_source_free(&src);
	return status;
}
