/* Remote manifest repositories: pushing one dataset ref to a shared bare
 * repository and fetching a dataset's branches and tags from one, so kiln
 * runs on several hosts (each with its own local manifest) can share one
 * origin. A branch that moved on both sides is rebased, never merged or
 * overwritten: the local commits the remote lacks are replayed on top of the
 * remote tip as new snapshot commits (shard lines added, lineage moved, stats
 * added), which is safe because kiln commits only add. docs/VERSIONS.md has
 * the rules and the transports. */
#ifndef KILN_MANIFEST_REMOTE_H
#define KILN_MANIFEST_REMOTE_H

#include "core/retry.h"
#include "manifest/manifest.h"

/* Push attempts before giving up on a remote that keeps moving, and the
 * pause before push attempt n + 1: 20 ms * n plus a uniform draw below
 * 20 ms, so racing pushers do not collide again. */
#define KILN_REMOTE_RETRIES 5
extern const kiln_retry_policy kiln_remote_push_retry;

/* Pushes `ref` ("refs/heads/<ds>/<branch>" or "refs/tags/<ds>/<tag>") to the
 * repository at remote_url: a local path or file:// URL (a bare repository;
 * updated with a compare-and-swap on the ref), or any URL libgit2 can push
 * to (ssh://, https://, git://). When the remote branch moved (a
 * non-fast-forward), fetches it, replays the local commits it lacks on top of
 * it, moves the local branch to the result (compare-and-swap) and pushes
 * again, up to KILN_REMOTE_RETRIES times. Replaying refuses (KILN_EINVALID,
 * nothing pushed, the local branch unchanged) when both sides moved the same
 * topic/partition's offsets or changed the key or split settings. A tag is
 * never rebased or overwritten: one the remote holds at another object is
 * KILN_EINVALID. Returns 0 when the remote ref equals the local one. */
int kiln_manifest_push(kiln_manifest *manifest, const char *remote_url, const char *ref);

/* Fetches refs/heads/<dataset>/<name> and refs/tags/<dataset>/<name> from remote_url
 * into the same local refs: a missing local ref is created, a local branch
 * behind the remote fast-forwards, one ahead stays, one that diverged is
 * rebased onto the remote branch (as for push). A local tag that differs
 * from the remote one is never overwritten: after updating everything else,
 * KILN_EINVALID names it. A remote without the dataset fetches nothing (0). */
int kiln_manifest_fetch(kiln_manifest *manifest, const char *remote_url, const char *dataset);

#endif
