/* The registry of sources: the rows a pipeline's source.kind names, so the
 * pipeline loader finds a source and its option keys in one place. A new
 * source is one line here. */
#include "ingest/source.h"

#include <assert.h>
#include <string.h>

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
