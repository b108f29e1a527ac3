/* The notify protocol (see notify.h): a socket per datagram, sent without
 * waiting, closed at once; the watchdog's next kick in monotonic time. */
#include "core/notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define STATE_MAX 1024 /* the longest datagram kiln sends */

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

bool kiln_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n = path ? strlen(path) : 0;
	socklen_t len;
	ssize_t sent;
	int fd, saved_errno = errno;

	/* a path or an abstract name ('@' becomes the leading NUL) */
	if (n < 2 || n >= sizeof(sa.sun_path) || (path[0] != '/' && path[0] != '@'))
		return false;
	memcpy(sa.sun_path, path, n);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/'));
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
		errno = saved_errno;
		return false;
	}
	do
		sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL | MSG_DONTWAIT, (struct sockaddr *)&sa,
		              len);
	while (sent < 0 && errno == EINTR);
	close(fd);
	errno = saved_errno;
	return sent == (ssize_t)strlen(state);
}

bool kiln_notifyf(const char *fmt, ...)
{
	char state[STATE_MAX];
	va_list ap;

	if (!getenv("NOTIFY_SOCKET"))
		return false;
	va_start(ap, fmt);
	vsnprintf(state, sizeof(state), fmt, ap);
	va_end(ap);
	return kiln_notify(state);
}

bool kiln_notify_reloading(void)
{
	return kiln_notifyf("RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)now_us());
}

void kiln_notify_watchdog_init(kiln_notify_watchdog *w)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	w->interval_us = w->next_us = 0;
	if (!usec || !*usec || !getenv("NOTIFY_SOCKET"))
		return;
	errno = 0;
	v = strtoull(usec, &end, 10);
	if (errno || *end || v == 0)
		return;
	if (pid && *pid) {
		unsigned long long p = strtoull(pid, &end, 10);

		if (*end || p != (unsigned long long)getpid())
			return;
	}
	w->interval_us = v / 2 ? v / 2 : 1;
	w->next_us = now_us();
}

void kiln_notify_watchdog_kick(kiln_notify_watchdog *w)
{
	uint64_t now;

	if (!w->interval_us || (now = now_us()) < w->next_us)
		return;
	w->next_us = now + w->interval_us;
	kiln_notify("WATCHDOG=1");
}
