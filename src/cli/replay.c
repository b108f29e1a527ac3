/* `kiln replay PIPELINE --from BRANCH`: rebuilds a Kafka pipeline's curated
 * shards from the raw zone onto a new branch (the pipeline's `branch`),
 * without reading Kafka: after a contract fix or a key rotation. Prints the
 * version it made; records missing from the raw zone stop it (exit 1)
 * unless --allow-missing. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/error.h"
#include "ingest/pipeline.h"
#include "ingest/replay_run.h"

static const char usage_text[] =
    "usage: kiln replay PIPELINE --from BRANCH [--set dotted.key=value]... [--allow-missing]\n"
    "\n"
    "Rebuilds the curated shards of a Kafka pipeline's dataset from the raw zone,\n"
    "without reading Kafka, onto a new branch: the pipeline's `branch`, so write\n"
    "e.g. --set branch=fixed-v2. Every offset that lineage.json of BRANCH covers\n"
    "for the pipeline's topics is read back from raw/<topic>/<partition>/ once\n"
    "and validated, pseudonymised and split with the pipeline as it is now (a\n"
    "fixed contract, pseudonymise.key_file and key_version of a rotated key, a\n"
    "new split salt). One snapshot commit creates the branch; its lineage.json\n"
    "holds BRANCH's offsets, so a `kiln run` with the same branch goes on where\n"
    "BRANCH stopped. The raw zone is read, never rewritten. See docs/REPLAY.md.\n"
    "\n"
    "Before anything is written, each partition's raw objects are checked against\n"
    "lineage.json: offsets below its next that no object holds (other than those a\n"
    "gap policy skipped) are reported on stderr, one line per partition, and\n"
    "nothing is committed unless --allow-missing is given.\n"
    "\n"
    "Options:\n"
    "  -f, --from BRANCH     the branch of the dataset to replay (required)\n"
    "  -s, --set KEY=VALUE   override a config value, e.g. --set branch=rotated\n"
    "                        --set pseudonymise.key_file=/etc/kiln/key2\n"
    "                        --set pseudonymise.key_version=2\n"
    "      --allow-missing   commit even when records are missing from the raw\n"
    "                        zone (the summary says how many)\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on a commit, 1 when records are missing from the raw zone\n"
    "(nothing committed), 2 when the target branch exists or is BRANCH, BRANCH\n"
    "does not exist, the source is not kafka, or on a config, key, store or\n"
    "manifest error.\n";

static void on_warn(void *ctx, const char *line)
{
	(void)ctx;
	fprintf(stderr, "kiln replay: warning: %s\n", line);
}

int kiln_cmd_replay(int argc, char **argv)
{
	kiln_cli_sets sets = {0};
	kiln_replay_options o = {.warn = on_warn};
	const kiln_cli_option rows[] = {
	    {.name = "from", .letter = 'f', .kind = KILN_CLI_STRING, .out = &o.from},
	    {.name = "set", .letter = 's', .kind = KILN_CLI_SETS, .out = &sets},
	    {.name = "allow-missing", .kind = KILN_CLI_FLAG, .out = &o.allow_missing},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "replay",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one pipeline file (see kiln replay --help)",
	};
	kiln_pipeline *pipeline = NULL;
	kiln_replay_result r;
	int first, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (!o.from) {
		kiln_cli_fail("replay", "--from BRANCH is required: the branch to replay");
		goto cleanup;
	}
	if (kiln_pipeline_load(&pipeline, argv[first], sets.v, sets.n) < 0) {
		kiln_cli_fail("replay", "%s", kiln_error_last());
		goto cleanup;
	}
	if (kiln_replay_run(pipeline, &o, &r) < 0) {
		kiln_cli_fail("replay", "%s", kiln_error_last());
		goto cleanup;
	}
	if (!r.run.commit[0]) {
		fprintf(stderr,
		        "kiln replay: %llu records of %s@%s are missing from the raw zone; nothing committed "
		        "(--allow-missing commits without them)\n",
		        (unsigned long long)r.missing, pipeline->dataset, o.from);
		status = KILN_EXIT_INVALID;
		goto cleanup;
	}
	printf("%s@%.12s: +%llu records (%llu valid, %llu quarantined) in %zu shards, replayed from %s",
	       pipeline->dataset, r.run.commit, (unsigned long long)r.run.delta.records_in,
	       (unsigned long long)r.run.delta.valid, (unsigned long long)r.run.delta.quarantined,
	       r.run.shards, o.from);
	if (r.missing)
		printf(" (%llu records missing from the raw zone)", (unsigned long long)r.missing);
	putchar('\n');
	char *repo = realpath(pipeline->manifest_repo, NULL);
	printf("version: %s (refs/heads/%s/%s in %s)\n", r.run.commit, pipeline->dataset, pipeline->branch,
	       repo ? repo : pipeline->manifest_repo);
	free(repo);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("replay", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_pipeline_free(pipeline);
	free(sets.v);
	return status;
}
