/* libFuzzer target for the quarantine decoder (shard/quarantine.c): the
 * input is decoded as an object twice, once compressed here as one zstd
 * frame with a checksum (so the line decoder sees the hostile bytes) and
 * once as the frame itself. Every line handed over must be well formed, and
 * its rendered line must decode to the same line, rendered the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "core/error.h"
#include "shard/quarantine.h"

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

static void well_formed(const kiln_quarantine_line *l)
{
	if (!l->topic || !l->topic[0] || l->partition < 0 || l->offset < 0 || !l->path ||
	    l->violation_count < 1 || l->violation_count > KILN_VIOLATIONS_MAX ||
	    l->count < l->violation_count || l->code <= KILN_REJECT_NONE || l->code >= KILN_REJECT_COUNT_ ||
	    l->code != l->violations[0].code || strcmp(l->path, l->violations[0].path) != 0 ||
	    (l->record_null ? l->record != NULL || l->record_len || l->record_base64 : !l->record))
		abort();
	for (size_t i = 0; i < l->violation_count; i++)
		if (l->violations[i].code <= KILN_REJECT_NONE ||
		    l->violations[i].code >= KILN_REJECT_COUNT_ ||
		    strlen(l->violations[i].path) >= KILN_PATH_MAX)
			abort();
}

typedef struct again {
	const kiln_buf *line;
} again;

static int same_line(void *ctx, const kiln_quarantine_line *b)
{
	const kiln_buf *want = ctx;
	kiln_buf line = KILN_BUF_INIT(0);

	well_formed(b);
	if (kiln_quarantine_render_line(&line, b) < 0 || line.len != want->len ||
	    memcmp(line.ptr, want->ptr, line.len) != 0)
		abort();
	kiln_buf_free(&line);
	return 7; /* stops after the one line */
}

static int on_line(void *ctx, const kiln_quarantine_line *l)
{
	kiln_buf line = KILN_BUF_INIT(0);
	size_t zlen;
	void *z;

	(void)ctx;
	well_formed(l);
	if (kiln_quarantine_render_line(&line, l) < 0 || line.len == 0 || line.ptr[line.len - 1] != '\n' ||
	    memchr(line.ptr, '\n', line.len - 1))
		abort();
	z = compress(line.ptr, line.len, &zlen);
	if (kiln_quarantine_decode(z, zlen, "fuzz-rendered", same_line, &line) != 7)
		abort();
	free(z);
	kiln_buf_free(&line);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t zlen;
	void *z = compress(data, size, &zlen);
	int rc = kiln_quarantine_decode(z, zlen, "fuzz", on_line, NULL);

	/* an error names where it is and is one line */
	if (rc == KILN_EINVALID && (!strstr(kiln_error_last(), "fuzz") || strchr(kiln_error_last(), '\n')))
		abort();
	free(z);
	kiln_quarantine_decode(data, size, "fuzz", on_line, NULL);
	return 0;
}
