/* Unit tests for src/core/retry.c: kiln_retry_delay_us for each policy in
 * the tree against the formula its loop used before the policies became one
 * type (store requests: 100 ms << n capped at 5 s, plus up to a quarter;
 * the commit race: 2 ms + a draw below 2 ms << min(n, 8); a remote push:
 * 20 ms * n + a draw below 20 ms; the ledger: 20 ms * n; the run engine:
 * 500 ms, doubling each failure in a row, 30 s at most), and the edges
 * (retry 0, caps, overflow). */
#include "fixture.h"

#include <stdint.h>

#include "core/retry.h"
#include "ingest/engine.h"
#include "ingest/run_setup.h"
#include "manifest/ledger.h"
#include "manifest/remote.h"
#include "store/store.h"

static const uint32_t draws[] = {0, 1, 3, 999, 19999, 20000, 123456789, 0x7fffffff, 0xfffffffe, 0xffffffff};
#define NDRAWS (sizeof(draws) / sizeof(draws[0]))

/* The store's old kiln_store_backoff(attempt), in ms, without its jitter. */
static uint64_t old_store_base_ms(int attempt)
{
	long ms = 100;

	for (int i = 0; i < attempt && ms < 5000; i++)
		ms *= 2;
	return (uint64_t)(ms > 5000 ? 5000 : ms);
}

static void test_store(void **state)
{
	(void)state;
	for (int attempt = 0; attempt < 12; attempt++) {
		uint64_t base = old_store_base_ms(attempt) * 1000;

		for (size_t d = 0; d < NDRAWS; d++) {
			uint64_t us = kiln_retry_delay_us(&kiln_store_retry, (unsigned)attempt + 1, draws[d]);

			assert_int_equal(us, base + draws[d] % (base / 4 + 1));
			assert_true(us >= base && us <= base + base / 4);
		}
	}
	/* 100, 200, 400 ms ... 3.2 s, then 5 s for good */
	assert_int_equal(kiln_retry_delay_us(&kiln_store_retry, 1, 0), 100000);
	assert_int_equal(kiln_retry_delay_us(&kiln_store_retry, 6, 0), 3200000);
	assert_int_equal(kiln_retry_delay_us(&kiln_store_retry, 7, 0), 5000000);
	assert_int_equal(kiln_retry_delay_us(&kiln_store_retry, 4000000000u, 0), 5000000);
}

static void test_commit(void **state)
{
	(void)state;
	for (int attempt = 1; attempt <= 40; attempt++) {
		unsigned cap_us = 2000u << (attempt < 8 ? attempt : 8);

		for (size_t d = 0; d < NDRAWS; d++)
			assert_int_equal(kiln_retry_delay_us(&kiln_commit_retry, (unsigned)attempt, draws[d]),
			                 2000 + draws[d] % cap_us);
	}
}

static void test_remote_push(void **state)
{
	(void)state;
	for (int attempt = 1; attempt < 5; attempt++)
		for (size_t d = 0; d < NDRAWS; d++)
			assert_int_equal(
			    kiln_retry_delay_us(&kiln_remote_push_retry, (unsigned)attempt, draws[d]),
			    20000u * (unsigned)attempt + draws[d] % 20000);
}

static void test_ledger(void **state)
{
	(void)state;
	for (int attempt = 0; attempt < 20; attempt++)
		for (size_t d = 0; d < NDRAWS; d++)
			assert_int_equal(
			    kiln_retry_delay_us(&kiln_ledger_retry, (unsigned)attempt + 1, draws[d]),
			    20000u * (unsigned)(attempt + 1));
}

static void test_engine(void **state)
{
	int64_t backoff_ms = 0;

	(void)state;
	for (unsigned n = 1; n < 40; n++) {
		/* the engine's old next_backoff() */
		backoff_ms = backoff_ms ? (backoff_ms * 2 > 30000 ? 30000 : backoff_ms * 2) : 500;
		for (size_t d = 0; d < NDRAWS; d++)
			assert_int_equal(kiln_retry_delay_us(&kiln_engine_retry, n, draws[d]),
			                 (uint64_t)backoff_ms * 1000);
	}
}

static void test_edges(void **state)
{
	const kiln_retry_policy doubling = {.first_us = 3, .max_us = 0};
	const kiln_retry_policy linear = {.first_us = UINT64_MAX / 2, .linear = true};
	const kiln_retry_policy full_zero = {.jitter = KILN_RETRY_FULL, .floor_us = 7};

	(void)state;
	/* retry 0 is retry 1 */
	assert_int_equal(kiln_retry_delay_us(&kiln_ledger_retry, 0, 5), 20000);
	/* no cap: doubling saturates instead of wrapping */
	assert_int_equal(kiln_retry_delay_us(&doubling, 3, 0), 12);
	assert_int_equal(kiln_retry_delay_us(&doubling, 200, 0), UINT64_MAX);
	assert_int_equal(kiln_retry_delay_us(&linear, 3, 0), UINT64_MAX);
	/* a zero base: no division by zero */
	assert_int_equal(kiln_retry_delay_us(&full_zero, 4, 99), 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_store),  cmocka_unit_test(test_commit), cmocka_unit_test(test_remote_push),
	    cmocka_unit_test(test_ledger), cmocka_unit_test(test_edges),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
