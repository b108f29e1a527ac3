/* Unit tests for the atomic writes of src/core/fs.c: kiln_fs_write_atomic
 * (temporary beside the file) and kiln_fs_write_atomic_via (temporary the
 * caller names, as the cache's tmp/ folder does): the file replaced whole,
 * no temporary left, and on a failure the old file kept and the temporary
 * gone; and kiln_fs_create_new, which never replaces anything. */
#include "fixture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fs.h"

static char tmpdir[4096];

static char *slurp(const char *path)
{
	static char text[256];
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	return text;
}

/* The entries of dir, "." and ".." aside. */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

static void test_write_atomic_replaces(void **state)
{
	char dir[4200], path[4300];
	struct stat st;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/beside", tmpdir);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/state", dir);
	assert_int_equal(kiln_fs_write_atomic(path, "one\n", 4, 0640), 0);
	assert_string_equal(slurp(path), "one\n");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	assert_int_equal(kiln_fs_write_atomic(path, "two, longer\n", 12, 0640), 0);
	assert_string_equal(slurp(path), "two, longer\n");
	assert_int_equal(kiln_fs_write_atomic(path, "", 0, 0640), 0);
	assert_string_equal(slurp(path), "");
	assert_int_equal(entries(dir), 1); /* no path.tmp-<pid> left */
}

static void test_write_atomic_via_named_temporary(void **state)
{
	char dir[4200], tmp[4300], path[4300], temp[4400];

	(void)state;
	snprintf(dir, sizeof(dir), "%s/via", tmpdir);
	snprintf(tmp, sizeof(tmp), "%s/tmp", dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(mkdir(tmp, 0755), 0);
	snprintf(path, sizeof(path), "%s/erased", dir);
	snprintf(temp, sizeof(temp), "%s/erased-1-0", tmp);
	kiln_test_write_file(path, "old\n", 0644);
	assert_int_equal(kiln_fs_write_atomic_via(path, temp, "new\n", 4, 0644), 0);
	assert_string_equal(slurp(path), "new\n");
	assert_int_equal(entries(tmp), 0);
	assert_int_equal(entries(dir), 2); /* erased and tmp/ */

	/* a temporary left by a killed writer under the same name is replaced */
	kiln_test_write_file(temp, "stale stale stale\n", 0644);
	assert_int_equal(kiln_fs_write_atomic_via(path, temp, "newer\n", 6, 0644), 0);
	assert_string_equal(slurp(path), "newer\n");
	assert_int_equal(entries(tmp), 0);
}

static void test_write_atomic_failure_keeps_old(void **state)
{
	char dir[4200], path[4300], temp[4400];

	(void)state;
	snprintf(dir, sizeof(dir), "%s/fail", tmpdir);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/state", dir);
	kiln_test_write_file(path, "old\n", 0644);

	/* the temporary's folder is missing: nothing written, the old file kept */
	snprintf(temp, sizeof(temp), "%s/no-such-folder/state-1-0", dir);
	assert_int_equal(kiln_fs_write_atomic_via(path, temp, "new\n", 4, 0644), KILN_EIO);
	assert_non_null(strstr(kiln_error_last(), "no-such-folder/state-1-0: "));
	assert_string_equal(slurp(path), "old\n");

	/* the rename fails (path is a non-empty folder): the temporary is removed */
	snprintf(path, sizeof(path), "%s/taken", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(temp, sizeof(temp), "%s/taken/inside", dir);
	kiln_test_write_file(temp, "x", 0644);
	snprintf(temp, sizeof(temp), "%s/temp-1-0", dir);
	assert_int_equal(kiln_fs_write_atomic_via(path, temp, "new\n", 4, 0644), KILN_EIO);
	assert_non_null(strstr(kiln_error_last(), "/taken: rename: "));
	assert_int_equal(access(temp, F_OK), -1);
	assert_int_equal(errno, ENOENT);
}

static void test_create_new(void **state)
{
	char dir[4200], path[4300], link_path[4300];
	struct stat st;
	mode_t old_umask;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/new", tmpdir);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/key", dir);

	/* the mode asked for, whatever the umask */
	old_umask = umask(077);
	assert_int_equal(kiln_fs_create_new(path, "first\n", 6, 0644, "the file"), 0);
	umask(old_umask);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_string_equal(slurp(path), "first\n");

	/* never over a file, nor through a link to one */
	assert_int_equal(kiln_fs_create_new(path, "second\n", 7, 0600, "the file"), KILN_EMODIFIED);
	assert_non_null(strstr(kiln_error_last(), "/new/key already exists; not overwriting it"));
	assert_string_equal(slurp(path), "first\n");
	snprintf(link_path, sizeof(link_path), "%s/link", dir);
	assert_int_equal(symlink(path, link_path), 0);
	assert_int_equal(kiln_fs_create_new(link_path, "second\n", 7, 0600, "the file"), KILN_EMODIFIED);
	assert_string_equal(slurp(path), "first\n");
	snprintf(link_path, sizeof(link_path), "%s/dangling", dir);
	assert_int_equal(symlink("nowhere", link_path), 0);
	assert_int_equal(kiln_fs_create_new(link_path, "x", 1, 0600, "the file"), KILN_EMODIFIED);

	/* a folder that is not there: KILN_EIO naming the file and what it is */
	snprintf(path, sizeof(path), "%s/missing/key", dir);
	assert_int_equal(kiln_fs_create_new(path, "x", 1, 0600, "the key file"), KILN_EIO);
	assert_non_null(strstr(kiln_error_last(), "missing/key: cannot create the key file: "));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_write_atomic_replaces),
	    cmocka_unit_test(test_write_atomic_via_named_temporary),
	    cmocka_unit_test(test_write_atomic_failure_keeps_old),
	    cmocka_unit_test(test_create_new),
	};

	return kiln_test_main(tests, tmpdir, "fs", NULL, NULL);
}
