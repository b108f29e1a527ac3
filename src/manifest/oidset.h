/* A set of git object ids, for the manifest's walks
 * over a whole repository (purge: what superseded versions reach, what the
 * refs keep; the object scan: each id once). Open addressing, grown at half
 * load; the set owns its memory. */
#ifndef KILN_MANIFEST_OIDSET_H
#define KILN_MANIFEST_OIDSET_H

#include <git2.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct kiln_oidset {
	git_oid *ids;
	unsigned char *used; /* per slot: 1 when it holds an id */
	size_t cap, n;
} kiln_oidset;

#define KILN_OIDSET_INIT                                                                                     \
	{                                                                                                    \
		NULL, NULL, 0, 0                                                                             \
	}

/* Adds id: 1 when it was not in the set, 0 when it was, KILN_ENOMEM. */
int kiln_oidset_add(kiln_oidset *set, const git_oid *id);

bool kiln_oidset_has(const kiln_oidset *set, const git_oid *id);

/* Empties the set and frees its memory (an empty set stays usable). */
void kiln_oidset_free(kiln_oidset *set);

#endif
