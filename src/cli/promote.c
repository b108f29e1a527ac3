/* `kiln promote DATASET@REF --pipeline P`: checks the pipeline's release
 * gates against the version and, when they pass, creates the annotated tag
 * refs/tags/<dataset>/vN (signed with manifest.signing_key when set) whose
 * message carries the governance record: commit, source offsets, contract,
 * key id, split definition, counts and every gate's result. */
#include <getopt.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "ingest/gates.h"
#include "ingest/pipeline.h"
#include "manifest/format.h"
#include "manifest/internal.h"
#include "manifest/manifest.h"
#include "manifest/sshsig.h"
#include "manifest/version.h"

static const char usage_text[] =
    "usage: kiln promote DATASET@REF --pipeline PIPELINE [--version vN] [--set KEY=VALUE]... [--dry-run]\n"
    "\n"
    "Checks the release gates of the pipeline's `promote:` section (minimum\n"
    "records per split, split-ratio tolerance, quarantine-rate ceiling, contract\n"
    "version) against the version's stats.json and dataset.json, then creates\n"
    "the annotated tag refs/tags/<dataset>/vN with the governance record in its\n"
    "message, signed with manifest.signing_key when the pipeline sets one.\n"
    "\n"
    "Options:\n"
    "  -p, --pipeline FILE   the pipeline config (gates, manifest repo, signing key)\n"
    "  -V, --version vN      the version to create (default: one above the highest vN)\n"
    "  -s, --set KEY=VALUE   override a pipeline value (see kiln run --help)\n"
    "  -n, --dry-run         check the gates and print the message, create nothing\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 tagged (or, with --dry-run, gates passed), 1 a gate failed,\n"
    "2 on a usage, config, reference or manifest error.\n";

static bool version_name_ok(const char *s)
{
	if (s[0] != 'v' || s[1] < '1' || s[1] > '9')
		return false;
	for (s += 2; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* One above the highest refs/tags/<dataset>/vN. */
static int next_version(kiln_manifest *m, const char *dataset, char out[32])
{
	git_reference_iterator *it = NULL;
	char glob[200];
	const char *name;
	unsigned long max = 0;
	int gerr;

	snprintf(glob, sizeof(glob), "refs/tags/%s/v*", dataset);
	if ((gerr = git_reference_iterator_glob_new(&it, kiln_manifest_repo(m), glob)) < 0)
		return kiln_manifest_git_fail(m, gerr, glob);
	while (git_reference_next_name(&name, it) == 0) {
		const char *v = strrchr(name, '/') + 1;
		if (version_name_ok(v)) {
			unsigned long n = strtoul(v + 1, NULL, 10);
			if (n > max)
				max = n;
		}
	}
	git_reference_iterator_free(it);
	snprintf(out, 32, "v%lu", max + 1);
	return 0;
}

/* Records in the repository's config that its tag versions are signed
 * (kiln.signed = tags, docs/RELEASES.md), so `kiln verify` refuses an
 * unsigned one even without trusted keys. "all" (or "true") is kept. */
static int mark_signed(kiln_manifest *m)
{
	git_config *cfg = NULL, *snap = NULL;
	const char *value = NULL;
	int gerr;

	if ((gerr = git_repository_config(&cfg, kiln_manifest_repo(m))) < 0 ||
	    (gerr = git_config_snapshot(&snap, cfg)) < 0)
		goto cleanup;
	gerr = git_config_get_string(&value, snap, KILN_VERSION_SIGNED_KEY);
	if (gerr == 0 && (strcasecmp(value, "all") == 0 || strcasecmp(value, "true") == 0))
		goto cleanup;
	gerr = git_config_set_string(cfg, KILN_VERSION_SIGNED_KEY, "tags");
cleanup:
	git_config_free(snap);
	git_config_free(cfg);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, KILN_VERSION_SIGNED_KEY) : 0;
}

int kiln_cmd_promote(int argc, char **argv)
{
	static const struct option long_options[] = {
	    {"pipeline", required_argument, NULL, 'p'}, {"version", required_argument, NULL, 'V'},
	    {"set", required_argument, NULL, 's'},      {"dry-run", no_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
	};
	char **sets = calloc((size_t)argc + 1, sizeof(*sets));
	const char *pipeline_path = NULL, *version_name = NULL;
	size_t nsets = 0;
	bool dry_run = false, failed = false;
	kiln_pipeline *p = NULL;
	kiln_manifest *m = NULL;
	kiln_version v;
	kiln_stats stats;
	kiln_buf stats_text = KILN_BUF_INIT(0), dataset_json = KILN_BUF_INIT(0), lineage = KILN_BUF_INIT(0),
	         msg = KILN_BUF_INIT(0);
	kiln_gate_result results[KILN_GATES_MAX];
	const char *gate_lines[KILN_GATES_MAX];
	kiln_json_scanner *scanner = NULL;
	kiln_mfmt_dataset definition = {0};
	kiln_mfmt_lineage lineage_entries = {0};
	kiln_mfmt_governance record;
	char where[300];
	kiln_signing_key key;
	bool key_loaded = false;
	char name[32], tag_id[41];
	int opt, n, status = KILN_EXIT_USAGE;

	if (!sets)
		return kiln_cli_fail("promote", "out of memory");
	optind = 1;
	while ((opt = getopt_long(argc, argv, "p:V:s:nh", long_options, NULL)) != -1) {
		switch (opt) {
		case 'p':
			pipeline_path = optarg;
			break;
		case 'V':
			version_name = optarg;
			break;
		case 's':
			sets[nsets++] = optarg;
			break;
		case 'n':
			dry_run = true;
			break;
		case 'h':
			fputs(usage_text, stdout);
			free(sets);
			return KILN_EXIT_OK;
		default:
			fputs(usage_text, stderr);
			free(sets);
			return KILN_EXIT_USAGE;
		}
	}
	if (optind != argc - 1 || !pipeline_path) {
		free(sets);
		return kiln_cli_fail("promote",
		                     "expected DATASET@REF and --pipeline FILE (see kiln promote --help)");
	}
	if (version_name && !version_name_ok(version_name)) {
		kiln_cli_fail("promote", "--version must look like v1, v2, ...");
		goto cleanup;
	}
	if (kiln_pipeline_load(&p, pipeline_path, sets, nsets) < 0 ||
	    kiln_manifest_open(&m, p->manifest_repo) < 0 || kiln_version_resolve(m, argv[optind], &v) < 0) {
		kiln_cli_fail("promote", "%s", kiln_error_last());
		goto cleanup;
	}
	if (strcmp(v.dataset, p->dataset) != 0) {
		kiln_cli_fail("promote", "%s: the pipeline %s is for dataset %s", argv[optind], pipeline_path,
		              p->dataset);
		goto cleanup;
	}
	if (!(scanner = kiln_json_scanner_new(NULL))) {
		kiln_cli_fail("promote", "out of memory");
		goto cleanup;
	}
	snprintf(where, sizeof(where), "manifest: %s:dataset.json", argv[optind]);
	if (kiln_version_read(m, &v, "stats.json", &stats_text) != 1 ||
	    kiln_version_read(m, &v, "dataset.json", &dataset_json) != 1 ||
	    kiln_version_read(m, &v, "lineage.json", &lineage) < 0 ||
	    kiln_stats_parse(stats_text.ptr, stats_text.len, argv[optind], &stats) < 0 ||
	    kiln_mfmt_dataset_parse(scanner, where, dataset_json.ptr, dataset_json.len, &definition) < 0) {
		kiln_cli_fail("promote", "%s: %s", argv[optind],
		              *kiln_error_last() ? kiln_error_last()
		                                 : "stats.json or dataset.json is missing");
		goto cleanup;
	}
	snprintf(where, sizeof(where), "manifest: %s:lineage.json", argv[optind]);
	if (lineage.len &&
	    kiln_mfmt_lineage_parse(scanner, where, lineage.ptr, lineage.len, &lineage_entries) < 0) {
		kiln_cli_fail("promote", "%s: %s", argv[optind], kiln_error_last());
		goto cleanup;
	}
	if ((n = kiln_gates_check(&p->gates, &stats, &definition, results)) < 0) {
		kiln_cli_fail("promote", "%s: %s", argv[optind], kiln_error_last());
		goto cleanup;
	}
	for (int i = 0; i < n; i++) {
		printf("gate %s\n", results[i].line);
		failed |= !results[i].pass;
	}
	if (failed) {
		for (int i = 0; i < n; i++)
			if (!results[i].pass)
				fprintf(stderr, "kiln promote: %s: release gate failed: %s\n", argv[optind],
				        results[i].line);
		status = KILN_EXIT_INVALID;
		goto cleanup;
	}
	if (!version_name) {
		if (next_version(m, v.dataset, name) < 0) {
			kiln_cli_fail("promote", "%s", kiln_error_last());
			goto cleanup;
		}
		version_name = name;
	}

	/* the governance record */
	for (int i = 0; i < n; i++)
		gate_lines[i] = results[i].line;
	record = (kiln_mfmt_governance){
	    .dataset = v.dataset,
	    .version = version_name,
	    .commit = v.commit,
	    .from = v.ref[0] ? v.ref : v.commit,
	    .lineage = &lineage_entries,
	    .definition = &definition,
	    .stats = &stats,
	    .gates = gate_lines,
	    .gate_count = (size_t)n,
	};
	if (kiln_mfmt_governance_render(&msg, &record) < 0 || kiln_buf_putc(&msg, '\0') < 0) {
		kiln_cli_fail("promote", "out of memory");
		goto cleanup;
	}

	if (dry_run) {
		printf("%s@%s would be tagged %s:\n\n%s", v.dataset, v.ref[0] ? v.ref : v.commit,
		       version_name, msg.ptr);
		status = KILN_EXIT_OK;
		goto cleanup;
	}
	if (p->signing_key_file) {
		if (kiln_signing_key_load(&key, p->signing_key_file) < 0) {
			kiln_cli_fail("promote", "%s", kiln_error_last());
			goto cleanup;
		}
		key_loaded = true;
	}
	if (kiln_manifest_tag(m, v.dataset, version_name, v.commit, msg.ptr, key_loaded ? &key : NULL,
	                      tag_id) < 0) {
		kiln_cli_fail("promote", "%s", kiln_error_last());
		goto cleanup;
	}
	if (key_loaded && mark_signed(m) < 0) {
		kiln_cli_fail("promote", "%s@%s tagged, but recording %s=tags failed: %s", v.dataset,
		              version_name, KILN_VERSION_SIGNED_KEY, kiln_error_last());
		goto cleanup;
	}
	printf("%s@%s: tag refs/tags/%s/%s -> %.12s (%s)\n", v.dataset, version_name, v.dataset, version_name,
	       v.commit, key_loaded ? "signed" : "unsigned: set manifest.signing_key to sign");
	status = KILN_EXIT_OK;
cleanup:
	if (key_loaded)
		kiln_signing_key_wipe(&key);
	kiln_json_scanner_free(scanner);
	kiln_mfmt_dataset_free(&definition);
	kiln_mfmt_lineage_free(&lineage_entries);
	kiln_buf_free(&stats_text);
	kiln_buf_free(&dataset_json);
	kiln_buf_free(&lineage);
	kiln_buf_free(&msg);
	kiln_manifest_close(m);
	kiln_pipeline_free(p);
	free(sets);
	return status;
}
