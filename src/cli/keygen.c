/* `kiln keygen`: writes a fresh ed25519 signing key (kiln's private key
 * file, mode 0600) and its OpenSSH public key, and prints the
 * allowed-signers line that lets stock git check kiln's signatures; with
 * --hmac, the pseudonymisation key (mode 0600) and its key id. No key is
 * ever printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/buf.h"
#include "core/error.h"
#include "mask/key.h"
#include "manifest/sshsig.h"

#define DEFAULT_PATH    "kiln-signing.key"
#define DEFAULT_COMMENT "kiln@localhost"
#define DEFAULT_HMAC    "kiln-hmac.key"

static const char usage_text[] =
    "usage: kiln keygen [--out PATH] [--comment TEXT]\n"
    "       kiln keygen --hmac [--out PATH]\n"
    "\n"
    "Writes a new ed25519 signing key to PATH (default ./" DEFAULT_PATH ", mode\n"
    "0600, never overwritten) and its OpenSSH public key to PATH.pub, then prints\n"
    "the allowed-signers line for git. Sign a pipeline's commits with\n"
    "`manifest.signing_key: PATH` (docs/PIPELINES.md); the key file format is in\n"
    "docs/FORMATS.md.\n"
    "\n"
    "With --hmac, writes a new pseudonymisation key instead: 32 random bytes\n"
    "(libsodium) as 64 hex characters and a newline in PATH (default\n"
    "./" DEFAULT_HMAC ", mode 0600, never overwritten), the file a pipeline's\n"
    "`pseudonymise.key_file: PATH` reads, and prints its key id\n"
    "(hmac-sha256:<16 hex>), the name `kiln show` gives each version's key.\n"
    "\n"
    "Options:\n"
    "  -o, --out PATH        where to write the private key (PATH.pub: the public key)\n"
    "  -c, --comment TEXT    the key's principal (default " DEFAULT_COMMENT "): printable\n"
    "                        ASCII without space, '\"', ',' or '#'\n"
    "      --hmac            write a pseudonymisation (HMAC-SHA-256) key, not a signing key\n"
    "  -h, --help            show this help\n"
    "\n"
    "No key is printed, logged or passed on stdout. Exit status: 0 when the\n"
    "files were written, 2 otherwise (nothing is left behind).\n";

/* kiln keygen --hmac: the key file and its id. */
static int keygen_hmac(const char *path)
{
	kiln_key key;
	char *abs;

	if (kiln_key_generate_file(&key, path, 1) < 0)
		return kiln_cli_fail("keygen", "%s", kiln_error_last());
	abs = realpath(path, NULL);
	printf("pseudonymisation key: %s (mode 0600; keep it secret, never commit it)\n", path);
	printf("key id: %s\n", key.id);
	printf("\nUse it with `pseudonymise.key_file: %s` in a pipeline (docs/PIPELINES.md);\n",
	       abs ? abs : path);
	printf("each version records the key id (kiln show), never the key.\n");
	kiln_key_wipe(&key);
	free(abs);
	return KILN_EXIT_OK;
}

int kiln_cmd_keygen(int argc, char **argv)
{
	const char *path = NULL, *comment = DEFAULT_COMMENT;
	bool hmac = false, comment_seen = false;
	const kiln_cli_option rows[] = {
	    {.name = "out", .letter = 'o', .kind = KILN_CLI_STRING, .out = &path},
	    {.name = "comment",
	     .letter = 'c',
	     .kind = KILN_CLI_STRING,
	     .out = &comment,
	     .seen = &comment_seen},
	    {.name = "hmac", .kind = KILN_CLI_FLAG, .out = &hmac},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {.cmd = "keygen", .usage = usage_text, .rows = rows};
	kiln_signing_key key;
	kiln_buf pub_path = KILN_BUF_INIT(0), line = KILN_BUF_INIT(0);
	char *abs = NULL;
	int status;

	if ((status = kiln_cli_parse(NULL, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (!path)
		path = hmac ? DEFAULT_HMAC : DEFAULT_PATH;
	if (!*path)
		return kiln_cli_fail("keygen", "--out needs a path");
	if (hmac && comment_seen)
		return kiln_cli_fail("keygen",
		                     "--comment names a signing key's principal; an --hmac key has none");
	if (hmac)
		return keygen_hmac(path);
	if (kiln_buf_printf(&pub_path, "%s.pub", path) < 0) {
		kiln_cli_fail("keygen", "%s", kiln_error_last());
		goto cleanup;
	}
	if (kiln_signing_key_generate(path, pub_path.ptr, comment) < 0) {
		kiln_cli_fail("keygen", "%s", kiln_error_last());
		goto cleanup;
	}
	/* read back what was written: the printed line is the file's key
	 * (without its comment: the principal leads the line) */
	if (kiln_signing_key_load(&key, path) < 0) {
		kiln_cli_fail("keygen", "%s", kiln_error_last());
		goto cleanup;
	}
	key.comment[0] = '\0';
	if (kiln_signing_key_public_line(&key, &line) < 0 || kiln_buf_putc(&line, '\0') < 0) {
		kiln_signing_key_wipe(&key);
		kiln_cli_fail("keygen", "%s", kiln_error_last());
		goto cleanup;
	}
	kiln_signing_key_wipe(&key);
	printf("private key: %s (mode 0600; keep it secret, never commit it)\n", path);
	printf("public key:  %s\n", pub_path.ptr);
	printf("\nallowed-signers line (one per trusted key, in a file for gpg.ssh.allowedSignersFile):\n\n");
	printf("%s namespaces=\"git\" %s\n\n", comment, line.ptr);
	abs = realpath(path, NULL);
	printf("Sign a pipeline's commits with `manifest.signing_key: %s`\n", abs ? abs : path);
	printf("(or --set manifest.signing_key=PATH), then check them with stock git:\n\n");
	printf("  echo '%s namespaces=\"git\" %s' >>allowed_signers\n", comment, line.ptr);
	printf("  git --git-dir=REPO -c gpg.format=ssh -c gpg.ssh.allowedSignersFile=allowed_signers \\\n"
	       "      verify-commit COMMIT   # or verify-tag TAG\n");
	status = KILN_EXIT_OK;
cleanup:
	free(abs);
	kiln_buf_free(&pub_path);
	kiln_buf_free(&line);
	return status;
}
