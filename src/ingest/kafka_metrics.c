/* The Kafka row's metrics, registered between the engine's
 * (engine_metrics.c) on the run's /metrics: gaps, dead letters,
 * rebalances, partitions owned and each owned partition's consumer lag. */
#include "ingest/kafka_internal.h"

int kiln_kafka_metrics_new(struct metrics *mx, kiln_metrics *m)
{
	mx->gaps =
	    kiln_metrics_counter(m, "kiln_gaps_total", "Resume offsets found expired from the topic", NULL);
	mx->gap_offsets = kiln_metrics_counter(m, "kiln_gap_offsets_total", "Offsets in those gaps", NULL);
	mx->dead_letters =
	    kiln_metrics_counter(m, "kiln_dead_letters_total", "Records sent to the dead-letter topic", NULL);
	mx->rebalances =
	    kiln_metrics_counter(m, "kiln_rebalances_total", "Assignments and revocations", NULL);
	mx->partitions =
	    kiln_metrics_gauge(m, "kiln_partitions_assigned", "Partitions this member owns", NULL);
	return 0;
}

const char *kiln_kafka_librdkafka_version(void)
{
	return rd_kafka_version_str();
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
