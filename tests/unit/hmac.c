/* Unit tests for src/mask/hmac.c: RFC 4231's HMAC-SHA-256 test cases on
 * both paths (the CPU's SHA extensions when it has them, and the portable
 * libsodium one), and both paths against libsodium's one-shot HMAC for every
 * message length from 0 to 300 bytes cut into three pieces at many places
 * (block and padding boundaries: 55, 56, 63, 64 bytes after the key block). */
#include "fixture.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "mask/hmac.h"

static void hex(char out[65], const unsigned char mac[32])
{
	sodium_bin2hex(out, 65, mac, 32);
}

/* MAC of msg cut at i and j (0 <= i <= j <= n), on the current path. */
static void mac_cut(unsigned char mac[32], const crypto_auth_hmacsha256_state *base, const unsigned char *msg,
                    size_t n, size_t i, size_t j)
{
	kiln_hmac_sha256_3(mac, base, msg, i, msg + i, j - i, msg + j, n - j);
}

static void check_rfc4231(const unsigned char *key, size_t key_len, const char *data, size_t data_len,
                          const char *want)
{
	crypto_auth_hmacsha256_state base;
	unsigned char mac[32];
	char got[65];

	crypto_auth_hmacsha256_init(&base, key, key_len);
	for (int accel = 0; accel < 2; accel++) {
		kiln_hmac_sha256_allow_accel(accel);
		mac_cut(mac, &base, (const unsigned char *)data, data_len, data_len / 3, data_len / 2);
		hex(got, mac);
		assert_string_equal(got, want);
	}
	kiln_hmac_sha256_allow_accel(true);
}

static void test_rfc4231(void **state)
{
	unsigned char k[131];
	char d[50];

	(void)state;
	memset(k, 0x0b, 20);
	check_rfc4231(k, 20, "Hi There", 8,
	              "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	check_rfc4231((const unsigned char *)"Jefe", 4, "what do ya want for nothing?", 28,
	              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	memset(k, 0xaa, 20);
	memset(d, 0xdd, 50);
	check_rfc4231(k, 20, d, 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
	for (int i = 0; i < 25; i++)
		k[i] = (unsigned char)(i + 1);
	memset(d, 0xcd, 50);
	check_rfc4231(k, 25, d, 50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
	memset(k, 0xaa, 131);
	check_rfc4231(k, 131, "Test Using Larger Than Block-Size Key - Hash Key First", 54,
	              "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
	check_rfc4231(k, 131,
	              "This is a test using a larger than block-size key and a larger than block-size data. "
	              "The key needs to be hashed before being used by the HMAC algorithm.",
	              152, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

static void test_every_length_and_cut(void **state)
{
	unsigned char key[32], msg[300], want[32], got[32];
	crypto_auth_hmacsha256_state base;

	(void)state;
	randombytes_buf(key, sizeof(key));
	randombytes_buf(msg, sizeof(msg));
	crypto_auth_hmacsha256_init(&base, key, sizeof(key));
	for (size_t n = 0; n <= sizeof(msg); n++) {
		crypto_auth_hmacsha256(want, msg, n, key); /* libsodium's one-shot, 32-byte key */
		for (size_t i = 0; i <= n; i += (n < 70 ? 1 : 13)) {
			for (size_t j = i; j <= n; j += (n < 70 ? 7 : 29)) {
				for (int accel = 0; accel < 2; accel++) {
					kiln_hmac_sha256_allow_accel(accel);
					mac_cut(got, &base, msg, n, i, j);
					if (memcmp(got, want, 32) != 0)
						fail_msg("length %zu cut at %zu, %zu (%s path) differs", n, i,
						         j, accel ? "accelerated" : "portable");
				}
			}
		}
	}
	kiln_hmac_sha256_allow_accel(true);
}

static void test_base_untouched(void **state)
{
	crypto_auth_hmacsha256_state base, copy;
	unsigned char key[32] = {1, 2, 3}, a[32], b[32];

	(void)state;
	crypto_auth_hmacsha256_init(&base, key, sizeof(key));
	copy = base;
	kiln_hmac_sha256_3(a, &base, "x", 1, "", 0, "yz", 2);
	kiln_hmac_sha256_3(b, &base, "x", 1, "", 0, "yz", 2);
	assert_memory_equal(a, b, 32);
	assert_memory_equal(&base, &copy, sizeof(base));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rfc4231),
	    cmocka_unit_test(test_every_length_and_cut),
	    cmocka_unit_test(test_base_untouched),
	};

	if (sodium_init() < 0)
		return 1;
	printf("# SHA-256 on this CPU: %s\n",
	       kiln_hmac_sha256_accelerated() ? "SHA extensions (both paths tested)"
	                                      : "portable only (the accelerated path is not reachable here)");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
