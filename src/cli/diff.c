#include "cli/cli.h"
int kiln_cmd_diff(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return kiln_cli_fail("diff", "not built yet");
}
