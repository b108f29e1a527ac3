/* Array growth (see array.h). */
#include "core/array.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"

int kiln_array_grow_slow(void **v, size_t *cap, size_t n, size_t elem_size, const char *area)
{
	size_t ncap = *cap ? *cap : 16;
	void *nv;

	if (n < *cap)
		return 0;
	while (ncap <= n) {
		if (ncap > SIZE_MAX / 2)
			return kiln_error_oom(area);
		ncap *= 2;
	}
	if (elem_size && ncap > SIZE_MAX / elem_size)
		return kiln_error_oom(area);
	if (!(nv = realloc(*v, ncap * elem_size)))
		return kiln_error_oom(area);
	*v = nv;
	*cap = ncap;
	return 0;
}
