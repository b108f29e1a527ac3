/* libFuzzer target for kiln_sshsig_verify (manifest/sshsig.c). The first
 * byte picks a mode: the input as the armour, over a payload nobody signed
 * (it never verifies); or a signature made here with a fixed key, its blob
 * or its armoured text changed by the input's (position, byte) pairs: it
 * verifies only when the change left the blob as it was signed. */
#include <sodium.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manifest/sshsig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char signed_payload[] = "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nfuzz\n";
static const char unsigned_payload[] = "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nnever signed\n";

static kiln_signing_key key;
static kiln_buf armour = KILN_BUF_INIT(0);
static unsigned char blob[1024];
static size_t blob_len;

/* The armour without its marks and the blob it holds, made once. */
static void setup(void)
{
	static bool done;
	unsigned char seed[32];
	const char *b, *e;

	if (done)
		return;
	done = true;
	if (sodium_init() < 0)
		abort();
	for (size_t i = 0; i < sizeof(seed); i++)
		seed[i] = (unsigned char)(i * 7 + 1);
	crypto_sign_seed_keypair(key.pk, key.sk, seed);
	if (kiln_sshsig_sign(&key, "git", signed_payload, strlen(signed_payload), &armour) < 0)
		abort();
	b = strchr(armour.ptr, '\n') + 1;
	e = strstr(armour.ptr, "-----END");
	if (sodium_base642bin(blob, sizeof(blob), b, (size_t)(e - b), "\n", &blob_len, NULL,
	                      sodium_base64_VARIANT_ORIGINAL) != 0)
		abort();
}

static int verify(const char *text, size_t len, const char *payload, unsigned char pk[32])
{
	return kiln_sshsig_verify(text, len, "git", payload, strlen(payload), pk);
}

/* text without ' ', '\t', '\r' and '\n', into out (as long as text). */
static size_t strip(char *out, const char *text, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		if (!strchr(" \t\r\n", text[i]) || text[i] == '\0')
			out[n++] = text[i];
	return n;
}

static void mutate_blob(const uint8_t *data, size_t size)
{
	unsigned char b[sizeof(blob) + 64];
	char text[4096];
	size_t n = blob_len, b64;
	unsigned char pk[32];

	memset(b, 0, sizeof(b));
	memcpy(b, blob, blob_len);
	for (size_t i = 0; i + 1 < size; i += 2) {
		size_t at = data[i] % (blob_len + 1);

		if (at == blob_len) /* a position past the end: cut or grow the blob */
			n = data[i + 1] < 128
			        ? n * data[i + 1] / 128
			        : (n + data[i + 1] % 64 > sizeof(b) ? sizeof(b) : n + data[i + 1] % 64);
		else
			b[at] ^= data[i + 1];
	}
	strcpy(text, "-----BEGIN SSH SIGNATURE-----\n");
	b64 = strlen(text);
	sodium_bin2base64(text + b64, sizeof(text) - b64 - 64, b, n, sodium_base64_VARIANT_ORIGINAL);
	strcat(text, "\n-----END SSH SIGNATURE-----\n");
	if (verify(text, strlen(text), signed_payload, pk) == 0) {
		if (n != blob_len || memcmp(b, blob, n) != 0 || memcmp(pk, key.pk, 32) != 0)
			abort();
	} else if (n == blob_len && memcmp(b, blob, n) == 0) {
		abort();
	}
}

static void mutate_armour(const uint8_t *data, size_t size)
{
	char text[2048], a[2048], m[2048];
	size_t n = armour.len;
	unsigned char pk[32];

	memcpy(text, armour.ptr, n);
	for (size_t i = 0; i + 1 < size; i += 2) {
		size_t at = data[i] * n / 256;

		if (data[i + 1] == 0 && n > 0) { /* delete */
			memmove(text + at, text + at + 1, n - at - 1);
			n--;
		} else if (data[i + 1] < 8 && n < sizeof(text)) { /* insert whitespace */
			memmove(text + at + 1, text + at, n - at);
			text[at] = " \t\r\n \n\n "[data[i + 1]];
			n++;
		} else if (at < n) {
			text[at] = (char)data[i + 1];
		}
	}
	if (verify(text, n, signed_payload, pk) == 0) {
		size_t an = strip(a, armour.ptr, armour.len), mn = strip(m, text, n);

		if (an != mn || memcmp(a, m, an) != 0 || memcmp(pk, key.pk, 32) != 0)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	setup();
	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0:
		if (verify((const char *)data + 1, size - 1, unsigned_payload, NULL) == 0)
			abort();
		if (kiln_sshsig_verify((const char *)data + 1, size - 1, "", signed_payload,
		                       strlen(signed_payload), NULL) == 0)
			abort();
		break;
	case 1:
		mutate_blob(data + 1, size - 1);
		break;
	default:
		mutate_armour(data + 1, size - 1);
		break;
	}
	return 0;
}
