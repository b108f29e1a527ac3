/* libkiln's version query (kiln/common.h): configure.ac's AC_INIT version as
 * a string and as one number, for programs and bindings that load the
 * library at run time. */
#include <config.h> /* the build's, not src/core/config.h */
#include "kiln/common.h"

#include <stdio.h>

const char *kiln_library_version(void)
{
	return PACKAGE_VERSION;
}

unsigned kiln_library_version_number(void)
{
	unsigned major = 0, minor = 0, patch = 0;

	(void)sscanf(PACKAGE_VERSION, "%u.%u.%u", &major, &minor, &patch);
	return major * 10000 + minor * 100 + patch;
}
