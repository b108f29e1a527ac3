#include "cli/cli.h"
int kiln_cmd_log(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return kiln_cli_fail("log", "not built yet");
}
