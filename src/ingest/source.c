/* The registry of sources: the rows a pipeline's source.kind names, so the
 * pipeline loader finds a source and its option keys in one place. A new
 * source is one line here. */
#include "ingest/source.h"

#include <assert.h>
#include <stdbool.h>
#include <string.h>

#include "core/error.h"

/* Not here: kiln_source_replay, which no pipeline names (kiln replay runs
 * it over a pipeline's raw zone). */
static const kiln_source *const sources[] = {
    &kiln_source_file, &kiln_source_stdin, &kiln_source_directory, &kiln_source_kafka, &kiln_source_http,
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
	if (p->source->reads_name)
		return p->source->reads_name(p, name);
	return p->source_name && strcmp(p->source_name, name) == 0;
}

bool kiln_source_secret_key(const char *key)
{
	for (size_t i = 0; key && i < SOURCE_COUNT; i++)
		for (const char *const *k = sources[i]->secret_keys; k && *k; k++)
			if (strcmp(*k, key) == 0)
				return true;
	return false;
}

int kiln_source_check_settings(const kiln_pipeline *p)
{
	return p->source->settings ? p->source->settings(p) : 0;
}
