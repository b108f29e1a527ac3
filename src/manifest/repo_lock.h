/* Advisory locks on files in a manifest repository's git directory
 * (flock(2): a killed holder releases its lock with its life).
 *
 * kiln-compact.lock: one compaction at a time (compact.c).
 * kiln-refs.lock: every commit's compare-and-swap of a dataset branch holds
 * it shared for the moment of the move; an erasure that lost the race to
 * runs' commits KILN_REFS_EXCLUSIVE_AFTER times takes it exclusively for
 * its next attempt (its reads, its plan and its ref moves), so runs that
 * commit faster than a plan can be made cannot starve it: their moves wait
 * and then fail their compare-and-swap, and they commit again on the
 * rewritten branch. */
#ifndef KILN_MANIFEST_REPO_LOCK_H
#define KILN_MANIFEST_REPO_LOCK_H

#include <stdbool.h>

#include "manifest/manifest.h"

#define KILN_REFS_LOCK            "kiln-refs.lock"
#define KILN_COMPACT_LOCK         "kiln-compact.lock"
#define KILN_REFS_EXCLUSIVE_AFTER 2 /* lost attempts */

/* Opens <git dir>/name (made if missing) and locks it, shared or
 * exclusive. 1: locked, *out_fd holds it; 0: another process holds it and
 * !wait; < 0: the error. A wait of more than 5 s is logged once. */
int kiln_manifest_lock(kiln_manifest *manifest, const char *name, bool exclusive, bool wait, int *out_fd);

/* Releases what kiln_manifest_lock took (fd < 0: nothing). */
void kiln_manifest_unlock(int fd);

#endif
