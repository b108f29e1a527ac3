/* The librdkafka clients of a Kafka run: the consumer (kiln's settings,
 * then the pipeline's source.options; the rebalance, error and log
 * callbacks), the dead-letter producer, whether a broker ever answered, and
 * leaving the group within a deadline. */
#include "ingest/kafka_internal.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"

/* Messages fetched but never polled when the consumer closes: kiln_kafka_client_close
 * serves the close queue with callbacks, and librdkafka aborts on a message
 * there when no consume callback is set (rd_kafka_q_serve: "res !=
 * RD_KAFKA_OP_RES_PASS", seen with the store failing and the broker gone).
 * librdkafka frees them; the next owner reads them again. */
static void drop_unread(rd_kafka_message_t *m, void *opaque)
{
	(void)m;
	(void)opaque;
}

static void kafka_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	static kiln_log_limiter lim;
	uint64_t suppressed;
	struct krun *r = opaque;

	(void)rk;
	if (kiln_log_limiter_allow(&lim, 10, &suppressed))
		KILN_LOG(err == RD_KAFKA_RESP_ERR__FATAL ? KILN_LOG_ERROR : KILN_LOG_WARN, "broker_error",
		         reason, KILN_F_STR("brokers", r->c->brokers),
		         KILN_F_STR("code", rd_kafka_err2name(err)), KILN_F_INT("suppressed", suppressed));
}

static void kafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	static kiln_log_limiter lim;
	uint64_t suppressed;

	(void)rk;
	if (level <= 4 && kiln_log_limiter_allow(&lim, 10, &suppressed))
		KILN_LOG(level <= 3 ? KILN_LOG_ERROR : KILN_LOG_WARN, "librdkafka", buf,
		         KILN_F_STR("facility", fac), KILN_F_INT("suppressed", suppressed));
}

/* ---- the consumer --------------------------------------------------------- */

static int kafka_set(rd_kafka_conf_t *conf, const kiln_pipeline *p, const char *name, const char *value)
{
	char err[512];

	if (rd_kafka_conf_set(conf, name, value, err, sizeof(err)) != RD_KAFKA_CONF_OK)
		return kiln_error_set(KILN_EINVALID, "%s: source.options.%s: %s", p->file, name, err);
	return 0;
}

static int kafka_conf(rd_kafka_conf_t **out, const kiln_pipeline *p, bool consumer)
{
	const kiln_kafka_config *c = p->source_config;
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	int rc;

	*out = NULL;
	if ((rc = kafka_set(conf, p, "bootstrap.servers", c->brokers)) < 0 ||
	    (rc = kafka_set(conf, p, "client.id", "kiln")) < 0)
		goto fail;
	if (consumer &&
	    ((rc = kafka_set(conf, p, "group.id", c->group)) < 0 ||
	     (rc = kafka_set(conf, p, "enable.auto.commit", "false")) < 0 ||
	     (rc = kafka_set(conf, p, "enable.auto.offset.store", "false")) < 0 ||
	     (rc = kafka_set(conf, p, "partition.assignment.strategy", "cooperative-sticky")) < 0 ||
	     (rc = kafka_set(conf, p, "auto.offset.reset", "error")) < 0 ||
	     (rc = kafka_set(conf, p, "enable.partition.eof", "true")) < 0))
		goto fail;
	if (!consumer && ((rc = kafka_set(conf, p, "enable.idempotence", "true")) < 0))
		goto fail;
	/* prefetch less than librdkafka's 64 MiB: batches hold messages (and
	 * the fetch buffers they live in) until their records are spooled */
	if (consumer && (rc = kafka_set(conf, p, "queued.max.messages.kbytes", "16384")) < 0)
		goto fail;
	for (size_t i = 0; i < c->option_count; i++) {
		/* consumer-only or producer-only properties are warnings for the other */
		char err[512];
		rd_kafka_conf_res_t res =
		    rd_kafka_conf_set(conf, c->options[i].name, c->options[i].value, err, sizeof(err));
		if (res != RD_KAFKA_CONF_OK) {
			rc = kiln_error_set(KILN_EINVALID, "%s: source.options.%s: %s", p->file,
			                    c->options[i].name, err);
			goto fail;
		}
	}
	*out = conf;
	return 0;
fail:
	rd_kafka_conf_destroy(conf);
	return rc;
}

int kiln_kafka_client_open(struct krun *r,
                           void (*rebalance)(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                             rd_kafka_topic_partition_list_t *list, void *opaque))
{
	const kiln_pipeline *p = r->p;
	const kiln_kafka_config *c = r->c;
	rd_kafka_conf_t *conf = NULL;
	rd_kafka_topic_partition_list_t *topics;
	rd_kafka_resp_err_t err;
	char errstr[512];
	int rc;

	if ((rc = kafka_conf(&conf, p, true)) < 0)
		return rc;
	rd_kafka_conf_set_opaque(conf, r);
	rd_kafka_conf_set_rebalance_cb(conf, rebalance);
	rd_kafka_conf_set_consume_cb(conf,
	                             drop_unread); /* only kiln_kafka_client_close serves with callbacks */
	rd_kafka_conf_set_error_cb(conf, kafka_error);
	rd_kafka_conf_set_log_cb(conf, kafka_log);
	if (!(r->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr)))) {
		rd_kafka_conf_destroy(conf);
		return kiln_error_set(KILN_EINVALID, "%s: %s", c->brokers, errstr);
	}
	rd_kafka_poll_set_consumer(r->rk);
	topics = rd_kafka_topic_partition_list_new((int)c->topic_count);
	for (size_t i = 0; i < c->topic_count; i++)
		rd_kafka_topic_partition_list_add(topics, c->topics[i], RD_KAFKA_PARTITION_UA);
	err = rd_kafka_subscribe(r->rk, topics);
	rd_kafka_topic_partition_list_destroy(topics);
	if (err)
		return kiln_error_set(KILN_EINVALID, "%s: subscribe: %s", c->brokers, rd_kafka_err2str(err));
	/* a topic with a handle has its leaders looked up now: without one,
	 * librdkafka first learns of the topic from the assignment, finds no
	 * leader and retries the lookup only after about 500 ms */
	if (!(r->topics = calloc(c->topic_count, sizeof(*r->topics))))
		return kiln_error_oom(NULL);
	for (; r->topic_count < c->topic_count; r->topic_count++)
		if (!(r->topics[r->topic_count] = rd_kafka_topic_new(r->rk, c->topics[r->topic_count], NULL)))
			return kiln_error_set(KILN_EINVALID, "%s: %s: %s", c->brokers,
			                      c->topics[r->topic_count],
			                      rd_kafka_err2str(rd_kafka_last_error()));
	if (c->dead_letter_topic) {
		if ((rc = kafka_conf(&conf, p, false)) < 0)
			return rc;
		rd_kafka_conf_set_opaque(conf, r);
		rd_kafka_conf_set_dr_msg_cb(conf, kiln_kafka_dead_letter_delivered);
		rd_kafka_conf_set_error_cb(conf, kafka_error);
		rd_kafka_conf_set_log_cb(conf, kafka_log);
		if (!(r->dlq = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr)))) {
			rd_kafka_conf_destroy(conf);
			return kiln_error_set(KILN_EINVALID, "%s: %s", c->brokers, errstr);
		}
	}
	return 0;
}

void kiln_kafka_client_free_topics(struct krun *r)
{
	for (size_t i = 0; i < r->topic_count; i++)
		rd_kafka_topic_destroy(r->topics[i]);
	free(r->topics);
	r->topics = NULL;
	r->topic_count = 0;
}

/* Leaves the group within CLOSE_MS (less when the drain ends sooner). With
 * the coordinator gone, rd_kafka_consumer_close would wait for it (about
 * session.timeout.ms, longer while the broker is down): the close runs in
 * the background instead, and a consumer that has not closed by then is
 * left open, like one that never had an assignment (below). */
#define CLOSE_MS 10000

bool kiln_kafka_client_close(struct krun *r, int64_t deadline)
{
	rd_kafka_queue_t *q = rd_kafka_queue_new(r->rk);
	rd_kafka_error_t *error = rd_kafka_consumer_close_queue(r->rk, q);
	int64_t until = now_ms() + CLOSE_MS;
	bool closed = false;

	if (deadline - 500 < until)
		until = deadline - 500;
	if (error) {
		KILN_LOG(KILN_LOG_WARN, "close_error", rd_kafka_error_string(error));
		rd_kafka_error_destroy(error);
	} else {
		/* serves the revocation (on_revoke) through the rebalance callback */
		while (!(closed = rd_kafka_consumer_closed(r->rk)) && now_ms() < until)
			rd_kafka_queue_poll_callback(q, 100);
	}
	rd_kafka_queue_destroy(q);
	return closed;
}

/* With --stop-at-end, true (and the run fatal) once source.connect_timeout
 * has passed since STARTED without a broker answering: no metadata (so no
 * cluster id) and no assignment. */
bool kiln_kafka_client_unreachable(struct krun *r, int64_t started)
{
	char *cluster = rd_kafka_clusterid(r->rk, 0);

	if (cluster || r->ever_assigned) {
		rd_kafka_mem_free(r->rk, cluster);
		r->reached = true;
		return false;
	}
	if (now_ms() - started < (int64_t)r->c->connect_timeout * 1000)
		return false;
	r->e->fatal = KILN_EIO;
	snprintf(r->e->fatal_msg, sizeof(r->e->fatal_msg),
	         "%s: no broker answered within source.connect_timeout (%u s); nothing was read",
	         r->c->brokers, r->c->connect_timeout);
	return true;
}

/* ---- kiln check's probe --------------------------------------------------- */

static void probe_quiet_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	(void)rk;
	(void)err;
	(void)reason;
	(void)opaque;
}

static void probe_quiet_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	(void)rk;
	(void)level;
	(void)fac;
	(void)buf;
}

static const rd_kafka_metadata_topic_t *find_topic(const rd_kafka_metadata_t *md, const char *name)
{
	for (int i = 0; i < md->topic_cnt; i++)
		if (strcmp(md->topics[i].topic, name) == 0)
			return &md->topics[i];
	return NULL;
}

static int report_topic(const rd_kafka_metadata_t *md, const char *name, kiln_kafka_topic_cb cb, void *ctx)
{
	const rd_kafka_metadata_topic_t *t = find_topic(md, name);

	if (!t)
		return cb(ctx, name, -1, "no such topic on the brokers");
	if (t->err)
		return cb(ctx, name, -1, rd_kafka_err2str(t->err));
	return cb(ctx, name, t->partition_cnt, NULL);
}

int kiln_kafka_probe(const kiln_pipeline *p, int timeout_ms, int *out_brokers, kiln_kafka_topic_cb cb,
                     void *ctx)
{
	const kiln_kafka_config *c = p->source_config;
	rd_kafka_conf_t *conf = NULL;
	rd_kafka_t *rk;
	const rd_kafka_metadata_t *md = NULL;
	rd_kafka_resp_err_t err;
	char errstr[512];
	int rc;

	*out_brokers = 0;
	if ((rc = kafka_conf(&conf, p, true)) < 0)
		return rc;
	rd_kafka_conf_set_error_cb(conf, probe_quiet_error);
	rd_kafka_conf_set_log_cb(conf, probe_quiet_log);
	if (!(rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr)))) {
		rd_kafka_conf_destroy(conf);
		return kiln_error_set(KILN_EINVALID, "%s: %s", c->brokers, errstr);
	}
	/* every topic's metadata: asking for the pipeline's topics by name
	 * would create them on a broker with auto.create.topics.enable */
	err = rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms);
	if (err) {
		rc = kiln_error_set(KILN_EIO, "%s: no broker answered within %d ms: %s", c->brokers,
		                    timeout_ms, rd_kafka_err2str(err));
		goto done;
	}
	*out_brokers = md->broker_cnt;
	for (size_t i = 0; i < c->topic_count && rc >= 0; i++)
		rc = report_topic(md, c->topics[i], cb, ctx);
	if (rc >= 0 && c->dead_letter_topic)
		rc = report_topic(md, c->dead_letter_topic, cb, ctx);
done:
	if (md)
		rd_kafka_metadata_destroy(md);
	rd_kafka_destroy(rk);
	return rc;
}

int kiln_kafka_producer_conf(struct rd_kafka_conf_s **out, const kiln_pipeline *p)
{
	return kafka_conf(out, p, false);
}
