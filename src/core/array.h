/* The one growth rule for a hand-managed array (a pointer, a count and a
 * capacity in the caller's struct): room for element n, doubling, the
 * size checked for overflow. */
#ifndef KILN_CORE_ARRAY_H
#define KILN_CORE_ARRAY_H

#include <stddef.h>

/* Makes room for element n of the array *v of *cap elements of elem_size
 * bytes: when n >= *cap, *cap doubles (16 when it was 0) until n fits and
 * *v is reallocated (the first n elements kept, the rest uninitialised).
 * 0, or KILN_ENOMEM from kiln_error_oom(area) ("area: out of memory"; NULL:
 * "out of memory"), also when the size would overflow; *v and *cap are then
 * unchanged and *v still the caller's to free. */
int kiln_array_grow_slow(void **v, size_t *cap, size_t n, size_t elem_size, const char *area);

/* (inline while element n fits: this runs for every value of a record) */
static inline int kiln_array_grow(void **v, size_t *cap, size_t n, size_t elem_size, const char *area)
{
	return n < *cap ? 0 : kiln_array_grow_slow(v, cap, n, elem_size, area);
}

/* kiln_array_grow on an array v (any object pointer) with capacity cap. */
#define KILN_ARRAY_GROW(v, cap, n, area) kiln_array_grow((void **)&(v), &(cap), (n), sizeof(*(v)), (area))

#endif
