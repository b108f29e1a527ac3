/* Compatibility of two compiled contracts: every change from an old to a new
 * version of a contract, field by field (walked by field path), each with a
 * stable code and whether it breaks readers of curated data. Which codes
 * break, and why, is docs/QUALITY.md "Contract changes"; each code has one
 * classification, whatever the fields around it. Messages hold schema text
 * only (types, bounds, enum values, patterns), never a record's value. */
#ifndef KILN_CONTRACT_COMPAT_H
#define KILN_CONTRACT_COMPAT_H

#include <stdbool.h>
#include <stddef.h>

#include "contract/contract.h"
#include "core/buf.h"

typedef struct kiln_contract_change {
	const char *path;    /* the field path ("device.os", "tags[]"); "" for the contract itself */
	const char *code;    /* stable snake_case code ("type_changed"), static storage */
	bool breaking;       /* breaks readers of curated data (docs/QUALITY.md) */
	const char *message; /* one line stating old -> new: "type string -> integer" */
} kiln_contract_change;

typedef struct kiln_contract_compat {
	/* contract-level changes first, then the fields depth first in old's
	 * order; the fields new adds to an object follow that object's others */
	kiln_contract_change *changes;
	size_t count;
	size_t breaking; /* how many of them break readers */
	struct kiln_arena *arena;
} kiln_contract_compat;

/* Compares `old_contract` with `new_contract` (each compiled for the schema
 * object to compare). Returns 0 with *out holding the changes (none when the
 * two compile to the same rules, whatever their descriptions say), or
 * KILN_ENOMEM. The caller frees *out with kiln_contract_compat_free(); the
 * strings it points to live as long as *out, not the contracts. */
int kiln_contract_compat_diff(kiln_contract_compat **out, const kiln_contract *old_contract,
                              const kiln_contract *new_contract);

/* NULL is fine. */
void kiln_contract_compat_free(kiln_contract_compat *compat);

/* The first `max` breaking changes as "path code, path code" (", ..." when
 * there are more), NUL-terminated, into out: for one-line messages. */
int kiln_contract_compat_breaking_list(kiln_buf *out, const kiln_contract_compat *compat, size_t max);

/* The i-th code kiln knows (i from 0), NULL past the last: every code a
 * change can carry, for documentation and tests. Static storage. */
const char *kiln_contract_compat_code(size_t i);

/* Whether `code` breaks readers; false for a code kiln does not know. */
bool kiln_contract_compat_code_breaking(const char *code);

#endif
