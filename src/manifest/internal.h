/* What the manifest's own modules share beyond manifest.h: the libgit2
 * repository behind a kiln_manifest (borrowed: it lives as long as the
 * manifest) and its path, for modules that read or write it directly. */
#ifndef KILN_MANIFEST_INTERNAL_H
#define KILN_MANIFEST_INTERNAL_H

#include <git2.h>

#include "manifest/manifest.h"

git_repository *kiln_manifest_repo(kiln_manifest *manifest);
const char *kiln_manifest_path(const kiln_manifest *manifest);

/* Sets the last error from libgit2's last error: "manifest PATH: WHAT: msg",
 * with the KILN_E* code that matches gerr. Returns that code. */
int kiln_manifest_git_fail(const kiln_manifest *manifest, int gerr, const char *what);

#endif
