/* Unit tests for the strict base64 decoder (src/core/base64.c): RFC 4648
 * vectors, padding and alphabet, ignored armour bytes, room, and the bytes
 * above 0x7f that libsodium 1.0.18 alone decodes as digits. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/base64.h"

static int decode(const char *text, const char *ignore, char *out, size_t cap, size_t *n)
{
	return kiln_base64_decode((unsigned char *)out, cap, text, strlen(text), ignore, n);
}

static void test_vectors(void **state)
{
	/* RFC 4648 section 10 */
	static const char *pairs[][2] = {{"", ""},
	                                 {"Zg==", "f"},
	                                 {"Zm8=", "fo"},
	                                 {"Zm9v", "foo"},
	                                 {"Zm9vYg==", "foob"},
	                                 {"Zm9vYmE=", "fooba"},
	                                 {"Zm9vYmFy", "foobar"}};
	char out[16];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		assert_int_equal(decode(pairs[i][0], NULL, out, sizeof(out), &n), 0);
		assert_int_equal(n, strlen(pairs[i][1]));
		assert_memory_equal(out, pairs[i][1], n);
	}
	/* "/+" decode to 0xff 0xef */
	assert_int_equal(decode("/+8=", NULL, out, sizeof(out), &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal((unsigned char)out[0], 0xff);
}

static void test_refused(void **state)
{
	char out[16];
	size_t n;

	(void)state;
	assert_int_equal(decode("Zg=", NULL, out, sizeof(out), &n), -1);   /* short padding */
	assert_int_equal(decode("Zh==", NULL, out, sizeof(out), &n), -1);  /* non-zero pad bits */
	assert_int_equal(decode("Zm9-", NULL, out, sizeof(out), &n), -1);  /* url alphabet */
	assert_int_equal(decode("Zm 9v", NULL, out, sizeof(out), &n), -1); /* space not ignored */
	assert_int_equal(decode("Zm9vYmFy", NULL, out, 5, &n), -1);        /* no room */
	/* 0xad where '/' belongs: libsodium 1.0.18 alone took it for a digit */
	assert_int_equal(decode("\xad+8=", NULL, out, sizeof(out), &n), -1);
	assert_int_equal(decode("Zm9v\xc2\xad", NULL, out, sizeof(out), &n), -1);
	assert_false(kiln_base64_char(0xad));
	assert_true(kiln_base64_char('='));
}

static void test_ignore(void **state)
{
	char out[16];
	size_t n;

	(void)state;
	assert_int_equal(decode("Zm9v\nYmFy\n", " \t\r\n", out, sizeof(out), &n), 0);
	assert_int_equal(n, 6);
	assert_memory_equal(out, "foobar", 6);
	assert_int_equal(decode("Zm9v\nYm\xadFy", " \t\r\n", out, sizeof(out), &n), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vectors),
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_ignore),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
