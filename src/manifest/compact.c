/* Packing and pruning a manifest repository (see compact.h). */
#include "manifest/compact.h"

#include <ctype.h>
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "manifest/internal.h"
#include "manifest/loose.h"
#include "manifest/oidset.h"
#include "manifest/compact_internal.h"
#include "manifest/repo_lock.h"

/* Where a walk puts what it reaches: a pack being built (compaction), or a
 * set of ids (purge planning). Commits go to `walk` (a pack) or `stack` (a
 * set) and are taken, with their history, trees and blobs, by finish_walk. */
typedef struct reach {
	git_packbuilder *pb; /* NULL: into set */
	git_revwalk *walk;
	kiln_oidset *set;
	git_oid *stack;
	size_t n_stack, cap_stack;
} reach;

static int push_commit(reach *r, const git_oid *id)
{
	if (r->n_stack == r->cap_stack) {
		size_t cap = r->cap_stack ? r->cap_stack * 2 : 64;
		git_oid *v = realloc(r->stack, cap * sizeof(*v));

		if (!v)
			return kiln_error_set(KILN_ENOMEM, "out of memory (walking history)");
		r->stack = v;
		r->cap_stack = cap;
	}
	git_oid_cpy(&r->stack[r->n_stack++], id);
	return 0;
}

/* A tree and everything under it into r->set (a tree already there has its
 * content there too). */
static int reach_tree(kiln_manifest *m, reach *r, const git_oid *id, int depth)
{
	git_tree *tree = NULL;
	int gerr, rc;

	if ((rc = kiln_oidset_add(r->set, id)) <= 0)
		return rc;
	if (depth > 256)
		return kiln_error_set(KILN_EINVALID, "manifest %s: trees nested deeper than 256",
		                      kiln_manifest_path(m));
	if ((gerr = git_tree_lookup(&tree, kiln_manifest_repo(m), id)) < 0)
		return gerr == GIT_ENOTFOUND ? 0 : kiln_manifest_git_fail(m, gerr, "reading a tree");
	for (size_t i = 0; i < git_tree_entrycount(tree) && rc >= 0; i++) {
		const git_tree_entry *e = git_tree_entry_byindex(tree, i);

		if (git_tree_entry_type(e) == GIT_OBJECT_TREE)
			rc = reach_tree(m, r, git_tree_entry_id(e), depth + 1);
		else if (git_tree_entry_type(e) == GIT_OBJECT_BLOB)
			rc = kiln_oidset_add(r->set, git_tree_entry_id(e));
	}
	git_tree_free(tree);
	return rc < 0 ? rc : 0;
}

/* One object that is not a commit (those go to the walk). */
static int reach_one(kiln_manifest *m, reach *r, const git_oid *id, git_object_t type)
{
	int gerr, rc;

	if (!r->pb) {
		if (type == GIT_OBJECT_TREE)
			return reach_tree(m, r, id, 0);
		return (rc = kiln_oidset_add(r->set, id)) < 0 ? rc : 0;
	}
	gerr = type == GIT_OBJECT_TREE ? git_packbuilder_insert_tree(r->pb, id)
	                               : git_packbuilder_insert(r->pb, id, NULL);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, "packing") : 0;
}

/* Adds what `id` names: a tag object and what it points at, a commit (to the
 * walk, which adds its history, trees and blobs), a tree or a blob. An
 * object the repository lacks adds nothing. */
static int add_root(kiln_manifest *m, reach *r, const git_oid *id)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_object *obj = NULL;
	git_oid cur;
	int gerr = 0, rc;

	git_oid_cpy(&cur, id);
	for (int depth = 0; depth < 16; depth++) {
		if ((gerr = git_object_lookup(&obj, repo, &cur, GIT_OBJECT_ANY)) < 0)
			return gerr == GIT_ENOTFOUND
			           ? 0
			           : kiln_manifest_git_fail(m, gerr, "reading a ref's object");
		git_object_t type = git_object_type(obj);
		if (type == GIT_OBJECT_TAG) {
			rc = reach_one(m, r, &cur, type);
			git_oid_cpy(&cur, git_tag_target_id((git_tag *)obj));
			git_object_free(obj);
			obj = NULL;
			if (rc < 0)
				return rc;
			continue;
		}
		git_object_free(obj);
		if (type != GIT_OBJECT_COMMIT)
			return reach_one(m, r, &cur, type);
		if (!r->pb)
			return kiln_oidset_has(r->set, &cur) ? 0 : push_commit(r, &cur);
		gerr = git_revwalk_push(r->walk, &cur);
		return gerr < 0 ? kiln_manifest_git_fail(m, gerr, "walking history") : 0;
	}
	return kiln_error_set(KILN_EINVALID, "manifest %s: a tag chain deeper than 16",
	                      kiln_manifest_path(m));
}

/* The commits pushed, with their history, trees and blobs. Into a set, a
 * commit (or parent) the repository lacks adds nothing: a purge killed
 * midway may have removed part of a superseded history. */
static int finish_walk(kiln_manifest *m, reach *r)
{
	int gerr, rc = 0;

	if (r->pb) {
		gerr = git_packbuilder_insert_walk(r->pb, r->walk);
		git_revwalk_reset(r->walk);
		return gerr < 0 ? kiln_manifest_git_fail(m, gerr, "packing history") : 0;
	}
	while (rc >= 0 && r->n_stack) {
		git_oid id = r->stack[--r->n_stack];
		git_commit *c = NULL;

		if ((rc = kiln_oidset_add(r->set, &id)) <= 0)
			continue; /* known already: its tree and history too */
		if ((gerr = git_commit_lookup(&c, kiln_manifest_repo(m), &id)) < 0) {
			rc = gerr == GIT_ENOTFOUND ? 0 : kiln_manifest_git_fail(m, gerr, "reading a commit");
			continue;
		}
		rc = reach_tree(m, r, git_commit_tree_id(c), 0);
		for (unsigned i = 0; i < git_commit_parentcount(c) && rc >= 0; i++)
			if (!kiln_oidset_has(r->set, git_commit_parent_id(c, i)))
				rc = push_commit(r, git_commit_parent_id(c, i));
		git_commit_free(c);
	}
	r->n_stack = 0;
	return rc < 0 ? rc : 0;
}

/* Calls cb for HEAD and every ref: its name and target (NULL for a symbolic
 * one: what it points at is a ref of its own). */
typedef int (*ref_fn)(kiln_manifest *m, void *ctx, const char *name, const git_oid *target);

static int each_ref(kiln_manifest *m, ref_fn cb, void *ctx)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_reference_iterator *it = NULL;
	git_reference *ref = NULL;
	int gerr, rc;

	/* HEAD: its target when detached */
	if ((gerr = git_reference_lookup(&ref, repo, "HEAD")) < 0 && gerr != GIT_ENOTFOUND)
		return kiln_manifest_git_fail(m, gerr, "reading HEAD");
	rc = cb(m, ctx, "HEAD",
	        ref && git_reference_type(ref) == GIT_REFERENCE_DIRECT ? git_reference_target(ref) : NULL);
	git_reference_free(ref);
	ref = NULL;
	if (rc < 0)
		return rc;
	if ((gerr = git_reference_iterator_new(&it, repo)) < 0)
		return kiln_manifest_git_fail(m, gerr, "listing refs");
	while ((gerr = git_reference_next(&ref, it)) == 0) {
		rc = cb(m, ctx, git_reference_name(ref),
		        git_reference_type(ref) == GIT_REFERENCE_DIRECT ? git_reference_target(ref) : NULL);
		git_reference_free(ref);
		ref = NULL;
		if (rc < 0)
			break;
	}
	if (rc == 0 && gerr != GIT_ITEROVER)
		rc = kiln_manifest_git_fail(m, gerr, "listing refs");
	git_reference_iterator_free(it);
	return rc;
}

/* Calls cb with the name of every reflog under <repository>/logs/ (those
 * of refs, of HEAD and pseudo-refs such as ORIG_HEAD, and any a deleted ref
 * left), rel being the folder walked ("" at first). */
typedef int (*reflog_fn)(kiln_manifest *m, void *ctx, const char *name);

static int each_reflog_in(kiln_manifest *m, reflog_fn cb, void *ctx, const char *rel, int depth)
{
	char dir[4096 + 300], name[300];
	DIR *d;
	struct dirent *e;
	int rc = 0;

	snprintf(dir, sizeof(dir), "%slogs/%s", git_repository_path(kiln_manifest_repo(m)), rel);
	if (depth > 32 || !(d = opendir(dir)))
		return 0;
	while (rc == 0 && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		struct stat st;
		char path[sizeof(dir) + 300];

		if (e->d_name[0] == '.' || (n > 5 && strcmp(e->d_name + n - 5, ".lock") == 0) ||
		    (size_t)snprintf(name, sizeof(name), "%s%s%s", rel, *rel ? "/" : "", e->d_name) >=
		        sizeof(name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lstat(path, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode))
			rc = each_reflog_in(m, cb, ctx, name, depth + 1);
		else if (S_ISREG(st.st_mode))
			rc = cb(m, ctx, name);
	}
	closedir(d);
	return rc;
}

static int each_reflog(kiln_manifest *m, reflog_fn cb, void *ctx)
{
	return each_reflog_in(m, cb, ctx, "", 0);
}

/* Every object a reflog names. */
static int add_reflog(kiln_manifest *m, void *ctx, const char *name)
{
	reach *r = ctx;
	git_reflog *log = NULL;
	int rc = 0;

	if (git_reflog_read(&log, kiln_manifest_repo(m), name) == 0) {
		for (size_t i = 0; i < git_reflog_entrycount(log) && rc == 0; i++) {
			const git_reflog_entry *e = git_reflog_entry_byindex(log, i);

			if (!git_oid_is_zero(git_reflog_entry_id_new(e)))
				rc = add_root(m, r, git_reflog_entry_id_new(e));
		}
		git_reflog_free(log);
	}
	return rc;
}

/* A ref's target alone. */
static int add_ref_target(kiln_manifest *m, void *ctx, const char *name, const git_oid *target)
{
	(void)name;
	return target ? add_root(m, ctx, target) : 0;
}

/* ---- purge planning ------------------------------------------------------- */

/* How many of s[0..n) lead with hexadecimal digits. */
static size_t hex_run(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n && isxdigit((unsigned char)s[i]))
		i++;
	return i;
}

static int keep_root(purge_plan *p, const git_oid *id)
{
	if (p->n_kept == p->cap_kept) {
		size_t cap = p->cap_kept ? p->cap_kept * 2 : 64;
		git_oid *v = realloc(p->kept, cap * sizeof(*v));

		if (!v)
			return kiln_error_set(KILN_ENOMEM, "out of memory (reflog entries)");
		p->kept = v;
		p->cap_kept = cap;
	}
	git_oid_cpy(&p->kept[p->n_kept++], id);
	return 0;
}

/* Takes <repository>/<ref>.lock as git and libgit2 do for an update, so no
 * writer appends to the ref's reflog while it is rewritten: 1 (locked: the
 * caller unlinks lock), 0 when the ref's folder does not exist (nothing to
 * exclude), KILN_ERETRY when a writer keeps it for seconds. */
static int lock_ref(kiln_manifest *m, const char *name, char *lock, size_t cap)
{
	snprintf(lock, cap, "%s%s.lock", git_repository_path(kiln_manifest_repo(m)), name);
	for (int tries = 0; tries < 300; tries++) {
		int fd = open(lock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

		if (fd >= 0) {
			close(fd);
			return 1;
		}
		if (errno == ENOENT)
			return 0;
		if (errno != EEXIST)
			return kiln_error_set(KILN_EIO, "manifest %s: %s: %s", kiln_manifest_path(m), lock,
			                      strerror(errno));
		usleep(10 * 1000); /* a writer holds it for the moment of one rename */
	}
	return kiln_error_set(KILN_ERETRY, "manifest %s: %s is locked by another writer (%s)",
	                      kiln_manifest_path(m), name, lock);
}

/* A reflog: entries that name (as old or new id) an object the
 * superseded ids reach and the refs do not are dropped (counted; with
 * apply, the reflog is rewritten without them under the ref's lock); the
 * others are kept as roots. */
static int plan_reflog(kiln_manifest *m, void *ctx, const char *name)
{
	purge_plan *p = ctx;
	git_reflog *log = NULL;
	char lock[4096 + 300];
	uint64_t dropped = 0;
	int locked = 0, gerr, rc = 0;

	if (p->apply && (locked = lock_ref(m, name, lock, sizeof(lock))) < 0)
		return locked;
	if ((gerr = git_reflog_read(&log, kiln_manifest_repo(m), name)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "reading a reflog");
		goto cleanup;
	}
	for (size_t i = git_reflog_entrycount(log); i-- > 0 && rc == 0;) {
		const git_reflog_entry *e = git_reflog_entry_byindex(log, i);

		if (kiln_compact_doomed(p, NULL, git_reflog_entry_id_new(e)) ||
		    kiln_compact_doomed(p, NULL, git_reflog_entry_id_old(e))) {
			dropped++;
			if (p->apply && (gerr = git_reflog_drop(log, i, 0)) < 0)
				rc = kiln_manifest_git_fail(m, gerr, "dropping a reflog entry");
		} else if (!git_oid_is_zero(git_reflog_entry_id_new(e))) {
			rc = keep_root(p, git_reflog_entry_id_new(e));
		}
	}
	if (rc == 0 && p->apply && dropped && (gerr = git_reflog_write(log)) < 0)
		rc = kiln_manifest_git_fail(m, gerr, "rewriting a reflog");
	if (rc == 0)
		p->log_entries += dropped;
cleanup:
	git_reflog_free(log);
	if (locked > 0)
		unlink(lock);
	return rc;
}

/* FETCH_HEAD and ORIG_HEAD: one that names (a 40-hex word) an object the
 * purge removes is counted and, with apply, removed. */
static int plan_head_files(kiln_manifest *m, purge_plan *p)
{
	static const char *const names[] = {"FETCH_HEAD", "ORIG_HEAD"};
	kiln_buf text = KILN_BUF_INIT(0);
	char path[4096 + 16];
	int rc = 0;

	for (size_t f = 0; f < sizeof(names) / sizeof(names[0]) && rc == 0; f++) {
		bool names_one = false;

		snprintf(path, sizeof(path), "%s%s", git_repository_path(kiln_manifest_repo(m)), names[f]);
		if ((rc = kiln_git_read_file(&text, path)) == KILN_ENOTFOUND) {
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
		for (size_t i = 0; i + GIT_OID_HEXSZ <= text.len && !names_one; i++) {
			git_oid id;

			if ((i > 0 && isxdigit((unsigned char)text.ptr[i - 1])) ||
			    hex_run(text.ptr + i, text.len - i) != GIT_OID_HEXSZ)
				continue;
			names_one = git_oid_fromstrn(&id, text.ptr + i, GIT_OID_HEXSZ) == 0 &&
			            kiln_compact_doomed(p, NULL, &id);
		}
		if (!names_one)
			continue;
		p->head_files++;
		if (p->apply && unlink(path) < 0 && errno != ENOENT)
			rc = kiln_error_set(KILN_EIO, "manifest %s: %s: %s", kiln_manifest_path(m), path,
			                    strerror(errno));
	}
	kiln_buf_free(&text);
	return rc;
}

/* Objects of p->superseded the repository holds now and the plan removes,
 * into *out. Asked of a handle of its own: an open one keeps serving
 * removed packs (libgit2 keeps them mapped) and cached objects. */
static int count_present(kiln_manifest *m, const purge_plan *p, uint64_t *out)
{
	kiln_manifest *now = NULL;
	git_odb *odb = NULL;
	int gerr, rc;

	*out = 0;
	if ((rc = kiln_manifest_open(&now, kiln_manifest_path(m))) < 0)
		return rc;
	if ((gerr = git_repository_odb(&odb, kiln_manifest_repo(now))) < 0) {
		rc = kiln_manifest_git_fail(now, gerr, "opening the object database");
		goto cleanup;
	}
	for (size_t i = 0; i < p->superseded.cap; i++)
		if (p->superseded.used[i] && kiln_compact_doomed(p, NULL, &p->superseded.ids[i]) &&
		    git_odb_exists(odb, &p->superseded.ids[i]))
			++*out;
cleanup:
	git_odb_free(odb);
	kiln_manifest_close(now);
	return rc;
}

/* What superseded[0..n) reach, what stays reachable, and (with p->apply)
 * the reflog entries and head files that name what goes, dropped. */
static int plan_purge(kiln_manifest *m, const char *const *ids, size_t n, purge_plan *p)
{
	reach r = {.set = &p->superseded};
	int rc;

	for (size_t i = 0; i < n; i++) {
		git_oid id;

		if (!ids[i] || strlen(ids[i]) != GIT_OID_HEXSZ ||
		    hex_run(ids[i], GIT_OID_HEXSZ) != GIT_OID_HEXSZ || git_oid_fromstr(&id, ids[i]) < 0) {
			rc = kiln_error_set(KILN_EINVALID,
			                    "manifest %s: superseded id %zu is not 40 hexadecimal digits",
			                    kiln_manifest_path(m), i);
			goto cleanup;
		}
		if ((rc = add_root(m, &r, &id)) < 0)
			goto cleanup;
	}
	if ((rc = finish_walk(m, &r)) < 0)
		goto cleanup;
	/* what the refs reach; then the reflogs, less what names the rest */
	r.set = &p->live;
	if ((rc = each_ref(m, add_ref_target, &r)) < 0 || (rc = finish_walk(m, &r)) < 0 ||
	    (rc = each_reflog(m, plan_reflog, p)) < 0 || (rc = plan_head_files(m, p)) < 0)
		goto cleanup;
	for (size_t i = 0; i < p->n_kept; i++)
		if ((rc = add_root(m, &r, &p->kept[i])) < 0)
			goto cleanup;
	if ((rc = finish_walk(m, &r)) < 0)
		goto cleanup;
	rc = count_present(m, p, &p->present);
cleanup:
	free(r.stack);
	return rc;
}

static void plan_free(purge_plan *p)
{
	kiln_oidset_free(&p->superseded);
	kiln_oidset_free(&p->live);
	free(p->kept);
}

/* ---- the lock and what the last compaction left --------------------------- */

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

/* The compaction itself, the lock held; with a plan, also the purge (the
 * reflogs already rewritten by plan_purge). */
static int compact_locked(kiln_manifest *m, int64_t grace_s, const purge_plan *plan, kiln_compact_stats *out)
{
	git_repository *repo = kiln_manifest_repo(m);
	reach r = {0};
	git_odb *packed = NULL;
	char objects[4096], name[GIT_OID_HEXSZ + 1] = "", idx[4096 + 64];
	/* taken before anything is read: whatever is written from now on is young */
	time_t cutoff = time(NULL) - (time_t)grace_s;
	int gerr, rc;

	memset(out, 0, sizeof(*out));
	snprintf(objects, sizeof(objects), "%sobjects", git_repository_path(repo));
	if ((gerr = git_packbuilder_new(&r.pb, repo)) < 0 || (gerr = git_revwalk_new(&r.walk, repo)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "packing");
		goto cleanup;
	}
	if ((rc = each_ref(m, add_ref_target, &r)) < 0 || (rc = each_reflog(m, add_reflog, &r)) < 0 ||
	    (rc = finish_walk(m, &r)) < 0)
		goto cleanup;
	out->packed = git_packbuilder_object_count(r.pb);
	if (out->packed > 0) {
		if ((gerr = git_packbuilder_write(r.pb, NULL, 0, NULL, NULL)) < 0) {
			rc = kiln_manifest_git_fail(m, gerr, "writing the pack");
			goto cleanup;
		}
		snprintf(name, sizeof(name), "%s", git_packbuilder_name(r.pb));
		/* the new pack alone, to ask what it holds */
		snprintf(idx, sizeof(idx), "%s/pack/pack-%s.idx", objects, name);
		gerr = kiln_compact_open_pack(&packed, idx);
	} else if (plan) {
		/* no refs: nothing is known to be reachable, so nothing but what the
		 * purge removes goes */
		cutoff = 0;
		gerr = git_odb_new(&packed);
	} else {
		rc = 0; /* no refs: nothing is known to be reachable, so nothing is removed */
		goto cleanup;
	}
	if (gerr < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "reading the new pack");
		goto cleanup;
	}
	if ((rc = kiln_compact_prune_packs(m, objects, name, packed, plan, cutoff, out)) < 0 ||
	    (rc = kiln_compact_prune_loose(m, objects, packed, plan, cutoff, out)) < 0)
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
	git_revwalk_free(r.walk);
	git_packbuilder_free(r.pb);
	return rc;
}

int kiln_manifest_compact(kiln_manifest *m, int64_t grace_s, kiln_compact_stats *out)
{
	int fd, rc;

	memset(out, 0, sizeof(*out));
	if ((rc = kiln_manifest_lock(m, KILN_COMPACT_LOCK, true, true, &fd)) < 0)
		return rc;
	rc = compact_locked(m, grace_s, NULL, out);
	if (rc == 0)
		write_kept(fd, out->loose_kept);
	kiln_manifest_unlock(fd);
	return rc;
}

int kiln_manifest_purge(kiln_manifest *m, const char *const *superseded, size_t n, int64_t grace_s,
                        kiln_compact_stats *out)
{
	purge_plan plan = {.apply = true};
	kiln_manifest *own = NULL;
	uint64_t left = 0;
	int fd = -1, rc;

	memset(out, 0, sizeof(*out));
	if (n == 0)
		return kiln_manifest_compact(m, grace_s, out);
	/* a handle of its own: m's caches may hold objects a purge removed */
	if ((rc = kiln_manifest_open(&own, kiln_manifest_path(m))) < 0 ||
	    (rc = kiln_manifest_lock(own, KILN_COMPACT_LOCK, true, true, &fd)) < 0)
		goto cleanup;
	/* reflog entries first: a kill from here on leaves no entry naming a
	 * missing object, and the new pack is written before anything goes */
	if ((rc = plan_purge(own, superseded, n, &plan)) < 0 ||
	    (rc = compact_locked(own, grace_s, &plan, out)) < 0 ||
	    (rc = count_present(own, &plan, &left)) < 0)
		goto cleanup;
	out->purged = plan.present > left ? plan.present - left : 0;
	write_kept(fd, out->loose_kept);
cleanup:
	kiln_manifest_unlock(fd);
	plan_free(&plan);
	kiln_manifest_close(own);
	return rc;
}

int kiln_manifest_purge_count(kiln_manifest *m, const char *const *superseded, size_t n, uint64_t *out)
{
	purge_plan plan = {.apply = false};
	kiln_manifest *own = NULL;
	int rc;

	*out = 0;
	if (n == 0)
		return 0;
	if ((rc = kiln_manifest_open(&own, kiln_manifest_path(m))) == 0 &&
	    (rc = plan_purge(own, superseded, n, &plan)) == 0)
		*out = plan.present;
	plan_free(&plan);
	kiln_manifest_close(own);
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
	if ((rc = kiln_manifest_lock(m, KILN_COMPACT_LOCK, true, false, &fd)) <= 0)
		return rc; /* another process is compacting */
	/* what the last one had to keep does not count: it cannot go before its grace */
	uint64_t kept = read_kept(fd);
	if (loose - (kept < loose ? kept : loose) < threshold) {
		rc = 0;
		goto cleanup;
	}
	if ((rc = compact_locked(m, grace_s, NULL, out)) < 0)
		goto cleanup;
	write_kept(fd, out->loose_kept);
	*out_ran = true;
	*out_loose = loose > out->loose_removed ? loose - out->loose_removed : 0;
cleanup:
	kiln_manifest_unlock(fd);
	return rc;
}
