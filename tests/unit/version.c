/* Unit tests for reading versions (src/manifest/version.c): "ds@ref"
 * resolution in its order (branch, then tag, then commit prefix), annotated
 * and lightweight tags, missing, malformed and ambiguous refs, commits of
 * another dataset, reading files, shard lines in hash order across fan-out
 * blobs, the shard line parser, first-parent history with vN tags, and the
 * diff of two versions (added and removed across blobs, only changed blobs
 * read: git_blob_lookup is interposed to count reads). Fixtures are built
 * with kiln_manifest_commit and plain libgit2 calls. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "core/error.h"
#include "manifest/internal.h"
#include "manifest/manifest.h"
#include "manifest/version.h"

static char tmpdir[64];

/* ---- counting blob reads ------------------------------------------------- */

typedef int (*blob_lookup_fn)(git_blob **, git_repository *, const git_oid *);

static size_t blob_reads;

/* Interposes libgit2's git_blob_lookup for this test binary (libkiln is
 * linked statically, so version.c's calls land here). */
int git_blob_lookup(git_blob **blob, git_repository *repo, const git_oid *id)
{
	static blob_lookup_fn real;

	if (!real)
		real = (blob_lookup_fn)dlsym(RTLD_NEXT, "git_blob_lookup");
	assert_non_null(real);
	blob_reads++;
	return real(blob, repo, id);
}

/* ---- helpers -------------------------------------------------------------- */

/* A 64-hex hash from a number, spread over every hh: BLAKE2b is not needed,
 * a multiplicative mix is enough to scatter the leading digits. */
static void hash_n(char out[65], uint64_t n)
{
	uint64_t x = (n + 1) * 0x9e3779b97f4a7c15ull;

	for (int i = 0; i < 4; i++) {
		snprintf(out + 16 * i, 17, "%016llx", (unsigned long long)x);
		x = x * 0xbf58476d1ce4e5b9ull + 0x94d049bb133111ebull;
	}
	out[64] = '\0';
}

typedef struct shard_set {
	kiln_shard_entry *v[KILN_SPLIT_COUNT];
	size_t n[KILN_SPLIT_COUNT];
} shard_set;

/* One commit on ds/branch with the given shards (records = index + 1). */
static void commit_shards(kiln_manifest *m, const char *ds, const char *branch, const shard_set *set,
                          char out[41])
{
	char json[256];
	kiln_snapshot snap = {0};

	snprintf(json, sizeof(json), "{\"name\":\"%s\",\"split\":{\"scheme\":\"blake2b64-mod10000-v1\"}}",
	         ds);
	snap.dataset = ds;
	snap.branch = branch;
	snap.dataset_json = json;
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		snap.shards[s] = set->v[s];
		snap.shard_count[s] = set->n[s];
	}
	snap.delta.records_in = 1;
	snap.delta.valid = 1;
	assert_int_equal(kiln_manifest_commit(m, &snap, out), 0);
}

/* One commit with one train shard whose hash starts with prefix. */
static void commit_one(kiln_manifest *m, const char *ds, const char *branch, const char *prefix, char fill,
                       char out[41])
{
	kiln_shard_entry e = {.bytes = 10, .raw_bytes = 20, .records = 3};
	shard_set set = {{&e}, {1}};

	kiln_test_hash(e.hash, prefix, fill);
	commit_shards(m, ds, branch, &set, out);
}

static void annotated_tag(kiln_manifest *m, const char *name, const char *commit)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_oid id, tag_id;
	git_object *target;
	git_signature *sig;

	assert_int_equal(git_oid_fromstr(&id, commit), 0);
	assert_int_equal(git_object_lookup(&target, repo, &id, GIT_OBJECT_COMMIT), 0);
	assert_int_equal(git_signature_now(&sig, "kiln test", "test@localhost"), 0);
	assert_int_equal(git_tag_create(&tag_id, repo, name, target, sig, "promoted\n", 0), 0);
	git_signature_free(sig);
	git_object_free(target);
}

static void set_ref(kiln_manifest *m, const char *name, const char *commit)
{
	git_reference *ref;
	git_oid id;

	assert_int_equal(git_oid_fromstr(&id, commit), 0);
	assert_int_equal(git_reference_create(&ref, kiln_manifest_repo(m), name, &id, 1, NULL), 0);
	git_reference_free(ref);
}

static void remove_ref(kiln_manifest *m, const char *name)
{
	assert_int_equal(git_reference_remove(kiln_manifest_repo(m), name), 0);
}

static void expect_resolves(kiln_manifest *m, const char *spec, const char *commit, const char *ref)
{
	kiln_version v;

	if (kiln_version_resolve(m, spec, &v) != 0)
		fail_msg("%s: %s", spec, kiln_error_last());
	assert_string_equal(v.commit, commit);
	assert_string_equal(v.ref, ref);
	assert_string_equal(v.dataset, "ds");
	assert_true(v.time > 0);
}

static void expect_error(kiln_manifest *m, const char *spec, int code, const char *words)
{
	kiln_version v;
	int rc = kiln_version_resolve(m, spec, &v);

	if (rc != code)
		fail_msg("%s: got %d (%s), wanted %d", spec ? spec : "(null)", rc, kiln_error_last(), code);
	if (words && !strstr(kiln_error_last(), words))
		fail_msg("%s: message '%s' lacks '%s'", spec ? spec : "(null)", kiln_error_last(), words);
}

/* ---- resolution ----------------------------------------------------------- */

static void test_resolve_order(void **state)
{
	char *path = kiln_test_path(tmpdir, "resolve.git");
	kiln_manifest *m;
	char c1[41], c2[41], c3[41], spec[128], upper[41];

	(void)state;
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	commit_one(m, "ds", "main", "aa", '1', c1);
	commit_one(m, "ds", "main", "bb", '2', c2);
	commit_one(m, "ds", "exp", "cc", '3', c3);

	/* branches; the dataset alone is its main */
	expect_resolves(m, "ds", c2, "refs/heads/ds/main");
	expect_resolves(m, "ds@main", c2, "refs/heads/ds/main");
	expect_resolves(m, "ds@exp", c3, "refs/heads/ds/exp");

	/* tags: annotated (peeled to the commit) and lightweight */
	annotated_tag(m, "ds/v1", c1);
	set_ref(m, "refs/tags/ds/v9", c3);
	expect_resolves(m, "ds@v1", c1, "refs/tags/ds/v1");
	expect_resolves(m, "ds@v9", c3, "refs/tags/ds/v9");

	/* a branch wins over a tag of the same name */
	set_ref(m, "refs/heads/ds/v1", c3);
	expect_resolves(m, "ds@v1", c3, "refs/heads/ds/v1");
	remove_ref(m, "refs/heads/ds/v1");
	expect_resolves(m, "ds@v1", c1, "refs/tags/ds/v1");

	/* a tag wins over a commit prefix: a tag named like c2's prefix, on c1 */
	snprintf(spec, sizeof(spec), "ds/%.8s", c2);
	annotated_tag(m, spec, c1);
	snprintf(spec, sizeof(spec), "ds@%.8s", c2);
	{
		char ref[64];

		snprintf(ref, sizeof(ref), "refs/tags/ds/%.8s", c2);
		expect_resolves(m, spec, c1, ref);
	}
	/* one more digit is no tag: the commit */
	snprintf(spec, sizeof(spec), "ds@%.9s", c2);
	expect_resolves(m, spec, c2, "");

	/* full ids, short prefixes, upper case */
	snprintf(spec, sizeof(spec), "ds@%s", c3);
	expect_resolves(m, spec, c3, "");
	snprintf(spec, sizeof(spec), "ds@%.12s", c1);
	expect_resolves(m, spec, c1, "");
	for (int i = 0; i < 40; i++)
		upper[i] = c1[i] >= 'a' ? (char)(c1[i] - 'a' + 'A') : c1[i];
	upper[40] = '\0';
	snprintf(spec, sizeof(spec), "ds@%s", upper);
	expect_resolves(m, spec, c1, "");

	kiln_manifest_close(m);
	free(path);
}

static void test_resolve_errors(void **state)
{
	char *path = kiln_test_path(tmpdir, "errors.git"),
	     *missing = kiln_test_path(tmpdir, "missing/repo.git");
	static const char *const malformed[] = {"",          "@main",   "ds@",       "DS@main",
	                                        "ds@a b",    "ds@a..b", "ds@x.lock", "ds@-x",
	                                        "ds@main@x", "d s",     "ds@/x",     "ds@x/y"};
	kiln_manifest *m;
	char c1[41], other[41], spec[128], prefix[41];
	git_oid blob_id;
	size_t common;

	(void)state;
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	commit_one(m, "ds", "main", "aa", '1', c1);
	commit_one(m, "other", "main", "bb", '2', other);

	/* missing */
	expect_error(m, "ds@nope", KILN_ENOTFOUND, "ds@nope: no branch, tag or commit of that name");
	expect_error(m, "nothere", KILN_ENOTFOUND, "no branch, tag or commit of that name");
	expect_error(m, "ds@v1", KILN_ENOTFOUND, NULL);
	expect_error(m, "ds@0000000000000000000000000000000000000000", KILN_ENOTFOUND, NULL);
	/* three digits are not enough for a prefix */
	snprintf(spec, sizeof(spec), "ds@%.3s", c1);
	expect_error(m, spec, KILN_ENOTFOUND, NULL);

	/* malformed */
	expect_error(m, NULL, KILN_EINVALID, NULL);
	for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++)
		expect_error(m, malformed[i], KILN_EINVALID, "not a version");

	/* a commit of another dataset */
	snprintf(spec, sizeof(spec), "ds@%s", other);
	expect_error(m, spec, KILN_EINVALID, "is not a version of ds");
	snprintf(spec, sizeof(spec), "other@%s", other);
	{
		kiln_version v;

		assert_int_equal(kiln_version_resolve(m, spec, &v), 0);
		assert_string_equal(v.dataset, "other");
	}

	/* a tag on something that is not a commit */
	{
		git_oid tree_id;
		git_commit *commit;
		git_oid id;
		git_reference *ref;

		assert_int_equal(git_oid_fromstr(&id, c1), 0);
		assert_int_equal(git_commit_lookup(&commit, kiln_manifest_repo(m), &id), 0);
		git_oid_cpy(&tree_id, git_commit_tree_id(commit));
		git_commit_free(commit);
		assert_int_equal(
		    git_reference_create(&ref, kiln_manifest_repo(m), "refs/tags/ds/v7", &tree_id, 0, NULL),
		    0);
		git_reference_free(ref);
		expect_error(m, "ds@v7", KILN_EINVALID, "does not lead to a commit");
	}

	/* ambiguous: a blob sharing c1's first four digits */
	for (unsigned n = 0;; n++) {
		char text[32], hex[41];
		int len = snprintf(text, sizeof(text), "filler %u\n", n);

		assert_int_equal(git_odb_hash(&blob_id, text, (size_t)len, GIT_OBJECT_BLOB), 0);
		git_oid_tostr(hex, sizeof(hex), &blob_id);
		if (memcmp(hex, c1, 4) == 0) {
			git_oid written;

			assert_int_equal(
			    git_blob_create_from_buffer(&written, kiln_manifest_repo(m), text, (size_t)len),
			    0);
			for (common = 4; hex[common] == c1[common]; common++)
				;
			break;
		}
		assert_true(n < 10000000);
	}
	snprintf(spec, sizeof(spec), "ds@%.4s", c1);
	expect_error(m, spec, KILN_EINVALID, "ambiguous");
	memcpy(prefix, c1, common + 1);
	prefix[common + 1] = '\0';
	snprintf(spec, sizeof(spec), "ds@%s", prefix);
	expect_resolves(m, spec, c1, "");

	/* opening for reading never creates a repository */
	{
		kiln_manifest *none = (kiln_manifest *)1;

		assert_int_equal(kiln_version_open(&none, missing), KILN_ENOTFOUND);
		assert_null(none);
		assert_non_null(strstr(kiln_error_last(), "no such repository"));
		assert_int_equal(access(missing, F_OK), -1);
		assert_int_equal(kiln_version_open(&none, path), 0);
		kiln_manifest_close(none);
	}
	kiln_manifest_close(m);
	free(path);
	free(missing);
}

/* ---- files and shards ----------------------------------------------------- */

/* A tag object put under another version's name (a rollback done with
 * `git update-ref refs/tags/ds/v2 <v1's tag object>`) is refused by
 * resolution, signed or not; kiln_version_lookup still finds it so that
 * kiln verify can report kiln_version_check_tag's verdict. */
static void test_tag_name_binding(void **state)
{
	char *path = kiln_test_path(tmpdir, "binding.git");
	kiln_manifest *m;
	git_repository *repo;
	git_reference *ref;
	git_oid v1_tag, other_tag;
	char c1[41], c2[41], o1[41], v1_hex[41];
	kiln_version v;

	(void)state;
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	repo = kiln_manifest_repo(m);
	commit_one(m, "ds", "main", "aa", '1', c1);
	commit_one(m, "ds", "main", "bb", '2', c2);
	commit_one(m, "other", "main", "cc", '3', o1);
	annotated_tag(m, "ds/v1", c1);
	annotated_tag(m, "ds/v2", c2);
	annotated_tag(m, "other/v2", o1);
	expect_resolves(m, "ds@v2", c2, "refs/tags/ds/v2");
	assert_int_equal(git_reference_name_to_id(&v1_tag, repo, "refs/tags/ds/v1"), 0);
	git_oid_tostr(v1_hex, sizeof(v1_hex), &v1_tag);
	assert_int_equal(kiln_version_resolve(m, "ds@v1", &v), 0);
	assert_string_equal(v.tag, v1_hex);

	/* v1's tag object moved to v2's name */
	assert_int_equal(git_reference_create(&ref, repo, "refs/tags/ds/v2", &v1_tag, 1, NULL), 0);
	git_reference_free(ref);
	expect_error(m, "ds@v2", KILN_EINVALID, "refs/tags/ds/v2: the tag object");
	expect_error(m, "ds@v2", KILN_EINVALID, "is named ds/v1, not ds/v2");
	assert_int_equal(kiln_version_lookup(m, "ds@v2", &v), 0);
	assert_string_equal(v.commit, c1);
	assert_string_equal(v.tag, v1_hex);
	assert_int_equal(kiln_version_check_tag(m, &v), KILN_EINVALID);

	/* another dataset's tag of the same version number */
	assert_int_equal(git_reference_name_to_id(&other_tag, repo, "refs/tags/other/v2"), 0);
	assert_int_equal(git_reference_create(&ref, repo, "refs/tags/ds/v3", &other_tag, 1, NULL), 0);
	git_reference_free(ref);
	expect_error(m, "ds@v3", KILN_EINVALID, "is named other/v2, not ds/v3");

	/* a symbolic reference to v1 under v4's name */
	assert_int_equal(
	    git_reference_symbolic_create(&ref, repo, "refs/tags/ds/v4", "refs/tags/ds/v1", 1, NULL), 0);
	git_reference_free(ref);
	expect_error(m, "ds@v4", KILN_EINVALID, "is named ds/v1, not ds/v4");

	/* a lightweight tag has no name to check; v1 itself still resolves */
	set_ref(m, "refs/tags/ds/v5", c1);
	expect_resolves(m, "ds@v5", c1, "refs/tags/ds/v5");
	assert_int_equal(kiln_version_resolve(m, "ds@v5", &v), 0);
	assert_string_equal(v.tag, "");
	expect_resolves(m, "ds@v1", c1, "refs/tags/ds/v1");
	kiln_manifest_close(m);
	free(path);
}

/* kiln.signed in the repository's config: which versions must be signed. */
static void test_must_be_signed(void **state)
{
	char *path = kiln_test_path(tmpdir, "policy.git");
	kiln_manifest *m;
	git_config *cfg;
	char c1[41], spec[64];
	kiln_version tag, branch, commit;
	bool must;

	(void)state;
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	commit_one(m, "ds", "main", "aa", '1', c1);
	annotated_tag(m, "ds/v1", c1);
	assert_int_equal(kiln_version_resolve(m, "ds@v1", &tag), 0);
	assert_int_equal(kiln_version_resolve(m, "ds@main", &branch), 0);
	snprintf(spec, sizeof(spec), "ds@%s", c1);
	assert_int_equal(kiln_version_resolve(m, spec, &commit), 0);
	assert_string_equal(commit.ref, "");
	assert_int_equal(git_repository_config(&cfg, kiln_manifest_repo(m)), 0);

	/* unset: nothing required */
	must = true;
	assert_int_equal(kiln_version_must_be_signed(m, &tag, &must), 0);
	assert_false(must);

	assert_int_equal(git_config_set_string(cfg, KILN_VERSION_SIGNED_KEY, "tags"), 0);
	assert_int_equal(kiln_version_must_be_signed(m, &tag, &must), 0);
	assert_true(must);
	assert_int_equal(kiln_version_must_be_signed(m, &branch, &must), 0);
	assert_false(must);
	assert_int_equal(kiln_version_must_be_signed(m, &commit, &must), 0);
	assert_false(must);

	assert_int_equal(git_config_set_string(cfg, KILN_VERSION_SIGNED_KEY, "all"), 0);
	assert_int_equal(kiln_version_must_be_signed(m, &branch, &must), 0);
	assert_true(must);
	assert_int_equal(kiln_version_must_be_signed(m, &commit, &must), 0);
	assert_true(must);
	assert_int_equal(git_config_set_string(cfg, KILN_VERSION_SIGNED_KEY, "true"), 0);
	assert_int_equal(kiln_version_must_be_signed(m, &branch, &must), 0);
	assert_true(must);
	assert_int_equal(git_config_set_string(cfg, KILN_VERSION_SIGNED_KEY, "false"), 0);
	assert_int_equal(kiln_version_must_be_signed(m, &tag, &must), 0);
	assert_false(must);

	assert_int_equal(git_config_set_string(cfg, KILN_VERSION_SIGNED_KEY, "sometimes"), 0);
	assert_int_equal(kiln_version_must_be_signed(m, &tag, &must), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "kiln.signed = 'sometimes': expected tags, all or false"));
	git_config_free(cfg);
	kiln_manifest_close(m);
	free(path);
}

static void test_read_files(void **state)
{
	char *path = kiln_test_path(tmpdir, "read.git");
	kiln_manifest *m;
	kiln_version v;
	kiln_buf b = KILN_BUF_INIT(0);
	char c1[41];

	(void)state;
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	commit_one(m, "ds", "main", "aa", '1', c1);
	assert_int_equal(kiln_version_resolve(m, "ds", &v), 0);
	assert_int_equal(kiln_version_read(m, &v, "dataset.json", &b), 1);
	assert_int_equal(b.len,
	                 strlen("{\"name\":\"ds\",\"split\":{\"scheme\":\"blake2b64-mod10000-v1\"}}\n"));
	assert_memory_equal(b.ptr, "{\"name\":\"ds\"", 12);
	kiln_buf_reset(&b);
	assert_int_equal(kiln_version_read(m, &v, "nope.json", &b), 0);
	assert_int_equal(b.len, 0);
	assert_int_equal(kiln_version_read(m, &v, "splits", &b), KILN_EINVALID);
	assert_int_equal(kiln_version_read(m, &v, "stats.json", &b), 1);
	kiln_buf_free(&b);
	kiln_manifest_close(m);
	free(path);
}

typedef struct seen {
	char hashes[64][65];
	uint64_t records[64];
	char topics[256];
	size_t n;
	int stop_at; /* return 42 at this call (1-based); 0 never */
} seen;

static int on_shard(void *ctx, const kiln_shard_entry *e)
{
	seen *s = ctx;

	assert_true(s->n < 64);
	strcpy(s->hashes[s->n], e->hash);
	s->records[s->n] = e->records;
	for (size_t i = 0; i < e->source_count; i++) {
		size_t len = strlen(s->topics);

		snprintf(s->topics + len, sizeof(s->topics) - len, "[%s/%d %lld-%lld]", e->sources[i].topic,
		         (int)e->sources[i].partition, (long long)e->sources[i].first,
		         (long long)e->sources[i].last);
	}
	s->n++;
	return s->stop_at && (int)s->n == s->stop_at ? 42 : 0;
}

static void test_shards_in_hash_order(void **state)
{
	char *path = kiln_test_path(tmpdir, "shards.git");
	kiln_manifest *m;
	kiln_version v;
	char c1[41];
	static const char *const prefixes[] = {"ff", "00", "7a", "7a", "00", "01"};
	static const char fills[] = {'1', '9', '2', '1', '0', '3'};
	const kiln_source_range src[] = {{"user-events", 0, 0, 9}, {"t\xc3\xa9", 3, 10, 19}};
	kiln_shard_entry train[6], dev[1];
	shard_set set = {{train, dev}, {6, 1}};
	seen s = {0};

	(void)state;
	memset(train, 0, sizeof(train));
	memset(dev, 0, sizeof(dev));
	for (int i = 0; i < 6; i++) {
		kiln_test_hash(train[i].hash, prefixes[i], fills[i]);
		train[i].records = (uint64_t)i + 1;
		train[i].bytes = 100;
		train[i].raw_bytes = 400;
	}
	train[2].sources = src;
	train[2].source_count = 2;
	kiln_test_hash(dev[0].hash, "5", '5');
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	commit_shards(m, "ds", "main", &set, c1);
	assert_int_equal(kiln_version_resolve(m, "ds", &v), 0);

	assert_int_equal(kiln_version_shards(m, &v, KILN_SPLIT_TRAIN, on_shard, &s), 0);
	assert_int_equal(s.n, 6);
	for (size_t i = 1; i < s.n; i++)
		assert_true(strcmp(s.hashes[i - 1], s.hashes[i]) < 0);
	assert_memory_equal(s.hashes[0], "0000", 4);
	assert_memory_equal(s.hashes[1], "0099", 4);
	assert_memory_equal(s.hashes[2], "0133", 4);
	assert_memory_equal(s.hashes[3], "7a11", 4);
	assert_memory_equal(s.hashes[4], "7a22", 4);
	assert_int_equal(s.records[4], 3);
	assert_memory_equal(s.hashes[5], "ff11", 4);
	assert_string_equal(s.topics, "[user-events/0 0-9][t\xc3\xa9/3 10-19]");

	memset(&s, 0, sizeof(s));
	assert_int_equal(kiln_version_shards(m, &v, KILN_SPLIT_DEV, on_shard, &s), 0);
	assert_int_equal(s.n, 1);
	memset(&s, 0, sizeof(s));
	assert_int_equal(kiln_version_shards(m, &v, KILN_SPLIT_TEST, on_shard, &s), 0);
	assert_int_equal(s.n, 0);

	/* the callback stops the walk */
	memset(&s, 0, sizeof(s));
	s.stop_at = 2;
	assert_int_equal(kiln_version_shards(m, &v, KILN_SPLIT_TRAIN, on_shard, &s), 42);
	assert_int_equal(s.n, 2);
	kiln_manifest_close(m);
	free(path);
}

/* template with "@H" replaced by h */
static void fill(char *out, size_t cap, const char *template, const char *h)
{
	const char *at = strstr(template, "@H");

	if (!at)
		snprintf(out, cap, "%s", template);
	else
		snprintf(out, cap, "%.*s%s%s", (int)(at - template), template, h, at + 2);
}

static void test_line_parse(void **state)
{
	kiln_buf strings = KILN_BUF_INIT(0);
	kiln_source_range *sources = NULL;
	size_t cap = 0;
	kiln_shard_entry e;
	char line[1024], h[65];
	static const char *const bad[] = {
	    "[]",
	    "{\"shard\":\"@H\",\"bytes\":1,\"raw_bytes\":2}",
	    "{\"shard\":\"@H\",\"bytes\":-1,\"raw_bytes\":2,\"records\":3}",
	    "{\"shard\":\"@H\",\"bytes\":1.5,\"raw_bytes\":2,\"records\":3}",
	    "{\"shard\":\"@H\",\"bytes\":1,\"raw_bytes\":2,\"records\":18446744073709551616}",
	    "{\"shard\":\"@H\",\"bytes\":1,\"raw_bytes\":2,\"records\":3} x",
	    "{\"shard\":\"@H\",\"bytes\":1,\"raw_bytes\":2,\"records\":3,\"sources\":{}}",
	    "{\"shard\":\"@H\",\"bytes\":1,\"raw_bytes\":2,\"records\":3,\"sources\":[{\"topic\":\"t\"}]"
	    "}",
	    "{\"shard\":\"@H\",\"bytes\":1,\"raw_bytes\":2,\"records\":3,\"sources\":[{\"topic\":\"t\","
	    "\"partition\":2147483648,\"first\":0,\"last\":1}]}",
	    "{\"shard\":\"@H\",\"bytes\":1,\"bytes\":1,\"raw_bytes\":2,\"records\":3}",
	    "{\"shard\":\"@H\",\"bytes\":1,\"raw_bytes\":2,\"records\":3",
	};

	(void)state;
	kiln_test_hash(h, "ab", 'c');
	snprintf(line, sizeof(line),
	         "{\"future\":{\"a\":[1,{\"b\":null}]},\"shard\":\"%s\",\"bytes\":10,\"raw_bytes\":20,"
	         "\"records\":3,\"sources\":[{\"topic\":\"t\\u0041\",\"partition\":-1,\"first\":-5,\"last\":"
	         "9223372036854775807,\"x\":true},{\"topic\":\"u\",\"partition\":2,\"first\":0,\"last\":1}]}",
	         h);
	assert_int_equal(kiln_shard_line_parse(line, strlen(line), &e, &strings, &sources, &cap), 0);
	assert_string_equal(e.hash, h);
	assert_int_equal(e.bytes, 10);
	assert_int_equal(e.raw_bytes, 20);
	assert_int_equal(e.records, 3);
	assert_int_equal(e.source_count, 2);
	assert_string_equal(e.sources[0].topic, "tA");
	assert_int_equal(e.sources[0].partition, -1);
	assert_int_equal(e.sources[0].first, -5);
	assert_int_equal(e.sources[0].last, INT64_MAX);
	assert_string_equal(e.sources[1].topic, "u");

	/* no sources at all is fine */
	snprintf(line, sizeof(line), "{\"shard\":\"%s\",\"bytes\":1,\"raw_bytes\":2,\"records\":0}", h);
	kiln_buf_reset(&strings);
	assert_int_equal(kiln_shard_line_parse(line, strlen(line), &e, &strings, &sources, &cap), 0);
	assert_int_equal(e.source_count, 0);
	assert_null(e.sources);

	/* a bad hash */
	snprintf(line, sizeof(line), "{\"shard\":\"%.63s\",\"bytes\":1,\"raw_bytes\":2,\"records\":0}", h);
	assert_int_equal(kiln_shard_line_parse(line, strlen(line), &e, &strings, &sources, &cap),
	                 KILN_EINVALID);
	snprintf(line, sizeof(line), "{\"shard\":\"AB%.62s\",\"bytes\":1,\"raw_bytes\":2,\"records\":0}", h);
	assert_int_equal(kiln_shard_line_parse(line, strlen(line), &e, &strings, &sources, &cap),
	                 KILN_EINVALID);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fill(line, sizeof(line), bad[i], h);
		kiln_buf_reset(&strings);
		if (kiln_shard_line_parse(line, strlen(line), &e, &strings, &sources, &cap) != KILN_EINVALID)
			fail_msg("accepted: %s", line);
		assert_non_null(strstr(kiln_error_last(), "shard line"));
	}
	kiln_buf_free(&strings);
	free(sources);
}

/* ---- history -------------------------------------------------------------- */

typedef struct log_seen {
	char lines[16][200];
	size_t n;
	int stop_at;
} log_seen;

static int on_log(void *ctx, const char *commit, int64_t t, const char *summary, const char *tags)
{
	log_seen *s = ctx;

	assert_true(s->n < 16);
	assert_int_equal(strlen(commit), 40);
	assert_true(t > 0);
	snprintf(s->lines[s->n], sizeof(s->lines[s->n]), "%.8s|%s|%.20s", commit, tags, summary);
	s->n++;
	return s->stop_at && (int)s->n == s->stop_at ? 7 : 0;
}

static void test_log(void **state)
{
	char *path = kiln_test_path(tmpdir, "log.git");
	kiln_manifest *m;
	kiln_version v;
	char c1[41], c2[41], c3[41], side[41], merge[41], other[41], want[200];
	log_seen s = {0};

	(void)state;
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	commit_one(m, "ds", "main", "a1", '1', c1);
	commit_one(m, "ds", "main", "a2", '2', c2);
	commit_one(m, "ds", "main", "a3", '3', c3);
	commit_one(m, "ds", "side", "b1", '4', side);
	commit_one(m, "ds2", "main", "c1", '5', other);
	annotated_tag(m, "ds/v1", c1);
	annotated_tag(m, "ds/v10", c3);
	annotated_tag(m, "ds/v2", c3);
	set_ref(m, "refs/tags/ds/vx", c3);    /* not a version tag */
	set_ref(m, "refs/tags/ds/v3-rc", c2); /* not a version tag */
	set_ref(m, "refs/tags/ds2/v1", c2);   /* another dataset's */

	/* a merge of side into main: log follows the first parent only */
	{
		git_repository *repo = kiln_manifest_repo(m);
		git_commit *p1, *p2;
		git_oid id1, id2, mid;
		git_signature *sig;
		git_reference *ref;

		git_oid_fromstr(&id1, c3);
		git_oid_fromstr(&id2, side);
		assert_int_equal(git_commit_lookup(&p1, repo, &id1), 0);
		assert_int_equal(git_commit_lookup(&p2, repo, &id2), 0);
		assert_int_equal(git_signature_now(&sig, "kiln", "kiln@localhost"), 0);
		{
			const git_commit *parents[2] = {p1, p2};
			git_tree *tree;

			assert_int_equal(git_commit_tree(&tree, p1), 0);
			assert_int_equal(git_commit_create(&mid, repo, NULL, sig, sig, NULL,
			                                   "ds: merge side\n\nbody line\n", tree, 2, parents),
			                 0);
			git_tree_free(tree);
		}
		git_oid_tostr(merge, sizeof(merge), &mid);
		assert_int_equal(git_reference_create(&ref, repo, "refs/heads/ds/main", &mid, 1, NULL), 0);
		git_reference_free(ref);
		git_signature_free(sig);
		git_commit_free(p1);
		git_commit_free(p2);
	}

	assert_int_equal(kiln_version_resolve(m, "ds@main", &v), 0);
	assert_int_equal(kiln_version_log(m, &v, 0, on_log, &s), 0);
	assert_int_equal(s.n, 4);
	snprintf(want, sizeof(want), "%.8s||ds: merge side", merge);
	assert_string_equal(s.lines[0], want);
	snprintf(want, sizeof(want), "%.8s|v2,v10|ds: +1 record (1 val", c3);
	assert_string_equal(s.lines[1], want);
	snprintf(want, sizeof(want), "%.8s||ds: +1 record (1 val", c2);
	assert_string_equal(s.lines[2], want);
	snprintf(want, sizeof(want), "%.8s|v1|ds: +1 record (1 val", c1);
	assert_string_equal(s.lines[3], want);

	/* at most N */
	memset(&s, 0, sizeof(s));
	assert_int_equal(kiln_version_log(m, &v, 2, on_log, &s), 0);
	assert_int_equal(s.n, 2);

	/* from a tag: that commit and what came before it */
	memset(&s, 0, sizeof(s));
	assert_int_equal(kiln_version_resolve(m, "ds@v2", &v), 0);
	assert_int_equal(kiln_version_log(m, &v, 0, on_log, &s), 0);
	assert_int_equal(s.n, 3);

	/* the callback stops the walk */
	memset(&s, 0, sizeof(s));
	s.stop_at = 1;
	assert_int_equal(kiln_version_log(m, &v, 0, on_log, &s), 7);
	assert_int_equal(s.n, 1);

	/* the other dataset's tags stay its own */
	memset(&s, 0, sizeof(s));
	assert_int_equal(kiln_version_resolve(m, "ds2", &v), 0);
	assert_int_equal(kiln_version_log(m, &v, 0, on_log, &s), 0);
	assert_int_equal(s.n, 1);
	snprintf(want, sizeof(want), "%.8s||ds2: +1 record (1 va", other);
	assert_string_equal(s.lines[0], want);
	kiln_manifest_close(m);
	free(path);
}

/* ---- diff ----------------------------------------------------------------- */

typedef struct diff_seen {
	char text[4096];
	size_t added, removed;
	uint64_t records;
} diff_seen;

static int on_diff(void *ctx, kiln_split split, const kiln_shard_entry *e, bool added)
{
	diff_seen *d = ctx;
	size_t n = strlen(d->text);

	snprintf(d->text + n, sizeof(d->text) - n, "%s%c%.4s ", kiln_split_name(split), added ? '+' : '-',
	         e->hash);
	*(added ? &d->added : &d->removed) += 1;
	d->records += e->records;
	return 0;
}

static int stop_diff(void *ctx, kiln_split split, const kiln_shard_entry *e, bool added)
{
	(void)split;
	(void)e;
	(void)added;
	++*(int *)ctx;
	return 9;
}

static void entry(kiln_shard_entry *e, const char *prefix, char fill, uint64_t records)
{
	memset(e, 0, sizeof(*e));
	kiln_test_hash(e->hash, prefix, fill);
	e->records = records;
	e->bytes = records * 10;
	e->raw_bytes = records * 40;
}

static void test_diff(void **state)
{
	char *path = kiln_test_path(tmpdir, "diff.git");
	kiln_manifest *m;
	kiln_version v1, v2, alt;
	char c1[41], c2[41], c3[41];
	kiln_shard_entry t1[4], d1[1], t2[2], s2[1], ta[2];
	diff_seen d;
	int calls = 0;

	(void)state;
	entry(&t1[0], "00", '1', 1);
	entry(&t1[1], "01", '1', 2);
	entry(&t1[2], "01", '5', 3);
	entry(&t1[3], "ab", '1', 4);
	entry(&d1[0], "10", '1', 5);
	entry(&t2[0], "01", '3', 6); /* between the two 01 lines */
	entry(&t2[1], "cd", '1', 7); /* a new blob */
	entry(&s2[0], "20", '1', 8); /* a new split */
	entry(&ta[0], "00", '1', 1); /* the same shard as t1[0] */
	entry(&ta[1], "ee", '1', 9);
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	{
		shard_set a = {{t1, d1}, {4, 1}}, b = {{t2, NULL, s2}, {2, 0, 1}}, c = {{ta}, {2}};

		commit_shards(m, "ds", "main", &a, c1);
		commit_shards(m, "ds", "main", &b, c2);
		commit_shards(m, "ds", "alt", &c, c3);
	}
	{
		char spec[64];

		snprintf(spec, sizeof(spec), "ds@%s", c1);
		assert_int_equal(kiln_version_resolve(m, spec, &v1), 0);
	}
	assert_int_equal(kiln_version_resolve(m, "ds@main", &v2), 0);
	assert_int_equal(kiln_version_resolve(m, "ds@alt", &alt), 0);
	assert_string_equal(v2.commit, c2);
	assert_string_equal(alt.commit, c3);

	/* added only */
	memset(&d, 0, sizeof(d));
	assert_int_equal(kiln_version_diff(m, &v1, &v2, on_diff, &d), 0);
	assert_string_equal(d.text, "test+2011 train+0133 train+cd11 ");
	assert_int_equal(d.added, 3);
	assert_int_equal(d.removed, 0);
	assert_int_equal(d.records, 6 + 7 + 8);

	/* the other way round: removed only */
	memset(&d, 0, sizeof(d));
	assert_int_equal(kiln_version_diff(m, &v2, &v1, on_diff, &d), 0);
	assert_string_equal(d.text, "test-2011 train-0133 train-cd11 ");

	/* both ways, across blobs, dev removed entirely */
	memset(&d, 0, sizeof(d));
	assert_int_equal(kiln_version_diff(m, &v2, &alt, on_diff, &d), 0);
	assert_string_equal(d.text,
	                    "dev-1011 test-2011 train-0111 train-0133 train-0155 train-ab11 train-cd11 "
	                    "train+ee11 ");
	assert_int_equal(d.added, 1);
	assert_int_equal(d.removed, 7);

	/* the same version: nothing */
	memset(&d, 0, sizeof(d));
	assert_int_equal(kiln_version_diff(m, &v2, &v2, on_diff, &d), 0);
	assert_string_equal(d.text, "");

	/* the callback stops it */
	assert_int_equal(kiln_version_diff(m, &v1, &v2, stop_diff, &calls), 9);
	assert_int_equal(calls, 1);
	kiln_manifest_close(m);
	free(path);
}

static int on_count(void *ctx, const kiln_shard_entry *e)
{
	static char prev[65];
	size_t *count = ctx;

	if (*count > 0)
		assert_true(strcmp(prev, e->hash) < 0);
	memcpy(prev, e->hash, sizeof(prev));
	++*count;
	return 0;
}

/* Many shards, three added: the diff reads only the blobs that changed, and
 * a full walk of 100k shards per split stays quick. */
static void test_diff_reads_only_changed_blobs(void **state)
{
	enum { N = 100000 };
	char *path = kiln_test_path(tmpdir, "big.git");
	kiln_manifest *m;
	kiln_version a, b;
	kiln_shard_entry *big = calloc(N, sizeof(*big)), more[3];
	diff_seen d = {0};
	char c1[41], c2[41], spec[64];
	size_t count = 0;
	struct timespec t0, t1;
	double secs;

	(void)state;
	assert_non_null(big);
	for (size_t i = 0; i < N; i++) {
		hash_n(big[i].hash, i);
		big[i].records = 100;
		big[i].bytes = 1000;
		big[i].raw_bytes = 4000;
	}
	entry(&more[0], "00", 'e', 1);
	entry(&more[1], "7f", 'e', 1);
	entry(&more[2], "ff", 'e', 1);
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	{
		shard_set one = {{big, big}, {N, N}}, two = {{more}, {3}};

		commit_shards(m, "ds", "main", &one, c1);
		commit_shards(m, "ds", "main", &two, c2);
	}
	snprintf(spec, sizeof(spec), "ds@%s", c1);
	assert_int_equal(kiln_version_resolve(m, spec, &a), 0);
	assert_int_equal(kiln_version_resolve(m, "ds", &b), 0);
	assert_string_equal(b.commit, c2);

	blob_reads = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(kiln_version_diff(m, &a, &b, on_diff, &d), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_int_equal(d.added, 3);
	assert_int_equal(d.removed, 0);
	assert_true(blob_reads <= 6); /* old and new of three blobs, nothing else */
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(secs < 1.0);

	/* the full walk: every shard once, in order, every blob read once */
	blob_reads = 0;
	assert_int_equal(kiln_version_shards(m, &b, KILN_SPLIT_DEV, on_count, &count), 0);
	assert_int_equal(count, N);
	assert_int_equal(blob_reads, 256);
	free(big);
	kiln_manifest_close(m);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_resolve_order),
	    cmocka_unit_test(test_resolve_errors),
	    cmocka_unit_test(test_read_files),
	    cmocka_unit_test(test_shards_in_hash_order),
	    cmocka_unit_test(test_line_parse),
	    cmocka_unit_test(test_log),
	    cmocka_unit_test(test_diff),
	    cmocka_unit_test(test_diff_reads_only_changed_blobs),
	    cmocka_unit_test(test_tag_name_binding),
	    cmocka_unit_test(test_must_be_signed),
	};

	return kiln_test_git_main(tests, tmpdir, "version", NULL, NULL);
}
