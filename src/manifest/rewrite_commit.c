/* One commit of a history rewrite (rewrite.h), planned: its splits/<split>
 * trees without the erased shards' lines, stats.json and profile.json
 * recounted, the membership filters rebuilt, and the new commit written;
 * each tree and blob once (rewrite_internal.h's memos). The walk, the refs
 * and applying the plan are rewrite.c's. */
#include "manifest/rewrite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"
#include "manifest/format.h"
#include "manifest/sshsig.h"
#include "quality/profile.h"
#include "shard/filter.h"

static int shard_cmp(const void *key, const void *elem)
{
	return strncmp(key, ((const kiln_rewrite_shard *)elem)->old_hash, 64);
}

static const kiln_rewrite_shard *find_shard(const plan_state *p, const char *hash)
{
	return bsearch(hash, p->o->shards, p->o->shard_count, sizeof(*p->o->shards), shard_cmp);
}

typedef struct line_ref {
	const char *text;
	size_t len;
	char hash[65];
	char *owned; /* a rendered successor's line */
} line_ref;

typedef struct line_vec {
	line_ref *v;
	size_t n, cap;
} line_vec;

static int line_push(line_vec *l, const char *text, size_t len, const char *hash, char *owned)
{
	if (KILN_ARRAY_GROW(l->v, l->cap, l->n, "rewrite") < 0) {
		free(owned);
		return KILN_ENOMEM;
	}
	l->v[l->n].text = text;
	l->v[l->n].len = len;
	memcpy(l->v[l->n].hash, hash, 64);
	l->v[l->n].hash[64] = '\0';
	l->v[l->n].owned = owned;
	l->n++;
	return 0;
}

static void line_vec_free(line_vec *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].owned);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int line_cmp(const void *a, const void *b)
{
	return memcmp(((const line_ref *)a)->hash, ((const line_ref *)b)->hash, 64);
}

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The hash of one shard list line (fast path, else parsed). */
static int line_hash(plan_state *p, const char *where, const char *text, size_t len, char out[65])
{
	kiln_shard_entry e;
	int rc;

	if (kiln_mfmt_shard_line_fast_hash(text, len, out))
		return 0;
	kiln_buf_reset(&p->strings);
	rc = kiln_mfmt_shard_line_parse(p->scanner, where, KILN_MFMT_LINE_REFS, text, len, &e, &p->strings,
	                                &p->sources, &p->sources_cap);
	if (rc == 0)
		memcpy(out, e.hash, 65);
	return rc;
}

static int add_affected(oid_slot *slot, const char *hash)
{
	char **v = realloc(slot->affected, (slot->affected_count + 1) * sizeof(*v));

	if (!v)
		return kiln_error_oom("rewrite");
	slot->affected = v;
	if (!(v[slot->affected_count] = strndup(hash, 64)))
		return kiln_error_oom("rewrite");
	slot->affected_count++;
	return 0;
}

/* Rewrites one splits/<split> tree (memoised): *out_slot says what changed
 * (its value is the zero id when no shard is left). */
static int rewrite_split(plan_state *p, const git_oid *tree_id, kiln_split split, oid_slot **out_slot)
{
	git_blob *blobs[256] = {0};
	bool touched[256] = {false};
	line_vec lines[256];
	git_tree *tree = NULL;
	git_treebuilder *bld = NULL;
	oid_slot *slot;
	char where[128];
	int gerr, rc;

	if ((*out_slot = kiln_rewrite_map_get(&p->split_trees, tree_id)))
		return 0;
	memset(lines, 0, sizeof(lines));
	if ((rc = kiln_rewrite_map_add(&p->split_trees, tree_id, &slot)) < 0)
		return rc;
	git_oid_cpy(&slot->value, tree_id);
	if ((gerr = git_tree_lookup(&tree, p->repo, tree_id)) < 0) {
		rc = kiln_manifest_git_fail(p->m, gerr, "splits");
		goto cleanup;
	}
	/* pass 1: which lists hold a changed shard; their lines; the successors */
	for (size_t i = 0; i < git_tree_entrycount(tree); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(tree, i);
		const char *name = git_tree_entry_name(e);
		int hi, lo, hh;
		bool any = false;

		if (git_tree_entry_type(e) != GIT_OBJECT_BLOB || strlen(name) != 8 ||
		    strcmp(name + 2, ".jsonl") != 0 || (hi = hex_digit(name[0])) < 0 ||
		    (lo = hex_digit(name[1])) < 0)
			continue;
		hh = hi * 16 + lo;
		if ((gerr = git_blob_lookup(&blobs[hh], p->repo, git_tree_entry_id(e))) < 0) {
			rc = kiln_manifest_git_fail(p->m, gerr, name);
			goto cleanup;
		}
		snprintf(where, sizeof(where), "manifest: splits/%s/%s", kiln_split_name(split), name);
		for (const char *t = git_blob_rawcontent(blobs[hh]), *end = t + git_blob_rawsize(blobs[hh]);
		     t < end;) {
			const char *nl = memchr(t, '\n', (size_t)(end - t));
			size_t len = nl ? (size_t)(nl - t) : (size_t)(end - t);
			const kiln_rewrite_shard *c;
			char hash[65];

			if ((rc = line_hash(p, where, t, len, hash)) < 0)
				goto cleanup;
			if ((c = find_shard(p, hash)) != NULL) {
				any = true;
				if ((rc = add_affected(slot, hash)) < 0)
					goto cleanup;
				slot->erased += c->erased;
				slot->records -= (int64_t)c->erased;
			}
			t += len + (nl != NULL);
		}
		if (any)
			touched[hh] = true;
	}
	if (slot->affected_count == 0)
		goto cleanup; /* unchanged: value = key */
	/* pass 2: the lines of each touched list, and the successors where they go */
	for (int hh = 0; hh < 256; hh++) {
		if (!touched[hh] || !blobs[hh])
			continue;
		snprintf(where, sizeof(where), "manifest: splits/%s/%02x.jsonl", kiln_split_name(split), hh);
		for (const char *t = git_blob_rawcontent(blobs[hh]), *end = t + git_blob_rawsize(blobs[hh]);
		     t < end;) {
			const char *nl = memchr(t, '\n', (size_t)(end - t));
			size_t len = nl ? (size_t)(nl - t) : (size_t)(end - t);
			const kiln_rewrite_shard *c;
			char hash[65];

			if ((rc = line_hash(p, where, t, len, hash)) < 0)
				goto cleanup;
			if ((c = find_shard(p, hash)) == NULL) {
				if ((rc = line_push(&lines[hh], t, len, hash, NULL)) < 0)
					goto cleanup;
			} else {
				slot->shards--;
				slot->bytes -= (int64_t)c->old_bytes;
				slot->raw_bytes -= (int64_t)c->old_raw_bytes;
				if (!c->drop) {
					kiln_buf text = KILN_BUF_INIT(0);
					int to =
					    hex_digit(c->entry.hash[0]) * 16 + hex_digit(c->entry.hash[1]);

					if ((rc = kiln_mfmt_shard_line_render(&text, &c->entry)) < 0 ||
					    (rc = kiln_buf_putc(&text, '\0')) < 0) {
						kiln_buf_free(&text);
						goto cleanup;
					}
					slot->shards++;
					slot->bytes += (int64_t)c->entry.bytes;
					slot->raw_bytes += (int64_t)c->entry.raw_bytes;
					if (!touched[to] && to > hh) {
						/* a list not read yet: its lines join in their turn */
						touched[to] = true;
					} else if (!touched[to]) {
						touched[to] = true;
						if (blobs[to]) {
							const char *u = git_blob_rawcontent(blobs[to]);
							const char *uend = u + git_blob_rawsize(blobs[to]);

							while (u < uend) {
								const char *unl =
								    memchr(u, '\n', (size_t)(uend - u));
								size_t ulen = unl ? (size_t)(unl - u)
								                  : (size_t)(uend - u);
								char uhash[65];

								if ((rc = line_hash(p, where, u, ulen,
								                    uhash)) < 0 ||
								    (rc = line_push(&lines[to], u, ulen,
								                    uhash, NULL)) < 0) {
									kiln_buf_free(&text);
									goto cleanup;
								}
								u += ulen + (unl != NULL);
							}
						}
					}
					rc = line_push(&lines[to], text.ptr, text.len - 1, c->entry.hash,
					               text.ptr);
					if (rc < 0)
						goto cleanup;
				}
			}
			t += len + (nl != NULL);
		}
	}
	if ((gerr = git_treebuilder_new(&bld, p->repo, tree)) < 0) {
		rc = kiln_manifest_git_fail(p->m, gerr, "splits");
		goto cleanup;
	}
	for (int hh = 0; hh < 256; hh++) {
		kiln_buf out = KILN_BUF_INIT(0);
		char name[16];
		git_oid id;

		if (!touched[hh])
			continue;
		snprintf(name, sizeof(name), "%02x.jsonl", hh);
		if (lines[hh].n > 1)
			qsort(lines[hh].v, lines[hh].n, sizeof(*lines[hh].v), line_cmp);
		for (size_t i = 0; i < lines[hh].n; i++) {
			if (i > 0 && memcmp(lines[hh].v[i].hash, lines[hh].v[i - 1].hash, 64) == 0)
				continue; /* the same bytes: one shard */
			if (kiln_buf_put(&out, lines[hh].v[i].text, lines[hh].v[i].len) < 0 ||
			    kiln_buf_putc(&out, '\n') < 0) {
				kiln_buf_free(&out);
				rc = kiln_error_oom("rewrite");
				goto cleanup;
			}
		}
		if (out.len == 0) {
			gerr = git_treebuilder_get(bld, name) ? git_treebuilder_remove(bld, name) : 0;
		} else {
			gerr = git_blob_create_from_buffer(&id, p->repo, out.ptr, out.len);
			if (gerr == 0)
				gerr = git_treebuilder_insert(NULL, bld, name, &id, GIT_FILEMODE_BLOB);
		}
		kiln_buf_free(&out);
		if (gerr < 0) {
			rc = kiln_manifest_git_fail(p->m, gerr, name);
			goto cleanup;
		}
	}
	if (git_treebuilder_entrycount(bld) == 0)
		memset(&slot->value, 0, sizeof(slot->value));
	else if ((gerr = git_treebuilder_write(&slot->value, bld)) < 0)
		rc = kiln_manifest_git_fail(p->m, gerr, "splits");
cleanup:
	for (int hh = 0; hh < 256; hh++) {
		line_vec_free(&lines[hh]);
		git_blob_free(blobs[hh]);
	}
	git_treebuilder_free(bld);
	git_tree_free(tree);
	*out_slot = slot;
	return rc;
}

/* What the rewrite of a commit's splits/ changed. */
typedef struct tree_change {
	bool changed;
	bool have_splits; /* a splits/ tree remains */
	git_oid splits;
	oid_slot *split[KILN_SPLIT_COUNT]; /* NULL: the split has no list */
	uint64_t erased;
} tree_change;

static int rewrite_splits(plan_state *p, git_tree *root, tree_change *tc)
{
	const git_tree_entry *entry = git_tree_entry_byname(root, "splits");
	git_treebuilder *bld = NULL;
	git_tree *splits = NULL;
	int gerr, rc = 0;

	memset(tc, 0, sizeof(*tc));
	if (!entry || git_tree_entry_type(entry) != GIT_OBJECT_TREE)
		return 0;
	tc->have_splits = true;
	git_oid_cpy(&tc->splits, git_tree_entry_id(entry));
	if ((gerr = git_tree_lookup(&splits, p->repo, git_tree_entry_id(entry))) < 0)
		return kiln_manifest_git_fail(p->m, gerr, "splits");
	for (size_t i = 0; i < git_tree_entrycount(splits); i++) {
		const git_tree_entry *se = git_tree_entry_byindex(splits, i);
		kiln_split split;
		oid_slot *slot;

		if (git_tree_entry_type(se) != GIT_OBJECT_TREE ||
		    kiln_split_from_name(git_tree_entry_name(se), &split) < 0)
			continue;
		if ((rc = rewrite_split(p, git_tree_entry_id(se), split, &slot)) < 0)
			goto cleanup;
		tc->split[split] = slot;
		tc->erased += slot->erased;
		if (!git_oid_equal(&slot->key, &slot->value))
			tc->changed = true;
	}
	if (!tc->changed)
		goto cleanup;
	if ((gerr = git_treebuilder_new(&bld, p->repo, splits)) < 0) {
		rc = kiln_manifest_git_fail(p->m, gerr, "splits");
		goto cleanup;
	}
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		const char *name = kiln_split_name((kiln_split)s);
		oid_slot *slot = tc->split[s];

		if (!slot || git_oid_equal(&slot->key, &slot->value))
			continue;
		if (git_oid_is_zero(&slot->value))
			gerr = git_treebuilder_remove(bld, name);
		else
			gerr = git_treebuilder_insert(NULL, bld, name, &slot->value, GIT_FILEMODE_TREE);
		if (gerr < 0) {
			rc = kiln_manifest_git_fail(p->m, gerr, "splits");
			goto cleanup;
		}
	}
	if (git_treebuilder_entrycount(bld) == 0)
		tc->have_splits = false;
	else if ((gerr = git_treebuilder_write(&tc->splits, bld)) < 0)
		rc = kiln_manifest_git_fail(p->m, gerr, "splits");
cleanup:
	git_treebuilder_free(bld);
	git_tree_free(splits);
	return rc;
}

/* The blob `name` of a tree: 1 with *out, 0 when absent. */
static int tree_blob(plan_state *p, git_tree *tree, const char *name, git_blob **out)
{
	git_tree_entry *entry = NULL;
	int gerr;

	*out = NULL;
	if (!tree || git_tree_entry_bypath(&entry, tree, name) < 0)
		return 0;
	if (git_tree_entry_type(entry) != GIT_OBJECT_BLOB) {
		git_tree_entry_free(entry);
		return 0;
	}
	gerr = git_blob_lookup(out, p->repo, git_tree_entry_id(entry));
	git_tree_entry_free(entry);
	return gerr < 0 ? kiln_manifest_git_fail(p->m, gerr, name) : 1;
}

static int rewrite_stats(plan_state *p, git_tree *root, const tree_change *tc, const char *commit_hex,
                         git_treebuilder *bld)
{
	kiln_buf text = KILN_BUF_INIT(0);
	git_blob *blob = NULL;
	kiln_stats st;
	char where[96];
	git_oid id;
	int rc, gerr;

	if ((rc = tree_blob(p, root, "stats.json", &blob)) <= 0)
		return rc;
	snprintf(where, sizeof(where), "manifest: %.40s:stats.json", commit_hex);
	rc = kiln_mfmt_stats_parse(p->scanner, where, git_blob_rawcontent(blob),
	                           (size_t)git_blob_rawsize(blob), &st);
	if (rc < 0)
		goto cleanup;
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		const oid_slot *slot = tc->split[s];
		kiln_split_stats *ss = &st.splits[s];

		if (!slot)
			continue;
		if ((int64_t)ss->records + slot->records < 0 || (int64_t)ss->shards + slot->shards < 0 ||
		    (int64_t)ss->bytes + slot->bytes < 0 || (int64_t)ss->raw_bytes + slot->raw_bytes < 0) {
			rc = kiln_error_set(KILN_EINVALID,
			                    "%s: the %s counts do not agree with the shard lists", where,
			                    kiln_split_name((kiln_split)s));
			goto cleanup;
		}
		ss->records = (uint64_t)((int64_t)ss->records + slot->records);
		ss->shards = (uint64_t)((int64_t)ss->shards + slot->shards);
		ss->bytes = (uint64_t)((int64_t)ss->bytes + slot->bytes);
		ss->raw_bytes = (uint64_t)((int64_t)ss->raw_bytes + slot->raw_bytes);
	}
	if (st.valid < tc->erased) {
		rc = kiln_error_set(KILN_EINVALID, "%s: fewer valid records than the shards hold", where);
		goto cleanup;
	}
	st.valid -= tc->erased;
	st.erased += tc->erased;
	if ((rc = kiln_mfmt_stats_render(&text, &st)) < 0)
		goto cleanup;
	gerr = git_blob_create_from_buffer(&id, p->repo, text.ptr, text.len);
	if (gerr == 0)
		gerr = git_treebuilder_insert(NULL, bld, "stats.json", &id, GIT_FILEMODE_BLOB);
	rc = gerr < 0 ? kiln_manifest_git_fail(p->m, gerr, "stats.json") : 0;
cleanup:
	kiln_buf_free(&text);
	git_blob_free(blob);
	return rc;
}

/* Whether the list blob of `tree` at path holds the 64-hex hash. */
static int tree_lists(plan_state *p, git_tree *tree, kiln_split split, const char *hash, bool *out)
{
	char path[64];
	git_blob *blob = NULL;
	int rc;

	*out = false;
	snprintf(path, sizeof(path), "splits/%s/%.2s.jsonl", kiln_split_name(split), hash);
	if ((rc = tree_blob(p, tree, path, &blob)) <= 0)
		return rc;
	*out = memmem(git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob), hash, 64) != NULL;
	git_blob_free(blob);
	return 0;
}

typedef struct entry_vec {
	kiln_shard_entry *v;
	size_t n, cap;
} entry_vec;

static void entry_vec_free(entry_vec *e)
{
	for (size_t i = 0; i < e->n; i++) {
		for (size_t j = 0; j < e->v[i].source_count; j++)
			free((char *)e->v[i].sources[j].topic);
		free((kiln_source_range *)e->v[i].sources);
	}
	free(e->v);
	memset(e, 0, sizeof(*e));
}

/* Appends a deep copy of *src. */
static int entry_push(entry_vec *e, const kiln_shard_entry *src)
{
	kiln_source_range *sources = NULL;

	if (KILN_ARRAY_GROW(e->v, e->cap, e->n, "rewrite") < 0)
		return KILN_ENOMEM;
	if (src->source_count && !(sources = calloc(src->source_count, sizeof(*sources))))
		return kiln_error_oom("rewrite");
	for (size_t j = 0; j < src->source_count; j++) {
		sources[j] = src->sources[j];
		if (!(sources[j].topic = strdup(src->sources[j].topic))) {
			for (size_t k = 0; k < j; k++)
				free((char *)sources[k].topic);
			free(sources);
			return kiln_error_oom("rewrite");
		}
	}
	e->v[e->n] = *src;
	e->v[e->n].sources = sources;
	e->n++;
	return 0;
}

/* The shards the commit added (in old, not in old_parent), after the change. */
static int added_shards(plan_state *p, git_tree *old, git_tree *old_parent, entry_vec *out)
{
	int rc = 0;

	for (int s = 0; s < KILN_SPLIT_COUNT && rc == 0; s++) {
		char dir[32];
		git_tree_entry *te = NULL;
		git_tree *split_tree = NULL;

		snprintf(dir, sizeof(dir), "splits/%s", kiln_split_name((kiln_split)s));
		if (git_tree_entry_bypath(&te, old, dir) < 0)
			continue;
		if (git_tree_entry_type(te) != GIT_OBJECT_TREE ||
		    git_tree_lookup(&split_tree, p->repo, git_tree_entry_id(te)) < 0) {
			git_tree_entry_free(te);
			continue;
		}
		for (size_t i = 0; i < git_tree_entrycount(split_tree) && rc == 0; i++) {
			const git_tree_entry *be = git_tree_entry_byindex(split_tree, i);
			char path[64];
			git_tree_entry *pe = NULL;
			git_blob *blob = NULL, *pblob = NULL;

			if (git_tree_entry_type(be) != GIT_OBJECT_BLOB)
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, git_tree_entry_name(be));
			if (old_parent && git_tree_entry_bypath(&pe, old_parent, path) == 0 &&
			    git_oid_equal(git_tree_entry_id(pe), git_tree_entry_id(be))) {
				git_tree_entry_free(pe);
				continue;
			}
			if (pe && git_tree_entry_type(pe) == GIT_OBJECT_BLOB)
				git_blob_lookup(&pblob, p->repo, git_tree_entry_id(pe));
			git_tree_entry_free(pe);
			if (git_blob_lookup(&blob, p->repo, git_tree_entry_id(be)) < 0) {
				git_blob_free(pblob);
				rc = kiln_manifest_git_fail(p->m, -1, path);
				break;
			}
			for (const char *t = git_blob_rawcontent(blob), *end = t + git_blob_rawsize(blob);
			     t < end && rc == 0;) {
				const char *nl = memchr(t, '\n', (size_t)(end - t));
				size_t len = nl ? (size_t)(nl - t) : (size_t)(end - t);
				const kiln_rewrite_shard *c;
				kiln_shard_entry e;

				kiln_buf_reset(&p->strings);
				rc =
				    kiln_mfmt_shard_line_parse(p->scanner, path, KILN_MFMT_LINE_FULL, t, len,
				                               &e, &p->strings, &p->sources, &p->sources_cap);
				if (rc == 0 &&
				    !(pblob && memmem(git_blob_rawcontent(pblob),
				                      (size_t)git_blob_rawsize(pblob), e.hash, 64))) {
					if ((c = find_shard(p, e.hash)) == NULL)
						rc = entry_push(out, &e);
					else if (!c->drop)
						rc = entry_push(out, &c->entry);
				}
				t += len + (nl != NULL);
			}
			git_blob_free(blob);
			git_blob_free(pblob);
		}
		git_tree_free(split_tree);
		git_tree_entry_free(te);
	}
	return rc;
}

/* profile.json of the rewritten commit: its added part recomputed when it
 * added a changed shard, its total the new parent's total with the added
 * part merged in (as a run's commit makes it). */
static int rewrite_profile(plan_state *p, git_tree *old, git_tree *old_parent, git_tree *new_parent,
                           const tree_change *tc, const char *commit_hex, git_treebuilder *bld)
{
	kiln_profile total = {0}, added = {0}, fresh = {0};
	kiln_buf text = KILN_BUF_INIT(0);
	git_blob *blob = NULL, *pblob = NULL, *contract = NULL;
	entry_vec entries = {0};
	bool recompute = false;
	char where[96];
	git_oid id;
	int rc, gerr;

	if ((rc = tree_blob(p, old, "profile.json", &blob)) <= 0)
		return rc;
	snprintf(where, sizeof(where), "manifest: %.40s:profile.json", commit_hex);
	if ((rc = kiln_profile_parse_file(git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob), where,
	                                  &total, &added)) < 0)
		goto cleanup;
	for (int s = 0; s < KILN_SPLIT_COUNT && !recompute && p->o->profile; s++) {
		const oid_slot *slot = tc->split[s];

		for (size_t i = 0; slot && i < slot->affected_count && !recompute; i++) {
			bool listed = false;

			if (old_parent &&
			    (rc = tree_lists(p, old_parent, (kiln_split)s, slot->affected[i], &listed)) < 0)
				goto cleanup;
			recompute = !listed;
		}
	}
	if (recompute) {
		if ((rc = tree_blob(p, old, "contract.yaml", &contract)) < 0)
			goto cleanup;
		if (rc == 0) {
			rc = kiln_error_set(
			    KILN_EINVALID, "manifest: %.40s: profile.json without contract.yaml", commit_hex);
			goto cleanup;
		}
		if ((rc = added_shards(p, old, old_parent, &entries)) < 0 ||
		    (rc = p->o->profile(p->o->profile_ctx, git_blob_rawcontent(contract),
		                        (size_t)git_blob_rawsize(contract), entries.v, entries.n, &fresh)) <
		        0)
			goto cleanup;
		kiln_profile_free(&added);
		added = fresh;
		memset(&fresh, 0, sizeof(fresh));
	}
	kiln_profile_free(&total);
	memset(&total, 0, sizeof(total));
	if (new_parent && (rc = tree_blob(p, new_parent, "profile.json", &pblob)) < 0)
		goto cleanup;
	if (pblob) {
		if ((rc = kiln_profile_parse_file(git_blob_rawcontent(pblob), (size_t)git_blob_rawsize(pblob),
		                                  where, &total, NULL)) < 0 ||
		    (rc = kiln_profile_merge(&total, &added)) < 0)
			goto cleanup;
	} else {
		/* the first version: its total is what it added */
		if ((rc = kiln_profile_render_file(&text, &added, &added)) < 0 ||
		    (rc = kiln_profile_parse_file(text.ptr, text.len, where, &total, NULL)) < 0)
			goto cleanup;
		kiln_buf_reset(&text);
	}
	if ((rc = kiln_profile_render_file(&text, &total, &added)) < 0)
		goto cleanup;
	gerr = git_blob_create_from_buffer(&id, p->repo, text.ptr, text.len);
	if (gerr == 0)
		gerr = git_treebuilder_insert(NULL, bld, "profile.json", &id, GIT_FILEMODE_BLOB);
	rc = gerr < 0 ? kiln_manifest_git_fail(p->m, gerr, "profile.json") : 0;
cleanup:
	entry_vec_free(&entries);
	kiln_profile_free(&total);
	kiln_profile_free(&added);
	kiln_profile_free(&fresh);
	kiln_buf_free(&text);
	git_blob_free(blob);
	git_blob_free(pblob);
	git_blob_free(contract);
	return rc;
}

static int add_pair(kiln_rewrite_result *r, const git_oid *old, const git_oid *new)
{
	kiln_rewrite_pair *v = realloc(r->commits, (r->commit_count + 1) * sizeof(*v));

	if (!v)
		return kiln_error_oom("rewrite");
	r->commits = v;
	git_oid_tostr(v[r->commit_count].old_id, 41, old);
	git_oid_tostr(v[r->commit_count].new_id, 41, new);
	r->commit_count++;
	return 0;
}

/* One edit of filters/<hh>/: the filter of `hash` set to blob, or removed
 * (blob NULL); a <hh> tree left empty goes. */
static int filter_edit(plan_state *p, git_treebuilder *fb, const char *hash, const git_oid *blob)
{
	char hh[3] = {hash[0], hash[1], '\0'}, name[80];
	const git_tree_entry *e = git_treebuilder_get(fb, hh);
	git_treebuilder *hb = NULL;
	git_tree *t = NULL;
	git_oid id;
	int gerr = 0;

	snprintf(name, sizeof(name), "%s%s", hash, KILN_FILTER_EXTENSION);
	if (e && git_tree_entry_type(e) != GIT_OBJECT_TREE)
		return 0;
	if (e && (gerr = git_tree_lookup(&t, p->repo, git_tree_entry_id(e))) < 0)
		goto cleanup;
	if ((gerr = git_treebuilder_new(&hb, p->repo, t)) < 0)
		goto cleanup;
	if (!blob)
		gerr = git_treebuilder_get(hb, name) ? git_treebuilder_remove(hb, name) : 0;
	else
		gerr = git_treebuilder_insert(NULL, hb, name, blob, GIT_FILEMODE_BLOB);
	if (gerr < 0)
		goto cleanup;
	if (git_treebuilder_entrycount(hb) == 0)
		gerr = git_treebuilder_get(fb, hh) ? git_treebuilder_remove(fb, hh) : 0;
	else if ((gerr = git_treebuilder_write(&id, hb)) == 0)
		gerr = git_treebuilder_insert(NULL, fb, hh, &id, GIT_FILEMODE_TREE);
cleanup:
	git_treebuilder_free(hb);
	git_tree_free(t);
	return gerr < 0 ? kiln_manifest_git_fail(p->m, gerr, KILN_FILTER_DIR) : 0;
}

/* filters/ of a rewritten commit: each changed shard's filter the tree
 * holds goes, and its successor's filter (when it has one) comes in. */
static int rewrite_filters(plan_state *p, git_tree *root, git_treebuilder *bld)
{
	git_tree_entry *fe = NULL, *old = NULL;
	git_tree *filters = NULL;
	git_treebuilder *fb = NULL;
	bool changed = false;
	char path[96];
	git_oid id;
	int gerr = 0, rc = 0;

	if (git_tree_entry_bypath(&fe, root, KILN_FILTER_DIR) < 0 ||
	    git_tree_entry_type(fe) != GIT_OBJECT_TREE)
		goto cleanup;
	if ((gerr = git_tree_lookup(&filters, p->repo, git_tree_entry_id(fe))) < 0 ||
	    (gerr = git_treebuilder_new(&fb, p->repo, filters)) < 0)
		goto cleanup;
	for (size_t i = 0; i < p->o->shard_count && rc == 0; i++) {
		const kiln_rewrite_shard *c = &p->o->shards[i];

		snprintf(path, sizeof(path), "%.2s/%s%s", c->old_hash, c->old_hash, KILN_FILTER_EXTENSION);
		if (git_tree_entry_bypath(&old, filters, path) < 0)
			continue;
		git_tree_entry_free(old);
		old = NULL;
		changed = true;
		if ((rc = filter_edit(p, fb, c->old_hash, NULL)) < 0 || c->drop || !c->entry.filter)
			continue;
		if ((gerr = git_blob_create_from_buffer(&id, p->repo, c->entry.filter, c->entry.filter_len)) <
		    0)
			goto cleanup;
		rc = filter_edit(p, fb, c->entry.hash, &id);
	}
	if (rc < 0 || !changed)
		goto cleanup;
	if (git_treebuilder_entrycount(fb) == 0)
		gerr = git_treebuilder_remove(bld, KILN_FILTER_DIR);
	else if ((gerr = git_treebuilder_write(&id, fb)) == 0)
		gerr = git_treebuilder_insert(NULL, bld, KILN_FILTER_DIR, &id, GIT_FILEMODE_TREE);
cleanup:
	if (gerr < 0)
		rc = kiln_manifest_git_fail(p->m, gerr, KILN_FILTER_DIR);
	git_treebuilder_free(fb);
	git_tree_free(filters);
	git_tree_entry_free(fe);
	return rc;
}

int kiln_rewrite_commit(plan_state *p, const git_oid *id)
{
	git_commit *commit = NULL, *old_parent = NULL, *new_parent = NULL;
	git_tree *root = NULL, *old_parent_tree = NULL, *new_parent_tree = NULL, *new_tree = NULL;
	git_treebuilder *bld = NULL;
	const git_commit **parents = NULL;
	git_commit **owned = NULL;
	git_buf content = GIT_BUF_INIT, sigfield = GIT_BUF_INIT;
	kiln_buf message = KILN_BUF_INIT(0), armour = KILN_BUF_INIT(0);
	bool parents_changed = false, is_signed;
	unsigned n_parents;
	tree_change tc;
	oid_slot *slot;
	git_oid tree_id, new_id;
	char hex[41];
	int rc = 0, gerr;

	git_oid_tostr(hex, sizeof(hex), id);
	if ((gerr = git_commit_lookup(&commit, p->repo, id)) < 0 ||
	    (gerr = git_commit_tree(&root, commit)) < 0) {
		rc = kiln_manifest_git_fail(p->m, gerr, hex);
		goto cleanup;
	}
	n_parents = git_commit_parentcount(commit);
	parents = calloc(n_parents + 1, sizeof(*parents));
	owned = calloc(n_parents + 1, sizeof(*owned));
	if (!parents || !owned) {
		rc = kiln_error_oom("rewrite");
		goto cleanup;
	}
	for (unsigned i = 0; i < n_parents; i++) {
		const git_oid *pid = git_commit_parent_id(commit, i);
		const oid_slot *ps = kiln_rewrite_map_get(&p->commits, pid);
		const git_oid *use = ps ? &ps->value : pid;

		if (ps && !git_oid_equal(&ps->value, pid))
			parents_changed = true;
		if ((gerr = git_commit_lookup(&owned[i], p->repo, use)) < 0) {
			rc = kiln_manifest_git_fail(p->m, gerr, hex);
			goto cleanup;
		}
		parents[i] = owned[i];
	}
	if ((rc = rewrite_splits(p, root, &tc)) < 0)
		goto cleanup;
	if ((rc = kiln_rewrite_map_add(&p->commits, id, &slot)) < 0)
		goto cleanup;
	git_oid_cpy(&slot->value, id);
	if (!tc.changed && !parents_changed)
		goto cleanup;

	is_signed = git_commit_header_field(&sigfield, commit, "gpgsig") == 0;
	if (is_signed && !p->o->key) {
		rc = kiln_error_set(
		    KILN_EINVALID,
		    "%s: commit %s is signed: rewriting it needs the signing key (signing.key in the "
		    "pipeline)",
		    p->o->dataset, hex);
		goto cleanup;
	}
	if (n_parents > 0) {
		if ((gerr = git_commit_parent(&old_parent, commit, 0)) < 0 ||
		    (gerr = git_commit_tree(&old_parent_tree, old_parent)) < 0 ||
		    (gerr = git_commit_tree(&new_parent_tree, owned[0])) < 0) {
			rc = kiln_manifest_git_fail(p->m, gerr, hex);
			goto cleanup;
		}
	}
	if ((gerr = git_treebuilder_new(&bld, p->repo, root)) < 0) {
		rc = kiln_manifest_git_fail(p->m, gerr, hex);
		goto cleanup;
	}
	if (tc.changed) {
		gerr = tc.have_splits
		           ? git_treebuilder_insert(NULL, bld, "splits", &tc.splits, GIT_FILEMODE_TREE)
		           : git_treebuilder_remove(bld, "splits");
		if (gerr < 0) {
			rc = kiln_manifest_git_fail(p->m, gerr, hex);
			goto cleanup;
		}
		if ((rc = rewrite_stats(p, root, &tc, hex, bld)) < 0)
			goto cleanup;
	}
	if ((rc = rewrite_filters(p, root, bld)) < 0)
		goto cleanup;
	if ((rc = rewrite_profile(p, root, old_parent_tree, new_parent_tree, &tc, hex, bld)) < 0)
		goto cleanup;
	if ((gerr = git_treebuilder_write(&tree_id, bld)) < 0 ||
	    (gerr = git_tree_lookup(&new_tree, p->repo, &tree_id)) < 0) {
		rc = kiln_manifest_git_fail(p->m, gerr, hex);
		goto cleanup;
	}
	{
		const char *raw = git_commit_message_raw(commit);
		size_t len = strlen(raw);

		if (kiln_buf_put(&message, raw, len) < 0 ||
		    kiln_buf_printf(&message,
		                    "%s\nErasure %s: rewritten from commit %s (%llu record%s erased).\n",
		                    len && raw[len - 1] != '\n' ? "\n" : "", p->o->erasure, hex,
		                    (unsigned long long)tc.erased, tc.erased == 1 ? "" : "s") < 0 ||
		    kiln_buf_putc(&message, '\0') < 0) {
			rc = kiln_error_oom("rewrite");
			goto cleanup;
		}
	}
	gerr = git_commit_create_buffer(&content, p->repo, git_commit_author(commit),
	                                git_commit_committer(commit), git_commit_message_encoding(commit),
	                                message.ptr, new_tree, n_parents, parents);
	if (gerr < 0) {
		rc = kiln_manifest_git_fail(p->m, gerr, hex);
		goto cleanup;
	}
	if (is_signed) {
		if ((rc = kiln_sshsig_sign(p->o->key, "git", content.ptr, content.size, &armour)) < 0)
			goto cleanup;
		armour.ptr[armour.len - 1] = '\0';
	}
	gerr = git_commit_create_with_signature(&new_id, p->repo, content.ptr, is_signed ? armour.ptr : NULL,
	                                        is_signed ? "gpgsig" : NULL);
	if (gerr < 0) {
		rc = kiln_manifest_git_fail(p->m, gerr, hex);
		goto cleanup;
	}
	git_oid_cpy(&slot->value, &new_id);
	rc = add_pair(p->out, id, &new_id);
cleanup:
	for (unsigned i = 0; owned && i < n_parents; i++)
		git_commit_free(owned[i]);
	free(owned);
	free(parents);
	git_buf_dispose(&content);
	git_buf_dispose(&sigfield);
	kiln_buf_free(&message);
	kiln_buf_free(&armour);
	git_treebuilder_free(bld);
	git_tree_free(new_tree);
	git_tree_free(old_parent_tree);
	git_tree_free(new_parent_tree);
	git_commit_free(old_parent);
	git_commit_free(new_parent);
	git_tree_free(root);
	git_commit_free(commit);
	return rc;
}
