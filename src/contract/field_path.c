/* A compiled contract's field at a dotted path (kiln_contract_field_at,
 * contract.h): the walk through nested objects, and the first field on the
 * way that the curated output drops or redacts. */
#include "contract/contract.h"

#include <string.h>

#include "core/error.h"
#include "core/json.h"

static bool hidden_in_curated(const kiln_field *f)
{
	return f->pseudo_mode == KILN_PSEUDO_DROP || f->pseudo_mode == KILN_PSEUDO_REDACT;
}

int kiln_contract_field_at(const kiln_field **out, const kiln_field **out_hidden, const kiln_contract *k,
                           const char *path)
{
	const kiln_field *f =
	    kiln_field_child(k->root, path, strlen(path), kiln_json_hash(path, strlen(path)));
	const kiln_field *hidden = NULL;
	const char *step = path;

	*out = NULL;
	if (out_hidden)
		*out_hidden = NULL;
	if (f) { /* a top-level name holding the whole path */
		*out = f;
		if (out_hidden && hidden_in_curated(f))
			*out_hidden = f;
		return 0;
	}
	f = k->root;
	for (;;) {
		const char *dot = strchr(step, '.');
		size_t n = dot ? (size_t)(dot - step) : strlen(step);
		const kiln_field *child;

		if (f != k->root && f->type == KILN_LTYPE_ARRAY)
			return kiln_error_set(
			    KILN_EINVALID,
			    "\"%s\" goes through the array \"%s\" (%s:%u:%u): a path cannot "
			    "step into an array",
			    path, f->path, k->file, f->line, f->column);
		if (f != k->root && f->child_count == 0)
			return kiln_error_set(
			    KILN_EINVALID,
			    "\"%s\" goes through \"%s\" (%s:%u:%u), which has no properties "
			    "(logicalType %s)",
			    path, f->path, k->file, f->line, f->column, kiln_ltype_name(f->type));
		child = kiln_field_child(f, step, n, kiln_json_hash(step, n));
		if (!child) {
			if (f == k->root)
				return kiln_error_set(KILN_ENOTFOUND,
				                      "the contract %s has no top-level field \"%.*s\"",
				                      k->file, (int)n, step);
			return kiln_error_set(KILN_ENOTFOUND, "\"%s\" (%s:%u:%u) has no property \"%.*s\"",
			                      f->path, k->file, f->line, f->column, (int)n, step);
		}
		f = child;
		if (!hidden && hidden_in_curated(f))
			hidden = f;
		if (!dot)
			break;
		step = dot + 1;
	}
	*out = f;
	if (out_hidden)
		*out_hidden = hidden;
	return 0;
}
