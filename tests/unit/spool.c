/* Unit tests for src/shard/spool.c: objects spooled, compressed as one zstd
 * frame with content size and checksum, hashed and stored; a spool reused
 * for several objects (regression: after the first store, writes landed past
 * a hole of zeros because the file offset was not rewound). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "fixture.h"
#include "shard/spool.h"

static char dir[PATH_MAX];

static void read_file(const char *path, char **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	*out = malloc(*len + 1);
	assert_int_equal(fread(*out, 1, *len, f), *len);
	fclose(f);
}

/* Decompresses the stored object and checks it is `want`, its frame header
 * carries the content size and a checksum, and its name is its hash. */
static void check_object(const char *key, const char *hash, uint64_t bytes, const char *want, size_t want_len)
{
	char path[512], *data, hex[65];
	size_t len;
	unsigned char digest[32];

	snprintf(path, sizeof(path), "%s/store/%s", dir, key);
	read_file(path, &data, &len);
	assert_int_equal(len, bytes);
	crypto_generichash(digest, sizeof(digest), (unsigned char *)data, len, NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), digest, sizeof(digest));
	assert_string_equal(hex, hash);
	assert_int_equal(ZSTD_getFrameContentSize(data, len), want_len);
	assert_true(len > 4 && (((unsigned char)data[4] >> 2) & 1));    /* Content_Checksum_flag (RFC 8878) */
	assert_int_equal(ZSTD_findFrameCompressedSize(data, len), len); /* exactly one frame */
	char *plain = malloc(want_len + 1);
	assert_int_equal(ZSTD_decompress(plain, want_len + 1, data, len), want_len);
	assert_memory_equal(plain, want, want_len);
	free(plain);
	free(data);
}

static void test_reuse(void **state)
{
	char url[512], hash[65], key[160];
	kiln_store *store = NULL;
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	kiln_spool spool;
	uint64_t bytes;
	size_t big_len = 3u << 20; /* several write chunks */
	char *big = malloc(big_len);

	(void)state;
	for (size_t i = 0; i < big_len; i++)
		big[i] = (char)('a' + (i * 7919 % 26));
	snprintf(url, sizeof(url), "file://%s/store", dir);
	assert_int_equal(kiln_store_open(&store, url, NULL), 0);
	assert_int_equal(kiln_spool_open(&spool, dir), 0);

	assert_int_equal(kiln_spool_write(&spool, "first\n", 6), 0);
	assert_int_equal(kiln_spool_store(&spool, store, cctx, 3, "q/one.zst", hash, &bytes), 0);
	check_object("q/one.zst", hash, bytes, "first\n", 6);
	assert_int_equal(spool.size, 0);

	assert_int_equal(kiln_spool_write(&spool, "second\n", 7), 0);
	assert_int_equal(kiln_spool_store(&spool, store, cctx, 3, "q/two.zst", hash, &bytes), 0);
	check_object("q/two.zst", hash, bytes, "second\n", 7);

	/* content-addressed, larger than the write buffer */
	for (size_t off = 0; off < big_len; off += 100000)
		assert_int_equal(
		    kiln_spool_write(&spool, big + off, big_len - off < 100000 ? big_len - off : 100000), 0);
	assert_int_equal(kiln_spool_store(&spool, store, cctx, 3, NULL, hash, &bytes), 0);
	snprintf(key, sizeof(key), "shards/%.2s/%s.jsonl.zst", hash, hash);
	check_object(key, hash, bytes, big, big_len);

	/* an empty object is a valid frame too */
	assert_int_equal(kiln_spool_store(&spool, store, cctx, 3, "q/empty.zst", hash, &bytes), 0);
	check_object("q/empty.zst", hash, bytes, "", 0);

	kiln_spool_close(&spool);
	kiln_store_close(store);
	ZSTD_freeCCtx(cctx);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reuse),
	};

	return kiln_test_main(tests, dir, "spool", NULL, NULL);
}
