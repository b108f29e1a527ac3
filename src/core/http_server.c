/* HTTP server on libmicrohttpd (see http_server.h). libmicrohttpd calls
 * on_request at least twice per request: once when the headers are in
 * (state->started set, nothing answered), once per chunk of body (dropped,
 * or kept up to body_max),
 * and once more with no data, when the answer is queued. The raw query
 * string comes from the URI log callback, the first hook of a request.
 *
 * Event-loop mode: a handler returning KILN_HTTP_BLOCKING has its
 * connection suspended and its request_state queued to the workers; a
 * worker calls the handler again, leaves the answer in the state (ready)
 * and resumes the connection, and libmicrohttpd calls on_request once more,
 * which queues that answer. A suspended request's state belongs to the
 * worker queue until it is resumed. Stopping stops accepting, drains the
 * queue (the workers resume every connection they were given: libmicrohttpd
 * refuses to stop with connections suspended; a handler that asks to block
 * after that runs on the event-loop thread), then gives the requests in
 * flight up to DRAIN_MS to go out (answers carry "Connection: close" by
 * then) before the daemon stops. A thread-per-connection server gives them
 * the same DRAIN_MS (a handler that a stop has just answered, like an http
 * source's POST waiting for its commit, gets its answer out).
 *
 * Both modes: libmicrohttpd caps connections in all and per client address
 * (MHD_OPTION_PER_IP_CONNECTION_LIMIT), and its timeout restarts on every
 * byte, so a head deadline is kept here: each connection is tracked from
 * its notify-connection STARTED to CLOSED (libmicrohttpd notifies CLOSED
 * before it closes the socket), with a deadline while it waits for a
 * request head (set when accepted and when an answer completes, cleared
 * when a head is in, at on_request's first call). A sweeper thread shuts
 * down (shutdown(2)) the socket of every connection past its deadline,
 * under track_lock, so the descriptor is still the connection's; the
 * connection's own thread then sees the end of input and closes it. */
#include "core/http_server.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/cpus.h"
#include "core/error.h"
#include "core/log.h"

#define BODY_MAX         (64u << 20) /* response body a handler may build */
#define REQUEST_BODY_MAX (1u << 20)  /* request body dropped before hanging up */
#define CONNECTIONS_MAX  256u        /* thread per connection */
#define CONNECTIONS_LOOP 1024u       /* event loop */
#define PER_ADDRESS_MAX  16u         /* thread per connection: one address's share */
#define PER_ADDRESS_LOOP 64u         /* event loop */
#define HEAD_TIMEOUT_S   10u
#define SWEEP_MS         1000 /* the sweeper looks at least this often */
#define WORKERS_DEFAULT  16u
#define LISTEN_BACKLOG   1024u
#define IDLE_TIMEOUT_S   30u
#define DRAIN_MS         2000u       /* stopping waits this long for answers in flight */
#define SMALL_FILE       (16u << 10) /* a file body this small is read and sent from memory */
#define TEXT_PLAIN       "text/plain; charset=utf-8"

typedef struct request_state request_state;

/* A connection, from notify STARTED to CLOSED (its socket_context). */
typedef struct conn_track {
	struct conn_track *prev, *next;
	int fd;
	int64_t deadline_ms; /* monotonic; 0 while a request is in (head received) */
	bool cut;            /* shut down by the sweeper */
} conn_track;

struct kiln_http_server {
	struct MHD_Daemon *daemon;
	kiln_http_route *routes; /* method and path strdup'ed */
	size_t n;
	uint16_t port;
	kiln_http_mode mode;
	void (*on_answered)(void *ctx, const char *route, int status, uint64_t body_bytes);
	void *on_answered_ctx;
	size_t body_max; /* request bodies kept up to this (0: dropped) */

	/* event loop: the workers and their queue, under lock */
	pthread_t *workers;
	size_t nworkers;
	bool lock_ready;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	request_state *head, *tail;
	bool stopping;
	_Atomic bool draining; /* stopping: answers close their connection */
	_Atomic long inflight; /* requests begun (headers in) and not completed */

	/* head deadlines: the connections, under track_lock, and the sweeper */
	int64_t head_timeout_ms;
	bool track_ready, sweeping, sweep_stop;
	pthread_mutex_t track_lock;
	pthread_cond_t track_cond;
	conn_track *tracked;
	pthread_t sweeper;
};

struct request_state {
	kiln_http_server *server;
	char *query;         /* after '?', NULL when none */
	bool started;        /* the headers' call has been answered with MHD_YES */
	bool bad_target;     /* the request target holds %00 */
	size_t dropped;      /* request body bytes read and thrown away */
	kiln_buf body;       /* with body_max: the request body kept */
	bool too_large;      /* with body_max: the body was over it */
	int status;          /* the status queued, 0 before */
	uint64_t body_bytes; /* the body queued (0 for HEAD, 304...) */

	const kiln_http_route *route; /* the route called, NULL before */

	/* a call handed to a worker (event loop) */
	request_state *next;
	struct MHD_Connection *conn;
	const char *method, *path; /* libmicrohttpd's, valid for the request */
	bool ready;                /* res holds the worker's answer, not yet queued */
	kiln_http_response res;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
	kiln_http_server *s = cls;
	conn_track *t = *socket_context;
	const union MHD_ConnectionInfo *info;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!info || !(t = calloc(1, sizeof(*t))))
			return; /* untracked: only the idle timeout applies */
		t->fd = info->connect_fd;
		pthread_mutex_lock(&s->track_lock);
		t->deadline_ms = now_ms() + s->head_timeout_ms;
		if ((t->next = s->tracked))
			t->next->prev = t;
		s->tracked = t;
		pthread_mutex_unlock(&s->track_lock);
		*socket_context = t;
		return;
	}
	if (!t)
		return;
	pthread_mutex_lock(&s->track_lock);
	if (t->prev)
		t->prev->next = t->next;
	else
		s->tracked = t->next;
	if (t->next)
		t->next->prev = t->prev;
	pthread_mutex_unlock(&s->track_lock);
	free(t);
	*socket_context = NULL;
}

/* Starts (head_pending) or clears conn's head deadline. */
static void head_deadline(kiln_http_server *s, struct MHD_Connection *conn, bool head_pending)
{
	const union MHD_ConnectionInfo *info =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	conn_track *t = info ? info->socket_context : NULL;

	if (!t)
		return;
	pthread_mutex_lock(&s->track_lock);
	t->deadline_ms = head_pending ? now_ms() + s->head_timeout_ms : 0;
	pthread_mutex_unlock(&s->track_lock);
}

static void *sweeper_main(void *arg)
{
	kiln_http_server *s = arg;

	pthread_setname_np(pthread_self(), "http-sweep");

	pthread_mutex_lock(&s->track_lock);
	while (!s->sweep_stop) {
		int64_t now = now_ms(), next = now + SWEEP_MS;
		unsigned cut = 0;
		struct timespec until;

		for (conn_track *t = s->tracked; t; t = t->next) {
			if (!t->deadline_ms || t->cut)
				continue;
			if (t->deadline_ms <= now) {
				/* the connection's thread reads the end and closes it */
				shutdown(t->fd, SHUT_RDWR);
				t->cut = true;
				cut++;
			} else if (t->deadline_ms < next) {
				next = t->deadline_ms;
			}
		}
		if (cut)
			KILN_LOG_EVERY(60, KILN_LOG_WARN, "http_head_timeout",
			               "closed connections that sent no complete request head in time",
			               KILN_F_INT("connections", cut),
			               KILN_F_INT("head_timeout_s", s->head_timeout_ms / 1000));
		until.tv_sec = (time_t)(next / 1000);
		until.tv_nsec = (long)(next % 1000) * 1000000;
		pthread_cond_timedwait(&s->track_cond, &s->track_lock, &until);
	}
	pthread_mutex_unlock(&s->track_lock);
	return NULL;
}

static int sweeper_start(kiln_http_server *s)
{
	pthread_condattr_t attr;

	if (pthread_mutex_init(&s->track_lock, NULL) != 0)
		return kiln_error_oom(NULL);
	if (pthread_condattr_init(&attr) != 0 || pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&s->track_cond, &attr) != 0) {
		pthread_mutex_destroy(&s->track_lock);
		return kiln_error_oom(NULL);
	}
	pthread_condattr_destroy(&attr);
	s->track_ready = true;
	if (pthread_create(&s->sweeper, NULL, sweeper_main, s) != 0)
		return kiln_error_set(KILN_EIO, "cannot start the HTTP head-deadline thread");
	s->sweeping = true;
	return 0;
}

static void sweeper_stop(kiln_http_server *s)
{
	if (!s->sweeping)
		return;
	pthread_mutex_lock(&s->track_lock);
	s->sweep_stop = true;
	pthread_cond_signal(&s->track_cond);
	pthread_mutex_unlock(&s->track_lock);
	pthread_join(s->sweeper, NULL);
	s->sweeping = false;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	request_state *st = calloc(1, sizeof(*st));
	const char *q = uri ? strchr(uri, '?') : NULL;

	if (!st)
		return NULL; /* on_request allocates one without the query */
	st->server = cls;
	if (q && !(st->query = strdup(q + 1))) {
		free(st);
		return NULL;
	}
	/* libmicrohttpd hands handlers a decoded C string: %00 would cut it */
	for (const char *p = uri; p && *p && p != q; p++) {
		if (p[0] == '%' && p[1] == '0' && p[2] == '0') {
			st->bad_target = true;
			break;
		}
	}
	return st;
}

static void response_init(kiln_http_response *res)
{
	memset(res, 0, sizeof(*res));
	res->status = 200;
	res->body.max = BODY_MAX;
	res->fd = -1;
}

/* Frees what a response holds, closing its descriptor. */
static void response_drop(kiln_http_response *res)
{
	kiln_buf_free(&res->body);
	if (res->fd >= 0)
		close(res->fd);
	res->fd = -1;
	res->header_count = 0;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	kiln_http_server *s = cls;
	request_state *st = *con_cls;

	head_deadline(s, conn, true); /* the next request's head, on a kept-alive connection */
	if (st) {
		if (st->started)
			atomic_fetch_sub(&s->inflight, 1);
		if (st->status && s->on_answered)
			s->on_answered(s->on_answered_ctx, st->route ? st->route->path : NULL, st->status,
			               toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? st->body_bytes : 0);
		if (st->ready)
			response_drop(&st->res);
		free(st->query);
		kiln_buf_free(&st->body);
		free(st);
	}
	*con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char text[256];
	size_t n;

	vsnprintf(text, sizeof(text), fmt, ap);
	n = strlen(text);
	while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
		text[--n] = '\0';
	KILN_LOG(KILN_LOG_DEBUG, "http_server", text);
}

const char *kiln_http_request_header(const kiln_http_request *req, const char *name)
{
	if (!req->conn_)
		return NULL;
	return MHD_lookup_connection_value(req->conn_, MHD_HEADER_KIND, name);
}

int kiln_http_response_add_header(kiln_http_response *res, const char *name, const char *fmt, ...)
{
	static const char *const reserved[] = {"Content-Length", "Transfer-Encoding", "Connection", "Date"};
	kiln_http_header *h;
	va_list ap;
	int n;

	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (strcasecmp(name, reserved[i]) == 0)
			return kiln_error_set(KILN_EINVALID, "header %s is the server's", name);
	if (res->header_count >= KILN_HTTP_HEADERS_MAX)
		return kiln_error_set(KILN_ELIMIT, "more than %d response headers", KILN_HTTP_HEADERS_MAX);
	h = &res->headers[res->header_count];
	va_start(ap, fmt);
	n = vsnprintf(h->value, sizeof(h->value), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(h->value))
		return kiln_error_set(KILN_ELIMIT, "header %s: value of %d bytes or more", name,
		                      KILN_HTTP_HEADER_VALUE_MAX);
	if (strpbrk(h->value, "\r\n"))
		return kiln_error_set(KILN_EINVALID, "header %s: value holds a line break", name);
	h->name = name;
	res->header_count++;
	return 0;
}

/* Queues mres (destroyed here) with status, recording both in st. */
static enum MHD_Result queue(struct MHD_Connection *conn, request_state *st, unsigned status,
                             struct MHD_Response *mres, uint64_t body_bytes, bool head)
{
	enum MHD_Result ret;

	if (atomic_load(&st->server->draining))
		MHD_add_response_header(mres, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(conn, status, mres);
	MHD_destroy_response(mres);
	if (ret == MHD_YES) {
		st->status = (int)status;
		st->body_bytes =
		    head || status == MHD_HTTP_NOT_MODIFIED || status == MHD_HTTP_NO_CONTENT ? 0 : body_bytes;
	}
	return ret;
}

static enum MHD_Result answer_text(struct MHD_Connection *conn, request_state *st, unsigned status,
                                   const char *text, const char *allow, bool head)
{
	struct MHD_Response *res =
	    MHD_create_response_from_buffer(strlen(text), (char *)text, MHD_RESPMEM_PERSISTENT);

	if (!res)
		return MHD_NO;
	MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, TEXT_PLAIN);
	if (allow)
		MHD_add_response_header(res, MHD_HTTP_HEADER_ALLOW, allow);
	return queue(conn, st, status, res, strlen(text), head);
}

/* Queues what a handler left in res, which is emptied (the body's
 * allocation and the descriptor go to libmicrohttpd, which frees them). */
static enum MHD_Result answer(struct MHD_Connection *conn, request_state *st, kiln_http_response *res,
                              bool head)
{
	struct MHD_Response *mres;
	uint64_t bytes;

	if (res->fd >= 0 && res->length <= SMALL_FILE && !head) {
		/* one write for headers and body beats a send and a sendfile */
		char *copy = malloc(res->length ? res->length : 1);
		ssize_t got = copy ? pread(res->fd, copy, res->length, (off_t)res->offset) : -1;

		if (got != (ssize_t)res->length) {
			free(copy);
			response_drop(res);
			return MHD_NO;
		}
		bytes = res->length;
		mres = MHD_create_response_from_buffer_with_free_callback(res->length, copy, free);
		if (!mres)
			free(copy);
	} else if (res->fd >= 0) {
		bytes = res->length;
		mres = MHD_create_response_from_fd_at_offset64(res->length, res->fd, res->offset);
		if (mres)
			res->fd = -1;
	} else if (res->body.ptr) {
		bytes = res->body.len;
		mres = MHD_create_response_from_buffer_with_free_callback(res->body.len, res->body.ptr, free);
		if (mres)
			res->body = (kiln_buf)KILN_BUF_INIT(0);
	} else {
		bytes = 0;
		mres = MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
	}
	if (!mres) {
		response_drop(res);
		return MHD_NO;
	}
	MHD_add_response_header(mres, MHD_HTTP_HEADER_CONTENT_TYPE,
	                        res->content_type ? res->content_type : TEXT_PLAIN);
	for (size_t i = 0; i < res->header_count; i++)
		if (MHD_add_response_header(mres, res->headers[i].name, res->headers[i].value) != MHD_YES)
			KILN_LOG_EVERY(10, KILN_LOG_WARN, "http_header_refused", NULL,
			               KILN_F_STR("header", res->headers[i].name));
	response_drop(res);
	return queue(conn, st, (unsigned)res->status, mres, bytes, head);
}

/* Turns a failed call (rc < 0, or a bad status) into a 500 carrying
 * kiln_error_last(); runs on the thread that called the handler. */
static void settle(const kiln_http_route *route, int rc, kiln_http_response *res)
{
	const char *msg;

	if (rc == 0 && (res->status < 100 || res->status > 999))
		rc = kiln_error_set(KILN_EINVALID, "handler for %s %s set status %d", route->method,
		                    route->path, res->status);
	else if (rc > 0)
		rc = kiln_error_set(KILN_EINVALID, "handler for %s %s returned %d where it may block",
		                    route->method, route->path, rc);
	if (rc == 0)
		return;
	msg = kiln_error_last()[0] ? kiln_error_last() : "internal error";
	response_drop(res);
	response_init(res);
	res->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
	res->body.max = 0;
	if (kiln_buf_puts(&res->body, msg) < 0 || kiln_buf_putc(&res->body, '\n') < 0) {
		kiln_buf_free(&res->body);
		res->body.max = 0;
	}
}

static int call(const kiln_http_route *route, struct MHD_Connection *conn, const request_state *st,
                const char *method, const char *path, bool can_block, kiln_http_response *res)
{
	kiln_http_request req = {
	    .method = method,
	    .path = path,
	    .query = st->query,
	    .body = st->too_large || !st->body.len ? NULL : st->body.ptr,
	    .body_len = st->too_large ? 0 : st->body.len,
	    .body_too_large = st->too_large,
	    .authorization =
	        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
	    .can_block = can_block,
	    .conn_ = conn,
	};

	response_init(res);
	kiln_error_clear();
	return route->handler(route->ctx, &req, res);
}

static void *worker_main(void *arg)
{
	kiln_http_server *s = arg;

	pthread_setname_np(pthread_self(), "http");

	for (;;) {
		request_state *st;
		int rc;

		pthread_mutex_lock(&s->lock);
		while (!s->head && !s->stopping)
			pthread_cond_wait(&s->cond, &s->lock);
		st = s->head;
		if (st && !(s->head = st->next))
			s->tail = NULL;
		pthread_mutex_unlock(&s->lock);
		if (!st)
			return NULL;
		rc = call(st->route, st->conn, st, st->method, st->path, true, &st->res);
		settle(st->route, rc, &st->res);
		st->ready = true;
		MHD_resume_connection(st->conn); /* st is libmicrohttpd's again */
	}
}

/* Hands the call to a worker; false when the server is stopping (the
 * caller runs it itself). */
static bool defer(kiln_http_server *s, struct MHD_Connection *conn, request_state *st,
                  const kiln_http_route *route, const char *method, const char *path)
{
	bool queued = false;

	pthread_mutex_lock(&s->lock);
	if (!s->stopping && s->nworkers) {
		st->conn = conn;
		st->method = method;
		st->path = path;
		st->next = NULL;
		MHD_suspend_connection(conn);
		if (s->tail)
			s->tail->next = st;
		else
			s->head = st;
		s->tail = st;
		pthread_cond_signal(&s->cond);
		queued = true;
	}
	pthread_mutex_unlock(&s->lock);
	return queued;
}

/* The path of the routes answering `path`: the exact one, else the longest
 * prefix; NULL when none does. */
static const char *pattern_for(const kiln_http_server *s, const char *path)
{
	const char *best = NULL;
	size_t best_len = 0;

	for (size_t i = 0; i < s->n; i++) {
		const char *p = s->routes[i].path;
		size_t len = strlen(p);

		if (len && p[len - 1] == '*') {
			if ((!best || len - 1 > best_len) && strncmp(path, p, len - 1) == 0) {
				best = p;
				best_len = len - 1;
			}
		} else if (strcmp(p, path) == 0) {
			return p;
		}
	}
	return best;
}

static bool method_matches(const char *route_method, const char *method)
{
	return strcmp(route_method, method) == 0 || strcmp(route_method, "*") == 0 ||
	       (strcmp(method, "HEAD") == 0 && strcmp(route_method, "GET") == 0);
}

/* 405 with the methods the pattern answers to. */
static enum MHD_Result not_allowed(kiln_http_server *s, struct MHD_Connection *conn, request_state *st,
                                   const char *pattern, bool head)
{
	char allow[256];
	size_t len = 0;

	allow[0] = '\0';
	for (size_t i = 0; i < s->n; i++) {
		const kiln_http_route *r = &s->routes[i];

		if (strcmp(r->path, pattern) != 0)
			continue;
		len += (size_t)snprintf(allow + len, sizeof(allow) - len, "%s%s%s", len ? ", " : "",
		                        r->method, strcmp(r->method, "GET") == 0 ? ", HEAD" : "");
		if (len >= sizeof(allow))
			break;
	}
	return answer_text(conn, st, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n", allow, head);
}

static enum MHD_Result dispatch(kiln_http_server *s, struct MHD_Connection *conn, const char *path,
                                const char *method, request_state *st)
{
	const kiln_http_route *route = NULL;
	const char *pattern;
	bool head = strcmp(method, "HEAD") == 0, can_block = s->mode != KILN_HTTP_EVENT_LOOP;
	kiln_http_response res;
	int rc;

	if (st->bad_target)
		return answer_text(conn, st, MHD_HTTP_BAD_REQUEST, "bad request\n", NULL, head);
	if (!(pattern = pattern_for(s, path)))
		return answer_text(conn, st, MHD_HTTP_NOT_FOUND, "not found\n", NULL, head);
	for (size_t i = 0; i < s->n && !route; i++)
		if (strcmp(s->routes[i].path, pattern) == 0 && method_matches(s->routes[i].method, method))
			route = &s->routes[i];
	if (!route)
		return not_allowed(s, conn, st, pattern, head);

	st->route = route;
	rc = call(route, conn, st, method, path, can_block, &res);
	if (rc == KILN_HTTP_BLOCKING && !can_block) {
		response_drop(&res);
		if (defer(s, conn, st, route, method, path))
			return MHD_YES;
		rc = call(route, conn, st, method, path, true, &res);
	}
	settle(route, rc, &res);
	return answer(conn, st, &res, head);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
	request_state *st = *con_cls;

	if (!st) {
		if (!(st = calloc(1, sizeof(*st))))
			return MHD_NO;
		st->server = cls;
		*con_cls = st;
	}
	if (!st->started) {
		kiln_http_server *s = cls;
		const char *length = s->body_max ? MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
		                                                               MHD_HTTP_HEADER_CONTENT_LENGTH)
		                                 : NULL;

		head_deadline(cls, conn, false);
		st->started = true;
		atomic_fetch_add(&s->inflight, 1);
		st->body.max = s->body_max;
		/* a body announced over the limit is answered before it is read */
		if (length && strtoull(length, NULL, 10) > s->body_max) {
			st->too_large = true;
			return dispatch(cls, conn, url, method, st);
		}
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		kiln_http_server *s = cls;

		if (s->body_max && !st->too_large && !st->status &&
		    kiln_buf_put(&st->body, upload_data, *upload_data_size) < 0) {
			st->too_large = true;
			kiln_buf_free(&st->body);
		}
		if (s->body_max && !st->too_large && !st->status) {
			*upload_data_size = 0;
			return MHD_YES;
		}
		st->dropped += *upload_data_size;
		*upload_data_size = 0;
		return st->dropped > REQUEST_BODY_MAX ? MHD_NO : MHD_YES;
	}
	if (st->status) /* answered before the body was read */
		return MHD_YES;
	if (st->ready) { /* back from a worker */
		st->ready = false;
		return answer(conn, st, &st->res, strcmp(method, "HEAD") == 0);
	}
	return dispatch(cls, conn, url, method, st);
}

/* "HOST:PORT" into *sa; HOST dotted IPv4 or "localhost". */
static int parse_listen(struct sockaddr_in *sa, const char *listen)
{
	char host[64];
	const char *colon = strrchr(listen, ':'), *p;
	unsigned long port = 0;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof(host) || !colon[1] ||
	    strlen(colon + 1) > 5)
		goto bad;
	for (p = colon + 1; *p; p++) {
		if (*p < '0' || *p > '9')
			goto bad;
		port = port * 10 + (unsigned long)(*p - '0');
	}
	if (port > 65535)
		goto bad;
	memcpy(host, listen, (size_t)(colon - listen));
	host[colon - listen] = '\0';
	if (strcmp(host, "localhost") == 0)
		sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		goto bad;
	sa->sin_port = htons((uint16_t)port);
	return 0;
bad:
	return kiln_error_set(KILN_EINVALID, "%s: expected HOST:PORT (HOST an IPv4 address or localhost)",
	                      listen);
}

/* Why the address cannot be listened on, tried on a socket of our own
 * (libmicrohttpd does not report it); 0 when it can be. */
static int listen_errno(const struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, err = 0;

	if (fd < 0)
		return errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0 || listen(fd, 1) != 0)
		err = errno;
	close(fd);
	return err;
}

/* Stops the workers once the queue is drained (every connection given
 * to them resumed). */
static void workers_stop(kiln_http_server *s)
{
	size_t n;

	if (!s->lock_ready)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	n = s->nworkers;
	s->nworkers = 0; /* joined once, whoever calls again */
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < n; i++)
		pthread_join(s->workers[i], NULL);
}

static void server_free(kiln_http_server *s)
{
	for (size_t i = 0; s->routes && i < s->n; i++) {
		free((char *)s->routes[i].method);
		free((char *)s->routes[i].path);
	}
	free(s->routes);
	free(s->workers);
	if (s->track_ready) {
		pthread_mutex_destroy(&s->track_lock);
		pthread_cond_destroy(&s->track_cond);
	}
	if (s->lock_ready) {
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->cond);
	}
	free(s);
}

static int start_workers(kiln_http_server *s, unsigned n)
{
	if (!(s->workers = calloc(n, sizeof(*s->workers))))
		return kiln_error_oom(NULL);
	for (unsigned i = 0; i < n; i++) {
		if (pthread_create(&s->workers[i], NULL, worker_main, s) != 0) {
			workers_stop(s);
			return kiln_error_set(KILN_EIO, "cannot start HTTP worker threads");
		}
		s->nworkers = i + 1;
	}
	return 0;
}

int kiln_http_server_start_ex(kiln_http_server **out, const char *listen, const kiln_http_route *routes,
                              size_t n, const kiln_http_server_options *options)
{
	static const kiln_http_server_options defaults;
	const kiln_http_server_options *o = options ? options : &defaults;
	bool loop = o->mode == KILN_HTTP_EVENT_LOOP;
	unsigned threads = o->threads ? o->threads : kiln_cpu_count();
	unsigned limit = o->connection_limit ? o->connection_limit
	                 : loop              ? CONNECTIONS_LOOP
	                                     : CONNECTIONS_MAX;
	unsigned per_address = o->per_address_limit ? o->per_address_limit
	                       : loop               ? PER_ADDRESS_LOOP
	                                            : PER_ADDRESS_MAX;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	kiln_http_server *s = NULL;
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *info;
	struct MHD_OptionItem mode_options[5];
	size_t nmode = 0;
	int rc, err;

	*out = NULL;
	if ((rc = parse_listen(&sa, listen)) < 0)
		return rc;
	if (!(s = calloc(1, sizeof(*s))) || (n && !(s->routes = calloc(n, sizeof(*s->routes))))) {
		rc = kiln_error_oom(NULL);
		goto cleanup;
	}
	s->mode = o->mode;
	s->on_answered = o->on_answered;
	s->on_answered_ctx = o->on_answered_ctx;
	s->body_max = o->body_max;
	s->head_timeout_ms = 1000 * (int64_t)(o->head_timeout_s ? o->head_timeout_s : HEAD_TIMEOUT_S);
	for (size_t i = 0; i < n; i++) {
		assert(routes[i].method && routes[i].path && routes[i].handler);
		s->routes[i] = routes[i];
		s->routes[i].method = strdup(routes[i].method);
		s->routes[i].path = strdup(routes[i].path);
		s->n = i + 1;
		if (!s->routes[i].method || !s->routes[i].path) {
			rc = kiln_error_oom(NULL);
			goto cleanup;
		}
	}
	if ((rc = sweeper_start(s)) < 0)
		goto cleanup;
	if (loop) {
		if (pthread_mutex_init(&s->lock, NULL) != 0) {
			rc = kiln_error_oom(NULL);
			goto cleanup;
		}
		pthread_cond_init(&s->cond, NULL);
		s->lock_ready = true;
		if ((rc = start_workers(s, o->workers ? o->workers : WORKERS_DEFAULT)) < 0)
			goto cleanup;
		if (limit < threads)
			limit = threads; /* libmicrohttpd shares the limit out between the threads */
		flags |= MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO;
		if (threads > 1)
			mode_options[nmode++] =
			    (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, threads, NULL};
		mode_options[nmode++] =
		    (struct MHD_OptionItem){MHD_OPTION_LISTEN_BACKLOG_SIZE, LISTEN_BACKLOG, NULL};
	} else {
		flags |= MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
	}
	mode_options[nmode++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, limit, NULL};
	mode_options[nmode++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
	                                                per_address < limit ? per_address : limit, NULL};
	mode_options[nmode] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
	/* the logger first: libmicrohttpd complains (through it) of one given later */
	s->daemon = MHD_start_daemon(
	    flags, ntohs(sa.sin_port), NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
	    MHD_OPTION_CONNECTION_TIMEOUT, o->idle_timeout_s ? o->idle_timeout_s : IDLE_TIMEOUT_S,
	    MHD_OPTION_ARRAY, mode_options, MHD_OPTION_END);
	if (!s->daemon) {
		err = listen_errno(&sa);
		rc = err ? kiln_error_set(KILN_EIO, "%s: cannot listen: %s", listen, strerror(err))
		         : kiln_error_set(KILN_EIO, "%s: cannot start the HTTP server", listen);
		goto cleanup;
	}
	info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : ntohs(sa.sin_port);
	*out = s;
	return 0;
cleanup:
	if (s) {
		workers_stop(s);
		sweeper_stop(s);
		server_free(s);
	}
	return rc;
}

int kiln_http_server_start(kiln_http_server **out, const char *listen, const kiln_http_route *routes,
                           size_t n)
{
	return kiln_http_server_start_ex(out, listen, routes, n, NULL);
}

uint16_t kiln_http_server_port(const kiln_http_server *s)
{
	return s ? s->port : 0;
}

void kiln_http_server_stop(kiln_http_server *s)
{
	MHD_socket listener = MHD_INVALID_SOCKET;

	if (!s)
		return;
	atomic_store(&s->draining, true);
	if (s->mode == KILN_HTTP_EVENT_LOOP)
		listener = MHD_quiesce_daemon(s->daemon);
	workers_stop(s);
	for (unsigned ms = 0; ms < DRAIN_MS && atomic_load(&s->inflight) > 0; ms += 10)
		usleep(10 * 1000);
	sweeper_stop(s);
	MHD_stop_daemon(s->daemon);
	if (listener != MHD_INVALID_SOCKET)
		close(listener);
	server_free(s);
}
