/* Spooled zstd objects (see spool.h). */
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_getCParams: the window of a level */
#include "shard/spool.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fs.h"
#include "shard/object.h"

#define CHUNK (1u << 20)

/* Where the spool files are, for messages: "spool file in DIR", with
 * "(TMPDIR)" when DIR came from the environment. */
#define SPOOL_WHAT_CAP 4200
static const char *spool_what(const kiln_spool *s, char out[SPOOL_WHAT_CAP])
{
	snprintf(out, SPOOL_WHAT_CAP, "spool file in %s%s", kiln_fs_temp_dir(s->dir),
	         s->dir ? "" : " (TMPDIR)");
	return out;
}

/* KILN_EIO "spool file in DIR: OP: strerror(err)". */
static int spool_fail(const kiln_spool *s, const char *op, int err)
{
	char what[SPOOL_WHAT_CAP];

	return kiln_error_set(KILN_EIO, "%s: %s%s%s", spool_what(s, what), op, *op ? ": " : "",
	                      strerror(err));
}

int kiln_spool_open(kiln_spool *s, const char *dir)
{
	memset(s, 0, sizeof(*s));
	s->dir = dir;
	s->fd = kiln_fs_temp_file(dir, "spool");
	return s->fd < 0 ? s->fd : 0;
}

void kiln_spool_close(kiln_spool *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	kiln_buf_free(&s->pending);
	free(s->chunk);
	s->chunk = NULL;
}

/* Readies cctx for a new frame of the object format: level, content
 * checksum, content size in the header (pledged, or unknown: see
 * end_stream); a caller's framing (kiln_zstd_multithread) stays. */
static void frame_begin(ZSTD_CCtx *cctx, int level, unsigned long long pledged)
{
	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
	ZSTD_CCtx_setPledgedSrcSize(cctx, pledged);
}

/* ---- streaming ------------------------------------------------------------ */

#define STREAM_MIN        (4u << 20) /* smaller objects are compressed when stored */
#define STREAM_MAX_WINDOW (8u << 20) /* what may wait in memory before the frame begins */
#define ZSTD_MAGIC        0xFD2FB528u

void kiln_spool_stream(kiln_spool *s, ZSTD_CCtx *cctx, int level)
{
	ZSTD_compressionParameters cp = ZSTD_getCParams(level, ZSTD_CONTENTSIZE_UNKNOWN, 0);
	uint64_t window = (uint64_t)1 << cp.windowLog;

	if (window > STREAM_MAX_WINDOW)
		return;
	s->stream = cctx;
	s->level = level;
	/* begun past the window, the frame is not single-segment: its header
	 * with the content size differs from the streamed one only there */
	s->stream_after = window > STREAM_MIN ? window : STREAM_MIN;
}

static int broken(kiln_spool *s, int rc)
{
	s->broken = true;
	return rc;
}

/* Compresses len bytes into the open frame (mode: continue or end),
 * appending what it produces to the file. */
static int feed(kiln_spool *s, const void *data, size_t len, ZSTD_EndDirective mode)
{
	char what[SPOOL_WHAT_CAP];
	ZSTD_inBuffer in = {data, len, 0};
	size_t rest;
	int rc;

	do {
		ZSTD_outBuffer out = {s->chunk, CHUNK, 0};

		rest = ZSTD_compressStream2(s->stream, &out, &in, mode);
		if (ZSTD_isError(rest))
			return broken(s, kiln_error_set(KILN_EIO, "zstd: %s", ZSTD_getErrorName(rest)));
		if ((rc = kiln_fs_write_all(s->fd, s->chunk, out.pos, spool_what(s, what))) < 0)
			return broken(s, rc);
		s->compressed += out.pos;
	} while (mode == ZSTD_e_end ? rest != 0 : in.pos < in.size);
	return 0;
}

/* Starts the object's frame in the file: streamed (no size known yet, its
 * bytes after the room) or, for an object that never began streaming, at
 * once with its size pledged. */
static int frame_start(kiln_spool *s, bool streamed)
{
	if (!s->chunk && !(s->chunk = malloc(CHUNK)))
		return broken(s, kiln_error_oom(NULL));
	if (ftruncate(s->fd, 0) < 0 || lseek(s->fd, streamed ? KILN_SPOOL_ROOM : 0, SEEK_SET) < 0)
		return broken(s, spool_fail(s, "", errno));
	frame_begin(s->stream, s->level, streamed ? ZSTD_CONTENTSIZE_UNKNOWN : s->size);
	s->streaming = streamed;
	s->compressed = 0;
	return 0;
}

/* Begins the frame with what waits in memory. */
static int begin_stream(kiln_spool *s)
{
	int rc = frame_start(s, true);

	if (rc == 0)
		rc = feed(s, s->pending.ptr, s->pending.len, ZSTD_e_continue);
	kiln_buf_reset(&s->pending);
	return rc;
}

/* Once the frame has begun, a write of at least this much goes to libzstd
 * as it is (after what is held): its multithreaded compressor copies the
 * input into its own 1 MiB jobs anyway, and cuts them from the input alone,
 * so the bytes are the same as through `pending`, without a copy into it
 * (nor the first touch of its pages). Smaller writes (single lines) are
 * gathered, so libzstd is called once per CHUNK, not per line. */
#define STREAM_DIRECT (64u << 10)

static int stream_write(kiln_spool *s, const void *data, size_t len)
{
	int rc;

	if (s->streaming && len >= STREAM_DIRECT) {
		if (s->pending.len) {
			rc = feed(s, s->pending.ptr, s->pending.len, ZSTD_e_continue);
			kiln_buf_reset(&s->pending);
			if (rc < 0)
				return rc;
		}
		s->size += len;
		return feed(s, data, len, ZSTD_e_continue);
	}
	if ((rc = kiln_buf_put(&s->pending, data, len)) < 0)
		return broken(s, rc);
	s->size += len;
	if (!s->streaming)
		return s->size > s->stream_after ? begin_stream(s) : 0;
	if (s->pending.len < CHUNK)
		return 0;
	rc = feed(s, s->pending.ptr, s->pending.len, ZSTD_e_continue);
	kiln_buf_reset(&s->pending);
	return rc;
}

/* Ends a streamed frame and writes its header with the content size over
 * the room and the streamed header. */
static int end_stream(kiln_spool *s)
{
	unsigned char head[6], final[10];
	int rc;

	rc = feed(s, s->pending.ptr, s->pending.len, ZSTD_e_end);
	kiln_buf_reset(&s->pending);
	if (rc < 0)
		return rc;
	if (pread(s->fd, head, sizeof(head), KILN_SPOOL_ROOM) != (ssize_t)sizeof(head))
		return broken(s, spool_fail(s, "read", errno));
	/* magic, then a descriptor without content size, single segment or
	 * dictionary, then the window byte */
	if ((head[0] | head[1] << 8 | head[2] << 16 | (uint32_t)head[3] << 24) != ZSTD_MAGIC ||
	    (head[4] & 0xE3) != 0)
		return broken(s, kiln_error_set(KILN_EIO, "zstd: unexpected streamed frame header"));
	if (s->size <= ((uint64_t)1 << ((head[5] >> 3) + 10)) * (8 + (head[5] & 7)) / 8)
		return broken(s, kiln_error_set(KILN_EIO, "zstd: a streamed frame within its window"));
	if (s->size >= 0xFFFFFFFFu)
		return broken(s,
		              kiln_error_set(KILN_EINVALID,
		                             "an object of %llu bytes is too large to stream (4 GiB at most)",
		                             (unsigned long long)s->size));
	memcpy(final, head, 4);
	final[4] = (unsigned char)(head[4] | 2u << 6); /* a 4-byte content size */
	final[5] = head[5];
	for (int i = 0; i < 4; i++)
		final[6 + i] = (unsigned char)(s->size >> (8 * i));
	if (pwrite(s->fd, final, sizeof(final), 0) != (ssize_t)sizeof(final))
		return broken(s, spool_fail(s, "write", errno));
	s->compressed += KILN_SPOOL_ROOM;
	return 0;
}

/* Compresses an object that never began streaming (it waits in memory)
 * at once, with its size pledged. */
static int compress_held(kiln_spool *s)
{
	int rc = frame_start(s, false);

	if (rc == 0)
		rc = feed(s, s->pending.ptr, s->pending.len, ZSTD_e_end);
	kiln_buf_reset(&s->pending);
	return rc;
}

int kiln_spool_seal(kiln_spool *s)
{
	int rc;

	if (s->broken)
		return kiln_error_set(KILN_EIO, "spool: an earlier failure lost this object's bytes");
	if (!s->stream || s->sealed)
		return 0;
	if ((rc = s->streaming ? end_stream(s) : compress_held(s)) < 0)
		return rc;
	s->sealed = true;
	return 0;
}

/* Hashes and stores a sealed object (the file from offset 0). */
static int store_sealed(kiln_spool *s, kiln_store *store, const char *key, char out_hash[65],
                        uint64_t *out_bytes)
{
	unsigned char digest[32];
	crypto_generichash_state hs;
	char path[64], hash[65], shard_key[128];
	uint64_t at = 0;
	int rc;

	crypto_generichash_init(&hs, NULL, 0, sizeof(digest));
	while (at < s->compressed) {
		size_t want = s->compressed - at < CHUNK ? (size_t)(s->compressed - at) : CHUNK;
		ssize_t n = pread(s->fd, s->chunk, want, (off_t)at);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? spool_fail(s, "read", errno) : spool_fail(s, "read", EIO);
		crypto_generichash_update(&hs, (const unsigned char *)s->chunk, (size_t)n);
		at += (uint64_t)n;
	}
	crypto_generichash_final(&hs, digest, sizeof(digest));
	sodium_bin2hex(hash, sizeof(hash), digest, sizeof(digest));
	if (!key) {
		if ((rc = kiln_shard_name(shard_key, sizeof(shard_key), NULL, hash, NULL)) < 0)
			return rc;
		key = shard_key;
	}
	/* the file has no name: the store opens it through /proc */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", s->fd);
	if ((rc = kiln_store_put_file(store, key, path, s->compressed)) < 0)
		return rc; /* still sealed: a retry stores the same bytes */
	memcpy(out_hash, hash, 65);
	*out_bytes = s->compressed;
	if (ftruncate(s->fd, 0) < 0 || lseek(s->fd, 0, SEEK_SET) < 0)
		return broken(s, spool_fail(s, "truncate", errno));
	s->size = s->compressed = 0;
	s->streaming = s->sealed = false;
	return 0;
}

static int drain(kiln_spool *s)
{
	char what[SPOOL_WHAT_CAP];
	int rc = kiln_fs_write_all(s->fd, s->pending.ptr, s->pending.len, spool_what(s, what));

	if (rc == 0)
		kiln_buf_reset(&s->pending);
	return rc;
}

int kiln_spool_write(kiln_spool *s, const void *data, size_t len)
{
	char what[SPOOL_WHAT_CAP];
	int rc;

	if (s->broken)
		return kiln_error_set(KILN_EIO, "spool: an earlier failure lost this object's bytes");
	if (s->stream)
		return stream_write(s, data, len);

	if (s->pending.len + len > CHUNK && s->pending.len && (rc = drain(s)) < 0)
		return rc;
	if (len > CHUNK) {
		if ((rc = kiln_fs_write_all(s->fd, data, len, spool_what(s, what))) < 0)
			return rc;
	} else if ((rc = kiln_buf_put(&s->pending, data, len)) < 0) {
		return rc;
	}
	s->size += len;
	return 0;
}

int kiln_spool_store(kiln_spool *s, kiln_store *store, ZSTD_CCtx *cctx, int level, const char *key,
                     char out_hash[65], uint64_t *out_bytes)
{
	char path[4096], shard_key[128];
	unsigned char digest[32];
	crypto_generichash_state hs;
	char *in_chunk = NULL, *out_chunk = NULL;
	uint64_t done = 0, total = 0;
	int out_fd = -1, rc;

	if (s->broken)
		return kiln_error_set(KILN_EIO, "spool: an earlier failure lost this object's bytes");
	if (s->stream)
		return (rc = kiln_spool_seal(s)) < 0 ? rc : store_sealed(s, store, key, out_hash, out_bytes);
	if ((rc = drain(s)) < 0)
		return rc;
	in_chunk = malloc(CHUNK);
	out_chunk = malloc(CHUNK);
	if (!in_chunk || !out_chunk) {
		rc = kiln_error_oom(NULL);
		goto cleanup;
	}
	/* the store opens it through /proc: it has no name */
	snprintf(path, sizeof(path), "%s/(spool file)", kiln_fs_temp_dir(s->dir));
	if ((out_fd = kiln_fs_temp_file(s->dir, "spool")) < 0) {
		rc = out_fd;
		goto cleanup;
	}
	frame_begin(cctx, level, s->size);
	crypto_generichash_init(&hs, NULL, 0, sizeof(digest));
	for (;;) {
		size_t want = s->size - done < CHUNK ? (size_t)(s->size - done) : CHUNK;
		ssize_t n = want ? pread(s->fd, in_chunk, want, (off_t)done) : 0;
		ZSTD_EndDirective mode;
		ZSTD_inBuffer in;
		size_t rest;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (want && n == 0)) {
			rc = n < 0 ? spool_fail(s, "read", errno) : spool_fail(s, "read", EIO);
			goto cleanup;
		}
		done += (uint64_t)n;
		mode = done == s->size ? ZSTD_e_end : ZSTD_e_continue;
		in = (ZSTD_inBuffer){in_chunk, (size_t)n, 0};
		do {
			ZSTD_outBuffer out = {out_chunk, CHUNK, 0};
			rest = ZSTD_compressStream2(cctx, &out, &in, mode);
			if (ZSTD_isError(rest)) {
				rc = kiln_error_set(KILN_EIO, "zstd: %s", ZSTD_getErrorName(rest));
				goto cleanup;
			}
			crypto_generichash_update(&hs, (const unsigned char *)out_chunk, out.pos);
			if ((rc = kiln_fs_write_all(out_fd, out_chunk, out.pos, path)) < 0)
				goto cleanup;
			total += out.pos;
		} while (mode == ZSTD_e_end ? rest != 0 : in.pos < in.size);
		if (mode == ZSTD_e_end)
			break;
	}
	crypto_generichash_final(&hs, digest, sizeof(digest));
	sodium_bin2hex(out_hash, 65, digest, sizeof(digest));
	*out_bytes = total;
	if (!key) {
		if ((rc = kiln_shard_name(shard_key, sizeof(shard_key), NULL, out_hash, NULL)) < 0)
			goto cleanup;
		key = shard_key;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", out_fd);
	if ((rc = kiln_store_put_file(store, key, path, total)) < 0)
		goto cleanup;
	/* stored: empty the spool for the next object */
	if (ftruncate(s->fd, 0) < 0 || lseek(s->fd, 0, SEEK_SET) < 0) {
		rc = spool_fail(s, "truncate", errno);
		goto cleanup;
	}
	s->size = 0;
cleanup:
	if (out_fd >= 0) {
		close(out_fd);
	}
	free(in_chunk);
	free(out_chunk);
	return rc;
}
