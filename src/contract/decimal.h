/* Exact decimal view of a number as written (JSON or YAML text), for the
 * rules binary floating point gets wrong: multipleOf 0.01 must accept 19.99
 * and reject 5000000.005. value = (neg ? -1 : 1) * mant * 10^-scale. */
#ifndef KILN_CONTRACT_DECIMAL_H
#define KILN_CONTRACT_DECIMAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kiln_decimal {
	unsigned __int128 mant; /* trailing zeros stripped into scale */
	int scale;
	bool neg;
} kiln_decimal;

/* Parses [-+]?digits[.digits][(e|E)[-+]?digits]. false when malformed or
 * when the value needs more than 38 significant digits or an exponent beyond
 * +-4000 (then callers fall back to long double). */
bool kiln_decimal_parse(const char *s, size_t len, kiln_decimal *out);

/* 1 when x is an integer multiple of m, 0 when not (exact, any scale);
 * -1 when m is zero. Signs are ignored. */
int kiln_decimal_is_multiple(const kiln_decimal *x, const kiln_decimal *m);

/* The same answer for x = mant * 10^-frac (0 <= frac), in 64-bit integer
 * arithmetic, for the JSON numbers of at most 18 significant digits and no
 * exponent that validation reads as integers: -1 when m is zero or its
 * mantissa needs more than 60 bits (then callers use the above). */
int kiln_decimal_is_multiple_u64(uint64_t mant, int frac, const kiln_decimal *m);

#endif
