/* OpenLineage RunEvents as JSON (docs/LINEAGE.md): the one encoder of an
 * event and of the facets kiln puts in one, from plain values, so that
 * tests/unit/openlineage.c can check every byte without a pipeline. A facet
 * carries its `_producer` and `_schemaURL`; no function here takes a record
 * or a value from one, only names, counts, versions and sketches' figures. */
#ifndef KILN_OPENLINEAGE_EVENT_H
#define KILN_OPENLINEAGE_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/contract.h"
#include "core/buf.h"
#include "quality/profile.h"

/* The spec version kiln writes: ../shared/specs/openlineage/OpenLineage.json's $id. */
#define KILN_OL_SPEC       "https://openlineage.io/spec/2-0-2/OpenLineage.json"
#define KILN_OL_SCHEMA_URL KILN_OL_SPEC "#/$defs/RunEvent"
#define KILN_OL_FACETS     "https://openlineage.io/spec/facets/"
/* kiln's home: the producer is KILN_OL_HOME "/releases/tag/v<version>", and
 * kiln's own facets are described in docs/LINEAGE.md ("kiln's facets") */
#define KILN_OL_HOME        "https://github.com/kiln/kiln"
#define KILN_OL_KILN_FACETS KILN_OL_HOME "/blob/main/docs/LINEAGE.md"

/* The description of a personal field in the schema facet. */
#define KILN_OL_PERSONAL "personal data: pseudonymised in the curated records"

/* A dataset of an event: facets and io_facets are the rendered members of
 * its "facets" and its "inputFacets" (inputs) or "outputFacets" (outputs)
 * objects, comma-separated, as kiln_ol_facet_begin starts them; NULL or ""
 * for none. */
typedef struct kiln_ol_dataset {
	const char *namespace_, *name;
	const char *facets;
	const char *io_facets;
} kiln_ol_dataset;

typedef struct kiln_ol_event {
	const char *type;   /* "START", "COMPLETE", "FAIL" */
	const char *run_id; /* a UUID, 36 characters */
	int64_t time_ms;    /* since the epoch */
	const char *producer;
	const char *job_namespace, *job_name;
	bool streaming;         /* JobTypeJobFacet.processingType STREAMING, else BATCH */
	const char *job_type;   /* JobTypeJobFacet.jobType: "RUN", "PROMOTE", "PUSH", "ERASE" */
	const char *error;      /* FAIL: the ErrorMessageRunFacet's message (NULL: none) */
	const char *run_facets; /* more run facet members (NULL: none) */
	const kiln_ol_dataset *inputs;
	size_t input_count;
	const kiln_ol_dataset *outputs;
	size_t output_count;
} kiln_ol_event;

/* Appends the event as one JSON object (no newline). 0 or KILN_ENOMEM. */
int kiln_ol_event_render(kiln_buf *out, const kiln_ol_event *event);

/* Appends `"name":{"_producer":"...","_schemaURL":"..."` (a comma first
 * when out is not empty): the caller appends the facet's own members, each
 * after a comma, and the closing '}'. schema_url NULL: the facet file
 * KILN_OL_FACETS<version>/<Type>.json#/$defs/<Type> (type and version given). */
int kiln_ol_facet_begin(kiln_buf *out, const char *producer, const char *name, const char *type,
                        const char *version);
/* The same for one of kiln's own facets, its schema URL in docs/LINEAGE.md. */
int kiln_ol_kiln_facet_begin(kiln_buf *out, const char *producer, const char *name);

/* "schema" (SchemaDatasetFacet) from the contract's fields, nested objects
 * and an array's object items as nested fields; a personal field (a
 * classification of pii, a pseudonymisation other than keep, or pii_scan)
 * says so in its description, and "kiln_personalFields" lists their paths. */
int kiln_ol_schema_facets(kiln_buf *out, const char *producer, const kiln_contract *contract);
/* Whether the field is personal, as kiln_ol_schema_facets marks it. */
bool kiln_ol_field_personal(const kiln_field *field);

/* "kiln_dataQualityMetrics": DataQualityMetricsInputDatasetFacet's shape
 * (the spec has no output variant) from a data profile: rowCount, bytes,
 * fileCount and per field nullCount, count, distinctCount, and for a field
 * profiled by values min, max and quantiles 0.25/0.5/0.75; a field
 * profiled by tokens only (a personal one) by counts only. */
int kiln_ol_quality_facet(kiln_buf *out, const char *producer, const kiln_profile *profile, uint64_t bytes,
                          uint64_t files);

/* A random (version 4) UUID. */
void kiln_ol_uuid(char out[37]);
/* ms since the epoch as RFC 3339 UTC with milliseconds: 2026-12-07T04:47:00.123Z */
void kiln_ol_time(char out[64], int64_t ms);

#endif
