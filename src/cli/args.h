/* One option and usage harness for every kiln command: a command declares its
 * options as rows of a kiln_cli_spec (long name, short letter, kind,
 * destination) and the number of arguments it takes; kiln_cli_parse runs
 * getopt_long, answers -h/--help and unknown options with the usage text,
 * parses and range-checks values, applies the $KILN_MANIFEST and $KILN_STORE
 * defaults and checks the argument count. */
#ifndef KILN_CLI_ARGS_H
#define KILN_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* kiln_cli_parse's answer when the command goes on. */
#define KILN_CLI_GO_ON (-1)

/* The most rows one command declares (not counting --help). */
#define KILN_CLI_MAX_OPTIONS 16

typedef enum kiln_cli_kind {
	KILN_CLI_FLAG,     /* bool *out, set true; no argument */
	KILN_CLI_STRING,   /* const char **out, the argument */
	KILN_CLI_COUNT,    /* size_t *out, a positive decimal number; `bad` names it */
	KILN_CLI_U64,      /* uint64_t *out, digits only, min..max; `bad` names it */
	KILN_CLI_SETS,     /* kiln_cli_sets *out: every KEY=VALUE of a repeated --set */
	KILN_CLI_MANIFEST, /* const char **out, default $KILN_MANIFEST */
	KILN_CLI_STORE,    /* const char **out, default $KILN_STORE */
	KILN_CLI_CUSTOM,   /* `parse` reads the argument into out */
} kiln_cli_kind;

/* The repeated --set KEY=VALUE arguments, in order: v is argv-sized, NULL
 * terminated and the caller's to free() once kiln_cli_parse went on. */
typedef struct kiln_cli_sets {
	char **v;
	size_t n;
} kiln_cli_sets;

/* Reads one option's argument into out: 0, or the exit status with the
 * one-line message printed ("kiln CMD: ..."). */
typedef int (*kiln_cli_parse_fn)(const char *cmd, const char *arg, void *out);

typedef struct kiln_cli_option {
	const char *name;        /* the long name; NULL ends the rows */
	char letter;             /* the short option, 0 when there is none */
	kiln_cli_kind kind;      /* what the argument is */
	void *out;               /* where it goes (see the kinds) */
	bool *seen;              /* when not NULL, set true when the option is given */
	const char *bad;         /* COUNT, U64: "-n wants a positive number" (", not 'ARG'" follows) */
	uint64_t min, max;       /* U64: the range */
	kiln_cli_parse_fn parse; /* CUSTOM: the reader (required_argument) */
	bool custom_flag;        /* CUSTOM: no argument; parse gets NULL */
} kiln_cli_option;

/* The row that ends a table, and the -m, --manifest REPO row every manifest
 * command has. */
#define KILN_CLI_END ((kiln_cli_option){.name = NULL})
#define KILN_CLI_MANIFEST_ROW(dst)                                                                           \
	((kiln_cli_option){.name = "manifest", .letter = 'm', .kind = KILN_CLI_MANIFEST, .out = (dst)})

typedef struct kiln_cli_spec {
	const char *cmd;             /* "log", "cache serve": the name messages start with */
	const char *usage;           /* printed for --help (stdout) and a bad option (stderr) */
	const kiln_cli_option *rows; /* ended by KILN_CLI_END */
	int min_args, max_args;      /* arguments after the options; max_args -1: any number */
	/* the message for a wrong argument count; NULL: "unexpected argument 'ARG'
	 * (see kiln CMD --help)" for one too many */
	const char *args_error;
} kiln_cli_spec;

/* Parses argv[1..argc) against spec (optind starts again at 1). Returns
 * KILN_CLI_GO_ON with *out_first (when out_first is not NULL) the index of
 * the first argument left in argv, or the exit status to return (usage or message printed, any --set
 * list freed). */
int kiln_cli_parse(int *out_first, const kiln_cli_spec *spec, int argc, char **argv);

/* 0 when repo names a manifest repository, else KILN_EXIT_USAGE with "no
 * manifest repository: give --manifest REPO or set KILN_MANIFEST" printed. */
int kiln_cli_need_manifest(const char *cmd, const char *repo);

/* The name among names[0..n) closest to typed (the first n bytes of it,
 * compared as an optimal-string-alignment edit distance), when it is close
 * enough to be a typo (at most 1 edit for names up to 4 characters, 2 up
 * to 8, else 3); NULL otherwise. For "did you mean". */
const char *kiln_cli_closest(const char *typed, size_t len, const char *const *names, size_t n);

/* 0 when url names a store, else KILN_EXIT_USAGE with "no store: give
 * --store URL or set KILN_STORE" printed. */
int kiln_cli_need_store(const char *cmd, const char *url);

#endif
