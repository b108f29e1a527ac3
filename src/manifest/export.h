/* A version's git objects for another host: every object reachable from
 * the version (its annotated tag when it has one, the commit and all its
 * ancestors, their trees and blobs) written as loose objects, the files
 * `git` keeps under objects/<xx>/<38 hex> (zlib-deflated "<type> <size>\0"
 * and the content). A folder of them with refs beside it is a bare
 * repository that kiln and stock git read as it is; `kiln push` copies them
 * to a store (docs/PUSH.md). */
#ifndef KILN_MANIFEST_EXPORT_H
#define KILN_MANIFEST_EXPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "manifest/manifest.h"
#include "manifest/version.h"

typedef struct kiln_export_sink {
	/* true when the destination holds the object already (hex id): it is
	 * then not written (its own objects are still visited) */
	bool (*have)(void *ctx, const char *id);
	/* each object written, as "<xx>/<38 hex>" under objects_dir, with the
	 * loose file's size; non-zero stops the export and is returned */
	int (*wrote)(void *ctx, const char *name, uint64_t size);
	void *ctx;
} kiln_export_sink;

/* Writes the version's objects that sink->have does not report into the
 * loose-object folder objects_dir (created when missing), each once.
 * Returns 0, an error naming the object that could not be read or written,
 * or what sink->wrote returned. *out_objects (may be NULL) counts the
 * objects reachable, written or not. */
int kiln_manifest_export(kiln_manifest *manifest, const kiln_version *version, const char *objects_dir,
                         const kiln_export_sink *sink, uint64_t *out_objects);

#endif
