/* `kiln profile DATASET@REF`: the data profile a version carries
 * (profile.json, docs/QUALITY.md): per field of the curated records, counts,
 * types, distinct values and the figures of its values, for the whole
 * version or (--added) for what its commit added. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/buf.h"
#include "core/error.h"
#include "manifest/version.h"
#include "quality/profile.h"

static const char usage_text[] =
    "usage: kiln profile DATASET@REF [--manifest REPO] [--added] [--json]\n"
    "\n"
    "Prints the data profile of a version (its profile.json): for each field of\n"
    "the curated records, values present, missing and null, their JSON types,\n"
    "an estimate of distinct values, and for fields that are not personal data\n"
    "number quantiles, mean and range, string lengths, times (dates and\n"
    "timestamps: from, median, to) and category counts (enums, booleans, and\n"
    "strings with at most profile.categories.k values).\n"
    "Pseudonymised and pii fields show counts and distinct tokens only.\n"
    "\n"
    "Options:\n"
    "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
    "  -a, --added           what the version's commit added, not the whole version\n"
    "  -j, --json            one JSON document (docs/QUALITY.md)\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on success, 2 on a bad reference, a version without a\n"
    "profile (made before profiles, or with profile.enabled: false) or another\n"
    "error.\n";

static void print_number(const kiln_profile_field *f)
{
	printf("  min %.6g  p05 %.6g  p50 %.6g  mean %.6g  p95 %.6g  max %.6g", f->num.min,
	       kiln_profile_quantile(f, 0.05), kiln_profile_quantile(f, 0.5), f->num.mean,
	       kiln_profile_quantile(f, 0.95), f->num.max);
}

/* min, p50 and max as profile.json writes them (dates or RFC 3339 UTC) */
static void print_time(const kiln_profile_field *f)
{
	kiln_buf b = {0};

	if (kiln_buf_puts(&b, "  from ") == 0 && kiln_profile_put_time(&b, f, f->tm.min_ms) == 0 &&
	    kiln_buf_puts(&b, "  p50 ") == 0 &&
	    kiln_profile_put_time(&b, f, kiln_ts_quantile(&f->tm, 0.5)) == 0 &&
	    kiln_buf_puts(&b, "  to ") == 0 && kiln_profile_put_time(&b, f, f->tm.max_ms) == 0)
		for (size_t i = 0; i < b.len; i++)
			if (b.ptr[i] != '"')
				putchar(b.ptr[i]);
	kiln_buf_free(&b);
}

static void print_field(const kiln_profile *p, const kiln_profile_field *f)
{
	uint64_t strings = f->types[KILN_PTYPE_STRING];

	printf("%-28s %-6s %10" PRIu64 " %9" PRIu64 " %9" PRIu64 " %9" PRIu64 " ", f->path,
	       f->tokens ? "tokens" : "values", f->present, kiln_profile_missing(p, f),
	       f->types[KILN_PTYPE_NULL], kiln_profile_distinct(f));
	for (int t = 1, first = 1; t < KILN_PTYPE_COUNT_; t++)
		if (f->types[t]) {
			printf("%s%s", first ? "" : ",", kiln_ptype_name((kiln_ptype)t));
			first = 0;
		}
	if (!f->tokens && f->num.count)
		print_number(f);
	if (!f->tokens && strings)
		printf("  length %" PRIu64 "..%" PRIu64 " mean %.1f", f->len_min, f->len_max,
		       (double)f->len_sum / (double)strings);
	if (!f->tokens && f->time && strings && f->tm.count == strings)
		print_time(f);
	if (f->cat_count) {
		printf("  ");
		for (size_t i = 0; i < f->cat_count; i++)
			printf("%s%s %" PRIu64, i ? ", " : "", f->cat_names[i], f->cat_counts[i]);
	}
	printf("\n");
}

int kiln_cmd_profile(int argc, char **argv)
{
	const char *repo;
	bool added = false, json = false;
	const kiln_cli_option rows[] = {
	    KILN_CLI_MANIFEST_ROW(&repo),
	    {.name = "added", .letter = 'a', .kind = KILN_CLI_FLAG, .out = &added},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &json},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "profile",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one version, DATASET@REF (see kiln profile --help)",
	};
	kiln_manifest *m = NULL;
	kiln_version v;
	kiln_buf out = {0};
	kiln_profile total = {0}, add = {0};
	const kiln_profile *p;
	int first, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	if (kiln_cli_need_manifest("profile", repo) != 0)
		return KILN_EXIT_USAGE;
	status = KILN_EXIT_USAGE;
	if (kiln_version_open(&m, repo) < 0 || kiln_version_resolve(m, argv[first], &v) < 0 ||
	    kiln_version_profile(m, &v, argv[first], &total, &add) <= 0) {
		kiln_cli_fail("profile", "%s", kiln_error_last());
		goto cleanup;
	}
	p = added ? &add : &total;
	if (json) {
		if (kiln_buf_puts(&out, "{\"dataset\":") < 0 ||
		    kiln_buf_put_json_string(&out, v.dataset, strlen(v.dataset)) < 0 ||
		    kiln_buf_printf(&out, ",\"commit\":\"%s\",\"part\":\"%s\",\"profile\":", v.commit,
		                    added ? "added" : "total") < 0 ||
		    kiln_profile_render(&out, p) < 0 || kiln_buf_puts(&out, "}\n") < 0) {
			kiln_cli_fail("profile", "%s", kiln_error_last());
			goto cleanup;
		}
		fwrite(out.ptr, 1, out.len, stdout);
	} else {
		printf("%s@%.12s: %s, %" PRIu64 " records\n", v.dataset, v.commit,
		       added ? "added by its commit" : "the whole version", p->records);
		printf("%-28s %-6s %10s %9s %9s %9s %s\n", "FIELD", "KIND", "PRESENT", "MISSING", "NULL",
		       "DISTINCT", "TYPES AND VALUES");
		for (size_t i = 0; i < p->count; i++)
			print_field(p, &p->fields[i]);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("profile", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_profile_free(&total);
	kiln_profile_free(&add);
	kiln_buf_free(&out);
	kiln_manifest_close(m);
	return status;
}
