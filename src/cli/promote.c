/* `kiln promote DATASET@REF --pipeline P`: checks the pipeline's release
 * gates against the version and, when they pass, creates the annotated tag
 * refs/tags/<dataset>/vN (signed with manifest.signing_key when set) whose
 * message carries the governance record: commit, source offsets, contract,
 * key id, split definition, counts and every gate's result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "config.h"
#include "core/buf.h"
#include "core/error.h"
#include "ingest/gates.h"
#include "ingest/gates_run.h"
#include "ingest/pipeline.h"
#include "manifest/format.h"
#include "manifest/manifest.h"
#include "manifest/promote.h"
#include "manifest/sshsig.h"
#include "manifest/version.h"
#include "openlineage/openlineage.h"

static const char usage_text[] =
    "usage: kiln promote DATASET@REF --pipeline PIPELINE [--version vN] [--set KEY=VALUE]... [--dry-run]\n"
    "                    [--json]\n"
    "\n"
    "Checks the release gates of the pipeline's `promote:` section (minimum\n"
    "records per split, split-ratio tolerance, quarantine-rate ceiling, contract\n"
    "version, drift of the data profile against a promoted baseline) against\n"
    "the version's stats.json, dataset.json and profile.json, then creates\n"
    "the annotated tag refs/tags/<dataset>/vN with the governance record in its\n"
    "message, signed with manifest.signing_key when the pipeline sets one.\n"
    "\n"
    "Options:\n"
    "  -p, --pipeline FILE   the pipeline config (gates, manifest repo, signing key)\n"
    "  -V, --version vN      the version to create (default: one above the highest vN)\n"
    "  -s, --set KEY=VALUE   override a pipeline value (see kiln run --help)\n"
    "  -n, --dry-run         check the gates and print the message, create nothing\n"
    "  -j, --json            the outcome as one JSON document on stdout: the gates,\n"
    "                        the tag (docs/JSON.md); the exit status is the same\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 tagged (or, with --dry-run, gates passed), 1 a gate failed,\n"
    "2 on a usage, config, reference or manifest error.\n";

typedef struct promote_opts {
	const char *pipeline_path, *version_name, *spec;
	kiln_cli_sets sets;
	bool dry_run, json;
	kiln_openlineage *ol; /* the pipeline's OpenLineage events (NULL: none, or a dry run) */
} promote_opts;

/* -1 to go on, else the exit status. */
static int parse_options(promote_opts *o, int argc, char **argv)
{
	const kiln_cli_option rows[] = {
	    {.name = "pipeline", .letter = 'p', .kind = KILN_CLI_STRING, .out = &o->pipeline_path},
	    {.name = "version", .letter = 'V', .kind = KILN_CLI_STRING, .out = &o->version_name},
	    {.name = "set", .letter = 's', .kind = KILN_CLI_SETS, .out = &o->sets},
	    {.name = "dry-run", .letter = 'n', .kind = KILN_CLI_FLAG, .out = &o->dry_run},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &o->json},
	    KILN_CLI_END,
	};
	const char *expected = "expected DATASET@REF and --pipeline FILE (see kiln promote --help)";
	const kiln_cli_spec spec = {
	    .cmd = "promote",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = expected,
	};
	int first, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	if (!o->pipeline_path)
		return kiln_cli_fail("promote", "%s", expected);
	o->spec = argv[first];
	return KILN_CLI_GO_ON;
}

/* Runs every gate (ingest/gates_run.h) and prints each line (not with
 * --json); the number of gates when all pass, -1 (with the failed ones
 * named on stderr, *status set) otherwise; *out_n: the gates judged (also
 * when one failed). *results is the caller's to free. */
static int check_gates(const promote_opts *o, const kiln_pipeline *p, kiln_manifest *m, const kiln_version *v,
                       const kiln_promote_inputs *in, kiln_gate_result **results, int *out_n, int *status)
{
	const char *spec = o->spec;
	bool failed = false;
	size_t n;

	if (kiln_gates_run(results, &n, p, m, v, in, spec) < 0) {
		*status = kiln_cli_fail("promote", "%s", kiln_error_last());
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (!o->json)
			printf("gate %s\n", (*results)[i].line);
		failed |= !(*results)[i].pass;
	}
	*out_n = (int)n;
	if (failed) {
		for (size_t i = 0; i < n; i++)
			if (!(*results)[i].pass)
				fprintf(stderr, "kiln promote: %s: release gate failed: %s\n", spec,
				        (*results)[i].line);
		*status = KILN_EXIT_INVALID;
		return -1;
	}
	return (int)n;
}

/* --json: the outcome as one document (docs/JSON.md); tag_id NULL: none
 * made (a dry run, a gate failed). */
static int print_json(const promote_opts *o, const kiln_version *v, const char *version_name,
                      const kiln_gate_result *results, int n, const char *tag_id, bool signed_tag, int status)
{
	kiln_buf b = KILN_BUF_INIT(0);
	bool passed = true;
	int rc;

	for (int i = 0; i < n; i++)
		passed &= results[i].pass;
	rc = kiln_buf_puts(&b, "{\"dataset\":") | kiln_cli_json_string(&b, v->dataset) |
	     kiln_buf_puts(&b, ",\"version\":") | kiln_cli_json_string_or_null(&b, version_name) |
	     kiln_buf_puts(&b, ",\"commit\":") | kiln_cli_json_string(&b, v->commit) |
	     kiln_buf_puts(&b, ",\"from\":") | kiln_cli_json_string(&b, v->ref[0] ? v->ref : v->commit) |
	     kiln_buf_printf(&b, ",\"dry_run\":%s,\"passed\":%s,\"tag\":", o->dry_run ? "true" : "false",
	                     passed ? "true" : "false") |
	     kiln_cli_json_string_or_null(&b, tag_id) |
	     kiln_buf_printf(&b, ",\"signed\":%s,\"gates\":[", signed_tag ? "true" : "false");
	for (int i = 0; i < n; i++)
		rc |= kiln_buf_puts(&b, i ? ",{\"line\":" : "{\"line\":") |
		      kiln_cli_json_string(&b, results[i].line) |
		      kiln_buf_printf(&b, ",\"pass\":%s,\"not_run\":%s}", results[i].pass ? "true" : "false",
		                      results[i].not_run ? "true" : "false");
	rc |= kiln_buf_puts(&b, "]}\n");
	rc = kiln_cli_write_buf("promote", &b, rc);
	kiln_buf_free(&b);
	return rc ? rc : status;
}

/* Creates the tag (signed when the pipeline names a key) and prints it;
 * with --json, tag_id and *out_signed say what was made. */
static int tag_version(const promote_opts *o, kiln_manifest *m, const kiln_pipeline *p, const kiln_version *v,
                       const char *version_name, const char *msg, char tag_id[41], bool *out_signed)
{
	kiln_signing_key key;
	bool key_loaded = false;
	int status = KILN_EXIT_USAGE;

	if (p->signing_key_file) {
		if (kiln_signing_key_load(&key, p->signing_key_file) < 0)
			return kiln_cli_fail("promote", "%s", kiln_error_last());
		key_loaded = true;
	}
	if (kiln_manifest_tag(m, v->dataset, version_name, v->commit, msg, key_loaded ? &key : NULL, tag_id) <
	    0) {
		kiln_cli_fail("promote", "%s", kiln_error_last());
		goto cleanup;
	}
	if (key_loaded && kiln_promote_mark_signed(m) < 0) {
		kiln_cli_fail("promote", "%s@%s tagged, but recording %s=tags failed: %s", v->dataset,
		              version_name, KILN_VERSION_SIGNED_KEY, kiln_error_last());
		goto cleanup;
	}
	*out_signed = key_loaded;
	if (!o->json)
		printf("%s@%s: tag refs/tags/%s/%s -> %.12s (%s)\n", v->dataset, version_name, v->dataset,
		       version_name, v->commit,
		       key_loaded ? "signed" : "unsigned: set manifest.signing_key to sign");
	status = KILN_EXIT_OK;
cleanup:
	if (key_loaded)
		kiln_signing_key_wipe(&key);
	return status;
}

/* Gates, the governance record, then the tag (or, dry, the record). */
static int promote(const promote_opts *o, const kiln_pipeline *p, kiln_manifest *m, const kiln_version *v)
{
	kiln_promote_inputs in;
	kiln_gate_result *results = NULL;
	const char **gate_lines = NULL;
	kiln_buf msg = KILN_BUF_INIT(0);
	kiln_mfmt_governance record;
	const char *version_name = o->version_name;
	char name[32], tag_id[41] = "";
	bool signed_tag = false;
	int n = 0, judged = 0, status = KILN_EXIT_USAGE;

	if (kiln_promote_inputs_read(&in, m, v, o->spec) < 0) {
		kiln_cli_fail("promote", "%s: %s", o->spec, kiln_error_last());
		goto cleanup;
	}
	if ((n = check_gates(o, p, m, v, &in, &results, &judged, &status)) < 0) {
		if (o->json && status == KILN_EXIT_INVALID)
			status = print_json(o, v, version_name, results, judged, NULL, false, status);
		goto cleanup;
	}
	if (!(gate_lines = calloc((size_t)n + 1, sizeof(*gate_lines)))) {
		kiln_cli_fail("promote", "out of memory");
		goto cleanup;
	}
	if (!version_name) {
		if (kiln_promote_next_version(name, m, v->dataset) < 0) {
			kiln_cli_fail("promote", "%s", kiln_error_last());
			goto cleanup;
		}
		version_name = name;
	}
	for (int i = 0; i < n; i++)
		gate_lines[i] = results[i].line;
	record = (kiln_mfmt_governance){
	    .dataset = v->dataset,
	    .version = version_name,
	    .commit = v->commit,
	    .from = v->ref[0] ? v->ref : v->commit,
	    .lineage = &in.lineage,
	    .definition = &in.definition,
	    .stats = &in.stats,
	    .gates = gate_lines,
	    .gate_count = (size_t)n,
	};
	if (kiln_mfmt_governance_render(&msg, &record) < 0 || kiln_buf_putc(&msg, '\0') < 0) {
		kiln_cli_fail("promote", "out of memory");
		goto cleanup;
	}
	if (o->dry_run) {
		if (o->json)
			status = print_json(o, v, version_name, results, n, NULL, false, KILN_EXIT_OK);
		else {
			printf("%s@%s would be tagged %s:\n\n%s", v->dataset, v->ref[0] ? v->ref : v->commit,
			       version_name, msg.ptr);
			status = KILN_EXIT_OK;
		}
		goto cleanup;
	}
	status = tag_version(o, m, p, v, version_name, msg.ptr, tag_id, &signed_tag);
	if (status == KILN_EXIT_OK)
		kiln_openlineage_promoted(o->ol, v, version_name, tag_id, &in, results, (size_t)n);
	if (status == KILN_EXIT_OK && o->json)
		status = print_json(o, v, version_name, results, n, tag_id, signed_tag, status);
cleanup:
	kiln_promote_inputs_free(&in);
	free(results);
	free(gate_lines);
	kiln_buf_free(&msg);
	return status;
}

int kiln_cmd_promote(int argc, char **argv)
{
	promote_opts o = {0};
	kiln_pipeline *p = NULL;
	kiln_manifest *m = NULL;
	kiln_version v;
	int status;

	if ((status = parse_options(&o, argc, argv)) != KILN_CLI_GO_ON)
		goto cleanup;
	status = KILN_EXIT_USAGE;
	if (o.version_name && !kiln_promote_version_name_ok(o.version_name)) {
		kiln_cli_fail("promote", "--version must look like v1, v2, ...");
		goto cleanup;
	}
	if (kiln_pipeline_load(&p, o.pipeline_path, o.sets.v, o.sets.n) < 0 ||
	    kiln_manifest_open(&m, p->manifest_repo) < 0 || kiln_version_resolve(m, o.spec, &v) < 0) {
		kiln_cli_fail("promote", "%s", kiln_error_last());
		goto cleanup;
	}
	if (strcmp(v.dataset, p->dataset) != 0) {
		kiln_cli_fail("promote", "%s: the pipeline %s is for dataset %s", o.spec, o.pipeline_path,
		              p->dataset);
		goto cleanup;
	}
	if (!o.dry_run && kiln_openlineage_open(&o.ol, p, PACKAGE_VERSION) < 0) {
		kiln_cli_fail("promote", "%s", kiln_error_last());
		goto cleanup;
	}
	kiln_openlineage_begin(o.ol, "PROMOTE", false);
	status = promote(&o, p, m, &v);
	if (status != KILN_EXIT_OK) /* the gates that failed, or the error, are on stderr */
		kiln_openlineage_fail(o.ol, status == KILN_EXIT_INVALID ? "a release gate failed"
		                                                        : kiln_error_last());
cleanup:
	kiln_openlineage_close(o.ol);
	kiln_manifest_close(m);
	kiln_pipeline_free(p);
	free(o.sets.v);
	return status;
}
