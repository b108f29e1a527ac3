/* The unit tests' shared fixture (tests/libfixture.la, built by make check
 * only, linked by every unit test): a scratch directory and its recursive
 * removal, writing a file, a git repository, the main() of a program whose
 * tests use libgit2, and a scan for PII canaries in bytes or a file. The
 * calls made inside a test fail it through cmocka's asserts; the others
 * return 0 or -1. */
#ifndef KILN_TESTS_FIXTURE_H
#define KILN_TESTS_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <sys/types.h>

/* Makes a fresh directory $TMPDIR/kiln-NAME-XXXXXX ($TMPDIR unset or empty:
 * /tmp) and writes its path to out[0..size). 0, or -1 when the path does not
 * fit or mkdtemp fails. */
int kiln_test_tmpdir(char *out, size_t size, const char *name);

/* Removes path and everything under it, never following a symbolic link
 * (rm -rf). A missing path is fine. 0, or -1 when something stays. */
int kiln_test_rmtree(const char *path);

/* "<dir>/<name>", allocated: the caller frees it. */
char *kiln_test_path(const char *dir, const char *name);

/* 64 lower-case hex digits: prefix, then fill up to the end ("ab", '1':
 * "ab111...1"). A shard hash for manifests whose shards are never read. */
void kiln_test_hash(char out[65], const char *prefix, char fill);

/* Replaces the file at path by one holding text, with mode (created 0600,
 * then chmod: a secret file is never readable by others in between). */
void kiln_test_write_file(const char *path, const char *text, mode_t mode);

/* Makes an empty git repository at path (bare: no work tree) with libgit2. */
void kiln_test_git_init(const char *path, bool bare);

/* main() of a program whose tests need a scratch directory: makes tmpdir
 * (kiln_test_tmpdir with NAME) and initialises libsodium, runs the group,
 * and removes tmpdir when every test passed (kept for a look when one
 * failed). Returns main's status. */
#define kiln_test_main(tests, tmpdir, name, setup, teardown)                                                 \
	kiln_test_main_(#tests, tests, sizeof(tests) / sizeof((tests)[0]), tmpdir, sizeof(tmpdir), name,     \
	                setup, teardown)
int kiln_test_main_(const char *group, const struct CMUnitTest *tests, size_t n, char *tmpdir, size_t size,
                    const char *name, CMFixtureFunction setup, CMFixtureFunction teardown);

/* main() of a program whose tests use libgit2: makes the scratch directory
 * tmpdir (kiln_test_tmpdir with NAME) and initialises libsodium and
 * libgit2, runs the group, shuts libgit2 down, and removes tmpdir when every
 * test passed (kept for a look when one failed). Returns main's status. */
#define kiln_test_git_main(tests, tmpdir, name, setup, teardown)                                             \
	kiln_test_git_main_(#tests, tests, sizeof(tests) / sizeof((tests)[0]), tmpdir, sizeof(tmpdir), name, \
	                    setup, teardown)
int kiln_test_git_main_(const char *group, const struct CMUnitTest *tests, size_t n, char *tmpdir,
                        size_t size, const char *name, CMFixtureFunction setup, CMFixtureFunction teardown);

/* PII canaries: the first of canaries[] (NULL-terminated) that occurs in
 * buf[0..len) or in the file at path, or NULL when none does. The file
 * reader fails the test when the file cannot be read. */
const char *kiln_test_canary_in(const void *buf, size_t len, const char *const *canaries);
const char *kiln_test_canary_in_file(const char *path, const char *const *canaries);

#endif
