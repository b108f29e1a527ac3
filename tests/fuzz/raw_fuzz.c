/* libFuzzer target for the raw zone decoder (shard/raw.c): the input is
 * decoded as an object twice, once compressed here as one zstd frame with a
 * checksum (so the line decoder sees the hostile bytes) and once as the
 * frame itself. Every record handed over must be well formed, and its
 * rendered line must decode to the same record. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "core/error.h"
#include "shard/raw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void *compress(const void *src, size_t len, size_t *out_len)
{
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	size_t cap = ZSTD_compressBound(len);
	void *dst = malloc(cap);

	if (!cctx || !dst || ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1)))
		abort();
	*out_len = ZSTD_compress2(cctx, dst, cap, src, len);
	if (ZSTD_isError(*out_len))
		abort();
	ZSTD_freeCCtx(cctx);
	return dst;
}

static bool bytes_equal(const void *a, size_t an, bool anull, const void *b, size_t bn, bool bnull)
{
	return anull == bnull && an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

static void check_bytes(const void *p, size_t n, bool null)
{
	if (null ? (p != NULL || n != 0) : (n && !p))
		abort();
}

static void well_formed(const kiln_raw_record *r)
{
	if (!r->topic || !r->topic[0] || r->partition < 0 || r->offset < 0 || r->timestamp_type < 0 ||
	    r->timestamp_type > 2 || (r->timestamp_type == 0 && r->timestamp != 0))
		abort();
	check_bytes(r->key, r->key_len, r->null_key);
	check_bytes(r->value, r->value_len, r->null_value);
	if (r->header_count && !r->headers)
		abort();
	for (size_t i = 0; i < r->header_count; i++) {
		if (!r->headers[i].name && r->headers[i].name_len)
			abort();
		check_bytes(r->headers[i].value, r->headers[i].value_len, r->headers[i].null_value);
	}
}

static int same_record(void *ctx, const kiln_raw_record *b)
{
	const kiln_raw_record *a = ctx;

	well_formed(b);
	if (strcmp(a->topic, b->topic) != 0 || a->partition != b->partition || a->offset != b->offset ||
	    a->timestamp_type != b->timestamp_type || a->timestamp != b->timestamp ||
	    !bytes_equal(a->key, a->key_len, a->null_key, b->key, b->key_len, b->null_key) ||
	    !bytes_equal(a->value, a->value_len, a->null_value, b->value, b->value_len, b->null_value) ||
	    a->header_count != b->header_count)
		abort();
	for (size_t i = 0; i < a->header_count; i++) {
		const kiln_raw_header *x = &a->headers[i], *y = &b->headers[i];

		if (!bytes_equal(x->name, x->name_len, false, y->name, y->name_len, false) ||
		    !bytes_equal(x->value, x->value_len, x->null_value, y->value, y->value_len,
		                 y->null_value))
			abort();
	}
	return 7; /* stops after the one line */
}

static int on_record(void *ctx, const kiln_raw_record *r)
{
	kiln_buf line = KILN_BUF_INIT(0);
	size_t zlen;
	void *z;

	(void)ctx;
	well_formed(r);
	if (kiln_raw_render(&line, r) < 0 || line.len == 0 || line.ptr[line.len - 1] != '\n' ||
	    memchr(line.ptr, '\n', line.len - 1))
		abort();
	z = compress(line.ptr, line.len, &zlen);
	if (kiln_raw_decode(z, zlen, "fuzz-rendered", same_record, (void *)r) != 7)
		abort();
	free(z);
	kiln_buf_free(&line);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t zlen;
	void *z = compress(data, size, &zlen);
	int rc = kiln_raw_decode(z, zlen, "fuzz", on_record, NULL);

	/* an error names where it is and is one line */
	if (rc == KILN_EINVALID && (!strstr(kiln_error_last(), "fuzz") || strchr(kiln_error_last(), '\n')))
		abort();
	free(z);
	kiln_raw_decode(data, size, "fuzz", on_record, NULL);
	return 0;
}
