/* Keeps a manifest repository compact: every object reachable from a ref
 * (or a ref's reflog) is written into one new pack; loose objects and older
 * packs past the grace period are then removed. Unreachable objects (the
 * trees and commits of commit attempts that lost a race) go with them once
 * they are older than the grace period, like git's prune expiry; younger
 * ones may belong to a commit in flight and stay. */
#ifndef KILN_MANIFEST_COMPACT_H
#define KILN_MANIFEST_COMPACT_H

#include <stdint.h>

#include "manifest/manifest.h"

typedef struct kiln_compact_stats {
	uint64_t packed;                 /* objects in the new pack */
	uint64_t loose_removed;          /* loose objects removed (packed or unreachable) */
	uint64_t packs_removed;          /* older packs removed */
	uint64_t loose_kept, packs_kept; /* younger than the grace period: left */
} kiln_compact_stats;

/* grace_s: files written less than this many seconds ago are never removed
 * (0: none is spared; only safe when nothing else writes the repository).
 * A pack with a .keep file is never removed. */
int kiln_manifest_compact(kiln_manifest *manifest, int64_t grace_s, kiln_compact_stats *out);

#endif
