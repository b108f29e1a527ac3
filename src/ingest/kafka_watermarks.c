/* Watermark queries of a Kafka run, each on a thread of its own so the
 * main thread waits for the broker at most WATERMARK_MS (the struct and
 * its references below). */
#include "ingest/kafka_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* rd_kafka_query_watermark_offsets does not keep its timeout while the
 * broker is gone (librdkafka 2.0.2 waits for it to come back), and it runs
 * on the main thread, inside the rebalance callback too. So each query runs
 * on a thread of its own while the main thread waits at most WATERMARK_MS,
 * and no longer once a stop is asked for. A query still running then keeps
 * its thread (and a reference to this struct); until it ends, no other is
 * started, and at the end the consumer is left open rather than destroyed
 * under it. */
#define WATERMARK_MS 10000

struct watermarks {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	rd_kafka_t *rk;
	char *topic;
	int32_t partition;
	int64_t lo, hi;
	rd_kafka_resp_err_t err;
	bool done;
	int refs; /* the query thread's and the waiter's */
};

void kiln_kafka_watermarks_unref(struct watermarks *w)
{
	bool last;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	last = --w->refs == 0;
	pthread_mutex_unlock(&w->lock);
	if (!last)
		return;
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w->topic);
	free(w);
}

static void *watermarks_thread(void *arg)
{
	struct watermarks *w = arg;
	int64_t lo = -1, hi = -1;
	rd_kafka_resp_err_t err;

	pthread_setname_np(pthread_self(), "kafka-wm");
	err = rd_kafka_query_watermark_offsets(w->rk, w->topic, w->partition, &lo, &hi, WATERMARK_MS);

	pthread_mutex_lock(&w->lock);
	w->lo = lo;
	w->hi = hi;
	w->err = err;
	w->done = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	kiln_kafka_watermarks_unref(w);
	return NULL;
}

/* A stuck query that has ended since is forgotten. true: none is stuck. */
bool kiln_kafka_watermarks_free_to_ask(struct krun *r)
{
	bool done;

	if (!r->wm_stuck)
		return true;
	pthread_mutex_lock(&r->wm_stuck->lock);
	done = r->wm_stuck->done;
	pthread_mutex_unlock(&r->wm_stuck->lock);
	if (!done)
		return false;
	kiln_kafka_watermarks_unref(r->wm_stuck);
	r->wm_stuck = NULL;
	return true;
}

/* The partition's oldest and next offsets from the broker, waiting at most
 * WATERMARK_MS (RD_KAFKA_RESP_ERR__TIMED_OUT past that, or once stopping). */
rd_kafka_resp_err_t kiln_kafka_watermarks_query(struct krun *r, const struct part *pt, int64_t *lo,
                                                int64_t *hi)
{
	struct watermarks *w;
	pthread_t thread;
	int64_t until = now_ms() + WATERMARK_MS;
	rd_kafka_resp_err_t err;
	bool stuck;

	if (*r->e->o->stop || !kiln_kafka_watermarks_free_to_ask(r))
		return RD_KAFKA_RESP_ERR__TIMED_OUT;
	if (!(w = calloc(1, sizeof(*w))) || !(w->topic = strdup(pt->topic))) {
		free(w);
		return RD_KAFKA_RESP_ERR__FAIL;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->rk = r->rk;
	w->partition = pt->partition;
	w->refs = 2;
	if (pthread_create(&thread, NULL, watermarks_thread, w) != 0) {
		w->refs = 1;
		kiln_kafka_watermarks_unref(w);
		return RD_KAFKA_RESP_ERR__FAIL;
	}
	pthread_detach(thread);
	pthread_mutex_lock(&w->lock);
	while (!w->done && !*r->e->o->stop && now_ms() < until) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000L; /* a stop is seen within 0.1 s */
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&w->cond, &w->lock, &ts);
	}
	stuck = !w->done;
	err = stuck ? RD_KAFKA_RESP_ERR__TIMED_OUT : w->err;
	*lo = w->lo;
	*hi = w->hi;
	pthread_mutex_unlock(&w->lock);
	if (stuck)
		r->wm_stuck = w; /* our reference, until it ends */
	else
		kiln_kafka_watermarks_unref(w);
	return err;
}
