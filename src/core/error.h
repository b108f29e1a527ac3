/* Error codes and the thread-local last-error message.
 * Functions return 0 on success or a negative KILN_E* code; the one-line
 * message explaining the failure sits in a per-thread slot until the next
 * kiln_error_set(). Messages never carry a value taken from a record. */
#ifndef KILN_CORE_ERROR_H
#define KILN_CORE_ERROR_H

#include <stddef.h>

#include "kiln/common.h" /* the KILN_E* codes, kiln_error_last(), _last_code(), _clear() */

/* Sets the message (printf-style) and returns code, so callers can write
 * `return kiln_error_set(KILN_EINVALID, "...")`. */
int kiln_error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sets "<area>: out of memory" ("out of memory" when area is NULL) and
 * returns KILN_ENOMEM: the one out-of-memory error. */
int kiln_error_oom(const char *area);

#endif
