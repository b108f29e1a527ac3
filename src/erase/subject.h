/* One person to erase (a "subject"): the identifiers a caller gives
 * (FIELD=VALUE pairs, tokens), the needles they resolve to under a dataset's
 * contracts and key (curated token texts), and the matchers that say whether
 * a curated record or a record as it arrived holds the person. A subject
 * holds personal data: its values are wiped when it is freed and never
 * appear in a message.
 *
 * Matching rules (kiln_subject_in_raw; docs/ERASURE.md "Raw zone and
 * quarantine" states them for users):
 * (a) a tolerant scan of the bytes finds JSON string literals (from '"' to
 *     the next unescaped '"' or the end; \uXXXX escapes, surrogate pairs
 *     included, and \n etc. decoded, bad escapes kept as written) and number
 *     tokens (a run of [-+.0-9eE] starting with '-' or a digit that does not
 *     follow a letter, digit, '_' or '.'); a value equal to a FIELD=VALUE's
 *     value after that field's normalisation (email and keep-domain fields:
 *     ASCII whitespace trimmed, ASCII case-insensitive) matches;
 * (b) every such value's token under each pseudonymisation domain recorded
 *     by kiln_subject_resolve (with that domain's normalisation: as is,
 *     email normal form, keep-domain form "p1_<token of the local part>@<domain
 *     part>") equal to a needle matches: a subject given only by its token is
 *     found this way;
 * (c) the free-text detectors (mask/detect.h) run on each decoded string
 *     literal that is valid UTF-8, and on the whole bytes when they are valid
 *     UTF-8 but not one JSON value: a match whose detector-domain token (of
 *     its normalised form) is a needle matches;
 * (d) bytes that are not one complete valid JSON value (core/json.h's strict
 *     scanner says) are also searched byte-wise for each FIELD=VALUE's value
 *     (email and keep-domain values trimmed and ASCII case-insensitively),
 *     the match neither preceded nor followed by an ASCII letter or digit.
 * kiln_subject_in_curated is a byte search for the needles in a curated
 * line, a needle neither preceded nor followed by [a-z2-7_]. */
#ifndef KILN_ERASE_SUBJECT_H
#define KILN_ERASE_SUBJECT_H

#include <stdbool.h>
#include <stddef.h>

#include "contract/contract.h"
#include "mask/key.h"

typedef struct kiln_subject kiln_subject;

int kiln_subject_new(kiln_subject **out);
/* NULL ok; wipes the values, needles and key copy (sodium_memzero). */
void kiln_subject_free(kiln_subject *s);

/* One identifier: "FIELD=VALUE" (FIELD a contract field path as written in
 * contract messages: "customer_id", "customer.email", "tags[]"; VALUE a
 * string's content or a number's text, non-empty) or a token
 * "p<N>_<26 base32 chars>", optionally followed by "@domain" (the
 * keep-domain form). KILN_EINVALID "WHERE: ..." for anything else; messages
 * never contain the value. */
int kiln_subject_add(kiln_subject *s, const char *arg, const char *where);

/* A --subjects file: one identifier per line, persons separated by one or
 * more blank lines (whitespace only counts as blank), lines starting with
 * '#' ignored, CRLF accepted. *out: an array of *out_n subjects (the caller
 * frees each with kiln_subject_free and the array with free). Errors
 * KILN_EINVALID "FILE:LINE: what" (never the value), also for a file that
 * names no subject. */
int kiln_subjects_parse(const char *text, size_t len, const char *file, kiln_subject ***out, size_t *out_n);

/* Resolves the identifiers against one contract and the dataset's key
 * (called once per distinct contract of the dataset's history; the key is
 * copied and wiped by free; every call must pass the same key):
 * - FIELD=VALUE where FIELD is a pseudonymised field of the contract
 *   (pseudo_mode TOKEN or KEEP_DOMAIN): the curated needle, as the curator
 *   writes it (email format and keep-domain: kiln_token_email_normal first;
 *   keep-domain: "p<N>_<token of the part before the last '@'>@<the rest>",
 *   the token of the whole without '@');
 * - when the whole VALUE is one match of a free-text detector, the
 *   detector-domain token of its normalised form;
 * - tokens given as tokens are needles as they are;
 * - records the contract's pseudonymised domains for kiln_subject_in_raw.
 * A FIELD the contract does not have is not an error here. */
int kiln_subject_resolve(kiln_subject *s, const kiln_contract *contract, const kiln_key *key);

/* After every resolve: KILN_EINVALID "subject: FIELD: not a pseudonymised
 * field of any contract of DATASET" for a FIELD=VALUE that resolved against
 * no contract; 0 otherwise. */
int kiln_subject_finish(kiln_subject *s, const char *dataset);

/* The needles (distinct, sorted bytewise): curated token texts, owned by s
 * (valid until the next resolve or free). */
size_t kiln_subject_token_count(const kiln_subject *s);
const char *kiln_subject_token(const kiln_subject *s, size_t i, size_t *out_len);

/* Whether one curated record (a shard line) holds one of the needles (see
 * the top of this file). Thread-safe (const). */
bool kiln_subject_in_curated(const kiln_subject *s, const char *line, size_t len);

/* Whether the bytes of one record as it arrived (a raw-zone value, key or
 * header value, a quarantined record; any bytes) hold the subject (rules
 * (a)-(d) above). Not thread-safe (uses a detector and scratch buffers):
 * one subject per thread. Out of memory counts as a match (an erasure
 * errs on the side of erasing); a text on which the detectors stop at their
 * PCRE2 limit is left to rules (a), (b) and (d). */
bool kiln_subject_in_raw(kiln_subject *s, const void *bytes, size_t len);

/* The subject as the erasure ledger records it: lower-case hex of
 * BLAKE2b-256 keyed with K = BLAKE2b-256(key = the pseudonymisation key's 32
 * bytes, message = "kiln erasure subject v1") over the needles (sorted,
 * each followed by '\n'). Never the token nor its HMAC bytes. KILN_EINVALID
 * before a resolve. */
int kiln_subject_ledger_id(const kiln_subject *s, char out[65]);

#endif
