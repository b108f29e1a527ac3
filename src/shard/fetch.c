/* The verified fetch of a shard object (see fetch.h). */
#include "shard/fetch.h"

#include <string.h>

#include "core/error.h"
#include "shard/object.h"

void kiln_shard_check_init(kiln_shard_check *c)
{
	crypto_generichash_init(&c->hs, NULL, 0, crypto_generichash_BYTES);
	c->size = 0;
}

void kiln_shard_check_update(kiln_shard_check *c, const void *data, size_t len)
{
	crypto_generichash_update(&c->hs, data, len);
	c->size += len;
}

kiln_shard_fault kiln_shard_check_final(kiln_shard_check *c, const char *hash, uint64_t bytes)
{
	unsigned char digest[crypto_generichash_BYTES];
	char hex[65];

	crypto_generichash_final(&c->hs, digest, sizeof(digest));
	sodium_bin2hex(hex, sizeof(hex), digest, sizeof(digest));
	if (memcmp(hex, hash, 64) != 0)
		return KILN_SHARD_BAD_HASH;
	if (bytes && c->size != bytes)
		return KILN_SHARD_BAD_SIZE;
	return KILN_SHARD_OK;
}

typedef struct fetch_state {
	kiln_shard_request *f;
	kiln_shard_check check;
} fetch_state;

static int bad_bytes(const kiln_shard_request *f)
{
	return kiln_error_set(KILN_EINVALID, "shard %s%s%s: content hash mismatch (corrupt or tampered)",
	                      f->hash, f->from ? " from " : "", f->from ? f->from : "");
}

static int fetch_sink(void *ctx, const void *data, size_t len)
{
	fetch_state *s = ctx;
	kiln_shard_request *f = s->f;

	f->size += len;
	if (f->limit && f->size > f->limit) {
		f->fault = KILN_SHARD_TOO_LONG; /* longer than the manifest says: stop reading */
		return bad_bytes(f);
	}
	kiln_shard_check_update(&s->check, data, len);
	return f->sink ? f->sink(f->ctx, data, len) : 0;
}

int kiln_shard_fetch(kiln_store *store, kiln_shard_request *f)
{
	fetch_state s = {.f = f};
	char key[KILN_SHARD_KEY_CAP];
	int rc;

	f->size = 0;
	f->fault = KILN_SHARD_OK;
	if ((rc = kiln_shard_name(key, sizeof(key), NULL, f->hash, NULL)) < 0)
		return rc;
	kiln_shard_check_init(&s.check);
	if ((rc = kiln_store_get(store, key, fetch_sink, &s)) != 0)
		return rc > 0 ? kiln_error_set(KILN_EIO, "shard %s: reading from %s failed", f->hash,
		                               f->from ? f->from : "the store")
		              : rc;
	if ((f->fault = kiln_shard_check_final(&s.check, f->hash, f->bytes)) != KILN_SHARD_OK)
		return bad_bytes(f);
	return 0;
}
