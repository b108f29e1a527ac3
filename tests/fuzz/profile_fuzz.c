/* libFuzzer target for the profile.json decoder: parses hostile bytes,
 * and of what parses, checks the invariants kiln relies on: what kiln
 * renders of it parses back with the same counts, kiln_profile_check and
 * the drift of the two profiles run without fault (of profiles that pass
 * the check: PSI -1 or finite and non-negative, null rates in [0, 1]),
 * and every category is found by its name. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "quality/drift.h"
#include "quality/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_drift(const kiln_profile *a, const kiln_profile *b, bool sane)
{
	kiln_drift d;

	if (kiln_drift_compare(&d, a, b, NULL) < 0)
		return; /* out of memory */
	for (size_t i = 0; sane && i < d.count; i++) {
		const kiln_field_drift *f = &d.fields[i];
		if (f->psi != -1 && !(isfinite(f->psi) && f->psi >= 0))
			abort();
		if (f->null_rate_base < 0 || f->null_rate_base > 1 || f->null_rate_now < 0 ||
		    f->null_rate_now > 1)
			abort();
	}
	kiln_drift_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kiln_profile total, added, again_total, again_added;
	kiln_buf one = {0};
	bool sane;

	if (kiln_profile_parse_file((const char *)data, size, "fuzz", &total, &added) < 0)
		return 0;
	sane = kiln_profile_check(&total, &added, total.records, "fuzz") == 0;
	for (size_t i = 0; i < total.count; i++) {
		const kiln_profile_field *f = &total.fields[i];
		for (size_t c = 0; c < f->cat_count; c++) {
			long at = kiln_profile_category(f, f->cat_names[c], strlen(f->cat_names[c]));
			if (at < 0 || strcmp(f->cat_names[at], f->cat_names[c]) != 0)
				abort();
		}
	}
	check_drift(&total, &added, sane);
	/* what kiln renders, it reads back */
	if (kiln_profile_render_file(&one, &total, &added) == 0) {
		if (kiln_profile_parse_file(one.ptr, one.len, "fuzz", &again_total, &again_added) < 0)
			abort();
		if (again_total.records != total.records || again_total.count != total.count ||
		    again_added.count != added.count || again_total.omitted != total.omitted)
			abort();
		kiln_profile_free(&again_total);
		kiln_profile_free(&again_added);
	}
	kiln_buf_free(&one);
	kiln_profile_free(&total);
	kiln_profile_free(&added);
	return 0;
}
