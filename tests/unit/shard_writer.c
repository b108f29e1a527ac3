/* Unit tests for src/shard/writer.c: each split's records in its own
 * writer's shards (routed by kiln_batch_deliver, as the ingest sink does),
 * shards closed at target_bytes, each shard one zstd frame whose name is the
 * BLAKE2b-256 of its bytes (checked with kiln_shard_check) and which
 * decompresses to exactly the lines appended, in order, with their source
 * offsets; the background mode storing the same shards; an empty writer
 * storing nothing; and failures (a spool directory that is not there, a
 * store that cannot be written) reported as a negative KILN_E* code with a
 * message, the shard kept for a retry. */
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
#include <zstd.h>

#include "fixture.h"
#include "core/error.h"
#include "ingest/curate_pool.h"
#include "shard/fetch.h"
#include "shard/object.h"
#include "shard/writer.h"
#include "shard/zstd_pool.h"

static char tmpdir[PATH_MAX];

/* A file store in a fresh directory under tmpdir. */
static kiln_store *open_store(const char *name, char root[PATH_MAX])
{
	char url[PATH_MAX + 16];
	kiln_store *store = NULL;

	snprintf(root, PATH_MAX, "%s/%s", tmpdir, name);
	snprintf(url, sizeof(url), "file://%s", root);
	if (kiln_store_open(&store, url, NULL) != 0)
		fail_msg("%s: %s", url, kiln_error_last());
	return store;
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *data;

	if (!f)
		fail_msg("%s: cannot open", path);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	data = malloc(*len + 1);
	assert_non_null(data);
	assert_int_equal(fread(data, 1, *len, f), *len);
	fclose(f);
	return data;
}

/* Checks the stored shard e: named by its hash, e->bytes long, one zstd
 * frame decompressing to exactly want (e->raw_bytes of it). */
static void check_shard(const char *root, const kiln_shard_entry *e, const char *want)
{
	char key[KILN_SHARD_KEY_CAP], path[PATH_MAX + KILN_SHARD_KEY_CAP];
	size_t len, want_len = strlen(want);
	kiln_shard_check check;
	char *data, *plain;

	assert_int_equal(kiln_shard_name(key, sizeof(key), NULL, e->hash, NULL), 0);
	snprintf(path, sizeof(path), "%s/%s", root, key);
	data = read_all(path, &len);
	assert_int_equal(len, e->bytes);
	kiln_shard_check_init(&check);
	kiln_shard_check_update(&check, data, len);
	assert_int_equal(kiln_shard_check_final(&check, e->hash, e->bytes), KILN_SHARD_OK);
	assert_int_equal(ZSTD_findFrameCompressedSize(data, len), len); /* exactly one frame */
	assert_int_equal(ZSTD_getFrameContentSize(data, len), want_len);
	plain = malloc(want_len + 1);
	assert_non_null(plain);
	assert_int_equal(ZSTD_decompress(plain, want_len + 1, data, len), want_len);
	assert_memory_equal(plain, want, want_len);
	assert_int_equal(e->raw_bytes, want_len);
	free(plain);
	free(data);
}

/* Appends "rec-NNN" for n = first..last (8 bytes a line with its newline)
 * from topic t partition 0 at offset n. */
static void append_range(kiln_shard_writer *w, int first, int last)
{
	char line[16];

	for (int n = first; n <= last; n++) {
		snprintf(line, sizeof(line), "rec-%03d", n);
		assert_int_equal(kiln_shard_writer_append(w, line, strlen(line), "t", 0, n), 0);
	}
}

/* The JSON Lines of "rec-NNN" for n = first..last. */
static const char *lines(int first, int last)
{
	static char out[1024];
	size_t at = 0;

	out[0] = '\0';
	for (int n = first; n <= last; n++)
		at += (size_t)snprintf(out + at, sizeof(out) - at, "rec-%03d\n", n);
	return out;
}

static void test_one_shard_with_sources(void **state)
{
	char root[PATH_MAX];
	kiln_store *store = open_store("one", root);
	kiln_shard_writer *w;
	const kiln_shard_entry *e;
	size_t n;

	(void)state;
	assert_int_equal(kiln_shard_writer_new(&w, store, NULL), 0);
	assert_int_equal(kiln_shard_writer_append(w, "{\"a\":1}", 7, "clicks", 2, 40), 0);
	assert_int_equal(kiln_shard_writer_append(w, "{\"a\":2}", 7, "views", 0, 7), 0);
	assert_int_equal(kiln_shard_writer_append(w, "{\"a\":3}", 7, "clicks", 2, 38), 0);
	assert_int_equal(kiln_shard_writer_finish(w), 0);
	e = kiln_shard_writer_shards(w, &n);
	assert_int_equal(n, 1);
	assert_int_equal(e->records, 3);
	check_shard(root, e, "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
	/* per topic and partition, the lowest and highest offset */
	assert_int_equal(e->source_count, 2);
	assert_string_equal(e->sources[0].topic, "clicks");
	assert_int_equal(e->sources[0].partition, 2);
	assert_int_equal(e->sources[0].first, 38);
	assert_int_equal(e->sources[0].last, 40);
	assert_string_equal(e->sources[1].topic, "views");
	assert_int_equal(e->sources[1].first, 7);
	assert_int_equal(e->sources[1].last, 7);
	kiln_shard_writer_free(w);
	kiln_store_close(store);
}

/* target_bytes 20 with 8-byte lines: a shard closes once it holds 24 bytes,
 * so 10 records make shards of 3, 3, 3 and 1 (the last closed by finish). */
static void check_rollover(bool background)
{
	kiln_shard_writer_options opt = {.target_bytes = 20, .background = background};
	char root[PATH_MAX];
	kiln_store *store = open_store(background ? "roll-bg" : "roll", root);
	kiln_shard_writer *w;
	const kiln_shard_entry *e;
	size_t n;

	assert_int_equal(kiln_shard_writer_new(&w, store, &opt), 0);
	append_range(w, 0, 9);
	assert_int_equal(kiln_shard_writer_finish(w), 0);
	e = kiln_shard_writer_shards(w, &n);
	assert_int_equal(n, 4);
	for (int i = 0; i < 4; i++) {
		int first = 3 * i, last = i < 3 ? first + 2 : 9;

		assert_int_equal(e[i].records, (uint64_t)(last - first + 1));
		assert_int_equal(e[i].sources[0].first, first);
		assert_int_equal(e[i].sources[0].last, last);
		check_shard(root, &e[i], lines(first, last));
	}
	kiln_shard_writer_free(w);
	kiln_store_close(store);
}

static void test_rollover(void **state)
{
	(void)state;
	check_rollover(false);
}

static void test_rollover_background(void **state)
{
	(void)state;
	check_rollover(true);
}

/* One curated batch of train and test records (none for validation) through
 * kiln_batch_deliver: each record lands in its own split's writer, in input
 * order, and the validation writer stores nothing. */
static void test_splits(void **state)
{
	static const char curated[KILN_SPLIT_COUNT][32] = {"{\"t\":0}\n{\"t\":2}\n{\"t\":3}\n", "",
	                                                   "{\"x\":1}\n"};
	size_t train_len[] = {8, 8, 8}, train_index[] = {0, 2, 3}, test_len[] = {8}, test_index[] = {1};
	int64_t offsets[] = {100, 101, 102, 103};
	kiln_batch b = {.topic = "clicks", .partition = 1, .count = 4, .offset = offsets};
	kiln_shard_writer *w[KILN_SPLIT_COUNT];
	kiln_stats d = {0};
	char root[PATH_MAX];
	kiln_store *store = open_store("splits", root);
	const kiln_shard_entry *e;
	size_t n;
	struct stat st;
	char shards[PATH_MAX + 8];

	(void)state;
	assert_int_equal(KILN_SPLIT_COUNT, 3);
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		b.out[s].ptr = (char *)curated[s];
		b.out[s].len = strlen(curated[s]);
		assert_int_equal(kiln_shard_writer_new(&w[s], store, NULL), 0);
	}
	b.out_len[0] = train_len;
	b.out_index[0] = train_index;
	b.out_count[0] = 3;
	b.out_len[2] = test_len;
	b.out_index[2] = test_index;
	b.out_count[2] = 1;
	assert_int_equal(kiln_batch_deliver(&b, w, NULL, &d, NULL), 0);
	assert_int_equal(d.valid, 4);

	/* nothing is stored before a flush */
	snprintf(shards, sizeof(shards), "%s/shards", root);
	assert_int_not_equal(stat(shards, &st), 0);
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		assert_int_equal(kiln_shard_writer_finish(w[s]), 0);

	e = kiln_shard_writer_shards(w[0], &n);
	assert_int_equal(n, 1);
	check_shard(root, e, "{\"t\":0}\n{\"t\":2}\n{\"t\":3}\n");
	assert_int_equal(e->sources[0].first, 100);
	assert_int_equal(e->sources[0].last, 103);
	e = kiln_shard_writer_shards(w[2], &n);
	assert_int_equal(n, 1);
	check_shard(root, e, "{\"x\":1}\n");
	assert_int_equal(e->sources[0].first, 101);
	assert_int_equal(e->sources[0].last, 101);
	e = kiln_shard_writer_shards(w[1], &n);
	assert_int_equal(n, 0);
	assert_null(e);
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		kiln_shard_writer_free(w[s]);
	kiln_store_close(store);
}

/* 40 records of 8 to 20 bytes in one batch, delivered in runs to a writer
 * with a 50-byte target: the same shards (bytes, records, offsets) as
 * appending the records one by one, since a run ends with the record that
 * fills the shard. */
static void test_runs_match_single_appends(void **state)
{
	enum { N = 40 };
	kiln_shard_writer_options opt = {.target_bytes = 50};
	char root[PATH_MAX], line[32], out[N * 32];
	size_t len[N], index[N], at = 0, n_runs, n_single;
	int64_t offsets[N];
	kiln_batch b = {.topic = "t", .partition = 3, .count = N, .offset = offsets};
	kiln_shard_writer *runs[KILN_SPLIT_COUNT] = {NULL}, *single;
	kiln_store *store = open_store("runs", root);
	const kiln_shard_entry *e_runs, *e_single;
	kiln_stats d = {0};

	(void)state;
	assert_int_equal(kiln_shard_writer_new(&runs[0], store, &opt), 0);
	assert_int_equal(kiln_shard_writer_new(&runs[1], store, &opt), 0);
	assert_int_equal(kiln_shard_writer_new(&runs[2], store, &opt), 0);
	assert_int_equal(kiln_shard_writer_new(&single, store, &opt), 0);
	for (int i = 0; i < N; i++) {
		int w = snprintf(line, sizeof(line), "{\"r\":\"%.*s\"}", (i * 7) % 13, "abcdefghijklm");

		offsets[i] = 1000 + 2 * i;
		index[i] = (size_t)i;
		len[i] = (size_t)w + 1;
		memcpy(out + at, line, (size_t)w);
		out[at + (size_t)w] = '\n';
		at += len[i];
		assert_int_equal(kiln_shard_writer_append(single, line, (size_t)w, "t", 3, offsets[i]), 0);
	}
	b.out[0].ptr = out;
	b.out[0].len = at;
	b.out_len[0] = len;
	b.out_index[0] = index;
	b.out_count[0] = N;
	assert_int_equal(kiln_batch_deliver(&b, runs, NULL, &d, NULL), 0);
	assert_int_equal(d.splits[0].records, N);
	assert_int_equal(kiln_shard_writer_finish(runs[0]), 0);
	assert_int_equal(kiln_shard_writer_finish(single), 0);
	e_runs = kiln_shard_writer_shards(runs[0], &n_runs);
	e_single = kiln_shard_writer_shards(single, &n_single);
	assert_true(n_single > 5);
	assert_int_equal(n_runs, n_single);
	for (size_t i = 0; i < n_runs; i++) {
		assert_memory_equal(e_runs[i].hash, e_single[i].hash, sizeof(e_runs[i].hash));
		assert_int_equal(e_runs[i].records, e_single[i].records);
		assert_int_equal(e_runs[i].raw_bytes, e_single[i].raw_bytes);
		assert_int_equal(e_runs[i].sources[0].first, e_single[i].sources[0].first);
		assert_int_equal(e_runs[i].sources[0].last, e_single[i].sources[0].last);
	}
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		kiln_shard_writer_free(runs[s]);
	kiln_shard_writer_free(single);
	kiln_store_close(store);
}

/* The frame libzstd makes of `len` bytes in kiln's multithreaded framing
 * with the size pledged (malloc'd, *out_len bytes). */
static char *reference_frame(const char *data, size_t len, size_t *out_len)
{
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	size_t cap = ZSTD_compressBound(len);
	char *out = malloc(cap);

	assert_non_null(out);
	assert_int_equal(kiln_zstd_multithread(cctx, 2, NULL), 0);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
	*out_len = ZSTD_compress2(cctx, out, cap, data, len);
	assert_false(ZSTD_isError(*out_len));
	ZSTD_freeCCtx(cctx);
	return out;
}

/* Shards of 8 MiB are compressed while they fill (kiln_spool_stream), the
 * frame begun without a content size and its header rewritten at the close:
 * the stored bytes are exactly those of compressing the shard at once with
 * its size pledged, in both modes; the last, small shard (compressed when
 * it closes) too. */
static void check_streamed(bool background, bool runs)
{
	enum { TARGET = 8 << 20, TOTAL = 11 << 20 };
	kiln_shard_writer_options opt = {.target_bytes = TARGET, .background = background, .zstd_threads = 2};
	char root[PATH_MAX], *all = malloc(TOTAL + 256), *ref, *got;
	kiln_store *store = open_store(runs         ? (background ? "streamed-runs-bg" : "streamed-runs")
	                               : background ? "streamed-bg"
	                                            : "streamed",
	                               root);
	char key[KILN_SHARD_KEY_CAP], path[PATH_MAX + KILN_SHARD_KEY_CAP];
	const kiln_shard_entry *e;
	kiln_shard_writer *w;
	size_t at = 0, n, ref_len, got_len, first = 0, run_at = 0, run_lines = 0, cycle = 0;
	uint64_t x = 88172645463325252ull;
	int records = 0, run_first = 0;

	assert_non_null(all);
	assert_int_equal(kiln_shard_writer_new(&w, store, &opt), 0);
	while (at < TOTAL) {
		char line[128];
		int len;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		len = snprintf(line, sizeof(line), "{\"id\":%d,\"v\":\"%016llx\",\"n\":%llu}", records,
		               (unsigned long long)x, (unsigned long long)(x % 1000));
		if (!runs)
			assert_int_equal(kiln_shard_writer_append(w, line, (size_t)len, "t", 0, records), 0);
		memcpy(all + at, line, (size_t)len);
		all[at + (size_t)len] = '\n';
		at += (size_t)len + 1;
		records++;
		/* runs of ~4 KiB, ~120 KiB and ~1.2 MiB in turn (each size after
		 * each): small ones are gathered, large ones go to libzstd as they
		 * are, after what was gathered */
		if (runs && (++run_lines == (size_t[]){80, 2500, 25000, 2500, 80, 25000, 80}[cycle % 7] ||
		             at >= TOTAL)) {
			size_t room = kiln_shard_writer_room(w);

			/* a run never crosses a shard's target (as curate_pool cuts them) */
			if (at - run_at > room) {
				size_t cut = run_at;
				int k = run_first;

				while (cut - run_at < room) {
					cut = (size_t)((char *)memchr(all + cut, '\n', at - cut) - all) + 1;
					k++;
				}
				assert_int_equal(kiln_shard_writer_append_run(w, all + run_at, cut - run_at,
				                                              (size_t)(k - run_first), "t", 0,
				                                              run_first, k - 1),
				                 0);
				run_at = cut;
				run_first = k;
			}
			assert_int_equal(kiln_shard_writer_append_run(w, all + run_at, at - run_at,
			                                              (size_t)(records - run_first), "t", 0,
			                                              run_first, records - 1),
			                 0);
			run_at = at;
			run_first = records;
			run_lines = 0;
			cycle++;
		}
	}
	assert_int_equal(kiln_shard_writer_finish(w), 0);
	e = kiln_shard_writer_shards(w, &n);
	assert_int_equal(n, 2);
	assert_true(e[0].raw_bytes >= TARGET && e[1].raw_bytes < (4 << 20));
	for (size_t i = 0; i < n; i++) {
		ref = reference_frame(all + first, e[i].raw_bytes, &ref_len);
		assert_int_equal(kiln_shard_name(key, sizeof(key), NULL, e[i].hash, NULL), 0);
		snprintf(path, sizeof(path), "%s/%s", root, key);
		got = read_all(path, &got_len);
		assert_int_equal(got_len, ref_len);
		assert_memory_equal(got, ref, ref_len);
		free(ref);
		free(got);
		first += e[i].raw_bytes;
	}
	assert_int_equal(first, at);
	kiln_shard_writer_free(w);
	kiln_store_close(store);
	free(all);
}

static void test_streamed(void **state)
{
	(void)state;
	check_streamed(false, false);
}

static void test_streamed_background(void **state)
{
	(void)state;
	check_streamed(true, false);
}

/* The same records given in runs (kiln_shard_writer_append_run, as a curate
 * worker delivers them), small and large: the same bytes. */
static void test_streamed_runs(void **state)
{
	(void)state;
	check_streamed(false, true);
	check_streamed(true, true);
}

/* A writer that got no record stores no shard, flushed or finished. */
/* Batches of 6,000 records (about 600 KB) delivered to a background writer
 * (a feeder, zstd threads) with a 4 MiB target: a batch's split bytes that go
 * in one run are taken as they are (the batch is left an empty buffer), the
 * runs that fill a shard are copied, and the shards are those of appending
 * the records one by one to a writer without a thread of its own. */
static void test_taken_runs_match_single_appends(void **state)
{
	enum { N = 6000, BATCHES = 16 };
	kiln_shard_writer_options bg = {.target_bytes = 4 << 20, .background = true, .zstd_threads = 2},
	                          plain = {.target_bytes = 4 << 20, .zstd_threads = 2};
	char root[PATH_MAX], line[160];
	size_t *len = calloc(N, sizeof(size_t)), *index = calloc(N, sizeof(size_t)), n_bg, n_single,
	       taken = 0;
	int64_t *offsets = calloc(N, sizeof(int64_t));
	kiln_batch b = {.topic = "t", .partition = 1, .count = N, .offset = offsets};
	kiln_shard_writer *w[KILN_SPLIT_COUNT] = {NULL}, *single;
	kiln_store *store = open_store("taken", root);
	const kiln_shard_entry *e_bg, *e_single;
	kiln_stats d = {0};
	uint64_t x = 88172645463325252ull;

	(void)state;
	assert_non_null(len);
	assert_non_null(index);
	assert_non_null(offsets);
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		assert_int_equal(kiln_shard_writer_new(&w[s], store, &bg), 0);
	assert_int_equal(kiln_shard_writer_new(&single, store, &plain), 0);
	b.out_len[0] = len;
	b.out_index[0] = index;
	for (int k = 0; k < BATCHES; k++) {
		kiln_buf_reset(&b.out[0]);
		for (int i = 0; i < N; i++) {
			int n;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			n = snprintf(line, sizeof(line),
			             "{\"id\":%d,\"v\":\"%016llx%016llx\",\"pad\":\"%.*s\"}", k * N + i,
			             (unsigned long long)x, (unsigned long long)(x * 31), (int)(x % 50),
			             "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz");
			offsets[i] = (int64_t)(k * N + i);
			index[i] = (size_t)i;
			len[i] = (size_t)n + 1;
			assert_int_equal(kiln_buf_put(&b.out[0], line, (size_t)n), 0);
			assert_int_equal(kiln_buf_put(&b.out[0], "\n", 1), 0);
			assert_int_equal(
			    kiln_shard_writer_append(single, line, (size_t)n, "t", 1, offsets[i]), 0);
		}
		b.out_count[0] = N;
		assert_int_equal(kiln_batch_deliver(&b, w, NULL, &d, NULL), 0);
		taken += b.out[0].len == 0;
	}
	assert_true(taken > BATCHES / 2);
	assert_true(taken < BATCHES); /* some runs filled a shard: copied */
	assert_int_equal(d.splits[0].records, (uint64_t)N * BATCHES);
	assert_int_equal(kiln_shard_writer_finish(w[0]), 0);
	assert_int_equal(kiln_shard_writer_finish(single), 0);
	e_bg = kiln_shard_writer_shards(w[0], &n_bg);
	e_single = kiln_shard_writer_shards(single, &n_single);
	assert_true(n_single >= 2);
	assert_int_equal(n_bg, n_single);
	for (size_t i = 0; i < n_bg; i++) {
		assert_memory_equal(e_bg[i].hash, e_single[i].hash, sizeof(e_bg[i].hash));
		assert_int_equal(e_bg[i].records, e_single[i].records);
		assert_int_equal(e_bg[i].raw_bytes, e_single[i].raw_bytes);
		assert_int_equal(e_bg[i].sources[0].first, e_single[i].sources[0].first);
		assert_int_equal(e_bg[i].sources[0].last, e_single[i].sources[0].last);
		assert_int_equal(e_bg[i].filter_len, e_single[i].filter_len);
		assert_memory_equal(e_bg[i].filter, e_single[i].filter, e_bg[i].filter_len);
	}
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		kiln_shard_writer_free(w[s]);
	kiln_shard_writer_free(single);
	kiln_store_close(store);
	kiln_buf_free(&b.out[0]);
	free(len);
	free(index);
	free(offsets);
}

static void test_empty_writes_nothing(void **state)
{
	char root[PATH_MAX], shards[PATH_MAX + 8];
	kiln_store *store = open_store("empty", root);
	kiln_shard_writer_options opt = {.background = true};
	kiln_shard_writer *w, *bg;
	struct stat st;
	size_t n = 1;

	(void)state;
	assert_int_equal(kiln_shard_writer_new(&w, store, NULL), 0);
	assert_int_equal(kiln_shard_writer_new(&bg, store, &opt), 0);
	assert_int_equal(kiln_shard_writer_flush(w), 0);
	assert_int_equal(kiln_shard_writer_finish(w), 0);
	assert_int_equal(kiln_shard_writer_finish(bg), 0);
	kiln_shard_writer_shards(w, &n);
	assert_int_equal(n, 0);
	kiln_shard_writer_shards(bg, &n);
	assert_int_equal(n, 0);
	snprintf(shards, sizeof(shards), "%s/shards", root);
	assert_int_not_equal(stat(shards, &st), 0);
	kiln_shard_writer_free(w);
	kiln_shard_writer_free(bg);
	kiln_store_close(store);
}

/* Makes root/shards a regular file, so no shard can be stored under it. */
static void block_shards(const char *root, char path[PATH_MAX + 8])
{
	snprintf(path, PATH_MAX + 8, "%s/shards", root);
	kiln_test_write_file(path, "not a directory\n", 0600);
}

/* The last error is the blocked store's: "mkdir <root>/shards/<hh>: Not a
 * directory". */
static void expect_blocked(const char *root)
{
	char want[PATH_MAX + 16];

	snprintf(want, sizeof(want), "mkdir %s/shards/", root);
	if (strncmp(kiln_error_last(), want, strlen(want)) != 0 ||
	    !strstr(kiln_error_last(), ": Not a directory"))
		fail_msg("unexpected message: %s", kiln_error_last());
	assert_int_equal(kiln_error_last_code(), KILN_EIO);
}

static void test_errors(void **state)
{
	kiln_shard_writer_options missing = {.spool_dir = "/nonexistent/kiln-spool"};
	kiln_shard_writer_options bg = {.background = true};
	char root[PATH_MAX], blocker[PATH_MAX + 8];
	kiln_store *store = open_store("errors", root);
	kiln_shard_writer *w = (kiln_shard_writer *)&w;
	const kiln_shard_entry *e;
	size_t n;

	(void)state;
	/* a spool directory that is not there: no writer, a message naming it */
	assert_int_equal(kiln_shard_writer_new(&w, store, &missing), KILN_EIO);
	assert_null(w);
	assert_non_null(strstr(kiln_error_last(), "/nonexistent/kiln-spool: cannot create a spool file"));
	assert_int_equal(kiln_error_last_code(), KILN_EIO);

	/* a store that cannot be written: the flush fails, the shard stays
	 * open, and the retry stores it whole once the store is writable */
	block_shards(root, blocker);
	assert_int_equal(kiln_shard_writer_new(&w, store, NULL), 0);
	append_range(w, 1, 2);
	assert_int_equal(kiln_shard_writer_flush(w), KILN_EIO);
	expect_blocked(root);
	kiln_shard_writer_shards(w, &n);
	assert_int_equal(n, 0);
	assert_int_equal(kiln_test_rmtree(blocker), 0);
	append_range(w, 3, 3);
	assert_int_equal(kiln_shard_writer_finish(w), 0);
	e = kiln_shard_writer_shards(w, &n);
	assert_int_equal(n, 1);
	assert_int_equal(e->records, 3);
	check_shard(root, e, lines(1, 3));
	kiln_shard_writer_free(w);

	/* in the background mode the failure comes back from finish, with the
	 * message set on the writer's thread */
	assert_int_equal(kiln_test_rmtree(blocker), 0);
	block_shards(root, blocker);
	assert_int_equal(kiln_shard_writer_new(&w, store, &bg), 0);
	append_range(w, 1, 1);
	kiln_error_set(KILN_EINVALID, "an older message");
	assert_int_equal(kiln_shard_writer_finish(w), KILN_EIO);
	expect_blocked(root);
	kiln_shard_writer_free(w);
	assert_int_equal(kiln_test_rmtree(blocker), 0);
	kiln_store_close(store);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_one_shard_with_sources),
	    cmocka_unit_test(test_rollover),
	    cmocka_unit_test(test_rollover_background),
	    cmocka_unit_test(test_splits),
	    cmocka_unit_test(test_runs_match_single_appends),
	    cmocka_unit_test(test_streamed),
	    cmocka_unit_test(test_streamed_background),
	    cmocka_unit_test(test_taken_runs_match_single_appends),
	    cmocka_unit_test(test_empty_writes_nothing),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_streamed_runs),
	};

	return kiln_test_main(tests, tmpdir, "shard-writer", NULL, NULL);
}
