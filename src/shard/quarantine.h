/* The quarantine: rejected records with their reasons, one zstd-compressed
 * JSON Lines object per topic/partition and flush, at
 * quarantine/<topic>/<partition>/<dataset>/<branch>/<first>-<last>.jsonl.zst
 * (deterministic names: a rerun overwrites the same object; two datasets or
 * branches reading one topic into one store never share one). Each line:
 *   {"topic":"t","partition":0,"offset":17,"code":"type","path":"age",
 *    "violations":[{"code":"type","path":"age"}],"record":"<raw record>"}
 * where "record" holds the raw bytes as a JSON string when they are UTF-8,
 * else "record_base64" holds them base64-encoded. The quarantine lives in the
 * restricted zone, like the raw zone: it holds the original record. */
#ifndef KILN_SHARD_QUARANTINE_H
#define KILN_SHARD_QUARANTINE_H

#include <stddef.h>
#include <stdint.h>

#include "contract/validate.h"
#include "store/store.h"

typedef struct kiln_quarantine kiln_quarantine;

/* dataset, branch: name the objects (borrowed: they must outlive q).
 * target_bytes: an object closes when its lines reach this size (0 = 64 MiB). */
int kiln_quarantine_new(kiln_quarantine **out, kiln_store *store, const char *dataset, const char *branch,
                        size_t target_bytes, int level, const char *spool_dir);
void kiln_quarantine_free(kiln_quarantine *q);

/* One rejected record (raw bytes may be NULL when it was too large to keep:
 * then only its coordinates and reasons are written). */
int kiln_quarantine_add(kiln_quarantine *q, const char *topic, int32_t partition, int64_t offset,
                        const kiln_report *report, const char *raw, size_t raw_len);

/* Writes the open object(s). */
int kiln_quarantine_flush(kiln_quarantine *q);

/* Objects written so far and their record count. */
uint64_t kiln_quarantine_objects(const kiln_quarantine *q);

#endif
