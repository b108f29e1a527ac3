/* `kiln log DATASET[@REF]`: a dataset's versions, newest first along the
 * first-parent line: short commit, UTC date, vN tags, summary. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/error.h"
#include "manifest/version.h"

static const char usage_text[] = "usage: kiln log DATASET[@REF] [--manifest REPO] [-n N]\n"
                                 "\n"
                                 "Lists the versions of a dataset, newest first, following the first parent\n"
                                 "from REF (default: main; a branch, a tag vN or a commit id). One line per\n"
                                 "version: the short commit id, the commit date (UTC), the vN tags on it\n"
                                 "(comma-separated, '-' when none) and the commit's summary.\n"
                                 "\n"
                                 "Options:\n"
                                 "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
                                 "  -n, --max-count N     show at most N versions\n"
                                 "  -h, --help            show this help\n"
                                 "\n"
                                 "Exit status: 0 on success, 2 on a bad reference, a missing repository or\n"
                                 "another error.\n";

typedef struct log_state {
	FILE *out;
} log_state;

static int print_line(void *ctx, const char *commit, int64_t t, const char *summary, const char *tags)
{
	log_state *s = ctx;
	time_t tt = (time_t)t;
	struct tm tm;
	char date[32] = "?";

	if (gmtime_r(&tt, &tm))
		strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	fprintf(s->out, "%.12s %s %s %s\n", commit, date, *tags ? tags : "-", summary);
	return 0;
}

static int parse_count(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!s || !*s || *s == '-')
		return -1;
	v = strtoull(s, &end, 10);
	if (errno || *end || v == 0 || v > SIZE_MAX)
		return -1;
	*out = (size_t)v;
	return 0;
}

int kiln_cmd_log(int argc, char **argv)
{
	static const struct option long_options[] = {
	    {"manifest", required_argument, NULL, 'm'},
	    {"max-count", required_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *repo = getenv("KILN_MANIFEST");
	kiln_manifest *m = NULL;
	kiln_version v;
	log_state st = {stdout};
	size_t max = 0;
	int opt, status = KILN_EXIT_USAGE;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "m:n:h", long_options, NULL)) != -1) {
		switch (opt) {
		case 'm':
			repo = optarg;
			break;
		case 'n':
			if (parse_count(optarg, &max) < 0)
				return kiln_cli_fail("log", "-n wants a positive number, not '%s'", optarg);
			break;
		case 'h':
			fputs(usage_text, stdout);
			return KILN_EXIT_OK;
		default:
			fputs(usage_text, stderr);
			return KILN_EXIT_USAGE;
		}
	}
	if (optind != argc - 1)
		return kiln_cli_fail("log", "expected one DATASET[@REF] (see kiln log --help)");
	if (!repo || !*repo)
		return kiln_cli_fail("log",
		                     "no manifest repository: give --manifest REPO or set KILN_MANIFEST");
	if (kiln_version_open(&m, repo) < 0 || kiln_version_resolve(m, argv[optind], &v) < 0 ||
	    kiln_version_log(m, &v, max, print_line, &st) < 0) {
		kiln_cli_fail("log", "%s", kiln_error_last());
		goto cleanup;
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("log", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_manifest_close(m);
	return status;
}
