/* `kiln verify DATASET@REF [--deep]`: checks that a tag version's tag object
 * carries the version's name, the version's SSH signature (the tag's for a
 * promoted version, else the commit's) against trusted keys or, without
 * them, that a version the repository's kiln.signed requires signed is,
 * the consistency of its tree (shard lines in the right fan-out file and
 * order, stats.json agreeing with the shards listed), and with --deep that
 * every shard in the store still hashes to its name. Names what is wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/error.h"
#include "manifest/manifest.h"
#include "manifest/verify.h"
#include "manifest/version.h"
#include "store/store.h"

static const char usage_text[] =
    "usage: kiln verify DATASET@REF [--deep] [--allowed-signers FILE | --public-key FILE]\n"
    "                   [--manifest REPO] [--store URL]\n"
    "\n"
    "Checks the version's signature (the tag's for DATASET@vN, else the\n"
    "commit's) against the trusted keys, the consistency of its tree, and with\n"
    "--deep that every shard in the store hashes to its name and size.\n"
    "\n"
    "Options:\n"
    "      --allowed-signers FILE  trusted keys, git's allowed-signers format\n"
    "      --public-key FILE       a trusted key, ssh-ed25519 public key line\n"
    "      --deep                  also read every shard from the store\n"
    "  -m, --manifest REPO         manifest repository (default $KILN_MANIFEST)\n"
    "  -s, --store URL             object store for --deep (default $KILN_STORE)\n"
    "  -h, --help                  show this help\n"
    "\n"
    "For DATASET@vN the tag object must be named DATASET/vN. Without trusted\n"
    "keys the signature is reported, not checked, and an unsigned version fails\n"
    "only where the repository's kiln.signed requires it (docs/RELEASES.md).\n"
    "Exit status:\n"
    "0 verified, 1 a check failed (named on stderr), 2 usage or access error.\n";

typedef struct verify_opts {
	const char *manifest_path, *store_url, *spec;
	bool deep;
	kiln_verify_keys keys;
} verify_opts;

/* --allowed-signers FILE, --public-key FILE into the kiln_verify_keys at out. */
static int load_keys(const char *cmd, const char *arg, void *out)
{
	if (kiln_verify_keys_load(out, arg) < 0)
		return kiln_cli_fail(cmd, "%s", kiln_error_last());
	return 0;
}

/* -1 to go on, else the exit status. */
static int parse_options(verify_opts *o, int argc, char **argv)
{
	const kiln_cli_option rows[] = {
	    {.name = "deep", .kind = KILN_CLI_FLAG, .out = &o->deep},
	    {.name = "allowed-signers", .kind = KILN_CLI_CUSTOM, .out = &o->keys, .parse = load_keys},
	    {.name = "public-key", .kind = KILN_CLI_CUSTOM, .out = &o->keys, .parse = load_keys},
	    KILN_CLI_MANIFEST_ROW(&o->manifest_path),
	    {.name = "store", .letter = 's', .kind = KILN_CLI_STORE, .out = &o->store_url},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "verify",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one DATASET@REF (see kiln verify --help)",
	};
	int first, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	if (!o->manifest_path || !*o->manifest_path)
		return kiln_cli_fail("verify", "no manifest repository: use --manifest or set KILN_MANIFEST");
	if (o->deep && (!o->store_url || !*o->store_url))
		return kiln_cli_fail("verify", "--deep needs the store: use --store or set KILN_STORE");
	o->spec = argv[first];
	return KILN_CLI_GO_ON;
}

static void print_problem(void *ctx, const char *problem)
{
	(void)ctx;
	fprintf(stderr, "kiln verify: %s\n", problem);
}

/* The signature line, when the signature was no problem. */
static void print_signature(const verify_opts *o, const kiln_version *v, const kiln_verify_result *r)
{
	if (!r->name_ok || !r->sig_ok)
		return;
	if (r->sig.state == KILN_VERIFY_SIG_NONE)
		printf("signature: none (%s is unsigned)\n", v->ref[0] ? v->ref : v->commit);
	else
		printf("signature: good, ssh-ed25519 %s%s\n", r->sig.fingerprint,
		       o->keys.count ? " (trusted)" : " (no trusted keys given: not checked against any)");
}

int kiln_cmd_verify(int argc, char **argv)
{
	verify_opts o = {0};
	kiln_manifest *m = NULL;
	kiln_store *store = NULL;
	kiln_version v;
	kiln_verify_result r;
	int status;

	if ((status = parse_options(&o, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (kiln_manifest_open(&m, o.manifest_path) < 0 || kiln_version_lookup(m, o.spec, &v) < 0 ||
	    (o.deep && kiln_store_open(&store, o.store_url, NULL) < 0) ||
	    kiln_verify_version(&r, m, &v, o.spec, &o.keys, store, print_problem, NULL) < 0) {
		kiln_cli_fail("verify", "%s", kiln_error_last());
		goto cleanup;
	}
	print_signature(&o, &v, &r);
	if (!r.problems) {
		printf("tree: consistent (%s, commit %.12s)\n", v.ref[0] ? v.ref : "commit", v.commit);
		if (o.deep)
			printf("store: %llu shards verified\n", (unsigned long long)r.shards_ok);
		status = KILN_EXIT_OK;
	} else {
		status = KILN_EXIT_INVALID;
	}
cleanup:
	kiln_store_close(store);
	kiln_manifest_close(m);
	return status;
}
