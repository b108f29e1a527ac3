/* The sink every source's records go to (see sink.h). */
#include "ingest/sink.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cpus.h"
#include "core/error.h"
#include "ingest/curate_run.h"
#include "ingest/dedup_filter.h"
#include "ingest/source.h"
#include "mask/screen.h"

unsigned kiln_zstd_thread_count(const kiln_pipeline *p)
{
	long n = p->zstd_threads ? (long)p->zstd_threads : (long)kiln_cpu_count();

	return n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
}

static void writers_free(kiln_sink *s)
{
	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		kiln_shard_writer_free(s->writers[i]);
		s->writers[i] = NULL;
	}
	kiln_quarantine_free(s->quarantine);
	s->quarantine = NULL;
}

/* A stored shard's filter goes into the manifest's objects on the writer's
 * thread, so the commit (on the run's main thread) finds it there. */
static void filter_ahead(void *ctx, const unsigned char *filter, size_t len)
{
	kiln_sink *s = ctx;

	kiln_manifest_blob_ahead(s->setup->manifest, filter, len);
}

int kiln_sink_renew(kiln_sink *s)
{
	const kiln_pipeline *p = s->setup->p;
	kiln_shard_writer_options wopt = {.target_bytes = p->target_bytes,
	                                  .level = p->zstd_level,
	                                  .background = true,
	                                  .zstd_threads = kiln_zstd_thread_count(p),
	                                  .zstd_pool = s->zstd,
	                                  .filter_stored = s->setup->manifest ? filter_ahead : NULL,
	                                  .filter_ctx = s};
	int rc;

	writers_free(s);
	kiln_profile_clear(&s->profile);
	/* what was delivered is dropped: so are its keys (the index goes back
	 * to the branch tip's, which may hold another writer's since) */
	if (s->setup->dedup && kiln_dedup_pending_count(s->setup->dedup) &&
	    (rc = kiln_run_setup_dedup_load(s->setup)) < 0)
		return rc;
	/* a file source's objects keep the name they had before kinds were
	 * named (docs/FORMATS.md, "Quarantine objects"); every other kind's
	 * names end in its kind */
	if ((rc = kiln_quarantine_new(&s->quarantine, s->setup->store, p->dataset, p->branch,
	                              p->source == &kiln_source_file ? NULL : p->source->kind,
	                              p->target_bytes, p->zstd_level, NULL)) < 0)
		return rc;
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		if ((rc = kiln_shard_writer_new(&s->writers[i], s->setup->store, &wopt)) < 0)
			return rc;
	return 0;
}

static int deliver(void *ctx, kiln_batch *b)
{
	return kiln_sink_deliver(ctx, b);
}

int kiln_sink_open(kiln_sink *out, kiln_run_setup *setup, const kiln_sink_options *o)
{
	const kiln_pipeline *p = setup->p;
	int rc;

	memset(out, 0, sizeof(*out));
	out->setup = setup;
	out->delta = o->delta;
	if (p->profile) {
		kiln_pii_screen *screen = NULL;
		/* categories from the data, never of a value a PII detector flags */
		if ((rc = kiln_profile_schema_new(&out->profile_schema, setup->contract)) < 0 ||
		    (rc = kiln_pii_screen_new(&screen)) < 0 ||
		    (rc = kiln_profile_schema_set_categories(out->profile_schema, p->profile_categories_k,
		                                             kiln_pii_screen_flags, screen,
		                                             kiln_pii_screen_free)) < 0 ||
		    (rc = kiln_profile_init(&out->profile, out->profile_schema)) < 0)
			return rc;
	}
	if ((rc = kiln_zstd_pool_new(&out->zstd, kiln_zstd_thread_count(p))) < 0 ||
	    (rc = kiln_sink_renew(out)) < 0)
		return rc;
	kiln_curate_pool_options popt = {.pipeline = p,
	                                 .contract = setup->contract,
	                                 .key = &setup->key,
	                                 .splitter = &setup->splitter,
	                                 .split_field = setup->split_field,
	                                 .profile = out->profile_schema,
	                                 .workers = kiln_curate_worker_count(p),
	                                 .raw_store = o->raw_zone ? setup->store : NULL,
	                                 .dedup_fields = setup->dedup_fields,
	                                 .dedup_paths = p->dedup_keys,
	                                 .dedup_field_count = setup->dedup ? p->dedup_key_count : 0,
	                                 .dedup_key = setup->dedup_key,
	                                 .consume = o->consume ? o->consume : deliver,
	                                 .ctx = o->consume ? o->ctx : out,
	                                 .deliver_on_workers = o->deliver_on_workers};
	return kiln_curate_pool_new(&out->pool, &popt);
}

void kiln_sink_close(kiln_sink *s)
{
	kiln_curate_pool_free(s->pool);
	s->pool = NULL;
	writers_free(s);
	kiln_zstd_pool_free(s->zstd); /* after the writers that use it */
	s->zstd = NULL;
	kiln_profile_free(&s->profile);
	kiln_profile_schema_free(s->profile_schema);
	s->profile_schema = NULL;
}

int kiln_sink_dedup(kiln_sink *s, kiln_batch *b)
{
	kiln_dedup *dedup = s->setup->dedup;
	struct timespec now;
	int rc;

	if (!dedup || b->deduped)
		return 0;
	clock_gettime(CLOCK_REALTIME, &now);
	if ((rc = kiln_dedup_filter(b, dedup, (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000,
	                            s->setup->p->dedup_keys[0], s->profile_schema ? &s->profile : NULL,
	                            s->profile_schema)) < 0)
		return rc;
	b->deduped = true;
	return 0;
}

int kiln_sink_deliver(kiln_sink *s, kiln_batch *b)
{
	int rc;

	if ((rc = kiln_sink_dedup(s, b)) < 0)
		return rc;
	return kiln_batch_deliver(b, s->writers, s->quarantine, s->delta,
	                          s->profile_schema ? &s->profile : NULL);
}

int kiln_sink_finish_shards(kiln_sink *s)
{
	int rc;

	/* every split's last shard handed to its writer's thread first, so
	 * they are finished and stored side by side */
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		if ((rc = kiln_shard_writer_flush(s->writers[i])) < 0)
			return rc;
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		if ((rc = kiln_shard_writer_finish(s->writers[i])) < 0)
			return rc;
	return 0;
}

int kiln_sink_flush_quarantine(kiln_sink *s)
{
	return kiln_quarantine_flush(s->quarantine);
}

size_t kiln_sink_shards(kiln_sink *s, kiln_snapshot *snap)
{
	kiln_stats *d = s->delta;
	size_t shards = 0;

	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		snap->shards[i] = kiln_shard_writer_shards(s->writers[i], &snap->shard_count[i]);
		d->splits[i].shards = snap->shard_count[i];
		d->splits[i].bytes = d->splits[i].raw_bytes = 0;
		for (size_t j = 0; j < snap->shard_count[i]; j++) {
			d->splits[i].bytes += snap->shards[i][j].bytes;
			d->splits[i].raw_bytes += snap->shards[i][j].raw_bytes;
		}
		shards += snap->shard_count[i];
	}
	snap->delta = *d;
	snap->profile = s->profile_schema ? &s->profile : NULL;
	return shards;
}
