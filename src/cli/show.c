#include "cli/cli.h"
int kiln_cmd_show(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return kiln_cli_fail("show", "not built yet");
}
