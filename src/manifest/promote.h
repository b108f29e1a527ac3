/* Promoting a version: what the governance record is made of (the version's
 * stats.json, dataset.json and lineage.json, parsed), the next vN, and the
 * repository's signing policy once a signed tag exists. The release gates
 * themselves are the pipeline's (ingest/gates.h); the tag is
 * kiln_manifest_tag's. */
#ifndef KILN_MANIFEST_PROMOTE_H
#define KILN_MANIFEST_PROMOTE_H

#include <stdbool.h>

#include "manifest/format.h"
#include "manifest/manifest.h"
#include "manifest/version.h"

/* The files of a version a promotion reads. Owned: free with
 * kiln_promote_inputs_free (which accepts one never filled). */
typedef struct kiln_promote_inputs {
	kiln_stats stats;
	kiln_mfmt_dataset definition;
	kiln_mfmt_lineage lineage; /* empty when the version has no lineage.json */
} kiln_promote_inputs;

/* Reads and parses the version's stats.json, dataset.json and (when
 * present) lineage.json; spec names the version in messages. A missing
 * stats.json or dataset.json is KILN_ENOTFOUND "stats.json or dataset.json
 * is missing" (unless an error is already set, which is kept). out is
 * zeroed first; free it whatever this returns. */
int kiln_promote_inputs_read(kiln_promote_inputs *out, kiln_manifest *manifest, const kiln_version *version,
                             const char *spec);
void kiln_promote_inputs_free(kiln_promote_inputs *inputs);

/* "v1", "v2", ...: a 'v' and a number without a leading zero. */
bool kiln_promote_version_name_ok(const char *name);

/* One above the highest refs/tags/<dataset>/vN ("v1" when there is none). */
int kiln_promote_next_version(char out[32], kiln_manifest *manifest, const char *dataset);

/* The highest refs/tags/<dataset>/vN: 1 with "vN" in out, 0 when the
 * dataset has none (a baseline "previous" then has nothing to compare). */
int kiln_promote_last_version(char out[32], kiln_manifest *manifest, const char *dataset);

/* Records in the repository's config that its tag versions are signed
 * (kiln.signed = tags, docs/RELEASES.md), so `kiln verify` refuses an
 * unsigned one even without trusted keys. "all" (or "true") is kept. */
int kiln_promote_mark_signed(kiln_manifest *manifest);

#endif
