/* How long to wait before retrying a failed call: one policy type and one
 * delay computation for every retry loop (store requests, the commit race,
 * pushing to a remote, the erasure ledger). Each loop keeps its own count
 * of attempts; a policy says only how long retry n waits. */
#ifndef KILN_CORE_RETRY_H
#define KILN_CORE_RETRY_H

#include <stdbool.h>
#include <stdint.h>

typedef enum kiln_retry_jitter {
	KILN_RETRY_EXACT,   /* the base delay */
	KILN_RETRY_QUARTER, /* the base plus a uniform draw of up to a quarter of it more */
	KILN_RETRY_FULL,    /* floor_us plus a uniform draw below the base: racing peers spread out */
	KILN_RETRY_STEP,    /* the base plus a uniform draw below first_us */
} kiln_retry_jitter;

typedef struct kiln_retry_policy {
	uint64_t first_us; /* the base delay of retry 1 */
	uint64_t max_us;   /* the base grows to this and no further; 0: no cap */
	bool linear;       /* retry n's base is first_us * n; else first_us * 2^(n-1) */
	kiln_retry_jitter jitter;
	uint64_t floor_us; /* KILN_RETRY_FULL: the least delay */
} kiln_retry_policy;

/* The delay before retry n (1 for the first retry; 0 is taken as 1) in
 * microseconds, random being a uniform 32-bit draw (the jitter is random
 * modulo its range). Pure: the same arguments give the same delay. */
uint64_t kiln_retry_delay_us(const kiln_retry_policy *p, unsigned n, uint32_t random);

/* Sleeps kiln_retry_delay_us(p, n, a fresh random draw), resumed after a
 * signal. */
void kiln_retry_sleep(const kiln_retry_policy *p, unsigned n);

#endif
