#include "cli/cli.h"
int kiln_cmd_cat(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return kiln_cli_fail("cat", "not built yet");
}
