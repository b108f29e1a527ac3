/* Token membership filters (docs/FORMATS.md "Token filters"): a Bloom
 * filter, format "kiln-tokens-bloom-v1", of the pseudonym tokens
 * ("p<N>_" + 26 base32 characters) one shard holds, sized per shard for a
 * false-positive rate of at most 1e-4 at its distinct token count. kiln
 * erase reads only the shards whose filter may hold one of the subject's
 * tokens. Hashing is unkeyed BLAKE2b-128 of the token text (tokens are
 * already keyed HMACs); the k probe positions are h1 + i*h2 mod m.
 *
 * Building: kiln_filter_set collects token digests (kiln_filter_scan finds
 * the tokens of a curated line), kiln_filter_encode writes the filter.
 * Reading: kiln_filter_decode checks foreign bytes (bounded sizes) and
 * kiln_filter_may_hold probes them. */
#ifndef KILN_SHARD_FILTER_H
#define KILN_SHARD_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

#define KILN_FILTER_NAME      "kiln-tokens-bloom-v1"
#define KILN_FILTER_EXTENSION ".bloom"
/* a shard's filter in a commit's tree: filters/<hh>/<hash>.bloom */
#define KILN_FILTER_DIR "filters"
/* the longest token text: "p4294967295_" and 26 characters */
#define KILN_FILTER_TOKEN_MAX 38
/* bounds a decoder accepts: at most 64 MiB of bits, 1..32 probes */
#define KILN_FILTER_MAX_BYTES (64u << 20)
#define KILN_FILTER_MAX_K     32u

/* The distinct token digests of one shard. */
typedef struct kiln_filter_set {
	uint64_t (*v)[2];
	size_t count, cap, sorted; /* v[0..sorted) sorted and distinct */
} kiln_filter_set;

void kiln_filter_set_free(kiln_filter_set *set);
void kiln_filter_set_clear(kiln_filter_set *set);

/* Adds one token text. */
int kiln_filter_add(kiln_filter_set *set, const char *token, size_t len);

/* Adds every token of a curated line (or of many lines): each "p", 1 to 10
 * digits, "_" and 26 characters of [a-z2-7], wherever it stands (in any
 * field, inside free text, the token part of a keep-domain value). A
 * superset of what kiln erase matches, so a filter never misses. */
int kiln_filter_scan(kiln_filter_set *set, const char *text, size_t len);

/* kiln_filter_scan's finding and hashing ahead of time, for a line that
 * will be added later (e.g. on another thread): the digests of text's
 * tokens appended to `list` in order, repeats kept, never compacted, so
 * list->count after each line marks where that line's digests end. */
int kiln_filter_collect(kiln_filter_set *list, const char *text, size_t len);
/* Adds list->v[first .. first + n) (from kiln_filter_collect) to the set:
 * the set kiln_filter_scan of those lines would give. */
int kiln_filter_add_digests(kiln_filter_set *set, const kiln_filter_set *list, size_t first, size_t n);

/* The token part of a needle ("p<N>_<26>", optionally followed by "@..."):
 * its length, or 0 when the text does not start with a token. */
size_t kiln_filter_token_part(const char *text, size_t len);

/* Appends the filter of the set's distinct tokens to out. */
int kiln_filter_encode(kiln_buf *out, kiln_filter_set *set);

/* A decoded filter: points into the bytes given to kiln_filter_decode. */
typedef struct kiln_filter {
	uint32_t k;
	uint64_t bits; /* m, a multiple of 64 */
	uint64_t tokens;
	const unsigned char *bitmap;
} kiln_filter;

/* Checks bytes[0..len) (anyone's) as a filter: KILN_EINVALID naming
 * `where` when they are not one. */
int kiln_filter_decode(kiln_filter *out, const void *bytes, size_t len, const char *where);

/* false: the shard holds no token with this text; true: it may. */
bool kiln_filter_may_hold(const kiln_filter *filter, const char *token, size_t len);

#endif
