/* kiln's one reader of secret files: opened without waiting, checked to be
 * a regular owner-only file of bounded size before any read; copies are
 * wiped when released. Owner-only includes systemd's credentials
 * (LoadCredential=): mode 0400, owned by root with an access ACL that lets
 * the service's user read it, which stat shows as 0440 (the ACL mask). */
#include "core/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "core/error.h"

/* The POSIX access ACL as Linux stores it (linux/posix_acl_xattr.h):
 * version 2, then entries of little-endian tag, permissions and id. */
#define ACL_XATTR       "system.posix_acl_access"
#define ACL_VERSION     2u
#define ACL_USER_OBJ    0x01u
#define ACL_USER        0x02u
#define ACL_GROUP_OBJ   0x04u
#define ACL_GROUP       0x08u
#define ACL_MASK        0x10u
#define ACL_OTHER       0x20u
#define ACL_ENTRIES_MAX 32u

static uint32_t le(const unsigned char *p, int n)
{
	uint32_t v = 0;

	while (n-- > 0)
		v = v << 8 | p[n];
	return v;
}

/* Whether the group bits of fd's mode are an ACL mask over entries that
 * give no group and no other user anything: the file is readable by its
 * owner and by this process's user only (a systemd credential). */
static bool acl_owner_and_self(int fd)
{
	unsigned char acl[4 + 8 * ACL_ENTRIES_MAX];
	ssize_t n = fgetxattr(fd, ACL_XATTR, acl, sizeof(acl));

	if (n < 4 || (n - 4) % 8 != 0 || le(acl, 4) != ACL_VERSION)
		return false;
	for (ssize_t at = 4; at < n; at += 8) {
		uint32_t tag = le(acl + at, 2), perm = le(acl + at + 2, 2), id = le(acl + at + 4, 4);

		switch (tag) {
		case ACL_USER_OBJ:
		case ACL_MASK:
			break;
		case ACL_USER:
			if (perm && id != (uint32_t)geteuid())
				return false;
			break;
		case ACL_GROUP_OBJ:
		case ACL_GROUP:
		case ACL_OTHER:
			if (perm)
				return false;
			break;
		default:
			return false;
		}
	}
	return true;
}

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
	if ((st.st_mode & 007) != 0 || ((st.st_mode & 070) != 0 && !acl_owner_and_self(fd))) {
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

/* One comma-separated item: its authority starts after "://" (or at the
 * item's start) and ends at the first '/'. */
static int redact_item(kiln_buf *out, const char *s, size_t len, bool *redacted)
{
	const char *scheme = memmem(s, len, "://", 3);
	const char *from = scheme ? scheme + 3 : s;
	const char *end = memchr(from, '/', len - (size_t)(from - s));
	const char *at = NULL;

	if (!end)
		end = s + len;
	for (const char *q = from; q < end; q++)
		if (*q == '@')
			at = q;
	if (!at || (!scheme && !memchr(from, ':', (size_t)(at - from))))
		return kiln_buf_put(out, s, len);
	*redacted = true;
	if (kiln_buf_put(out, s, (size_t)(from - s)) < 0 || kiln_buf_puts(out, "<redacted>") < 0)
		return KILN_ENOMEM;
	return kiln_buf_put(out, at, len - (size_t)(at - s));
}

int kiln_secret_redact_userinfo(kiln_buf *out, const char *s, size_t len)
{
	bool redacted = false;
	size_t i = 0;

	while (i <= len) {
		const char *comma = memchr(s + i, ',', len - i);
		size_t n = comma ? (size_t)(comma - (s + i)) : len - i;
		int rc = redact_item(out, s + i, n, &redacted);

		if (rc < 0 || (comma && (rc = kiln_buf_putc(out, ',')) < 0))
			return rc;
		i += n + 1;
	}
	return redacted ? 1 : 0;
}
