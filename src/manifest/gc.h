/* Store garbage collection and space accounting over a manifest repository.
 * kiln_gc marks every shard that a kept commit lists (splits/<split>/<hh>.jsonl
 * of every dataset in the repository), lists shards/ in the store and
 * reports, or deletes, every shard object no kept commit references: shards of
 * runs that crashed before their commit, and shards only old, unkept commits
 * listed. kiln_gc_du sums a dataset's versions (tags and branch tips): bytes
 * in all, bytes no other listed version shares. Both read each manifest blob
 * once (cached by blob id), so long histories stay fast. */
#ifndef KILN_MANIFEST_GC_H
#define KILN_MANIFEST_GC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "manifest/manifest.h"
#include "store/store.h"

/* Which commits keep their shards. The tip of every ref (every branch and
 * every tag, whatever the policy) is always kept; on top of that: */
typedef struct kiln_gc_policy {
	bool keep_tags;       /* the whole history of every tag (refs/tags/...) */
	bool keep_branches;   /* the whole history of every other ref (refs/heads/...) */
	int64_t younger_than; /* > 0: every commit reachable from any ref whose commit
	                       * time is less than this many seconds before `now` */
	int64_t now;          /* reference time for younger_than and grace; 0 = time(NULL) */
	int64_t grace;        /* > 0: an unreferenced object written less than this many seconds
	                       * before `now` (or at a time the store cannot tell) is young, not
	                       * an orphan: a run may still be about to commit it */
	bool apply;           /* delete the orphans; false = dry run, nothing removed */
	/* shards an erasure superseded (64 hex each, sorted bytewise;
	 * manifest/ledger.h): never young, an orphan among them goes at once */
	const char *const *erased;
	size_t erased_count;
} kiln_gc_policy;

typedef enum kiln_gc_object {
	KILN_GC_ORPHAN,  /* a shard no kept commit lists: deleted under `apply` */
	KILN_GC_MISSING, /* a shard a kept commit lists that the store lacks */
	KILN_GC_FOREIGN, /* a key under shards/ that is not a shard name: left alone */
} kiln_gc_object;

typedef struct kiln_gc_stats {
	uint64_t refs;                  /* refs that name a commit */
	uint64_t commits;               /* commits kept */
	uint64_t referenced;            /* distinct shards the kept commits list */
	uint64_t objects, object_bytes; /* shard objects in the store */
	uint64_t live, live_bytes;      /* of them, referenced */
	uint64_t orphans, orphan_bytes; /* of them, not referenced (and not young) */
	uint64_t young, young_bytes;    /* of them, not referenced but within the grace period */
	uint64_t deleted, deleted_bytes;
	uint64_t missing; /* referenced, not in the store */
	uint64_t foreign; /* keys under shards/ with other names */
	/* with apply: temporary files a killed writer left in the repository's
	 * objects/ (libgit2's tmp_object_git2_*, kiln pull's *.tmp-<pid>), older
	 * than the grace period, removed */
	uint64_t temps;
} kiln_gc_stats;

/* Called for every orphan (after its deletion when policy->apply), every
 * missing shard and every foreign key, in that order of discovery. key lives
 * until the call returns; size is 0 for a missing shard. A non-zero return
 * stops the collection and is returned (nothing further is deleted). */
typedef int (*kiln_gc_cb)(void *ctx, kiln_gc_object what, const char *key, uint64_t size);

/* Marks, lists, then (policy->apply) deletes. Only keys under "shards/" are
 * ever listed or deleted: quarantine/ and raw/ objects are never touched.
 * Before deleting, the refs are read again and commits made since the mark
 * are marked too. Refuses (KILN_EINVALID, nothing deleted) a repository
 * without refs, and an `apply` where the store holds none of the referenced
 * shards (a store and manifest that do not belong together). cb may be NULL.
 * *out is filled as far as the collection got, also on error. */
int kiln_gc(kiln_manifest *manifest, kiln_store *store, const kiln_gc_policy *policy, kiln_gc_cb cb,
            void *ctx, kiln_gc_stats *out);

/* One version of a dataset in kiln_gc_du's report. */
typedef struct kiln_du_row {
	char name[160]; /* "v3" for refs/tags/<ds>/v3, "main" for refs/heads/<ds>/main */
	bool tag;
	char commit[41];
	uint64_t shards, records, bytes;      /* distinct shards of the version, their records and bytes */
	uint64_t unique_shards, unique_bytes; /* of those, the ones no other listed version has */
} kiln_du_row;

typedef struct kiln_du_report {
	kiln_du_row *rows; /* tags vN in version order, other tags by name, then branches (main first) */
	size_t count;
	uint64_t shards, bytes; /* distinct shards over every listed version, and their bytes */
} kiln_du_report;

/* Fills out (owned by the caller: kiln_du_report_free) for `dataset`. A
 * dataset without refs gives KILN_ENOTFOUND. Bytes are the compressed
 * sizes recorded in the manifest (the store is not read). */
int kiln_gc_du(kiln_manifest *manifest, const char *dataset, kiln_du_report *out);
void kiln_du_report_free(kiln_du_report *report);

/* Removes the temporaries of killed writers (libgit2's tmp_object_git2_*,
 * kiln pull's <name>.tmp-<pid>) in the repository's objects/ and its
 * fan-out folders, those written before young_after (a younger one may be a
 * live writer's); *removed counts them. KILN_EIO. (gc_temps.c) */
int kiln_gc_remove_object_temps(kiln_manifest *m, int64_t young_after, uint64_t *removed);

#endif
