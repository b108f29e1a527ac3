#include "cli/cli.h"
int kiln_cmd_ls(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return kiln_cli_fail("ls", "not built yet");
}
