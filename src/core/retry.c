/* Retry delays (see retry.h). */
#include "core/retry.h"

#include <errno.h>
#include <sys/random.h>
#include <time.h>

uint64_t kiln_retry_delay_us(const kiln_retry_policy *p, unsigned n, uint32_t random)
{
	uint64_t cap = p->max_us ? p->max_us : UINT64_MAX;
	uint64_t base = p->first_us;

	if (n == 0)
		n = 1;
	if (p->linear)
		base = p->first_us && n > cap / p->first_us ? cap : p->first_us * n;
	else
		for (unsigned i = 1; i < n && base < cap; i++)
			base = base > cap / 2 ? cap : base * 2;
	if (base > cap)
		base = cap;
	switch (p->jitter) {
	case KILN_RETRY_QUARTER:
		return base + random % (base / 4 + 1);
	case KILN_RETRY_FULL:
		return p->floor_us + (base ? random % base : 0);
	case KILN_RETRY_STEP:
		return base + (p->first_us ? random % p->first_us : 0);
	case KILN_RETRY_EXACT:
		break;
	}
	return base;
}

void kiln_retry_sleep(const kiln_retry_policy *p, unsigned n)
{
	uint32_t random = 0; /* no entropy at hand (early boot): no jitter, still a delay */
	struct timespec ts;
	uint64_t us;

	if (getrandom(&random, sizeof(random), GRND_NONBLOCK) != sizeof(random))
		random = 0;
	us = kiln_retry_delay_us(p, n, random);
	ts.tv_sec = (time_t)(us / 1000000);
	ts.tv_nsec = (long)(us % 1000000) * 1000;

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
