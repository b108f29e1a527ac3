/* What the manifest's own modules share beyond manifest.h: the libgit2
 * repository behind a kiln_manifest (borrowed: it lives as long as the
 * manifest) and its path, for modules that read or write it directly. */
#ifndef KILN_MANIFEST_INTERNAL_H
#define KILN_MANIFEST_INTERNAL_H

#include <git2.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/json.h"
#include "manifest/format.h"
#include "manifest/manifest.h"

git_repository *kiln_manifest_repo(kiln_manifest *manifest);
const char *kiln_manifest_path(const kiln_manifest *manifest);

/* Sets the last error from libgit2's last error: "manifest PATH: WHAT: msg",
 * with the KILN_E* code that matches gerr. Returns that code. */
int kiln_manifest_git_fail(const kiln_manifest *manifest, int gerr, const char *what);

/* ---- shared by manifest.c and commit.c ----------------------------------- */
/* The room a branch ref name takes: refs/heads/<dataset>/<branch>. */
#define KILN_MANIFEST_REF_CAP (sizeof("refs/heads//") + 2 * KILN_MFMT_NAME_MAX)

/* "manifest: REF:FILE", how the codec's errors name a file of a tip. */
#define KILN_MANIFEST_WHERE_CAP (KILN_MANIFEST_REF_CAP + 64)
const char *kiln_manifest_where(char out[KILN_MANIFEST_WHERE_CAP], const char *ref, const char *file);

/* libgit2's message for the last failure, never NULL. */
const char *kiln_manifest_git_message(void);

/* refs/heads/<dataset>/<branch> into out, after checking both names (and that
 * git accepts the whole name: no "..", no ".lock" or "." at the end). */
int kiln_manifest_branch_ref(char *out, size_t cap, const char *dataset, const char *branch);

/* s is 64 lower-case hex digits. */
bool kiln_manifest_hash_valid(const char *s);

/* The tip commit's tree, or *out_tree = NULL when the branch does not exist.
 * *out_tip (may be NULL) gets the tip id. */
int kiln_manifest_read_tip(kiln_manifest *manifest, const char *ref, git_oid *out_tip, bool *out_exists,
                           git_tree **out_tree);

/* lineage.json / stats.json of the tip's tree into *out (empty, or zero,
 * without a tip or the file). */
int kiln_manifest_load_lineage(kiln_manifest *manifest, kiln_json_scanner *scanner, git_tree *tree,
                               const char *ref, kiln_mfmt_lineage *out);
int kiln_manifest_load_stats(kiln_manifest *manifest, kiln_json_scanner *scanner, git_tree *tree,
                             const char *ref, kiln_stats *out);
/* profile.json's total of the tip's tree into *out (an empty profile
 * without a tip or the file; quality/profile.h). */
struct kiln_profile;
int kiln_manifest_load_profile(kiln_manifest *manifest, git_tree *tree, const char *ref,
                               struct kiln_profile *out);

/* quarantine-replayed.json of the tip's tree into an empty *out (empty
 * without a tip or the file; manifest/replayed.h). */
struct kiln_replayed;
int kiln_manifest_load_replayed(kiln_manifest *manifest, git_tree *tree, const char *ref,
                                struct kiln_replayed *out);

/* dedup/ of the commit being built on the tip (tip_id NULL: none yet;
 * dedup_tree.c): nothing without snap->dedup. */
int kiln_manifest_write_dedup(kiln_manifest *manifest, const char *ref, const git_oid *tip_id,
                              git_tree *tip_tree, const kiln_snapshot *snap, git_treebuilder *root);

/* For a rebase (rebase.c): the dedup/ segment commit added over parent
 * (NULL for a first commit),
 * set in snap (its keys point into *out_blob, the caller's to free); no
 * new segment: snap unchanged, *out_blob NULL. The replayed commit prunes
 * nothing. */
int kiln_manifest_dedup_added(kiln_manifest *manifest, const git_oid *commit, const git_oid *parent,
                              git_blob **out_blob, kiln_snapshot *snap);

/* ---- shared by manifest.c and rewrite.c ----------------------------------- */
/* Writes the annotated tag object "<dataset>/<name>" on commit_hex (it must
 * exist) as kiln_manifest_tag does, without creating or moving a ref. */
struct kiln_signing_key;
int kiln_manifest_tag_object(kiln_manifest *manifest, const char *dataset, const char *name,
                             const char *commit_hex, const char *message, const struct kiln_signing_key *key,
                             git_oid *out_id);

#endif
