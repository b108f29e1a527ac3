/* Loose git objects checked against their names (see loose.h): a bounded
 * zlib inflate (the header first, its size capped by KILN_GIT_LOOSE_MAX and
 * by what the compressed bytes can hold, then exactly that many bytes), the
 * SHA-1 of git's object id, and an object database backend that reads every
 * loose object through it. Owns nothing beyond one call but the backend,
 * which its object database frees. */
#include "manifest/loose.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2/sys/odb_backend.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/error.h"

/* deflate never shrinks data by more than about 1032 to 1 */
#define DEFLATE_MAX_RATIO 1032u

static pthread_once_t git_once = PTHREAD_ONCE_INIT;

static void git_init_once(void)
{
	git_libgit2_init(); /* git_odb_hash needs libgit2's hash set up */
}

static bool name_valid_n(const char *hex, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
			return false;
	return true;
}

/* Inflates into dst (cap bytes) until it is full or the stream ends;
 * *ended says which. The bytes written, or KILN_EINVALID: zlib cannot go on
 * (truncated, corrupt) or made no progress. */
static long inflate_into(z_stream *zs, unsigned char *dst, size_t cap, bool *ended, const char *hex)
{
	zs->next_out = dst;
	zs->avail_out = (uInt)cap;
	while (zs->avail_out > 0 && !*ended) {
		uInt in = zs->avail_in, out = zs->avail_out;
		int z = inflate(zs, Z_NO_FLUSH);

		if (z == Z_STREAM_END)
			*ended = true;
		else if (z == Z_BUF_ERROR || (z == Z_OK && in == zs->avail_in && out == zs->avail_out))
			return kiln_error_set(
			    KILN_EINVALID, "git object %.40s: truncated (its zlib stream ends early)", hex);
		else if (z != Z_OK)
			return kiln_error_set(KILN_EINVALID, "git object %.40s: not zlib data (%s)", hex,
			                      z == Z_MEM_ERROR ? "out of memory" : "corrupt stream");
	}
	return (long)(cap - zs->avail_out);
}

/* "<type> <size>\0" at the start of p (n bytes): its length with the NUL,
 * or 0 when it is not one. */
static size_t parse_header(const unsigned char *p, size_t n, git_object_t *type, size_t *size)
{
	static const char *const names[] = {"commit", "tree", "blob", "tag"};
	static const git_object_t types[] = {GIT_OBJECT_COMMIT, GIT_OBJECT_TREE, GIT_OBJECT_BLOB,
	                                     GIT_OBJECT_TAG};
	const unsigned char *nul = memchr(p, '\0', n), *s;
	size_t i, v = 0;

	if (!nul)
		return 0;
	for (i = 0; i < 4; i++) {
		size_t k = strlen(names[i]);

		if ((size_t)(nul - p) > k && memcmp(p, names[i], k) == 0 && p[k] == ' ')
			break;
	}
	if (i == 4)
		return 0;
	s = p + strlen(names[i]) + 1;
	if (s == nul || (*s == '0' && s + 1 != nul))
		return 0;
	for (; s < nul; s++) {
		if (*s < '0' || *s > '9' || v > KILN_GIT_LOOSE_MAX)
			return 0;
		v = v * 10 + (size_t)(*s - '0');
	}
	*type = types[i];
	*size = v;
	return (size_t)(nul - p) + 1;
}

int kiln_git_loose_decode(kiln_buf *out, git_object_t *out_type, const void *zbytes, size_t len,
                          const char *hex)
{
	kiln_buf own = KILN_BUF_INIT(0), *content = out ? out : &own;
	unsigned char head[64];
	z_stream zs;
	bool ended = false, zinit = false;
	git_object_t type = GIT_OBJECT_INVALID;
	size_t size = 0, hlen, have;
	git_oid want, got;
	long n;
	int rc;

	pthread_once(&git_once, git_init_once);
	if (out)
		kiln_buf_reset(out);
	if (!hex || strnlen(hex, GIT_OID_HEXSZ) != GIT_OID_HEXSZ || !name_valid_n(hex, GIT_OID_HEXSZ))
		return kiln_error_set(KILN_EINVALID, "git object: its name is not 40 lower-case hex digits");
	if (len == 0 || len > KILN_GIT_LOOSE_MAX)
		return kiln_error_set(KILN_EINVALID, "git object %.40s: %zu bytes stored (1 to %zu accepted)",
		                      hex, len, KILN_GIT_LOOSE_MAX);
	memset(&zs, 0, sizeof(zs));
	zs.next_in = (unsigned char *)(uintptr_t)zbytes;
	zs.avail_in = (uInt)len;
	if (inflateInit(&zs) != Z_OK) {
		rc = kiln_error_set(KILN_ENOMEM, "git object %.40s: zlib: out of memory", hex);
		goto cleanup;
	}
	zinit = true;
	if ((n = inflate_into(&zs, head, sizeof(head), &ended, hex)) < 0) {
		rc = (int)n;
		goto cleanup;
	}
	if (!(hlen = parse_header(head, (size_t)n, &type, &size))) {
		rc = kiln_error_set(KILN_EINVALID, "git object %.40s: no \"<type> <size>\" header", hex);
		goto cleanup;
	}
	if (size > KILN_GIT_LOOSE_MAX - hlen || size / DEFLATE_MAX_RATIO > len) {
		rc = kiln_error_set(KILN_EINVALID,
		                    "git object %.40s: its header says %zu bytes (more than %zu, or than "
		                    "%zu stored bytes can hold)",
		                    hex, size, KILN_GIT_LOOSE_MAX - hlen, len);
		goto cleanup;
	}
	have = (size_t)n - hlen;
	if (have > size) {
		rc = kiln_error_set(KILN_EINVALID, "git object %.40s: longer than its header says", hex);
		goto cleanup;
	}
	/* one byte more than the header says, to see a longer stream */
	if ((rc = kiln_buf_reserve(content, size + 1)) < 0)
		goto cleanup;
	memcpy(content->ptr, head + hlen, have);
	if (!ended) {
		if ((n = inflate_into(&zs, (unsigned char *)content->ptr + have, size + 1 - have, &ended,
		                      hex)) < 0) {
			rc = (int)n;
			goto cleanup;
		}
		have += (size_t)n;
	}
	if (have != size || !ended) {
		rc = kiln_error_set(KILN_EINVALID, "git object %.40s: %s than its header says", hex,
		                    have < size ? "shorter" : "longer");
		goto cleanup;
	}
	if (zs.avail_in != 0) {
		rc = kiln_error_set(KILN_EINVALID, "git object %.40s: bytes after its zlib stream", hex);
		goto cleanup;
	}
	content->len = size;
	content->ptr[size] = '\0';
	if (git_oid_fromstr(&want, hex) < 0 || git_odb_hash(&got, content->ptr, size, type) < 0 ||
	    !git_oid_equal(&want, &got)) {
		rc = kiln_error_set(KILN_EINVALID, "git object %.40s: its content does not hash to its name",
		                    hex);
		goto cleanup;
	}
	if (out_type)
		*out_type = type;
	rc = 0;
cleanup:
	if (zinit)
		inflateEnd(&zs);
	if (rc < 0 && out)
		kiln_buf_reset(out);
	kiln_buf_free(&own);
	return rc;
}

int kiln_git_loose_check(const void *zbytes, size_t len, const char *hex)
{
	return kiln_git_loose_decode(NULL, NULL, zbytes, len, hex);
}

int kiln_git_read_file(kiln_buf *out, const char *path)
{
	struct stat st;
	int fd, rc = 0;

	kiln_buf_reset(out);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return kiln_error_set(errno == ENOENT ? KILN_ENOTFOUND : KILN_EIO, "%s: %s", path,
		                      strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = kiln_error_set(KILN_EINVALID, "%s: not a regular file", path);
		goto cleanup;
	}
	if ((uint64_t)st.st_size > KILN_GIT_LOOSE_MAX) {
		rc = kiln_error_set(KILN_EINVALID,
		                    "%s: %lld bytes (a repository file kiln reads has at most %zu)", path,
		                    (long long)st.st_size, KILN_GIT_LOOSE_MAX);
		goto cleanup;
	}
	if ((rc = kiln_buf_reserve(out, (size_t)st.st_size + 1)) < 0)
		goto cleanup;
	while (out->len <=
	       (size_t)st.st_size) { /* one byte more: a file that grew is read whole or refused */
		ssize_t r = read(fd, out->ptr + out->len, (size_t)st.st_size + 1 - out->len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = kiln_error_set(KILN_EIO, "%s: read: %s", path, strerror(errno));
			goto cleanup;
		}
		if (r == 0)
			break;
		out->len += (size_t)r;
	}
	if (out->len > (size_t)st.st_size)
		rc = kiln_error_set(KILN_EINVALID, "%s: grew while it was read", path);
cleanup:
	close(fd);
	return rc;
}

int kiln_git_loose_check_file(const char *path, const char *hex)
{
	kiln_buf z = KILN_BUF_INIT(0);
	int rc;

	if ((rc = kiln_git_read_file(&z, path)) == 0)
		rc = kiln_git_loose_decode(NULL, NULL, z.ptr, z.len, hex);
	kiln_buf_free(&z);
	return rc;
}

/* ---- the object database backend ------------------------------------------ */

typedef struct guard {
	git_odb_backend parent;
	char *objects; /* ".../objects/" */
} guard;

/* Reads and decodes the loose object oid: 0, GIT_ENOTFOUND when there is no
 * loose file (a packed object: the next backend's), else an error libgit2
 * reports with kiln's message. */
static int guard_load(guard *g, const git_oid *oid, kiln_buf *content, git_object_t *type)
{
	char hex[GIT_OID_HEXSZ + 1], path[4200];
	kiln_buf z = KILN_BUF_INIT(0);
	int rc;

	git_oid_tostr(hex, sizeof(hex), oid);
	snprintf(path, sizeof(path), "%s%.2s/%s", g->objects, hex, hex + 2);
	if ((rc = kiln_git_read_file(&z, path)) == 0)
		rc = kiln_git_loose_decode(content, type, z.ptr, z.len, hex);
	kiln_buf_free(&z);
	if (rc == KILN_ENOTFOUND) {
		kiln_error_clear();
		return GIT_ENOTFOUND;
	}
	if (rc < 0) {
		git_error_set_str(GIT_ERROR_ODB, kiln_error_last());
		return GIT_ERROR;
	}
	return 0;
}

static int guard_read(void **out, size_t *len, git_object_t *type, git_odb_backend *b, const git_oid *oid)
{
	kiln_buf content = KILN_BUF_INIT(0);
	int rc;

	if ((rc = guard_load((guard *)b, oid, &content, type)) == 0) {
		if (!(*out = git_odb_backend_data_alloc(b, content.len + 1))) {
			rc = GIT_ERROR;
		} else {
			memcpy(*out, content.ptr, content.len + 1); /* with its NUL, as libgit2's own */
			*len = content.len;
		}
	}
	kiln_buf_free(&content);
	return rc;
}

static int guard_read_header(size_t *len, git_object_t *type, git_odb_backend *b, const git_oid *oid)
{
	kiln_buf content = KILN_BUF_INIT(0);
	int rc;

	if ((rc = guard_load((guard *)b, oid, &content, type)) == 0)
		*len = content.len;
	kiln_buf_free(&content);
	return rc;
}

/* A short id (a user's "ds@1a2b3c4d"): the one loose object whose name
 * starts with it, read as above. */
static int guard_read_prefix(git_oid *out_id, void **out, size_t *len, git_object_t *type, git_odb_backend *b,
                             const git_oid *short_id, size_t n)
{
	guard *g = (guard *)b;
	char hex[GIT_OID_HEXSZ + 1], dir[4200], name[GIT_OID_HEXSZ + 1] = "";
	struct dirent *e;
	DIR *d;
	int matches = 0;

	git_oid_tostr(hex, sizeof(hex), short_id);
	if (n < 2 || n > GIT_OID_HEXSZ)
		return GIT_PASSTHROUGH;
	snprintf(dir, sizeof(dir), "%s%.2s", g->objects, hex);
	if (!(d = opendir(dir)))
		return GIT_ENOTFOUND;
	while ((e = readdir(d))) {
		if (strlen(e->d_name) != GIT_OID_HEXSZ - 2 || !name_valid_n(e->d_name, GIT_OID_HEXSZ - 2) ||
		    strncmp(e->d_name, hex + 2, n - 2) != 0)
			continue;
		if (matches++ == 0)
			snprintf(name, sizeof(name), "%.2s%s", hex, e->d_name);
	}
	closedir(d);
	if (matches == 0)
		return GIT_ENOTFOUND;
	if (matches > 1) {
		git_error_set_str(GIT_ERROR_ODB, "ambiguous short object id");
		return GIT_EAMBIGUOUS;
	}
	if (git_oid_fromstr(out_id, name) < 0)
		return GIT_ERROR;
	return guard_read(out, len, type, b, out_id);
}

/* Lists nothing: libgit2's own loose backend lists the same files (its
 * git_odb_foreach calls every backend's foreach, NULL or not). */
static int guard_foreach(git_odb_backend *b, git_odb_foreach_cb cb, void *payload)
{
	(void)b, (void)cb, (void)payload;
	return 0;
}

static void guard_free(git_odb_backend *b)
{
	guard *g = (guard *)b;

	free(g->objects);
	free(g);
}

int kiln_git_loose_guard(git_repository *repo)
{
	git_odb *odb = NULL;
	guard *g = calloc(1, sizeof(*g));
	const char *dir = git_repository_path(repo);
	int rc = 0;

	if (!g || !dir || git_odb_init_backend(&g->parent, GIT_ODB_BACKEND_VERSION) < 0 ||
	    asprintf(&g->objects, "%sobjects/", dir) < 0) {
		if (g)
			g->objects = NULL;
		rc = kiln_error_oom(NULL);
		goto cleanup;
	}
	g->parent.read = guard_read;
	g->parent.read_header = guard_read_header;
	g->parent.read_prefix = guard_read_prefix;
	g->parent.foreach = guard_foreach;
	g->parent.free = guard_free;
	/* libgit2 asks backends by priority, highest first: its packs are 2,
	 * its loose objects 1 */
	if (git_repository_odb(&odb, repo) < 0 || git_odb_add_backend(odb, &g->parent, 3) < 0) {
		rc = kiln_error_set(KILN_EIO, "%s: object database: %s", dir,
		                    git_error_last() ? git_error_last()->message : "libgit2 error");
		goto cleanup;
	}
	g = NULL; /* the object database's now */
cleanup:
	if (g)
		guard_free(&g->parent);
	git_odb_free(odb);
	return rc;
}
