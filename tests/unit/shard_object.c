/* Unit tests for src/shard/object.c and src/shard/fetch.c: shard object
 * names built and parsed (known answers, every malformed shape refused),
 * the byte check's known hashes, and the verified fetch from a file:// store
 * (the object as written, then changed, grown, cut short, gone). */
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

#include "fixture.h"
#include "core/buf.h"
#include "core/error.h"
#include "shard/fetch.h"
#include "shard/object.h"
#include "store/store.h"

/* BLAKE2b-256 known answers, from Python:
 *   hashlib.blake2b(b'', digest_size=32).hexdigest()
 *   hashlib.blake2b(b'abc', digest_size=32).hexdigest()
 *   hashlib.blake2b(b'kiln shard\n', digest_size=32).hexdigest() */
#define H_EMPTY "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8"
#define H_ABC   "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319"
#define H_SHARD "1c602101db5d231735894aeb4052b0d3aa77a4c6f1e79dfe1d38229b05c70fd5"
#define SHARD   "kiln shard\n"

static char dir[PATH_MAX];

static void test_format_row(void **state)
{
	(void)state;
	/* what dataset.json's "shards" object says (docs/FORMATS.md) */
	assert_string_equal(kiln_shard_jsonl_zst.name, "jsonl");
	assert_string_equal(kiln_shard_jsonl_zst.compression, "zstd");
	assert_string_equal(kiln_shard_jsonl_zst.extension, ".jsonl.zst");
}

static void test_hash_valid(void **state)
{
	char h[80];

	(void)state;
	assert_true(kiln_shard_hash_valid(H_EMPTY));
	assert_false(kiln_shard_hash_valid(NULL));
	assert_false(kiln_shard_hash_valid(""));
	snprintf(h, sizeof(h), "%.63s", H_EMPTY); /* one digit short */
	assert_false(kiln_shard_hash_valid(h));
	snprintf(h, sizeof(h), "%s0", H_EMPTY); /* one too many */
	assert_false(kiln_shard_hash_valid(h));
	snprintf(h, sizeof(h), "%s", H_EMPTY);
	h[10] = 'A'; /* upper case */
	assert_false(kiln_shard_hash_valid(h));
	h[10] = 'g';
	assert_false(kiln_shard_hash_valid(h));
}

static void test_name(void **state)
{
	char out[KILN_SHARD_KEY_CAP], big[256], small[20];

	(void)state;
	assert_int_equal(kiln_shard_name(out, sizeof(out), NULL, H_ABC, NULL), 0);
	assert_string_equal(out, "shards/bd/" H_ABC ".jsonl.zst");
	assert_int_equal(kiln_shard_name(out, sizeof(out), NULL, H_ABC, &kiln_shard_jsonl_zst), 0);
	assert_string_equal(out, "shards/bd/" H_ABC ".jsonl.zst");
	/* with a prefix: a cache directory, a store URL */
	assert_int_equal(kiln_shard_name(big, sizeof(big), "/var/cache/kiln", H_ABC, NULL), 0);
	assert_string_equal(big, "/var/cache/kiln/shards/bd/" H_ABC ".jsonl.zst");
	assert_int_equal(kiln_shard_name(big, sizeof(big), "file:///data/store", H_EMPTY, NULL), 0);
	assert_string_equal(big, "file:///data/store/shards/0e/" H_EMPTY ".jsonl.zst");
	/* the longest key fits the cap exactly with room to spare */
	assert_true(strlen(out) < KILN_SHARD_KEY_CAP);

	/* refused: not a hash, no room */
	assert_int_equal(kiln_shard_name(out, sizeof(out), NULL, "abc", NULL), KILN_EINVALID);
	assert_string_equal(out, "");
	assert_string_equal(kiln_error_last(), "a shard hash must be 64 lower-case hex digits");
	assert_int_equal(kiln_shard_name(out, sizeof(out), NULL, H_ABC "0", NULL), KILN_EINVALID);
	assert_int_equal(kiln_shard_name(small, sizeof(small), NULL, H_ABC, NULL), KILN_EINVALID);
	assert_string_equal(small, "");
}

static void test_parse(void **state)
{
	static const char *const bad_keys[] = {
	    "shards/bd/" H_ABC ".jsonl",         /* other extension */
	    "shards/bd/" H_ABC ".jsonl.zst.tmp", /* more after it */
	    "shards/bd/" H_ABC,                  /* none */
	    "shards/ab/" H_ABC ".jsonl.zst",     /* fan-out directory not its first two digits */
	    "shards/bd" H_ABC ".jsonl.zst",      /* no '/' */
	    "shards/bdd/" H_ABC ".jsonl.zst",    /* three digits */
	    "shard/bd/" H_ABC ".jsonl.zst",      /* other directory */
	    "x/shards/bd/" H_ABC ".jsonl.zst",   /* under another one */
	    "shards/BD/BDDD813C634239723171EF3FEE98579B94964E3BB1CB3E427262C8C068D52319.jsonl.zst",
	    "shards/bd/bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d5231.jsonl.zst", /* 63 */
	    "shards/",
	    "shards/bd/",
	    "",
	};
	const kiln_shard_format *format = NULL;
	char hash[65], key[KILN_SHARD_KEY_CAP];

	(void)state;
	/* the builder's output parses back */
	assert_int_equal(kiln_shard_name(key, sizeof(key), NULL, H_SHARD, NULL), 0);
	assert_true(kiln_shard_parse_key(key, hash, &format));
	assert_string_equal(hash, H_SHARD);
	assert_ptr_equal(format, &kiln_shard_jsonl_zst);
	assert_true(kiln_shard_parse_key("shards/bd/" H_ABC ".jsonl.zst", hash, NULL));
	assert_string_equal(hash, H_ABC);
	for (size_t i = 0; i < sizeof(bad_keys) / sizeof(bad_keys[0]); i++)
		assert_false(kiln_shard_parse_key(bad_keys[i], hash, NULL));

	/* the leaf: a cache file's name */
	format = NULL;
	assert_true(kiln_shard_parse_file(H_ABC ".jsonl.zst", hash, &format));
	assert_string_equal(hash, H_ABC);
	assert_ptr_equal(format, &kiln_shard_jsonl_zst);
	assert_false(kiln_shard_parse_file(H_ABC, hash, NULL));
	assert_false(kiln_shard_parse_file(H_ABC ".jsonl.zst.x", hash, NULL));
	assert_false(kiln_shard_parse_file("." H_ABC ".jsonl.zst", hash, NULL));
	assert_false(kiln_shard_parse_file("bd/" H_ABC ".jsonl.zst", hash, NULL));
	assert_false(kiln_shard_parse_file(".jsonl.zst", hash, NULL));
	assert_false(kiln_shard_parse_file("", hash, NULL));
}

static void test_check(void **state)
{
	kiln_shard_check c;

	(void)state;
	kiln_shard_check_init(&c);
	assert_int_equal(kiln_shard_check_final(&c, H_EMPTY, 0), KILN_SHARD_OK);
	kiln_shard_check_init(&c);
	kiln_shard_check_update(&c, "a", 1);
	kiln_shard_check_update(&c, "bc", 2); /* chunks hash as one */
	assert_int_equal(c.size, 3);
	assert_int_equal(kiln_shard_check_final(&c, H_ABC, 3), KILN_SHARD_OK);
	kiln_shard_check_init(&c);
	kiln_shard_check_update(&c, "abc", 3);
	assert_int_equal(kiln_shard_check_final(&c, H_ABC, 4), KILN_SHARD_BAD_SIZE);
	kiln_shard_check_init(&c);
	kiln_shard_check_update(&c, "abd", 3);
	assert_int_equal(kiln_shard_check_final(&c, H_ABC, 3), KILN_SHARD_BAD_HASH);
}

/* Stores `data` under the name of H_SHARD, whatever its bytes. */
static void put(kiln_store *store, const char *data, size_t len)
{
	char path[512], key[KILN_SHARD_KEY_CAP];
	FILE *f;

	snprintf(path, sizeof(path), "%s/object", dir);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(kiln_shard_name(key, sizeof(key), NULL, H_SHARD, NULL), 0);
	assert_int_equal(kiln_store_put_file(store, key, path, len), 0);
}

static int to_buf(void *ctx, const void *data, size_t len)
{
	return kiln_buf_put(ctx, data, len);
}

static void test_fetch(void **state)
{
	const size_t n = strlen(SHARD);
	char url[512];
	kiln_store *store = NULL;
	kiln_buf got = KILN_BUF_INIT(0);
	kiln_shard_request f;

	(void)state;
	snprintf(url, sizeof(url), "file://%s/store", dir);
	assert_int_equal(kiln_store_open(&store, url, NULL), 0);

	/* missing */
	f = (kiln_shard_request){.hash = H_SHARD, .bytes = n, .limit = n, .sink = to_buf, .ctx = &got};
	assert_int_equal(kiln_shard_fetch(store, &f), KILN_ENOTFOUND);

	/* as written: every byte reaches the sink */
	put(store, SHARD, n);
	assert_int_equal(kiln_shard_fetch(store, &f), 0);
	assert_int_equal(f.size, n);
	assert_int_equal(f.fault, KILN_SHARD_OK);
	assert_int_equal(got.len, n);
	assert_memory_equal(got.ptr, SHARD, n);
	/* without a sink or a known size (kiln verify --deep hashes only) */
	f = (kiln_shard_request){.hash = H_SHARD};
	assert_int_equal(kiln_shard_fetch(store, &f), 0);
	assert_int_equal(f.size, n);

	/* one byte changed */
	put(store, "kiln shard!", n);
	f = (kiln_shard_request){.hash = H_SHARD, .bytes = n, .limit = n};
	assert_int_equal(kiln_shard_fetch(store, &f), KILN_EINVALID);
	assert_int_equal(f.fault, KILN_SHARD_BAD_HASH);
	assert_string_equal(kiln_error_last(),
	                    "shard " H_SHARD ": content hash mismatch (corrupt or tampered)");
	/* the source named when given */
	f = (kiln_shard_request){.hash = H_SHARD, .bytes = n, .from = "the origin"};
	assert_int_equal(kiln_shard_fetch(store, &f), KILN_EINVALID);
	assert_string_equal(kiln_error_last(),
	                    "shard " H_SHARD " from the origin: content hash mismatch (corrupt or tampered)");

	/* grown: stopped at the limit, the sink never saw more than it */
	put(store, SHARD "more", n + 4);
	kiln_buf_reset(&got);
	f = (kiln_shard_request){.hash = H_SHARD, .bytes = n, .limit = n, .sink = to_buf, .ctx = &got};
	assert_int_equal(kiln_shard_fetch(store, &f), KILN_EINVALID);
	assert_int_equal(f.fault, KILN_SHARD_TOO_LONG);
	assert_true(got.len <= n);
	/* grown, no limit: read whole, then the hash differs */
	f = (kiln_shard_request){.hash = H_SHARD, .bytes = n};
	assert_int_equal(kiln_shard_fetch(store, &f), KILN_EINVALID);
	assert_int_equal(f.fault, KILN_SHARD_BAD_HASH);
	assert_int_equal(f.size, n + 4);

	/* cut short */
	put(store, SHARD, n - 1);
	f = (kiln_shard_request){.hash = H_SHARD, .bytes = n, .limit = n};
	assert_int_equal(kiln_shard_fetch(store, &f), KILN_EINVALID);
	assert_int_equal(f.fault, KILN_SHARD_BAD_HASH);

	/* the right bytes, the wrong size expected (a manifest that lies) */
	put(store, SHARD, n);
	f = (kiln_shard_request){.hash = H_SHARD, .bytes = n + 1};
	assert_int_equal(kiln_shard_fetch(store, &f), KILN_EINVALID);
	assert_int_equal(f.fault, KILN_SHARD_BAD_SIZE);

	/* not a hash: refused before the store is asked */
	f = (kiln_shard_request){.hash = "not-a-hash"};
	assert_int_equal(kiln_shard_fetch(store, &f), KILN_EINVALID);
	assert_int_equal(f.fault, KILN_SHARD_OK);

	kiln_buf_free(&got);
	kiln_store_close(store);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_format_row), cmocka_unit_test(test_hash_valid),
	    cmocka_unit_test(test_name),       cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_check),      cmocka_unit_test(test_fetch),
	};

	return kiln_test_main(tests, dir, "shard-object", NULL, NULL);
}
