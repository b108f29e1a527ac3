/* Unit tests for src/shard/split.c: buckets match an independent
 * computation (Python hashlib, values below), thresholds, ratio checks. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "shard/split.h"

/* Expected buckets from:
 *   d = hashlib.blake2b(salt.encode() + b'\x1f' + v.encode(), digest_size=32).digest()
 *   int.from_bytes(d[:8], 'little') % 10000                                        */
static void test_bucket_known_answers(void **state)
{
	static const double ratios[] = {0.8, 0.1, 0.1};
	kiln_splitter s;

	(void)state;
	assert_int_equal(kiln_splitter_init(&s, "user-events-v1", ratios), 0);
	assert_int_equal(kiln_split_bucket(&s, "p1_abc", 6), 8812);
	assert_int_equal(kiln_split_bucket(&s, "u-1", 3), 6895);
	assert_int_equal(kiln_split_bucket(&s, "", 0), 3040);
	assert_int_equal(kiln_split_bucket(&s, "\xe6\x97\xa5\xe6\x9c\xac", 6), 7288);
	assert_int_equal(kiln_split_assign(&s, "p1_abc", 6), KILN_SPLIT_DEV); /* 8000 <= 8812 < 9000 */
	assert_int_equal(kiln_split_assign(&s, "u-1", 3), KILN_SPLIT_TRAIN);  /* 6895 < 8000 */
	assert_int_equal(kiln_split_assign(&s, "", 0), KILN_SPLIT_TRAIN);
}

static void test_thresholds(void **state)
{
	static const double all_test[] = {0, 0, 1};
	static const double all_train[] = {1, 0, 0};
	static const double odd[] = {0.3333, 0.3333, 0.3334};
	kiln_splitter s;

	(void)state;
	assert_int_equal(kiln_splitter_init(&s, "x", all_test), 0);
	assert_int_equal(kiln_split_assign(&s, "u-1", 3), KILN_SPLIT_TEST);
	assert_int_equal(kiln_splitter_init(&s, "x", all_train), 0);
	assert_int_equal(kiln_split_assign(&s, "u-1", 3), KILN_SPLIT_TRAIN);
	assert_int_equal(kiln_splitter_init(&s, "x", odd), 0);
	assert_int_equal(s.train_below, 3333);
	assert_int_equal(s.dev_below, 6666);
}

static void test_distribution(void **state)
{
	static const double ratios[] = {0.8, 0.1, 0.1};
	unsigned counts[KILN_SPLIT_COUNT] = {0};
	kiln_splitter s;
	char v[32];

	(void)state;
	assert_int_equal(kiln_splitter_init(&s, "salt", ratios), 0);
	for (int i = 0; i < 100000; i++) {
		int n = snprintf(v, sizeof(v), "user-%d", i);
		counts[kiln_split_assign(&s, v, (size_t)n)]++;
	}
	/* 100k draws: within 1.5 points of the ratios */
	assert_in_range(counts[KILN_SPLIT_TRAIN], 78500, 81500);
	assert_in_range(counts[KILN_SPLIT_DEV], 8500, 11500);
	assert_in_range(counts[KILN_SPLIT_TEST], 8500, 11500);
}

static void test_bad_ratios(void **state)
{
	static const double not_one[] = {0.8, 0.1, 0.2};
	static const double negative[] = {1.1, -0.1, 0};
	static const double too_fine[] = {0.80005, 0.09995, 0.1};
	kiln_splitter s;

	(void)state;
	assert_int_equal(kiln_splitter_init(&s, "x", not_one), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "sum to 1.1000"));
	assert_int_equal(kiln_splitter_init(&s, "x", negative), KILN_EINVALID);
	assert_int_equal(kiln_splitter_init(&s, "x", too_fine), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "0.0001"));
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(kiln_split_name(KILN_SPLIT_TRAIN), "train");
	assert_string_equal(kiln_split_name(KILN_SPLIT_DEV), "dev");
	assert_string_equal(kiln_split_name(KILN_SPLIT_TEST), "test");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bucket_known_answers),
	    cmocka_unit_test(test_thresholds),
	    cmocka_unit_test(test_distribution),
	    cmocka_unit_test(test_bad_ratios),
	    cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
