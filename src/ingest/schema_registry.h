/* A Confluent-compatible schema registry, for Kafka records in the
 * Confluent wire format (magic byte 0, a 4-byte big-endian schema id, the
 * Avro binary datum): schemas fetched with GET /schemas/ids/{id} (basic
 * auth from a 0600 file, an optional CA file; libcurl with kiln's store
 * conventions), kept by id in a bounded cache shared by the curate
 * workers, and each record decoded to JSON there (docs/STREAMING.md). */
#ifndef KILN_INGEST_SCHEMA_REGISTRY_H
#define KILN_INGEST_SCHEMA_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "contract/validate.h"
#include "core/buf.h"

typedef struct kiln_schema_registry_config {
	const char *url;              /* http(s)://host:port[/prefix], no credentials */
	const char *credentials_file; /* "user:password", mode 0600; NULL: no auth */
	const char *ca_file;          /* NULL: the system's CAs */
	unsigned timeout_ms;          /* per request (default 10000) */
	unsigned wait_seconds;        /* how long a registry that does not answer is retried (default 300) */
	size_t cache_max;             /* schemas kept (default 1000) */
} kiln_schema_registry_config;

typedef struct kiln_schema_registry kiln_schema_registry;

/* Reads the credentials (kiln_secret_read_file: the mode enforced). */
int kiln_schema_registry_new(kiln_schema_registry **out, const kiln_schema_registry_config *cfg);
void kiln_schema_registry_free(kiln_schema_registry *reg);

/* One framed record to JSON appended to out (at most max_out bytes):
 * 0 decoded; 1 rejected, with report set (schema_unknown: the registry
 * answered 404; avro_decode, not_finite, too_large: the field path in the
 * report); a negative code with the error set when the registry did not
 * answer within wait_seconds or refused kiln (401/403): nothing is then
 * rejected, the run stops. Thread-safe. */
int kiln_schema_registry_decode(kiln_schema_registry *reg, const char *rec, size_t len, size_t max_out,
                                kiln_buf *out, kiln_report *report);

/* For kiln check: GET {url}/subjects once (no retry): 0 with a one-line
 * message in msg, or a negative code with the error set (naming the
 * endpoint; never the credentials). */
int kiln_schema_registry_probe(kiln_schema_registry *reg, char *msg, size_t cap);

/* The fetches made and the schemas cached (tests and metrics). */
void kiln_schema_registry_stats(kiln_schema_registry *reg, uint64_t *fetches, size_t *cached);

#endif
