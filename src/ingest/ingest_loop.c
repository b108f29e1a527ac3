/* The run engine's one-shot mode, the one ingest loop (see ingest_loop.h
 * and the stages in source.h): a row read once, committed at the end of
 * its input. The streaming mode is engine.c; both land through
 * kiln_engine_land. */
#include "ingest/ingest_loop.h"

#include <assert.h>
#include <string.h>

#include "core/error.h"
#include "ingest/engine_internal.h"

struct loop {
	const kiln_source *source;
	void *src;
	kiln_ingest in;
};

static int consume(void *ctx, kiln_batch *b)
{
	struct loop *l = ctx;
	int rc;

	if ((rc = kiln_sink_dedup(&l->in.sink, b)) < 0)
		return rc;
	if (l->source->prepare)
		l->source->prepare(l->src, b);
	return kiln_sink_deliver(&l->in.sink, b);
}

/* What was read is durable: the shards, the quarantine, then the commit. */
static int commit(struct loop *l)
{
	kiln_ingest *in = &l->in;
	kiln_snapshot snap = {0};
	int rc;

	if ((rc = kiln_engine_land(&in->sink, &snap)) < 0)
		return rc;
	in->out->quarantine_objects = kiln_quarantine_objects(in->sink.quarantine);
	in->out->shards += (size_t)rc;
	if ((rc = l->source->lineage(l->src, in, &snap)) < 0)
		return rc;
	rc = kiln_run_setup_commit(&in->setup, &snap, in->out->commit);
	if (l->source->committed)
		rc = l->source->committed(l->src, in, rc);
	return rc;
}

int kiln_ingest_run(const kiln_source *source, const void *args, const kiln_pipeline *p, kiln_run_result *out)
{
	struct loop l = {.source = source, .in = {.p = p, .out = out}};
	/* a source without prepare keeps no state the delivery touches: the
	 * workers deliver, the calling thread only reads */
	kiln_sink_options sopt = {
	    .delta = &out->delta, .consume = consume, .ctx = &l, .deliver_on_workers = !source->prepare};
	int rc;

	assert(source->version == KILN_SOURCE_VERSION);
	memset(out, 0, sizeof(*out));
	if ((rc = kiln_run_setup_open(&l.in.setup, p)) < 0 || (rc = source->open(&l.src, &l.in, args)) <= 0)
		goto cleanup;
	if ((rc = kiln_sink_open(&l.in.sink, &l.in.setup, &sopt)) < 0 ||
	    (rc = source->read(l.src, &l.in)) < 0 || (rc = kiln_curate_pool_drain(l.in.sink.pool)) < 0 ||
	    (rc = source->end(l.src, &l.in)) <= 0)
		goto cleanup;
	rc = commit(&l);

cleanup:
	source->close(l.src, &l.in);
	kiln_sink_close(&l.in.sink);
	kiln_run_setup_close(&l.in.setup);
	return rc;
}
