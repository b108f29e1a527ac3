/* HMAC-SHA-256 of short messages from a key's precomputed inner and outer
 * states (the ipad and opad blocks hashed once per key): two SHA-256
 * compressions for a message of up to 55 bytes. On x86-64 CPUs with the
 * SHA extensions the compression runs on them; elsewhere the key's
 * libsodium state is used as before. Both give the same MAC (RFC 2104); the
 * unit test holds them to each other and to RFC 4231. */
#ifndef KILN_MASK_HMAC_H
#define KILN_MASK_HMAC_H

#include <sodium.h>
#include <stdbool.h>
#include <stddef.h>

/* HMAC-SHA-256(key, a || b || c) into mac, from `base`, the libsodium state
 * after crypto_auth_hmacsha256_init(key) (left unchanged). */
void kiln_hmac_sha256_3(unsigned char mac[32], const crypto_auth_hmacsha256_state *base, const void *a,
                        size_t a_len, const void *b, size_t b_len, const void *c, size_t c_len);

/* Whether kiln_hmac_sha256_3 uses the CPU's SHA extensions. */
bool kiln_hmac_sha256_accelerated(void);

/* For tests: force the portable path (false) or let the CPU decide (true). */
void kiln_hmac_sha256_allow_accel(bool allow);

#endif
