/* Reading secret files (keys, passwords, tokens, credentials): kiln's one
 * reader of a file only its owner may read. Below every layer that holds a
 * secret (mask, store, cache, manifest); no message carries file content. */
#ifndef KILN_CORE_SECRET_H
#define KILN_CORE_SECRET_H

#include <stddef.h>

#include "core/buf.h"

/* The one reader of secret files (keys, passwords). `path` is opened
 * without following into a wait (O_NONBLOCK: a FIFO or a device is refused,
 * never read) and checked with fstat before any read: it must be a regular
 * file, of at most `max` bytes, that neither group nor others may read or
 * write (KILN_EINVALID otherwise, naming the path and the mode), or one
 * whose only other reader is this process's user through an access ACL (a
 * systemd credential under $CREDENTIALS_DIRECTORY);
 * KILN_ENOTFOUND when it does not exist. `what` names the file in messages
 * ("key file"); no message carries its content. On success *out is a
 * NUL-terminated copy of the content (*len_out bytes, which may hold NULs)
 * that the caller releases with kiln_secret_free(). */
int kiln_secret_read_file(char **out, size_t *len_out, const char *path, const char *what, size_t max);

/* Wipes len bytes of `secret` (and its terminating NUL) and frees it; NULL is fine. */
void kiln_secret_free(char *secret, size_t len);

/* Appends `s` (len bytes) to out with the user information of each
 * comma-separated address in it replaced by "<redacted>": everything
 * before the last '@' of its authority in scheme://user:pass@host/..., and
 * in user:pass@host (no scheme) when a ':' comes before that '@' (a bare
 * user@host, an e-mail address, is kept). 1 when something was redacted,
 * 0 when not, KILN_ENOMEM. */
int kiln_secret_redact_userinfo(kiln_buf *out, const char *s, size_t len);

#endif
