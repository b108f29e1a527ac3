/* Erasing a subject from the restricted zones: the raw zone
 * (raw/<topic>/...) and the quarantine (quarantine/<topic>/...). An object
 * holding the subject's records is rewritten under the same key with the
 * other records, each line byte-exactly as the zone's writer renders it (a
 * later replay, gc or retention sees a normal object), or deleted when
 * nothing else remains. Matching is kiln_subject_in_raw (erase/subject.h). */
#ifndef KILN_ERASE_ZONES_H
#define KILN_ERASE_ZONES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "erase/subject.h"
#include "manifest/ledger.h"
#include "shard/quarantine.h"
#include "shard/raw.h"
#include "store/store.h"

/* What erasing a zone did: objects read, objects rewritten without the
 * subject's records (same key), objects deleted (every record was the
 * subject's), records erased. The ledger records it as it is. */
typedef kiln_ledger_zone kiln_zone_stats;

/* Raw zone: every object raw/<topic>/... of the topic names given (the
 * dataset's lineage topics and file names; kiln_raw_list). A record matches
 * when kiln_subject_in_raw holds for its value, its key or a header's value.
 * An object with a match is rewritten under the same key with the other
 * records (kiln_raw_render's lines, compressed as one zstd frame with
 * checksum, level 3), or deleted when none remains. dry_run: count only,
 * nothing written or deleted. An object that does not decode: its bytes
 * (decompressed when they are one zstd frame, and as they are) are searched
 * with kiln_subject_in_raw as one record; on a match the whole object is
 * deleted (counted as one record), else left. *out (may be NULL) is set,
 * not added to. Store errors stop (negative). */
int kiln_zone_erase_raw(kiln_store *store, kiln_subject *s, const char *const *topics, size_t n, bool dry_run,
                        kiln_zone_stats *out);

/* Quarantine: every object quarantine/<topic>/<partition>/<dataset>/<branch>/...
 * of the topics and the dataset, and the older
 * quarantine/<topic>/<partition>/<first>-<last> objects of those topics;
 * the same rules on each line's record bytes ("record", or the decoded
 * "record_base64"; a line whose record is null does not match). */
int kiln_zone_erase_quarantine(kiln_store *store, kiln_subject *s, const char *dataset,
                               const char *const *topics, size_t n, bool dry_run, kiln_zone_stats *out);

/* Whether a quarantine line goes: called first with line NULL for each
 * object (false: the object is not read), then per line of the objects it
 * took (true: the line goes). */
typedef bool (*kiln_zone_line_drop)(void *ctx, const kiln_quarantine_object *obj,
                                    const kiln_quarantine_line *line);

/* The same rewrite of the quarantine objects of dataset (and the older
 * objects without a dataset) with another rule: the lines `drop` says go
 * (kiln quarantine replay drops the lines it moved into shards). An object
 * that does not decode is left as it is. */
int kiln_zone_drop_quarantine_lines(kiln_store *store, const char *dataset, kiln_zone_line_drop drop,
                                    void *ctx, bool dry_run, kiln_zone_stats *out);

/* Whether one raw-zone record holds the subject: its value, its key or a
 * header's value (kiln_subject_in_raw). The one rule both the erasure and
 * the verifying scan use. */
bool kiln_zone_raw_record_holds(kiln_subject *s, const kiln_raw_record *r);

/* For erase/ (scan.c): the object `key`, whole, into out (at most 1 GiB:
 * KILN_ELIMIT beyond, naming the key). */
int kiln_zone_load(kiln_store *store, const char *key, kiln_buf *out);

/* For erase/: whether bytes that do not decode as their zone's object hold
 * the subject: the bytes as they are, and when they begin one zstd frame
 * what it decompresses to (up to 1 GiB, as far as it goes). */
bool kiln_zone_bytes_hold(kiln_subject *s, const void *bytes, size_t len);

/* For erase/: decompresses bytes that are exactly one zstd frame into out
 * (cleared first; at most 1 GiB). 0, or KILN_EINVALID when they are not
 * (out then holds what decompressed before the error). */
int kiln_zone_inflate(const void *zst, size_t len, kiln_buf *out);

#endif
