/* kiln's one reader of secret files: opened without waiting, checked to be
 * a regular owner-only file of bounded size before any read; copies are
 * wiped when released. */
#include "core/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

int kiln_secret_read_file(char **out, size_t *len_out, const char *path, const char *what, size_t max)
{
	char *buf = NULL;
	struct stat st;
	size_t len = 0;
	int fd, flags, err = 0;

	*out = NULL;
	*len_out = 0;
	/* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return kiln_error_set(KILN_ENOTFOUND, "%s: %s not found", path, what);
		return kiln_error_set(KILN_EIO, "%s: cannot open %s: %s", path, what, strerror(errno));
	}
	if (fstat(fd, &st) != 0) {
		err = kiln_error_set(KILN_EIO, "%s: cannot stat %s: %s", path, what, strerror(errno));
		goto cleanup;
	}
	if (!S_ISREG(st.st_mode)) {
		err = kiln_error_set(KILN_EINVALID, "%s: %s is not a regular file", path, what);
		goto cleanup;
	}
	if ((st.st_mode & 077) != 0) {
		err = kiln_error_set(KILN_EINVALID,
		                     "%s: %s mode %04o lets group or others read it; chmod 600 %s", path,
		                     what, (unsigned)(st.st_mode & 07777), path);
		goto cleanup;
	}
	if (st.st_size < 0 || (uintmax_t)st.st_size > max) {
		err = kiln_error_set(KILN_EINVALID, "%s: %s is larger than %zu bytes", path, what, max);
		goto cleanup;
	}
	/* a regular file: reads never wait; blocking mode back for plain semantics */
	if ((flags = fcntl(fd, F_GETFL)) >= 0)
		(void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
	if (!(buf = malloc(max + 1))) {
		err = kiln_error_set(KILN_ENOMEM, "%s: out of memory", path);
		goto cleanup;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, max + 1 - len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = kiln_error_set(KILN_EIO, "%s: cannot read %s: %s", path, what, strerror(errno));
			goto cleanup;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max) { /* it grew since fstat */
			err =
			    kiln_error_set(KILN_EINVALID, "%s: %s is larger than %zu bytes", path, what, max);
			goto cleanup;
		}
	}
	buf[len] = '\0';
	*out = buf;
	*len_out = len;
	buf = NULL;

cleanup:
	if (buf) {
		sodium_memzero(buf, max + 1);
		free(buf);
	}
	close(fd);
	return err;
}

void kiln_secret_free(char *secret, size_t len)
{
	if (!secret)
		return;
	sodium_memzero(secret, len + 1);
	free(secret);
}
