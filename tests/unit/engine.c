/* Unit tests for the run engine (src/ingest/engine.c) with a fake
 * streaming row (kiln_source.stream) holding its records in memory, run
 * into a file:// store and a manifest repository in a temp dir. The tests
 * check the snapshot policy (every N records, then the drain's snapshot
 * at --stop-at-end), that each snapshot's lineage is fenced on the last
 * one's, that a batch that fails is abandoned and read again from the last
 * commit (nothing lost, nothing twice), that a row's fatal error ends the
 * run with its message after the drain, and the order of the row's
 * stages. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "core/error.h"
#include "ingest/engine.h"
#include "ingest/engine_internal.h"
#include "ingest/pipeline.h"
#include "manifest/manifest.h"

static char tmpdir[PATH_MAX];

#define RECORD(id, user)                                                                                     \
	"{\"event_id\":\"" id "\",\"event_type\":\"search\",\"occurred_at\":\"2025-09-14T09:00:36Z\","       \
	"\"user_id\":\"" user "\",\"consent\":true,\"message\":\"hello\",\"device\":{\"os\":\"ios\"}}"

/* Offsets 0, 2 and 3 are valid; 1 is not JSON (quarantined). */
static const char *const records[] = {
    RECORD("1d2a44de-2d05-4d7e-a873-a6cff2672335", "u-1"),
    "not json",
    RECORD("0f3dbb11-6e1f-4f65-ae5e-b61942d75726", "u-3"),
    RECORD("5b1f3c7e-8d2a-4f6b-9c1d-2e3f4a5b6c7d", "u-4"),
};
#define RECORD_COUNT 4

/* The fake row: what it was told to do, and what it saw. */
struct fake {
	int fail_delivery_at; /* offset whose batch fails once at delivery (-1: none) */
	int fatal_at_poll;    /* the poll (1-based) that makes the run fatal (0: none) */
	char calls[128];      /* one letter a stage, below */
	int64_t next;         /* the next offset to read */
	int64_t consumed;     /* after the last delivered record (-1: none since the last commit) */
	int64_t committed;    /* the branch's next as the row last saw it (-1: none) */
	int polls, commits, abandons;
	int64_t commit_next[8];   /* lineage next of each commit */
	int64_t commit_expect[8]; /* and the fence it carried */
	kiln_batch *open;         /* not yet submitted */
	bool inflight;            /* a batch submitted and not yet delivered */
	bool closed;
};

static struct fake fake;

static void called(char stage)
{
	size_t n = strlen(fake.calls);

	if (n + 1 < sizeof(fake.calls))
		fake.calls[n] = stage;
}

/* o: open, s: start, f: flush, p: positions, c: committed, a: abandon, S:
 * stop, C: close (polls and deliveries are counted, not listed) */
static int fake_open(void **out, kiln_engine *e, kiln_metrics *m)
{
	assert_non_null(e);
	assert_non_null(m);
	*out = &fake;
	called('o');
	return 0;
}

static int note_lineage(void *ctx, const kiln_lineage_entry *entry)
{
	(void)ctx;
	if (strcmp(entry->topic, "mem") == 0 && entry->partition == 0)
		fake.committed = entry->next;
	return 0;
}

static int read_lineage(kiln_engine *e)
{
	fake.committed = -1;
	return kiln_manifest_lineage(e->setup.manifest, e->p->dataset, e->p->branch, note_lineage, NULL);
}

static int fake_start(void *src, kiln_engine *e)
{
	int rc;

	assert_ptr_equal(src, &fake);
	called('s');
	if ((rc = read_lineage(e)) < 0)
		return rc;
	fake.next = fake.committed < 0 ? 0 : fake.committed;
	return 0;
}

static int submit(kiln_engine *e)
{
	kiln_batch *b = fake.open;

	fake.open = NULL;
	return b ? kiln_curate_pool_submit(e->sink.pool, b) : 0;
}

/* One record a poll, each in a batch of its own, the next once the last
 * was delivered (so the policy sees the counts in order). */
static int fake_poll(void *src, kiln_engine *e, int timeout_ms)
{
	kiln_batch *b;
	size_t i;

	assert_ptr_equal(src, &fake);
	assert_true(timeout_ms >= 0);
	if (++fake.polls == fake.fatal_at_poll) {
		kiln_engine_fatal(e, KILN_EINVALID, "the fake row gave up at poll %d", fake.polls);
		return 0;
	}
	if (fake.next >= RECORD_COUNT || fake.inflight)
		return 0;
	if (!(b = kiln_curate_pool_batch(e->sink.pool)))
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	b->topic = "mem";
	b->partition = 0;
	b->opened_ms = now_ms();
	i = b->count;
	assert_int_equal(kiln_batch_reserve(b), 0);
	b->rec[i] = records[fake.next];
	b->len[i] = strlen(records[fake.next]);
	b->too_long[i] = false;
	b->offset[i] = fake.next;
	b->bytes += b->len[i];
	b->count++;
	fake.next++;
	fake.open = b;
	fake.inflight = true;
	return submit(e);
}

static bool fake_at_end(void *src, kiln_engine *e)
{
	(void)src;
	(void)e;
	return fake.next >= RECORD_COUNT && !fake.inflight;
}

static int fake_flush(void *src, kiln_engine *e)
{
	(void)src;
	called('f');
	return submit(e);
}

static int fake_delivered(void *src, kiln_engine *e, kiln_batch *b)
{
	(void)src;
	(void)e;
	fake.inflight = false;
	if (b->offset[0] == fake.fail_delivery_at) {
		fake.fail_delivery_at = -1;
		return kiln_error_set(KILN_EIO, "the fake sink hiccuped");
	}
	fake.consumed = b->offset[b->count - 1] + 1;
	return 0;
}

static int fake_positions(void *src, kiln_engine *e, kiln_lineage_entry **out, size_t *n)
{
	(void)src;
	(void)e;
	called('p');
	*out = NULL;
	*n = 0;
	if (fake.consumed < 0)
		return 0;
	if (!(*out = calloc(1, sizeof(**out))))
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	**out = (kiln_lineage_entry){
	    .topic = "mem",
	    .partition = 0,
	    .next = fake.consumed,
	    .fenced = true,
	    .expect_next = fake.committed,
	};
	*n = 1;
	return 0;
}

static void fake_committed(void *src, kiln_engine *e, const kiln_lineage_entry *lineage, size_t n)
{
	(void)src;
	(void)e;
	called('c');
	assert_int_equal(n, 1);
	if (fake.commits < 8) {
		fake.commit_next[fake.commits] = lineage[0].next;
		fake.commit_expect[fake.commits] = lineage[0].expect_next;
	}
	fake.commits++;
	fake.committed = lineage[0].next;
	fake.consumed = -1;
}

/* Back to the last commit. */
static int fake_abandon(void *src, kiln_engine *e)
{
	int rc;

	(void)src;
	called('a');
	fake.abandons++;
	kiln_curate_pool_recycle(e->sink.pool, fake.open);
	fake.open = NULL;
	fake.inflight = false;
	fake.consumed = -1;
	if ((rc = read_lineage(e)) < 0)
		return rc;
	fake.next = fake.committed < 0 ? 0 : fake.committed;
	return 0;
}

static void fake_stop(void *src, kiln_engine *e)
{
	(void)src;
	assert_true(e->drain_until_ms > 0);
	called('S');
}

static void fake_close(void *src, kiln_engine *e)
{
	(void)e;
	assert_ptr_equal(src, &fake);
	assert_null(fake.open);
	fake.closed = true;
	called('C');
}

static const kiln_source_stream fake_stream = {
    .open = fake_open,
    .start = fake_start,
    .poll = fake_poll,
    .at_end = fake_at_end,
    .flush = fake_flush,
    .delivered = fake_delivered,
    .positions = fake_positions,
    .committed = fake_committed,
    .abandon = fake_abandon,
    .stop = fake_stop,
    .close = fake_close,
};

static bool reads_nothing(const kiln_pipeline *p, const char *name)
{
	(void)p;
	(void)name;
	return false; /* its entries are its own: no other kind's to refuse */
}

static const char *const fake_keys[] = {"kind", NULL};

static const kiln_source fake_source = {
    .version = KILN_SOURCE_VERSION,
    .kind = "memory",
    .option_keys = fake_keys,
    .stream = &fake_stream,
    .reads_name = reads_nothing,
};

static void write_file(const char *name, const char *text, mode_t mode)
{
	char path[2 * PATH_MAX + 2];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	unlink(path);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

/* A pipeline whose store and manifest live under tmpdir/NAME, read by the
 * fake row, snapshotting every `every` records. */
static kiln_pipeline *pipeline(const char *name, uint64_t every)
{
	char yaml[4096], path[2 * PATH_MAX + 2], file[PATH_MAX];
	kiln_pipeline *p = NULL;

	write_file("key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", 0600);
	write_file("in.jsonl", "", 0644);
	snprintf(yaml, sizeof(yaml),
	         "dataset: ev\n"
	         "contract: %s/contracts/user-events.yaml\n"
	         "source: {kind: file, path: in.jsonl, name: mem}\n"
	         "pseudonymise: {key_file: key}\n"
	         "split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}\n"
	         "store: {url: file://%s/store}\n"
	         "manifest: {repo: %s/m.git}\n"
	         "snapshot: {records: %llu, seconds: 0}\n"
	         "workers: 2\n",
	         KILN_SRCDIR, name, name, (unsigned long long)every);
	snprintf(file, sizeof(file), "%s.yaml", name);
	write_file(file, yaml, 0644);
	snprintf(path, sizeof(path), "%s/%s", tmpdir, file);
	if (kiln_pipeline_load(&p, path, NULL, 0) != 0)
		fail_msg("pipeline: %s", kiln_error_last());
	p->source = &fake_source;
	return p;
}

static void reset_fake(void)
{
	memset(&fake, 0, sizeof(fake));
	fake.fail_delivery_at = -1;
	fake.consumed = fake.committed = -1;
}

static int run(kiln_pipeline *p, kiln_run_result *r)
{
	kiln_engine_options o = {.stop_at_end = true};

	return kiln_engine_run(p, &o, r);
}

/* snapshot.records 2 over 4 records: a snapshot at 2 (the policy), one at
 * 4 (at the end, the drain), each fenced on the one before; a second run
 * resumes at 4 and commits nothing. */
static void test_policy_then_drain(void **state)
{
	kiln_pipeline *p = pipeline("policy", 2);
	kiln_run_result r;

	(void)state;
	reset_fake();
	if (run(p, &r) != 0)
		fail_msg("run: %s", kiln_error_last());
	assert_string_equal(fake.calls, "osfpcfpcSC");
	assert_int_equal(fake.commits, 2);
	assert_int_equal(fake.commit_next[0], 2);
	assert_int_equal(fake.commit_expect[0], -1);
	assert_int_equal(fake.commit_next[1], 4);
	assert_int_equal(fake.commit_expect[1], 2);
	assert_int_equal(strlen(r.commit), 40);
	assert_int_equal(r.delta.records_in, 4);
	assert_int_equal(r.delta.valid, 3);
	assert_int_equal(r.delta.quarantined, 1);
	assert_true(fake.closed);

	reset_fake();
	if (run(p, &r) != 0)
		fail_msg("second run: %s", kiln_error_last());
	assert_int_equal(fake.committed, 4);
	assert_int_equal(fake.commits, 0);
	assert_int_equal(r.delta.records_in, 0);
	assert_string_equal(r.commit, "");
	kiln_pipeline_free(p);
}

/* A batch that fails at delivery: what was read since the last commit is
 * dropped and read again from there, so every record is committed once. */
static void test_failed_batch_is_read_again(void **state)
{
	kiln_pipeline *p = pipeline("abandon", 2);
	kiln_run_result r;

	(void)state;
	reset_fake();
	fake.fail_delivery_at = 3;
	if (run(p, &r) != 0)
		fail_msg("run: %s", kiln_error_last());
	assert_int_equal(fake.abandons, 1);
	assert_int_equal(fake.commits, 2);
	assert_int_equal(fake.commit_next[0], 2);
	assert_int_equal(fake.commit_next[1], 4);
	assert_int_equal(fake.commit_expect[1], 2);
	assert_int_equal(r.delta.records_in, 4);
	assert_int_equal(r.delta.valid, 3);
	assert_true(fake.closed);
	kiln_pipeline_free(p);
}

/* A row's fatal error ends the loop; the drain still commits what was
 * read, and the run returns the row's error with its message. */
static void test_fatal_ends_after_drain(void **state)
{
	kiln_pipeline *p = pipeline("fatal", 100);
	kiln_run_result r;

	(void)state;
	reset_fake();
	fake.fatal_at_poll = 2;
	assert_int_equal(run(p, &r), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "the fake row gave up at poll 2");
	assert_int_equal(fake.commits, 1);
	assert_int_equal(fake.commit_next[0], 1);
	assert_int_equal(r.delta.records_in, 1);
	assert_string_equal(fake.calls, "osfpcSC");
	kiln_pipeline_free(p);
}

static int setup(void **state)
{
	(void)state;
	for (const char *const *d = (const char *const[]){"policy", "abandon", "fatal", NULL}; *d; d++) {
		char path[PATH_MAX + 16];
		snprintf(path, sizeof(path), "%s/%s", tmpdir, *d);
		if (mkdir(path, 0700) != 0)
			return -1;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_policy_then_drain),
	    cmocka_unit_test(test_failed_batch_is_read_again),
	    cmocka_unit_test(test_fatal_ends_after_drain),
	};

	return kiln_test_main(tests, tmpdir, "engine", setup, NULL);
}
