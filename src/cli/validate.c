/* `kiln validate`: checks JSON Lines files (or stdin) against a data
 * contract and reports each violation by line, column, code and field path,
 * never by value. Exit 0: all valid; 1: some invalid; 2: usage or config. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/progress.h"
#include "contract/contract.h"
#include "contract/validate.h"
#include "core/error.h"
#include "core/line_reader.h"
#include "core/units.h"

static const char usage_text[] =
    "usage: kiln validate --contract FILE [options] [FILE...]\n"
    "\n"
    "Checks JSON Lines records (one JSON object per line) against an ODCS v3\n"
    "data contract. Reads stdin when no FILE is given (or FILE is -).\n"
    "\n"
    "Options:\n"
    "  -c, --contract FILE        the ODCS contract (YAML) to check against\n"
    "      --schema NAME          schema object to use (default: the first)\n"
    "  -f, --format text|json     output: one line per violation as text\n"
    "                             (FILE:LINE:COL: CODE PATH) or JSON objects;\n"
    "                             the summary goes to stderr (text) or is the\n"
    "                             last JSON line (json)\n"
    "      --unknown-fields reject|allow\n"
    "                             record fields the contract does not list\n"
    "                             (default: the contract's unknownFields, else reject)\n"
    "      --max-depth N          deepest nesting accepted (default 128)\n"
    "      --max-record-bytes N   largest record accepted, e.g. 1M (default 1M)\n"
    "  -q, --quiet                print only the summary\n"
    "  -h, --help                 show this help\n"
    "\n"
    "Codes: json_syntax invalid_utf8 duplicate_key too_deep too_large not_object\n"
    "       missing_required type pattern range length enum format unknown_field\n"
    "\n"
    "Exit status: 0 all records valid, 1 some invalid, 2 usage, contract or I/O error.\n";

typedef struct run_state {
	kiln_validator *validator;
	bool json;
	bool quiet;
	uint64_t records, valid, invalid;
	uint64_t by_code[KILN_REJECT_COUNT_];
	uint64_t unlisted; /* violations beyond KILN_VIOLATIONS_MAX per record */
} run_state;

/* JSON string body for a file name or a path (both are ours, not record values). */
static void put_json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static void print_report(run_state *st, const char *name, uint64_t line, const kiln_report *r)
{
	for (size_t i = 0; i < r->kept; i++) {
		const kiln_violation *x = &r->v[i];
		if (st->json) {
			fputs("{\"file\":", stdout);
			put_json_string(stdout, name);
			printf(",\"line\":%llu,\"column\":%zu,\"code\":\"%s\",\"path\":",
			       (unsigned long long)line, x->offset + 1, kiln_reject_name(x->code));
			put_json_string(stdout, x->path);
			fputs("}\n", stdout);
		} else {
			printf("%s:%llu:%zu: %s %s\n", name, (unsigned long long)line, x->offset + 1,
			       kiln_reject_name(x->code), x->path);
		}
	}
	if (r->count > r->kept) {
		if (st->json) {
			fputs("{\"file\":", stdout);
			put_json_string(stdout, name);
			printf(",\"line\":%llu,\"more\":%zu}\n", (unsigned long long)line,
			       r->count - r->kept);
		} else {
			printf("%s:%llu: ... %zu more violations\n", name, (unsigned long long)line,
			       r->count - r->kept);
		}
	}
}

static int validate_fd(run_state *st, int fd, const char *name, size_t max_record)
{
	kiln_line_reader *reader;
	kiln_line line;
	kiln_report report;
	kiln_cli_rate rate = {.tty = isatty(STDERR_FILENO) == 1};
	struct stat sb;
	uint64_t size = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0, read = 0;
	char label[160];
	int rc;

	snprintf(label, sizeof(label), "kiln validate: %s", name);
	if ((rc = kiln_line_reader_new(&reader, fd, max_record)) < 0)
		return rc;
	while ((rc = kiln_line_reader_next(reader, &line)) > 0) {
		st->records++;
		read = line.offset_end;
		if ((st->records & 4095) == 0)
			kiln_cli_rate_draw(&rate, read, size, st->records, label);
		if (line.too_long)
			kiln_report_single(&report, KILN_REJECT_TOO_LARGE, max_record);
		else
			kiln_validate(st->validator, line.ptr, line.len, &report);
		if (report.count == 0) {
			st->valid++;
			continue;
		}
		st->invalid++;
		for (size_t i = 0; i < report.kept; i++)
			st->by_code[report.v[i].code]++;
		st->unlisted += report.count - report.kept;
		if (!st->quiet) {
			kiln_cli_rate_clear(&rate); /* the terminal may show stdout too */
			print_report(st, name, line.number, &report);
		}
	}
	kiln_line_reader_free(reader);
	kiln_cli_rate_clear(&rate);
	if (rc < 0)
		return kiln_error_set(rc, "%s: %s", name, kiln_error_last());
	return 0;
}

static void print_summary(const run_state *st)
{
	bool first = true;

	if (st->json) {
		printf("{\"summary\":{\"records\":%llu,\"valid\":%llu,\"invalid\":%llu,\"violations\":{",
		       (unsigned long long)st->records, (unsigned long long)st->valid,
		       (unsigned long long)st->invalid);
		for (int c = 1; c < KILN_REJECT_COUNT_; c++) {
			if (!st->by_code[c])
				continue;
			printf("%s\"%s\":%llu", first ? "" : ",", kiln_reject_name(c),
			       (unsigned long long)st->by_code[c]);
			first = false;
		}
		printf("}}}\n");
		return;
	}
	fflush(stdout); /* violations first, then the summary, also when both go to one pipe */
	fprintf(stderr, "kiln validate: %llu records, %llu valid, %llu invalid",
	        (unsigned long long)st->records, (unsigned long long)st->valid,
	        (unsigned long long)st->invalid);
	for (int c = 1; c < KILN_REJECT_COUNT_; c++) {
		if (!st->by_code[c])
			continue;
		fprintf(stderr, "%s%s %llu", first ? " (" : ", ", kiln_reject_name(c),
		        (unsigned long long)st->by_code[c]);
		first = false;
	}
	if (st->unlisted)
		fprintf(stderr, "%s%llu more not listed", first ? " (" : ", ",
		        (unsigned long long)st->unlisted);
	fprintf(stderr, "%s\n", first ? "" : ")");
}

/* --format text|json into the run_state at out. */
static int parse_format(const char *cmd, const char *arg, void *out)
{
	if (strcmp(arg, "json") == 0)
		((run_state *)out)->json = true;
	else if (strcmp(arg, "text") != 0)
		return kiln_cli_fail(cmd, "--format must be text or json");
	return 0;
}

/* --unknown-fields reject|allow into the kiln_validator_options at out. */
static int parse_unknown(const char *cmd, const char *arg, void *out)
{
	kiln_validator_options *vopts = out;

	if (strcmp(arg, "reject") == 0)
		vopts->unknown_fields = KILN_UNKNOWN_REJECT;
	else if (strcmp(arg, "allow") == 0)
		vopts->unknown_fields = KILN_UNKNOWN_ALLOW;
	else
		return kiln_cli_fail(cmd, "--unknown-fields must be reject or allow");
	return 0;
}

/* --max-depth N into the kiln_validator_options at out. */
static int parse_max_depth(const char *cmd, const char *arg, void *out)
{
	long long n = kiln_parse_size(arg);

	if (n < 1 || n > 100000)
		return kiln_cli_fail(cmd, "--max-depth must be between 1 and 100000");
	((kiln_validator_options *)out)->limits.max_depth = (uint32_t)n;
	return 0;
}

/* --max-record-bytes SIZE into the kiln_validator_options at out. */
static int parse_max_bytes(const char *cmd, const char *arg, void *out)
{
	long long n = kiln_parse_size(arg);

	if (n < 2 || n > (1ll << 30))
		return kiln_cli_fail(cmd, "--max-record-bytes must be between 2 and 1G");
	((kiln_validator_options *)out)->limits.max_bytes = (size_t)n;
	return 0;
}

int kiln_cmd_validate(int argc, char **argv)
{
	const char *contract_path = NULL;
	kiln_contract_options copts = {0};
	kiln_validator_options vopts = {.unknown_fields = -1};
	run_state st = {0};
	const kiln_cli_option rows[] = {
	    {.name = "contract", .letter = 'c', .kind = KILN_CLI_STRING, .out = &contract_path},
	    {.name = "schema", .kind = KILN_CLI_STRING, .out = &copts.schema},
	    {.name = "format", .letter = 'f', .kind = KILN_CLI_CUSTOM, .out = &st, .parse = parse_format},
	    {.name = "unknown-fields", .kind = KILN_CLI_CUSTOM, .out = &vopts, .parse = parse_unknown},
	    {.name = "max-depth", .kind = KILN_CLI_CUSTOM, .out = &vopts, .parse = parse_max_depth},
	    {.name = "max-record-bytes", .kind = KILN_CLI_CUSTOM, .out = &vopts, .parse = parse_max_bytes},
	    {.name = "quiet", .letter = 'q', .kind = KILN_CLI_FLAG, .out = &st.quiet},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {.cmd = "validate", .usage = usage_text, .rows = rows, .max_args = -1};
	kiln_contract *contract = NULL;
	int first, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (!contract_path)
		return kiln_cli_fail("validate", "--contract is required (see kiln validate --help)");
	if (!vopts.limits.max_bytes)
		vopts.limits.max_bytes = 1u << 20;

	if (kiln_contract_load(&contract, contract_path, &copts) < 0) {
		fprintf(stderr, "kiln validate: %s\n", kiln_error_last());
		return KILN_EXIT_USAGE;
	}
	st.validator = kiln_validator_new(contract, &vopts);
	if (!st.validator) {
		kiln_cli_fail("validate", "out of memory");
		goto cleanup;
	}

	if (first == argc) {
		if (validate_fd(&st, STDIN_FILENO, "<stdin>", vopts.limits.max_bytes) < 0) {
			kiln_cli_fail("validate", "%s", kiln_error_last());
			goto cleanup;
		}
	}
	for (int i = first; i < argc; i++) {
		bool is_stdin = strcmp(argv[i], "-") == 0;
		int fd = is_stdin ? STDIN_FILENO : open(argv[i], O_RDONLY | O_CLOEXEC);
		int rc;

		if (fd < 0) {
			kiln_cli_fail("validate", "%s: cannot open: %s", argv[i], strerror(errno));
			goto cleanup;
		}
		rc = validate_fd(&st, fd, is_stdin ? "<stdin>" : argv[i], vopts.limits.max_bytes);
		if (!is_stdin)
			close(fd);
		if (rc < 0) {
			kiln_cli_fail("validate", "%s", kiln_error_last());
			goto cleanup;
		}
	}
	print_summary(&st);
	status = st.invalid ? KILN_EXIT_INVALID : KILN_EXIT_OK;
cleanup:
	if (fflush(stdout) != 0 && status != KILN_EXIT_USAGE)
		status = kiln_cli_fail("validate", "writing output: %s", strerror(errno));
	kiln_validator_free(st.validator);
	kiln_contract_free(contract);
	return status;
}
