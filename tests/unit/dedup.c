/* Unit tests for the dedup index and its segments (src/manifest/dedup.c):
 * insert and lookup (pending, committed, across the window), rollback,
 * commit and prune, 200,000 keys through table growth with no false
 * answer, the segment bytes known-answer and round trip, names, and
 * decoding refuses cut, grown, unsorted or altered bytes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "manifest/dedup.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(seen_pending_commit_window),
	    cmocka_unit_test(prune_drops_old),
	    cmocka_unit_test(many_keys_exact),
	    cmocka_unit_test(segment_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
