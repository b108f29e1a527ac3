/* Strict RFC 8259 JSON scanner: one pass over one JSON text, one token per
 * call, no tree and no allocation per token. It validates UTF-8 and escape
 * sequences (surrogate pairs included), bounds nesting depth with an
 * explicit bit stack, and can report duplicate keys within an object.
 * Tokens point into the caller's buffer, so later stages can read chosen
 * values and rewrite chosen strings while copying the rest verbatim. */
#ifndef KILN_CORE_JSON_H
#define KILN_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/reject.h"

typedef enum kiln_json_type {
	KILN_JSON_NONE = 0,
	KILN_JSON_OBJECT_BEGIN,
	KILN_JSON_OBJECT_END,
	KILN_JSON_ARRAY_BEGIN,
	KILN_JSON_ARRAY_END,
	KILN_JSON_KEY,
	KILN_JSON_STRING,
	KILN_JSON_NUMBER,
	KILN_JSON_TRUE,
	KILN_JSON_FALSE,
	KILN_JSON_NULL,
} kiln_json_type;

/* Token flags. */
#define KILN_JSON_ESCAPED 0x1u /* string/key holds at least one backslash escape */
#define KILN_JSON_INTEGER 0x2u /* number has neither fraction nor exponent */
#define KILN_JSON_ASCII   0x4u /* string/key holds only ASCII bytes (as written) */

typedef struct kiln_json_token {
	kiln_json_type type;
	uint32_t flags;
	/* Strings and keys: the bytes between the quotes, escapes not decoded.
	 * Numbers and literals: the token's text. Containers: the bracket. */
	const char *ptr;
	size_t len;
	size_t offset;     /* byte offset of the token's first character (a quote for strings) */
	uint32_t depth;    /* containers open around this token (0 = top level) */
	uint64_t key_hash; /* KILN_JSON_KEY only: kiln_json_hash() of the decoded key */
} kiln_json_token;

typedef struct kiln_json_limits {
	uint32_t max_depth;        /* deepest nesting allowed; 0 = default 128 */
	size_t max_bytes;          /* largest text accepted; 0 = unlimited */
	bool allow_duplicate_keys; /* true: RFC 8259 syntax only, no duplicate check */
} kiln_json_limits;

#define KILN_JSON_DEFAULT_DEPTH 128u

typedef struct kiln_json_scanner kiln_json_scanner;

/* A scanner is reused record after record; it owns its stacks and key index.
 * `limits` may be NULL for the defaults. Returns NULL when out of memory. */
kiln_json_scanner *kiln_json_scanner_new(const kiln_json_limits *limits);
void kiln_json_scanner_free(kiln_json_scanner *scanner);

/* Starts scanning text[0..len). The text is borrowed until the next reset. */
void kiln_json_scanner_reset(kiln_json_scanner *scanner, const char *text, size_t len);

/* Next token into *out. Returns 1 for a token, 0 when the whole text has been
 * scanned and was valid, or -1 on the first error (then see
 * kiln_json_scanner_error(); further calls keep returning -1). */
int kiln_json_next(kiln_json_scanner *scanner, kiln_json_token *out);

/* The error after kiln_json_next() returned -1: its code and the byte offset
 * where it was found. For KILN_REJECT_DUPLICATE_KEY, *out_token is the
 * second occurrence of the key (may pass NULL). */
kiln_reject kiln_json_scanner_error(const kiln_json_scanner *scanner, size_t *out_offset,
                                    kiln_json_token *out_token);

/* Hash-table slots the duplicate-key check has visited since the scanner
 * was made: about one per key of a large object whatever the keys are
 * (the table's hash is keyed per scanner), which tests check with keys
 * crafted to collide under kiln_json_hash. */
uint64_t kiln_json_scanner_probes(const kiln_json_scanner *scanner);

/* Scans a whole text and returns KILN_REJECT_NONE or the first error. */
kiln_reject kiln_json_check(kiln_json_scanner *scanner, const char *text, size_t len);

/* Decodes a string or key token's escapes into out[0..cap). Returns the
 * decoded length, or (size_t)-1 when it does not fit. The token must come
 * from the scanner (escapes already validated). Decoded length never exceeds
 * the raw length, so cap >= token->len always suffices. */
size_t kiln_json_unescape(char *out, size_t cap, const kiln_json_token *token);

/* The 64-bit hash used for keys (of the decoded bytes); in-memory only, not
 * a stored format. Inline: it runs for every key of every record. */
static inline uint64_t kiln_json_load64_(const char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static inline uint32_t kiln_json_load32_(const char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static inline uint64_t kiln_json_mix_(uint64_t a, uint64_t b)
{
	__uint128_t m = (__uint128_t)(a ^ 0xa0761d6478bd642full) * (b ^ 0xe7037ed1a0b428dbull);
	return (uint64_t)m ^ (uint64_t)(m >> 64);
}

/* Reads only s[0..len): overlapping word loads, no byte loop for short keys. */
static inline uint64_t kiln_json_hash(const char *s, size_t len)
{
	uint64_t a, b, seed = 0x8ebc6af09c88c6e3ull ^ len;

	if (len >= 8) {
		while (len > 16) {
			seed = kiln_json_mix_(kiln_json_load64_(s) ^ seed,
			                      kiln_json_load64_(s + 8) ^ 0x589965cc75374cc3ull);
			s += 16;
			len -= 16;
		}
		/* 1..16 bytes left; after the loop s[-16..0) is key too */
		a = kiln_json_load64_(len >= 8 ? s : s + len - 8);
		b = kiln_json_load64_(s + len - 8);
	} else if (len >= 4) {
		a = kiln_json_load32_(s);
		b = kiln_json_load32_(s + len - 4);
	} else if (len > 0) {
		a = (uint64_t)(unsigned char)s[0] << 16 | (uint64_t)(unsigned char)s[len >> 1] << 8 |
		    (unsigned char)s[len - 1];
		b = 0;
	} else {
		a = b = 0;
	}
	return kiln_json_mix_(a ^ 0x1d8e4e27c47d124full, b ^ seed);
}

/* s[0..n) == t[0..n), inlined for the short keys and values of the hot path. */
static inline bool kiln_json_bytes_equal(const char *s, const char *t, size_t n)
{
	if (n >= 8) {
		for (; n > 8; s += 8, t += 8, n -= 8)
			if (kiln_json_load64_(s) != kiln_json_load64_(t))
				return false;
		return kiln_json_load64_(s + n - 8) == kiln_json_load64_(t + n - 8);
	}
	if (n >= 4)
		return kiln_json_load32_(s) == kiln_json_load32_(t) &&
		       kiln_json_load32_(s + n - 4) == kiln_json_load32_(t + n - 4);
	for (size_t i = 0; i < n; i++)
		if (s[i] != t[i])
			return false;
	return true;
}

/* Finds the value at a dotted object path ("contract.version") in a JSON
 * text: 1 with the value's first token in *out (a container's opening
 * bracket for objects and arrays), 0 when absent, -1 when the text is not
 * valid JSON or the path is malformed. Keys are compared as written. */
int kiln_json_lookup(kiln_json_scanner *scanner, const char *text, size_t len, const char *path,
                     kiln_json_token *out);

/* true when s[0..len) is valid UTF-8 (the scanner's rules). */
bool kiln_utf8_valid(const char *s, size_t len);

/* Number of Unicode code points in valid UTF-8 s[0..len). */
size_t kiln_utf8_count(const char *s, size_t len);

#endif
