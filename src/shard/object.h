/* Shard objects: what a shard is (its descriptor, listed by the manifest)
 * and how it is named. A shard is content-addressed: its name is the
 * BLAKE2b-256 of its compressed bytes, and it is stored once at
 * shards/<hh>/<hash><extension> (<hh> the hash's first two digits;
 * docs/FORMATS.md). The format is a row: adding a shard format is one new
 * row and one line in object.c's registry; every other module builds and
 * parses names through the functions here. */
#ifndef KILN_SHARD_OBJECT_H
#define KILN_SHARD_OBJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kiln_source_range {
	const char *topic;
	int32_t partition;
	int64_t first, last; /* offsets covered, inclusive */
} kiln_source_range;

typedef struct kiln_shard_entry {
	char hash[65];      /* BLAKE2b-256 of the compressed bytes, lower-case hex */
	uint64_t bytes;     /* compressed */
	uint64_t raw_bytes; /* uncompressed JSON Lines */
	uint64_t records;
	const kiln_source_range *sources;
	size_t source_count;
	/* the shard's token filter (shard/filter.h, stored in the manifest
	 * beside the shard lists), or NULL: none known, a reader must look
	 * into the shard. Owned by whoever made the entry. */
	const unsigned char *filter;
	size_t filter_len;
} kiln_shard_entry;

/* A shard format: how its records are laid out and compressed, and the
 * extension its object names end with. */
typedef struct kiln_shard_format {
	const char *name;        /* dataset.json "shards.format": "jsonl" */
	const char *compression; /* dataset.json "shards.compression": "zstd" */
	const char *extension;   /* of the object name, with its dot: ".jsonl.zst" */
} kiln_shard_format;

/* JSON Lines in one zstd frame, the format every shard has today. */
extern const kiln_shard_format kiln_shard_jsonl_zst;

/* The directory of every shard object, relative to the store root. */
#define KILN_SHARD_DIR "shards/"

/* Room for the longest name kiln_shard_name writes without a prefix. */
#define KILN_SHARD_KEY_CAP 96

/* 64 lower-case hex digits and the string's end. */
bool kiln_shard_hash_valid(const char *hash);

/* Writes "<prefix>/shards/<hh>/<hash><extension>" into out (cap bytes);
 * without the "<prefix>/" when prefix is NULL (the store key). format NULL
 * is kiln_shard_jsonl_zst. KILN_EINVALID when hash is not valid or the name
 * does not fit (out is then ""). */
int kiln_shard_name(char *out, size_t cap, const char *prefix, const char *hash,
                    const kiln_shard_format *format);

/* The leaf of a shard object's name, "<hash><extension>" of a registered
 * format: true with the hash (and, when out_format is not NULL, the
 * format), false for any other name. */
bool kiln_shard_parse_file(const char *name, char out_hash[65], const kiln_shard_format **out_format);

/* A store key "shards/<hh>/<hash><extension>" (<hh> the hash's first two
 * digits): true with the hash (and format), false for any other key. */
bool kiln_shard_parse_key(const char *key, char out_hash[65], const kiln_shard_format **out_format);

#endif
