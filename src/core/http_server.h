/* A small HTTP/1.1 server (libmicrohttpd) for /metrics, /healthz, control
 * endpoints, the http source and the cache's file serving: exact-path and
 * prefix routes, request headers by name, response headers, bodies built in
 * memory or sent zero-copy from a file descriptor, request bodies read and
 * dropped, or kept for the handler up to a limit (options.body_max). Two
 * threading modes: one thread per connection (kiln_http_server_start, so a
 * slow handler never holds up a scrape), or an epoll event loop on a pool
 * of threads with a few worker threads for blocking calls (for throughput).
 * The server owns copies of its routes; handlers' ctx stay the caller's. */
#ifndef KILN_CORE_HTTP_SERVER_H
#define KILN_CORE_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* Borrowed for the handler call. */
typedef struct kiln_http_request {
	const char *method;
	const char *path;          /* percent-decoded, without the query string */
	const char *query;         /* as sent, after '?'; NULL when none */
	const char *authorization; /* the Authorization header, or NULL */
	bool can_block;            /* false on an event-loop thread: see KILN_HTTP_BLOCKING */
	/* With options.body_max: the request body (NULL when empty), and
	 * whether it was over body_max (its Content-Length, or the bytes as
	 * they came: body is then NULL, the rest was dropped, and an answer to
	 * a Content-Length over the limit goes out before the body is read,
	 * the connection closed after it). */
	const char *body;
	size_t body_len;
	bool body_too_large;
	void *conn_; /* the server's: read headers with kiln_http_request_header */
} kiln_http_request;

/* The value of request header `name` (case-insensitive), or NULL when the
 * request has none; the first one when it came several times. Borrowed
 * like the request. */
const char *kiln_http_request_header(const kiln_http_request *req, const char *name);

#define KILN_HTTP_HEADERS_MAX      8
#define KILN_HTTP_HEADER_VALUE_MAX 256

typedef struct kiln_http_header {
	const char *name; /* a literal or static, like content_type */
	char value[KILN_HTTP_HEADER_VALUE_MAX];
} kiln_http_header;

/* The server sets status 200, content_type NULL (text/plain; charset=utf-8),
 * an empty body (capped at 64 MiB), fd -1 and no headers before the call.
 * A body is the in-memory `body` (freed by the server once sent), or, when
 * fd >= 0, bytes [offset, offset + length) of that file, sent with
 * sendfile(2) (up to 16 KiB read and written with the headers in one
 * call); the server takes the descriptor over and closes it, also on
 * error (body is then ignored). A file shorter than offset + length ends
 * the connection early. HEAD gets the headers, with the
 * Content-Length of that body, and no body. Content-Length, Date and
 * Connection are the server's; any other header goes through
 * kiln_http_response_add_header. */
typedef struct kiln_http_response {
	int status;
	const char *content_type; /* must outlive the call: a literal or static */
	kiln_buf body;
	int fd;
	uint64_t offset, length;
	kiln_http_header headers[KILN_HTTP_HEADERS_MAX];
	size_t header_count;
} kiln_http_response;

/* Adds header `name` (a literal or static) with a printf-formatted value:
 * KILN_ELIMIT past KILN_HTTP_HEADERS_MAX headers or a value of
 * KILN_HTTP_HEADER_VALUE_MAX bytes or more, KILN_EINVALID for a value with
 * CR or LF. */
int kiln_http_response_add_header(kiln_http_response *res, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A handler's return value, other than 0 or a negative KILN_E* code, when
 * req->can_block is false: "call me again where I may block" (on a worker
 * thread, with can_block true and a fresh response: what was put in `res`
 * is dropped). Event-loop handlers answer what they can at once (a file
 * already on disk) and return this before anything slow (a download, a
 * lock held for long). */
#define KILN_HTTP_BLOCKING 1

/* Returns 0, or a negative KILN_E* code: the server then answers 500 with
 * kiln_error_last() as a plain-text body. Runs on a server thread, several
 * at once. */
typedef int (*kiln_http_handler)(void *ctx, const kiln_http_request *req, kiln_http_response *res);

/* A path ending in '*' is a prefix route: the path "/v1/shards/" followed by
 * a '*' answers every path starting with "/v1/shards/" (that one included),
 * "/" followed by '*' every path. An exact route wins over prefix routes, a
 * longer prefix over a shorter one. Method "*" answers any method. */
typedef struct kiln_http_route {
	const char *method; /* "GET" (also answers HEAD: req->method "HEAD", body not sent), "POST", "*"... */
	const char *path;   /* exact match, or a prefix followed by '*' */
	kiln_http_handler handler;
	void *ctx;
} kiln_http_route;

typedef struct kiln_http_server kiln_http_server;

typedef enum kiln_http_mode {
	/* A thread per connection; handlers may block (can_block is always
	 * true). What kiln_http_server_start runs. */
	KILN_HTTP_THREAD_PER_CONNECTION,
	/* An epoll event loop on `threads` threads, each serving many
	 * connections; handlers run with can_block false and may return
	 * KILN_HTTP_BLOCKING to go on in one of `workers` threads while the
	 * connection waits. */
	KILN_HTTP_EVENT_LOOP,
} kiln_http_mode;

typedef struct kiln_http_server_options {
	kiln_http_mode mode;
	unsigned threads;          /* event loop: 0 for the CPUs this process may run on */
	unsigned workers;          /* event loop: threads for blocking calls, 0 for 16 */
	unsigned connection_limit; /* 0 for 256 (thread per connection) or 1024 (event loop) */
	/* Connections one client address may hold at once; a further one is
	 * accepted and closed at once. 0 for 16 (thread per connection) or 64
	 * (event loop); never above connection_limit. */
	unsigned per_address_limit;
	unsigned idle_timeout_s; /* a connection idle this long is closed; 0 for 30 */
	/* A connection that has not sent a complete request head (request line
	 * and headers) this long after it was accepted, or after its previous
	 * answer went out, is closed, however steadily it trickles bytes (the
	 * idle timeout restarts on every byte). 0 for 10. */
	unsigned head_timeout_s;
	/* Called (when set) once per answered request, from a server thread,
	 * with the path of the route that answered (as given in routes[];
	 * NULL when none did: a 404, 405 or 400 of the server's), the status
	 * sent and the body bytes sent when the whole answer went out (0 for
	 * HEAD, 304, or a client that hung up first). */
	void (*on_answered)(void *ctx, const char *route, int status, uint64_t body_bytes);
	void *on_answered_ctx;
	/* Request bodies up to this many bytes are kept for the handler
	 * (kiln_http_request.body); 0: read and dropped (up to 1 MiB, then the
	 * connection is closed). */
	size_t body_max;
} kiln_http_server_options;

/* Listens on "HOST:PORT" (HOST dotted IPv4 or "localhost"; PORT 0 takes a
 * free port) and serves routes[0..n), copied. Another path answers 404, a
 * known path with another method 405 with an Allow header, a request
 * target holding %00 400. Errors name the address:
 * "127.0.0.1:9464: cannot listen: Address already in use". options NULL
 * means a zeroed struct (thread per connection, the defaults). */
int kiln_http_server_start_ex(kiln_http_server **out, const char *listen, const kiln_http_route *routes,
                              size_t n, const kiln_http_server_options *options);

/* kiln_http_server_start_ex with options NULL. */
int kiln_http_server_start(kiln_http_server **out, const char *listen, const kiln_http_route *routes,
                           size_t n);

/* The port bound (the one chosen when PORT was 0). */
uint16_t kiln_http_server_port(const kiln_http_server *server);

/* Gives the answers in flight up to 2 s to go out (they carry "Connection:
 * close"), then stops listening and waits for running handlers to return.
 * NULL is fine. */
void kiln_http_server_stop(kiln_http_server *server);

#endif
