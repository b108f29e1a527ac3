/* Unit tests for src/mask/detect.c: exact spans of every detector kind in
 * sentences (ASCII and not), the look-alikes each must leave alone (dates,
 * times, versions, order numbers, bad checksums), overlap resolution, order,
 * the cap, normal forms and domains. Texts are copied into exact-size heap
 * buffers without a NUL, so a read past `len` trips AddressSanitizer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mask/detect.h"

#define MAX_MATCHES 32

typedef struct want {
	kiln_detect_kind kind;
	const char *span; /* found in the text after the previous want's span */
} want_span;

static const char *kind_name(kiln_detect_kind kind)
{
	static const char *const names[] = {"email", "phone", "ipv4", "ipv6", "iban", "card"};

	return (unsigned)kind < KILN_DETECT_COUNT_ ? names[kind] : "?";
}

static int setup(void **state)
{
	kiln_detector *d;

	if (kiln_detector_new(&d) != 0)
		return -1;
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	kiln_detector_free(*state);
	return 0;
}

/* Runs the detector over an exact-size copy of text. */
static size_t run(kiln_detector *d, const char *text, kiln_detect_match *out, size_t cap)
{
	size_t len = strlen(text), n;
	char *buf = malloc(len ? len : 1);

	assert_non_null(buf);
	memcpy(buf, text, len);
	n = kiln_detect(d, buf, len, out, cap);
	free(buf);
	return n;
}

static void print_matches(const char *text, const kiln_detect_match *m, size_t n)
{
	size_t i;

	print_error("text <%s>:\n", text);
	for (i = 0; i < n && i < MAX_MATCHES; i++)
		print_error("  %s at %zu+%zu <%.*s>\n", kind_name(m[i].kind), m[i].start, m[i].len,
		            (int)m[i].len, text + m[i].start);
}

/* Expects exactly the spans in `w`, in order. */
static void expect(kiln_detector *d, const char *text, const want_span *w, size_t nw)
{
	kiln_detect_match m[MAX_MATCHES];
	size_t n = run(d, text, m, MAX_MATCHES), i;
	const char *from = text;

	if (n != nw)
		print_matches(text, m, n);
	assert_int_equal(n, nw);
	for (i = 0; i < nw; i++) {
		const char *at = strstr(from, w[i].span);
		size_t start, len = strlen(w[i].span);

		assert_non_null(at);
		start = (size_t)(at - text);
		if (m[i].start != start || m[i].len != len || m[i].kind != w[i].kind) {
			print_matches(text, m, n);
			fail_msg("want %s at %zu+%zu <%s>", kind_name(w[i].kind), start, len, w[i].span);
		}
		from = at + len;
	}
}

#define EXPECT(d, text, ...)                                                                                 \
	do {                                                                                                 \
		const want_span w_[] = {__VA_ARGS__};                                                        \
		expect((d), (text), w_, sizeof(w_) / sizeof(w_[0]));                                         \
	} while (0)

#define ONE(d, kind, text, span) EXPECT(d, text, {kind, span})

static void none(kiln_detector *d, const char *text)
{
	kiln_detect_match m[MAX_MATCHES];
	size_t n = run(d, text, m, MAX_MATCHES);

	if (n != 0) {
		print_matches(text, m, n);
		fail_msg("expected no match");
	}
}

/* --- positives ------------------------------------------------------------- */

static void test_email(void **state)
{
	kiln_detector *d = *state;

	ONE(d, KILN_DETECT_EMAIL, "Mail alice@example.com today", "alice@example.com");
	ONE(d, KILN_DETECT_EMAIL, "Contact: Bob.Smith+tag@mail.example.co.uk.",
	    "Bob.Smith+tag@mail.example.co.uk");
	ONE(d, KILN_DETECT_EMAIL, "<x_y%z@sub-domain.example.org>", "x_y%z@sub-domain.example.org");
	ONE(d, KILN_DETECT_EMAIL, "ALICE@EXAMPLE.COM", "ALICE@EXAMPLE.COM");
	ONE(d, KILN_DETECT_EMAIL, "(mailto:a@b.io)", "a@b.io");
	/* the whole local part, never its tail after a non-ASCII letter */
	ONE(d, KILN_DETECT_EMAIL, "Écrire à prénom.nom@exemple.fr, merci", "prénom.nom@exemple.fr");
	ONE(d, KILN_DETECT_EMAIL, "info@müller.de", "info@müller.de");
	/* an ellipsis is not part of the address */
	ONE(d, KILN_DETECT_EMAIL, "write to...bob@example.com", "bob@example.com");
	/* "a..b" is not a local part; its valid tail is still masked */
	ONE(d, KILN_DETECT_EMAIL, "a..b@example.com", "b@example.com");
	EXPECT(d, "x@y.com,z@w.org", {KILN_DETECT_EMAIL, "x@y.com"}, {KILN_DETECT_EMAIL, "z@w.org"});
}

static void test_phone(void **state)
{
	kiln_detector *d = *state;

	/* E.164 */
	ONE(d, KILN_DETECT_PHONE, "call +44 20 7946 0958 today", "+44 20 7946 0958");
	ONE(d, KILN_DETECT_PHONE, "US: +1 (415) 555-2671.", "+1 (415) 555-2671");
	ONE(d, KILN_DETECT_PHONE, "mobile +4915112345678", "+4915112345678");
	ONE(d, KILN_DETECT_PHONE, "+1-415-555-2671", "+1-415-555-2671");
	ONE(d, KILN_DETECT_PHONE, "+33 6 12 34 56 78", "+33 6 12 34 56 78");
	ONE(d, KILN_DETECT_PHONE, "UK +44 (0)20 7946 0958", "+44 (0)20 7946 0958");
	ONE(d, KILN_DETECT_PHONE, "+49.30.1234567", "+49.30.1234567");
	/* national */
	ONE(d, KILN_DETECT_PHONE, "ring 020 7946 0958 now", "020 7946 0958");
	ONE(d, KILN_DETECT_PHONE, "Tel. 030-1234567", "030-1234567");
	ONE(d, KILN_DETECT_PHONE, "bel 0612 345 678!", "0612 345 678");
	ONE(d, KILN_DETECT_PHONE, "Tél : 06 12 34 56 78 — merci", "06 12 34 56 78");
	ONE(d, KILN_DETECT_PHONE, "0049 30 1234567", "0049 30 1234567");
	/* NANP */
	ONE(d, KILN_DETECT_PHONE, "office (415) 555-2671", "(415) 555-2671");
	ONE(d, KILN_DETECT_PHONE, "office 415-555-2671", "415-555-2671");
	ONE(d, KILN_DETECT_PHONE, "office 415.555.2671", "415.555.2671");
	ONE(d, KILN_DETECT_PHONE, "office 415 555 2671", "415 555 2671");
	ONE(d, KILN_DETECT_PHONE, "toll free 1-800-555-1234", "1-800-555-1234");
	/* a number written right after the phone is dropped at the space */
	ONE(d, KILN_DETECT_PHONE, "call 020 7946 0958 12 times", "020 7946 0958");

	/* non-ASCII text around: exact byte offsets */
	{
		const char *text = "Grüße, ruf an: +49 30 1234567";
		kiln_detect_match m[4];

		assert_int_equal(run(d, text, m, 4), 1);
		assert_int_equal(m[0].kind, KILN_DETECT_PHONE);
		assert_int_equal(m[0].start, 17);
		assert_int_equal(m[0].len, 14);
	}
}

static void test_ipv4(void **state)
{
	kiln_detector *d = *state;

	ONE(d, KILN_DETECT_IPV4, "from 192.168.0.1, twice", "192.168.0.1");
	ONE(d, KILN_DETECT_IPV4, "server 10.0.0.1:8080.", "10.0.0.1");
	ONE(d, KILN_DETECT_IPV4, "(255.255.255.255)", "255.255.255.255");
	ONE(d, KILN_DETECT_IPV4, "0.0.0.0", "0.0.0.0");
	ONE(d, KILN_DETECT_IPV4, "Adresse: 8.8.8.8 – Grüße", "8.8.8.8");
	EXPECT(d, "1.1.1.1/8.8.4.4", {KILN_DETECT_IPV4, "1.1.1.1"}, {KILN_DETECT_IPV4, "8.8.4.4"});
}

static void test_ipv6(void **state)
{
	kiln_detector *d = *state;

	ONE(d, KILN_DETECT_IPV6, "link fe80::1 up", "fe80::1");
	ONE(d, KILN_DETECT_IPV6, "loopback ::1.", "::1");
	ONE(d, KILN_DETECT_IPV6, "2001:db8:85a3::8a2e:370:7334", "2001:db8:85a3::8a2e:370:7334");
	ONE(d, KILN_DETECT_IPV6, "full 2001:0DB8:0000:0000:0000:0000:1428:57ab end",
	    "2001:0DB8:0000:0000:0000:0000:1428:57ab");
	ONE(d, KILN_DETECT_IPV6, "url http://[2001:db8::1]:443/", "2001:db8::1");
	ONE(d, KILN_DETECT_IPV6, "2001:db8::", "2001:db8::");
}

static void test_iban(void **state)
{
	kiln_detector *d = *state;

	ONE(d, KILN_DETECT_IBAN, "IBAN: DE89 3704 0044 0532 0130 00, thanks", "DE89 3704 0044 0532 0130 00");
	ONE(d, KILN_DETECT_IBAN, "pay GB82WEST12345698765432.", "GB82WEST12345698765432");
	ONE(d, KILN_DETECT_IBAN, "GB82 WEST 1234 5698 7654 32", "GB82 WEST 1234 5698 7654 32");
	ONE(d, KILN_DETECT_IBAN, "NL91ABNA0417164300", "NL91ABNA0417164300");
	/* an upper-case word after the last group is not part of it */
	ONE(d, KILN_DETECT_IBAN, "BE68 5390 0754 7034 SEPA transfer", "BE68 5390 0754 7034");
	ONE(d, KILN_DETECT_IBAN, "Überweisung an DE89370400440532013000 – danke", "DE89370400440532013000");
}

static void test_card(void **state)
{
	kiln_detector *d = *state;

	ONE(d, KILN_DETECT_CARD, "card 4111 1111 1111 1111, exp 12/29", "4111 1111 1111 1111");
	ONE(d, KILN_DETECT_CARD, "card 4111-1111-1111-1111.", "4111-1111-1111-1111");
	ONE(d, KILN_DETECT_CARD, "amex 378282246310005", "378282246310005");
	ONE(d, KILN_DETECT_CARD, "amex 3782 822463 10005", "3782 822463 10005");
	ONE(d, KILN_DETECT_CARD, "mc 5555555555554444", "5555555555554444");
	ONE(d, KILN_DETECT_CARD, "diners 30569309025904", "30569309025904");
	/* a trailing number is dropped at the space until Luhn holds */
	ONE(d, KILN_DETECT_CARD, "4111 1111 1111 1111 2026", "4111 1111 1111 1111");
	ONE(d, KILN_DETECT_CARD, "n° 4111111111111111 €", "4111111111111111");
}

/* --- negatives ------------------------------------------------------------- */

static void test_lookalikes(void **state)
{
	kiln_detector *d = *state;

	/* dates, times, timestamps */
	none(d, "on 2026-03-14");
	none(d, "on 14.03.2026 and 03/14/2026");
	none(d, "at 10:15 or 10:15:00 or 12:30");
	none(d, "2026-03-14T10:15:00Z 2026-03-14 10:15:00+01:00");
	none(d, "due 01-02-2026 1430");
	none(d, "epoch ms 1710412345678");
	/* versions, order numbers, plain runs, ranges, money */
	none(d, "version 14.2.1 and v1.2.3.4");
	none(d, "order #123456 and 1234567890 and 0301234567");
	none(d, "pages 100-200, 1.234.567,89 EUR");
	none(d, "id 550e8400-e29b-41d4-a716-446655440000");
	/* numbers inside words */
	none(d, "abc030-1234567 SKU415-555-2671x ref4111111111111111");
	/* phones out of range */
	none(d, "+1234567 and +1234567890123456");
	none(d, "123-456-7890 (area codes start 2-9)");
	/* cards: bad Luhn, too short, not a card prefix */
	none(d, "4111 1111 1111 1112");
	none(d, "411111111111");
	none(d, "1234567812345670");
	/* IBANs: bad checksum, lower case, too short */
	none(d, "DE89 3704 0044 0532 0130 01");
	none(d, "de89 3704 0044 0532 0130 00");
	none(d, "DE89 3704");
	/* IPv4 */
	none(d, "256.1.1.1 and 1.2.3 and 1.2.3.4.5 and 010.1.1.1");
	/* IPv6 */
	none(d, "a:b and :: and std::vector");
	none(d, "mac 00:1a:2b:3c:4d:5e");
	none(d, "1:2:3:4:5:6:7:8:9");
	/* emails */
	none(d, "user@localhost, a@b.c, x@example.com2, @example.com, foo@");
	none(d, "");
	none(d, "plain words only");
}

/* --- overlaps, order and the cap -------------------------------------------- */

static void test_overlap(void **state)
{
	kiln_detector *d = *state;

	/* IPv4 inside IPv6: the longer wins */
	ONE(d, KILN_DETECT_IPV6, "::ffff:192.0.2.1", "::ffff:192.0.2.1");
	/* a phone-shaped local part: the email is longer */
	ONE(d, KILN_DETECT_EMAIL, "415-555-2671@example.com", "415-555-2671@example.com");
	/* a longer match starting later beats an earlier shorter one */
	EXPECT(d, "call 0301 2345678.bob@example.com", {KILN_DETECT_EMAIL, "2345678.bob@example.com"});
	/* an IBAN whose digits hold a Luhn-valid card-shaped run */
	ONE(d, KILN_DETECT_IBAN, "GB44 4111 1111 1111 1111 12", "GB44 4111 1111 1111 1111 12");
}

static void test_sorted(void **state)
{
	kiln_detector *d = *state;

	EXPECT(d,
	       "Kunde alice@example.com (IP 10.1.2.3, fe80::1) zahlt mit 4111 1111 1111 1111 von "
	       "DE89 3704 0044 0532 0130 00, Rückruf +49 30 1234567 oder bob@example.org.",
	       {KILN_DETECT_EMAIL, "alice@example.com"}, {KILN_DETECT_IPV4, "10.1.2.3"},
	       {KILN_DETECT_IPV6, "fe80::1"}, {KILN_DETECT_CARD, "4111 1111 1111 1111"},
	       {KILN_DETECT_IBAN, "DE89 3704 0044 0532 0130 00"}, {KILN_DETECT_PHONE, "+49 30 1234567"},
	       {KILN_DETECT_EMAIL, "bob@example.org"});
}

static void test_cap(void **state)
{
	kiln_detector *d = *state;
	const char *text = "a@x.io b@x.io 10.0.0.1 c@x.io 415-555-2671";
	kiln_detect_match m[5];
	size_t n;

	memset(m, 0xAB, sizeof(m));
	n = run(d, text, m, 2);
	assert_int_equal(n, 5);
	assert_int_equal(m[0].start, 0);
	assert_int_equal(m[1].start, 7);
	assert_int_equal(m[1].kind, KILN_DETECT_EMAIL);
	assert_int_equal(m[2].start, (size_t)0xABABABABABABABABull); /* untouched */
	assert_int_equal(run(d, text, NULL, 0), 5);
	n = run(d, text, m, 5);
	assert_int_equal(n, 5);
	assert_int_equal(m[4].kind, KILN_DETECT_PHONE);
}

/* More matches than the detector's first buffer holds; the detector is
 * reused from call to call. */
static void test_many(void **state)
{
	kiln_detector *d = *state;
	static kiln_detect_match m[300];
	char text[300 * 24];
	size_t len = 0, i;
	int round;

	for (i = 0; i < 300; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len, "%s user%zu@example.com",
		                        i % 2 ? "and" : "or", i);
	for (round = 0; round < 3; round++) {
		size_t n = run(d, text, m, 300);

		assert_int_equal(n, 300);
		for (i = 0; i < n; i++) {
			assert_int_equal(m[i].kind, KILN_DETECT_EMAIL);
			if (i > 0)
				assert_true(m[i].start > m[i - 1].start + m[i - 1].len);
		}
	}
}

/* Invariants over pseudo-random texts built from the characters the
 * patterns care about (fixed seed, so a failure replays). */
static void test_random_invariants(void **state)
{
	kiln_detector *d = *state;
	static const char *const pieces[] = {
	    "0",
	    "1",
	    "2",
	    "4",
	    "5",
	    "9",
	    "00",
	    "415",
	    "4111",
	    " ",
	    "  ",
	    "-",
	    ".",
	    ":",
	    "::",
	    "+",
	    "(",
	    ")",
	    "@",
	    "a",
	    "f",
	    "x",
	    "Z",
	    "DE",
	    "GB82",
	    "_",
	    "/",
	    "#",
	    ",",
	    "\xc3\xa9",
	    "\xe2\x80\x94",
	    "\n",
	};
	kiln_detect_match m[MAX_MATCHES];
	char text[512], norm[512];
	uint32_t seed = 12345;
	int round;

	for (round = 0; round < 3000; round++) {
		size_t len = 0, n, i, npieces;

		seed = seed * 1103515245u + 12345u;
		npieces = (seed >> 16) % 80;
		for (i = 0; i < npieces; i++) {
			const char *p;
			size_t plen;

			seed = seed * 1103515245u + 12345u;
			p = pieces[(seed >> 16) % (sizeof(pieces) / sizeof(pieces[0]))];
			plen = strlen(p);
			memcpy(text + len, p, plen);
			len += plen;
		}
		text[len] = '\0';
		n = run(d, text, m, MAX_MATCHES);
		assert_int_equal(run(d, text, NULL, 0), n);
		for (i = 0; i < n && i < MAX_MATCHES; i++) {
			const kiln_detect_match *x = &m[i];
			size_t end = x->start + x->len;

			assert_true(x->len > 0 && end <= len);
			assert_true((unsigned)x->kind < KILN_DETECT_COUNT_);
			/* never cuts a UTF-8 sequence: no continuation byte at either edge */
			assert_false(((unsigned char)text[x->start] & 0xC0) == 0x80);
			assert_false(end < len && ((unsigned char)text[end] & 0xC0) == 0x80);
			if (i > 0)
				assert_true(m[i - 1].start + m[i - 1].len <= x->start);
			assert_true(kiln_detect_normalise(x->kind, text + x->start, x->len, norm,
			                                  sizeof(norm)) <= x->len);
		}
	}
}

/* --- normal forms and domains ------------------------------------------------- */

static void check_normal(kiln_detect_kind kind, const char *in, const char *want)
{
	char out[128];
	size_t n;

	memset(out, '#', sizeof(out));
	n = kiln_detect_normalise(kind, in, strlen(in), out, sizeof(out));
	if (n != strlen(want) || memcmp(out, want, n) != 0)
		fail_msg("%s <%s>: got <%.*s>, want <%s>", kind_name(kind), in, (int)n, out, want);
	assert_true(n <= strlen(in));
}

static void test_normalise(void **state)
{
	char out[8];
	size_t n;

	(void)state;
	check_normal(KILN_DETECT_EMAIL, "Alice.Smith@Example.COM", "alice.smith@example.com");
	check_normal(KILN_DETECT_PHONE, "+44 20 7946 0958", "+442079460958");
	check_normal(KILN_DETECT_PHONE, "+44 (0)20 7946-0958", "+442079460958");
	check_normal(KILN_DETECT_PHONE, "+1 (415) 555-2671", "+14155552671");
	check_normal(KILN_DETECT_PHONE, "(415) 555-2671", "4155552671");
	check_normal(KILN_DETECT_PHONE, "020 7946 0958", "02079460958");
	check_normal(KILN_DETECT_IPV4, "192.168.0.1", "192.168.0.1");
	check_normal(KILN_DETECT_IPV6, "2001:DB8::AbCd", "2001:db8::abcd");
	check_normal(KILN_DETECT_IBAN, "de89 3704 0044 0532 0130 00", "DE89370400440532013000");
	check_normal(KILN_DETECT_IBAN, "GB82WEST12345698765432", "GB82WEST12345698765432");
	check_normal(KILN_DETECT_CARD, "4111-1111-1111-1111", "4111111111111111");
	check_normal(KILN_DETECT_CARD, "3782 822463 10005", "378282246310005");

	/* a short buffer gets the first cap bytes; the full length comes back */
	memset(out, '#', sizeof(out));
	n = kiln_detect_normalise(KILN_DETECT_CARD, "4111 1111 1111 1111", 19, out, 4);
	assert_int_equal(n, 16);
	assert_memory_equal(out, "4111####", 8);
	assert_int_equal(kiln_detect_normalise(KILN_DETECT_EMAIL, "a@b.io", 6, NULL, 0), 6);
}

static void test_domains(void **state)
{
	(void)state;
	assert_string_equal(kiln_detect_domain(KILN_DETECT_EMAIL), "email");
	assert_string_equal(kiln_detect_domain(KILN_DETECT_PHONE), "phone");
	assert_string_equal(kiln_detect_domain(KILN_DETECT_IPV4), "ip");
	assert_string_equal(kiln_detect_domain(KILN_DETECT_IPV6), "ip");
	assert_string_equal(kiln_detect_domain(KILN_DETECT_IBAN), "iban");
	assert_string_equal(kiln_detect_domain(KILN_DETECT_CARD), "card");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_email),      cmocka_unit_test(test_phone),
	    cmocka_unit_test(test_ipv4),       cmocka_unit_test(test_ipv6),
	    cmocka_unit_test(test_iban),       cmocka_unit_test(test_card),
	    cmocka_unit_test(test_lookalikes), cmocka_unit_test(test_overlap),
	    cmocka_unit_test(test_sorted),     cmocka_unit_test(test_cap),
	    cmocka_unit_test(test_many),       cmocka_unit_test(test_random_invariants),
	    cmocka_unit_test(test_normalise),  cmocka_unit_test(test_domains),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
