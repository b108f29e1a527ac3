/* Reading dataset versions: "ds@ref" resolution, the files of a version, its
 * shards and its history, for the inspect and reader commands. Read-only;
 * every error names the spec or ref and, for a missing one, says so. */
#ifndef KILN_MANIFEST_VERSION_H
#define KILN_MANIFEST_VERSION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "manifest/manifest.h"

typedef struct kiln_version {
	char dataset[129];
	char ref[320];   /* what it resolved through: "refs/heads/ds/main", "refs/tags/ds/v3"; "" for a commit id */
	char commit[41]; /* the commit (tags peeled) */
	int64_t time;    /* commit time, seconds since the epoch */
} kiln_version;

/* spec: "ds" (= ds@main), "ds@main", "ds@<branch>", "ds@v<N>" (tag
 * refs/tags/ds/vN), "ds@<commit id or unique prefix of 4+ hex digits>".
 * Branches win over tags, tags over commit prefixes. KILN_ENOTFOUND with
 * "ds@x: no branch, tag or commit of that name" when none matches;
 * KILN_EINVALID for a malformed spec, an ambiguous prefix, or a commit
 * whose dataset.json names another dataset. */
int kiln_version_resolve(kiln_manifest *manifest, const char *spec, kiln_version *out);

/* Appends the file at `path` of the version's tree to out: 1 when found,
 * 0 when absent. */
int kiln_version_read(kiln_manifest *manifest, const kiln_version *version, const char *path, kiln_buf *out);

/* Calls cb with every shard of `split` at the version, in hash order. The
 * entry (and its strings) lives until cb returns; a non-zero return from cb
 * stops the walk and is returned. */
int kiln_version_shards(kiln_manifest *manifest, const kiln_version *version, kiln_split split,
			int (*cb)(void *ctx, const kiln_shard_entry *entry), void *ctx);

/* Parses one splits/<split>/<hh>.jsonl line (docs/FORMATS.md) into out;
 * topic strings are written into `strings` (reset by the caller) and
 * out->sources points into `sources`, grown as needed (owned by caller). */
int kiln_shard_line_parse(const char *line, size_t len, kiln_shard_entry *out, kiln_buf *strings,
			  kiln_source_range **sources, size_t *sources_cap);

#endif
