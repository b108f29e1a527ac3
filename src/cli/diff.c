/* `kiln diff A B`: the shards added and removed between two versions, per
 * split, with their record and byte counts; --shards lists each hash. Only
 * the fan-out blobs that differ are read (kiln_version_diff). --profile:
 * the drift between their data profiles instead (quality/drift.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "core/array.h"
#include "core/buf.h"
#include "core/error.h"
#include "manifest/version.h"
#include "quality/drift.h"
#include "quality/profile.h"

static const char usage_text[] =
    "usage: kiln diff DATASET@REF DATASET@REF [--manifest REPO] [--shards] [--json]\n"
    "       kiln diff BASELINE@REF DATASET@REF --profile [--psi X] [--null-rate X] [--json]\n"
    "\n"
    "Compares two versions (e.g. kiln diff user-events@v1 user-events@main): for\n"
    "each split, the shards in the second that the first lacks (+) and the\n"
    "shards in the first that the second lacks (-), with their records and\n"
    "compressed bytes:\n"
    "  train: +3 shards (+1500 records, +204800 bytes), -0 shards (-0 records, -0 bytes)\n"
    "With --json, one JSON document: the two versions as \"base\" and \"now\", and\n"
    "per split the \"added\" and \"removed\" shards, records and bytes (with\n"
    "--shards, each shard too); with --profile --json, the drift (docs/JSON.md).\n"
    "\n"
    "Options:\n"
    "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
    "  -s, --shards          also list each shard: '  + HASH RECORDS BYTES' (or -)\n"
    "  -p, --profile         compare the versions' data profiles: per field the null\n"
    "                        rate, distinct values, mean, median and 95th percentile,\n"
    "                        and the population stability index (PSI) of the second\n"
    "                        against the first; fields that drifted are flagged\n"
    "      --psi X           flag a PSI of X or more (default 0.2)\n"
    "      --null-rate X     flag a null rate that moved by X or more (default 0.05)\n"
    "  -j, --json            one JSON document (docs/JSON.md; --profile: docs/QUALITY.md)\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on success (whether or not they differ; with --profile, when\n"
    "no field is flagged), 1 when --profile flags a field, 2 on a bad reference,\n"
    "a version without a profile, a missing repository or another error.\n";

typedef struct change {
	char hash[65];
	uint64_t records, bytes;
	bool added;
} change;

typedef struct side {
	uint64_t shards, records, bytes;
} side;

typedef struct diff_state {
	side plus[KILN_SPLIT_COUNT], minus[KILN_SPLIT_COUNT];
	bool keep; /* --shards */
	change *list[KILN_SPLIT_COUNT];
	size_t n[KILN_SPLIT_COUNT], cap[KILN_SPLIT_COUNT];
} diff_state;

static int on_change(void *ctx, kiln_split split, const kiln_shard_entry *e, bool added)
{
	diff_state *d = ctx;
	side *s = added ? &d->plus[split] : &d->minus[split];
	change *c;

	s->shards++;
	s->records += e->records;
	s->bytes += e->bytes;
	if (!d->keep)
		return 0;
	if (KILN_ARRAY_GROW(d->list[split], d->cap[split], d->n[split], NULL) < 0)
		return KILN_ENOMEM;
	c = &d->list[split][d->n[split]++];
	memcpy(c->hash, e->hash, sizeof(c->hash));
	c->records = e->records;
	c->bytes = e->bytes;
	c->added = added;
	return 0;
}

static int parse_fraction(const char *cmd, const char *arg, void *out)
{
	char *end;
	double v = strtod(arg, &end);

	if (end == arg || *end || !(v > 0 && v < 100)) {
		kiln_cli_fail(cmd, "%s: expected a positive number", arg);
		return KILN_EXIT_USAGE;
	}
	*(double *)out = v;
	return 0;
}

static int load_profile(kiln_manifest *m, const char *spec, kiln_version *v, kiln_profile *out)
{
	int rc = kiln_version_resolve(m, spec, v);

	if (rc == 0 && (rc = kiln_version_profile(m, v, spec, out, NULL)) == 0)
		rc = KILN_ENOTFOUND;
	return rc < 0 ? rc : 0;
}

static int put_figure(kiln_buf *b, const char *key, double v)
{
	return kiln_buf_printf(b, ",\"%s\":%.10g", key, isfinite(v) ? v : 0);
}

/* "KEY":{the version's members,"records":N} */
static int put_side(kiln_buf *b, const char *key, const kiln_version *v, uint64_t records)
{
	int rc = kiln_buf_printf(b, "\"%s\":{", key);

	rc |= kiln_cli_json_version(b, v);
	return rc | kiln_buf_printf(b, ",\"records\":%" PRIu64 "}", records);
}

static int print_drift_json(const kiln_version *a, const kiln_version *b, const kiln_drift *d,
                            const kiln_drift_thresholds *t)
{
	kiln_buf out = KILN_BUF_INIT(0);
	int rc = kiln_buf_putc(&out, '{');

	rc |= put_side(&out, "base", a, d->records_base);
	rc |= kiln_buf_putc(&out, ',');
	rc |= put_side(&out, "now", b, d->records_now);
	rc |= kiln_buf_printf(&out,
	                      ",\"thresholds\":{\"psi\":%g,\"null_rate\":%g},\"flagged\":%zu,\"fields\":[",
	                      t->psi, t->null_rate, d->flagged);
	for (size_t i = 0; i < d->count; i++) {
		const kiln_field_drift *f = &d->fields[i];

		rc |= kiln_buf_puts(&out, i ? ",\n{\"path\":" : "\n{\"path\":");
		rc |= kiln_cli_json_string(&out, f->path);
		rc |= kiln_buf_printf(&out, ",\"in_base\":%s,\"in_now\":%s", f->base ? "true" : "false",
		                      f->now ? "true" : "false");
		rc |= put_figure(&out, "null_rate_base", f->null_rate_base);
		rc |= put_figure(&out, "null_rate_now", f->null_rate_now);
		rc |= kiln_buf_printf(&out, ",\"distinct_base\":%" PRIu64 ",\"distinct_now\":%" PRIu64,
		                      f->distinct_base, f->distinct_now);
		if (f->numbers) {
			rc |= put_figure(&out, "mean_base", f->mean_base);
			rc |= put_figure(&out, "mean_now", f->mean_now);
			rc |= put_figure(&out, "p50_base", f->p50_base);
			rc |= put_figure(&out, "p50_now", f->p50_now);
			rc |= put_figure(&out, "p95_base", f->p95_base);
			rc |= put_figure(&out, "p95_now", f->p95_now);
		}
		if (f->psi >= 0)
			rc |= put_figure(&out, "psi", f->psi);
		else
			rc |= kiln_buf_puts(&out, ",\"psi\":null");
		rc |= kiln_buf_printf(&out, ",\"flagged\":%s,\"why\":", f->flagged ? "true" : "false");
		rc |= kiln_cli_json_string(&out, f->why);
		rc |= kiln_buf_puts(&out, "}");
	}
	rc |= kiln_buf_puts(&out, "]}\n");
	rc = kiln_cli_write_buf("diff", &out, rc);
	kiln_buf_free(&out);
	return rc;
}

/* kiln diff A B --json: the shard diff as one document. */
static int print_shards_json(const kiln_version *a, const kiln_version *b, const diff_state *d)
{
	kiln_buf out = KILN_BUF_INIT(0);
	int rc = kiln_buf_puts(&out, "{\"base\":{");

	rc |= kiln_cli_json_version(&out, a);
	rc |= kiln_buf_puts(&out, "},\"now\":{");
	rc |= kiln_cli_json_version(&out, b);
	rc |= kiln_buf_puts(&out, "},\"splits\":{");
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		rc |= kiln_buf_printf(
		    &out,
		    "%s\"%s\":{\"added\":{\"shards\":%" PRIu64 ",\"records\":%" PRIu64 ",\"bytes\":%" PRIu64
		    "},\"removed\":{\"shards\":%" PRIu64 ",\"records\":%" PRIu64 ",\"bytes\":%" PRIu64 "}",
		    s ? "," : "", kiln_split_name((kiln_split)s), d->plus[s].shards, d->plus[s].records,
		    d->plus[s].bytes, d->minus[s].shards, d->minus[s].records, d->minus[s].bytes);
		if (d->keep) {
			rc |= kiln_buf_puts(&out, ",\"shards\":[");
			for (size_t i = 0; i < d->n[s]; i++) {
				const change *c = &d->list[s][i];

				rc |= kiln_buf_printf(
				    &out,
				    "%s\n{\"shard\":\"%s\",\"change\":\"%s\",\"records\":%" PRIu64
				    ",\"bytes\":%" PRIu64 "}",
				    i ? "," : "", c->hash, c->added ? "added" : "removed", c->records,
				    c->bytes);
			}
			rc |= kiln_buf_puts(&out, d->n[s] ? "\n]" : "]");
		}
		rc |= kiln_buf_putc(&out, '}');
	}
	rc |= kiln_buf_puts(&out, "}}\n");
	rc = kiln_cli_write_buf("diff", &out, rc);
	kiln_buf_free(&out);
	return rc;
}

static void print_drift_text(const kiln_version *a, const kiln_version *b, const kiln_drift *d,
                             const kiln_drift_thresholds *t)
{
	printf("profile drift %s@%.12s -> %s@%.12s (%" PRIu64 " -> %" PRIu64
	       " records; flagged: psi >= %g or null "
	       "rate moved >= %g)\n",
	       a->dataset, a->commit, b->dataset, b->commit, d->records_base, d->records_now, t->psi,
	       t->null_rate);
	printf("%-24s %-17s %-19s %-25s %-25s %7s\n", "FIELD", "NULL RATE", "DISTINCT", "MEAN", "P50", "PSI");
	for (size_t i = 0; i < d->count; i++) {
		const kiln_field_drift *f = &d->fields[i];
		char nr[32], ds[32], mean[40] = "", p50[40] = "", psi[16] = "-";

		snprintf(nr, sizeof(nr), "%.3f -> %.3f", f->null_rate_base, f->null_rate_now);
		snprintf(ds, sizeof(ds), "%" PRIu64 " -> %" PRIu64, f->distinct_base, f->distinct_now);
		if (f->numbers) {
			snprintf(mean, sizeof(mean), "%.5g -> %.5g", f->mean_base, f->mean_now);
			snprintf(p50, sizeof(p50), "%.5g -> %.5g", f->p50_base, f->p50_now);
		}
		if (f->psi >= 0)
			snprintf(psi, sizeof(psi), "%.3f", f->psi);
		printf("%-24s %-17s %-19s %-25s %-25s %7s%s%s\n", f->path, nr, ds, mean, p50, psi,
		       f->flagged ? "  DRIFT: " : "", f->why);
	}
	printf("%zu of %zu fields flagged\n", d->flagged, d->count);
}

/* kiln diff A B --profile */
static int diff_profiles(kiln_manifest *m, const char *spec_a, const char *spec_b,
                         const kiln_drift_thresholds *t, bool json)
{
	kiln_version a, b;
	kiln_profile pa = {0}, pb = {0};
	kiln_drift d = {0};
	int status = KILN_EXIT_USAGE;

	if (load_profile(m, spec_a, &a, &pa) < 0 || load_profile(m, spec_b, &b, &pb) < 0 ||
	    kiln_drift_compare(&d, &pa, &pb, t) < 0) {
		kiln_cli_fail("diff", "%s", kiln_error_last());
		goto done;
	}
	if (json) {
		if (print_drift_json(&a, &b, &d, t) != 0)
			goto done;
	} else {
		print_drift_text(&a, &b, &d, t);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("diff", "stdout: write error");
		goto done;
	}
	status = d.flagged ? KILN_EXIT_INVALID : KILN_EXIT_OK;
done:
	kiln_drift_free(&d);
	kiln_profile_free(&pa);
	kiln_profile_free(&pb);
	return status;
}

int kiln_cmd_diff(int argc, char **argv)
{
	const char *repo;
	diff_state d;
	bool profile = false, json = false;
	kiln_drift_thresholds t = {KILN_DRIFT_PSI_DEFAULT, KILN_DRIFT_NULL_RATE_DEFAULT};
	const kiln_cli_option rows[] = {
	    KILN_CLI_MANIFEST_ROW(&repo),
	    {.name = "shards", .letter = 's', .kind = KILN_CLI_FLAG, .out = &d.keep},
	    {.name = "profile", .letter = 'p', .kind = KILN_CLI_FLAG, .out = &profile},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &json},
	    {.name = "psi", .kind = KILN_CLI_CUSTOM, .parse = parse_fraction, .out = &t.psi},
	    {.name = "null-rate", .kind = KILN_CLI_CUSTOM, .parse = parse_fraction, .out = &t.null_rate},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "diff",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 2,
	    .max_args = 2,
	    .args_error = "expected two versions, DATASET@REF DATASET@REF (see kiln diff --help)",
	};
	kiln_manifest *m = NULL;
	kiln_version a, b;
	int first, status;

	memset(&d, 0, sizeof(d));
	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	if (kiln_cli_need_manifest("diff", repo) != 0)
		return KILN_EXIT_USAGE;
	if (profile) {
		if (kiln_version_open(&m, repo) < 0) {
			kiln_cli_fail("diff", "%s", kiln_error_last());
			return KILN_EXIT_USAGE;
		}
		status = diff_profiles(m, argv[first], argv[first + 1], &t, json);
		kiln_manifest_close(m);
		return status;
	}
	status = KILN_EXIT_USAGE;
	if (kiln_version_open(&m, repo) < 0 || kiln_version_resolve(m, argv[first], &a) < 0 ||
	    kiln_version_resolve(m, argv[first + 1], &b) < 0 ||
	    kiln_version_diff(m, &a, &b, on_change, &d) < 0) {
		kiln_cli_fail("diff", "%s", kiln_error_last());
		goto cleanup;
	}
	if (json && print_shards_json(&a, &b, &d) != 0)
		goto cleanup;
	for (int s = 0; !json && s < KILN_SPLIT_COUNT; s++) {
		printf("%s: +%" PRIu64 " shards (+%" PRIu64 " records, +%" PRIu64 " bytes), -%" PRIu64
		       " shards (-%" PRIu64 " records, -%" PRIu64 " bytes)\n",
		       kiln_split_name((kiln_split)s), d.plus[s].shards, d.plus[s].records, d.plus[s].bytes,
		       d.minus[s].shards, d.minus[s].records, d.minus[s].bytes);
		for (size_t i = 0; i < d.n[s]; i++)
			printf("  %c %s %" PRIu64 " %" PRIu64 "\n", d.list[s][i].added ? '+' : '-',
			       d.list[s][i].hash, d.list[s][i].records, d.list[s][i].bytes);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("diff", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		free(d.list[s]);
	kiln_manifest_close(m);
	return status;
}
