#include "cli/cli.h"
int kiln_cmd_gc(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return kiln_cli_fail("gc", "not built yet");
}
