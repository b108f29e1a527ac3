/* The reader's state, shared by reader.c (opening, listing, assignment,
 * streaming), cursor.c and about.c (a version's stats, definition and trust).
 *
 * Lifetime: a reader is held by its opener and by each open cursor (refs);
 * kiln_reader_close drops the opener's hold and marks it closed, and the
 * last release frees it. A cursor's read-ahead threads use the store until
 * the cursor closes, so the store lives as long as the last cursor; a
 * cursor of a closed reader refuses to read (KILN_EINVALID). */
#ifndef KILN_READER_INTERNAL_H
#define KILN_READER_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <zstd.h>

#include "kiln/reader.h"
#include "manifest/format.h"
#include "manifest/version.h"
#include "store/store.h"

struct kiln_reader {
	atomic_uint refs;   /* the opener's (until kiln_reader_close) + one per open cursor */
	atomic_bool closed; /* kiln_reader_close was called */
	kiln_manifest *manifest;
	kiln_store *store; /* NULL: listing only */
	char *store_url;   /* as given, without trailing '/' */
	kiln_version version;
	char *spec;                   /* as opened, for messages */
	kiln_mfmt_dataset definition; /* parsed on first use (have_definition) */
	bool have_definition;
	kiln_reader_shard *shards[KILN_SPLIT_COUNT];
	size_t nshards[KILN_SPLIT_COUNT];
	char *urls[KILN_SPLIT_COUNT]; /* every url of a split in one block */
	bool loaded[KILN_SPLIT_COUNT];
	ZSTD_DCtx *dctx;
	char *in_chunk, *out_chunk;
};

/* A cursor state, decoded (kiln_cursor_state's JSON, include/kiln/reader.h). */
typedef struct kiln_cursor_fields {
	char commit[41];
	kiln_split split;
	unsigned rank, world;
	uint64_t seed;
	bool shuffle;
	uint64_t epoch, shuffle_buffer;
	uint64_t yielded, shard, line;
} kiln_cursor_fields;

/* The state's one line of JSON into out[0..cap): 0, or KILN_ELIMIT. */
int kiln_cursor_state_encode(char *out, size_t cap, const kiln_cursor_fields *f);

/* The one decoder of a state (text[0..len), hostile): exactly one JSON object
 * holding each key once (compared unescaped) and no other, whole numbers in
 * their range, rank below world, nothing after it but whitespace. 0 with
 * *out set, or KILN_EINVALID (*out zeroed) with a line that names the key or
 * the byte offset, never a value. */
int kiln_cursor_state_decode(kiln_cursor_fields *out, const char *text, size_t len);

/* A hold on r for a cursor; kiln_reader_release drops one (the last frees r). */
void kiln_reader_hold(kiln_reader *r);
void kiln_reader_release(kiln_reader *r);

#endif
