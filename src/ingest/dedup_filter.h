/* Dedup in delivery order (pipeline `dedup:`): the sink runs each curated
 * batch through the branch's index before it reaches the writers, so the
 * first occurrence of a key in delivery order wins, within a snapshot and
 * across snapshots; later ones are quarantined as duplicate. */
#ifndef KILN_INGEST_DEDUP_FILTER_H
#define KILN_INGEST_DEDUP_FILTER_H

#include <stdint.h>

#include "ingest/curate_pool.h"
#include "manifest/dedup.h"
#include "quality/profile.h"

/* Checks every curated record of b (its key hash set by the pool) in input
 * order against dedup at now_ms: a duplicate leaves its split's output and
 * joins b's rejects (in input order) as duplicate, its path the first key
 * path; the others become pending in dedup. With profile (schema its
 * schema), the records kept are added to it from the values the pool kept.
 * KILN_ENOMEM; KILN_EINVALID naming dedup.max_keys when a new key would take
 * the index past its bound (b is then abandoned). */
int kiln_dedup_filter(kiln_batch *b, kiln_dedup *dedup, int64_t now_ms, const char *path,
                      kiln_profile *profile, const kiln_profile_schema *schema);

#endif
