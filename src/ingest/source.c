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
    &kiln_source_file,
    &kiln_source_stdin,
    &kiln_source_directory,
    &kiln_source_kafka,
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

const char *kiln_source_entry_kind(const kiln_lineage_entry *e)
{
	if (!e->path)
		return kiln_source_kafka.kind;
	if (strchr(e->topic, KILN_SOURCE_DIR_SEP))
		return kiln_source_directory.kind;
	return strcmp(e->path, KILN_SOURCE_STDIN_PATH) == 0 ? kiln_source_stdin.kind : kiln_source_file.kind;
}

struct kind_check {
	const kiln_pipeline *p;
	const char *kind; /* the pipeline's */
	const char *branch;
};

bool kiln_source_reads_name(const kiln_pipeline *p, const char *name)
{
	if (p->source->reads_name)
		return p->source->reads_name(p, name);
	return p->source_name && strcmp(p->source_name, name) == 0;
}

static int refuse_other_kind(void *ctx, const kiln_lineage_entry *e)
{
	const struct kind_check *k = ctx;
	const char *was = kiln_source_entry_kind(e);

	if (!kiln_source_reads_name(k->p, e->topic) || strcmp(was, k->kind) == 0)
		return 0;
	return kiln_error_set(
	    KILN_EINVALID,
	    "%s@%s: lineage.json holds the position of %s (partition %d) that a %s source%s wrote; "
	    "this %s source of the same name would resume from it: give one of them another name "
	    "or run on another branch (--set branch=NAME)",
	    k->p->dataset, k->branch, e->topic, (int)e->partition, was,
	    !e->path ? " (or a stdin source of an older kiln: they look the same)" : "", k->kind);
}

int kiln_source_check_lineage(kiln_manifest *m, const kiln_pipeline *p, const char *branch)
{
	struct kind_check k = {
	    .p = p,
	    .kind = p->source->kind,
	    .branch = branch,
	};

	return kiln_manifest_lineage(m, p->dataset, branch, refuse_other_kind, &k);
}

int kiln_source_check_settings(const kiln_pipeline *p)
{
	return p->source->settings ? p->source->settings(p) : 0;
}
