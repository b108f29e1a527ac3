/* What remote.c and rebase.c share: a dataset ref's parts, and bringing a
 * local branch together with a remote tip (rebase.c), which push and fetch
 * call. Internal to the manifest module. */
#ifndef KILN_MANIFEST_REBASE_H
#define KILN_MANIFEST_REBASE_H

#include <git2.h>
#include <stdbool.h>
#include <stddef.h>

#include "manifest/format.h"
#include "manifest/manifest.h"

#define KILN_REMOTE_REF_CAP 320

/* "refs/heads/<ds>/<name>" or "refs/tags/<ds>/<name>": the parts. */
typedef struct kiln_ref_parts {
	bool tag;
	char dataset[KILN_MFMT_NAME_MAX + 1];
	char name[KILN_MFMT_NAME_MAX + 1];
} kiln_ref_parts;

/* Brings the local branch `ref` together with the remote tip: creates it,
 * fast-forwards it, leaves it (ahead), or rebases it (diverged); every move
 * is a compare-and-swap (KILN_EMODIFIED when the branch moved meanwhile). */
int kiln_remote_integrate_branch(kiln_manifest *manifest, const char *url, const char *ref,
                                 const kiln_ref_parts *parts, const git_oid *remote);

/* The URL for messages into out: no "user:password@" in it. */
void kiln_remote_safe_url(char *out, size_t cap, const char *url);

#endif
