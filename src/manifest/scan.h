/* Every byte a manifest repository holds, for an erasure's proof of
 * absence (`kiln erase --verify`): each object of the object database,
 * inflated, whether or not anything reaches it, and each other file under
 * the repository folder (refs, reflogs, config, FETCH_HEAD, temporary files
 * ...), as stored. */
#ifndef KILN_MANIFEST_SCAN_H
#define KILN_MANIFEST_SCAN_H

#include <stddef.h>

#include "manifest/manifest.h"

/* Calls cb for every object the object database holds (loose and packed,
 * reachable or not; each id once): its 40-hex id, its type ("commit",
 * "tree", "blob", "tag") and its inflated content (data/len, valid during
 * the call only). A non-zero return from cb stops the scan and is
 * returned. An object that cannot be read is an error naming it
 * (KILN_EINVALID or KILN_EIO): absence cannot be shown past it. */
int kiln_manifest_each_object(kiln_manifest *manifest,
                              int (*cb)(void *ctx, const char *id_hex, const char *type, const void *data,
                                        size_t len),
                              void *ctx);

/* Calls cb for every regular file under the repository folder that is not
 * an object store file (a loose object objects/<hh>/<38 hex>, a pack
 * objects/pack/pack-<hex>.pack whose .idx is there: their content is what
 * kiln_manifest_each_object gives), with its path relative to the
 * repository folder and its bytes (valid during the call only). Symbolic
 * links are neither followed nor given. A non-zero return from cb stops
 * and is returned; a file larger than 256 MiB is KILN_EINVALID naming it. */
int kiln_manifest_each_file(kiln_manifest *manifest,
                            int (*cb)(void *ctx, const char *path, const void *data, size_t len), void *ctx);

#endif
