/* Sizes as people write them in configs and flags: 1048576, 64k, 16M, 1G
 * (also 64KiB, 16MB: binary multiples either way). */
#ifndef KILN_CORE_UNITS_H
#define KILN_CORE_UNITS_H

/* The size in bytes, or -1 when malformed or negative. */
long long kiln_parse_size(const char *s);

#endif
