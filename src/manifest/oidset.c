/* A set of git object ids (see oidset.h). */
#include "manifest/oidset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* Ids are SHA-1 digests: their first bytes are already uniform. */
static size_t slot_of(const kiln_oidset *set, const git_oid *id)
{
	uint64_t h;

	memcpy(&h, id->id, sizeof(h));
	return (size_t)h & (set->cap - 1);
}

static size_t find(const kiln_oidset *set, const git_oid *id)
{
	size_t i = slot_of(set, id);

	while (set->used[i] && git_oid_cmp(&set->ids[i], id) != 0)
		i = (i + 1) & (set->cap - 1);
	return i;
}

static int grow(kiln_oidset *set)
{
	kiln_oidset bigger = {NULL, NULL, set->cap ? set->cap * 2 : 1024, set->n};

	if (bigger.cap < set->cap || !(bigger.ids = malloc(bigger.cap * sizeof(*bigger.ids))) ||
	    !(bigger.used = calloc(bigger.cap, 1))) {
		free(bigger.ids);
		return kiln_error_set(KILN_ENOMEM, "out of memory (a set of %zu object ids)", set->n);
	}
	for (size_t i = 0; i < set->cap; i++) {
		if (!set->used[i])
			continue;
		size_t j = find(&bigger, &set->ids[i]);
		git_oid_cpy(&bigger.ids[j], &set->ids[i]);
		bigger.used[j] = 1;
	}
	free(set->ids);
	free(set->used);
	*set = bigger;
	return 0;
}

int kiln_oidset_add(kiln_oidset *set, const git_oid *id)
{
	size_t i;
	int rc;

	if ((set->n + 1) * 2 > set->cap && (rc = grow(set)) < 0)
		return rc;
	i = find(set, id);
	if (set->used[i])
		return 0;
	git_oid_cpy(&set->ids[i], id);
	set->used[i] = 1;
	set->n++;
	return 1;
}

bool kiln_oidset_has(const kiln_oidset *set, const git_oid *id)
{
	return set->cap && set->used[find(set, id)];
}

void kiln_oidset_free(kiln_oidset *set)
{
	free(set->ids);
	free(set->used);
	*set = (kiln_oidset)KILN_OIDSET_INIT;
}
