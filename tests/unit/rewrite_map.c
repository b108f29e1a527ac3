/* Unit tests for the object-id memos of a history rewrite
 * (src/manifest/rewrite_map.c): a slot a caller keeps is still the slot of
 * its key after the table grew (the rewrite of one commit keeps its split
 * trees' slots while it adds the next split's: a flaky segfault of kiln
 * erase when a growth fell between them), and every key is found again. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <git2.h>
#include <string.h>

#include "manifest/rewrite_internal.h"

static git_oid key_of(unsigned n)
{
	git_oid id;

	memset(&id, 0, sizeof(id));
	memcpy(id.id, &n, sizeof(n)); /* the hash reads the first bytes */
	id.id[19] = 0x5a;
	return id;
}

static void test_kept_slots_survive_growth(void **state)
{
	oid_map m = {0};
	oid_slot *kept, *slot;
	git_oid first = key_of(0);

	(void)state;
	assert_int_equal(kiln_rewrite_map_add(&m, &first, &kept), 0);
	kept->erased = 42;
	git_oid_cpy(&kept->value, &first);
	for (unsigned i = 1; i < 5000; i++) {
		git_oid k = key_of(i);

		assert_int_equal(kiln_rewrite_map_add(&m, &k, &slot), 0);
		slot->erased = i;
	}
	assert_true(m.cap > 256); /* it grew, more than once */
	assert_ptr_equal(kiln_rewrite_map_get(&m, &first), kept);
	assert_true(git_oid_equal(&kept->key, &first));
	assert_int_equal(kept->erased, 42);
	for (unsigned i = 1; i < 5000; i++) {
		git_oid k = key_of(i);

		assert_non_null(slot = kiln_rewrite_map_get(&m, &k));
		assert_int_equal(slot->erased, i);
	}
	git_oid absent = key_of(9999);
	assert_null(kiln_rewrite_map_get(&m, &absent));
	kiln_rewrite_map_free(&m);
	assert_int_equal(m.cap, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kept_slots_survive_growth),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
