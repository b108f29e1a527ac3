/* SSH signatures (OpenSSH PROTOCOL.sshsig, namespace "git") made with an
 * ed25519 key through libsodium, as DESIGN.md lays them out: what stock
 * `git verify-commit` / `git verify-tag` (gpg.format=ssh) and
 * `ssh-keygen -Y verify` accept. Also kiln's own private key file (the
 * format is in docs/FORMATS.md, "Signing") and the OpenSSH public key line. */
#ifndef KILN_MANIFEST_SSHSIG_H
#define KILN_MANIFEST_SSHSIG_H

#include <stddef.h>

#include "core/buf.h"

/* A loaded signing key. sk is libsodium's ed25519 secret key (the 32-byte
 * seed followed by the public key), pk the public key, comment the key's
 * principal (printable ASCII, no space, '"', ',' or '#'; "" when none).
 * Wipe it with kiln_signing_key_wipe when done. */
typedef struct kiln_signing_key {
	unsigned char sk[64];
	unsigned char pk[32];
	char comment[128];
} kiln_signing_key;

/* Loads kiln's private key file ("kiln-ed25519-v1", 128 hex digits of sk,
 * the comment; one per line) with kiln_secret_read_file(). Refused
 * (KILN_EINVALID) when group or others may read or write it, when it is not
 * a regular file (a FIFO is refused, never waited on), or when the public
 * half of sk does not match its seed; KILN_ENOTFOUND when it does not
 * exist. No message carries key material. */
int kiln_signing_key_load(kiln_signing_key *out, const char *path);

/* Makes a fresh key and writes it to private_path (created with mode 0600;
 * KILN_EMODIFIED when it already exists) and, unless public_path is NULL,
 * its OpenSSH public key line to public_path (mode 0644, also never
 * overwritten). comment NULL means "kiln@localhost"; it must be 1..127
 * printable ASCII characters without space, '"', ',' or '#' (it is the
 * principal of an allowed-signers line). On failure nothing is left behind. */
int kiln_signing_key_generate(const char *private_path, const char *public_path, const char *comment);

/* Appends the OpenSSH public key line "ssh-ed25519 AAAA... comment" (base64
 * of s("ssh-ed25519") s(pk); no comment part when it is empty), without a
 * newline. */
int kiln_signing_key_public_line(const kiln_signing_key *key, kiln_buf *out);

/* Appends the armoured SSHSIG signature of payload[0..len) in `namespace`
 * ("git" for commits and tags): "-----BEGIN SSH SIGNATURE-----\n", the base64
 * blob in 70-column lines, "-----END SSH SIGNATURE-----\n". The buffer is
 * NUL-terminated after the appended text (the NUL is not counted in len). */
int kiln_sshsig_sign(const kiln_signing_key *key, const char *namespace, const void *payload, size_t len,
                     kiln_buf *armoured);

/* Checks an armoured SSHSIG signature (armoured[0..len), as kiln_sshsig_sign
 * or `ssh-keygen -Y sign` writes it; sha512 or sha256, ed25519 keys only)
 * over payload[0..plen) in `namespace`. Returns 0 and the signer's public
 * key in out_pk (may be NULL) when the signature is valid for the key it
 * names; KILN_EINVALID otherwise. Whether that key is trusted is the
 * caller's question. */
int kiln_sshsig_verify(const char *armoured, size_t len, const char *namespace, const void *payload,
                       size_t plen, unsigned char out_pk[32]);

/* Zeroes the key (NULL is fine). */
void kiln_signing_key_wipe(kiln_signing_key *key);

#endif
