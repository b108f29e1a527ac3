/* Train/dev/test assignment, scheme blake2b64-mod10000-v1 (docs/FORMATS.md):
 * bucket = uint64_le(BLAKE2b-256(salt || 0x1F || value)[0:8]) mod 10000;
 * train if bucket < train*10000, dev if < (train+dev)*10000, else test.
 * `value` is the split key's value in the curated record. */
#ifndef KILN_SHARD_SPLIT_H
#define KILN_SHARD_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/common.h" /* kiln_split, kiln_split_name, kiln_split_from_name */

#define KILN_SPLIT_SCHEME "blake2b64-mod10000-v1"

typedef struct kiln_splitter {
	const char *salt;
	size_t salt_len;
	uint32_t train_below, dev_below; /* bucket thresholds: train*10000, (train+dev)*10000 */
	double ratios[KILN_SPLIT_COUNT];
} kiln_splitter;

/* Ratios must be >= 0, each ratio*10000 an integer, and sum to 1. Returns
 * KILN_EINVALID with a message naming the problem. The salt is borrowed. */
int kiln_splitter_init(kiln_splitter *out, const char *salt, const double ratios[KILN_SPLIT_COUNT]);

/* The bucket (0..9999) of value[0..len). */
uint32_t kiln_split_bucket(const kiln_splitter *splitter, const char *value, size_t len);

kiln_split kiln_split_assign(const kiln_splitter *splitter, const char *value, size_t len);

#endif
