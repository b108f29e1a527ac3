/* The metrics of a Kafka run (served on /metrics): records, bytes,
 * quarantines by code, batches, snapshots, commits, gaps, dead letters,
 * rebalances, and each owned partition's consumer lag. */
#include "ingest/kafka_internal.h"

#include <stdio.h>

int kiln_kafka_metrics_new(struct metrics *mx)
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
	mx->bytes = kiln_metrics_counter(mx->m, "kiln_bytes_in_total", "Record bytes consumed", NULL);
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
	mx->abandoned =
	    kiln_metrics_counter(mx->m, "kiln_abandoned_total",
	                         "Times the work since the last snapshot was dropped to be read again", NULL);
	mx->gaps = kiln_metrics_counter(mx->m, "kiln_gaps_total",
	                                "Resume offsets found expired from the topic", NULL);
	mx->gap_offsets =
	    kiln_metrics_counter(mx->m, "kiln_gap_offsets_total", "Offsets in those gaps", NULL);
	mx->dead_letters = kiln_metrics_counter(mx->m, "kiln_dead_letters_total",
	                                        "Records sent to the dead-letter topic", NULL);
	mx->rebalances =
	    kiln_metrics_counter(mx->m, "kiln_rebalances_total", "Assignments and revocations", NULL);
	mx->partitions =
	    kiln_metrics_gauge(mx->m, "kiln_partitions_assigned", "Partitions this member owns", NULL);
	mx->up = kiln_metrics_gauge(mx->m, "kiln_up", "1 while the run consumes", NULL);
	return 0;
}

void kiln_kafka_metrics_update_lag(struct krun *r)
{
	for (size_t i = 0; i < r->nparts; i++) {
		struct part *pt = r->parts[i];
		int64_t lo, hi;
		if (!pt->assigned || !pt->lag)
			continue;
		if (rd_kafka_get_watermark_offsets(r->rk, pt->topic, pt->partition, &lo, &hi) == 0 &&
		    hi >= 0) {
			int64_t at = pt->position >= 0    ? pt->position
			             : pt->committed >= 0 ? pt->committed
			                                  : lo;
			kiln_gauge_set(pt->lag, (double)(hi > at ? hi - at : 0));
		}
	}
}
