/* Local file-system helpers shared by modules that manage directories of
 * their own (the manifest repository, cache nodes): removing a tree without
 * following links, anonymous temporary files, files replaced atomically. */
#ifndef KILN_CORE_FS_H
#define KILN_CORE_FS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Removes path and, when it is a directory, everything below it; symbolic
 * links are removed, never followed. A missing path is fine. KILN_EIO with
 * the path on failure. */
int kiln_fs_remove_tree(const char *path);

/* A new file in dir (NULL: $TMPDIR, else /tmp), unlinked at once: gone
 * with the process whatever happens to it. `what` names it in the file's
 * name ("kiln-<what>-XXXXXX") and the message. The fd, or KILN_EIO. */
int kiln_fs_temp_file(const char *dir, const char *what);

/* Writes all len bytes to fd (again after a short write or EINTR);
 * KILN_EIO "WHAT: write: reason" when it cannot. */
int kiln_fs_write_all(int fd, const void *data, size_t len, const char *what);

/* Creates path with data and mode, never replacing anything there
 * (O_EXCL, no link followed): KILN_EMODIFIED "PATH already exists; not
 * overwriting it" when something is; KILN_EIO naming path and `what` ("the
 * key file") when it cannot be written, and then nothing is left behind.
 * The file is synced before it is closed. What writes keys and the files
 * `kiln init` makes. */
int kiln_fs_create_new(const char *path, const void *data, size_t len, mode_t mode, const char *what);

/* Replaces path with data, all or nothing: writes path.tmp-<pid> (mode),
 * fsyncs it, renames it over path and fsyncs the folder, so a crash leaves
 * the old file or the new one, never a part (a kill -9 can leave the
 * temporary: callers sweep with kiln_fs_remove_stale_temps when they start).
 * KILN_EIO naming the file on failure (the temporary is then removed). */
int kiln_fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

/* kiln_fs_write_atomic through the temporary tmp the caller named (on
 * path's file system; a name no other writer uses, e.g. one with a counter
 * for writers in one process): what a folder of temporaries swept whole
 * uses. */
int kiln_fs_write_atomic_via(const char *path, const char *tmp, const void *data, size_t len, mode_t mode);

/* Removes "<path>.tmp-<pid>" files beside path whose process is gone (a
 * kill -9 during a write): a running process's temporary is left alone. */
void kiln_fs_remove_stale_temps(const char *path);

/* The folder kiln_fs_temp_file uses for dir: dir, else $TMPDIR, else /tmp. */
const char *kiln_fs_temp_dir(const char *dir);

/* The fingerprint of the first `bytes` bytes of the file open as fd
 * (docs/FORMATS.md, lineage.json): BLAKE2b-256 (hex, out[65]) of those
 * bytes when there are at most 2 MiB, else of their first MiB followed by
 * their last MiB. It tells a replaced file from a grown one without reading
 * all of it again (the file and directory sources). KILN_EINVALID naming
 * path when the file is shorter, KILN_EIO on a read error. */
int kiln_fs_fingerprint(int fd, const char *path, uint64_t bytes, char out[65]);

#endif
