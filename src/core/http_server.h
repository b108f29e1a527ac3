/* A small HTTP/1.1 server (libmicrohttpd) for /metrics, /healthz and a few
 * control endpoints: exact-path routes, one thread per connection so a slow
 * handler never holds up a scrape, request bodies read and dropped. The
 * server owns copies of its routes; handlers' ctx stay the caller's. */
#ifndef KILN_CORE_HTTP_SERVER_H
#define KILN_CORE_HTTP_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* Borrowed for the handler call. */
typedef struct kiln_http_request {
	const char *method;
	const char *path;          /* percent-decoded, without the query string */
	const char *query;         /* as sent, after '?'; NULL when none */
	const char *authorization; /* the Authorization header, or NULL */
} kiln_http_request;

/* The server sets status 200, content_type NULL (text/plain; charset=utf-8)
 * and an empty body (capped at 64 MiB) before the call, and frees the body
 * after sending it. */
typedef struct kiln_http_response {
	int status;
	const char *content_type; /* must outlive the call: a literal or static */
	kiln_buf body;
} kiln_http_response;

/* Returns 0, or a negative KILN_E* code: the server then answers 500 with
 * kiln_error_last() as a plain-text body. Runs on a server thread, several
 * at once. */
typedef int (*kiln_http_handler)(void *ctx, const kiln_http_request *req, kiln_http_response *res);

typedef struct kiln_http_route {
	const char *method; /* "GET" (also answers HEAD: req->method "HEAD", body not sent), "POST", ... */
	const char *path;   /* exact match */
	kiln_http_handler handler;
	void *ctx;
} kiln_http_route;

typedef struct kiln_http_server kiln_http_server;

/* Listens on "HOST:PORT" (HOST dotted IPv4 or "localhost"; PORT 0 takes a
 * free port) and serves routes[0..n), copied. Another path answers 404; a
 * known path with another method 405 with an Allow header. Errors name the
 * address: "127.0.0.1:9464: cannot listen: Address already in use". */
int kiln_http_server_start(kiln_http_server **out, const char *listen, const kiln_http_route *routes,
                           size_t n);

/* The port bound (the one chosen when PORT was 0). */
uint16_t kiln_http_server_port(const kiln_http_server *server);

/* Stops listening and waits for running handlers to return. NULL is fine. */
void kiln_http_server_stop(kiln_http_server *server);

#endif
