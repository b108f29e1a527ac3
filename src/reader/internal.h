/* The reader's state, shared by reader.c (opening, listing, assignment,
 * streaming) and about.c (a version's stats, definition and trust). */
#ifndef KILN_READER_INTERNAL_H
#define KILN_READER_INTERNAL_H

#include <stdbool.h>
#include <zstd.h>

#include "kiln/reader.h"
#include "manifest/format.h"
#include "manifest/version.h"
#include "store/store.h"

struct kiln_reader {
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

#endif
