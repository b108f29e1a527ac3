/* Line streaming of zstd JSON Lines objects (see zst_lines.h): a first pass
 * decompresses into one reused chunk and discards the bytes (the frame and
 * its checksum are whole), a second pass fills a capped line buffer. */
#include "shard/zst_lines.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "core/buf.h"
#include "core/error.h"

#define CHUNK ((size_t)128 << 10)

/* Decompresses the whole input, discarding the bytes: 0 when it is exactly
 * one complete zstd frame whose checksum (when present) matches. */
static int check_frame(ZSTD_DCtx *dctx, const void *zst, size_t len, const char *where, char *chunk)
{
	ZSTD_inBuffer in = {zst, len, 0};

	for (;;) {
		ZSTD_outBuffer out = {chunk, CHUNK, 0};
		size_t ret = ZSTD_decompressStream(dctx, &out, &in);

		if (ZSTD_isError(ret))
			return kiln_error_set(KILN_EINVALID, "%s: corrupt zstd frame: %s", where,
			                      ZSTD_getErrorName(ret));
		if (ret == 0)
			break;
		if (in.pos == in.size && out.pos < out.size)
			return kiln_error_set(KILN_EINVALID, "%s: truncated zstd frame (%zu bytes)", where,
			                      len);
	}
	if (in.pos != in.size)
		return kiln_error_set(KILN_EINVALID,
		                      "%s: %zu bytes after the zstd frame (one frame expected)", where,
		                      in.size - in.pos);
	return 0;
}

int kiln_zst_lines(const void *zst, size_t len, const char *where, size_t line_max,
                   int (*cb)(void *ctx, uint64_t number, const char *text, size_t len), void *ctx)
{
	kiln_buf text = KILN_BUF_INIT(line_max + CHUNK);
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	ZSTD_inBuffer in = {zst, len, 0};
	size_t start = 0,
	       scanned = 0; /* text[start..): the unfinished line; text[..scanned) has no '\n' left */
	uint64_t line = 0;
	char *chunk = malloc(CHUNK);
	int rc;

	if (!dctx || !chunk) {
		rc = kiln_error_oom(NULL);
		goto cleanup;
	}
	if ((rc = check_frame(dctx, zst, len, where, chunk)) < 0)
		goto cleanup;
	ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
	for (;;) {
		ZSTD_outBuffer out;
		size_t ret;
		char *nl;

		if (start) {
			memmove(text.ptr, text.ptr + start, text.len - start);
			text.len -= start;
			scanned -= start;
			start = 0;
		}
		if (text.len > line_max || (rc = kiln_buf_reserve(&text, CHUNK)) < 0) {
			rc =
			    text.len > line_max || rc == KILN_ELIMIT
			        ? kiln_error_set(KILN_EINVALID, "%s: line %" PRIu64 ": longer than %zu bytes",
			                         where, line + 1, line_max)
			        : rc;
			goto cleanup;
		}
		out = (ZSTD_outBuffer){text.ptr + text.len, text.cap - text.len, 0};
		ret = ZSTD_decompressStream(dctx, &out, &in);
		if (ZSTD_isError(ret)) { /* checked above; only a changing buffer gets here */
			rc = kiln_error_set(KILN_EINVALID, "%s: corrupt zstd frame: %s", where,
			                    ZSTD_getErrorName(ret));
			goto cleanup;
		}
		text.len += out.pos;
		while ((nl = memchr(text.ptr + scanned, '\n', text.len - scanned))) {
			size_t n = (size_t)(nl - text.ptr) - start;

			line++;
			if (n > line_max) {
				rc = kiln_error_set(KILN_EINVALID,
				                    "%s: line %" PRIu64 ": longer than %zu bytes", where,
				                    line, line_max);
				goto cleanup;
			}
			if ((rc = cb(ctx, line, text.ptr + start, n)) != 0)
				goto cleanup;
			start = scanned = (size_t)(nl - text.ptr) + 1;
		}
		scanned = text.len;
		if (ret == 0)
			break;
		if (in.pos == in.size && out.pos < out.size) {
			rc =
			    kiln_error_set(KILN_EINVALID, "%s: truncated zstd frame (%zu bytes)", where, len);
			goto cleanup;
		}
	}
	if (start != text.len)
		rc = kiln_error_set(KILN_EINVALID,
		                    "%s: line %" PRIu64 ": no newline at the end (truncated object)", where,
		                    line + 1);
cleanup:
	kiln_buf_free(&text);
	ZSTD_freeDCtx(dctx);
	free(chunk);
	return rc;
}
