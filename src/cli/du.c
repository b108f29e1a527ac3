#include "cli/cli.h"
int kiln_cmd_du(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return kiln_cli_fail("du", "not built yet");
}
