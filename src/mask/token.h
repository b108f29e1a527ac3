/* Pseudonym tokens, scheme hmac-sha256-b32-v1 (docs/FORMATS.md):
 * token = "p<version>_" + base32_lower_nopad(HMAC-SHA-256(key, domain || 0x1F || value)[0:16]) */
#ifndef KILN_MASK_TOKEN_H
#define KILN_MASK_TOKEN_H

#include <stddef.h>

#include "mask/key.h"

#define KILN_TOKEN_SCHEME "hmac-sha256-b32-v1"
#define KILN_TOKEN_MAX    48 /* "p4294967295_" + 26 characters + NUL */

/* Writes the token for value[0..value_len) in `domain` into out (NUL
 * terminated); returns its length. */
size_t kiln_token(char out[KILN_TOKEN_MAX], const kiln_key *key, const char *domain, size_t domain_len,
                  const char *value, size_t value_len);

/* The email normal form hashed for format: email and keep-domain values:
 * ASCII whitespace trimmed at both ends, ASCII letters lower-cased. Writes
 * it into out (room for n bytes; out must not overlap s) and returns its
 * length. The curator and kiln erase share it (one rule). */
size_t kiln_token_email_normal(char *out, const char *s, size_t n);

/* RFC 4648 base32, lower-case alphabet a-z2-7, no padding: writes
 * ceil(n * 8 / 5) characters (no NUL) and returns that count. */
size_t kiln_base32_lower(char *out, const unsigned char *in, size_t n);

#endif
