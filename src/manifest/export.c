/* Writing a version's objects as loose objects (see export.h): a walk over
 * the object graph from the tag or commit, each object read from the
 * repository's object database and written through a libgit2 loose backend
 * rooted at the destination folder, so the files are git's own format. */
#include "manifest/export.h"

#include <errno.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/array.h"
#include "core/error.h"
#include "manifest/internal.h"

/* ---- the objects visited: an oid set (open addressing, linear probing) ---- */

typedef struct oid_set {
	git_oid *v;
	bool *used;
	size_t n, cap; /* cap: 0 or a power of two */
} oid_set;

static size_t oid_slot(const git_oid *v, const bool *used, size_t cap, const git_oid *id)
{
	size_t i;

	memcpy(&i, id->id, sizeof(i)); /* an object id is already uniformly spread */
	i &= cap - 1;
	while (used[i] && git_oid_cmp(&v[i], id) != 0)
		i = (i + 1) & (cap - 1);
	return i;
}

/* 1 when id was new (now added), 0 when it was there, < 0 out of memory. */
static int oid_set_add(oid_set *s, const git_oid *id)
{
	size_t i;

	if ((s->n + 1) * 2 > s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 1024;
		git_oid *nv = calloc(ncap, sizeof(*nv));
		bool *nused = calloc(ncap, sizeof(*nused));

		if (!nv || !nused) {
			free(nv);
			free(nused);
			return kiln_error_oom(NULL);
		}
		for (size_t j = 0; j < s->cap; j++) {
			if (s->used[j]) {
				size_t k = oid_slot(nv, nused, ncap, &s->v[j]);

				nv[k] = s->v[j];
				nused[k] = true;
			}
		}
		free(s->v);
		free(s->used);
		s->v = nv;
		s->used = nused;
		s->cap = ncap;
	}
	i = oid_slot(s->v, s->used, s->cap, id);
	if (s->used[i])
		return 0;
	s->v[i] = *id;
	s->used[i] = true;
	s->n++;
	return 1;
}

/* ---- the walk --------------------------------------------------------------- */

typedef struct walk {
	kiln_manifest *m;
	git_odb *from, *to;
	const char *dir;
	const kiln_export_sink *sink;
	oid_set seen;
	git_oid *stack;
	size_t depth, cap;
} walk;

static int push_oid(walk *w, const git_oid *id)
{
	int added = oid_set_add(&w->seen, id);

	if (added <= 0)
		return added;
	if (KILN_ARRAY_GROW(w->stack, w->cap, w->depth, NULL) < 0)
		return KILN_ENOMEM;
	w->stack[w->depth++] = *id;
	return 0;
}

/* The objects obj names: a tag's target, a commit's tree and parents, a
 * tree's entries (gitlinks aside: they name no object of this repository). */
static int push_children(walk *w, const git_oid *id, git_object_t type)
{
	git_repository *repo = kiln_manifest_repo(w->m);
	git_object *obj = NULL;
	int gerr, rc = 0;

	if (type == GIT_OBJECT_BLOB)
		return 0;
	if ((gerr = git_object_lookup(&obj, repo, id, type)) < 0)
		return kiln_manifest_git_fail(w->m, gerr, "reading an object to export");
	switch (type) {
	case GIT_OBJECT_TAG:
		rc = push_oid(w, git_tag_target_id((git_tag *)obj));
		break;
	case GIT_OBJECT_COMMIT: {
		git_commit *c = (git_commit *)obj;

		rc = push_oid(w, git_commit_tree_id(c));
		for (unsigned i = 0; rc == 0 && i < git_commit_parentcount(c); i++)
			rc = push_oid(w, git_commit_parent_id(c, i));
		break;
	}
	case GIT_OBJECT_TREE:
		for (size_t i = 0, n = git_tree_entrycount((git_tree *)obj); rc == 0 && i < n; i++) {
			const git_tree_entry *e = git_tree_entry_byindex((git_tree *)obj, i);

			if (git_tree_entry_type(e) != GIT_OBJECT_COMMIT)
				rc = push_oid(w, git_tree_entry_id(e));
		}
		break;
	default:
		break;
	}
	git_object_free(obj);
	return rc;
}

static int export_one(walk *w, const git_oid *id)
{
	char hex[GIT_OID_HEXSZ + 1], name[GIT_OID_HEXSZ + 2], path[4096];
	git_odb_object *obj = NULL;
	git_oid written;
	git_object_t type;
	struct stat st;
	int gerr, rc;

	git_oid_tostr(hex, sizeof(hex), id);
	if ((gerr = git_odb_read(&obj, w->from, id)) < 0)
		return kiln_manifest_git_fail(w->m, gerr, hex);
	type = git_odb_object_type(obj);
	if (!w->sink->have || !w->sink->have(w->sink->ctx, hex)) {
		gerr =
		    git_odb_write(&written, w->to, git_odb_object_data(obj), git_odb_object_size(obj), type);
		if (gerr < 0) {
			git_odb_object_free(obj);
			return kiln_error_set(KILN_EIO, "%s: writing object %s: %s", w->dir, hex,
			                      kiln_manifest_git_message());
		}
		snprintf(name, sizeof(name), "%.2s/%s", hex, hex + 2);
		snprintf(path, sizeof(path), "%s/%s", w->dir, name);
		if (stat(path, &st) < 0) {
			git_odb_object_free(obj);
			return kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
		}
		if (w->sink->wrote && (rc = w->sink->wrote(w->sink->ctx, name, (uint64_t)st.st_size)) != 0) {
			git_odb_object_free(obj);
			return rc;
		}
	}
	git_odb_object_free(obj);
	return push_children(w, id, type);
}

int kiln_manifest_export(kiln_manifest *m, const kiln_version *v, const char *objects_dir,
                         const kiln_export_sink *sink, uint64_t *out_objects)
{
	walk w = {.m = m, .dir = objects_dir, .sink = sink};
	git_odb_backend *loose = NULL;
	git_oid start;
	int gerr, rc = 0;

	if (out_objects)
		*out_objects = 0;
	if (git_oid_fromstr(&start, v->tag[0] ? v->tag : v->commit) < 0)
		return kiln_error_set(KILN_EINVALID, "manifest %s: '%s' is not an object id",
		                      kiln_manifest_path(m), v->tag[0] ? v->tag : v->commit);
	if (mkdir(objects_dir, 0755) < 0 && errno != EEXIST)
		return kiln_error_set(KILN_EIO, "%s: %s", objects_dir, strerror(errno));
	if ((gerr = git_repository_odb(&w.from, kiln_manifest_repo(m))) < 0)
		return kiln_manifest_git_fail(m, gerr, "opening the object database");
	if ((gerr = git_odb_new(&w.to)) < 0 ||
	    (gerr = git_odb_backend_loose(&loose, objects_dir, -1, 0, 0, 0)) < 0 ||
	    (gerr = git_odb_add_backend(w.to, loose, 1)) < 0) {
		rc = kiln_error_set(KILN_EIO, "%s: %s", objects_dir, kiln_manifest_git_message());
		goto cleanup;
	}
	if ((rc = push_oid(&w, &start)) < 0)
		goto cleanup;
	while (rc == 0 && w.depth > 0) {
		git_oid id = w.stack[--w.depth];

		rc = export_one(&w, &id);
	}
	if (out_objects)
		*out_objects = w.seen.n;
cleanup:
	git_odb_free(w.to);
	git_odb_free(w.from);
	free(w.seen.v);
	free(w.seen.used);
	free(w.stack);
	return rc;
}
