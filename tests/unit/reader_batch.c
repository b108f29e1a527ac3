/* Unit tests for the cursor's whole-shard batches (issue 29): the
 * read-ahead decompresses a shard straight into its text a slice at a time
 * and counts its lines as they come, so kiln_cursor_next_batch hands over
 * the rest of a shard without a scan when both limits allow. The batches
 * hold exactly the records kiln_cursor_next yields, their counts are the
 * shards' lines, and the state after each batch is the state of a cursor
 * read one record at a time; also for a shard whose last line has no
 * newline, one with an empty line, a shard of many slices, and when the
 * manifest's raw bytes are too few (the frames decide), too many or 0.
 * Each batch's kiln_cursor_batch_format names exactly its records' lengths
 * (the Python binding cuts the batch with it), for batches of a shard's
 * text and batches copied through a shuffle buffer; and a cursor that loads
 * shards in the caller's thread (KILN_READ_AHEAD=0, what a process on one
 * CPU does) gives the same batches and states as one that reads ahead. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "core/buf.h"
#include "kiln/reader.h"
#include "manifest/manifest.h"
#include "shard/spool.h"

#define NSHARDS 5

static char tmpdir[64];
static char manifest_path[128], store_url[160];

/* Each shard's text, its lines and their number */
static kiln_buf texts[NSHARDS];
static size_t nlines[NSHARDS];

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void add(int shard, const char *text, size_t len)
{
	assert_int_equal(kiln_buf_put(&texts[shard], text, len), 0);
}

static int setup(void **state)
{
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	kiln_shard_entry entries[NSHARDS];
	kiln_snapshot snap = {0};
	kiln_manifest *m;
	kiln_store *store;
	uint64_t rng = 29;
	char line[128], commit[41];

	(void)state;
	snprintf(manifest_path, sizeof(manifest_path), "%s/manifest.git", tmpdir);
	snprintf(store_url, sizeof(store_url), "file://%s/store", tmpdir);
	assert_non_null(cctx);
	/* 0: about 6 MiB of text that compresses to about half: many slices */
	for (size_t j = 0; j < 80000; j++) {
		int n =
		    snprintf(line, sizeof(line), "{\"n\":%zu,\"a\":\"%016llx%016llx\",\"b\":\"%016llx\"}\n",
		             j, (unsigned long long)splitmix64(&rng), (unsigned long long)splitmix64(&rng),
		             (unsigned long long)splitmix64(&rng));

		add(0, line, (size_t)n);
	}
	add(1, "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n", 24);
	add(2, "{\"a\":1}\n{\"a\":2}", 15);     /* the last line without its newline */
	add(3, "{\"a\":1}\n\n{\"a\":3}\n", 17); /* an empty line */
	add(4, "{\"only\":true}\n", 14);
	assert_int_equal(kiln_store_open(&store, store_url, NULL), 0);
	for (int i = 0; i < NSHARDS; i++) {
		kiln_spool spool;

		nlines[i] = 0;
		for (size_t k = 0; k < texts[i].len; k++)
			nlines[i] += texts[i].ptr[k] == '\n';
		nlines[i] += texts[i].ptr[texts[i].len - 1] != '\n';
		memset(&entries[i], 0, sizeof(entries[i]));
		assert_int_equal(kiln_spool_open(&spool, NULL), 0);
		assert_int_equal(kiln_spool_write(&spool, texts[i].ptr, texts[i].len), 0);
		entries[i].records = nlines[i];
		entries[i].raw_bytes = texts[i].len;
		assert_int_equal(
		    kiln_spool_store(&spool, store, cctx, 3, NULL, entries[i].hash, &entries[i].bytes), 0);
		kiln_spool_close(&spool);
	}
	assert_true(entries[0].bytes > (1u << 20)); /* more than four slices */
	kiln_store_close(store);
	ZSTD_freeCCtx(cctx);
	assert_int_equal(kiln_manifest_open(&m, manifest_path), 0);
	snap.dataset = "ds";
	snap.branch = "main";
	snap.dataset_json = "{\"name\":\"ds\"}";
	snap.shards[KILN_SPLIT_TRAIN] = entries;
	snap.shard_count[KILN_SPLIT_TRAIN] = NSHARDS;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	kiln_manifest_close(m);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < NSHARDS; i++)
		kiln_buf_free(&texts[i]);
	return 0;
}

/* Which of the fixture's shards has this text. */
static int shard_of(const kiln_reader_shard *s)
{
	for (int i = 0; i < NSHARDS; i++)
		if (s->records == nlines[i] && s->raw_bytes == texts[i].len)
			return i;
	return -1;
}

static const kiln_cursor_options plain = {.version = KILN_CURSOR_OPTIONS_VERSION, .split = KILN_SPLIT_TRAIN};

/* kiln_cursor_batch_format of the batch data[0..len) of count records:
 * "<n>sx" for each record, n its length in decimal, nothing else. */
static void check_format(kiln_cursor *c, const char *data, size_t len, size_t count)
{
	const char *f, *at = data;
	size_t flen, fields = 0, pos = 0;

	assert_int_equal(kiln_cursor_batch_format(c, &f, &flen), 0);
	while (pos < flen) {
		size_t n = 0, digits = 0;
		const char *nl;

		for (; pos < flen && f[pos] >= '0' && f[pos] <= '9'; pos++, digits++)
			n = n * 10 + (size_t)(f[pos] - '0');
		assert_true(digits > 0 && (digits == 1 || f[pos - digits] != '0'));
		assert_true(pos + 2 <= flen && f[pos] == 's' && f[pos + 1] == 'x');
		pos += 2;
		nl = memchr(at, '\n', (size_t)(data + len - at));
		assert_non_null(nl);
		assert_int_equal(n, (size_t)(nl - at));
		at = nl + 1;
		fields++;
	}
	assert_int_equal(fields, count);
	assert_ptr_equal(at, data + len);
}

/* Reads the split in batches of at most max_records and max_bytes with c,
 * checking each against d read one record at a time (bytes and state);
 * the batch counts go to counts[] (at most cap). Returns how many batches. */
static size_t read_batches(kiln_cursor *c, kiln_cursor *d, size_t max_records, size_t max_bytes,
                           size_t *counts, size_t cap)
{
	const char *data, *rec;
	size_t len, count, n, batches = 0;
	char st[KILN_CURSOR_STATE_SIZE], want[KILN_CURSOR_STATE_SIZE];
	int rc;

	while ((rc = kiln_cursor_next_batch(c, max_records, max_bytes, &data, &len, &count)) == 1) {
		const char *at = data;

		assert_true(count >= 1 && count <= max_records && len > 0 && data[len - 1] == '\n');
		check_format(c, data, len, count);
		for (size_t i = 0; i < count; i++) {
			assert_int_equal(kiln_cursor_next(d, &rec, &n), 1);
			assert_true((size_t)(data + len - at) > n);
			assert_memory_equal(at, rec, n);
			assert_int_equal(at[n], '\n');
			at += n + 1;
		}
		assert_ptr_equal(at, data + len);
		assert_int_equal(kiln_cursor_state(d, want, sizeof(want)), 0);
		assert_int_equal(kiln_cursor_state(c, st, sizeof(st)), 0);
		assert_string_equal(st, want);
		assert_int_equal(kiln_cursor_yielded(c), kiln_cursor_yielded(d));
		assert_true(batches < cap);
		counts[batches++] = count;
	}
	assert_int_equal(rc, 0);
	{ /* after the end: an empty format */
		const char *f;
		size_t flen = 1;

		assert_int_equal(kiln_cursor_batch_format(c, &f, &flen), 0);
		assert_int_equal(flen, 0);
	}
	assert_int_equal(kiln_cursor_next(d, &rec, &n), 0);
	return batches;
}

/* With no limit, a batch is the rest of a shard: its lines, counted by the
 * read-ahead; a shard whose last line lacks its newline comes in two. */
static void whole_shards(kiln_reader *r)
{
	kiln_reader_shard *list;
	kiln_cursor *c, *d;
	size_t n, counts[16], batches, b = 0;

	assert_int_equal(kiln_reader_shards(r, KILN_SPLIT_TRAIN, &list, &n), 0);
	assert_int_equal(n, NSHARDS);
	assert_int_equal(kiln_cursor_open(&c, r, &plain), 0);
	assert_int_equal(kiln_cursor_open(&d, r, &plain), 0);
	batches = read_batches(c, d, SIZE_MAX, SIZE_MAX, counts, 16);
	for (size_t i = 0; i < n; i++) { /* without a seed: hash order */
		int s = shard_of(&list[i]);

		assert_true(s >= 0);
		if (s == 2) { /* the lines that end, then the last one copied */
			assert_int_equal(counts[b++], nlines[s] - 1);
			assert_int_equal(counts[b++], 1);
		} else {
			assert_int_equal(counts[b++], nlines[s]);
		}
	}
	assert_int_equal(b, batches);
	kiln_cursor_close(c);
	kiln_cursor_close(d);
}

static void test_whole_shard_batches(void **state)
{
	kiln_reader *r;

	(void)state;
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
	whole_shards(r);
	kiln_reader_close(r);
}

/* The manifest's raw bytes only size the text: too few (the frames decide,
 * streamed), none, or too many, the same batches and counts. */
static void test_raw_bytes_only_size_the_text(void **state)
{
	(void)state;
	for (int how = 0; how < 3; how++) {
		kiln_reader *r;
		kiln_reader_shard *list;
		size_t n;

		assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
		assert_int_equal(kiln_reader_shards(r, KILN_SPLIT_TRAIN, &list, &n), 0);
		for (size_t i = 0; i < n; i++) {
			int s = shard_of(&list[i]);

			assert_true(s >= 0);
			list[i].raw_bytes = how == 0   ? list[i].raw_bytes / 2
			                    : how == 1 ? 0
			                               : list[i].raw_bytes * 3;
			list[i].records = nlines[s]; /* shard_of matches no more: keep the order */
		}
		{
			kiln_cursor *c, *d;
			size_t counts[16], batches, total = 0, want = 0;

			assert_int_equal(kiln_cursor_open(&c, r, &plain), 0);
			assert_int_equal(kiln_cursor_open(&d, r, &plain), 0);
			batches = read_batches(c, d, SIZE_MAX, SIZE_MAX, counts, 16);
			assert_int_equal(batches, NSHARDS + 1); /* shard 2 in two */
			for (size_t i = 0; i < batches; i++)
				total += counts[i];
			for (int i = 0; i < NSHARDS; i++)
				want += nlines[i];
			assert_int_equal(total, want);
			kiln_cursor_close(c);
			kiln_cursor_close(d);
		}
		kiln_reader_close(r);
	}
}

/* Limits below a shard's rest: cut where the records or bytes say, and a
 * batch after a record read alone is the rest of its shard. */
static void test_limits_and_the_rest(void **state)
{
	kiln_reader *r;
	kiln_cursor *c, *d;
	size_t counts[4096], batches;
	const char *rec, *data;
	size_t n, len, count;

	(void)state;
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
	assert_int_equal(kiln_cursor_open(&c, r, &plain), 0);
	assert_int_equal(kiln_cursor_open(&d, r, &plain), 0);
	batches = read_batches(c, d, 1000, 64 << 10, counts, 4096);
	assert_true(batches > 80);
	kiln_cursor_close(c);
	kiln_cursor_close(d);
	assert_int_equal(kiln_cursor_open(&c, r, &plain), 0);
	assert_int_equal(kiln_cursor_next(c, &rec, &n), 1);
	assert_int_equal(kiln_cursor_next_batch(c, SIZE_MAX, SIZE_MAX, &data, &len, &count), 1);
	{
		kiln_reader_shard *list;
		size_t ns;
		int s;

		assert_int_equal(kiln_reader_shards(r, KILN_SPLIT_TRAIN, &list, &ns), 0);
		s = shard_of(&list[0]);
		assert_true(s >= 0 && s != 2);
		assert_int_equal(count, nlines[s] - 1);
		assert_int_equal(len, texts[s].len - (n + 1));
		assert_memory_equal(data, texts[s].ptr + n + 1, len);
	}
	{ /* a record read alone after a batch: the format describes no batch */
		const char *f;
		size_t flen;

		assert_int_equal(kiln_cursor_batch_format(c, &f, &flen), 0);
		assert_true(flen > 0);
		assert_int_equal(kiln_cursor_next(c, &rec, &n), 1);
		assert_int_equal(kiln_cursor_batch_format(c, &f, &flen), 0);
		assert_int_equal(flen, 0);
	}
	kiln_cursor_close(c);
	kiln_reader_close(r);
}

/* Batches copied through a shuffle buffer: their formats too (a scan of
 * the copy), and the same records as a cursor read one at a time. */
static void test_shuffled_batches_format(void **state)
{
	kiln_cursor_options o = plain;
	kiln_reader *r;
	kiln_cursor *c, *d;
	size_t counts[4096];

	(void)state;
	o.seed = 7;
	o.shuffle = true;
	o.shuffle_buffer = 100;
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
	assert_int_equal(kiln_cursor_open(&c, r, &o), 0);
	assert_int_equal(kiln_cursor_open(&d, r, &o), 0);
	assert_true(read_batches(c, d, 1000, 64 << 10, counts, 4096) > 80);
	kiln_cursor_close(c);
	kiln_cursor_close(d);
	kiln_reader_close(r);
}

/* Loading in the caller's thread (KILN_READ_AHEAD=0) against reading ahead
 * (KILN_READ_AHEAD=1): the same batches, counts and states. */
static void test_without_read_ahead(void **state)
{
	const char *ways[] = {"0", "1"};
	size_t counts[2][4096], batches[2];

	(void)state;
	for (int w = 0; w < 2; w++) {
		kiln_reader *r;
		kiln_cursor *c, *d;

		assert_int_equal(setenv("KILN_READ_AHEAD", ways[w], 1), 0);
		assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
		whole_shards(r);
		assert_int_equal(kiln_cursor_open(&c, r, &plain), 0);
		assert_int_equal(kiln_cursor_open(&d, r, &plain), 0);
		batches[w] = read_batches(c, d, 1000, 64 << 10, counts[w], 4096);
		kiln_cursor_close(c);
		kiln_cursor_close(d);
		kiln_reader_close(r);
	}
	unsetenv("KILN_READ_AHEAD");
	assert_int_equal(batches[0], batches[1]);
	assert_memory_equal(counts[0], counts[1], batches[0] * sizeof(size_t));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_whole_shard_batches), cmocka_unit_test(test_raw_bytes_only_size_the_text),
	    cmocka_unit_test(test_limits_and_the_rest), cmocka_unit_test(test_shuffled_batches_format),
	    cmocka_unit_test(test_without_read_ahead),
	};

	return kiln_test_git_main(tests, tmpdir, "reader_batch", setup, teardown);
}
