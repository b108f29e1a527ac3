/* Rewriting a dataset's history without some shards (rewrite.h). Commits
 * are visited parents first; a commit, a splits/<split> tree and a shard
 * list blob are each rewritten once, whatever number of versions share it
 * (memos keyed by object id), so the cost follows the distinct objects,
 * not the versions. */
#include "manifest/rewrite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"
#include "manifest/format.h"
#include "manifest/internal.h"
#include "manifest/rewrite_internal.h"
#include "manifest/sshsig.h"
#include "quality/profile.h"
#include "shard/filter.h"

#define SIG_BEGIN "-----BEGIN SSH SIGNATURE-----"

/* ---- the dataset's refs and commits ----------------------------------- */

typedef struct ref_list {
	char **names;
	size_t count, cap;
} ref_list;

static void ref_list_free(ref_list *l)
{
	for (size_t i = 0; i < l->count; i++)
		free(l->names[i]);
	free(l->names);
	memset(l, 0, sizeof(*l));
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* refs/heads/<dataset>/... and refs/tags/<dataset>/..., sorted. */
static int dataset_refs(kiln_manifest *m, const char *dataset, ref_list *out)
{
	static const char *const kinds[] = {"refs/heads/", "refs/tags/"};
	git_reference_iterator *it = NULL;
	git_reference *ref = NULL;
	char glob[KILN_MFMT_NAME_MAX + 32];
	int gerr, rc = 0;

	for (size_t k = 0; k < 2 && rc == 0; k++) {
		snprintf(glob, sizeof(glob), "%s%s/*", kinds[k], dataset);
		if ((gerr = git_reference_iterator_glob_new(&it, kiln_manifest_repo(m), glob)) < 0)
			return kiln_manifest_git_fail(m, gerr, "listing refs");
		while ((gerr = git_reference_next(&ref, it)) == 0) {
			const char *name = git_reference_name(ref);

			if (strchr(name + strlen(kinds[k]) + strlen(dataset) + 1, '/') == NULL) {
				if ((rc = KILN_ARRAY_GROW(out->names, out->cap, out->count, "rewrite")) < 0)
					break;
				if (!(out->names[out->count] = strdup(name))) {
					rc = kiln_error_oom("rewrite");
					break;
				}
				out->count++;
			}
			git_reference_free(ref);
			ref = NULL;
		}
		git_reference_free(ref);
		ref = NULL;
		if (rc == 0 && gerr != GIT_ITEROVER)
			rc = kiln_manifest_git_fail(m, gerr, "listing refs");
		git_reference_iterator_free(it);
		it = NULL;
	}
	if (rc == 0 && out->count > 1)
		qsort(out->names, out->count, sizeof(*out->names), name_cmp);
	return rc;
}

/* A walk over every commit of the refs, parents before children. */
/* A walk from every ref of the list; out_targets (may be NULL, else one
 * slot per ref) receives the object each ref named when the walk began. */
static int walk_new(kiln_manifest *m, const ref_list *refs, git_revwalk **out, git_oid *out_targets)
{
	git_revwalk *walk = NULL;
	int gerr;

	if ((gerr = git_revwalk_new(&walk, kiln_manifest_repo(m))) < 0)
		return kiln_manifest_git_fail(m, gerr, "walking the history");
	git_revwalk_sorting(walk, GIT_SORT_TOPOLOGICAL | GIT_SORT_REVERSE);
	for (size_t i = 0; i < refs->count; i++) {
		git_object *peeled = NULL;
		git_reference *ref = NULL, *resolved = NULL;

		gerr = git_reference_lookup(&ref, kiln_manifest_repo(m), refs->names[i]);
		if (gerr == 0)
			gerr = git_reference_resolve(&resolved, ref);
		if (gerr == 0)
			gerr = git_reference_peel(&peeled, resolved, GIT_OBJECT_COMMIT);
		if (gerr == 0)
			gerr = git_revwalk_push(walk, git_object_id(peeled));
		if (gerr == 0 && out_targets)
			git_oid_cpy(&out_targets[i], git_reference_target(resolved));
		git_object_free(peeled);
		git_reference_free(resolved);
		git_reference_free(ref);
		if (gerr < 0) {
			git_revwalk_free(walk);
			return kiln_manifest_git_fail(m, gerr, refs->names[i]);
		}
	}
	*out = walk;
	return 0;
}

/* ---- scan --------------------------------------------------------------- */

typedef struct scan_state {
	kiln_manifest *m;
	kiln_json_scanner *scanner;
	oid_map seen_trees, seen_blobs;
	char **hashes; /* distinct shard hashes seen, unsorted; found by a sorted copy */
	oid_map seen_hashes;
	int (*shard_cb)(void *ctx, kiln_split split, const kiln_shard_entry *entry);
	int (*contract_cb)(void *ctx, const char *text, size_t len);
	void *ctx;
	kiln_buf strings;
	kiln_source_range *sources;
	size_t sources_cap;
} scan_state;

/* A shard hash as a map key: its first 20 bytes (a BLAKE2b prefix). */
static void hash_key(git_oid *out, const char *hex)
{
	git_oid_fromstrn(out, hex, 40);
}

/* The shard's filter in the commit's tree (filters/<hh>/<hash>.bloom), or
 * NULL when it has none. */
static git_blob *filter_blob(git_repository *repo, git_tree *root, const char *hash)
{
	git_tree_entry *te = NULL;
	git_blob *blob = NULL;
	char path[96];

	snprintf(path, sizeof(path), "%s/%.2s/%s%s", KILN_FILTER_DIR, hash, hash, KILN_FILTER_EXTENSION);
	if (git_tree_entry_bypath(&te, root, path) == 0 && git_tree_entry_type(te) == GIT_OBJECT_BLOB &&
	    git_blob_lookup(&blob, repo, git_tree_entry_id(te)) < 0)
		blob = NULL;
	git_tree_entry_free(te);
	return blob;
}

static int scan_blob(scan_state *s, git_tree *root, kiln_split split, const git_oid *id, const char *path)
{
	git_blob *blob = NULL;
	oid_slot *slot;
	int gerr, rc = 0;

	if (kiln_rewrite_map_get(&s->seen_blobs, id))
		return 0;
	if ((rc = kiln_rewrite_map_add(&s->seen_blobs, id, &slot)) < 0)
		return rc;
	if ((gerr = git_blob_lookup(&blob, kiln_manifest_repo(s->m), id)) < 0)
		return kiln_manifest_git_fail(s->m, gerr, path);
	for (const char *p = git_blob_rawcontent(blob), *end = p + git_blob_rawsize(blob);
	     p < end && rc == 0;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		kiln_shard_entry e;
		git_oid key;

		kiln_buf_reset(&s->strings);
		rc = kiln_mfmt_shard_line_parse(s->scanner, path, KILN_MFMT_LINE_FULL, p, len, &e,
		                                &s->strings, &s->sources, &s->sources_cap);
		if (rc == 0) {
			hash_key(&key, e.hash);
			if (!kiln_rewrite_map_get(&s->seen_hashes, &key)) {
				oid_slot *h;

				if ((rc = kiln_rewrite_map_add(&s->seen_hashes, &key, &h)) == 0 &&
				    s->shard_cb) {
					git_blob *filter =
					    filter_blob(kiln_manifest_repo(s->m), root, e.hash);

					if (filter) {
						e.filter = git_blob_rawcontent(filter);
						e.filter_len = (size_t)git_blob_rawsize(filter);
					}
					rc = s->shard_cb(s->ctx, split, &e);
					git_blob_free(filter);
				}
			}
		}
		p += len + (nl != NULL);
	}
	git_blob_free(blob);
	return rc;
}

static int scan_tree(scan_state *s, git_tree *root, const char *commit_hex)
{
	git_tree_entry *splits = NULL, *contract = NULL;
	git_tree *splits_tree = NULL;
	char path[96];
	int gerr, rc = 0;

	if (s->contract_cb && git_tree_entry_bypath(&contract, root, "contract.yaml") == 0 &&
	    git_tree_entry_type(contract) == GIT_OBJECT_BLOB &&
	    !kiln_rewrite_map_get(&s->seen_blobs, git_tree_entry_id(contract))) {
		git_blob *blob = NULL;
		oid_slot *slot;

		if ((rc = kiln_rewrite_map_add(&s->seen_blobs, git_tree_entry_id(contract), &slot)) < 0)
			goto cleanup;
		if ((gerr = git_blob_lookup(&blob, kiln_manifest_repo(s->m), git_tree_entry_id(contract))) <
		    0) {
			rc = kiln_manifest_git_fail(s->m, gerr, "contract.yaml");
			goto cleanup;
		}
		rc = s->contract_cb(s->ctx, git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob));
		git_blob_free(blob);
		if (rc != 0)
			goto cleanup;
	}
	if (git_tree_entry_bypath(&splits, root, "splits") < 0 ||
	    git_tree_entry_type(splits) != GIT_OBJECT_TREE)
		goto cleanup;
	if (kiln_rewrite_map_get(&s->seen_trees, git_tree_entry_id(splits)))
		goto cleanup;
	{
		oid_slot *slot;

		if ((rc = kiln_rewrite_map_add(&s->seen_trees, git_tree_entry_id(splits), &slot)) < 0)
			goto cleanup;
	}
	if ((gerr = git_tree_lookup(&splits_tree, kiln_manifest_repo(s->m), git_tree_entry_id(splits))) < 0) {
		rc = kiln_manifest_git_fail(s->m, gerr, commit_hex);
		goto cleanup;
	}
	for (size_t i = 0; i < git_tree_entrycount(splits_tree) && rc == 0; i++) {
		const git_tree_entry *se = git_tree_entry_byindex(splits_tree, i);
		git_tree *split_tree = NULL;
		kiln_split split;

		if (git_tree_entry_type(se) != GIT_OBJECT_TREE ||
		    kiln_split_from_name(git_tree_entry_name(se), &split) < 0)
			continue;
		if ((gerr = git_tree_lookup(&split_tree, kiln_manifest_repo(s->m), git_tree_entry_id(se))) <
		    0) {
			rc = kiln_manifest_git_fail(s->m, gerr, commit_hex);
			break;
		}
		for (size_t j = 0; j < git_tree_entrycount(split_tree) && rc == 0; j++) {
			const git_tree_entry *be = git_tree_entry_byindex(split_tree, j);

			if (git_tree_entry_type(be) != GIT_OBJECT_BLOB)
				continue;
			snprintf(path, sizeof(path), "%.40s:splits/%s/%s", commit_hex, kiln_split_name(split),
			         git_tree_entry_name(be));
			rc = scan_blob(s, root, split, git_tree_entry_id(be), path);
		}
		git_tree_free(split_tree);
	}
cleanup:
	git_tree_free(splits_tree);
	git_tree_entry_free(splits);
	git_tree_entry_free(contract);
	return rc;
}

int kiln_rewrite_scan(kiln_manifest *m, const char *dataset,
                      int (*shard_cb)(void *ctx, kiln_split split, const kiln_shard_entry *entry),
                      int (*contract_cb)(void *ctx, const char *text, size_t len), void *ctx)
{
	scan_state s = {.m = m,
	                .shard_cb = shard_cb,
	                .contract_cb = contract_cb,
	                .ctx = ctx,
	                .strings = KILN_BUF_INIT(0)};
	ref_list refs = {0};
	git_revwalk *walk = NULL;
	git_oid id;
	int gerr, rc;

	if (!kiln_mfmt_name_valid(dataset))
		return kiln_error_set(KILN_EINVALID,
		                      "rewrite: dataset name must match [a-z0-9][a-z0-9._-]{0,127}");
	if ((rc = dataset_refs(m, dataset, &refs)) < 0)
		goto cleanup;
	if (refs.count == 0) {
		rc = kiln_error_set(KILN_ENOTFOUND, "%s: no branch or tag of that dataset in manifest %s",
		                    dataset, kiln_manifest_path(m));
		goto cleanup;
	}
	if (!(s.scanner = kiln_json_scanner_new(NULL))) {
		rc = kiln_error_oom("rewrite");
		goto cleanup;
	}
	if ((rc = walk_new(m, &refs, &walk, NULL)) < 0)
		goto cleanup;
	while (rc == 0 && (gerr = git_revwalk_next(&id, walk)) == 0) {
		git_commit *commit = NULL;
		git_tree *tree = NULL;
		char hex[41];

		git_oid_tostr(hex, sizeof(hex), &id);
		if ((gerr = git_commit_lookup(&commit, kiln_manifest_repo(m), &id)) < 0 ||
		    (gerr = git_commit_tree(&tree, commit)) < 0)
			rc = kiln_manifest_git_fail(m, gerr, hex);
		else
			rc = scan_tree(&s, tree, hex);
		git_tree_free(tree);
		git_commit_free(commit);
	}
	if (rc == 0 && gerr != GIT_ITEROVER)
		rc = kiln_manifest_git_fail(m, gerr, "walking the history");
cleanup:
	git_revwalk_free(walk);
	ref_list_free(&refs);
	kiln_rewrite_map_free(&s.seen_trees);
	kiln_rewrite_map_free(&s.seen_blobs);
	kiln_rewrite_map_free(&s.seen_hashes);
	kiln_buf_free(&s.strings);
	free(s.sources);
	kiln_json_scanner_free(s.scanner);
	return rc;
}

/* ---- refs --------------------------------------------------------------- */

static int add_move(kiln_rewrite_result *r, const char *ref, const git_oid *old_id, const git_oid *new_id,
                    const git_oid *old_commit, const git_oid *new_commit)
{
	kiln_rewrite_move *v = realloc(r->moves, (r->move_count + 1) * sizeof(*v)), *mv;

	if (!v)
		return kiln_error_oom("rewrite");
	r->moves = v;
	mv = &v[r->move_count++];
	memset(mv, 0, sizeof(*mv));
	snprintf(mv->ref, sizeof(mv->ref), "%s", ref);
	mv->tag = strncmp(ref, "refs/tags/", 10) == 0;
	git_oid_tostr(mv->old_id, 41, old_id);
	git_oid_tostr(mv->new_id, 41, new_id);
	git_oid_tostr(mv->old_commit, 41, old_commit);
	git_oid_tostr(mv->new_commit, 41, new_commit);
	return 0;
}

/* The message of an annotated tag without its signature. */
static int tag_message(git_tag *tag, kiln_buf *out, bool *out_signed)
{
	const char *msg = git_tag_message(tag);
	const char *sig = NULL;

	if (!msg)
		msg = "";
	for (const char *line = msg; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		if (strncmp(line, SIG_BEGIN, sizeof(SIG_BEGIN) - 1) == 0)
			sig = line;
	*out_signed = sig != NULL;
	return kiln_buf_put(out, msg, sig ? (size_t)(sig - msg) : strlen(msg));
}

/* Plans the move of the ref name from target, what it named when the walk
 * began: a ref moved since then is left to the compare-and-swap of
 * kiln_rewrite_apply (KILN_EMODIFIED, plan again), never planned from a
 * commit the walk did not see. */
static int plan_ref(plan_state *p, const char *name, const git_oid *target_id)
{
	git_object *target = NULL;
	kiln_buf message = KILN_BUF_INIT(0);
	const oid_slot *slot;
	git_oid commit_id, new_tag;
	char new_hex[41], old_hex[41], tag_hex[41];
	int rc = 0, gerr;

	if ((gerr = git_object_lookup(&target, p->repo, target_id, GIT_OBJECT_ANY)) < 0) {
		rc = kiln_manifest_git_fail(p->m, gerr, name);
		goto cleanup;
	}
	if (git_object_type(target) == GIT_OBJECT_TAG)
		git_oid_cpy(&commit_id, git_tag_target_id((git_tag *)target));
	else
		git_oid_cpy(&commit_id, git_object_id(target));
	slot = kiln_rewrite_map_get(&p->commits, &commit_id);
	if (!slot || git_oid_equal(&slot->value, &commit_id))
		goto cleanup; /* not rewritten */
	if (git_object_type(target) != GIT_OBJECT_TAG) {
		rc = add_move(p->out, name, &commit_id, &slot->value, &commit_id, &slot->value);
		goto cleanup;
	}
	{
		const char *tag_name = name + strlen("refs/tags/") + strlen(p->o->dataset) + 1;
		bool was_signed;

		git_oid_tostr(new_hex, sizeof(new_hex), &slot->value);
		git_oid_tostr(old_hex, sizeof(old_hex), &commit_id);
		git_oid_tostr(tag_hex, sizeof(tag_hex), git_object_id(target));
		if ((rc = tag_message((git_tag *)target, &message, &was_signed)) < 0)
			goto cleanup;
		if (was_signed && !p->o->key) {
			rc = kiln_error_set(
			    KILN_EINVALID,
			    "%s: %s is signed: re-signing it needs the release key (signing.key in the "
			    "pipeline)",
			    p->o->dataset, name);
			goto cleanup;
		}
		if (message.len && message.ptr[message.len - 1] != '\n' &&
		    (rc = kiln_buf_putc(&message, '\n')) < 0)
			goto cleanup;
		if ((rc = kiln_buf_printf(&message, "\nErasure %s: supersedes tag %s on commit %s.\n",
		                          p->o->erasure, tag_hex, old_hex)) < 0 ||
		    (rc = kiln_buf_putc(&message, '\0')) < 0)
			goto cleanup;
		if ((rc = kiln_manifest_tag_object(p->m, p->o->dataset, tag_name, new_hex, message.ptr,
		                                   p->o->key, &new_tag)) < 0)
			goto cleanup;
		rc = add_move(p->out, name, git_object_id(target), &new_tag, &commit_id, &slot->value);
	}
cleanup:
	kiln_buf_free(&message);
	git_object_free(target);
	return rc;
}

void kiln_rewrite_result_free(kiln_rewrite_result *r)
{
	if (!r)
		return;
	free(r->moves);
	free(r->commits);
	memset(r, 0, sizeof(*r));
}

KILN_REWRITE_STEP int kiln_rewrite_plan(kiln_manifest *m, const kiln_rewrite_options *o,
                                        kiln_rewrite_result *out)
{
	plan_state p = {
	    .m = m, .repo = kiln_manifest_repo(m), .o = o, .out = out, .strings = KILN_BUF_INIT(0)};
	ref_list refs = {0};
	git_revwalk *walk = NULL;
	git_oid id, *targets = NULL;
	int rc, gerr = 0;

	memset(out, 0, sizeof(*out));
	if (!kiln_mfmt_name_valid(o->dataset))
		return kiln_error_set(KILN_EINVALID,
		                      "rewrite: dataset name must match [a-z0-9][a-z0-9._-]{0,127}");
	if (!(p.scanner = kiln_json_scanner_new(NULL))) {
		rc = kiln_error_oom("rewrite");
		goto cleanup;
	}
	if ((rc = dataset_refs(m, o->dataset, &refs)) < 0 || refs.count == 0 || o->shard_count == 0)
		goto cleanup;
	if (!(targets = calloc(refs.count, sizeof(*targets)))) {
		rc = kiln_error_oom("rewrite");
		goto cleanup;
	}
	if ((rc = walk_new(m, &refs, &walk, targets)) < 0)
		goto cleanup;
	while (rc == 0 && (gerr = git_revwalk_next(&id, walk)) == 0)
		rc = kiln_rewrite_commit(&p, &id);
	if (rc == 0 && gerr != GIT_ITEROVER)
		rc = kiln_manifest_git_fail(m, gerr, "walking the history");
	for (size_t i = 0; i < refs.count && rc == 0; i++)
		rc = plan_ref(&p, refs.names[i], &targets[i]);
cleanup:
	free(targets);
	if (rc < 0)
		kiln_rewrite_result_free(out);
	git_revwalk_free(walk);
	ref_list_free(&refs);
	kiln_rewrite_map_free(&p.commits);
	kiln_rewrite_map_free(&p.split_trees);
	kiln_buf_free(&p.strings);
	free(p.sources);
	kiln_json_scanner_free(p.scanner);
	return rc;
}

KILN_REWRITE_STEP int kiln_rewrite_apply(kiln_manifest *m, const kiln_rewrite_result *r,
                                         const char *reflog_message, size_t *out_moved)
{
	const char *moved_ref = NULL;
	size_t moved = 0;
	int rc = 0;

	for (size_t i = 0; i < r->move_count; i++) {
		const kiln_rewrite_move *mv = &r->moves[i];
		git_reference *ref = NULL;
		git_oid old_id, new_id, now;
		int gerr;

		git_oid_fromstr(&old_id, mv->old_id);
		git_oid_fromstr(&new_id, mv->new_id);
		gerr = git_reference_name_to_id(&now, kiln_manifest_repo(m), mv->ref);
		if (gerr == 0 && git_oid_equal(&now, &new_id))
			continue;
		gerr = git_reference_create_matching(&ref, kiln_manifest_repo(m), mv->ref, &new_id, 1,
		                                     &old_id, reflog_message);
		git_reference_free(ref);
		if (gerr == GIT_EMODIFIED || gerr == GIT_ENOTFOUND) {
			if (!moved_ref)
				moved_ref = mv->ref;
			continue;
		}
		if (gerr < 0) {
			rc = kiln_manifest_git_fail(m, gerr, mv->ref);
			break;
		}
		moved++;
	}
	if (out_moved)
		*out_moved = moved;
	if (rc == 0 && moved_ref)
		rc = kiln_error_set(KILN_EMODIFIED, "manifest %s: %s moved since the erasure read it",
		                    kiln_manifest_path(m), moved_ref);
	return rc;
}

size_t kiln_rewrite_keep_applied(kiln_manifest *m, kiln_rewrite_move *moves, size_t count)
{
	size_t kept = 0;

	for (size_t i = 0; i < count; i++) {
		git_oid new_id, now;

		git_oid_fromstr(&new_id, moves[i].new_id);
		if (git_reference_name_to_id(&now, kiln_manifest_repo(m), moves[i].ref) != 0 ||
		    !git_oid_equal(&now, &new_id))
			continue;
		if (kept != i)
			moves[kept] = moves[i];
		kept++;
	}
	return kept;
}
