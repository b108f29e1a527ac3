/* Loading the pseudonymisation key (64 hex characters) from a private file
 * or an environment variable, its public id, and the HMAC state after the
 * key that every token starts from. Temporary copies of the key text are
 * wiped; no message ever carries key material or file content. */
#include "mask/key.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fs.h"
#include "core/secret.h"

#define KEY_HEX_LEN 64
/* Enough for the key, a comment-free trailing newline and generous
 * whitespace; a larger file is not a key file. */
#define KEY_FILE_MAX 4096

static const char id_prefix[] = "hmac-sha256:";

static bool is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Exactly 64 hex digits once surrounding ASCII whitespace is trimmed. */
static bool parse_key_hex(unsigned char out[32], const char *s, size_t len)
{
	size_t bin_len = 0;
	bool ok;

	while (len > 0 && is_space((unsigned char)s[0])) {
		s++;
		len--;
	}
	while (len > 0 && is_space((unsigned char)s[len - 1]))
		len--;
	if (len != KEY_HEX_LEN)
		return false;
	/* libsodium's decoder runs in constant time: the key's digits leak nothing */
	ok = sodium_hex2bin(out, 32, s, len, NULL, &bin_len, NULL) == 0 && bin_len == 32;
	if (!ok)
		sodium_memzero(out, 32);
	return ok;
}

void kiln_key_init(kiln_key *out, const unsigned char bytes[32], unsigned version)
{
	unsigned char digest[crypto_generichash_BYTES];
	size_t n = sizeof(id_prefix) - 1;

	if (sodium_init() < 0) {
		/* Not fatal: sodium_init() (idempotent) only picks faster
		 * implementations and seeds the random generator, unused here. */
	}
	memmove(out->bytes, bytes, 32);
	out->version = version;
	crypto_generichash(digest, sizeof(digest), out->bytes, 32, NULL, 0);
	memcpy(out->id, id_prefix, n);
	sodium_bin2hex(out->id + n, sizeof(out->id) - n, digest, 8);
	crypto_auth_hmacsha256_init(&out->base, out->bytes, 32);
	sodium_memzero(digest, sizeof(digest));
}

void kiln_key_wipe(kiln_key *key)
{
	/* sodium_munlock zeroes, then unlocks (harmless on a page not locked) */
	if (key != NULL && sodium_munlock(key, sizeof(*key)) != 0)
		sodium_memzero(key, sizeof(*key));
}

/* Keeps a loaded key out of swap and of core dumps (MADV_DONTDUMP on the
 * whole pages it sits in). Best effort: RLIMIT_MEMLOCK may refuse the lock,
 * and the process is non-dumpable anyway (kiln_key_protect_process). */
static void lock_key(kiln_key *key)
{
	(void)sodium_mlock(key, sizeof(*key));
}

int kiln_key_protect_process(void)
{
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		return kiln_error_set(KILN_EIO, "cannot make the process non-dumpable: %s", strerror(errno));
	return 0;
}

int kiln_key_load_file(kiln_key *out, const char *path, unsigned version)
{
	unsigned char bytes[32];
	char *text = NULL;
	size_t len = 0;
	int err;

	if ((err = kiln_secret_read_file(&text, &len, path, "key file", KEY_FILE_MAX)) < 0)
		return err;
	if (!parse_key_hex(bytes, text, len))
		err = kiln_error_set(KILN_EINVALID, "%s: expected 64 hex characters (a 32-byte key)", path);
	else {
		kiln_key_init(out, bytes, version);
		lock_key(out);
	}
	sodium_memzero(bytes, sizeof(bytes));
	kiln_secret_free(text, len);
	return err;
}

int kiln_key_load_env(kiln_key *out, const char *name, unsigned version)
{
	const char *value = getenv(name);
	unsigned char bytes[32];

	if (value == NULL || value[0] == '\0')
		return kiln_error_set(KILN_ENOTFOUND, "environment variable %s is not set", name);
	if (!parse_key_hex(bytes, value, strlen(value)))
		return kiln_error_set(KILN_EINVALID,
		                      "environment variable %s: expected 64 hex characters (a 32-byte key)",
		                      name);
	kiln_key_init(out, bytes, version);
	lock_key(out);
	sodium_memzero(bytes, sizeof(bytes));
	return 0;
}

int kiln_key_generate_file(kiln_key *out, const char *path, unsigned version)
{
	unsigned char bytes[32];
	char text[KEY_HEX_LEN + 2];
	int rc;

	if (sodium_init() < 0)
		return kiln_error_set(KILN_EIO, "libsodium failed to initialise");
	randombytes_buf(bytes, sizeof(bytes));
	sodium_bin2hex(text, sizeof(text), bytes, sizeof(bytes));
	text[KEY_HEX_LEN] = '\n';
	if ((rc = kiln_fs_create_new(path, text, KEY_HEX_LEN + 1, 0600, "the key file")) == 0) {
		kiln_key_init(out, bytes, version);
		lock_key(out);
	}
	sodium_memzero(bytes, sizeof(bytes));
	sodium_memzero(text, sizeof(text));
	return rc;
}
