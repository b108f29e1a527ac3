#include "cli/cli.h"
int kiln_cmd_verify(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return kiln_cli_fail("verify", "not built yet");
}
