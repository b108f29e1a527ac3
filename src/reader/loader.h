/* The cursor's read-ahead: one background thread per cursor that fetches
 * the next shard from the store, checks its BLAKE2b-256 and size against the
 * manifest, and decompresses it into memory while the caller still reads
 * the current one, so that downloading, hashing and decompressing overlap
 * with the training job's own work. The thread never touches the reader
 * (only the store, whose operations are thread-safe), so the reader stays
 * usable from the caller's thread. Internal to the reader. */
#ifndef KILN_READER_LOADER_H
#define KILN_READER_LOADER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "kiln/reader.h"
#include "store/store.h"

typedef struct kiln_loader kiln_loader;

/* sync: no thread; each shard is loaded by kiln_loader_take in the caller's
 * thread (a process that may use one CPU only gains nothing from the thread,
 * and the text is still in the cache when the caller reads it). */
int kiln_loader_new(kiln_loader **out, kiln_store *store, bool sync);

/* Waits for the shard in hand (if any) and stops the thread. NULL is fine. */
void kiln_loader_free(kiln_loader *l);

/* Starts loading s (known to the caller as `id`) in the background unless
 * it is the shard in hand or being loaded. */
int kiln_loader_start(kiln_loader *l, const kiln_reader_shard *s, size_t id);

/* The text of shard `id` (s): waits for it (starting it first when another
 * shard is in hand), swaps it into *text and the offsets of its newlines into
 * *ends (size_t each, in order), and sets *lines to its lines (its newlines,
 * plus one for a last line without one). 0, or the load's error with its
 * message set in the caller's thread (the next take of the same shard loads
 * it again). */
int kiln_loader_take(kiln_loader *l, const kiln_reader_shard *s, size_t id, kiln_buf *text, kiln_buf *ends,
                     size_t *lines);

#endif
