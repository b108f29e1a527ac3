/* Exact decimal arithmetic for multipleOf (see decimal.h). */
#include "contract/decimal.h"

#define MAX_DIGITS 38 /* 10^38 < 2^128 */

bool kiln_decimal_parse(const char *s, size_t len, kiln_decimal *out)
{
	unsigned __int128 mant = 0;
	size_t i = 0;
	int digits = 0, frac = 0, exp = 0, exp_sign = 1;
	bool any = false, in_frac = false;

	out->neg = false;
	if (i < len && (s[i] == '-' || s[i] == '+'))
		out->neg = s[i++] == '-';
	for (; i < len; i++) {
		char c = s[i];
		if (c == '.' && !in_frac) {
			in_frac = true;
			continue;
		}
		if (c < '0' || c > '9')
			break;
		any = true;
		if (mant == 0 && c == '0') {
			frac += in_frac; /* leading zeros: no significant digit */
			continue;
		}
		if (++digits > MAX_DIGITS)
			return false;
		mant = mant * 10 + (unsigned)(c - '0');
		frac += in_frac;
	}
	if (!any)
		return false;
	if (i < len) {
		if (s[i] != 'e' && s[i] != 'E')
			return false;
		if (++i < len && (s[i] == '-' || s[i] == '+'))
			exp_sign = s[i++] == '-' ? -1 : 1;
		if (i == len)
			return false;
		for (; i < len; i++) {
			if (s[i] < '0' || s[i] > '9' || exp > 4000)
				return false;
			exp = exp * 10 + (s[i] - '0');
		}
	}
	out->scale = frac - exp_sign * exp;
	while (mant != 0 && mant % 10 == 0) {
		mant /= 10;
		out->scale--;
	}
	out->mant = mant;
	if (mant == 0)
		out->scale = 0;
	return true;
}

int kiln_decimal_is_multiple(const kiln_decimal *x, const kiln_decimal *m)
{
	const unsigned __int128 max = ~(unsigned __int128)0;
	unsigned __int128 r, b;
	long d;

	if (m->mant == 0)
		return -1;
	if (x->mant == 0)
		return 1;
	/* x / m = (x.mant / m.mant) * 10^d */
	d = (long)m->scale - (long)x->scale;
	if (d >= 0) {
		/* integer iff m.mant divides x.mant * 10^d: reduce mod m.mant */
		r = x->mant % m->mant;
		for (; d > 0 && r != 0; d--)
			r = r * 10 % m->mant; /* r * 10 < 10^39 < 2^128 */
		return r == 0;
	}
	/* integer iff m.mant * 10^-d divides x.mant; when that product exceeds
	 * 128 bits it exceeds x.mant too, and x is not a multiple */
	for (b = m->mant; d < 0; d++) {
		if (b > max / 10)
			return 0;
		b *= 10;
	}
	return x->mant % b == 0;
}

int kiln_decimal_is_multiple_u64(uint64_t mant, int frac, const kiln_decimal *m)
{
	uint64_t k, r, b;
	long d;

	if (m->mant == 0 || m->mant >= (unsigned __int128)1 << 60)
		return -1;
	if (mant == 0)
		return 1;
	/* the steps of kiln_decimal_is_multiple; x's trailing zeros need no
	 * stripping: divisibility does not depend on how x is written */
	k = (uint64_t)m->mant;
	d = (long)m->scale - (long)frac;
	if (d >= 0) {
		r = mant % k;
		for (; d > 0 && r != 0; d--)
			r = r * 10 % k; /* r < k < 2^60: r * 10 < 2^64 */
		return r == 0;
	}
	/* m.mant * 10^-d beyond 64 bits exceeds mant (< 2^64): not a multiple */
	for (b = k; d < 0; d++) {
		if (b > UINT64_MAX / 10)
			return 0;
		b *= 10;
	}
	return mant % b == 0;
}
