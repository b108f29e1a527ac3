/* kiln's entry point: dispatches to one command per file (see cli.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/version.h"
#include "core/error.h"
#include "mask/key.h"

static const kiln_command commands[] = {
    {"init", "make a working project in a new folder: contract, pipelines, sample, key, README",
     kiln_cmd_init},
    {"validate", "check JSON Lines records against an ODCS data contract", kiln_cmd_validate},
    {"contract", "data contracts: infer one from sample records; which changes break readers",
     kiln_cmd_contract},
    {"run", "curate a source into a versioned dataset (validate, pseudonymise, split, shard, commit)",
     kiln_cmd_run},
    {"check", "find what `kiln run PIPELINE` would refuse, without running it", kiln_cmd_check},
    {"log", "list a dataset's versions", kiln_cmd_log},
    {"show", "describe one version: splits, shards, records, contract, key, lineage", kiln_cmd_show},
    {"diff", "shards added and removed between two versions", kiln_cmd_diff},
    {"profile", "a version's data profile: per field counts, distinct values, quantiles, categories",
     kiln_cmd_profile},
    {"report", "a version as one static HTML page: profile plots, drift, quarantine, gates, erasures",
     kiln_cmd_report},
    {"ls", "list a version's shards with their store URLs", kiln_cmd_ls},
    {"cat", "stream a version's records (by rank, shuffled by seed, verified)", kiln_cmd_cat},
    {"promote", "tag a version vN after its release gates pass (signed)", kiln_cmd_promote},
    {"verify", "check a version's signature and tree, and with --deep every shard", kiln_cmd_verify},
    {"branch", "create a dataset branch", kiln_cmd_branch},
    {"keygen",
     "write an ed25519 signing key and its allowed-signers line, or with --hmac a pseudonymisation key",
     kiln_cmd_keygen},
    {"gc", "delete store objects no kept version references (dry run by default)", kiln_cmd_gc},
    {"du", "bytes per version, unique and shared", kiln_cmd_du},
    {"broker", "start an embedded Kafka broker (librdkafka's mock cluster) for development and tests",
     kiln_cmd_broker},
    {"snapshot", "ask a running Kafka `kiln run` to commit a snapshot now", kiln_cmd_snapshot},
    {"raw", "read the raw zone: list objects or decode them byte-exact", kiln_cmd_raw},
    {"trace", "where a curated record came from: shard, sources, first commit, versions, exact offset",
     kiln_cmd_trace},
    {"quarantine", "rejected records and their reasons: list, count per code and path, show",
     kiln_cmd_quarantine},
    {"replay", "rebuild a Kafka pipeline's branch from the raw zone onto a new branch", kiln_cmd_replay},
    {"cache", "keep pinned versions on local disk near GPUs: sync, status, verify, serve", kiln_cmd_cache},
    {"push", "copy a promoted version (shards and signed manifest) to another store", kiln_cmd_push},
    {"pull", "mirror the manifest a push wrote to a store into a local repository", kiln_cmd_pull},
    {"erase", "erase a person from every version, the raw zone and the quarantine; prove it", kiln_cmd_erase},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* Commands that hold a secret in memory (the HMAC key and raw records, a
 * signing key, bearer tokens): their process is made non-dumpable first. */
static const char *const holds_secrets[] = {"run",   "check", "replay",     "promote", "cache",
                                            "erase", "trace", "quarantine", "report"};

static int run_command(const kiln_command *c, int argc, char **argv)
{
	for (size_t i = 0; i < sizeof(holds_secrets) / sizeof(holds_secrets[0]); i++)
		if (strcmp(c->name, holds_secrets[i]) == 0 && kiln_key_protect_process() < 0)
			return kiln_cli_fail(c->name, "%s", kiln_error_last());
	return c->run(argc, argv);
}

int kiln_cli_fail(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kiln %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return KILN_EXIT_USAGE;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: kiln [--version] [--help] COMMAND [ARGS]\n"
	             "\n"
	             "kiln turns raw JSON records into curated, versioned training datasets.\n"
	             "\n"
	             "Commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\nRun 'kiln COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2) {
		usage(stderr);
		return KILN_EXIT_USAGE;
	}
	cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		usage(stdout);
		return KILN_EXIT_OK;
	}
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		kiln_cli_print_version(stdout);
		return KILN_EXIT_OK;
	}
	if (strcmp(cmd, "help") == 0) {
		if (argc < 3) {
			usage(stdout);
			return KILN_EXIT_OK;
		}
		cmd = argv[2];
		for (size_t i = 0; i < NCOMMANDS; i++)
			if (strcmp(cmd, commands[i].name) == 0) {
				char *help_argv[] = {argv[2], "--help", NULL};
				return commands[i].run(2, help_argv);
			}
	}
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(cmd, commands[i].name) == 0)
			return run_command(&commands[i], argc - 1, argv + 1);
	{
		const char *names[NCOMMANDS], *near;

		for (size_t i = 0; i < NCOMMANDS; i++)
			names[i] = commands[i].name;
		if ((near = kiln_cli_closest(cmd, strlen(cmd), names, NCOMMANDS)))
			fprintf(stderr,
			        "kiln: '%s' is not a kiln command; did you mean '%s'? see 'kiln --help'\n",
			        cmd, near);
		else
			fprintf(stderr, "kiln: '%s' is not a kiln command; see 'kiln --help'\n", cmd);
	}
	return KILN_EXIT_USAGE;
}
