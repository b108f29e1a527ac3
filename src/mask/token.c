/* Pseudonym tokens, scheme hmac-sha256-b32-v1: HMAC-SHA-256 over
 * domain || 0x1F || value, started from the key's precomputed states
 * (mask/hmac.h), first 16 bytes in lower-case unpadded base32 after a
 * "p<version>_" prefix. */
#include "mask/token.h"

#include <assert.h>
#include <stdbool.h>
#include <string.h>

#include "mask/hmac.h"

#define TOKEN_MAC_BYTES 16

static const char base32_alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";

size_t kiln_base32_lower(char *out, const unsigned char *in, size_t n)
{
	size_t i, o = 0;
	unsigned buffer = 0;
	int bits = 0;

	for (i = 0; i < n; i++) {
		buffer = (buffer << 8) | in[i];
		bits += 8;
		while (bits >= 5) {
			bits -= 5;
			out[o++] = base32_alphabet[(buffer >> bits) & 0x1F];
		}
		buffer &= (1u << bits) - 1; /* keep only the bits not yet written */
	}
	if (bits > 0)
		out[o++] = base32_alphabet[(buffer << (5 - bits)) & 0x1F];
	return o;
}

size_t kiln_token(char out[KILN_TOKEN_MAX], const kiln_key *key, const char *domain, size_t domain_len,
                  const char *value, size_t value_len)
{
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	static const unsigned char separator = 0x1F;
	char digits[10];
	unsigned v = key->version;
	size_t n = 0, d = 0;

	kiln_hmac_sha256_3(mac, &key->base, domain, domain_len, &separator, 1, value, value_len);

	do {
		digits[d++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	out[n++] = 'p';
	while (d > 0)
		out[n++] = digits[--d];
	out[n++] = '_';
	n += kiln_base32_lower(out + n, mac, TOKEN_MAC_BYTES);
	assert(n < KILN_TOKEN_MAX);
	out[n] = '\0';
	return n;
}

static bool is_trim_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

size_t kiln_token_email_normal(char *out, const char *s, size_t n)
{
	while (n && is_trim_space(*s)) {
		s++;
		n--;
	}
	while (n && is_trim_space(s[n - 1]))
		n--;
	for (size_t i = 0; i < n; i++)
		out[i] = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] - 'A' + 'a') : s[i];
	return n;
}
