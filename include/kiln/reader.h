/* kiln's reader API for training jobs: open one dataset version
 * ("user-events@v3") of a manifest repository together with the object
 * store that holds its shards, list a split's shards, pick this worker's
 * share of them (deterministically, optionally shuffled by a seed), and
 * stream a shard's records as verified, decompressed JSON Lines.
 *
 * Errors: functions return 0 or a negative KILN_E* code (kiln/common.h) and
 * leave a one-line message in kiln_error_last(). KILN_ENOTFOUND: no such
 * repository, version or object; KILN_EINVALID: a bad spec, argument or URL,
 * a malformed manifest, or a shard whose bytes do not match its name;
 * KILN_ERETRY: the store failed after its retries (transient).
 *
 * Threads: a reader holds one decompression context and is not safe to use
 * from two threads at once; open one reader per thread (cheap) or serialise
 * calls. The shard formats and the assignment rule are in docs/FORMATS.md
 * ("Reading"); docs/READING.md has an example. */
#ifndef KILN_READER_H
#define KILN_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h" /* KILN_API, KILN_E*, kiln_split, kiln_store_options, kiln_store_sink */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_reader kiln_reader;

/* One shard of a version. Strings live in the reader. */
typedef struct kiln_reader_shard {
	char hash[65];      /* BLAKE2b-256 of the compressed bytes, 64 lower-case hex */
	uint64_t bytes;     /* compressed size */
	uint64_t raw_bytes; /* JSON Lines size */
	uint64_t records;
	char key[96];    /* store key: "shards/<hh>/<hash>.jsonl.zst" */
	const char *url; /* store URL + "/" + key; NULL when the reader has no store */
} kiln_reader_shard;

/* Opens the version `spec` ("ds", "ds@main", "ds@v3", "ds@<commit prefix>")
 * of the existing bare manifest repository at manifest_path (never created
 * here) and the store at store_url ("file:///data/store", "s3://bucket/p").
 * store_url may be NULL: listing works (urls are NULL), streaming fails
 * with KILN_EINVALID. opt: store options (may be NULL). On success *out owns
 * the repository and store handles until kiln_reader_close; on failure *out
 * is NULL. */
KILN_API int kiln_reader_open(kiln_reader **out, const char *manifest_path, const char *spec,
                              const char *store_url, const kiln_store_options *opt);

/* Closes the reader and frees everything it handed out. NULL is fine. */
KILN_API void kiln_reader_close(kiln_reader *r);

/* The dataset name and the resolved commit (40 hex) and ref
 * ("refs/tags/ds/v3"; "" when the spec named a commit). Owned by the reader. */
KILN_API const char *kiln_reader_dataset(const kiln_reader *r);
KILN_API const char *kiln_reader_commit(const kiln_reader *r);
KILN_API const char *kiln_reader_ref(const kiln_reader *r);

/* The shards of `split` in hash order. *out points into the reader (read
 * once per split, then cached): the caller neither frees nor changes it, and
 * it stays valid until kiln_reader_close. *n may be 0. */
KILN_API int kiln_reader_shards(kiln_reader *r, kiln_split split, kiln_reader_shard **out, size_t *n);

/* Which of in[0..n) rank `rank` of `world` workers reads, as indices into
 * `in`, written to out_idx (the caller's array, room for n / world + 1
 * entries suffices) in reading order; *out_n gets their count. Without
 * shuffle the order is in[]'s; with shuffle, shards are ordered by
 * BLAKE2b-64(shuffle_seed as 8 bytes little-endian || 0x1F || hash hex)
 * ascending (docs/FORMATS.md, "Reading"). Then the i-th shard of that order
 * goes to rank i % world. Pure and deterministic: every rank computes the
 * same order, and every shard goes to exactly one rank. KILN_EINVALID when
 * world is 0 or rank >= world; KILN_ENOMEM. */
KILN_API int kiln_reader_assign(const kiln_reader_shard *in, size_t n, unsigned rank, unsigned world,
                                uint64_t shuffle_seed, bool shuffle, size_t *out_idx, size_t *out_n);

/* Downloads shard s through the store into an anonymous temporary file
 * ($TMPDIR, else /tmp), checks that the BLAKE2b-256 of the bytes equals
 * s->hash, then decompresses and calls sink with successive chunks of the
 * JSON Lines text. Nothing reaches sink before the hash is verified: a
 * mismatch is KILN_EINVALID "shard <hash>: content hash mismatch (corrupt
 * or tampered)". A non-zero return from sink stops the stream and is
 * returned. s must come from kiln_reader_shards of this reader (or carry a
 * valid hash and its size: the object read is the one the hash names). */
KILN_API int kiln_reader_stream(kiln_reader *r, const kiln_reader_shard *s, kiln_store_sink sink, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
