/* The drain watchdog of a Kafka run: a thread that ends the process once
 * drain_seconds have passed since a stop was asked for (struct
 * kiln_kafka_watchdog in kafka_internal.h). */
#include "ingest/kafka_internal.h"

#include <unistd.h>

#include "core/log.h"

int64_t kiln_kafka_watchdog_deadline(struct kiln_kafka_watchdog *w)
{
	int64_t none = -1;

	atomic_compare_exchange_strong(&w->deadline_ms, &none, now_ms() + (int64_t)w->seconds * 1000);
	return w->deadline_ms;
}

void *kiln_kafka_watchdog(void *arg)
{
	struct kiln_kafka_watchdog *w = arg;

	while (!w->done) {
		if ((*w->stop || w->draining) && now_ms() >= kiln_kafka_watchdog_deadline(w)) {
			KILN_LOG(KILN_LOG_ERROR, "drain_timeout",
			         "the last snapshot did not finish in time; exiting without it",
			         KILN_F_INT("drain_seconds", w->seconds));
			_exit(3);
		}
		usleep(50000);
	}
	return NULL;
}
