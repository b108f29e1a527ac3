/* Keeps a manifest repository compact: every object reachable from a ref
 * (or a ref's reflog) is written into one new pack; loose objects and older
 * packs that the new pack holds are then removed at once (git's
 * prune-packed), the others once they are older than the grace period.
 * Unreachable objects (the trees and commits of commit attempts that lost a
 * race) go that way, like git's prune expiry; younger ones may belong to a
 * commit in flight and stay. A purge also removes, at once, what versions
 * superseded by an erasure reached. One compaction at a time per repository: an
 * advisory lock (flock) on <repository>/kiln-compact.lock, which a killed
 * process releases with its life. */
#ifndef KILN_MANIFEST_COMPACT_H
#define KILN_MANIFEST_COMPACT_H

#include <stdbool.h>
#include <stdint.h>

#include "manifest/manifest.h"

typedef struct kiln_compact_stats {
	uint64_t packed;                 /* objects in the new pack */
	uint64_t loose_removed;          /* loose objects removed (packed or unreachable) */
	uint64_t packs_removed;          /* older packs removed */
	uint64_t loose_kept, packs_kept; /* not in the new pack, younger than the grace period: left */
	uint64_t purged;                 /* kiln_manifest_purge: superseded objects removed (each once,
	                                    loose or packed; also counted in loose_removed/packs_removed) */
} kiln_compact_stats;

/* grace_s: files not in the new pack written less than this many seconds
 * ago are never removed (0: none is spared; only safe when nothing else
 * writes the repository). A pack with a .keep file is never removed. Waits
 * for a compaction another process runs to end. */
int kiln_manifest_compact(kiln_manifest *manifest, int64_t grace_s, kiln_compact_stats *out);

/* kiln_manifest_compact, and also a purge of what erasure superseded: every
 * object reachable from one of superseded[0..n) (40-hex commit or tag ids;
 * ids the repository lacks are skipped, anything else is KILN_EINVALID) and
 * not from a ref goes at once, whatever its age, from loose objects and
 * packs (a young pack holding one is removed after its other objects the new
 * pack lacks are written into a pack of their own; a .keep'd pack holding
 * one is KILN_EINVALID naming it, before anything is removed). Reflog
 * entries (of every ref and HEAD) naming such an object, as old or new id,
 * are removed (the reflog rewritten under the ref's lock, like git's
 * `reflog expire`), and so are FETCH_HEAD and ORIG_HEAD when they name one;
 * what only those entries reached is not kept by them. Young unreachable
 * objects the superseded ids do not reach stay for their grace period.
 * Order: reflogs, the new pack, then removals: a kill at any point leaves
 * every ref's and every reflog entry's objects in place. out->purged says
 * how many superseded objects went. Objects a writer adds to the repository
 * while this runs survive, unless they are superseded ones. */
int kiln_manifest_purge(kiln_manifest *manifest, const char *const *superseded, size_t n, int64_t grace_s,
                        kiln_compact_stats *out);

/* What kiln_manifest_purge would remove (its dry run): the objects
 * reachable from superseded[0..n) and not from a ref or a reflog entry it
 * would keep, that the repository holds, into *out. Changes nothing. */
int kiln_manifest_purge_count(kiln_manifest *manifest, const char *const *superseded, size_t n,
                              uint64_t *out);

/* Loose objects (objects/<hh>/<38 hex>) in the repository, into *out. */
int kiln_manifest_loose_objects(kiln_manifest *manifest, uint64_t *out);

/* The daemons' compaction, like git's gc.auto: compacts (with grace_s as
 * above) when the loose objects number at least `threshold` more than the
 * last compaction, by any process, left behind (young unreachable ones it
 * had to keep), and nobody else is compacting (then it returns at once).
 * *out_ran says whether it compacted (*out then holds what it did);
 * *out_loose the loose objects counted (before, less what was removed). */
int kiln_manifest_compact_auto(kiln_manifest *manifest, uint64_t threshold, int64_t grace_s, bool *out_ran,
                               uint64_t *out_loose, kiln_compact_stats *out);

#endif
