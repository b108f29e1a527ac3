/* Every release gate of a pipeline against one version, as `kiln promote`
 * runs them before it tags and `kiln report` shows them: the stats gates
 * (kiln_gates_check), contract_compatible against the last vN's contract,
 * the drift gate against its baseline's profile, and the ODCS quality rules
 * of the pipeline's contract (which must be the contract the version was
 * curated under). The results are lines with figure and threshold. */
#ifndef KILN_INGEST_GATES_RUN_H
#define KILN_INGEST_GATES_RUN_H

#include <stddef.h>

#include "ingest/gates.h"
#include "ingest/pipeline.h"
#include "manifest/manifest.h"
#include "manifest/promote.h"
#include "manifest/version.h"

/* Runs them all: *out (freed by the caller with free(), NULL when none)
 * holds *out_n results in the order promote prints them. spec names the
 * version in messages. Errors (a gate that cannot be computed: no profile,
 * a baseline that does not resolve, another contract than the version's)
 * are returned with a one-line message that names the gate ("drift gate:
 * ...", "contract_compatible gate: ...", "quality rules: ..."); nothing is
 * printed. */
int kiln_gates_run(kiln_gate_result **out, size_t *out_n, const kiln_pipeline *p, kiln_manifest *m,
                   const kiln_version *v, const kiln_promote_inputs *in, const char *spec);

#endif
