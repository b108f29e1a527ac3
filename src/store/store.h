/* Object stores behind one interface: `file://DIR` (the embedded default),
 * `s3://BUCKET/PREFIX` (Signature V4, s3_client.h), and `http(s)://HOST:PORT`, a cache node read
 * through its /v1/shards API (read-only, shards only). Keys are relative paths such as
 * "shards/ab/<hash>.jsonl.zst"; the store adds its root or prefix. Adding a
 * backend is one new file with its kiln_store_backend row (its functions
 * and the `store:` config keys it reads, as kiln_store_option rows) and
 * one line in store.c's registry; store/config.c reads any backend's keys
 * from its row. Errors: KILN_EINVALID (bad URL/config/key),
 * KILN_ENOTFOUND (no such object), KILN_EIO (local I/O), KILN_ERETRY (the
 * endpoint failed after the backend's own retries: transient, try later).
 * Messages name the endpoint and key, never a credential. */
#ifndef KILN_STORE_STORE_H
#define KILN_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/retry.h"
#include "kiln/common.h" /* kiln_store_options, kiln_store_sink */

typedef struct kiln_store kiln_store;

/* Called once per key under a prefix (keys relative to the store root), with
 * the object's size and when it was last written (seconds since the epoch;
 * 0 when the backend cannot tell). */
typedef int (*kiln_store_key_cb)(void *ctx, const char *key, uint64_t size, int64_t mtime);

/* How a config's `store.<key>` value is read into kiln_store_options. */
typedef enum kiln_store_option_kind {
	KILN_STORE_OPTION_STRING, /* const char * */
	KILN_STORE_OPTION_PATH,   /* const char *, relative to the config file's folder */
	KILN_STORE_OPTION_BOOL,   /* bool */
	KILN_STORE_OPTION_INT,    /* int between lo and hi */
	KILN_STORE_OPTION_CHOICE, /* bool: false for choices[0], true for choices[1] */
} kiln_store_option_kind;

/* One `store:` key a backend reads. A backend's options end with a row
 * whose key is NULL. Two backends that declare the same key declare it
 * alike (same kind, same field). */
typedef struct kiln_store_option {
	const char *key; /* under store: "endpoint" */
	kiln_store_option_kind kind;
	size_t offset;          /* of its field: offsetof(kiln_store_options, endpoint) */
	int64_t lo, hi;         /* INT */
	const char *choices[2]; /* CHOICE: "path", "virtual" */
} kiln_store_option;

typedef struct kiln_store_backend {
	int version;        /* KILN_STORE_BACKEND_VERSION */
	const char *scheme; /* "file", "s3" */
	/* The URL form a config's store.url names it by, for messages
	 * ("s3://BUCKET/PREFIX"); NULL when a config cannot name it. */
	const char *config_url;
	/* The rest of the URL is a local path: store/config.c makes a relative
	 * one relative to the config file's folder. */
	bool local_path;
	const kiln_store_option *options; /* the store.* keys it reads; NULL for none */
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
	/* Optional (NULL: the backend cannot): put_file, but only when key holds
	 * no object yet, KILN_EMODIFIED when it does; of two at once exactly one
	 * succeeds (a compare-and-swap on absence, for refs that are never
	 * replaced). */
	int (*put_file_new)(kiln_store *store, const char *key, const char *path, uint64_t size);
} kiln_store_backend;

#define KILN_STORE_BACKEND_VERSION 2

/* Every store starts with this header; backends embed it first. */
struct kiln_store {
	const kiln_store_backend *backend;
	char *url; /* as opened, for messages (no credentials in it) */
};

/* Opens the store a URL names ("file:///var/lib/kiln/store", "file://rel/dir",
 * "s3://bucket/prefix"). `options` may be NULL. */
int kiln_store_open(kiln_store **out, const char *url, const kiln_store_options *options);
void kiln_store_close(kiln_store *store);

/* The registered backend for the scheme of url ("s3" for "s3://b/p"), or
 * NULL when url has no "SCHEME://" or no backend has that scheme. The rows
 * are static. */
const kiln_store_backend *kiln_store_backend_find(const char *url);
/* The registry in order: backend number i, NULL past the last one. */
const kiln_store_backend *kiln_store_backend_at(size_t i);

int kiln_store_put_file(kiln_store *store, const char *key, const char *path, uint64_t size);
int kiln_store_get(kiln_store *store, const char *key, kiln_store_sink sink, void *ctx);
int kiln_store_stat(kiln_store *store, const char *key, uint64_t *out_size);
int kiln_store_remove(kiln_store *store, const char *key);
int kiln_store_list(kiln_store *store, const char *prefix, kiln_store_key_cb cb, void *ctx);
/* put_file only when key holds no object: KILN_EMODIFIED when it does,
 * KILN_EINVALID when the backend cannot tell atomically. */
int kiln_store_put_file_new(kiln_store *store, const char *key, const char *path, uint64_t size);

/* For backends: the wait before retry n of a request (kiln_retry_sleep):
 * 100 ms, doubling up to 5 s, plus up to a quarter more of random jitter. */
extern const kiln_retry_policy kiln_store_retry;

/* For backends' put_file: the open file fd (named path in messages) is a
 * regular file of exactly size bytes. 0, KILN_EIO or KILN_EINVALID. */
int kiln_store_check_upload(int fd, const char *path, uint64_t size);

/* Keys are relative, '/'-separated, of [A-Za-z0-9._=-] segments, no ".",
 * "..", or empty segment, at most 1024 bytes. */
bool kiln_store_key_valid(const char *key);

/* A list prefix is "" or a key, a key and '/', or a key whose last segment
 * is cut short (so "shards/a" matches "shards/ab/..."). */
bool kiln_store_prefix_valid(const char *prefix);

#endif
