/* The events of each command (openlineage.h): the run (START, COMPLETE or
 * FAIL), its inputs (a range of offsets per topic partition or file) and
 * outputs (the dataset version with its schema, version, statistics and
 * data quality facets), each rendered by event.c and queued by queue.c.
 * Names, counts, offsets and versions only: never a record's value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "ingest/source.h"
#include "openlineage/event.h"
#include "openlineage/internal.h"
#include "openlineage/openlineage.h"
#include "quality/profile.h"

static void read_positions(kiln_openlineage *ol);

#define MAX_INPUTS                                                                                           \
	256 /* topics or files named in one event; more are left out (docs/LINEAGE.md, "Limits")             \
	     */

void kiln_ol_emit(kiln_openlineage *ol, const char *type, int64_t time_ms, const char *error,
                  const kiln_ol_dataset *in, size_t n_in, const kiln_ol_dataset *outs, size_t n_out)
{
	kiln_ol_event e = {.type = type,
	                   .run_id = ol->run_id,
	                   .time_ms = time_ms,
	                   .producer = ol->producer,
	                   .job_namespace = ol->cfg.namespace_,
	                   .job_name = ol->job_name,
	                   .streaming = ol->streaming,
	                   .job_type = ol->job_type,
	                   .error = error,
	                   .inputs = in,
	                   .input_count = n_in,
	                   .outputs = outs,
	                   .output_count = n_out};
	kiln_buf b = KILN_BUF_INIT(0);

	if (kiln_ol_event_render(&b, &e) == 0)
		kiln_ol_enqueue(ol, &b);
	else
		KILN_LOG(KILN_LOG_WARN, "openlineage_dropped",
		         "out of memory rendering an OpenLineage event");
	kiln_buf_free(&b);
}

/* The open run's START, once (dated when the run began). */
void kiln_ol_ensure_started(kiln_openlineage *ol)
{
	if (!ol->open) {
		kiln_ol_uuid(ol->run_id);
		ol->open = true;
		ol->started = false;
		ol->run_start_ms = kiln_ol_wall_ms();
	}
	if (!ol->started) {
		kiln_ol_emit(ol, "START", ol->run_start_ms, NULL, NULL, 0, NULL, 0);
		ol->started = true;
	}
}

void kiln_openlineage_begin(kiln_openlineage *ol, const char *job_type, bool streaming)
{
	if (!ol)
		return;
	ol->job_type = job_type;
	ol->streaming = streaming;
	ol->open = false;
	if (strcmp(job_type, "RUN") == 0)
		read_positions(ol); /* where the run's ranges start, before it commits */
	kiln_ol_ensure_started(ol);
}

void kiln_openlineage_fail(kiln_openlineage *ol, const char *message)
{
	if (!ol || !ol->job_type)
		return;
	kiln_ol_ensure_started(ol);
	kiln_ol_emit(ol, "FAIL", kiln_ol_wall_ms(), message && *message ? message : "failed", NULL, 0, NULL,
	             0);
	ol->open = false;
}

static kiln_manifest *manifest(kiln_openlineage *ol)
{
	if (!ol->manifest && kiln_manifest_open(&ol->manifest, ol->p->manifest_repo) < 0)
		ol->manifest = NULL;
	return ol->manifest;
}

/* The version's facets: DatasetVersionDatasetFacet, the contract's schema,
 * and the profile's data quality metrics (when it has one). */
int kiln_ol_version_facets(kiln_openlineage *ol, kiln_buf *f, const kiln_version *v, const char *version,
                           uint64_t bytes, uint64_t files)
{
	kiln_profile total = {0};
	int rc = kiln_ol_facet_begin(f, ol->producer, "version", "DatasetVersionDatasetFacet", "1-0-1") |
	         kiln_buf_puts(f, ",\"datasetVersion\":") |
	         kiln_buf_put_json_text(f, version, strlen(version)) |
	         kiln_buf_printf(f, ",\"commit\":\"%s\"", v->commit);

	if (v->tag[0])
		rc |= kiln_buf_printf(f, ",\"tag\":\"%s\"", v->tag);
	rc |= kiln_buf_putc(f, '}');
	if (ol->schema_facets[0])
		rc |= kiln_buf_putc(f, ',') | kiln_buf_puts(f, ol->schema_facets);
	if (manifest(ol) && kiln_version_profile(ol->manifest, v, version, &total, NULL) > 0)
		rc |= kiln_ol_quality_facet(f, ol->producer, &total, bytes, files);
	kiln_profile_free(&total);
	return rc ? KILN_ENOMEM : 0;
}

uint64_t kiln_ol_split_bytes(const kiln_stats *s)
{
	uint64_t n = 0;

	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		n += s->splits[i].bytes;
	return n;
}

/* ---- run ------------------------------------------------------------------ */

static kiln_ol_position *find_position(kiln_openlineage *ol, const char *topic, const char *path,
                                       int32_t partition)
{
	for (size_t i = 0; i < ol->pos_count; i++) {
		kiln_ol_position *p = &ol->pos[i];
		if (p->partition == partition && strcmp(p->topic ? p->topic : "", topic ? topic : "") == 0 &&
		    strcmp(p->path ? p->path : "", path ? path : "") == 0)
			return p;
	}
	return NULL;
}

static void remember(kiln_openlineage *ol, const kiln_lineage_entry *e)
{
	kiln_ol_position *p = find_position(ol, e->topic, e->path, e->partition), *np;

	if (!p) {
		if (!(np = realloc(ol->pos, (ol->pos_count + 1) * sizeof(*np))))
			return;
		ol->pos = np;
		p = &ol->pos[ol->pos_count++];
		*p = (kiln_ol_position){.topic = e->topic ? strdup(e->topic) : NULL,
		                        .path = e->path ? strdup(e->path) : NULL,
		                        .partition = e->partition};
	}
	p->next = e->next;
}

/* Where the branch's tip says each range starts: read once per run. */
static void read_positions(kiln_openlineage *ol)
{
	kiln_version v;
	kiln_promote_inputs in;
	char spec[600];

	if (ol->pos_read || !manifest(ol))
		return;
	ol->pos_read = true;
	snprintf(spec, sizeof(spec), "%s@%s", ol->p->dataset, ol->p->branch);
	if (kiln_version_resolve(ol->manifest, spec, &v) < 0)
		return; /* a new branch: every range starts at 0 */
	if (kiln_promote_inputs_read(&in, ol->manifest, &v, spec) == 0)
		for (size_t i = 0; i < in.lineage.n; i++)
			remember(ol, &in.lineage.v[i]);
	kiln_promote_inputs_free(&in);
}

/* One input per topic (its partitions' ranges in kiln_offsets) or file. */
static int run_inputs(kiln_openlineage *ol, const kiln_lineage_entry *pos, size_t count, uint64_t records,
                      kiln_ol_dataset *in, kiln_buf *bufs, size_t *n_out)
{
	size_t n = 0;
	int rc = 0;

	for (size_t i = 0; i < count && n < MAX_INPUTS; i++) {
		const kiln_lineage_entry *e = &pos[i];
		const char *name = e->path ? e->path : e->topic ? e->topic : ol->p->source_name;
		size_t j;
		kiln_ol_position *was = find_position(ol, e->topic, e->path, e->partition);
		int64_t first = was ? was->next : 0;

		for (j = 0; j < n && strcmp(in[j].name, name) != 0; j++)
			;
		if (j == n) {
			in[n] = (kiln_ol_dataset){.namespace_ = ol->input_ns, .name = name};
			rc |= kiln_ol_kiln_facet_begin(&bufs[n], ol->producer, "kiln_offsets") |
			      kiln_buf_puts(&bufs[n], ",\"ranges\":[");
			n++;
		} else {
			rc |= kiln_buf_putc(&bufs[j], ',');
		}
		rc |= kiln_buf_printf(&bufs[j], "{\"partition\":%d,\"first\":%lld,\"next\":%lld}",
		                      (int)e->partition, (long long)first, (long long)e->next);
	}
	for (size_t j = 0; j < n; j++) {
		rc |= kiln_buf_puts(&bufs[j], "]}");
		if (n == 1) /* the records read are the one input's */
			rc |= kiln_ol_facet_begin(&bufs[j], ol->producer, "inputStatistics",
			                          "InputStatisticsInputDatasetFacet", "1-0-0") |
			      kiln_buf_printf(&bufs[j], ",\"rowCount\":%llu}", (unsigned long long)records);
		rc |= kiln_buf_putc(&bufs[j], '\0');
		in[j].io_facets = bufs[j].ptr;
	}
	*n_out = n;
	return rc ? KILN_ENOMEM : 0;
}

void kiln_openlineage_run_commit(kiln_openlineage *ol, const char *commit, const kiln_stats *delta,
                                 size_t shards, const kiln_lineage_entry *positions, size_t count)
{
	kiln_ol_dataset in[MAX_INPUTS], out;
	kiln_buf ibufs[MAX_INPUTS], facets = KILN_BUF_INIT(0), ofacets = KILN_BUF_INIT(0);
	kiln_version v = {0};
	char name[600];
	size_t n_in = 0;
	int rc;

	if (!ol)
		return;
	for (size_t i = 0; i < MAX_INPUTS; i++)
		ibufs[i] = (kiln_buf)KILN_BUF_INIT(0);
	read_positions(ol);
	kiln_ol_ensure_started(ol);
	snprintf(name, sizeof(name), "%s@%s", ol->p->dataset, ol->p->branch);
	snprintf(v.commit, sizeof(v.commit), "%s", commit);
	snprintf(v.dataset, sizeof(v.dataset), "%s", ol->p->dataset);
	rc = run_inputs(ol, positions, count, delta->records_in, in, ibufs, &n_in);
	rc |= kiln_ol_version_facets(ol, &facets, &v, commit, kiln_ol_split_bytes(delta), shards) |
	      kiln_buf_putc(&facets, '\0');
	rc |= kiln_ol_facet_begin(&ofacets, ol->producer, "outputStatistics",
	                          "OutputStatisticsOutputDatasetFacet", "1-0-2") |
	      kiln_buf_printf(&ofacets, ",\"rowCount\":%llu,\"size\":%llu,\"fileCount\":%zu}",
	                      (unsigned long long)delta->valid,
	                      (unsigned long long)kiln_ol_split_bytes(delta), shards) |
	      kiln_ol_kiln_facet_begin(&ofacets, ol->producer, "kiln_quarantine") |
	      kiln_buf_printf(&ofacets, ",\"records\":%llu}", (unsigned long long)delta->quarantined) |
	      kiln_buf_putc(&ofacets, '\0');
	out = (kiln_ol_dataset){
	    .namespace_ = ol->repo_ns, .name = name, .facets = facets.ptr, .io_facets = ofacets.ptr};
	if (rc == 0)
		kiln_ol_emit(ol, "COMPLETE", kiln_ol_wall_ms(), NULL, in, n_in, &out, 1);
	for (size_t i = 0; i < count; i++)
		remember(ol, &positions[i]);
	for (size_t i = 0; i < MAX_INPUTS; i++)
		kiln_buf_free(&ibufs[i]);
	kiln_buf_free(&facets);
	kiln_buf_free(&ofacets);
	/* the next snapshot is a run of its own, begun now; its START is
	 * emitted with its COMPLETE or FAIL, so a run stopped with nothing more
	 * to commit leaves no START without an end */
	kiln_ol_uuid(ol->run_id);
	ol->run_start_ms = kiln_ol_wall_ms();
	ol->open = ol->streaming;
	ol->started = false;
}

void kiln_openlineage_run_end(kiln_openlineage *ol, const kiln_run_result *r, bool streaming, int rc,
                              const char *error)
{
	if (!ol)
		return;
	if (rc < 0) {
		kiln_openlineage_fail(ol, error);
		return;
	}
	if (!streaming && r->commit[0] && ol->open) {
		kiln_lineage_entry e = {.source = ol->p->source ? ol->p->source->kind : "file",
		                        .topic = ol->p->source_name,
		                        .path = ol->p->source_path,
		                        .next = (int64_t)r->next_offset};

		read_positions(ol);
		remember(ol, &(kiln_lineage_entry){
		                 .topic = e.topic, .path = e.path, .next = (int64_t)r->first_offset});
		kiln_openlineage_run_commit(ol, r->commit, &r->delta, r->shards, &e, 1);
	} else if (ol->open && ol->started) { /* nothing new was read: the run did nothing */
		kiln_ol_emit(ol, "COMPLETE", kiln_ol_wall_ms(), NULL, NULL, 0, NULL, 0);
	}
	ol->open = false;
}
