/* `kiln report DATASET@REF [--baseline REF] -o DIR`: one version as a
 * static HTML page, DIR/index.html (src/report/, docs/REPORT.md): the
 * version and its signature, every field's profile as pictures, drift
 * against a baseline, the quarantine, the release gates and quality rules,
 * the erasure ledger. This file reads the options and writes the file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/fs.h"
#include "ingest/pipeline.h"
#include "manifest/verify.h"
#include "manifest/version.h"
#include "report/report.h"
#include "store/store.h"

static const char usage_text[] =
    "usage: kiln report DATASET@REF -o DIR [--baseline REF] [--pipeline FILE]\n"
    "                   [--manifest REPO] [--store URL] [--allowed-signers FILE | --public-key FILE]\n"
    "                   [--psi X] [--null-rate X] [--history N]\n"
    "\n"
    "Writes DIR/index.html, one self-contained page (inline CSS and SVG, no\n"
    "script, nothing fetched) about one version: its commit, tags, signature\n"
    "and signer as kiln verify sees them, contract, key id and lineage; per\n"
    "field its profile as pictures (histograms from the quantile sketch,\n"
    "category bars, null and missing rates; personal fields as counts only);\n"
    "with --baseline the drift per field (PSI, null-rate change), flagged\n"
    "fields first and both distributions drawn over each other; the\n"
    "quarantine by code, by code and field path (read from the store) and per\n"
    "commit; the release gates (with --pipeline) and the contract's quality\n"
    "rules with figure and threshold; the dataset's erasure ledger.\n"
    "\n"
    "Options:\n"
    "  -o, --output DIR            the folder to write index.html in (made if absent)\n"
    "  -b, --baseline REF          compare with this version (v1, main, DATASET@REF)\n"
    "  -p, --pipeline FILE         run its release gates; its manifest and store\n"
    "  -m, --manifest REPO         the manifest repository (default: the pipeline's,\n"
    "                              else $KILN_MANIFEST)\n"
    "  -s, --store URL             the store whose quarantine is counted per path\n"
    "                              (default: the pipeline's, else $KILN_STORE)\n"
    "      --allowed-signers FILE  trusted keys, git's allowed-signers format\n"
    "      --public-key FILE       a trusted key, ssh-ed25519 public key line\n"
    "      --psi X                 flag a PSI of X or more (default 0.2)\n"
    "      --null-rate X           flag a null rate that moved by X or more (default 0.05)\n"
    "      --history N             commits in the quarantine-per-commit chart (default 30)\n"
    "  -h, --help                  show this help\n"
    "\n"
    "Exit status: 0 when the page is written (whatever it shows), 2 on a usage\n"
    "error, a version or baseline that does not resolve, a baseline without a\n"
    "profile, or a folder that cannot be written.\n";

typedef struct report_opts {
	const char *out_dir, *baseline, *pipeline_file, *repo, *store_url;
	size_t history;
	kiln_verify_keys keys;
	kiln_drift_thresholds t;
} report_opts;

static int load_keys(const char *cmd, const char *arg, void *out)
{
	if (kiln_verify_keys_load(out, arg) < 0)
		return kiln_cli_fail(cmd, "%s", kiln_error_last());
	return 0;
}

static int parse_fraction(const char *cmd, const char *arg, void *out)
{
	char *end;
	double v = strtod(arg, &end);

	if (end == arg || *end || !(v > 0 && v < 100))
		return kiln_cli_fail(cmd, "%s: expected a positive number", arg);
	*(double *)out = v;
	return 0;
}

/* DIR made when absent (not its parents); DIR/index.html written whole. */
static int write_page(const char *dir, const kiln_buf *page)
{
	char path[4096];
	struct stat st;

	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return kiln_error_set(KILN_EIO, "%s: cannot make the folder: %s", dir, strerror(errno));
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return kiln_error_set(KILN_EIO, "%s: not a folder", dir);
	if ((size_t)snprintf(path, sizeof(path), "%s/index.html", dir) >= sizeof(path))
		return kiln_error_set(KILN_EINVALID, "%s: path too long", dir);
	return kiln_fs_write_atomic(path, page->ptr, page->len, 0644);
}

int kiln_cmd_report(int argc, char **argv)
{
	report_opts o = {0};
	const kiln_cli_option rows[] = {
	    {.name = "output", .letter = 'o', .kind = KILN_CLI_STRING, .out = &o.out_dir},
	    {.name = "baseline", .letter = 'b', .kind = KILN_CLI_STRING, .out = &o.baseline},
	    {.name = "pipeline", .letter = 'p', .kind = KILN_CLI_STRING, .out = &o.pipeline_file},
	    {.name = "manifest", .letter = 'm', .kind = KILN_CLI_STRING, .out = &o.repo},
	    {.name = "store", .letter = 's', .kind = KILN_CLI_STRING, .out = &o.store_url},
	    {.name = "allowed-signers", .kind = KILN_CLI_CUSTOM, .out = &o.keys, .parse = load_keys},
	    {.name = "public-key", .kind = KILN_CLI_CUSTOM, .out = &o.keys, .parse = load_keys},
	    {.name = "psi", .kind = KILN_CLI_CUSTOM, .parse = parse_fraction, .out = &o.t.psi},
	    {.name = "null-rate", .kind = KILN_CLI_CUSTOM, .parse = parse_fraction, .out = &o.t.null_rate},
	    {.name = "history",
	     .kind = KILN_CLI_COUNT,
	     .out = &o.history,
	     .bad = "--history wants a positive number"},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "report",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one DATASET@REF (see kiln report --help)",
	};
	kiln_pipeline *p = NULL;
	kiln_manifest *m = NULL;
	kiln_store *store = NULL;
	kiln_report_doc r = {0};
	kiln_buf page = KILN_BUF_INIT(0);
	const kiln_store_options *sopts = NULL;
	int first, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	if (!o.out_dir || !*o.out_dir)
		return kiln_cli_fail("report", "no output folder: give -o DIR (see kiln report --help)");
	status = KILN_EXIT_USAGE;
	if (o.pipeline_file && kiln_pipeline_load(&p, o.pipeline_file, NULL, 0) < 0)
		goto fail;
	if (!o.repo)
		o.repo = p ? p->manifest_repo : getenv("KILN_MANIFEST");
	if (!o.store_url && p) {
		o.store_url = p->store_url;
		sopts = &p->store;
	}
	if (!o.store_url)
		o.store_url = getenv("KILN_STORE");
	if (kiln_cli_need_manifest("report", o.repo) != 0)
		goto cleanup;
	if (kiln_version_open(&m, o.repo) < 0 ||
	    (o.store_url && *o.store_url && kiln_store_open(&store, o.store_url, sopts) < 0))
		goto fail;
	if (kiln_report_gather(&r, m,
	                       &(kiln_report_options){.spec = argv[first],
	                                              .baseline = o.baseline,
	                                              .keys = &o.keys,
	                                              .store = store,
	                                              .pipeline = p,
	                                              .thresholds = o.t,
	                                              .history = o.history}) < 0 ||
	    kiln_report_html(&page, &r) < 0 || write_page(o.out_dir, &page) < 0)
		goto fail;
	printf("%s/index.html: %s@%.12s", o.out_dir, r.version.dataset, r.version.commit);
	if (r.have_baseline)
		printf(" against %s, %zu of %zu fields flagged", r.baseline_spec, r.drift.flagged,
		       r.drift.count);
	printf("\n");
	status = fflush(stdout) == 0 && !ferror(stdout) ? KILN_EXIT_OK
	                                                : kiln_cli_fail("report", "stdout: write error");
	goto cleanup;
fail:
	kiln_cli_fail("report", "%s", kiln_error_last());
cleanup:
	kiln_report_free(&r);
	kiln_buf_free(&page);
	kiln_store_close(store);
	kiln_manifest_close(m);
	kiln_pipeline_free(p);
	return status;
}
