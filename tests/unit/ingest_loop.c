/* Unit tests for the ingest loop (src/ingest/ingest_loop.c): a fake
 * source holding its records in memory is driven through the one loop into
 * a file:// store and a manifest repository in a temp dir. The tests check
 * the order of the source's stages, what the loop commits (counts, shards,
 * quarantine, the source's fenced lineage), that a source that ends early
 * writes nothing, and that an error stops the run with nothing committed
 * and the source closed. The last test drives the curate pool alone with
 * deliver_on_workers (what the loop asks for a source without prepare):
 * batches are consumed in submission order, one at a time, never on the
 * submitting thread, and a failed consume comes back to it; and the same
 * with the workers filling the batches too (kiln_curate_pool_pull, what
 * the file and stdin sources do): fills one at a time on the workers, in
 * order, a failed fill returned with nothing of it consumed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "core/error.h"
#include "ingest/ingest_loop.h"
#include "ingest/pipeline.h"
#include "ingest/run_setup.h"

static char tmpdir[PATH_MAX];

#define RECORD(id, user)                                                                                     \
	"{\"event_id\":\"" id "\",\"event_type\":\"search\",\"occurred_at\":\"2025-09-14T09:00:36Z\","       \
	"\"user_id\":\"" user "\",\"consent\":true,\"message\":\"hello\",\"device\":{\"os\":\"ios\"}}"

/* Offsets 0 and 2 are valid; 1 is not JSON (quarantined). */
static const char *const records[] = {
    RECORD("1d2a44de-2d05-4d7e-a873-a6cff2672335", "u-1"),
    "not json",
    RECORD("0f3dbb11-6e1f-4f65-ae5e-b61942d75726", "u-3"),
};
#define RECORD_COUNT 3

/* The fake source: what it was told to do, and what it saw. */
struct fake {
	int open_rc;     /* what open returns (after reading lineage) */
	int read_rc;     /* < 0: read fails after submitting */
	char calls[64];  /* one letter a stage: o r p e l c C (close) */
	int64_t resumed; /* lineage.json's next for "mem"/0 (-1: none) */
	size_t prepared; /* batches seen by prepare */
	kiln_lineage_entry lineage;
};

static struct fake fake;

static void called(char stage)
{
	size_t n = strlen(fake.calls);

	if (n + 1 < sizeof(fake.calls))
		fake.calls[n] = stage;
}

static int note_lineage(void *ctx, const kiln_lineage_entry *e)
{
	(void)ctx;
	if (strcmp(e->topic, "mem") == 0 && e->partition == 0)
		fake.resumed = e->next;
	return 0;
}

static int fake_open(void **out, kiln_ingest *in, const void *args)
{
	int rc;

	assert_ptr_equal(args, &fake);
	*out = &fake;
	called('o');
	fake.resumed = -1;
	if ((rc = kiln_manifest_lineage(in->setup.manifest, in->p->dataset, in->p->branch, note_lineage,
	                                NULL)) < 0)
		return rc;
	in->out->first_offset = in->out->next_offset = fake.resumed < 0 ? 0 : (uint64_t)fake.resumed;
	return fake.open_rc;
}

/* Every record from where the branch stopped, one batch. */
static int fake_read(void *src, kiln_ingest *in)
{
	kiln_batch *b;

	assert_ptr_equal(src, &fake);
	called('r');
	if (!(b = kiln_curate_pool_batch(in->sink.pool)))
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	b->topic = "mem";
	b->partition = 0;
	for (uint64_t o = in->out->next_offset; o < RECORD_COUNT; o++) {
		size_t i = b->count;
		assert_int_equal(kiln_batch_reserve(b), 0);
		b->rec[i] = records[o];
		b->len[i] = strlen(records[o]);
		b->too_long[i] = false;
		b->offset[i] = (int64_t)o;
		b->bytes += b->len[i];
		b->count++;
	}
	in->out->next_offset = RECORD_COUNT;
	if (b->count == 0)
		kiln_curate_pool_recycle(in->sink.pool, b);
	else if (kiln_curate_pool_submit(in->sink.pool, b) < 0)
		return -1;
	if (fake.read_rc < 0)
		return kiln_error_set(fake.read_rc, "the fake source failed");
	return 0;
}

static void fake_prepare(void *src, kiln_batch *b)
{
	assert_ptr_equal(src, &fake);
	assert_string_equal(b->topic, "mem");
	fake.prepared++;
}

static int fake_end(void *src, kiln_ingest *in)
{
	(void)src;
	called('e');
	return in->out->delta.records_in ? KILN_SOURCE_GO : KILN_SOURCE_DONE;
}

static int fake_lineage(void *src, kiln_ingest *in, kiln_snapshot *snap)
{
	(void)src;
	called('l');
	/* a file source's entry (path, bytes and their fingerprint: none), as
	 * the pipeline's source is a file */
	fake.lineage = (kiln_lineage_entry){
	    .source = "file",
	    .topic = "mem",
	    .partition = 0,
	    .next = (int64_t)in->out->next_offset,
	    .path = "in.jsonl",
	    .bytes = 0,
	    .prefix_blake2b = "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8",
	    .fenced = true,
	    .expect_next = fake.resumed};
	snap->lineage = &fake.lineage;
	snap->lineage_count = 1;
	return 0;
}

static int fake_committed(void *src, kiln_ingest *in, int rc)
{
	(void)src;
	(void)in;
	called('c');
	return rc;
}

static void fake_close(void *src, kiln_ingest *in)
{
	(void)in;
	assert_true(src == NULL || src == &fake);
	called('C');
}

static const char *const fake_keys[] = {"kind", NULL};

static const kiln_source fake_source = {
    .version = KILN_SOURCE_VERSION,
    .kind = "memory",
    .option_keys = fake_keys,
    .open = fake_open,
    .read = fake_read,
    .prepare = fake_prepare,
    .end = fake_end,
    .lineage = fake_lineage,
    .committed = fake_committed,
    .close = fake_close,
};

static void write_file(const char *name, const char *text, mode_t mode)
{
	char path[PATH_MAX + 64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	unlink(path);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static size_t count_files(const char *pattern_in_tmp)
{
	char pattern[PATH_MAX + 128];
	glob_t g;
	size_t n;

	snprintf(pattern, sizeof(pattern), "%s/%s", tmpdir, pattern_in_tmp);
	if (glob(pattern, 0, NULL, &g) != 0)
		return 0;
	n = g.gl_pathc;
	globfree(&g);
	return n;
}

/* A pipeline whose store and manifest live under tmpdir/NAME. */
static kiln_pipeline *pipeline(const char *name)
{
	char yaml[4096], path[PATH_MAX + 64], file[PATH_MAX];
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
	         "workers: 2\n",
	         KILN_SRCDIR, name, name);
	snprintf(file, sizeof(file), "%s.yaml", name);
	write_file(file, yaml, 0644);
	snprintf(path, sizeof(path), "%s/%s", tmpdir, file);
	if (kiln_pipeline_load(&p, path, NULL, 0) != 0)
		fail_msg("pipeline: %s", kiln_error_last());
	return p;
}

static void reset_fake(void)
{
	memset(&fake, 0, sizeof(fake));
	fake.open_rc = KILN_SOURCE_GO;
}

/* One run lands every record and commits the source's lineage; a second
 * one resumes there, reads nothing and commits nothing. */
static void test_run_commits_then_resumes(void **state)
{
	kiln_pipeline *p = pipeline("commit");
	kiln_run_result r;

	(void)state;
	reset_fake();
	if (kiln_ingest_run(&fake_source, &fake, p, &r) != 0)
		fail_msg("run: %s", kiln_error_last());
	assert_string_equal(fake.calls, "orelcC");
	assert_int_equal(fake.prepared, 1);
	assert_int_equal(strlen(r.commit), 40);
	assert_int_equal(r.first_offset, 0);
	assert_int_equal(r.next_offset, 3);
	assert_int_equal(r.delta.records_in, 3);
	assert_int_equal(r.delta.valid, 2);
	assert_int_equal(r.delta.quarantined, 1);
	assert_int_equal(r.quarantine_objects, 1);
	assert_true(r.shards >= 1);
	assert_int_equal(r.delta.splits[0].shards + r.delta.splits[1].shards + r.delta.splits[2].shards,
	                 r.shards);
	assert_int_equal(count_files("commit/store/shards/*/*.jsonl.zst"), r.shards);
	assert_int_equal(count_files("commit/store/quarantine/*/*/*/*/*.jsonl.zst"), 1);

	reset_fake();
	if (kiln_ingest_run(&fake_source, &fake, p, &r) != 0)
		fail_msg("second run: %s", kiln_error_last());
	assert_string_equal(fake.calls, "oreC");
	assert_int_equal(fake.resumed, 3);
	assert_int_equal(r.first_offset, 3);
	assert_int_equal(r.delta.records_in, 0);
	assert_string_equal(r.commit, "");
	assert_int_equal(fake.prepared, 0);
	kiln_pipeline_free(p);
}

/* A source that ends at open: nothing read, nothing in the store. */
static void test_done_at_open_writes_nothing(void **state)
{
	kiln_pipeline *p = pipeline("done");
	kiln_run_result r;

	(void)state;
	reset_fake();
	fake.open_rc = KILN_SOURCE_DONE;
	assert_int_equal(kiln_ingest_run(&fake_source, &fake, p, &r), 0);
	assert_string_equal(fake.calls, "oC");
	assert_string_equal(r.commit, "");
	assert_int_equal(count_files("done/store/shards/*/*"), 0);
	assert_int_equal(count_files("done/store/quarantine/*"), 0);
	kiln_pipeline_free(p);
}

/* A failing read: its error, the source closed, nothing committed (a
 * later run starts from offset 0 again). */
static void test_read_error_commits_nothing(void **state)
{
	kiln_pipeline *p = pipeline("fail");
	kiln_run_result r;

	(void)state;
	reset_fake();
	fake.read_rc = KILN_EIO;
	assert_int_equal(kiln_ingest_run(&fake_source, &fake, p, &r), KILN_EIO);
	assert_string_equal(fake.calls, "orC");
	assert_string_equal(r.commit, "");

	reset_fake();
	if (kiln_ingest_run(&fake_source, &fake, p, &r) != 0)
		fail_msg("run: %s", kiln_error_last());
	assert_int_equal(fake.resumed, -1);
	assert_int_equal(r.delta.records_in, 3);
	assert_int_equal(strlen(r.commit), 40);
	kiln_pipeline_free(p);
}

/* The lineage is fenced: a run that resumed from an offset the branch has
 * since moved past commits nothing (KILN_EFENCED, seen by committed). */
static int stale_open(void **out, kiln_ingest *in, const void *args)
{
	int rc = fake_open(out, in, args);

	fake.resumed = -1; /* as if another run committed after this one looked */
	in->out->first_offset = in->out->next_offset = 0;
	return rc;
}

static void test_fenced_lineage(void **state)
{
	kiln_pipeline *p = pipeline("fence");
	kiln_source stale = fake_source;
	kiln_run_result r;

	(void)state;
	reset_fake();
	if (kiln_ingest_run(&fake_source, &fake, p, &r) != 0)
		fail_msg("run: %s", kiln_error_last());
	reset_fake();
	stale.open = stale_open;
	assert_int_equal(kiln_ingest_run(&stale, &fake, p, &r), KILN_EFENCED);
	assert_string_equal(fake.calls, "orelcC");
	kiln_pipeline_free(p);
}

/* What the workers' consume saw. */
struct consumed {
	pthread_t owner;
	pthread_mutex_t lock;
	int busy;          /* consumes in progress (at most 1) */
	int64_t next;      /* the first offset of the batch expected next */
	size_t count;      /* batches consumed */
	size_t fail_at;    /* consume fails on this batch (0: never) */
	bool on_owner;     /* a batch was consumed on the submitting thread */
	bool out_of_order; /* ... or out of submission order */
	bool overlapped;   /* ... or while another was */
};

static int consume_on_worker(void *ctx, kiln_batch *b)
{
	struct consumed *c = ctx;
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	if (c->busy++)
		c->overlapped = true;
	pthread_mutex_unlock(&c->lock);
	usleep(200); /* a slow delivery: the other worker curates meanwhile */
	if (pthread_equal(pthread_self(), c->owner))
		c->on_owner = true;
	if (b->offset[0] != c->next)
		c->out_of_order = true;
	c->next = b->offset[b->count - 1] + 1;
	if (++c->count == c->fail_at)
		rc = kiln_error_set(KILN_EIO, "consume failed on batch %zu", c->count);
	pthread_mutex_lock(&c->lock);
	c->busy--;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Submits `batches` batches of the three records, offsets going on from
 * c->next's start; returns the first error. */
static int submit_batches(kiln_curate_pool *pool, size_t batches, int64_t *offset)
{
	for (size_t n = 0; n < batches; n++) {
		kiln_batch *b = kiln_curate_pool_batch(pool);
		int rc;

		assert_non_null(b);
		b->topic = "mem";
		for (size_t i = 0; i < RECORD_COUNT; i++) {
			assert_int_equal(kiln_batch_reserve(b), 0);
			b->rec[i] = records[i];
			b->len[i] = strlen(records[i]);
			b->too_long[i] = false;
			b->offset[i] = (*offset)++;
			b->count++;
		}
		if ((rc = kiln_curate_pool_submit(pool, b)) < 0)
			return rc;
	}
	return 0;
}

static void test_deliver_on_workers(void **state)
{
	kiln_pipeline *p = pipeline("workers");
	kiln_run_setup setup = {0};
	kiln_curate_pool *pool = NULL;
	struct consumed c = {.owner = pthread_self()};
	int64_t offset = 0;
	int rc;

	(void)state;
	pthread_mutex_init(&c.lock, NULL);
	if (kiln_run_setup_open(&setup, p) != 0)
		fail_msg("setup: %s", kiln_error_last());
	kiln_curate_pool_options o = {.pipeline = p,
	                              .contract = setup.contract,
	                              .key = &setup.key,
	                              .splitter = &setup.splitter,
	                              .split_field = setup.split_field,
	                              .workers = 2,
	                              .consume = consume_on_worker,
	                              .ctx = &c,
	                              .deliver_on_workers = true};
	if (kiln_curate_pool_new(&pool, &o) != 0)
		fail_msg("pool: %s", kiln_error_last());
	/* more batches than the ring holds, all consumed in order */
	assert_int_equal(submit_batches(pool, 40, &offset), 0);
	assert_int_equal(kiln_curate_pool_drain(pool), 0);
	assert_int_equal(c.count, 40);
	assert_int_equal(c.next, offset);
	assert_false(c.on_owner);
	assert_false(c.out_of_order);
	assert_false(c.overlapped);

	/* a failed consume reaches the owner, and nothing after it is consumed */
	c.fail_at = 45;
	rc = submit_batches(pool, 40, &offset);
	if (rc == 0)
		rc = kiln_curate_pool_drain(pool);
	assert_int_equal(rc, KILN_EIO);
	assert_string_equal(kiln_error_last(), "consume failed on batch 45");
	assert_int_equal(c.count, 45);
	kiln_curate_pool_abandon(pool);

	/* abandoned, the pool serves again */
	c.next = offset;
	assert_int_equal(submit_batches(pool, 10, &offset), 0);
	assert_int_equal(kiln_curate_pool_drain(pool), 0);
	assert_int_equal(c.count, 55);
	assert_false(c.on_owner || c.out_of_order || c.overlapped);

	kiln_curate_pool_free(pool);
	kiln_run_setup_close(&setup);
	pthread_mutex_destroy(&c.lock);
	kiln_pipeline_free(p);
}

/* A fill: `total` batches of the three records, fail_at fails. */
struct filler {
	struct consumed *c;
	int64_t offset;
	size_t filled, total, fail_at;
	int busy;
	bool on_owner, overlapped;
};

static int fill_three(void *ctx, kiln_batch *b)
{
	struct filler *f = ctx;

	if (f->busy++)
		f->overlapped = true;
	if (pthread_equal(pthread_self(), f->c->owner))
		f->on_owner = true;
	usleep(100);
	f->busy--;
	if (f->filled == f->total)
		return 0;
	if (++f->filled == f->fail_at)
		return kiln_error_set(KILN_EIO, "fill failed on batch %zu", f->filled);
	b->topic = "mem";
	for (size_t i = 0; i < RECORD_COUNT; i++) {
		assert_int_equal(kiln_batch_reserve(b), 0);
		b->rec[i] = records[i];
		b->len[i] = strlen(records[i]);
		b->too_long[i] = false;
		b->offset[i] = f->offset++;
		b->count++;
	}
	return 1;
}

static void test_pull(void **state)
{
	kiln_pipeline *p = pipeline("pull");
	kiln_run_setup setup = {0};
	kiln_curate_pool *pool = NULL;
	struct consumed c = {.owner = pthread_self()};
	struct filler f = {.c = &c, .total = 40};
	char want[64];

	(void)state;
	pthread_mutex_init(&c.lock, NULL);
	if (kiln_run_setup_open(&setup, p) != 0)
		fail_msg("setup: %s", kiln_error_last());
	kiln_curate_pool_options o = {.pipeline = p,
	                              .contract = setup.contract,
	                              .key = &setup.key,
	                              .splitter = &setup.splitter,
	                              .split_field = setup.split_field,
	                              .workers = 3,
	                              .consume = consume_on_worker,
	                              .ctx = &c};
	/* the owner delivers: no pull */
	if (kiln_curate_pool_new(&pool, &o) != 0)
		fail_msg("pool: %s", kiln_error_last());
	assert_int_equal(kiln_curate_pool_pull(pool, fill_three, &f), KILN_EINVALID);
	kiln_curate_pool_free(pool);

	o.deliver_on_workers = true;
	if (kiln_curate_pool_new(&pool, &o) != 0)
		fail_msg("pool: %s", kiln_error_last());
	assert_int_equal(kiln_curate_pool_pull(pool, fill_three, &f), 0);
	assert_int_equal(f.filled, 40);
	assert_int_equal(c.count, 40);
	assert_int_equal(c.next, f.offset);
	assert_false(f.on_owner || f.overlapped);
	assert_false(c.on_owner || c.out_of_order || c.overlapped);

	/* a failed fill: its error, what was filled before it consumed */
	f = (struct filler){.c = &c, .offset = f.offset, .total = 40, .fail_at = 25};
	assert_int_equal(kiln_curate_pool_pull(pool, fill_three, &f), KILN_EIO);
	assert_string_equal(kiln_error_last(), "fill failed on batch 25");
	assert_int_equal(f.filled, 25);
	assert_true(c.count <= 40 + 24);
	assert_int_equal(f.busy, 0);
	kiln_curate_pool_abandon(pool);

	/* a failed consume stops the pull */
	c.fail_at = c.count + 5;
	c.next = f.offset;
	f = (struct filler){.c = &c, .offset = f.offset, .total = 1000};
	assert_int_equal(kiln_curate_pool_pull(pool, fill_three, &f), KILN_EIO);
	snprintf(want, sizeof(want), "consume failed on batch %zu", c.fail_at);
	assert_string_equal(kiln_error_last(), want);
	assert_int_equal(c.count, c.fail_at);
	assert_true(f.filled < 1000);
	kiln_curate_pool_abandon(pool);
	assert_false(f.on_owner || f.overlapped);
	assert_false(c.on_owner || c.out_of_order || c.overlapped);

	kiln_curate_pool_free(pool);
	kiln_run_setup_close(&setup);
	pthread_mutex_destroy(&c.lock);
	kiln_pipeline_free(p);
}

static int setup(void **state)
{
	(void)state;
	for (const char *const *d =
	         (const char *const[]){"commit", "done", "fail", "fence", "workers", "pull", NULL};
	     *d; d++) {
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
	    cmocka_unit_test(test_run_commits_then_resumes),
	    cmocka_unit_test(test_done_at_open_writes_nothing),
	    cmocka_unit_test(test_read_error_commits_nothing),
	    cmocka_unit_test(test_fenced_lineage),
	    cmocka_unit_test(test_deliver_on_workers),
	    cmocka_unit_test(test_pull),
	};

	return kiln_test_main(tests, tmpdir, "ingest-loop", setup, NULL);
}
