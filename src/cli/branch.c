/* `kiln branch DATASET NAME [FROM]`: creates refs/heads/<dataset>/<name> at
 * the commit FROM resolves to (a branch, a tag vN or a commit of the same
 * dataset), so a `kiln run` with branch NAME continues from that version's
 * shards and lineage. Never moves an existing branch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/error.h"
#include "manifest/branch.h"
#include "manifest/version.h"

static const char usage_text[] =
    "usage: kiln branch DATASET NAME [FROM] [--manifest REPO]\n"
    "\n"
    "Creates the branch NAME of DATASET (refs/heads/DATASET/NAME) at the version\n"
    "FROM names: DATASET@main (the default), DATASET@BRANCH, DATASET@vN or\n"
    "DATASET@COMMIT (a bare BRANCH, vN or COMMIT means the same). A `kiln run`\n"
    "with `--set branch=NAME` then adds to that version: its shards, lineage and\n"
    "stats carry over. An existing branch is never moved. NAME matches\n"
    "[a-z0-9][a-z0-9._-]*.\n"
    "\n"
    "Options:\n"
    "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 when the branch was created, 2 on a bad name, an existing\n"
    "branch, an unknown FROM or another error.\n";

int kiln_cmd_branch(int argc, char **argv)
{
	const char *repo, *dataset, *name, *from;
	const kiln_cli_option rows[] = {KILN_CLI_MANIFEST_ROW(&repo), KILN_CLI_END};
	const kiln_cli_spec spec = {
	    .cmd = "branch",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 2,
	    .max_args = 3,
	    .args_error = "expected DATASET NAME [FROM] (see kiln branch --help)",
	};
	kiln_manifest *m = NULL;
	kiln_branch b;
	int first, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	dataset = argv[first];
	name = argv[first + 1];
	from = argc - first == 3 ? argv[first + 2] : "main";
	if (kiln_branch_prepare(&b, dataset, name, from) < 0)
		return kiln_cli_fail("branch", "%s", kiln_error_last());
	if (kiln_cli_need_manifest("branch", repo) != 0)
		return KILN_EXIT_USAGE;
	if (kiln_version_open(&m, repo) < 0 || kiln_branch_create(m, &b, dataset, name) < 0) {
		kiln_cli_fail("branch", "%s", kiln_error_last());
		goto cleanup;
	}
	printf("%s@%s: branched from %s (%.12s)\n", dataset, name, b.from, b.base.commit);
	printf("version: %s (%s in %s)\n", b.base.commit, b.ref, repo);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("branch", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_manifest_close(m);
	return status;
}
