/* The object-id memos of a history rewrite (rewrite_internal.h): an open
 * addressing table of slot pointers keyed by git object id, linear probing,
 * kept at most half full. Each slot is allocated once and never moves, so
 * the pointers callers keep survive the table's growth (they did not when
 * the table held the slots themselves: a commit's train slot was read after
 * its test split's add had moved it, a use after free). */
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
		if (m->slots[i]) {
			for (size_t j = 0; j < m->slots[i]->affected_count; j++)
				free(m->slots[i]->affected[j]);
			free(m->slots[i]->affected);
			free(m->slots[i]);
		}
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

oid_slot *kiln_rewrite_map_get(const oid_map *m, const git_oid *key)
{
	if (m->cap == 0)
		return NULL;
	for (size_t i = oid_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->slots[i])
			return NULL;
		if (git_oid_equal(&m->slots[i]->key, key))
			return m->slots[i];
	}
}

static int oid_map_grow(oid_map *m)
{
	oid_map bigger = {.cap = m->cap ? m->cap * 2 : 256};

	bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
	if (!bigger.slots)
		return kiln_error_oom("rewrite");
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->slots[i])
			continue;
		for (size_t j = oid_hash(&m->slots[i]->key) & (bigger.cap - 1);;
		     j = (j + 1) & (bigger.cap - 1))
			if (!bigger.slots[j]) {
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
	oid_slot *slot;
	int rc;

	if ((m->count + 1) * 2 > m->cap && (rc = oid_map_grow(m)) < 0)
		return rc;
	if (!(slot = calloc(1, sizeof(*slot))))
		return kiln_error_oom("rewrite");
	git_oid_cpy(&slot->key, key);
	for (size_t i = oid_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
		if (!m->slots[i]) {
			m->slots[i] = slot;
			m->count++;
			*out = slot;
			return 0;
		}
}
