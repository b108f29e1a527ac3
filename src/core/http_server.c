/* HTTP server on libmicrohttpd (see http_server.h). libmicrohttpd calls
 * on_request at least twice per request: once when the headers are in
 * (state->started set, nothing answered), once per chunk of body (dropped),
 * and once more with no data, when the answer is queued. The raw query
 * string comes from the URI log callback, the first hook of a request. */
#include "core/http_server.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"

#define BODY_MAX         (64u << 20) /* response body a handler may build */
#define REQUEST_BODY_MAX (1u << 20)  /* request body dropped before hanging up */
#define CONNECTIONS_MAX  64u
#define IDLE_TIMEOUT_S   30u
#define TEXT_PLAIN       "text/plain; charset=utf-8"

struct kiln_http_server {
	struct MHD_Daemon *daemon;
	kiln_http_route *routes; /* method and path strdup'ed */
	size_t n;
	uint16_t port;
};

typedef struct request_state {
	char *query;    /* after '?', NULL when none */
	bool started;   /* the headers' call has been answered with MHD_YES */
	size_t dropped; /* request body bytes read and thrown away */
} request_state;

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	request_state *st = calloc(1, sizeof(*st));
	const char *q = uri ? strchr(uri, '?') : NULL;

	if (st && q && !(st->query = strdup(q + 1))) {
		free(st);
		return NULL;
	}
	return st; /* NULL: on_request allocates one without the query */
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	request_state *st = *con_cls;

	if (st) {
		free(st->query);
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

/* Queues status with body[0..len) (taken over when `owned`: freed with
 * free() once sent) and the given headers. */
static enum MHD_Result answer(struct MHD_Connection *conn, unsigned status, char *body, size_t len,
                              bool owned, const char *content_type, const char *allow)
{
	struct MHD_Response *res;
	enum MHD_Result ret;

	if (owned && body)
		res = MHD_create_response_from_buffer_with_free_callback(len, body, free);
	else
		res = MHD_create_response_from_buffer(len, body ? body : (char *)"", MHD_RESPMEM_PERSISTENT);
	if (!res) {
		if (owned)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, content_type ? content_type : TEXT_PLAIN);
	if (allow)
		MHD_add_response_header(res, MHD_HTTP_HEADER_ALLOW, allow);
	ret = MHD_queue_response(conn, status, res);
	MHD_destroy_response(res);
	return ret;
}

static enum MHD_Result answer_text(struct MHD_Connection *conn, unsigned status, const char *text,
                                   const char *allow)
{
	return answer(conn, status, (char *)text, strlen(text), false, TEXT_PLAIN, allow);
}

/* 405 with the methods the path answers to. */
static enum MHD_Result not_allowed(kiln_http_server *s, struct MHD_Connection *conn, const char *path)
{
	char allow[256];
	size_t len = 0;

	allow[0] = '\0';
	for (size_t i = 0; i < s->n; i++) {
		const kiln_http_route *r = &s->routes[i];

		if (strcmp(r->path, path) != 0)
			continue;
		len += (size_t)snprintf(allow + len, sizeof(allow) - len, "%s%s%s", len ? ", " : "",
		                        r->method, strcmp(r->method, "GET") == 0 ? ", HEAD" : "");
		if (len >= sizeof(allow))
			break;
	}
	return answer_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n", allow);
}

static enum MHD_Result dispatch(kiln_http_server *s, struct MHD_Connection *conn, const char *path,
                                const char *method, const request_state *st)
{
	const kiln_http_route *route = NULL;
	bool known = false, head = strcmp(method, "HEAD") == 0;
	kiln_http_request req;
	kiln_http_response res = {200, NULL, KILN_BUF_INIT(BODY_MAX)};
	int rc;

	for (size_t i = 0; i < s->n && !route; i++) {
		const kiln_http_route *r = &s->routes[i];

		if (strcmp(r->path, path) != 0)
			continue;
		known = true;
		if (strcmp(r->method, method) == 0 || (head && strcmp(r->method, "GET") == 0))
			route = r;
	}
	if (!known)
		return answer_text(conn, MHD_HTTP_NOT_FOUND, "not found\n", NULL);
	if (!route)
		return not_allowed(s, conn, path);

	req.method = method;
	req.path = path;
	req.query = st->query;
	req.authorization = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	kiln_error_clear();
	rc = route->handler(route->ctx, &req, &res);
	if (rc >= 0 && (res.status < 100 || res.status > 999))
		rc = kiln_error_set(KILN_EINVALID, "handler for %s %s set status %d", route->method,
		                    route->path, res.status);
	if (rc < 0) {
		const char *msg = kiln_error_last()[0] ? kiln_error_last() : "internal error";

		kiln_buf_reset(&res.body);
		res.body.max = 0;
		if (kiln_buf_puts(&res.body, msg) < 0 || kiln_buf_putc(&res.body, '\n') < 0) {
			kiln_buf_free(&res.body);
			return answer_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal error\n", NULL);
		}
		res.status = MHD_HTTP_INTERNAL_SERVER_ERROR;
		res.content_type = TEXT_PLAIN;
	}
	/* the body's allocation goes to libmicrohttpd, which frees it */
	return answer(conn, (unsigned)res.status, res.body.ptr, res.body.len, true, res.content_type, NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
	request_state *st = *con_cls;

	if (!st) {
		if (!(st = calloc(1, sizeof(*st))))
			return MHD_NO;
		*con_cls = st;
	}
	if (!st->started) {
		st->started = true;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		st->dropped += *upload_data_size;
		*upload_data_size = 0;
		return st->dropped > REQUEST_BODY_MAX ? MHD_NO : MHD_YES;
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

static void routes_free(kiln_http_route *routes, size_t n)
{
	for (size_t i = 0; routes && i < n; i++) {
		free((char *)routes[i].method);
		free((char *)routes[i].path);
	}
	free(routes);
}

int kiln_http_server_start(kiln_http_server **out, const char *listen, const kiln_http_route *routes,
                           size_t n)
{
	kiln_http_server *s = NULL;
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *info;
	int rc, err;

	*out = NULL;
	if ((rc = parse_listen(&sa, listen)) < 0)
		return rc;
	if (!(s = calloc(1, sizeof(*s))) || (n && !(s->routes = calloc(n, sizeof(*s->routes))))) {
		rc = kiln_error_set(KILN_ENOMEM, "out of memory");
		goto cleanup;
	}
	for (size_t i = 0; i < n; i++) {
		assert(routes[i].method && routes[i].path && routes[i].handler);
		s->routes[i] = routes[i];
		s->routes[i].method = strdup(routes[i].method);
		s->routes[i].path = strdup(routes[i].path);
		s->n = i + 1;
		if (!s->routes[i].method || !s->routes[i].path) {
			rc = kiln_error_set(KILN_ENOMEM, "out of memory");
			goto cleanup;
		}
	}
	s->daemon = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
	        MHD_USE_ERROR_LOG,
	    ntohs(sa.sin_port), NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
	    MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
	    MHD_OPTION_CONNECTION_LIMIT, CONNECTIONS_MAX, MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S,
	    MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, MHD_OPTION_END);
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
	if (s)
		routes_free(s->routes, s->n);
	free(s);
	return rc;
}

uint16_t kiln_http_server_port(const kiln_http_server *s)
{
	return s ? s->port : 0;
}

void kiln_http_server_stop(kiln_http_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->daemon);
	routes_free(s->routes, s->n);
	free(s);
}
