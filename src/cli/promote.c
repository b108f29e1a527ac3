#include "cli/cli.h"
int kiln_cmd_promote(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return kiln_cli_fail("promote", "not built yet");
}
