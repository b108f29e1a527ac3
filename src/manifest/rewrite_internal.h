/* What rewrite.c (the walk, the scan, the refs), rewrite_commit.c (one
 * commit's rewrite) and rewrite_map.c (the object-id memos) share: the
 * memos and the plan's state. */
#ifndef KILN_MANIFEST_REWRITE_INTERNAL_H
#define KILN_MANIFEST_REWRITE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/json.h"
#include "manifest/internal.h"
#include "manifest/rewrite.h"
#include "shard/object.h"

/* ---- an id -> id map --------------------------------------------------- */

typedef struct oid_slot {
	git_oid key, value;
	/* trees: what the rewrite of the tree changed */
	int64_t records, shards, bytes, raw_bytes;
	uint64_t erased;
	char **affected; /* hashes of changed shards the tree lists (splits trees) */
	size_t affected_count;
} oid_slot;

/* The table holds pointers: a slot stays where it is while the table grows,
 * so a caller may keep the slots it got (one commit's split trees). */
typedef struct oid_map {
	oid_slot **slots;
	size_t cap, count;
} oid_map;

/* ---- plan --------------------------------------------------------------- */

typedef struct plan_state {
	kiln_manifest *m;
	git_repository *repo;
	const kiln_rewrite_options *o;
	kiln_json_scanner *scanner;
	oid_map commits;     /* old commit -> new commit (equal: unchanged) */
	oid_map split_trees; /* old splits/<split> tree -> new one, with what changed */
	kiln_rewrite_result *out;
	kiln_buf strings;
	kiln_source_range *sources;
	size_t sources_cap;
} plan_state;

/* Frees what the map holds (the slots' affected hashes too) and zeroes it. */
void kiln_rewrite_map_free(oid_map *m);

/* The slot of key, or NULL; valid until kiln_rewrite_map_free. */
oid_slot *kiln_rewrite_map_get(const oid_map *m, const git_oid *key);

/* A new slot for key (which must not be there yet), zeroed but for its key;
 * valid until kiln_rewrite_map_free, however the map grows. */
int kiln_rewrite_map_add(oid_map *m, const git_oid *key, oid_slot **out);

/* Plans the rewrite of commit id (its parents planned first): its new id
 * in p->commits (equal when nothing of it changed). */
int kiln_rewrite_commit(plan_state *p, const git_oid *id);

#endif
