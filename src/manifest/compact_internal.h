/* What compact.c (the walk, the purge plan, the lock, the repack) and
 * compact_prune.c (removing what the new pack makes redundant) share. */
#ifndef KILN_MANIFEST_COMPACT_INTERNAL_H
#define KILN_MANIFEST_COMPACT_INTERNAL_H

#include <git2.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "manifest/compact.h"
#include "manifest/oidset.h"

/* Whether a file's mtime is before cutoff (past the grace period). */
static inline bool kiln_compact_old_enough(const struct stat *st, time_t cutoff)
{
	return st->st_mtime < cutoff;
}

/* What a purge removes: what the superseded ids reach (`superseded`) less
 * what stays reachable (`live`: from the refs, then also from the reflog
 * entries left). */
typedef struct purge_plan {
	kiln_oidset superseded, live;
	git_oid *kept; /* the reflog entries left, while planning */
	size_t n_kept, cap_kept;
	uint64_t present;     /* objects the purge removes that the repository holds */
	uint64_t log_entries; /* reflog entries that name one */
	uint64_t head_files;  /* FETCH_HEAD, ORIG_HEAD naming one */
	bool apply;           /* rewrite reflogs, remove head files; else only count */
} purge_plan;

/* Whether id goes in the purge (plan may be NULL: a plain compaction);
 * `packed`, the new pack, is checked too: what it holds is never removed. */
static inline bool kiln_compact_doomed(const purge_plan *p, git_odb *packed, const git_oid *id)
{
	return p && kiln_oidset_has(&p->superseded, id) && !kiln_oidset_has(&p->live, id) &&
	       !(packed && git_odb_exists(packed, id));
}

/* The pack whose index is idx_path, alone in an object database. */
int kiln_compact_open_pack(git_odb **out, const char *idx_path);

/* Removes the packs other than the new one (`keep_name`, whose objects are
 * `packed`) without a .keep file, when older than the cutoff or when the
 * new pack holds every object they have; with a plan, also a pack holding
 * an object it removes (compact_prune.c says how). */
int kiln_compact_prune_packs(kiln_manifest *m, const char *objects, const char *keep_name, git_odb *packed,
                             const purge_plan *plan, time_t cutoff, kiln_compact_stats *out);

/* Removes loose objects that the new pack holds or the plan removes, and
 * the others older than the cutoff. */
int kiln_compact_prune_loose(kiln_manifest *m, const char *objects, git_odb *packed, const purge_plan *plan,
                             time_t cutoff, kiln_compact_stats *out);

#endif
