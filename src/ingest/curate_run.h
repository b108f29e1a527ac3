/* One `kiln run` over a file or stdin source: validate -> pseudonymise ->
 * split -> shard -> store, quarantine for the rejected, then one snapshot
 * commit. A file source resumes where the branch's lineage.json says its
 * last run stopped (after checking the file still starts with the bytes that
 * run read), so re-running over a grown file adds only the new records. */
#ifndef KILN_INGEST_CURATE_RUN_H
#define KILN_INGEST_CURATE_RUN_H

#include "core/line_reader.h"
#include "ingest/curate_pool.h"
#include "ingest/pipeline.h"
#include "manifest/manifest.h"

typedef struct kiln_run_result {
	char commit[41]; /* "" when nothing new was read: no commit */
	kiln_stats delta;
	uint64_t first_offset, next_offset;
	uint64_t quarantine_objects;
	size_t shards;
	/* directory sources: the files read, and those that changed after they
	 * were committed (not read again; `changed` names them, cut with "...") */
	uint64_t files_read, files_changed;
	char changed[1024];
	/* file and stdin runs: CPU time of the workers' serial turns (reading
	 * and delivering, one worker at a time: kiln_curate_pool_turns_cpu_ns) */
	uint64_t serial_turns_ns;
} kiln_run_result;

/* A one-shot file or stdin run's progress, after each batch read: the
 * input's bytes read (from its start, earlier runs' included), its size
 * (0: not known, a pipe) and the records this run read. */
typedef struct kiln_run_progress {
	void (*fn)(void *ctx, uint64_t bytes, uint64_t total, uint64_t records);
	void *ctx;
} kiln_run_progress;

/* progress may be NULL. */
int kiln_curate_run(const kiln_pipeline *pipeline, const kiln_run_progress *progress, kiln_run_result *out);

/* Validate/curate threads for a pipeline: its `workers`, else one per CPU. */
unsigned kiln_curate_worker_count(const kiln_pipeline *pipeline);

/* Fills an empty batch with the reader's next lines (at most max_lines, and
 * at most one batch's worth), the first at offset `first`; *bytes_read: the
 * input's offset after the last line. Returns 1 with records, 0 at the end. */
int kiln_batch_fill_lines(kiln_batch *b, kiln_line_reader *reader, const char *topic, int64_t first,
                          size_t max_lines, uint64_t *bytes_read);

#endif
