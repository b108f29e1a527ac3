/* Reading dataset versions: "ds@ref" resolution, the files of a version, its
 * shards and its history, for the inspect and reader commands. Read-only;
 * every error names the spec or ref and, for a missing one, says so. */
#ifndef KILN_MANIFEST_VERSION_H
#define KILN_MANIFEST_VERSION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/json.h"
#include "manifest/format.h"
#include "manifest/manifest.h"

typedef struct kiln_version {
	char dataset[129];
	char ref[320];   /* what it resolved through: "refs/heads/ds/main", "refs/tags/ds/v3"; "" for a commit
	                    id */
	char commit[41]; /* the commit (tags peeled) */
	char tag[41];    /* the annotated tag object refs/tags/... points at; "" for a branch, a
	                    lightweight tag or a commit id */
	int64_t time;    /* commit time, seconds since the epoch */
} kiln_version;

/* spec: "ds" (= ds@main), "ds@main", "ds@<branch>", "ds@v<N>" (tag
 * refs/tags/ds/vN), "ds@<commit id or unique prefix of 4+ hex digits>".
 * Branches win over tags, tags over commit prefixes. KILN_ENOTFOUND with
 * "ds@x: no branch, tag or commit of that name" when none matches;
 * KILN_EINVALID for a malformed spec, an ambiguous prefix, or a commit
 * whose dataset.json names another dataset. */
int kiln_version_resolve(kiln_manifest *manifest, const char *spec, kiln_version *out);

/* A tag version must be the version its name says (no silent rollback): when
 * refs/tags/<ds>/<name> points at an annotated tag object, that object's
 * `tag` header must be "<ds>/<name>" (so a signature over it binds the
 * dataset and the version name) and its target the version's commit.
 * KILN_EINVALID, naming the ref and the name found, when either differs; 0
 * for every other version. kiln_version_resolve applies it; a tag object
 * moved under another name is refused whether it is signed or not. */
int kiln_version_check_tag(kiln_manifest *manifest, const kiln_version *version);

/* kiln_version_resolve without kiln_version_check_tag: for `kiln verify`,
 * which reports that check as one of its verdicts. Readers use
 * kiln_version_resolve. */
int kiln_version_lookup(kiln_manifest *manifest, const char *spec, kiln_version *out);

/* The repository's signing policy, git config key "kiln.signed" of the
 * manifest repository (docs/RELEASES.md): "tags" (written by `kiln promote`
 * when it signs a tag) means every tag version must carry a signature;
 * "all" (or "true") means every version, tag or commit, must. */
#define KILN_VERSION_SIGNED_KEY "kiln.signed"

/* Whether the repository's kiln.signed requires `version` to be signed:
 * *out true or false. Unset or "false": never. KILN_EINVALID naming the key
 * for any other value. */
int kiln_version_must_be_signed(kiln_manifest *manifest, const kiln_version *version, bool *out);

/* Appends the file at `path` of the version's tree to out: 1 when found,
 * 0 when absent. */
int kiln_version_read(kiln_manifest *manifest, const kiln_version *version, const char *path, kiln_buf *out);

/* The version's profile.json parsed into *total and *added (either may be
 * NULL; quality/profile.h) and checked against its stats.json
 * (kiln_profile_check): 1, or 0 with KILN_ENOTFOUND set ("SPEC: no
 * profile.json (...)") when the version has none; KILN_EINVALID when it
 * cannot be read or does not hold together. spec names the version in
 * messages. */
struct kiln_profile;
int kiln_version_profile(kiln_manifest *manifest, const kiln_version *version, const char *spec,
                         struct kiln_profile *total, struct kiln_profile *added);

/* Calls cb with every shard of `split` at the version, in hash order. The
 * entry (and its strings) lives until cb returns; a non-zero return from cb
 * stops the walk and is returned. */
int kiln_version_shards(kiln_manifest *manifest, const kiln_version *version, kiln_split split,
                        int (*cb)(void *ctx, const kiln_shard_entry *entry), void *ctx);

/* Opens the manifest repository at `path` for reading. Unlike
 * kiln_manifest_open it never creates one: KILN_ENOTFOUND "manifest PATH: no
 * such repository" when nothing is there. Close with kiln_manifest_close. */
int kiln_version_open(kiln_manifest **out, const char *path);

/* Calls cb for the version's commit and its first-parent ancestors, newest
 * first, at most `max` of them (0: all). `commit` is 40 hex, `time` the
 * commit time, `summary` the message's first paragraph on one line, `tags`
 * the names of the dataset's vN tags that peel to that commit, ascending by
 * N and comma-separated ("v2,v3"; "" for none). The strings live until cb
 * returns; a non-zero return from cb stops the walk and is returned. */
int kiln_version_log(kiln_manifest *manifest, const kiln_version *version, size_t max,
                     int (*cb)(void *ctx, const char *commit, int64_t time, const char *summary,
                               const char *tags),
                     void *ctx);

/* Shards added (in b, not in a) and removed (in a, not in b) between two
 * versions, per split. Only the splits/ subtrees are compared, by git tree
 * diff, so fan-out blobs equal in both are never read; the lines of each
 * changed blob pair are merge-walked by hash. Calls come per changed blob
 * (blobs in path order: dev, test, train; hh ascending), each blob's
 * shards in hash order. The entry lives until cb returns; a non-zero return
 * from cb stops the walk and is returned. */
int kiln_version_diff(kiln_manifest *manifest, const kiln_version *a, const kiln_version *b,
                      int (*cb)(void *ctx, kiln_split split, const kiln_shard_entry *entry, bool added),
                      void *ctx);

/* The newest erasure that rewrote a version, as its messages say it
 * (docs/ERASURE.md): the commit message's last "Erasure <id>: rewritten
 * from commit <old>" paragraph and, for an annotated tag, the tag
 * message's last "Erasure <id>: supersedes tag <old tag> on commit <old>".
 * old_tag is "" for a version that is not a tag. */
typedef struct kiln_version_erasure {
	char id[17];
	char old_commit[41];
	char old_tag[41];
} kiln_version_erasure;

/* 1 with *out filled, 0 when no erasure rewrote the version. */
int kiln_version_erasure_of(kiln_manifest *manifest, const kiln_version *version, kiln_version_erasure *out);

#endif
