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
#include "cli/json_out.h"
#include "core/buf.h"
#include "core/error.h"
#include "manifest/manifest.h"
#include "manifest/verify.h"
#include "manifest/version.h"
#include "store/store.h"

static const char usage_text[] =
    "usage: kiln verify DATASET@REF [--deep] [--allowed-signers FILE | --public-key FILE]\n"
    "                   [--require-trusted] [--manifest REPO] [--store URL] [--json]\n"
    "\n"
    "Checks the version's signature (the tag's for DATASET@vN, else the\n"
    "commit's) against the trusted keys, the consistency of its tree, and with\n"
    "--deep that every shard in the store hashes to its name and size.\n"
    "\n"
    "Options:\n"
    "      --allowed-signers FILE  trusted keys, git's allowed-signers format\n"
    "      --public-key FILE       a trusted key, ssh-ed25519 public key line\n"
    "      --require-trusted       fail unless a trusted key signed the version\n"
    "      --deep                  also read every shard from the store\n"
    "  -m, --manifest REPO         manifest repository (default $KILN_MANIFEST)\n"
    "  -s, --store URL             object store for --deep (default $KILN_STORE)\n"
    "  -j, --json                  the verdict as one JSON document on stdout\n"
    "  -h, --help                  show this help\n"
    "\n"
    "For DATASET@vN the tag object must be named DATASET/vN. Without trusted\n"
    "keys the signature is reported as \"not checked against any key\", and an\n"
    "unsigned version fails only where the repository's kiln.signed requires it\n"
    "(docs/RELEASES.md); with --require-trusted both are failed checks.\n"
    "With --json, stdout gets one JSON document: the version (dataset, ref,\n"
    "commit, tag, time), \"verified\", \"signature\", \"deep\", \"shards_verified\"\n"
    "and \"problems\" (each problem's line, also printed on stderr as without\n"
    "--json); the exit status is the same (docs/JSON.md).\n"
    "Exit status:\n"
    "0 verified, 1 a check failed (named on stderr), 2 usage or access error.\n";

typedef struct verify_opts {
	const char *manifest_path, *store_url, *spec;
	bool deep, json, require_trusted;
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
	    {.name = "require-trusted", .kind = KILN_CLI_FLAG, .out = &o->require_trusted},
	    KILN_CLI_MANIFEST_ROW(&o->manifest_path),
	    {.name = "store", .letter = 's', .kind = KILN_CLI_STORE, .out = &o->store_url},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &o->json},
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

/* The problems as JSON array items, for --json. */
typedef struct problems {
	kiln_buf items;
	int rc; /* the first append that failed, else 0 */
} problems;

static void print_problem(void *ctx, const char *problem)
{
	problems *p = ctx;

	fprintf(stderr, "kiln verify: %s\n", problem);
	if (p && p->rc == 0) {
		p->rc |= kiln_buf_puts(&p->items, p->items.len ? ",\n" : "\n");
		p->rc |= kiln_cli_json_string(&p->items, problem);
	}
}

static const char *sig_state(kiln_verify_sig_state s)
{
	return s == KILN_VERIFY_SIG_GOOD ? "good" : s == KILN_VERIFY_SIG_TAMPERED ? "tampered" : "none";
}

/* The verdict as one JSON document. */
static int print_json(const verify_opts *o, const kiln_version *v, const kiln_verify_result *r, problems *p)
{
	kiln_buf b = KILN_BUF_INIT(0);
	int rc = p->rc | kiln_buf_putc(&b, '{');

	rc |= kiln_cli_json_version(&b, v);
	rc |= kiln_buf_printf(&b, ",\"verified\":%s,\"name_ok\":%s,\"signature\":",
	                      r->problems ? "false" : "true", r->name_ok ? "true" : "false");
	if (!r->name_ok) {
		rc |= kiln_buf_puts(&b, "null");
	} else {
		rc |= kiln_buf_printf(&b, "{\"state\":\"%s\",\"fingerprint\":", sig_state(r->sig.state));
		rc |= kiln_cli_json_string_or_null(
		    &b, r->sig.state == KILN_VERIFY_SIG_GOOD ? r->sig.fingerprint : NULL);
		rc |= kiln_buf_printf(&b, ",\"trusted\":%s,\"keys_given\":%s,\"ok\":%s}",
		                      r->sig.trusted ? "true" : "false", o->keys.count ? "true" : "false",
		                      r->sig_ok ? "true" : "false");
	}
	rc |= kiln_buf_printf(&b, ",\"must_be_signed\":%s,\"deep\":%s,\"shards_verified\":",
	                      r->must_be_signed ? "true" : "false", o->deep ? "true" : "false");
	if (o->deep)
		rc |= kiln_buf_printf(&b, "%llu", (unsigned long long)r->shards_ok);
	else
		rc |= kiln_buf_puts(&b, "null");
	rc |= kiln_buf_puts(&b, ",\"problems\":[");
	rc |= kiln_buf_put(&b, p->items.ptr, p->items.len);
	rc |= kiln_buf_puts(&b, p->items.len ? "\n]}\n" : "]}\n");
	rc = kiln_cli_write_buf("verify", &b, rc);
	kiln_buf_free(&b);
	return rc;
}

/* The signature line, when the signature was no problem. */
static void print_signature(const verify_opts *o, const kiln_version *v, const kiln_verify_result *r)
{
	if (!r->name_ok || !r->sig_ok)
		return;
	if (r->sig.state == KILN_VERIFY_SIG_NONE)
		printf("signature: none (%s is unsigned)\n", v->ref[0] ? v->ref : v->commit);
	else if (o->keys.count)
		printf("signature: good, ssh-ed25519 %s (trusted)\n", r->sig.fingerprint);
	else
		printf("signature: not checked against any key (signed by ssh-ed25519 %s; give "
		       "--allowed-signers or --public-key to check it)\n",
		       r->sig.fingerprint);
}

/* --require-trusted: a version no trusted key signed is a failed check. */
static void require_trusted(const verify_opts *o, kiln_verify_result *r, problems *p)
{
	if (!o->require_trusted || !r->name_ok || !r->sig_ok)
		return; /* off, or the signature is a problem already */
	if (r->sig.state == KILN_VERIFY_SIG_NONE)
		print_problem(p, "--require-trusted: the version is unsigned");
	else if (!o->keys.count)
		print_problem(p, "--require-trusted: no trusted keys given (--allowed-signers or "
		                 "--public-key): the signature is not checked against any key");
	else if (!r->sig.trusted)
		print_problem(p, "--require-trusted: the signature is not by a trusted key");
	else
		return;
	r->sig_ok = false;
	r->problems++;
}

int kiln_cmd_verify(int argc, char **argv)
{
	verify_opts o = {0};
	kiln_manifest *m = NULL;
	kiln_store *store = NULL;
	kiln_version v;
	kiln_verify_result r;
	problems p = {.items = KILN_BUF_INIT(0)};
	int status;

	if ((status = parse_options(&o, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (kiln_manifest_open(&m, o.manifest_path) < 0 || kiln_version_lookup(m, o.spec, &v) < 0 ||
	    (o.deep && kiln_store_open(&store, o.store_url, NULL) < 0) ||
	    kiln_verify_version(&r, m, &v, o.spec, &o.keys, store, print_problem, &p) < 0) {
		kiln_cli_fail("verify", "%s", kiln_error_last());
		goto cleanup;
	}
	require_trusted(&o, &r, &p);
	if (o.json) {
		if (print_json(&o, &v, &r, &p) != 0)
			goto cleanup;
	} else {
		print_signature(&o, &v, &r);
		if (!r.problems)
			printf("tree: consistent (%s, commit %.12s)\n", v.ref[0] ? v.ref : "commit",
			       v.commit);
		if (!r.problems && o.deep)
			printf("store: %llu shards verified\n", (unsigned long long)r.shards_ok);
	}
	status = r.problems ? KILN_EXIT_INVALID : KILN_EXIT_OK;
	if (fflush(stdout) != 0 || ferror(stdout))
		status = kiln_cli_fail("verify", "stdout: write error");
cleanup:
	kiln_buf_free(&p.items);
	kiln_store_close(store);
	kiln_manifest_close(m);
	return status;
}
