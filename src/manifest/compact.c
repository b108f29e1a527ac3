/* Packing and pruning a manifest repository (see compact.h). */
#include "manifest/compact.h"

#include <dirent.h>
#include <errno.h>
#include <git2.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "manifest/internal.h"

/* Adds what `id` names: a tag object and what it points at, a commit (to the
 * walk, which adds its history, trees and blobs), a tree or a blob. */
static int add_root(kiln_manifest *m, git_packbuilder *pb, git_revwalk *walk, const git_oid *id)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_object *obj = NULL;
	git_oid cur;
	int gerr = 0;

	git_oid_cpy(&cur, id);
	for (int depth = 0; depth < 16; depth++) {
		if ((gerr = git_object_lookup(&obj, repo, &cur, GIT_OBJECT_ANY)) < 0)
			return gerr == GIT_ENOTFOUND
			           ? 0
			           : kiln_manifest_git_fail(m, gerr, "reading a ref's object");
		switch (git_object_type(obj)) {
		case GIT_OBJECT_TAG:
			gerr = git_packbuilder_insert(pb, &cur, NULL);
			git_oid_cpy(&cur, git_tag_target_id((git_tag *)obj));
			git_object_free(obj);
			obj = NULL;
			if (gerr < 0)
				return kiln_manifest_git_fail(m, gerr, "packing a tag");
			continue;
		case GIT_OBJECT_COMMIT:
			gerr = git_revwalk_push(walk, &cur);
			break;
		case GIT_OBJECT_TREE:
			gerr = git_packbuilder_insert_tree(pb, &cur);
			break;
		default:
			gerr = git_packbuilder_insert(pb, &cur, NULL);
			break;
		}
		git_object_free(obj);
		return gerr < 0 ? kiln_manifest_git_fail(m, gerr, "packing") : 0;
	}
	return kiln_error_set(KILN_EINVALID, "manifest %s: a tag chain deeper than 16",
	                      kiln_manifest_path(m));
}

/* Every ref's target and every commit its reflog names. */
static int add_refs(kiln_manifest *m, git_packbuilder *pb, git_revwalk *walk)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_reference_iterator *it = NULL;
	git_reference *ref = NULL;
	int gerr, rc = 0;

	if ((gerr = git_reference_iterator_new(&it, repo)) < 0)
		return kiln_manifest_git_fail(m, gerr, "listing refs");
	while ((gerr = git_reference_next(&ref, it)) == 0) {
		git_reflog *log = NULL;

		if (git_reference_type(ref) == GIT_REFERENCE_DIRECT &&
		    (rc = add_root(m, pb, walk, git_reference_target(ref))) < 0)
			break;
		if (git_reflog_read(&log, repo, git_reference_name(ref)) == 0) {
			for (size_t i = 0; i < git_reflog_entrycount(log) && rc == 0; i++) {
				const git_reflog_entry *e = git_reflog_entry_byindex(log, i);

				if (!git_oid_is_zero(git_reflog_entry_id_new(e)))
					rc = add_root(m, pb, walk, git_reflog_entry_id_new(e));
			}
			git_reflog_free(log);
		}
		git_reference_free(ref);
		ref = NULL;
		if (rc < 0)
			break;
	}
	if (rc == 0 && gerr != GIT_ITEROVER)
		rc = kiln_manifest_git_fail(m, gerr, "listing refs");
	git_reference_free(ref);
	git_reference_iterator_free(it);
	return rc;
}

static bool old_enough(const struct stat *st, time_t cutoff)
{
	return st->st_mtime < cutoff;
}

/* Removes pack-*.pack (with its .idx and .rev) other than `keep_name`,
 * when older than the cutoff and without a .keep file. */
static int prune_packs(kiln_manifest *m, const char *objects, const char *keep_name, time_t cutoff,
                       kiln_compact_stats *out)
{
	char dir[4096 + 8], path[sizeof(dir) + 300 + 8];
	DIR *d;
	struct dirent *e;

	snprintf(dir, sizeof(dir), "%s/pack", objects);
	if (!(d = opendir(dir)))
		return errno == ENOENT ? 0 : kiln_error_set(KILN_EIO, "%s: %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		struct stat st;
		char base[300];

		if (n < 10 || n > 200 || strncmp(e->d_name, "pack-", 5) != 0 ||
		    strcmp(e->d_name + n - 5, ".pack") != 0)
			continue;
		snprintf(base, sizeof(base), "%.*s", (int)(n - 5), e->d_name);
		if (strcmp(base + 5, keep_name) == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s.keep", dir, base);
		if (access(path, F_OK) == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s.pack", dir, base);
		if (stat(path, &st) < 0)
			continue;
		if (!old_enough(&st, cutoff)) {
			out->packs_kept++;
			continue;
		}
		/* the index last: a reader that still sees it finds its pack */
		static const char *const exts[] = {".rev", ".pack", ".idx"};
		for (size_t i = 0; i < 3; i++) {
			snprintf(path, sizeof(path), "%s/%s%s", dir, base, exts[i]);
			if (unlink(path) < 0 && errno != ENOENT) {
				int err = errno;
				closedir(d);
				return kiln_error_set(KILN_EIO, "manifest %s: %s: %s", kiln_manifest_path(m),
				                      path, strerror(err));
			}
		}
		out->packs_removed++;
	}
	closedir(d);
	return 0;
}

/* Removes loose objects (objects/<hh>/<38 hex>) older than the cutoff:
 * reachable ones are in the new pack, unreachable ones are garbage. */
static int prune_loose(kiln_manifest *m, const char *objects, time_t cutoff, kiln_compact_stats *out)
{
	char dir[4096 + 8], path[4096 + 64];

	for (int hh = 0; hh < 256; hh++) {
		DIR *d;
		struct dirent *e;

		snprintf(dir, sizeof(dir), "%s/%02x", objects, hh);
		if (!(d = opendir(dir)))
			continue;
		while ((e = readdir(d))) {
			struct stat st;

			if (strlen(e->d_name) != 38 || strspn(e->d_name, "0123456789abcdef") != 38)
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
				continue;
			if (!old_enough(&st, cutoff)) {
				out->loose_kept++;
				continue;
			}
			if (unlink(path) < 0 && errno != ENOENT) {
				int err = errno;
				closedir(d);
				return kiln_error_set(KILN_EIO, "manifest %s: %s: %s", kiln_manifest_path(m),
				                      path, strerror(err));
			}
			out->loose_removed++;
		}
		/* the fan-out directory stays even when empty: a writer may have just
		 * created it and be about to put its object in */
		closedir(d);
	}
	return 0;
}

int kiln_manifest_compact(kiln_manifest *m, int64_t grace_s, kiln_compact_stats *out)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_packbuilder *pb = NULL;
	git_revwalk *walk = NULL;
	char objects[4096], name[GIT_OID_HEXSZ + 1] = "";
	/* taken before anything is read: whatever is written from now on is young */
	time_t cutoff = time(NULL) - (time_t)grace_s;
	int gerr, rc;

	memset(out, 0, sizeof(*out));
	snprintf(objects, sizeof(objects), "%sobjects", git_repository_path(repo));
	if ((gerr = git_packbuilder_new(&pb, repo)) < 0 || (gerr = git_revwalk_new(&walk, repo)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "packing");
		goto cleanup;
	}
	if ((rc = add_refs(m, pb, walk)) < 0)
		goto cleanup;
	if ((gerr = git_packbuilder_insert_walk(pb, walk)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "packing history");
		goto cleanup;
	}
	out->packed = git_packbuilder_object_count(pb);
	if (out->packed == 0) {
		rc = 0; /* no refs: nothing is known to be reachable, so nothing is removed */
		goto cleanup;
	}
	if ((gerr = git_packbuilder_write(pb, NULL, 0, NULL, NULL)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "writing the pack");
		goto cleanup;
	}
	snprintf(name, sizeof(name), "%s", git_packbuilder_name(pb));
	if ((rc = prune_packs(m, objects, name, cutoff, out)) < 0 ||
	    (rc = prune_loose(m, objects, cutoff, out)) < 0)
		goto cleanup;
	/* the object database caches pack lists: let it see the new layout */
	git_odb *odb = NULL;
	if (git_repository_odb(&odb, repo) == 0) {
		git_odb_refresh(odb);
		git_odb_free(odb);
	}
	rc = 0;
cleanup:
	git_revwalk_free(walk);
	git_packbuilder_free(pb);
	return rc;
}
