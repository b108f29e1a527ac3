/* The temporaries of killed writers in a manifest repository's objects/
 * (kiln_gc_remove_object_temps, gc.h): what kiln_gc removes besides
 * unreachable shards. */
#include "manifest/gc.h"
#include "manifest/internal.h"

#include <dirent.h>
#include <errno.h>
#include <git2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

/* ---- temporaries of killed writers ----------------------------------------- */

/* Whether name is a temporary file a writer of the repository renames into
 * place when done: libgit2's loose objects (objects/tmp_object_git2_*) and
 * kiln pull's (objects/<hh>/<name>.tmp-<pid>). */
static bool temp_name(const char *name)
{
	return strncmp(name, "tmp_object_git2_", 16) == 0 || strstr(name, ".tmp-") != NULL;
}

/* Removes the temporaries in dir (regular files, not links) written before
 * young_after: a writer killed midway (kill -9) leaves them and nothing else
 * ever would. Younger ones may belong to a live writer and stay. */
static int remove_temps(const char *dir, int64_t young_after, uint64_t *removed)
{
	char path[4200];
	struct dirent *e;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		struct stat st;

		if (!temp_name(e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || (int64_t)st.st_mtime >= young_after)
			continue;
		if (unlink(path) < 0 && errno != ENOENT) {
			int err = errno;

			closedir(d);
			return kiln_error_set(KILN_EIO, "gc: %s: %s", path, strerror(err));
		}
		(*removed)++;
	}
	closedir(d);
	return 0;
}

/* objects/ and its 256 fan-out directories. */
int kiln_gc_remove_object_temps(kiln_manifest *m, int64_t young_after, uint64_t *removed)
{
	char objects[4096], dir[4200];
	int rc;

	snprintf(objects, sizeof(objects), "%sobjects", git_repository_path(kiln_manifest_repo(m)));
	if ((rc = remove_temps(objects, young_after, removed)) < 0)
		return rc;
	for (int hh = 0; hh < 256; hh++) {
		snprintf(dir, sizeof(dir), "%s/%02x", objects, hh);
		if ((rc = remove_temps(dir, young_after, removed)) < 0)
			return rc;
	}
	return 0;
}
