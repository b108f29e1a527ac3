/* The option and usage harness of every kiln command (see args.h): builds
 * getopt_long's tables from a command's rows, reads each option into its
 * destination and checks the argument count. Owns nothing after it returns
 * but a --set list it hands on. */
#include "cli/args.h"

#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/units.h"

/* Rows without a short letter answer getopt_long with OPT_ROW + their index. */
#define OPT_ROW 256

/* log's -n: a positive decimal number (leading blanks and '+' as strtoull
 * reads them), at most SIZE_MAX. */
static int parse_count(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!s || !*s || *s == '-')
		return -1;
	v = strtoull(s, &end, 10);
	if (errno || *end || v == 0 || v > SIZE_MAX)
		return -1;
	*out = (size_t)v;
	return 0;
}

#define TYPO_NAME_MAX 64

/* Optimal string alignment distance (insert, delete, replace, swap of two
 * neighbours) of a[0..la) and b[0..lb), both at most TYPO_NAME_MAX. */
static size_t osa_distance(const char *a, size_t la, const char *b, size_t lb)
{
	size_t d[TYPO_NAME_MAX + 1][TYPO_NAME_MAX + 1];

	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = a[i - 1] != b[j - 1], v = d[i - 1][j - 1] + cost;

			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[la][lb];
}

const char *kiln_cli_closest(const char *typed, size_t len, const char *const *names, size_t n)
{
	const char *best = NULL;
	size_t best_d = SIZE_MAX;

	if (len == 0 || len > TYPO_NAME_MAX)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		size_t lb = strlen(names[i]), d, limit = lb <= 4 ? 1 : lb <= 8 ? 2 : 3;

		if (lb > TYPO_NAME_MAX)
			continue;
		d = osa_distance(typed, len, names[i], lb);
		if (d <= limit && d < best_d) {
			best = names[i];
			best_d = d;
		}
	}
	return best;
}

/* One line for an option getopt_long refused (opt '?': unknown or
 * ambiguous; ':': its value missing), with the closest option's name. */
static int bad_option(const kiln_cli_spec *spec, char **argv, int opt)
{
	const char *names[KILN_CLI_MAX_OPTIONS + 1], *token = argv[optind - 1], *near;
	size_t n = 0, len;

	if (optopt > 0 && optopt < 128 && (token[0] != '-' || token[1] != '-')) {
		if (opt == ':')
			return kiln_cli_fail(spec->cmd, "option -%c needs a value (see kiln %s --help)",
			                     optopt, spec->cmd);
		return kiln_cli_fail(spec->cmd, "unknown option -%c (see kiln %s --help)", optopt, spec->cmd);
	}
	if (opt == ':')
		return kiln_cli_fail(spec->cmd, "option %s needs a value (see kiln %s --help)", token,
		                     spec->cmd);
	for (const kiln_cli_option *r = spec->rows; r && r->name; r++)
		names[n++] = r->name;
	names[n++] = "help";
	token += strspn(token, "-");
	len = strcspn(token, "=");
	if ((near = kiln_cli_closest(token, len, names, n)))
		return kiln_cli_fail(spec->cmd,
		                     "unknown option --%.*s; did you mean --%s? (see kiln %s --help)",
		                     (int)len, token, near, spec->cmd);
	return kiln_cli_fail(spec->cmd, "unknown option --%.*s (see kiln %s --help)", (int)len, token,
	                     spec->cmd);
}

/* getopt_long's long options and short option string for spec's rows, with
 * -h, --help; the string starts with ':' (getopt_long prints nothing, it
 * answers ':' for a missing value). */
static void build_tables(const kiln_cli_spec *spec, struct option *longs, char *shorts)
{
	int n = 0;
	char *s = shorts;

	*s++ = ':';
	for (const kiln_cli_option *r = spec->rows; r && r->name; r++, n++) {
		bool takes_arg = r->kind != KILN_CLI_FLAG && !(r->kind == KILN_CLI_CUSTOM && r->custom_flag);

		assert(n < KILN_CLI_MAX_OPTIONS);
		longs[n] = (struct option){r->name, takes_arg ? required_argument : no_argument, NULL,
		                           r->letter ? r->letter : OPT_ROW + n};
		if (r->letter) {
			*s++ = r->letter;
			if (takes_arg)
				*s++ = ':';
		}
	}
	longs[n] = (struct option){"help", no_argument, NULL, 'h'};
	longs[n + 1] = (struct option){NULL, 0, NULL, 0};
	*s++ = 'h';
	*s = '\0';
}

/* The defaults the rows take before any option is read: 0, or the exit
 * status (a --set list that could not be allocated). */
static int set_defaults(const kiln_cli_spec *spec, int argc)
{
	for (const kiln_cli_option *r = spec->rows; r && r->name; r++) {
		if (r->kind == KILN_CLI_MANIFEST)
			*(const char **)r->out = getenv("KILN_MANIFEST");
		else if (r->kind == KILN_CLI_STORE)
			*(const char **)r->out = getenv("KILN_STORE");
		else if (r->kind == KILN_CLI_SETS) {
			kiln_cli_sets *sets = r->out;

			sets->n = 0;
			if (!(sets->v = calloc((size_t)argc + 1, sizeof(*sets->v))))
				return kiln_cli_fail(spec->cmd, "out of memory");
		}
	}
	return 0;
}

static void free_sets(const kiln_cli_spec *spec)
{
	for (const kiln_cli_option *r = spec->rows; r && r->name; r++)
		if (r->kind == KILN_CLI_SETS) {
			kiln_cli_sets *sets = r->out;

			free(sets->v);
			sets->v = NULL;
			sets->n = 0;
		}
}

/* Reads one option's argument into its row's destination: 0, or the exit
 * status with the message printed. */
static int take(const char *cmd, const kiln_cli_option *r, char *arg)
{
	uint64_t v;

	if (r->seen)
		*r->seen = true;
	switch (r->kind) {
	case KILN_CLI_FLAG:
		*(bool *)r->out = true;
		return 0;
	case KILN_CLI_STRING:
	case KILN_CLI_MANIFEST:
	case KILN_CLI_STORE:
		*(const char **)r->out = arg;
		return 0;
	case KILN_CLI_COUNT:
		if (parse_count(arg, r->out) < 0)
			return kiln_cli_fail(cmd, "%s, not '%s'", r->bad, arg);
		return 0;
	case KILN_CLI_U64:
		if (kiln_parse_u64(arg, r->max, &v) < 0 || v < r->min)
			return kiln_cli_fail(cmd, "%s, not '%s'", r->bad, arg);
		*(uint64_t *)r->out = v;
		return 0;
	case KILN_CLI_SETS: {
		kiln_cli_sets *sets = r->out;

		sets->v[sets->n++] = arg;
		return 0;
	}
	case KILN_CLI_CUSTOM:
		return r->parse(cmd, arg, r->out);
	}
	return 0;
}

/* The row getopt_long answered opt for. */
static const kiln_cli_option *row_of(const kiln_cli_spec *spec, int opt)
{
	if (opt >= OPT_ROW)
		return &spec->rows[opt - OPT_ROW];
	for (const kiln_cli_option *r = spec->rows; r && r->name; r++)
		if (r->letter == opt)
			return r;
	return NULL;
}

int kiln_cli_parse(int *out_first, const kiln_cli_spec *spec, int argc, char **argv)
{
	struct option longs[KILN_CLI_MAX_OPTIONS + 2];
	char shorts[2 * KILN_CLI_MAX_OPTIONS + 3];
	const kiln_cli_option *r;
	int opt, n, status;

	build_tables(spec, longs, shorts);
	if ((status = set_defaults(spec, argc)) != 0)
		goto fail;
	optind = 1;
	while ((opt = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		if (opt == 'h') {
			fputs(spec->usage, stdout);
			status = KILN_EXIT_OK;
			goto fail;
		}
		if (opt == '?' || opt == ':') {
			status = bad_option(spec, argv, opt);
			goto fail;
		}
		if (!(r = row_of(spec, opt))) {
			fputs(spec->usage, stderr);
			status = KILN_EXIT_USAGE;
			goto fail;
		}
		if ((status = take(spec->cmd, r, optarg)) != 0)
			goto fail;
	}
	n = argc - optind;
	if (n < spec->min_args || (spec->max_args >= 0 && n > spec->max_args)) {
		if (spec->args_error)
			status = kiln_cli_fail(spec->cmd, "%s", spec->args_error);
		else
			status = kiln_cli_fail(spec->cmd, "unexpected argument '%s' (see kiln %s --help)",
			                       argv[optind + spec->max_args], spec->cmd);
		goto fail;
	}
	if (out_first)
		*out_first = optind;
	return KILN_CLI_GO_ON;
fail:
	free_sets(spec);
	return status;
}

int kiln_cli_need_manifest(const char *cmd, const char *repo)
{
	if (!repo || !*repo)
		return kiln_cli_fail(cmd,
		                     "no manifest repository: give --manifest REPO or set KILN_MANIFEST");
	return 0;
}

int kiln_cli_need_store(const char *cmd, const char *url)
{
	if (!url || !*url)
		return kiln_cli_fail(cmd, "no store: give --store URL or set KILN_STORE");
	return 0;
}
