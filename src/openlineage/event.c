/* The OpenLineage event encoder (see event.h): a RunEvent with its job's
 * JobTypeJobFacet, the run's ErrorMessageRunFacet on FAIL, and the dataset
 * facets kiln derives from a contract and a data profile. */
#include "openlineage/event.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "core/error.h"

static int put_str(kiln_buf *b, const char *s)
{
	return kiln_buf_put_json_text(b, s, strlen(s));
}

/* ---- facets --------------------------------------------------------------- */

static int facet_head(kiln_buf *out, const char *producer, const char *name, const char *url_a,
                      const char *url_b, const char *url_c)
{
	int rc = 0;

	if (out->len && out->ptr[out->len - 1] != '{')
		rc |= kiln_buf_putc(out, ',');
	rc |= put_str(out, name) | kiln_buf_puts(out, ":{\"_producer\":") | put_str(out, producer) |
	      kiln_buf_puts(out, ",\"_schemaURL\":\"") | kiln_buf_puts(out, url_a) |
	      kiln_buf_puts(out, url_b) | kiln_buf_puts(out, url_c) | kiln_buf_putc(out, '"');
	return rc ? KILN_ENOMEM : 0;
}

int kiln_ol_facet_begin(kiln_buf *out, const char *producer, const char *name, const char *type,
                        const char *version)
{
	char url[256];

	snprintf(url, sizeof(url), "%s/%s.json#/$defs/%s", version, type, type);
	return facet_head(out, producer, name, KILN_OL_FACETS, url, "");
}

int kiln_ol_kiln_facet_begin(kiln_buf *out, const char *producer, const char *name)
{
	/* the anchor docs/LINEAGE.md's heading for the facet has */
	char anchor[128];
	size_t n = 0;

	for (const char *p = name; *p && n + 1 < sizeof(anchor); p++)
		anchor[n++] = (*p >= 'A' && *p <= 'Z') ? (char)(*p - 'A' + 'a') : *p;
	anchor[n] = '\0';
	return facet_head(out, producer, name, KILN_OL_KILN_FACETS, "#", anchor);
}

bool kiln_ol_field_personal(const kiln_field *f)
{
	return f->pseudo_mode != KILN_PSEUDO_KEEP || f->pii_scan ||
	       (f->classification && strcasecmp(f->classification, "pii") == 0);
}

/* The fields of an object field, nested; personal ones described as such. */
static int schema_fields(kiln_buf *out, const kiln_field *object, unsigned depth)
{
	int rc = kiln_buf_puts(out, "[");

	for (size_t i = 0; i < object->child_count; i++) {
		const kiln_field *f = object->children[i];
		const kiln_field *nested =
		    f->type == KILN_LTYPE_OBJECT ? f
		    : (f->type == KILN_LTYPE_ARRAY && f->items && f->items->type == KILN_LTYPE_OBJECT)
		        ? f->items
		        : NULL;

		rc |= kiln_buf_puts(out, i ? ",{\"name\":" : "{\"name\":") |
		      kiln_buf_put_json_text(out, f->name, f->name_len) | kiln_buf_puts(out, ",\"type\":") |
		      put_str(out, kiln_ltype_name(f->type)) |
		      kiln_buf_printf(out, ",\"ordinal_position\":%u", f->position + 1);
		if (kiln_ol_field_personal(f))
			rc |= kiln_buf_puts(out, ",\"description\":\"" KILN_OL_PERSONAL "\"");
		if (nested && nested->child_count && depth < 32)
			rc |= kiln_buf_puts(out, ",\"fields\":") | schema_fields(out, nested, depth + 1);
		rc |= kiln_buf_putc(out, '}');
	}
	rc |= kiln_buf_putc(out, ']');
	return rc ? KILN_ENOMEM : 0;
}

/* The paths of the personal fields, depth first. */
static int personal_paths(kiln_buf *out, const kiln_field *object, bool *first, unsigned depth)
{
	int rc = 0;

	for (size_t i = 0; i < object->child_count && !rc; i++) {
		const kiln_field *f = object->children[i];

		if (kiln_ol_field_personal(f)) {
			rc |= kiln_buf_puts(out, *first ? "" : ",") | put_str(out, f->path);
			*first = false;
			continue;
		}
		if (depth < 32 && f->type == KILN_LTYPE_OBJECT)
			rc |= personal_paths(out, f, first, depth + 1);
		else if (depth < 32 && f->type == KILN_LTYPE_ARRAY && f->items &&
		         f->items->type == KILN_LTYPE_OBJECT)
			rc |= personal_paths(out, f->items, first, depth + 1);
	}
	return rc ? KILN_ENOMEM : 0;
}

int kiln_ol_schema_facets(kiln_buf *out, const char *producer, const kiln_contract *c)
{
	bool first = true;
	int rc = kiln_ol_facet_begin(out, producer, "schema", "SchemaDatasetFacet", "1-2-0");

	rc |= kiln_buf_puts(out, ",\"fields\":") | schema_fields(out, c->root, 0) | kiln_buf_putc(out, '}');
	rc |= kiln_ol_kiln_facet_begin(out, producer, "kiln_personalFields");
	rc |= kiln_buf_puts(out, ",\"contract\":") | put_str(out, c->id ? c->id : c->file) |
	      kiln_buf_puts(out, ",\"contractVersion\":") | put_str(out, c->version ? c->version : "") |
	      kiln_buf_puts(out, ",\"fields\":[") | personal_paths(out, c->root, &first, 0) |
	      kiln_buf_puts(out, "]}");
	return rc ? KILN_ENOMEM : 0;
}

/* A finite double as JSON (a sketch of no numbers gives 0, never NaN). */
static int put_number(kiln_buf *out, const char *key, double v)
{
	if (!isfinite(v))
		v = 0;
	return kiln_buf_printf(out, ",\"%s\":%.17g", key, v);
}

int kiln_ol_quality_facet(kiln_buf *out, const char *producer, const kiln_profile *p, uint64_t bytes,
                          uint64_t files)
{
	int rc = kiln_ol_kiln_facet_begin(out, producer, "kiln_dataQualityMetrics");

	rc |= kiln_buf_printf(out, ",\"rowCount\":%llu,\"bytes\":%llu,\"fileCount\":%llu,\"columnMetrics\":{",
	                      (unsigned long long)p->records, (unsigned long long)bytes,
	                      (unsigned long long)files);
	for (size_t i = 0; i < p->count; i++) {
		const kiln_profile_field *f = &p->fields[i];
		uint64_t nulls = f->types[KILN_PTYPE_NULL] + kiln_profile_missing(p, f);

		rc |= kiln_buf_puts(out, i ? "," : "") | put_str(out, f->path) |
		      kiln_buf_printf(out, ":{\"nullCount\":%llu,\"count\":%llu,\"distinctCount\":%llu",
		                      (unsigned long long)nulls,
		                      (unsigned long long)(f->present - f->types[KILN_PTYPE_NULL]),
		                      (unsigned long long)kiln_profile_distinct(f));
		if (!f->tokens && f->num.count) {
			rc |= put_number(out, "min", f->num.min) | put_number(out, "max", f->num.max) |
			      put_number(out, "sum", f->num.mean * (double)f->num.count) |
			      kiln_buf_puts(out, ",\"quantiles\":{\"0.25\":") |
			      kiln_buf_printf(out, "%.17g", kiln_profile_quantile(f, 0.25)) |
			      kiln_buf_printf(out, ",\"0.5\":%.17g", kiln_profile_quantile(f, 0.5)) |
			      kiln_buf_printf(out, ",\"0.75\":%.17g}", kiln_profile_quantile(f, 0.75));
		}
		rc |= kiln_buf_putc(out, '}');
	}
	rc |= kiln_buf_puts(out, "}}");
	return rc ? KILN_ENOMEM : 0;
}

/* ---- the event ------------------------------------------------------------ */

void kiln_ol_uuid(char out[37])
{
	unsigned char b[16];
	size_t got = 0;

	while (got < sizeof(b)) {
		ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
		if (n > 0)
			got += (size_t)n;
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
	         b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

void kiln_ol_time(char out[64], int64_t ms)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&s, &tm);
	snprintf(out, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
	         tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

static int datasets(kiln_buf *out, const char *key, const char *io_key, const kiln_ol_dataset *d, size_t n)
{
	int rc = kiln_buf_printf(out, ",\"%s\":[", key);

	for (size_t i = 0; i < n; i++) {
		rc |= kiln_buf_puts(out, i ? ",{\"namespace\":" : "{\"namespace\":") |
		      put_str(out, d[i].namespace_) | kiln_buf_puts(out, ",\"name\":") |
		      put_str(out, d[i].name);
		if (d[i].facets && *d[i].facets)
			rc |= kiln_buf_puts(out, ",\"facets\":{") | kiln_buf_puts(out, d[i].facets) |
			      kiln_buf_putc(out, '}');
		if (d[i].io_facets && *d[i].io_facets)
			rc |= kiln_buf_printf(out, ",\"%s\":{", io_key) | kiln_buf_puts(out, d[i].io_facets) |
			      kiln_buf_putc(out, '}');
		rc |= kiln_buf_putc(out, '}');
	}
	rc |= kiln_buf_putc(out, ']');
	return rc;
}

int kiln_ol_event_render(kiln_buf *out, const kiln_ol_event *e)
{
	char when[64];
	kiln_buf facets = KILN_BUF_INIT(0);
	int rc;

	kiln_ol_time(when, e->time_ms);
	rc = kiln_buf_puts(out, "{\"eventType\":") | put_str(out, e->type) |
	     kiln_buf_printf(out, ",\"eventTime\":\"%s\",\"producer\":", when) | put_str(out, e->producer) |
	     kiln_buf_puts(out, ",\"schemaURL\":\"" KILN_OL_SCHEMA_URL "\",\"run\":{\"runId\":") |
	     put_str(out, e->run_id);
	if (e->error || (e->run_facets && *e->run_facets)) {
		if (e->error)
			rc |= kiln_ol_facet_begin(&facets, e->producer, "errorMessage",
			                          "ErrorMessageRunFacet", "1-0-1") |
			      kiln_buf_puts(&facets, ",\"message\":") | put_str(&facets, e->error) |
			      kiln_buf_puts(&facets, ",\"programmingLanguage\":\"C\"}");
		if (e->run_facets && *e->run_facets)
			rc |= kiln_buf_puts(&facets, facets.len ? "," : "") |
			      kiln_buf_puts(&facets, e->run_facets);
		rc |= kiln_buf_puts(out, ",\"facets\":{") | kiln_buf_put(out, facets.ptr, facets.len) |
		      kiln_buf_putc(out, '}');
	}
	kiln_buf_reset(&facets);
	rc |= kiln_ol_facet_begin(&facets, e->producer, "jobType", "JobTypeJobFacet", "2-0-4") |
	      kiln_buf_printf(&facets, ",\"processingType\":\"%s\",\"integration\":\"KILN\",\"jobType\":",
	                      e->streaming ? "STREAMING" : "BATCH") |
	      put_str(&facets, e->job_type) | kiln_buf_putc(&facets, '}');
	rc |= kiln_buf_puts(out, "},\"job\":{\"namespace\":") | put_str(out, e->job_namespace) |
	      kiln_buf_puts(out, ",\"name\":") | put_str(out, e->job_name) |
	      kiln_buf_puts(out, ",\"facets\":{") | kiln_buf_put(out, facets.ptr, facets.len) |
	      kiln_buf_puts(out, "}}");
	rc |= datasets(out, "inputs", "inputFacets", e->inputs, e->input_count);
	rc |= datasets(out, "outputs", "outputFacets", e->outputs, e->output_count);
	rc |= kiln_buf_putc(out, '}');
	kiln_buf_free(&facets);
	return rc ? KILN_ENOMEM : 0;
}
