/* `kiln contract SUBCOMMAND`: commands on data contract files. diff lists
 * every change between two versions of a contract and whether it breaks
 * readers of curated data (contract/compat.h; docs/QUALITY.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "contract/compat.h"
#include "contract/contract.h"
#include "core/buf.h"
#include "core/error.h"

static const char usage_text[] =
    "usage: kiln contract diff OLD NEW [--json] [--schema NAME]\n"
    "\n"
    "Commands on ODCS v3 data contracts (docs/CONTRACTS.md):\n"
    "  diff     every change from contract file OLD to NEW, field by field, each\n"
    "           classified for readers of curated data: breaking (a field removed,\n"
    "           a type changed, a rule tightened, pseudonymisation changed) or\n"
    "           compatible (a field added, a rule loosened, the version). One line\n"
    "           per change, then a summary:\n"
    "             breaking    device.os  type_changed  type string -> integer\n"
    "             1 change: 1 breaking, 0 compatible\n"
    "           The codes and why each breaks or not: docs/QUALITY.md.\n"
    "\n"
    "Options:\n"
    "      --json          one JSON document: {\"old\":{...},\"new\":{...},\n"
    "                      \"compatible\":BOOL,\"changes\":[{\"path\",\"code\",\n"
    "                      \"breaking\",\"message\"}...]}\n"
    "      --schema NAME   the schema object to compare in both (default: the first)\n"
    "  -h, --help          show this help\n"
    "\n"
    "Exit status: 0 every change compatible (or none), 1 at least one breaking\n"
    "change, 2 usage error or a contract that cannot be read (file:line:col).\n";

/* The path column: the contract's own keys have none. */
static const char *path_text(const kiln_contract_change *c)
{
	return *c->path ? c->path : "(contract)";
}

static void print_text(const kiln_contract *old_k, const kiln_contract *new_k, const kiln_contract_compat *d)
{
	int path_w = 0, code_w = 0;

	for (size_t i = 0; i < d->count; i++) {
		int p = (int)strlen(path_text(&d->changes[i])), c = (int)strlen(d->changes[i].code);
		path_w = p > path_w ? p : path_w;
		code_w = c > code_w ? c : code_w;
	}
	for (size_t i = 0; i < d->count; i++) {
		const kiln_contract_change *c = &d->changes[i];
		printf("%-10s  %-*s  %-*s  %s\n", c->breaking ? "breaking" : "compatible", path_w,
		       path_text(c), code_w, c->code, c->message);
	}
	printf("%zu change%s: %zu breaking, %zu compatible%s\n", d->count, d->count == 1 ? "" : "s",
	       d->breaking, d->count - d->breaking,
	       d->count == 0 && strcmp(old_k->digest_hex, new_k->digest_hex) != 0
	           ? " (the files differ only in what decides neither validation nor curation)"
	           : "");
}

static int put_side(kiln_buf *b, const char *key, const kiln_contract *k)
{
	int rc;

	if ((rc = kiln_buf_printf(b, "\"%s\":{\"file\":", key)) < 0 ||
	    (rc = kiln_buf_put_json_string(b, k->file, strlen(k->file))) < 0 ||
	    (rc = kiln_buf_puts(b, ",\"id\":")) < 0 ||
	    (rc = kiln_buf_put_json_string(b, k->id, strlen(k->id))) < 0 ||
	    (rc = kiln_buf_puts(b, ",\"version\":")) < 0 ||
	    (rc = kiln_buf_put_json_string(b, k->version, strlen(k->version))) < 0 ||
	    (rc = kiln_buf_puts(b, ",\"schema\":")) < 0 ||
	    (rc = kiln_buf_put_json_string(b, k->schema_name, strlen(k->schema_name))) < 0)
		return rc;
	return kiln_buf_printf(b, ",\"digest\":\"%s\"}", k->digest_hex);
}

/* One JSON document, a change per line. */
static int format_json(kiln_buf *b, const kiln_contract *old_k, const kiln_contract *new_k,
                       const kiln_contract_compat *d)
{
	int rc;

	if ((rc = kiln_buf_putc(b, '{')) < 0 || (rc = put_side(b, "old", old_k)) < 0 ||
	    (rc = kiln_buf_putc(b, ',')) < 0 || (rc = put_side(b, "new", new_k)) < 0 ||
	    (rc = kiln_buf_printf(b, ",\"compatible\":%s,\"changes\":[", d->breaking ? "false" : "true")) < 0)
		return rc;
	for (size_t i = 0; i < d->count; i++) {
		const kiln_contract_change *c = &d->changes[i];
		if ((rc = kiln_buf_puts(b, i ? ",\n{\"path\":" : "\n{\"path\":")) < 0 ||
		    (rc = kiln_buf_put_json_string(b, c->path, strlen(c->path))) < 0 ||
		    (rc = kiln_buf_printf(b, ",\"code\":\"%s\",\"breaking\":%s,\"message\":", c->code,
		                          c->breaking ? "true" : "false")) < 0 ||
		    (rc = kiln_buf_put_json_string(b, c->message, strlen(c->message))) < 0 ||
		    (rc = kiln_buf_putc(b, '}')) < 0)
			return rc;
	}
	return kiln_buf_puts(b, d->count ? "\n]}\n" : "]}\n");
}

static int contract_diff(int argc, char **argv)
{
	kiln_contract_options copts = {0};
	bool json = false;
	const kiln_cli_option rows[] = {
	    {.name = "json", .kind = KILN_CLI_FLAG, .out = &json},
	    {.name = "schema", .kind = KILN_CLI_STRING, .out = &copts.schema},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "contract diff",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 2,
	    .max_args = 2,
	    .args_error = "expected two contract files, OLD NEW (see kiln contract --help)",
	};
	kiln_contract *old_k = NULL, *new_k = NULL;
	kiln_contract_compat *d = NULL;
	kiln_buf out = KILN_BUF_INIT(0);
	int first, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (kiln_contract_load(&old_k, argv[first], &copts) < 0 ||
	    kiln_contract_load(&new_k, argv[first + 1], &copts) < 0 ||
	    kiln_contract_compat_diff(&d, old_k, new_k) < 0) {
		kiln_cli_fail("contract diff", "%s", kiln_error_last());
		goto cleanup;
	}
	if (json) {
		if (format_json(&out, old_k, new_k, d) < 0) {
			kiln_cli_fail("contract diff", "out of memory");
			goto cleanup;
		}
		fwrite(out.ptr, 1, out.len, stdout);
	} else {
		print_text(old_k, new_k, d);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("contract diff", "writing output: %s", strerror(errno));
		goto cleanup;
	}
	status = d->breaking ? KILN_EXIT_INVALID : KILN_EXIT_OK;
cleanup:
	kiln_buf_free(&out);
	kiln_contract_compat_free(d);
	kiln_contract_free(new_k);
	kiln_contract_free(old_k);
	return status;
}

int kiln_cmd_contract(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? KILN_EXIT_USAGE : KILN_EXIT_OK;
	}
	if (strcmp(argv[1], "diff") == 0)
		return contract_diff(argc - 1, argv + 1);
	return kiln_cli_fail("contract", "unknown subcommand '%s' (diff; see kiln contract --help)", argv[1]);
}
