/* What version.c (names, resolution, shards, diff) and version_log.c (the
 * history) share. */
#ifndef KILN_MANIFEST_VERSION_INTERNAL_H
#define KILN_MANIFEST_VERSION_INTERNAL_H

#include "manifest/internal.h"
#include "manifest/version.h"

/* The commit v names into *out (git_commit_free it); KILN_EINVALID for a
 * malformed id, else libgit2's failure. */
int kiln_version_commit(kiln_manifest *m, const kiln_version *v, git_commit **out);

#endif
