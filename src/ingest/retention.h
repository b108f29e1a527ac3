/* Retention for the restricted zones (pipeline `retention: {raw: AGE,
 * quarantine: AGE}`, `kiln gc --retention`): raw-zone and quarantine
 * objects older than their zone's retention are deleted, but only when
 * every offset they hold is committed, so no record that is not yet curated
 * is lost:
 *  - raw/<topic>/<partition>/<first>-<last>: every branch of every dataset
 *    whose lineage.json has a Kafka entry for that topic/partition has
 *    next > last, and at least one branch has one (no branch reading it:
 *    kept);
 *  - quarantine/<topic>/<partition>/<dataset>/<branch>/<first>-<last>: that
 *    branch's entry for the topic/partition has next > last (no branch or
 *    no entry: kept); the older names without dataset/branch follow the raw
 *    rule over entries of any kind.
 * The age is the store's mtime; an object the store cannot date is kept. */
#ifndef KILN_INGEST_RETENTION_H
#define KILN_INGEST_RETENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "manifest/manifest.h"
#include "store/store.h"

typedef enum kiln_retention_zone {
	KILN_RETENTION_RAW,
	KILN_RETENTION_QUARANTINE,
	KILN_RETENTION_ZONES
} kiln_retention_zone;

/* "raw", "quarantine". */
const char *kiln_retention_zone_name(kiln_retention_zone zone);

typedef enum kiln_retention_verdict {
	KILN_RETENTION_DELETE,      /* expired and committed: deleted (apply) or deletable */
	KILN_RETENTION_YOUNG,       /* younger than its retention */
	KILN_RETENTION_UNDATED,     /* the store cannot tell its age */
	KILN_RETENTION_UNCOMMITTED, /* a branch has not committed every offset it holds */
	KILN_RETENTION_UNREAD,      /* no branch reads its topic/partition */
	KILN_RETENTION_NO_POLICY,   /* its zone has no retention */
} kiln_retention_verdict;

typedef struct kiln_retention_policy {
	int64_t age[KILN_RETENTION_ZONES]; /* seconds; 0: the zone is kept forever */
	int64_t now;                       /* seconds since the epoch; 0: the current time */
	bool apply;                        /* delete; false: a dry run */
} kiln_retention_policy;

/* One object decided. why: for UNCOMMITTED the branch that holds it back
 * ("ds@main next 120"), else NULL. age: seconds (-1 when undated). */
typedef struct kiln_retention_object {
	kiln_retention_zone zone;
	const char *key;
	int64_t age;
	uint64_t size;
	kiln_retention_verdict verdict;
	const char *why;
} kiln_retention_object;

typedef struct kiln_retention_stats {
	uint64_t objects[KILN_RETENTION_ZONES]; /* listed */
	uint64_t expired[KILN_RETENTION_ZONES]; /* deletable (dry run) or deleted (apply) */
	uint64_t bytes[KILN_RETENTION_ZONES];   /* their bytes */
	uint64_t kept[KILN_RETENTION_ZONES];
} kiln_retention_stats;

/* Lists the store's raw and quarantine objects, decides each (cb, may be
 * NULL, gets every object in key order, raw first; a non-zero return
 * stops), and with policy->apply deletes the expired ones, each just after
 * it was reported. The lineage of every branch is read once, before the
 * listing: an object committed later is kept until the next collection.
 * *out is filled as far as it got, also on error. */
int kiln_retention_collect(kiln_manifest *manifest, kiln_store *store, const kiln_retention_policy *policy,
                           int (*cb)(void *ctx, const kiln_retention_object *obj), void *ctx,
                           kiln_retention_stats *out);

#endif
