/* Unit tests for SSH signatures and signing keys (src/manifest/sshsig.c)
 * and the signed manifest paths (kiln_manifest_commit with a signing key,
 * kiln_manifest_tag): byte-identical output to `ssh-keygen -Y sign` for the
 * same key and payload, a signature made by ssh-keygen checked, roundtrips,
 * tampered payload / namespace / signature / key refused, the armour's
 * layout, the key file (format, mode, a FIFO refused without waiting,
 * generate -> load, no overwrite), the
 * public key line, and signed commits and tags read back with libgit2 (and
 * with stock `git verify-commit` / `verify-tag` / `fsck --strict` when git
 * and ssh-keygen are installed). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <git2.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "core/buf.h"
#include "core/error.h"
#include "manifest/manifest.h"
#include "manifest/sshsig.h"

static char tmpdir[64];

/* A throwaway ed25519 key made with `ssh-keygen -t ed25519 -C kat@example`
 * (libsodium layout: seed then public key), the payload it signed with
 * `ssh-keygen -Y sign -n git`, and that signature. ed25519 is
 * deterministic, so kiln must write the very same bytes. */
static const char kat_sk_hex[] = "e0400caa24e6d847a41b6cb87e8ea435ae3731ce50253c14c5759d12a0e1b66f"
                                 "8d1aa865bccfddc813999ed5dd87b169b8af1ae00208598ad544f339b3325965";
static const char kat_pub_line[] =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAII0aqGW8z93IE5me1d2HsWm4rxrgAghZitVE8zmzMlll kat@example";
static const char kat_payload[] = "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nhello from ssh-keygen\n";
static const char kat_sig[] = "-----BEGIN SSH SIGNATURE-----\n"
                              "U1NIU0lHAAAAAQAAADMAAAALc3NoLWVkMjU1MTkAAAAgjRqoZbzP3cgTmZ7V3YexabivGu\n"
                              "ACCFmK1UTzObMyWWUAAAADZ2l0AAAAAAAAAAZzaGE1MTIAAABTAAAAC3NzaC1lZDI1NTE5\n"
                              "AAAAQCBmSJulorLEou7xDVHRFSK0Wzlb77InlEAMUS16qeUjajOc4sWE9BdA0ZsLWYIuxv\n"
                              "D/e2+OF6E5JybOoVxShgY=\n"
                              "-----END SSH SIGNATURE-----\n";

static void kat_key(kiln_signing_key *key)
{
	size_t n = 0;

	memset(key, 0, sizeof(*key));
	assert_int_equal(sodium_hex2bin(key->sk, 64, kat_sk_hex, 128, NULL, &n, NULL), 0);
	assert_int_equal(n, 64);
	memcpy(key->pk, key->sk + 32, 32);
	strcpy(key->comment, "kat@example");
}

static void fresh_key(kiln_signing_key *key)
{
	memset(key, 0, sizeof(*key));
	assert_int_equal(crypto_sign_ed25519_keypair(key->pk, key->sk), 0);
	strcpy(key->comment, "test@kiln");
}

static char *path_in_tmp(const char *name)
{
	static char paths[8][256];
	static int next;
	char *p = paths[next++ % 8];

	snprintf(p, 256, "%s/%s", tmpdir, name);
	return p;
}

static char *read_text(const char *path)
{
	static char text[4096];
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	return text;
}

static int sign(const kiln_signing_key *key, const char *ns, const char *payload, kiln_buf *out)
{
	kiln_buf_reset(out);
	return kiln_sshsig_sign(key, ns, payload, strlen(payload), out);
}

static int verify(const char *armour, const char *ns, const char *payload, unsigned char pk[32])
{
	return kiln_sshsig_verify(armour, strlen(armour), ns, payload, strlen(payload), pk);
}

/* ---- signatures ------------------------------------------------------------ */

static void test_same_bytes_as_ssh_keygen(void **state)
{
	kiln_signing_key key;
	kiln_buf out = KILN_BUF_INIT(0);

	(void)state;
	kat_key(&key);
	assert_int_equal(sign(&key, "git", kat_payload, &out), 0);
	assert_int_equal(out.len, strlen(kat_sig));
	assert_string_equal(out.ptr, kat_sig); /* NUL-terminated after the text */
	kiln_signing_key_wipe(&key);
	kiln_buf_free(&out);
}

static void test_verifies_ssh_keygen_signature(void **state)
{
	kiln_signing_key key;
	unsigned char pk[32];

	(void)state;
	kat_key(&key);
	assert_int_equal(verify(kat_sig, "git", kat_payload, pk), 0);
	assert_memory_equal(pk, key.pk, 32);
	assert_int_equal(verify(kat_sig, "file", kat_payload, pk), KILN_EINVALID);
	assert_int_equal(verify(kat_sig, "git", "hello", pk), KILN_EINVALID);
	kiln_signing_key_wipe(&key);
}

static void test_roundtrip(void **state)
{
	kiln_signing_key key;
	kiln_buf out = KILN_BUF_INIT(0);
	unsigned char pk[32];
	char big[100000];

	(void)state;
	fresh_key(&key);
	assert_int_equal(sign(&key, "git", "", &out), 0);
	assert_int_equal(verify(out.ptr, "git", "", pk), 0);
	assert_memory_equal(pk, key.pk, 32);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(sign(&key, "git", big, &out), 0);
	assert_int_equal(verify(out.ptr, "git", big, NULL), 0);
	/* surrounding whitespace and CRLF line ends are fine */
	{
		kiln_buf crlf = KILN_BUF_INIT(0);

		kiln_buf_puts(&crlf, "\n  ");
		for (size_t i = 0; i < out.len; i++)
			kiln_buf_puts(&crlf, out.ptr[i] == '\n' ? "\r\n" : (char[]){out.ptr[i], 0});
		kiln_buf_putc(&crlf, '\0');
		assert_int_equal(verify(crlf.ptr, "git", big, NULL), 0);
		kiln_buf_free(&crlf);
	}
	/* appends to what the buffer holds */
	kiln_buf_reset(&out);
	kiln_buf_puts(&out, "message\n");
	assert_int_equal(kiln_sshsig_sign(&key, "git", "p", 1, &out), 0);
	assert_int_equal(strncmp(out.ptr, "message\n-----BEGIN SSH SIGNATURE-----\n", 38), 0);
	assert_int_equal(verify(out.ptr + 8, "git", "p", NULL), 0);
	/* empty namespace */
	assert_int_equal(sign(&key, "", "p", &out), KILN_EINVALID);
	kiln_signing_key_wipe(&key);
	kiln_buf_free(&out);
}

static void test_tampering_rejected(void **state)
{
	kiln_signing_key key, other;
	kiln_buf out = KILN_BUF_INIT(0), forged = KILN_BUF_INIT(0);
	unsigned char pk[32];
	const char *payload = "object 0123\ntype commit\n\nrelease v3\n";
	char *copy;
	size_t b64_start = sizeof("-----BEGIN SSH SIGNATURE-----\n") - 1;

	(void)state;
	fresh_key(&key);
	fresh_key(&other);
	assert_int_equal(sign(&key, "git", payload, &out), 0);
	assert_int_equal(verify(out.ptr, "git", payload, pk), 0);

	assert_int_equal(verify(out.ptr, "git", "object 0123\ntype commit\n\nrelease v4\n", pk),
	                 KILN_EINVALID);
	assert_int_equal(verify(out.ptr, "gitx", payload, pk), KILN_EINVALID);
	assert_int_equal(verify(out.ptr, "file", payload, pk), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "namespace"));

	/* every base64 character of the blob flipped in turn */
	copy = strdup(out.ptr);
	assert_non_null(copy);
	for (size_t i = b64_start; copy[i] != '-'; i++) {
		char was = copy[i];

		if (was == '\n' || was == '=')
			continue;
		copy[i] = was == 'A' ? 'B' : 'A';
		assert_int_equal(verify(copy, "git", payload, pk), KILN_EINVALID);
		copy[i] = was;
	}
	assert_int_equal(verify(copy, "git", payload, pk), 0);

	/* markers, truncation, garbage */
	copy[3] = 'x';
	assert_int_equal(verify(copy, "git", payload, pk), KILN_EINVALID);
	free(copy);
	assert_int_equal(kiln_sshsig_verify(out.ptr, out.len - 10, "git", payload, strlen(payload), pk),
	                 KILN_EINVALID);
	assert_int_equal(verify("", "git", payload, pk), KILN_EINVALID);
	assert_int_equal(
	    verify("-----BEGIN SSH SIGNATURE-----\n!!!!\n-----END SSH SIGNATURE-----\n", "git", payload, pk),
	    KILN_EINVALID);
	assert_int_equal(
	    verify("-----BEGIN SSH SIGNATURE-----\n-----END SSH SIGNATURE-----\n", "git", payload, pk),
	    KILN_EINVALID);

	/* another key's signature with this key's public key put in the blob */
	{
		kiln_signing_key mix = other;
		unsigned char blob[512], a[512];
		size_t alen = 0;
		char b64[1024];
		const char *p = out.ptr + b64_start;

		memcpy(mix.pk, key.pk, 32); /* signs with other's seed, names key's public key */
		assert_int_equal(sign(&mix, "git", payload, &forged), 0);
		assert_int_equal(verify(forged.ptr, "git", payload, pk), KILN_EINVALID);
		/* and the genuine blob with a trailing byte added */
		assert_int_equal(sodium_base642bin(a, sizeof(a), p, strstr(p, "-----") - p, "\n", &alen, NULL,
		                                   sodium_base64_VARIANT_ORIGINAL),
		                 0);
		memcpy(blob, a, alen);
		blob[alen] = 0;
		sodium_bin2base64(b64, sizeof(b64), blob, alen + 1, sodium_base64_VARIANT_ORIGINAL);
		kiln_buf_reset(&forged);
		kiln_buf_printf(&forged, "-----BEGIN SSH SIGNATURE-----\n%s\n-----END SSH SIGNATURE-----\n",
		                b64);
		assert_int_equal(verify(forged.ptr, "git", payload, pk), KILN_EINVALID);
	}
	kiln_signing_key_wipe(&key);
	kiln_signing_key_wipe(&other);
	kiln_buf_free(&out);
	kiln_buf_free(&forged);
}

static void test_armour_layout(void **state)
{
	kiln_signing_key key;
	kiln_buf out = KILN_BUF_INIT(0);
	char *lines[32];
	size_t n = 0;
	char *save = NULL;

	(void)state;
	fresh_key(&key);
	for (int ns_len = 1; ns_len < 40; ns_len += 7) {
		char ns[64];

		memset(ns, 'n', (size_t)ns_len);
		ns[ns_len] = '\0';
		assert_int_equal(sign(&key, ns, "payload", &out), 0);
		assert_true(out.len > 0 && out.ptr[out.len - 1] == '\n');
		assert_int_equal(strlen(out.ptr), out.len);
		n = 0;
		for (char *l = strtok_r(out.ptr, "\n", &save); l && n < 32; l = strtok_r(NULL, "\n", &save))
			lines[n++] = l;
		assert_true(n >= 4);
		assert_string_equal(lines[0], "-----BEGIN SSH SIGNATURE-----");
		assert_string_equal(lines[n - 1], "-----END SSH SIGNATURE-----");
		for (size_t i = 1; i < n - 1; i++) {
			size_t len = strlen(lines[i]);

			assert_true(len > 0 && len <= 70);
			if (i < n - 2)
				assert_int_equal(len, 70);
			assert_int_equal(
			    strspn(lines[i],
			           "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="),
			    len);
		}
		assert_int_equal(strncmp(lines[1], "U1NIU0lH", 8), 0); /* "SSHSIG" */
	}
	kiln_signing_key_wipe(&key);
	kiln_buf_free(&out);
}

/* ---- key files ------------------------------------------------------------- */

static void test_generate_load_roundtrip(void **state)
{
	const char *priv = path_in_tmp("gen.key"), *pub = path_in_tmp("gen.key.pub");
	kiln_signing_key key;
	kiln_buf line = KILN_BUF_INIT(0), out = KILN_BUF_INIT(0);
	struct stat st;
	char *text;

	(void)state;
	assert_int_equal(kiln_signing_key_generate(priv, pub, "ops@example.org"), 0);
	assert_int_equal(stat(priv, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(stat(pub, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);

	text = read_text(priv);
	assert_int_equal(strncmp(text, "kiln-ed25519-v1\n", 16), 0);
	assert_int_equal(strspn(text + 16, "0123456789abcdef"), 128);
	assert_string_equal(text + 16 + 128, "\nops@example.org\n");

	assert_int_equal(kiln_signing_key_load(&key, priv), 0);
	assert_string_equal(key.comment, "ops@example.org");
	assert_memory_equal(key.pk, key.sk + 32, 32);
	assert_int_equal(kiln_signing_key_public_line(&key, &line), 0);
	kiln_buf_putc(&line, '\n');
	kiln_buf_putc(&line, '\0');
	assert_string_equal(read_text(pub), line.ptr);

	/* the loaded key signs what its public key checks */
	assert_int_equal(sign(&key, "git", "x", &out), 0);
	{
		unsigned char pk[32];

		assert_int_equal(verify(out.ptr, "git", "x", pk), 0);
		assert_memory_equal(pk, key.pk, 32);
	}

	/* never overwritten; a failed generate leaves nothing behind */
	assert_int_equal(kiln_signing_key_generate(priv, path_in_tmp("other.pub"), NULL), KILN_EMODIFIED);
	assert_non_null(strstr(kiln_error_last(), "already exists"));
	assert_int_equal(access(path_in_tmp("other.pub"), F_OK), -1);
	assert_int_equal(kiln_signing_key_generate(path_in_tmp("new.key"), pub, NULL), KILN_EMODIFIED);
	assert_int_equal(access(path_in_tmp("new.key"), F_OK), -1);
	{
		kiln_signing_key again;

		assert_int_equal(kiln_signing_key_load(&again, priv), 0);
		assert_memory_equal(again.sk, key.sk, 64);
		kiln_signing_key_wipe(&again);
	}

	/* default comment, no public file */
	assert_int_equal(kiln_signing_key_generate(path_in_tmp("default.key"), NULL, NULL), 0);
	assert_int_equal(kiln_signing_key_load(&key, path_in_tmp("default.key")), 0);
	assert_string_equal(key.comment, "kiln@localhost");

	/* comments that cannot be a principal */
	assert_int_equal(kiln_signing_key_generate(path_in_tmp("c1.key"), NULL, "two words"), KILN_EINVALID);
	assert_int_equal(kiln_signing_key_generate(path_in_tmp("c2.key"), NULL, "a,b"), KILN_EINVALID);
	assert_int_equal(kiln_signing_key_generate(path_in_tmp("c3.key"), NULL, ""), KILN_EINVALID);
	assert_int_equal(kiln_signing_key_generate(path_in_tmp("c4.key"), NULL, "tab\there"), KILN_EINVALID);
	assert_int_equal(access(path_in_tmp("c1.key"), F_OK), -1);
	kiln_signing_key_wipe(&key);
	kiln_buf_free(&line);
	kiln_buf_free(&out);
}

static void test_key_file_mode_refused(void **state)
{
	const char *priv = path_in_tmp("mode.key");
	kiln_signing_key key;
	static const mode_t refused[] = {0640, 0604, 0660, 0644, 0666, 0620};

	(void)state;
	unlink(priv);
	assert_int_equal(kiln_signing_key_generate(priv, NULL, NULL), 0);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		assert_int_equal(chmod(priv, refused[i]), 0);
		assert_int_equal(kiln_signing_key_load(&key, priv), KILN_EINVALID);
		assert_non_null(strstr(kiln_error_last(), "chmod 600"));
	}
	assert_int_equal(chmod(priv, 0400), 0);
	assert_int_equal(kiln_signing_key_load(&key, priv), 0);
	assert_int_equal(chmod(priv, 0600), 0);
	assert_int_equal(kiln_signing_key_load(&key, priv), 0);
	kiln_signing_key_wipe(&key);

	assert_int_equal(kiln_signing_key_load(&key, path_in_tmp("missing.key")), KILN_ENOTFOUND);
	assert_int_equal(kiln_signing_key_load(&key, tmpdir), KILN_EINVALID); /* a folder */
}

/* A FIFO named as the signing key file is refused at once (the shared
 * secret reader opens without waiting for a writer); an open that waited
 * would block forever: the alarm ends the test program (a failure)
 * instead. A 0644 key is refused with the same file naming as before. */
static void test_key_file_fifo_refused(void **state)
{
	const char *fifo = path_in_tmp("fifo.key"), *open_key = path_in_tmp("open.key");
	char want[512];
	kiln_signing_key key;

	(void)state;
	unlink(fifo);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	alarm(30);
	assert_int_equal(kiln_signing_key_load(&key, fifo), KILN_EINVALID);
	alarm(0);
	snprintf(want, sizeof(want), "%s: signing key file is not a regular file", fifo);
	assert_string_equal(kiln_error_last(), want);
	unlink(fifo);

	unlink(open_key);
	assert_int_equal(kiln_signing_key_generate(open_key, NULL, NULL), 0);
	assert_int_equal(chmod(open_key, 0644), 0);
	assert_int_equal(kiln_signing_key_load(&key, open_key), KILN_EINVALID);
	snprintf(want, sizeof(want),
	         "%s: signing key file mode 0644 lets group or others read it; chmod 600 %s", open_key,
	         open_key);
	assert_string_equal(kiln_error_last(), want);
}

static void test_key_file_format(void **state)
{
	const char *path = path_in_tmp("fmt.key");
	kiln_signing_key key;
	char good[300], text[400];

	(void)state;
	snprintf(good, sizeof(good), "kiln-ed25519-v1\n%s\nkat@example\n", kat_sk_hex);
	kiln_test_write_file(path, good, 0600);
	assert_int_equal(kiln_signing_key_load(&key, path), 0);
	{
		kiln_buf line = KILN_BUF_INIT(0);

		assert_int_equal(kiln_signing_key_public_line(&key, &line), 0);
		kiln_buf_putc(&line, '\0');
		assert_string_equal(line.ptr, kat_pub_line);
		key.comment[0] = '\0';
		kiln_buf_reset(&line);
		assert_int_equal(kiln_signing_key_public_line(&key, &line), 0);
		kiln_buf_putc(&line, '\0');
		assert_int_equal(strlen(line.ptr), strlen("ssh-ed25519 ") + 68);
		assert_int_equal(strncmp(line.ptr, kat_pub_line, strlen(line.ptr)), 0);
		kiln_buf_free(&line);
	}

	/* no comment line, no final newline, CRLF */
	snprintf(text, sizeof(text), "kiln-ed25519-v1\n%s\n", kat_sk_hex);
	kiln_test_write_file(path, text, 0600);
	assert_int_equal(kiln_signing_key_load(&key, path), 0);
	assert_string_equal(key.comment, "");
	snprintf(text, sizeof(text), "kiln-ed25519-v1\r\n%s\r\nkat@example", kat_sk_hex);
	kiln_test_write_file(path, text, 0600);
	assert_int_equal(kiln_signing_key_load(&key, path), 0);
	assert_string_equal(key.comment, "kat@example");

	/* refused: wrong magic, short or bad hex, a public half that is not the seed's, extra lines */
	static const struct {
		const char *head;
		int hex_digits; /* of kat_sk_hex */
		const char *tail;
	} bad[] = {
	    {"kiln-ed25519-v2\n", 128, "\nc\n"},         /* another magic */
	    {"kiln-ed25519-v1\n", 126, "\nc\n"},         /* short */
	    {"kiln-ed25519-v1\nzz", 126, "\nc\n"},       /* not hex */
	    {"kiln-ed25519-v1\n", 127, "0\nc\n"},        /* public half not the seed's */
	    {"kiln-ed25519-v1\n", 128, "\nc\nmore\n"},   /* a fourth line */
	    {"kiln-ed25519-v1\n", 128, "\ntwo words\n"}, /* not a principal */
	    {"", 128, "\n"},                             /* no magic */
	};
	assert_int_equal(kat_sk_hex[127], '5');
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "%s%.*s%s", bad[i].head, bad[i].hex_digits, kat_sk_hex,
		         bad[i].tail);
		kiln_test_write_file(path, text, 0600);
		assert_int_equal(kiln_signing_key_load(&key, path), KILN_EINVALID);
		/* the message never carries the file's content */
		assert_null(strstr(kiln_error_last(), "e0400caa"));
	}
	kiln_test_write_file(path, "", 0600);
	assert_int_equal(kiln_signing_key_load(&key, path), KILN_EINVALID);
	kiln_signing_key_wipe(&key);
}

/* ---- signed commits and tags ------------------------------------------------ */

static bool have_tools(void)
{
	return system("command -v git >/dev/null && command -v ssh-keygen >/dev/null") == 0;
}

static int git_in(const char *repo, const char *args)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd),
	         "git --git-dir='%s' -c gpg.format=ssh -c gpg.ssh.allowedSignersFile='%s/allowed' %s "
	         ">'%s/git.out' 2>&1",
	         repo, tmpdir, args, tmpdir);
	return system(cmd);
}

static void test_signed_commit_and_tag(void **state)
{
	const char *repo = path_in_tmp("m.git");
	kiln_manifest *m = NULL;
	kiln_signing_key key, other;
	kiln_snapshot snap = {.dataset = "ds", .branch = "main", .dataset_json = "{}"};
	char c1[41], c2[41], tag[41], tag2[41];
	git_repository *repo_handle = NULL;
	git_buf sig = GIT_BUF_INIT, data = GIT_BUF_INIT;
	git_oid id;
	git_odb *odb = NULL;
	git_odb_object *obj = NULL;
	unsigned char pk[32];

	(void)state;
	fresh_key(&key);
	fresh_key(&other);
	assert_int_equal(kiln_manifest_open(&m, repo), 0);

	/* an unsigned commit, then a signed one on top */
	assert_int_equal(kiln_manifest_commit(m, &snap, c1), 0);
	snap.signing_key = &key;
	assert_int_equal(kiln_manifest_commit(m, &snap, c2), 0);

	assert_int_equal(git_repository_open_bare(&repo_handle, repo), 0);
	assert_int_equal(git_oid_fromstr(&id, c1), 0);
	assert_int_equal(git_commit_extract_signature(&sig, &data, repo_handle, &id, NULL), GIT_ENOTFOUND);
	git_buf_dispose(&sig);
	git_buf_dispose(&data);
	assert_int_equal(git_oid_fromstr(&id, c2), 0);
	assert_int_equal(git_commit_extract_signature(&sig, &data, repo_handle, &id, NULL), 0);
	assert_int_equal(kiln_sshsig_verify(sig.ptr, sig.size, "git", data.ptr, data.size, pk), 0);
	assert_memory_equal(pk, key.pk, 32);
	assert_non_null(strstr(data.ptr, "\nparent "));
	assert_null(strstr(data.ptr, "gpgsig"));

	/* a signed tag on the signed commit, an unsigned one on the first */
	assert_int_equal(kiln_manifest_tag(m, "ds", "v1", c2, "release v1\n\ngates passed", &key, tag), 0);
	assert_int_equal(strlen(tag), 40);
	assert_int_equal(kiln_manifest_tag(m, "ds", "v0", c1, "", NULL, tag2), 0);
	assert_int_equal(git_repository_odb(&odb, repo_handle), 0);
	assert_int_equal(git_oid_fromstr(&id, tag), 0);
	assert_int_equal(git_odb_read(&obj, odb, &id), 0);
	assert_int_equal(git_odb_object_type(obj), GIT_OBJECT_TAG);
	{
		const char *raw = git_odb_object_data(obj);
		size_t n = git_odb_object_size(obj);
		char *text = strndup(raw, n);
		char *begin = strstr(text, "-----BEGIN SSH SIGNATURE-----");
		char want_head[128];

		assert_non_null(text);
		assert_non_null(begin);
		snprintf(want_head, sizeof(want_head),
		         "object %s\ntype commit\ntag ds/v1\ntagger kiln <kiln@localhost> ", c2);
		assert_int_equal(strncmp(text, want_head, strlen(want_head)), 0);
		assert_non_null(strstr(text, "\n\nrelease v1\n\ngates passed\n-----BEGIN"));
		assert_int_equal(kiln_sshsig_verify(begin, n - (size_t)(begin - text), "git", text,
		                                    (size_t)(begin - text), pk),
		                 0);
		assert_memory_equal(pk, key.pk, 32);
		assert_int_equal(kiln_sshsig_verify(begin, n - (size_t)(begin - text), "git", text,
		                                    (size_t)(begin - text) - 1, pk),
		                 KILN_EINVALID);
		free(text);
	}
	git_odb_object_free(obj);
	git_odb_free(odb);
	{
		git_reference *ref = NULL;

		assert_int_equal(git_reference_lookup(&ref, repo_handle, "refs/tags/ds/v1"), 0);
		assert_string_equal(git_oid_tostr_s(git_reference_target(ref)), tag);
		git_reference_free(ref);
	}

	/* refusals: an existing tag, bad names, a bad or missing commit, a signature-like line */
	assert_int_equal(kiln_manifest_tag(m, "ds", "v1", c1, "again", &key, tag2), KILN_EMODIFIED);
	assert_non_null(strstr(kiln_error_last(), "refs/tags/ds/v1 already exists"));
	assert_string_equal(tag2, "");
	assert_int_equal(kiln_manifest_tag(m, "ds", "v1", c1, "again", NULL, tag2), KILN_EMODIFIED);
	assert_int_equal(kiln_manifest_tag(m, "DS", "v2", c1, "", NULL, tag2), KILN_EINVALID);
	assert_int_equal(kiln_manifest_tag(m, "ds", "v2.lock", c1, "", NULL, tag2), KILN_EINVALID);
	assert_int_equal(kiln_manifest_tag(m, "ds", "../x", c1, "", NULL, tag2), KILN_EINVALID);
	assert_int_equal(kiln_manifest_tag(m, "ds", "v2", "abc", "", NULL, tag2), KILN_EINVALID);
	assert_int_equal(
	    kiln_manifest_tag(m, "ds", "v2", "0123456789012345678901234567890123456789", "", NULL, tag2),
	    KILN_ENOTFOUND);
	assert_int_equal(
	    kiln_manifest_tag(m, "ds", "v2", c1, "x\n-----BEGIN PGP SIGNATURE-----\n", &key, tag2),
	    KILN_EINVALID);
	assert_int_equal(kiln_manifest_tag(m, "ds", "v2", c1, "-----BEGIN SSH SIGNATURE-----", &key, tag2),
	                 KILN_EINVALID);

	/* stock git agrees */
	if (have_tools()) {
		kiln_buf line = KILN_BUF_INIT(0), allowed = KILN_BUF_INIT(0);
		char args[128];

		assert_int_equal(kiln_signing_key_public_line(&key, &line), 0);
		kiln_buf_putc(&line, '\0');
		kiln_buf_printf(&allowed, "test@kiln namespaces=\"git\" %s\n", line.ptr);
		kiln_buf_putc(&allowed, '\0');
		kiln_test_write_file(path_in_tmp("allowed"), allowed.ptr, 0644);
		snprintf(args, sizeof(args), "verify-commit %s", c2);
		assert_int_equal(git_in(repo, args), 0);
		assert_int_equal(git_in(repo, "verify-tag ds/v1"), 0);
		snprintf(args, sizeof(args), "verify-commit %s", c1);
		assert_int_not_equal(git_in(repo, args), 0);
		assert_int_not_equal(git_in(repo, "verify-tag ds/v0"), 0);
		assert_int_equal(git_in(repo, "fsck --strict --no-dangling"), 0);

		/* another key in the allowed-signers file: refused */
		kiln_buf_reset(&line);
		assert_int_equal(kiln_signing_key_public_line(&other, &line), 0);
		kiln_buf_putc(&line, '\0');
		kiln_buf_reset(&allowed);
		kiln_buf_printf(&allowed, "test@kiln namespaces=\"git\" %s\n", line.ptr);
		kiln_buf_putc(&allowed, '\0');
		kiln_test_write_file(path_in_tmp("allowed"), allowed.ptr, 0644);
		snprintf(args, sizeof(args), "verify-commit %s", c2);
		assert_int_not_equal(git_in(repo, args), 0);
		assert_int_not_equal(git_in(repo, "verify-tag ds/v1"), 0);
		kiln_buf_free(&line);
		kiln_buf_free(&allowed);
	} else {
		print_message("skipped the stock git checks: git or ssh-keygen is not installed\n");
	}

	git_buf_dispose(&sig);
	git_buf_dispose(&data);
	git_repository_free(repo_handle);
	kiln_manifest_close(m);
	kiln_signing_key_wipe(&key);
	kiln_signing_key_wipe(&other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_same_bytes_as_ssh_keygen),
	    cmocka_unit_test(test_verifies_ssh_keygen_signature),
	    cmocka_unit_test(test_roundtrip),
	    cmocka_unit_test(test_tampering_rejected),
	    cmocka_unit_test(test_armour_layout),
	    cmocka_unit_test(test_generate_load_roundtrip),
	    cmocka_unit_test(test_key_file_mode_refused),
	    cmocka_unit_test(test_key_file_fifo_refused),
	    cmocka_unit_test(test_key_file_format),
	    cmocka_unit_test(test_signed_commit_and_tag),
	};

	return kiln_test_git_main(tests, tmpdir, "sshsig", NULL, NULL);
}
