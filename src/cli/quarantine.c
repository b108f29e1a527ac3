/* `kiln quarantine ls|stats|cat|replay`: the quarantine
 * (src/shard/quarantine.h) of one dataset from the command line: one line
 * per rejected record with its reasons (ls), counts per code, path, object
 * and day (stats), the records themselves (cat), which hold personal data
 * and are shown only to a caller who can load the pipeline's
 * pseudonymisation key, and the records that pass the pipeline's contract
 * now committed and dropped from the quarantine (replay, with
 * ingest/quarantine_replay.h and erase/zones.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "cli/source.h"
#include "core/array.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "erase/zones.h"
#include "ingest/quarantine_replay.h"
#include "manifest/format.h"
#include "manifest/version.h"
#include "mask/key.h"
#include "shard/quarantine.h"
#include "store/store.h"

static const char usage_text[] =
    "usage: kiln quarantine ls DATASET[@BRANCH] [--code CODE] [--topic T] [--json]\n"
    "                          [--pipeline FILE | --store URL]\n"
    "       kiln quarantine stats DATASET[@BRANCH] [--code CODE] [--topic T]\n"
    "                          [--json] [--pipeline FILE | --store URL]\n"
    "       kiln quarantine cat DATASET[@BRANCH] --pipeline FILE [--code CODE]\n"
    "                          [--topic T] [--json]\n"
    "       kiln quarantine replay DATASET[@BRANCH] --pipeline FILE [--set K=V]...\n"
    "                          [--code CODE] [--dry-run] [--json]\n"
    "\n"
    "The quarantine holds every record a run rejected with its reasons, in\n"
    "objects under quarantine/<topic>/<partition>/<dataset>/<branch>/\n"
    "(docs/FORMATS.md). Objects of every branch of DATASET are read, or of\n"
    "BRANCH only; objects named before datasets were (no dataset or branch in\n"
    "the name) are read for any DATASET without @BRANCH.\n"
    "Records that the branch's quarantine-replayed.json lists (moved into its\n"
    "shards by a replay whose cleanup did not finish) are left out, when the\n"
    "manifest repository is known (--pipeline's, else $KILN_MANIFEST).\n"
    "\n"
    "ls prints one line per rejected record, never the record:\n"
    "  TOPIC PARTITION OFFSET CODE PATH COUNT KEY\n"
    "(CODE and PATH of the first violation, COUNT how many the record had, KEY\n"
    "the object; a PATH with spaces or unusual bytes is written as a JSON string).\n"
    "stats prints the records per code, per path, per object and per day (the\n"
    "day the object was written), and the totals.\n"
    "cat prints each record's quarantine line (docs/FORMATS.md), the raw record\n"
    "included. Quarantined records hold personal data: cat needs --pipeline and\n"
    "shows them only when the pipeline's key loads (its key file readable by\n"
    "you and by no one else, or its key_env variable set), and says so on\n"
    "stderr.\n"
    "replay runs the quarantined records of DATASET@BRANCH (default: the\n"
    "pipeline's branch) through the pipeline as it is now, after a contract fix:\n"
    "those that pass are pseudonymised, split and sharded as a run would and\n"
    "committed on the branch in one snapshot, whose quarantine-replayed.json\n"
    "lists them so that none is replayed twice; then their lines are dropped\n"
    "from the quarantine objects (an object left empty is deleted). Records that\n"
    "still fail, and records kept without their bytes, stay as they are. A rerun\n"
    "first drops the lines of records the branch lists (a replay killed after\n"
    "its commit), then replays only what is not listed; with nothing that\n"
    "passes it commits nothing and says \"nothing to replay\". --dry-run counts\n"
    "per code what would pass and what would stay, and writes nothing. See\n"
    "docs/REPLAY.md.\n"
    "\n"
    "With --json, one JSON document on stdout (docs/JSON.md), with \"dataset\"\n"
    "and \"branch\" (null without @BRANCH):\n"
    "  ls:    \"records\": [{\"key\", \"topic\", \"partition\", \"offset\", \"code\",\n"
    "         \"path\", \"count\"}, ...], \"total\", \"objects\"\n"
    "  stats: \"total\", \"objects\", \"by_code\": {CODE: N}, \"by_path\": {PATH: N},\n"
    "         \"by_object\": [{\"key\", \"records\", \"bytes\", \"mtime\",\n"
    "         \"mtime_unix\"}, ...], \"by_day\": {\"YYYY-MM-DD\": N}\n"
    "  cat:   \"records\": [LINE, ...], \"total\", \"objects\"\n"
    "  replay: \"commit\" (null: none), \"dry_run\", \"replayed\", \"stayed\",\n"
    "         \"replayed_by_code\": {CODE: N}, \"stayed_by_code\": {CODE: N},\n"
    "         \"listed\", \"objects_rewritten\", \"objects_deleted\"\n"
    "\n"
    "Options:\n"
    "  -c, --code CODE       only records whose first violation has this code\n"
    "                        (json_syntax, type, pattern, missing_required, ...)\n"
    "  -t, --topic T         only this topic (a file source's source.name)\n"
    "  -p, --pipeline FILE   the store (with its S3 options) and, for cat, the key;\n"
    "                        for replay the whole pipeline (contract, key, manifest)\n"
    "      --set KEY=VALUE   replay: override a pipeline value\n"
    "  -n, --dry-run         replay: count what would pass and stay, write nothing\n"
    "  -s, --store URL       the object store (default: $KILN_STORE)\n"
    "  -j, --json            one JSON document\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on success (replay: also when nothing passes), 1 when a\n"
    "concurrent replay committed some of the same records first (replay: nothing\n"
    "committed; run it again), 2 on a usage error, a key that does not load\n"
    "(cat, replay), a store or manifest error or a corrupt object (the message\n"
    "names the key and line).\n";

typedef enum q_mode { Q_LS, Q_STATS, Q_CAT } q_mode;

/* A path and its records (stats), in an open-addressing table. */
typedef struct q_path {
	char *path; /* NULL: free slot */
	uint64_t records;
} q_path;

typedef struct q_day {
	int64_t day; /* days since the epoch; -1: the store cannot date it */
	uint64_t records;
} q_day;

typedef struct q_cmd {
	q_mode mode;
	const char *cmd; /* "quarantine ls" */
	char dataset[KILN_MFMT_NAME_MAX + 1];
	const char *branch; /* NULL: every branch */
	const char *topic;  /* NULL: every topic */
	int code;           /* -1: every code */
	bool json;
	kiln_store *store;
	const kiln_quarantine_object *obj; /* the object being read */
	kiln_buf out;                      /* the line or document part being written */
	uint64_t total, objects, obj_records;
	/* stats */
	uint64_t by_code[KILN_REJECT_COUNT_];
	q_path *paths;
	size_t path_cap, path_n;
	q_day *days;
	size_t day_n, day_cap;
	kiln_buf by_object; /* stats: the text or JSON of the objects so far */
	/* the replay list of the object's branch: records it holds are in a
	 * shard (a replay's cleanup did not finish) and are not shown */
	kiln_manifest *manifest; /* NULL: no repository known, nothing hidden */
	char *list_branch;       /* the branch `listed` is of, NULL: none loaded */
	kiln_replayed listed;
} q_cmd;

/* ---- writing -------------------------------------------------------------- */

/* A path as text: as it is when it has only printable ASCII other than
 * space, '"' and '\\', else as a JSON string. */
static int put_path(kiln_buf *b, const char *path)
{
	bool plain = *path != '\0';

	for (const char *p = path; *p && plain; p++)
		plain = *p > ' ' && *p < 0x7f && *p != '"' && *p != '\\';
	return plain ? kiln_buf_puts(b, path) : kiln_cli_json_string(b, path);
}

/* A list entry's ',' before all but the first. */
static int put_sep(q_cmd *c, uint64_t n)
{
	return n ? kiln_buf_putc(&c->out, ',') : 0;
}

static int ls_line(q_cmd *c, const kiln_quarantine_line *l)
{
	kiln_buf *b = &c->out;
	int rc = 0;

	if (c->json) {
		rc |= put_sep(c, c->total);
		rc |= kiln_buf_puts(b, "{\"key\":");
		rc |= kiln_cli_json_string(b, c->obj->key);
		rc |= kiln_buf_puts(b, ",\"topic\":");
		rc |= kiln_cli_json_string(b, l->topic);
		rc |= kiln_buf_printf(
		    b, ",\"partition\":%" PRId32 ",\"offset\":%" PRId64 ",\"code\":\"%s\",\"path\":",
		    l->partition, l->offset, kiln_reject_name(l->code));
		rc |= kiln_cli_json_string(b, l->path);
		rc |= kiln_buf_printf(b, ",\"count\":%" PRIu64 "}", l->count);
		return kiln_cli_put_buf(b, rc);
	}
	rc |= put_path(b, l->topic);
	rc |= kiln_buf_printf(b, " %" PRId32 " %" PRId64 " %s ", l->partition, l->offset,
	                      kiln_reject_name(l->code));
	rc |= put_path(b, l->path);
	rc |= kiln_buf_printf(b, " %" PRIu64 " %s\n", l->count, c->obj->key);
	return kiln_cli_put_buf(b, rc);
}

static int cat_line(q_cmd *c, const kiln_quarantine_line *l)
{
	int rc = 0;

	if (c->json && (rc = put_sep(c, c->total)) < 0)
		return rc;
	if ((rc = kiln_quarantine_render_line(&c->out, l)) < 0)
		return rc;
	if (c->json)
		c->out.len--; /* the '\n': an element of the array */
	return kiln_cli_put_buf(&c->out, 0);
}

/* ---- stats ---------------------------------------------------------------- */

static int count_path(q_cmd *c, const char *path)
{
	size_t i;

	if (2 * (c->path_n + 1) > c->path_cap) {
		size_t cap = c->path_cap ? 2 * c->path_cap : 64;
		q_path *v = calloc(cap, sizeof(*v));

		if (!v)
			return kiln_error_oom(NULL);
		for (size_t j = 0; j < c->path_cap; j++) {
			if (!c->paths[j].path)
				continue;
			for (i = kiln_json_hash(c->paths[j].path, strlen(c->paths[j].path)) & (cap - 1);
			     v[i].path; i = (i + 1) & (cap - 1))
				;
			v[i] = c->paths[j];
		}
		free(c->paths);
		c->paths = v;
		c->path_cap = cap;
	}
	for (i = kiln_json_hash(path, strlen(path)) & (c->path_cap - 1); c->paths[i].path;
	     i = (i + 1) & (c->path_cap - 1))
		if (strcmp(c->paths[i].path, path) == 0) {
			c->paths[i].records++;
			return 0;
		}
	if (!(c->paths[i].path = strdup(path)))
		return kiln_error_oom(NULL);
	c->paths[i].records = 1;
	c->path_n++;
	return 0;
}

static int day_cmp(const void *pa, const void *pb)
{
	const q_day *a = pa, *b = pb;

	return a->day < b->day ? -1 : a->day > b->day;
}

static int path_cmp(const void *pa, const void *pb)
{
	const q_path *a = pa, *b = pb;

	if (!a->path || !b->path)
		return !a->path - !b->path; /* free slots last */
	if (a->records != b->records)
		return a->records > b->records ? -1 : 1;
	return strcmp(a->path, b->path);
}

/* The object just read: its line of the per-object list and its day. */
static int count_object(q_cmd *c)
{
	const kiln_quarantine_object *o = c->obj;
	int64_t day = o->mtime > 0 ? o->mtime / 86400 : -1;
	kiln_buf *b = &c->by_object;
	size_t i;
	int rc = 0;

	if (!c->obj_records)
		return 0;
	for (i = 0; i < c->day_n && c->days[i].day != day; i++)
		;
	if (i == c->day_n) {
		if (KILN_ARRAY_GROW(c->days, c->day_cap, c->day_n, NULL) < 0)
			return KILN_ENOMEM;
		c->days[c->day_n++] = (q_day){day, 0};
	}
	c->days[i].records += c->obj_records;
	if (c->json) {
		rc |= kiln_buf_puts(b, b->len ? ",{\"key\":" : "{\"key\":");
		rc |= kiln_cli_json_string(b, o->key);
		rc |= kiln_buf_printf(b, ",\"records\":%" PRIu64 ",\"bytes\":%" PRIu64 ",", c->obj_records,
		                      o->size);
		if (o->mtime > 0)
			rc |= kiln_cli_json_time(b, "mtime", o->mtime);
		else
			rc |= kiln_buf_puts(b, "\"mtime\":null,\"mtime_unix\":null");
		rc |= kiln_buf_putc(b, '}');
	} else {
		rc |= kiln_buf_printf(b, "  %-10" PRIu64 " %s\n", c->obj_records, o->key);
	}
	return rc;
}

static void day_text(char out[16], int64_t day)
{
	time_t t = (time_t)(day * 86400);
	struct tm tm;

	if (day < 0 || !gmtime_r(&t, &tm) || !strftime(out, 16, "%Y-%m-%d", &tm))
		snprintf(out, 16, "undated");
}

static int print_stats(q_cmd *c)
{
	kiln_buf *b = &c->out;
	char day[16];
	int rc = 0, first = 1;

	if (c->path_cap)
		qsort(c->paths, c->path_cap, sizeof(*c->paths), path_cmp);
	qsort(c->days, c->day_n, sizeof(*c->days), day_cmp);
	if (c->json) {
		rc |= kiln_buf_printf(b, ",\"total\":%" PRIu64 ",\"objects\":%" PRIu64 ",\"by_code\":{",
		                      c->total, c->objects);
		for (int k = 1; k < KILN_REJECT_COUNT_; k++)
			if (c->by_code[k]) {
				rc |= kiln_buf_printf(b, "%s\"%s\":%" PRIu64, first ? "" : ",",
				                      kiln_reject_name((kiln_reject)k), c->by_code[k]);
				first = 0;
			}
		rc |= kiln_buf_puts(b, "},\"by_path\":{");
		for (size_t i = 0; i < c->path_n; i++) {
			rc |= kiln_buf_puts(b, i ? "," : "");
			rc |= kiln_cli_json_string(b, c->paths[i].path);
			rc |= kiln_buf_printf(b, ":%" PRIu64, c->paths[i].records);
		}
		rc |= kiln_buf_puts(b, "},\"by_object\":[");
		rc |= kiln_buf_put(b, c->by_object.ptr, c->by_object.len);
		rc |= kiln_buf_puts(b, "],\"by_day\":{");
		for (size_t i = 0; i < c->day_n; i++) {
			day_text(day, c->days[i].day);
			rc |= kiln_buf_printf(b, "%s\"%s\":%" PRIu64, i ? "," : "", day, c->days[i].records);
		}
		rc |= kiln_buf_puts(b, "}}\n");
		return kiln_cli_put_buf(b, rc);
	}
	rc |= kiln_buf_printf(b, "%s%s%s: %" PRIu64 " quarantined record%s in %" PRIu64 " object%s\n",
	                      c->dataset, c->branch ? "@" : "", c->branch ? c->branch : "", c->total,
	                      c->total == 1 ? "" : "s", c->objects, c->objects == 1 ? "" : "s");
	if (c->total) {
		rc |= kiln_buf_puts(b, "by code:\n");
		for (int k = 1; k < KILN_REJECT_COUNT_; k++)
			if (c->by_code[k])
				rc |= kiln_buf_printf(b, "  %-10" PRIu64 " %s\n", c->by_code[k],
				                      kiln_reject_name((kiln_reject)k));
		rc |= kiln_buf_puts(b, "by path:\n");
		for (size_t i = 0; i < c->path_n; i++) {
			rc |= kiln_buf_printf(b, "  %-10" PRIu64 " ", c->paths[i].records);
			rc |= put_path(b, c->paths[i].path);
			rc |= kiln_buf_putc(b, '\n');
		}
		rc |= kiln_buf_puts(b, "by object:\n");
		rc |= kiln_buf_put(b, c->by_object.ptr, c->by_object.len);
		rc |= kiln_buf_puts(b, "by day (written):\n");
		for (size_t i = 0; i < c->day_n; i++) {
			day_text(day, c->days[i].day);
			rc |= kiln_buf_printf(b, "  %-10" PRIu64 " %s\n", c->days[i].records, day);
		}
	}
	return kiln_cli_put_buf(b, rc);
}

/* ---- reading -------------------------------------------------------------- */

static int on_line(void *ctx, const kiln_quarantine_line *l)
{
	q_cmd *c = ctx;
	int rc;

	if ((c->code >= 0 && (int)l->code != c->code) || (c->topic && strcmp(l->topic, c->topic) != 0))
		return 0;
	if (c->obj->branch && kiln_replayed_has(&c->listed, l->topic, l->partition, l->offset))
		return 0;
	switch (c->mode) {
	case Q_LS:
		rc = ls_line(c, l);
		break;
	case Q_CAT:
		rc = cat_line(c, l);
		break;
	default:
		c->by_code[l->code]++;
		rc = count_path(c, l->path);
		break;
	}
	if (rc == 0) {
		c->total++;
		c->obj_records++;
	}
	return rc;
}

static int on_object(void *ctx, const kiln_quarantine_object *o)
{
	q_cmd *c = ctx;
	int rc;

	if (c->branch && (!o->branch || strcmp(o->branch, c->branch) != 0))
		return 0;
	if (c->manifest && o->branch && (!c->list_branch || strcmp(c->list_branch, o->branch) != 0)) {
		free(c->list_branch);
		kiln_replayed_free(&c->listed);
		if (!(c->list_branch = strdup(o->branch)))
			return kiln_error_oom(NULL);
		if ((rc = kiln_manifest_replayed(c->manifest, c->dataset, o->branch, &c->listed)) < 0)
			return rc;
	}
	c->obj = o;
	c->obj_records = 0;
	if ((rc = kiln_quarantine_read(c->store, o->key, on_line, c)) != 0)
		return rc;
	if (c->obj_records)
		c->objects++;
	return c->mode == Q_STATS ? count_object(c) : 0;
}

/* ---- the command ---------------------------------------------------------- */

static int parse_code(const char *cmd, const char *arg, void *out)
{
	kiln_reject code = kiln_reject_parse(arg, strlen(arg));
	kiln_buf names = KILN_BUF_INIT(0);
	int status;

	if (code != KILN_REJECT_COUNT_ && code != KILN_REJECT_NONE) {
		*(int *)out = (int)code;
		return 0;
	}
	for (int k = 1; k < KILN_REJECT_COUNT_; k++)
		kiln_buf_printf(&names, "%s%s", k > 1 ? ", " : "", kiln_reject_name((kiln_reject)k));
	status = kiln_cli_fail(cmd, "--code: no such rejection code (codes: %s)", names.ptr ? names.ptr : "");
	kiln_buf_free(&names);
	return status;
}

static int parse_topic(const char *cmd, const char *arg, void *out)
{
	if (!*arg || strchr(arg, '/'))
		return kiln_cli_fail(cmd, "--topic wants a topic name without '/'");
	*(const char **)out = arg;
	return 0;
}

/* DATASET[@BRANCH] into c: 0, or the exit status. */
static int parse_target(q_cmd *c, const char *arg)
{
	const char *at = strchr(arg, '@');
	size_t n = at ? (size_t)(at - arg) : strlen(arg);

	if (!kiln_mfmt_name_valid_n(arg, n) || (at && !kiln_mfmt_name_valid(at + 1)))
		return kiln_cli_fail(
		    c->cmd, "'%s' is not DATASET[@BRANCH] (names of a-z, 0-9, '.', '_', '-', at most %d)",
		    arg, KILN_MFMT_NAME_MAX);
	memcpy(c->dataset, arg, n);
	c->dataset[n] = '\0';
	c->branch = at ? at + 1 : NULL;
	return 0;
}

/* cat: loads the pipeline's key as kiln run does, and wipes it: whoever
 * can is shown the records. 0, or the exit status with the reason printed. */
static int check_key(q_cmd *c, const kiln_pipeline *p)
{
	kiln_key key;
	int rc;

	if (!p)
		return kiln_cli_fail(
		    c->cmd, "quarantined records hold personal data: cat shows them only with --pipeline "
		            "FILE, to whoever can load that pipeline's key");
	rc = p->key_file ? kiln_key_load_file(&key, p->key_file, p->key_version)
	                 : kiln_key_load_env(&key, p->key_env, p->key_version);
	if (rc < 0)
		return kiln_cli_fail(c->cmd, "quarantined records hold personal data; not shown: %s",
		                     kiln_error_last());
	kiln_key_wipe(&key);
	if (p->key_file)
		fprintf(stderr,
		        "kiln %s: quarantine records hold personal data; shown because you hold the key file "
		        "%s\n",
		        c->cmd, p->key_file);
	else
		fprintf(
		    stderr,
		    "kiln %s: quarantine records hold personal data; shown because you hold the key in $%s\n",
		    c->cmd, p->key_env);
	return 0;
}

/* The document's opening, --json. */
static int open_document(q_cmd *c)
{
	int rc = kiln_buf_puts(&c->out, "{\"dataset\":");

	rc |= kiln_cli_json_string(&c->out, c->dataset);
	rc |= kiln_buf_puts(&c->out, ",\"branch\":");
	rc |= kiln_cli_json_string(&c->out, c->branch);
	if (c->mode != Q_STATS)
		rc |= kiln_buf_puts(&c->out, ",\"records\":[");
	return kiln_cli_put_buf(&c->out, rc);
}

/* ---- replay ----------------------------------------------------------------- */

typedef struct replay_drop {
	const kiln_pipeline *p;
	const kiln_replayed *listed;
} replay_drop;

/* The lines the branch's replay list holds go from the objects a replay reads. */
static bool drop_replayed(void *ctx, const kiln_quarantine_object *obj, const kiln_quarantine_line *line)
{
	const replay_drop *d = ctx;

	if (!line)
		return kiln_quarantine_replay_reads(d->p, obj);
	return kiln_replayed_has(d->listed, line->topic, line->partition, line->offset);
}

static int put_codes(kiln_buf *b, const char *name, const uint64_t by_code[KILN_REJECT_COUNT_])
{
	int rc = kiln_buf_printf(b, ",\"%s\":{", name);
	bool first = true;

	for (int k = 1; k < KILN_REJECT_COUNT_; k++)
		if (by_code[k]) {
			rc |= kiln_buf_printf(b, "%s\"%s\":%" PRIu64, first ? "" : ",",
			                      kiln_reject_name((kiln_reject)k), by_code[k]);
			first = false;
		}
	return rc | kiln_buf_putc(b, '}');
}

static int replay_report(const kiln_pipeline *p, const kiln_quarantine_replay_result *r, bool dry_run,
                         bool json, const kiln_zone_stats *z)
{
	kiln_buf b = KILN_BUF_INIT(0);
	int rc = 0;

	if (json) {
		rc |= kiln_buf_puts(&b, "{\"dataset\":");
		rc |= kiln_cli_json_string(&b, p->dataset);
		rc |= kiln_buf_puts(&b, ",\"branch\":");
		rc |= kiln_cli_json_string(&b, p->branch);
		rc |= kiln_buf_puts(&b, ",\"commit\":");
		rc |= kiln_cli_json_string_or_null(&b, r->run.commit[0] ? r->run.commit : NULL);
		rc |= kiln_buf_printf(
		    &b, ",\"dry_run\":%s,\"replayed\":%" PRIu64 ",\"stayed\":%" PRIu64 ",\"listed\":%" PRIu64,
		    dry_run ? "true" : "false", r->passed_total, r->stay_total, r->listed.count);
		rc |= put_codes(&b, "replayed_by_code", r->passed);
		rc |= put_codes(&b, "stayed_by_code", r->stay);
		rc |= kiln_buf_printf(&b,
		                      ",\"objects_rewritten\":%" PRIu64 ",\"objects_deleted\":%" PRIu64 "}\n",
		                      z->rewritten, z->deleted);
		goto done;
	}
	if (dry_run) {
		rc |= kiln_buf_printf(&b,
		                      "%s@%s: %" PRIu64 " quarantined record%s would pass, %" PRIu64
		                      " would stay (dry run: nothing written)\n",
		                      p->dataset, p->branch, r->passed_total, r->passed_total == 1 ? "" : "s",
		                      r->stay_total);
	} else if (r->run.commit[0]) {
		rc |= kiln_buf_printf(&b,
		                      "%s@%.12s: %" PRIu64 " record%s replayed from the quarantine in %zu "
		                      "shard%s, %" PRIu64 " stay quarantined\n",
		                      p->dataset, r->run.commit, r->passed_total,
		                      r->passed_total == 1 ? "" : "s", r->run.shards,
		                      r->run.shards == 1 ? "" : "s", r->stay_total);
		rc |= kiln_buf_printf(&b, "version: %s (refs/heads/%s/%s)\n", r->run.commit, p->dataset,
		                      p->branch);
	} else {
		rc |= kiln_buf_printf(
		    &b, "%s@%s: nothing to replay (%" PRIu64 " quarantined record%s still fail)\n",
		    p->dataset, p->branch, r->stay_total, r->stay_total == 1 ? "" : "s");
	}
	if (r->passed_total || r->stay_total) {
		rc |= kiln_buf_puts(&b, "by code (as quarantined): pass stay\n");
		for (int k = 1; k < KILN_REJECT_COUNT_; k++)
			if (r->passed[k] || r->stay[k])
				rc |= kiln_buf_printf(&b, "  %-20s %-10" PRIu64 " %" PRIu64 "\n",
				                      kiln_reject_name((kiln_reject)k), r->passed[k],
				                      r->stay[k]);
	}
	if (z->rewritten || z->deleted)
		rc |= kiln_buf_printf(&b,
		                      "quarantine: %" PRIu64 " replayed line%s dropped (%" PRIu64
		                      " object%s rewritten, %" PRIu64 " deleted)\n",
		                      z->records, z->records == 1 ? "" : "s", z->rewritten,
		                      z->rewritten == 1 ? "" : "s", z->deleted);
done:
	rc = kiln_cli_put_buf(&b, rc);
	kiln_buf_free(&b);
	return rc;
}

/* `kiln quarantine replay`: argv[0] is "replay". */
static int replay_cmd(int argc, char **argv)
{
	static const char cmd[] = "quarantine replay";
	q_cmd c = {.cmd = cmd, .code = -1};
	kiln_cli_sets sets = {0};
	const char *pipeline_file = NULL;
	kiln_quarantine_replay_options o = {.code = -1};
	const kiln_cli_option rows[] = {
	    {.name = "code", .letter = 'c', .kind = KILN_CLI_CUSTOM, .out = &o.code, .parse = parse_code},
	    {.name = "pipeline", .letter = 'p', .kind = KILN_CLI_STRING, .out = &pipeline_file},
	    {.name = "set", .kind = KILN_CLI_SETS, .out = &sets},
	    {.name = "dry-run", .letter = 'n', .kind = KILN_CLI_FLAG, .out = &o.dry_run},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &c.json},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {.cmd = cmd,
	                            .usage = usage_text,
	                            .rows = rows,
	                            .min_args = 1,
	                            .max_args = 1,
	                            .args_error =
	                                "expected one DATASET[@BRANCH] (see kiln quarantine --help)"};
	kiln_pipeline *p = NULL;
	kiln_store *store = NULL;
	kiln_quarantine_replay_result r = {0};
	kiln_zone_stats z = {0};
	char **setv = NULL, *branch_set = NULL;
	int first, status, rc;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (parse_target(&c, argv[first]) != 0)
		goto cleanup;
	if (!pipeline_file) {
		kiln_cli_fail(cmd, "--pipeline FILE is required: its contract decides what passes now");
		goto cleanup;
	}
	/* @BRANCH is the pipeline's branch, as --set branch=BRANCH would make it */
	if (!(setv = calloc(sets.n + 2, sizeof(*setv))) ||
	    (c.branch && !(branch_set = malloc(strlen(c.branch) + sizeof("branch="))))) {
		kiln_cli_fail(cmd, "out of memory");
		goto cleanup;
	}
	if (branch_set)
		sprintf(branch_set, "branch=%s", c.branch);
	for (size_t i = 0; i < sets.n; i++)
		setv[i] = sets.v[i];
	if (branch_set)
		setv[sets.n] = branch_set;
	if (kiln_pipeline_load(&p, pipeline_file, setv, sets.n + (branch_set ? 1 : 0)) < 0) {
		kiln_cli_fail(cmd, "%s", kiln_error_last());
		goto cleanup;
	}
	if (strcmp(p->dataset, c.dataset) != 0) {
		kiln_cli_fail(cmd, "%s: the pipeline's dataset is %s, not %s", pipeline_file, p->dataset,
		              c.dataset);
		goto cleanup;
	}
	if ((rc = kiln_quarantine_replay_run(p, &o, &r)) < 0) {
		kiln_cli_fail(cmd, "%s", kiln_error_last());
		if (rc == KILN_EFENCED)
			status = KILN_EXIT_INVALID;
		goto cleanup;
	}
	/* the lines of every record the branch lists go, this run's and those a
	 * killed run committed without dropping them */
	if (!o.dry_run && r.listed.count) {
		replay_drop d = {.p = p, .listed = &r.listed};

		if (kiln_store_open(&store, p->store_url, &p->store) < 0 ||
		    kiln_zone_drop_quarantine_lines(store, p->dataset, drop_replayed, &d, false, &z) < 0) {
			kiln_cli_fail(
			    cmd, "%s%s",
			    r.run.commit[0]
			        ? "committed, but the quarantine was not cleaned up (run it again): "
			        : "",
			    kiln_error_last());
			goto cleanup;
		}
	}
	if (replay_report(p, &r, o.dry_run, c.json, &z) != 0 || fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail(cmd, "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_store_close(store);
	kiln_quarantine_replay_result_free(&r);
	kiln_pipeline_free(p);
	free(branch_set);
	free(setv);
	free(sets.v);
	return status;
}

int kiln_cmd_quarantine(int argc, char **argv)
{
	q_cmd c = {.code = -1, .out = KILN_BUF_INIT(0), .by_object = KILN_BUF_INIT(0)};
	const char *store_url = NULL, *pipeline_file = NULL;
	const kiln_cli_option rows[] = {
	    {.name = "code", .letter = 'c', .kind = KILN_CLI_CUSTOM, .out = &c.code, .parse = parse_code},
	    {.name = "topic", .letter = 't', .kind = KILN_CLI_CUSTOM, .out = &c.topic, .parse = parse_topic},
	    {.name = "pipeline", .letter = 'p', .kind = KILN_CLI_STRING, .out = &pipeline_file},
	    {.name = "store", .letter = 's', .kind = KILN_CLI_STRING, .out = &store_url},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &c.json},
	    KILN_CLI_END,
	};
	kiln_cli_spec spec = {.usage = usage_text,
	                      .rows = rows,
	                      .min_args = 1,
	                      .max_args = 1,
	                      .args_error = "expected one DATASET[@BRANCH] (see kiln quarantine --help)"};
	kiln_cli_source src = {.store_only = true};
	int first, rc = 0, status;

	if (argc < 2)
		return kiln_cli_fail("quarantine",
		                     "expected ls, stats, cat or replay (see kiln quarantine --help)");
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage_text, stdout);
		return KILN_EXIT_OK;
	}
	if (strcmp(argv[1], "replay") == 0)
		return replay_cmd(argc - 1, argv + 1);
	if (strcmp(argv[1], "ls") == 0) {
		c.mode = Q_LS;
		spec.cmd = "quarantine ls";
	} else if (strcmp(argv[1], "stats") == 0) {
		c.mode = Q_STATS;
		spec.cmd = "quarantine stats";
	} else if (strcmp(argv[1], "cat") == 0) {
		c.mode = Q_CAT;
		spec.cmd = "quarantine cat";
	} else {
		return kiln_cli_fail("quarantine",
		                     "'%s' is not ls, stats, cat or replay (see kiln quarantine --help)",
		                     argv[1]);
	}
	c.cmd = spec.cmd;
	if ((status = kiln_cli_parse(&first, &spec, argc - 1, argv + 1)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (parse_target(&c, argv[first + 1]) != 0)
		return KILN_EXIT_USAGE;
	src.store_url = store_url;
	if (kiln_cli_source_resolve(c.cmd, &src, pipeline_file) != 0)
		goto cleanup;
	if (c.mode == Q_CAT && check_key(&c, src.pipeline) != 0)
		goto cleanup;
	if (kiln_store_open(&c.store, src.store_url, src.store_options) < 0) {
		kiln_cli_fail(c.cmd, "%s", kiln_error_last());
		goto cleanup;
	}
	/* the repository, when one is known, for the branches' replay lists */
	const char *repo = src.pipeline ? src.pipeline->manifest_repo : getenv("KILN_MANIFEST");
	if (repo && *repo && kiln_version_open(&c.manifest, repo) < 0)
		c.manifest = NULL; /* none there: no branch has replayed anything */
	if (c.json && (rc = open_document(&c)) != 0)
		goto write_error;
	if ((rc = kiln_quarantine_list(c.store, c.topic, c.dataset, on_object, &c)) != 0) {
		fflush(stdout);
		kiln_cli_fail(c.cmd, "%s", kiln_error_last());
		goto cleanup;
	}
	if (c.mode == Q_STATS)
		rc = print_stats(&c);
	else if (c.json)
		rc = kiln_cli_put_buf(
		    &c.out, kiln_buf_printf(&c.out, "],\"total\":%" PRIu64 ",\"objects\":%" PRIu64 "}\n",
		                            c.total, c.objects));
	if (rc == 0 && fflush(stdout) == 0 && !ferror(stdout)) {
		status = KILN_EXIT_OK;
		goto cleanup;
	}
write_error:
	kiln_cli_fail(c.cmd, "%s", rc < 0 ? kiln_error_last() : "stdout: write error");
cleanup:
	kiln_manifest_close(c.manifest);
	free(c.list_branch);
	kiln_replayed_free(&c.listed);
	kiln_store_close(c.store);
	kiln_cli_source_free(&src);
	kiln_buf_free(&c.out);
	kiln_buf_free(&c.by_object);
	for (size_t i = 0; i < c.path_cap; i++)
		free(c.paths[i].path);
	free(c.paths);
	free(c.days);
	return status;
}
