/* SSHSIG signatures with ed25519 keys (see sshsig.h and DESIGN.md, "Signed
 * promotion"): signing and checking the armoured blob, kiln's private key
 * file and the OpenSSH public key line. Secret bytes live only in the
 * caller's kiln_signing_key and in local buffers that are wiped before
 * return; no message carries key material. */
#include "manifest/sshsig.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base64.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/secret.h"

#define KEY_MAGIC       "kiln-ed25519-v1"
#define KEY_FILE_MAX    4096
#define KEY_TYPE        "ssh-ed25519"
#define DEFAULT_COMMENT "kiln@localhost"
#define BEGIN_MARK      "-----BEGIN SSH SIGNATURE-----"
#define END_MARK        "-----END SSH SIGNATURE-----"
#define ARMOUR_COLUMNS  70
/* An armoured signature is a few hundred bytes; anything this large is not one. */
#define ARMOUR_MAX 16384

/* ---- SSH wire encoding ---------------------------------------------------- */

static int put_u32(kiln_buf *b, uint32_t v)
{
	unsigned char be[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
	                       (unsigned char)v};

	return kiln_buf_put(b, be, 4);
}

/* s(x): a 4-byte big-endian length, then the bytes. */
static int put_string(kiln_buf *b, const void *p, size_t n)
{
	if (n > UINT32_MAX)
		return kiln_error_set(KILN_ELIMIT, "signature: a field is too long");
	if (put_u32(b, (uint32_t)n) < 0 || kiln_buf_put(b, p, n) < 0)
		return kiln_error_oom("signature");
	return 0;
}

static int put_cstring(kiln_buf *b, const char *s)
{
	return put_string(b, s, strlen(s));
}

/* s(s("ssh-ed25519") s(x)): the public key or signature blob. */
static int put_ed25519(kiln_buf *b, const unsigned char *x, size_t n)
{
	kiln_buf inner = KILN_BUF_INIT(0);
	int rc;

	if ((rc = put_cstring(&inner, KEY_TYPE)) == 0 && (rc = put_string(&inner, x, n)) == 0)
		rc = put_string(b, inner.ptr, inner.len);
	kiln_buf_free(&inner);
	return rc;
}

typedef struct reader {
	const unsigned char *p;
	size_t n;
} reader;

static bool get_u32(reader *r, uint32_t *out)
{
	if (r->n < 4)
		return false;
	*out = (uint32_t)r->p[0] << 24 | (uint32_t)r->p[1] << 16 | (uint32_t)r->p[2] << 8 | r->p[3];
	r->p += 4;
	r->n -= 4;
	return true;
}

static bool get_string(reader *r, reader *out)
{
	uint32_t n;

	if (!get_u32(r, &n) || n > r->n)
		return false;
	out->p = r->p;
	out->n = n;
	r->p += n;
	r->n -= n;
	return true;
}

static bool equals(const reader *r, const char *s)
{
	return r->n == strlen(s) && memcmp(r->p, s, r->n) == 0;
}

/* s("ssh-ed25519") s(<want bytes>) filling the whole of r. */
static bool get_ed25519(reader r, size_t want, const unsigned char **out)
{
	reader type, value;

	if (!get_string(&r, &type) || !equals(&type, KEY_TYPE) || !get_string(&r, &value) ||
	    value.n != want || r.n != 0)
		return false;
	*out = value.p;
	return true;
}

/* "SSHSIG" s(namespace) s(reserved) s(hash_algorithm) s(H(payload)): what
 * the ed25519 signature covers. */
static int signed_data(kiln_buf *out, const char *ns, size_t ns_len, const void *reserved,
                       size_t reserved_len, const char *hash_alg, const unsigned char *digest,
                       size_t digest_len)
{
	int rc;

	if (kiln_buf_put(out, "SSHSIG", 6) < 0)
		return kiln_error_oom("signature");
	if ((rc = put_string(out, ns, ns_len)) < 0 || (rc = put_string(out, reserved, reserved_len)) < 0 ||
	    (rc = put_cstring(out, hash_alg)) < 0 || (rc = put_string(out, digest, digest_len)) < 0)
		return rc;
	return 0;
}

/* ---- signing -------------------------------------------------------------- */

int kiln_sshsig_sign(const kiln_signing_key *key, const char *namespace, const void *payload, size_t len,
                     kiln_buf *armoured)
{
	unsigned char digest[crypto_hash_sha512_BYTES], sig[crypto_sign_ed25519_BYTES];
	kiln_buf data = KILN_BUF_INIT(0), blob = KILN_BUF_INIT(0);
	char *b64 = NULL;
	size_t b64_len;
	int rc;

	if (!namespace || !*namespace)
		return kiln_error_set(KILN_EINVALID, "signature: the namespace is empty");
	if (sodium_init() < 0)
		return kiln_error_set(KILN_EIO, "libsodium failed to initialise");
	crypto_hash_sha512(digest, payload, len);
	if ((rc = signed_data(&data, namespace, strlen(namespace), "", 0, "sha512", digest, sizeof(digest))) <
	    0)
		goto cleanup;
	if (crypto_sign_ed25519_detached(sig, NULL, (const unsigned char *)data.ptr, data.len, key->sk) !=
	    0) {
		rc = kiln_error_set(KILN_EIO, "signature: ed25519 signing failed");
		goto cleanup;
	}

	/* "SSHSIG" uint32(1) s(pubkey) s(ns) s("") s("sha512") s(s("ssh-ed25519") s(sig)) */
	if (kiln_buf_put(&blob, "SSHSIG", 6) < 0 || put_u32(&blob, 1) < 0) {
		rc = kiln_error_oom("signature");
		goto cleanup;
	}
	if ((rc = put_ed25519(&blob, key->pk, 32)) < 0 || (rc = put_cstring(&blob, namespace)) < 0 ||
	    (rc = put_string(&blob, "", 0)) < 0 || (rc = put_cstring(&blob, "sha512")) < 0 ||
	    (rc = put_ed25519(&blob, sig, sizeof(sig))) < 0)
		goto cleanup;

	b64_len = sodium_base64_ENCODED_LEN(blob.len, sodium_base64_VARIANT_ORIGINAL);
	if (!(b64 = malloc(b64_len))) {
		rc = kiln_error_oom("signature");
		goto cleanup;
	}
	sodium_bin2base64(b64, b64_len, (const unsigned char *)blob.ptr, blob.len,
	                  sodium_base64_VARIANT_ORIGINAL);
	b64_len = strlen(b64);
	rc = kiln_buf_puts(armoured, BEGIN_MARK "\n");
	for (size_t at = 0; rc == 0 && at < b64_len; at += ARMOUR_COLUMNS) {
		size_t n = b64_len - at < ARMOUR_COLUMNS ? b64_len - at : ARMOUR_COLUMNS;

		if ((rc = kiln_buf_put(armoured, b64 + at, n)) == 0)
			rc = kiln_buf_putc(armoured, '\n');
	}
	if (rc == 0)
		rc = kiln_buf_puts(armoured, END_MARK "\n");
	if (rc == 0 && (rc = kiln_buf_reserve(armoured, 1)) == 0)
		armoured->ptr[armoured->len] = '\0';
	if (rc < 0)
		rc = kiln_error_set(rc, "signature: out of memory");
cleanup:
	sodium_memzero(sig, sizeof(sig));
	kiln_buf_free(&data);
	kiln_buf_free(&blob);
	free(b64);
	return rc;
}

/* ---- verifying ------------------------------------------------------------ */

static int bad(const char *what)
{
	return kiln_error_set(KILN_EINVALID, "signature: %s", what);
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int kiln_sshsig_verify(const char *armoured, size_t len, const char *namespace, const void *payload,
                       size_t plen, unsigned char out_pk[32])
{
	const size_t begin_len = sizeof(BEGIN_MARK) - 1, end_len = sizeof(END_MARK) - 1;
	unsigned char *bin = NULL, digest[crypto_hash_sha512_BYTES];
	size_t bin_len = 0, digest_len;
	kiln_buf data = KILN_BUF_INIT(0);
	reader r, pub, ns, reserved, hash_alg, sigblob;
	const unsigned char *pk, *sig;
	uint32_t version;
	int rc;

	if (!namespace || !*namespace)
		return bad("the namespace is empty");
	while (len > 0 && is_space(armoured[0])) {
		armoured++;
		len--;
	}
	while (len > 0 && is_space(armoured[len - 1]))
		len--;
	if (len > ARMOUR_MAX)
		return bad("too long to be an SSH signature");
	if (len < begin_len + end_len || memcmp(armoured, BEGIN_MARK, begin_len) != 0 ||
	    memcmp(armoured + len - end_len, END_MARK, end_len) != 0)
		return bad("not an armoured SSH signature (" BEGIN_MARK " ... " END_MARK ")");
	armoured += begin_len;
	len -= begin_len + end_len;
	if (!(bin = malloc(len + 1)))
		return kiln_error_oom("signature");
	if (kiln_base64_decode(bin, len + 1, armoured, len, " \t\r\n", &bin_len) != 0) {
		rc = bad("the armour is not base64");
		goto cleanup;
	}

	r.p = bin;
	r.n = bin_len;
	if (r.n < 6 || memcmp(r.p, "SSHSIG", 6) != 0) {
		rc = bad("the blob does not start with SSHSIG");
		goto cleanup;
	}
	r.p += 6;
	r.n -= 6;
	if (!get_u32(&r, &version) || version != 1) {
		rc = bad("unsupported SSHSIG version");
		goto cleanup;
	}
	if (!get_string(&r, &pub) || !get_string(&r, &ns) || !get_string(&r, &reserved) ||
	    !get_string(&r, &hash_alg) || !get_string(&r, &sigblob) || r.n != 0) {
		rc = bad("malformed SSHSIG blob");
		goto cleanup;
	}
	if (!get_ed25519(pub, 32, &pk) || !get_ed25519(sigblob, crypto_sign_ed25519_BYTES, &sig)) {
		rc = bad("not an ssh-ed25519 key and signature");
		goto cleanup;
	}
	if (!equals(&ns, namespace)) {
		rc = bad("made for another namespace");
		goto cleanup;
	}
	if (equals(&hash_alg, "sha512")) {
		crypto_hash_sha512(digest, payload, plen);
		digest_len = crypto_hash_sha512_BYTES;
	} else if (equals(&hash_alg, "sha256")) {
		crypto_hash_sha256(digest, payload, plen);
		digest_len = crypto_hash_sha256_BYTES;
	} else {
		rc = bad("unsupported hash algorithm (sha512 or sha256)");
		goto cleanup;
	}
	if ((rc = signed_data(&data, (const char *)ns.p, ns.n, reserved.p, reserved.n,
	                      equals(&hash_alg, "sha512") ? "sha512" : "sha256", digest, digest_len)) < 0)
		goto cleanup;
	if (crypto_sign_ed25519_verify_detached(sig, (const unsigned char *)data.ptr, data.len, pk) != 0) {
		rc = bad("does not match the signed data");
		goto cleanup;
	}
	if (out_pk)
		memcpy(out_pk, pk, 32);
	rc = 0;
cleanup:
	free(bin);
	kiln_buf_free(&data);
	return rc;
}

/* ---- key files ------------------------------------------------------------ */

/* A principal for an allowed-signers line: printable ASCII, no separator. */
static bool comment_valid(const char *s, size_t max)
{
	size_t n = 0;

	for (; s[n]; n++) {
		unsigned char c = (unsigned char)s[n];

		if (n >= max || c <= 0x20 || c >= 0x7f || c == '"' || c == ',' || c == '#')
			return false;
	}
	return true;
}

void kiln_signing_key_wipe(kiln_signing_key *key)
{
	if (key)
		sodium_memzero(key, sizeof(*key));
}

int kiln_signing_key_public_line(const kiln_signing_key *key, kiln_buf *out)
{
	kiln_buf blob = KILN_BUF_INIT(0);
	char
	    b64[sodium_base64_ENCODED_LEN(4 + sizeof(KEY_TYPE) - 1 + 4 + 32, sodium_base64_VARIANT_ORIGINAL)];
	int rc;

	if ((rc = put_cstring(&blob, KEY_TYPE)) < 0 || (rc = put_string(&blob, key->pk, 32)) < 0)
		goto cleanup;
	sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)blob.ptr, blob.len,
	                  sodium_base64_VARIANT_ORIGINAL);
	rc = kiln_buf_printf(out, KEY_TYPE " %s%s%s", b64, key->comment[0] ? " " : "", key->comment);
	if (rc < 0)
		rc = kiln_error_set(rc, "signature: out of memory");
cleanup:
	kiln_buf_free(&blob);
	return rc;
}

/* Parses "kiln-ed25519-v1\n<128 hex>\n<comment>\n" (the last newline
 * optional, CR before LF tolerated). */
static bool parse_key_text(kiln_signing_key *out, char *text, size_t len)
{
	char *lines[3] = {0};
	size_t nlines = 0, bin_len = 0;
	char *p = text, *end = text + len;
	unsigned char seed_pk[32], seed_sk[64];
	bool ok;

	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *stop = nl ? nl : end;

		if (nlines == 3)
			return false;
		if (stop > p && stop[-1] == '\r')
			stop--;
		*stop = '\0';
		lines[nlines++] = p;
		p = nl ? nl + 1 : end;
	}
	if (nlines < 2 || strcmp(lines[0], KEY_MAGIC) != 0 || strlen(lines[1]) != 128)
		return false;
	if (lines[2] && !comment_valid(lines[2], sizeof(out->comment) - 1))
		return false;
	if (sodium_hex2bin(out->sk, sizeof(out->sk), lines[1], 128, NULL, &bin_len, NULL) != 0 ||
	    bin_len != 64)
		return false;
	/* the public half must be the one the seed gives */
	crypto_sign_ed25519_seed_keypair(seed_pk, seed_sk, out->sk);
	ok = sodium_memcmp(seed_pk, out->sk + 32, 32) == 0;
	memcpy(out->pk, seed_pk, 32);
	snprintf(out->comment, sizeof(out->comment), "%s", lines[2] ? lines[2] : "");
	sodium_memzero(seed_sk, sizeof(seed_sk));
	return ok;
}

int kiln_signing_key_load(kiln_signing_key *out, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (sodium_init() < 0)
		return kiln_error_set(KILN_EIO, "libsodium failed to initialise");
	if ((rc = kiln_secret_read_file(&text, &len, path, "signing key file", KEY_FILE_MAX)) < 0)
		return rc;
	if (!parse_key_text(out, text, len)) {
		kiln_signing_key_wipe(out);
		rc = kiln_error_set(KILN_EINVALID,
		                    "%s: not a kiln signing key file (" KEY_MAGIC
		                    ", 128 hex digits, a comment; see docs/FORMATS.md)",
		                    path);
	}
	kiln_secret_free(text, len);
	return rc;
}

int kiln_signing_key_generate(const char *private_path, const char *public_path, const char *comment)
{
	kiln_signing_key key;
	kiln_buf pub = KILN_BUF_INIT(0);
	/* magic, 128 hex, comment, newlines */
	char text[sizeof(KEY_MAGIC) + 129 + sizeof(key.comment) + 1];
	bool private_created = false;
	int n, rc;

	if (!comment)
		comment = DEFAULT_COMMENT;
	if (!*comment || !comment_valid(comment, sizeof(key.comment) - 1))
		return kiln_error_set(
		    KILN_EINVALID, "signing key comment must be 1 to 127 printable ASCII characters without "
		                   "space, '\"', ',' or '#'");
	if (sodium_init() < 0)
		return kiln_error_set(KILN_EIO, "libsodium failed to initialise");
	memset(&key, 0, sizeof(key));
	crypto_sign_ed25519_keypair(key.pk, key.sk);
	snprintf(key.comment, sizeof(key.comment), "%s", comment);
	if ((rc = kiln_signing_key_public_line(&key, &pub)) < 0 || (rc = kiln_buf_putc(&pub, '\n')) < 0) {
		rc = kiln_error_oom("signature");
		goto cleanup;
	}
	n = snprintf(text, sizeof(text), KEY_MAGIC "\n");
	sodium_bin2hex(text + n, sizeof(text) - (size_t)n, key.sk, sizeof(key.sk));
	n += 128;
	n += snprintf(text + n, sizeof(text) - (size_t)n, "\n%s\n", key.comment);

	if ((rc = kiln_fs_create_new(private_path, text, (size_t)n, 0600, "the signing key file")) < 0)
		goto cleanup;
	private_created = true;
	if (public_path &&
	    (rc = kiln_fs_create_new(public_path, pub.ptr, pub.len, 0644, "the public key file")) < 0)
		goto cleanup;
	rc = 0;
cleanup:
	if (rc < 0 && private_created)
		unlink(private_path);
	sodium_memzero(text, sizeof(text));
	kiln_signing_key_wipe(&key);
	kiln_buf_free(&pub);
	return rc;
}
