/* placeholder */
#include "cli/cli.h"
int kiln_cmd_init(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return KILN_EXIT_USAGE;
}
