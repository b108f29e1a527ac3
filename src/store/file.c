/* The file:// store: one object per regular file under a root directory.
 * A put copies into ROOT/.tmp/<random>, fsyncs it, renames it over
 * ROOT/<key> and fsyncs the directory, so readers see the old object or the
 * whole new one, and a completed put survives a crash. ROOT/.tmp is the
 * store's scratch space: never a key, skipped by list; after a crash it may
 * hold partial copies that are safe to delete. */
#include "store/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/array.h"
#include "core/error.h"

#define CHUNK   (1u << 20)
#define TMP_DIR ".tmp"

typedef struct file_store {
	kiln_store base;
	char *root; /* absolute, no trailing '/' */
} file_store;

extern const kiln_store_backend kiln_store_file_backend;

static char *join(const char *a, const char *b)
{
	char *s;

	if (asprintf(&s, "%s/%s", a, b) < 0)
		return NULL;
	return s;
}

/* fsyncs the directory at path so an entry created or renamed in it is durable. */
static int sync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
	if (fsync(fd) < 0 && errno != EINVAL) {
		int e = errno;

		close(fd);
		return kiln_error_set(KILN_EIO, "fsync %s: %s", path, strerror(e));
	}
	close(fd);
	return 0;
}

/* Keys of the restricted zones: raw/ (records byte-exact) and quarantine/
 * (rejected records with their raw text), personal data both. Their files
 * are 0600 and their directories 0700 whatever the umask; every other key
 * (shards) is created 0666 and 0777 less the umask. */
static bool restricted_key(const char *key)
{
	return strncmp(key, "raw/", 4) == 0 || strncmp(key, "quarantine/", 11) == 0;
}

/* mkdir(path, mode); an owner-only mode is set exactly, whatever the umask. */
static int make_dir(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0)
		return -1;
	return mode == 0777 ? 0 : chmod(path, mode);
}

/* mkdir -p for path (modified in place and restored) with `mode` for every
 * directory it creates; the parent of every directory it creates is
 * fsynced. */
static int mkdir_p(char *path, mode_t mode)
{
	struct stat st;
	char *slash;
	int rc;

	if (make_dir(path, mode) == 0) {
		slash = strrchr(path, '/');
		if (slash && slash != path) {
			*slash = '\0';
			rc = sync_dir(path);
			*slash = '/';
			return rc;
		}
		return 0;
	}
	if (errno == EEXIST) {
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			return 0;
		return kiln_error_set(KILN_EIO, "%s: exists and is not a directory", path);
	}
	if (errno != ENOENT)
		return kiln_error_set(KILN_EIO, "mkdir %s: %s", path, strerror(errno));
	slash = strrchr(path, '/');
	if (!slash || slash == path)
		return kiln_error_set(KILN_EIO, "mkdir %s: %s", path, strerror(ENOENT));
	*slash = '\0';
	rc = mkdir_p(path, mode);
	*slash = '/';
	if (rc < 0)
		return rc;
	if (make_dir(path, mode) < 0 && errno != EEXIST)
		return kiln_error_set(KILN_EIO, "mkdir %s: %s", path, strerror(errno));
	*slash = '\0';
	rc = sync_dir(path);
	*slash = '/';
	return rc;
}

static int file_open(kiln_store **out, const char *url, const kiln_store_options *options)
{
	const char *dir = url + strlen("file://");
	char *path = NULL, *tmp = NULL;
	file_store *s = NULL;
	size_t len;
	int rc;

	(void)options;
	*out = NULL;
	if (!*dir)
		return kiln_error_set(KILN_EINVALID,
		                      "store URL '%s' names no directory (file:///abs or file://rel)", url);
	path = strdup(dir);
	if (!path)
		return kiln_error_oom(NULL);
	len = strlen(path);
	while (len > 1 && path[len - 1] == '/')
		path[--len] = '\0';
	if ((rc = mkdir_p(path, 0777)) < 0)
		goto cleanup;
	s = calloc(1, sizeof(*s));
	if (!s) {
		rc = kiln_error_oom(NULL);
		goto cleanup;
	}
	s->root = realpath(path, NULL);
	if (!s->root) {
		rc = kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	tmp = join(s->root, TMP_DIR);
	if (!tmp) {
		rc = kiln_error_oom(NULL);
		goto cleanup;
	}
	/* A reader may open a store it cannot write (a read-only mount, a
	 * cache node's directory owned by the node): without ROOT/.tmp, a put
	 * fails on its temporary file, and reading works. */
	if ((rc = mkdir_p(tmp, 0777)) < 0 && access(s->root, W_OK) == 0)
		goto cleanup;
	s->base.backend = &kiln_store_file_backend;
	s->base.url = strdup(url);
	if (!s->base.url) {
		rc = kiln_error_oom(NULL);
		goto cleanup;
	}
	*out = &s->base;
	s = NULL;
	rc = 0;
cleanup:
	if (s) {
		free(s->root);
		free(s);
	}
	free(tmp);
	free(path);
	return rc;
}

static void file_close(kiln_store *store)
{
	file_store *s = (file_store *)store;

	free(s->root);
	free(s->base.url);
	free(s);
}

/* ROOT/.tmp is scratch space, so no key may start there. */
static int check_key(file_store *s, const char *key)
{
	size_t n = strlen(TMP_DIR);

	if (strncmp(key, TMP_DIR, n) == 0 && (key[n] == '/' || key[n] == '\0'))
		return kiln_error_set(KILN_EINVALID, "%s: key '%s' is inside the store's scratch directory",
		                      s->base.url, key);
	return 0;
}

/* Copies exactly size bytes from in to out: copy_file_range where the kernel
 * and filesystems allow (reflinks, no user-space copy), else read/write. */
static int copy_fd(int in, int out, uint64_t size, const char *src, const char *dst)
{
	uint64_t done = 0;
	char *buf = NULL;
	bool plain = false;
	int rc = 0;

	while (done < size) {
		size_t want = size - done > CHUNK ? CHUNK : (size_t)(size - done);
		ssize_t n;

		if (!plain) {
			n = copy_file_range(in, NULL, out, NULL, want, 0);
			if (n < 0 && done == 0 &&
			    (errno == ENOSYS || errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP)) {
				plain = true;
				continue;
			}
			if (n < 0) {
				if (errno == EINTR)
					continue;
				rc = kiln_error_set(KILN_EIO, "copy %s to %s: %s", src, dst, strerror(errno));
				break;
			}
		} else {
			if (!buf && !(buf = malloc(CHUNK))) {
				rc = kiln_error_oom(NULL);
				break;
			}
			n = read(in, buf, want);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				rc = kiln_error_set(KILN_EIO, "read %s: %s", src, strerror(errno));
				break;
			}
			for (ssize_t off = 0; off < n;) {
				ssize_t w = write(out, buf + off, (size_t)(n - off));

				if (w < 0 && errno == EINTR)
					continue;
				if (w < 0) {
					rc = kiln_error_set(KILN_EIO, "write %s: %s", dst, strerror(errno));
					goto out;
				}
				off += w;
			}
		}
		if (n == 0) {
			rc = kiln_error_set(KILN_EIO, "%s: shrank to %" PRIu64 " bytes while being stored",
			                    src, done);
			break;
		}
		done += (uint64_t)n;
	}
out:
	free(buf);
	return rc;
}

/* Creates ROOT/.tmp/put-<16 hex> exclusively; mode 0666 less the umask, like
 * any file the process writes, or exactly 0600 for a restricted key (from
 * the start: its content is never readable by others, even in .tmp). */
static int make_temp(file_store *s, bool restricted, char **out_path, int *out_fd)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		uint64_t r;
		char *path;
		int fd;

		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			return kiln_error_set(KILN_EIO, "getrandom: %s", strerror(errno));
		if (asprintf(&path, "%s/%s/put-%016" PRIx64, s->root, TMP_DIR, r) < 0)
			return kiln_error_oom(NULL);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, restricted ? 0600 : 0666);
		if (fd >= 0 && restricted && fchmod(fd, 0600) < 0) {
			int rc = kiln_error_set(KILN_EIO, "chmod %s: %s", path, strerror(errno));

			close(fd);
			unlink(path);
			free(path);
			return rc;
		}
		if (fd >= 0) {
			*out_path = path;
			*out_fd = fd;
			return 0;
		}
		if (errno != EEXIST) {
			int rc = kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));

			free(path);
			return rc;
		}
		free(path);
	}
	return kiln_error_set(KILN_EIO, "%s/%s: no free temporary name", s->root, TMP_DIR);
}

/* The restricted zone's top directory (ROOT/raw, ROOT/quarantine) made
 * 0700 when an older kiln or another tool left it open to group or others. */
static int tighten_zone(file_store *s, const char *key)
{
	char *zone = NULL;
	struct stat st;
	int rc = 0;

	if (asprintf(&zone, "%s/%.*s", s->root, (int)strcspn(key, "/"), key) < 0)
		return kiln_error_oom(NULL);
	if (stat(zone, &st) < 0 || ((st.st_mode & 077) && chmod(zone, 0700) < 0))
		rc = kiln_error_set(KILN_EIO, "chmod %s: %s", zone, strerror(errno));
	free(zone);
	return rc;
}

/* exclusive: link(2) the temporary file in, which fails when dest exists,
 * instead of renaming it over dest. */
static int put_file(kiln_store *store, const char *key, const char *path, uint64_t size, bool exclusive)
{
	file_store *s = (file_store *)store;
	bool restricted = restricted_key(key);
	char *dest = NULL, *tmp = NULL, *slash;
	int in = -1, out = -1, rc;

	if ((rc = check_key(s, key)) < 0)
		return rc;
	in = open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		rc = kiln_error_set(errno == ENOENT ? KILN_ENOTFOUND : KILN_EIO, "%s: %s", path,
		                    strerror(errno));
		goto cleanup;
	}
	if ((rc = kiln_store_check_upload(in, path, size)) < 0)
		goto cleanup;
	dest = join(s->root, key);
	if (!dest) {
		rc = kiln_error_oom(NULL);
		goto cleanup;
	}
	if ((rc = make_temp(s, restricted, &tmp, &out)) < 0)
		goto cleanup;
	if ((rc = copy_fd(in, out, size, path, tmp)) < 0)
		goto cleanup;
	if (fsync(out) < 0) {
		rc = kiln_error_set(KILN_EIO, "fsync %s: %s", tmp, strerror(errno));
		goto cleanup;
	}
	if (close(out) < 0) {
		out = -1;
		rc = kiln_error_set(KILN_EIO, "close %s: %s", tmp, strerror(errno));
		goto cleanup;
	}
	out = -1;
	slash = strrchr(dest, '/');
	*slash = '\0';
	rc = mkdir_p(dest, restricted ? 0700 : 0777);
	*slash = '/';
	if (rc < 0 || (restricted && (rc = tighten_zone(s, key)) < 0))
		goto cleanup;
	if (exclusive && link(tmp, dest) < 0) {
		rc = errno == EEXIST
		         ? kiln_error_set(KILN_EMODIFIED, "%s: exists already", dest)
		         : kiln_error_set(KILN_EIO, "link %s to %s: %s", tmp, dest, strerror(errno));
		goto cleanup;
	}
	if (!exclusive && rename(tmp, dest) < 0) {
		rc = kiln_error_set(KILN_EIO, "rename %s to %s: %s", tmp, dest, strerror(errno));
		goto cleanup;
	}
	if (exclusive)
		unlink(tmp);
	free(tmp);
	tmp = NULL;
	*slash = '\0';
	rc = sync_dir(dest);
	*slash = '/';
cleanup:
	if (out >= 0)
		close(out);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	if (in >= 0)
		close(in);
	free(dest);
	return rc;
}

static int file_put_file(kiln_store *store, const char *key, const char *path, uint64_t size)
{
	return put_file(store, key, path, size, false);
}

static int file_put_file_new(kiln_store *store, const char *key, const char *path, uint64_t size)
{
	return put_file(store, key, path, size, true);
}

static int file_get(kiln_store *store, const char *key, kiln_store_sink sink, void *ctx)
{
	file_store *s = (file_store *)store;
	char *path = NULL, *buf = NULL;
	struct stat st;
	int fd = -1, rc;

	if ((rc = check_key(s, key)) < 0)
		return rc;
	if (!(path = join(s->root, key)))
		return kiln_error_oom(NULL);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			rc =
			    kiln_error_set(KILN_ENOTFOUND, "%s: no object '%s' (%s)", s->base.url, key, path);
		else
			rc = kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	if (fstat(fd, &st) < 0) {
		rc = kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = kiln_error_set(KILN_ENOTFOUND, "%s: no object '%s' (%s is not a regular file)",
		                    s->base.url, key, path);
		goto cleanup;
	}
	if (!(buf = malloc(CHUNK))) {
		rc = kiln_error_oom(NULL);
		goto cleanup;
	}
	for (;;) {
		ssize_t n = read(fd, buf, CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = kiln_error_set(KILN_EIO, "read %s: %s", path, strerror(errno));
			break;
		}
		if (n == 0) {
			rc = 0;
			break;
		}
		if ((rc = sink(ctx, buf, (size_t)n)) != 0)
			break;
	}
cleanup:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(path);
	return rc;
}

static int file_stat(kiln_store *store, const char *key, uint64_t *out_size)
{
	file_store *s = (file_store *)store;
	struct stat st;
	char *path;
	int rc;

	if ((rc = check_key(s, key)) < 0)
		return rc;
	if (!(path = join(s->root, key)))
		return kiln_error_oom(NULL);
	if (stat(path, &st) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			rc = 0;
		else
			rc = kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
	} else if (S_ISREG(st.st_mode)) {
		if (out_size)
			*out_size = (uint64_t)st.st_size;
		rc = 1;
	} else {
		rc = 0; /* a directory is a prefix, not an object */
	}
	free(path);
	return rc;
}

static int file_remove(kiln_store *store, const char *key)
{
	file_store *s = (file_store *)store;
	char *path, *slash;
	int rc;

	if ((rc = check_key(s, key)) < 0)
		return rc;
	if (!(path = join(s->root, key)))
		return kiln_error_oom(NULL);
	if (unlink(path) < 0) {
		if (errno == ENOENT || errno == ENOTDIR || errno == EISDIR)
			rc =
			    kiln_error_set(KILN_ENOTFOUND, "%s: no object '%s' (%s)", s->base.url, key, path);
		else
			rc = kiln_error_set(KILN_EIO, "unlink %s: %s", path, strerror(errno));
	} else {
		slash = strrchr(path, '/');
		*slash = '\0';
		rc = sync_dir(path);
	}
	free(path);
	return rc;
}

/* --- list ------------------------------------------------------------------
 * A depth-first walk that yields keys in strcmp order: each directory's
 * entries are sorted with a directory named as if it ended in '/', because
 * every key under directory X starts with "X/". */

typedef struct entry {
	char *name;
	bool dir;
	uint64_t size;
	int64_t mtime;
} entry;

typedef struct walk {
	file_store *s;
	const char *prefix;
	size_t prefix_len;
	kiln_store_key_cb cb;
	void *ctx;
} walk;

static int entry_cmp(const void *pa, const void *pb)
{
	const entry *a = pa, *b = pb;
	const unsigned char *x = (const unsigned char *)a->name, *y = (const unsigned char *)b->name;

	for (;; x++, y++) {
		int cx = *x ? *x : (a->dir ? '/' : 0);
		int cy = *y ? *y : (b->dir ? '/' : 0);

		if (cx != cy || cx == 0 || cx == '/')
			return cx - cy;
	}
}

static void free_entries(entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

/* Walks ROOT/rel (rel is "" or ends in '/'). */
static int walk_dir(walk *w, const char *rel)
{
	char *dirpath = NULL, *key = NULL;
	entry *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = NULL;
	int rc = 0;

	if (asprintf(&dirpath, "%s/%s", w->s->root, rel) < 0)
		return kiln_error_oom(NULL);
	d = opendir(dirpath);
	if (!d) {
		if (errno != ENOENT && errno != ENOTDIR)
			rc = kiln_error_set(KILN_EIO, "%s: %s", dirpath, strerror(errno));
		goto cleanup;
	}
	errno = 0;
	while ((de = readdir(d))) {
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (!*rel && strcmp(de->d_name, TMP_DIR) == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue; /* removed while we walked */
			rc = kiln_error_set(KILN_EIO, "%s/%s: %s", dirpath, de->d_name, strerror(errno));
			goto cleanup;
		}
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
			continue;
		if ((rc = KILN_ARRAY_GROW(v, cap, n, NULL)) < 0)
			goto cleanup;
		v[n].name = strdup(de->d_name);
		if (!v[n].name) {
			rc = kiln_error_oom(NULL);
			goto cleanup;
		}
		v[n].dir = S_ISDIR(st.st_mode);
		v[n].size = (uint64_t)st.st_size;
		v[n].mtime = (int64_t)st.st_mtime;
		n++;
	}
	if (errno) {
		rc = kiln_error_set(KILN_EIO, "%s: %s", dirpath, strerror(errno));
		goto cleanup;
	}
	closedir(d);
	d = NULL;
	if (n > 1)
		qsort(v, n, sizeof(*v), entry_cmp);
	for (size_t i = 0; i < n && rc == 0; i++) {
		size_t len;

		free(key);
		if (asprintf(&key, "%s%s%s", rel, v[i].name, v[i].dir ? "/" : "") < 0) {
			key = NULL;
			rc = kiln_error_oom(NULL);
			break;
		}
		len = strlen(key);
		if (v[i].dir) {
			/* descend only where the prefix and this directory can overlap */
			if (strncmp(key, w->prefix, len < w->prefix_len ? len : w->prefix_len) == 0)
				rc = walk_dir(w, key);
		} else if (len >= w->prefix_len && strncmp(key, w->prefix, w->prefix_len) == 0 &&
		           kiln_store_key_valid(key)) {
			rc = w->cb(w->ctx, key, v[i].size, v[i].mtime);
		}
	}
cleanup:
	if (d)
		closedir(d);
	free_entries(v, n);
	free(key);
	free(dirpath);
	return rc;
}

static int file_list(kiln_store *store, const char *prefix, kiln_store_key_cb cb, void *ctx)
{
	file_store *s = (file_store *)store;
	walk w = {.s = s, .prefix = prefix, .prefix_len = strlen(prefix), .cb = cb, .ctx = ctx};
	const char *slash = strrchr(prefix, '/');
	char *start;
	int rc;

	if (strncmp(prefix, TMP_DIR "/", strlen(TMP_DIR) + 1) == 0)
		return 0; /* scratch space holds no keys */
	/* start at the deepest directory the prefix names whole */
	if (!slash)
		return walk_dir(&w, "");
	start = strndup(prefix, (size_t)(slash - prefix) + 1);
	if (!start)
		return kiln_error_oom(NULL);
	rc = walk_dir(&w, start);
	free(start);
	return rc;
}

const kiln_store_backend kiln_store_file_backend = {
    .version = KILN_STORE_BACKEND_VERSION,
    .scheme = "file",
    .config_url = "file://DIR",
    .local_path = true, /* file://relative/dir is relative to the config file */
    .options = NULL,    /* it reads no store.* key */
    .open = file_open,
    .put_file = file_put_file,
    .get = file_get,
    .stat = file_stat,
    .remove = file_remove,
    .list = file_list,
    .close = file_close,
    .put_file_new = file_put_file_new,
};
