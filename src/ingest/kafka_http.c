/* The HTTP endpoints of a Kafka run (pipeline metrics_listen): GET
 * /metrics, GET /healthz, and POST /v1/snapshot, which asks the run's main
 * thread for a snapshot and waits up to 120 s for its answer. The server's
 * threads only read metrics and hand requests over under req_lock. */
#include "ingest/kafka_internal.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "manifest/version.h"

/* ---- HTTP: /metrics, /healthz, POST /v1/snapshot --------------------------- */

static int http_metrics(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	struct krun *r = ctx;

	(void)req;
	res->content_type = "text/plain; version=0.0.4; charset=utf-8";
	return kiln_metrics_render(r->mx.m, &res->body);
}

static int http_healthz(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	struct krun *r = ctx;
	int64_t idle = now_ms() - r->heartbeat_ms;

	(void)req;
	res->content_type = "text/plain; charset=utf-8";
	if (r->fatal || idle > 60000) {
		res->status = 503;
		return kiln_buf_printf(&res->body, "unhealthy: %s\n",
		                       r->fatal ? "stopping" : "main loop stalled");
	}
	res->status = 200;
	return kiln_buf_puts(&res->body, "ok\n");
}

static int http_snapshot(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	struct krun *r = ctx;
	struct timespec until;
	uint64_t ticket;
	int rc = 0;

	(void)req;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 120;
	pthread_mutex_lock(&r->req_lock);
	ticket = ++r->req_asked;
	while (r->req_done < ticket && rc == 0)
		rc = pthread_cond_timedwait(&r->req_cond, &r->req_lock, &until);
	res->content_type = "application/json";
	if (r->req_done < ticket) {
		res->status = 504;
		kiln_buf_puts(&res->body, "{\"error\":\"the snapshot did not finish within 120 s\"}\n");
	} else if (r->req_rc < 0) {
		res->status = 500;
		kiln_buf_puts(&res->body, "{\"error\":");
		kiln_buf_put_json_string(&res->body, r->req_error, strlen(r->req_error));
		kiln_buf_puts(&res->body, "}\n");
	} else {
		res->status = 200;
		kiln_buf_printf(&res->body, "{\"commit\":\"%s\",\"dataset\":\"%s\",\"branch\":\"%s\"}\n",
		                r->req_commit, r->p->dataset, r->p->branch);
	}
	pthread_mutex_unlock(&r->req_lock);
	return 0;
}

bool kiln_kafka_snapshot_requested(struct krun *r, uint64_t *ticket)
{
	pthread_mutex_lock(&r->req_lock);
	*ticket = r->req_asked;
	pthread_mutex_unlock(&r->req_lock);
	return *ticket > r->req_done;
}

/* Answers the requests up to TICKET with what the snapshot did (RC, and
 * kiln_error_last() when it failed). Nothing new while what was read since
 * the last commit could not be committed (r->failing) is a failure too: the
 * tip is not what was asked for. */
void kiln_kafka_snapshot_answered(struct krun *r, uint64_t ticket, int rc)
{
	kiln_version tip = {0};
	char spec[300], error[512] = "";

	if (rc < 0)
		snprintf(error, sizeof(error), "%s", kiln_error_last());
	else if (rc == 0 && r->failing[0]) {
		rc = KILN_ERETRY;
		snprintf(error, sizeof(error), "%s", r->failing);
	}
	/* nothing new: the answer is the branch as it is */
	snprintf(spec, sizeof(spec), "%s@%s", r->p->dataset, r->p->branch);
	if (rc >= 0 && !r->out->commit[0] && kiln_version_resolve(r->setup.manifest, spec, &tip) < 0)
		tip.commit[0] = '\0';
	pthread_mutex_lock(&r->req_lock);
	r->req_done = ticket;
	r->req_rc = rc;
	memcpy(r->req_error, error, sizeof(error));
	memcpy(r->req_commit, r->out->commit[0] ? r->out->commit : tip.commit, sizeof(r->req_commit));
	pthread_cond_broadcast(&r->req_cond);
	pthread_mutex_unlock(&r->req_lock);
}

/* Starts the server on metrics_listen (nothing without one). */
int kiln_kafka_http_start(struct krun *r)
{
	const kiln_pipeline *p = r->p;
	int rc;

	if (!p->metrics_listen)
		return 0;
	const kiln_http_route routes[] = {
	    {"GET", "/metrics", http_metrics, r},
	    {"GET", "/healthz", http_healthz, r},
	    {"POST", "/v1/snapshot", http_snapshot, r},
	};
	if ((rc = kiln_http_server_start(&r->http, p->metrics_listen, routes, 3)) < 0)
		return rc;
	KILN_LOG(KILN_LOG_INFO, "listening", NULL, KILN_F_STR("listen", p->metrics_listen),
	         KILN_F_INT("port", kiln_http_server_port(r->http)));
	return 0;
}

/* Stops the server, and answers the snapshot requests still waiting. */
void kiln_kafka_http_stop(struct krun *r)
{
	kiln_http_server_stop(r->http);
	pthread_mutex_lock(&r->req_lock);
	if (r->req_done < r->req_asked) {
		r->req_rc = KILN_EIO;
		snprintf(r->req_error, sizeof(r->req_error), "the run stopped before the snapshot");
	}
	r->req_done = r->req_asked;
	pthread_cond_broadcast(&r->req_cond);
	pthread_mutex_unlock(&r->req_lock);
}
