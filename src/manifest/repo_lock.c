/* Advisory locks in a manifest repository (see repo_lock.h). */
#include "manifest/repo_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "manifest/internal.h"

#define WAIT_LOGGED_AFTER_MS 5000

static int open_lock_file(kiln_manifest *m, const char *name, const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);

	if (fd < 0 && errno == EACCES) /* another user's lock file: flock needs no write access */
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		int err = errno;
		return kiln_error_set(KILN_EIO, "manifest %s: %s: %s", kiln_manifest_path(m), name,
		                      strerror(err));
	}
	return fd;
}

int kiln_manifest_lock(kiln_manifest *m, const char *name, bool exclusive, bool wait, int *out_fd)
{
	char path[4096 + 64];
	int op = (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB;
	unsigned waited_ms = 0, nap_ms = 1;
	bool logged = false;
	int fd;

	*out_fd = -1;
	snprintf(path, sizeof(path), "%s%s", git_repository_path(kiln_manifest_repo(m)), name);
	if ((fd = open_lock_file(m, name, path)) < 0)
		return fd;
	/* non-blocking tries with growing naps: a long wait is logged once */
	while (flock(fd, op) < 0) {
		int err = errno;
		struct timespec nap;

		if (err == EINTR)
			continue;
		if (err != EWOULDBLOCK) {
			close(fd);
			return kiln_error_set(KILN_EIO, "manifest %s: locking %s: %s", kiln_manifest_path(m),
			                      name, strerror(err));
		}
		if (!wait) {
			close(fd);
			return 0;
		}
		if (!logged && waited_ms >= WAIT_LOGGED_AFTER_MS) {
			logged = true;
			KILN_LOG(KILN_LOG_INFO, "manifest_lock_wait", "waiting for another process's lock",
			         KILN_F_STR("lock", name));
		}
		nap.tv_sec = 0;
		nap.tv_nsec = (long)nap_ms * 1000000L;
		nanosleep(&nap, NULL);
		waited_ms += nap_ms;
		if (nap_ms < 50)
			nap_ms *= 2;
	}
	*out_fd = fd;
	return 1;
}

void kiln_manifest_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* closing the last descriptor releases the flock */
}
