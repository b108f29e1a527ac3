/* Unit tests for src/core/array.c (kiln_array_grow, KILN_ARRAY_GROW) and
 * kiln_error_oom: 16 elements first, then doubling until element n fits,
 * the elements kept; a size that would overflow is KILN_ENOMEM with the
 * array left as it was; the message is "<area>: out of memory". */
#include "fixture.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"

static void test_grow_doubles(void **state)
{
	uint32_t *v = NULL;
	size_t cap = 0, n = 0;

	(void)state;
	assert_int_equal(KILN_ARRAY_GROW(v, cap, n, NULL), 0);
	assert_non_null(v);
	assert_int_equal(cap, 16);
	for (; n < 1000; n++) {
		assert_int_equal(KILN_ARRAY_GROW(v, cap, n, "test"), 0);
		assert_true(n < cap);
		v[n] = (uint32_t)n * 7;
	}
	assert_int_equal(cap, 1024); /* 16, 32, ..., 1024: doubling, never more */
	for (size_t i = 0; i < n; i++)
		assert_int_equal(v[i], i * 7);

	/* room for a far element in one call: doubled until it fits */
	assert_int_equal(KILN_ARRAY_GROW(v, cap, 5000, NULL), 0);
	assert_int_equal(cap, 8192);
	assert_int_equal(v[999], 999 * 7);
	/* an element that fits changes nothing */
	assert_int_equal(KILN_ARRAY_GROW(v, cap, 8191, NULL), 0);
	assert_int_equal(cap, 8192);
	free(v);
}

static void test_grow_keeps_a_nonzero_start(void **state)
{
	char(*v)[65] = calloc(3, sizeof(*v));
	size_t cap = 3;

	(void)state;
	assert_non_null(v);
	memcpy(v[2], "abc", 4);
	assert_int_equal(KILN_ARRAY_GROW(v, cap, 3, NULL), 0);
	assert_int_equal(cap, 6);
	assert_string_equal(v[2], "abc");
	free(v);
}

static void test_grow_overflow(void **state)
{
	uint64_t *v = NULL, *before;
	size_t cap = 0;

	(void)state;
	assert_int_equal(KILN_ARRAY_GROW(v, cap, 3, NULL), 0);
	before = v;
	kiln_error_clear();
	assert_int_equal(KILN_ARRAY_GROW(v, cap, SIZE_MAX / 8, "cache"), KILN_ENOMEM);
	assert_string_equal(kiln_error_last(), "cache: out of memory");
	assert_ptr_equal(v, before);
	assert_int_equal(cap, 16);
	assert_int_equal(KILN_ARRAY_GROW(v, cap, SIZE_MAX, NULL), KILN_ENOMEM);
	assert_string_equal(kiln_error_last(), "out of memory");
	assert_int_equal(kiln_error_last_code(), KILN_ENOMEM);
	assert_int_equal(cap, 16);
	free(v);
}

static void test_error_oom(void **state)
{
	(void)state;
	assert_int_equal(kiln_error_oom("manifest"), KILN_ENOMEM);
	assert_string_equal(kiln_error_last(), "manifest: out of memory");
	assert_int_equal(kiln_error_last_code(), KILN_ENOMEM);
	assert_int_equal(kiln_error_oom(NULL), KILN_ENOMEM);
	assert_string_equal(kiln_error_last(), "out of memory");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_grow_doubles),
	    cmocka_unit_test(test_grow_keeps_a_nonzero_start),
	    cmocka_unit_test(test_grow_overflow),
	    cmocka_unit_test(test_error_oom),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
