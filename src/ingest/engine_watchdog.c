/* The watchdog thread of a streaming run: it ends the process once
 * drain_seconds have passed since a stop was asked for, and feeds the
 * service manager's watchdog while the main loop makes progress (struct
 * kiln_engine_watchdog in engine_internal.h). */
#include "ingest/engine_internal.h"

#include <unistd.h>

#include "core/log.h"

int64_t kiln_engine_watchdog_deadline(struct kiln_engine_watchdog *w)
{
	int64_t none = -1;

	atomic_compare_exchange_strong(&w->deadline_ms, &none, now_ms() + (int64_t)w->seconds * 1000);
	return w->deadline_ms;
}

/* WATCHDOG=1 when due, unless the main loop has not turned for
 * KILN_ENGINE_STUCK_SECONDS (said once in the log). */
static void feed(struct kiln_engine_watchdog *w, bool *stuck)
{
	int64_t idle_ms = now_ms() - *w->heartbeat_ms;

	if (idle_ms < (int64_t)KILN_ENGINE_STUCK_SECONDS * 1000) {
		*stuck = false;
		kiln_notify_watchdog_kick(&w->notify);
		return;
	}
	if (!*stuck)
		KILN_LOG(KILN_LOG_ERROR, "stuck",
		         "the main loop has not turned for too long; no more watchdog kicks",
		         KILN_F_INT("seconds", idle_ms / 1000));
	*stuck = true;
}

void *kiln_engine_watchdog(void *arg)
{
	struct kiln_engine_watchdog *w = arg;
	bool stuck = false;

	pthread_setname_np(pthread_self(), "watchdog");

	while (!w->done) {
		feed(w, &stuck);
		if ((*w->stop || w->draining) && now_ms() >= kiln_engine_watchdog_deadline(w)) {
			KILN_LOG(KILN_LOG_ERROR, "drain_timeout",
			         "the last snapshot did not finish in time; exiting without it",
			         KILN_F_INT("drain_seconds", w->seconds));
			_exit(3);
		}
		usleep(50000);
	}
	return NULL;
}
