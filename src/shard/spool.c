/* Spooled zstd objects (see spool.h). */
#include "shard/spool.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "shard/object.h"

#define CHUNK (1u << 20)

static const char *spool_dir(const char *dir)
{
	const char *t;

	if (dir)
		return dir;
	t = getenv("TMPDIR");
	return t && *t ? t : "/tmp";
}

/* A new temporary file in dir; *path_out keeps its name when unlink_now is false. */
static int temp_file(const char *dir, bool unlink_now, char path[4096])
{
	int fd;

	snprintf(path, 4096, "%s/kiln-spool-XXXXXX", spool_dir(dir));
	fd = mkstemp(path);
	if (fd < 0)
		return kiln_error_set(KILN_EIO, "%s: cannot create a spool file: %s", spool_dir(dir),
		                      strerror(errno));
	if (unlink_now)
		unlink(path); /* gone with the process, whatever happens to it */
	return fd;
}

static int write_all(int fd, const char *data, size_t len, const char *what)
{
	while (len) {
		ssize_t w = write(fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return kiln_error_set(KILN_EIO, "%s: write: %s", what, strerror(errno));
		data += w;
		len -= (size_t)w;
	}
	return 0;
}

int kiln_spool_open(kiln_spool *s, const char *dir)
{
	char path[4096];

	memset(s, 0, sizeof(*s));
	s->dir = dir;
	s->fd = temp_file(dir, true, path);
	return s->fd < 0 ? s->fd : 0;
}

void kiln_spool_close(kiln_spool *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	kiln_buf_free(&s->pending);
}

static int drain(kiln_spool *s)
{
	int rc = write_all(s->fd, s->pending.ptr, s->pending.len, "spool file");

	if (rc == 0)
		kiln_buf_reset(&s->pending);
	return rc;
}

int kiln_spool_write(kiln_spool *s, const void *data, size_t len)
{
	int rc;

	if (s->pending.len + len > CHUNK && s->pending.len && (rc = drain(s)) < 0)
		return rc;
	if (len > CHUNK) {
		if ((rc = write_all(s->fd, data, len, "spool file")) < 0)
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

	if ((rc = drain(s)) < 0)
		return rc;
	in_chunk = malloc(CHUNK);
	out_chunk = malloc(CHUNK);
	if (!in_chunk || !out_chunk) {
		rc = kiln_error_set(KILN_ENOMEM, "out of memory");
		goto cleanup;
	}
	if ((out_fd = temp_file(s->dir, false, path)) < 0) {
		rc = out_fd;
		goto cleanup;
	}
	/* the session only: a caller's framing (kiln_zstd_multithread) stays */
	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
	ZSTD_CCtx_setPledgedSrcSize(cctx, s->size); /* the frame header carries the content size */
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
			rc = kiln_error_set(KILN_EIO, "spool file: read: %s",
			                    n < 0 ? strerror(errno) : "short");
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
			if ((rc = write_all(out_fd, out_chunk, out.pos, path)) < 0)
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
	if ((rc = kiln_store_put_file(store, key, path, total)) < 0)
		goto cleanup;
	/* stored: empty the spool for the next object */
	if (ftruncate(s->fd, 0) < 0 || lseek(s->fd, 0, SEEK_SET) < 0) {
		rc = kiln_error_set(KILN_EIO, "spool file: truncate: %s", strerror(errno));
		goto cleanup;
	}
	s->size = 0;
cleanup:
	if (out_fd >= 0) {
		close(out_fd);
		unlink(path);
	}
	free(in_chunk);
	free(out_chunk);
	return rc;
}
