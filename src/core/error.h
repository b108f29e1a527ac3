/* Error codes and the thread-local last-error message.
 * Functions return 0 on success or a negative KILN_E* code; the one-line
 * message explaining the failure sits in a per-thread slot until the next
 * kiln_error_set(). Messages never carry a value taken from a record. */
#ifndef KILN_CORE_ERROR_H
#define KILN_CORE_ERROR_H

#include <stddef.h>

enum {
	KILN_OK = 0,
	KILN_EINVALID = -1,  /* bad input or config: fatal, do not retry */
	KILN_ENOTFOUND = -2, /* file, key or reference missing */
	KILN_EIO = -3,       /* local I/O failure */
	KILN_ENOMEM = -4,    /* allocation failed */
	KILN_ERETRY = -5,    /* transient: back off and try again */
	KILN_EMODIFIED = -6, /* compare-and-swap lost */
	KILN_ELIMIT = -7,    /* a configured bound was exceeded */
	KILN_EFENCED = -8,   /* a fenced lineage entry moved: another writer covered
			      * those offsets first (retrying the same work cannot help) */
};

/* Sets the message (printf-style) and returns code, so callers can write
 * `return kiln_error_set(KILN_EINVALID, "...")`. */
int kiln_error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The last message set on this thread; never NULL ("" when none). */
const char *kiln_error_last(void);

/* The code passed to the last kiln_error_set() on this thread. */
int kiln_error_last_code(void);

void kiln_error_clear(void);

#endif
