/* `kiln trace DATASET@REF --split S --record N | --shard HASH --line N`:
 * where one curated record came from. The shard and line (the record found
 * by the walk `kiln cat` makes), the shard's source ranges, the commit that
 * first added the shard and the vN tags whose versions list it; with the
 * pipeline's key, the exact origin: each source record of those ranges
 * (a file's lines, the raw zone's Kafka records) curated again with the
 * version's contract and the key until one gives the line byte for byte.
 * The record itself is never printed: it is personal data. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "contract/contract.h"
#include "contract/validate.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "core/instream.h"
#include "core/line_reader.h"
#include "ingest/pipeline.h"
#include "manifest/format.h"
#include "manifest/promote.h"
#include "manifest/version.h"
#include "mask/curate.h"
#include "mask/key.h"
#include "shard/fetch.h"
#include "shard/raw.h"
#include "store/store.h"

static const char usage_text[] =
    "usage: kiln trace DATASET[@REF] --split train|dev|test --record N [--json]\n"
    "                  [--pipeline FILE] [--manifest REPO] [--store URL]\n"
    "       kiln trace DATASET[@REF] --shard HASH --line N [--json]\n"
    "                  [--pipeline FILE] [--manifest REPO] [--store URL]\n"
    "       kiln trace DATASET --subject FIELD=VALUE... --pipeline FILE [--json]\n"
    "\n"
    "With --subject (or --subjects FILE): every version, split and shard that\n"
    "holds that person, and their records in the raw zone and the quarantine,\n"
    "counts only: what `kiln erase --dry-run` shows (docs/ERASURE.md).\n"
    "\n"
    "Says where one curated record of a version came from: its shard and line\n"
    "(--record N counts from 0 in the order `kiln cat DATASET@REF --split S`\n"
    "prints records; --line N from 0 in the shard), the shard's source ranges\n"
    "(topic, partition, first and last offset), the commit that first added\n"
    "the shard (on the first-parent history of REF) and the vN tags whose\n"
    "versions list it.\n"
    "\n"
    "With --pipeline, the exact origin: the source records of those ranges\n"
    "(a file source's lines, a Kafka source's raw-zone objects) are curated\n"
    "again with the version's contract and the pipeline's key, and the one\n"
    "whose curated form is the record byte for byte is named: its offset (for\n"
    "a file, its line number) and its raw-zone object. The sources hold\n"
    "personal data: only the owner of the key file can ask, and kiln says so\n"
    "on stderr. The record itself is never printed.\n"
    "\n"
    "Options:\n"
    "  -s, --split NAME      train, dev or test (with --record)\n"
    "  -r, --record N        the N-th record of the split, from 0\n"
    "      --shard HASH      a shard of the version (64 hex)\n"
    "  -l, --line N          the N-th line of --shard, from 0\n"
    "  -p, --pipeline FILE   the pipeline that made the version: its key finds\n"
    "                        the exact offset; its store and manifest are used\n"
    "                        unless --store or --manifest is given\n"
    "  -j, --json            one JSON document (docs/JSON.md)\n"
    "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
    "      --store URL       the object store (default: $KILN_STORE)\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 when the record was found (with --pipeline: and its\n"
    "origin); 1 when no source record curates to it (another key or\n"
    "contract, or the source changed); 2 on a usage error, a bad reference,\n"
    "a record or shard the version does not have, or another error.\n";

#define CMD "trace"

typedef struct trace {
	/* what was asked */
	const char *spec;
	kiln_split split;
	bool by_record;
	uint64_t record, line;
	const char *want_shard;
	/* what was found */
	kiln_manifest *m;
	kiln_version v;
	bool found;
	uint64_t before; /* records of the split's shards before this one */
	char hash[65];
	uint64_t bytes, raw_bytes, records;
	kiln_source_range *sources;
	size_t source_count;
	char added[41];
	char **versions;
	size_t version_count;
	kiln_json_scanner *scanner; /* for shard lines */
	/* the origin (with --pipeline) */
	kiln_buf text; /* the curated line, never printed */
	bool have_origin;
	char *origin_topic, *origin_file, *origin_key;
	int32_t origin_partition;
	int64_t origin_offset;
} trace;

static void trace_free(trace *t)
{
	for (size_t i = 0; i < t->source_count; i++)
		free((char *)t->sources[i].topic);
	free(t->sources);
	for (size_t i = 0; i < t->version_count; i++)
		free(t->versions[i]);
	free(t->versions);
	kiln_buf_free(&t->text);
	free(t->origin_topic);
	free(t->origin_file);
	free(t->origin_key);
	kiln_manifest_close(t->m);
	kiln_json_scanner_free(t->scanner);
}

/* ---- the shard and line ---------------------------------------------------- */

static int keep_shard(trace *t, const kiln_shard_entry *e)
{
	memcpy(t->hash, e->hash, sizeof(t->hash));
	t->bytes = e->bytes;
	t->raw_bytes = e->raw_bytes;
	t->records = e->records;
	if (e->source_count && !(t->sources = calloc(e->source_count, sizeof(*t->sources))))
		return kiln_error_oom(NULL);
	for (size_t i = 0; i < e->source_count; i++) {
		t->sources[i] = e->sources[i];
		if (!(t->sources[i].topic = strdup(e->sources[i].topic)))
			return kiln_error_oom(NULL);
		t->source_count = i + 1;
	}
	t->found = true;
	return 1;
}

/* The walk `kiln cat` makes: the split's shards in hash order. */
static int on_split_shard(void *ctx, const kiln_shard_entry *e)
{
	trace *t = ctx;

	if (t->record < t->before + e->records) {
		t->line = t->record - t->before;
		return keep_shard(t, e);
	}
	t->before += e->records;
	return 0;
}

static int on_any_shard(void *ctx, const kiln_shard_entry *e)
{
	trace *t = ctx;

	return strcmp(e->hash, t->want_shard) == 0 ? keep_shard(t, e) : 0;
}

static int find_record(trace *t)
{
	int rc;

	if (t->by_record) {
		if ((rc = kiln_version_shards(t->m, &t->v, t->split, on_split_shard, t)) < 0)
			return rc;
		if (!t->found)
			return kiln_error_set(KILN_ENOTFOUND,
			                      "%s: %s holds %" PRIu64 " records, no record %" PRIu64, t->spec,
			                      kiln_split_name(t->split), t->before, t->record);
		return 0;
	}
	for (int s = 0; s < KILN_SPLIT_COUNT && !t->found; s++) {
		t->split = (kiln_split)s;
		if ((rc = kiln_version_shards(t->m, &t->v, t->split, on_any_shard, t)) < 0)
			return rc;
	}
	if (!t->found)
		return kiln_error_set(KILN_ENOTFOUND, "%s: no shard %s", t->spec, t->want_shard);
	if (t->line >= t->records)
		return kiln_error_set(KILN_ENOTFOUND,
		                      "%s: shard %s holds %" PRIu64 " lines, no line %" PRIu64, t->spec,
		                      t->hash, t->records, t->line);
	return 0;
}

/* ---- where the shard was added, which versions list it --------------------- */

/* Whether version v lists the shard: its fan-out file holds its line. */
static int lists_shard(trace *t, const kiln_version *v, bool *out)
{
	kiln_buf blob = KILN_BUF_INIT(0);
	char path[64], where[300], hash[65];
	const char *at, *end, *nl, *h;
	int rc;

	*out = false;
	snprintf(path, sizeof(path), "splits/%s/%.2s.jsonl", kiln_split_name(t->split), t->hash);
	snprintf(where, sizeof(where), "manifest: %s:%s", v->commit, path);
	if ((rc = kiln_version_read(t->m, v, path, &blob)) != 1)
		goto done;
	rc = 0;
	/* each line's hash read as the manifest codec reads it */
	for (at = blob.ptr, end = blob.ptr + blob.len; at < end && !*out && rc == 0;
	     at = nl < end ? nl + 1 : end) {
		if (!(nl = memchr(at, '\n', (size_t)(end - at))))
			nl = end;
		if (kiln_mfmt_shard_line_fast_hash(at, (size_t)(nl - at), hash))
			*out = strcmp(hash, t->hash) == 0;
		else if ((rc = kiln_mfmt_shard_line_hash(t->scanner, where, at, (size_t)(nl - at), t->hash,
		                                         &h)) == 0)
			*out = memcmp(h, t->hash, 64) == 0;
	}
done:
	kiln_buf_free(&blob);
	return rc < 0 ? rc : 0;
}

static int on_commit(void *ctx, const char *commit, int64_t time, const char *summary, const char *tags)
{
	trace *t = ctx;
	char spec[200];
	kiln_version v;
	bool listed;
	int rc;

	(void)time;
	(void)summary;
	(void)tags;
	snprintf(spec, sizeof(spec), "%s@%s", t->v.dataset, commit);
	if ((rc = kiln_version_resolve(t->m, spec, &v)) < 0 || (rc = lists_shard(t, &v, &listed)) < 0)
		return rc;
	if (listed)
		memcpy(t->added, commit,
		       sizeof(t->added)); /* newest first: the last one kept is the oldest */
	return 0;
}

static int find_versions(trace *t)
{
	char last[32], spec[200];
	unsigned long n;
	int rc;

	if (!t->scanner && !(t->scanner = kiln_json_scanner_new(NULL)))
		return kiln_error_oom(NULL);
	if ((rc = kiln_version_log(t->m, &t->v, 0, on_commit, t)) < 0 ||
	    (rc = kiln_promote_last_version(last, t->m, t->v.dataset)) <= 0)
		return rc;
	n = strtoul(last + 1, NULL, 10);
	for (unsigned long k = 1; k <= n; k++) {
		kiln_version v;
		bool listed;
		char **grown;

		snprintf(spec, sizeof(spec), "%s@v%lu", t->v.dataset, k);
		if ((rc = kiln_version_resolve(t->m, spec, &v)) == KILN_ENOTFOUND)
			continue;
		if (rc < 0 || (rc = lists_shard(t, &v, &listed)) < 0)
			return rc;
		if (!listed)
			continue;
		if (!(grown = realloc(t->versions, (t->version_count + 1) * sizeof(*grown))))
			return kiln_error_oom(NULL);
		t->versions = grown;
		if (!(t->versions[t->version_count] = strdup(spec + strlen(t->v.dataset) + 1)))
			return kiln_error_oom(NULL);
		t->version_count++;
	}
	return 0;
}

/* ---- the exact origin ------------------------------------------------------- */

typedef struct origin {
	trace *t;
	kiln_store *store;
	kiln_validator *validator;
	kiln_curator *curator;
	kiln_buf out;
	const kiln_source_range *range; /* being searched */
	const char *key;                /* the raw object being read; NULL for a file */
	int64_t seen;                   /* highest offset tried of the range (objects overlap) */
} origin;

/* Whether record[0..len) curates to the line. */
static bool curates_to_line(origin *o, const char *record, size_t len)
{
	kiln_report report;
	const char *split;
	size_t split_len;

	kiln_buf_reset(&o->out);
	kiln_curate_begin(o->curator, &o->out);
	if (kiln_validate_hook(o->validator, record, len, &report, kiln_curate_token, o->curator) != 0 ||
	    kiln_curate_end(o->curator, &split, &split_len) < 0)
		return false;
	return o->out.len == o->t->text.len && memcmp(o->out.ptr, o->t->text.ptr, o->out.len) == 0;
}

static int found_at(origin *o, const char *topic, int32_t partition, int64_t offset, const char *file)
{
	trace *t = o->t;

	t->have_origin = true;
	t->origin_partition = partition;
	t->origin_offset = offset;
	if (!(t->origin_topic = strdup(topic)) || (file && !(t->origin_file = strdup(file))) ||
	    (o->key && !(t->origin_key = strdup(o->key))))
		return kiln_error_oom(NULL);
	return 1;
}

static int on_raw_record(void *ctx, const kiln_raw_record *r)
{
	origin *o = ctx;

	if (r->offset < o->range->first || r->offset > o->range->last || r->offset <= o->seen ||
	    r->partition != o->range->partition || strcmp(r->topic, o->range->topic) != 0)
		return 0;
	o->seen = r->offset;
	if (r->null_value || !curates_to_line(o, r->value, r->value_len))
		return 0;
	return found_at(o, r->topic, r->partition, r->offset, NULL);
}

static int on_raw_object(void *ctx, const char *key, const char *topic, int32_t partition, int64_t first,
                         int64_t last)
{
	origin *o = ctx;

	(void)topic;
	(void)partition;
	if (last < o->range->first || first > o->range->last || last <= o->seen)
		return 0;
	o->key = key;
	return kiln_raw_read(o->store, key, on_raw_record, o);
}

/* A file source: lines first..last (offset = line number - 1) of the file
 * its lineage entry names. 1 found, 0 not, or an error. */
static int search_file(origin *o, const char *path, size_t max_line)
{
	kiln_line_reader *reader = NULL;
	kiln_instream *stream = NULL;
	kiln_line line;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return kiln_error_set(KILN_EIO, "%s: cannot be opened, the origin is not known", path);
	/* a directory source's file may be NAME.gz or NAME.zst: read as the run did */
	if (fstat(fd, &st) < 0)
		rc = kiln_error_set(KILN_EIO, "%s: stat: %s", path, strerror(errno));
	else if ((rc = kiln_instream_open(&stream, fd, (uint64_t)st.st_size, kiln_instream_kind_of(path),
	                                  path)) == 0)
		rc = kiln_line_reader_new_stream(&reader, kiln_instream_read, stream, max_line);
	if (rc < 0)
		goto done;
	while ((rc = kiln_line_reader_next(reader, &line)) > 0) {
		int64_t offset = (int64_t)line.number - 1;

		if (offset > o->range->last) {
			rc = 0; /* past the range, not found: the shard's next source is searched */
			break;
		}
		if (offset < o->range->first || line.too_long || !curates_to_line(o, line.ptr, line.len))
			continue;
		rc = found_at(o, o->range->topic, o->range->partition, offset, path);
		break;
	}
done:
	kiln_line_reader_free(reader);
	kiln_instream_free(stream);
	close(fd);
	return rc < 0 ? rc : rc > 0;
}

static int buf_sink(void *ctx, const void *data, size_t len)
{
	return kiln_buf_put(ctx, data, len);
}

/* The shard's line t->line into t->text: the shard read through the
 * verified fetch, then decompressed. */
static int read_line(trace *t, kiln_store *store)
{
	kiln_buf zst = KILN_BUF_INIT(0), jsonl = KILN_BUF_INIT(0);
	kiln_shard_request f = {.hash = t->hash, .bytes = t->bytes, .limit = t->bytes, .ctx = &zst};
	const char *at, *end, *nl;
	size_t n;
	int rc;

	f.sink = buf_sink;
	if ((rc = kiln_shard_fetch(store, &f)) < 0)
		goto done;
	if ((rc = kiln_buf_reserve(&jsonl, t->raw_bytes + 1)) < 0)
		goto done;
	n = ZSTD_decompress(jsonl.ptr, t->raw_bytes + 1, zst.ptr, zst.len);
	if (ZSTD_isError(n) || n != t->raw_bytes) {
		rc = kiln_error_set(KILN_EINVALID,
		                    "shard %s: not the %" PRIu64 " bytes of JSON Lines the manifest says",
		                    t->hash, t->raw_bytes);
		goto done;
	}
	at = jsonl.ptr;
	end = jsonl.ptr + n;
	for (uint64_t i = 0; i < t->line && at < end; i++)
		at = (nl = memchr(at, '\n', (size_t)(end - at))) ? nl + 1 : end;
	nl = at < end ? memchr(at, '\n', (size_t)(end - at)) : NULL;
	if (at >= end || !nl) {
		rc = kiln_error_set(KILN_EINVALID, "shard %s: has no line %" PRIu64, t->hash, t->line);
		goto done;
	}
	rc = kiln_buf_put(&t->text, at, (size_t)(nl - at));
done:
	kiln_buf_free(&zst);
	kiln_buf_free(&jsonl);
	return rc;
}

/* The file a file source read, from the version's lineage.json (NULL for
 * Kafka and stdin), into *out (the caller frees it). */
static int source_file(trace *t, const char *topic, int32_t partition, char **out)
{
	kiln_json_scanner *scanner = kiln_json_scanner_new(NULL);
	kiln_mfmt_lineage lin = {0};
	kiln_buf text = KILN_BUF_INIT(0);
	char where[300];
	ptrdiff_t i;
	int rc;

	*out = NULL;
	if (!scanner)
		return kiln_error_oom(NULL);
	snprintf(where, sizeof(where), "manifest: %s:lineage.json", t->spec);
	if ((rc = kiln_version_read(t->m, &t->v, "lineage.json", &text)) == 1 &&
	    (rc = kiln_mfmt_lineage_parse(scanner, where, text.ptr, text.len, &lin)) == 0 &&
	    (i = kiln_mfmt_lineage_find(&lin, topic, partition)) >= 0 && lin.v[i].path &&
	    strcmp(lin.v[i].path, "-") != 0 && !(*out = strdup(lin.v[i].path)))
		rc = kiln_error_oom(NULL);
	kiln_mfmt_lineage_free(&lin);
	kiln_buf_free(&text);
	kiln_json_scanner_free(scanner);
	return rc < 0 ? rc : 0;
}

/* The version's contract, the key, then each source range: 1 found, 0 not. */
static int find_origin(trace *t, const kiln_pipeline *p, kiln_store *store)
{
	kiln_json_scanner *scanner = kiln_json_scanner_new(NULL);
	kiln_mfmt_dataset ds = {0};
	kiln_buf text = KILN_BUF_INIT(0);
	kiln_contract *contract = NULL;
	kiln_key key = {0};
	bool key_loaded = false;
	origin o = {.t = t, .store = store, .out = KILN_BUF_INIT(0)};
	const kiln_contract_options copt = {.schema = p->schema};
	kiln_validator_options vo = {.limits = {.max_depth = p->max_depth, .max_bytes = p->max_record_bytes},
	                             .unknown_fields = p->unknown_fields};
	char where[300];
	int rc;

	if (!scanner)
		return kiln_error_oom(NULL);
	snprintf(where, sizeof(where), "manifest: %s:dataset.json", t->spec);
	if ((rc = read_line(t, store)) < 0 ||
	    (rc = kiln_version_read(t->m, &t->v, "dataset.json", &text)) < 0 ||
	    (rc == 1 && (rc = kiln_mfmt_dataset_parse(scanner, where, text.ptr, text.len, &ds)) < 0))
		goto done;
	kiln_buf_reset(&text);
	if ((rc = kiln_version_read(t->m, &t->v, "contract.yaml", &text)) <= 0) {
		if (rc == 0)
			rc = kiln_error_set(KILN_ENOTFOUND,
			                    "%s: the version has no contract.yaml to curate with", t->spec);
		goto done;
	}
	if ((rc = kiln_contract_load_buffer(&contract, "contract.yaml", text.ptr, text.len, &copt)) < 0)
		goto done;
	rc = p->key_file ? kiln_key_load_file(&key, p->key_file, p->key_version)
	                 : kiln_key_load_env(&key, p->key_env, p->key_version);
	if (rc < 0)
		goto done;
	key_loaded = true;
	if (ds.key_id && strcmp(ds.key_id, key.id) != 0) {
		rc = kiln_error_set(KILN_EINVALID, "%s: the pipeline's key (%s) is not the version's (%s)",
		                    t->spec, key.id, ds.key_id);
		goto done;
	}
	{
		kiln_curator_options co = {.contract = contract, .key = &key, .limits = vo.limits};

		if (!(o.validator = kiln_validator_new(contract, &vo)) ||
		    (rc = kiln_curator_new(&o.curator, &co)) < 0) {
			rc = o.validator ? rc : kiln_error_oom(NULL);
			goto done;
		}
	}
	rc = 0;
	for (size_t i = 0; i < t->source_count && rc == 0; i++) {
		char *file = NULL;

		o.range = &t->sources[i];
		o.seen = -1;
		o.key = NULL;
		if ((rc = source_file(t, o.range->topic, o.range->partition, &file)) < 0)
			break;
		/* the file as the run named it; else the pipeline's file of that source
		 * (a path relative to where that run was started) */
		if (file && access(file, R_OK) != 0 && p->source_path && p->source_name &&
		    strcmp(p->source_name, o.range->topic) == 0) {
			free(file);
			if (!(file = strdup(p->source_path))) {
				rc = kiln_error_oom(NULL);
				break;
			}
		}
		if (file)
			rc = search_file(&o, file, p->max_record_bytes);
		else
			rc = kiln_raw_list(store, o.range->topic, o.range->partition, on_raw_object, &o);
		free(file);
	}
done:
	if (key_loaded)
		kiln_key_wipe(&key);
	kiln_curator_free(o.curator);
	kiln_validator_free(o.validator);
	kiln_buf_free(&o.out);
	kiln_contract_free(contract);
	kiln_mfmt_dataset_free(&ds);
	kiln_buf_free(&text);
	kiln_json_scanner_free(scanner);
	return rc < 0 ? rc : rc > 0;
}

/* ---- output ----------------------------------------------------------------- */

static void print_text(const trace *t, bool exact)
{
	printf("version  %s %s\n", t->spec, t->v.commit);
	if (t->by_record)
		printf("record   %s %" PRIu64 "\n", kiln_split_name(t->split), t->record);
	printf("shard    %s line %" PRIu64 " (%s, %" PRIu64 " records)\n", t->hash, t->line,
	       kiln_split_name(t->split), t->records);
	for (size_t i = 0; i < t->source_count; i++)
		printf("source   %s/%" PRId32 " offsets %" PRId64 "-%" PRId64 "\n", t->sources[i].topic,
		       t->sources[i].partition, t->sources[i].first, t->sources[i].last);
	printf("added    %s\n", t->added[0] ? t->added : "not on the first-parent history of the version");
	printf("versions");
	for (size_t i = 0; i < t->version_count; i++)
		printf(" %s", t->versions[i]);
	printf("%s\n", t->version_count ? "" : " none");
	if (!exact) {
		printf("origin   one offset of the ranges above: the exact offset needs the key (--pipeline "
		       "FILE)\n");
	} else if (t->have_origin) {
		printf("origin   %s/%" PRId32 " offset %" PRId64, t->origin_topic, t->origin_partition,
		       t->origin_offset);
		if (t->origin_file)
			printf(" (line %" PRId64 " of %s)", t->origin_offset + 1, t->origin_file);
		printf("\nraw      %s\n",
		       t->origin_key ? t->origin_key : "none (a file source: the file is the origin)");
	}
}

static int put_json(kiln_buf *b, const trace *t, bool exact)
{
	int rc = kiln_buf_putc(b, '{');

	rc |= kiln_cli_json_version(b, &t->v);
	rc |= kiln_buf_printf(b, ",\"split\":\"%s\",\"record\":", kiln_split_name(t->split));
	rc |= t->by_record ? kiln_buf_printf(b, "%" PRIu64, t->record) : kiln_buf_puts(b, "null");
	rc |= kiln_buf_printf(b, ",\"shard\":\"%s\",\"line\":%" PRIu64 ",\"sources\":[", t->hash, t->line);
	for (size_t i = 0; i < t->source_count; i++) {
		rc |= kiln_buf_puts(b, i ? ",{\"topic\":" : "{\"topic\":");
		rc |= kiln_cli_json_string(b, t->sources[i].topic);
		rc |= kiln_buf_printf(
		    b, ",\"partition\":%" PRId32 ",\"first\":%" PRId64 ",\"last\":%" PRId64 "}",
		    t->sources[i].partition, t->sources[i].first, t->sources[i].last);
	}
	rc |= kiln_buf_puts(b, "],\"added\":");
	rc |= kiln_cli_json_string_or_null(b, t->added);
	rc |= kiln_buf_puts(b, ",\"versions\":[");
	for (size_t i = 0; i < t->version_count; i++) {
		rc |= i ? kiln_buf_putc(b, ',') : 0;
		rc |= kiln_cli_json_string(b, t->versions[i]);
	}
	rc |= kiln_buf_puts(b, "],\"origin\":");
	if (!exact || !t->have_origin) {
		rc |= kiln_buf_puts(b, "null");
	} else {
		rc |= kiln_buf_puts(b, "{\"topic\":");
		rc |= kiln_cli_json_string(b, t->origin_topic);
		rc |= kiln_buf_printf(b, ",\"partition\":%" PRId32 ",\"offset\":%" PRId64 ",\"line\":",
		                      t->origin_partition, t->origin_offset);
		rc |= t->origin_file ? kiln_buf_printf(b, "%" PRId64, t->origin_offset + 1)
		                     : kiln_buf_puts(b, "null");
		rc |= kiln_buf_puts(b, ",\"file\":");
		rc |= kiln_cli_json_string(b, t->origin_file);
		rc |= kiln_buf_puts(b, ",\"raw_key\":");
		rc |= kiln_cli_json_string(b, t->origin_key);
		rc |= kiln_buf_putc(b, '}');
	}
	return rc | kiln_buf_puts(b, "}\n");
}

/* ---- the command -------------------------------------------------------------- */

static int parse_split(const char *cmd, const char *arg, void *out)
{
	if (kiln_split_from_name(arg, out) < 0)
		return kiln_cli_fail(cmd, "--split wants train, dev or test, not '%s'", arg);
	return 0;
}

/* `kiln trace DATASET --subject ...`: every version, split and shard that
 * holds a subject, counts only: what `kiln erase --dry-run` shows. */
static int trace_subject(int argc, char **argv)
{
	char **args = calloc((size_t)argc + 2, sizeof(*args));
	int status;

	if (!args)
		return kiln_cli_fail("trace", "out of memory");
	for (int i = 0; i < argc; i++)
		args[i] = argv[i];
	args[argc] = "--dry-run";
	status = kiln_cmd_erase_as("trace", argc + 1, args);
	free(args);
	return status;
}

int kiln_cmd_trace(int argc, char **argv)
{
	trace t = {.split = KILN_SPLIT_TRAIN, .text = KILN_BUF_INIT(0)};
	const char *repo = NULL, *store_url = NULL, *pipeline_path = NULL;
	bool json = false, have_split = false, have_record = false, have_line = false;
	bool have_repo = false, have_store = false;
	const kiln_cli_option rows[] = {
	    {.name = "split",
	     .letter = 's',
	     .kind = KILN_CLI_CUSTOM,
	     .out = &t.split,
	     .seen = &have_split,
	     .parse = parse_split},
	    {.name = "record",
	     .letter = 'r',
	     .kind = KILN_CLI_U64,
	     .out = &t.record,
	     .seen = &have_record,
	     .bad = "--record wants a record number",
	     .max = UINT64_MAX},
	    {.name = "shard", .kind = KILN_CLI_STRING, .out = &t.want_shard},
	    {.name = "line",
	     .letter = 'l',
	     .kind = KILN_CLI_U64,
	     .out = &t.line,
	     .seen = &have_line,
	     .bad = "--line wants a line number",
	     .max = UINT64_MAX},
	    {.name = "pipeline", .letter = 'p', .kind = KILN_CLI_STRING, .out = &pipeline_path},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &json},
	    {.name = "manifest", .letter = 'm', .kind = KILN_CLI_MANIFEST, .out = &repo, .seen = &have_repo},
	    {.name = "store", .kind = KILN_CLI_STORE, .out = &store_url, .seen = &have_store},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = CMD,
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one DATASET[@REF] (see kiln trace --help)",
	};
	kiln_pipeline *p = NULL;
	kiln_store *store = NULL;
	kiln_buf out = KILN_BUF_INIT(0);
	int first, status, rc;

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--subject") == 0 || strncmp(argv[i], "--subject=", 10) == 0 ||
		    strcmp(argv[i], "--subjects") == 0 || strncmp(argv[i], "--subjects=", 11) == 0)
			return trace_subject(argc, argv);
	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	t.spec = argv[first];
	t.by_record = have_record;
	if (have_record == (t.want_shard != NULL) || (have_record && have_line) ||
	    (t.want_shard && (!have_line || have_split)) || (have_split && !have_record))
		return kiln_cli_fail(
		    CMD, "give --split S --record N, or --shard HASH --line N (see kiln trace --help)");
	if (t.want_shard && (strlen(t.want_shard) != 64 || strspn(t.want_shard, "0123456789abcdef") != 64))
		return kiln_cli_fail(CMD, "--shard wants a shard's 64 lower-case hex digits");
	status = KILN_EXIT_USAGE;
	if (pipeline_path) {
		if (kiln_pipeline_load(&p, pipeline_path, NULL, 0) < 0)
			goto fail;
		/* the pipeline's, unless given on the command line ($KILN_MANIFEST and
		 * $KILN_STORE are defaults, as the pipeline is) */
		repo = have_repo ? repo : p->manifest_repo;
		store_url = have_store ? store_url : p->store_url;
	}
	if (kiln_cli_need_manifest(CMD, repo) != 0)
		goto cleanup;
	if (kiln_version_open(&t.m, repo) < 0 || kiln_version_resolve(t.m, t.spec, &t.v) < 0 ||
	    find_record(&t) < 0 || find_versions(&t) < 0)
		goto fail;
	if (p) {
		if (kiln_cli_need_store(CMD, store_url) != 0)
			goto cleanup;
		fprintf(stderr, "kiln trace: restricted: the raw zone holds personal data\n");
		if (kiln_store_open(&store, store_url,
		                    p->store_url && strcmp(store_url, p->store_url) == 0 ? &p->store : NULL) <
		        0 ||
		    (rc = find_origin(&t, p, store)) < 0)
			goto fail;
	}
	if (json) {
		if (kiln_cli_write_buf(CMD, &out, put_json(&out, &t, p != NULL)) != 0)
			goto cleanup;
	} else {
		print_text(&t, p != NULL);
		if (fflush(stdout) != 0 || ferror(stdout)) {
			kiln_cli_fail(CMD, "stdout: write error");
			goto cleanup;
		}
	}
	if (p && !t.have_origin) {
		kiln_cli_fail(CMD,
		              "%s: no record of the shard's sources curates to %s line %" PRIu64
		              " (another key or contract, or the source changed since)",
		              t.spec, t.hash, t.line);
		status = KILN_EXIT_INVALID;
		goto cleanup;
	}
	status = KILN_EXIT_OK;
	goto cleanup;
fail:
	kiln_cli_fail(CMD, "%s", kiln_error_last());
cleanup:
	kiln_buf_free(&out);
	kiln_store_close(store);
	kiln_pipeline_free(p);
	trace_free(&t);
	return status;
}
