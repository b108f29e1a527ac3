/* Unit tests for the dedup index and its segments (src/manifest/dedup.c):
 * insert and lookup (pending, committed, across the window), rollback,
 * commit and prune, 200,000 keys through table growth with no false
 * answer, the segment bytes known-answer and round trip, names, and
 * decoding refuses cut, grown, unsorted or altered bytes; dedup/ in commit
 * trees (dedup_tree.c): committed, loaded back, pruned to the window, a
 * commit fenced by another writer's key, kept by a commit without dedup;
 * the max_keys bound (refused at the bound, nothing changed, answers kept);
 * a dedup.key change (dataset.json's "dedup" member: rendered, parsed back,
 * an index of another key neither loaded nor kept, an ended dedup drops
 * dedup/). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "fixture.h"
#include "manifest/dedup.h"
#include "manifest/format.h"
#include "manifest/manifest.h"

#define DAY (86400 * 1000LL)
#define T0  1796597690731LL /* 2026-12-06, ms */

/* A key made from i (distinct i, distinct keys; not sorted). */
static void make_key(unsigned char k[16], uint64_t i)
{
	uint64_t x = i * 0x9E3779B97F4A7C15ull, y = (i + 7) * 0xD6E8FEB86659FD93ull;

	for (int b = 0; b < 8; b++) {
		k[b] = (unsigned char)(x >> (8 * b));
		k[8 + b] = (unsigned char)(y >> (8 * b));
	}
}

static void seen_pending_commit_window(void **state)
{
	kiln_dedup *d;
	unsigned char a[16], b[16];

	(void)state;
	make_key(a, 1);
	make_key(b, 2);
	assert_int_equal(kiln_dedup_new(&d, 7 * DAY), 0);
	assert_int_equal(kiln_dedup_seen(d, a, T0), 0); /* first: pending */
	assert_int_equal(kiln_dedup_seen(d, a, T0), 1); /* again within the snapshot */
	assert_int_equal(kiln_dedup_pending_count(d), 1);
	kiln_dedup_rollback(d); /* an abandoned snapshot leaves nothing */
	assert_int_equal(kiln_dedup_pending_count(d), 0);
	assert_int_equal(kiln_dedup_seen(d, a, T0), 0);
	assert_int_equal(kiln_dedup_commit(d, T0), 0);
	assert_int_equal(kiln_dedup_committed_count(d), 1);
	assert_int_equal(kiln_dedup_pending_count(d), 0);
	/* committed at T0: a duplicate up to T0 + 7 days (the bound included), not after */
	assert_int_equal(kiln_dedup_seen(d, a, T0 + 7 * DAY), 1);
	assert_int_equal(kiln_dedup_seen(d, a, T0 + 7 * DAY + 1), 0);
	assert_int_equal(kiln_dedup_seen(d, b, T0 + 7 * DAY + 1), 0);
	/* committing both at T0 + 7d + 2 prunes nothing still in the window */
	assert_int_equal(kiln_dedup_commit(d, T0 + 7 * DAY + 2), 0);
	assert_int_equal(kiln_dedup_committed_count(d), 2);
	assert_int_equal(kiln_dedup_seen(d, a, T0 + 8 * DAY), 1);
	kiln_dedup_clear(d);
	assert_int_equal(kiln_dedup_committed_count(d), 0);
	assert_int_equal(kiln_dedup_seen(d, a, T0 + 8 * DAY), 0);
	kiln_dedup_free(d);
	kiln_dedup_free(NULL);
	assert_int_equal(kiln_dedup_new(&d, 0), KILN_EINVALID);
}

static void prune_drops_old(void **state)
{
	kiln_dedup *d;
	unsigned char k[16];

	(void)state;
	assert_int_equal(kiln_dedup_new(&d, DAY), 0);
	for (uint64_t i = 0; i < 5000; i++) {
		make_key(k, i);
		assert_int_equal(kiln_dedup_add(d, k, i < 3000 ? T0 : T0 + DAY), 0);
	}
	assert_int_equal(kiln_dedup_committed_count(d), 5000);
	/* a commit at T0 + DAY + 1: the 3000 of T0 are out of the window */
	assert_int_equal(kiln_dedup_commit(d, T0 + DAY + 1), 0);
	assert_int_equal(kiln_dedup_committed_count(d), 2000);
	for (uint64_t i = 0; i < 5000; i++) {
		make_key(k, i);
		assert_int_equal(kiln_dedup_seen(d, k, T0 + DAY + 1), i < 3000 ? 0 : 1);
	}
	/* add keeps the later time */
	make_key(k, 4000);
	assert_int_equal(kiln_dedup_add(d, k, T0), 0);
	assert_int_equal(kiln_dedup_seen(d, k, T0 + 2 * DAY), 1);
	assert_int_equal(kiln_dedup_add(d, k, 0), KILN_EINVALID);
	kiln_dedup_free(d);
}

static void many_keys_exact(void **state)
{
	kiln_dedup *d;
	unsigned char k[16];
	size_t n;

	(void)state;
	assert_int_equal(kiln_dedup_new(&d, DAY), 0);
	for (uint64_t i = 0; i < 200000; i++) {
		make_key(k, i);
		assert_int_equal(kiln_dedup_seen(d, k, T0), 0);
	}
	const unsigned char(*p)[16] = kiln_dedup_pending(d, &n);
	assert_int_equal(n, 200000);
	for (size_t i = 1; i < n; i++)
		assert_true(memcmp(p[i - 1], p[i], 16) < 0);
	assert_int_equal(kiln_dedup_commit(d, T0), 0);
	for (uint64_t i = 0; i < 400000; i++) {
		make_key(k, i);
		assert_int_equal(kiln_dedup_seen(d, k, T0 + 1), i < 200000 ? 1 : 0);
	}
	kiln_dedup_free(d);
}

static void segment_round_trip(void **state)
{
	kiln_buf b = KILN_BUF_INIT(0);
	unsigned char keys[3][16];
	const unsigned char(*out)[16];
	size_t n;
	int64_t ms;
	char name[64];
	const unsigned char id[8] = {0xa3, 0x81, 0x76, 0xa1, 0x4c, 0x54, 0x66, 0x58};

	(void)state;
	memset(keys, 0, sizeof(keys));
	keys[0][15] = 1;
	keys[1][0] = 1;
	keys[2][0] = 0xff;
	assert_int_equal(kiln_dedup_segment_encode(&b, (const unsigned char(*)[16])keys, 3, 0x0102030405LL),
	                 0);
	/* "KILNDDP1", the time and the count little-endian, then the keys */
	assert_int_equal(b.len, 24 + 48);
	assert_memory_equal(b.ptr, "KILNDDP1\x05\x04\x03\x02\x01\0\0\0\x03\0\0\0\0\0\0\0", 24);
	assert_int_equal(kiln_dedup_segment_decode(b.ptr, b.len, "t", &ms, &out, &n), 0);
	assert_int_equal(ms, 0x0102030405LL);
	assert_int_equal(n, 3);
	assert_memory_equal(out, keys, 48);

	/* cut, grown, a count that lies, unsorted, repeated, zero time, bad magic */
	assert_int_equal(kiln_dedup_segment_decode(b.ptr, b.len - 1, "t", &ms, &out, &n), KILN_EINVALID);
	assert_int_equal(kiln_dedup_segment_decode(b.ptr, 23, "t", &ms, &out, &n), KILN_EINVALID);
	assert_int_equal(kiln_buf_put(&b, keys[2], 16), 0); /* 4 keys, counted 3; and repeated */
	assert_int_equal(kiln_dedup_segment_decode(b.ptr, b.len, "t", &ms, &out, &n), KILN_EINVALID);
	b.ptr[16] = 4;
	assert_int_equal(kiln_dedup_segment_decode(b.ptr, b.len, "t", &ms, &out, &n), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "t: key 3 is not above"));
	b.len -= 16;
	b.ptr[16] = 3;
	b.ptr[24] = 0x02; /* the first key above the second */
	assert_int_equal(kiln_dedup_segment_decode(b.ptr, b.len, "t", &ms, &out, &n), KILN_EINVALID);
	b.ptr[24] = 0;
	memset(b.ptr + 8, 0, 8);
	assert_int_equal(kiln_dedup_segment_decode(b.ptr, b.len, "t", &ms, &out, &n), KILN_EINVALID);
	b.ptr[8] = 1;
	assert_int_equal(kiln_dedup_segment_decode(b.ptr, b.len, "t", &ms, &out, &n), 0);
	b.ptr[0] = 'k';
	assert_int_equal(kiln_dedup_segment_decode(b.ptr, b.len, "t", &ms, &out, &n), KILN_EINVALID);
	/* an empty segment decodes (none is written) */
	kiln_buf_reset(&b);
	assert_int_equal(kiln_dedup_segment_encode(&b, NULL, 0, 5), 0);
	assert_int_equal(kiln_dedup_segment_decode(b.ptr, b.len, "t", &ms, &out, &n), 0);
	assert_int_equal(n, 0);
	kiln_buf_free(&b);

	kiln_dedup_segment_name(name, sizeof(name), T0, id);
	assert_string_equal(name, "1796597690731-a38176a14c546658.keys");
	assert_int_equal(kiln_dedup_segment_name_ms(name), T0);
	assert_int_equal(kiln_dedup_segment_name_ms("1796597690731-a38176a14c546658.key"), -1);
	assert_int_equal(kiln_dedup_segment_name_ms("179659769073-a38176a14c546658.keys"), -1);
	assert_int_equal(kiln_dedup_segment_name_ms("1796597690731-A38176a14c546658.keys"), -1);
	assert_int_equal(kiln_dedup_segment_name_ms("0000000000000-a38176a14c546658.keys"), -1);
	assert_int_equal(kiln_dedup_segment_name_ms(""), -1);
}

/* ---- dedup/ in commit trees ------------------------------------------------- */

static char tmpdir[64];

/* Commits keys[0..n) (sorted) at ms on ds/main with base; the commit id in out. */
static int commit_keys(kiln_manifest *m, const unsigned char (*keys)[16], size_t n, int64_t ms,
                       const char *base, char out[41])
{
	const kiln_lineage_entry lineage[] = {
	    {.source = KILN_LINEAGE_KAFKA, .topic = "t", .partition = 0, .next = (int64_t)ms}};
	kiln_snapshot snap = {.dataset = "ds",
	                      .branch = "main",
	                      .dataset_json = "{}",
	                      .lineage = lineage,
	                      .lineage_count = 1,
	                      .dedup = true,
	                      .dedup_keys = keys,
	                      .dedup_count = n,
	                      .dedup_ms = ms,
	                      .dedup_window_ms = DAY,
	                      .dedup_base = base};

	return kiln_manifest_commit(m, &snap, out);
}

static void tree_commit_load_prune_fence(void **state)
{
	char *repo = kiln_test_path(tmpdir, "m.git"), c1[41], c2[41], c3[41], base[41];
	unsigned char a[3][16], b[2][16], probe[16];
	kiln_manifest *m;
	kiln_dedup *d;

	(void)state;
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	a[0][0] = 1, a[1][0] = 2, a[2][0] = 3;
	b[0][0] = 4, b[1][0] = 5;
	assert_int_equal(kiln_manifest_open(&m, repo), 0);
	assert_int_equal(kiln_dedup_new(&d, DAY), 0);

	/* no branch yet: an empty index, base "" */
	assert_int_equal(kiln_manifest_dedup_load(m, "ds", "main", T0, "[\"k\"]", d, base), 0);
	assert_int_equal(kiln_dedup_committed_count(d), 0);
	assert_string_equal(base, "");

	/* one segment, loaded back with its time */
	assert_int_equal(commit_keys(m, (const unsigned char(*)[16])a, 3, T0, "", c1), 0);
	assert_int_equal(kiln_manifest_dedup_load(m, "ds", "main", T0 + 1, "[\"k\"]", d, base), 0);
	assert_string_equal(base, c1);
	assert_int_equal(kiln_dedup_committed_count(d), 3);
	assert_int_equal(kiln_dedup_seen(d, a[1], T0 + DAY), 1);
	assert_int_equal(kiln_dedup_seen(d, a[1], T0 + DAY + 1), 0);
	/* loaded after the window: the segment is skipped */
	assert_int_equal(kiln_manifest_dedup_load(m, "ds", "main", T0 + DAY + 1, "[\"k\"]", d, base), 0);
	assert_int_equal(kiln_dedup_committed_count(d), 0);

	/* a commit a window later prunes the first segment */
	assert_int_equal(commit_keys(m, (const unsigned char(*)[16])b, 2, T0 + DAY + 1, c1, c2), 0);
	assert_int_equal(kiln_manifest_dedup_load(m, "ds", "main", T0, "[\"k\"]", d, base), 0);
	assert_int_equal(kiln_dedup_committed_count(d), 2);
	assert_int_equal(kiln_dedup_seen(d, a[0], T0), 0);

	/* a writer whose index is of c1 commits a key c2 added: fenced, nothing
	 * changed; one without such a key commits; one whose base is the tip
	 * is not checked */
	memcpy(probe, b[1], 16);
	assert_int_equal(commit_keys(m, (const unsigned char(*)[16])probe, 1, T0 + DAY + 2, c1, c3),
	                 KILN_EFENCED);
	assert_non_null(strstr(kiln_error_last(), "another writer committed some of these dedup keys first"));
	probe[0] = 9;
	assert_int_equal(commit_keys(m, (const unsigned char(*)[16])probe, 1, T0 + DAY + 2, c1, c3), 0);
	memcpy(base, c3, sizeof(base));
	assert_int_equal(commit_keys(m, (const unsigned char(*)[16])b, 2, T0 + DAY + 3, base, c3), 0);

	/* a commit without dedup leaves dedup/ as it was */
	const kiln_lineage_entry lineage[] = {
	    {.source = KILN_LINEAGE_KAFKA, .topic = "t", .partition = 0, .next = 1}};
	kiln_snapshot plain = {
	    .dataset = "ds", .branch = "main", .dataset_json = "{}", .lineage = lineage, .lineage_count = 1};
	assert_int_equal(kiln_manifest_commit(m, &plain, c3), 0);
	assert_int_equal(kiln_manifest_dedup_load(m, "ds", "main", T0 + DAY + 3, "[\"k\"]", d, base), 0);
	assert_int_equal(kiln_dedup_committed_count(d), 3); /* b (again: once) and probe */
	assert_string_equal(base, c3);

	kiln_dedup_free(d);
	kiln_manifest_close(m);
	free(repo);
}

static void max_keys_bound(void **state)
{
	kiln_dedup *d;
	unsigned char k[16];

	(void)state;
	assert_int_equal(kiln_dedup_new(&d, DAY), 0);
	kiln_dedup_set_max_keys(d, 3);
	assert_int_equal(kiln_dedup_max_keys(d), 3);
	for (uint64_t i = 0; i < 2; i++) {
		make_key(k, i);
		assert_int_equal(kiln_dedup_add(d, k, T0), 0);
	}
	make_key(k, 2);
	assert_int_equal(kiln_dedup_seen(d, k, T0), 0); /* the third key: at the bound */
	make_key(k, 3);
	assert_int_equal(kiln_dedup_seen(d, k, T0), KILN_ELIMIT); /* a fourth is refused, */
	assert_int_equal(kiln_dedup_pending_count(d), 1);         /* not made pending */
	for (uint64_t i = 0; i < 3; i++) {                        /* held keys still answer */
		make_key(k, i);
		assert_int_equal(kiln_dedup_seen(d, k, T0), 1);
	}
	/* the pending key commits within the bound; a fourth committed one is refused */
	assert_int_equal(kiln_dedup_commit(d, T0 + 1), 0);
	assert_int_equal(kiln_dedup_committed_count(d), 3);
	make_key(k, 3);
	assert_int_equal(kiln_dedup_add(d, k, T0), KILN_ELIMIT);
	make_key(k, 0);
	assert_int_equal(kiln_dedup_add(d, k, T0 + 2), 0); /* a held key takes its later time */
	/* past the window the keys are pruned at a commit, and room comes back */
	assert_int_equal(kiln_dedup_commit(d, T0 + DAY + 3), 0);
	assert_int_equal(kiln_dedup_committed_count(d), 0);
	make_key(k, 3);
	assert_int_equal(kiln_dedup_seen(d, k, T0 + DAY + 3), 0);
	kiln_dedup_free(d);
}

/* dataset.json's "dedup" member: rendered after "shards" only when set,
 * its key parsed back to the same text; a key that is not an array of
 * strings is refused naming the file. */
static void dataset_dedup_member(void **state)
{
	static const char *const paths[] = {"order_id", "customer.\"tier\""};
	kiln_buf key = KILN_BUF_INIT(0), text = KILN_BUF_INIT(0);
	kiln_json_scanner *scanner = kiln_json_scanner_new(NULL);
	kiln_mfmt_dataset d = {.name = "ds",
	                       .contract_id = "c",
	                       .contract_version = "1",
	                       .contract_api_version = "v3",
	                       .contract_schema = "s",
	                       .contract_digest = "x",
	                       .token_scheme = "t",
	                       .key_id = "k",
	                       .key_version = "1",
	                       .token_prefix = "p1_",
	                       .redact_marker = "r",
	                       .split_scheme = "s",
	                       .split_key = "id",
	                       .split_salt = "salt",
	                       .ratios = {"0.8", "0.1", "0.1"},
	                       .shard_format = "jsonl",
	                       .shard_compression = "zstd",
	                       .zstd_level = "3",
	                       .target_bytes = "1",
	                       .shard_hash = "h",
	                       .shard_key = "k"},
	                  back;

	(void)state;
	assert_int_equal(kiln_mfmt_dedup_key_render(&key, paths, 2), 0);
	assert_int_equal(kiln_buf_putc(&key, '\0'), 0);
	assert_string_equal(key.ptr, "[\"order_id\",\"customer.\\\"tier\\\"\"]");
	assert_int_equal(kiln_mfmt_dataset_render(&text, &d), 0);
	assert_int_equal(kiln_buf_putc(&text, '\0'), 0); /* a string for strstr */
	assert_null(strstr(text.ptr, "dedup"));
	kiln_buf_reset(&text);
	d.dedup_key = key.ptr;
	d.dedup_window_seconds = "604800";
	assert_int_equal(kiln_mfmt_dataset_render(&text, &d), 0);
	assert_int_equal(kiln_buf_putc(&text, '\0'), 0);
	assert_non_null(strstr(
	    text.ptr, ",\"key\":\"k\"},\n  \"dedup\": {\"key\":[\"order_id\",\"customer.\\\"tier\\\"\"],"
	              "\"window_seconds\":604800}\n}\n"));
	assert_int_equal(kiln_mfmt_dataset_parse(scanner, "ds.json", text.ptr, text.len - 1, &back), 0);
	assert_string_equal(back.dedup_key, key.ptr);
	assert_string_equal(back.dedup_window_seconds, "604800");
	kiln_mfmt_dataset_free(&back);
	/* written by hand with spaces: the same text once parsed */
	static const char spaced[] = "{\"dedup\": {\"key\": [ \"order_id\" , \"customer.\\\"tier\\\"\" ]}}";
	assert_int_equal(kiln_mfmt_dataset_parse(scanner, "ds.json", spaced, sizeof(spaced) - 1, &back), 0);
	assert_string_equal(back.dedup_key, key.ptr);
	kiln_mfmt_dataset_free(&back);
	static const char *const bad[] = {"{\"dedup\":{\"key\":\"order_id\"}}", "{\"dedup\":{\"key\":[]}}",
	                                  "{\"dedup\":{\"key\":[1]}}", "{\"dedup\":{\"key\":[[\"a\"]]}}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(kiln_mfmt_dataset_parse(scanner, "ds.json", bad[i], strlen(bad[i]), &back),
		                 KILN_EINVALID);
		assert_non_null(strstr(kiln_error_last(), "ds.json"));
	}
	kiln_json_scanner_free(scanner);
	kiln_buf_free(&key);
	kiln_buf_free(&text);
}

/* A commit whose dataset.json records dedup.key json_key. */
static int commit_keyed(kiln_manifest *m, const char *dataset_json, const unsigned char (*keys)[16], size_t n,
                        int64_t ms, bool end, char out[41])
{
	const kiln_lineage_entry lineage[] = {
	    {.source = KILN_LINEAGE_KAFKA, .topic = "k", .partition = 0, .next = (int64_t)ms}};
	kiln_snapshot snap = {.dataset = "kc",
	                      .branch = "main",
	                      .dataset_json = dataset_json,
	                      .lineage = lineage,
	                      .lineage_count = 1,
	                      .dedup = true,
	                      .dedup_end = end,
	                      .dedup_keys = keys,
	                      .dedup_count = n,
	                      .dedup_ms = ms,
	                      .dedup_window_ms = DAY};

	return kiln_manifest_commit(m, &snap, out);
}

static void tree_key_change(void **state)
{
	static const char by_a[] = "{\"dedup\": {\"key\":[\"a\"],\"window_seconds\":86400}}",
	                  by_b[] = "{\"dedup\": {\"key\":[\"b\"],\"window_seconds\":86400}}";
	char *repo = kiln_test_path(tmpdir, "k.git"), c[41], base[41];
	unsigned char a[2][16], b[1][16];
	kiln_manifest *m;
	kiln_dedup *d;

	(void)state;
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	a[0][0] = 1, a[1][0] = 2, b[0][0] = 1; /* b's key has a[0]'s bytes: another field, same value */
	assert_int_equal(kiln_manifest_open(&m, repo), 0);
	assert_int_equal(kiln_dedup_new(&d, DAY), 0);
	assert_int_equal(commit_keyed(m, by_a, (const unsigned char(*)[16])a, 2, T0, false, c), 0);
	assert_int_equal(kiln_manifest_dedup_load(m, "kc", "main", T0 + 1, "[\"a\"]", d, base), 0);
	assert_int_equal(kiln_dedup_committed_count(d), 2);
	/* the index of key a is not loaded for key b: b's value is no duplicate */
	assert_int_equal(kiln_manifest_dedup_load(m, "kc", "main", T0 + 1, "[\"b\"]", d, base), 0);
	assert_string_equal(base, c);
	assert_int_equal(kiln_dedup_committed_count(d), 0);
	assert_int_equal(kiln_dedup_seen(d, b[0], T0 + 1), 0);
	/* the first commit by key b drops a's segment: one segment, b's */
	assert_int_equal(commit_keyed(m, by_b, (const unsigned char(*)[16])b, 1, T0 + 2, false, c), 0);
	assert_int_equal(kiln_manifest_dedup_load(m, "kc", "main", T0 + 3, "[\"b\"]", d, base), 0);
	assert_int_equal(kiln_dedup_committed_count(d), 1);
	a[0][0] = 2;
	assert_int_equal(kiln_dedup_seen(d, a[0], T0 + 3), 0); /* a's other key went with its segment */
	kiln_dedup_rollback(d);
	/* a commit of the same key keeps the segments */
	assert_int_equal(commit_keyed(m, by_b, (const unsigned char(*)[16])a + 1, 1, T0 + 4, false, c), 0);
	assert_int_equal(kiln_manifest_dedup_load(m, "kc", "main", T0 + 5, "[\"b\"]", d, base), 0);
	assert_int_equal(kiln_dedup_committed_count(d), 2);
	/* ending dedup drops dedup/ */
	assert_int_equal(commit_keyed(m, "{}", NULL, 0, T0 + 6, true, c), 0);
	assert_int_equal(kiln_manifest_dedup_load(m, "kc", "main", T0 + 7, "[\"b\"]", d, base), 0);
	assert_int_equal(kiln_dedup_committed_count(d), 0);
	kiln_dedup_free(d);
	kiln_manifest_close(m);
	free(repo);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(seen_pending_commit_window),
	    cmocka_unit_test(prune_drops_old),
	    cmocka_unit_test(many_keys_exact),
	    cmocka_unit_test(segment_round_trip),
	    cmocka_unit_test(tree_commit_load_prune_fence),
	    cmocka_unit_test(max_keys_bound),
	    cmocka_unit_test(dataset_dedup_member),
	    cmocka_unit_test(tree_key_change),
	};
	return kiln_test_git_main(tests, tmpdir, "dedup", NULL, NULL);
}
