/* Rewriting a dataset's history without some shards (rewrite.h). Commits
 * are visited parents first; a commit, a splits/<split> tree and a shard
 * list blob are each rewritten once, whatever number of versions share it
 * (memos keyed by object id), so the cost follows the distinct objects,
 * not the versions. */
#include "manifest/rewrite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "manifest/format.h"
#include "manifest/internal.h"
#include "manifest/sshsig.h"
#include "quality/profile.h"
#include "shard/filter.h"

#define SIG_BEGIN "-----BEGIN SSH SIGNATURE-----"

/* ---- an id -> id map --------------------------------------------------- */

typedef struct oid_slot {
	git_oid key, value;
	bool used;
	/* trees: what the rewrite of the tree changed */
	int64_t records, shards, bytes, raw_bytes;
	uint64_t erased;
	char **affected; /* hashes of changed shards the tree lists (splits trees) */
	size_t affected_count;
} oid_slot;

typedef struct oid_map {
	oid_slot *slots;
	size_t cap, count;
} oid_map;

static size_t oid_hash(const git_oid *id)
{
	size_t h;

	memcpy(&h, id->id, sizeof(h));
	return h;
}

static void oid_map_free(oid_map *m)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].used) {
			for (size_t j = 0; j < m->slots[i].affected_count; j++)
				free(m->slots[i].affected[j]);
			free(m->slots[i].affected);
		}
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

static oid_slot *oid_map_get(const oid_map *m, const git_oid *key)
{
	if (m->cap == 0)
		return NULL;
	for (size_t i = oid_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->slots[i].used)
			return NULL;
		if (git_oid_equal(&m->slots[i].key, key))
			return &m->slots[i];
	}
}

static int oid_map_grow(oid_map *m)
{
	oid_map bigger = {.cap = m->cap ? m->cap * 2 : 256};

	bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
	if (!bigger.slots)
		return kiln_error_oom("rewrite");
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->slots[i].used)
			continue;
		for (size_t j = oid_hash(&m->slots[i].key) & (bigger.cap - 1);;
		     j = (j + 1) & (bigger.cap - 1))
			if (!bigger.slots[j].used) {
				bigger.slots[j] = m->slots[i];
				break;
			}
	}
	free(m->slots);
	bigger.count = m->count;
	*m = bigger;
	return 0;
}

/* A new slot for key (which must not be there yet). */
static int oid_map_add(oid_map *m, const git_oid *key, oid_slot **out)
{
	int rc;

	if ((m->count + 1) * 2 > m->cap && (rc = oid_map_grow(m)) < 0)
		return rc;
	for (size_t i = oid_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
		if (!m->slots[i].used) {
			m->slots[i].used = true;
			git_oid_cpy(&m->slots[i].key, key);
			m->count++;
			*out = &m->slots[i];
			return 0;
		}
}

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
				if (out->count == out->cap) {
					size_t cap = out->cap ? out->cap * 2 : 16;
					char **v = realloc(out->names, cap * sizeof(*v));

					if (!v) {
						rc = kiln_error_oom("rewrite");
						break;
					}
					out->names = v;
					out->cap = cap;
				}
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

	if (oid_map_get(&s->seen_blobs, id))
		return 0;
	if ((rc = oid_map_add(&s->seen_blobs, id, &slot)) < 0)
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
			if (!oid_map_get(&s->seen_hashes, &key)) {
				oid_slot *h;

				if ((rc = oid_map_add(&s->seen_hashes, &key, &h)) == 0 && s->shard_cb) {
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
	    !oid_map_get(&s->seen_blobs, git_tree_entry_id(contract))) {
		git_blob *blob = NULL;
		oid_slot *slot;

		if ((rc = oid_map_add(&s->seen_blobs, git_tree_entry_id(contract), &slot)) < 0)
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
	if (oid_map_get(&s->seen_trees, git_tree_entry_id(splits)))
		goto cleanup;
	{
		oid_slot *slot;

		if ((rc = oid_map_add(&s->seen_trees, git_tree_entry_id(splits), &slot)) < 0)
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
	oid_map_free(&s.seen_trees);
	oid_map_free(&s.seen_blobs);
	oid_map_free(&s.seen_hashes);
	kiln_buf_free(&s.strings);
	free(s.sources);
	kiln_json_scanner_free(s.scanner);
	return rc;
}

/* ---- plan --------------------------------------------------------------- */

typedef struct plan_state {
	kiln_manifest *m;
	git_repository *repo;
	const kiln_rewrite_options *o;
	kiln_json_scanner *scanner;
	oid_map commits;     /* old commit -> new commit (equal: unchanged) */
	oid_map split_trees; /* old splits/<split> tree -> new one, with what changed */
	kiln_rewrite_result *out;
	kiln_buf strings;
	kiln_source_range *sources;
	size_t sources_cap;
} plan_state;

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
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		line_ref *v = realloc(l->v, cap * sizeof(*v));

		if (!v) {
			free(owned);
			return kiln_error_oom("rewrite");
		}
		l->v = v;
		l->cap = cap;
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

	if ((*out_slot = oid_map_get(&p->split_trees, tree_id)))
		return 0;
	memset(lines, 0, sizeof(lines));
	if ((rc = oid_map_add(&p->split_trees, tree_id, &slot)) < 0)
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

	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 16;
		kiln_shard_entry *v = realloc(e->v, cap * sizeof(*v));

		if (!v)
			return kiln_error_oom("rewrite");
		e->v = v;
		e->cap = cap;
	}
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

static int rewrite_commit(plan_state *p, const git_oid *id)
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
		const oid_slot *ps = oid_map_get(&p->commits, pid);
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
	if ((rc = oid_map_add(&p->commits, id, &slot)) < 0)
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
	slot = oid_map_get(&p->commits, &commit_id);
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

int kiln_rewrite_plan(kiln_manifest *m, const kiln_rewrite_options *o, kiln_rewrite_result *out)
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
		rc = rewrite_commit(&p, &id);
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
	oid_map_free(&p.commits);
	oid_map_free(&p.split_trees);
	kiln_buf_free(&p.strings);
	free(p.sources);
	kiln_json_scanner_free(p.scanner);
	return rc;
}

int kiln_rewrite_apply(kiln_manifest *m, const kiln_rewrite_result *r, const char *reflog_message,
                       size_t *out_moved)
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
