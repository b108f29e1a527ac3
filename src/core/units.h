/* Sizes as people write them in configs and flags: 1048576, 64k, 16M, 1G
 * (also 64KiB, 16MB: binary multiples either way). */
#ifndef KILN_CORE_UNITS_H
#define KILN_CORE_UNITS_H

#include <stdint.h>

/* The size in bytes, or -1 when malformed or negative. */
long long kiln_parse_size(const char *s);

/* A decimal number 0..max, digits only; -1 when malformed or too large. */
int kiln_parse_u64(const char *s, uint64_t max, uint64_t *out);

#endif
