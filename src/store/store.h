/* Object stores behind one interface: `file://DIR` (the embedded default),
 * `s3://BUCKET/PREFIX` (libs3), and `http(s)://HOST:PORT`, a cache node read
 * through its /v1/shards API (read-only, shards only). Keys are relative paths such as
 * "shards/ab/<hash>.jsonl.zst"; the store adds its root or prefix. Adding a
 * backend is one new file with a kiln_store_backend and one line in
 * store.c's registry. Errors: KILN_EINVALID (bad URL/config/key),
 * KILN_ENOTFOUND (no such object), KILN_EIO (local I/O), KILN_ERETRY (the
 * endpoint failed after the backend's own retries: transient, try later).
 * Messages name the endpoint and key, never a credential. */
#ifndef KILN_STORE_STORE_H
#define KILN_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/common.h" /* kiln_store_options, kiln_store_sink */

typedef struct kiln_store kiln_store;

/* Called once per key under a prefix (keys relative to the store root), with
 * the object's size and when it was last written (seconds since the epoch;
 * 0 when the backend cannot tell). */
typedef int (*kiln_store_key_cb)(void *ctx, const char *key, uint64_t size, int64_t mtime);

typedef struct kiln_store_backend {
	int version;        /* KILN_STORE_BACKEND_VERSION */
	const char *scheme; /* "file", "s3" */
	int (*open)(kiln_store **out, const char *url, const kiln_store_options *options);
	/* Stores the bytes of the regular file at `path` (size bytes) under key,
	 * atomically: readers see the old object or the whole new one. */
	int (*put_file)(kiln_store *store, const char *key, const char *path, uint64_t size);
	int (*get)(kiln_store *store, const char *key, kiln_store_sink sink, void *ctx);
	/* 1 present (size in *out_size when not NULL), 0 absent, < 0 error. */
	int (*stat)(kiln_store *store, const char *key, uint64_t *out_size);
	int (*remove)(kiln_store *store, const char *key);
	int (*list)(kiln_store *store, const char *prefix, kiln_store_key_cb cb, void *ctx);
	void (*close)(kiln_store *store);
} kiln_store_backend;

#define KILN_STORE_BACKEND_VERSION 1

/* Every store starts with this header; backends embed it first. */
struct kiln_store {
	const kiln_store_backend *backend;
	char *url; /* as opened, for messages (no credentials in it) */
};

/* Opens the store a URL names ("file:///var/lib/kiln/store", "file://rel/dir",
 * "s3://bucket/prefix"). `options` may be NULL. */
int kiln_store_open(kiln_store **out, const char *url, const kiln_store_options *options);
void kiln_store_close(kiln_store *store);

int kiln_store_put_file(kiln_store *store, const char *key, const char *path, uint64_t size);
int kiln_store_get(kiln_store *store, const char *key, kiln_store_sink sink, void *ctx);
int kiln_store_stat(kiln_store *store, const char *key, uint64_t *out_size);
int kiln_store_remove(kiln_store *store, const char *key);
int kiln_store_list(kiln_store *store, const char *prefix, kiln_store_key_cb cb, void *ctx);

/* For backends: sleeps before retry number `attempt` (0-based): 100 ms,
 * doubling up to 5 s, plus up to a quarter more of random jitter. */
void kiln_store_backoff(int attempt);

/* Keys are relative, '/'-separated, of [A-Za-z0-9._=-] segments, no ".",
 * "..", or empty segment, at most 1024 bytes. */
bool kiln_store_key_valid(const char *key);

#endif
