/* Dedup in delivery order (see dedup_filter.h). */
#include "ingest/dedup_filter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"

/* The split whose next curated record comes first in input order, -1 when
 * every split is done. */
static int next_split(const kiln_batch *b, const size_t at[KILN_SPLIT_COUNT])
{
	int best = -1;

	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		if (at[s] < b->out_count[s] &&
		    (best < 0 || b->out_index[s][at[s]] < b->out_index[best][at[best]]))
			best = s;
	return best;
}

/* Adds the kept record i (its curated text at line) to the profile. */
static int profile_kept(const kiln_batch *b, size_t i, const char *line, kiln_profile *profile,
                        const kiln_profile_schema *schema)
{
	const kiln_curate_value *v = b->values + b->value_first[i];
	int rc;

	profile->records++;
	for (size_t k = 0; k < b->value_n[i]; k++)
		if ((rc = kiln_profile_add_value(profile, schema, v[k].field, v[k].type, v[k].flags,
		                                 line + v[k].offset, v[k].len)) < 0)
			return rc;
	return 0;
}

/* Moves the kept records of split s to the front of its output, in order,
 * and profiles them. */
static int compact_split(kiln_batch *b, int s, const unsigned char *drop, kiln_profile *profile,
                         const kiln_profile_schema *schema)
{
	size_t from = 0, to = 0, kept = 0;
	int rc;

	for (size_t j = 0; j < b->out_count[s]; j++) {
		size_t i = b->out_index[s][j], len = b->out_len[s][j];

		if (!drop[i]) {
			if (to != from)
				memmove(b->out[s].ptr + to, b->out[s].ptr + from, len);
			if (profile && (rc = profile_kept(b, i, b->out[s].ptr + to, profile, schema)) < 0)
				return rc;
			b->out_index[s][kept] = i;
			b->out_len[s][kept++] = len;
			to += len;
		}
		from += len;
	}
	b->out[s].len = to;
	b->out_count[s] = kept;
	return 0;
}

int kiln_dedup_filter(kiln_batch *b, kiln_dedup *dedup, int64_t now_ms, const char *path,
                      kiln_profile *profile, const kiln_profile_schema *schema)
{
	size_t at[KILN_SPLIT_COUNT] = {0}, dups = 0;
	unsigned char *drop = calloc(b->count ? b->count : 1, 1);
	int s, rc = 0;

	if (!drop)
		return kiln_error_oom("dedup");
	if (!b->values)
		profile = NULL;
	while ((s = next_split(b, at)) >= 0) {
		size_t i = b->out_index[s][at[s]++];

		if ((rc = kiln_dedup_seen(dedup, b->dedup_hash[i], now_ms)) == KILN_ELIMIT) {
			/* exactness over memory: the run stops, nothing of it committed */
			rc = kiln_error_set(
			    KILN_EINVALID,
			    "dedup.max_keys: the dedup index holds %zu keys (committed within dedup.window, "
			    "and read since the last commit), its bound; nothing of this snapshot was "
			    "committed: raise dedup.max_keys (10 million keys take about 384 MiB) or "
			    "shorten dedup.window",
			    kiln_dedup_max_keys(dedup));
			goto done;
		}
		if (rc < 0)
			goto done;
		drop[i] = (unsigned char)rc;
		dups += (size_t)rc;
	}
	rc = 0;
	for (s = 0; s < KILN_SPLIT_COUNT; s++)
		if ((dups || profile) && (rc = compact_split(b, s, drop, profile, schema)) < 0)
			goto done;
	if (!dups)
		goto done;

	/* the duplicates join the rejects, all in input order (merged from the back) */
	size_t need = b->reject_count + dups;
	if ((rc = KILN_ARRAY_GROW(b->rejects, b->reject_cap, need - 1, "dedup")) < 0)
		goto done;
	size_t old = b->reject_count, put = need;
	for (size_t i = b->count; i-- > 0 && put > 0;) {
		kiln_batch_reject *x = &b->rejects[put - 1];

		if (old > 0 && b->rejects[old - 1].index == i) {
			if (put - 1 != old - 1)
				*x = b->rejects[old - 1];
			old--;
			put--;
		} else if (drop[i]) {
			kiln_report_single(&x->report, KILN_REJECT_DUPLICATE, 0);
			snprintf(x->report.v[0].path, sizeof(x->report.v[0].path), "%s", path);
			x->index = i;
			put--;
		}
	}
	b->reject_count = need;
done:
	free(drop);
	return rc;
}
