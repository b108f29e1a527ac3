/* The verifying scan behind `kiln erase --verify`: every object of a store
 * under shards/, raw/ and quarantine/ searched for one subject, reporting
 * where it was found (object key and record index), never what. */
#ifndef KILN_ERASE_SCAN_H
#define KILN_ERASE_SCAN_H

#include <stdint.h>

#include "erase/subject.h"
#include "store/store.h"

typedef struct kiln_scan_hit {
	const char *key; /* object key (valid during the callback) */
	uint64_t record; /* record index: 0-based line of the decompressed object */
} kiln_scan_hit;

/* Scans EVERY object of the store under shards/ (each line with
 * kiln_subject_in_curated and kiln_subject_in_raw), raw/ (every record, as
 * kiln_zone_erase_raw matches: kiln_zone_raw_record_holds) and quarantine/
 * (every line's record), calling cb per hit with the key and record index
 * only. An object that cannot be decoded is searched as bytes
 * (the needles byte-wise, and kiln_zone_bytes_hold: as they are and
 * decompressed when they are a zstd frame); a hit there names the record
 * where decoding stopped. Objects are visited in key order per prefix. A non-zero
 * return of cb stops the scan and is returned. Returns the number of hits
 * (>= 0) or a negative error (store errors; an object gone since the
 * listing is skipped); out_objects (may be NULL) gets the objects scanned. */
int64_t kiln_erase_scan_store(kiln_store *store, kiln_subject *s,
                              int (*cb)(void *ctx, const kiln_scan_hit *hit), void *ctx,
                              uint64_t *out_objects);

#endif
