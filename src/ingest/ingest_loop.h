/* The one ingest loop, the run engine's one-shot mode (ingest/engine.h):
 * a run of a source (ingest/source.h) from open to its snapshot commit at
 * the end of its input, through the sink every run shares. The loop owns
 * the run setup (keys, store, manifest) and the sink; the source owns its
 * input and decides what lineage.json records. */
#ifndef KILN_INGEST_INGEST_LOOP_H
#define KILN_INGEST_INGEST_LOOP_H

#include "ingest/curate_run.h"
#include "ingest/pipeline.h"
#include "ingest/run_setup.h"
#include "ingest/sink.h"
#include "ingest/source.h"

/* What a source's callbacks see of the run. */
typedef struct kiln_ingest {
	const kiln_pipeline *p;
	kiln_run_setup setup;
	kiln_sink sink;
	kiln_run_result *out; /* the source sets first_offset and next_offset */
} kiln_ingest;

/* Runs `source` (with its args) over `pipeline`: out is zeroed, then holds
 * what was read and the commit ("" when none). 0, or the first error. */
int kiln_ingest_run(const kiln_source *source, const void *args, const kiln_pipeline *pipeline,
                    kiln_run_result *out);

#endif
