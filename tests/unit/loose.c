/* Unit tests for src/manifest/loose.c: the loose-object check on known
 * objects (their names from `git hash-object`: `printf '' | git hash-object
 * --stdin` is e69de29..., `echo hello | git hash-object --stdin` is
 * ce01362...), each way a stored object can lie, and the guard backend that
 * makes libgit2 reads of a truncated loose object fail at once (libgit2
 * 1.5's own loose reader spins on it for ever). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/error.h"
#include "core/fs.h"
#include "manifest/internal.h"
#include "manifest/loose.h"
#include "manifest/manifest.h"

#define EMPTY_BLOB "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
#define HELLO_BLOB "ce013625030ba8dba906f756967f9e9ca394464a"

/* raw (n bytes) deflated into out; its length */
static size_t deflated(unsigned char *out, size_t cap, const void *raw, size_t n)
{
	uLongf len = (uLongf)cap;

	assert_int_equal(compress(out, &len, raw, (uLong)n), Z_OK);
	return (size_t)len;
}

static void expect_refused(const void *raw, size_t n, const char *hex, const char *why)
{
	unsigned char z[256];
	size_t len = deflated(z, sizeof(z), raw, n);

	assert_int_equal(kiln_git_loose_check(z, len, hex), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), why));
	assert_null(strchr(kiln_error_last(), '\n'));
}

static void test_known_objects(void **state)
{
	unsigned char z[64];
	kiln_buf out = KILN_BUF_INIT(0);
	git_object_t type = GIT_OBJECT_INVALID;
	size_t len;

	(void)state;
	len = deflated(z, sizeof(z), "blob 0", 7); /* with its NUL */
	assert_int_equal(kiln_git_loose_decode(&out, &type, z, len, EMPTY_BLOB), 0);
	assert_int_equal(type, GIT_OBJECT_BLOB);
	assert_int_equal(out.len, 0);
	len = deflated(z, sizeof(z), "blob 6\0hello\n", 13);
	assert_int_equal(kiln_git_loose_decode(&out, &type, z, len, HELLO_BLOB), 0);
	assert_int_equal(out.len, 6);
	assert_memory_equal(out.ptr, "hello\n", 6);
	assert_int_equal(kiln_git_loose_check(z, len, HELLO_BLOB), 0);
	kiln_buf_free(&out);
}

static void test_lies(void **state)
{
	unsigned char z[64];
	size_t len = deflated(z, sizeof(z), "blob 6\0hello\n", 13);
	unsigned char longer[80];

	(void)state;
	/* another object's content under this name */
	expect_refused("blob 6\0hellO\n", 13, HELLO_BLOB, "does not hash to its name");
	/* cut anywhere: truncated, never a hang */
	for (size_t cut = 0; cut < len; cut++) {
		assert_int_equal(kiln_git_loose_check(z, cut, HELLO_BLOB), KILN_EINVALID);
		assert_null(strchr(kiln_error_last(), '\n'));
	}
	assert_int_equal(kiln_git_loose_check(z, len - 1, HELLO_BLOB), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "truncated"));
	/* bytes after the stream */
	memcpy(longer, z, len);
	memcpy(longer + len, "xx", 2);
	assert_int_equal(kiln_git_loose_check(longer, len + 2, HELLO_BLOB), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "after its zlib stream"));
	/* headers */
	expect_refused("blob 7\0hello\n", 13, HELLO_BLOB, "shorter than its header says");
	expect_refused("blob 5\0hello\n", 13, HELLO_BLOB, "longer than its header says");
	expect_refused("blob 06\0hello\n", 14, HELLO_BLOB, "header");
	expect_refused("blob6\0hello\n", 12, HELLO_BLOB, "header");
	expect_refused("blobs 6\0hello\n", 14, HELLO_BLOB, "header");
	expect_refused("blob 6 hello\n", 13, HELLO_BLOB, "header");
	/* a size no 20-odd stored bytes can hold: refused before any allocation */
	expect_refused("blob 268435000\0", 15, HELLO_BLOB, "can hold");
	expect_refused("blob 99999999999999999999999\0", 29, HELLO_BLOB, "header");
	/* not zlib; not a name */
	assert_int_equal(kiln_git_loose_check("hello, world", 12, HELLO_BLOB), KILN_EINVALID);
	assert_int_equal(kiln_git_loose_check(z, len, "CE013625030BA8DBA906F756967F9E9CA394464A"),
	                 KILN_EINVALID);
	assert_int_equal(kiln_git_loose_check(z, len, "ce01362"), KILN_EINVALID);
}

/* A repository whose loose object `hello` was cut in half: every read
 * through kiln's handle fails at once with the object's name. */
static void test_guard(void **state)
{
	char dir[] = "/tmp/kiln-loose-XXXXXX", path[256], hex[GIT_OID_HEXSZ + 1];
	kiln_manifest *m = NULL;
	git_odb *odb = NULL;
	git_odb_object *obj = NULL;
	git_object *o = NULL;
	git_blob *blob = NULL;
	git_oid id;
	size_t size;
	git_object_t type;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/m.git", dir);
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	assert_int_equal(git_blob_create_from_buffer(&id, kiln_manifest_repo(m), "hello\n", 6), 0);
	git_oid_tostr(hex, sizeof(hex), &id);
	assert_string_equal(hex, HELLO_BLOB);
	kiln_manifest_close(m);
	snprintf(path, sizeof(path), "%s/m.git/objects/ce/%s", dir, HELLO_BLOB + 2);
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(truncate(path, 10), 0);

	snprintf(path, sizeof(path), "%s/m.git", dir);
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	assert_int_equal(git_repository_odb(&odb, kiln_manifest_repo(m)), 0);
	assert_true(git_odb_read(&obj, odb, &id) < 0);
	assert_non_null(strstr(git_error_last()->message, "git object " HELLO_BLOB ": truncated"));
	assert_true(git_odb_read_header(&size, &type, odb, &id) < 0);
	assert_true(git_blob_lookup(&blob, kiln_manifest_repo(m), &id) < 0);
	assert_true(git_object_lookup_prefix(&o, kiln_manifest_repo(m), &id, 8, GIT_OBJECT_ANY) < 0);
	assert_non_null(strstr(git_error_last()->message, "truncated"));
	/* a whole object: read through the guard as before */
	assert_int_equal(git_blob_create_from_buffer(&id, kiln_manifest_repo(m), "world\n", 6), 0);
	assert_int_equal(git_blob_lookup(&blob, kiln_manifest_repo(m), &id), 0);
	assert_int_equal(git_blob_rawsize(blob), 6);
	assert_memory_equal(git_blob_rawcontent(blob), "world\n", 6);
	git_blob_free(blob);
	git_odb_free(odb);
	kiln_manifest_close(m);
	assert_int_equal(kiln_fs_remove_tree(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_known_objects),
	    cmocka_unit_test(test_lies),
	    cmocka_unit_test(test_guard),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
