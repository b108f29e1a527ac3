/* Unit tests for the manifest's compaction (src/manifest/compact.c), on
 * repositories made with kiln_manifest_commit: loose objects and older packs
 * that the new pack holds go at once whatever their age, young unreachable
 * objects stay; the automatic compaction runs at its threshold only, counts
 * what the last one had to keep, and skips while another process holds
 * kiln-compact.lock; a commit attempt refused at the ref and tried again
 * writes no new object for what did not change. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "fixture.h"
#include "core/error.h"
#include "manifest/compact.h"
#include "manifest/internal.h"
#include "manifest/manifest.h"

static char tmpdir[64];

/* A fresh repository under tmpdir named `name`. */
static kiln_manifest *open_repo(const char *name)
{
	char *path = kiln_test_path(tmpdir, name);
	kiln_manifest *m = NULL;

	assert_int_equal(kiln_manifest_open(&m, path), 0);
	free(path);
	return m;
}

/* One snapshot on ds/main: a train shard whose hash starts with `prefix`
 * and lineage t/<partition> moved by 10. */
static int commit_one(kiln_manifest *m, const char *prefix, int32_t partition, int64_t next)
{
	kiln_source_range src = {"t", partition, next - 10, next - 1};
	kiln_shard_entry e = {
	    .bytes = 100, .raw_bytes = 400, .records = 10, .sources = &src, .source_count = 1};
	kiln_lineage_entry lin = {.source = "kafka", .topic = "t", .partition = partition, .next = next};
	kiln_snapshot snap = {0};
	char commit[41];

	kiln_test_hash(e.hash, prefix, '7');
	snap.delta.records_in = snap.delta.valid = 10;
	snap.delta.splits[KILN_SPLIT_TRAIN].records = 10;
	snap.delta.splits[KILN_SPLIT_TRAIN].shards = 1;
	snap.delta.splits[KILN_SPLIT_TRAIN].bytes = 100;
	snap.delta.splits[KILN_SPLIT_TRAIN].raw_bytes = 400;
	snap.dataset = "ds";
	snap.branch = "main";
	snap.dataset_json = "{\"name\":\"ds\"}";
	snap.shards[KILN_SPLIT_TRAIN] = &e;
	snap.shard_count[KILN_SPLIT_TRAIN] = 1;
	snap.lineage = &lin;
	snap.lineage_count = 1;
	return kiln_manifest_commit(m, &snap, commit);
}

static uint64_t loose(kiln_manifest *m)
{
	uint64_t n = 0;

	assert_int_equal(kiln_manifest_loose_objects(m, &n), 0);
	return n;
}

static int packs(kiln_manifest *m)
{
	char dir[4200];
	DIR *d;
	struct dirent *e;
	int n = 0;

	snprintf(dir, sizeof(dir), "%sobjects/pack", git_repository_path(kiln_manifest_repo(m)));
	assert_non_null(d = opendir(dir));
	while ((e = readdir(d)))
		n += strlen(e->d_name) > 5 && strcmp(e->d_name + strlen(e->d_name) - 5, ".pack") == 0;
	closedir(d);
	return n;
}

/* An object no ref reaches, written now (what a lost commit attempt leaves). */
static void write_unreachable(kiln_manifest *m, const char *text)
{
	git_oid id;

	assert_int_equal(git_blob_create_from_buffer(&id, kiln_manifest_repo(m), text, strlen(text)), 0);
}

/* Every object is young here (an hour's grace): before, compaction kept
 * every young loose object, packed or not, and every young older pack, so a
 * busy repository never shrank. Now what the new pack holds goes at once;
 * the young unreachable blob stays. */
static void test_packed_objects_go_at_once(void **state)
{
	kiln_manifest *m = open_repo("young");
	kiln_compact_stats st;
	uint64_t before;

	(void)state;
	for (int i = 0; i < 3; i++)
		assert_int_equal(commit_one(m, i == 0 ? "a0" : i == 1 ? "b1" : "c2", 0, 10 * (i + 1)), 0);
	write_unreachable(m, "an attempt that lost its race\n");
	before = loose(m);
	assert_true(before > 10);

	assert_int_equal(kiln_manifest_compact(m, 3600, &st), 0);
	assert_int_equal(loose(m), 1);
	assert_int_equal(st.loose_kept, 1);
	assert_int_equal(st.loose_removed, before - 1);
	assert_int_equal(packs(m), 1);

	/* a second compaction's pack holds everything the first one did: the
	 * young first pack goes too */
	assert_int_equal(commit_one(m, "d3", 0, 40), 0);
	assert_int_equal(kiln_manifest_compact(m, 3600, &st), 0);
	assert_int_equal(packs(m), 1);
	assert_int_equal(st.packs_removed, 1);
	assert_int_equal(loose(m), 1);
	/* the branch reads back whole */
	assert_int_equal(commit_one(m, "e4", 0, 50), 0);
	kiln_manifest_close(m);
}

static void test_auto_threshold(void **state)
{
	kiln_manifest *m = open_repo("auto");
	kiln_compact_stats st;
	uint64_t n;
	bool ran;

	(void)state;
	assert_int_equal(commit_one(m, "a0", 0, 10), 0);
	n = loose(m);
	/* under the threshold: nothing happens, the count is told */
	assert_int_equal(kiln_manifest_compact_auto(m, n + 1, 3600, &ran, &n, &st), 0);
	assert_false(ran);
	assert_int_equal(n, loose(m));
	/* 0: never */
	assert_int_equal(kiln_manifest_compact_auto(m, 0, 3600, &ran, &n, &st), 0);
	assert_false(ran);
	/* at it: compacts; the unreachable blob is young and stays */
	write_unreachable(m, "lost attempt 1\n");
	write_unreachable(m, "lost attempt 2\n");
	write_unreachable(m, "lost attempt 3\n");
	assert_int_equal(kiln_manifest_compact_auto(m, loose(m), 3600, &ran, &n, &st), 0);
	assert_true(ran);
	assert_int_equal(n, 3);
	assert_int_equal(loose(m), 3);
	assert_int_equal(st.loose_kept, 3);
	/* the 3 kept do not count toward the next one: 3 objects over a
	 * threshold of 3 start nothing, 3 more do */
	assert_int_equal(kiln_manifest_compact_auto(m, 3, 3600, &ran, &n, &st), 0);
	assert_false(ran);
	assert_int_equal(commit_one(m, "b1", 0, 20), 0);
	assert_true(loose(m) >= 6);
	assert_int_equal(kiln_manifest_compact_auto(m, 3, 3600, &ran, &n, &st), 0);
	assert_true(ran);
	kiln_manifest_close(m);
}

/* Another process compacting (it holds the lock): a member skips at once. */
static void test_auto_skips_while_locked(void **state)
{
	kiln_manifest *m = open_repo("locked");
	kiln_compact_stats st;
	char *lock;
	uint64_t n;
	bool ran;
	int fd;

	(void)state;
	assert_int_equal(commit_one(m, "a0", 0, 10), 0);
	lock = kiln_test_path(git_repository_path(kiln_manifest_repo(m)), "kiln-compact.lock");
	assert_true((fd = open(lock, O_RDWR | O_CREAT, 0644)) >= 0);
	assert_int_equal(flock(fd, LOCK_EX), 0);
	assert_int_equal(kiln_manifest_compact_auto(m, 1, 3600, &ran, &n, &st), 0);
	assert_false(ran);
	assert_true(loose(m) > 1);
	close(fd); /* the holder is gone: its lock with it */
	assert_int_equal(kiln_manifest_compact_auto(m, 1, 3600, &ran, &n, &st), 0);
	assert_true(ran);
	assert_int_equal(loose(m), 0);
	/* a lock file that says anything else reads as "nothing kept" */
	kiln_test_write_file(lock, "kept -5\nkept 99999999999999999999999\n", 0644);
	assert_int_equal(commit_one(m, "b1", 0, 20), 0);
	assert_int_equal(kiln_manifest_compact_auto(m, 1, 3600, &ran, &n, &st), 0);
	assert_true(ran);
	free(lock);
	kiln_manifest_close(m);
}

/* A commit refused at the ref (a peer holds its lock: KILN_ERETRY), tried
 * again unchanged: the attempt's blobs and trees are written once; the
 * retry adds at most its commit object (whose time may have moved on). */
static void test_retry_writes_no_new_blobs(void **state)
{
	kiln_manifest *m = open_repo("retry");
	char *lock;
	uint64_t after_first;

	(void)state;
	assert_int_equal(commit_one(m, "a0", 0, 10), 0);
	lock = kiln_test_path(git_repository_path(kiln_manifest_repo(m)), "refs/heads/ds/main.lock");
	kiln_test_write_file(lock, "", 0644);
	assert_int_equal(commit_one(m, "b1", 1, 10), KILN_ERETRY);
	after_first = loose(m);
	unlink(lock);
	assert_int_equal(commit_one(m, "b1", 1, 10), 0);
	assert_true(loose(m) <= after_first + 1);
	free(lock);
	kiln_manifest_close(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_packed_objects_go_at_once),
	    cmocka_unit_test(test_auto_threshold),
	    cmocka_unit_test(test_auto_skips_while_locked),
	    cmocka_unit_test(test_retry_writes_no_new_blobs),
	};

	return kiln_test_git_main(tests, tmpdir, "compact", NULL, NULL);
}
