/* Unit tests for the s3:// store's credentials file (src/store/s3.c), which
 * kiln_store_open reads before any request, so no server is needed: a 0600
 * file with the aws_ names opens the store; a 0644 file, a FIFO, a device, a
 * missing file and a file without a secret line are refused with one line
 * that names the file and never its content. The bucket's endpoint is
 * never contacted. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "core/error.h"
#include "store/store.h"

#define SECRET "s3cr3t-Value-Never-Shown"

static char tmpdir[64];

static int open_with(const char *credentials_file, kiln_store **out)
{
	kiln_store_options o = {0};

	o.endpoint = "127.0.0.1:9";
	o.http = true;
	o.credentials_file = credentials_file;
	return kiln_store_open(out, "s3://kiln-test/prefix", &o);
}

static void assert_no_secret(void)
{
	assert_null(strstr(kiln_error_last(), SECRET));
	assert_null(strstr(kiln_error_last(), "AKID"));
	assert_null(strchr(kiln_error_last(), '\n'));
}

static void test_credentials_file_used(void **state)
{
	char path[128];
	kiln_store *s = NULL;

	(void)state;
	snprintf(path, sizeof(path), "%s/creds", tmpdir);
	kiln_test_write_file(
	    path, "# kiln\n[default]\naws_access_key_id = AKID\nsecret_access_key=" SECRET "\n", 0600);
	assert_int_equal(open_with(path, &s), 0);
	assert_non_null(s);
	kiln_store_close(s);
	assert_int_equal(chmod(path, 0400), 0);
	assert_int_equal(open_with(path, &s), 0);
	kiln_store_close(s);
}

/* Refused as before: others may read it. */
static void test_credentials_file_mode_refused(void **state)
{
	char path[128], want[512];
	kiln_store *s = (kiln_store *)1;

	(void)state;
	snprintf(path, sizeof(path), "%s/open-creds", tmpdir);
	kiln_test_write_file(path, "access_key_id=AKID\nsecret_access_key=" SECRET "\n", 0644);
	assert_int_equal(open_with(path, &s), KILN_EINVALID);
	assert_null(s);
	snprintf(want, sizeof(want),
	         "%s: credentials file mode 0644 lets group or others read it; chmod 600 %s", path, path);
	assert_string_equal(kiln_error_last(), want);
	assert_no_secret();
}

/* A FIFO is refused at once, never opened for a writer to feed: an open
 * that waited would block forever, and the alarm ends the test program (a
 * failure) instead. A device is refused the same way. */
static void test_credentials_file_fifo_refused(void **state)
{
	char path[128], want[256];
	kiln_store *s = (kiln_store *)1;

	(void)state;
	snprintf(path, sizeof(path), "%s/fifo", tmpdir);
	unlink(path);
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(30);
	assert_int_equal(open_with(path, &s), KILN_EINVALID);
	alarm(0);
	assert_null(s);
	snprintf(want, sizeof(want), "%s: credentials file is not a regular file", path);
	assert_string_equal(kiln_error_last(), want);
	unlink(path);
	alarm(30);
	assert_int_equal(open_with("/dev/zero", &s), KILN_EINVALID);
	alarm(0);
	assert_string_equal(kiln_error_last(), "/dev/zero: credentials file is not a regular file");
}

static void test_credentials_file_missing_or_incomplete(void **state)
{
	char path[128], want[256];
	kiln_store *s = (kiln_store *)1;

	(void)state;
	snprintf(path, sizeof(path), "%s/absent", tmpdir);
	assert_int_equal(open_with(path, &s), KILN_ENOTFOUND);
	snprintf(want, sizeof(want), "%s: credentials file not found", path);
	assert_string_equal(kiln_error_last(), want);

	snprintf(path, sizeof(path), "%s/half", tmpdir);
	kiln_test_write_file(path, "aws_access_key_id=AKID\nsecret_access_key=\n", 0600);
	assert_int_equal(open_with(path, &s), KILN_EINVALID);
	snprintf(want, sizeof(want), "credentials file %s has no secret_access_key= line", path);
	assert_string_equal(kiln_error_last(), want);
	assert_no_secret();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_credentials_file_used),
	    cmocka_unit_test(test_credentials_file_mode_refused),
	    cmocka_unit_test(test_credentials_file_fifo_refused),
	    cmocka_unit_test(test_credentials_file_missing_or_incomplete),
	};

	return kiln_test_main(tests, tmpdir, "store-s3", NULL, NULL);
}
