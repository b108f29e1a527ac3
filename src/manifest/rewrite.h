/* Rewriting a dataset's history without some shards (kiln erase,
 * docs/ERASURE.md): every commit reachable from the dataset's branches and
 * tags that lists a changed shard (or descends from a rewritten commit) is
 * written again with each changed shard's line replaced by its successor's
 * (or removed), its stats.json and profile.json brought in line, the rest
 * of its tree, its author, committer and times kept, and a paragraph naming
 * the erasure and the commit it replaces added to its message. Signed
 * commits are signed again; an annotated tag on a rewritten commit is made
 * again under the same name (its message kept, the erasure paragraph added,
 * signed with the release key). Planning writes objects only; the refs move
 * afterwards, each by compare-and-swap, so a reader sees either the old
 * version or the rewritten one, never a mix. */
#ifndef KILN_MANIFEST_REWRITE_H
#define KILN_MANIFEST_REWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "manifest/manifest.h"
#include "shard/object.h"
#include "shard/split.h"

struct kiln_signing_key;
struct kiln_profile;

/* Calls shard_cb once for every distinct shard (by hash) that a commit
 * reachable from refs/heads/<dataset>/ and refs/tags/<dataset>/ lists, with
 * its split, and contract_cb once for every distinct contract.yaml of those
 * commits (either may be NULL). An entry's filter is the one the first
 * commit listing it holds (filters/<hh>/<hash>.bloom, shard/filter.h), or
 * NULL. Entries and texts live until the call returns; a non-zero return
 * stops the walk and is returned. KILN_ENOTFOUND when the dataset has no
 * ref. */
int kiln_rewrite_scan(kiln_manifest *manifest, const char *dataset,
                      int (*shard_cb)(void *ctx, kiln_split split, const kiln_shard_entry *entry),
                      int (*contract_cb)(void *ctx, const char *text, size_t len), void *ctx);

/* One shard that changes: every commit listing old_hash lists `entry`
 * instead (its sources are the old line's), or nothing when `drop`. A
 * rewritten commit whose tree holds the old shard's filter holds
 * entry.filter (when not NULL) in its place instead. */
typedef struct kiln_rewrite_shard {
	char old_hash[65];
	bool drop;
	kiln_shard_entry entry;
	uint64_t erased;                   /* records taken out of it */
	uint64_t old_bytes, old_raw_bytes; /* the old shard's sizes */
} kiln_rewrite_shard;

/* The profile (quality/profile.h) of the records of the shards added[0..n)
 * (after the change) under the contract contract[0..len): *out is
 * initialised by the callee, freed by the caller. */
typedef int (*kiln_rewrite_profile_fn)(void *ctx, const char *contract, size_t len,
                                       const kiln_shard_entry *added, size_t n, struct kiln_profile *out);

typedef struct kiln_rewrite_options {
	const char *dataset;
	const kiln_rewrite_shard *shards; /* sorted by old_hash */
	size_t shard_count;
	const char *erasure; /* the erasure's id, named in the messages */
	/* signs the rewritten commits that were signed and every rewritten
	 * annotated tag; NULL: a signed commit or tag to rewrite is an error */
	const struct kiln_signing_key *key;
	kiln_rewrite_profile_fn profile; /* NULL: profile.json totals merged, added parts kept */
	void *profile_ctx;
} kiln_rewrite_options;

/* A ref to move: from old_id to new_id (commit ids for a branch or a
 * lightweight tag, tag object ids for an annotated tag). */
typedef struct kiln_rewrite_move {
	char ref[320];
	char old_id[41], new_id[41];
	char old_commit[41], new_commit[41]; /* the commits they name */
	bool tag;                            /* under refs/tags/ */
} kiln_rewrite_move;

typedef struct kiln_rewrite_pair {
	char old_id[41], new_id[41];
} kiln_rewrite_pair;

typedef struct kiln_rewrite_result {
	kiln_rewrite_move *moves; /* refs in name order */
	size_t move_count;
	kiln_rewrite_pair *commits; /* every commit written again, old -> new */
	size_t commit_count;
} kiln_rewrite_result;

void kiln_rewrite_result_free(kiln_rewrite_result *result);

/* kiln_rewrite_plan and kiln_rewrite_apply stay functions of their own in
 * optimised (LTO) builds, never inlined or cloned: a test stops an erasure
 * on them with gdb between its walk, its plan and its ref moves
 * (tests/integration/erase_audit.sh). */
#define KILN_REWRITE_STEP __attribute__((noipa))

/* Writes every new object and fills *out (zeroed first) with the ref moves
 * and the commits rewritten; no ref changes. Nothing to rewrite: 0 with no
 * moves. */
KILN_REWRITE_STEP int kiln_rewrite_plan(kiln_manifest *manifest, const kiln_rewrite_options *options,
                                        kiln_rewrite_result *out);

/* Moves each ref from old_id to new_id by compare-and-swap (a ref already
 * at new_id is left). KILN_EMODIFIED, naming the first such ref, when one
 * moved elsewhere meanwhile (the others are still moved): plan again.
 * *out_moved (may be NULL) counts the refs moved by this call. */
KILN_REWRITE_STEP int kiln_rewrite_apply(kiln_manifest *manifest, const kiln_rewrite_result *result,
                                         const char *reflog_message, size_t *out_moved);

/* Keeps, in order, the moves whose ref names new_id now (the ones applied,
 * by this process or a killed one) and returns how many: after
 * KILN_EMODIFIED, what a record of the moves may claim. */
size_t kiln_rewrite_keep_applied(kiln_manifest *manifest, kiln_rewrite_move *moves, size_t count);

#endif
