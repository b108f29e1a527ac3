/* The pseudonymisation key: 32 bytes, from a file holding 64 hex characters
 * (refused when group or others may read it) or from an environment
 * variable. The key never reaches a log, a message or a manifest; its id
 * (a fingerprint) does. */
#ifndef KILN_MASK_KEY_H
#define KILN_MASK_KEY_H

#include <sodium.h>
#include <stddef.h>

#include "core/secret.h"

typedef struct kiln_key {
	unsigned char bytes[32];
	unsigned version;                  /* token prefix p<version>_ */
	char id[40];                       /* "hmac-sha256:" + hex(BLAKE2b-256(bytes)[0:8]) */
	crypto_auth_hmacsha256_state base; /* HMAC state after the key: copied per token */
} kiln_key;

/* Reads 64 hex characters (surrounding whitespace allowed) from `path`
 * with kiln_secret_read_file(): KILN_EINVALID for a file readable or
 * writable by group or others (naming the path and its mode) or one that is
 * not a regular file; KILN_ENOTFOUND when it does not exist. */
int kiln_key_load_file(kiln_key *out, const char *path, unsigned version);

/* Reads 64 hex characters from the environment variable `name`. */
int kiln_key_load_env(kiln_key *out, const char *name, unsigned version);

/* From raw bytes (tests, key generation). */
void kiln_key_init(kiln_key *out, const unsigned char bytes[32], unsigned version);

/* A new key from libsodium's randombytes_buf, written to `path` in the
 * key file format (64 hex characters and a newline) with mode 0600, never
 * replacing a file (kiln_fs_create_new: KILN_EMODIFIED when path exists).
 * *out gets the key (for its id); the caller wipes it. What `kiln keygen
 * --hmac` and `kiln init` write. */
int kiln_key_generate_file(kiln_key *out, const char *path, unsigned version);

/* Zeroes the key material (and unlocks the pages a loaded key was locked
 * in). */
void kiln_key_wipe(kiln_key *key);

/* Makes the calling process non-dumpable (prctl PR_SET_DUMPABLE 0): a crash
 * leaves no core file, and other processes of the same user cannot ptrace
 * it or read its /proc/<pid>/mem. For the commands that hold the HMAC key,
 * a signing key or bearer tokens (kiln run, replay, promote, cache); call it
 * before any secret is loaded. KILN_EIO when the kernel refuses. */
int kiln_key_protect_process(void);

#endif
