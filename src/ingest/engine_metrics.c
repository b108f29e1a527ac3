/* The metrics of a streaming run (served on /metrics): records, bytes,
 * quarantines by code, batches, snapshots, commits, abandons, then the
 * row's own (Kafka's gaps, dead letters, rebalances, consumer lag), then
 * kiln_up, kiln_build_info and process_* (core/daemon_metrics.h), and
 * after a snapshot each field's drift against the drift baseline. */
#include "ingest/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/log.h"
#include "manifest/promote.h"
#include "manifest/version.h"
#include "quality/drift.h"
#include "quality/profile.h"

int kiln_engine_metrics_new(struct kiln_engine_metrics *mx)
{
	static const double batch_bounds[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
	static const double snap_bounds[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
	int rc;

	if ((rc = kiln_metrics_new(&mx->m)) < 0)
		return rc;
	mx->in = kiln_metrics_counter(mx->m, "kiln_records_in_total", "Records consumed", NULL);
	mx->valid =
	    kiln_metrics_counter(mx->m, "kiln_records_valid_total", "Records curated into shards", NULL);
	for (int c = 1; c < KILN_REJECT_COUNT_; c++) {
		char labels[96];
		snprintf(labels, sizeof(labels), "code=\"%s\"", kiln_reject_name((kiln_reject)c));
		mx->quarantined[c] = kiln_metrics_counter(mx->m, "kiln_records_quarantined_total",
		                                          "Records quarantined, by reason code", labels);
	}
	mx->bytes = kiln_metrics_counter(mx->m, "kiln_records_in_bytes_total", "Record bytes consumed", NULL);
	mx->batch_seconds = kiln_metrics_histogram(
	    mx->m, "kiln_batch_seconds", "From a batch's first record to its records being spooled", NULL,
	    batch_bounds, sizeof(batch_bounds) / sizeof(batch_bounds[0]));
	mx->snapshot_seconds = kiln_metrics_histogram(
	    mx->m, "kiln_snapshot_seconds", "Time to finish shards and commit a snapshot", NULL, snap_bounds,
	    sizeof(snap_bounds) / sizeof(snap_bounds[0]));
	mx->commits = kiln_metrics_counter(mx->m, "kiln_commits_total", "Snapshots committed", NULL);
	mx->commit_failures = kiln_metrics_counter(mx->m, "kiln_commit_failures_total",
	                                           "Snapshots that failed (then read again)", NULL);
	mx->commit_retries = kiln_metrics_counter(
	    mx->m, "kiln_commit_retries_total",
	    "Snapshot commits tried again (another member moved the branch or held its lock)", NULL);
	mx->compactions =
	    kiln_metrics_counter(mx->m, "kiln_manifest_compactions_total",
	                         "Automatic compactions of the manifest repository this member ran", NULL);
	mx->loose_objects =
	    kiln_metrics_gauge(mx->m, "kiln_manifest_loose_objects",
	                       "Loose objects in the manifest repository after the last commit", NULL);
	mx->abandoned =
	    kiln_metrics_counter(mx->m, "kiln_abandoned_total",
	                         "Times the work since the last snapshot was dropped to be read again", NULL);
	return 0;
}

int kiln_engine_metrics_finish(struct kiln_engine_metrics *mx, const kiln_build_info *build_info)
{
	mx->up = kiln_metrics_gauge(mx->m, "kiln_up", "1 while the run consumes", NULL);
	return kiln_daemon_metrics_register(mx->m, build_info);
}

/* One gauge of a field's drift: NAME{part="PART",field="PATH"}. */
static void field_gauge(kiln_metrics *m, const char *name, const char *help, const char *part,
                        const char *path, double v)
{
	kiln_buf labels = KILN_BUF_INIT(0);

	if (kiln_buf_printf(&labels, "part=\"%s\",field=", part) == 0 &&
	    kiln_metrics_label_value(&labels, path) == 0 && kiln_buf_putc(&labels, '\0') == 0)
		kiln_gauge_set(kiln_metrics_gauge(m, name, help, labels.ptr), v);
	kiln_buf_free(&labels);
}

/* The gauges of one profile (part: "snapshot" or "branch") against base. */
static int drift_gauges(kiln_engine *e, const char *part, const kiln_profile *base, const kiln_profile *now,
                        const kiln_drift_thresholds *t)
{
	kiln_drift d = {0};
	kiln_buf labels = KILN_BUF_INIT(0);
	int rc;

	if ((rc = kiln_drift_compare(&d, base, now, t)) < 0)
		return rc;
	for (size_t i = 0; i < d.count; i++) {
		const kiln_field_drift *f = &d.fields[i];
		if (f->psi >= 0)
			field_gauge(e->mx.m, "kiln_drift_psi",
			            "Population stability index against the drift baseline (part: the last "
			            "snapshot's "
			            "records, or the whole branch)",
			            part, f->path, f->psi);
		field_gauge(e->mx.m, "kiln_drift_null_rate_change",
		            "Null rate (nulls and missing over records) minus the drift baseline's", part,
		            f->path, f->null_rate_now - f->null_rate_base);
		field_gauge(e->mx.m, "kiln_drift_flagged", "1 when the field is past a drift threshold", part,
		            f->path, f->flagged ? 1 : 0);
	}
	if (kiln_buf_printf(&labels, "part=\"%s\"", part) == 0 && kiln_buf_putc(&labels, '\0') == 0)
		kiln_gauge_set(kiln_metrics_gauge(e->mx.m, "kiln_drift_fields_flagged",
		                                  "Fields past a drift threshold against the baseline",
		                                  labels.ptr),
		               (double)d.flagged);
	kiln_buf_free(&labels);
	kiln_drift_free(&d);
	return 0;
}

void kiln_engine_metrics_update_drift(kiln_engine *e)
{
	const kiln_pipeline *p = e->p;
	kiln_manifest *m = e->setup.manifest;
	kiln_drift_thresholds t = {p->gates.drift ? p->gates.drift_max_psi : 0,
	                           p->gates.drift ? p->gates.drift_max_null_rate : 0};
	kiln_profile total = {0}, added = {0}, base = {0};
	kiln_version v, bv;
	char spec[300], base_spec[300], last[32];
	const char *baseline =
	    p->gates.drift && p->gates.drift_baseline ? p->gates.drift_baseline : "previous";

	if (!p->profile)
		return;
	snprintf(spec, sizeof(spec), "%s@%s", p->dataset, p->branch);
	if (strcmp(baseline, "previous") == 0) {
		int found = kiln_promote_last_version(last, m, p->dataset);
		if (found < 0)
			goto fail;
		if (!found)
			return; /* nothing promoted yet: no baseline */
		snprintf(base_spec, sizeof(base_spec), "%s@%s", p->dataset, last);
	} else {
		snprintf(base_spec, sizeof(base_spec), "%s@%s", p->dataset, baseline);
	}
	if (kiln_version_resolve(m, spec, &v) < 0 || kiln_version_profile(m, &v, spec, &total, &added) <= 0 ||
	    kiln_version_resolve(m, base_spec, &bv) < 0 ||
	    kiln_version_profile(m, &bv, base_spec, &base, NULL) <= 0 ||
	    drift_gauges(e, "snapshot", &base, &added, &t) < 0 ||
	    drift_gauges(e, "branch", &base, &total, &t) < 0)
		goto fail;
	goto done;
fail:
	KILN_LOG(KILN_LOG_WARN, "drift", "no drift figures after this snapshot",
	         KILN_F_STR("error", kiln_error_last()));
done:
	kiln_profile_free(&total);
	kiln_profile_free(&added);
	kiln_profile_free(&base);
}
