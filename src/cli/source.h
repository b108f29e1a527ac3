/* Where a command that reads versions from an operator's host finds the
 * manifest repository and the store (`kiln gc`, `kiln push`): --manifest
 * and --store when given, else a pipeline file's (with its store options:
 * an S3 endpoint, region, credentials file), else $KILN_MANIFEST and
 * $KILN_STORE. */
#ifndef KILN_CLI_SOURCE_H
#define KILN_CLI_SOURCE_H

#include <stdbool.h>

#include "ingest/pipeline.h"

typedef struct kiln_cli_source {
	const char *repo;                        /* in: --manifest (or NULL); out: the repository */
	const char *store_url;                   /* in: --store (or NULL); out: the store */
	const kiln_store_options *store_options; /* out: the pipeline's, or NULL */
	kiln_pipeline *pipeline;                 /* loaded from --pipeline; freed by kiln_cli_source_free */
	bool store_only;                         /* in: the command reads no manifest (repo may stay NULL) */
} kiln_cli_source;

/* Fills s from pipeline_file (may be NULL) and the environment. 0, or the
 * exit status with one line printed ("kiln CMD: ..."): a pipeline that does
 * not load, no repository, no store. */
int kiln_cli_source_resolve(const char *cmd, kiln_cli_source *s, const char *pipeline_file);
void kiln_cli_source_free(kiln_cli_source *s);

#endif
