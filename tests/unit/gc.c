/* Unit tests for store garbage collection and du (src/manifest/gc.c), on
 * manifests made with kiln_manifest_commit and a file:// store holding real
 * objects: the default policy keeps every ref's history and deletes exactly
 * the orphans; --keep tags drops a shard only an old, untagged commit listed
 * (history rewritten by a commit that removes a line) and keeps it once a tag
 * reaches that commit; younger-than keeps by commit time; a commit made while
 * the store is being listed keeps its shards; missing and foreign keys are
 * reported, quarantine/ and raw/ never touched; refusals delete nothing; lines
 * written by hand (other key orders, escapes) read like kiln's own; du's
 * totals, unique and shared bytes; a long history stays quick. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "core/error.h"
#include "manifest/gc.h"
#include "manifest/internal.h"
#include "manifest/manifest.h"
#include "store/store.h"

static char tmpdir[64];

static void shard_key(char out[128], const char *hash)
{
	snprintf(out, 128, "shards/%.2s/%s.jsonl.zst", hash, hash);
}

/* A store object of `size` bytes under key. */
static void put_object(kiln_store *s, const char *key, size_t size)
{
	char *tmp = kiln_test_path(tmpdir, "object.tmp");
	FILE *f = fopen(tmp, "w");

	assert_non_null(f);
	for (size_t i = 0; i < size; i++)
		fputc('x', f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(kiln_store_put_file(s, key, tmp, size), 0);
	unlink(tmp);
	free(tmp);
}

static void put_shard(kiln_store *s, const char *hash, size_t size)
{
	char key[128];

	shard_key(key, hash);
	put_object(s, key, size);
}

static bool has_shard(kiln_store *s, const char *hash)
{
	char key[128];
	int rc;

	shard_key(key, hash);
	rc = kiln_store_stat(s, key, NULL);
	assert_true(rc >= 0);
	return rc == 1;
}

/* One snapshot on ds/<branch> with the given train shards (bytes = sizes[i],
 * 10 records each) and lineage t/0 moved by n*10. */
static void commit_shards(kiln_manifest *m, const char *branch, const char *const *hashes,
                          const uint64_t *sizes, size_t n, char out[41])
{
	static int64_t next;
	kiln_shard_entry *e = calloc(n ? n : 1, sizeof(*e));
	kiln_source_range src = {"t", 0, next, next + 9};
	kiln_lineage_entry lin = {.source = "kafka", .topic = "t", .partition = 0};
	kiln_snapshot snap = {0};

	assert_non_null(e);
	for (size_t i = 0; i < n; i++) {
		snprintf(e[i].hash, sizeof(e[i].hash), "%s", hashes[i]);
		e[i].bytes = sizes[i];
		e[i].raw_bytes = sizes[i] * 4;
		e[i].records = 10;
		e[i].sources = &src;
		e[i].source_count = 1;
		snap.delta.splits[KILN_SPLIT_TRAIN].records += 10;
		snap.delta.splits[KILN_SPLIT_TRAIN].shards++;
		snap.delta.splits[KILN_SPLIT_TRAIN].bytes += sizes[i];
		snap.delta.splits[KILN_SPLIT_TRAIN].raw_bytes += sizes[i] * 4;
	}
	next += (int64_t)n * 10;
	lin.next = next;
	snap.delta.records_in = snap.delta.valid = (uint64_t)n * 10;
	snap.dataset = "ds";
	snap.branch = branch;
	snap.dataset_json = "{\"name\":\"ds\"}";
	snap.shards[KILN_SPLIT_TRAIN] = e;
	snap.shard_count[KILN_SPLIT_TRAIN] = n;
	snap.lineage = &lin;
	snap.lineage_count = 1;
	assert_int_equal(kiln_manifest_commit(m, &snap, out), 0);
	free(e);
}

static void commit1(kiln_manifest *m, const char *branch, const char *hash, uint64_t size, char out[41])
{
	const char *h[1] = {hash};
	uint64_t s[1] = {size};

	commit_shards(m, branch, h, s, 1, out);
}

/* A commit on `ref` that removes hash's line (what a compaction or an erasure
 * would do), made with libgit2 directly. */
static void commit_without(kiln_manifest *m, const char *ref, const char *hash)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_oid tip, blob_id, tree_id, commit_id;
	git_commit *parent;
	git_tree *tree, *new_tree;
	git_tree_entry *e;
	git_blob *blob;
	git_signature *sig;
	git_reference *moved;
	git_tree_update up = {0};
	char path[64];
	char *text, *out, *p;
	size_t n, k = 0;

	snprintf(path, sizeof(path), "splits/train/%.2s.jsonl", hash);
	assert_int_equal(git_reference_name_to_id(&tip, repo, ref), 0);
	assert_int_equal(git_commit_lookup(&parent, repo, &tip), 0);
	assert_int_equal(git_commit_tree(&tree, parent), 0);
	assert_int_equal(git_tree_entry_bypath(&e, tree, path), 0);
	assert_int_equal(git_blob_lookup(&blob, repo, git_tree_entry_id(e)), 0);
	n = (size_t)git_blob_rawsize(blob);
	text = strndup(git_blob_rawcontent(blob), n);
	out = calloc(n + 1, 1);
	assert_non_null(text);
	assert_non_null(out);
	for (p = strtok(text, "\n"); p; p = strtok(NULL, "\n"))
		if (!strstr(p, hash))
			k += (size_t)sprintf(out + k, "%s\n", p);
	assert_true(k < n);
	assert_int_equal(git_blob_create_from_buffer(&blob_id, repo, out, k), 0);
	up.action = GIT_TREE_UPDATE_UPSERT;
	up.id = blob_id;
	up.filemode = GIT_FILEMODE_BLOB;
	up.path = path;
	assert_int_equal(git_tree_create_updated(&tree_id, repo, tree, 1, &up), 0);
	assert_int_equal(git_tree_lookup(&new_tree, repo, &tree_id), 0);
	assert_int_equal(git_signature_now(&sig, "eraser", "eraser@localhost"), 0);
	{
		const git_commit *parents[1] = {parent};

		assert_int_equal(git_commit_create(&commit_id, repo, NULL, sig, sig, NULL, "remove a shard\n",
		                                   new_tree, 1, parents),
		                 0);
	}
	assert_int_equal(git_reference_create(&moved, repo, ref, &commit_id, 1, "remove"), 0);
	git_reference_free(moved);
	git_signature_free(sig);
	git_tree_free(new_tree);
	git_tree_free(tree);
	git_tree_entry_free(e);
	git_blob_free(blob);
	git_commit_free(parent);
	free(text);
	free(out);
}

/* Rewrites the tip of ref as the same commit made at time `when`. */
static void backdate_tip(kiln_manifest *m, const char *ref, int64_t when)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_oid tip, id;
	git_commit *c;
	git_tree *tree;
	git_signature *sig;
	git_reference *moved;
	const git_commit *parents[1];
	size_t np;

	assert_int_equal(git_reference_name_to_id(&tip, repo, ref), 0);
	assert_int_equal(git_commit_lookup(&c, repo, &tip), 0);
	assert_int_equal(git_commit_tree(&tree, c), 0);
	np = git_commit_parentcount(c);
	assert_true(np == 0); /* used on first commits only */
	(void)parents;
	assert_int_equal(git_signature_new(&sig, "kiln", "kiln@localhost", (git_time_t)when, 0), 0);
	assert_int_equal(
	    git_commit_create(&id, repo, NULL, sig, sig, NULL, git_commit_message(c), tree, 0, NULL), 0);
	assert_int_equal(git_reference_create(&moved, repo, ref, &id, 1, "backdate"), 0);
	git_reference_free(moved);
	git_signature_free(sig);
	git_tree_free(tree);
	git_commit_free(c);
}

static void tag(kiln_manifest *m, const char *name, const char *commit_hex)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_object *target;
	git_signature *sig;
	git_oid id;
	char tag_name[64];

	snprintf(tag_name, sizeof(tag_name), "ds/%s", name);
	assert_int_equal(git_revparse_single(&target, repo, commit_hex), 0);
	assert_int_equal(git_signature_now(&sig, "kiln", "kiln@localhost"), 0);
	assert_int_equal(git_tag_create(&id, repo, tag_name, target, sig, "a version\n", 0), 0);
	git_signature_free(sig);
	git_object_free(target);
}

/* A root commit on ref whose tree is splits/train/<name> = text. */
static void commit_blob(kiln_manifest *m, const char *ref, const char *name, const char *text)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_treebuilder *root, *splits, *train;
	git_oid blob, tid, sid, rid, cid;
	git_tree *tree;
	git_signature *sig;
	git_reference *r;

	assert_int_equal(git_blob_create_from_buffer(&blob, repo, text, strlen(text)), 0);
	assert_int_equal(git_treebuilder_new(&train, repo, NULL), 0);
	assert_int_equal(git_treebuilder_insert(NULL, train, name, &blob, GIT_FILEMODE_BLOB), 0);
	assert_int_equal(git_treebuilder_write(&tid, train), 0);
	assert_int_equal(git_treebuilder_new(&splits, repo, NULL), 0);
	assert_int_equal(git_treebuilder_insert(NULL, splits, "train", &tid, GIT_FILEMODE_TREE), 0);
	assert_int_equal(git_treebuilder_write(&sid, splits), 0);
	assert_int_equal(git_treebuilder_new(&root, repo, NULL), 0);
	assert_int_equal(git_treebuilder_insert(NULL, root, "splits", &sid, GIT_FILEMODE_TREE), 0);
	assert_int_equal(git_treebuilder_write(&rid, root), 0);
	assert_int_equal(git_tree_lookup(&tree, repo, &rid), 0);
	assert_int_equal(git_signature_now(&sig, "x", "x@localhost"), 0);
	assert_int_equal(git_commit_create(&cid, repo, NULL, sig, sig, NULL, "hand-made\n", tree, 0, NULL),
	                 0);
	assert_int_equal(git_reference_create(&r, repo, ref, &cid, 1, "hand-made"), 0);
	git_reference_free(r);
	git_signature_free(sig);
	git_tree_free(tree);
	git_treebuilder_free(root);
	git_treebuilder_free(splits);
	git_treebuilder_free(train);
}

typedef struct seen {
	int orphans, missing, foreign;
	char keys[16][128];
	int nkeys;
} seen;

static int record(void *ctx, kiln_gc_object what, const char *key, uint64_t size)
{
	seen *s = ctx;

	(void)size;
	if (what == KILN_GC_ORPHAN)
		s->orphans++;
	else if (what == KILN_GC_MISSING)
		s->missing++;
	else
		s->foreign++;
	if (s->nkeys < 16)
		snprintf(s->keys[s->nkeys++], 128, "%s", key);
	return 0;
}

typedef struct fixture {
	char *repo_path, *store_dir, *store_url;
	kiln_manifest *m;
	kiln_store *s;
} fixture;

static void fixture_open(fixture *f, const char *name)
{
	char n[128];

	snprintf(n, sizeof(n), "%s.git", name);
	f->repo_path = kiln_test_path(tmpdir, n);
	snprintf(n, sizeof(n), "%s-store", name);
	f->store_dir = kiln_test_path(tmpdir, n);
	f->store_url = malloc(strlen(f->store_dir) + 8);
	assert_non_null(f->store_url);
	sprintf(f->store_url, "file://%s", f->store_dir);
	assert_int_equal(kiln_manifest_open(&f->m, f->repo_path), 0);
	assert_int_equal(kiln_store_open(&f->s, f->store_url, NULL), 0);
}

static void fixture_close(fixture *f)
{
	kiln_store_close(f->s);
	kiln_manifest_close(f->m);
	free(f->repo_path);
	free(f->store_dir);
	free(f->store_url);
}

/* ---- default policy: every ref's whole history ----------------------------- */

static void test_default_policy(void **state)
{
	fixture f;
	char a[65], b[65], c[65], orphan[65], c1[41], c2[41];
	kiln_gc_policy all = {.keep_tags = true, .keep_branches = true};
	kiln_gc_stats st;
	seen got = {0};
	char key[128];

	(void)state;
	fixture_open(&f, "default");
	kiln_test_hash(a, "0a", '1');
	kiln_test_hash(b, "0b", '2');
	kiln_test_hash(c, "0a", '3'); /* same fan-out blob as a */
	kiln_test_hash(orphan, "ff", '4');
	put_shard(f.s, a, 100);
	put_shard(f.s, b, 200);
	put_shard(f.s, c, 300);
	put_shard(f.s, orphan, 400);
	put_object(f.s, "quarantine/t/0/0-9.jsonl.zst", 50);
	put_object(f.s, "raw/t/0/0.jsonl", 60);
	{
		const char *h[2] = {a, b};
		uint64_t sz[2] = {100, 200};

		commit_shards(f.m, "main", h, sz, 2, c1);
	}
	commit1(f.m, "main", c, 300, c2);

	/* within the grace period the unreferenced shard is young: a run may
	 * be about to commit it, so even --apply keeps it */
	{
		kiln_gc_policy young = all;

		young.apply = true;
		young.grace = 3600;
		assert_int_equal(kiln_gc(f.m, f.s, &young, record, &got, &st), 0);
		assert_int_equal(st.orphans, 0);
		assert_int_equal(st.young, 1);
		assert_int_equal(st.young_bytes, 400);
		assert_int_equal(st.deleted, 0);
		assert_int_equal(got.orphans, 0);
		assert_true(has_shard(f.s, orphan));
		/* an hour and a bit later it is an orphan */
		young.apply = false;
		young.now = (int64_t)time(NULL) + 3700;
		assert_int_equal(kiln_gc(f.m, f.s, &young, NULL, NULL, &st), 0);
		assert_int_equal(st.orphans, 1);
		assert_int_equal(st.young, 0);
	}

	/* dry run: counts, nothing removed */
	assert_int_equal(kiln_gc(f.m, f.s, &all, record, &got, &st), 0);
	assert_int_equal(st.refs, 1);
	assert_int_equal(st.commits, 2);
	assert_int_equal(st.referenced, 3);
	assert_int_equal(st.objects, 4);
	assert_int_equal(st.object_bytes, 1000);
	assert_int_equal(st.live, 3);
	assert_int_equal(st.live_bytes, 600);
	assert_int_equal(st.orphans, 1);
	assert_int_equal(st.orphan_bytes, 400);
	assert_int_equal(st.deleted, 0);
	assert_int_equal(st.missing, 0);
	assert_int_equal(st.foreign, 0);
	assert_int_equal(got.orphans, 1);
	shard_key(key, orphan);
	assert_string_equal(got.keys[0], key);
	assert_true(has_shard(f.s, orphan));

	/* apply: exactly the orphan goes */
	memset(&got, 0, sizeof(got));
	all.apply = true;
	assert_int_equal(kiln_gc(f.m, f.s, &all, record, &got, &st), 0);
	assert_int_equal(st.deleted, 1);
	assert_int_equal(st.deleted_bytes, 400);
	assert_int_equal(got.orphans, 1);
	assert_false(has_shard(f.s, orphan));
	assert_true(has_shard(f.s, a));
	assert_true(has_shard(f.s, b));
	assert_true(has_shard(f.s, c));
	assert_int_equal(kiln_store_stat(f.s, "quarantine/t/0/0-9.jsonl.zst", NULL), 1);
	assert_int_equal(kiln_store_stat(f.s, "raw/t/0/0.jsonl", NULL), 1);

	/* again: nothing left to do */
	assert_int_equal(kiln_gc(f.m, f.s, &all, NULL, NULL, &st), 0);
	assert_int_equal(st.orphans, 0);
	assert_int_equal(st.deleted, 0);
	assert_int_equal(st.live, 3);
	fixture_close(&f);
}

/* ---- --keep tags: old history goes, tags' history stays ---------------------- */

static void test_keep_tags(void **state)
{
	fixture f;
	char a[65], b[65], x[65], y[65], c1[41], c2[41], c3[41];
	kiln_gc_policy tags = {.keep_tags = true};
	kiln_gc_policy all = {.keep_tags = true, .keep_branches = true};
	kiln_gc_stats st;
	seen got = {0};
	char key[128];

	(void)state;
	fixture_open(&f, "tags");
	kiln_test_hash(a, "1a", '1');
	kiln_test_hash(b, "1b", '2');
	kiln_test_hash(x, "2a", '5');
	kiln_test_hash(y, "2b", '6');
	put_shard(f.s, a, 10);
	put_shard(f.s, b, 20);
	put_shard(f.s, x, 30);
	put_shard(f.s, y, 40);
	commit1(f.m, "main", a, 10, c1);
	commit1(f.m, "main", b, 20, c2);
	/* a's line is removed: only c1 and c2 (history, not the tip) list it */
	commit_without(f.m, "refs/heads/ds/main", a);
	/* another branch whose shard x only its history lists */
	commit1(f.m, "exp", x, 30, c3);
	commit_without(f.m, "refs/heads/ds/exp", x);
	commit1(f.m, "exp", y, 40, c3);

	/* the default keeps all of it */
	assert_int_equal(kiln_gc(f.m, f.s, &all, NULL, NULL, &st), 0);
	assert_int_equal(st.orphans, 0);
	assert_int_equal(st.referenced, 4);

	/* --keep tags without tags: tips only; a and x are orphans */
	assert_int_equal(kiln_gc(f.m, f.s, &tags, record, &got, &st), 0);
	assert_int_equal(st.refs, 2);
	assert_int_equal(st.commits, 2);
	assert_int_equal(st.referenced, 2); /* b (main tip), y (exp tip) */
	assert_int_equal(st.orphans, 2);
	assert_int_equal(st.orphan_bytes, 40);

	/* a tag on c2 brings back c2's history: a is kept, x still goes */
	tag(f.m, "v1", c2);
	memset(&got, 0, sizeof(got));
	tags.apply = true;
	assert_int_equal(kiln_gc(f.m, f.s, &tags, record, &got, &st), 0);
	assert_int_equal(st.refs, 3);
	assert_int_equal(st.commits, 4); /* main tip, exp tip, c2, c1 */
	assert_int_equal(st.orphans, 1);
	assert_int_equal(st.deleted, 1);
	assert_int_equal(got.orphans, 1);
	shard_key(key, x);
	assert_string_equal(got.keys[0], key);
	assert_true(has_shard(f.s, a));
	assert_true(has_shard(f.s, b));
	assert_false(has_shard(f.s, x));
	assert_true(has_shard(f.s, y));

	/* --keep branches keeps branch histories (a's in main) even without tags */
	{
		kiln_gc_policy branches = {.keep_branches = true};

		assert_int_equal(kiln_gc(f.m, f.s, &branches, NULL, NULL, &st), 0);
		assert_int_equal(st.orphans, 0);
		assert_int_equal(st.missing, 1); /* x: exp's history lists it, the store lost it above */
	}
	fixture_close(&f);
}

/* ---- younger-than --------------------------------------------------------- */

static void test_younger_than(void **state)
{
	fixture f;
	char old[65], kept[65], c1[41];
	kiln_gc_policy recent = {.younger_than = 30 * 86400};
	kiln_gc_stats st;

	(void)state;
	fixture_open(&f, "young");
	kiln_test_hash(old, "3a", '1');
	kiln_test_hash(kept, "3b", '2');
	put_shard(f.s, old, 10);
	put_shard(f.s, kept, 20);
	{
		const char *h[2] = {old, kept};
		uint64_t sz[2] = {10, 20};

		commit_shards(f.m, "main", h, sz, 2, c1);
	}
	backdate_tip(f.m, "refs/heads/ds/main", 978307200); /* 2001-01-01 */
	commit_without(f.m, "refs/heads/ds/main", old);

	/* the first commit is years old: old is an orphan */
	assert_int_equal(kiln_gc(f.m, f.s, &recent, NULL, NULL, &st), 0);
	assert_int_equal(st.commits, 1);
	assert_int_equal(st.orphans, 1);
	assert_int_equal(st.orphan_bytes, 10);

	/* seen from 2001-01-02, both commits are young */
	recent.now = 978307200 + 86400;
	assert_int_equal(kiln_gc(f.m, f.s, &recent, NULL, NULL, &st), 0);
	assert_int_equal(st.commits, 2);
	assert_int_equal(st.orphans, 0);
	fixture_close(&f);
}

/* ---- a commit lands while the store is listed --------------------------------- */

typedef struct wrap_store {
	kiln_store base;
	kiln_store *inner;
	kiln_manifest *m;
	const char *late_hash;
	bool after; /* upload and commit late_hash once the listing is done */
} wrap_store;

static int wrap_list(kiln_store *s, const char *prefix, kiln_store_key_cb cb, void *ctx)
{
	wrap_store *w = (wrap_store *)s;
	char commit[41];
	int rc;

	if (w->late_hash && !w->after) {
		/* a run that uploaded its shard before the mark commits it now */
		commit1(w->m, "main", w->late_hash, 77, commit);
		w->late_hash = NULL;
	}
	rc = kiln_store_list(w->inner, prefix, cb, ctx);
	if (w->late_hash) {
		/* a run uploads its shard after the listing passed its place, then
		 * commits before the second marking pass */
		put_shard(w->inner, w->late_hash, 77);
		commit1(w->m, "main", w->late_hash, 77, commit);
		w->late_hash = NULL;
	}
	return rc;
}

static int wrap_stat(kiln_store *s, const char *key, uint64_t *out_size)
{
	return kiln_store_stat(((wrap_store *)s)->inner, key, out_size);
}

static int wrap_remove(kiln_store *s, const char *key)
{
	return kiln_store_remove(((wrap_store *)s)->inner, key);
}

static void test_commit_during_listing(void **state)
{
	static kiln_store_backend backend = {.version = KILN_STORE_BACKEND_VERSION, .scheme = "wrap"};
	fixture f;
	char a[65], late[65], c1[41];
	wrap_store w = {0};
	kiln_gc_policy all = {.keep_tags = true, .keep_branches = true, .apply = true};
	kiln_gc_stats st;

	(void)state;
	fixture_open(&f, "late");
	kiln_test_hash(a, "4a", '1');
	kiln_test_hash(late, "4b", '2');
	put_shard(f.s, a, 10);
	put_shard(f.s, late, 77);
	commit1(f.m, "main", a, 10, c1);
	backend.list = wrap_list;
	backend.remove = wrap_remove;
	w.base.backend = &backend;
	w.base.url = f.store_url;
	w.inner = f.s;
	w.m = f.m;
	w.late_hash = late;
	assert_int_equal(kiln_gc(f.m, &w.base, &all, NULL, NULL, &st), 0);
	assert_int_equal(st.orphans, 0);
	assert_int_equal(st.deleted, 0);
	assert_int_equal(st.live, 2);
	assert_true(has_shard(f.s, late));
	fixture_close(&f);
}

/* The same with a grace period: the late commit's shard is young when listed,
 * and once the second pass marks it, it is live, neither young nor missing. */
static void test_young_commit_during_listing(void **state)
{
	static kiln_store_backend backend = {.version = KILN_STORE_BACKEND_VERSION, .scheme = "wrap"};
	fixture f;
	char a[65], late[65], c1[41];
	wrap_store w = {0};
	kiln_gc_policy graced = {.keep_tags = true, .keep_branches = true, .apply = true, .grace = 3600};
	kiln_gc_stats st;
	seen got = {0};

	(void)state;
	fixture_open(&f, "lateyoung");
	kiln_test_hash(a, "4c", '3');
	kiln_test_hash(late, "4d", '4');
	put_shard(f.s, a, 10);
	put_shard(f.s, late, 77);
	commit1(f.m, "main", a, 10, c1);
	backend.list = wrap_list;
	backend.remove = wrap_remove;
	backend.stat = wrap_stat;
	w.base.backend = &backend;
	w.base.url = f.store_url;
	w.inner = f.s;
	w.m = f.m;
	w.late_hash = late;
	assert_int_equal(kiln_gc(f.m, &w.base, &graced, record, &got, &st), 0);
	assert_int_equal(st.missing, 0);
	assert_int_equal(got.missing, 0);
	assert_int_equal(st.young, 0);
	assert_int_equal(st.live, 2);
	assert_int_equal(st.orphans, 0);
	assert_true(has_shard(f.s, late));
	fixture_close(&f);
}

/* A shard uploaded after the listing passed its place and committed before
 * the second pass is in the store: gc asks the store before calling it
 * missing. */
static void test_upload_after_listing(void **state)
{
	static kiln_store_backend backend = {.version = KILN_STORE_BACKEND_VERSION, .scheme = "wrap"};
	fixture f;
	char a[65], late[65], c1[41];
	wrap_store w = {0};
	kiln_gc_policy all = {.keep_tags = true, .keep_branches = true, .apply = true};
	kiln_gc_stats st;
	seen got = {0};

	(void)state;
	fixture_open(&f, "after");
	kiln_test_hash(a, "4e", '5');
	kiln_test_hash(late, "4f", '6');
	put_shard(f.s, a, 10);
	commit1(f.m, "main", a, 10, c1);
	backend.list = wrap_list;
	backend.remove = wrap_remove;
	backend.stat = wrap_stat;
	w.base.backend = &backend;
	w.base.url = f.store_url;
	w.inner = f.s;
	w.m = f.m;
	w.late_hash = late;
	w.after = true;
	assert_int_equal(kiln_gc(f.m, &w.base, &all, record, &got, &st), 0);
	assert_int_equal(st.missing, 0);
	assert_int_equal(got.missing, 0);
	assert_int_equal(st.live, 2);
	assert_int_equal(st.objects, 2);
	assert_true(has_shard(f.s, late));
	fixture_close(&f);
}

/* ---- missing shards, foreign keys ---------------------------------------------- */

static void test_missing_and_foreign(void **state)
{
	fixture f;
	char a[65], gone[65], c1[41];
	kiln_gc_policy all = {.keep_tags = true, .keep_branches = true, .apply = true};
	kiln_gc_stats st;
	seen got = {0};
	char key[128];

	(void)state;
	fixture_open(&f, "missing");
	kiln_test_hash(a, "5a", '1');
	kiln_test_hash(gone, "5b", '2');
	put_shard(f.s, a, 10);
	{
		const char *h[2] = {a, gone};
		uint64_t sz[2] = {10, 20};

		commit_shards(f.m, "main", h, sz, 2, c1);
	}
	/* not shard names: left alone */
	put_object(f.s, "shards/5a/notes.txt", 5);
	put_object(f.s, "shards/zz/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.jsonl.zst",
	           5);
	assert_int_equal(kiln_gc(f.m, f.s, &all, record, &got, &st), 0);
	assert_int_equal(st.missing, 1);
	assert_int_equal(st.foreign, 2);
	assert_int_equal(st.orphans, 0);
	assert_int_equal(st.deleted, 0);
	assert_int_equal(got.missing, 1);
	assert_int_equal(got.foreign, 2);
	shard_key(key, gone);
	assert_string_equal(got.keys[2], key);
	assert_int_equal(kiln_store_stat(f.s, "shards/5a/notes.txt", NULL), 1);
	fixture_close(&f);
}

/* ---- refusals ------------------------------------------------------------------ */

static void test_refusals(void **state)
{
	fixture f, other;
	char a[65], b[65], c1[41];
	kiln_gc_policy all = {.keep_tags = true, .keep_branches = true, .apply = true};
	kiln_gc_stats st;

	(void)state;
	fixture_open(&f, "refuse");
	kiln_test_hash(a, "6a", '1');
	kiln_test_hash(b, "6b", '2');
	put_shard(f.s, a, 10);

	/* a manifest without refs */
	assert_int_equal(kiln_gc(f.m, f.s, &all, NULL, NULL, &st), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "no branches or tags"));
	assert_true(has_shard(f.s, a));

	/* a store that holds none of the manifest's shards */
	fixture_open(&other, "refuse-other");
	commit1(other.m, "main", b, 20, c1);
	assert_int_equal(kiln_gc(other.m, f.s, &all, NULL, NULL, &st), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "do not belong together"));
	assert_true(has_shard(f.s, a));
	/* as a dry run it only reports */
	all.apply = false;
	assert_int_equal(kiln_gc(other.m, f.s, &all, NULL, NULL, &st), 0);
	assert_int_equal(st.orphans, 1);
	assert_int_equal(st.missing, 1);

	/* a manifest it cannot read: an error naming the file, nothing deleted */
	commit_blob(f.m, "refs/heads/ds/main", "6a.jsonl", "{\"shard\":\"nothex\"}\n");
	all.apply = true;
	assert_int_equal(kiln_gc(f.m, f.s, &all, NULL, NULL, &st), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "splits/train/6a.jsonl line 1"));
	assert_true(has_shard(f.s, a));
	fixture_close(&other);
	fixture_close(&f);
}

/* ---- lines written by hand: other key orders, escapes, blank lines ----------- */

static void test_hand_written_lines(void **state)
{
	fixture f;
	char a[65], b[65], c[65], orphan[65], text[1024];
	kiln_gc_policy all = {.keep_tags = true, .keep_branches = true};
	kiln_gc_stats st;
	kiln_du_report r;

	(void)state;
	fixture_open(&f, "hand");
	kiln_test_hash(a, "8a", '1');
	kiln_test_hash(b, "8a", '2');
	kiln_test_hash(c, "8a", '3');
	kiln_test_hash(orphan, "8a", '4');
	put_shard(f.s, a, 1);
	put_shard(f.s, b, 2);
	put_shard(f.s, c, 3);
	put_shard(f.s, orphan, 4);
	snprintf(text, sizeof(text),
	         "{\"bytes\":1,\"shard\":\"%s\",\"records\":1}\n"
	         "\n"
	         "{ \"shard\" : \"%s\", \"bytes\": 2, \"records\": 2, \"sources\": [{\"shard\": \"x\"}] }\n"
	         "{\"sh\\u0061rd\":\"%s\",\"bytes\":3,\"records\":3}",
	         a, b, c);
	commit_blob(f.m, "refs/heads/ds/main", "8a.jsonl", text);
	assert_int_equal(kiln_gc(f.m, f.s, &all, NULL, NULL, &st), 0);
	assert_int_equal(st.referenced, 3);
	assert_int_equal(st.live, 3);
	assert_int_equal(st.orphans, 1);
	assert_int_equal(kiln_gc_du(f.m, "ds", &r), 0);
	assert_int_equal(r.count, 1);
	assert_int_equal(r.rows[0].shards, 3);
	assert_int_equal(r.rows[0].bytes, 6);
	assert_int_equal(r.rows[0].records, 6);
	kiln_du_report_free(&r);

	/* a line whose "shard" is not a hash stops both */
	snprintf(text, sizeof(text), "{\"shard\":\"%.63s\"}\n", a);
	commit_blob(f.m, "refs/heads/ds/main", "8a.jsonl", text);
	assert_int_equal(kiln_gc(f.m, f.s, &all, NULL, NULL, &st), KILN_EINVALID);
	assert_int_equal(kiln_gc_du(f.m, "ds", &r), KILN_EINVALID);
	snprintf(text, sizeof(text), "{\"shard\":\"%s\",\"bytes\":1}\n{\"bytes\":1}\n", a);
	commit_blob(f.m, "refs/heads/ds/main", "8a.jsonl", text);
	assert_int_equal(kiln_gc(f.m, f.s, &all, NULL, NULL, &st), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "line 2: no \"shard\""));
	fixture_close(&f);
}

/* ---- du -------------------------------------------------------------------- */

static void test_du(void **state)
{
	fixture f;
	char a[65], b[65], c[65], d[65], c1[41], c2[41], c3[41];
	kiln_du_report r;

	(void)state;
	fixture_open(&f, "du");
	kiln_test_hash(a, "7a", '1');
	kiln_test_hash(b, "7b", '2');
	kiln_test_hash(c, "7a", '3');
	kiln_test_hash(d, "7d", '4');
	{
		const char *h[2] = {a, b};
		uint64_t sz[2] = {1000, 2000};

		commit_shards(f.m, "main", h, sz, 2, c1);
	}
	tag(f.m, "v1", c1);
	commit1(f.m, "main", c, 4000, c2);
	tag(f.m, "v2", c2);
	/* exp from v1, plus d */
	{
		git_reference *ref;
		git_oid id;

		assert_int_equal(git_oid_fromstr(&id, c1), 0);
		assert_int_equal(
		    git_reference_create(&ref, kiln_manifest_repo(f.m), "refs/heads/ds/exp", &id, 0, "b"), 0);
		git_reference_free(ref);
	}
	commit1(f.m, "exp", d, 8000, c3);
	/* another dataset's refs are not listed */
	{
		kiln_snapshot snap = {.dataset = "other", .branch = "main", .dataset_json = "{}"};
		char oc[41];

		assert_int_equal(kiln_manifest_commit(f.m, &snap, oc), 0);
	}

	assert_int_equal(kiln_gc_du(f.m, "ds", &r), 0);
	assert_int_equal(r.count, 4);
	/* v1: a b; v2 = main: a b c; exp: a b d */
	assert_string_equal(r.rows[0].name, "v1");
	assert_true(r.rows[0].tag);
	assert_string_equal(r.rows[0].commit, c1);
	assert_int_equal(r.rows[0].shards, 2);
	assert_int_equal(r.rows[0].records, 20);
	assert_int_equal(r.rows[0].bytes, 3000);
	assert_int_equal(r.rows[0].unique_bytes, 0);
	assert_string_equal(r.rows[1].name, "v2");
	assert_int_equal(r.rows[1].bytes, 7000);
	assert_int_equal(r.rows[1].unique_bytes, 0); /* c is on main too */
	assert_string_equal(r.rows[2].name, "main");
	assert_false(r.rows[2].tag);
	assert_int_equal(r.rows[2].shards, 3);
	assert_int_equal(r.rows[2].bytes, 7000);
	assert_int_equal(r.rows[2].unique_bytes, 0);
	assert_string_equal(r.rows[3].name, "exp");
	assert_string_equal(r.rows[3].commit, c3);
	assert_int_equal(r.rows[3].shards, 3);
	assert_int_equal(r.rows[3].bytes, 11000);
	assert_int_equal(r.rows[3].unique_shards, 1);
	assert_int_equal(r.rows[3].unique_bytes, 8000);
	assert_int_equal(r.shards, 4);
	assert_int_equal(r.bytes, 15000);
	kiln_du_report_free(&r);

	/* now main moves on: c is unique to v2 and main together, so neither alone */
	commit1(f.m, "main", "7e00000000000000000000000000000000000000000000000000000000000000", 16000, c2);
	assert_int_equal(kiln_gc_du(f.m, "ds", &r), 0);
	assert_int_equal(r.rows[2].unique_bytes, 16000);
	assert_int_equal(r.rows[1].unique_bytes, 0);
	kiln_du_report_free(&r);

	assert_int_equal(kiln_gc_du(f.m, "nope", &r), KILN_ENOTFOUND);
	assert_int_equal(kiln_gc_du(f.m, "Bad/Name", &r), KILN_EINVALID);
	kiln_du_report_free(NULL);
	fixture_close(&f);
}

/* ---- a long history --------------------------------------------------------------- */

static void test_long_history(void **state)
{
	enum { COMMITS = 300, PER = 4 };
	fixture f;
	kiln_gc_policy all = {.keep_tags = true, .keep_branches = true};
	kiln_gc_stats st;
	char hashes[PER][65], commit[41];
	struct timespec t0, t1;

	(void)state;
	fixture_open(&f, "long");
	for (int i = 0; i < COMMITS; i++) {
		const char *h[PER];
		uint64_t sz[PER];

		for (int j = 0; j < PER; j++) {
			snprintf(hashes[j], 65, "%02x%062x", (i * PER + j) % 256, i * PER + j);
			h[j] = hashes[j];
			sz[j] = 1;
		}
		commit_shards(f.m, "main", h, sz, PER, commit);
	}
	put_shard(f.s, hashes[0], 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(kiln_gc(f.m, f.s, &all, NULL, NULL, &st), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_int_equal(st.commits, COMMITS);
	assert_int_equal(st.referenced, COMMITS * PER);
	assert_int_equal(st.live, 1);
	assert_int_equal(st.missing, COMMITS * PER - 1);
	/* every blob is read once: well under a second even in a sanitizer build */
	assert_true((t1.tv_sec - t0.tv_sec) < 10);
	fixture_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_default_policy),
	    cmocka_unit_test(test_keep_tags),
	    cmocka_unit_test(test_younger_than),
	    cmocka_unit_test(test_commit_during_listing),
	    cmocka_unit_test(test_young_commit_during_listing),
	    cmocka_unit_test(test_upload_after_listing),
	    cmocka_unit_test(test_missing_and_foreign),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_hand_written_lines),
	    cmocka_unit_test(test_du),
	    cmocka_unit_test(test_long_history),
	};

	return kiln_test_git_main(tests, tmpdir, "gc", NULL, NULL);
}
