/* Shard object names (see object.h): the format rows, one builder and one
 * parser of "shards/<hh>/<hash><extension>". */
#include "shard/object.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

#define HASH_HEX 64

const kiln_shard_format kiln_shard_jsonl_zst = {
    .name = "jsonl",
    .compression = "zstd",
    .extension = ".jsonl.zst",
};

/* Every format a name may have. A new format: its row, and one line here. */
static const kiln_shard_format *const formats[] = {
    &kiln_shard_jsonl_zst,
};

static bool lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

bool kiln_shard_hash_valid(const char *hash)
{
	return hash && strnlen(hash, HASH_HEX + 1) == HASH_HEX && lower_hex(hash, HASH_HEX);
}

int kiln_shard_name(char *out, size_t cap, const char *prefix, const char *hash,
                    const kiln_shard_format *format)
{
	int n;

	if (cap)
		out[0] = '\0';
	if (!kiln_shard_hash_valid(hash))
		return kiln_error_set(KILN_EINVALID, "a shard hash must be 64 lower-case hex digits");
	if (!format)
		format = &kiln_shard_jsonl_zst;
	n = snprintf(out, cap, "%s%s" KILN_SHARD_DIR "%.2s/%s%s", prefix ? prefix : "", prefix ? "/" : "",
	             hash, hash, format->extension);
	if (n < 0 || (size_t)n >= cap) {
		if (cap)
			out[0] = '\0';
		return kiln_error_set(KILN_EINVALID, "shard %s: its object name is too long", hash);
	}
	return 0;
}

bool kiln_shard_parse_file(const char *name, char out_hash[65], const kiln_shard_format **out_format)
{
	if (strnlen(name, HASH_HEX) < HASH_HEX || !lower_hex(name, HASH_HEX))
		return false;
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		if (strcmp(name + HASH_HEX, formats[i]->extension) != 0)
			continue;
		memcpy(out_hash, name, HASH_HEX);
		out_hash[HASH_HEX] = '\0';
		if (out_format)
			*out_format = formats[i];
		return true;
	}
	return false;
}

bool kiln_shard_parse_key(const char *key, char out_hash[65], const kiln_shard_format **out_format)
{
	const size_t dir = sizeof(KILN_SHARD_DIR) - 1;

	/* "shards/" "hh" "/" then the leaf, whose hash starts with hh */
	if (strncmp(key, KILN_SHARD_DIR, dir) != 0 || strnlen(key + dir, 3) < 3 || key[dir + 2] != '/' ||
	    !kiln_shard_parse_file(key + dir + 3, out_hash, out_format))
		return false;
	return memcmp(key + dir, out_hash, 2) == 0;
}
