/* The registry of sources: the rows a pipeline's source.kind names, so the
 * pipeline loader finds a source and its option keys in one place. A new
 * source is one line here. */
#include "ingest/source.h"

#include <assert.h>
#include <stdbool.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "core/secret.h"

/* Not here: kiln_source_replay, which no pipeline names (kiln replay runs
 * it over a Kafka pipeline's raw zone), and Kafka, which is not a row
 * (KILN_SOURCE_KAFKA_KIND; the pipeline loader reads its keys itself). */
static const kiln_source *const sources[] = {
    &kiln_source_file,
    &kiln_source_stdin,
};

#define SOURCE_COUNT (sizeof(sources) / sizeof(sources[0]))

const kiln_source *kiln_source_at(size_t i)
{
	return i < SOURCE_COUNT ? sources[i] : NULL;
}

const kiln_source *kiln_source_find(const char *kind)
{
	for (size_t i = 0; kind && i < SOURCE_COUNT; i++) {
		assert(sources[i]->version == KILN_SOURCE_VERSION);
		if (strcmp(sources[i]->kind, kind) == 0)
			return sources[i];
	}
	return NULL;
}

bool kiln_source_reads_name(const kiln_pipeline *p, const char *name)
{
	if (!kiln_pipeline_is_kafka(p))
		return p->source_name && strcmp(p->source_name, name) == 0;
	for (size_t i = 0; i < p->topic_count; i++)
		if (strcmp(p->topics[i], name) == 0)
			return true;
	return false;
}

int kiln_source_check_settings(const kiln_pipeline *p)
{
	kiln_buf shown = KILN_BUF_INIT(0);
	int rc = 0;

	if (p->source == &kiln_source_file && !kiln_utf8_valid(p->source_path, strlen(p->source_path)))
		return kiln_error_set(KILN_EINVALID,
		                      "%s: source.path is not valid UTF-8, and lineage.json records it: "
		                      "give the file (or a link to it) a UTF-8 name",
		                      p->file);
	if (!kiln_pipeline_is_kafka(p) || !p->brokers)
		return 0;
	rc = kiln_secret_redact_userinfo(&shown, p->brokers, strlen(p->brokers));
	if (rc > 0 && kiln_buf_putc(&shown, '\0') == 0)
		rc = kiln_error_set(KILN_EINVALID,
		                    "%s: source.brokers: %s holds credentials, which Kafka clients do not "
		                    "read there: set source.options sasl.username and sasl.password: ${NAME}",
		                    p->file, shown.ptr);
	else if (rc > 0)
		rc = kiln_error_set(KILN_EINVALID, "%s: source.brokers holds credentials", p->file);
	kiln_buf_free(&shown);
	return rc < 0 ? rc : 0;
}
