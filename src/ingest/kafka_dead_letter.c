/* The dead-letter producer of a Kafka run: a rejected record goes to
 * source.dead_letter_topic as it came (value, key, headers) plus kiln.*
 * headers saying why and where from; a snapshot commits only once every
 * record sent there was delivered (kiln_kafka_dead_letter_flush). */
#include "ingest/kafka_internal.h"

#include <inttypes.h>
#include <stdio.h>

#include "core/error.h"
#include "core/log.h"

void kiln_kafka_dead_letter_delivered(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct krun *r = opaque;
	static kiln_log_limiter lim;
	uint64_t suppressed;

	(void)rk;
	if (!m->err)
		return;
	r->dlq_failed = 1;
	if (kiln_log_limiter_allow(&lim, 10, &suppressed))
		KILN_LOG(KILN_LOG_WARN, "dead_letter_error", rd_kafka_err2str(m->err),
		         KILN_F_STR("topic", r->c->dead_letter_topic), KILN_F_INT("suppressed", suppressed));
}

/* The original record, its key and headers, plus kiln.* reason headers. */
int kiln_kafka_dead_letter_send(struct krun *r, const kiln_batch *b, const kiln_batch_reject *x)
{
	const rd_kafka_message_t *m = b->borrowed[x->index];
	rd_kafka_headers_t *orig = NULL, *h;
	char num[32];
	rd_kafka_resp_err_t err;

	if (rd_kafka_message_headers(m, &orig) == RD_KAFKA_RESP_ERR_NO_ERROR && orig)
		h = rd_kafka_headers_copy(orig);
	else
		h = rd_kafka_headers_new(6);
	const kiln_violation *v = &x->report.v[0];
	rd_kafka_header_add(h, "kiln.reason", -1, kiln_reject_name(v->code), -1);
	rd_kafka_header_add(h, "kiln.path", -1, v->path, -1);
	rd_kafka_header_add(h, "kiln.source.topic", -1, b->topic, -1);
	snprintf(num, sizeof(num), "%" PRId32, b->partition);
	rd_kafka_header_add(h, "kiln.source.partition", -1, num, -1);
	snprintf(num, sizeof(num), "%" PRId64, b->offset[x->index]);
	rd_kafka_header_add(h, "kiln.source.offset", -1, num, -1);
	for (;;) {
		err = rd_kafka_producev(
		    r->dlq, RD_KAFKA_V_TOPIC(r->c->dead_letter_topic),
		    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_VALUE(m->payload, m->len),
		    RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
		if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
			break;
		rd_kafka_poll(r->dlq, 100);
	}
	if (err) {
		rd_kafka_headers_destroy(h);
		return kiln_error_set(KILN_ERETRY, "%s: dead-letter topic %s: %s", r->c->brokers,
		                      r->c->dead_letter_topic, rd_kafka_err2str(err));
	}
	kiln_counter_add(r->mx.dead_letters, 1);
	return 0;
}

/* Waits for every record sent to be delivered: up to 30 s, less when
 * draining (a broker that is gone must not use up drain_seconds; the
 * snapshot then fails, nothing is lost). KILN_ERETRY when one was not. */
int kiln_kafka_dead_letter_flush(struct krun *r)
{
	int64_t flush_ms = 30000;

	if (r->e->drain_until_ms && r->e->drain_until_ms - now_ms() - 1000 < flush_ms)
		flush_ms = r->e->drain_until_ms - now_ms() - 1000;
	rd_kafka_flush(r->dlq, flush_ms > 0 ? (int)flush_ms : 0);
	if (rd_kafka_outq_len(r->dlq) > 0 || r->dlq_failed) {
		r->dlq_failed = 0;
		return kiln_error_set(KILN_ERETRY, "%s: dead-letter topic %s: not every record was delivered",
		                      r->c->brokers, r->c->dead_letter_topic);
	}
	return 0;
}
