/* The HTTP endpoints of a streaming run (pipeline metrics_listen): GET
 * /metrics, GET /healthz, and POST /v1/snapshot, which asks the run's main
 * thread for a snapshot and waits up to 120 s for its answer. The server's
 * threads only read metrics and hand requests over under req_lock. */
#include "ingest/engine_internal.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "manifest/version.h"

/* ---- HTTP: /metrics, /healthz, POST /v1/snapshot --------------------------- */

static int http_metrics(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	kiln_engine *e = ctx;

	(void)req;
	res->content_type = "text/plain; version=0.0.4; charset=utf-8";
	return kiln_metrics_render(e->mx.m, &res->body);
}

static int http_healthz(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	kiln_engine *e = ctx;
	int64_t idle = now_ms() - e->heartbeat_ms;

	(void)req;
	res->content_type = "text/plain; charset=utf-8";
	if (e->fatal || idle > 60000) {
		res->status = 503;
		return kiln_buf_printf(&res->body, "unhealthy: %s\n",
		                       e->fatal ? "stopping" : "main loop stalled");
	}
	res->status = 200;
	return kiln_buf_puts(&res->body, "ok\n");
}

static int http_snapshot(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	kiln_engine *e = ctx;
	struct timespec until;
	uint64_t ticket;
	int rc = 0;

	(void)req;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 120;
	pthread_mutex_lock(&e->req_lock);
	ticket = ++e->req_asked;
	while (e->req_done < ticket && rc == 0)
		rc = pthread_cond_timedwait(&e->req_cond, &e->req_lock, &until);
	res->content_type = "application/json";
	if (e->req_done < ticket) {
		res->status = 504;
		kiln_buf_puts(&res->body, "{\"error\":\"the snapshot did not finish within 120 s\"}\n");
	} else if (e->req_rc < 0) {
		res->status = 500;
		kiln_buf_puts(&res->body, "{\"error\":");
		kiln_buf_put_json_string(&res->body, e->req_error, strlen(e->req_error));
		kiln_buf_puts(&res->body, "}\n");
	} else {
		res->status = 200;
		kiln_buf_printf(&res->body, "{\"commit\":\"%s\",\"dataset\":\"%s\",\"branch\":\"%s\"}\n",
		                e->req_commit, e->p->dataset, e->p->branch);
	}
	pthread_mutex_unlock(&e->req_lock);
	return 0;
}

bool kiln_engine_snapshot_requested(kiln_engine *e, uint64_t *ticket)
{
	pthread_mutex_lock(&e->req_lock);
	*ticket = e->req_asked;
	pthread_mutex_unlock(&e->req_lock);
	return *ticket > e->req_done;
}

void kiln_engine_request_snapshot(kiln_engine *e)
{
	pthread_mutex_lock(&e->req_lock);
	if (e->req_asked == e->req_done)
		e->req_asked++;
	pthread_mutex_unlock(&e->req_lock);
}

/* Answers the requests up to TICKET with what the snapshot did (RC, and
 * kiln_error_last() when it failed). Nothing new while what was read since
 * the last commit could not be committed (e->failing) is a failure too: the
 * tip is not what was asked for. */
void kiln_engine_snapshot_answered(kiln_engine *e, uint64_t ticket, int rc)
{
	kiln_version tip = {0};
	char spec[300], error[512] = "";

	if (rc < 0)
		snprintf(error, sizeof(error), "%s", kiln_error_last());
	else if (rc == 0 && e->failing[0]) {
		rc = KILN_ERETRY;
		snprintf(error, sizeof(error), "%s", e->failing);
	}
	/* nothing new: the answer is the branch as it is */
	snprintf(spec, sizeof(spec), "%s@%s", e->p->dataset, e->p->branch);
	if (rc >= 0 && !e->out->commit[0] && kiln_version_resolve(e->setup.manifest, spec, &tip) < 0)
		tip.commit[0] = '\0';
	pthread_mutex_lock(&e->req_lock);
	e->req_done = ticket;
	e->req_rc = rc;
	memcpy(e->req_error, error, sizeof(error));
	memcpy(e->req_commit, e->out->commit[0] ? e->out->commit : tip.commit, sizeof(e->req_commit));
	pthread_cond_broadcast(&e->req_cond);
	pthread_mutex_unlock(&e->req_lock);
}

/* Starts the server on metrics_listen (nothing without one). */
int kiln_engine_http_start(kiln_engine *e)
{
	const kiln_pipeline *p = e->p;
	int rc;

	if (!p->metrics_listen)
		return 0;
	const kiln_http_route routes[] = {
	    {"GET", "/metrics", http_metrics, e},
	    {"GET", "/healthz", http_healthz, e},
	    {"POST", "/v1/snapshot", http_snapshot, e},
	};
	if ((rc = kiln_http_server_start(&e->http, p->metrics_listen, routes, 3)) < 0)
		return rc;
	KILN_LOG(KILN_LOG_INFO, "listening", NULL, KILN_F_STR("listen", p->metrics_listen),
	         KILN_F_INT("port", kiln_http_server_port(e->http)));
	return 0;
}

/* Stops the server, and answers the snapshot requests still waiting. */
void kiln_engine_http_stop(kiln_engine *e)
{
	kiln_http_server_stop(e->http);
	pthread_mutex_lock(&e->req_lock);
	if (e->req_done < e->req_asked) {
		e->req_rc = KILN_EIO;
		snprintf(e->req_error, sizeof(e->req_error), "the run stopped before the snapshot");
	}
	e->req_done = e->req_asked;
	pthread_cond_broadcast(&e->req_cond);
	pthread_mutex_unlock(&e->req_lock);
}
