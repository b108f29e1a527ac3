/* `kiln push DATASET@REF --to TARGET` and `kiln pull TARGET`: a version to
 * another store (a cloud burst) and its manifest back from there
 * (src/push/, docs/PUSH.md). The summary goes to stdout (--json: one
 * document); with -v one JSON log line per object and, on a terminal, a
 * progress bar go to stderr. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "config.h"
#include "cli/progress.h"
#include "cli/source.h"
#include "core/error.h"
#include "core/log.h"
#include "core/units.h"
#include "openlineage/openlineage.h"
#include "push/push.h"

static const char push_usage[] =
    "usage: kiln push DATASET@REF --to TARGET [--dry-run] [--jobs N] [--unpromoted]\n"
    "                 [--allowed-signers FILE] [--targets FILE] [--set KEY=VALUE]...\n"
    "                 [--manifest REPO] [--store URL | --pipeline FILE] [-v] [--json]\n"
    "\n"
    "Copies one version to a target store: the shards its splits list (never\n"
    "raw-zone or quarantine objects) and its manifest (the signed tag, the\n"
    "commit and its history) as a bare git repository under the target's\n"
    "manifest prefix. Objects the target has (same name, same size) are not\n"
    "sent again; the version's ref is written last. Run it again to resume.\n"
    "\n"
    "Options:\n"
    "  -t, --to TARGET              a target of the targets file, or a store URL\n"
    "      --targets FILE           the targets file (default $KILN_TARGETS)\n"
    "  -n, --dry-run                print what would be sent and its egress cost\n"
    "  -j, --jobs N                 uploads at once (default: the target's concurrency)\n"
    "      --unpromoted             also push a version that is not a signed vN tag\n"
    "                               (recorded at the target as unpromoted-<commit>)\n"
    "      --allowed-signers FILE   the tag must be signed by one of these keys\n"
    "  -s, --set KEY=VALUE          override a targets file value (targets.NAME.key)\n"
    "  -m, --manifest REPO          manifest repository (default $KILN_MANIFEST)\n"
    "      --store URL              the store the shards are in (default $KILN_STORE)\n"
    "  -p, --pipeline FILE          take the store (with its S3 options) and the\n"
    "                               manifest from a pipeline file\n"
    "  -v, --verbose                one JSON log line per object on stderr\n"
    "      --json                   the outcome as one JSON document on stdout\n"
    "                               (docs/JSON.md) instead of the summary\n"
    "  -h, --help                   show this help\n"
    "\n"
    "Exit status: 0 pushed (or planned, with --dry-run); 2 on a usage, config,\n"
    "version or store error (nothing the target shows as the version).\n";

static const char pull_usage[] =
    "usage: kiln pull TARGET --manifest DIR [--targets FILE] [--set KEY=VALUE]... [-v] [--json]\n"
    "\n"
    "Mirrors the manifest a push wrote to TARGET (a target of the targets file,\n"
    "or a store URL) into the bare repository DIR (created when missing), so\n"
    "kiln log, show, verify, cat and cache nodes read the pushed versions there\n"
    "with --store pointing at the target. A local tag that differs from the\n"
    "target's is never overwritten.\n"
    "\n"
    "Options:\n"
    "  -m, --manifest DIR       the local repository (default $KILN_MANIFEST)\n"
    "      --targets FILE       the targets file (default $KILN_TARGETS)\n"
    "  -s, --set KEY=VALUE      override a targets file value\n"
    "  -v, --verbose            one JSON log line per file fetched on stderr\n"
    "  -j, --json               the outcome as one JSON document on stdout\n"
    "  -h, --help               show this help\n"
    "\n"
    "Exit status: 0 pulled; 2 on a usage, config or store error.\n";

/* ---- reporting ----------------------------------------------------------------------- */

typedef struct reporter {
	kiln_cli_bar bar;
	char label[200];
	uint64_t total_objects, total_bytes;
	bool verbose;
} reporter;

static void on_object(void *ctx, const kiln_push_event *e)
{
	reporter *r = ctx;

	if (!r->verbose)
		return;
	kiln_cli_bar_clear(&r->bar);
	KILN_LOG(KILN_LOG_INFO, "push_object", NULL, KILN_F_STR("key", e->key), KILN_F_STR("kind", e->kind),
	         KILN_F_INT("bytes", e->bytes), KILN_F_STR("action", e->present ? "present" : "sent"),
	         KILN_F_INT("ms", (long long)(e->seconds * 1000)));
}

static void on_progress(void *ctx, const kiln_push_totals *t)
{
	reporter *r = ctx;

	kiln_cli_bar_draw(&r->bar, t->sent, t->objects, "objects", t->sent_bytes, t->bytes, r->label);
}

static void print_plan(const kiln_push_result *res, const kiln_push_target *t, const char *spec)
{
	const kiln_push_totals *x = &res->totals;
	char a[32], b[32], c[32], egress[32];
	double gb = (double)x->bytes / (double)(1u << 30);

	kiln_size_human(a, sizeof(a), x->shard_bytes_to_send, false);
	kiln_size_human(b, sizeof(b), x->present_bytes, false);
	kiln_size_human(c, sizeof(c), x->git_bytes_to_send, false);
	kiln_size_human(egress, sizeof(egress), x->bytes, false);
	printf("push %s (%s%s%s) to %s%s%s\n", spec, res->promoted ? "promoted" : "UNPROMOTED",
	       res->signer[0] ? ", signed by " : ", unsigned", res->signer, t->name,
	       strcmp(t->name, t->url) ? ": " : "", strcmp(t->name, t->url) ? t->url : "");
	printf("  shards    %" PRIu64 " to send (%s) of %" PRIu64 "\n", x->shards_to_send, a, x->shards);
	printf("  manifest  %" PRIu64 " git objects to send (%s) of %" PRIu64 "\n", x->git_objects_to_send, c,
	       x->git_objects);
	printf("  present   %" PRIu64 " objects already at the target (%s), not sent\n", x->present, b);
	if (t->price_per_gb > 0 && gb * t->price_per_gb >= 0.01)
		printf("  egress    %s, about %.2f%s%s at %.4g per GB\n", egress, gb * t->price_per_gb,
		       t->currency[0] ? " " : "", t->currency, t->price_per_gb);
	else if (t->price_per_gb > 0)
		printf("  egress    %s, under 0.01%s%s at %.4g per GB\n", egress, t->currency[0] ? " " : "",
		       t->currency, t->price_per_gb);
	else
		printf("  egress    %s (no price_per_gb for this target)\n", egress);
}

/* ---- push ------------------------------------------------------------------------------- */

/* What a push did, after its plan (the text form). */
static void print_outcome(const kiln_push_result *res, const kiln_push_target *t, bool dry_run, double s)
{
	char sent[32], rate[32];

	if (dry_run) {
		printf("dry run: nothing sent\n");
		return;
	}
	kiln_size_human(sent, sizeof(sent), res->totals.sent_bytes, false);
	kiln_size_human(rate, sizeof(rate), s > 0 ? (uint64_t)((double)res->totals.sent_bytes / s) : 0,
	                false);
	printf("sent %" PRIu64 " objects (%s) in %.1f s (%s/s); %s@%s is at %s as %s\n", res->totals.sent,
	       sent, s, rate, res->dataset, res->version, t->name, res->ref);
	if (res->replaced)
		printf("replaced %.12s at %s: superseded by erasure (refs/erasures/%s pushed with it)\n",
		       res->replaced_id, t->name, res->dataset);
	if (res->deletion_deferred)
		printf("superseded shards and objects kept at %s: a ref there still names a superseded "
		       "version or one this repository does not hold (push it too)\n",
		       t->name);
	else if (res->deleted_shards || res->deleted_objects)
		printf("deleted at %s: %" PRIu64 " superseded shards, %" PRIu64 " git objects\n", t->name,
		       res->deleted_shards, res->deleted_objects);
}

/* push --json: the outcome as one document (docs/JSON.md). */
static int push_json(const kiln_push_result *res, const kiln_push_target *t, bool dry_run, double seconds)
{
	const kiln_push_totals *x = &res->totals;
	kiln_buf b = KILN_BUF_INIT(0);
	int rc = kiln_buf_puts(&b, "{\"dataset\":") | kiln_cli_json_string(&b, res->dataset) |
	         kiln_buf_puts(&b, ",\"version\":") | kiln_cli_json_string(&b, res->version) |
	         kiln_buf_puts(&b, ",\"target\":") | kiln_cli_json_string(&b, t->name) |
	         kiln_buf_puts(&b, ",\"ref\":") | kiln_cli_json_string_or_null(&b, res->ref) |
	         kiln_buf_puts(&b, ",\"commit\":") | kiln_cli_json_string_or_null(&b, res->commit) |
	         kiln_buf_puts(&b, ",\"tag\":") | kiln_cli_json_string_or_null(&b, res->tag) |
	         kiln_buf_printf(&b, ",\"promoted\":%s,\"signer\":", res->promoted ? "true" : "false") |
	         kiln_cli_json_string_or_null(&b, res->signer) |
	         kiln_buf_printf(&b,
	                         ",\"dry_run\":%s,\"shards\":%" PRIu64 ",\"shards_to_send\":%" PRIu64
	                         ",\"git_objects\":%" PRIu64 ",\"git_objects_to_send\":%" PRIu64
	                         ",\"present\":%" PRIu64 ",\"sent\":%" PRIu64 ",\"sent_bytes\":%" PRIu64
	                         ",\"seconds\":%.3f,\"replaced\":",
	                         dry_run ? "true" : "false", x->shards, x->shards_to_send, x->git_objects,
	                         x->git_objects_to_send, x->present, x->sent, x->sent_bytes, seconds) |
	         kiln_cli_json_string_or_null(&b, res->replaced ? res->replaced_id : NULL) |
	         kiln_buf_printf(&b,
	                         ",\"deleted_shards\":%" PRIu64 ",\"deleted_objects\":%" PRIu64
	                         ",\"deletion_deferred\":%s}\n",
	                         res->deleted_shards, res->deleted_objects,
	                         res->deletion_deferred ? "true" : "false");

	rc = kiln_cli_write_buf("push", &b, rc);
	kiln_buf_free(&b);
	return rc;
}

int kiln_cmd_push(int argc, char **argv)
{
	const char *to = NULL, *targets = getenv("KILN_TARGETS"), *signers = NULL, *pipeline = NULL;
	kiln_cli_source src = {0};
	kiln_push_request req = {0};
	kiln_push_target *target = NULL;
	kiln_push_result res;
	kiln_cli_sets sets = {0};
	kiln_pipeline *lp = NULL; /* --pipeline: for its openlineage: section */
	kiln_openlineage *ol = NULL;
	reporter rep = {.bar = {.tty = isatty(2) == 1}};
	uint64_t jobs = 0;
	struct timespec t0, t1;
	double seconds;
	bool json = false;
	int first, status;
	const kiln_cli_option rows[] = {
	    {.name = "to", .letter = 't', .kind = KILN_CLI_STRING, .out = &to},
	    {.name = "targets", .kind = KILN_CLI_STRING, .out = &targets},
	    {.name = "dry-run", .letter = 'n', .kind = KILN_CLI_FLAG, .out = &req.dry_run},
	    {.name = "jobs",
	     .letter = 'j',
	     .kind = KILN_CLI_U64,
	     .out = &jobs,
	     .min = 1,
	     .max = 64,
	     .bad = "--jobs wants a number 1..64"},
	    {.name = "unpromoted", .kind = KILN_CLI_FLAG, .out = &req.allow_unpromoted},
	    {.name = "allowed-signers", .kind = KILN_CLI_STRING, .out = &signers},
	    {.name = "set", .letter = 's', .kind = KILN_CLI_SETS, .out = &sets},
	    {.name = "manifest", .letter = 'm', .kind = KILN_CLI_STRING, .out = &src.repo},
	    {.name = "store", .kind = KILN_CLI_STRING, .out = &src.store_url},
	    {.name = "pipeline", .letter = 'p', .kind = KILN_CLI_STRING, .out = &pipeline},
	    {.name = "verbose", .letter = 'v', .kind = KILN_CLI_FLAG, .out = &rep.verbose},
	    {.name = "json", .kind = KILN_CLI_FLAG, .out = &json},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "push",
	    .usage = push_usage,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one DATASET@REF (see kiln push --help)",
	};

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (!to || !*to) {
		kiln_cli_fail("push", "no target: give --to TARGET (see kiln push --help)");
		goto cleanup;
	}
	if (kiln_cli_source_resolve("push", &src, pipeline) != 0)
		goto cleanup;
	req.manifest = src.repo;
	req.source_url = src.store_url;
	req.source_options = src.store_options;
	if (kiln_push_target_load(&target, targets, to, sets.v, sets.n) < 0) {
		kiln_cli_fail("push", "%s", kiln_error_last());
		goto cleanup;
	}
	req.spec = argv[first];
	req.target = target;
	req.keys_file = signers;
	req.concurrency = (unsigned)jobs;
	req.on_object = on_object;
	req.on_progress = on_progress;
	req.ctx = &rep;
	snprintf(rep.label, sizeof(rep.label), "%s -> %s", req.spec, target->name);
	if (pipeline && !req.dry_run &&
	    (kiln_pipeline_load(&lp, pipeline, NULL, 0) < 0 ||
	     kiln_openlineage_open(&ol, lp, PACKAGE_VERSION) < 0)) {
		kiln_cli_fail("push", "%s", kiln_error_last());
		goto cleanup;
	}
	kiln_openlineage_begin(ol, "PUSH", false);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (kiln_push(&req, &res) < 0) {
		kiln_cli_bar_end(&rep.bar);
		kiln_cli_fail("push", "%s", kiln_error_last());
		kiln_openlineage_fail(ol, kiln_error_last());
		goto cleanup;
	}
	kiln_openlineage_pushed(ol, &res, target);
	kiln_cli_bar_end(&rep.bar);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (json) {
		if ((status = push_json(&res, target, req.dry_run, seconds)) != 0)
			goto cleanup;
		status = KILN_EXIT_USAGE;
	} else {
		print_plan(&res, target, req.spec);
		print_outcome(&res, target, req.dry_run, seconds);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("push", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_openlineage_close(ol);
	kiln_pipeline_free(lp);
	kiln_cli_source_free(&src);
	kiln_push_target_free(target);
	free(sets.v);
	return status;
}

/* ---- pull ------------------------------------------------------------------------------- */

static void on_file(void *ctx, const char *key, uint64_t bytes)
{
	if (!*(const bool *)ctx)
		return; /* not -v */
	KILN_LOG(KILN_LOG_INFO, "pull_object", NULL, KILN_F_STR("key", key), KILN_F_INT("bytes", bytes));
}

int kiln_cmd_pull(int argc, char **argv)
{
	const char *targets = getenv("KILN_TARGETS"), *dir = NULL;
	kiln_push_target *target = NULL;
	kiln_pull_result res;
	kiln_cli_sets sets = {0};
	char bytes[32];
	bool verbose = false, json = false;
	int first, status;
	const kiln_cli_option rows[] = {
	    {.name = "targets", .kind = KILN_CLI_STRING, .out = &targets},
	    {.name = "set", .letter = 's', .kind = KILN_CLI_SETS, .out = &sets},
	    {.name = "verbose", .letter = 'v', .kind = KILN_CLI_FLAG, .out = &verbose},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &json},
	    KILN_CLI_MANIFEST_ROW(&dir),
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "pull",
	    .usage = pull_usage,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one TARGET (see kiln pull --help)",
	};

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (kiln_cli_need_manifest("pull", dir) != 0)
		goto cleanup;
	if (kiln_push_target_load(&target, targets, argv[first], sets.v, sets.n) < 0 ||
	    kiln_pull(target, dir, on_file, &verbose, &res) < 0) {
		kiln_cli_fail("pull", "%s", kiln_error_last());
		goto cleanup;
	}
	if (json) {
		kiln_buf b = KILN_BUF_INIT(0);
		int rc = kiln_buf_puts(&b, "{\"target\":") | kiln_cli_json_string(&b, target->name) |
		         kiln_buf_puts(&b, ",\"manifest\":") | kiln_cli_json_string(&b, dir) |
		         kiln_buf_printf(&b,
		                         ",\"files\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"present\":%" PRIu64
		                         ",\"refs\":%" PRIu64 "}\n",
		                         res.files, res.bytes, res.present, res.refs);

		rc = kiln_cli_write_buf("pull", &b, rc);
		kiln_buf_free(&b);
		if (rc != 0)
			goto cleanup;
	} else {
		kiln_size_human(bytes, sizeof(bytes), res.bytes, false);
		printf("pulled %" PRIu64 " files (%s) from %s into %s; %" PRIu64 " already there; %" PRIu64
		       " refs\n",
		       res.files, bytes, target->name, dir, res.present, res.refs);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("pull", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_push_target_free(target);
	free(sets.v);
	return status;
}
