/* The manifest and store of a command (see source.h). */
#include "cli/source.h"

#include <stdlib.h>

#include "cli/cli.h"
#include "core/error.h"

int kiln_cli_source_resolve(const char *cmd, kiln_cli_source *s, const char *pipeline_file)
{
	s->store_options = NULL;
	s->pipeline = NULL;
	if (pipeline_file) {
		if (kiln_pipeline_load(&s->pipeline, pipeline_file, NULL, 0) < 0)
			return kiln_cli_fail(cmd, "%s", kiln_error_last());
		if (!s->store_url) {
			s->store_url = s->pipeline->store_url;
			s->store_options = &s->pipeline->store;
		}
		if (!s->repo)
			s->repo = s->pipeline->manifest_repo;
	}
	if (!s->repo)
		s->repo = getenv("KILN_MANIFEST");
	if (!s->store_url)
		s->store_url = getenv("KILN_STORE");
	if (!s->store_only && (!s->repo || !*s->repo))
		return kiln_cli_fail(cmd,
		                     "no manifest repository: give --manifest REPO, --pipeline FILE or set "
		                     "KILN_MANIFEST");
	if (!s->store_url || !*s->store_url)
		return kiln_cli_fail(cmd, "no store: give --store URL, --pipeline FILE or set KILN_STORE");
	return 0;
}

void kiln_cli_source_free(kiln_cli_source *s)
{
	kiln_pipeline_free(s->pipeline);
	s->pipeline = NULL;
}
