/* Packing and pruning a manifest repository (see compact.h). */
#include "manifest/compact.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <git2/sys/odb_backend.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

struct pack_check {
	git_odb *packed;
	bool all;
};

static int in_new_pack(const git_oid *id, void *payload)
{
	struct pack_check *c = payload;

	if (git_odb_exists(c->packed, id))
		return 0;
	c->all = false;
	return 1; /* stop: one is missing */
}

/* Whether every object of the pack whose index is idx_path is in `packed`
 * (false when the index cannot be read: the pack is then left to age). */
static bool pack_superseded(git_odb *packed, const char *idx_path)
{
	git_odb_backend *one = NULL;
	git_odb *odb = NULL;
	struct pack_check c = {packed, true};
	bool ok = false;

	if (git_odb_new(&odb) < 0 || git_odb_backend_one_pack(&one, idx_path) < 0)
		goto cleanup;
	if (git_odb_add_backend(odb, one, 1) < 0) {
		one->free(one);
		goto cleanup;
	}
	ok = git_odb_foreach(odb, in_new_pack, &c) >= 0 && c.all;
cleanup:
	git_odb_free(odb);
	return ok;
}

/* Removes pack-*.pack (with its .idx and .rev) other than `keep_name`,
 * without a .keep file, when older than the cutoff or when the new pack
 * (`packed`) holds every object it has. */
static int prune_packs(kiln_manifest *m, const char *objects, const char *keep_name, git_odb *packed,
                       time_t cutoff, kiln_compact_stats *out)
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
			snprintf(path, sizeof(path), "%s/%s.idx", dir, base);
			if (!pack_superseded(packed, path)) {
				out->packs_kept++;
				continue;
			}
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

/* A loose object's file name in objects/<hh>/: 38 lower-case hex digits. */
static bool loose_name(const char *name)
{
	return strlen(name) == 38 && strspn(name, "0123456789abcdef") == 38;
}

/* Removes loose objects (objects/<hh>/<38 hex>) that the new pack
 * (`packed`) holds, and the others older than the cutoff: those are
 * unreachable, garbage. */
static int prune_loose(kiln_manifest *m, const char *objects, git_odb *packed, time_t cutoff,
                       kiln_compact_stats *out)
{
	char dir[4096 + 8], path[4096 + 64];

	for (int hh = 0; hh < 256; hh++) {
		DIR *d;
		struct dirent *e;

		snprintf(dir, sizeof(dir), "%s/%02x", objects, hh);
		if (!(d = opendir(dir)))
			continue;
		while ((e = readdir(d))) {
			char hex[GIT_OID_HEXSZ + 1];
			struct stat st;
			git_oid id;

			if (!loose_name(e->d_name))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
				continue;
			snprintf(hex, sizeof(hex), "%02x%s", hh, e->d_name);
			if (!old_enough(&st, cutoff) &&
			    (git_oid_fromstr(&id, hex) < 0 || !git_odb_exists(packed, &id))) {
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

int kiln_manifest_loose_objects(kiln_manifest *m, uint64_t *out)
{
	char dir[4096 + 16];
	uint64_t n = 0;

	for (int hh = 0; hh < 256; hh++) {
		DIR *d;
		struct dirent *e;

		snprintf(dir, sizeof(dir), "%sobjects/%02x", git_repository_path(kiln_manifest_repo(m)), hh);
		if (!(d = opendir(dir))) {
			if (errno == ENOENT || errno == ENOTDIR)
				continue;
			int err = errno;
			return kiln_error_set(KILN_EIO, "manifest %s: %s: %s", kiln_manifest_path(m), dir,
			                      strerror(err));
		}
		while ((e = readdir(d)))
			n += loose_name(e->d_name);
		closedir(d);
	}
	*out = n;
	return 0;
}

/* ---- the lock and what the last compaction left --------------------------- */

/* Opens <repository>/kiln-compact.lock and locks it (flock: a killed holder
 * releases it). 1: locked (*out_fd); 0: another process holds it and !wait. */
static int lock_compaction(kiln_manifest *m, bool wait, int *out_fd)
{
	char path[4096 + 32];
	int fd, r;

	*out_fd = -1;
	snprintf(path, sizeof(path), "%skiln-compact.lock", git_repository_path(kiln_manifest_repo(m)));
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644)) < 0) {
		int err = errno;
		return kiln_error_set(KILN_EIO, "manifest %s: %s: %s", kiln_manifest_path(m), path,
		                      strerror(err));
	}
	while ((r = flock(fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB)) < 0 && errno == EINTR)
		;
	if (r < 0) {
		int err = errno;
		close(fd);
		if (err == EWOULDBLOCK)
			return 0;
		return kiln_error_set(KILN_EIO, "manifest %s: locking %s: %s", kiln_manifest_path(m), path,
		                      strerror(err));
	}
	*out_fd = fd;
	return 1;
}

/* The lock file holds "kept N\n": the loose objects the last compaction had
 * to leave (young, not packed). Anything else reads as 0. */
static uint64_t read_kept(int fd)
{
	char text[32];
	char *end;
	ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
	unsigned long long v;

	if (n < 7 || memcmp(text, "kept ", 5) != 0)
		return 0;
	text[n] = '\0';
	errno = 0;
	v = strtoull(text + 5, &end, 10);
	return errno || end == text + 5 || *end != '\n' || text[5] == '-' ? 0 : (uint64_t)v;
}

static void write_kept(int fd, uint64_t kept)
{
	char text[32];
	int n = snprintf(text, sizeof(text), "kept %" PRIu64 "\n", kept);

	/* advisory only: a failure leaves a stale count, never a wrong repository */
	if (ftruncate(fd, 0) == 0 && pwrite(fd, text, (size_t)n, 0) != n)
		(void)ftruncate(fd, 0);
}

/* ---- compaction ----------------------------------------------------------- */

/* The compaction itself, the lock held. */
static int compact_locked(kiln_manifest *m, int64_t grace_s, kiln_compact_stats *out)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_packbuilder *pb = NULL;
	git_revwalk *walk = NULL;
	git_odb *packed = NULL;
	git_odb_backend *one = NULL;
	char objects[4096], name[GIT_OID_HEXSZ + 1] = "", idx[4096 + 64];
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
	/* the new pack alone, to ask what it holds */
	snprintf(idx, sizeof(idx), "%s/pack/pack-%s.idx", objects, name);
	if ((gerr = git_odb_new(&packed)) < 0 || (gerr = git_odb_backend_one_pack(&one, idx)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "reading the new pack");
		goto cleanup;
	}
	if ((gerr = git_odb_add_backend(packed, one, 1)) < 0) {
		one->free(one); /* the odb owns it only once added */
		rc = kiln_manifest_git_fail(m, gerr, "reading the new pack");
		goto cleanup;
	}
	if ((rc = prune_packs(m, objects, name, packed, cutoff, out)) < 0 ||
	    (rc = prune_loose(m, objects, packed, cutoff, out)) < 0)
		goto cleanup;
	/* the object database caches pack lists: let it see the new layout */
	git_odb *odb = NULL;
	if (git_repository_odb(&odb, repo) == 0) {
		git_odb_refresh(odb);
		git_odb_free(odb);
	}
	rc = 0;
cleanup:
	git_odb_free(packed);
	git_revwalk_free(walk);
	git_packbuilder_free(pb);
	return rc;
}

int kiln_manifest_compact(kiln_manifest *m, int64_t grace_s, kiln_compact_stats *out)
{
	int fd, rc;

	memset(out, 0, sizeof(*out));
	if ((rc = lock_compaction(m, true, &fd)) < 0)
		return rc;
	rc = compact_locked(m, grace_s, out);
	if (rc == 0)
		write_kept(fd, out->loose_kept);
	close(fd); /* and the lock with it */
	return rc;
}

int kiln_manifest_compact_auto(kiln_manifest *m, uint64_t threshold, int64_t grace_s, bool *out_ran,
                               uint64_t *out_loose, kiln_compact_stats *out)
{
	uint64_t loose;
	int fd = -1, rc;

	*out_ran = false;
	*out_loose = 0;
	memset(out, 0, sizeof(*out));
	if ((rc = kiln_manifest_loose_objects(m, &loose)) < 0)
		return rc;
	*out_loose = loose;
	if (threshold == 0 || loose < threshold)
		return 0;
	if ((rc = lock_compaction(m, false, &fd)) <= 0)
		return rc; /* another process is compacting */
	/* what the last one had to keep does not count: it cannot go before its grace */
	uint64_t kept = read_kept(fd);
	if (loose - (kept < loose ? kept : loose) < threshold) {
		rc = 0;
		goto cleanup;
	}
	if ((rc = compact_locked(m, grace_s, out)) < 0)
		goto cleanup;
	write_kept(fd, out->loose_kept);
	*out_ran = true;
	*out_loose = loose > out->loose_removed ? loose - out->loose_removed : 0;
cleanup:
	close(fd);
	return rc;
}
