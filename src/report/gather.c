/* What `kiln report` shows, read through the modules that own each part
 * (report.h): the version and its verdict (manifest/verify.h), its files
 * (manifest/promote.h's inputs), its profile and the drift against a
 * baseline (quality/), the quarantine per commit (each commit's stats.json)
 * and per code and path (shard/quarantine.h, given the store), the gates
 * (ingest/gates_run.h) or the quality rules of the version's own contract,
 * and the erasure ledger (manifest/ledger.h). Owns the kiln_report_doc. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "contract/quality.h"
#include "core/array.h"
#include "core/error.h"
#include "ingest/gates_run.h"
#include "manifest/ledger.h"
#include "manifest/replayed.h"
#include "report/report.h"
#include "shard/quarantine.h"

static void note(char *out, size_t size, const char *what)
{
	snprintf(out, size, "%s%s", what ? what : "", what ? ": " : "");
	snprintf(out + strlen(out), size - strlen(out), "%s", kiln_error_last());
}

static void collect_problem(void *ctx, const char *problem)
{
	kiln_buf *b = ctx;

	if (kiln_buf_puts(b, problem) < 0 || kiln_buf_putc(b, '\n') < 0)
		kiln_error_clear();
}

/* ---- the version's first-parent history ---------------------------------- */

typedef struct history_walk {
	kiln_report_doc *r;
	size_t cap;
} history_walk;

static int on_commit(void *ctx, const char *commit, int64_t time, const char *summary, const char *tags)
{
	history_walk *w = ctx;
	kiln_report_doc *r = w->r;
	kiln_report_commit *c;

	(void)summary;
	if (KILN_ARRAY_GROW(r->history, w->cap, r->history_n, "report") < 0)
		return KILN_ENOMEM;
	c = &r->history[r->history_n++];
	memset(c, 0, sizeof(*c));
	snprintf(c->commit, sizeof(c->commit), "%s", commit);
	snprintf(c->tags, sizeof(c->tags), "%s", tags);
	c->time = time;
	return 0;
}

/* stats.json of one commit of the version's dataset (all zero without one). */
static int commit_stats(kiln_manifest *m, const kiln_version *v, const char *commit, kiln_stats *out)
{
	kiln_version at = *v;
	kiln_buf text = KILN_BUF_INIT(0);
	char where[128];
	int rc;

	memset(out, 0, sizeof(*out));
	snprintf(at.commit, sizeof(at.commit), "%s", commit);
	at.tag[0] = '\0';
	snprintf(where, sizeof(where), "manifest: %.12s:stats.json", commit);
	if ((rc = kiln_version_read(m, &at, "stats.json", &text)) == 1)
		rc = kiln_stats_parse(text.ptr, text.len, where, out);
	kiln_buf_free(&text);
	return rc < 0 ? rc : 0;
}

/* Per commit what it added to valid and quarantined (its stats.json less
 * its parent's), newest first; one commit more is read than is shown, for
 * the oldest one's parent. */
static int read_history(kiln_report_doc *r, kiln_manifest *m, size_t max)
{
	history_walk w = {.r = r};
	kiln_stats now, parent;
	int rc;

	if ((rc = kiln_version_log(m, &r->version, max + 1, on_commit, &w)) < 0)
		return rc;
	if (r->history_n > max) {
		r->history_more = true;
		r->history_n = max;
	}
	if (r->history_n)
		snprintf(r->tags, sizeof(r->tags), "%s", r->history[0].tags);
	for (size_t i = 0; i < r->history_n; i++) {
		kiln_report_commit *c = &r->history[i];
		bool has_parent = i + 1 < r->history_n || r->history_more;
		const char *pc = i + 1 < r->history_n ? r->history[i + 1].commit : NULL;

		if ((rc = commit_stats(m, &r->version, c->commit, &now)) < 0)
			return rc;
		memset(&parent, 0, sizeof(parent));
		if (has_parent) {
			/* the commit past the window: the walk's extra entry */
			const char *p = pc ? pc : r->history[r->history_n].commit;

			if ((rc = commit_stats(m, &r->version, p, &parent)) < 0)
				return rc;
		}
		c->valid = now.valid > parent.valid ? now.valid - parent.valid : 0;
		c->quarantined =
		    now.quarantined > parent.quarantined ? now.quarantined - parent.quarantined : 0;
		for (int k = 0; k < KILN_REJECT_COUNT_; k++)
			c->by_code[k] = now.quarantined_by_code[k] > parent.quarantined_by_code[k]
			                    ? now.quarantined_by_code[k] - parent.quarantined_by_code[k]
			                    : 0;
	}
	return 0;
}

/* ---- the quarantine per code and path (the store) -------------------------- */

typedef struct qwalk {
	kiln_report_doc *r;
	kiln_manifest *m;
	kiln_store *store;
	const char *branch; /* NULL: every branch */
	const kiln_quarantine_object *obj;
	char *list_branch; /* the branch `listed` is of */
	kiln_replayed listed;
} qwalk;

static int count_qpath(kiln_report_doc *r, kiln_reject code, const char *path)
{
	kiln_report_qpath *q;

	for (size_t i = 0; i < r->qpaths_n; i++)
		if (r->qpaths[i].code == code && strcmp(r->qpaths[i].path, path) == 0) {
			r->qpaths[i].records++;
			return 0;
		}
	if (KILN_ARRAY_GROW(r->qpaths, r->qpaths_cap, r->qpaths_n, "report") < 0)
		return KILN_ENOMEM;
	q = &r->qpaths[r->qpaths_n];
	if (!(q->path = strdup(path)))
		return kiln_error_oom("report");
	q->code = code;
	q->records = 1;
	r->qpaths_n++;
	return 0;
}

static int on_qline(void *ctx, const kiln_quarantine_line *l)
{
	qwalk *w = ctx;

	if (w->obj->branch &&
	    kiln_replayed_has(&w->listed, w->obj->source, l->topic, l->partition, l->offset))
		return 0; /* in a shard: a replay whose cleanup did not finish */
	w->r->qpaths_total++;
	return count_qpath(w->r, l->code, l->path ? l->path : "");
}

static int on_qobject(void *ctx, const kiln_quarantine_object *o)
{
	qwalk *w = ctx;
	int rc;

	if (w->branch && (!o->branch || strcmp(o->branch, w->branch) != 0))
		return 0;
	if (o->branch && (!w->list_branch || strcmp(w->list_branch, o->branch) != 0)) {
		free(w->list_branch);
		kiln_replayed_free(&w->listed);
		if (!(w->list_branch = strdup(o->branch)))
			return kiln_error_oom("report");
		if ((rc = kiln_manifest_replayed(w->m, w->r->version.dataset, o->branch, &w->listed)) < 0)
			return rc;
	}
	w->obj = o;
	return kiln_quarantine_read(w->store, o->key, on_qline, w);
}

static int qpath_cmp(const void *pa, const void *pb)
{
	const kiln_report_qpath *a = pa, *b = pb;
	int c;

	if (a->records != b->records)
		return a->records > b->records ? -1 : 1;
	if ((c = strcmp(kiln_reject_name(a->code), kiln_reject_name(b->code))) != 0)
		return c;
	return strcmp(a->path, b->path);
}

/* The quarantine objects of the version's branch (of every branch of the
 * dataset for a tag or a commit), less what the branches' replay lists
 * hold: what `kiln quarantine stats` counts. A store that cannot be read
 * is a note, not an error. */
static int read_qpaths(kiln_report_doc *r, kiln_manifest *m, kiln_store *store)
{
	char prefix[KILN_MFMT_NAME_MAX + 16];
	qwalk w = {.r = r, .m = m, .store = store};
	int rc;

	snprintf(prefix, sizeof(prefix), "refs/heads/%s/", r->version.dataset);
	if (strncmp(r->version.ref, prefix, strlen(prefix)) == 0)
		w.branch = r->version.ref + strlen(prefix);
	rc = kiln_quarantine_list(store, NULL, r->version.dataset, on_qobject, &w);
	free(w.list_branch);
	kiln_replayed_free(&w.listed);
	if (rc == KILN_ENOMEM)
		return rc;
	if (rc < 0) {
		note(r->qpaths_note, sizeof(r->qpaths_note), "the quarantine could not be read");
		return 0;
	}
	if (r->qpaths_n > 1) /* none: qpaths is NULL, which qsort must not get */
		qsort(r->qpaths, r->qpaths_n, sizeof(*r->qpaths), qpath_cmp);
	r->qpaths_read = true;
	return 0;
}

/* ---- gates and quality rules --------------------------------------------- */

/* Without a pipeline: the quality rules of the contract the version was
 * curated under (its contract.yaml), against its profile. */
static int version_rules(kiln_report_doc *r, kiln_manifest *m)
{
	kiln_buf text = KILN_BUF_INIT(0);
	kiln_contract *contract = NULL;
	kiln_quality_rules rules = {0};
	kiln_contract_options copt = {.schema = r->in.definition.contract_schema};
	char name[400];
	int rc, q;

	snprintf(name, sizeof(name), "%s:contract.yaml", r->spec);
	if ((rc = kiln_version_read(m, &r->version, "contract.yaml", &text)) <= 0) {
		if (rc == 0)
			snprintf(r->gates_note, sizeof(r->gates_note),
			         "the version has no contract.yaml (made before kiln kept the contract)");
		goto done;
	}
	if ((rc = kiln_contract_load_buffer(&contract, name, text.ptr, text.len, &copt)) < 0 ||
	    (rc = kiln_quality_rules_load(&rules, contract)) < 0)
		goto done;
	if (!rules.count)
		goto done;
	if (!r->have_profile) {
		snprintf(r->gates_note, sizeof(r->gates_note),
		         "the contract's quality rules need the version's profile (%.400s)", r->profile_note);
		goto done;
	}
	if (!(r->gates = calloc(rules.count, sizeof(*r->gates)))) {
		rc = kiln_error_oom("report");
		goto done;
	}
	if ((q = kiln_gates_quality(&rules, &r->profile, &r->in.stats, r->gates)) < 0) {
		rc = q;
		goto done;
	}
	r->gates_n = (size_t)q;
	rc = 0;
done:
	if (rc < 0 && rc != KILN_ENOMEM) {
		note(r->gates_note, sizeof(r->gates_note), "quality rules");
		rc = 0;
	}
	kiln_quality_rules_free(&rules);
	kiln_contract_free(contract);
	kiln_buf_free(&text);
	return rc;
}

static int read_gates(kiln_report_doc *r, kiln_manifest *m, const kiln_pipeline *p)
{
	int rc;

	if (!p)
		return version_rules(r, m);
	if (strcmp(p->dataset, r->version.dataset) != 0) {
		snprintf(r->gates_note, sizeof(r->gates_note), "the pipeline is for dataset %s, not %s",
		         p->dataset, r->version.dataset);
		return 0;
	}
	if ((rc = kiln_gates_run(&r->gates, &r->gates_n, p, m, &r->version, &r->in, r->spec)) < 0) {
		if (rc == KILN_ENOMEM)
			return rc;
		note(r->gates_note, sizeof(r->gates_note), NULL);
		return 0;
	}
	r->gates_run = true;
	return 0;
}

/* ---- the erasure ledger --------------------------------------------------- */

static int on_erasure(void *ctx, const kiln_ledger_entry *e)
{
	kiln_report_doc *r = ctx;
	kiln_report_erasure *x;

	if (KILN_ARRAY_GROW(r->erasures, r->erasures_cap, r->erasures_n, "report") < 0)
		return KILN_ENOMEM;
	x = &r->erasures[r->erasures_n++];
	memset(x, 0, sizeof(*x));
	snprintf(x->id, sizeof(x->id), "%s", e->id);
	snprintf(x->signer, sizeof(x->signer), "%s", e->signer);
	x->time = e->time;
	x->refs = e->ref_count;
	x->commits = e->commit_count;
	x->shards = e->shard_count;
	memcpy(x->erased, e->erased, sizeof(x->erased));
	x->raw_records = e->raw.records;
	x->quarantine_records = e->quarantine.records;
	return 0;
}

/* ---- the whole report ------------------------------------------------------ */

/* The baseline: "REF" of the version's dataset, or "DATASET@REF". */
static int read_baseline(kiln_report_doc *r, kiln_manifest *m, const kiln_report_options *o)
{
	int rc;

	if (strchr(o->baseline, '@'))
		snprintf(r->baseline_spec, sizeof(r->baseline_spec), "%s", o->baseline);
	else
		snprintf(r->baseline_spec, sizeof(r->baseline_spec), "%s@%s", r->version.dataset,
		         o->baseline);
	if ((rc = kiln_version_resolve(m, r->baseline_spec, &r->baseline)) < 0)
		return rc;
	if (strcmp(r->baseline.dataset, r->version.dataset) != 0)
		return kiln_error_set(KILN_EINVALID, "--baseline %s: another dataset than %s", o->baseline,
		                      r->version.dataset);
	if ((rc = kiln_version_profile(m, &r->baseline, r->baseline_spec, &r->baseline_profile, NULL)) <= 0)
		return rc < 0 ? rc : kiln_error_last_code();
	if (!r->have_profile)
		return kiln_error_set(KILN_ENOTFOUND, "%s", r->profile_note);
	if ((rc = kiln_drift_compare(&r->drift, &r->baseline_profile, &r->profile, &r->thresholds)) < 0)
		return rc;
	r->have_baseline = true;
	return 0;
}

int kiln_report_gather(kiln_report_doc *r, kiln_manifest *m, const kiln_report_options *o)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->problems = (kiln_buf)KILN_BUF_INIT(0);
	snprintf(r->spec, sizeof(r->spec), "%s", o->spec);
	r->thresholds.psi = o->thresholds.psi > 0 ? o->thresholds.psi : KILN_DRIFT_PSI_DEFAULT;
	r->thresholds.null_rate =
	    o->thresholds.null_rate > 0 ? o->thresholds.null_rate : KILN_DRIFT_NULL_RATE_DEFAULT;
	r->keys_given = o->keys && o->keys->count;
	/* what kiln verify sees: a tag under another name is shown, not refused */
	if ((rc = kiln_version_lookup(m, o->spec, &r->version)) < 0 ||
	    (rc = kiln_verify_version(&r->verify, m, &r->version, o->spec, r->keys_given ? o->keys : NULL,
	                              NULL, collect_problem, &r->problems)) < 0 ||
	    (rc = kiln_promote_inputs_read(&r->in, m, &r->version, o->spec)) < 0)
		return rc;
	if ((rc = kiln_version_erasure_of(m, &r->version, &r->erasure)) < 0)
		return rc;
	r->have_erasure = rc == 1;
	if ((rc = kiln_version_profile(m, &r->version, o->spec, &r->profile, NULL)) < 0) {
		note(r->profile_note, sizeof(r->profile_note), NULL);
		kiln_profile_free(&r->profile);
		memset(&r->profile, 0, sizeof(r->profile));
	} else if (rc == 0) {
		note(r->profile_note, sizeof(r->profile_note), NULL);
	} else {
		r->have_profile = true;
	}
	if (o->baseline && (rc = read_baseline(r, m, o)) < 0)
		return rc;
	if ((rc = read_history(r, m, o->history ? o->history : KILN_REPORT_HISTORY_DEFAULT)) < 0)
		return rc;
	if (o->store) {
		if ((rc = read_qpaths(r, m, o->store)) < 0)
			return rc;
	} else {
		snprintf(r->qpaths_note, sizeof(r->qpaths_note),
		         "not read: give --store URL or --pipeline FILE (or set KILN_STORE)");
	}
	if ((rc = read_gates(r, m, o->pipeline)) < 0)
		return rc;
	return kiln_ledger_each(m, r->version.dataset, on_erasure, r);
}

void kiln_report_free(kiln_report_doc *r)
{
	if (!r)
		return;
	kiln_promote_inputs_free(&r->in);
	kiln_buf_free(&r->problems);
	kiln_drift_free(&r->drift);
	kiln_profile_free(&r->profile);
	kiln_profile_free(&r->baseline_profile);
	free(r->history);
	for (size_t i = 0; i < r->qpaths_n; i++)
		free(r->qpaths[i].path);
	free(r->qpaths);
	free(r->gates);
	free(r->erasures);
	memset(r, 0, sizeof(*r));
}
