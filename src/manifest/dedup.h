/* The dedup index of a branch (pipeline `dedup:`, docs/PIPELINES.md): the
 * 16-byte key hashes the branch committed within the window, each with its
 * commit time, plus the hashes of the snapshot being built (pending). The
 * committed part is persisted with each commit as segments under dedup/ in
 * the commit tree (docs/FORMATS.md): one segment per commit, its new keys
 * sorted, pruned to the window at each commit.
 *
 * States: a key is absent, pending (seen since the last commit) or
 * committed at a time. kiln_dedup_seen() makes an absent key pending;
 * kiln_dedup_commit() makes every pending key committed; kiln_dedup_rollback()
 * forgets them. Memory: every key takes one 24-byte slot in a table kept
 * between 3/8 and 3/4 full (at least 1024 slots), so 32 to 64 bytes per
 * key (measured: 10 million keys, 384 MiB; 576 MiB while the table
 * doubles); a pending key takes a slot in a second such table and 16 to 32
 * bytes in the doubling list its segment is made from (48 to 96 bytes),
 * kept for the next snapshot. max_keys bounds committed plus pending keys.
 * Not thread-safe: one owner. */
#ifndef KILN_MANIFEST_DEDUP_H
#define KILN_MANIFEST_DEDUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

#define KILN_DEDUP_HASH_LEN  16
#define KILN_DEDUP_DIR       "dedup"
#define KILN_DEDUP_EXTENSION ".keys"

typedef struct kiln_dedup kiln_dedup;

/* An empty index whose committed keys count for window_ms (> 0). */
int kiln_dedup_new(kiln_dedup **out, int64_t window_ms);
void kiln_dedup_free(kiln_dedup *dedup);

/* Whether key is a duplicate at now_ms: 1 when it is pending or was
 * committed at or after now_ms - window; else 0 and it is pending now.
 * KILN_ENOMEM; KILN_ELIMIT when it would be pending while the index holds
 * max_keys keys already (committed and pending: nothing changed). */
int kiln_dedup_seen(kiln_dedup *dedup, const unsigned char key[KILN_DEDUP_HASH_LEN], int64_t now_ms);

/* Adds a committed key (loading a segment); a key already there keeps the
 * later time. KILN_ELIMIT when a new key would make more than max_keys
 * committed ones. */
int kiln_dedup_add(kiln_dedup *dedup, const unsigned char key[KILN_DEDUP_HASH_LEN], int64_t committed_ms);

/* The pending keys, sorted ascending, count in *out_count (borrowed until
 * the next call on the index; NULL when none). */
const unsigned char (*kiln_dedup_pending(kiln_dedup *dedup, size_t *out_count))[KILN_DEDUP_HASH_LEN];

/* The pending keys become committed at committed_ms; committed keys older
 * than committed_ms - window are dropped. */
int kiln_dedup_commit(kiln_dedup *dedup, int64_t committed_ms);
/* Forgets the pending keys. */
void kiln_dedup_rollback(kiln_dedup *dedup);
/* Forgets everything. */
void kiln_dedup_clear(kiln_dedup *dedup);

int64_t kiln_dedup_window_ms(const kiln_dedup *dedup);
/* The most keys the index holds (0, the default: no bound): a key that
 * would go past it is refused with KILN_ELIMIT, never dropped. */
void kiln_dedup_set_max_keys(kiln_dedup *dedup, size_t max_keys);
size_t kiln_dedup_max_keys(const kiln_dedup *dedup);
/* Keys held: committed ones (still in memory) and pending ones. */
size_t kiln_dedup_committed_count(const kiln_dedup *dedup);
size_t kiln_dedup_pending_count(const kiln_dedup *dedup);

/* ---- segments (dedup/<ms>-<id>.keys in a commit tree) ---------------------- */
/* Bytes: "KILNDDP1", the commit time (ms since the epoch, u64 LE), the key
 * count (u64 LE), then the keys, 16 bytes each, strictly ascending. */
#define KILN_DEDUP_SEGMENT_HEADER 24

/* Appends the segment of count keys (sorted ascending, no repeats) to out. */
int kiln_dedup_segment_encode(kiln_buf *out, const unsigned char (*keys)[KILN_DEDUP_HASH_LEN], size_t count,
                              int64_t committed_ms);

/* Checks a segment's bytes (read from the manifest: hostile) and gives its
 * time and its keys (pointing into bytes). KILN_EINVALID naming `where`
 * and what is wrong. */
int kiln_dedup_segment_decode(const void *bytes, size_t len, const char *where, int64_t *out_ms,
                              const unsigned char (**out_keys)[KILN_DEDUP_HASH_LEN], size_t *out_count);

/* A segment's tree entry name "<ms, 13 digits>-<16 hex>.keys" into out
 * (cap >= 40) from its time and the first 8 bytes of its blob id. */
void kiln_dedup_segment_name(char *out, size_t cap, int64_t committed_ms, const unsigned char id[8]);
/* The commit time a segment name carries; -1 for a name that is not one. */
int64_t kiln_dedup_segment_name_ms(const char *name);

/* ---- the branch tip's index ------------------------------------------------- */
struct kiln_manifest;

/* Clears dedup and loads the committed keys of the tip of dataset/branch
 * whose segments are no older than now_ms - window (none without a tip or
 * a dedup/ tree, and none when the tip's dataset.json records a dedup.key
 * other than key, the text kiln_mfmt_dedup_key_render makes: that index
 * hashed other fields, and the next commit drops it); out_tip: the tip's
 * id, "" without a tip (the snapshot's dedup_base). Errors name the segment
 * (manifest: REF:dedup/NAME). KILN_ELIMIT past the index's max_keys. */
int kiln_manifest_dedup_load(struct kiln_manifest *manifest, const char *dataset, const char *branch,
                             int64_t now_ms, const char *key, kiln_dedup *dedup, char out_tip[41]);

#endif
