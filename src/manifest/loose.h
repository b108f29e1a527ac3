/* Loose git objects from bytes kiln did not write (a pulled bucket, a
 * push target, a manifest repository on disk): one bounded decoder that
 * checks a file against its name, and the object database backend that puts
 * every read of a loose object kiln makes through libgit2 behind it. */
#ifndef KILN_MANIFEST_LOOSE_H
#define KILN_MANIFEST_LOOSE_H

#include <git2.h>
#include <stddef.h>

#include "core/buf.h"

/* The largest loose object kiln reads, as stored (zlib) and inflated
 * ("<type> <size>\0" and the content): 256 MiB. A manifest's largest blob is
 * a split's fan-out file, far below it. */
#define KILN_GIT_LOOSE_MAX ((size_t)256 << 20)

/* Decodes the loose object zbytes (len bytes, as git stores it under
 * objects/xx/yyyy...) that should be named hex (40 lower-case hex digits).
 * It must inflate, within KILN_GIT_LOOSE_MAX, to exactly "<type> <size>\0"
 * (blob, tree, commit or tag; size in decimal, no leading zero) and size
 * bytes, with nothing after the zlib stream, and hash (SHA-1, as git names
 * objects) to hex. Never loops on truncated or garbage input. On success
 * *out_type gets the type and out (when not NULL; reset first, owned by
 * the caller) the content; else KILN_EINVALID, one line "git object HEX:
 * why" (KILN_ENOMEM when out cannot grow). */
int kiln_git_loose_decode(kiln_buf *out, git_object_t *out_type, const void *zbytes, size_t len,
                          const char *hex);

/* kiln_git_loose_decode without the content: 0 when zbytes is the loose
 * object named hex, else KILN_EINVALID with the reason. */
int kiln_git_loose_check(const void *zbytes, size_t len, const char *hex);

/* The file at path (a regular file, not followed when a link, at most
 * KILN_GIT_LOOSE_MAX bytes) into out (reset first): 0, KILN_ENOTFOUND,
 * KILN_EINVALID (not a regular file, too large) or KILN_EIO. */
int kiln_git_read_file(kiln_buf *out, const char *path);

/* Reads the file at path (at most KILN_GIT_LOOSE_MAX bytes) and checks it
 * is the loose object hex: 0, KILN_ENOTFOUND when there is no such file,
 * KILN_EINVALID (not the object) or KILN_EIO. */
int kiln_git_loose_check_file(const char *path, const char *hex);

/* Puts a backend in front of repo's object database that reads loose
 * objects through kiln_git_loose_decode, so that no read (git_odb_read, a
 * lookup by id or short id, a header) of a truncated or corrupt loose file reaches libgit2's
 * own inflate (libgit2 1.5's loose backend spins on some truncated files).
 * Packed objects and writes are left to libgit2. 0 or KILN_EIO. */
int kiln_git_loose_guard(git_repository *repo);

#endif
