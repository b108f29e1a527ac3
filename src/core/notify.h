/* The service manager's notify protocol (sd_notify(3)): one datagram of
 * NEWLINE-separated VAR=VALUE lines to the AF_UNIX socket $NOTIFY_SOCKET
 * (a path, or '@' for an abstract address). Written here in a few lines
 * rather than linking libsystemd: one library less to carry onto air-gapped
 * hosts, and the protocol is stable and documented. Nothing happens when
 * NOTIFY_SOCKET is unset, and a failure to send is never the caller's:
 * a daemon runs the same with or without systemd. No state text carries a
 * value taken from a record. */
#ifndef KILN_CORE_NOTIFY_H
#define KILN_CORE_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

/* Sends `state` ("READY=1", "STATUS=syncing\nREADY=1", ...); true when a
 * datagram went out. */
bool kiln_notify(const char *state);
/* The same with printf formatting. */
bool kiln_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "RELOADING=1" with MONOTONIC_USEC= (systemd 253's reload protocol);
 * READY=1 ends the reload. */
bool kiln_notify_reloading(void);

/* The watchdog: kicks are due every half of $WATCHDOG_USEC when it is set
 * and $WATCHDOG_PID is unset or this process's id. A loop that would stall
 * owns one and calls kiln_notify_watchdog_kick on each turn, so a hung loop
 * stops kicking and the manager restarts the service. */
typedef struct kiln_notify_watchdog {
	uint64_t interval_us; /* 0: no watchdog */
	uint64_t next_us;     /* monotonic time of the next kick */
} kiln_notify_watchdog;

/* Reads the environment; interval_us 0 when there is no watchdog. */
void kiln_notify_watchdog_init(kiln_notify_watchdog *w);
/* Sends WATCHDOG=1 when a kick is due (cheap otherwise: one clock read). */
void kiln_notify_watchdog_kick(kiln_notify_watchdog *w);

#endif
