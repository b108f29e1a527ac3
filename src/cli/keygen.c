#include "cli/cli.h"
int kiln_cmd_keygen(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return kiln_cli_fail("keygen", "not built yet");
}
