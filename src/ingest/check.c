/* kiln check's checks (see check.h): run's setup steps one at a time, the
 * probes, and the sample through the curate pool. */
#include "ingest/check.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/line_reader.h"
#include "ingest/curate_pool.h"
#include "ingest/curate_run.h"
#include "ingest/run_setup.h"
#include "ingest/source.h"
#include "mask/key.h"

#define SAMPLE_RECORDS 5

typedef struct checker {
	const kiln_pipeline *p;
	const kiln_check_options *o;
	kiln_run_setup s;
	int problems;
} checker;

static void say(checker *c, const char *check, kiln_check_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void say(checker *c, const char *check, kiln_check_status status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (status == KILN_CHECK_PROBLEM)
		c->problems++;
	c->o->report(c->o->ctx, check, status, msg);
}

/* Reports a setup step's outcome: ok with `ok_msg`, or the error it set. */
static bool step(checker *c, const char *check, int rc, const char *ok_msg)
{
	if (rc < 0) {
		say(c, check, KILN_CHECK_PROBLEM, "%s", kiln_error_last());
		return false;
	}
	say(c, check, KILN_CHECK_OK, "%s", ok_msg);
	return true;
}

/* With dedup: its keys, window and bound appended to the contract line
 * (each key path was found in the contract as a scalar). */
static void dedup_said(const kiln_pipeline *p, char *msg, size_t cap, size_t n)
{
	if (!p->dedup_key_count || n >= cap)
		return;
	n += (size_t)snprintf(msg + n, cap - n, "; dedup key");
	for (size_t i = 0; i < p->dedup_key_count && n < cap; i++)
		n += (size_t)snprintf(msg + n, cap - n, "%s%s", i ? ", " : " ", p->dedup_keys[i]);
	if (n < cap)
		snprintf(msg + n, cap - n, ", window %llds, max_keys %zu",
		         (long long)(p->dedup_window_ms / 1000), p->dedup_max_keys);
}

static bool check_contract(checker *c)
{
	char msg[600];
	int rc = kiln_run_setup_contract(&c->s);
	const kiln_contract *k = c->s.contract;

	if (rc == 0) {
		size_t n =
		    (size_t)snprintf(msg, sizeof(msg), "%s: %s %s, schema %s, %u fields; split key %s",
		                     k->file, k->id ? k->id : "?", k->version ? k->version : "?",
		                     k->schema_name ? k->schema_name : "?", k->field_count, c->p->split_key);
		dedup_said(c->p, msg, sizeof(msg), n);
	}
	return step(c, "contract", rc, msg);
}

static bool check_keys(checker *c)
{
	const kiln_pipeline *p = c->p;
	char msg[600];
	int rc = kiln_run_setup_keys(&c->s);

	if (rc == 0)
		snprintf(msg, sizeof(msg), "pseudonymisation key from %s %s: %s, version %u%s%s",
		         p->key_file ? "key_file" : "key_env", p->key_file ? p->key_file : p->key_env,
		         c->s.key.id, p->key_version,
		         p->signing_key_file ? "; signing key " : "; commits unsigned",
		         p->signing_key_file ? p->signing_key_file : "");
	return step(c, "keys", rc, msg);
}

/* The nearest folder above path that exists, and whether a folder can be
 * made in it: tried (made and removed at once), since access(2) says yes
 * to root on any folder, /proc included. */
static bool parent_writable(const char *path, char *out, size_t cap)
{
	char *dup = strdup(path);
	char *dir = dup;
	bool ok = false;

	while (dup) {
		dir = dirname(dir);
		if (access(dir, F_OK) == 0) {
			char probe[PATH_MAX];

			snprintf(out, cap, "%s", dir);
			if ((size_t)snprintf(probe, sizeof(probe), "%s/.kiln-check-XXXXXX", dir) <
			        sizeof(probe) &&
			    mkdtemp(probe)) {
				rmdir(probe);
				ok = true;
			}
			break;
		}
		if (strcmp(dir, "/") == 0 || strcmp(dir, ".") == 0)
			break;
	}
	free(dup);
	return ok;
}

/* A folder kiln run creates when it is missing: 1 when it exists, 0 when
 * the folder above it can hold it, -1 (a problem) when not; reported
 * unless it exists. */
static int exists_or_creatable(checker *c, const char *check, const char *path, const char *shown)
{
	char dir[512] = "";

	if (access(path, F_OK) == 0)
		return 1;
	if (parent_writable(path, dir, sizeof(dir))) {
		say(c, check, KILN_CHECK_OK, "%s does not exist yet: the first run creates it", shown);
		return 0;
	}
	say(c, check, KILN_CHECK_PROBLEM,
	    "%s does not exist and cannot be created: %s is not a writable folder", shown,
	    dir[0] ? dir : "no folder above it");
	return -1;
}

/* The store answers a HEAD of a key no run writes. A file store's folder
 * is not opened (opening makes it) when it does not exist yet. */
static void check_store(checker *c)
{
	const char *url = c->p->store_url;
	uint64_t size;
	char msg[600];
	int rc;

	if (strncmp(url, "file://", 7) == 0 && exists_or_creatable(c, "store", url + 7, url) < 1)
		return;
	if ((rc = kiln_run_setup_store(&c->s)) == 0 &&
	    (rc = kiln_store_stat(c->s.store, "kiln-check-probe", &size)) >= 0)
		snprintf(msg, sizeof(msg), "%s answers", c->s.store->url);
	step(c, "store", rc < 0 ? rc : 0, msg);
}

/* Opens the repository when it exists (fetching manifest.remote as a run
 * does): 1. A missing one is fine when its folder can be made: 0. A
 * problem: -1. */
static int check_manifest(checker *c)
{
	const kiln_pipeline *p = c->p;
	char msg[600];
	int rc = exists_or_creatable(c, "manifest", p->manifest_repo, p->manifest_repo);

	if (rc < 1)
		return rc;
	snprintf(msg, sizeof(msg), "%s opens%s%s", p->manifest_repo,
	         p->manifest_remote ? "; fetched from " : "", p->manifest_remote ? p->manifest_remote : "");
	return step(c, "manifest", kiln_run_setup_manifest(&c->s), msg) ? 1 : -1;
}

static void check_definition(checker *c)
{
	const kiln_pipeline *p = c->p;
	kiln_buf probe = KILN_BUF_INIT(0);
	char msg[600];
	int found = kiln_manifest_read(c->s.manifest, p->dataset, p->branch, "dataset.json", &probe);

	kiln_buf_free(&probe);
	if (found < 0) {
		say(c, "branch", KILN_CHECK_PROBLEM, "%s", kiln_error_last());
		return;
	}
	if (found == 0)
		snprintf(msg, sizeof(msg), "%s/%s does not exist yet: the first run creates it", p->dataset,
		         p->branch);
	else
		snprintf(msg, sizeof(msg),
		         "%s/%s was made with the same key, split and contract (or a compatible change)",
		         p->dataset, p->branch);
	step(c, "branch", kiln_run_setup_definition(&c->s), msg);
}

static void source_said(void *ctx, const char *check, bool ok, const char *message)
{
	say(ctx, check, ok ? KILN_CHECK_OK : KILN_CHECK_PROBLEM, "%s", message);
}

/* The row's settings, then its probe (a file is readable, the brokers
 * answer and list the topics). */
static void check_source(checker *c)
{
	const kiln_pipeline *p = c->p;

	if (kiln_source_check_settings(p) < 0) {
		say(c, p->source->check_name ? p->source->check_name : "source", KILN_CHECK_PROBLEM, "%s",
		    kiln_error_last());
		return;
	}
	if (p->source->check)
		p->source->check(p, c->o->broker_timeout_ms, source_said, c);
}

/* ---- the sample ------------------------------------------------------------ */

typedef struct sample_run {
	checker *c;
	uint64_t first_line;
} sample_run;

/* Reports a processed batch's records in input order. */
static int sample_consume(void *ctx, kiln_batch *b)
{
	sample_run *sr = ctx;
	const kiln_check_options *o = sr->c->o;
	size_t at[KILN_SPLIT_COUNT] = {0}, next[KILN_SPLIT_COUNT] = {0}, r = 0;

	for (size_t i = 0; i < b->count; i++) {
		int s;

		if (r < b->reject_count && b->rejects[r].index == i) {
			o->sample(o->ctx, sr->first_line + i, NULL, 0, KILN_SPLIT_TRAIN,
			          &b->rejects[r].report);
			r++;
			continue;
		}
		for (s = 0; s < KILN_SPLIT_COUNT; s++)
			if (next[s] < b->out_count[s] && b->out_index[s][next[s]] == i)
				break;
		if (s == KILN_SPLIT_COUNT)
			return kiln_error_set(KILN_EIO, "sample record %zu: neither curated nor rejected",
			                      i + 1);
		/* the curated line without its newline */
		o->sample(o->ctx, sr->first_line + i, b->out[s].ptr + at[s], b->out_len[s][next[s]] - 1,
		          (kiln_split)s, NULL);
		at[s] += b->out_len[s][next[s]];
		next[s]++;
	}
	return 0;
}

static void check_sample(checker *c)
{
	const kiln_pipeline *p = c->p;
	const char *path = c->o->sample_path;
	size_t max = c->o->sample_records ? c->o->sample_records : SAMPLE_RECORDS;
	sample_run sr = {.c = c, .first_line = 1};
	kiln_curate_pool_options po = {
	    .pipeline = p,
	    .contract = c->s.contract,
	    .key = &c->s.key,
	    .splitter = &c->s.splitter,
	    .split_field = c->s.split_field,
	    .workers = 1,
	    .consume = sample_consume,
	    .ctx = &sr,
	};
	kiln_curate_pool *pool = NULL;
	kiln_line_reader *reader = NULL;
	kiln_batch *b = NULL;
	uint64_t bytes = 0;
	int fd, rc;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		say(c, "sample", KILN_CHECK_PROBLEM, "%s: cannot open: %s", path, strerror(errno));
		return;
	}
	if ((rc = kiln_line_reader_new(&reader, fd, p->max_record_bytes)) < 0 ||
	    (rc = kiln_curate_pool_new(&pool, &po)) < 0)
		goto done;
	if (!(b = kiln_curate_pool_batch(pool))) {
		rc = kiln_error_oom(NULL);
		goto done;
	}
	if ((rc = kiln_batch_fill_lines(b, reader, p->source_name ? p->source_name : "sample", 0, max,
	                                &bytes)) < 0)
		goto done;
	if (rc == 0) {
		kiln_curate_pool_recycle(pool, b);
		rc = kiln_error_set(KILN_EINVALID, "%s: no records", path);
		goto done;
	}
	rc = kiln_curate_pool_submit(pool, b);
	if (rc >= 0)
		rc = kiln_curate_pool_drain(pool);
done:
	if (rc < 0)
		say(c, "sample", KILN_CHECK_PROBLEM, "%s", kiln_error_last());
	kiln_curate_pool_free(pool);
	kiln_line_reader_free(reader);
	close(fd);
}

/* quarantine.max_ratio and retention, as a run and gc will apply them
 * (nothing when neither is set). */
static void check_zones(checker *c)
{
	const kiln_pipeline *p = c->p;
	char ratio[64] = "quarantine.max_ratio none";

	if (p->quarantine_max_ratio > 0)
		snprintf(ratio, sizeof(ratio),
		         "quarantine.max_ratio %.3f (a snapshot over it commits nothing)",
		         p->quarantine_max_ratio);
	if (p->retention_raw || p->retention_quarantine)
		say(c, "zones", KILN_CHECK_OK,
		    "%s; retention raw %lld s, quarantine %lld s (0: kept; kiln gc --retention --apply "
		    "collects)",
		    ratio, (long long)p->retention_raw, (long long)p->retention_quarantine);
	else if (p->quarantine_max_ratio > 0)
		say(c, "zones", KILN_CHECK_OK, "%s; no retention (raw and quarantine kept)", ratio);
}

int kiln_check_pipeline(const kiln_pipeline *p, const kiln_check_options *o)
{
	checker c = {.p = p, .o = o};
	bool contract, keys;
	int manifest;

	c.s.p = p;
	contract = check_contract(&c);
	keys = check_keys(&c);
	check_store(&c);
	manifest = check_manifest(&c);
	if (manifest == 0)
		say(&c, "branch", KILN_CHECK_OK, "%s/%s does not exist yet: the first run creates it",
		    p->dataset, p->branch);
	else if (manifest < 0)
		say(&c, "branch", KILN_CHECK_SKIPPED, "needs the manifest repository");
	else if (!contract || !keys)
		say(&c, "branch", KILN_CHECK_SKIPPED, "needs the contract and the keys");
	else
		check_definition(&c);
	check_source(&c);
	check_zones(&c);
	if (o->sample_path) {
		if (contract && keys)
			check_sample(&c);
		else
			say(&c, "sample", KILN_CHECK_SKIPPED, "needs the contract and the keys");
	}
	kiln_run_setup_close(&c.s);
	return c.problems;
}
