/* Unit tests for validation's fast paths (issue 29): each one must answer
 * exactly what the path it shortcuts answers, on the inputs where the two
 * could part: the SSE2 uuid and base64 checks against the portable byte
 * loops (every byte value at every position, bytes >= 0x80, 16-byte load
 * boundaries, padding), and the 64-bit multipleOf test against the 128-bit
 * decimal one (zero, 18 digits, every fraction length, multipleOf mantissas
 * around the 60-bit limit, tiny and huge scales), and the JSON scanner's
 * shortcut of taking a ',' with the value before it (the same tokens, the
 * same errors at the same offsets as through S_AFTER_VALUE). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/decimal.h"
#include "contract/format.h"
#include "core/json.h"

/* Both paths on an exact-size copy (no NUL: a read past len trips ASan). */
static void same_answer(kiln_format format, const char *s, size_t len)
{
	char *buf = malloc(len ? len : 1);
	bool fast, portable;

	assert_non_null(buf);
	memcpy(buf, s, len);
	kiln_format_allow_simd(true);
	fast = kiln_format_check(format, buf, len);
	kiln_format_allow_simd(false);
	portable = kiln_format_check(format, buf, len);
	kiln_format_allow_simd(true);
	free(buf);
	if (fast != portable)
		fail_msg("%s: fast %d, portable %d on a %zu-byte value", kiln_format_name(format), fast,
		         portable, len);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void test_uuid_every_byte(void **state)
{
	const char *valid = "123e4567-E89b-12d3-a456-426614174000";
	char s[40];

	(void)state;
	same_answer(KILN_FORMAT_UUID, valid, 36);
	assert_true(kiln_format_check(KILN_FORMAT_UUID, valid, 36));
	for (size_t i = 0; i < 36; i++) {
		for (unsigned b = 0; b < 256; b++) {
			memcpy(s, valid, 36);
			s[i] = (char)b;
			same_answer(KILN_FORMAT_UUID, s, 36);
		}
	}
	/* the bytes next to each class's edges, everywhere at once */
	static const char edges[] = "/09:@AFG`afg-,.\x80\xff";
	for (int n = 0; n < 20000; n++) {
		for (size_t i = 0; i < 36; i++)
			s[i] = next_random() % 4 ? valid[i] : edges[next_random() % (sizeof(edges) - 1)];
		same_answer(KILN_FORMAT_UUID, s, 36);
	}
	for (size_t len = 0; len < 40; len++)
		same_answer(KILN_FORMAT_UUID, "123e4567-e89b-12d3-a456-4266141740001234", len);
}

static void test_uuid_answers(void **state)
{
	(void)state;
	assert_true(kiln_format_check(KILN_FORMAT_UUID, "ABCDEF01-2345-6789-abcd-ef0123456789", 36));
	assert_false(kiln_format_check(KILN_FORMAT_UUID, "ABCDEF01-2345-6789-abcd-ef012345678g", 36));
	assert_false(kiln_format_check(KILN_FORMAT_UUID, "ABCDEF01-2345-6789-abcd-ef012345678\x80", 36));
	assert_false(kiln_format_check(KILN_FORMAT_UUID, "ABCDEF01-2345-6789-abcd0ef0123456789", 36));
	assert_false(kiln_format_check(KILN_FORMAT_UUID, "ABCDEF01-2345-6789-abcd-ef01234567-9", 36));
}

static void test_base64_every_byte(void **state)
{
	const char *alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char s[96];

	(void)state;
	/* every length to 80 (16-byte loads and their tails), 0, 1 or 2 '=' */
	for (size_t len = 0; len <= 80; len++) {
		for (size_t pad = 0; pad <= 3 && pad <= len; pad++) {
			for (size_t i = 0; i < len; i++)
				s[i] = alphabet[(i * 7 + len) % 64];
			memset(s + len - pad, '=', pad);
			same_answer(KILN_FORMAT_BYTE, s, len);
		}
	}
	for (size_t len = 4; len <= 52; len += 16) {
		for (size_t i = 0; i < len; i++) {
			for (unsigned b = 0; b < 256; b++) {
				for (size_t k = 0; k < len; k++)
					s[k] = alphabet[(k * 5 + 3) % 64];
				s[len - 1] = '=';
				s[i] = (char)b;
				same_answer(KILN_FORMAT_BYTE, s, len);
			}
		}
	}
	static const char edges[] = "@AZ[`az{/09:+,=*\x80\xff";
	for (int n = 0; n < 20000; n++) {
		size_t len = (next_random() % 20) * 4;
		for (size_t i = 0; i < len; i++)
			s[i] = next_random() % 8 ? alphabet[next_random() % 64]
			                         : edges[next_random() % (sizeof(edges) - 1)];
		same_answer(KILN_FORMAT_BYTE, s, len);
	}
}

/* x = mant * 10^-frac written out and parsed, the way the slow path sees it. */
static void check_multiple(uint64_t mant, int frac, const char *multiple_of)
{
	char text[64];
	kiln_decimal x, m;
	int slow, fast;
	char digits[32];
	int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)mant);

	if (frac == 0) {
		snprintf(text, sizeof(text), "%s", digits);
	} else if (n > frac) {
		snprintf(text, sizeof(text), "%.*s.%s", n - frac, digits, digits + n - frac);
	} else {
		/* "0." then frac - n zeros then the digits */
		memcpy(text, "0.", 2);
		memset(text + 2, '0', (size_t)(frac - n));
		snprintf(text + 2 + (frac - n), sizeof(text) - 2 - (size_t)(frac - n), "%s", digits);
	}
	assert_true(kiln_decimal_parse(multiple_of, strlen(multiple_of), &m));
	assert_true(kiln_decimal_parse(text, strlen(text), &x));
	slow = kiln_decimal_is_multiple(&x, &m);
	fast = kiln_decimal_is_multiple_u64(mant, frac, &m);
	if (fast >= 0 && fast != slow)
		fail_msg("%s multipleOf %s: fast %d, exact %d", text, multiple_of, fast, slow);
	if (fast < 0 && m.mant != 0 && m.mant < (unsigned __int128)1 << 60)
		fail_msg("%s multipleOf %s: the fast path gave up", text, multiple_of);
}

static void test_multiple_of_edges(void **state)
{
	static const char *const multiples[] = {
	    "0.01",
	    "0.05",
	    "0.25",
	    "3",
	    "7",
	    "10",
	    "2.5",
	    "0.000001",
	    "1e-20",
	    "1e30",
	    "1e17",
	    "1e18",
	    "1e19",
	    "12.5",
	    "0.07",
	    "1000",
	    "1152921504606846975",
	    "1152921504606846976", /* 2^60: the fast path leaves it to the exact one */
	    "123456789012345678",
	    "999999999999999999",
	    "0.333",
	    "5e-3",
	    "40"};
	static const uint64_t mants[] = {0,
	                                 1,
	                                 5,
	                                 7,
	                                 10,
	                                 25,
	                                 99,
	                                 100,
	                                 1999,
	                                 123456,
	                                 1152921504606846975ull,
	                                 1152921504606846976ull,
	                                 100000000000000000ull,
	                                 123456789012345678ull,
	                                 999999999999999999ull,
	                                 500000000000000005ull};

	(void)state;
	for (size_t i = 0; i < sizeof(multiples) / sizeof(multiples[0]); i++)
		for (size_t j = 0; j < sizeof(mants) / sizeof(mants[0]); j++)
			for (int frac = 0; frac <= 18; frac++)
				check_multiple(mants[j], frac, multiples[i]);
	for (int n = 0; n < 200000; n++) {
		uint64_t mant = next_random() % 1000000000000000000ull;
		int frac = (int)(next_random() % 19);
		if (n % 3 == 0)
			mant = mant % 100000 * (next_random() % 2 ? 1 : 100);
		check_multiple(mant, frac,
		               multiples[next_random() % (sizeof(multiples) / sizeof(multiples[0]))]);
	}
}

static void test_multiple_of_answers(void **state)
{
	kiln_decimal m;

	(void)state;
	assert_true(kiln_decimal_parse("0.01", 4, &m));
	assert_int_equal(kiln_decimal_is_multiple_u64(1999, 2, &m), 1);          /* 19.99 */
	assert_int_equal(kiln_decimal_is_multiple_u64(5000000005ull, 3, &m), 0); /* 5000000.005 */
	assert_int_equal(kiln_decimal_is_multiple_u64(0, 5, &m), 1);             /* 0.00000 */
	assert_int_equal(kiln_decimal_is_multiple_u64(12, 0, &m), 1);            /* 12 */
	assert_true(kiln_decimal_parse("1e30", 4, &m));
	assert_int_equal(kiln_decimal_is_multiple_u64(999999999999999999ull, 0, &m), 0);
	assert_true(kiln_decimal_parse("0", 1, &m));
	assert_int_equal(kiln_decimal_is_multiple_u64(5, 0, &m), -1);
}

/* Errors right after a ',' the scanner took with the value or bracket
 * before it: each offset is where the text stops making sense, as before. */
static void test_scanner_comma_errors(void **state)
{
	static const struct {
		const char *text;
		size_t offset;
	} cases[] = {
	    {"[[],]", 4},
	    {"[{},]", 4},
	    {"[[] ,]", 5},
	    {"[1 , ]", 5},
	    {"{\"a\":[],}", 8},
	    {"{\"a\":{} , }", 10},
	    {"{\"a\":1,,\"b\":2}", 7},
	    {"{\"a\":\"x\",1}", 9},
	    {"[\"x\",:]", 5},
	    {"[true,}", 6},
	    {"[[]],", 4},
	    {"[],[]", 2},
	    {"1,", 1},
	    {"[1,", 3},
	    {"[[],", 4},
	    {"{\"a\":1,", 7},
	    {"{\"a\":null, ", 11},
	    {"[1,]", 3},
	    {"{\"a\":1,}", 7},
	};
	kiln_json_scanner *s = kiln_json_scanner_new(NULL);

	(void)state;
	assert_non_null(s);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = strlen(cases[i].text), off = (size_t)-1;
		char *buf = malloc(len);

		assert_non_null(buf);
		memcpy(buf, cases[i].text, len); /* exact size: a read past the end trips ASan */
		if (kiln_json_check(s, buf, len) != KILN_REJECT_JSON_SYNTAX ||
		    (kiln_json_scanner_error(s, &off, NULL), off) != cases[i].offset)
			fail_msg("<%s>: %s at %zu, want json_syntax at %zu", cases[i].text,
			         kiln_reject_name(kiln_json_scanner_error(s, NULL, NULL)), off,
			         cases[i].offset);
		free(buf);
	}
	kiln_json_scanner_free(s);
}

/* A valid text with a ',' after every kind of value and bracket, with and
 * without whitespace: every token, its type and offset. */
static void test_scanner_comma_tokens(void **state)
{
	static const char text[] = "[1,\"s\" ,true,null,{},[] , {\"a\":[2,{}],\"b\":false},3.5]";
	static const struct {
		kiln_json_type type;
		size_t offset;
	} want[] = {
	    {KILN_JSON_ARRAY_BEGIN, 0},   {KILN_JSON_NUMBER, 1},        {KILN_JSON_STRING, 3},
	    {KILN_JSON_TRUE, 8},          {KILN_JSON_NULL, 13},         {KILN_JSON_OBJECT_BEGIN, 18},
	    {KILN_JSON_OBJECT_END, 19},   {KILN_JSON_ARRAY_BEGIN, 21},  {KILN_JSON_ARRAY_END, 22},
	    {KILN_JSON_OBJECT_BEGIN, 26}, {KILN_JSON_KEY, 27},          {KILN_JSON_ARRAY_BEGIN, 31},
	    {KILN_JSON_NUMBER, 32},       {KILN_JSON_OBJECT_BEGIN, 34}, {KILN_JSON_OBJECT_END, 35},
	    {KILN_JSON_ARRAY_END, 36},    {KILN_JSON_KEY, 38},          {KILN_JSON_FALSE, 42},
	    {KILN_JSON_OBJECT_END, 47},   {KILN_JSON_NUMBER, 49},       {KILN_JSON_ARRAY_END, 52},
	};
	kiln_json_scanner *s = kiln_json_scanner_new(NULL);
	kiln_json_token t;
	size_t n = 0;
	int rc;

	(void)state;
	assert_non_null(s);
	kiln_json_scanner_reset(s, text, sizeof(text) - 1);
	while ((rc = kiln_json_next(s, &t)) > 0) {
		assert_true(n < sizeof(want) / sizeof(want[0]));
		if (t.type != want[n].type || t.offset != want[n].offset)
			fail_msg("token %zu: type %d at %zu, want type %d at %zu", n, (int)t.type, t.offset,
			         (int)want[n].type, want[n].offset);
		n++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(n, sizeof(want) / sizeof(want[0]));
	kiln_json_scanner_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_uuid_every_byte),      cmocka_unit_test(test_uuid_answers),
	    cmocka_unit_test(test_base64_every_byte),    cmocka_unit_test(test_multiple_of_edges),
	    cmocka_unit_test(test_multiple_of_answers),  cmocka_unit_test(test_scanner_comma_errors),
	    cmocka_unit_test(test_scanner_comma_tokens),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
