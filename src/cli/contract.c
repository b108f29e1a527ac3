/* `kiln contract SUBCOMMAND`: commands on data contract files. diff lists
 * every change between two versions of a contract and whether it breaks
 * readers of curated data (contract/compat.h; docs/QUALITY.md); infer
 * writes a contract for sample records (contract/infer.h), with kiln's PII
 * detectors (mask/detect.h) handed to it. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "contract/compat.h"
#include "contract/contract.h"
#include "contract/avro.h"
#include "contract/infer.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/line_reader.h"
#include "mask/detect.h"

static const char usage_text[] =
    "usage: kiln contract diff OLD NEW [--json] [--schema NAME]\n"
    "       kiln contract infer SAMPLE [--pii auto|none] [--name NAME] [-o FILE] [--max-enum N]\n"
    "       kiln contract infer --avro SCHEMA.avsc [--name NAME] [-o FILE]\n"
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
    "  infer    an ODCS v3 contract for the records of SAMPLE (JSON Lines, - for\n"
    "           stdin), on stdout or in FILE: per field its type (nested objects\n"
    "           and array items included), required when present and not null in\n"
    "           every record, a format every value meets (uuid, date-time, date,\n"
    "           time, email, ipv4, ipv6, uri), an enum for a string of at most N\n"
    "           distinct values each seen twice; with --pii auto, classification:\n"
    "           pii where kiln's PII detectors match whole values or the name\n"
    "           identifies a person (user_id, email, ...) and piiScan where they\n"
    "           match inside a text. No value of such a field is ever written.\n"
    "           `kiln validate` accepts every record of SAMPLE against it.\n"
    "           With --avro: the contract for records of an Avro schema (records\n"
    "           to objects, enums to enum lists, logical types to formats,\n"
    "           decimals to numbers with multipleOf, [\"null\", T] optional),\n"
    "           as a Kafka pipeline with source.format: avro decodes them.\n"
    "\n"
    "Options:\n"
    "      --json          diff: one JSON document: {\"old\":{...},\"new\":{...},\n"
    "                      \"compatible\":BOOL,\"changes\":[{\"path\",\"code\",\n"
    "                      \"breaking\",\"message\"}...]}\n"
    "      --schema NAME   diff: the schema object to compare in both (default: the first)\n"
    "      --pii auto|none infer: suggest personal fields (default auto); none still\n"
    "                      keeps values the detectors flag out of enums\n"
    "      --name NAME     infer: the contract's id and schema name (default: from\n"
    "                      SAMPLE's file name); A-Z, a-z, 0-9, '.', '_', '-'\n"
    "  -o, --out FILE      infer: write the contract to FILE (never replaced)\n"
    "      --max-enum N    infer: most distinct values an enum lists (default 20)\n"
    "      --avro SCHEMA   infer: from an Avro schema file (.avsc) instead of records\n"
    "  -h, --help          show this help\n"
    "\n"
    "Exit status: diff: 0 every change compatible (or none), 1 at least one\n"
    "breaking change, 2 usage error or a contract that cannot be read\n"
    "(file:line:col). infer: 0 with the contract written, 2 on a usage error,\n"
    "an unreadable sample or a line that is not one JSON object (file:line:col;\n"
    "nothing written).\n";

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

/* kiln's free-text detectors as contract/infer.h wants them. */
typedef struct infer_detector {
	kiln_detector *detector;
	kiln_detect_match matches[2];
} infer_detector;

static int detect_pii(void *ctx, const char *s, size_t len)
{
	infer_detector *d = ctx;
	size_t n = kiln_detect(d->detector, s, len, d->matches, 2);

	/* a text the detectors could not finish is treated as holding personal data */
	if (n == SIZE_MAX)
		return KILN_INFER_DETECT_INSIDE;
	if (n == 0)
		return KILN_INFER_DETECT_NONE;
	return n == 1 && d->matches[0].start == 0 && d->matches[0].len == len ? KILN_INFER_DETECT_WHOLE
	                                                                      : KILN_INFER_DETECT_INSIDE;
}

/* The default contract name: SAMPLE's file name without its extensions,
 * lower-cased, other characters as '-'. */
static void name_from_path(char *out, size_t cap, const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n = 0;

	base = base ? base + 1 : path;
	for (; *base && *base != '.' && n + 1 < cap && n < 64; base++) {
		char c = *base;
		if (c >= 'A' && c <= 'Z')
			c = (char)(c + 32);
		out[n++] = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ? c : '-';
	}
	out[n] = '\0';
	if (n == 0 || strcmp(path, "-") == 0)
		snprintf(out, cap, "dataset");
}

/* infer --avro: the contract for an Avro schema file (contract/avro.h). */
/* An inferred contract to a new file (never over one that exists) or to
 * stdout; -1 after saying why. */
static int write_contract(const kiln_buf *out, const char *out_path)
{
	if (out_path) {
		if (kiln_fs_create_new(out_path, out->ptr, out->len, 0644, "the contract") < 0) {
			kiln_cli_fail("contract infer", "%s", kiln_error_last());
			return -1;
		}
		return 0;
	}
	fwrite(out->ptr, 1, out->len, stdout);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("contract infer", "writing output: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static int infer_from_avro(const char *schema_path, const char *name, const char *out_path)
{
	kiln_avro_schema *schema = NULL;
	kiln_buf out = KILN_BUF_INIT(0);
	char default_name[65];
	int status = KILN_EXIT_USAGE;

	if (!name) {
		name_from_path(default_name, sizeof(default_name), schema_path);
		name = default_name;
	}
	if (kiln_avro_schema_load_file(&schema, schema_path) < 0 ||
	    kiln_infer_avro(kiln_avro_schema_root(schema), name, &out) < 0) {
		kiln_cli_fail("contract infer", "%s", kiln_error_last());
		goto cleanup;
	}
	if (write_contract(&out, out_path) < 0)
		goto cleanup;
	if (out_path)
		fprintf(stderr, "kiln contract infer: %s: a contract for the Avro schema %s\n", out_path,
		        schema_path);
	status = KILN_EXIT_OK;
cleanup:
	kiln_buf_free(&out);
	kiln_avro_schema_free(schema);
	return status;
}

static int contract_infer(int argc, char **argv)
{
	const char *pii = "auto", *name = NULL, *out_path = NULL, *avro = NULL;
	uint64_t max_enum = 20;
	const kiln_cli_option rows[] = {
	    {.name = "pii", .kind = KILN_CLI_STRING, .out = &pii},
	    {.name = "avro", .kind = KILN_CLI_STRING, .out = &avro},
	    {.name = "name", .kind = KILN_CLI_STRING, .out = &name},
	    {.name = "out", .letter = 'o', .kind = KILN_CLI_STRING, .out = &out_path},
	    {.name = "max-enum",
	     .kind = KILN_CLI_U64,
	     .out = &max_enum,
	     .bad = "--max-enum wants a number from 0 to 1000",
	     .min = 0,
	     .max = 1000},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "contract infer",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 0,
	    .max_args = 1,
	    .args_error = "expected one sample file, SAMPLE (see kiln contract --help)",
	};
	infer_detector d = {0};
	kiln_infer *in = NULL;
	kiln_line_reader *reader = NULL;
	kiln_line line;
	kiln_buf out = KILN_BUF_INIT(0);
	char default_name[65];
	const char *sample;
	int first, fd = -1, rc, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (avro && first < argc)
		return kiln_cli_fail("contract infer", "--avro SCHEMA takes no sample file");
	if (avro)
		return infer_from_avro(avro, name, out_path);
	if (first >= argc)
		return kiln_cli_fail("contract infer",
		                     "expected one sample file, SAMPLE (see kiln contract --help)");
	sample = argv[first];
	if (strcmp(pii, "auto") != 0 && strcmp(pii, "none") != 0)
		return kiln_cli_fail("contract infer", "--pii is auto or none, not '%s'", pii);
	if (!name) {
		name_from_path(default_name, sizeof(default_name), sample);
		name = default_name;
	}
	if (kiln_detector_new(&d.detector) < 0 ||
	    kiln_infer_new(&in, &(kiln_infer_options){.name = name,
	                                              .classify_pii = strcmp(pii, "auto") == 0,
	                                              .detect = detect_pii,
	                                              .detect_ctx = &d,
	                                              .max_enum = (size_t)max_enum}) < 0) {
		kiln_cli_fail("contract infer", "%s", kiln_error_last());
		goto cleanup;
	}
	fd = strcmp(sample, "-") == 0 ? STDIN_FILENO : open(sample, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		kiln_cli_fail("contract infer", "%s: %s", sample, strerror(errno));
		goto cleanup;
	}
	if (kiln_line_reader_new(&reader, fd, 0) < 0) {
		kiln_cli_fail("contract infer", "%s", kiln_error_last());
		goto cleanup;
	}
	while ((rc = kiln_line_reader_next(reader, &line)) > 0) {
		if (line.too_long) {
			kiln_cli_fail("contract infer", "%s:%llu:1: too_large: a record longer than 1 MiB",
			              sample, (unsigned long long)line.number);
			goto cleanup;
		}
		if (kiln_infer_add(in, line.ptr, line.len, sample, line.number) < 0) {
			kiln_cli_fail("contract infer", "%s", kiln_error_last());
			goto cleanup;
		}
	}
	if (rc < 0) {
		kiln_cli_fail("contract infer", "%s: %s", sample, kiln_error_last());
		goto cleanup;
	}
	if (kiln_infer_render(in, &out) < 0) {
		kiln_cli_fail("contract infer", "%s: %s", sample, kiln_error_last());
		goto cleanup;
	}
	if (write_contract(&out, out_path) < 0)
		goto cleanup;
	if (out_path)
		fprintf(stderr,
		        "kiln contract infer: %s: a contract for %llu records of %s; check it with "
		        "kiln validate --contract %s %s\n",
		        out_path, (unsigned long long)kiln_infer_records(in), sample, out_path, sample);
	status = KILN_EXIT_OK;
cleanup:
	kiln_line_reader_free(reader);
	if (fd > STDIN_FILENO)
		close(fd);
	kiln_buf_free(&out);
	kiln_infer_free(in);
	kiln_detector_free(d.detector);
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
	if (strcmp(argv[1], "infer") == 0)
		return contract_infer(argc - 1, argv + 1);
	return kiln_cli_fail("contract", "unknown subcommand '%s' (diff, infer; see kiln contract --help)",
	                     argv[1]);
}
