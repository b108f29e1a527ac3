/* The quarantine replay list of a branch: quarantine-replayed.json, the
 * offsets of quarantined records that `kiln quarantine replay` moved into
 * the branch's shards, per topic/partition as sorted inclusive ranges.
 * Cumulative along the branch (each replay commit carries the union, like
 * lineage.json), so a record listed there is never replayed again and its
 * quarantine line can be dropped (docs/FORMATS.md). One codec: parse and
 * render here. */
#ifndef KILN_MANIFEST_REPLAYED_H
#define KILN_MANIFEST_REPLAYED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "manifest/manifest.h"

#define KILN_REPLAYED_FILE "quarantine-replayed.json"

typedef struct kiln_replayed_range {
	int64_t first, last; /* inclusive, first <= last */
} kiln_replayed_range;

typedef struct kiln_replayed_part {
	char *source; /* owned: the kind of source whose quarantine held them; NULL: an object
	                 named without one (written before objects named their kind) */
	char *topic;  /* owned */
	int32_t partition;
	kiln_replayed_range *v; /* sorted, disjoint, not adjacent */
	size_t n, cap;
} kiln_replayed_part;

/* A set of source/topic/partition/offset; zeroed is empty. Parts sorted by
 * topic (bytewise), partition, then source (none first, then bytewise): a
 * file and a Kafka topic of one name each have their own offsets. */
typedef struct kiln_replayed {
	kiln_replayed_part *parts;
	size_t n, cap;
	uint64_t count; /* offsets in the set */
} kiln_replayed;

void kiln_replayed_free(kiln_replayed *set);

/* Adds one offset (any order; already there: nothing changes). source: the
 * kind, or NULL (kiln_quarantine_object's source). */
int kiln_replayed_add(kiln_replayed *set, const char *source, const char *topic, int32_t partition,
                      int64_t offset);

/* Whether the set holds the offset of that source kind (NULL: none). */
bool kiln_replayed_has(const kiln_replayed *set, const char *source, const char *topic, int32_t partition,
                       int64_t offset);

/* Adds every offset of `from` to `set`; with overlap (may be NULL) set to
 * whether any of them was there already. */
int kiln_replayed_merge(kiln_replayed *set, const kiln_replayed *from, bool *overlap);

/* out (empty) = the offsets of a that b does not hold, range by range. */
int kiln_replayed_subtract(kiln_replayed *out, const kiln_replayed *a, const kiln_replayed *b);

/* The file's text (empty set: "partitions": []). */
int kiln_replayed_render(kiln_buf *out, const kiln_replayed *set);

/* Parses the file's text into an empty set; errors name `where`
 * (KILN_EINVALID "WHERE: what", never more than the file's structure). */
int kiln_replayed_parse(kiln_replayed *out, const char *text, size_t len, const char *where);

/* The list at the tip of refs/heads/<dataset>/<branch> into an empty set:
 * empty when the branch or the file does not exist. */
int kiln_manifest_replayed(kiln_manifest *manifest, const char *dataset, const char *branch,
                           kiln_replayed *out);

#endif
