/* Unit tests for src/core/units.c: sizes as configs write them and as kiln
 * prints them; ages (30d, 12h). */
#include "fixture.h"

#include <string.h>

#include "core/units.h"

static void test_parse_size(void **state)
{
	(void)state;
	assert_int_equal(kiln_parse_size("0"), 0);
	assert_int_equal(kiln_parse_size("1048576"), 1048576);
	assert_int_equal(kiln_parse_size("64k"), 64 * 1024);
	assert_int_equal(kiln_parse_size("16M"), 16 << 20);
	assert_int_equal(kiln_parse_size("1G"), 1 << 30);
	assert_int_equal(kiln_parse_size("64KiB"), 64 * 1024);
	assert_int_equal(kiln_parse_size("16MB"), 16 << 20);
	assert_int_equal(kiln_parse_size(""), -1);
	assert_int_equal(kiln_parse_size("-1"), -1);
	assert_int_equal(kiln_parse_size("12Q"), -1);
}

static void check_human(uint64_t bytes, bool compact, const char *want)
{
	char out[32];

	memset(out, '#', sizeof(out));
	kiln_size_human(out, sizeof(out), bytes, compact);
	assert_string_equal(out, want);
}

static void test_size_human(void **state)
{
	(void)state;
	check_human(0, false, "0 B");
	check_human(1023, true, "1023 B");
	check_human(1024, false, "1.0 KiB");
	check_human(1536, true, "1.5 KiB");
	check_human(12 << 20, false, "12.0 MiB");
	check_human(12 << 20, true, "12 MiB");
	check_human((uint64_t)5 << 30, true, "5.0 GiB");
	check_human(UINT64_MAX, false, "16.0 EiB");
}

static void test_parse_age(void **state)
{
	(void)state;
	assert_int_equal(kiln_parse_age("30d"), 30 * 86400);
	assert_int_equal(kiln_parse_age("12h"), 12 * 3600);
	assert_int_equal(kiln_parse_age("90m"), 90 * 60);
	assert_int_equal(kiln_parse_age("2w"), 14 * 86400);
	assert_int_equal(kiln_parse_age("3600s"), 3600);
	assert_int_equal(kiln_parse_age("1d"), 86400);
	/* no unit, two units, an unknown one, zero, a sign, too large */
	static const char *const bad[] = {"",
	                                  "30",
	                                  "1d2h",
	                                  "3x",
	                                  "0d",
	                                  "-1d",
	                                  "+1d",
	                                  "d",
	                                  " 1d",
	                                  "1d ",
	                                  "1.5d",
	                                  "99999999999999999999s",
	                                  "9223372036854775807w"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (kiln_parse_age(bad[i]) != -1)
			fail_msg("'%s' was read as an age", bad[i]);
	assert_int_equal(kiln_parse_age(NULL), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_size),
	    cmocka_unit_test(test_size_human),
	    cmocka_unit_test(test_parse_age),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
