/* `kiln show DATASET@REF`: one version described from its tree: the commit
 * and ref, contract, pseudonymisation key id, split definition, per-split
 * shards/records/bytes (counted from the shard lists, checked against
 * stats.json), quarantine counts by code, and lineage. */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/error.h"
#include "core/json.h"
#include "manifest/version.h"

static const char usage_text[] =
	"usage: kiln show DATASET[@REF] [--manifest REPO]\n"
	"\n"
	"Describes one version (REF: main by default, a branch, a tag vN or a commit\n"
	"id): the commit and the reference it was found through, the contract (id,\n"
	"version, digest), the pseudonymisation key id, the split scheme, key, salt\n"
	"and ratios, then per split the shards, records, compressed and raw bytes\n"
	"(counted from the shard lists; a difference from stats.json is reported),\n"
	"the quarantined records by code, and the lineage (next offset per source).\n"
	"\n"
	"Options:\n"
	"  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
	"  -h, --help            show this help\n"
	"\n"
	"Exit status: 0 on success, 2 on a bad reference, a missing repository or\n"
	"another error.\n";

/* ---- a JSON file as "dotted.path" -> scalar text ------------------------- */

typedef struct flat {
	char **keys, **vals;
	size_t n, cap;
} flat;

static void flat_free(flat *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->keys[i]);
		free(f->vals[i]);
	}
	free(f->keys);
	free(f->vals);
	memset(f, 0, sizeof(*f));
}

static int flat_add(flat *f, const char *key, const kiln_json_token *t)
{
	char *k, *v;
	size_t n;

	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 32;
		char **kk = realloc(f->keys, cap * sizeof(*kk)), **vv;

		if (!kk)
			return kiln_error_set(KILN_ENOMEM, "out of memory");
		f->keys = kk;
		if (!(vv = realloc(f->vals, cap * sizeof(*vv))))
			return kiln_error_set(KILN_ENOMEM, "out of memory");
		f->vals = vv;
		f->cap = cap;
	}
	k = strdup(key);
	v = malloc(t->len + 1);
	if (!k || !v) {
		free(k);
		free(v);
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	}
	if (t->type == KILN_JSON_STRING) {
		n = kiln_json_unescape(v, t->len + 1, t);
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
				v[i] = '?'; /* one line per field on a terminal */
	} else {
		memcpy(v, t->ptr, t->len);
		n = t->len;
	}
	v[n] = '\0';
	f->keys[f->n] = k;
	f->vals[f->n] = v;
	f->n++;
	return 0;
}

#define FLAT_DEPTH 16

/* Every scalar of the text under its path: object keys joined with '.',
 * array elements by index ("partitions.0.topic"). */
static int flatten(const char *file, const char *text, size_t len, flat *out)
{
	kiln_json_scanner *scanner = kiln_json_scanner_new(NULL);
	struct {
		bool array;
		size_t index, base;
	} stack[FLAT_DEPTH];
	char path[512] = "";
	size_t depth = 0;
	kiln_json_token t;
	int rc = 0, got;

	if (!scanner)
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	kiln_json_scanner_reset(scanner, text, len);
	while ((got = kiln_json_next(scanner, &t)) > 0) {
		if (t.type == KILN_JSON_OBJECT_END || t.type == KILN_JSON_ARRAY_END) {
			depth--;
			continue;
		}
		if (t.type == KILN_JSON_KEY) {
			size_t base = stack[depth - 1].base;
			int w = snprintf(path + base, sizeof(path) - base, "%s%.*s", base ? "." : "",
					 (int)t.len, t.ptr);

			if (w < 0 || (size_t)w >= sizeof(path) - base) {
				rc = kiln_error_set(KILN_EINVALID, "%s: a key path is too long", file);
				goto cleanup;
			}
			continue;
		}
		if (depth > 0 && stack[depth - 1].array) {
			size_t base = stack[depth - 1].base;

			snprintf(path + base, sizeof(path) - base, "%s%zu", base ? "." : "",
				 stack[depth - 1].index++);
		}
		if (t.type == KILN_JSON_OBJECT_BEGIN || t.type == KILN_JSON_ARRAY_BEGIN) {
			if (depth == FLAT_DEPTH) {
				rc = kiln_error_set(KILN_EINVALID, "%s: nested too deep", file);
				goto cleanup;
			}
			stack[depth].array = t.type == KILN_JSON_ARRAY_BEGIN;
			stack[depth].index = 0;
			stack[depth].base = depth == 0 ? 0 : strlen(path);
			depth++;
			continue;
		}
		if ((rc = flat_add(out, path, &t)) < 0)
			goto cleanup;
	}
	if (got < 0) {
		size_t off = 0;
		kiln_reject code = kiln_json_scanner_error(scanner, &off, NULL);

		rc = kiln_error_set(KILN_EINVALID, "%s: %s at byte %zu", file, kiln_reject_name(code), off);
	}
cleanup:
	kiln_json_scanner_free(scanner);
	return rc;
}

static const char *get(const flat *f, const char *key)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->keys[i], key) == 0)
			return f->vals[i];
	return NULL;
}

static const char *getf(const flat *f, const char *fallback, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static const char *getf(const flat *f, const char *fallback, const char *fmt, ...)
{
	char key[256];
	va_list ap;
	const char *v;

	va_start(ap, fmt);
	vsnprintf(key, sizeof(key), fmt, ap);
	va_end(ap);
	v = get(f, key);
	return v ? v : fallback;
}

/* Reads `file` of the version and flattens it (empty when absent). */
static int load(kiln_manifest *m, const kiln_version *v, const char *file, flat *out, bool *present)
{
	kiln_buf text = KILN_BUF_INIT(0);
	int rc = kiln_version_read(m, v, file, &text);

	*present = rc == 1;
	if (rc == 1)
		rc = flatten(file, text.ptr, text.len, out);
	kiln_buf_free(&text);
	return rc < 0 ? rc : 0;
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

static uint64_t u64_or_zero(const char *s)
{
	return s ? strtoull(s, NULL, 10) : 0;
}

int kiln_cmd_show(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "manifest", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *repo = getenv("KILN_MANIFEST");
	kiln_manifest *m = NULL;
	kiln_version v;
	flat ds = { 0 }, st = { 0 }, lin = { 0 };
	bool have_ds, have_st, have_lin;
	kiln_split_stats counted[KILN_SPLIT_COUNT] = { { 0 } }, total = { 0 };
	char date[32] = "?";
	struct tm tm;
	time_t tt;
	int opt, status = KILN_EXIT_USAGE;
	bool any_q = false;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "m:h", long_options, NULL)) != -1) {
		switch (opt) {
		case 'm':
			repo = optarg;
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
		return kiln_cli_fail("show", "expected one DATASET[@REF] (see kiln show --help)");
	if (!repo || !*repo)
		return kiln_cli_fail("show",
				     "no manifest repository: give --manifest REPO or set KILN_MANIFEST");
	if (kiln_version_open(&m, repo) < 0 || kiln_version_resolve(m, argv[optind], &v) < 0 ||
	    load(m, &v, "dataset.json", &ds, &have_ds) < 0 || load(m, &v, "stats.json", &st, &have_st) < 0 ||
	    load(m, &v, "lineage.json", &lin, &have_lin) < 0)
		goto fail;
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		if (kiln_version_shards(m, &v, (kiln_split)s, count_shard, &counted[s]) < 0)
			goto fail;
		total.shards += counted[s].shards;
		total.records += counted[s].records;
		total.bytes += counted[s].bytes;
		total.raw_bytes += counted[s].raw_bytes;
	}

	tt = (time_t)v.time;
	if (gmtime_r(&tt, &tm))
		strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("version      %s@%.12s\n", v.dataset, v.commit);
	printf("commit       %s\n", v.commit);
	printf("ref          %s\n", v.ref[0] ? v.ref : "(commit id)");
	printf("date         %s\n", date);
	if (!have_ds) {
		printf("dataset.json missing\n");
	} else {
		printf("contract     %s %s (digest %s)\n", getf(&ds, "?", "contract.id"),
		       getf(&ds, "?", "contract.version"), getf(&ds, "?", "contract.digest"));
		printf("key id       %s (scheme %s, key version %s)\n",
		       getf(&ds, "?", "pseudonymisation.key_id"), getf(&ds, "?", "pseudonymisation.scheme"),
		       getf(&ds, "?", "pseudonymisation.key_version"));
		printf("split        scheme %s, key %s, salt %s, ratios", getf(&ds, "?", "split.scheme"),
		       getf(&ds, "?", "split.key"), getf(&ds, "?", "split.salt"));
		for (int s = 0; s < KILN_SPLIT_COUNT; s++)
			printf(" %s %s", kiln_split_name((kiln_split)s),
			       getf(&ds, "?", "split.ratios.%s", kiln_split_name((kiln_split)s)));
		printf("\n");
		printf("shards       %s, %s level %s, target %s bytes\n", getf(&ds, "?", "shards.format"),
		       getf(&ds, "?", "shards.compression"), getf(&ds, "?", "shards.zstd_level"),
		       getf(&ds, "?", "shards.target_bytes"));
	}
	if (have_st)
		printf("records      %s in, %s valid, %s quarantined\n", getf(&st, "0", "records_in"),
		       getf(&st, "0", "valid"), getf(&st, "0", "quarantined"));
	printf("\n%-6s %10s %12s %14s %14s\n", "split", "shards", "records", "bytes", "raw_bytes");
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		printf("%-6s %10" PRIu64 " %12" PRIu64 " %14" PRIu64 " %14" PRIu64 "\n",
		       kiln_split_name((kiln_split)s), counted[s].shards, counted[s].records,
		       counted[s].bytes, counted[s].raw_bytes);
	printf("%-6s %10" PRIu64 " %12" PRIu64 " %14" PRIu64 " %14" PRIu64 "\n", "total", total.shards,
	       total.records, total.bytes, total.raw_bytes);
	for (int s = 0; have_st && s < KILN_SPLIT_COUNT; s++) {
		const char *name = kiln_split_name((kiln_split)s);
		uint64_t sh = u64_or_zero(getf(&st, NULL, "splits.%s.shards", name)),
			 rec = u64_or_zero(getf(&st, NULL, "splits.%s.records", name)),
			 by = u64_or_zero(getf(&st, NULL, "splits.%s.bytes", name)),
			 raw = u64_or_zero(getf(&st, NULL, "splits.%s.raw_bytes", name));

		if (sh != counted[s].shards || rec != counted[s].records || by != counted[s].bytes ||
		    raw != counted[s].raw_bytes)
			printf("note: stats.json counts %s as %" PRIu64 " shards, %" PRIu64
			       " records, %" PRIu64 " bytes, %" PRIu64 " raw bytes\n",
			       name, sh, rec, by, raw);
	}

	printf("\nquarantined ");
	for (size_t i = 0; i < st.n; i++) {
		const char *prefix = "quarantined_by_code.";

		if (strncmp(st.keys[i], prefix, strlen(prefix)) != 0)
			continue;
		printf("%s%s %s", any_q ? ", " : "", st.keys[i] + strlen(prefix), st.vals[i]);
		any_q = true;
	}
	printf("%s\n", any_q ? "" : "none");

	printf("\nlineage\n");
	if (!getf(&lin, NULL, "partitions.0.topic"))
		printf("  none\n");
	for (size_t i = 0; getf(&lin, NULL, "partitions.%zu.topic", i); i++) {
		const char *path = getf(&lin, NULL, "partitions.%zu.path", i);

		printf("  %s/%s next %s", getf(&lin, "?", "partitions.%zu.topic", i),
		       getf(&lin, "?", "partitions.%zu.partition", i),
		       getf(&lin, "?", "partitions.%zu.next", i));
		if (path)
			printf(" (file %s, %s bytes read)", path, getf(&lin, "?", "partitions.%zu.bytes", i));
		printf("\n");
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
	flat_free(&ds);
	flat_free(&st);
	flat_free(&lin);
	kiln_manifest_close(m);
	return status;
}
