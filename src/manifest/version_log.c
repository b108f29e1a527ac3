/* A version's history (kiln_version_log, version.h): its commit and its
 * first-parent ancestors newest first, each with the dataset's vN tags
 * that name it. */
#include "manifest/version_internal.h"

#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"

/* ---- history -------------------------------------------------------------- */

typedef struct vtag {
	git_oid commit;
	uint64_t n;
	char name[24];
} vtag;

static int vtag_cmp(const void *a, const void *b)
{
	const vtag *x = a, *y = b;

	return (x->n > y->n) - (x->n < y->n);
}

/* The dataset's vN tags peeled to commits, ascending by N. */
static int load_vtags(kiln_manifest *m, const char *dataset, vtag **out, size_t *out_n)
{
	char glob[KILN_MFMT_NAME_MAX + 32];
	size_t prefix_len, n = 0, cap = 0;
	git_reference_iterator *it = NULL;
	git_reference *ref;
	vtag *tags = NULL;
	int gerr, rc = 0;

	*out = NULL;
	*out_n = 0;
	snprintf(glob, sizeof(glob), "refs/tags/%s/v*", dataset);
	prefix_len = strlen(glob) - 2;
	if ((gerr = git_reference_iterator_glob_new(&it, kiln_manifest_repo(m), glob)) < 0)
		return kiln_manifest_git_fail(m, gerr, glob);
	while ((gerr = git_reference_next(&ref, it)) == 0) {
		const char *name = git_reference_name(ref) + prefix_len;
		size_t len = strlen(name), d;
		git_object *obj = NULL;
		uint64_t num = 0;

		for (d = 1; d < len && name[d] >= '0' && name[d] <= '9'; d++)
			num = num * 10 + (uint64_t)(name[d] - '0');
		if (name[0] != 'v' || len < 2 || len > 19 || d != len ||
		    git_reference_peel(&obj, ref, GIT_OBJECT_COMMIT) < 0) {
			git_reference_free(ref);
			continue; /* not a version tag, or not on a commit */
		}
		if ((rc = KILN_ARRAY_GROW(tags, cap, n, NULL)) < 0) {
			git_object_free(obj);
			git_reference_free(ref);
			goto cleanup;
		}
		git_oid_cpy(&tags[n].commit, git_object_id(obj));
		tags[n].n = num;
		snprintf(tags[n].name, sizeof(tags[n].name), "%s", name);
		n++;
		git_object_free(obj);
		git_reference_free(ref);
	}
	if (gerr != GIT_ITEROVER) {
		rc = kiln_manifest_git_fail(m, gerr, glob);
		goto cleanup;
	}
	if (n > 1)
		qsort(tags, n, sizeof(*tags), vtag_cmp);
	*out = tags;
	*out_n = n;
	tags = NULL;
cleanup:
	free(tags);
	git_reference_iterator_free(it);
	return rc;
}

int kiln_version_log(kiln_manifest *m, const kiln_version *v, size_t max,
                     int (*cb)(void *ctx, const char *commit, int64_t time, const char *summary,
                               const char *tags),
                     void *ctx)
{
	git_commit *commit = NULL, *parent = NULL;
	vtag *tags = NULL;
	size_t ntags = 0, count = 0;
	kiln_buf names = KILN_BUF_INIT(0), line = KILN_BUF_INIT(0);
	int rc, gerr;

	if ((rc = load_vtags(m, v->dataset, &tags, &ntags)) < 0 ||
	    (rc = kiln_version_commit(m, v, &commit)) < 0)
		goto cleanup;
	while (commit && (max == 0 || count < max)) {
		char hex[41];
		const char *summary = git_commit_summary(commit);
		kiln_version this = {0};
		kiln_version_erasure er;

		kiln_buf_reset(&names);
		for (size_t i = 0; i < ntags; i++)
			if (git_oid_equal(&tags[i].commit, git_commit_id(commit)) &&
			    ((names.len && (rc = kiln_buf_putc(&names, ',')) < 0) ||
			     (rc = kiln_buf_puts(&names, tags[i].name)) < 0))
				goto cleanup;
		if ((rc = kiln_buf_putc(&names, '\0')) < 0)
			goto cleanup;
		git_oid_tostr(hex, sizeof(hex), git_commit_id(commit));
		/* a version an erasure rewrote says so after its summary */
		memcpy(this.commit, hex, sizeof(hex));
		kiln_buf_reset(&line);
		if ((rc = kiln_version_erasure_of(m, &this, &er)) < 0 ||
		    (rc = kiln_buf_puts(&line, summary ? summary : "")) < 0 ||
		    (er.id[0] && (rc = kiln_buf_printf(&line, " [rewritten by erasure %s]", er.id)) < 0) ||
		    (rc = kiln_buf_putc(&line, '\0')) < 0)
			goto cleanup;
		if ((rc = cb(ctx, hex, (int64_t)git_commit_time(commit), line.ptr, names.ptr)) != 0)
			goto cleanup;
		count++;
		if (git_commit_parentcount(commit) == 0)
			break;
		if ((gerr = git_commit_parent(&parent, commit, 0)) < 0) {
			rc = kiln_manifest_git_fail(m, gerr, hex);
			goto cleanup;
		}
		git_commit_free(commit);
		commit = parent;
		parent = NULL;
	}
	rc = 0;
cleanup:
	git_commit_free(commit);
	free(tags);
	kiln_buf_free(&names);
	kiln_buf_free(&line);
	return rc;
}
