/* `kiln log DATASET[@REF]`: a dataset's versions, newest first along the
 * first-parent line: short commit, UTC date, vN tags, summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "core/buf.h"
#include "core/error.h"
#include "manifest/version.h"

static const char usage_text[] = "usage: kiln log DATASET[@REF] [--manifest REPO] [-n N] [--json]\n"
                                 "\n"
                                 "Lists the versions of a dataset, newest first, following the first parent\n"
                                 "from REF (default: main; a branch, a tag vN or a commit id). One line per\n"
                                 "version: the short commit id, the commit date (UTC), the vN tags on it\n"
                                 "(comma-separated, '-' when none) and the commit's summary.\n"
                                 "With --json, JSON Lines instead: one object per version, newest first:\n"
                                 "  {\"dataset\":S,\"commit\":HEX40,\"time\":RFC3339,\"time_unix\":N,\n"
                                 "   \"tags\":[\"v1\",...],\"summary\":S}\n"
                                 "(docs/JSON.md).\n"
                                 "\n"
                                 "Options:\n"
                                 "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
                                 "  -n, --max-count N     show at most N versions\n"
                                 "  -j, --json            JSON Lines, one object per version (docs/JSON.md)\n"
                                 "  -h, --help            show this help\n"
                                 "\n"
                                 "Exit status: 0 on success, 2 on a bad reference, a missing repository or\n"
                                 "another error.\n";

typedef struct log_state {
	FILE *out;
	const char *dataset;
	bool json;
	kiln_buf line;
} log_state;

/* One version as a JSON line. */
static int print_json(log_state *s, const char *commit, int64_t t, const char *summary, const char *tags)
{
	int rc = 0;

	rc |= kiln_buf_puts(&s->line, "{\"dataset\":");
	rc |= kiln_cli_json_string(&s->line, s->dataset);
	rc |= kiln_buf_printf(&s->line, ",\"commit\":\"%s\",", commit);
	rc |= kiln_cli_json_time(&s->line, "time", t);
	rc |= kiln_buf_puts(&s->line, ",\"tags\":[");
	for (const char *p = tags; *p;) {
		size_t n = strcspn(p, ",");

		rc |= kiln_buf_puts(&s->line, p == tags ? "" : ",");
		rc |= kiln_buf_put_json_string(&s->line, p, n);
		p += n + (p[n] == ',');
	}
	rc |= kiln_buf_puts(&s->line, "],\"summary\":");
	rc |= kiln_cli_json_string(&s->line, summary);
	rc |= kiln_buf_puts(&s->line, "}\n");
	return kiln_cli_put_buf(&s->line, rc);
}

static int print_line(void *ctx, const char *commit, int64_t t, const char *summary, const char *tags)
{
	log_state *s = ctx;
	time_t tt = (time_t)t;
	struct tm tm;
	char date[32] = "?";

	if (s->json)
		return print_json(s, commit, t, summary, tags);
	if (gmtime_r(&tt, &tm))
		strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	fprintf(s->out, "%.12s %s %s %s\n", commit, date, *tags ? tags : "-", summary);
	return 0;
}

int kiln_cmd_log(int argc, char **argv)
{
	const char *repo;
	size_t max = 0;
	log_state st = {.out = stdout, .line = KILN_BUF_INIT(0)};
	const kiln_cli_option rows[] = {
	    KILN_CLI_MANIFEST_ROW(&repo),
	    {.name = "max-count",
	     .letter = 'n',
	     .kind = KILN_CLI_COUNT,
	     .out = &max,
	     .bad = "-n wants a positive number"},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &st.json},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "log",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one DATASET[@REF] (see kiln log --help)",
	};
	kiln_manifest *m = NULL;
	kiln_version v;
	int first, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	if (kiln_cli_need_manifest("log", repo) != 0)
		return KILN_EXIT_USAGE;
	status = KILN_EXIT_USAGE;
	if (kiln_version_open(&m, repo) < 0 || kiln_version_resolve(m, argv[first], &v) < 0)
		goto fail;
	st.dataset = v.dataset;
	if (kiln_version_log(m, &v, max, print_line, &st) < 0)
		goto fail;
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("log", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
	goto cleanup;
fail:
	kiln_cli_fail("log", "%s", kiln_error_last());
cleanup:
	kiln_buf_free(&st.line);
	kiln_manifest_close(m);
	return status;
}
