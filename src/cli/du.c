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
#include "cli/json_out.h"
#include "core/error.h"
#include "manifest/gc.h"
#include "manifest/version.h"

static const char usage_text[] =
    "usage: kiln du DATASET [--manifest REPO] [--bytes] [--json]\n"
    "\n"
    "One row per version of DATASET (every tag vN, then every branch tip): its\n"
    "distinct shards, their records and compressed bytes, the bytes of shards no\n"
    "other listed version has (UNIQUE: what deleting only this version would\n"
    "free) and the bytes it shares with others (SHARED). The last row counts\n"
    "every distinct shard of all the listed versions once.\n"
    "With --json, one JSON document, every size in bytes (docs/JSON.md):\n"
    "  {\"dataset\":S,\"versions\":[{\"name\",\"type\",\"ref\",\"commit\",\"shards\",\n"
    "   \"records\",\"bytes\",\"unique_shards\",\"unique_bytes\",\"shared_bytes\"}...],\n"
    "   \"total\":{\"shards\",\"bytes\"}}\n"
    "\n"
    "Options:\n"
    "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
    "  -b, --bytes           exact byte counts instead of KiB/MiB/GiB\n"
    "  -j, --json            one JSON document (docs/JSON.md)\n"
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

/* The report as a table. */
static void print_text(const char *dataset, const kiln_du_report *r, bool exact)
{
	int width = (int)strlen("VERSION");

	for (size_t i = 0; i < r->count; i++) {
		int w = (int)(strlen(dataset) + 1 + strlen(r->rows[i].name));

		if (w > width)
			width = w;
	}
	printf("%-*s  %-6s  %-12s  %8s  %12s  %12s  %12s  %12s\n", width, "VERSION", "TYPE", "COMMIT",
	       "SHARDS", "RECORDS", "BYTES", "UNIQUE", "SHARED");
	for (size_t i = 0; i < r->count; i++) {
		const kiln_du_row *row = &r->rows[i];
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

		size_text(total, sizeof(total), r->bytes, exact);
		printf("%-*s  %-6s  %-12s  %8" PRIu64 "  %12s  %12s  %12s  %12s\n", width, "all versions", "",
		       "", r->shards, "", total, "", "");
	}
}

/* The report as one JSON document. */
static int print_json(const char *dataset, const kiln_du_report *r)
{
	kiln_buf b = KILN_BUF_INIT(0);
	int rc = kiln_buf_puts(&b, "{\"dataset\":");

	rc |= kiln_cli_json_string(&b, dataset);
	rc |= kiln_buf_puts(&b, ",\"versions\":[");
	for (size_t i = 0; i < r->count; i++) {
		const kiln_du_row *row = &r->rows[i];

		rc |= kiln_buf_puts(&b, i ? ",\n{\"name\":" : "\n{\"name\":");
		rc |= kiln_cli_json_string(&b, row->name);
		rc |= kiln_buf_printf(&b, ",\"type\":\"%s\",\"ref\":\"refs/%s/", row->tag ? "tag" : "branch",
		                      row->tag ? "tags" : "heads");
		rc |= kiln_buf_put_json_chars(&b, dataset, strlen(dataset));
		rc |= kiln_buf_putc(&b, '/');
		rc |= kiln_buf_put_json_chars(&b, row->name, strlen(row->name));
		rc |= kiln_buf_printf(&b,
		                      "\",\"commit\":\"%s\",\"shards\":%" PRIu64 ",\"records\":%" PRIu64
		                      ",\"bytes\":%" PRIu64 ",\"unique_shards\":%" PRIu64
		                      ",\"unique_bytes\":%" PRIu64 ",\"shared_bytes\":%" PRIu64 "}",
		                      row->commit, row->shards, row->records, row->bytes, row->unique_shards,
		                      row->unique_bytes, row->bytes - row->unique_bytes);
	}
	rc |= kiln_buf_printf(&b, "%s],\"total\":{\"shards\":%" PRIu64 ",\"bytes\":%" PRIu64 "}}\n",
	                      r->count ? "\n" : "", r->shards, r->bytes);
	rc = kiln_cli_write_buf("du", &b, rc);
	kiln_buf_free(&b);
	return rc;
}

int kiln_cmd_du(int argc, char **argv)
{
	const char *repo, *dataset;
	bool exact = false, json = false;
	const kiln_cli_option rows[] = {
	    KILN_CLI_MANIFEST_ROW(&repo),
	    {.name = "bytes", .letter = 'b', .kind = KILN_CLI_FLAG, .out = &exact},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &json},
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
	int first, status;

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
	if (json) {
		if (print_json(dataset, &r) != 0)
			goto cleanup;
	} else {
		print_text(dataset, &r, exact);
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
