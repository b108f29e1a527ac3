/* Dataset branches: names checked, `from` resolved, the ref created once and
 * never moved. Owns nothing beyond the call; the repository is the
 * manifest's. */
#include "manifest/branch.h"

#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
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

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int kiln_branch_each(kiln_manifest *m, int (*cb)(void *ctx, const char *dataset, const char *name), void *ctx)
{
	git_reference_iterator *it = NULL;
	git_reference *ref;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int gerr, rc = 0;

	if ((gerr = git_reference_iterator_glob_new(&it, kiln_manifest_repo(m), "refs/heads/*")) < 0)
		return kiln_manifest_git_fail(m, gerr, "listing branches");
	while ((gerr = git_reference_next(&ref, it)) == 0) {
		const char *full = git_reference_name(ref) + strlen("refs/heads/"),
		           *slash = strchr(full, '/');
		char *copy;

		if (!slash || !kiln_mfmt_name_valid_n(full, (size_t)(slash - full)) ||
		    !kiln_mfmt_name_valid(slash + 1)) {
			git_reference_free(ref);
			continue;
		}
		if ((rc = KILN_ARRAY_GROW(names, cap, n, NULL)) < 0) {
			git_reference_free(ref);
			goto cleanup;
		}
		copy = strdup(full);
		git_reference_free(ref);
		if (!copy) {
			rc = kiln_error_oom(NULL);
			goto cleanup;
		}
		names[n++] = copy;
	}
	if (gerr != GIT_ITEROVER) {
		rc = kiln_manifest_git_fail(m, gerr, "listing branches");
		goto cleanup;
	}
	if (n > 1)
		qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n && rc == 0; i++) {
		char *slash = strchr(names[i], '/');

		*slash = '\0';
		rc = cb(ctx, names[i], slash + 1);
	}
cleanup:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	git_reference_iterator_free(it);
	return rc;
}
