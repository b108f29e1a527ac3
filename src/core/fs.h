/* Local file-system helpers shared by modules that manage directories of
 * their own (the manifest repository, cache nodes): removing a tree without
 * following links. */
#ifndef KILN_CORE_FS_H
#define KILN_CORE_FS_H

/* Removes path and, when it is a directory, everything below it; symbolic
 * links are removed, never followed. A missing path is fine. KILN_EIO with
 * the path on failure. */
int kiln_fs_remove_tree(const char *path);

#endif
