#include "cli/cli.h"
int kiln_cmd_branch(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return kiln_cli_fail("branch", "not built yet");
}
