/* `kiln du DATASET`: the space each version of a dataset (each tag and each
 * branch tip) takes in the store, and how much of it no other version shares,
 * from the shard sizes the manifest records. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/units.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "core/error.h"
#include "manifest/gc.h"
#include "manifest/version.h"

static const char usage_text[] =
    "usage: kiln du DATASET [--manifest REPO] [--bytes]\n"
    "\n"
    "One row per version of DATASET (every tag vN, then every branch tip): its\n"
    "distinct shards, their records and compressed bytes, the bytes of shards no\n"
    "other listed version has (UNIQUE: what deleting only this version would\n"
    "free) and the bytes it shares with others (SHARED). The last row counts\n"
    "every distinct shard of all the listed versions once.\n"
    "\n"
    "Options:\n"
    "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
    "  -b, --bytes           exact byte counts instead of KiB/MiB/GiB\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on success, 2 on an unknown dataset or another error.\n";

static void size_text(char *out, size_t cap, uint64_t bytes, bool exact)
{
	if (exact)
		snprintf(out, cap, "%" PRIu64, bytes);
	else
		kiln_size_human(out, cap, bytes, true);
}

int kiln_cmd_du(int argc, char **argv)
{
	const char *repo, *dataset;
	bool exact = false;
	const kiln_cli_option rows[] = {
	    KILN_CLI_MANIFEST_ROW(&repo),
	    {.name = "bytes", .letter = 'b', .kind = KILN_CLI_FLAG, .out = &exact},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "du",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one DATASET (see kiln du --help)",
	};
	kiln_manifest *m = NULL;
	kiln_du_report r = {0};
	int first, width = (int)strlen("VERSION"), status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	dataset = argv[first];
	if (strchr(dataset, '@'))
		return kiln_cli_fail(
		    "du", "expected a dataset name, not a version ('%s'): du lists every version", dataset);
	if (kiln_cli_need_manifest("du", repo) != 0)
		return KILN_EXIT_USAGE;
	if (kiln_version_open(&m, repo) < 0 || kiln_gc_du(m, dataset, &r) < 0) {
		kiln_cli_fail("du", "%s", kiln_error_last());
		goto cleanup;
	}
	for (size_t i = 0; i < r.count; i++) {
		int w = (int)(strlen(dataset) + 1 + strlen(r.rows[i].name));

		if (w > width)
			width = w;
	}
	printf("%-*s  %-6s  %-12s  %8s  %12s  %12s  %12s  %12s\n", width, "VERSION", "TYPE", "COMMIT",
	       "SHARDS", "RECORDS", "BYTES", "UNIQUE", "SHARED");
	for (size_t i = 0; i < r.count; i++) {
		const kiln_du_row *row = &r.rows[i];
		char label[400], total[32], unique[32], shared[32];

		snprintf(label, sizeof(label), "%s@%s", dataset, row->name);
		size_text(total, sizeof(total), row->bytes, exact);
		size_text(unique, sizeof(unique), row->unique_bytes, exact);
		size_text(shared, sizeof(shared), row->bytes - row->unique_bytes, exact);
		printf("%-*s  %-6s  %-12.12s  %8" PRIu64 "  %12" PRIu64 "  %12s  %12s  %12s\n", width, label,
		       row->tag ? "tag" : "branch", row->commit, row->shards, row->records, total, unique,
		       shared);
	}
	{
		char total[32];

		size_text(total, sizeof(total), r.bytes, exact);
		printf("%-*s  %-6s  %-12s  %8" PRIu64 "  %12s  %12s  %12s  %12s\n", width, "all versions", "",
		       "", r.shards, "", total, "", "");
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("du", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_du_report_free(&r);
	kiln_manifest_close(m);
	return status;
}
