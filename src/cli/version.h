/* What this kiln is, for `kiln --version` and the daemons' kiln_build_info:
 * PACKAGE_VERSION, the git commit it was built from, and the versions of
 * the libraries it runs with (each asked of its layer's own call). */
#ifndef KILN_CLI_VERSION_H
#define KILN_CLI_VERSION_H

#include <stdio.h>

#include "core/daemon_metrics.h"

/* `git rev-parse --short=12 HEAD` of the source checkout, or "unknown"
 * outside one (a release tarball): make writes it into
 * src/cli/build_commit.c at every build (Makefile.am), rewriting the file
 * only when the commit changed. */
extern const char kiln_cli_build_commit[];

/* Fills out; its strings are static. */
void kiln_cli_build_info(kiln_build_info *out);

/* `kiln --version`: "kiln X.Y.Z", then
 * "commit=C zstd=V librdkafka=V libgit2=V" (kiln_build_info's labels). */
void kiln_cli_print_version(FILE *out);

#endif
