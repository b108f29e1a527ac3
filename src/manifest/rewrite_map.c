/* The object-id memos of a history rewrite (rewrite_internal.h): an open
 * addressing table keyed by git object id, linear probing, kept at most
 * half full. */
#include "manifest/rewrite_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static size_t oid_hash(const git_oid *id)
{
	size_t h;

	memcpy(&h, id->id, sizeof(h));
	return h;
}

void kiln_rewrite_map_free(oid_map *m)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].used) {
			for (size_t j = 0; j < m->slots[i].affected_count; j++)
				free(m->slots[i].affected[j]);
			free(m->slots[i].affected);
		}
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

oid_slot *kiln_rewrite_map_get(const oid_map *m, const git_oid *key)
{
	if (m->cap == 0)
		return NULL;
	for (size_t i = oid_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->slots[i].used)
			return NULL;
		if (git_oid_equal(&m->slots[i].key, key))
			return &m->slots[i];
	}
}

static int oid_map_grow(oid_map *m)
{
	oid_map bigger = {.cap = m->cap ? m->cap * 2 : 256};

	bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
	if (!bigger.slots)
		return kiln_error_oom("rewrite");
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->slots[i].used)
			continue;
		for (size_t j = oid_hash(&m->slots[i].key) & (bigger.cap - 1);;
		     j = (j + 1) & (bigger.cap - 1))
			if (!bigger.slots[j].used) {
				bigger.slots[j] = m->slots[i];
				break;
			}
	}
	free(m->slots);
	bigger.count = m->count;
	*m = bigger;
	return 0;
}

int kiln_rewrite_map_add(oid_map *m, const git_oid *key, oid_slot **out)
{
	int rc;

	if ((m->count + 1) * 2 > m->cap && (rc = oid_map_grow(m)) < 0)
		return rc;
	for (size_t i = oid_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
		if (!m->slots[i].used) {
			m->slots[i].used = true;
			git_oid_cpy(&m->slots[i].key, key);
			m->count++;
			*out = &m->slots[i];
			return 0;
		}
}
