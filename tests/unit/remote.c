/* Unit tests for pushing and fetching dataset refs (src/manifest/remote.c):
 * pushes to a bare remote by path and file:// URL (create, fast-forward, up
 * to date, tags), a non-fast-forward push rebased onto a push from another
 * clone without losing a shard line (lineage and stats merged), histories
 * that started independently in two manifests, a push that loses the
 * compare-and-swap on the remote ref to a concurrent pusher (injected by
 * interposing git_packbuilder_write), refusals (the same partition moved on
 * both sides, other split settings, a different tag), fetch (create,
 * fast-forward, rebase a diverged branch, never overwrite a tag), errors,
 * the git:// transport through a local `git daemon`, and `git fsck --strict`
 * on every repository. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <git2.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "core/error.h"
#include "manifest/internal.h"
#include "manifest/manifest.h"
#include "manifest/remote.h"

#define MAIN "refs/heads/ds/main"

static char tmpdir[64];

/* ---- a concurrent pusher, injected while a push writes its objects -------- */

typedef int (*packbuilder_write_fn)(git_packbuilder *, const char *, unsigned int, git_indexer_progress_cb,
                                    void *);

static void (*during_pack_write)(void);

int git_packbuilder_write(git_packbuilder *pb, const char *path, unsigned int mode,
                          git_indexer_progress_cb cb, void *payload)
{
	static packbuilder_write_fn real;
	void (*hook)(void) = during_pack_write;

	if (!real)
		real = (packbuilder_write_fn)dlsym(RTLD_NEXT, "git_packbuilder_write");
	assert_non_null(real);
	during_pack_write = NULL;
	if (hook)
		hook();
	return real(pb, path, mode, cb, payload);
}

/* ---- helpers -------------------------------------------------------------- */

static kiln_manifest *open_repo(const char *name, char **out_path)
{
	kiln_manifest *m;
	char *p = kiln_test_path(tmpdir, name);

	assert_int_equal(kiln_manifest_open(&m, p), 0);
	if (out_path)
		*out_path = p;
	else
		free(p);
	return m;
}

/* One snapshot on ds/<branch>: train shards (5 records each) from topic/0
 * offsets [first, next), lineage topic/0 -> next, split salt `salt`. */
static void commit_on(kiln_manifest *m, const char *branch, const char *topic, int64_t first, int64_t next,
                      const char *const *hashes, size_t n, const char *salt, char out[41])
{
	kiln_shard_entry e[8];
	kiln_source_range src = {topic, 0, first, next - 1};
	kiln_lineage_entry lin = {.source = "kafka", .topic = topic, .partition = 0, .next = next};
	kiln_snapshot snap = {0};
	char ds[256];

	assert_true(n <= 8);
	memset(e, 0, sizeof(e));
	for (size_t i = 0; i < n; i++) {
		snprintf(e[i].hash, sizeof(e[i].hash), "%s", hashes[i]);
		e[i].bytes = 100;
		e[i].raw_bytes = 400;
		e[i].records = 5;
		e[i].sources = &src;
		e[i].source_count = 1;
	}
	snprintf(
	    ds, sizeof(ds),
	    "{\"name\":\"ds\",\n\"pseudonymisation\":{\"key_id\":\"k1\"},\n\"split\":{\"salt\":\"%s\"}\n}",
	    salt);
	snap.dataset = "ds";
	snap.branch = branch;
	snap.dataset_json = ds;
	snap.shards[KILN_SPLIT_TRAIN] = e;
	snap.shard_count[KILN_SPLIT_TRAIN] = n;
	snap.lineage = &lin;
	snap.lineage_count = 1;
	snap.delta.records_in = (uint64_t)(next - first);
	snap.delta.valid = (uint64_t)n * 5;
	snap.delta.quarantined = snap.delta.records_in - snap.delta.valid;
	snap.delta.quarantined_by_code[KILN_REJECT_TYPE] = snap.delta.quarantined;
	snap.delta.splits[KILN_SPLIT_TRAIN].records = (uint64_t)n * 5;
	snap.delta.splits[KILN_SPLIT_TRAIN].shards = n;
	snap.delta.splits[KILN_SPLIT_TRAIN].bytes = (uint64_t)n * 100;
	snap.delta.splits[KILN_SPLIT_TRAIN].raw_bytes = (uint64_t)n * 400;
	snap.author_name = "tester";
	snap.author_email = "tester@localhost";
	assert_int_equal(kiln_manifest_commit(m, &snap, out), 0);
}

static void commit1(kiln_manifest *m, const char *topic, int64_t first, int64_t next, const char *hash,
                    char out[41])
{
	const char *h[1] = {hash};

	commit_on(m, "main", topic, first, next, h, 1, "s1", out);
}

/* The id `ref` has in the repository at path ("" when absent). */
static void ref_id(const char *path, const char *ref, char out[41])
{
	git_repository *repo;
	git_oid id;

	assert_int_equal(git_repository_open_bare(&repo, path), 0);
	if (git_reference_name_to_id(&id, repo, ref) == 0)
		git_oid_tostr(out, 41, &id);
	else
		out[0] = '\0';
	git_repository_free(repo);
}

static void local_ref(kiln_manifest *m, const char *ref, char out[41])
{
	git_oid id;

	if (git_reference_name_to_id(&id, kiln_manifest_repo(m), ref) == 0)
		git_oid_tostr(out, 41, &id);
	else
		out[0] = '\0';
}

/* The parent of commit spec in the repository at path. */
static void parent_of(const char *path, const char *spec, char out[41])
{
	git_repository *repo;
	git_object *o;

	assert_int_equal(git_repository_open_bare(&repo, path), 0);
	assert_int_equal(git_revparse_single(&o, repo, spec), 0);
	assert_int_equal(git_commit_parentcount((git_commit *)o), 1);
	git_oid_tostr(out, 41, git_commit_parent_id((git_commit *)o, 0));
	git_object_free(o);
	git_repository_free(repo);
}

/* Whether the branch tip at path lists shard `hash`. */
static bool lists_shard(const char *path, const char *hash)
{
	git_repository *repo;
	git_object *o = NULL;
	char spec[128];
	bool found = false;

	snprintf(spec, sizeof(spec), MAIN ":splits/train/%.2s.jsonl", hash);
	assert_int_equal(git_repository_open_bare(&repo, path), 0);
	if (git_revparse_single(&o, repo, spec) == 0) {
		const char *text = git_blob_rawcontent((git_blob *)o);
		size_t n = (size_t)git_blob_rawsize((git_blob *)o);
		char *copy = strndup(text, n);

		found = strstr(copy, hash) != NULL;
		free(copy);
	}
	git_object_free(o);
	git_repository_free(repo);
	return found;
}

/* Number of shard lines under splits/ at the tip of MAIN. */
static size_t count_lines(const char *path)
{
	char cmd[512];
	FILE *p;
	size_t n = 0;

	snprintf(cmd, sizeof(cmd),
	         "git --git-dir='%s' ls-tree -r --name-only " MAIN
	         " splits | while read f; do git --git-dir='%s' show " MAIN ":$f; done | wc -l",
	         path, path);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_int_equal(fscanf(p, "%zu", &n), 1);
	pclose(p);
	return n;
}

typedef struct lineage_text {
	char text[512];
} lineage_text;

static int collect_lineage(void *ctx, const kiln_lineage_entry *e)
{
	lineage_text *l = ctx;
	size_t n = strlen(l->text);

	snprintf(l->text + n, sizeof(l->text) - n, "[%s/%d:%lld]", e->topic, (int)e->partition,
	         (long long)e->next);
	return 0;
}

static void assert_lineage(const char *path, const char *expected)
{
	kiln_manifest *m;
	lineage_text l = {""};

	assert_int_equal(kiln_manifest_open(&m, path), 0);
	assert_int_equal(kiln_manifest_lineage(m, "ds", "main", collect_lineage, &l), 0);
	assert_string_equal(l.text, expected);
	kiln_manifest_close(m);
}

static void assert_stats(const char *path, uint64_t records_in, uint64_t valid, uint64_t shards)
{
	kiln_manifest *m;
	kiln_stats st;

	assert_int_equal(kiln_manifest_open(&m, path), 0);
	assert_int_equal(kiln_manifest_stats(m, "ds", "main", &st), 0);
	assert_int_equal(st.records_in, records_in);
	assert_int_equal(st.valid, valid);
	assert_int_equal(st.quarantined, records_in - valid);
	assert_int_equal(st.quarantined_by_code[KILN_REJECT_TYPE], records_in - valid);
	assert_int_equal(st.splits[KILN_SPLIT_TRAIN].shards, shards);
	assert_int_equal(st.splits[KILN_SPLIT_TRAIN].records, valid);
	kiln_manifest_close(m);
}

static void fsck(const char *path)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "git --git-dir='%s' fsck --strict --no-progress >/dev/null 2>&1", path);
	if (system(cmd) != 0)
		fail_msg("git fsck --strict %s failed", path);
}

/* Only MAIN under refs/heads/ds/: no temporary branch left behind. */
static void assert_only_main(kiln_manifest *m)
{
	git_reference_iterator *it;
	git_reference *r;
	int n = 0;

	assert_int_equal(git_reference_iterator_glob_new(&it, kiln_manifest_repo(m), "refs/heads/ds/*"), 0);
	while (git_reference_next(&r, it) == 0) {
		assert_string_equal(git_reference_name(r), MAIN);
		git_reference_free(r);
		n++;
	}
	git_reference_iterator_free(it);
	assert_int_equal(n, 1);
}

static void make_tag(kiln_manifest *m, const char *name, const char *commit_hex, const char *message)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_object *target;
	git_signature *sig;
	git_oid id;
	char tag_name[64];

	snprintf(tag_name, sizeof(tag_name), "ds/%s", name);
	assert_int_equal(git_revparse_single(&target, repo, commit_hex), 0);
	assert_int_equal(git_signature_new(&sig, "kiln", "kiln@localhost", 1700000000, 0), 0);
	assert_int_equal(git_tag_create(&id, repo, tag_name, target, sig, message, 0), 0);
	git_signature_free(sig);
	git_object_free(target);
}

/* ---- push and fetch: the plain cases -------------------------------------- */

static void test_push_and_fetch(void **state)
{
	char *rpath, *bpath, url[256], c1[41], c2[41], got[41], a1[65], a2[65];
	kiln_manifest *r = open_repo("basic-remote.git", &rpath);
	kiln_manifest *a = open_repo("basic-a.git", NULL);
	kiln_manifest *b = open_repo("basic-b.git", &bpath);

	(void)state;
	kiln_manifest_close(r);
	snprintf(url, sizeof(url), "file://%s", rpath);
	kiln_test_hash(a1, "a1", '1');
	kiln_test_hash(a2, "a2", '2');

	commit1(a, "a", 0, 10, a1, c1);
	assert_int_equal(kiln_manifest_push(a, url, MAIN), 0);
	ref_id(rpath, MAIN, got);
	assert_string_equal(got, c1);
	commit1(a, "a", 10, 20, a2, c2);
	assert_int_equal(kiln_manifest_push(a, rpath, MAIN), 0); /* a plain path works too */
	ref_id(rpath, MAIN, got);
	assert_string_equal(got, c2);
	assert_int_equal(kiln_manifest_push(a, url, MAIN), 0); /* up to date */
	ref_id(rpath, MAIN, got);
	assert_string_equal(got, c2);

	/* a tag */
	make_tag(a, "v1", c1, "v1\n");
	assert_int_equal(kiln_manifest_push(a, url, "refs/tags/ds/v1"), 0);
	{
		char want[41];

		local_ref(a, "refs/tags/ds/v1", want);
		ref_id(rpath, "refs/tags/ds/v1", got);
		assert_string_equal(got, want);
		assert_int_equal(kiln_manifest_push(a, url, "refs/tags/ds/v1"), 0); /* same tag again: fine */
	}

	/* fetch into an empty manifest */
	assert_int_equal(kiln_manifest_fetch(b, url, "ds"), 0);
	local_ref(b, MAIN, got);
	assert_string_equal(got, c2);
	local_ref(b, "refs/tags/ds/v1", got);
	ref_id(rpath, "refs/tags/ds/v1", c1);
	assert_string_equal(got, c1);
	assert_true(lists_shard(bpath, a1));
	assert_true(lists_shard(bpath, a2));
	assert_int_equal(git_repository_head_unborn(kiln_manifest_repo(b)), 0);
	/* a dataset the remote lacks: nothing */
	assert_int_equal(kiln_manifest_fetch(b, url, "other"), 0);

	fsck(rpath);
	fsck(bpath);
	kiln_manifest_close(a);
	kiln_manifest_close(b);
	free(rpath);
	free(bpath);
}

/* ---- a non-fast-forward push is rebased ------------------------------------ */

static void test_push_rebases(void **state)
{
	char *rpath, *apath, c1[41], c2[41], c3[41], got[41], parent[41];
	char a1[65], a2[65], b1[65], b2[65];
	kiln_manifest *r = open_repo("rebase-remote.git", &rpath);
	kiln_manifest *a = open_repo("rebase-a.git", &apath);
	kiln_manifest *b = open_repo("rebase-b.git", NULL);

	(void)state;
	kiln_manifest_close(r);
	kiln_test_hash(a1, "a1", '1');
	kiln_test_hash(a2, "a1", '2'); /* the same fan-out blob as a1 */
	kiln_test_hash(b1, "a1", '3'); /* again: the rebase merges lines inside one blob */
	kiln_test_hash(b2, "b2", '4');

	commit1(a, "a", 0, 10, a1, c1);
	assert_int_equal(kiln_manifest_push(a, rpath, MAIN), 0);
	assert_int_equal(kiln_manifest_fetch(b, rpath, "ds"), 0);
	{
		const char *h[2] = {b1, b2};

		commit_on(b, "main", "b", 0, 12, h, 2, "s1", c2);
	}
	assert_int_equal(kiln_manifest_push(b, rpath, MAIN), 0);

	/* a's second commit was made on c1: the push is not a fast-forward */
	commit1(a, "a", 10, 20, a2, c3);
	assert_int_equal(kiln_manifest_push(a, rpath, MAIN), 0);
	ref_id(rpath, MAIN, got);
	assert_string_not_equal(got, c3);
	parent_of(rpath, MAIN, parent);
	assert_string_equal(parent, c2); /* replayed on top of b's commit */
	local_ref(a, MAIN, parent);
	assert_string_equal(parent, got); /* and a's branch moved there */
	assert_only_main(a);

	/* every shard line is there, once */
	assert_true(lists_shard(rpath, a1));
	assert_true(lists_shard(rpath, a2));
	assert_true(lists_shard(rpath, b1));
	assert_true(lists_shard(rpath, b2));
	assert_int_equal(count_lines(rpath), 4);
	assert_lineage(rpath, "[a/0:20][b/0:12]");
	/* records_in 10 + 12 + 10; valid 5 + 10 + 5; 4 shards */
	assert_stats(rpath, 32, 20, 4);
	fsck(rpath);
	fsck(apath);
	kiln_manifest_close(a);
	kiln_manifest_close(b);
	free(rpath);
	free(apath);
}

/* ---- two manifests that each started the branch ------------------------------ */

static void test_independent_histories(void **state)
{
	char *rpath, *bpath, url[256], c[41], got[41], h1[65], h2[65], h3[65];
	kiln_manifest *r = open_repo("indep-remote.git", &rpath);
	kiln_manifest *a = open_repo("indep-a.git", NULL);
	kiln_manifest *b = open_repo("indep-b.git", &bpath);

	(void)state;
	kiln_manifest_close(r);
	snprintf(url, sizeof(url), "file://%s", rpath);
	kiln_test_hash(h1, "c1", '1');
	kiln_test_hash(h2, "c2", '2');
	kiln_test_hash(h3, "c3", '3');
	commit1(a, "host-a", 0, 10, h1, c);
	commit1(b, "host-b", 0, 10, h2, c);
	commit1(b, "host-b", 10, 30, h3, c);
	assert_int_equal(kiln_manifest_push(a, url, MAIN), 0);
	/* b's two commits share no history with the remote: both are replayed */
	assert_int_equal(kiln_manifest_push(b, url, MAIN), 0);
	ref_id(rpath, MAIN, got);
	local_ref(b, MAIN, c);
	assert_string_equal(got, c);
	assert_true(lists_shard(rpath, h1));
	assert_true(lists_shard(rpath, h2));
	assert_true(lists_shard(rpath, h3));
	assert_lineage(rpath, "[host-a/0:10][host-b/0:30]");
	assert_stats(rpath, 40, 15, 3);
	assert_only_main(b);
	/* a catches up by fetching: a fast-forward */
	assert_int_equal(kiln_manifest_fetch(a, url, "ds"), 0);
	local_ref(a, MAIN, c);
	assert_string_equal(got, c);
	fsck(rpath);
	fsck(bpath);
	kiln_manifest_close(a);
	kiln_manifest_close(b);
	free(rpath);
	free(bpath);
}

/* ---- a concurrent pusher wins the compare-and-swap ----------------------------- */

static kiln_manifest *racer;
static const char *racer_url;

static void racer_pushes(void)
{
	char c[41], h[65];

	kiln_test_hash(h, "d9", '9');
	commit1(racer, "racer", 0, 7, h, c);
	assert_int_equal(kiln_manifest_push(racer, racer_url, MAIN), 0);
}

static void test_push_race(void **state)
{
	char *rpath, c[41], got[41], h1[65], h2[65], h9[65];
	kiln_manifest *r = open_repo("race-remote.git", &rpath);
	kiln_manifest *a = open_repo("race-a.git", NULL);

	(void)state;
	kiln_manifest_close(r);
	racer = open_repo("race-b.git", NULL);
	racer_url = rpath;
	kiln_test_hash(h1, "d1", '1');
	kiln_test_hash(h2, "d2", '2');
	kiln_test_hash(h9, "d9", '9');
	commit1(a, "a", 0, 10, h1, c);
	assert_int_equal(kiln_manifest_push(a, rpath, MAIN), 0);
	assert_int_equal(kiln_manifest_fetch(racer, rpath, "ds"), 0);
	commit1(a, "a", 10, 20, h2, c);
	/* while a writes its objects, the racer moves the remote branch */
	during_pack_write = racer_pushes;
	assert_int_equal(kiln_manifest_push(a, rpath, MAIN), 0);
	assert_null(during_pack_write);
	ref_id(rpath, MAIN, got);
	local_ref(a, MAIN, c);
	assert_string_equal(got, c);
	assert_true(lists_shard(rpath, h1));
	assert_true(lists_shard(rpath, h2));
	assert_true(lists_shard(rpath, h9));
	assert_lineage(rpath, "[a/0:20][racer/0:7]");
	fsck(rpath);
	kiln_manifest_close(racer);
	kiln_manifest_close(a);
	free(rpath);
}

/* ---- refusals ------------------------------------------------------------------ */

static void test_refusals(void **state)
{
	char *rpath, c[41], before[41], after[41], local_before[41], h1[65], h2[65], h3[65];
	kiln_manifest *r = open_repo("refuse-remote.git", &rpath);
	kiln_manifest *a = open_repo("refuse-a.git", NULL);
	kiln_manifest *b = open_repo("refuse-b.git", NULL);
	kiln_manifest *s = open_repo("refuse-s.git", NULL);

	(void)state;
	kiln_manifest_close(r);
	kiln_test_hash(h1, "e1", '1');
	kiln_test_hash(h2, "e2", '2');
	kiln_test_hash(h3, "e3", '3');
	commit1(a, "t", 0, 10, h1, c);
	assert_int_equal(kiln_manifest_push(a, rpath, MAIN), 0);
	ref_id(rpath, MAIN, before);

	/* b curated the same offsets of t/0 on its own */
	commit1(b, "t", 0, 10, h2, c);
	local_ref(b, MAIN, local_before);
	assert_int_equal(kiln_manifest_push(b, rpath, MAIN), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "t/0 was advanced both here"));
	ref_id(rpath, MAIN, after);
	assert_string_equal(after, before);
	local_ref(b, MAIN, c);
	assert_string_equal(c, local_before);
	assert_only_main(b);

	/* s has other split settings */
	{
		const char *h[1] = {h3};

		commit_on(s, "main", "u", 0, 10, h, 1, "other-salt", c);
	}
	assert_int_equal(kiln_manifest_push(s, rpath, MAIN), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "split settings"));
	ref_id(rpath, MAIN, after);
	assert_string_equal(after, before);

	/* a tag is never overwritten, in either direction */
	make_tag(a, "v1", before, "the real v1\n");
	assert_int_equal(kiln_manifest_push(a, rpath, "refs/tags/ds/v1"), 0);
	assert_int_equal(kiln_manifest_fetch(s, rpath, "ds"),
	                 KILN_EINVALID); /* s's main diverged with other salt */
	make_tag(b, "v1", local_before, "another v1\n");
	assert_int_equal(kiln_manifest_push(b, rpath, "refs/tags/ds/v1"), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "never overwritten"));
	ref_id(rpath, "refs/tags/ds/v1", after);
	local_ref(a, "refs/tags/ds/v1", c);
	assert_string_equal(after, c);
	assert_int_equal(kiln_manifest_fetch(b, rpath, "ds"), KILN_EINVALID);
	local_ref(b, "refs/tags/ds/v1", c);
	assert_string_not_equal(c, after);

	/* bad arguments and missing things */
	assert_int_equal(kiln_manifest_push(a, rpath, "refs/heads/ds"), KILN_EINVALID);
	assert_int_equal(kiln_manifest_push(a, rpath, "refs/heads/Ds/main"), KILN_EINVALID);
	assert_int_equal(kiln_manifest_push(a, rpath, "refs/notes/ds/x"), KILN_EINVALID);
	assert_int_equal(kiln_manifest_push(a, rpath, "refs/heads/ds/nope"), KILN_ENOTFOUND);
	assert_true(kiln_manifest_push(a, "/nonexistent/remote.git", MAIN) < 0);
	assert_non_null(strstr(kiln_error_last(), "/nonexistent/remote.git"));
	assert_true(kiln_manifest_fetch(a, "/nonexistent/remote.git", "ds") < 0);
	assert_int_equal(kiln_manifest_fetch(a, rpath, "Bad"), KILN_EINVALID);
	fsck(rpath);
	kiln_manifest_close(a);
	kiln_manifest_close(b);
	kiln_manifest_close(s);
	free(rpath);
}

/* ---- fetch rebases a diverged branch --------------------------------------------- */

static void test_fetch_rebases(void **state)
{
	char *rpath, *bpath, c[41], got[41], parent[41], h1[65], h2[65], h3[65];
	kiln_manifest *r = open_repo("fetch-remote.git", &rpath);
	kiln_manifest *a = open_repo("fetch-a.git", NULL);
	kiln_manifest *b = open_repo("fetch-b.git", &bpath);

	(void)state;
	kiln_manifest_close(r);
	kiln_test_hash(h1, "f1", '1');
	kiln_test_hash(h2, "f2", '2');
	kiln_test_hash(h3, "f3", '3');
	commit1(a, "a", 0, 10, h1, c);
	assert_int_equal(kiln_manifest_push(a, rpath, MAIN), 0);
	assert_int_equal(kiln_manifest_fetch(b, rpath, "ds"), 0);
	commit1(b, "b", 0, 10, h2, c); /* not pushed */
	/* b ahead: a fetch leaves it */
	assert_int_equal(kiln_manifest_fetch(b, rpath, "ds"), 0);
	local_ref(b, MAIN, got);
	assert_string_equal(got, c);
	commit1(a, "a", 10, 20, h3, c);
	assert_int_equal(kiln_manifest_push(a, rpath, MAIN), 0);
	/* now diverged: b's commit is replayed on the remote tip */
	assert_int_equal(kiln_manifest_fetch(b, rpath, "ds"), 0);
	local_ref(b, MAIN, got);
	parent_of(bpath, MAIN, parent);
	ref_id(rpath, MAIN, c);
	assert_string_equal(parent, c);
	assert_true(lists_shard(bpath, h1));
	assert_true(lists_shard(bpath, h2));
	assert_true(lists_shard(bpath, h3));
	assert_lineage(bpath, "[a/0:20][b/0:10]");
	/* and its push is a fast-forward */
	assert_int_equal(kiln_manifest_push(b, rpath, MAIN), 0);
	ref_id(rpath, MAIN, c);
	assert_string_equal(got, c);
	fsck(bpath);
	fsck(rpath);
	kiln_manifest_close(a);
	kiln_manifest_close(b);
	free(rpath);
	free(bpath);
}

/* ---- git:// through git daemon ------------------------------------------------------ */

static int wait_for_port(int port)
{
	for (int i = 0; i < 100; i++) {
		struct sockaddr_in sa = {0};
		int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

		sa.sin_family = AF_INET;
		sa.sin_port = htons((uint16_t)port);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		close(fd);
		if (ok)
			return 0;
		usleep(50000);
	}
	return -1;
}

static void test_git_daemon(void **state)
{
	char *rpath, url[256], c[41], got[41], h1[65], h2[65], h3[65], port_arg[32], base_arg[128];
	kiln_manifest *r, *a, *b;
	int port = 20000 + (int)(getpid() % 20000);
	pid_t daemon;

	(void)state;
	if (system("git daemon --help >/dev/null 2>&1") != 0)
		skip();
	r = open_repo("daemon-remote.git", &rpath);
	a = open_repo("daemon-a.git", NULL);
	b = open_repo("daemon-b.git", NULL);
	kiln_manifest_close(r);
	snprintf(port_arg, sizeof(port_arg), "--port=%d", port);
	snprintf(base_arg, sizeof(base_arg), "--base-path=%s", tmpdir);
	daemon = fork();
	assert_true(daemon >= 0);
	if (daemon == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		dup2(devnull, 2);
		execlp("git", "git", "daemon", "--reuseaddr", "--listen=127.0.0.1", port_arg, "--export-all",
		       "--enable=receive-pack", base_arg, tmpdir, (char *)NULL);
		_exit(127);
	}
	if (wait_for_port(port) < 0) {
		kill(daemon, SIGTERM);
		waitpid(daemon, NULL, 0);
		kiln_manifest_close(a);
		kiln_manifest_close(b);
		free(rpath);
		skip();
	}
	snprintf(url, sizeof(url), "git://127.0.0.1:%d/daemon-remote.git", port);
	kiln_test_hash(h1, "91", '1');
	kiln_test_hash(h2, "92", '2');
	kiln_test_hash(h3, "93", '3');
	commit1(a, "a", 0, 10, h1, c);
	assert_int_equal(kiln_manifest_push(a, url, MAIN), 0);
	assert_int_equal(kiln_manifest_fetch(b, url, "ds"), 0);
	commit1(b, "b", 0, 10, h2, c);
	assert_int_equal(kiln_manifest_push(b, url, MAIN), 0);
	commit1(a, "a", 10, 20, h3, c);
	/* rejected by the client-side check, fetched, rebased, pushed */
	assert_int_equal(kiln_manifest_push(a, url, MAIN), 0);
	ref_id(rpath, MAIN, got);
	local_ref(a, MAIN, c);
	assert_string_equal(got, c);
	assert_true(lists_shard(rpath, h1));
	assert_true(lists_shard(rpath, h2));
	assert_true(lists_shard(rpath, h3));
	assert_lineage(rpath, "[a/0:20][b/0:10]");
	kill(daemon, SIGTERM);
	waitpid(daemon, NULL, 0);
	fsck(rpath);
	kiln_manifest_close(a);
	kiln_manifest_close(b);
	free(rpath);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_push_and_fetch),
	    cmocka_unit_test(test_push_rebases),
	    cmocka_unit_test(test_independent_histories),
	    cmocka_unit_test(test_push_race),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_fetch_rebases),
	    cmocka_unit_test(test_git_daemon),
	};

	return kiln_test_git_main(tests, tmpdir, "remote", NULL, NULL);
}
