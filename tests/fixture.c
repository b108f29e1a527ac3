/* The unit tests' shared fixture (see fixture.h): scratch directories,
 * files, git repositories, the libgit2 test main() and the PII canary scan,
 * written once for every program under tests/unit/. */
#include "fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int kiln_test_tmpdir(char *out, size_t size, const char *name)
{
	const char *base = getenv("TMPDIR");
	int n;

	n = snprintf(out, size, "%s/kiln-%s-XXXXXX", base && *base ? base : "/tmp", name);
	if (n < 0 || (size_t)n >= size)
		return -1;
	return mkdtemp(out) ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

int kiln_test_rmtree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -1;
	return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

char *kiln_test_path(const char *dir, const char *name)
{
	char *p = malloc(strlen(dir) + strlen(name) + 2);

	assert_non_null(p);
	sprintf(p, "%s/%s", dir, name);
	return p;
}

void kiln_test_hash(char out[65], const char *prefix, char fill)
{
	size_t n = strlen(prefix);

	assert_true(n <= 64);
	memset(out, fill, 64);
	memcpy(out, prefix, n);
	out[64] = '\0';
}

void kiln_test_write_file(const char *path, const char *text, mode_t mode)
{
	size_t len = strlen(text);
	int fd;

	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		fail_msg("%s: %s", path, strerror(errno));
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(close(fd), 0);
}

void kiln_test_git_init(const char *path, bool bare)
{
	git_repository *repo = NULL;

	if (git_repository_init(&repo, path, bare) != 0)
		fail_msg("git init %s: %s", path, git_error_last() ? git_error_last()->message : "?");
	git_repository_free(repo);
}

/* Runs the group in a fresh tmpdir, with libgit2 initialised around it when
 * git is set. */
static int run_in_tmpdir(const char *group, const struct CMUnitTest *tests, size_t n, char *tmpdir,
                         size_t size, const char *name, CMFixtureFunction setup, CMFixtureFunction teardown,
                         bool git)
{
	int rc;

	if (kiln_test_tmpdir(tmpdir, size, name) != 0 || sodium_init() < 0)
		return 1;
	if (git)
		git_libgit2_init();
	rc = _cmocka_run_group_tests(group, tests, n, setup, teardown);
	if (git)
		git_libgit2_shutdown();
	if (rc == 0 && kiln_test_rmtree(tmpdir) != 0)
		rc = 1;
	return rc;
}

int kiln_test_main_(const char *group, const struct CMUnitTest *tests, size_t n, char *tmpdir, size_t size,
                    const char *name, CMFixtureFunction setup, CMFixtureFunction teardown)
{
	return run_in_tmpdir(group, tests, n, tmpdir, size, name, setup, teardown, false);
}

int kiln_test_git_main_(const char *group, const struct CMUnitTest *tests, size_t n, char *tmpdir,
                        size_t size, const char *name, CMFixtureFunction setup, CMFixtureFunction teardown)
{
	return run_in_tmpdir(group, tests, n, tmpdir, size, name, setup, teardown, true);
}

const char *kiln_test_canary_in(const void *buf, size_t len, const char *const *canaries)
{
	for (; *canaries; canaries++)
		if (**canaries && memmem(buf, len, *canaries, strlen(*canaries)))
			return *canaries;
	return NULL;
}

const char *kiln_test_canary_in_file(const char *path, const char *const *canaries)
{
	const char *found;
	char *data = NULL;
	size_t len = 0, cap = 0, got;
	FILE *f = fopen(path, "rb");

	if (!f)
		fail_msg("%s: %s", path, strerror(errno));
	do {
		if (len == cap) {
			cap = cap ? cap * 2 : 65536;
			data = realloc(data, cap);
			assert_non_null(data);
		}
		got = fread(data + len, 1, cap - len, f);
		len += got;
	} while (got > 0);
	assert_int_equal(ferror(f), 0);
	fclose(f);
	found = kiln_test_canary_in(data, len, canaries);
	free(data);
	return found;
}
