/* Dataset branches: refs/heads/<dataset>/<name> created at a version, for
 * `kiln branch` and any program that continues a dataset from a version.
 * An existing branch is never moved. */
#ifndef KILN_MANIFEST_BRANCH_H
#define KILN_MANIFEST_BRANCH_H

#include "manifest/manifest.h"
#include "manifest/version.h"

typedef struct kiln_branch {
	char ref[320];     /* "refs/heads/<dataset>/<name>" */
	char from[512];    /* the version spec it starts at: "<dataset>@<from>" */
	kiln_version base; /* what `from` resolved to (filled by kiln_branch_create) */
} kiln_branch;

/* Checks the dataset and branch names and `from` ("ds@x" of the same
 * dataset, or a bare "x" meaning "<dataset>@x") and fills out->ref and
 * out->from. Touches no repository. KILN_EINVALID naming what is wrong. */
int kiln_branch_prepare(kiln_branch *out, const char *dataset, const char *name, const char *from);

/* Resolves branch->from in the manifest and creates branch->ref at its
 * commit (reflog message "kiln branch: from <from>"), filling branch->base.
 * KILN_EMODIFIED "<dataset>@<name> already exists (<ref>); a branch is never
 * moved" when the branch exists (nothing changes). */
int kiln_branch_create(kiln_manifest *manifest, kiln_branch *branch, const char *dataset, const char *name);

/* Calls cb(ctx, dataset, name) for each branch refs/heads/<dataset>/<name>
 * of the repository (refs whose names kiln would not make are skipped),
 * sorted by ref name. Strings live until cb returns; a non-zero return
 * stops and is returned. */
int kiln_branch_each(kiln_manifest *manifest, int (*cb)(void *ctx, const char *dataset, const char *name),
                     void *ctx);

#endif
