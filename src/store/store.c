/* The store front end: the registry of backends, URL dispatch on the scheme,
 * and the key check every call passes before it reaches a backend. Backends
 * own their state; this file owns nothing but the registry. */
#include "store/store.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/error.h"

extern const kiln_store_backend kiln_store_file_backend;
extern const kiln_store_backend kiln_store_s3_backend;
extern const kiln_store_backend kiln_store_http_backend, kiln_store_https_backend;

/* A new backend is one line here. */
static const kiln_store_backend *const backends[] = {
    &kiln_store_file_backend, &kiln_store_s3_backend, &kiln_store_http_backend,
    &kiln_store_https_backend, /* a cache node, read-only */
};

/* Copies at most 80 bytes of s for a message, '?' for anything unprintable,
 * so a bad key cannot break the one-line error. */
static const char *printable(char out[84], const char *s)
{
	size_t n = strnlen(s, 81), i;

	for (i = 0; i < n && i < 80; i++)
		out[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	if (n > 80) {
		memcpy(out + i, "...", 3);
		i += 3;
	}
	out[i] = '\0';
	return out;
}

static int invalid_key(const kiln_store *store, const char *what, const char *key)
{
	char buf[84];

	return kiln_error_set(KILN_EINVALID,
	                      "%s: invalid %s '%s' (relative, '/'-separated [A-Za-z0-9._=-] segments, "
	                      "no '.', '..' or empty segment)",
	                      store->url, what, printable(buf, key));
}

#define BACKEND_COUNT (sizeof(backends) / sizeof(backends[0]))

const kiln_store_backend *kiln_store_backend_at(size_t i)
{
	return i < BACKEND_COUNT ? backends[i] : NULL;
}

const kiln_store_backend *kiln_store_backend_find(const char *url)
{
	const char *sep = url ? strstr(url, "://") : NULL;
	size_t scheme_len = sep ? (size_t)(sep - url) : 0;

	for (size_t i = 0; sep && i < BACKEND_COUNT; i++) {
		const kiln_store_backend *b = backends[i];

		assert(b->version == KILN_STORE_BACKEND_VERSION);
		if (strlen(b->scheme) == scheme_len && memcmp(b->scheme, url, scheme_len) == 0)
			return b;
	}
	return NULL;
}

int kiln_store_open(kiln_store **out, const char *url, const kiln_store_options *options)
{
	static const kiln_store_options defaults;
	const kiln_store_backend *b;
	const char *sep, *authority_end, *at;
	size_t scheme_len, n = 0;
	char buf[84], known[128];
	int rc;

	*out = NULL;
	if (!url || !*url)
		return kiln_error_set(KILN_EINVALID,
		                      "empty store URL (expected file://DIR or s3://BUCKET/PREFIX)");
	sep = strstr(url, "://");
	if (!sep)
		return kiln_error_set(
		    KILN_EINVALID, "store URL '%s' has no scheme (expected file://DIR or s3://BUCKET/PREFIX)",
		    printable(buf, url));
	/* user:secret@host would put a credential in every message that names the URL */
	authority_end = strchr(sep + 3, '/');
	at = strchr(sep + 3, '@');
	if (at && (!authority_end || at < authority_end))
		return kiln_error_set(
		    KILN_EINVALID, "a store URL must not carry credentials (user@ part); use the environment "
		                   "or a 0600 credentials file");
	if ((b = kiln_store_backend_find(url))) {
		rc = b->open(out, url, options ? options : &defaults);
		assert(rc < 0 || (*out && (*out)->backend == b));
		return rc;
	}
	scheme_len = (size_t)(sep - url);
	known[0] = '\0';
	for (size_t i = 0; i < BACKEND_COUNT && n < sizeof(known); i++)
		n += (size_t)snprintf(known + n, sizeof(known) - n, "%s%s", i ? ", " : "",
		                      backends[i]->scheme);
	return kiln_error_set(KILN_EINVALID, "store URL '%s': unknown scheme '%.*s' (known: %s)",
	                      printable(buf, url), (int)(scheme_len > 20 ? 20 : scheme_len), url, known);
}

void kiln_store_close(kiln_store *store)
{
	if (!store)
		return;
	store->backend->close(store);
}

int kiln_store_put_file(kiln_store *store, const char *key, const char *path, uint64_t size)
{
	assert(store && path);
	if (!kiln_store_key_valid(key))
		return invalid_key(store, "key", key ? key : "");
	return store->backend->put_file(store, key, path, size);
}

int kiln_store_put_file_new(kiln_store *store, const char *key, const char *path, uint64_t size)
{
	assert(store && path);
	if (!kiln_store_key_valid(key))
		return invalid_key(store, "key", key ? key : "");
	if (!store->backend->put_file_new)
		return kiln_error_set(KILN_EINVALID, "%s: this store cannot create %s only when it is absent",
		                      store->url, key);
	return store->backend->put_file_new(store, key, path, size);
}

int kiln_store_get(kiln_store *store, const char *key, kiln_store_sink sink, void *ctx)
{
	assert(store && sink);
	if (!kiln_store_key_valid(key))
		return invalid_key(store, "key", key ? key : "");
	return store->backend->get(store, key, sink, ctx);
}

int kiln_store_stat(kiln_store *store, const char *key, uint64_t *out_size)
{
	assert(store);
	if (!kiln_store_key_valid(key))
		return invalid_key(store, "key", key ? key : "");
	return store->backend->stat(store, key, out_size);
}

int kiln_store_remove(kiln_store *store, const char *key)
{
	assert(store);
	if (!kiln_store_key_valid(key))
		return invalid_key(store, "key", key ? key : "");
	return store->backend->remove(store, key);
}

int kiln_store_list(kiln_store *store, const char *prefix, kiln_store_key_cb cb, void *ctx)
{
	assert(store && cb);
	if (!prefix)
		prefix = "";
	if (!kiln_store_prefix_valid(prefix))
		return invalid_key(store, "prefix", prefix);
	return store->backend->list(store, prefix, cb, ctx);
}
