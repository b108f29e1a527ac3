/* The reader API (include/kiln/reader.h): a resolved version, its store, the
 * shard lists read from the manifest (one per split, cached), the shuffle
 * and rank assignment, and verified streaming. A reader owns its manifest
 * and store handles, its shard lists and URL strings, one zstd
 * decompression context and two chunk buffers reused by every stream.
 * A stream spools the compressed object to an anonymous temporary file
 * while the verified fetch (shard/fetch.h) hashes it, and decompresses only
 * after the hash matched. */
#include "kiln/reader.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "core/array.h"
#include "core/error.h"
#include "core/fs.h"
#include "manifest/version.h"
#include "reader/internal.h"
#include "shard/fetch.h"
#include "shard/object.h"
#include "store/store.h"

#define CHUNK (1u << 20)

int kiln_reader_open(kiln_reader **out, const char *manifest_path, const char *spec, const char *store_url,
                     const kiln_store_options *opt)
{
	kiln_reader *r;
	int rc;

	*out = NULL;
	if (opt && opt->version != KILN_STORE_OPTIONS_VERSION)
		return kiln_error_set(
		    KILN_EINVALID,
		    "kiln_reader_open: kiln_store_options version %u, this libkiln %s knows %d "
		    "(start from KILN_STORE_OPTIONS_INIT)",
		    opt->version, kiln_library_version(), KILN_STORE_OPTIONS_VERSION);
	if (sodium_init() < 0)
		return kiln_error_set(KILN_EIO, "libsodium failed to initialise");
	r = calloc(1, sizeof(*r));
	if (!r)
		return kiln_error_oom(NULL);
	atomic_init(&r->refs, 1);
	atomic_init(&r->closed, false);
	if (!(r->spec = strdup(spec ? spec : ""))) {
		free(r);
		return kiln_error_oom(NULL);
	}
	if ((rc = kiln_version_open(&r->manifest, manifest_path)) < 0 ||
	    (rc = kiln_version_resolve(r->manifest, spec, &r->version)) < 0)
		goto fail;
	if (store_url) {
		size_t n = strlen(store_url);

		while (n > 0 && store_url[n - 1] == '/')
			n--;
		if (!(r->store_url = strndup(store_url, n))) {
			rc = kiln_error_oom(NULL);
			goto fail;
		}
		if ((rc = kiln_store_open(&r->store, store_url, opt)) < 0)
			goto fail;
	}
	*out = r;
	return 0;
fail:
	kiln_reader_close(r);
	return rc;
}

void kiln_reader_close(kiln_reader *r)
{
	if (!r)
		return;
	atomic_store(&r->closed, true);
	kiln_reader_release(r);
}

void kiln_reader_hold(kiln_reader *r)
{
	atomic_fetch_add(&r->refs, 1);
}

void kiln_reader_release(kiln_reader *r)
{
	if (!r || atomic_fetch_sub(&r->refs, 1) != 1)
		return;
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		free(r->shards[s]);
		free(r->urls[s]);
	}
	ZSTD_freeDCtx(r->dctx);
	free(r->in_chunk);
	free(r->out_chunk);
	kiln_store_close(r->store);
	free(r->store_url);
	kiln_manifest_close(r->manifest);
	kiln_mfmt_dataset_free(&r->definition);
	free(r->spec);
	free(r);
}

const char *kiln_reader_dataset(const kiln_reader *r)
{
	return r->version.dataset;
}

const char *kiln_reader_commit(const kiln_reader *r)
{
	return r->version.commit;
}

const char *kiln_reader_ref(const kiln_reader *r)
{
	return r->version.ref;
}

/* ---- listing -------------------------------------------------------------- */

typedef struct list_ctx {
	kiln_reader_shard *v;
	size_t n, cap;
} list_ctx;

static int collect(void *ctx, const kiln_shard_entry *e)
{
	list_ctx *l = ctx;
	kiln_reader_shard *s;

	if (KILN_ARRAY_GROW(l->v, l->cap, l->n, NULL) < 0)
		return KILN_ENOMEM;
	s = &l->v[l->n++];
	memset(s, 0, sizeof(*s));
	memcpy(s->hash, e->hash, sizeof(s->hash));
	s->bytes = e->bytes;
	s->raw_bytes = e->raw_bytes;
	s->records = e->records;
	return kiln_shard_name(s->key, sizeof(s->key), NULL, e->hash, NULL);
}

int kiln_reader_shards(kiln_reader *r, kiln_split split, kiln_reader_shard **out, size_t *n)
{
	list_ctx l = {0};

	*out = NULL;
	*n = 0;
	if ((unsigned)split >= KILN_SPLIT_COUNT)
		return kiln_error_set(KILN_EINVALID, "no such split");
	if (!r->loaded[split]) {
		int rc = kiln_version_shards(r->manifest, &r->version, split, collect, &l);

		if (rc != 0) {
			free(l.v);
			return rc < 0 ? rc : kiln_error_set(KILN_EIO, "reading the shard list failed");
		}
		if (r->store_url && l.n) {
			size_t each = strlen(r->store_url) + 1 + sizeof(l.v[0].key);
			char *block = malloc(l.n * each);

			if (!block) {
				free(l.v);
				return kiln_error_oom(NULL);
			}
			for (size_t i = 0; i < l.n; i++) {
				kiln_shard_name(block + i * each, each, r->store_url, l.v[i].hash, NULL);
				l.v[i].url = block + i * each;
			}
			r->urls[split] = block;
		}
		r->shards[split] = l.v;
		r->nshards[split] = l.n;
		r->loaded[split] = true;
	}
	*out = r->shards[split];
	*n = r->nshards[split];
	return 0;
}

/* ---- assignment ----------------------------------------------------------- */

typedef struct order_key {
	uint64_t key;
	const char *hash;
	size_t idx;
} order_key;

static int order_cmp(const void *a, const void *b)
{
	const order_key *x = a, *y = b;
	int c;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	if ((c = strcmp(x->hash, y->hash)) != 0)
		return c;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

/* uint64_le(BLAKE2b-256(seed_le64 || 0x1F || hash)[0:8]) */
static uint64_t shuffle_key(uint64_t seed, const char *hash)
{
	unsigned char msg[8 + 1 + 64], digest[32];
	size_t n = strnlen(hash, 64);
	uint64_t key = 0;

	for (int i = 0; i < 8; i++)
		msg[i] = (unsigned char)(seed >> (8 * i));
	msg[8] = 0x1F;
	memcpy(msg + 9, hash, n);
	crypto_generichash(digest, sizeof(digest), msg, 9 + n, NULL, 0);
	for (int i = 7; i >= 0; i--)
		key = key << 8 | digest[i];
	return key;
}

int kiln_reader_assign(const kiln_reader_shard *in, size_t n, unsigned rank, unsigned world,
                       uint64_t shuffle_seed, bool shuffle, size_t *out_idx, size_t *out_n)
{
	order_key *keys;
	size_t k = 0;

	*out_n = 0;
	if (world == 0)
		return kiln_error_set(KILN_EINVALID, "world size must be at least 1");
	if (rank >= world)
		return kiln_error_set(KILN_EINVALID, "rank %u is not below the world size %u", rank, world);
	if (!shuffle) {
		for (size_t i = rank; i < n; i += world)
			out_idx[k++] = i;
		*out_n = k;
		return 0;
	}
	if (sodium_init() < 0)
		return kiln_error_set(KILN_EIO, "libsodium failed to initialise");
	if (n == 0)
		return 0;
	if (!(keys = malloc(n * sizeof(*keys))))
		return kiln_error_oom(NULL);
	for (size_t i = 0; i < n; i++) {
		keys[i].key = shuffle_key(shuffle_seed, in[i].hash);
		keys[i].hash = in[i].hash;
		keys[i].idx = i;
	}
	qsort(keys, n, sizeof(*keys), order_cmp);
	for (size_t i = rank; i < n; i += world)
		out_idx[k++] = keys[i].idx;
	free(keys);
	*out_n = k;
	return 0;
}

/* ---- streaming ------------------------------------------------------------ */

typedef struct spool_ctx {
	int fd;
	const char *hash;
} spool_ctx;

/* The fetched bytes into the temporary file. */
static int spool_sink(void *ctx, const void *data, size_t len)
{
	spool_ctx *s = ctx;
	const char *p = data;

	while (len) {
		ssize_t w = write(s->fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return kiln_error_set(KILN_EIO, "shard %s: temporary file: %s", s->hash,
			                      strerror(errno));
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Decompresses the verified file at fd (from its start) into sink. */
static int decompress(kiln_reader *r, const kiln_reader_shard *s, int fd, kiln_store_sink sink, void *ctx)
{
	size_t last = 1;
	int rc;

	if (lseek(fd, 0, SEEK_SET) < 0)
		return kiln_error_set(KILN_EIO, "shard %s: temporary file: %s", s->hash, strerror(errno));
	ZSTD_DCtx_reset(r->dctx, ZSTD_reset_session_only);
	for (;;) {
		ssize_t got = read(fd, r->in_chunk, CHUNK);
		ZSTD_inBuffer in;

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return kiln_error_set(KILN_EIO, "shard %s: temporary file: %s", s->hash,
			                      strerror(errno));
		if (got == 0)
			break;
		in = (ZSTD_inBuffer){r->in_chunk, (size_t)got, 0};
		while (in.pos < in.size) {
			ZSTD_outBuffer out = {r->out_chunk, CHUNK, 0};

			last = ZSTD_decompressStream(r->dctx, &out, &in);
			if (ZSTD_isError(last))
				return kiln_error_set(KILN_EINVALID, "shard %s: zstd: %s", s->hash,
				                      ZSTD_getErrorName(last));
			if (out.pos && (rc = sink(ctx, r->out_chunk, out.pos)) != 0)
				return rc;
		}
	}
	/* flush what the context still holds */
	while (last != 0) {
		ZSTD_inBuffer in = {NULL, 0, 0};
		ZSTD_outBuffer out = {r->out_chunk, CHUNK, 0};

		last = ZSTD_decompressStream(r->dctx, &out, &in);
		if (ZSTD_isError(last))
			return kiln_error_set(KILN_EINVALID, "shard %s: zstd: %s", s->hash,
			                      ZSTD_getErrorName(last));
		if (out.pos == 0 && last != 0)
			return kiln_error_set(KILN_EINVALID, "shard %s: the zstd frame is truncated",
			                      s->hash);
		if (out.pos && (rc = sink(ctx, r->out_chunk, out.pos)) != 0)
			return rc;
	}
	return 0;
}

int kiln_reader_stream(kiln_reader *r, const kiln_reader_shard *s, kiln_store_sink sink, void *ctx)
{
	spool_ctx sp = {.fd = -1, .hash = s->hash};
	kiln_shard_request f = {
	    .hash = s->hash, .bytes = s->bytes, .limit = s->bytes, .sink = spool_sink, .ctx = &sp};
	int rc;

	if (!r->store)
		return kiln_error_set(KILN_EINVALID, "shard %.64s: no store to read it from", s->hash);
	if (!kiln_shard_hash_valid(s->hash))
		return kiln_error_set(KILN_EINVALID, "a shard hash must be 64 lower-case hex digits");
	if (!r->dctx && !(r->dctx = ZSTD_createDCtx()))
		return kiln_error_oom(NULL);
	if ((!r->in_chunk && !(r->in_chunk = malloc(CHUNK))) ||
	    (!r->out_chunk && !(r->out_chunk = malloc(CHUNK))))
		return kiln_error_oom(NULL);
	if ((sp.fd = kiln_fs_temp_file(NULL, "read")) < 0)
		return sp.fd;
	if ((rc = kiln_shard_fetch(r->store, &f)) == 0)
		rc = decompress(r, s, sp.fd, sink, ctx);
	close(sp.fd);
	return rc;
}
