/* Sizes as people write them in configs and flags: 1048576, 64k, 16M, 1G
 * (also 64KiB, 16MB: binary multiples either way), and as kiln prints them;
 * ages (30d, 12h). */
#ifndef KILN_CORE_UNITS_H
#define KILN_CORE_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The size in bytes, or -1 when malformed or negative. */
long long kiln_parse_size(const char *s);

/* A decimal number 0..max, digits only; -1 when malformed or too large. */
int kiln_parse_u64(const char *s, uint64_t max, uint64_t *out);

/* An age or duration as written in flags and configs: a positive number and
 * one unit, "30d", "12h", "90m", "2w", "3600s", in seconds; -1 when
 * malformed, zero or too large. */
int64_t kiln_parse_age(const char *s);

/* A size for people: "512 B", "1.5 MiB" (binary units up to EiB, one
 * decimal); compact: no decimal from 10 up ("12 MiB"). Writes at most cap
 * bytes (32 is always enough), NUL-terminated. */
void kiln_size_human(char *out, size_t cap, uint64_t bytes, bool compact);

#endif
