/* The dedup/ folder of a commit tree (docs/FORMATS.md): written by a
 * snapshot commit of a pipeline with `dedup:` (one segment of the keys the
 * snapshot commits, the segments older than its window dropped) and read
 * back into an index at run start. Owns nothing beyond one call. */
#include <git2.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "manifest/dedup.h"
#include "manifest/format.h"
#include "manifest/internal.h"

/* The dedup/ tree of tree (*out NULL when there is none). */
static int dedup_tree(kiln_manifest *m, git_tree *tree, const char *ref, git_tree **out)
{
	const git_tree_entry *e = tree ? git_tree_entry_byname(tree, KILN_DEDUP_DIR) : NULL;
	int gerr;

	*out = NULL;
	if (!e)
		return 0;
	if (git_tree_entry_type(e) != GIT_OBJECT_TREE)
		return kiln_error_set(KILN_EINVALID, "manifest %s: %s:%s is not a folder",
		                      kiln_manifest_path(m), ref, KILN_DEDUP_DIR);
	gerr = git_tree_lookup(out, kiln_manifest_repo(m), git_tree_entry_id(e));
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, KILN_DEDUP_DIR) : 0;
}

static int commit_dedup_tree(kiln_manifest *m, const git_oid *commit_id, git_tree **out);

/* The dedup.key text a dataset.json text records (*out malloc'd; NULL when
 * it records none). */
static int text_dedup_key(const char *where, const char *text, size_t len, char **out)
{
	kiln_json_scanner *scanner = kiln_json_scanner_new(NULL);
	kiln_mfmt_dataset d;
	int rc;

	*out = NULL;
	if (!scanner)
		return kiln_error_oom("manifest");
	if ((rc = kiln_mfmt_dataset_parse(scanner, where, text, len, &d)) == 0) {
		*out = (char *)d.dedup_key;
		d.dedup_key = NULL;
		kiln_mfmt_dataset_free(&d);
	}
	kiln_json_scanner_free(scanner);
	return rc;
}

/* The dedup.key text of tree's dataset.json (*out NULL without a tree, a
 * dataset.json or a dedup member: a branch written before kiln recorded
 * it keeps its dedup/ as this key's). */
static int tree_dedup_key(kiln_manifest *m, git_tree *tree, const char *ref, char **out)
{
	const git_tree_entry *e = tree ? git_tree_entry_byname(tree, "dataset.json") : NULL;
	char where[KILN_MANIFEST_WHERE_CAP];
	git_blob *blob = NULL;
	int rc, gerr;

	*out = NULL;
	if (!e || git_tree_entry_type(e) != GIT_OBJECT_BLOB)
		return 0;
	kiln_manifest_where(where, ref, "dataset.json");
	if ((gerr = git_blob_lookup(&blob, kiln_manifest_repo(m), git_tree_entry_id(e))) < 0)
		return kiln_manifest_git_fail(m, gerr, where);
	rc = text_dedup_key(where, git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob), out);
	git_blob_free(blob);
	return rc;
}

/* Whether the commit being built starts a new index: the tip's dataset.json
 * records another dedup.key than the snapshot's (or the snapshot ends
 * dedup), so the tip's segments hash other fields. */
static int starts_over(kiln_manifest *m, git_tree *tip_tree, const char *ref, const kiln_snapshot *snap,
                       bool *out)
{
	char *before = NULL, *now = NULL;
	int rc = 0;

	*out = snap->dedup_end;
	if (*out || (rc = tree_dedup_key(m, tip_tree, ref, &before)) < 0 || !before)
		goto cleanup;
	if (snap->dataset_json &&
	    (rc = text_dedup_key("dataset.json", snap->dataset_json, strlen(snap->dataset_json), &now)) < 0)
		goto cleanup;
	*out = !now || strcmp(before, now) != 0;
cleanup:
	free(before);
	free(now);
	return rc;
}

/* Whether two sorted key lists share a key. */
static bool overlap(const unsigned char (*a)[KILN_DEDUP_HASH_LEN], size_t na,
                    const unsigned char (*b)[KILN_DEDUP_HASH_LEN], size_t nb)
{
	size_t i = 0, j = 0;

	while (i < na && j < nb) {
		int c = memcmp(a[i], b[j], KILN_DEDUP_HASH_LEN);

		if (c == 0)
			return true;
		if (c < 0)
			i++;
		else
			j++;
	}
	return false;
}

/* The tip moved past the commit the writer's index came from (noted in
 * *snap->dedup_moved): the segments the tip holds that base does not
 * (another writer's) must share no key with the snapshot's (KILN_EFENCED).
 * A base that cannot be read (gone after a compaction) counts as holding
 * nothing. */
static int check_moved(kiln_manifest *m, const char *ref, const git_oid *tip_id, git_tree *tip_dir,
                       const kiln_snapshot *snap)
{
	git_oid base_id;
	git_tree *base = NULL;
	int rc = 0;

	if (!snap->dedup_base)
		return 0;
	if (snap->dedup_base[0]) {
		if (git_oid_fromstr(&base_id, snap->dedup_base) < 0)
			return kiln_error_set(KILN_EINVALID, "manifest: dedup base %.40s is not a commit id",
			                      snap->dedup_base);
		if (git_oid_equal(&base_id, tip_id))
			return 0;
	}
	if (snap->dedup_moved)
		*snap->dedup_moved = true;
	if (!snap->dedup_count || !tip_dir)
		return 0;
	if (snap->dedup_base[0] && commit_dedup_tree(m, &base_id, &base) < 0)
		base = NULL;
	for (size_t i = 0; rc == 0 && i < git_tree_entrycount(tip_dir); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(tip_dir, i);
		const unsigned char(*keys)[KILN_DEDUP_HASH_LEN];
		char where[KILN_MANIFEST_WHERE_CAP + 64];
		git_blob *blob = NULL;
		size_t count;
		int64_t ms;

		if ((base && git_tree_entry_byname(base, git_tree_entry_name(e))) ||
		    git_tree_entry_type(e) != GIT_OBJECT_BLOB)
			continue;
		snprintf(where, sizeof(where), "manifest: %s:%s/%s", ref, KILN_DEDUP_DIR,
		         git_tree_entry_name(e));
		if (git_blob_lookup(&blob, kiln_manifest_repo(m), git_tree_entry_id(e)) < 0) {
			rc = kiln_manifest_git_fail(m, -1, where);
			break;
		}
		rc = kiln_dedup_segment_decode(git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob),
		                               where, &ms, &keys, &count);
		if (rc == 0 && ms >= snap->dedup_ms - snap->dedup_window_ms &&
		    overlap(keys, count, snap->dedup_keys, snap->dedup_count))
			rc = kiln_error_set(
			    KILN_EFENCED,
			    "manifest: %s: another writer committed some of these dedup keys first "
			    "(%s)",
			    ref, git_tree_entry_name(e));
		git_blob_free(blob);
	}
	git_tree_free(base);
	return rc;
}

int kiln_manifest_write_dedup(kiln_manifest *m, const char *ref, const git_oid *tip_id, git_tree *tip_tree,
                              const kiln_snapshot *snap, git_treebuilder *root)
{
	git_tree *old = NULL;
	git_treebuilder *bld = NULL;
	kiln_buf seg = KILN_BUF_INIT(0);
	char where_hex[41];
	int64_t cutoff = snap->dedup_ms - snap->dedup_window_ms;
	bool fresh;
	git_oid id;
	int rc, gerr;

	if (!snap->dedup)
		return 0;
	if ((rc = starts_over(m, tip_tree, ref, snap, &fresh)) < 0)
		return rc;
	if (!fresh && (rc = dedup_tree(m, tip_tree, ref, &old)) < 0)
		return rc;
	if (tip_id && !fresh && (rc = check_moved(m, ref, tip_id, old, snap)) < 0)
		goto cleanup;
	if (tip_id && fresh && snap->dedup_moved && snap->dedup_base &&
	    strcmp(snap->dedup_base, git_oid_tostr(where_hex, sizeof(where_hex), tip_id)) != 0)
		*snap->dedup_moved = true;
	if ((gerr = git_treebuilder_new(&bld, kiln_manifest_repo(m), old)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, KILN_DEDUP_DIR);
		goto cleanup;
	}
	/* the window: segments committed before cutoff go (an entry that is
	 * not a segment name is kept: it is not ours to judge) */
	for (size_t i = old ? git_tree_entrycount(old) : 0; i-- > 0;) {
		const char *name = git_tree_entry_name(git_tree_entry_byindex(old, i));
		int64_t ms = kiln_dedup_segment_name_ms(name);

		if (ms > 0 && ms < cutoff && (gerr = git_treebuilder_remove(bld, name)) < 0) {
			rc = kiln_manifest_git_fail(m, gerr, KILN_DEDUP_DIR);
			goto cleanup;
		}
	}
	if (snap->dedup_count) {
		char name[64];

		if ((rc = kiln_dedup_segment_encode(&seg, snap->dedup_keys, snap->dedup_count,
		                                    snap->dedup_ms)) < 0)
			goto cleanup;
		if ((gerr = git_blob_create_from_buffer(&id, kiln_manifest_repo(m), seg.ptr, seg.len)) < 0) {
			rc = kiln_manifest_git_fail(m, gerr, KILN_DEDUP_DIR);
			goto cleanup;
		}
		kiln_dedup_segment_name(name, sizeof(name), snap->dedup_ms, id.id);
		if ((gerr = git_treebuilder_insert(NULL, bld, name, &id, GIT_FILEMODE_BLOB)) < 0) {
			rc = kiln_manifest_git_fail(m, gerr, KILN_DEDUP_DIR);
			goto cleanup;
		}
	}
	if (git_treebuilder_entrycount(bld) == 0) {
		gerr = git_treebuilder_get(root, KILN_DEDUP_DIR)
		           ? git_treebuilder_remove(root, KILN_DEDUP_DIR)
		           : 0;
	} else if ((gerr = git_treebuilder_write(&id, bld)) == 0) {
		gerr = git_treebuilder_insert(NULL, root, KILN_DEDUP_DIR, &id, GIT_FILEMODE_TREE);
	}
	rc = gerr < 0 ? kiln_manifest_git_fail(m, gerr, KILN_DEDUP_DIR) : 0;
cleanup:
	kiln_buf_free(&seg);
	git_treebuilder_free(bld);
	git_tree_free(old);
	return rc;
}

/* Adds one segment's keys (entry e of dedup/) to the index. */
static int load_segment(kiln_manifest *m, const char *ref, const git_tree_entry *e, int64_t name_ms,
                        kiln_dedup *dedup)
{
	const char *name = git_tree_entry_name(e);
	char where[KILN_MANIFEST_WHERE_CAP + 64];
	const unsigned char(*keys)[KILN_DEDUP_HASH_LEN];
	git_blob *blob = NULL;
	size_t count;
	int64_t ms;
	int rc, gerr;

	snprintf(where, sizeof(where), "manifest: %s:%s/%s", ref, KILN_DEDUP_DIR, name);
	if (git_tree_entry_type(e) != GIT_OBJECT_BLOB)
		return kiln_error_set(KILN_EINVALID, "%s: not a file", where);
	if ((gerr = git_blob_lookup(&blob, kiln_manifest_repo(m), git_tree_entry_id(e))) < 0)
		return kiln_manifest_git_fail(m, gerr, where);
	rc = kiln_dedup_segment_decode(git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob), where, &ms,
	                               &keys, &count);
	if (rc == 0 && ms != name_ms)
		rc = kiln_error_set(KILN_EINVALID, "%s: holds commit time %" PRId64 ", its name %" PRId64,
		                    where, ms, name_ms);
	for (size_t i = 0; rc == 0 && i < count; i++)
		rc = kiln_dedup_add(dedup, keys[i], ms);
	git_blob_free(blob);
	return rc;
}

int kiln_manifest_dedup_load(kiln_manifest *m, const char *dataset, const char *branch, int64_t now_ms,
                             const char *key, kiln_dedup *dedup, char out_tip[41])
{
	char ref[KILN_MANIFEST_REF_CAP], *tip_key = NULL;
	git_tree *tip = NULL, *dir = NULL;
	git_oid tip_id;
	bool exists;
	int rc;

	kiln_dedup_clear(dedup);
	out_tip[0] = '\0';
	if ((rc = kiln_manifest_branch_ref(ref, sizeof(ref), dataset, branch)) < 0 ||
	    (rc = kiln_manifest_read_tip(m, ref, &tip_id, &exists, &tip)) < 0 ||
	    (rc = tree_dedup_key(m, tip, ref, &tip_key)) < 0)
		goto cleanup;
	if (exists)
		git_oid_tostr(out_tip, 41, &tip_id);
	if (tip_key && strcmp(tip_key, key) != 0)
		goto cleanup; /* another key's index: this one starts empty */
	if ((rc = dedup_tree(m, tip, ref, &dir)) < 0)
		goto cleanup;
	for (size_t i = 0; dir && i < git_tree_entrycount(dir); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(dir, i);
		int64_t ms = kiln_dedup_segment_name_ms(git_tree_entry_name(e));

		if (ms < 0) {
			rc = kiln_error_set(KILN_EINVALID, "manifest: %s:%s/%s: not a dedup segment name",
			                    ref, KILN_DEDUP_DIR, git_tree_entry_name(e));
			goto cleanup;
		}
		if (ms < now_ms - kiln_dedup_window_ms(dedup))
			continue;
		if ((rc = load_segment(m, ref, e, ms, dedup)) < 0)
			goto cleanup;
	}
cleanup:
	free(tip_key);
	git_tree_free(dir);
	git_tree_free(tip);
	if (rc < 0) {
		kiln_dedup_clear(dedup);
		out_tip[0] = '\0';
	}
	return rc;
}

/* The dedup/ tree of a commit (*out NULL when it has none, or for a NULL
 * commit: the parent of a first commit). */
static int commit_dedup_tree(kiln_manifest *m, const git_oid *commit_id, git_tree **out)
{
	git_commit *c = NULL;
	git_tree *tree = NULL;
	char hex[41];
	int gerr, rc;

	*out = NULL;
	if (!commit_id)
		return 0;
	if ((gerr = git_commit_lookup(&c, kiln_manifest_repo(m), commit_id)) < 0 ||
	    (gerr = git_commit_tree(&tree, c)) < 0) {
		git_commit_free(c);
		return kiln_manifest_git_fail(m, gerr, "reading a commit");
	}
	rc = dedup_tree(m, tree, git_oid_tostr(hex, sizeof(hex), commit_id), out);
	git_tree_free(tree);
	git_commit_free(c);
	return rc;
}

int kiln_manifest_dedup_added(kiln_manifest *m, const git_oid *commit, const git_oid *parent,
                              git_blob **out_blob, kiln_snapshot *snap)
{
	git_tree *now = NULL, *before = NULL;
	const git_tree_entry *added = NULL;
	char where[KILN_MANIFEST_WHERE_CAP + 64], hex[41];
	int rc, gerr;

	*out_blob = NULL;
	if ((rc = commit_dedup_tree(m, commit, &now)) < 0 || !now ||
	    (rc = commit_dedup_tree(m, parent, &before)) < 0)
		goto cleanup;
	for (size_t i = 0; i < git_tree_entrycount(now); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(now, i);

		if (before && git_tree_entry_byname(before, git_tree_entry_name(e)))
			continue;
		snprintf(where, sizeof(where), "manifest %s: %s:%s/%s", kiln_manifest_path(m),
		         git_oid_tostr(hex, sizeof(hex), commit), KILN_DEDUP_DIR, git_tree_entry_name(e));
		if (added || git_tree_entry_type(e) != GIT_OBJECT_BLOB ||
		    kiln_dedup_segment_name_ms(git_tree_entry_name(e)) < 0) {
			rc = kiln_error_set(KILN_EINVALID,
			                    "%s: a second new segment, or not a segment: not a kiln "
			                    "snapshot commit",
			                    where);
			goto cleanup;
		}
		added = e;
	}
	if (!added)
		goto cleanup;
	if ((gerr = git_blob_lookup(out_blob, kiln_manifest_repo(m), git_tree_entry_id(added))) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, where);
		goto cleanup;
	}
	if ((rc = kiln_dedup_segment_decode(git_blob_rawcontent(*out_blob),
	                                    (size_t)git_blob_rawsize(*out_blob), where, &snap->dedup_ms,
	                                    &snap->dedup_keys, &snap->dedup_count)) < 0)
		goto cleanup;
	snap->dedup = true;
	snap->dedup_window_ms = snap->dedup_ms; /* nothing pruned here: the next snapshot prunes */
cleanup:
	git_tree_free(now);
	git_tree_free(before);
	return rc;
}
