/* Local file-system helpers (see fs.h). */
#include "core/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
