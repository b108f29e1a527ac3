/* Personal-data detectors for free text. Each kind has one PCRE2 pattern
 * (JIT-compiled when the platform allows) that proposes candidates with
 * word-boundary lookarounds; C then checks what a pattern cannot (digit
 * counts, Luhn, mod-97, address syntax) and may shorten a candidate at a
 * space. The detector owns the patterns, one match data and the candidate
 * buffers, all reused from call to call. */
#include "mask/detect.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "contract/format.h"
#include "core/error.h"

/* A number starts neither inside a word or number nor right after
 * "<digit>-", "<digit>.", "<digit>:" or "<digit>/" (dates, times, versions,
 * ranges), and not after '+'; it ends the same way on the right. */
#define NUM_BEFORE "(?<![A-Za-z0-9_+])(?<![0-9][-.:/])"
#define NUM_AFTER  "(?![A-Za-z0-9_]|[-.:/][0-9])"

struct kiln_detector {
	pcre2_code *code[KILN_DETECT_COUNT_];
	bool jit[KILN_DETECT_COUNT_];
	pcre2_match_data *match;
	pcre2_match_context *limits; /* KILN_PATTERN_MATCH_LIMIT and _DEPTH_LIMIT */
	kiln_detect_match *cand;     /* every accepted candidate of this call */
	kiln_detect_match *keep;     /* the non-overlapping winners, by start */
	size_t ncand, cap;           /* both arrays hold cap entries */
};

static inline bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static inline unsigned char ascii_lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

static inline unsigned char ascii_upper(unsigned char c)
{
	return c >= 'a' && c <= 'z' ? (unsigned char)(c - 'a' + 'A') : c;
}

/* --- checks a pattern cannot make ----------------------------------------- */

/* The length of s without its last space-separated group, 0 when there is
 * no space to cut at. */
static size_t cut_last_group(const char *s, size_t len)
{
	while (len > 0 && s[len - 1] != ' ')
		len--;
	while (len > 0 && s[len - 1] == ' ')
		len--;
	return len;
}

/* Digits of a phone candidate; in the '+' form a "(0)" trunk marker
 * ("+44 (0)20 ...") is not part of the number. */
static size_t phone_digits(const char *s, size_t len)
{
	size_t i, n = 0;
	bool plus = len > 0 && s[0] == '+';

	for (i = 0; i < len; i++) {
		if (plus && s[i] == '(' && i + 2 < len && s[i + 1] == '0' && s[i + 2] == ')') {
			i += 2;
			continue;
		}
		if (is_digit((unsigned char)s[i]))
			n++;
	}
	return n;
}

/* Returns the accepted length (possibly shortened at a space), 0 to reject. */
static size_t check_phone(const char *s, size_t len)
{
	size_t min, max;

	if (s[0] == '+') {
		min = 8;
		max = 15;
	} else if (s[0] == '0' && len > 1 && s[1] == '0') {
		size_t i = 2;

		/* 00 + an international number: no trunk 0 after the country code */
		while (i < len && is_digit((unsigned char)s[i]))
			i++;
		if (i + 1 < len && s[i + 1] == '0')
			return 0;
		min = 10;
		max = 17;
	} else if (s[0] == '0') {
		min = 9;
		max = 12;
	} else {
		return len; /* NANP: the pattern fixes its shape */
	}
	while (len > 0) {
		size_t d = phone_digits(s, len);

		if (d < min)
			return 0;
		if (d <= max && is_digit((unsigned char)s[len - 1]))
			return len;
		len = cut_last_group(s, len);
	}
	return 0;
}

static bool luhn_ok(const char *s, size_t len, size_t *ndigits)
{
	size_t i, n = 0;
	unsigned sum = 0;

	for (i = len; i-- > 0;) {
		unsigned d;

		if (!is_digit((unsigned char)s[i]))
			continue;
		d = (unsigned)(s[i] - '0');
		if (n % 2 == 1) {
			d *= 2;
			if (d > 9)
				d -= 9;
		}
		sum += d;
		n++;
	}
	*ndigits = n;
	return sum % 10 == 0;
}

static size_t check_card(const char *s, size_t len)
{
	while (len > 0) {
		size_t n;
		bool ok = luhn_ok(s, len, &n);

		if (n < 13)
			return 0;
		if (n <= 19 && ok)
			return len;
		len = cut_last_group(s, len);
	}
	return 0;
}

static bool iban_ok(const char *s, size_t len)
{
	char compact[34];
	size_t i, n = 0;
	unsigned rem = 0;

	for (i = 0; i < len; i++) {
		if (s[i] == ' ')
			continue;
		if (n == sizeof(compact))
			return false;
		compact[n++] = s[i];
	}
	if (n < 15)
		return false;
	/* check digits 00, 01 and 99 alias 97, 98 and 02: never issued */
	if ((compact[2] == '0' && compact[3] <= '1') || (compact[2] == '9' && compact[3] == '9'))
		return false;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)compact[(i + 4) % n];

		if (is_digit(c))
			rem = (rem * 10 + (unsigned)(c - '0')) % 97;
		else if (c >= 'A' && c <= 'Z')
			rem = (rem * 100 + (unsigned)(c - 'A' + 10)) % 97;
		else
			return false;
	}
	return rem == 1;
}

static size_t check_iban(const char *s, size_t len)
{
	while (len >= 15) {
		if (iban_ok(s, len))
			return len;
		len = cut_last_group(s, len);
	}
	return 0;
}

static size_t check_email(const char *s, size_t len)
{
	return kiln_format_check(KILN_FORMAT_EMAIL, s, len) ? len : 0;
}

static size_t check_ipv4(const char *s, size_t len)
{
	return kiln_format_check(KILN_FORMAT_IPV4, s, len) ? len : 0;
}

static size_t check_ipv6(const char *s, size_t len)
{
	size_t i;

	/* "::" alone is punctuation more often than an address */
	for (i = 0; i < len && s[i] == ':'; i++)
		;
	if (i == len)
		return 0;
	return kiln_format_check(KILN_FORMAT_IPV6, s, len) ? len : 0;
}

/* --- normal forms ----------------------------------------------------------- */

/* Each writes at most cap bytes and returns the full length. */
#define PUT(ch)                                                                                              \
	do {                                                                                                 \
		if (n < cap)                                                                                 \
			out[n] = (ch);                                                                       \
		n++;                                                                                         \
	} while (0)

static size_t normal_lower(const char *s, size_t len, char *out, size_t cap)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++)
		PUT((char)ascii_lower((unsigned char)s[i]));
	return n;
}

static size_t normal_as_written(const char *s, size_t len, char *out, size_t cap)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++)
		PUT(s[i]);
	return n;
}

static size_t normal_phone(const char *s, size_t len, char *out, size_t cap)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '+' && i == 0) {
			PUT('+');
		} else if (s[0] == '+' && c == '(' && i + 2 < len && s[i + 1] == '0' && s[i + 2] == ')') {
			i += 2; /* "(0)" trunk marker */
		} else if (is_digit(c)) {
			PUT((char)c);
		}
	}
	return n;
}

static size_t normal_iban(const char *s, size_t len, char *out, size_t cap)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++)
		if (s[i] != ' ')
			PUT((char)ascii_upper((unsigned char)s[i]));
	return n;
}

static size_t normal_digits(const char *s, size_t len, char *out, size_t cap)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++)
		if (is_digit((unsigned char)s[i]))
			PUT(s[i]);
	return n;
}
#undef PUT

/* --- the detectors ---------------------------------------------------------- */

/* One row per kind: adding a detector is a kind in detect.h and a row here. */
typedef struct detector_row {
	const char *domain;  /* the pseudonym domain of its tokens */
	const char *pattern; /* PCRE2: proposes candidates */
	/* accepted length of a candidate (possibly shortened at a space), 0 to reject */
	size_t (*check)(const char *s, size_t len);
	/* the normal form hashed into the token */
	size_t (*normalise)(const char *s, size_t len, char *out, size_t cap);
	char needs;       /* a byte the text must hold for the pattern to match, 0: none */
	bool needs_digit; /* the text must hold a digit */
	int tie_rank;     /* which kind keeps an exact tie (same start, same length): lowest */
} detector_row;

static const detector_row rows[KILN_DETECT_COUNT_] = {
    [KILN_DETECT_EMAIL] =
        {
            .domain = "email",
            /* not inside a longer local part, nor after "word."; UTF-8 bytes
             * count as letters so "prénom@" is never cut after the 'é' */
            .pattern =
                "(?<![A-Za-z0-9_%+\\x80-\\xff-])(?<![A-Za-z0-9_%+\\x80-\\xff-]\\.)"
                "[A-Za-z0-9_%+\\x80-\\xff-](?:[A-Za-z0-9._%+\\x80-\\xff-]{0,62}[A-Za-z0-9_%+\\x80-\\xff-])?"
                "@(?:[A-Za-z0-9\\x80-\\xff-]{1,63}+\\.){1,10}[A-Za-z]{2,63}+(?![A-Za-z0-9_\\x80-\\xff-])",
            .check = check_email,
            .normalise = normal_lower,
            .needs = '@',
            .tie_rank = 2,
        },
    [KILN_DETECT_PHONE] =
        {
            .domain = "phone",
            .pattern = NUM_BEFORE "(?:"
                                  /* E.164: +CC, then digit groups, one parenthesised group allowed */
                                  "\\+[1-9][0-9]{0,14}+"
                                  "(?:[-. ]?\\([0-9]{1,4}\\)[-. ]?[0-9]{1,14}+|[-. ][0-9]{1,14}+){0,7}+"
                                  /* NANP: (NXX) NXX-XXXX or NXX-NXX-XXXX with one separator, optional 1- */
                                  "|(?:1[-. ])?(?:\\([2-9][0-9]{2}\\) ?[2-9][0-9]{2}[-. ]"
                                  "|[2-9][0-9]{2}(?<ns>[-. ])[2-9][0-9]{2}\\k<ns>)[0-9]{4}"
                                  /* national: trunk 0, then groups split by one kind of separator;
                                   * never the tail of a longer run of digit groups */
                                  "|(?<![0-9] )0[0-9]{1,4}(?<ts>[- ])[0-9]{2,10}(?:\\k<ts>[0-9]{2,10}){0,4}+"
                                  ")" NUM_AFTER,
            .check = check_phone,
            .normalise = normal_phone,
            .needs_digit = true,
            .tie_rank = 5,
        },
    [KILN_DETECT_IPV4] =
        {
            .domain = "ip",
            .pattern = "(?<![A-Za-z0-9_])(?<![0-9]\\.)[0-9]{1,3}+(?:\\.[0-9]{1,3}+){3}"
                       "(?![A-Za-z0-9_]|\\.[0-9])",
            .check = check_ipv4,
            .normalise = normal_as_written,
            .needs = '.',
            .needs_digit = true,
            .tie_rank = 4,
        },
    [KILN_DETECT_IPV6] =
        {
            .domain = "ip",
            .pattern = "(?<![A-Za-z0-9_:])(?:[0-9A-Fa-f]{0,4}:){2,8}"
                       "(?:[0-9]{1,3}(?:\\.[0-9]{1,3}){3}|[0-9A-Fa-f]{1,4})?"
                       "(?![A-Za-z0-9_:]|\\.[0-9])",
            .check = check_ipv6,
            .normalise = normal_lower,
            .needs = ':',
            .tie_rank = 3,
        },
    [KILN_DETECT_IBAN] =
        {
            .domain = "iban",
            .pattern = "(?<![A-Za-z0-9_])[A-Z]{2}[0-9]{2}"
                       "(?:[A-Z0-9]{11,30}+|(?: [A-Z0-9]{4}){2,7}+(?: [A-Z0-9]{1,4})?+)"
                       "(?![A-Za-z0-9_])",
            .check = check_iban,
            .normalise = normal_iban,
            .needs_digit = true,
            .tie_rank = 1,
        },
    [KILN_DETECT_CARD] =
        {
            .domain = "card",
            .pattern = NUM_BEFORE "[2-6][0-9]{2,18}+"
                                  "(?:(?<cs>[- ])[0-9]{3,18}+(?:\\k<cs>[0-9]{3,18}+){0,5}+)?+" NUM_AFTER,
            .check = check_card,
            .normalise = normal_digits,
            .needs_digit = true,
            .tie_rank = 0,
        },
};

/* --- detector --------------------------------------------------------------- */

int kiln_detector_new(kiln_detector **out)
{
	kiln_detector *d;
	int err = 0, k;

	*out = NULL;
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return kiln_error_set(KILN_ENOMEM, "out of memory creating the PII detectors");
	for (k = 0; k < KILN_DETECT_COUNT_; k++) {
		int code;
		PCRE2_SIZE offset;

		d->code[k] = pcre2_compile((PCRE2_SPTR)rows[k].pattern, PCRE2_ZERO_TERMINATED, 0, &code,
		                           &offset, NULL);
		if (d->code[k] == NULL) {
			PCRE2_UCHAR msg[128];

			pcre2_get_error_message(code, msg, sizeof(msg));
			err = kiln_error_set(KILN_EINVALID, "%s detector pattern, offset %zu: %s",
			                     rows[k].domain, (size_t)offset, (const char *)msg);
			goto cleanup;
		}
		d->jit[k] = pcre2_jit_compile(d->code[k], PCRE2_JIT_COMPLETE) == 0;
	}
	d->match = pcre2_match_data_create(16, NULL);
	d->limits = pcre2_match_context_create(NULL);
	d->cap = 16;
	d->cand = malloc(d->cap * sizeof(*d->cand));
	d->keep = malloc(d->cap * sizeof(*d->keep));
	if (d->match == NULL || d->limits == NULL || d->cand == NULL || d->keep == NULL) {
		err = kiln_error_set(KILN_ENOMEM, "out of memory creating the PII detectors");
		goto cleanup;
	}
	if (pcre2_set_match_limit(d->limits, KILN_PATTERN_MATCH_LIMIT) != 0 ||
	    pcre2_set_depth_limit(d->limits, KILN_PATTERN_DEPTH_LIMIT) != 0) {
		err = kiln_error_set(KILN_EINVALID, "PII detectors: cannot set the PCRE2 match limits");
		goto cleanup;
	}
	*out = d;
	d = NULL;

cleanup:
	kiln_detector_free(d);
	return err;
}

void kiln_detector_free(kiln_detector *detector)
{
	int k;

	if (detector == NULL)
		return;
	for (k = 0; k < KILN_DETECT_COUNT_; k++)
		pcre2_code_free(detector->code[k]);
	pcre2_match_data_free(detector->match);
	pcre2_match_context_free(detector->limits);
	free(detector->cand);
	free(detector->keep);
	free(detector);
}

static bool push_candidate(kiln_detector *d, size_t start, size_t len, kiln_detect_kind kind)
{
	if (d->ncand == d->cap) {
		size_t cap = d->cap * 2;
		kiln_detect_match *cand, *keep;

		if (cap > SIZE_MAX / sizeof(*cand))
			return false;
		cand = realloc(d->cand, cap * sizeof(*cand));
		if (cand == NULL)
			return false;
		d->cand = cand;
		keep = realloc(d->keep, cap * sizeof(*keep));
		if (keep == NULL)
			return false;
		d->keep = keep;
		d->cap = cap;
	}
	d->cand[d->ncand].start = start;
	d->cand[d->ncand].len = len;
	d->cand[d->ncand].kind = kind;
	d->ncand++;
	return true;
}

/* Longest first, then earliest, then by kind rank. */
static int cmp_priority(const void *a, const void *b)
{
	const kiln_detect_match *x = a, *y = b;

	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return rows[x->kind].tie_rank - rows[y->kind].tie_rank;
}

/* Picks winners in priority order into d->keep, kept sorted by start; a
 * candidate overlapping a winner loses. Returns the number of winners. */
static size_t resolve(kiln_detector *d)
{
	size_t i, nkeep = 0;

	qsort(d->cand, d->ncand, sizeof(*d->cand), cmp_priority);
	for (i = 0; i < d->ncand; i++) {
		const kiln_detect_match *c = &d->cand[i];
		size_t lo = 0, hi = nkeep;

		while (lo < hi) { /* first winner starting at or after c */
			size_t mid = lo + (hi - lo) / 2;

			if (d->keep[mid].start < c->start)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo > 0 && d->keep[lo - 1].start + d->keep[lo - 1].len > c->start)
			continue;
		if (lo < nkeep && d->keep[lo].start < c->start + c->len)
			continue;
		memmove(&d->keep[lo + 1], &d->keep[lo], (nkeep - lo) * sizeof(*d->keep));
		d->keep[lo] = *c;
		nkeep++;
	}
	return nkeep;
}

/* Which detectors can match at all: each needs its telling characters. */
static unsigned kinds_worth_running(const char *text, size_t len)
{
	unsigned kinds = 0;
	bool digit = false;
	size_t i;
	int k;

	for (i = 0; i < len && !digit; i++)
		digit = is_digit((unsigned char)text[i]);
	for (k = 0; k < KILN_DETECT_COUNT_; k++) {
		if (rows[k].needs_digit && !digit)
			continue;
		if (rows[k].needs != 0 && memchr(text, rows[k].needs, len) == NULL)
			continue;
		kinds |= 1u << k;
	}
	return kinds;
}

size_t kiln_detect(kiln_detector *detector, const char *text, size_t len, kiln_detect_match *out, size_t cap)
{
	kiln_detector *d = detector;
	unsigned kinds;
	size_t n;
	int k;

	d->ncand = 0;
	if (len == 0)
		return 0;
	kinds = kinds_worth_running(text, len);
	for (k = 0; k < KILN_DETECT_COUNT_; k++) {
		size_t pos = 0;

		if (!(kinds & (1u << k)))
			continue;
		while (pos < len) {
			PCRE2_SIZE *ov;
			size_t start, got;
			int rc;

			if (d->jit[k])
				rc = pcre2_jit_match(d->code[k], (PCRE2_SPTR)text, len, pos, 0, d->match,
				                     d->limits);
			else
				rc = pcre2_match(d->code[k], (PCRE2_SPTR)text, len, pos, 0, d->match,
				                 d->limits);
			if (rc == PCRE2_ERROR_NOMATCH)
				break;
			if (rc < 0) {
				/* match or depth limit, JIT stack, memory: undecided text */
				kiln_error_set(KILN_ELIMIT, "%s detector: PCRE2 gave up (error %d)",
				               rows[k].domain, rc);
				return SIZE_MAX;
			}
			ov = pcre2_get_ovector_pointer(d->match);
			start = ov[0];
			got = rows[k].check(text + start, ov[1] - start);
			if (got == 0) {
				pos = start + 1; /* a shorter candidate may start further on */
				continue;
			}
			if (!push_candidate(d, start, got, (kiln_detect_kind)k)) {
				kiln_error_set(KILN_ENOMEM, "out of memory collecting PII matches");
				return SIZE_MAX;
			}
			pos = start + got;
		}
	}
	n = resolve(d);
	if (n > 0 && cap > 0)
		memcpy(out, d->keep, (n < cap ? n : cap) * sizeof(*out));
	return n;
}

/* --- normal forms and domains ---------------------------------------------- */

size_t kiln_detect_normalise(kiln_detect_kind kind, const char *s, size_t len, char *out, size_t cap)
{
	if ((unsigned)kind >= KILN_DETECT_COUNT_)
		return 0;
	return rows[kind].normalise(s, len, out, cap);
}

const char *kiln_detect_domain(kiln_detect_kind kind)
{
	if ((unsigned)kind >= KILN_DETECT_COUNT_)
		return "unknown";
	return rows[kind].domain;
}
