/* Dataset branches: names checked, `from` resolved, the ref created once and
 * never moved. Owns nothing beyond the call; the repository is the
 * manifest's. */
#include "manifest/branch.h"

#include <git2.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "manifest/format.h"
#include "manifest/internal.h"

int kiln_branch_prepare(kiln_branch *out, const char *dataset, const char *name, const char *from)
{
	int valid = 0;

	memset(out, 0, sizeof(*out));
	if (!kiln_mfmt_name_valid(dataset))
		return kiln_error_set(KILN_EINVALID,
		                      "dataset name '%s' must match [a-z0-9][a-z0-9._-]{0,127}", dataset);
	if (!kiln_mfmt_name_valid(name))
		return kiln_error_set(KILN_EINVALID, "branch name '%s' must match [a-z0-9][a-z0-9._-]{0,127}",
		                      name);
	snprintf(out->ref, sizeof(out->ref), "refs/heads/%s/%s", dataset, name);
	if (git_reference_name_is_valid(&valid, out->ref) < 0 || !valid)
		return kiln_error_set(KILN_EINVALID, "%s is not a valid git reference name", out->ref);
	/* from: "ds@x", or a bare "x" of the dataset */
	if (strchr(from, '@')) {
		size_t n = (size_t)(strchr(from, '@') - from);

		if (n != strlen(dataset) || strncmp(from, dataset, n) != 0)
			return kiln_error_set(KILN_EINVALID, "%s is a version of another dataset than %s",
			                      from, dataset);
		snprintf(out->from, sizeof(out->from), "%s", from);
	} else {
		snprintf(out->from, sizeof(out->from), "%s@%s", dataset, from);
	}
	return 0;
}

int kiln_branch_create(kiln_manifest *manifest, kiln_branch *branch, const char *dataset, const char *name)
{
	git_reference *made = NULL;
	git_oid id;
	char msg[600];
	int gerr, rc;

	if ((rc = kiln_version_resolve(manifest, branch->from, &branch->base)) < 0)
		return rc;
	if (git_oid_fromstr(&id, branch->base.commit) < 0)
		return kiln_error_set(KILN_EINVALID, "%s: bad commit id", branch->from);
	snprintf(msg, sizeof(msg), "kiln branch: from %s", branch->from);
	gerr = git_reference_create(&made, kiln_manifest_repo(manifest), branch->ref, &id, 0, msg);
	git_reference_free(made);
	if (gerr == GIT_EEXISTS)
		return kiln_error_set(KILN_EMODIFIED, "%s@%s already exists (%s); a branch is never moved",
		                      dataset, name, branch->ref);
	if (gerr < 0)
		return kiln_manifest_git_fail(manifest, gerr, branch->ref);
	return 0;
}
