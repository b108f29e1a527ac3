/* Local file-system helpers (see fs.h). */
#include "core/fs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

static int remove_at(int at, const char *name)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int fd, rc = 0;

	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(at, name, 0) < 0 && errno != ENOENT ? -1 : 0;
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
		    remove_at(dirfd(d), e->d_name) < 0)
			rc = -1;
	closedir(d);
	if (rc == 0 && unlinkat(at, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		rc = -1;
	return rc;
}

int kiln_fs_remove_tree(const char *path)
{
	if (remove_at(AT_FDCWD, path) < 0)
		return kiln_error_set(KILN_EIO, "%s: cannot remove: %s", path, strerror(errno));
	return 0;
}

const char *kiln_fs_temp_dir(const char *dir)
{
	const char *t;

	if (dir)
		return dir;
	t = getenv("TMPDIR");
	return t && *t ? t : "/tmp";
}

int kiln_fs_temp_file(const char *dir, const char *what)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/kiln-%s-XXXXXX", kiln_fs_temp_dir(dir), what);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return kiln_error_set(KILN_EIO, "%s: cannot create a %s file: %s", kiln_fs_temp_dir(dir),
		                      what, strerror(errno));
	unlink(path);
	return fd;
}

int kiln_fs_write_all(int fd, const void *data, size_t len, const char *what)
{
	const char *p = data;

	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return kiln_error_set(KILN_EIO, "%s: write: %s", what, strerror(errno));
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int kiln_fs_create_new(const char *path, const void *data, size_t len, mode_t mode, const char *what)
{
	int fd, rc = 0;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0) {
		if (errno == EEXIST)
			return kiln_error_set(KILN_EMODIFIED, "%s already exists; not overwriting it", path);
		return kiln_error_set(KILN_EIO, "%s: cannot create %s: %s", path, what, strerror(errno));
	}
	/* the umask may have taken bits away: the mode asked for is the mode */
	if (fchmod(fd, mode) != 0 || kiln_fs_write_all(fd, data, len, path) != 0 || fsync(fd) != 0)
		rc = kiln_error_set(KILN_EIO, "%s: cannot write %s: %s", path, what, strerror(errno));
	if (close(fd) != 0 && rc == 0)
		rc = kiln_error_set(KILN_EIO, "%s: cannot write %s: %s", path, what, strerror(errno));
	if (rc < 0)
		unlink(path);
	return rc;
}

void kiln_fs_remove_stale_temps(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	size_t blen = strlen(base);
	char dir[4096];
	struct dirent *e;
	DIR *d;

	if ((size_t)snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) + 1 : 1,
	                     slash ? path : ".") >= sizeof(dir))
		return;
	if (!(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		const char *p = e->d_name + blen;
		char *end;
		long pid;

		if (strncmp(e->d_name, base, blen) != 0 || strncmp(p, ".tmp-", 5) != 0 ||
		    !isdigit((unsigned char)p[5]))
			continue;
		errno = 0;
		pid = strtol(p + 5, &end, 10);
		if (*end || errno || pid <= 0 || pid > INT_MAX || pid == (long)getpid())
			continue;
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			(void)unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

int kiln_fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
	char tmp[4200];

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp-%ld", path, (long)getpid()) >= sizeof(tmp))
		return kiln_error_set(KILN_EINVALID, "%s: the path is too long", path);
	return kiln_fs_write_atomic_via(path, tmp, data, len, mode);
}

int kiln_fs_write_atomic_via(const char *path, const char *tmp, const void *data, size_t len, mode_t mode)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	int fd, dfd, rc;

	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode)) < 0)
		return kiln_error_set(KILN_EIO, "%s: %s", tmp, strerror(errno));
	rc = kiln_fs_write_all(fd, data, len, tmp);
	if (rc == 0 && fsync(fd) < 0)
		rc = kiln_error_set(KILN_EIO, "%s: fsync: %s", tmp, strerror(errno));
	if (close(fd) < 0 && rc == 0)
		rc = kiln_error_set(KILN_EIO, "%s: close: %s", tmp, strerror(errno));
	if (rc == 0 && rename(tmp, path) < 0)
		rc = kiln_error_set(KILN_EIO, "%s: rename: %s", path, strerror(errno));
	if (rc < 0) {
		unlink(tmp);
		return rc;
	}
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		(void)fsync(dfd); /* the rename is done; a folder that cannot be synced loses nothing more */
		close(dfd);
	}
	return 0;
}

/* The fingerprint (see fs.h): 2 MiB or less whole, else the first and
 * last MiB. */
#define FINGERPRINT_PART (1u << 20)

static int hash_range(int fd, const char *path, uint64_t from, uint64_t to, crypto_generichash_state *st)
{
	static _Thread_local char block[1 << 16];

	while (from < to) {
		size_t want = to - from < sizeof(block) ? (size_t)(to - from) : sizeof(block);
		ssize_t n = pread(fd, block, want, (off_t)from);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return kiln_error_set(KILN_EIO, "%s: read: %s", path, strerror(errno));
		if (n == 0)
			return kiln_error_set(
			    KILN_EINVALID, "%s: shorter (%llu bytes) than the %llu bytes an earlier run read",
			    path, (unsigned long long)from, (unsigned long long)to);
		crypto_generichash_update(st, (const unsigned char *)block, (size_t)n);
		from += (uint64_t)n;
	}
	return 0;
}

int kiln_fs_fingerprint(int fd, const char *path, uint64_t bytes, char out[65])
{
	crypto_generichash_state st;
	unsigned char digest[32];
	int rc;

	crypto_generichash_init(&st, NULL, 0, sizeof(digest));
	if (bytes <= 2 * (uint64_t)FINGERPRINT_PART)
		rc = hash_range(fd, path, 0, bytes, &st);
	else if ((rc = hash_range(fd, path, 0, FINGERPRINT_PART, &st)) == 0)
		rc = hash_range(fd, path, bytes - FINGERPRINT_PART, bytes, &st);
	if (rc < 0)
		return rc;
	crypto_generichash_final(&st, digest, sizeof(digest));
	sodium_bin2hex(out, 65, digest, sizeof(digest));
	return 0;
}
