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
 * with KILN_EINVALID. opt: store options (may be NULL; KILN_EINVALID when
 * opt->version is not KILN_STORE_OPTIONS_VERSION). On success *out owns
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

/* ---- records, epoch by epoch, with exact resume ------------------------------ */

/* A cursor yields one worker's records of one split for one epoch, one at a
 * time, and can say exactly where it is (kiln_cursor_state) so a restored
 * cursor yields exactly the records the original would have yielded next,
 * in the same order. The rule (docs/FORMATS.md, "Reading"): the shards are
 * assigned as by kiln_reader_assign, shuffled (when `shuffle`) with the
 * epoch's seed, which is `seed` for epoch 0 and else
 *   uint64_le(BLAKE2b-256(uint64_le_bytes(seed) || 0x1E || uint64_le_bytes(epoch))[0:8]);
 * the records of each shard come in file order, through an optional
 * shuffle buffer of `shuffle_buffer` records (fill it, then yield a
 * uniformly drawn one and put the next record in its place; the draws come
 * from splitmix64 seeded with the epoch's seed XOR (rank * 0x9E3779B97F4A7C15)). */
typedef struct kiln_cursor kiln_cursor;

/* `version` comes first and is KILN_CURSOR_OPTIONS_VERSION: start from
 * KILN_CURSOR_OPTIONS_INIT; kiln_cursor_open refuses another version
 * (KILN_EINVALID). */
#define KILN_CURSOR_OPTIONS_VERSION 1
#define KILN_CURSOR_OPTIONS_INIT                                                                             \
	{                                                                                                    \
		.version = KILN_CURSOR_OPTIONS_VERSION                                                       \
	}
typedef struct kiln_cursor_options {
	unsigned version; /* KILN_CURSOR_OPTIONS_VERSION */
	kiln_split split;
	unsigned rank, world; /* world 0 is taken as 1 */
	uint64_t seed;
	bool shuffle; /* shuffle the shard order by seed and epoch */
	uint64_t epoch;
	size_t shuffle_buffer; /* records held for the in-shard shuffle; 0: none */
} kiln_cursor_options;

/* A cursor over r. The cursor holds r: kiln_reader_close while cursors are
 * open is safe (their read-ahead threads stop when each cursor closes, and
 * the reader is freed with the last of them); a cursor whose reader was
 * closed refuses to read (KILN_EINVALID "cursor: its reader ... is closed"),
 * and must still be closed. */
KILN_API int kiln_cursor_open(kiln_cursor **out, kiln_reader *r, const kiln_cursor_options *o);
KILN_API void kiln_cursor_close(kiln_cursor *c);

/* The next record, without its newline: 1 with *record and *len set (valid
 * until the next call), 0 at the end of the epoch, < 0 an error (a shard
 * that fails verification yields none of its records). */
KILN_API int kiln_cursor_next(kiln_cursor *c, const char **record, size_t *len);

/* The room a state needs: KILN_CURSOR_STATE_SIZE bytes always suffice for
 * kiln_cursor_state; kiln_cursor_restore refuses a text longer than
 * KILN_CURSOR_STATE_MAX bytes. */
#define KILN_CURSOR_STATE_SIZE 512
#define KILN_CURSOR_STATE_MAX  4096

/* Where the cursor is, as one line of JSON (at most cap bytes with the
 * terminator; KILN_ELIMIT when it does not fit; KILN_CURSOR_STATE_SIZE
 * always suffices):
 * {"kiln_cursor":1,"commit":...,"split":...,"rank":R,"world":W,"seed":S,
 *  "shuffle":B,"epoch":E,"shuffle_buffer":N,"yielded":K,"shard":I,"line":L} */
KILN_API int kiln_cursor_state(const kiln_cursor *c, char *out, size_t cap);

/* The same state after the epoch's first `yielded` records (at most
 * kiln_cursor_records), whatever the cursor's own position: for a program
 * that takes records in batches and hands them on one at a time. The shard
 * and line come from the manifest's record counts: `yielded` alone fixes
 * the position. */
KILN_API int kiln_cursor_state_at(const kiln_cursor *c, uint64_t yielded, char *out, size_t cap);

/* The records this cursor has yielded in its epoch (after a restore, the
 * state's count). */
KILN_API uint64_t kiln_cursor_yielded(const kiln_cursor *c);

/* The records this cursor's epoch holds (its shards' counts in the manifest). */
KILN_API uint64_t kiln_cursor_records(const kiln_cursor *c);

/* Up to max_records records at once (at least one, and no more once
 * max_bytes are gathered), each followed by a newline, in *data (*len
 * bytes, valid until the next call): 1 with *count > 0, 0 at the end of the
 * epoch, < 0 an error. Records gathered before an error are handed over
 * first; the next call meets the error. For bindings where a call per
 * record costs more than the record (Python's ctypes). */
KILN_API int kiln_cursor_next_batch(kiln_cursor *c, size_t max_records, size_t max_bytes, const char **data,
                                    size_t *len, size_t *count);

/* The record lengths of the last kiln_cursor_next_batch as a Python struct
 * format: "<n>sx" per record (its n bytes, then its newline; n in decimal),
 * in *format (*len bytes, no terminator, valid until the next call of
 * either function; "" after a call that handed over nothing, and after a
 * kiln_cursor_next or kiln_cursor_restore since). 0, or
 * KILN_ENOMEM. For the Python binding: struct.Struct(format).unpack_from()
 * of the batch's bytes gives its records as bytes without a scan in Python
 * (bytes.split looks at every byte in a Python-level loop). */
KILN_API int kiln_cursor_batch_format(kiln_cursor *c, const char **format, size_t *len);

/* Moves a cursor just opened with the same version, split, rank, world,
 * seed, shuffle, epoch and shuffle_buffer to the state given (a C string):
 * KILN_EINVALID naming the first that differs, or a state that is not one
 * (anything but one JSON object holding each of the keys above once and no
 * other; a number that is negative, fractional or out of its range; bytes
 * after the object other than whitespace), or one whose shard and line are
 * not where its yielded count leads. Without a
 * shuffle buffer the cursor goes straight to the shard and line; with one
 * it replays the epoch's first K records (deterministic, so exact). */
KILN_API int kiln_cursor_restore(kiln_cursor *c, const char *state);

/* ---- what a version is, and whether to trust it ---------------------------- */

/* A version's counts, from its stats.json (docs/FORMATS.md). */
typedef struct kiln_reader_split_stats {
	uint64_t records, shards, bytes, raw_bytes; /* bytes: compressed; raw_bytes: JSON Lines */
} kiln_reader_split_stats;

/* records_in = valid + quarantined + erased; erased: curated records `kiln
 * erase` removed (docs/ERASURE.md), 0 for a version never erased. */
typedef struct kiln_reader_stats {
	uint64_t records_in, valid, quarantined;
	kiln_reader_split_stats splits[KILN_SPLIT_COUNT]; /* by kiln_split */
	uint64_t erased;                                  /* last: the layout before it is unchanged */
} kiln_reader_stats;

KILN_API int kiln_reader_read_stats(kiln_reader *r, kiln_reader_stats *out);

/* How a version was made, from its dataset.json: strings as written there
 * ("" when absent), owned by the reader until kiln_reader_close. key_id
 * names the pseudonymisation key (a fingerprint, never the key). */
typedef struct kiln_reader_definition {
	const char *contract_id, *contract_version;
	const char *token_scheme, *key_id, *key_version;
	const char *split_scheme, *split_key, *split_salt;
	const char *shard_format, *shard_compression;
} kiln_reader_definition;

KILN_API int kiln_reader_read_definition(kiln_reader *r, kiln_reader_definition *out);

typedef enum kiln_signature {
	KILN_SIGNATURE_NONE = 0, /* unsigned */
	KILN_SIGNATURE_TAMPERED, /* a signature that does not match the content */
	KILN_SIGNATURE_GOOD      /* a good signature, by `fingerprint` */
} kiln_signature;

typedef struct kiln_reader_trust {
	kiln_signature signature; /* the tag's for a promoted version, else the commit's */
	int trusted;              /* GOOD and by one of the trusted keys */
	int must_be_signed;       /* the repository's kiln.signed covers this version */
	char fingerprint[64];     /* GOOD: the signer, "SHA256:..." as ssh-keygen -l prints */
	unsigned problems;        /* problems found (0: the version can be trusted) */
	uint64_t shards_ok;       /* deep: shards the store gave back intact */
} kiln_reader_trust;

/* Called with each problem found, one line without a newline; the text
 * lives until it returns. */
typedef void (*kiln_reader_report)(void *ctx, const char *problem);

/* What `kiln verify` checks, for a program that must trust a version before
 * training on it: that a tag is bound to its version name, the signature
 * (against the ssh-ed25519 keys of trusted_keys, an allowed-signers file or
 * a .pub; NULL for none), the tree (dataset.json names the dataset,
 * stats.json balances and agrees with the shard lists) and, when deep is
 * non-zero, that every shard in the store has its size and hash (needs a
 * store). Each problem goes to report (may be NULL) and is counted in
 * out->problems: an unsigned version is one when trusted keys were given or
 * the repository requires signing; a tampered or untrusted signature is one.
 * Returns 0 when the checks ran (whatever they found), or the error that
 * stopped them (an unreadable repository, store or key file). */
KILN_API int kiln_reader_verify(kiln_reader *r, const char *trusted_keys, int deep, kiln_reader_trust *out,
                                kiln_reader_report report, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
