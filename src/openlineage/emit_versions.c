/* The events of the commands that act on a committed version (see
 * openlineage.h): `kiln promote` (input the version promoted, output
 * DATASET@vN with its facets and the release gates as data quality
 * assertions), `kiln push` (output the version at the target) and `kiln
 * erase` (outputs the refs it moved; counts and versions only, never the
 * subject). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/secret.h"
#include "openlineage/event.h"
#include "openlineage/internal.h"
#include "openlineage/openlineage.h"

void kiln_openlineage_promoted(kiln_openlineage *ol, const kiln_version *v, const char *version_name,
                               const char *tag_id, const kiln_promote_inputs *in,
                               const kiln_gate_result *gates, size_t gate_count)
{
	kiln_buf f = KILN_BUF_INIT(0), of = KILN_BUF_INIT(0);
	kiln_version tagged = *v;
	char from[600], name[600];
	uint64_t shards = 0;
	int rc;

	if (!ol)
		return;
	kiln_ol_ensure_started(ol);
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		shards += in->stats.splits[i].shards;
	snprintf(from, sizeof(from), "%s@%s", v->dataset, v->ref[0] ? v->ref : v->commit);
	snprintf(name, sizeof(name), "%s@%s", v->dataset, version_name);
	snprintf(tagged.tag, sizeof(tagged.tag), "%s", tag_id ? tag_id : "");
	rc = kiln_ol_version_facets(ol, &f, &tagged, version_name, kiln_ol_split_bytes(&in->stats), shards);
	rc |= kiln_ol_facet_begin(&f, ol->producer, "dataQualityAssertions",
	                          "DataQualityAssertionsDatasetFacet", "1-1-0") |
	      kiln_buf_puts(&f, ",\"assertions\":[");
	for (size_t i = 0, k = 0; i < gate_count; i++) {
		if (gates[i].not_run)
			continue;
		rc |= kiln_buf_puts(&f, k++ ? ",{\"assertion\":" : "{\"assertion\":") |
		      kiln_buf_put_json_text(&f, gates[i].line, strlen(gates[i].line)) |
		      kiln_buf_printf(&f, ",\"success\":%s}", gates[i].pass ? "true" : "false");
	}
	rc |= kiln_buf_puts(&f, "]}") | kiln_buf_putc(&f, '\0');
	rc |=
	    kiln_ol_facet_begin(&of, ol->producer, "outputStatistics", "OutputStatisticsOutputDatasetFacet",
	                        "1-0-2") |
	    kiln_buf_printf(&of, ",\"rowCount\":%llu,\"size\":%llu,\"fileCount\":%llu}",
	                    (unsigned long long)in->stats.valid,
	                    (unsigned long long)kiln_ol_split_bytes(&in->stats), (unsigned long long)shards) |
	    kiln_buf_putc(&of, '\0');
	if (rc == 0) {
		kiln_ol_dataset input = {.namespace_ = ol->repo_ns, .name = from};
		kiln_ol_dataset out = {
		    .namespace_ = ol->repo_ns, .name = name, .facets = f.ptr, .io_facets = of.ptr};

		kiln_ol_emit(ol, "COMPLETE", kiln_ol_wall_ms(), NULL, &input, 1, &out, 1);
	}
	ol->open = false;
	kiln_buf_free(&f);
	kiln_buf_free(&of);
}

void kiln_openlineage_pushed(kiln_openlineage *ol, const kiln_push_result *res,
                             const kiln_push_target *target)
{
	kiln_buf f = KILN_BUF_INIT(0), of = KILN_BUF_INIT(0), ns = KILN_BUF_INIT(0);
	char name[600];
	int rc;

	if (!ol)
		return;
	kiln_ol_ensure_started(ol);
	snprintf(name, sizeof(name), "%s@%s", res->dataset, res->version);
	/* the target's store, without a password it may carry */
	rc = kiln_secret_redact_userinfo(&ns, target->url, strlen(target->url)) < 0 ||
	     kiln_buf_putc(&ns, '\0') < 0;
	rc |= kiln_ol_facet_begin(&f, ol->producer, "version", "DatasetVersionDatasetFacet", "1-0-1") |
	      kiln_buf_puts(&f, ",\"datasetVersion\":") |
	      kiln_buf_put_json_text(&f, res->version, strlen(res->version)) |
	      kiln_buf_printf(&f, ",\"commit\":\"%s\"", res->commit) |
	      (res->tag[0] ? kiln_buf_printf(&f, ",\"tag\":\"%s\"", res->tag) : 0) | kiln_buf_putc(&f, '}');
	if (ol->schema_facets[0])
		rc |= kiln_buf_putc(&f, ',') | kiln_buf_puts(&f, ol->schema_facets);
	rc |= kiln_buf_putc(&f, '\0');
	rc |= kiln_ol_facet_begin(&of, ol->producer, "outputStatistics", "OutputStatisticsOutputDatasetFacet",
	                          "1-0-2") |
	      kiln_buf_printf(&of, ",\"size\":%llu,\"fileCount\":%llu}",
	                      (unsigned long long)res->totals.sent_bytes,
	                      (unsigned long long)res->totals.sent) |
	      kiln_buf_putc(&of, '\0');
	if (rc == 0) {
		kiln_ol_dataset input = {.namespace_ = ol->repo_ns, .name = name};
		kiln_ol_dataset out = {
		    .namespace_ = ns.ptr, .name = name, .facets = f.ptr, .io_facets = of.ptr};

		kiln_ol_emit(ol, "COMPLETE", kiln_ol_wall_ms(), NULL, &input, 1, &out, 1);
	}
	ol->open = false;
	kiln_buf_free(&f);
	kiln_buf_free(&of);
	kiln_buf_free(&ns);
}

/* refs/heads/<dataset>/<branch> or refs/tags/<dataset>/<vN>: DATASET@<name> */
static void ref_name(char *out, size_t cap, const char *dataset, const char *ref)
{
	size_t dl = strlen(dataset);
	const char *p = ref;

	if (strncmp(p, "refs/heads/", 11) == 0)
		p += 11;
	else if (strncmp(p, "refs/tags/", 10) == 0)
		p += 10;
	if (strncmp(p, dataset, dl) == 0 && p[dl] == '/')
		p += dl + 1;
	snprintf(out, cap, "%s@%s", dataset, p);
}

void kiln_openlineage_erased(kiln_openlineage *ol, const char *dataset, const kiln_erase_report *r)
{
	kiln_ol_dataset *outs;
	kiln_buf *bufs;
	char(*names)[600];
	uint64_t erased = 0;
	size_t n = r->move_count;
	int rc = 0;

	if (!ol)
		return;
	kiln_ol_ensure_started(ol);
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		erased += r->erased[i];
	outs = calloc(n ? n : 1, sizeof(*outs));
	bufs = calloc(n ? n : 1, sizeof(*bufs));
	names = calloc(n ? n : 1, sizeof(*names));
	if (!outs || !bufs || !names)
		goto done;
	for (size_t i = 0; i < n; i++) {
		const kiln_rewrite_move *m = &r->moves[i];

		ref_name(names[i], sizeof(names[i]), dataset, m->ref);
		bufs[i] = (kiln_buf)KILN_BUF_INIT(0);
		rc |= kiln_ol_facet_begin(&bufs[i], ol->producer, "version", "DatasetVersionDatasetFacet",
		                          "1-0-1") |
		      kiln_buf_printf(&bufs[i],
		                      ",\"datasetVersion\":\"%s\",\"commit\":\"%s\",\"replaces\":\"%s\"}",
		                      m->new_commit, m->new_commit, m->old_commit) |
		      kiln_ol_kiln_facet_begin(&bufs[i], ol->producer, "kiln_erasure") |
		      kiln_buf_printf(&bufs[i],
		                      ",\"erasure\":\"%s\",\"recordsErased\":%llu,\"commitsRewritten\":%llu,"
		                      "\"shardsRewritten\":%llu,\"shardsDropped\":%llu}",
		                      r->id, (unsigned long long)erased, (unsigned long long)r->commits,
		                      (unsigned long long)r->shards_rewritten,
		                      (unsigned long long)r->shards_dropped) |
		      kiln_buf_putc(&bufs[i], '\0');
		outs[i] =
		    (kiln_ol_dataset){.namespace_ = ol->repo_ns, .name = names[i], .facets = bufs[i].ptr};
	}
	if (rc == 0)
		kiln_ol_emit(ol, "COMPLETE", kiln_ol_wall_ms(), NULL, NULL, 0, outs, n);
done:
	ol->open = false;
	for (size_t i = 0; bufs && i < n; i++)
		kiln_buf_free(&bufs[i]);
	free(outs);
	free(bufs);
	free(names);
}
