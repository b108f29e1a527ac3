/* Free-text detectors for personal data inside string values: email
 * addresses, phone numbers (E.164 and common national formats), IPv4 and
 * IPv6 addresses, IBANs (mod-97 verified) and payment card numbers (Luhn
 * verified). Candidates are found with PCRE2 (JIT), checksums in C. A
 * detector is compiled once and is not thread-safe (one per worker). */
#ifndef KILN_MASK_DETECT_H
#define KILN_MASK_DETECT_H

#include <stddef.h>

typedef enum kiln_detect_kind {
	KILN_DETECT_EMAIL,
	KILN_DETECT_PHONE,
	KILN_DETECT_IPV4,
	KILN_DETECT_IPV6,
	KILN_DETECT_IBAN,
	KILN_DETECT_CARD,
	KILN_DETECT_COUNT_
} kiln_detect_kind;

typedef struct kiln_detect_match {
	size_t start, len; /* bytes of the text */
	kiln_detect_kind kind;
} kiln_detect_match;

typedef struct kiln_detector kiln_detector;

int kiln_detector_new(kiln_detector **out);
void kiln_detector_free(kiln_detector *detector);

/* Finds matches in text[0..len) (valid UTF-8), non-overlapping, sorted by
 * start, at most `cap` of them written to out. Returns the number found
 * (which may exceed cap: then only the first cap are in out). When two
 * candidates overlap the longer one wins (the earlier on a tie). SIZE_MAX
 * when PCRE2 fails or memory runs out (kiln_error_last() says why): callers
 * must then not pass the text on unscanned. */
size_t kiln_detect(kiln_detector *detector, const char *text, size_t len, kiln_detect_match *out, size_t cap);

/* The normalised form hashed into the token: email lower-cased; phone '+'
 * (when written) and digits only; IPv4 as written; IPv6 lower-cased; IBAN
 * upper-cased without spaces; card digits only. Writes at most cap bytes,
 * returns the length (the normal form is never longer than the match). */
size_t kiln_detect_normalise(kiln_detect_kind kind, const char *s, size_t len, char *out, size_t cap);

/* The pseudonym domain of a detector's tokens: "email", "phone", "ip"
 * (IPv4 and IPv6), "iban", "card". Static storage. */
const char *kiln_detect_domain(kiln_detect_kind kind);

#endif
