/* A profile from curated records (a shard's lines): each value's contract
 * field resolved by the validator's token hook on the curated text, and
 * handed to kiln_profile_add_value as the curate pool's curator hands it
 * over when it writes the record (mask/curate.c, observe()). This is how a
 * version's profile.json is recomputed after `kiln erase` removed records:
 * from what remains, never patched. */
#include <stdlib.h>
#include <string.h>

#include "contract/validate.h"
#include "core/error.h"
#include "quality/profile.h"

/* One value of the record, as the curator would have observed it. */
typedef struct curated_value {
	const kiln_field *field;
	kiln_json_type type;
	bool escaped;
	const char *text; /* in the line: a string's bytes between the quotes */
	size_t len;
} curated_value;

#define INLINE_VALUES 64

typedef struct collector {
	curated_value inline_v[INLINE_VALUES];
	curated_value *v;
	size_t count, cap;
	uint32_t depth; /* open containers */
	int rc;         /* the first error (the validator stops calling then) */
} collector;

static int collect(void *ctx, const kiln_json_token *t, const kiln_field *field)
{
	collector *c = ctx;
	bool top_level_record;

	switch (t->type) {
	case KILN_JSON_KEY:
		return 0;
	case KILN_JSON_OBJECT_END:
	case KILN_JSON_ARRAY_END:
		c->depth--;
		return 0;
	default:
		break;
	}
	/* the record itself is no value of a field: the curator does not observe it */
	top_level_record = c->depth == 0;
	if (t->type == KILN_JSON_OBJECT_BEGIN || t->type == KILN_JSON_ARRAY_BEGIN)
		c->depth++;
	if (top_level_record)
		return 0;
	if (c->count == c->cap) {
		size_t cap = c->cap * 2;
		curated_value *grown =
		    c->v == c->inline_v ? malloc(cap * sizeof(*grown)) : realloc(c->v, cap * sizeof(*grown));

		if (!grown)
			return c->rc = kiln_error_oom("profile");
		if (c->v == c->inline_v)
			memcpy(grown, c->inline_v, sizeof(c->inline_v));
		c->v = grown;
		c->cap = cap;
	}
	/* A string's flag is whether it holds an escape, as the curator
	 * reports it: a copied string keeps the input's (the same bytes), a
	 * token or a redaction has none, a rewritten one is looked at. */
	c->v[c->count++] = (curated_value){.field = field,
	                                   .type = t->type,
	                                   .escaped = (t->flags & KILN_JSON_ESCAPED) != 0,
	                                   .text = t->ptr,
	                                   .len = t->len};
	return 0;
}

/* Violations that mean the line is not a JSON object kiln could have written
 * (then the hook's tokens do not cover it). */
static bool not_a_record(const kiln_report *r)
{
	for (size_t i = 0; i < r->kept; i++)
		if (r->v[i].code >= KILN_REJECT_JSON_SYNTAX && r->v[i].code <= KILN_REJECT_NOT_OBJECT)
			return true;
	return false;
}

int kiln_profile_add_curated(kiln_profile *p, const kiln_profile_schema *schema, kiln_validator *validator,
                             const char *line, size_t len)
{
	collector c = {.cap = INLINE_VALUES};
	kiln_report report;
	int rc = 0;

	c.v = c.inline_v;
	kiln_validate_hook(validator, line, len, &report, collect, &c);
	if ((rc = c.rc) < 0)
		goto done;
	if (not_a_record(&report)) {
		const kiln_violation *v = &report.v[0];

		for (size_t i = 0; i < report.kept; i++)
			if (report.v[i].code <= KILN_REJECT_NOT_OBJECT) {
				v = &report.v[i];
				break;
			}
		rc = kiln_error_set(
		    KILN_EINVALID,
		    "profile: a curated record is not a JSON object kiln wrote (%s at byte %zu)",
		    kiln_reject_name(v->code), v->offset);
		goto done;
	}
	p->records++;
	for (size_t i = 0; i < c.count && rc == 0; i++)
		rc = kiln_profile_add_value(p, schema, c.v[i].field, c.v[i].type, c.v[i].escaped, c.v[i].text,
		                            c.v[i].len);
done:
	if (c.v != c.inline_v)
		free(c.v);
	return rc;
}
