/* Unit tests for src/mask/token.c: RFC 4648 base32 vectors, tokens against
 * values computed independently with Python's hmac and base64 modules, the
 * prefix, the domain separator and the key's precomputed state staying
 * untouched between tokens. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "mask/key.h"
#include "mask/token.h"

#define LIT(s) (s), (sizeof(s) - 1)

static void sample_key(kiln_key *key, unsigned version)
{
	unsigned char bytes[32];
	int i;

	for (i = 0; i < 32; i++)
		bytes[i] = (unsigned char)i; /* bytes(range(32)) */
	kiln_key_init(key, bytes, version);
}

static void check_base32(const char *in, const char *want)
{
	char out[64];
	size_t n;

	memset(out, '#', sizeof(out));
	n = kiln_base32_lower(out, (const unsigned char *)in, strlen(in));
	assert_int_equal(n, strlen(want));
	assert_memory_equal(out, want, n);
	assert_int_equal(out[n], '#'); /* no NUL, nothing past the end */
}

static void test_base32_rfc4648(void **state)
{
	(void)state;
	/* RFC 4648 section 10, lower-cased, padding removed */
	check_base32("", "");
	check_base32("f", "my");
	check_base32("fo", "mzxq");
	check_base32("foo", "mzxw6");
	check_base32("foob", "mzxw6yq");
	check_base32("fooba", "mzxw6ytb");
	check_base32("foobar", "mzxw6ytboi");
}

static void test_base32_lengths_and_alphabet(void **state)
{
	unsigned char in[40];
	char out[80];
	size_t n, i;

	(void)state;
	memset(in, 0xff, sizeof(in));
	for (n = 0; n <= sizeof(in); n++) {
		size_t got = kiln_base32_lower(out, in, n);

		assert_int_equal(got, (n * 8 + 4) / 5);
		for (i = 0; i < got; i++)
			assert_non_null(strchr("abcdefghijklmnopqrstuvwxyz234567", out[i]));
	}
	/* all ones: every full 5-bit group is '7'; 16 bytes leave 3 bits, padded with zeros */
	n = kiln_base32_lower(out, in, 16);
	assert_int_equal(n, 26);
	assert_memory_equal(out, "777777777777777777777777777", 25);
	assert_int_equal(out[25], '4');
	memset(in, 0, sizeof(in));
	n = kiln_base32_lower(out, in, 5);
	assert_memory_equal(out, "aaaaaaaa", n);
}

/* Known answers from:
 * /usr/bin/python3 -c 'import
 * hmac,hashlib,base64;print("p1_"+base64.b32encode(hmac.new(bytes(range(32)),b"email\x1falice@example.com",hashlib.sha256).digest()[:16]).decode().rstrip("=").lower())'
 * and the same with the version, domain, value and key of each case. */
static void test_token_known_answers(void **state)
{
	char out[KILN_TOKEN_MAX];
	kiln_key key;
	size_t n;

	(void)state;
	sample_key(&key, 1);
	n = kiln_token(out, &key, LIT("email"), LIT("alice@example.com"));
	assert_string_equal(out, "p1_6zmfes34ky7kpcyeellgleqy2q");
	assert_int_equal(n, 29);
	assert_int_equal(strlen(out), n);

	/* b"\x1f": empty domain and empty value */
	n = kiln_token(out, &key, NULL, 0, NULL, 0);
	assert_string_equal(out, "p1_mlgu3npl7jipzanztifz4m2fsa");
	assert_int_equal(n, 29);

	/* version 7, b"phone\x1f+442079460958" */
	sample_key(&key, 7);
	n = kiln_token(out, &key, LIT("phone"), LIT("+442079460958"));
	assert_string_equal(out, "p7_iqdoi5gkwnxsy2i7jzzsgdnpta");
	assert_int_equal(n, 29);

	/* key bytes.fromhex("ff"*32), version 4294967295, "name\x1fGrüße".encode() */
	{
		unsigned char ff[32];

		memset(ff, 0xff, sizeof(ff));
		kiln_key_init(&key, ff, 4294967295u);
	}
	n = kiln_token(out, &key, LIT("name"),
	               LIT("Gr\xc3\xbc\xc3\x9f"
	                   "e"));
	assert_string_equal(out, "p4294967295_cttyhh5xceyhevywc2lw5nxmtq");
	assert_int_equal(n, 38);
	assert_true(n < KILN_TOKEN_MAX);
	kiln_key_wipe(&key);
}

static void test_token_prefix_and_shape(void **state)
{
	char out[KILN_TOKEN_MAX];
	kiln_key key;
	size_t n, i;

	(void)state;
	sample_key(&key, 1);
	n = kiln_token(out, &key, LIT("user_id"), LIT("12345"));
	assert_int_equal(n, 29);
	assert_memory_equal(out, "p1_", 3);
	for (i = 3; i < n; i++)
		assert_non_null(strchr("abcdefghijklmnopqrstuvwxyz234567", out[i]));
	assert_int_equal(out[n], '\0');

	sample_key(&key, 0);
	n = kiln_token(out, &key, LIT("user_id"), LIT("12345"));
	assert_int_equal(n, 29);
	assert_memory_equal(out, "p0_", 3);

	sample_key(&key, 12);
	n = kiln_token(out, &key, LIT("user_id"), LIT("12345"));
	assert_int_equal(n, 30);
	assert_memory_equal(out, "p12_", 4);
}

static void test_token_domains_and_boundary(void **state)
{
	char a[KILN_TOKEN_MAX], b[KILN_TOKEN_MAX];
	kiln_key key;

	(void)state;
	sample_key(&key, 1);

	/* same value, different domain */
	kiln_token(a, &key, LIT("email"), LIT("alice@example.com"));
	kiln_token(b, &key, LIT("contact"), LIT("alice@example.com"));
	assert_string_not_equal(a, b);

	/* the 0x1F separator keeps "ab"+"c" apart from "a"+"bc" */
	kiln_token(a, &key, LIT("ab"), LIT("c"));
	kiln_token(b, &key, LIT("a"), LIT("bc"));
	assert_string_not_equal(a, b);

	/* a value differing in one byte */
	kiln_token(a, &key, LIT("email"), LIT("alice@example.com"));
	kiln_token(b, &key, LIT("email"), LIT("alicf@example.com"));
	assert_string_not_equal(a, b);

	/* deterministic: the key's base state is not consumed by a token */
	kiln_token(a, &key, LIT("email"), LIT("alice@example.com"));
	kiln_token(b, &key, LIT("email"), LIT("alice@example.com"));
	assert_string_equal(a, b);
	assert_string_equal(a, "p1_6zmfes34ky7kpcyeellgleqy2q");

	/* the value's bytes count, not a C string: an embedded NUL matters */
	kiln_token(a, &key, LIT("v"), "x\0y", 3);
	kiln_token(b, &key, LIT("v"), "x", 1);
	assert_string_not_equal(a, b);
}

static void test_token_key_matters(void **state)
{
	char a[KILN_TOKEN_MAX], b[KILN_TOKEN_MAX];
	unsigned char bytes[32];
	kiln_key k1, k2;

	(void)state;
	sample_key(&k1, 1);
	memset(bytes, 0, sizeof(bytes));
	kiln_key_init(&k2, bytes, 1);
	kiln_token(a, &k1, LIT("email"), LIT("alice@example.com"));
	kiln_token(b, &k2, LIT("email"), LIT("alice@example.com"));
	assert_string_not_equal(a, b);
	assert_memory_equal(a, b, 3); /* same version, same prefix */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_base32_rfc4648),
	    cmocka_unit_test(test_base32_lengths_and_alphabet),
	    cmocka_unit_test(test_token_known_answers),
	    cmocka_unit_test(test_token_prefix_and_shape),
	    cmocka_unit_test(test_token_domains_and_boundary),
	    cmocka_unit_test(test_token_key_matters),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
