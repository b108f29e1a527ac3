/* Unit tests for the token membership filters (src/shard/filter.c): no
 * false negative over 100,000 tokens, a measured false-positive rate under
 * 1e-4 over 1,000,000 other tokens, the tokens a curated line holds (in any
 * field, inside free text, the token part of a keep-domain value), the
 * digests a curate worker lists ahead (kiln_filter_collect, added later in
 * runs with kiln_filter_add_digests) give the filter a scan of the lines
 * gives, byte for byte, decoding refuses cut, grown or altered bytes, and
 * the bytes depend on the distinct tokens only (not their order or
 * repeats); the scanner finds what the token grammar says, byte by byte. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "shard/filter.h"

/* A token text "p1_" + 26 base32 characters made from i (deterministic). */
static size_t make_token(char out[40], uint64_t i, uint64_t salt)
{
	static const char a[] = "abcdefghijklmnopqrstuvwxyz234567";
	uint64_t x = i * 0x9E3779B97F4A7C15ull ^ salt, y = x * 0xD6E8FEB86659FD93ull + i;

	memcpy(out, "p1_", 3);
	for (int k = 0; k < 26; k++) {
		out[3 + k] = a[(k < 13 ? x >> (k * 5) : y >> ((k - 13) * 5)) & 31];
	}
	out[29] = '\0';
	return 29;
}

static void no_false_negative_and_rate(void **state)
{
	kiln_filter_set set = {0};
	kiln_buf b = KILN_BUF_INIT(0);
	kiln_filter f;
	char t[40];
	size_t fp = 0, probes = 1000000;

	(void)state;
	for (uint64_t i = 0; i < 100000; i++) {
		size_t n = make_token(t, i, 0);

		assert_int_equal(kiln_filter_add(&set, t, n), 0);
		if (i % 3 == 0) /* repeats count once */
			assert_int_equal(kiln_filter_add(&set, t, n), 0);
	}
	assert_int_equal(kiln_filter_encode(&b, &set), 0);
	assert_int_equal(kiln_filter_decode(&f, b.ptr, b.len, "t"), 0);
	assert_int_equal(f.tokens, 100000);
	for (uint64_t i = 0; i < 100000; i++) {
		size_t n = make_token(t, i, 0);

		assert_true(kiln_filter_may_hold(&f, t, n));
	}
	for (uint64_t i = 0; i < probes; i++) {
		size_t n = make_token(t, i, 0x5bd1e9955bd1e995ull);

		fp += kiln_filter_may_hold(&f, t, n);
	}
	printf("# %zu bytes for 100000 tokens, k=%u, false positives %zu of %zu\n", b.len, f.k, fp, probes);
	assert_true(fp * 10000 < probes); /* rate < 1e-4 */
	kiln_filter_set_free(&set);
	kiln_buf_free(&b);
}

static void scan_finds_tokens(void **state)
{
	const char *line =
	    "{\"id\":\"p1_aaaaaaaaaaaaaaaaaaaaaaaaaa\",\"email\":\"p12_bbbbbbbbbbbbbbbbbbbbbbbbbb@example."
	    "com\","
	    "\"note\":\"call p1_cccccccccccccccccccccccccc now\",\"x_y\":\"p_dddddddddddddddddddddddddd\"}";
	kiln_filter_set set = {0};
	kiln_buf b = KILN_BUF_INIT(0);
	kiln_filter f;

	(void)state;
	assert_int_equal(kiln_filter_scan(&set, line, strlen(line)), 0);
	assert_int_equal(kiln_filter_encode(&b, &set), 0);
	assert_int_equal(kiln_filter_decode(&f, b.ptr, b.len, "t"), 0);
	assert_int_equal(f.tokens, 3);
	assert_true(kiln_filter_may_hold(&f, "p1_aaaaaaaaaaaaaaaaaaaaaaaaaa", 29));
	assert_true(kiln_filter_may_hold(&f, "p12_bbbbbbbbbbbbbbbbbbbbbbbbbb", 30));
	assert_true(kiln_filter_may_hold(&f, "p1_cccccccccccccccccccccccccc", 29));
	assert_false(kiln_filter_may_hold(&f, "p1_eeeeeeeeeeeeeeeeeeeeeeeeee", 29));
	/* the token part of needles */
	assert_int_equal(kiln_filter_token_part("p12_bbbbbbbbbbbbbbbbbbbbbbbbbb@example.com", 42), 30);
	assert_int_equal(kiln_filter_token_part("p1_aaaaaaaaaaaaaaaaaaaaaaaaaa", 29), 29);
	assert_int_equal(kiln_filter_token_part("p1_aaaaaaaaaaaaaaaaaaaaaaaaa", 28), 0);
	assert_int_equal(kiln_filter_token_part("x1_aaaaaaaaaaaaaaaaaaaaaaaaaa", 29), 0);
	assert_int_equal(kiln_filter_token_part("p_aaaaaaaaaaaaaaaaaaaaaaaaaaa", 29), 0);
	kiln_filter_set_free(&set);
	kiln_buf_free(&b);
}

/* The token grammar read one byte at a time, independently of filter.c's
 * scanner: the start of each token of text[0..len) in order ("p", 1 to 10
 * digits, "_", 26 of [a-z2-7]; the scanner finds one per '_'). */
static size_t reference_tokens(const char *text, size_t len, size_t starts[], size_t lens[])
{
	size_t n = 0;

	for (size_t u = 0; u < len; u++) {
		size_t d = u, k;

		if (text[u] != '_' || len - u < 27)
			continue;
		while (d > 0 && u - d < 10 && text[d - 1] >= '0' && text[d - 1] <= '9')
			d--;
		if (d == u || d == 0 || text[d - 1] != 'p')
			continue;
		for (k = u + 1; k < u + 27; k++) {
			unsigned char c = (unsigned char)text[k];

			if (!((c >= 'a' && c <= 'z') || (c >= '2' && c <= '7')))
				break;
		}
		if (k == u + 27) {
			starts[n] = d - 1;
			lens[n++] = u + 27 - (d - 1);
		}
	}
	return n;
}

/* Tokens with each of their 26 characters (and the byte before and after
 * them) replaced by every byte value, in texts of every length from a
 * token's up, next to digits and other tokens: the scanner lists exactly
 * the tokens the reference finds, with the digests of their texts. */
static void scan_matches_grammar(void **state)
{
	char text[96];
	size_t starts[8], lens[8];
	kiln_filter_set list = {0}, want = {0};

	(void)state;
	for (int pos = -1; pos <= 27; pos++)
		for (int byte = 0; byte < 256; byte++)
			for (size_t len = 28; len <= 40; len += 3) {
				size_t n;

				memset(text, '7', sizeof(text));
				memcpy(text, "xp12_", 5);
				for (int k = 0; k < 26; k++)
					text[5 + k] = "az27bcqrs"[(k + byte) % 9];
				if (pos >= 0)
					text[4 + pos] = (char)byte;
				kiln_filter_set_clear(&list);
				kiln_filter_set_clear(&want);
				assert_int_equal(kiln_filter_collect(&list, text, len), 0);
				n = reference_tokens(text, len, starts, lens);
				for (size_t i = 0; i < n; i++)
					assert_int_equal(
					    kiln_filter_collect(&want, text + starts[i], lens[i]), 0);
				assert_int_equal(list.count, n);
				assert_int_equal(want.count, n);
				if (n)
					assert_memory_equal(list.v, want.v, n * sizeof(list.v[0]));
			}
	kiln_filter_set_free(&list);
	kiln_filter_set_free(&want);
}

/* 3000 lines of tokens (repeats among them, tokens at a line's start and
 * end), scanned as one text and listed per line then added in uneven runs:
 * the same filter bytes. */
static void listed_digests_match_scan(void **state)
{
	kiln_filter_set scanned = {0}, list = {0}, added = {0};
	kiln_buf text = KILN_BUF_INIT(0), a = KILN_BUF_INIT(0), b = KILN_BUF_INIT(0);
	size_t ends[3000], lines = 3000;
	char t[40], u[40];

	(void)state;
	for (size_t i = 0; i < lines; i++) {
		size_t start = text.len;

		make_token(t, i % 700, 1); /* repeats: compaction drops them */
		make_token(u, i, 2);
		assert_int_equal(kiln_buf_printf(&text, "%s{\"id\":\"%s\",\"n\":\"x %s y\"}%s\n",
		                                 i % 3 ? "" : u, t, u, i % 5 ? "" : t),
		                 0);
		/* a worker lists the line's digests (without its newline) */
		assert_int_equal(kiln_filter_collect(&list, text.ptr + start, text.len - start - 1), 0);
		ends[i] = list.count;
	}
	assert_int_equal(kiln_filter_scan(&scanned, text.ptr, text.len), 0);
	for (size_t i = 0, run = 1; i < lines; run = run * 3 % 17 + 1) {
		size_t last = i + run < lines ? i + run : lines, first = i ? ends[i - 1] : 0;

		assert_int_equal(kiln_filter_add_digests(&added, &list, first, ends[last - 1] - first), 0);
		i = last;
	}
	/* added in bulk: no sort on the way (the delivery turn only copies) */
	assert_int_equal(added.count, list.count);
	assert_int_equal(kiln_filter_encode(&a, &scanned), 0);
	assert_int_equal(kiln_filter_encode(&b, &added), 0);
	assert_true(list.count > added.count); /* the encode dropped the repeats */
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.ptr, b.ptr, a.len);
	kiln_filter_set_free(&scanned);
	kiln_filter_set_free(&list);
	kiln_filter_set_free(&added);
	kiln_buf_free(&text);
	kiln_buf_free(&a);
	kiln_buf_free(&b);
}

/* Digests added in bulk past 2^20 (16 MiB) are compacted as the set fills:
 * 4096 distinct tokens added 300 times over (1,228,800 digests) stay in a
 * set of 2^20 at most, and encode as the 4096 once. */
static void bulk_adds_compact_past_the_bound(void **state)
{
	kiln_filter_set list = {0}, once = {0}, added = {0};
	kiln_buf a = KILN_BUF_INIT(0), b = KILN_BUF_INIT(0);
	char t[40];

	(void)state;
	for (uint64_t i = 0; i < 4096; i++) {
		size_t n = make_token(t, i, 3);

		assert_int_equal(kiln_filter_collect(&list, t, n), 0);
	}
	assert_int_equal(list.count, 4096);
	assert_int_equal(kiln_filter_add_digests(&once, &list, 0, list.count), 0);
	for (int r = 0; r < 300; r++)
		assert_int_equal(kiln_filter_add_digests(&added, &list, 0, list.count), 0);
	assert_true(added.cap <= (size_t)1 << 20);
	assert_true(added.count < 300 * list.count);
	assert_int_equal(kiln_filter_encode(&a, &once), 0);
	assert_int_equal(kiln_filter_encode(&b, &added), 0);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.ptr, b.ptr, a.len);
	kiln_filter_set_free(&list);
	kiln_filter_set_free(&once);
	kiln_filter_set_free(&added);
	kiln_buf_free(&a);
	kiln_buf_free(&b);
}

static void empty_and_corrupt(void **state)
{
	kiln_filter_set set = {0};
	kiln_buf b = KILN_BUF_INIT(0);
	kiln_filter f;
	char t[40];

	(void)state;
	assert_int_equal(kiln_filter_encode(&b, &set), 0); /* no token: nothing may be held */
	assert_int_equal(kiln_filter_decode(&f, b.ptr, b.len, "t"), 0);
	assert_false(kiln_filter_may_hold(&f, "p1_aaaaaaaaaaaaaaaaaaaaaaaaaa", 29));
	kiln_buf_reset(&b);
	for (uint64_t i = 0; i < 100; i++) {
		size_t n = make_token(t, i, 0);

		assert_int_equal(kiln_filter_add(&set, t, n), 0);
	}
	assert_int_equal(kiln_filter_encode(&b, &set), 0);
	assert_int_equal(kiln_filter_decode(&f, b.ptr, b.len, "t"), 0);
	assert_int_equal(kiln_filter_decode(&f, b.ptr, b.len - 1, "t"), KILN_EINVALID); /* cut */
	assert_int_equal(kiln_filter_decode(&f, b.ptr, 10, "t"), KILN_EINVALID);
	assert_int_equal(kiln_buf_put(&b, "\0\0\0\0\0\0\0\0", 8), 0); /* grown */
	assert_int_equal(kiln_filter_decode(&f, b.ptr, b.len, "t"), KILN_EINVALID);
	b.len -= 8;
	b.ptr[0] = 'K'; /* magic */
	assert_int_equal(kiln_filter_decode(&f, b.ptr, b.len, "t"), KILN_EINVALID);
	b.ptr[0] = 'k';
	b.ptr[24] = 0; /* k = 0 */
	assert_int_equal(kiln_filter_decode(&f, b.ptr, b.len, "t"), KILN_EINVALID);
	b.ptr[24] = 33; /* k over the bound */
	assert_int_equal(kiln_filter_decode(&f, b.ptr, b.len, "t"), KILN_EINVALID);
	b.ptr[24] = 5;
	b.ptr[36] ^= 64; /* m no longer matches the length */
	assert_int_equal(kiln_filter_decode(&f, b.ptr, b.len, "t"), KILN_EINVALID);
	b.ptr[36] ^= 64;
	b.ptr[22] = 1; /* reserved */
	assert_int_equal(kiln_filter_decode(&f, b.ptr, b.len, "t"), KILN_EINVALID);
	b.ptr[22] = 0;
	assert_int_equal(kiln_filter_decode(&f, b.ptr, b.len, "t"), 0);
	kiln_filter_set_free(&set);
	kiln_buf_free(&b);
}

/* The filter's bytes depend on the distinct tokens only: the same 20,000
 * tokens added once each in order, or in a scrambled order with every token
 * repeated up to 40 times (runs of one digest across the set's growth and
 * each compaction's sort), encode the same. A sort that left repeats apart
 * or lost one shows here as a different token count or bit array. */
static void order_and_repeats_do_not_matter(void **state)
{
	kiln_filter_set once = {0}, many = {0};
	kiln_buf a = KILN_BUF_INIT(0), b = KILN_BUF_INIT(0);
	kiln_filter f;
	char t[40];
	const uint64_t distinct = 20000;

	(void)state;
	for (uint64_t i = 0; i < distinct; i++) {
		size_t n = make_token(t, i, 7);
		assert_int_equal(kiln_filter_add(&once, t, n), 0);
	}
	for (uint64_t r = 0; r < 400000; r++) {
		uint64_t i =
		    (r * 7919 + (r >> 3) * 104729) % distinct; /* scrambled, most tokens many times */
		size_t n = make_token(t, i < 50 ? 3 : i, 7);   /* tokens 0..49: one token, ~1000 times */
		assert_int_equal(kiln_filter_add(&many, t, n), 0);
	}
	for (uint64_t i = 0; i < distinct; i++) { /* every token at least once */
		size_t n = make_token(t, i, 7);
		assert_int_equal(kiln_filter_add(&many, t, n), 0);
	}
	assert_int_equal(kiln_filter_encode(&a, &once), 0);
	assert_int_equal(kiln_filter_encode(&b, &many), 0);
	assert_int_equal(kiln_filter_decode(&f, b.ptr, b.len, "t"), 0);
	assert_int_equal(f.tokens, distinct);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.ptr, b.ptr, a.len);
	kiln_filter_set_free(&once);
	kiln_filter_set_free(&many);
	kiln_buf_free(&a);
	kiln_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(no_false_negative_and_rate),
	    cmocka_unit_test(scan_finds_tokens),
	    cmocka_unit_test(listed_digests_match_scan),
	    cmocka_unit_test(empty_and_corrupt),
	    cmocka_unit_test(order_and_repeats_do_not_matter),
	    cmocka_unit_test(bulk_adds_compact_past_the_bound),
	    cmocka_unit_test(scan_matches_grammar),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
