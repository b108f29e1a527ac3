/* Unit tests for the JSON scanner (src/core/json.c): token stream, flags and
 * key hashes, every reject code with its offset, duplicate keys in small and
 * large objects, limits, scanner reuse, unescaping, UTF-8 and the boundaries
 * of the 16-byte string fast path. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/reject.h"

#define LIT(s) (s), (sizeof(s) - 1)

static kiln_json_scanner *new_scanner(const kiln_json_limits *limits)
{
	kiln_json_scanner *s = kiln_json_scanner_new(limits);

	assert_non_null(s);
	return s;
}

/* Checks text[0..len) under `limits` (NULL: defaults) and, on failure, the
 * error offset. */
static void check_n(const kiln_json_limits *limits, const char *text, size_t len, kiln_reject code,
                    size_t offset)
{
	kiln_json_scanner *s = new_scanner(limits);
	kiln_reject got = kiln_json_check(s, text, len);
	size_t off = (size_t)-1;

	if (got != code)
		print_error("input <%.*s>: got %s, want %s\n", (int)len, text, kiln_reject_name(got),
		            kiln_reject_name(code));
	assert_int_equal(got, code);
	assert_int_equal(kiln_json_scanner_error(s, &off, NULL), code);
	if (code != KILN_REJECT_NONE) {
		if (off != offset)
			print_error("input <%.*s>: offset %zu, want %zu\n", (int)len, text, off, offset);
		assert_int_equal(off, offset);
	}
	kiln_json_scanner_free(s);
}

static void check_ok(const char *text)
{
	check_n(NULL, text, strlen(text), KILN_REJECT_NONE, 0);
}

static void check_err(const char *text, kiln_reject code, size_t offset)
{
	check_n(NULL, text, strlen(text), code, offset);
}

/* Decodes a string or key token into a NUL-terminated heap copy. */
static char *decode(const kiln_json_token *tok, size_t *out_len)
{
	char *buf = malloc(tok->len + 1);
	size_t n;

	assert_non_null(buf);
	n = kiln_json_unescape(buf, tok->len, tok);
	assert_true(n != (size_t)-1);
	assert_true(n <= tok->len);
	buf[n] = '\0';
	if (out_len)
		*out_len = n;
	return buf;
}

static void assert_key_hash(const kiln_json_token *tok)
{
	size_t n;
	char *key = decode(tok, &n);

	assert_true(tok->key_hash == kiln_json_hash(key, n));
	free(key);
}

struct expect_tok {
	kiln_json_type type;
	uint32_t depth;
	size_t offset;
	const char *text; /* the token's ptr[0..len) */
	uint32_t flags;
};

#define A KILN_JSON_ASCII
#define E KILN_JSON_ESCAPED
#define I KILN_JSON_INTEGER

static void test_nested_document_tokens(void **state)
{
	static const char doc[] =
	    "{\"list\": [{\"s\": \"h\\u00e9\", \"n\": 12, \"i\": -7},\n"
	    " {\"f\": 1.5, \"e\": 1e3, \"z\": -0.0, \"t\": true, \"u\": false, \"v\": null, "
	    "\"w\": \"caf\xC3\xA9\"}], \"\\u0061\": {}, \"x\\\"y\": []}";
	static const struct expect_tok want[] = {
	    {KILN_JSON_OBJECT_BEGIN, 0, 0, "{", 0},
	    {KILN_JSON_KEY, 1, 1, "list", A},
	    {KILN_JSON_ARRAY_BEGIN, 1, 9, "[", 0},
	    {KILN_JSON_OBJECT_BEGIN, 2, 10, "{", 0},
	    {KILN_JSON_KEY, 3, 11, "s", A},
	    {KILN_JSON_STRING, 3, 16, "h\\u00e9", A | E},
	    {KILN_JSON_KEY, 3, 27, "n", A},
	    {KILN_JSON_NUMBER, 3, 32, "12", I},
	    {KILN_JSON_KEY, 3, 36, "i", A},
	    {KILN_JSON_NUMBER, 3, 41, "-7", I},
	    {KILN_JSON_OBJECT_END, 2, 43, "}", 0},
	    {KILN_JSON_OBJECT_BEGIN, 2, 47, "{", 0},
	    {KILN_JSON_KEY, 3, 48, "f", A},
	    {KILN_JSON_NUMBER, 3, 53, "1.5", 0},
	    {KILN_JSON_KEY, 3, 58, "e", A},
	    {KILN_JSON_NUMBER, 3, 63, "1e3", 0},
	    {KILN_JSON_KEY, 3, 68, "z", A},
	    {KILN_JSON_NUMBER, 3, 73, "-0.0", 0},
	    {KILN_JSON_KEY, 3, 79, "t", A},
	    {KILN_JSON_TRUE, 3, 84, "true", 0},
	    {KILN_JSON_KEY, 3, 90, "u", A},
	    {KILN_JSON_FALSE, 3, 95, "false", 0},
	    {KILN_JSON_KEY, 3, 102, "v", A},
	    {KILN_JSON_NULL, 3, 107, "null", 0},
	    {KILN_JSON_KEY, 3, 113, "w", A},
	    {KILN_JSON_STRING, 3, 118, "caf\xC3\xA9", 0},
	    {KILN_JSON_OBJECT_END, 2, 125, "}", 0},
	    {KILN_JSON_ARRAY_END, 1, 126, "]", 0},
	    {KILN_JSON_KEY, 1, 129, "\\u0061", A | E},
	    {KILN_JSON_OBJECT_BEGIN, 1, 139, "{", 0},
	    {KILN_JSON_OBJECT_END, 1, 140, "}", 0},
	    {KILN_JSON_KEY, 1, 143, "x\\\"y", A | E},
	    {KILN_JSON_ARRAY_BEGIN, 1, 151, "[", 0},
	    {KILN_JSON_ARRAY_END, 1, 152, "]", 0},
	    {KILN_JSON_OBJECT_END, 0, 153, "}", 0},
	};
	kiln_json_scanner *s = new_scanner(NULL);
	kiln_json_token tok;
	size_t i;

	(void)state;
	kiln_json_scanner_reset(s, doc, sizeof(doc) - 1);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct expect_tok *w = &want[i];
		size_t off = w->offset + (w->type == KILN_JSON_KEY || w->type == KILN_JSON_STRING);

		memset(&tok, 0xA5, sizeof(tok));
		assert_int_equal(kiln_json_next(s, &tok), 1);
		assert_int_equal(tok.type, w->type);
		assert_int_equal(tok.depth, w->depth);
		assert_int_equal(tok.offset, w->offset);
		assert_int_equal(tok.flags, w->flags);
		/* strings and keys: ptr/len are the bytes between the quotes */
		assert_ptr_equal(tok.ptr, doc + off);
		assert_int_equal(tok.len, strlen(w->text));
		assert_memory_equal(tok.ptr, w->text, tok.len);
		if (tok.type == KILN_JSON_KEY)
			assert_key_hash(&tok);
	}
	assert_int_equal(kiln_json_next(s, &tok), 0);
	assert_int_equal(kiln_json_next(s, &tok), 0);
	assert_int_equal(kiln_json_scanner_error(s, NULL, NULL), KILN_REJECT_NONE);
	kiln_json_scanner_free(s);
}

/* The first token of `text` under the defaults. */
static kiln_json_token first_token(kiln_json_scanner *s, const char *text, size_t len)
{
	kiln_json_token tok;

	kiln_json_scanner_reset(s, text, len);
	assert_int_equal(kiln_json_next(s, &tok), 1);
	return tok;
}

static void test_number_flags(void **state)
{
	static const struct {
		const char *text;
		bool integer;
	} cases[] = {
	    {"0", true},
	    {"-0", true},
	    {"12", true},
	    {"-7", true},
	    {"12345678901234567890123", true},
	    {"1.5", false},
	    {"1e3", false},
	    {"1E3", false},
	    {"-0.0", false},
	    {"1e+3", false},
	    {"1e-3", false},
	    {"0.5e-10", false},
	    {"0e0", false},
	};
	kiln_json_scanner *s = new_scanner(NULL);

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = strlen(cases[i].text);
		kiln_json_token tok = first_token(s, cases[i].text, len);

		assert_int_equal(tok.type, KILN_JSON_NUMBER);
		assert_int_equal(tok.len, len);
		assert_int_equal(tok.offset, 0);
		assert_int_equal(tok.depth, 0);
		assert_int_equal(!!(tok.flags & KILN_JSON_INTEGER), cases[i].integer);
		assert_int_equal(tok.flags & (KILN_JSON_ESCAPED | KILN_JSON_ASCII), 0);
		check_ok(cases[i].text);
	}
	kiln_json_scanner_free(s);
}

static void test_string_flags(void **state)
{
	kiln_json_scanner *s = new_scanner(NULL);
	kiln_json_token tok;

	(void)state;
	tok = first_token(s, LIT("\"plain\""));
	assert_int_equal(tok.type, KILN_JSON_STRING);
	assert_int_equal(tok.flags, KILN_JSON_ASCII);
	assert_int_equal(tok.len, 5);

	tok = first_token(s, LIT("\"\""));
	assert_int_equal(tok.flags, KILN_JSON_ASCII);
	assert_int_equal(tok.len, 0);

	tok = first_token(s, LIT("\"a\\nb\""));
	assert_int_equal(tok.flags, KILN_JSON_ASCII | KILN_JSON_ESCAPED);
	assert_int_equal(tok.len, 4);

	/* an escaped non-ASCII character is ASCII as written */
	tok = first_token(s, LIT("\"\\u00e9\""));
	assert_int_equal(tok.flags, KILN_JSON_ASCII | KILN_JSON_ESCAPED);

	tok = first_token(s, LIT("\"\xC3\xA9\""));
	assert_int_equal(tok.flags, 0);
	assert_int_equal(tok.len, 2);

	tok = first_token(s, LIT("\"\xC3\xA9\\t\""));
	assert_int_equal(tok.flags, KILN_JSON_ESCAPED);

	/* DEL is plain ASCII */
	tok = first_token(s, LIT("\"\x7F\""));
	assert_int_equal(tok.flags, KILN_JSON_ASCII);
	kiln_json_scanner_free(s);
}

static void test_key_hash(void **state)
{
	static const char text[] =
	    "{\"a\":1,\"\\u0062\":2,\"\":3,\"abcdefgh\":4,\"abcdefghijklmnopq\":5,"
	    "\"caf\xC3\xA9\":6,\"caf\\u00e9\":7,\"tab\\there\":8,\"\\ud83d\\ude00\":9}";
	static const struct {
		const char *decoded;
		size_t len;
	} keys[] = {
	    {"a", 1},
	    {"b", 1},
	    {"", 0},
	    {"abcdefgh", 8},
	    {"abcdefghijklmnopq", 17},
	    {"caf\xC3\xA9", 5},
	    {"caf\xC3\xA9", 5},
	    {"tab\there", 8},
	    {"\xF0\x9F\x98\x80", 4},
	};
	kiln_json_limits lax = {.allow_duplicate_keys = true};
	kiln_json_scanner *s = new_scanner(&lax);
	kiln_json_token tok;
	size_t k = 0;
	int rc;

	(void)state;
	assert_true(kiln_json_hash("a", 1) != kiln_json_hash("b", 1));
	assert_true(kiln_json_hash("", 0) != kiln_json_hash("a", 1));
	kiln_json_scanner_reset(s, text, sizeof(text) - 1);
	while ((rc = kiln_json_next(s, &tok)) > 0) {
		if (tok.type != KILN_JSON_KEY)
			continue;
		assert_true(k < sizeof(keys) / sizeof(keys[0]));
		assert_true(tok.key_hash == kiln_json_hash(keys[k].decoded, keys[k].len));
		assert_key_hash(&tok);
		k++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(k, sizeof(keys) / sizeof(keys[0]));

	/* "\u0061" hashes like "a", also with duplicate checks on */
	kiln_json_scanner_free(s);
	s = new_scanner(NULL);
	tok = first_token(s, LIT("{\"\\u0061\":1}"));
	assert_int_equal(kiln_json_next(s, &tok), 1);
	assert_int_equal(tok.type, KILN_JSON_KEY);
	assert_true(tok.key_hash == kiln_json_hash("a", 1));
	kiln_json_scanner_free(s);
}

static void test_syntax_errors(void **state)
{
	static const struct {
		const char *text;
		size_t offset;
	} cases[] = {
	    /* trailing commas */
	    {"[1,]", 3},
	    {"{\"a\":1,}", 7},
	    {"[1,2,,3]", 5},
	    {"[,1]", 1},
	    /* missing colon, value or key */
	    {"{\"a\" 1}", 5},
	    {"{\"a\"}", 4},
	    {"{\"a\":}", 5},
	    {"{1:2}", 1},
	    {"{\"a\":1 \"b\":2}", 7},
	    {"{\"a\"", 4},
	    /* numbers */
	    {"01", 1},
	    {"[01]", 2},
	    {"-01", 2},
	    {"00", 1},
	    {"1.", 2},
	    {"1.e5", 2},
	    {"[1.]", 3},
	    {".5", 0},
	    {"+1", 0},
	    {"-", 1},
	    {"-a", 1},
	    {"1e", 2},
	    {"1e+", 3},
	    {"1E-x", 3},
	    {"0x10", 1},
	    {"1 2", 2},
	    {"- 1", 1},
	    /* bare words and literals */
	    {"abc", 0},
	    {"tru", 0},
	    {"truth", 0},
	    {"nul", 0},
	    {"fals", 0},
	    {"[True]", 1},
	    {"{\"a\":nan}", 5},
	    {"truex", 4},
	    {"[nullnull]", 5},
	    /* strings */
	    {"\"abc", 0},
	    {"{\"a\":\"abc", 5},
	    {"{\"ab", 1},
	    {"\"", 0},
	    {"'a'", 0},
	    {"{'a':1}", 1},
	    {"[\"a\"\"b\"]", 4},
	    {"\"\\x\"", 1},
	    {"\"ab\\a\"", 3},
	    {"\"\\U0041\"", 1},
	    {"\"\\u12\"", 1},
	    {"\"\\u12", 1},
	    {"\"\\u12g4\"", 1},
	    {"\"\\", 2},
	    /* trailing garbage after the top value */
	    {"{} x", 3},
	    {"{}{}", 2},
	    {"[]]", 2},
	    {"1,", 1},
	    {"\"a\" \"b\"", 4},
	    /* structure */
	    {"", 0},
	    {"   \n\t\r ", 7},
	    {"[", 1},
	    {"[1", 2},
	    {"{\"a\":1", 6},
	    {"[}", 1},
	    {"{]", 1},
	    {"[1}", 2},
	    {"{\"a\":1]", 6},
	    {"}", 0},
	    {"]", 0},
	    {":", 0},
	    {",", 0},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_err(cases[i].text, KILN_REJECT_JSON_SYNTAX, cases[i].offset);

	/* raw control characters in strings, the NUL byte included */
	check_n(NULL,
	        LIT("\"a\x01"
	            "b\""),
	        KILN_REJECT_JSON_SYNTAX, 2);
	check_n(NULL, LIT("\"a\nb\""), KILN_REJECT_JSON_SYNTAX, 2);
	check_n(NULL, LIT("\"\tb\""), KILN_REJECT_JSON_SYNTAX, 1);
	check_n(NULL, LIT("{\"k\x1F\":1}"), KILN_REJECT_JSON_SYNTAX, 3);
	check_n(NULL, LIT("\"ab\0c\""), KILN_REJECT_JSON_SYNTAX, 3);
	/* valid UTF-8 outside strings is a syntax error, not a UTF-8 one */
	check_n(NULL, LIT("{\"a\":1}\xC3\xA9"), KILN_REJECT_JSON_SYNTAX, 7);
	check_n(NULL,
	        LIT("\xE2\x82\xAC"
	            "1"),
	        KILN_REJECT_JSON_SYNTAX, 0);
	/* a NUL byte outside strings */
	check_n(NULL, LIT("[1,\0]"), KILN_REJECT_JSON_SYNTAX, 3);
	check_n(NULL, LIT("{}\0"), KILN_REJECT_JSON_SYNTAX, 2);
}

static void test_invalid_utf8(void **state)
{
	static const struct {
		const char *text;
		size_t len, offset;
	} cases[] = {
	    {LIT("\"\xC0\x80\""), 1},         /* overlong NUL */
	    {LIT("\"\xC1\xBF\""), 1},         /* overlong */
	    {LIT("\"\xE0\x80\x80\""), 1},     /* overlong 3-byte */
	    {LIT("\"\xE0\x9F\xBF\""), 1},     /* overlong 3-byte */
	    {LIT("\"\xF0\x80\x80\x80\""), 1}, /* overlong 4-byte */
	    {LIT("\"\xF0\x8F\xBF\xBF\""), 1}, /* overlong 4-byte */
	    {LIT("\"ab\xED\xA0\x80\""), 3},   /* UTF-16 surrogate D800 */
	    {LIT("\"\xED\xBF\xBF\""), 1},     /* surrogate DFFF */
	    {LIT("\"\xF4\x90\x80\x80\""), 1}, /* above U+10FFFF */
	    {LIT("\"\xF5\x80\x80\x80\""), 1},
	    {LIT("\"\xF8\x88\x80\x80\x80\""), 1},
	    {LIT("\"\xFF\""), 1},
	    {LIT("\"\xFE\""), 1},
	    {LIT("\"\x80\""), 1}, /* lone continuation */
	    {LIT("\"\xC3\""), 1}, /* quote is no continuation */
	    {LIT("\"\xC3"
	         "a\""),
	     1},
	    {LIT("\"\xE2\x82\""), 1},
	    {LIT("\"\xE2\x28\xA1\""), 1},
	    {LIT("\"\xF0\x9F\x98\""), 1},
	    {LIT("\"\xF0\x9F\x98"
	         "a\""),
	     1},
	    {LIT("\"\xC3"), 1}, /* truncated at the end */
	    {LIT("\"ab\xE2\x82"), 3},
	    {LIT("\"\xF0\x9F\x98"), 1},
	    {LIT("{\"\xFF\":1}"), 2}, /* in a key */
	    {LIT("\"\\uDC00\""), 1},  /* lone low surrogate */
	    {LIT("\"ab\\uDFFF\""), 3},
	    {LIT("\"\\uD800\""), 1}, /* high surrogate alone */
	    {LIT("\"\\uD800"), 1},
	    {LIT("\"\\uDBFFx\""), 1},
	    {LIT("\"\\uD800\\u0041\""), 1}, /* not followed by a low one */
	    {LIT("\"\\uD800\\uD800\""), 1},
	    {LIT("\"\\uD800\\n\""), 1},
	    {LIT("\"x\\uD83D\\uDE0\""), 2},
	    {LIT("{\"\\uDC00\":1}"), 2},
	    /* outside strings: bytes that are not UTF-8 are invalid_utf8 where
	     * the grammar stops, as in strings (UTF-8 that is not JSON is
	     * json_syntax, below) */
	    {LIT("\xFF\xFE{}"), 0},
	    {LIT("{\"a\":1}\xC3"), 7},        /* truncated after the value */
	    {LIT("[1,\x80]"), 3},             /* lone continuation */
	    {LIT("{\"a\":\xED\xA0\x80}"), 5}, /* a surrogate as a value */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_n(NULL, cases[i].text, cases[i].len, KILN_REJECT_INVALID_UTF8, cases[i].offset);
}

static void test_valid_utf8(void **state)
{
	static const char *chars[] = {
	    "\xC2\x80",         /* U+0080 */
	    "\xDF\xBF",         /* U+07FF */
	    "\xE0\xA0\x80",     /* U+0800 */
	    "\xED\x9F\xBF",     /* U+D7FF */
	    "\xEE\x80\x80",     /* U+E000 */
	    "\xEF\xBF\xBD",     /* U+FFFD */
	    "\xEF\xBF\xBF",     /* U+FFFF */
	    "\xF0\x90\x80\x80", /* U+10000 */
	    "\xF3\xBF\xBF\xBF", /* U+FFFFF */
	    "\xF4\x8F\xBF\xBF", /* U+10FFFF */
	};
	kiln_json_scanner *s = new_scanner(NULL);
	char text[64];

	(void)state;
	for (size_t i = 0; i < sizeof(chars) / sizeof(chars[0]); i++) {
		size_t n = strlen(chars[i]);
		kiln_json_token tok;

		snprintf(text, sizeof(text), "\"%s\"", chars[i]);
		tok = first_token(s, text, n + 2);
		assert_int_equal(tok.type, KILN_JSON_STRING);
		assert_int_equal(tok.flags, 0);
		assert_int_equal(tok.len, n);
		assert_memory_equal(tok.ptr, chars[i], n);
		assert_int_equal(kiln_utf8_count(tok.ptr, tok.len), 1);
		assert_int_equal(kiln_json_check(s, text, n + 2), KILN_REJECT_NONE);

		/* and as a key, between other characters */
		snprintf(text, sizeof(text), "{\"a%sb\":\"%s%s\"}", chars[i], chars[i], chars[i]);
		assert_int_equal(kiln_json_check(s, text, strlen(text)), KILN_REJECT_NONE);
	}
	check_ok("\"\\uD800\\uDC00\\uDBFF\\uDFFF\\uFFFF\\u0000\\uE000\"");
	kiln_json_scanner_free(s);
}

static void test_duplicate_key_simple(void **state)
{
	static const char text[] = "{\"a\":1,\"b\":{},\"a\":2}";
	kiln_json_scanner *s = new_scanner(NULL);
	kiln_json_token tok, dup;
	size_t off;
	int rc;

	(void)state;
	kiln_json_scanner_reset(s, text, sizeof(text) - 1);
	while ((rc = kiln_json_next(s, &tok)) > 0)
		;
	assert_int_equal(rc, -1);
	memset(&dup, 0, sizeof(dup));
	assert_int_equal(kiln_json_scanner_error(s, &off, &dup), KILN_REJECT_DUPLICATE_KEY);
	assert_int_equal(off, 14);
	/* the token is the second occurrence */
	assert_int_equal(dup.type, KILN_JSON_KEY);
	assert_int_equal(dup.offset, 14);
	assert_ptr_equal(dup.ptr, text + 15);
	assert_int_equal(dup.len, 1);
	assert_true(dup.key_hash == kiln_json_hash("a", 1));
	assert_int_equal(dup.depth, 1);

	check_err("{\"a\":1,\"\\u0061\":2}", KILN_REJECT_DUPLICATE_KEY, 7);
	check_err("{\"\\u0061\":1,\"a\":2}", KILN_REJECT_DUPLICATE_KEY, 12);
	check_err("{\"\\u0061\":1,\"\\u0061\":2}", KILN_REJECT_DUPLICATE_KEY, 12);
	check_err("{\"\\u00e9\":1,\"\xC3\xA9\":2}", KILN_REJECT_DUPLICATE_KEY, 12);
	check_err("{\"\\/\":1,\"/\":2}", KILN_REJECT_DUPLICATE_KEY, 8);
	check_err("{\"\":1,\"\":2}", KILN_REJECT_DUPLICATE_KEY, 6);
	check_err("{\"abcdefghijklmnopqrstuvwxyz\":1,\"abcdefghijklmnopqrstuvwxyz\":2}",
	          KILN_REJECT_DUPLICATE_KEY, 32);
	check_err("[{\"x\":[{\"a\":1,\"a\":2}]}]", KILN_REJECT_DUPLICATE_KEY, 14);

	/* the out_token is that of the escaped second occurrence */
	kiln_json_scanner_reset(s, LIT("{\"a\":1,\"\\u0061\":2}"));
	while ((rc = kiln_json_next(s, &tok)) > 0)
		;
	assert_int_equal(kiln_json_scanner_error(s, NULL, &dup), KILN_REJECT_DUPLICATE_KEY);
	assert_int_equal(dup.offset, 7);
	assert_int_equal(dup.len, 6);
	assert_int_equal(dup.flags, KILN_JSON_ESCAPED | KILN_JSON_ASCII);
	assert_true(dup.key_hash == kiln_json_hash("a", 1));

	/* near misses are no duplicates */
	check_ok("{\"a\":1,\"A\":2,\"a \":3,\"\\u0061b\":4,\"abc\":[]}");
	check_ok("{\"abcdefghijklmnopqrstuvwxyz\":1,\"abcdefghijklmnopqrstuvwxyZ\":2}");
	kiln_json_scanner_free(s);
}

/* Appends to a growing buffer. */
struct buf {
	char *ptr;
	size_t len, cap;
};

static void buf_put(struct buf *b, const char *data, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		b->ptr = realloc(b->ptr, cap);
		assert_non_null(b->ptr);
		b->cap = cap;
	}
	memcpy(b->ptr + b->len, data, n);
	b->len += n;
	b->ptr[b->len] = '\0';
}

static void buf_puts(struct buf *b, const char *s)
{
	buf_put(b, s, strlen(s));
}

static void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void buf_printf(struct buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	assert_true(n >= 0 && (size_t)n < sizeof(tmp));
	buf_put(b, tmp, (size_t)n);
}

/* Appends `"<prefix>0":0,...,"<prefix>{n-1}":n-1` (no braces). */
static void put_keys(struct buf *b, const char *prefix, int n)
{
	for (int i = 0; i < n; i++)
		buf_printf(b, "%s\"%s%d\":%d", i ? "," : "", prefix, i, i);
}

/* An object of `n` keys k0.. whose key number `dup_at` (1-based; 0: none)
 * repeats key `dup_of` (0-based), written as `dup_text`. Returns the offset
 * of the repeated key's quote in *out_offset. */
static void build_object(struct buf *b, int n, int dup_at, const char *dup_text, size_t *out_offset)
{
	b->len = 0;
	buf_puts(b, "{");
	for (int i = 1; i <= n; i++) {
		if (i > 1)
			buf_puts(b, ",");
		if (i == dup_at) {
			*out_offset = b->len;
			buf_printf(b, "\"%s\":true", dup_text);
		} else {
			buf_printf(b, "\"k%d\":%d", i - 1, i - 1);
		}
	}
	buf_puts(b, "}");
}

static void test_duplicate_key_large_object(void **state)
{
	/* keys k0..k88 then, as key #90, a repeat (key #90 is past LINEAR_KEYS,
	 * so the lookup goes through the hash table) */
	static const char *repeats[] = {
	    "k0", "k5", "k31", "k32", "k33", "k60", "k88", "\\u006b5", "k\\u0038\\u0038",
	};
	struct buf b = {0};
	size_t off = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(repeats) / sizeof(repeats[0]); i++) {
		kiln_json_scanner *s = new_scanner(NULL);
		kiln_json_token tok, dup;
		int rc;

		build_object(&b, 100, 90, repeats[i], &off);
		kiln_json_scanner_reset(s, b.ptr, b.len);
		while ((rc = kiln_json_next(s, &tok)) > 0)
			;
		assert_int_equal(rc, -1);
		memset(&dup, 0, sizeof(dup));
		assert_int_equal(kiln_json_scanner_error(s, NULL, &dup), KILN_REJECT_DUPLICATE_KEY);
		assert_int_equal(dup.offset, off);
		assert_ptr_equal(dup.ptr, b.ptr + off + 1);
		assert_int_equal(dup.len, strlen(repeats[i]));
		check_n(NULL, b.ptr, b.len, KILN_REJECT_DUPLICATE_KEY, off);
		kiln_json_scanner_free(s);
	}

	/* a repeat at every position around the linear/table switch */
	for (int at = 2; at <= 70; at++) {
		build_object(&b, 80, at, "k0", &off);
		check_n(NULL, b.ptr, b.len, KILN_REJECT_DUPLICATE_KEY, off);
		build_object(&b, 80, at, at > 2 ? "k1" : "k0", &off);
		check_n(NULL, b.ptr, b.len, KILN_REJECT_DUPLICATE_KEY, off);
	}

	/* no repeat: 100 and 1,000 distinct keys */
	build_object(&b, 100, 0, NULL, &off);
	check_n(NULL, b.ptr, b.len, KILN_REJECT_NONE, 0);
	build_object(&b, 1000, 0, NULL, &off);
	check_n(NULL, b.ptr, b.len, KILN_REJECT_NONE, 0);
	free(b.ptr);
}

/* Regression: when the key table first grew, it doubled once and then
 * reindexed every open object's keys, small objects' included; 13 nested
 * objects of 31 keys around one of 129 (532 keys, 512 slots) made the
 * reindex probe a full table forever. */
static void test_duplicate_key_table_growth(void **state)
{
	struct buf b = {0};
	size_t dup_off = 0;

	(void)state;
	for (int pass = 0; pass < 2; pass++) {
		b.len = 0;
		for (int level = 0; level < 13; level++) {
			buf_puts(&b, "{");
			for (int k = 0; k < 30; k++)
				buf_printf(&b, "\"k%d\":0,", k);
			buf_puts(&b, "\"c\":");
		}
		buf_puts(&b, "{");
		for (int k = 0; k < 129; k++)
			buf_printf(&b, "%s\"i%d\":0", k ? "," : "", k);
		if (pass == 1) {
			dup_off = b.len + 1;
			buf_puts(&b, ",\"i5\":0");
		}
		buf_puts(&b, "}");
		for (int level = 0; level < 13; level++)
			buf_puts(&b, "}");
		if (pass == 0)
			check_n(NULL, b.ptr, b.len, KILN_REJECT_NONE, 0);
		else
			check_n(NULL, b.ptr, b.len, KILN_REJECT_DUPLICATE_KEY, dup_off);
	}
	free(b.ptr);
}

/* Regression (hash flooding): the duplicate-key table once probed by the
 * public kiln_json_hash, so keys made to share its low bits turned every
 * insert into a walk over all the others (90,000 such keys in one record
 * cost 472 times the CPU of random keys). Keys sharing the low 14 bits of
 * kiln_json_hash (more than the table's mask ever has at this size) must
 * cost about one probe each, and a repeat among them is still found. */
static void test_duplicate_key_hash_flooding(void **state)
{
	enum { NKEYS = 2000, BITS = 14 };
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	char(*keys)[13] = calloc(NKEYS, sizeof(*keys));
	uint64_t want = 0, rng = 0x9e3779b97f4a7c15ull;
	struct buf b = {0};
	size_t dup_off;
	int n = 0;

	(void)state;
	assert_non_null(keys);
	while (n < NKEYS) {
		char k[13];
		for (int i = 0; i < 12; i++) {
			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			k[i] = alphabet[rng % 36];
		}
		k[12] = 0;
		uint64_t h = kiln_json_hash(k, 12) & ((1u << BITS) - 1);
		if (n == 0)
			want = h;
		if (h == want)
			memcpy(keys[n++], k, 13);
	}
	for (int pass = 0; pass < 2; pass++) {
		kiln_json_scanner *s = new_scanner(NULL);

		b.len = 0;
		buf_puts(&b, "{");
		for (int i = 0; i < NKEYS; i++)
			buf_printf(&b, "%s\"%s\":%d", i ? "," : "", keys[i], i);
		dup_off = b.len + 1;
		if (pass == 1) /* a repeat of key 1000, escaped */
			buf_printf(&b, ",\"\\u00%02x%s\":0", keys[1000][0], keys[1000] + 1);
		buf_puts(&b, "}");
		assert_int_equal(kiln_json_check(s, b.ptr, b.len),
		                 pass ? KILN_REJECT_DUPLICATE_KEY : KILN_REJECT_NONE);
		if (pass == 1) {
			size_t off;
			kiln_json_scanner_error(s, &off, NULL);
			assert_int_equal(off, dup_off);
		}
		/* random keys take about one probe each; colliding ones under an
		 * unkeyed table took about NKEYS * NKEYS / 2 */
		assert_true(kiln_json_scanner_probes(s) < 8 * NKEYS);
		kiln_json_scanner_free(s);
	}
	free(b.ptr);
	free(keys);
}

static void test_duplicate_key_scopes(void **state)
{
	struct buf b = {0};
	size_t off;

	(void)state;
	/* the same key in sibling objects and in nested objects is allowed */
	check_ok("[{\"a\":1},{\"a\":2},{\"a\":{\"a\":{\"a\":[{\"a\":3}]}}}]");
	check_ok("{\"x\":{\"a\":1},\"y\":{\"a\":2},\"a\":{\"a\":3}}");
	check_ok("{\"a\":{\"a\":{\"a\":{}}}}");

	/* a key repeated after a nested object with many keys closed */
	buf_puts(&b, "{\"a\":1,\"n\":{");
	put_keys(&b, "k", 100);
	buf_puts(&b, "},");
	off = b.len;
	buf_puts(&b, "\"a\":2}");
	check_n(NULL, b.ptr, b.len, KILN_REJECT_DUPLICATE_KEY, off);

	/* the nested object's keys do not count once it closed */
	b.len = 0;
	buf_puts(&b, "{\"a\":1,\"n\":{");
	put_keys(&b, "k", 100);
	buf_puts(&b, "},\"k5\":2,\"k99\":3,\"b\":4}");
	check_n(NULL, b.ptr, b.len, KILN_REJECT_NONE, 0);

	/* nor do the outer object's keys inside the nested one */
	b.len = 0;
	buf_puts(&b, "{");
	put_keys(&b, "k", 50);
	buf_puts(&b, ",\"n\":{");
	put_keys(&b, "k", 100);
	buf_puts(&b, "},\"m\":{");
	put_keys(&b, "k", 10);
	buf_puts(&b, "},\"x\":1}");
	check_n(NULL, b.ptr, b.len, KILN_REJECT_NONE, 0);

	/* a large outer object: repeat after a large nested object closed */
	b.len = 0;
	buf_puts(&b, "{");
	put_keys(&b, "k", 50);
	buf_puts(&b, ",\"n\":{");
	put_keys(&b, "j", 300);
	buf_puts(&b, "},\"j7\":0,");
	off = b.len;
	buf_puts(&b, "\"k40\":1}");
	check_n(NULL, b.ptr, b.len, KILN_REJECT_DUPLICATE_KEY, off);

	/* a repeat inside the nested object, found at its own depth */
	b.len = 0;
	buf_puts(&b, "{");
	put_keys(&b, "k", 50);
	buf_puts(&b, ",\"n\":{");
	put_keys(&b, "j", 60);
	buf_puts(&b, ",");
	off = b.len;
	buf_puts(&b, "\"j59\":1}}");
	check_n(NULL, b.ptr, b.len, KILN_REJECT_DUPLICATE_KEY, off);

	/* many sibling objects with many keys each */
	b.len = 0;
	buf_puts(&b, "[");
	for (int i = 0; i < 50; i++) {
		buf_puts(&b, i ? ",{" : "{");
		put_keys(&b, "k", 40 + i);
		buf_puts(&b, "}");
	}
	buf_puts(&b, "]");
	check_n(NULL, b.ptr, b.len, KILN_REJECT_NONE, 0);
	free(b.ptr);
}

static void test_allow_duplicate_keys(void **state)
{
	kiln_json_limits lax = {.allow_duplicate_keys = true};
	struct buf b = {0};
	size_t off;

	(void)state;
	check_n(&lax, LIT("{\"a\":1,\"a\":2}"), KILN_REJECT_NONE, 0);
	check_n(&lax, LIT("{\"a\":1,\"\\u0061\":2,\"a\":3}"), KILN_REJECT_NONE, 0);
	build_object(&b, 100, 90, "k5", &off);
	check_n(&lax, b.ptr, b.len, KILN_REJECT_NONE, 0);
	/* syntax is still checked */
	check_n(&lax, LIT("{\"a\":1,\"a\":}"), KILN_REJECT_JSON_SYNTAX, 11);
	check_n(&lax, LIT("{\"a\":1,\"\\uDC00\":2}"), KILN_REJECT_INVALID_UTF8, 8);
	free(b.ptr);
}

static void nested(struct buf *b, int n, const char *open, const char *inner, const char *close)
{
	b->len = 0;
	for (int i = 0; i < n; i++)
		buf_puts(b, open);
	buf_puts(b, inner);
	for (int i = 0; i < n; i++)
		buf_puts(b, close);
}

static void test_too_deep(void **state)
{
	kiln_json_limits two = {.max_depth = 2};
	struct buf b = {0};
	kiln_json_scanner *s;
	kiln_json_token tok;
	int rc, deepest = -1;

	(void)state;
	/* default 128 */
	nested(&b, 128, "[", "", "]");
	check_n(NULL, b.ptr, b.len, KILN_REJECT_NONE, 0);
	s = new_scanner(NULL);
	kiln_json_scanner_reset(s, b.ptr, b.len);
	while ((rc = kiln_json_next(s, &tok)) > 0)
		if (tok.type == KILN_JSON_ARRAY_BEGIN)
			deepest = (int)tok.depth;
	assert_int_equal(rc, 0);
	assert_int_equal(deepest, 127);
	kiln_json_scanner_free(s);

	nested(&b, 129, "[", "", "]");
	check_n(NULL, b.ptr, b.len, KILN_REJECT_TOO_DEEP, 128);
	nested(&b, 128, "[", "1", "]");
	check_n(NULL, b.ptr, b.len, KILN_REJECT_NONE, 0);
	nested(&b, 128, "{\"a\":", "{}", "}");
	check_n(NULL, b.ptr, b.len, KILN_REJECT_TOO_DEEP, 128 * 5);
	nested(&b, 127, "{\"a\":", "{}", "}");
	check_n(NULL, b.ptr, b.len, KILN_REJECT_NONE, 0);
	nested(&b, 64, "[{\"a\":", "[[]]", "}]");
	check_n(NULL, b.ptr, b.len, KILN_REJECT_TOO_DEEP, 64 * 6);
	nested(&b, 1000, "[", "", "]");
	check_n(NULL, b.ptr, b.len, KILN_REJECT_TOO_DEEP, 128);

	/* custom limit */
	check_n(&two, LIT("[[1]]"), KILN_REJECT_NONE, 0);
	check_n(&two, LIT("[[],[],{\"a\":1}]"), KILN_REJECT_NONE, 0);
	check_n(&two, LIT("[[[1]]]"), KILN_REJECT_TOO_DEEP, 2);
	check_n(&two, LIT("{\"a\":{\"b\":{}}}"), KILN_REJECT_TOO_DEEP, 10);
	check_n(&two, LIT("[1,[2,{}]]"), KILN_REJECT_TOO_DEEP, 6);
	free(b.ptr);
}

static void test_too_large(void **state)
{
	kiln_json_limits ten = {.max_bytes = 10};
	kiln_json_scanner *s = new_scanner(&ten);
	kiln_json_token tok;
	size_t off;

	(void)state;
	check_n(&ten, LIT("[1,2,3,4]"), KILN_REJECT_NONE, 0);
	check_n(&ten, LIT("[1,2,3,45]"), KILN_REJECT_NONE, 0);
	check_n(&ten, LIT("[1,2,3,456]"), KILN_REJECT_TOO_LARGE, 10);
	check_n(&ten, LIT("  [1,2,3,4]"), KILN_REJECT_TOO_LARGE, 10);
	/* the size is checked before the syntax */
	check_n(&ten, LIT("xxxxxxxxxxxxxxxxxxxx"), KILN_REJECT_TOO_LARGE, 10);

	kiln_json_scanner_reset(s, LIT("[1,2,3,4,5,6]"));
	assert_int_equal(kiln_json_next(s, &tok), -1);
	assert_int_equal(kiln_json_next(s, &tok), -1);
	assert_int_equal(kiln_json_scanner_error(s, &off, NULL), KILN_REJECT_TOO_LARGE);
	assert_int_equal(off, 10);
	/* and the scanner recovers on the next text */
	assert_int_equal(kiln_json_check(s, LIT("{\"a\":1}")), KILN_REJECT_NONE);
	kiln_json_scanner_free(s);
}

struct scan_result {
	kiln_json_token toks[256];
	int ntoks, rc;
	kiln_reject error;
	size_t offset;
};

static void scan_all(kiln_json_scanner *s, const char *text, size_t len, struct scan_result *out)
{
	kiln_json_token tok;

	memset(out, 0, sizeof(*out));
	kiln_json_scanner_reset(s, text, len);
	while ((out->rc = kiln_json_next(s, &tok)) > 0) {
		if (out->ntoks < 256)
			out->toks[out->ntoks] = tok;
		out->ntoks++;
	}
	out->error = kiln_json_scanner_error(s, &out->offset, NULL);
}

static void assert_same_scan(const struct scan_result *a, const struct scan_result *b)
{
	assert_int_equal(a->rc, b->rc);
	assert_int_equal(a->error, b->error);
	assert_int_equal(a->offset, b->offset);
	assert_int_equal(a->ntoks, b->ntoks);
	for (int i = 0; i < a->ntoks && i < 256; i++) {
		const kiln_json_token *x = &a->toks[i], *y = &b->toks[i];

		assert_int_equal(x->type, y->type);
		assert_int_equal(x->flags, y->flags);
		assert_ptr_equal(x->ptr, y->ptr);
		assert_int_equal(x->len, y->len);
		assert_int_equal(x->offset, y->offset);
		assert_int_equal(x->depth, y->depth);
		if (x->type == KILN_JSON_KEY)
			assert_true(x->key_hash == y->key_hash);
	}
}

static void test_scanner_reuse(void **state)
{
	static const char *texts[] = {
	    "{\"a\":1,\"b\":[true,false,null],\"c\":{\"a\":\"x\"}}",
	    "{\"a\":1,\"a\":2}",
	    "[1,2,",
	    "{\"a\":{\"b\":{\"c\":{\"d\":[[[[]]]]}}}}",
	    "\"\\uD800\"",
	    "{\"a\":1}",
	    "",
	    "{\"b\":1,\"a\":2}",
	    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
	    "{\"k1\":1}",
	    "{} []",
	    "-0.5e7",
	};
	struct buf big = {0}, bigdup = {0};
	const char *all[sizeof(texts) / sizeof(texts[0]) + 2];
	size_t lens[sizeof(texts) / sizeof(texts[0]) + 2], n = 0, off;
	struct scan_result *fresh = malloc(sizeof(*fresh)), *reused = malloc(sizeof(*reused));
	kiln_json_scanner *s = new_scanner(NULL);

	(void)state;
	assert_non_null(fresh);
	assert_non_null(reused);
	build_object(&big, 200, 0, NULL, &off);
	build_object(&bigdup, 200, 150, "k149", &off);
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		all[n] = texts[i];
		lens[n++] = strlen(texts[i]);
		if (i == 3) {
			all[n] = big.ptr;
			lens[n++] = big.len;
			all[n] = bigdup.ptr;
			lens[n++] = bigdup.len;
		}
	}
	/* twice over, so texts after a large object and after errors come again */
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < n; i++) {
			kiln_json_scanner *f = new_scanner(NULL);

			scan_all(f, all[i], lens[i], fresh);
			scan_all(s, all[i], lens[i], reused);
			assert_same_scan(fresh, reused);
			assert_int_equal(kiln_json_check(s, all[i], lens[i]), fresh->error);
			kiln_json_scanner_free(f);
		}
	}
	free(fresh);
	free(reused);
	free(big.ptr);
	free(bigdup.ptr);
	kiln_json_scanner_free(s);
}

static void test_next_after_error(void **state)
{
	kiln_json_scanner *s = new_scanner(NULL);
	kiln_json_token tok;
	size_t off;

	(void)state;
	kiln_json_scanner_reset(s, LIT("[1,x,2]"));
	assert_int_equal(kiln_json_next(s, &tok), 1);
	assert_int_equal(kiln_json_next(s, &tok), 1);
	assert_int_equal(tok.type, KILN_JSON_NUMBER);
	for (int i = 0; i < 5; i++)
		assert_int_equal(kiln_json_next(s, &tok), -1);
	assert_int_equal(kiln_json_scanner_error(s, &off, NULL), KILN_REJECT_JSON_SYNTAX);
	assert_int_equal(off, 3);

	kiln_json_scanner_reset(s, LIT("{\"a\":1,\"a\":2,\"b\":3}"));
	while (kiln_json_next(s, &tok) > 0)
		;
	for (int i = 0; i < 5; i++)
		assert_int_equal(kiln_json_next(s, &tok), -1);
	assert_int_equal(kiln_json_scanner_error(s, &off, NULL), KILN_REJECT_DUPLICATE_KEY);
	assert_int_equal(off, 7);

	/* end of a valid text keeps returning 0 */
	kiln_json_scanner_reset(s, LIT("[] "));
	assert_int_equal(kiln_json_next(s, &tok), 1);
	assert_int_equal(kiln_json_next(s, &tok), 1);
	assert_int_equal(kiln_json_next(s, &tok), 0);
	assert_int_equal(kiln_json_next(s, &tok), 0);
	assert_int_equal(kiln_json_scanner_error(s, NULL, NULL), KILN_REJECT_NONE);
	kiln_json_scanner_free(s);
}

/* Decodes the first string of `text` with a buffer of `cap` bytes. */
static size_t unescape_first(const char *text, char *out, size_t cap)
{
	kiln_json_scanner *s = new_scanner(NULL);
	kiln_json_token tok = first_token(s, text, strlen(text));
	size_t n;

	assert_int_equal(tok.type, KILN_JSON_STRING);
	n = kiln_json_unescape(out, cap, &tok);
	kiln_json_scanner_free(s);
	return n;
}

static void assert_unescapes(const char *text, const char *want, size_t want_len)
{
	char out[64];
	size_t n = unescape_first(text, out, sizeof(out));

	assert_int_equal(n, want_len);
	assert_memory_equal(out, want, want_len);
	/* exactly enough room fits; one byte less does not */
	assert_int_equal(unescape_first(text, out, want_len), want_len);
	assert_memory_equal(out, want, want_len);
	if (want_len > 0)
		assert_true(unescape_first(text, out, want_len - 1) == (size_t)-1);
}

static void test_unescape(void **state)
{
	(void)state;
	assert_unescapes("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t", 8);
	assert_unescapes("\"a\\u0000b\"", "a\0b", 3);
	assert_unescapes("\"\\u0041\\u007f\"", "A\x7F", 2);
	assert_unescapes("\"\\u00e9\"", "\xC3\xA9", 2);
	assert_unescapes("\"\\u00E9\"", "\xC3\xA9", 2);
	assert_unescapes("\"\\u0080\\u07ff\"", "\xC2\x80\xDF\xBF", 4);
	assert_unescapes("\"\\u20ac\"", "\xE2\x82\xAC", 3);
	assert_unescapes("\"\\u0800\\uffff\"", "\xE0\xA0\x80\xEF\xBF\xBF", 6);
	assert_unescapes("\"\\ud83d\\ude00\"", "\xF0\x9F\x98\x80", 4);
	assert_unescapes("\"\\uD800\\uDC00\"", "\xF0\x90\x80\x80", 4);
	assert_unescapes("\"\\uDBFF\\uDFFF\"", "\xF4\x8F\xBF\xBF", 4);
	assert_unescapes("\"x\\u20acy\\n\xC3\xA9\"",
	                 "x\xE2\x82\xAC"
	                 "y\n\xC3\xA9",
	                 8);
	assert_unescapes("\"\\\\u0041\"", "\\u0041", 6);
	/* unescaped tokens copy as is */
	assert_unescapes("\"plain text\"", "plain text", 10);
	assert_unescapes("\"caf\xC3\xA9\"", "caf\xC3\xA9", 5);
	assert_unescapes("\"\"", "", 0);
}

static void test_unescape_cap(void **state)
{
	char out[16];

	(void)state;
	/* the multibyte output of one escape either fits whole or not at all */
	assert_true(unescape_first("\"ab\\u20ac\"", out, 4) == (size_t)-1);
	assert_int_equal(unescape_first("\"ab\\u20ac\"", out, 5), 5);
	assert_true(unescape_first("\"\\ud83d\\ude00\"", out, 3) == (size_t)-1);
	assert_true(unescape_first("\"\\n\"", out, 0) == (size_t)-1);
	assert_true(unescape_first("\"abc\"", out, 2) == (size_t)-1);
	assert_int_equal(unescape_first("\"\"", out, 0), 0);
}

static void test_utf8_count(void **state)
{
	(void)state;
	assert_int_equal(kiln_utf8_count("", 0), 0);
	assert_int_equal(kiln_utf8_count(LIT("hello")), 5);
	assert_int_equal(kiln_utf8_count(LIT("caf\xC3\xA9")), 4);
	assert_int_equal(kiln_utf8_count(LIT("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z")), 5);
	assert_int_equal(kiln_utf8_count(LIT("\xEF\xBF\xBF\xF4\x8F\xBF\xBF")), 2);
	/* only s[0..len) is read */
	assert_int_equal(kiln_utf8_count("\xC3\xA9\xC3\xA9", 2), 1);
}

/* kiln_buf_put_json_text: as kiln_buf_put_json_string for UTF-8, each byte
 * outside a valid sequence as \ufffd, and always valid JSON. */
static void expect_text(const char *in, size_t n, const char *want)
{
	kiln_json_scanner *s = new_scanner(NULL);
	kiln_buf b = KILN_BUF_INIT(0);

	assert_int_equal(kiln_buf_put_json_text(&b, in, n), 0);
	assert_int_equal(kiln_buf_putc(&b, '\0'), 0);
	assert_string_equal(b.ptr, want);
	assert_int_equal(kiln_json_check(s, b.ptr, strlen(b.ptr)), KILN_REJECT_NONE);
	kiln_buf_free(&b);
	kiln_json_scanner_free(s);
}

static void test_put_json_text(void **state)
{
	(void)state;
	expect_text(LIT(""), "\"\"");
	expect_text(LIT("caf\xC3\xA9 \"q\" \\ \t\x01"), "\"caf\xC3\xA9 \\\"q\\\" \\\\ \\t\\u0001\"");
	expect_text(LIT("a\xFF"
	                "b"),
	            "\"a\\ufffdb\"");
	expect_text(LIT("\xC3"), "\"\\ufffd\"");              /* cut short at the end */
	expect_text(LIT("\xE2\x82x"), "\"\\ufffd\\ufffdx\""); /* cut short, then a byte that leads nothing */
	expect_text(LIT("\xC0\xAF"), "\"\\ufffd\\ufffd\"");   /* overlong */
	expect_text(LIT("\xED\xA0\x80\""), "\"\\ufffd\\ufffd\\ufffd\\\"\""); /* a surrogate, then a quote */
	expect_text(LIT("\xF0\x9F\x98\x80\xF5"), "\"\xF0\x9F\x98\x80\\ufffd\"");
}

static void test_check_wrapper(void **state)
{
	kiln_json_scanner *s = new_scanner(NULL);
	size_t off;

	(void)state;
	assert_int_equal(kiln_json_check(s, LIT("{\"a\":[1,2,{\"b\":null}]}")), KILN_REJECT_NONE);
	assert_int_equal(kiln_json_check(s, LIT("  true ")), KILN_REJECT_NONE);
	assert_int_equal(kiln_json_check(s, LIT("\"s\"")), KILN_REJECT_NONE);
	assert_int_equal(kiln_json_check(s, LIT("null")), KILN_REJECT_NONE);
	assert_int_equal(kiln_json_check(s, LIT("-1.25E+10")), KILN_REJECT_NONE);
	assert_int_equal(kiln_json_check(s, LIT("[1,]")), KILN_REJECT_JSON_SYNTAX);
	assert_int_equal(kiln_json_scanner_error(s, &off, NULL), KILN_REJECT_JSON_SYNTAX);
	assert_int_equal(off, 3);
	assert_int_equal(kiln_json_check(s, LIT("\"\xC0\x80\"")), KILN_REJECT_INVALID_UTF8);
	assert_int_equal(kiln_json_check(s, LIT("{\"a\":1,\"a\":1}")), KILN_REJECT_DUPLICATE_KEY);
	/* only text[0..len) is read */
	assert_int_equal(kiln_json_check(s, "[1] garbage", 3), KILN_REJECT_NONE);
	assert_int_equal(kiln_json_check(s, "123", 2), KILN_REJECT_NONE);
	assert_int_equal(kiln_json_check(s, "truex", 4), KILN_REJECT_NONE);
	assert_int_equal(kiln_json_check(s, "\"ab\"", 3), KILN_REJECT_JSON_SYNTAX);
	assert_int_equal(kiln_json_scanner_error(s, NULL, NULL), KILN_REJECT_JSON_SYNTAX);
	kiln_json_scanner_free(s);
}

/* One string of `len` content bytes 'a', with `special` (one to four bytes)
 * written at index `at`, wrapped in quotes (and, as_key, in an object).
 * Returns the text length; the string's content starts at *out_content. */
static size_t string_with(char *text, size_t len, size_t at, const char *special, size_t slen, bool as_key,
                          size_t *out_content)
{
	size_t n = 0;

	if (as_key)
		text[n++] = '{';
	text[n++] = '"';
	*out_content = n;
	memset(text + n, 'a', len);
	memcpy(text + n + at, special, slen);
	n += len;
	text[n++] = '"';
	if (as_key) {
		memcpy(text + n, ":1}", 3);
		n += 3;
	}
	return n;
}

static void test_string_fast_path_boundaries(void **state)
{
	static const size_t lens[] = {1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49, 64, 65};
	kiln_json_scanner *s = new_scanner(NULL);
	char text[128];

	(void)state;
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		size_t len = lens[li];

		for (int as_key = 0; as_key <= 1; as_key++) {
			size_t c, n;
			kiln_json_token tok;

			/* nothing special: one token of the full length */
			n = string_with(text, len, 0, "a", 1, as_key, &c);
			tok = first_token(s, text, n);
			if (as_key)
				assert_int_equal(kiln_json_next(s, &tok), 1);
			assert_int_equal(tok.len, len);
			assert_int_equal(tok.flags, KILN_JSON_ASCII);
			assert_int_equal(kiln_json_check(s, text, n), KILN_REJECT_NONE);

			for (size_t at = 0; at < len; at++) {
				size_t off;

				/* a quote ends the string there */
				n = string_with(text, len, at, "\"", 1, as_key, &c);
				kiln_json_scanner_reset(s, text, n);
				if (as_key) {
					/* a key not followed by ':' */
					assert_int_equal(kiln_json_next(s, &tok), 1);
					assert_int_equal(kiln_json_next(s, &tok), -1);
				} else {
					assert_int_equal(kiln_json_next(s, &tok), 1);
					assert_int_equal(tok.len, at);
					assert_ptr_equal(tok.ptr, text + c);
				}
				assert_int_equal(kiln_json_check(s, text, n), KILN_REJECT_JSON_SYNTAX);
				kiln_json_scanner_error(s, &off, NULL);
				assert_int_equal(off, c + at + 1);

				/* a backslash: bad escape "\a", or at the end an escaped quote
				 * leaving the string unterminated */
				n = string_with(text, len, at, "\\", 1, as_key, &c);
				assert_int_equal(kiln_json_check(s, text, n), KILN_REJECT_JSON_SYNTAX);
				kiln_json_scanner_error(s, &off, NULL);
				if (at + 1 < len)
					assert_int_equal(off, c + at);
				else
					assert_int_equal(off, c - 1);

				/* a valid escape */
				if (at + 1 < len) {
					n = string_with(text, len, at, "\\n", 2, as_key, &c);
					tok = first_token(s, text, n);
					if (as_key)
						assert_int_equal(kiln_json_next(s, &tok), 1);
					assert_int_equal(tok.len, len);
					assert_int_equal(tok.flags, KILN_JSON_ASCII | KILN_JSON_ESCAPED);
					assert_int_equal(kiln_json_check(s, text, n), KILN_REJECT_NONE);
				}

				/* control characters */
				n = string_with(text, len, at, "\x01", 1, as_key, &c);
				assert_int_equal(kiln_json_check(s, text, n), KILN_REJECT_JSON_SYNTAX);
				kiln_json_scanner_error(s, &off, NULL);
				assert_int_equal(off, c + at);
				n = string_with(text, len, at, "\x1F", 1, as_key, &c);
				assert_int_equal(kiln_json_check(s, text, n), KILN_REJECT_JSON_SYNTAX);
				kiln_json_scanner_error(s, &off, NULL);
				assert_int_equal(off, c + at);

				/* space and DEL are plain */
				n = string_with(text, len, at, " ", 1, as_key, &c);
				assert_int_equal(kiln_json_check(s, text, n), KILN_REJECT_NONE);
				n = string_with(text, len, at, "\x7F", 1, as_key, &c);
				assert_int_equal(kiln_json_check(s, text, n), KILN_REJECT_NONE);

				/* non-ASCII: invalid single bytes */
				n = string_with(text, len, at, "\xFF", 1, as_key, &c);
				assert_int_equal(kiln_json_check(s, text, n), KILN_REJECT_INVALID_UTF8);
				kiln_json_scanner_error(s, &off, NULL);
				assert_int_equal(off, c + at);
				n = string_with(text, len, at, "\x80", 1, as_key, &c);
				assert_int_equal(kiln_json_check(s, text, n), KILN_REJECT_INVALID_UTF8);
				kiln_json_scanner_error(s, &off, NULL);
				assert_int_equal(off, c + at);

				/* non-ASCII: valid sequences that fit */
				for (size_t w = 2; w <= 4 && at + w <= len; w++) {
					static const char *seq[] = {NULL, NULL, "\xC3\xA9", "\xE2\x82\xAC",
					                            "\xF0\x9F\x98\x80"};

					n = string_with(text, len, at, seq[w], w, as_key, &c);
					tok = first_token(s, text, n);
					if (as_key)
						assert_int_equal(kiln_json_next(s, &tok), 1);
					assert_int_equal(tok.len, len);
					assert_int_equal(tok.flags, 0);
					assert_int_equal(kiln_json_check(s, text, n), KILN_REJECT_NONE);
				}

				/* a multibyte sequence cut by the closing quote */
				if (at + 1 == len) {
					n = string_with(text, len, at, "\xE2", 1, as_key, &c);
					assert_int_equal(kiln_json_check(s, text, n),
					                 KILN_REJECT_INVALID_UTF8);
					kiln_json_scanner_error(s, &off, NULL);
					assert_int_equal(off, c + at);
				}
			}
		}
	}
	kiln_json_scanner_free(s);
}

static void test_lookup(void **state)
{
	const char *text = "{\"name\":\"ds\",\"contract\":{\"id\":\"c\",\"version\":\"1.2.0\"},"
	                   "\"list\":[{\"version\":\"no\"}],\"split\":{\"ratios\":{\"train\":0.8}},\"n\":3}";
	kiln_json_scanner *s = new_scanner(NULL);
	kiln_json_token t;

	(void)state;
	assert_int_equal(kiln_json_lookup(s, text, strlen(text), "contract.version", &t), 1);
	assert_int_equal(t.type, KILN_JSON_STRING);
	assert_int_equal(t.len, 5);
	assert_memory_equal(t.ptr, "1.2.0", 5);
	assert_int_equal(kiln_json_lookup(s, text, strlen(text), "split.ratios.train", &t), 1);
	assert_int_equal(t.type, KILN_JSON_NUMBER);
	assert_int_equal(kiln_json_lookup(s, text, strlen(text), "n", &t), 1);
	assert_int_equal(kiln_json_lookup(s, text, strlen(text), "contract", &t), 1);
	assert_int_equal(t.type, KILN_JSON_OBJECT_BEGIN);
	assert_int_equal(kiln_json_lookup(s, text, strlen(text), "version", &t), 0); /* not at the top */
	assert_int_equal(kiln_json_lookup(s, text, strlen(text), "list.version", &t),
	                 0); /* arrays are not entered */
	assert_int_equal(kiln_json_lookup(s, text, strlen(text), "contract.missing", &t), 0);
	assert_int_equal(kiln_json_lookup(s, "{\"a\":", 5, "a", &t), -1);
	assert_int_equal(kiln_json_lookup(s, text, strlen(text), "", &t), -1);
	kiln_json_scanner_free(s);
}

static void test_large_input(void **state)
{
	struct buf b = {0};
	kiln_json_scanner *s = new_scanner(NULL);
	kiln_json_token tok, dup;
	size_t off, keys = 0;
	int rc;

	(void)state;
	buf_puts(&b, "{");
	put_keys(&b, "k", 10000);
	buf_puts(&b, "}");
	assert_int_equal(kiln_json_check(s, b.ptr, b.len), KILN_REJECT_NONE);
	kiln_json_scanner_reset(s, b.ptr, b.len);
	while ((rc = kiln_json_next(s, &tok)) > 0)
		keys += tok.type == KILN_JSON_KEY;
	assert_int_equal(rc, 0);
	assert_int_equal(keys, 10000);

	/* the same with one duplicate at the end */
	b.len--;
	buf_puts(&b, ",");
	off = b.len;
	buf_puts(&b, "\"k4321\":0}");
	assert_int_equal(kiln_json_check(s, b.ptr, b.len), KILN_REJECT_DUPLICATE_KEY);
	memset(&dup, 0, sizeof(dup));
	assert_int_equal(kiln_json_scanner_error(s, NULL, &dup), KILN_REJECT_DUPLICATE_KEY);
	assert_int_equal(dup.offset, off);
	assert_int_equal(dup.len, 5);
	assert_memory_equal(dup.ptr, "k4321", 5);
	check_n(NULL, b.ptr, b.len, KILN_REJECT_DUPLICATE_KEY, off);

	/* and a fresh, smaller text on the same scanner afterwards */
	assert_int_equal(kiln_json_check(s, LIT("{\"k1\":1,\"k2\":2}")), KILN_REJECT_NONE);
	assert_int_equal(kiln_json_check(s, LIT("{\"k1\":1,\"k1\":2}")), KILN_REJECT_DUPLICATE_KEY);

	/* 10,000 keys in an array of small objects: no duplicates */
	b.len = 0;
	buf_puts(&b, "[");
	for (int i = 0; i < 1000; i++) {
		buf_puts(&b, i ? ",{" : "{");
		put_keys(&b, "k", 10);
		buf_puts(&b, "}");
	}
	buf_puts(&b, "]");
	assert_int_equal(kiln_json_check(s, b.ptr, b.len), KILN_REJECT_NONE);
	free(b.ptr);
	kiln_json_scanner_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nested_document_tokens),
	    cmocka_unit_test(test_number_flags),
	    cmocka_unit_test(test_string_flags),
	    cmocka_unit_test(test_key_hash),
	    cmocka_unit_test(test_syntax_errors),
	    cmocka_unit_test(test_invalid_utf8),
	    cmocka_unit_test(test_valid_utf8),
	    cmocka_unit_test(test_duplicate_key_simple),
	    cmocka_unit_test(test_duplicate_key_large_object),
	    cmocka_unit_test(test_duplicate_key_table_growth),
	    cmocka_unit_test(test_duplicate_key_hash_flooding),
	    cmocka_unit_test(test_duplicate_key_scopes),
	    cmocka_unit_test(test_allow_duplicate_keys),
	    cmocka_unit_test(test_too_deep),
	    cmocka_unit_test(test_too_large),
	    cmocka_unit_test(test_scanner_reuse),
	    cmocka_unit_test(test_next_after_error),
	    cmocka_unit_test(test_unescape),
	    cmocka_unit_test(test_unescape_cap),
	    cmocka_unit_test(test_utf8_count),
	    cmocka_unit_test(test_check_wrapper),
	    cmocka_unit_test(test_put_json_text),
	    cmocka_unit_test(test_string_fast_path_boundaries),
	    cmocka_unit_test(test_large_input),
	    cmocka_unit_test(test_lookup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
