/* Retention of the restricted zones (see retention.h): the lineage of every
 * branch is loaded once into a table, then each raw and quarantine object
 * is decided against it and its zone's age, reported, and (apply) deleted. */
#include "ingest/retention.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/array.h"
#include "core/error.h"
#include "manifest/branch.h"
#include "shard/quarantine.h"
#include "shard/raw.h"

/* One lineage entry of one branch. */
typedef struct position {
	char *dataset, *branch, *topic;
	int32_t partition;
	int64_t next;
	bool kafka; /* written by a Kafka source (no path) */
} position;

typedef struct retention {
	kiln_manifest *manifest;
	kiln_store *store;
	const kiln_retention_policy *policy;
	int64_t now;
	position *v;
	size_t n, cap;
	const char *dataset, *branch; /* the branch whose lineage is being read */
	int (*cb)(void *ctx, const kiln_retention_object *obj);
	void *ctx;
	kiln_retention_stats *st;
	char why[512];
} retention;

const char *kiln_retention_zone_name(kiln_retention_zone zone)
{
	return zone == KILN_RETENTION_RAW ? "raw" : "quarantine";
}

static int on_entry(void *ctx, const kiln_lineage_entry *e)
{
	retention *r = ctx;
	position *p;

	if (KILN_ARRAY_GROW(r->v, r->cap, r->n, NULL) < 0)
		return KILN_ENOMEM;
	p = &r->v[r->n];
	p->dataset = strdup(r->dataset);
	p->branch = strdup(r->branch);
	p->topic = strdup(e->topic);
	if (!p->dataset || !p->branch || !p->topic) {
		free(p->dataset);
		free(p->branch);
		free(p->topic);
		return kiln_error_oom(NULL);
	}
	p->partition = e->partition;
	p->next = e->next;
	p->kafka = e->path == NULL;
	r->n++;
	return 0;
}

static int on_branch(void *ctx, const char *dataset, const char *branch)
{
	retention *r = ctx;

	r->dataset = dataset;
	r->branch = branch;
	return kiln_manifest_lineage(r->manifest, dataset, branch, on_entry, r);
}

/* Whether every branch that reads topic/partition (of dataset/branch when
 * given; Kafka entries only when kafka_only) covers offsets up to last:
 * UNREAD, UNCOMMITTED (r->why says which branch) or DELETE. */
static kiln_retention_verdict committed(retention *r, const char *topic, int32_t partition,
                                        const char *dataset, const char *branch, bool kafka_only,
                                        int64_t last)
{
	bool read = false;

	for (size_t i = 0; i < r->n; i++) {
		const position *p = &r->v[i];

		if (p->partition != partition || strcmp(p->topic, topic) != 0 || (kafka_only && !p->kafka) ||
		    (dataset && (strcmp(p->dataset, dataset) != 0 || strcmp(p->branch, branch) != 0)))
			continue;
		read = true;
		if (p->next <= last) {
			snprintf(r->why, sizeof(r->why), "%s@%s next %" PRId64, p->dataset, p->branch,
			         p->next);
			return KILN_RETENTION_UNCOMMITTED;
		}
	}
	return read ? KILN_RETENTION_DELETE : KILN_RETENTION_UNREAD;
}

/* Decides, reports and (apply) deletes one object. */
static int decide(retention *r, kiln_retention_zone zone, const char *key, uint64_t size, int64_t mtime,
                  const char *topic, int32_t partition, const char *dataset, const char *branch, int64_t last)
{
	kiln_retention_object o = {
	    .zone = zone, .key = key, .size = size, .age = mtime > 0 ? r->now - mtime : -1};
	int64_t keep = r->policy->age[zone];
	int rc;

	r->st->objects[zone]++;
	if (keep <= 0)
		o.verdict = KILN_RETENTION_NO_POLICY;
	else if (mtime <= 0)
		o.verdict = KILN_RETENTION_UNDATED;
	else if (o.age < keep)
		o.verdict = KILN_RETENTION_YOUNG;
	else
		o.verdict = committed(r, topic, partition, dataset, branch, zone == KILN_RETENTION_RAW, last);
	if (o.verdict == KILN_RETENTION_UNCOMMITTED)
		o.why = r->why;
	if (o.verdict != KILN_RETENTION_DELETE) {
		r->st->kept[zone]++;
		return r->cb ? r->cb(r->ctx, &o) : 0;
	}
	if (r->policy->apply && (rc = kiln_store_remove(r->store, key)) < 0 && rc != KILN_ENOTFOUND)
		return rc;
	r->st->expired[zone]++;
	r->st->bytes[zone] += size;
	return r->cb ? r->cb(r->ctx, &o) : 0;
}

static int on_raw(void *ctx, const kiln_raw_object *o)
{
	return decide(ctx, KILN_RETENTION_RAW, o->key, o->size, o->mtime, o->topic, o->partition, NULL, NULL,
	              o->last);
}

static int on_quarantine(void *ctx, const kiln_quarantine_object *o)
{
	return decide(ctx, KILN_RETENTION_QUARANTINE, o->key, o->size, o->mtime, o->topic, o->partition,
	              o->dataset, o->branch, o->last);
}

int kiln_retention_collect(kiln_manifest *manifest, kiln_store *store, const kiln_retention_policy *policy,
                           int (*cb)(void *ctx, const kiln_retention_object *obj), void *ctx,
                           kiln_retention_stats *out)
{
	retention r = {.manifest = manifest,
	               .store = store,
	               .policy = policy,
	               .now = policy->now ? policy->now : (int64_t)time(NULL),
	               .cb = cb,
	               .ctx = ctx,
	               .st = out};
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = kiln_branch_each(manifest, on_branch, &r)) == 0 &&
	    (rc = kiln_raw_list_objects(store, NULL, -1, on_raw, &r)) == 0)
		rc = kiln_quarantine_list(store, NULL, NULL, on_quarantine, &r);
	for (size_t i = 0; i < r.n; i++) {
		free(r.v[i].dataset);
		free(r.v[i].branch);
		free(r.v[i].topic);
	}
	free(r.v);
	return rc;
}
