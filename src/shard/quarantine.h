/* The quarantine: rejected records with their reasons, one zstd-compressed
 * JSON Lines object per topic/partition and flush, at
 * quarantine/<topic>/<partition>/<dataset>/<branch>/<first>-<last>[.<kind>].jsonl.zst
 * (a file source's without the kind; deterministic names: a rerun overwrites the same object; two datasets or
 * branches reading one topic into one store, or two kinds of source of one
 * name on one branch, never share one). Each line:
 *   {"topic":"t","partition":0,"offset":17,"code":"type","path":"age",
 *    "violations":[{"code":"type","path":"age"}],"record":"<raw record>"}
 * where "record" holds the raw bytes as a JSON string when they are UTF-8,
 * else "record_base64" holds them base64-encoded. The quarantine lives in the
 * restricted zone, like the raw zone: it holds the original record. */
#ifndef KILN_SHARD_QUARANTINE_H
#define KILN_SHARD_QUARANTINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/validate.h"
#include "core/buf.h"
#include "store/store.h"

/* One line of a quarantine object. code/path repeat violations[0]; a
 * decoded violation's offset is 0 (objects do not hold it). */
typedef struct kiln_quarantine_line {
	const char *topic; /* NUL-terminated */
	int32_t partition;
	int64_t offset;
	kiln_reject code; /* the first violation */
	const char *path; /* NUL-terminated */
	const kiln_violation *violations;
	size_t violation_count; /* 1..KILN_VIOLATIONS_MAX */
	uint64_t count;         /* violations found (>= violation_count) */
	const void *record;     /* the bytes as they arrived; NULL when record_null */
	size_t record_len;
	bool record_null;   /* no bytes kept (a tombstone, a record over max_record_bytes) */
	bool record_base64; /* decoded from "record_base64" (ignored when rendering: the
	                       bytes decide, UTF-8 as "record", else base64) */
} kiln_quarantine_line;

/* One quarantine object as the store lists it. dataset and branch are NULL
 * for the older names quarantine/<topic>/<partition>/<first>-<last>.jsonl.zst;
 * source (the kind of source that wrote it, "kafka", "file", ...) is NULL
 * for names without it (<first>-<last>.jsonl.zst: written before objects
 * named their kind, when one name on a branch had one kind). */
typedef struct kiln_quarantine_object {
	const char *key, *topic, *dataset, *branch, *source;
	int32_t partition;
	int64_t first, last;
	uint64_t size;
	int64_t mtime; /* seconds since the epoch, 0 when the store cannot tell */
} kiln_quarantine_object;

typedef struct kiln_quarantine kiln_quarantine;

/* Whether s[0..n) is a source kind ([a-z][a-z0-9_-]{0,31}: "kafka",
 * "file", "stdin", ...), as quarantine object names, lineage.json and
 * quarantine-replayed.json carry it. */
bool kiln_quarantine_kind_valid(const char *s, size_t n);

/* dataset, branch and kind (the source's kind, [a-z][a-z0-9_-]{0,31}; NULL:
 * names without it, as before) name the objects (borrowed: they must
 * outlive q). target_bytes: an object closes when its lines reach this size
 * (0 = 64 MiB). */
int kiln_quarantine_new(kiln_quarantine **out, kiln_store *store, const char *dataset, const char *branch,
                        const char *kind, size_t target_bytes, int level, const char *spool_dir);
void kiln_quarantine_free(kiln_quarantine *q);

/* One rejected record (raw bytes may be NULL when it was too large to keep:
 * then only its coordinates and reasons are written). */
int kiln_quarantine_add(kiln_quarantine *q, const char *topic, int32_t partition, int64_t offset,
                        const kiln_report *report, const char *raw, size_t raw_len);

/* Writes the open object(s). */
int kiln_quarantine_flush(kiln_quarantine *q);

/* Objects written so far and their record count. */
uint64_t kiln_quarantine_objects(const kiln_quarantine *q);

/* Appends `line` as one line of an object (with its '\n') to out: exactly
 * the bytes kiln_quarantine_add writes for it (the one encoder of a line).
 * KILN_EINVALID when it holds no violation, more than
 * KILN_VIOLATIONS_MAX, a count below them or a topic that is not UTF-8. */
int kiln_quarantine_render_line(kiln_buf *out, const kiln_quarantine_line *line);

/* Decodes a whole object's bytes, calling cb per line in order; the line
 * and everything it points to live until cb returns. Input that is not
 * exactly one complete zstd frame with a matching checksum is refused
 * before cb is first called; a malformed line (bad JSON or base64, a
 * missing, doubled or unknown member, code/path unlike the first
 * violation) stops decoding there with KILN_EINVALID "WHERE: line N: what"
 * (never a value), after the lines before it were passed. A non-zero
 * return from cb stops decoding and is returned. */
int kiln_quarantine_decode(const void *zst, size_t len, const char *where,
                           int (*cb)(void *ctx, const kiln_quarantine_line *line), void *ctx);

/* Reads the object `key` from the store and decodes it (errors name the key;
 * objects over 1 GiB are refused with KILN_ELIMIT). */
int kiln_quarantine_read(kiln_store *store, const char *key,
                         int (*cb)(void *ctx, const kiln_quarantine_line *line), void *ctx);

/* Lists quarantine objects of topic (NULL = all) and dataset (NULL = all;
 * the older names, which have no dataset, are listed for any dataset),
 * sorted by key (bytewise). Keys under quarantine/ whose name does not
 * parse are skipped. The object passed to cb lives until it returns; a
 * non-zero return stops the listing and is returned. */
int kiln_quarantine_list(kiln_store *store, const char *topic, const char *dataset,
                         int (*cb)(void *ctx, const kiln_quarantine_object *obj), void *ctx);

/* Stores lines[0..len) (whole lines) as one object at key: one zstd frame
 * with content size and checksum at `level` (0 = 3), as the writer does. */
int kiln_quarantine_put(kiln_store *store, const char *key, const kiln_buf *lines, int level);

#endif
