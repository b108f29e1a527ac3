/* Unit tests for the manifest repository (src/manifest/manifest.c): creating
 * the bare repository, a first and a second snapshot commit on a branch with
 * the exact bytes of every file read back through libgit2, shard lines merged
 * into existing and new fan-out blobs, duplicate shards kept once, lineage
 * replaced and added, stats accumulated, the compare-and-swap on the branch
 * (a concurrent commit is injected by interposing git_commit_create), bad
 * names and malformed files, a blob written ahead from another thread
 * (kiln_manifest_blob_ahead, what a shard writer's thread does with a
 * filter), and finally `git fsck --strict` and `git log`. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "core/error.h"
#include "manifest/ledger.h"
#include "manifest/manifest.h"

static char tmpdir[64];

/* ---- a concurrent writer, injected between the tip read and the ref move -- */

typedef int (*commit_create_fn)(git_oid *, git_repository *, const char *, const git_signature *,
                                const git_signature *, const char *, const char *, const git_tree *, size_t,
                                const git_commit *[]);

/* When set, runs once inside the next git_commit_create (then clears itself). */
static void (*concurrent_writer)(void);

/* Interposes libgit2's git_commit_create for this test binary: manifest.c's
 * call lands here, so a test can move the branch after kiln_manifest_commit
 * read the tip and before it moves the ref. */
int git_commit_create(git_oid *id, git_repository *repo, const char *update_ref, const git_signature *author,
                      const git_signature *committer, const char *message_encoding, const char *message,
                      const git_tree *tree, size_t parent_count, const git_commit *parents[])
{
	static commit_create_fn real;
	void (*writer)(void) = concurrent_writer;

	if (!real)
		real = (commit_create_fn)dlsym(RTLD_NEXT, "git_commit_create");
	assert_non_null(real);
	concurrent_writer = NULL;
	if (writer)
		writer();
	return real(id, repo, update_ref, author, committer, message_encoding, message, tree, parent_count,
	            parents);
}

/* ---- helpers -------------------------------------------------------------- */

/* The blob at spec ("refs/heads/ds/main:stats.json"), NUL-terminated, or NULL. */
static char *read_spec(const char *repo_dir, const char *spec)
{
	git_repository *repo;
	git_object *obj = NULL;
	char *out = NULL;

	assert_int_equal(git_repository_open_bare(&repo, repo_dir), 0);
	if (git_revparse_single(&obj, repo, spec) == 0) {
		git_blob *blob = (git_blob *)obj;
		size_t n = (size_t)git_blob_rawsize(blob);

		assert_int_equal(git_object_type(obj), GIT_OBJECT_BLOB);
		out = malloc(n + 1);
		assert_non_null(out);
		memcpy(out, git_blob_rawcontent(blob), n);
		out[n] = '\0';
	}
	git_object_free(obj);
	git_repository_free(repo);
	return out;
}

static void assert_spec(const char *repo_dir, const char *spec, const char *expected)
{
	char *got = read_spec(repo_dir, spec);

	assert_non_null(got);
	assert_string_equal(got, expected);
	free(got);
}

static void spec_oid(const char *repo_dir, const char *spec, char out[41])
{
	git_repository *repo;
	git_object *obj;

	assert_int_equal(git_repository_open_bare(&repo, repo_dir), 0);
	assert_int_equal(git_revparse_single(&obj, repo, spec), 0);
	git_oid_tostr(out, 41, git_object_id(obj));
	git_object_free(obj);
	git_repository_free(repo);
}

/* The message of commit `spec`. */
static char *commit_message(const char *repo_dir, const char *spec)
{
	git_repository *repo;
	git_object *obj;
	char *out;

	assert_int_equal(git_repository_open_bare(&repo, repo_dir), 0);
	assert_int_equal(git_revparse_single(&obj, repo, spec), 0);
	assert_int_equal(git_object_type(obj), GIT_OBJECT_COMMIT);
	out = strdup(git_commit_message((git_commit *)obj));
	assert_non_null(out);
	git_object_free(obj);
	git_repository_free(repo);
	return out;
}

/* Lineage read back through kiln_manifest_lineage, as rendered text. */
typedef struct collected {
	char text[2048];
	int count;
} collected;

static int collect(void *ctx, const kiln_lineage_entry *e)
{
	collected *c = ctx;
	size_t n = strlen(c->text);

	snprintf(c->text + n, sizeof(c->text) - n, "[%s|%d|%lld|%s|%llu|%s]", e->topic, (int)e->partition,
	         (long long)e->next, e->path ? e->path : "-", (unsigned long long)e->bytes,
	         e->prefix_blake2b ? e->prefix_blake2b : "-");
	c->count++;
	return 0;
}

static int stop_at_first(void *ctx, const kiln_lineage_entry *e)
{
	(void)e;
	++*(int *)ctx;
	return 42;
}

/* ---- open ----------------------------------------------------------------- */

static void test_open_creates_bare_repository(void **state)
{
	char *path = kiln_test_path(tmpdir, "a/b/new.git"), *file = kiln_test_path(tmpdir, "plain-file");
	kiln_manifest *m = NULL;
	git_repository *repo;
	FILE *f;

	(void)state;
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	assert_non_null(m);
	kiln_manifest_close(m);
	assert_int_equal(git_repository_open_bare(&repo, path), 0);
	assert_true(git_repository_is_bare(repo));
	assert_true(git_repository_is_empty(repo));
	git_repository_free(repo);

	/* opening it again opens, not re-creates */
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	kiln_manifest_close(m);
	kiln_manifest_close(NULL);

	/* a path that is not a repository: an error naming the path */
	f = fopen(file, "w");
	assert_non_null(f);
	fputs("not a repository\n", f);
	fclose(f);
	m = (kiln_manifest *)1;
	assert_true(kiln_manifest_open(&m, file) < 0);
	assert_null(m);
	assert_non_null(strstr(kiln_error_last(), file));
	free(path);
	free(file);
}

/* ---- a blob written ahead -------------------------------------------------- */

struct ahead {
	kiln_manifest *m;
	unsigned char data[70000];
};

static void *write_ahead(void *arg)
{
	struct ahead *a = arg;

	kiln_manifest_blob_ahead(a->m, a->data, sizeof(a->data));
	return NULL;
}

static void test_blob_ahead(void **state)
{
	char *path = kiln_test_path(tmpdir, "ahead.git");
	static struct ahead a;
	git_repository *repo;
	git_blob *blob;
	git_oid id;
	char hex[41];
	pthread_t t;

	(void)state;
	for (size_t i = 0; i < sizeof(a.data); i++)
		a.data[i] = (unsigned char)(i * 2654435761u >> 13);
	assert_int_equal(kiln_manifest_open(&a.m, path), 0);
	assert_int_equal(git_odb_hash(&id, a.data, sizeof(a.data), GIT_OBJECT_BLOB), 0);
	git_oid_tostr(hex, sizeof(hex), &id);
	assert_int_equal(kiln_manifest_has_object(a.m, hex), 0);
	assert_int_equal(pthread_create(&t, NULL, write_ahead, &a), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(kiln_manifest_has_object(a.m, hex), 1);
	kiln_manifest_blob_ahead(a.m, a.data, sizeof(a.data)); /* again: nothing changes */
	kiln_manifest_close(a.m);
	/* the object reads back as those bytes */
	assert_int_equal(git_repository_open_bare(&repo, path), 0);
	assert_int_equal(git_blob_lookup(&blob, repo, &id), 0);
	assert_int_equal(git_blob_rawsize(blob), sizeof(a.data));
	assert_memory_equal(git_blob_rawcontent(blob), a.data, sizeof(a.data));
	git_blob_free(blob);
	git_repository_free(repo);
	free(path);
}

/* ---- names ---------------------------------------------------------------- */

static void test_invalid_names(void **state)
{
	char *path = kiln_test_path(tmpdir, "names.git");
	static const char *const bad[] = {"",    "Upper", "-dash",  ".dot",       "a/b",
	                                  "a b", "a..b",  "x.lock", "caf\xc3\xa9"};
	char long_ok[129], long_bad[130];
	kiln_manifest *m;
	kiln_snapshot snap = {0};
	kiln_stats stats;
	char commit[41];
	collected c = {0};

	(void)state;
	memset(long_ok, 'a', 128);
	long_ok[128] = '\0';
	memset(long_bad, 'a', 129);
	long_bad[129] = '\0';
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	snap.dataset_json = "{}";
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snap.dataset = bad[i];
		snap.branch = "main";
		assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
		snap.dataset = "ds";
		snap.branch = bad[i];
		assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
		assert_int_equal(kiln_manifest_stats(m, bad[i], "main", &stats), KILN_EINVALID);
		assert_int_equal(kiln_manifest_lineage(m, "ds", bad[i], collect, &c), KILN_EINVALID);
	}
	/* a component may end in '.', the whole reference may not */
	snap.dataset = "ds";
	snap.branch = "end.";
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
	snap.dataset = long_bad;
	snap.branch = "main";
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "dataset name"));
	snap.dataset = NULL;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);

	/* 128 characters and the allowed punctuation are fine */
	snap.dataset = long_ok;
	snap.branch = "v1.2_rc-3";
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	assert_int_equal(strlen(commit), 40);

	/* the branch and dataset.json must be sane too */
	snap.dataset = "ds";
	snap.branch = "main";
	snap.dataset_json = "{not json";
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
	snap.dataset_json = NULL;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
	kiln_manifest_close(m);
	free(path);
}

/* ---- a missing branch ----------------------------------------------------- */

static void test_missing_branch_reads_empty(void **state)
{
	char *path = kiln_test_path(tmpdir, "empty.git");
	kiln_manifest *m;
	kiln_stats stats, zero = {0};
	collected c = {0};

	(void)state;
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	memset(&stats, 0xff, sizeof(stats));
	assert_int_equal(kiln_manifest_stats(m, "ds", "main", &stats), 0);
	assert_memory_equal(&stats, &zero, sizeof(stats));
	assert_int_equal(kiln_manifest_lineage(m, "ds", "main", collect, &c), 0);
	assert_int_equal(c.count, 0);
	kiln_manifest_close(m);
	free(path);
}

/* ---- two commits ---------------------------------------------------------- */

#define PREFIX_HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static const char *const first_message = "ds: +1200 records (1187 valid, 13 quarantined), 4 shards\n"
                                         "\n"
                                         "train: +950 records in 2 shards (1.2 MiB)\n"
                                         "dev: +118 records in 1 shard (150 KiB)\n"
                                         "test: +119 records in 1 shard (151 KiB)\n"
                                         "quarantined: type 8, missing_required 5\n"
                                         "sources: user-events/0 0-1199, user-events/10 0-39\n";

static void test_two_commits(void **state)
{
	char *path = kiln_test_path(tmpdir, "two.git");
	kiln_manifest *m;
	char a[65], b[65], c_[65], d[65], e[65], f[65];
	char commit1[41], commit2[41], oid_before[41], oid_after[41], dev_before[41], dev_after[41];
	char expect[4096], cmd[512], line[512];
	kiln_stats stats;
	collected got = {0};
	char *msg;
	FILE *p;
	int n, calls = 0;

	(void)state;
	kiln_test_hash(a, "ab", '1');
	kiln_test_hash(b, "cd", '2');
	kiln_test_hash(c_, "00", '3');
	kiln_test_hash(d, "ff", '4');
	kiln_test_hash(e, "ab", '0'); /* same blob as a, sorts before it */
	kiln_test_hash(f, "1e", '5'); /* a new blob */
	assert_int_equal(kiln_manifest_open(&m, path), 0);

	/* first commit: a new branch */
	{
		const kiln_source_range src_a[] = {{"user-events", 0, 0, 499}};
		const kiln_source_range src_b[] = {{"user-events", 0, 500, 949}};
		const kiln_source_range src_c[] = {{"user-events", 0, 950, 1067}};
		const kiln_source_range src_d[] = {{"user-events", 0, 1068, 1186},
		                                   {"user-events", 10, 0, 39}};
		kiln_shard_entry train[2] = {{.bytes = 558291,
		                              .raw_bytes = 2200000,
		                              .records = 450,
		                              .sources = src_b,
		                              .source_count = 1},
		                             {.bytes = 700000,
		                              .raw_bytes = 2800000,
		                              .records = 500,
		                              .sources = src_a,
		                              .source_count = 1}};
		kiln_shard_entry dev[1] = {{.bytes = 153600,
		                            .raw_bytes = 600000,
		                            .records = 118,
		                            .sources = src_c,
		                            .source_count = 1}};
		kiln_shard_entry test[1] = {{.bytes = 154624,
		                             .raw_bytes = 610000,
		                             .records = 119,
		                             .sources = src_d,
		                             .source_count = 2}};
		const kiln_lineage_entry lineage[] = {
		    {.source = "kafka", .topic = "user-events", .partition = 0, .next = 1200},
		    {.source = "kafka", .topic = "user-events", .partition = 10, .next = 40}};
		kiln_snapshot snap = {
		    .dataset = "ds",
		    .branch = "main",
		    .dataset_json = "{\"name\":\"ds\"}",
		    .shards = {train, dev, test},
		    .shard_count = {2, 1, 1},
		    .lineage = lineage,
		    .lineage_count = 2,
		};

		/* out of order on purpose: lines are sorted by hash */
		strcpy(train[0].hash, b);
		strcpy(train[1].hash, a);
		strcpy(dev[0].hash, c_);
		strcpy(test[0].hash, d);
		snap.delta.records_in = 1200;
		snap.delta.valid = 1187;
		snap.delta.quarantined = 13;
		snap.delta.quarantined_by_code[KILN_REJECT_TYPE] = 8;
		snap.delta.quarantined_by_code[KILN_REJECT_MISSING_REQUIRED] = 5;
		snap.delta.splits[KILN_SPLIT_TRAIN] = (kiln_split_stats){950, 2, 1258291, 5000000};
		snap.delta.splits[KILN_SPLIT_DEV] = (kiln_split_stats){118, 1, 153600, 600000};
		snap.delta.splits[KILN_SPLIT_TEST] = (kiln_split_stats){119, 1, 154624, 610000};
		assert_int_equal(kiln_manifest_commit(m, &snap, commit1), 0);
		assert_int_equal(strlen(commit1), 40);
	}
	spec_oid(path, "refs/heads/ds/main", oid_before);
	assert_string_equal(oid_before, commit1);
	assert_spec(path, "refs/heads/ds/main:dataset.json", "{\"name\":\"ds\"}\n");
	snprintf(expect, sizeof(expect),
	         "{\"shard\":\"%s\",\"bytes\":700000,\"raw_bytes\":2800000,\"records\":500,"
	         "\"sources\":[{\"topic\":\"user-events\",\"partition\":0,\"first\":0,\"last\":499}]}\n",
	         a);
	assert_spec(path, "refs/heads/ds/main:splits/train/ab.jsonl", expect);
	snprintf(expect, sizeof(expect),
	         "{\"shard\":\"%s\",\"bytes\":558291,\"raw_bytes\":2200000,\"records\":450,"
	         "\"sources\":[{\"topic\":\"user-events\",\"partition\":0,\"first\":500,\"last\":949}]}\n",
	         b);
	assert_spec(path, "refs/heads/ds/main:splits/train/cd.jsonl", expect);
	snprintf(expect, sizeof(expect),
	         "{\"shard\":\"%s\",\"bytes\":154624,\"raw_bytes\":610000,\"records\":119,"
	         "\"sources\":[{\"topic\":\"user-events\",\"partition\":0,\"first\":1068,\"last\":1186},"
	         "{\"topic\":\"user-events\",\"partition\":10,\"first\":0,\"last\":39}]}\n",
	         d);
	assert_spec(path, "refs/heads/ds/main:splits/test/ff.jsonl", expect);
	assert_spec(path, "refs/heads/ds/main:lineage.json",
	            "{\n"
	            "  \"partitions\": [\n"
	            "    {\"source\":\"kafka\",\"topic\":\"user-events\",\"partition\":0,\"next\":1200},\n"
	            "    {\"source\":\"kafka\",\"topic\":\"user-events\",\"partition\":10,\"next\":40}\n"
	            "  ]\n"
	            "}\n");
	assert_spec(path, "refs/heads/ds/main:stats.json",
	            "{\n"
	            "  \"records_in\": 1200,\n"
	            "  \"valid\": 1187,\n"
	            "  \"quarantined\": 13,\n"
	            "  \"quarantined_by_code\": {\"missing_required\":5,\"type\":8},\n"
	            "  \"splits\": {\n"
	            "    \"train\": {\"records\":950,\"shards\":2,\"bytes\":1258291,\"raw_bytes\":5000000},\n"
	            "    \"dev\": {\"records\":118,\"shards\":1,\"bytes\":153600,\"raw_bytes\":600000},\n"
	            "    \"test\": {\"records\":119,\"shards\":1,\"bytes\":154624,\"raw_bytes\":610000}\n"
	            "  }\n"
	            "}\n");
	msg = commit_message(path, "refs/heads/ds/main");
	assert_string_equal(msg, first_message);
	free(msg);
	spec_oid(path, "refs/heads/ds/main:splits/train/cd.jsonl", oid_before);
	spec_oid(path, "refs/heads/ds/main:splits/dev", dev_before);

	/* second commit: into the existing ab blob, a new 1e blob, a re-upload of
	 * b (kept once, the committed line stays) and f twice in one batch */
	{
		const kiln_source_range src_e[] = {{"user-events", 0, 1200, 1279}};
		const kiln_source_range src_f[] = {{"user-events", 2, 0, 2}};
		const kiln_source_range src_b2[] = {{"other", 9, 1, 2}};
		kiln_shard_entry train[4] = {
		    {.bytes = 999, .raw_bytes = 9999, .records = 3, .sources = src_f, .source_count = 1},
		    {.bytes = 2048, .raw_bytes = 8192, .records = 80, .sources = src_e, .source_count = 1},
		    {.bytes = 1, .raw_bytes = 1, .records = 1, .sources = src_b2, .source_count = 1},
		    {.bytes = 999, .raw_bytes = 9999, .records = 3, .sources = src_f, .source_count = 1},
		};
		const kiln_lineage_entry lineage[] = {
		    {.source = "kafka", .topic = "user-events", .partition = 0, .next = 1300},
		    {.source = "file",
		     .topic = "files",
		     .partition = 0,
		     .next = 7,
		     .path = "samples/a.jsonl",
		     .bytes = 1234,
		     .prefix_blake2b = PREFIX_HEX},
		    {.source = "kafka", .topic = "we\"ird\t", .partition = 3, .next = 5},
		    {.source = "kafka", .topic = "user-events", .partition = 2, .next = 3},
		};
		kiln_snapshot snap = {
		    .dataset = "ds",
		    .branch = "main",
		    .dataset_json = "{\"name\":\"ds\",\"v\":2}\n",
		    .shards = {train},
		    .shard_count = {4, 0, 0},
		    .lineage = lineage,
		    .lineage_count = 4,
		    .author_name = "Worker 7",
		    .author_email = "w7@example.org",
		};

		strcpy(train[0].hash, f);
		strcpy(train[1].hash, e);
		strcpy(train[2].hash, b);
		strcpy(train[3].hash, f);
		snap.delta.records_in = 100;
		snap.delta.valid = 83;
		snap.delta.quarantined = 17;
		snap.delta.quarantined_by_code[KILN_REJECT_JSON_SYNTAX] = 1;
		snap.delta.quarantined_by_code[KILN_REJECT_TYPE] = 16;
		snap.delta.splits[KILN_SPLIT_TRAIN] = (kiln_split_stats){83, 2, 3047, 18191};
		if (kiln_manifest_commit(m, &snap, commit2) != 0)
			fail_msg("%s", kiln_error_last());
	}
	assert_string_not_equal(commit1, commit2);
	spec_oid(path, "refs/heads/ds/main^", oid_after);
	assert_string_equal(oid_after, commit1);
	assert_spec(path, "refs/heads/ds/main:dataset.json", "{\"name\":\"ds\",\"v\":2}\n");
	snprintf(expect, sizeof(expect),
	         "{\"shard\":\"%s\",\"bytes\":2048,\"raw_bytes\":8192,\"records\":80,"
	         "\"sources\":[{\"topic\":\"user-events\",\"partition\":0,\"first\":1200,\"last\":1279}]}\n"
	         "{\"shard\":\"%s\",\"bytes\":700000,\"raw_bytes\":2800000,\"records\":500,"
	         "\"sources\":[{\"topic\":\"user-events\",\"partition\":0,\"first\":0,\"last\":499}]}\n",
	         e, a);
	assert_spec(path, "refs/heads/ds/main:splits/train/ab.jsonl", expect);
	snprintf(expect, sizeof(expect),
	         "{\"shard\":\"%s\",\"bytes\":999,\"raw_bytes\":9999,\"records\":3,"
	         "\"sources\":[{\"topic\":\"user-events\",\"partition\":2,\"first\":0,\"last\":2}]}\n",
	         f);
	assert_spec(path, "refs/heads/ds/main:splits/train/1e.jsonl", expect);
	/* untouched blobs and trees keep their ids: diffs stay local */
	spec_oid(path, "refs/heads/ds/main:splits/train/cd.jsonl", oid_after);
	assert_string_equal(oid_before, oid_after);
	spec_oid(path, "refs/heads/ds/main:splits/dev", dev_after);
	assert_string_equal(dev_before, dev_after);
	assert_spec(path, "refs/heads/ds/main:lineage.json",
	            "{\n"
	            "  \"partitions\": [\n"
	            "    "
	            "{\"source\":\"file\",\"topic\":\"files\",\"partition\":0,\"next\":7,\"path\":\"samples/"
	            "a.jsonl\",\"bytes\":1234,"
	            "\"prefix_blake2b\":\"" PREFIX_HEX "\"},\n"
	            "    {\"source\":\"kafka\",\"topic\":\"user-events\",\"partition\":0,\"next\":1300},\n"
	            "    {\"source\":\"kafka\",\"topic\":\"user-events\",\"partition\":2,\"next\":3},\n"
	            "    {\"source\":\"kafka\",\"topic\":\"user-events\",\"partition\":10,\"next\":40},\n"
	            "    {\"source\":\"kafka\",\"topic\":\"we\\\"ird\\t\",\"partition\":3,\"next\":5}\n"
	            "  ]\n"
	            "}\n");
	assert_spec(
	    path, "refs/heads/ds/main:stats.json",
	    "{\n"
	    "  \"records_in\": 1300,\n"
	    "  \"valid\": 1270,\n"
	    "  \"quarantined\": 30,\n"
	    "  \"quarantined_by_code\": {\"json_syntax\":1,\"missing_required\":5,\"type\":24},\n"
	    "  \"splits\": {\n"
	    "    \"train\": {\"records\":1033,\"shards\":4,\"bytes\":1261338,\"raw_bytes\":5018191},\n"
	    "    \"dev\": {\"records\":118,\"shards\":1,\"bytes\":153600,\"raw_bytes\":600000},\n"
	    "    \"test\": {\"records\":119,\"shards\":1,\"bytes\":154624,\"raw_bytes\":610000}\n"
	    "  }\n"
	    "}\n");
	msg = commit_message(path, "refs/heads/ds/main");
	assert_string_equal(
	    msg, "ds: +100 records (83 valid, 17 quarantined), 2 shards\n"
	         "\n"
	         "train: +83 records in 2 shards (3.0 KiB)\n"
	         "quarantined: type 16, json_syntax 1\n"
	         "sources: user-events/0 1200-1299, files/0 next 7, we\"ird?/3 next 5, user-events/2 0-2\n");
	free(msg);
	{
		git_repository *repo;
		git_object *obj;
		const git_signature *author;

		assert_int_equal(git_repository_open_bare(&repo, path), 0);
		assert_int_equal(git_revparse_single(&obj, repo, "refs/heads/ds/main"), 0);
		author = git_commit_author((git_commit *)obj);
		assert_string_equal(author->name, "Worker 7");
		assert_string_equal(author->email, "w7@example.org");
		git_object_free(obj);
		assert_int_equal(git_revparse_single(&obj, repo, "refs/heads/ds/main^"), 0);
		author = git_commit_committer((git_commit *)obj);
		assert_string_equal(author->name, "kiln");
		assert_string_equal(author->email, "kiln@localhost");
		git_object_free(obj);
		git_repository_free(repo);
	}

	/* read back through the API */
	assert_int_equal(kiln_manifest_lineage(m, "ds", "main", collect, &got), 0);
	assert_int_equal(got.count, 5);
	assert_string_equal(got.text,
	                    "[files|0|7|samples/a.jsonl|1234|" PREFIX_HEX "]"
	                    "[user-events|0|1300|-|0|-][user-events|2|3|-|0|-][user-events|10|40|-|0|-]"
	                    "[we\"ird\t|3|5|-|0|-]");
	assert_int_equal(kiln_manifest_lineage(m, "ds", "main", stop_at_first, &calls), 42);
	assert_int_equal(calls, 1);
	assert_int_equal(kiln_manifest_stats(m, "ds", "main", &stats), 0);
	assert_int_equal(stats.records_in, 1300);
	assert_int_equal(stats.valid, 1270);
	assert_int_equal(stats.quarantined, 30);
	assert_int_equal(stats.quarantined_by_code[KILN_REJECT_JSON_SYNTAX], 1);
	assert_int_equal(stats.quarantined_by_code[KILN_REJECT_MISSING_REQUIRED], 5);
	assert_int_equal(stats.quarantined_by_code[KILN_REJECT_TYPE], 24);
	assert_int_equal(stats.quarantined_by_code[KILN_REJECT_RANGE], 0);
	assert_int_equal(stats.splits[KILN_SPLIT_TRAIN].records, 1033);
	assert_int_equal(stats.splits[KILN_SPLIT_TRAIN].shards, 4);
	assert_int_equal(stats.splits[KILN_SPLIT_TRAIN].bytes, 1261338);
	assert_int_equal(stats.splits[KILN_SPLIT_TRAIN].raw_bytes, 5018191);
	assert_int_equal(stats.splits[KILN_SPLIT_DEV].records, 118);
	assert_int_equal(stats.splits[KILN_SPLIT_TEST].raw_bytes, 610000);
	kiln_manifest_close(m);

	/* stock git agrees */
	snprintf(cmd, sizeof(cmd), "git --git-dir='%s' fsck --strict --no-progress 2>&1", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) /* only notices, like "HEAD points to an unborn branch" */
		if (strncmp(line, "notice:", 7) != 0)
			fail_msg("git fsck --strict: %s", line);
	assert_int_equal(pclose(p), 0);
	snprintf(cmd, sizeof(cmd), "git --git-dir='%s' log --oneline refs/heads/ds/main", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	for (n = 0; fgets(line, sizeof(line), p); n++) {
		assert_true(n < 2);
		assert_non_null(
		    strstr(line, n == 0 ? "ds: +100 records (83 valid, 17 quarantined), 2 shards"
		                        : "ds: +1200 records (1187 valid, 13 quarantined), 4 shards"));
	}
	assert_int_equal(pclose(p), 0);
	assert_int_equal(n, 2);
	free(path);
}

/* ---- compare-and-swap ----------------------------------------------------- */

static char *cas_path;
static char concurrent_commit[41];

static void commit_elsewhere(void)
{
	const kiln_lineage_entry lineage[] = {{.source = "kafka", .topic = "t", .partition = 0, .next = 500}};
	kiln_snapshot snap = {
	    .dataset = "ds", .branch = "main", .dataset_json = "{}", .lineage = lineage, .lineage_count = 1};
	kiln_manifest *other;

	snap.delta.records_in = snap.delta.valid = 500;
	assert_int_equal(kiln_manifest_open(&other, cas_path), 0);
	assert_int_equal(kiln_manifest_commit(other, &snap, concurrent_commit), 0);
	kiln_manifest_close(other);
}

static void assert_tip_is_concurrent(kiln_manifest *m)
{
	char tip[41];
	collected got = {0};

	spec_oid(cas_path, "refs/heads/ds/main", tip);
	assert_string_equal(tip, concurrent_commit);
	assert_int_equal(kiln_manifest_lineage(m, "ds", "main", collect, &got), 0);
	assert_string_equal(got.text, "[t|0|500|-|0|-]");
}

static void test_compare_and_swap(void **state)
{
	const kiln_lineage_entry lineage[] = {{.source = "kafka", .topic = "t", .partition = 0, .next = 100}};
	kiln_snapshot snap = {
	    .dataset = "ds", .branch = "main", .dataset_json = "{}", .lineage = lineage, .lineage_count = 1};
	kiln_manifest *m;
	char commit[41], first_concurrent[41], parent[41];
	kiln_stats stats;

	(void)state;
	cas_path = kiln_test_path(tmpdir, "cas.git");
	snap.delta.records_in = snap.delta.valid = 100;
	assert_int_equal(kiln_manifest_open(&m, cas_path), 0);

	/* a new branch created by another writer after the tip was read */
	concurrent_writer = commit_elsewhere;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EMODIFIED);
	assert_null(concurrent_writer);
	assert_int_equal(kiln_error_last_code(), KILN_EMODIFIED);
	assert_non_null(strstr(kiln_error_last(), "refs/heads/ds/main moved since it was read"));
	assert_string_equal(commit, "");
	assert_tip_is_concurrent(m);
	strcpy(first_concurrent, concurrent_commit);

	/* an existing branch moved by another writer: refused, nothing changed */
	concurrent_writer = commit_elsewhere;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EMODIFIED);
	assert_non_null(strstr(kiln_error_last(), "refs/heads/ds/main moved since it was read"));
	assert_tip_is_concurrent(m);
	assert_string_not_equal(first_concurrent, concurrent_commit);
	assert_int_equal(kiln_manifest_stats(m, "ds", "main", &stats), 0);
	assert_int_equal(stats.records_in, 1000);

	/* retried from a fresh read, it lands on top */
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	spec_oid(cas_path, "refs/heads/ds/main", parent);
	assert_string_equal(parent, commit);
	spec_oid(cas_path, "refs/heads/ds/main^", parent);
	assert_string_equal(parent, concurrent_commit);
	assert_int_equal(kiln_manifest_stats(m, "ds", "main", &stats), 0);
	assert_int_equal(stats.records_in, 1100);
	kiln_manifest_close(m);
	free(cas_path);
}

/* A fenced entry moves a partition only from the offset its writer read:
 * a writer that lost the partition cannot commit it. Gap counts are kept. */
static void test_fenced_lineage(void **state)
{
	kiln_lineage_entry lineage[] = {{.source = "kafka",
	                                 .topic = "t",
	                                 .partition = 0,
	                                 .next = 100,
	                                 .fenced = true,
	                                 .expect_next = -1}};
	kiln_snapshot snap = {
	    .dataset = "ds", .branch = "main", .dataset_json = "{}", .lineage = lineage, .lineage_count = 1};
	char *path = kiln_test_path(tmpdir, "fence.git");
	kiln_manifest *m;
	char commit[41], tip[41];
	collected got = {"", 0};

	(void)state;
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	/* a new partition: expected absent */
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	/* a stale writer that read it absent too is refused, nothing changes */
	lineage[0].next = 50;
	assert_int_equal(kiln_manifest_commit(m, &snap, tip), KILN_EFENCED);
	assert_non_null(strstr(kiln_error_last(), "t/0 moved to 100 (expected -1)"));
	spec_oid(path, "refs/heads/ds/main", tip);
	assert_string_equal(tip, commit);
	/* one that read 100 moves it, and records a skipped gap */
	lineage[0].expect_next = 100;
	lineage[0].next = 900;
	lineage[0].gaps = 1;
	lineage[0].skipped = 700;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	assert_spec(path, "refs/heads/ds/main:lineage.json",
	            "{\n  \"partitions\": [\n    "
	            "{\"source\":\"kafka\",\"topic\":\"t\",\"partition\":0,\"next\":900,\"gaps\":1,"
	            "\"skipped\":700}\n  ]\n}\n");
	assert_int_equal(kiln_manifest_lineage(m, "ds", "main", collect, &got), 0);
	assert_string_equal(got.text, "[t|0|900|-|0|-]");
	/* an unfenced entry (a file source) is not compared */
	lineage[0].fenced = false;
	lineage[0].next = 901;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	kiln_manifest_close(m);
	free(path);
}

/* ---- malformed files and snapshots ---------------------------------------- */

/* A valid commit on refs/heads/<dataset>/main, then one more that replaces
 * `file` (a nested path is fine) with `content`. */
static void corrupt(const char *path, const char *dataset, const char *file, const char *content)
{
	kiln_snapshot snap = {.dataset = dataset, .branch = "main", .dataset_json = "{}"};
	char ref[128], commit[41];
	kiln_manifest *m;
	git_repository *repo;
	git_reference *head;
	git_commit *tip;
	git_tree *tree, *updated;
	git_signature *sig;
	git_tree_update update = {
	    .action = GIT_TREE_UPDATE_UPSERT, .filemode = GIT_FILEMODE_BLOB, .path = file};
	git_oid tree_id, commit_id;

	assert_int_equal(kiln_manifest_open(&m, path), 0);
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	kiln_manifest_close(m);
	snprintf(ref, sizeof(ref), "refs/heads/%s/main", dataset);
	assert_int_equal(git_repository_open_bare(&repo, path), 0);
	assert_int_equal(git_reference_lookup(&head, repo, ref), 0);
	assert_int_equal(git_commit_lookup(&tip, repo, git_reference_target(head)), 0);
	assert_int_equal(git_commit_tree(&tree, tip), 0);
	assert_int_equal(git_blob_create_from_buffer(&update.id, repo, content, strlen(content)), 0);
	assert_int_equal(git_tree_create_updated(&tree_id, repo, tree, 1, &update), 0);
	assert_int_equal(git_tree_lookup(&updated, repo, &tree_id), 0);
	assert_int_equal(git_signature_now(&sig, "test", "test@localhost"), 0);
	assert_int_equal(
	    git_commit_create_v(&commit_id, repo, ref, sig, sig, NULL, "corrupt\n", updated, 1, tip), 0);
	git_signature_free(sig);
	git_tree_free(updated);
	git_tree_free(tree);
	git_commit_free(tip);
	git_reference_free(head);
	git_repository_free(repo);
}

static void assert_error_names(const char *a, const char *b)
{
	assert_int_equal(kiln_error_last_code(), KILN_EINVALID);
	if (!strstr(kiln_error_last(), a) || !strstr(kiln_error_last(), b))
		fail_msg("error \"%s\" does not name %s and %s", kiln_error_last(), a, b);
}

static void test_malformed_files(void **state)
{
	static const char *const bad_stats[] = {
	    "{\"records_in\": -1}\n",
	    "{\"records_in\": 1.5}\n",
	    "{\"records_in\": 18446744073709551616}\n",
	    "{\"records_in\": 1, \"records_in\": 2}\n",
	    "{\"quarantined_by_code\": {\"nope\": 1}}\n",
	    "{\"splits\": {\"train\": {\"records\": \"1\"}}}\n",
	    "{\"splits\": {\"validation\": {}}}\n",
	    "{\"unknown\": 0}\n",
	    "{} x\n",
	    "[]\n",
	    "",
	};
	static const char *const bad_lineage[] = {
	    "{\"partitions\": [{\"topic\":\"t\"}]}\n",
	    "{\"partitions\": [{\"topic\":\"t\",\"partition\":0,\"next\":1,\"path\":\"p\"}]}\n",
	    "{\"partitions\": [{\"topic\":\"t\",\"partition\":4294967296,\"next\":1}]}\n",
	    "{\"partitions\": [{\"topic\":\"t\",\"partition\":0,\"next\":1},"
	    "{\"topic\":\"t\",\"partition\":0,\"next\":2}]}\n",
	    "{\"partitions\": [{\"topic\":\"t\\u0000\",\"partition\":0,\"next\":1}]}\n",
	    "{\"partitions\": {}}\n",
	    "{\"partitions\": [\n",
	    "{}\n",
	};
	char *path = kiln_test_path(tmpdir, "bad.git");
	char ds[32], hash[65], commit[41], before[41], after[41], ref[64];
	kiln_shard_entry shard = {.bytes = 1, .raw_bytes = 1, .records = 1};
	kiln_snapshot snap = {.branch = "main", .dataset_json = "{}", .shards = {&shard}, .shard_count = {1}};
	kiln_manifest *m;
	kiln_stats stats;
	collected got = {0};

	(void)state;
	kiln_test_hash(hash, "ab", '7');
	strcpy(shard.hash, hash);
	for (size_t i = 0; i < sizeof(bad_stats) / sizeof(bad_stats[0]); i++) {
		snprintf(ds, sizeof(ds), "stats%zu", i);
		corrupt(path, ds, "stats.json", bad_stats[i]);
		assert_int_equal(kiln_manifest_open(&m, path), 0);
		memset(&stats, 0xff, sizeof(stats));
		assert_int_equal(kiln_manifest_stats(m, ds, "main", &stats), KILN_EINVALID);
		snprintf(ref, sizeof(ref), "refs/heads/%s/main", ds);
		assert_error_names(ref, "stats.json");
		assert_int_equal(stats.records_in, 0);
		/* a commit on top refuses too, and moves nothing */
		spec_oid(path, ref, before);
		snap.dataset = ds;
		assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
		assert_error_names(ref, "stats.json");
		spec_oid(path, ref, after);
		assert_string_equal(before, after);
		kiln_manifest_close(m);
	}
	for (size_t i = 0; i < sizeof(bad_lineage) / sizeof(bad_lineage[0]); i++) {
		snprintf(ds, sizeof(ds), "lineage%zu", i);
		corrupt(path, ds, "lineage.json", bad_lineage[i]);
		assert_int_equal(kiln_manifest_open(&m, path), 0);
		snprintf(ref, sizeof(ref), "refs/heads/%s/main", ds);
		got.count = 0;
		assert_int_equal(kiln_manifest_lineage(m, ds, "main", collect, &got), KILN_EINVALID);
		assert_int_equal(got.count, 0);
		assert_error_names(ref, "lineage.json");
		snap.dataset = ds;
		assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
		assert_error_names(ref, "lineage.json");
		kiln_manifest_close(m);
	}

	/* shard blobs: not JSON, a hash in the wrong file, splits not a folder */
	corrupt(path, "shards0", "splits/train/ab.jsonl", "not json\n");
	{
		char wrong[256];

		kiln_test_hash(hash, "cd", '1');
		snprintf(wrong, sizeof(wrong), "{\"shard\":\"%s\",\"bytes\":1}\n", hash);
		corrupt(path, "shards1", "splits/train/ab.jsonl", wrong);
		snprintf(wrong, sizeof(wrong), "{\"shard\":\"%s\",\"bytes\":1}\n\n", shard.hash);
		corrupt(path, "shards2", "splits/train/ab.jsonl", wrong);
	}
	corrupt(path, "shards3", "splits", "a file\n");
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	for (int i = 0; i < 4; i++) {
		snprintf(ds, sizeof(ds), "shards%d", i);
		snprintf(ref, sizeof(ref), "refs/heads/%s/main", ds);
		spec_oid(path, ref, before);
		snap.dataset = ds;
		assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
		assert_error_names(ref, i == 3 ? "splits" : "splits/train/ab.jsonl");
		spec_oid(path, ref, after);
		assert_string_equal(before, after);
	}

	/* bad snapshots */
	snap.dataset = "fresh";
	shard.hash[5] = 'A';
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
	shard.hash[5] = '7';
	{
		const kiln_source_range src[] = {{"bad\xff", 0, 0, 0}};
		const kiln_lineage_entry twice[] = {
		    {.source = "kafka", .topic = "t", .partition = 0, .next = 1},
		    {.source = "kafka", .topic = "t", .partition = 0, .next = 2}};
		const kiln_lineage_entry no_prefix[] = {{.source = "file",
		                                         .topic = "t",
		                                         .partition = 0,
		                                         .next = 1,
		                                         .path = "p",
		                                         .bytes = 3,
		                                         .prefix_blake2b = "abc"}};
		const kiln_lineage_entry bad_utf8[] = {
		    {.source = "kafka", .topic = "t\xc3", .partition = 0, .next = 1}};

		shard.sources = src;
		shard.source_count = 1;
		assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
		shard.source_count = 0;
		snap.lineage = twice;
		snap.lineage_count = 2;
		assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
		snap.lineage = no_prefix;
		snap.lineage_count = 1;
		assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
		snap.lineage = bad_utf8;
		assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
		snap.lineage_count = 0;
		snap.delta.records_in = UINT64_MAX;
		assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
		assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
	}
	{
		collected none = {0};

		/* the refused ones left no branch behind except the last good one */
		assert_int_equal(kiln_manifest_stats(m, "fresh", "main", &stats), 0);
		assert_int_equal(stats.records_in, UINT64_MAX);
		assert_int_equal(kiln_manifest_lineage(m, "fresh", "main", collect, &none), 0);
		assert_int_equal(none.count, 0);
	}
	kiln_manifest_close(m);
	free(path);
}

/* A branch whose lock file exists: a young lock is a peer committing
 * (KILN_ERETRY, retried by callers); an old one was left by a killed
 * process and is reported with its path (KILN_EIO). Nothing moves. */
static void test_ref_lock(void **state)
{
	kiln_lineage_entry lineage[] = {{.source = "kafka", .topic = "t", .partition = 0, .next = 10}};
	kiln_snapshot snap = {
	    .dataset = "ds", .branch = "main", .dataset_json = "{}", .lineage = lineage, .lineage_count = 1};
	char *path = kiln_test_path(tmpdir, "locked.git"), lock[4096], commit[41], tip[41];
	struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
	kiln_manifest *m;
	FILE *f;

	(void)state;
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	assert_int_equal(kiln_manifest_commit(m, &snap, tip), 0);
	snprintf(lock, sizeof(lock), "%s/refs/heads/ds/main.lock", path);
	assert_non_null(f = fopen(lock, "w"));
	fclose(f);
	lineage[0].next = 20;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_ERETRY);
	assert_non_null(strstr(kiln_error_last(), "is locked by another writer"));
	assert_int_equal(utimensat(AT_FDCWD, lock, old, 0), 0);
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EIO);
	assert_non_null(strstr(kiln_error_last(), lock));
	assert_non_null(strstr(kiln_error_last(), "remove that file"));
	spec_oid(path, "refs/heads/ds/main", commit);
	assert_string_equal(commit, tip);
	unlink(lock);
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	kiln_manifest_close(m);
	free(path);
}

/* Threads opening one repository path that does not exist yet, at once:
 * every one gets a working repository (one creation wins, the others open
 * it), and no temporary directory is left beside it. */
#define OPENERS 8
static pthread_barrier_t open_barrier;

static void *open_at_once(void *arg)
{
	kiln_manifest *m = NULL;
	intptr_t rc;

	pthread_barrier_wait(&open_barrier);
	rc = kiln_manifest_open(&m, arg);
	kiln_manifest_close(m);
	return (void *)rc;
}

static void test_concurrent_create(void **state)
{
	(void)state;
	for (int round = 0; round < 5; round++) {
		char name[64], *path, *parent;
		pthread_t t[OPENERS];
		DIR *d;
		struct dirent *e;
		int entries = 0;

		snprintf(name, sizeof(name), "race%d/sub/m.git", round);
		path = kiln_test_path(tmpdir, name);
		pthread_barrier_init(&open_barrier, NULL, OPENERS);
		for (int i = 0; i < OPENERS; i++)
			assert_int_equal(pthread_create(&t[i], NULL, open_at_once, path), 0);
		for (int i = 0; i < OPENERS; i++) {
			void *rc;

			pthread_join(t[i], &rc);
			assert_int_equal((intptr_t)rc, 0);
		}
		pthread_barrier_destroy(&open_barrier);
		parent = strdup(path);
		*strrchr(parent, '/') = '\0';
		assert_non_null(d = opendir(parent));
		while ((e = readdir(d)))
			entries += e->d_name[0] != '.';
		closedir(d);
		assert_int_equal(entries, 1);
		free(parent);
		free(path);
	}
}

/* An erasure's journal is replaced atomically, and the temporary a kill -9
 * left beside it is swept by the next write, unless its process still runs. */
static void test_journal_stale_temps(void **state)
{
	char *path = kiln_test_path(tmpdir, "journal.git"), dead[4200], live[4200], jpath[4200];
	kiln_buf text = KILN_BUF_INIT(0), back = KILN_BUF_INIT(0);
	kiln_manifest *m = NULL;
	struct stat st;
	pid_t child;
	int fd;

	(void)state;
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	child = fork(); /* a process that is gone: its pid names the stale temporary */
	assert_true(child >= 0);
	if (child == 0)
		_exit(0);
	assert_int_equal(waitpid(child, NULL, 0), child);
	snprintf(jpath, sizeof(jpath), "%s/kiln-erase-ds.journal", path);
	snprintf(dead, sizeof(dead), "%s.tmp-%ld", jpath, (long)child);
	snprintf(live, sizeof(live), "%s.tmp-%ld", jpath, (long)getppid());
	assert_true((fd = open(dead, O_WRONLY | O_CREAT, 0600)) >= 0);
	close(fd);
	assert_true((fd = open(live, O_WRONLY | O_CREAT, 0600)) >= 0);
	close(fd);
	assert_int_equal(kiln_buf_put(&text, "{\"a\":1}\n", 8), 0);
	assert_int_equal(kiln_ledger_journal_write(m, "ds", &text), 0);
	assert_int_equal(stat(jpath, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(kiln_ledger_journal_read(m, "ds", &back), 1);
	assert_int_equal(back.len, 8);
	assert_memory_equal(back.ptr, text.ptr, 8);
	assert_true(stat(dead, &st) < 0);     /* swept */
	assert_int_equal(stat(live, &st), 0); /* a running process's: kept */
	assert_int_equal(kiln_ledger_journal_remove(m, "ds"), 0);
	assert_true(stat(jpath, &st) < 0);
	assert_int_equal(kiln_ledger_journal_read(m, "ds", &back), 0);
	unlink(live);
	kiln_buf_free(&text);
	kiln_buf_free(&back);
	kiln_manifest_close(m);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_open_creates_bare_repository),
	    cmocka_unit_test(test_blob_ahead),
	    cmocka_unit_test(test_invalid_names),
	    cmocka_unit_test(test_missing_branch_reads_empty),
	    cmocka_unit_test(test_two_commits),
	    cmocka_unit_test(test_compare_and_swap),
	    cmocka_unit_test(test_fenced_lineage),
	    cmocka_unit_test(test_ref_lock),
	    cmocka_unit_test(test_concurrent_create),
	    cmocka_unit_test(test_malformed_files),
	    cmocka_unit_test(test_journal_stale_temps),
	};

	return kiln_test_git_main(tests, tmpdir, "manifest", NULL, NULL);
}
