/* What the commands' --json output shares (docs/JSON.md): strings escaped
 * (and made valid UTF-8), numbers taken from text only when they are JSON
 * numbers, a point in time as "NAME" (RFC 3339 UTC) and "NAME_unix"
 * (seconds), a version's identity members, and writing a kiln_buf (a
 * document or a line) to stdout with the write checked. The appenders return 0 or a
 * negative kiln error (out of memory), so a caller may OR their results
 * and check once. */
#ifndef KILN_CLI_JSON_OUT_H
#define KILN_CLI_JSON_OUT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "manifest/version.h"

/* s as a JSON string, or null when s is NULL. Bytes that are not UTF-8 (a
 * file name, a commit message written by another tool) are each written
 * as U+FFFD, so the output is always valid JSON (kiln_buf_put_json_text). */
int kiln_cli_json_string(kiln_buf *b, const char *s);

/* The same, or null when s is NULL or empty. */
int kiln_cli_json_string_or_null(kiln_buf *b, const char *s);

/* text as written when it is a JSON number ("0.8", "3", "-1e3"), else null
 * (NULL, a string, anything else). */
int kiln_cli_json_number_text(kiln_buf *b, const char *text);

/* true or false. */
int kiln_cli_json_bool(kiln_buf *b, bool v);

/* The members "NAME":"2026-12-03T09:07:16Z","NAME_unix":1796202436 (no
 * braces, no leading comma). */
int kiln_cli_json_time(kiln_buf *b, const char *name, int64_t t);

/* The members that name a version (no braces, no leading comma):
 * "dataset", "ref" (the full ref it resolved through, null for a commit
 * id), "commit" (40 hex), "tag" (the annotated tag object's id, or null)
 * and the commit time as "time" and "time_unix". */
int kiln_cli_json_version(kiln_buf *b, const kiln_version *v);

/* Writes b (one JSON line of a stream) to stdout, unflushed, and empties
 * it. rc is the OR of the appenders' results: when negative nothing is
 * written and rc is returned; else 0, or KILN_EIO with "stdout: write
 * error" set. For callbacks, whose error stops a walk. */
int kiln_cli_put_buf(kiln_buf *b, int rc);

/* Writes b (a whole document, or the last line) to stdout, flushes it and
 * empties b: 0, or KILN_EXIT_USAGE with "kiln CMD: ..." printed (out of
 * memory when rc < 0, or stdout: write error). */
int kiln_cli_write_buf(const char *cmd, kiln_buf *b, int rc);

#endif
