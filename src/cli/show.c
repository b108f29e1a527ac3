/* `kiln show DATASET@REF`: one version described from its tree: the commit
 * and ref, contract, pseudonymisation key id, split definition, per-split
 * shards/records/bytes (counted from the shard lists, checked against
 * stats.json), quarantine counts by code, and lineage. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "core/error.h"
#include "core/json.h"
#include "manifest/format.h"
#include "manifest/version.h"

static const char usage_text[] =
    "usage: kiln show DATASET[@REF] [--manifest REPO] [--json]\n"
    "\n"
    "Describes one version (REF: main by default, a branch, a tag vN or a commit\n"
    "id): the commit and the reference it was found through, the contract (id,\n"
    "version, digest), the pseudonymisation key id, the split scheme, key, salt\n"
    "and ratios, then per split the shards, records, compressed and raw bytes\n"
    "(counted from the shard lists; a difference from stats.json is reported),\n"
    "the quarantined records by code, and the lineage (next offset per source).\n"
    "With --json, the same as one JSON document: the version (dataset, ref,\n"
    "commit, tag, time), \"contract\", \"pseudonymisation\", \"split\" and\n"
    "\"shard_settings\" (null without dataset.json), \"stats\" (stats.json, null\n"
    "without it), \"splits\" and \"total\" (counted) and \"lineage\" (docs/JSON.md).\n"
    "\n"
    "Options:\n"
    "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
    "  -j, --json            one JSON document (docs/JSON.md)\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on success, 2 on a bad reference, a missing repository or\n"
    "another error.\n";

/* ---- a JSON file as "dotted.path" -> scalar text ------------------------- */

/* The files of the version, parsed by the manifest codec. */
typedef struct files {
	kiln_version_erasure er; /* the newest erasure that rewrote the version (have_er) */
	bool have_er;
	kiln_json_scanner *scanner;
	kiln_mfmt_dataset ds;
	kiln_stats st;
	kiln_mfmt_lineage lin;
	bool have_ds, have_st, have_lin;
} files;

static const char *or_unknown(const char *s)
{
	return s ? s : "?";
}

/* Reads the version's dataset.json, stats.json and lineage.json (each may be
 * absent). */
static int load(kiln_manifest *m, const kiln_version *v, const char *spec, files *f)
{
	static const char *const names[] = {"dataset.json", "stats.json", "lineage.json"};
	kiln_buf text = KILN_BUF_INIT(0);
	char where[512];
	int rc = 0;

	if (!(f->scanner = kiln_json_scanner_new(NULL)))
		return kiln_error_oom(NULL);
	for (int i = 0; i < 3 && rc >= 0; i++) {
		kiln_buf_reset(&text);
		snprintf(where, sizeof(where), "manifest: %s:%s", spec, names[i]);
		if ((rc = kiln_version_read(m, v, names[i], &text)) != 1)
			continue;
		if (i == 0 &&
		    (rc = kiln_mfmt_dataset_parse(f->scanner, where, text.ptr, text.len, &f->ds)) == 0)
			f->have_ds = true;
		if (i == 1 &&
		    (rc = kiln_mfmt_stats_parse(f->scanner, where, text.ptr, text.len, &f->st)) == 0)
			f->have_st = true;
		if (i == 2 &&
		    (rc = kiln_mfmt_lineage_parse(f->scanner, where, text.ptr, text.len, &f->lin)) == 0)
			f->have_lin = true;
	}
	kiln_buf_free(&text);
	return rc < 0 ? rc : 0;
}

static void files_free(files *f)
{
	kiln_mfmt_dataset_free(&f->ds);
	kiln_mfmt_lineage_free(&f->lin);
	kiln_json_scanner_free(f->scanner);
}

/* ---- counting shards ------------------------------------------------------ */

static int count_shard(void *ctx, const kiln_shard_entry *e)
{
	kiln_split_stats *s = ctx;

	s->shards++;
	s->records += e->records;
	s->bytes += e->bytes;
	s->raw_bytes += e->raw_bytes;
	return 0;
}

/* ---- printing --------------------------------------------------------- */

/* The version, its date and its dataset.json. */
static void print_header(const kiln_version *v, const files *f)
{
	const kiln_mfmt_dataset *ds = &f->ds;
	char date[32] = "?";
	struct tm tm;
	time_t tt;

	tt = (time_t)v->time;
	if (gmtime_r(&tt, &tm))
		strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("version      %s@%.12s\n", v->dataset, v->commit);
	printf("commit       %s\n", v->commit);
	printf("ref          %s\n", v->ref[0] ? v->ref : "(commit id)");
	printf("date         %s\n", date);
	if (f->have_er)
		printf(
		    "erasure      %s: rewritten from commit %.12s%s%.12s%s (kiln erase; docs/ERASURE.md)\n",
		    f->er.id, f->er.old_commit, f->er.old_tag[0] ? ", tag " : "", f->er.old_tag,
		    f->er.old_tag[0] ? " superseded" : "");
	if (!f->have_ds) {
		printf("dataset.json missing\n");
	} else {
		printf("contract     %s %s (digest %s)\n", or_unknown(ds->contract_id),
		       or_unknown(ds->contract_version), or_unknown(ds->contract_digest));
		printf("key id       %s (scheme %s, key version %s)\n", or_unknown(ds->key_id),
		       or_unknown(ds->token_scheme), or_unknown(ds->key_version));
		printf("split        scheme %s, key %s, salt %s, ratios", or_unknown(ds->split_scheme),
		       or_unknown(ds->split_key), or_unknown(ds->split_salt));
		for (int s = 0; s < KILN_SPLIT_COUNT; s++)
			printf(" %s %s", kiln_split_name((kiln_split)s), or_unknown(ds->ratios[s]));
		printf("\n");
		printf("shards       %s, %s level %s, target %s bytes\n", or_unknown(ds->shard_format),
		       or_unknown(ds->shard_compression), or_unknown(ds->zstd_level),
		       or_unknown(ds->target_bytes));
	}
}

/* Per split what the shard lists count, and where stats.json differs. */
static void print_splits(const files *f, const kiln_split_stats counted[KILN_SPLIT_COUNT],
                         const kiln_split_stats *total)
{
	const kiln_stats *st = &f->st;

	if (f->have_st)
		printf("records      %" PRIu64 " in, %" PRIu64 " valid, %" PRIu64 " quarantined\n",
		       st->records_in, st->valid, st->quarantined);
	if (f->have_st && st->erased)
		printf("erased %" PRIu64 " curated records (kiln erase)\n", st->erased);
	printf("\n%-6s %10s %12s %14s %14s\n", "split", "shards", "records", "bytes", "raw_bytes");
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		printf("%-6s %10" PRIu64 " %12" PRIu64 " %14" PRIu64 " %14" PRIu64 "\n",
		       kiln_split_name((kiln_split)s), counted[s].shards, counted[s].records,
		       counted[s].bytes, counted[s].raw_bytes);
	printf("%-6s %10" PRIu64 " %12" PRIu64 " %14" PRIu64 " %14" PRIu64 "\n", "total", total->shards,
	       total->records, total->bytes, total->raw_bytes);
	for (int s = 0; f->have_st && s < KILN_SPLIT_COUNT; s++) {
		const char *name = kiln_split_name((kiln_split)s);
		uint64_t sh = st->splits[s].shards, rec = st->splits[s].records, by = st->splits[s].bytes,
		         raw = st->splits[s].raw_bytes;

		if (sh != counted[s].shards || rec != counted[s].records || by != counted[s].bytes ||
		    raw != counted[s].raw_bytes)
			printf("note: stats.json counts %s as %" PRIu64 " shards, %" PRIu64
			       " records, %" PRIu64 " bytes, %" PRIu64 " raw bytes\n",
			       name, sh, rec, by, raw);
	}
}

/* The quarantined records by code and the lineage. */
static void print_quarantine_lineage(const files *f)
{
	const kiln_stats *st = &f->st;
	bool any_q = false;

	printf("\nquarantined ");
	for (int c = 1; c < KILN_REJECT_COUNT_; c++) {
		if (!st->quarantined_by_code[c])
			continue;
		printf("%s%s %" PRIu64, any_q ? ", " : "", kiln_reject_name((kiln_reject)c),
		       st->quarantined_by_code[c]);
		any_q = true;
	}
	printf("%s\n", any_q ? "" : "none");

	printf("\nlineage\n");
	if (f->lin.n == 0)
		printf("  none\n");
	for (size_t i = 0; i < f->lin.n; i++) {
		const kiln_lineage_entry *e = &f->lin.v[i];

		printf("  %s/%" PRId32 " next %" PRId64, e->topic, e->partition, e->next);
		if (e->path)
			printf(" (file %s, %" PRIu64 " bytes read)", e->path, e->bytes);
		printf("\n");
	}
}

/* ---- --json ------------------------------------------------------------- */

static int put_counts(kiln_buf *b, const kiln_split_stats *c)
{
	return kiln_buf_printf(b,
	                       "{\"shards\":%" PRIu64 ",\"records\":%" PRIu64 ",\"bytes\":%" PRIu64
	                       ",\"raw_bytes\":%" PRIu64 "}",
	                       c->shards, c->records, c->bytes, c->raw_bytes);
}

/* "NAME":{"train":...,"dev":...,"test":...} of per-split counts. */
static int put_splits(kiln_buf *b, const char *name, const kiln_split_stats s[KILN_SPLIT_COUNT])
{
	int rc = kiln_buf_printf(b, "\"%s\":{", name);

	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		rc |= kiln_buf_printf(b, "%s\"%s\":", i ? "," : "", kiln_split_name((kiln_split)i));
		rc |= put_counts(b, &s[i]);
	}
	return rc | kiln_buf_putc(b, '}');
}

/* ,"KEY":"value" (null when absent) */
static int put_member(kiln_buf *b, const char *key, const char *value)
{
	int rc = kiln_buf_printf(b, ",\"%s\":", key);

	return rc | kiln_cli_json_string(b, value);
}

/* dataset.json: "contract", "pseudonymisation", "split", "shard_settings". */
static int put_definition(kiln_buf *b, const files *f)
{
	const kiln_mfmt_dataset *ds = &f->ds;
	int rc = 0;

	if (!f->have_ds)
		return kiln_buf_puts(b, ",\"contract\":null,\"pseudonymisation\":null,\"split\":null,"
		                        "\"shard_settings\":null");
	rc |= kiln_buf_puts(b, ",\"contract\":{\"id\":");
	rc |= kiln_cli_json_string(b, ds->contract_id);
	rc |= put_member(b, "version", ds->contract_version);
	rc |= put_member(b, "api_version", ds->contract_api_version);
	rc |= put_member(b, "schema", ds->contract_schema);
	rc |= put_member(b, "digest", ds->contract_digest);
	rc |= kiln_buf_puts(b, "},\"pseudonymisation\":{\"scheme\":");
	rc |= kiln_cli_json_string(b, ds->token_scheme);
	rc |= put_member(b, "key_id", ds->key_id);
	rc |= kiln_buf_puts(b, ",\"key_version\":");
	rc |= kiln_cli_json_number_text(b, ds->key_version);
	rc |= put_member(b, "prefix", ds->token_prefix);
	rc |= kiln_buf_puts(b, "},\"split\":{\"scheme\":");
	rc |= kiln_cli_json_string(b, ds->split_scheme);
	rc |= put_member(b, "key", ds->split_key);
	rc |= put_member(b, "salt", ds->split_salt);
	rc |= kiln_buf_puts(b, ",\"ratios\":{");
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		rc |= kiln_buf_printf(b, "%s\"%s\":", s ? "," : "", kiln_split_name((kiln_split)s));
		rc |= kiln_cli_json_number_text(b, ds->ratios[s]);
	}
	rc |= kiln_buf_puts(b, "}},\"shard_settings\":{\"format\":");
	rc |= kiln_cli_json_string(b, ds->shard_format);
	rc |= put_member(b, "compression", ds->shard_compression);
	rc |= kiln_buf_puts(b, ",\"zstd_level\":");
	rc |= kiln_cli_json_number_text(b, ds->zstd_level);
	rc |= kiln_buf_puts(b, ",\"target_bytes\":");
	rc |= kiln_cli_json_number_text(b, ds->target_bytes);
	rc |= put_member(b, "hash", ds->shard_hash);
	rc |= put_member(b, "key", ds->shard_key);
	return rc | kiln_buf_putc(b, '}');
}

/* "stats": stats.json, and whether its splits agree with the counts. */
static int put_stats(kiln_buf *b, const files *f, const kiln_split_stats counted[KILN_SPLIT_COUNT])
{
	const kiln_stats *st = &f->st;
	bool agrees = true;
	int rc = 0;

	if (!f->have_st)
		return kiln_buf_puts(b, ",\"stats\":null");
	rc |= kiln_buf_printf(b,
	                      ",\"stats\":{\"records_in\":%" PRIu64 ",\"valid\":%" PRIu64
	                      ",\"quarantined\":%" PRIu64 ",\"erased\":%" PRIu64 ",\"quarantined_by_code\":{",
	                      st->records_in, st->valid, st->quarantined, st->erased);
	for (int c = 1, n = 0; c < KILN_REJECT_COUNT_; c++)
		if (st->quarantined_by_code[c])
			rc |= kiln_buf_printf(b, "%s\"%s\":%" PRIu64, n++ ? "," : "",
			                      kiln_reject_name((kiln_reject)c), st->quarantined_by_code[c]);
	rc |= kiln_buf_puts(b, "},");
	rc |= put_splits(b, "splits", st->splits);
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		agrees = agrees && st->splits[s].shards == counted[s].shards &&
		         st->splits[s].records == counted[s].records &&
		         st->splits[s].bytes == counted[s].bytes &&
		         st->splits[s].raw_bytes == counted[s].raw_bytes;
	return rc | kiln_buf_printf(b, ",\"agrees\":%s}", agrees ? "true" : "false");
}

static int put_lineage(kiln_buf *b, const files *f)
{
	int rc = kiln_buf_puts(b, ",\"lineage\":[");

	for (size_t i = 0; i < f->lin.n; i++) {
		const kiln_lineage_entry *e = &f->lin.v[i];

		rc |= kiln_buf_puts(b, i ? ",{\"topic\":" : "{\"topic\":");
		rc |= kiln_cli_json_string(b, e->topic);
		rc |= kiln_buf_printf(
		    b, ",\"partition\":%" PRId32 ",\"next\":%" PRId64 ",\"path\":", e->partition, e->next);
		rc |= kiln_cli_json_string(b, e->path);
		if (e->path)
			rc |= kiln_buf_printf(b, ",\"bytes\":%" PRIu64, e->bytes);
		else
			rc |= kiln_buf_puts(b, ",\"bytes\":null");
		rc |=
		    kiln_buf_printf(b, ",\"skipped\":%" PRIu64 ",\"gaps\":%" PRIu64 "}", e->skipped, e->gaps);
	}
	return rc | kiln_buf_putc(b, ']');
}

/* The whole description as one JSON document. */
static int print_json(const kiln_version *v, const files *f, const kiln_split_stats counted[KILN_SPLIT_COUNT],
                      const kiln_split_stats *total)
{
	kiln_buf b = KILN_BUF_INIT(0);
	int rc = kiln_buf_putc(&b, '{');

	rc |= kiln_cli_json_version(&b, v);
	rc |= kiln_buf_puts(&b, ",\"erasure\":");
	if (f->have_er)
		rc |= kiln_buf_printf(&b, "{\"id\":\"%s\",\"old_commit\":\"%s\",\"old_tag\":", f->er.id,
		                      f->er.old_commit) |
		      kiln_cli_json_string_or_null(&b, f->er.old_tag) | kiln_buf_putc(&b, '}');
	else
		rc |= kiln_buf_puts(&b, "null");
	rc |= put_definition(&b, f);
	rc |= put_stats(&b, f, counted);
	rc |= kiln_buf_putc(&b, ',');
	rc |= put_splits(&b, "splits", counted);
	rc |= kiln_buf_puts(&b, ",\"total\":");
	rc |= put_counts(&b, total);
	rc |= put_lineage(&b, f);
	rc |= kiln_buf_puts(&b, "}\n");
	rc = kiln_cli_write_buf("show", &b, rc);
	kiln_buf_free(&b);
	return rc;
}

int kiln_cmd_show(int argc, char **argv)
{
	const char *repo;
	bool json = false;
	const kiln_cli_option rows[] = {
	    KILN_CLI_MANIFEST_ROW(&repo),
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &json},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "show",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one DATASET[@REF] (see kiln show --help)",
	};
	kiln_manifest *m = NULL;
	kiln_version v;
	files f = {0};
	kiln_split_stats counted[KILN_SPLIT_COUNT] = {{0}}, total = {0};
	int first, status, er = 0;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	if (kiln_cli_need_manifest("show", repo) != 0)
		return KILN_EXIT_USAGE;
	status = KILN_EXIT_USAGE;
	if (kiln_version_open(&m, repo) < 0 || kiln_version_resolve(m, argv[first], &v) < 0 ||
	    load(m, &v, argv[first], &f) < 0 || (er = kiln_version_erasure_of(m, &v, &f.er)) < 0)
		goto fail;
	f.have_er = er == 1;
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		if (kiln_version_shards(m, &v, (kiln_split)s, count_shard, &counted[s]) < 0)
			goto fail;
		total.shards += counted[s].shards;
		total.records += counted[s].records;
		total.bytes += counted[s].bytes;
		total.raw_bytes += counted[s].raw_bytes;
	}

	if (json) {
		if (print_json(&v, &f, counted, &total) != 0)
			goto cleanup;
	} else {
		print_header(&v, &f);
		print_splits(&f, counted, &total);
		print_quarantine_lineage(&f);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("show", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
	goto cleanup;
fail:
	kiln_cli_fail("show", "%s", kiln_error_last());
cleanup:
	files_free(&f);
	kiln_manifest_close(m);
	return status;
}
