/* `kiln run PIPELINE`: the curate path on a file or stdin source, ending in
 * one snapshot commit; prints the dataset version it made. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/error.h"
#include "ingest/curate_run.h"
#include "ingest/pipeline.h"

static const char usage_text[] =
	"usage: kiln run PIPELINE [--set dotted.key=value]...\n"
	"\n"
	"Reads the pipeline's source (a JSON Lines file, or stdin), validates each\n"
	"record against the contract, pseudonymises personal data, assigns\n"
	"train/dev/test, packs zstd shards into the store, puts rejected records in\n"
	"quarantine, and commits one snapshot to refs/heads/<dataset>/<branch> of\n"
	"the manifest repository. A file source resumes after the records earlier\n"
	"runs read. Every key is described in docs/PIPELINES.md.\n"
	"\n"
	"Options:\n"
	"  -s, --set KEY=VALUE   override a config value, e.g. --set split.salt=v2\n"
	"                        (after ${NAME} / ${NAME:-default} expansion)\n"
	"  -h, --help            show this help\n"
	"\n"
	"Exit status: 0 on a commit (or nothing new to read), 2 on a config, key,\n"
	"store or manifest error.\n";

int kiln_cmd_run(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "set", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char **sets = calloc((size_t)argc + 1, sizeof(*sets));
	size_t nsets = 0;
	kiln_pipeline *pipeline = NULL;
	kiln_run_result r;
	int opt, status = KILN_EXIT_USAGE;

	if (!sets)
		return kiln_cli_fail("run", "out of memory");
	optind = 1;
	while ((opt = getopt_long(argc, argv, "s:h", long_options, NULL)) != -1) {
		switch (opt) {
		case 's':
			sets[nsets++] = optarg;
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
	if (optind != argc - 1) {
		free(sets);
		return kiln_cli_fail("run", "expected one pipeline file (see kiln run --help)");
	}
	if (kiln_pipeline_load(&pipeline, argv[optind], sets, nsets) < 0) {
		kiln_cli_fail("run", "%s", kiln_error_last());
		goto cleanup;
	}
	if (kiln_curate_run(pipeline, &r) < 0) {
		kiln_cli_fail("run", "%s", kiln_error_last());
		goto cleanup;
	}
	if (!r.commit[0]) {
		printf("%s@%s: nothing new in %s (already read up to offset %llu)\n", pipeline->dataset,
		       pipeline->branch, pipeline->source_name, (unsigned long long)r.next_offset);
	} else {
		printf("%s@%.12s: +%llu records (%llu valid, %llu quarantined) in %zu shards",
		       pipeline->dataset, r.commit, (unsigned long long)r.delta.records_in,
		       (unsigned long long)r.delta.valid, (unsigned long long)r.delta.quarantined, r.shards);
		printf(" [train %llu, dev %llu, test %llu], offsets %llu-%llu of %s\n",
		       (unsigned long long)r.delta.splits[KILN_SPLIT_TRAIN].records,
		       (unsigned long long)r.delta.splits[KILN_SPLIT_DEV].records,
		       (unsigned long long)r.delta.splits[KILN_SPLIT_TEST].records,
		       (unsigned long long)r.first_offset, (unsigned long long)r.next_offset - 1,
		       pipeline->source_name);
		char *repo = realpath(pipeline->manifest_repo, NULL); /* "pipelines/../x" reads better resolved */
		printf("version: %s (refs/heads/%s/%s in %s)\n", r.commit, pipeline->dataset, pipeline->branch,
		       repo ? repo : pipeline->manifest_repo);
		free(repo);
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_pipeline_free(pipeline);
	free(sets);
	return status;
}
