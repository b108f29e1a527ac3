/* Unit tests for src/mask/key.c: the key id against a value computed with
 * Python, key files (mode refusal, missing file, content rules, whitespace),
 * environment variables, messages that never carry key material, wiping. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "core/error.h"
#include "mask/key.h"

/* bytes 0x00..0x1f */
#define KEY_HEX "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
/* /usr/bin/python3 -c 'import
 * hashlib;print("hmac-sha256:"+hashlib.blake2b(bytes(range(32)),digest_size=32).hexdigest()[:16])' */
#define KEY_ID "hmac-sha256:cb2f5160fc1f7e05"

static char tmpdir[PATH_MAX];

static void sample_bytes(unsigned char out[32])
{
	int i;

	for (i = 0; i < 32; i++)
		out[i] = (unsigned char)i;
}

/* Writes `content` to a fresh file in tmpdir with `mode`; returns its path
 * (static storage). */
static const char *write_key_file(const char *name, const char *content, mode_t mode)
{
	static char path[PATH_MAX + 64];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(close(fd), 0);
	return path;
}

static void assert_same_key(const kiln_key *key, unsigned version)
{
	unsigned char bytes[32];

	sample_bytes(bytes);
	assert_memory_equal(key->bytes, bytes, 32);
	assert_string_equal(key->id, KEY_ID);
	assert_int_equal(key->version, version);
}

static void test_init_id(void **state)
{
	unsigned char bytes[32];
	kiln_key key;

	(void)state;
	sample_bytes(bytes);
	kiln_key_init(&key, bytes, 3);
	assert_same_key(&key, 3);
	assert_int_equal(strlen(key.id), 28);
	/* the id reveals no part of the key */
	assert_null(strstr(key.id, KEY_HEX));
	assert_null(strstr(key.id, "0001020304050607"));
	assert_null(strstr(key.id, "000102"));
	kiln_key_wipe(&key);
}

static void test_id_depends_on_key(void **state)
{
	unsigned char bytes[32];
	kiln_key a, b;

	(void)state;
	sample_bytes(bytes);
	kiln_key_init(&a, bytes, 1);
	bytes[31] ^= 1;
	kiln_key_init(&b, bytes, 1);
	assert_string_not_equal(a.id, b.id);
	assert_memory_equal(a.id, "hmac-sha256:", 12);
	assert_memory_equal(b.id, "hmac-sha256:", 12);
}

static void test_wipe(void **state)
{
	unsigned char bytes[32], zero[sizeof(kiln_key)];
	kiln_key key;

	(void)state;
	sample_bytes(bytes);
	kiln_key_init(&key, bytes, 1);
	kiln_key_wipe(&key);
	memset(zero, 0, sizeof(zero));
	assert_memory_equal(&key, zero, sizeof(key));
	kiln_key_wipe(NULL);
}

static void test_file_0600_and_0400(void **state)
{
	kiln_key key;
	const char *path;

	(void)state;
	path = write_key_file("k600", KEY_HEX "\n", 0600);
	assert_int_equal(kiln_key_load_file(&key, path, 1), 0);
	assert_same_key(&key, 1);
	unlink(path);
	path = write_key_file("k400", KEY_HEX, 0400);
	assert_int_equal(kiln_key_load_file(&key, path, 2), 0);
	assert_same_key(&key, 2);
	unlink(path);
}

static void assert_mode_refused(const char *name, mode_t mode, const char *mode_text)
{
	char want[PATH_MAX + 200];
	const char *path = write_key_file(name, KEY_HEX "\n", mode);
	kiln_key key;

	kiln_error_clear();
	assert_int_equal(kiln_key_load_file(&key, path, 1), KILN_EINVALID);
	snprintf(want, sizeof(want), "%s: key file mode %s lets group or others read it; chmod 600 %s", path,
	         mode_text, path);
	assert_string_equal(kiln_error_last(), want);
	assert_int_equal(kiln_error_last_code(), KILN_EINVALID);
	assert_null(strstr(kiln_error_last(), "000102"));
	unlink(path);
}

static void test_file_mode_refused(void **state)
{
	(void)state;
	assert_mode_refused("k644", 0644, "0644");
	assert_mode_refused("k640", 0640, "0640");
	assert_mode_refused("k604", 0604, "0604");
	assert_mode_refused("k620", 0620, "0620");
}

static void test_file_missing(void **state)
{
	char path[PATH_MAX + 64], want[PATH_MAX + 100];
	kiln_key key;

	(void)state;
	snprintf(path, sizeof(path), "%s/absent", tmpdir);
	assert_int_equal(kiln_key_load_file(&key, path, 1), KILN_ENOTFOUND);
	snprintf(want, sizeof(want), "%s: key file not found", path);
	assert_string_equal(kiln_error_last(), want);
}

static void test_file_not_regular(void **state)
{
	kiln_key key;

	(void)state;
	assert_int_equal(kiln_key_load_file(&key, tmpdir, 1), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "not a regular file"));
}

static void assert_content_refused(const char *content)
{
	char want[PATH_MAX + 100];
	const char *path = write_key_file("bad", content, 0600);
	kiln_key key;

	if (kiln_key_load_file(&key, path, 1) != KILN_EINVALID)
		fail_msg("content should be refused: \"%s\"", content);
	snprintf(want, sizeof(want), "%s: expected 64 hex characters (a 32-byte key)", path);
	assert_string_equal(kiln_error_last(), want);
	unlink(path);
}

static void test_file_bad_content(void **state)
{
	char big[5000], want[PATH_MAX + 100];
	const char *path;
	kiln_key key;

	(void)state;
	assert_content_refused("");
	assert_content_refused("\n");
	/* 63 characters */
	assert_content_refused("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1\n");
	/* 65 characters */
	assert_content_refused(KEY_HEX "0");
	/* a non-hex character */
	assert_content_refused("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1g\n");
	assert_content_refused("0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n");
	/* 64 hex and garbage */
	assert_content_refused(KEY_HEX " garbage\n");
	assert_content_refused(KEY_HEX "\n" KEY_HEX "\n");
	/* whitespace inside */
	assert_content_refused("00010203 0405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n");
	/* larger than any key file */
	memset(big, ' ', sizeof(big) - 1);
	memcpy(big, KEY_HEX, 64);
	big[sizeof(big) - 1] = '\0';
	path = write_key_file("big", big, 0600);
	assert_int_equal(kiln_key_load_file(&key, path, 1), KILN_EINVALID);
	snprintf(want, sizeof(want), "%s: key file is larger than 4096 bytes", path);
	assert_string_equal(kiln_error_last(), want);
	unlink(path);
}

/* A FIFO (or any non-regular file) named as a key file is refused at once:
 * the open does not wait for a writer. An open that waited would block
 * forever: the alarm ends the test program (a failure) instead. */
static void test_file_fifo(void **state)
{
	char path[PATH_MAX + 64], want[PATH_MAX + 100];
	kiln_key key;
	char *text = (char *)1;
	size_t len = 1;

	(void)state;
	snprintf(path, sizeof(path), "%s/fifo", tmpdir);
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(30);
	assert_int_equal(kiln_key_load_file(&key, path, 1), KILN_EINVALID);
	snprintf(want, sizeof(want), "%s: key file is not a regular file", path);
	assert_string_equal(kiln_error_last(), want);
	assert_int_equal(kiln_secret_read_file(&text, &len, path, "password file", 64), KILN_EINVALID);
	snprintf(want, sizeof(want), "%s: password file is not a regular file", path);
	assert_string_equal(kiln_error_last(), want);
	assert_null(text);
	assert_int_equal(len, 0);
	unlink(path);
	/* /dev/null: a device, never read */
	assert_int_equal(kiln_secret_read_file(&text, &len, "/dev/null", "password file", 64), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "/dev/null: password file is not a regular file");
	alarm(0);
}

/* The shared secret reader: whole content (NULs kept), the size bound, the
 * mode refusal, a symlink to a private file followed (mounted secrets are
 * links), and no content in any message. */
static void test_secret_read_file(void **state)
{
	char link_path[PATH_MAX + 64], want[PATH_MAX + 200];
	const char *path;
	char *text = NULL;
	size_t len = 0;

	(void)state;
	path = write_key_file("pw", "HUNTER2\n", 0600);
	assert_int_equal(kiln_secret_read_file(&text, &len, path, "password file", 8), 0);
	assert_int_equal(len, 8);
	assert_string_equal(text, "HUNTER2\n");
	kiln_secret_free(text, len);
	snprintf(link_path, sizeof(link_path), "%s/pw-link", tmpdir);
	assert_int_equal(symlink(path, link_path), 0);
	assert_int_equal(kiln_secret_read_file(&text, &len, link_path, "password file", 8), 0);
	assert_string_equal(text, "HUNTER2\n");
	kiln_secret_free(text, len);
	unlink(link_path);
	assert_int_equal(kiln_secret_read_file(&text, &len, path, "password file", 7), KILN_EINVALID);
	snprintf(want, sizeof(want), "%s: password file is larger than 7 bytes", path);
	assert_string_equal(kiln_error_last(), want);
	assert_null(text);
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(kiln_secret_read_file(&text, &len, path, "password file", 64), KILN_EINVALID);
	snprintf(want, sizeof(want), "%s: password file mode 0640 lets group or others read it; chmod 600 %s",
	         path, path);
	assert_string_equal(kiln_error_last(), want);
	assert_null(strstr(kiln_error_last(), "HUNTER2"));
	unlink(path);
	kiln_secret_free(NULL, 0);
}

static void test_file_whitespace_and_case(void **state)
{
	kiln_key key;
	const char *path;

	(void)state;
	path = write_key_file("ws", "  \n\t" KEY_HEX "\r\n\n", 0600);
	assert_int_equal(kiln_key_load_file(&key, path, 1), 0);
	assert_same_key(&key, 1);
	path = write_key_file("ws", "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F", 0600);
	assert_int_equal(kiln_key_load_file(&key, path, 5), 0);
	assert_same_key(&key, 5);
	unlink(path);
}

static void test_env(void **state)
{
	const char *name = "KILN_TEST_PSEUDONYM_KEY";
	kiln_key key;

	(void)state;
	unsetenv(name);
	assert_int_equal(kiln_key_load_env(&key, name, 1), KILN_ENOTFOUND);
	assert_string_equal(kiln_error_last(), "environment variable KILN_TEST_PSEUDONYM_KEY is not set");

	setenv(name, "", 1);
	assert_int_equal(kiln_key_load_env(&key, name, 1), KILN_ENOTFOUND);
	assert_string_equal(kiln_error_last(), "environment variable KILN_TEST_PSEUDONYM_KEY is not set");

	setenv(name, " " KEY_HEX "\n", 1);
	assert_int_equal(kiln_key_load_env(&key, name, 9), 0);
	assert_same_key(&key, 9);

	setenv(name, KEY_HEX "ff", 1);
	assert_int_equal(kiln_key_load_env(&key, name, 1), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "KILN_TEST_PSEUDONYM_KEY"));
	assert_non_null(strstr(kiln_error_last(), "expected 64 hex characters"));
	assert_null(strstr(kiln_error_last(), "000102"));

	setenv(name, "not a key", 1);
	assert_int_equal(kiln_key_load_env(&key, name, 1), KILN_EINVALID);
	assert_null(strstr(kiln_error_last(), "not a key"));
	unsetenv(name);
}

/* A loaded key is wiped (and unlocked) by kiln_key_wipe. */
static void test_wipe_loaded(void **state)
{
	unsigned char zero[sizeof(kiln_key)];
	kiln_key key;

	(void)state;
	setenv("KILN_TEST_WIPE_KEY", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", 1);
	assert_int_equal(kiln_key_load_env(&key, "KILN_TEST_WIPE_KEY", 1), 0);
	unsetenv("KILN_TEST_WIPE_KEY");
	kiln_key_wipe(&key);
	memset(zero, 0, sizeof(zero));
	assert_memory_equal(&key, zero, sizeof(key));
}

/* The commands holding secrets call this first: afterwards the process is
 * not dumpable (no core file). Run in a child so this binary stays as it
 * was. */
static void test_protect_process(void **state)
{
	int status = 0;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 1)
			_exit(2);
		if (kiln_key_protect_process() != 0)
			_exit(3);
		_exit(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 ? 0 : 4);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* kiln keygen --hmac: a key file kiln_key_load_file reads back as the same
 * key (same id), mode 0600 whatever the umask, never over a file. */
static void test_generate_file(void **state)
{
	char path[PATH_MAX + 64], text[80];
	kiln_key made, loaded, other;
	struct stat st;
	mode_t old_umask = umask(0);
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/generated.key", tmpdir);
	unlink(path);
	assert_int_equal(kiln_key_generate_file(&made, path, 1), 0);
	umask(old_umask);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_non_null(f = fopen(path, "r"));
	assert_non_null(fgets(text, sizeof(text), f));
	fclose(f);
	assert_int_equal(strlen(text), 65);
	assert_int_equal(strspn(text, "0123456789abcdef"), 64);
	assert_int_equal(text[64], '\n');
	assert_int_equal(kiln_key_load_file(&loaded, path, 1), 0);
	assert_string_equal(loaded.id, made.id);
	assert_memory_equal(loaded.bytes, made.bytes, 32);
	/* a second key differs; the first file stays as it was */
	snprintf(path + strlen(path), 8, ".2");
	assert_int_equal(kiln_key_generate_file(&other, path, 1), 0);
	assert_string_not_equal(other.id, made.id);
	path[strlen(path) - 2] = '\0';
	assert_int_equal(kiln_key_generate_file(&other, path, 1), KILN_EMODIFIED);
	assert_non_null(strstr(kiln_error_last(), "already exists"));
	assert_int_equal(kiln_key_load_file(&loaded, path, 1), 0);
	assert_string_equal(loaded.id, made.id);
	kiln_key_wipe(&made);
	kiln_key_wipe(&loaded);
	kiln_key_wipe(&other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_init_id),
	    cmocka_unit_test(test_id_depends_on_key),
	    cmocka_unit_test(test_wipe),
	    cmocka_unit_test(test_file_0600_and_0400),
	    cmocka_unit_test(test_file_mode_refused),
	    cmocka_unit_test(test_file_missing),
	    cmocka_unit_test(test_file_not_regular),
	    cmocka_unit_test(test_file_bad_content),
	    cmocka_unit_test(test_file_fifo),
	    cmocka_unit_test(test_secret_read_file),
	    cmocka_unit_test(test_file_whitespace_and_case),
	    cmocka_unit_test(test_env),
	    cmocka_unit_test(test_wipe_loaded),
	    cmocka_unit_test(test_protect_process),
	    cmocka_unit_test(test_generate_file),
	};

	return kiln_test_main(tests, tmpdir, "key", NULL, NULL);
}
