/* kiln's commands: one file per command under src/cli/, each exporting a
 * kiln_cmd_<name>(argc, argv) that returns the process exit status. */
#ifndef KILN_CLI_CLI_H
#define KILN_CLI_CLI_H

/* Exit statuses shared by every command. */
#define KILN_EXIT_OK      0
#define KILN_EXIT_INVALID 1 /* the command ran; the data failed a check */
#define KILN_EXIT_USAGE   2 /* bad usage, config, contract or I/O */

typedef struct kiln_command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv);
} kiln_command;

int kiln_cmd_init(int argc, char **argv);
int kiln_cmd_validate(int argc, char **argv);
int kiln_cmd_contract(int argc, char **argv);
int kiln_cmd_run(int argc, char **argv);
int kiln_cmd_check(int argc, char **argv);
int kiln_cmd_log(int argc, char **argv);
int kiln_cmd_show(int argc, char **argv);
int kiln_cmd_diff(int argc, char **argv);
int kiln_cmd_profile(int argc, char **argv);
int kiln_cmd_report(int argc, char **argv);
int kiln_cmd_ls(int argc, char **argv);
int kiln_cmd_cat(int argc, char **argv);
int kiln_cmd_promote(int argc, char **argv);
int kiln_cmd_verify(int argc, char **argv);
int kiln_cmd_branch(int argc, char **argv);
int kiln_cmd_keygen(int argc, char **argv);
int kiln_cmd_gc(int argc, char **argv);
int kiln_cmd_du(int argc, char **argv);
int kiln_cmd_broker(int argc, char **argv);
int kiln_cmd_snapshot(int argc, char **argv);
int kiln_cmd_raw(int argc, char **argv);
int kiln_cmd_trace(int argc, char **argv);
int kiln_cmd_quarantine(int argc, char **argv);
int kiln_cmd_replay(int argc, char **argv);
int kiln_cmd_cache(int argc, char **argv);
int kiln_cmd_push(int argc, char **argv);
int kiln_cmd_pull(int argc, char **argv);
int kiln_cmd_erase(int argc, char **argv);
/* kiln erase, its messages naming cmd (kiln trace --subject runs it as "trace"). */
int kiln_cmd_erase_as(const char *cmd, int argc, char **argv);
/* `kiln cache serve`, reached through `kiln cache` (src/cli/cache_serve.c). */
int kiln_cmd_cache_serve(int argc, char **argv);

/* Prints "kiln CMD: message" on stderr; returns KILN_EXIT_USAGE. */
int kiln_cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
