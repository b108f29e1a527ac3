/* The http source, kiln_source_http (ingest/source.h; http_source.c,
 * docs/PIPELINES.md "Sources: http"): what this header adds is the row's
 * own settings, which its configure reads from source.* into
 * kiln_pipeline.source_config. */
#ifndef KILN_INGEST_HTTP_SOURCE_H
#define KILN_INGEST_HTTP_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kiln_http_config {
	const char *listen;     /* HOST:PORT the row listens on for POST /v1/records */
	const char *token_file; /* the bearer token's file (owner-only) */
	const char *port_file;  /* the port bound is written here (NULL: not written) */
	size_t max_body_bytes;  /* a larger POST body is refused (413; default 16 MiB) */
	uint64_t max_waiting;   /* records received and not yet committed, at most (503 above) */
	bool ack_received;      /* ack: received (202 once in the raw zone), not committed */
} kiln_http_config;

#endif
