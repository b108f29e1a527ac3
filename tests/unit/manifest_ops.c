/* Unit tests for the version operations of src/manifest/: branch.c (names
 * checked, a branch created at a version, an existing one never moved),
 * promote.c (a version's stats.json, dataset.json and lineage.json read, a
 * missing file refused, the next vN, the kiln.signed mark) and verify.c (the
 * tree of a good version; shards missing, corrupt or listed with a wrong
 * size; a file missing from the tree; an unsigned commit and tag). The
 * versions are made with kiln_manifest_commit over shards a real shard
 * writer stored in a file store, so verify reads back true objects. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <git2.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "core/error.h"
#include "manifest/branch.h"
#include "manifest/internal.h"
#include "manifest/manifest.h"
#include "manifest/promote.h"
#include "manifest/verify.h"
#include "shard/writer.h"

#define DATASET_JSON "{\"name\":\"ds\",\"split\":{\"scheme\":\"blake2b64-mod10000-v1\"}}"

static char tmpdir[PATH_MAX];

/* One manifest repository and file store, each test its own. */
typedef struct world {
	kiln_manifest *m;
	kiln_store *store;
	char *store_dir;
	kiln_shard_writer *w;
	char commit[41]; /* ds@main after setup */
} world;

static world *open_world(const char *name)
{
	world *x = calloc(1, sizeof(*x));
	char dir[PATH_MAX], url[PATH_MAX + 16], *repo;

	assert_non_null(x);
	snprintf(dir, sizeof(dir), "%s/store", name);
	x->store_dir = kiln_test_path(tmpdir, dir);
	snprintf(url, sizeof(url), "file://%s", x->store_dir);
	assert_int_equal(kiln_store_open(&x->store, url, NULL), 0);
	snprintf(dir, sizeof(dir), "%s/manifest.git", name);
	repo = kiln_test_path(tmpdir, dir);
	assert_int_equal(kiln_manifest_open(&x->m, repo), 0);
	free(repo);
	assert_int_equal(kiln_shard_writer_new(&x->w, x->store, NULL), 0);
	return x;
}

static void close_world(world *x)
{
	kiln_shard_writer_free(x->w);
	kiln_manifest_close(x->m);
	kiln_store_close(x->store);
	free(x->store_dir);
	free(x);
}

/* Stores one shard of the given lines (topic "t", partition 0, offsets from
 * first) and returns its entry (owned by the world's writer). */
static const kiln_shard_entry *store_shard(world *x, const char *const *lines, int64_t first)
{
	const kiln_shard_entry *all;
	size_t n;

	for (size_t i = 0; lines[i]; i++)
		assert_int_equal(
		    kiln_shard_writer_append(x->w, lines[i], strlen(lines[i]), "t", 0, first + (int64_t)i),
		    0);
	assert_int_equal(kiln_shard_writer_finish(x->w), 0);
	all = kiln_shard_writer_shards(x->w, &n);
	assert_true(n > 0);
	return &all[n - 1];
}

/* Commits on ds/<branch> the given train and test shards, with stats that
 * count them (every record valid) and lineage t/0 -> next. */
static void commit_shards(world *x, const char *branch, const kiln_shard_entry *train, size_t n_train,
                          const kiln_shard_entry *test, size_t n_test, int64_t next, char out[41])
{
	kiln_lineage_entry lineage = {.source = "kafka", .topic = "t", .partition = 0, .next = next};
	kiln_snapshot snap = {.dataset = "ds",
	                      .branch = branch,
	                      .dataset_json = DATASET_JSON,
	                      .shards = {train, NULL, test},
	                      .shard_count = {n_train, 0, n_test},
	                      .lineage = &lineage,
	                      .lineage_count = 1};

	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		for (size_t i = 0; i < snap.shard_count[s]; i++) {
			const kiln_shard_entry *e = &snap.shards[s][i];

			snap.delta.splits[s].records += e->records;
			snap.delta.splits[s].shards++;
			snap.delta.splits[s].bytes += e->bytes;
			snap.delta.splits[s].raw_bytes += e->raw_bytes;
			snap.delta.records_in += e->records;
			snap.delta.valid += e->records;
		}
	if (kiln_manifest_commit(x->m, &snap, out) != 0)
		fail_msg("commit: %s", kiln_error_last());
}

/* A world whose ds@main has one train shard (2 records) and one test shard
 * (1 record). */
static world *good_world(const char *name)
{
	static const char *const train[] = {"{\"id\":1}", "{\"id\":2}", NULL}, *const test[] = {"{\"id\":3}",
	                                                                                        NULL};
	world *x = open_world(name);
	kiln_shard_entry a = *store_shard(x, train, 0), b = *store_shard(x, test, 2);

	commit_shards(x, "main", &a, 1, &b, 1, 3, x->commit);
	return x;
}

static kiln_version resolve(world *x, const char *spec)
{
	kiln_version v;

	if (kiln_version_resolve(x->m, spec, &v) != 0)
		fail_msg("%s: %s", spec, kiln_error_last());
	return v;
}

/* Makes refs/heads/ds/<branch> a commit of ds@main's tree without `file`. */
static void commit_without(world *x, const char *branch, const char *file)
{
	git_repository *repo = kiln_manifest_repo(x->m);
	git_commit *tip;
	git_tree *tree, *cut;
	git_treebuilder *tb;
	git_signature *sig;
	git_oid id, tree_id;
	char ref[200];

	assert_int_equal(git_oid_fromstr(&id, x->commit), 0);
	assert_int_equal(git_commit_lookup(&tip, repo, &id), 0);
	assert_int_equal(git_commit_tree(&tree, tip), 0);
	assert_int_equal(git_treebuilder_new(&tb, repo, tree), 0);
	assert_int_equal(git_treebuilder_remove(tb, file), 0);
	assert_int_equal(git_treebuilder_write(&tree_id, tb), 0);
	assert_int_equal(git_tree_lookup(&cut, repo, &tree_id), 0);
	assert_int_equal(git_signature_now(&sig, "kiln test", "test@localhost"), 0);
	snprintf(ref, sizeof(ref), "refs/heads/ds/%s", branch);
	assert_int_equal(git_commit_create_v(&id, repo, ref, sig, sig, NULL, "cut\n", cut, 1, tip), 0);
	git_signature_free(sig);
	git_tree_free(cut);
	git_treebuilder_free(tb);
	git_tree_free(tree);
	git_commit_free(tip);
}

/* ---- branch --------------------------------------------------------------- */

static void test_branch_prepare(void **state)
{
	kiln_branch b;

	(void)state;
	assert_int_equal(kiln_branch_prepare(&b, "ds", "exp", "main"), 0);
	assert_string_equal(b.ref, "refs/heads/ds/exp");
	assert_string_equal(b.from, "ds@main");
	assert_int_equal(kiln_branch_prepare(&b, "ds", "exp", "ds@v1"), 0);
	assert_string_equal(b.from, "ds@v1");

	assert_int_equal(kiln_branch_prepare(&b, "Ds", "exp", "main"), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "dataset name 'Ds' must match [a-z0-9][a-z0-9._-]{0,127}");
	assert_int_equal(kiln_branch_prepare(&b, "ds", "-x", "main"), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "branch name '-x' must match [a-z0-9][a-z0-9._-]{0,127}");
	assert_int_equal(kiln_branch_prepare(&b, "ds", "x.lock", "main"), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "refs/heads/ds/x.lock is not a valid git reference name");
	assert_int_equal(kiln_branch_prepare(&b, "ds", "exp", "other@main"), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "other@main is a version of another dataset than ds");
	assert_int_equal(kiln_branch_prepare(&b, "ds", "exp", "dsx@main"), KILN_EINVALID);
}

static void test_branch_create(void **state)
{
	world *x = good_world("branch");
	kiln_version v, tag;
	kiln_branch b;
	char tag_id[41], c2[41];

	(void)state;
	assert_int_equal(kiln_manifest_tag(x->m, "ds", "v1", x->commit, "first", NULL, tag_id), 0);
	/* a second commit on main: the branch from v1 starts at the first */
	commit_shards(x, "main", NULL, 0, NULL, 0, 3, c2);

	assert_int_equal(kiln_branch_prepare(&b, "ds", "exp", "v1"), 0);
	if (kiln_branch_create(x->m, &b, "ds", "exp") != 0)
		fail_msg("%s", kiln_error_last());
	assert_string_equal(b.base.commit, x->commit);
	assert_string_equal(b.base.ref, "refs/tags/ds/v1");
	v = resolve(x, "ds@exp");
	assert_string_equal(v.commit, x->commit);
	assert_string_equal(v.ref, "refs/heads/ds/exp");

	/* an existing branch is never moved */
	assert_int_equal(kiln_branch_prepare(&b, "ds", "exp", "main"), 0);
	assert_int_equal(kiln_branch_create(x->m, &b, "ds", "exp"), KILN_EMODIFIED);
	assert_string_equal(kiln_error_last(),
	                    "ds@exp already exists (refs/heads/ds/exp); a branch is never moved");
	assert_string_equal(resolve(x, "ds@exp").commit, x->commit);
	assert_int_equal(kiln_branch_prepare(&b, "ds", "main", "v1"), 0);
	assert_int_equal(kiln_branch_create(x->m, &b, "ds", "main"), KILN_EMODIFIED);
	assert_string_equal(resolve(x, "ds@main").commit, c2);

	/* from a version that is not there: nothing made */
	assert_int_equal(kiln_branch_prepare(&b, "ds", "other", "v9"), 0);
	assert_int_equal(kiln_branch_create(x->m, &b, "ds", "other"), KILN_ENOTFOUND);
	assert_int_equal(kiln_version_resolve(x->m, "ds@other", &tag), KILN_ENOTFOUND);
	close_world(x);
}

/* ---- promote -------------------------------------------------------------- */

static void test_promote_inputs(void **state)
{
	world *x = good_world("promote");
	kiln_version v = resolve(x, "ds@main");
	kiln_promote_inputs in;

	(void)state;
	if (kiln_promote_inputs_read(&in, x->m, &v, "ds@main") != 0)
		fail_msg("%s", kiln_error_last());
	assert_int_equal(in.stats.records_in, 3);
	assert_int_equal(in.stats.valid, 3);
	assert_int_equal(in.stats.splits[0].records, 2);
	assert_int_equal(in.stats.splits[0].shards, 1);
	assert_int_equal(in.stats.splits[2].records, 1);
	assert_string_equal(in.definition.name, "ds");
	assert_string_equal(in.definition.split_scheme, "blake2b64-mod10000-v1");
	assert_int_equal(in.lineage.n, 1);
	assert_string_equal(in.lineage.v[0].topic, "t");
	assert_int_equal(in.lineage.v[0].next, 3);
	kiln_promote_inputs_free(&in);

	/* a version without dataset.json or stats.json */
	commit_without(x, "nodef", "dataset.json");
	v = resolve(x, "ds@nodef");
	kiln_error_clear();
	assert_int_equal(kiln_promote_inputs_read(&in, x->m, &v, "ds@nodef"), KILN_ENOTFOUND);
	assert_string_equal(kiln_error_last(), "stats.json or dataset.json is missing");
	kiln_promote_inputs_free(&in);
	commit_without(x, "nostats", "stats.json");
	v = resolve(x, "ds@nostats");
	kiln_error_clear();
	assert_int_equal(kiln_promote_inputs_read(&in, x->m, &v, "ds@nostats"), KILN_ENOTFOUND);
	kiln_promote_inputs_free(&in);
	kiln_promote_inputs_free(NULL);
	close_world(x);
}

static void test_promote_versions(void **state)
{
	world *x = good_world("versions");
	char next[32], tag_id[41];
	git_config *cfg;
	git_buf value = {0};

	(void)state;
	assert_true(kiln_promote_version_name_ok("v1"));
	assert_true(kiln_promote_version_name_ok("v120"));
	assert_false(kiln_promote_version_name_ok("v0"));
	assert_false(kiln_promote_version_name_ok("v01"));
	assert_false(kiln_promote_version_name_ok("v"));
	assert_false(kiln_promote_version_name_ok("v1a"));
	assert_false(kiln_promote_version_name_ok("1"));

	assert_int_equal(kiln_promote_next_version(next, x->m, "ds"), 0);
	assert_string_equal(next, "v1");
	assert_int_equal(kiln_manifest_tag(x->m, "ds", "v1", x->commit, "one", NULL, tag_id), 0);
	assert_int_equal(kiln_manifest_tag(x->m, "ds", "v10", x->commit, "ten", NULL, tag_id), 0);
	assert_int_equal(kiln_manifest_tag(x->m, "ds", "v02", x->commit, "not a version", NULL, tag_id), 0);
	assert_int_equal(kiln_promote_next_version(next, x->m, "ds"), 0);
	assert_string_equal(next, "v11");
	assert_int_equal(kiln_promote_next_version(next, x->m, "other"), 0);
	assert_string_equal(next, "v1");

	assert_int_equal(kiln_promote_mark_signed(x->m), 0);
	assert_int_equal(git_repository_config(&cfg, kiln_manifest_repo(x->m)), 0);
	assert_int_equal(git_config_get_string_buf(&value, cfg, KILN_VERSION_SIGNED_KEY), 0);
	assert_string_equal(value.ptr, "tags");
	git_buf_dispose(&value);
	/* "all" is kept */
	assert_int_equal(git_config_set_string(cfg, KILN_VERSION_SIGNED_KEY, "all"), 0);
	assert_int_equal(kiln_promote_mark_signed(x->m), 0);
	assert_int_equal(git_config_get_string_buf(&value, cfg, KILN_VERSION_SIGNED_KEY), 0);
	assert_string_equal(value.ptr, "all");
	git_buf_dispose(&value);
	git_config_free(cfg);
	close_world(x);
}

/* ---- verify --------------------------------------------------------------- */

/* The problems kiln_verify_tree reported, one a line. */
typedef struct problems {
	char text[4096];
} problems;

static void collect(void *ctx, const char *problem)
{
	problems *p = ctx;
	size_t at = strlen(p->text);

	snprintf(p->text + at, sizeof(p->text) - at, "%s\n", problem);
}

static unsigned verify(world *x, const char *spec, kiln_store *store, problems *p, uint64_t *shards_ok)
{
	kiln_version v = resolve(x, spec);
	kiln_verify_tree_result r;

	memset(p, 0, sizeof(*p));
	if (kiln_verify_tree(&r, x->m, &v, spec, store, collect, p) != 0)
		fail_msg("%s: %s", spec, kiln_error_last());
	*shards_ok = r.shards_ok;
	return r.problems;
}

static void test_verify_good(void **state)
{
	world *x = good_world("good");
	problems p;
	uint64_t ok;

	(void)state;
	assert_int_equal(verify(x, "ds@main", x->store, &p, &ok), 0);
	assert_string_equal(p.text, "");
	assert_int_equal(ok, 2);
	assert_int_equal(verify(x, "ds@main", NULL, &p, &ok), 0);
	assert_int_equal(ok, 0);
	close_world(x);
}

static void test_verify_tampered(void **state)
{
	static const char *const lines[] = {"{\"id\":7}", NULL};
	world *x = good_world("tampered");
	kiln_shard_entry e = *store_shard(x, lines, 3), wrong = e;
	const kiln_shard_entry *listed;
	char key[KILN_SHARD_KEY_CAP], *path, c[41], want[1024];
	problems p;
	uint64_t ok;
	size_t n;

	(void)state;
	/* listed with a wrong size */
	wrong.bytes++;
	commit_shards(x, "size", &wrong, 1, NULL, 0, 4, c);
	assert_int_equal(verify(x, "ds@size", x->store, &p, &ok), 1);
	snprintf(want, sizeof(want),
	         "ds: shard %s (train) is corrupt or tampered: its size differs from the manifest\n", e.hash);
	assert_string_equal(p.text, want);
	assert_int_equal(ok, 0);

	/* listed under a hash no object has */
	wrong = e;
	kiln_test_hash(wrong.hash, "ee", '0');
	commit_shards(x, "hash", &wrong, 1, NULL, 0, 4, c);
	assert_int_equal(verify(x, "ds@hash", x->store, &p, &ok), 1);
	snprintf(want, sizeof(want), "ds: shard %s (train) is missing from the store\n", wrong.hash);
	assert_string_equal(p.text, want);

	/* the object's bytes changed under its name */
	listed = kiln_shard_writer_shards(x->w, &n);
	assert_int_equal(n, 3);
	assert_int_equal(kiln_shard_name(key, sizeof(key), NULL, listed[0].hash, NULL), 0);
	path = kiln_test_path(x->store_dir, key);
	kiln_test_write_file(path, "garbage, not the shard", 0644);
	free(path);
	assert_int_equal(verify(x, "ds@main", x->store, &p, &ok), 1);
	snprintf(want, sizeof(want),
	         "ds: shard %s (train) is corrupt or tampered: its content hash differs from its name\n",
	         listed[0].hash);
	assert_string_equal(p.text, want);
	assert_int_equal(ok, 1);

	/* files missing from the tree */
	commit_without(x, "nostats", "stats.json");
	assert_int_equal(verify(x, "ds@nostats", NULL, &p, &ok), 1);
	assert_string_equal(p.text, "ds@nostats: stats.json is missing\n");
	commit_without(x, "nodef", "dataset.json");
	assert_int_equal(verify(x, "ds@nodef", NULL, &p, &ok), 1);
	assert_string_equal(p.text, "ds@nodef: dataset.json is missing\n");
	close_world(x);
}

static void test_verify_unsigned(void **state)
{
	world *x = good_world("unsigned");
	kiln_verify_sig sig;
	kiln_version v;
	char tag_id[41];

	(void)state;
	v = resolve(x, "ds@main");
	assert_int_equal(kiln_verify_signature(&sig, x->m, &v, NULL), 0);
	assert_int_equal(sig.state, KILN_VERIFY_SIG_NONE);
	assert_false(sig.trusted);

	assert_int_equal(kiln_manifest_tag(x->m, "ds", "v1", x->commit, "promoted", NULL, tag_id), 0);
	v = resolve(x, "ds@v1");
	assert_string_equal(v.tag, tag_id);
	assert_int_equal(kiln_verify_signature(&sig, x->m, &v, NULL), 0);
	assert_int_equal(sig.state, KILN_VERIFY_SIG_NONE);
	assert_false(sig.trusted);
	assert_string_equal(sig.fingerprint, "");
	close_world(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_branch_prepare),  cmocka_unit_test(test_branch_create),
	    cmocka_unit_test(test_promote_inputs),  cmocka_unit_test(test_promote_versions),
	    cmocka_unit_test(test_verify_good),     cmocka_unit_test(test_verify_tampered),
	    cmocka_unit_test(test_verify_unsigned),
	};

	return kiln_test_git_main(tests, tmpdir, "manifest-ops", NULL, NULL);
}
