/* Every object and every other file of a manifest repository (see scan.h). */
#include "manifest/scan.h"

#include <dirent.h>
#include <errno.h>
#include <git2.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/error.h"
#include "manifest/internal.h"
#include "manifest/loose.h"
#include "manifest/oidset.h"

static int collect_id(const git_oid *id, void *payload)
{
	return kiln_oidset_add(payload, id) < 0 ? 1 : 0;
}

int kiln_manifest_each_object(kiln_manifest *m,
                              int (*cb)(void *ctx, const char *id_hex, const char *type, const void *data,
                                        size_t len),
                              void *ctx)
{
	kiln_oidset ids = KILN_OIDSET_INIT;
	kiln_manifest *now = NULL;
	git_odb *odb = NULL;
	int gerr, rc = 0;

	/* a handle of its own: an open one keeps serving removed packs (libgit2
	 * keeps them mapped) and cached objects */
	if ((rc = kiln_manifest_open(&now, kiln_manifest_path(m))) < 0)
		goto cleanup;
	m = now;
	if ((gerr = git_repository_odb(&odb, kiln_manifest_repo(m))) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "opening the object database");
		goto cleanup;
	}
	/* loose and packed backends each list theirs: an object in both comes twice */
	if ((gerr = git_odb_foreach(odb, collect_id, &ids)) < 0) {
		rc = gerr == GIT_EUSER ? KILN_ENOMEM : kiln_manifest_git_fail(m, gerr, "listing objects");
		goto cleanup;
	}
	for (size_t i = 0; i < ids.cap && rc == 0; i++) {
		char hex[GIT_OID_HEXSZ + 1];
		git_odb_object *obj = NULL;

		if (!ids.used[i])
			continue;
		git_oid_tostr(hex, sizeof(hex), &ids.ids[i]);
		if ((gerr = git_odb_read(&obj, odb, &ids.ids[i])) < 0) {
			if (gerr == GIT_ENOTFOUND)
				continue; /* pruned since it was listed */
			rc = kiln_error_set(KILN_EIO, "manifest %s: object %s cannot be read: %s",
			                    kiln_manifest_path(m), hex, kiln_manifest_git_message());
			break;
		}
		rc = cb(ctx, hex, git_object_type2string(git_odb_object_type(obj)), git_odb_object_data(obj),
		        git_odb_object_size(obj));
		git_odb_object_free(obj);
	}
cleanup:
	git_odb_free(odb);
	kiln_manifest_close(now);
	kiln_oidset_free(&ids);
	return rc;
}

/* ---- the other files ------------------------------------------------------ */

typedef struct file_walk {
	kiln_manifest *m;
	int (*cb)(void *ctx, const char *path, const void *data, size_t len);
	void *ctx;
	kiln_buf bytes;
	char root[4096];
} file_walk;

static bool all_hex(const char *s, size_t n)
{
	return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

/* Whether rel (relative to the repository folder) is an object store file
 * whose content each_object gives. */
static bool object_file(const file_walk *w, const char *rel)
{
	char idx[sizeof(w->root) + 300];
	size_t n;

	if (strncmp(rel, "objects/", 8) != 0)
		return false;
	rel += 8;
	if (strlen(rel) == 41 && rel[2] == '/') {
		char dir[3] = {rel[0], rel[1], '\0'};
		return all_hex(dir, 2) && all_hex(rel + 3, 38);
	}
	n = strlen(rel);
	if (strncmp(rel, "pack/pack-", 10) != 0 || n < 16 || n > 250 || strcmp(rel + n - 5, ".pack") != 0)
		return false;
	snprintf(idx, sizeof(idx), "%sobjects/%.*s.idx", w->root, (int)(n - 5), rel);
	return access(idx, F_OK) == 0;
}

static int walk_dir(file_walk *w, const char *rel, int depth)
{
	char path[sizeof(w->root) + 4096], sub[4096];
	DIR *d;
	struct dirent *e;
	int rc = 0;

	if (depth > 64)
		return kiln_error_set(KILN_EINVALID, "manifest %s: %s: folders nested deeper than 64",
		                      kiln_manifest_path(w->m), rel);
	snprintf(path, sizeof(path), "%s%s", w->root, rel);
	if (!(d = opendir(path))) {
		if (errno == ENOENT)
			return 0; /* removed meanwhile */
		return kiln_error_set(KILN_EIO, "manifest %s: %s: %s", kiln_manifest_path(w->m), path,
		                      strerror(errno));
	}
	while (rc == 0 && (e = readdir(d))) {
		struct stat st;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", e->d_name) >=
		    sizeof(sub)) {
			rc = kiln_error_set(KILN_EINVALID,
			                    "manifest %s: a path longer than %zu bytes under %s",
			                    kiln_manifest_path(w->m), sizeof(sub), rel);
			break;
		}
		snprintf(path, sizeof(path), "%s%s", w->root, sub);
		if (lstat(path, &st) < 0)
			continue; /* removed meanwhile */
		if (S_ISDIR(st.st_mode)) {
			rc = walk_dir(w, sub, depth + 1);
		} else if (S_ISREG(st.st_mode) && !object_file(w, sub)) {
			if ((rc = kiln_git_read_file(&w->bytes, path)) == KILN_ENOTFOUND)
				rc = 0;
			else if (rc == 0)
				rc = w->cb(w->ctx, sub, w->bytes.ptr ? w->bytes.ptr : "", w->bytes.len);
		}
	}
	closedir(d);
	return rc;
}

int kiln_manifest_each_file(kiln_manifest *m,
                            int (*cb)(void *ctx, const char *path, const void *data, size_t len), void *ctx)
{
	file_walk w = {.m = m, .cb = cb, .ctx = ctx, .bytes = KILN_BUF_INIT(0)};
	int rc;

	if ((size_t)snprintf(w.root, sizeof(w.root), "%s", git_repository_path(kiln_manifest_repo(m))) >=
	    sizeof(w.root))
		return kiln_error_set(KILN_EINVALID, "manifest %s: path too long", kiln_manifest_path(m));
	rc = walk_dir(&w, "", 0);
	kiln_buf_free(&w.bytes);
	return rc;
}
