/* libFuzzer target for a branch's quarantine replay list
 * (quarantine-replayed.json, manifest/replayed.c): a pulled manifest is
 * foreign bytes. Checks that what parses renders and parses back to the
 * same text, that the set holds each range's ends and not the offset
 * just before each range, and that subtracting it from itself leaves
 * nothing and subtracting nothing leaves it. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manifest/replayed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kiln_replayed a, b;
	kiln_buf r1 = KILN_BUF_INIT(0), r2 = KILN_BUF_INIT(0);

	if (kiln_replayed_parse(&a, (const char *)data, size, "fuzz") == 0) {
		if (kiln_replayed_render(&r1, &a) < 0 || kiln_replayed_parse(&b, r1.ptr, r1.len, "fuzz") < 0)
			abort();
		if (kiln_replayed_render(&r2, &b) < 0 || r1.len != r2.len ||
		    memcmp(r1.ptr, r2.ptr, r1.len) != 0 || a.count != b.count || a.n != b.n)
			abort();
		for (size_t i = 0; i < a.n; i++)
			for (size_t j = 0; j < a.parts[i].n; j++) {
				const kiln_replayed_part *p = &a.parts[i];

				if (!kiln_replayed_has(&b, p->source, p->topic, p->partition,
				                       p->v[j].first) ||
				    !kiln_replayed_has(&b, p->source, p->topic, p->partition, p->v[j].last) ||
				    (p->v[j].first > 0 && kiln_replayed_has(&b, p->source, p->topic,
				                                            p->partition, p->v[j].first - 1)))
					abort();
			}
		/* a - a is empty; a - (empty) renders as a */
		kiln_replayed none = {0}, d1 = {0}, d2 = {0};
		kiln_buf r3 = KILN_BUF_INIT(0);

		if (kiln_replayed_subtract(&d1, &a, &b) < 0 || d1.count != 0 ||
		    kiln_replayed_subtract(&d2, &a, &none) < 0 || d2.count != a.count ||
		    kiln_replayed_render(&r3, &d2) < 0)
			abort();
		for (size_t i = 0; i < d1.n; i++)
			if (d1.parts[i].n)
				abort();
		bool all_ranges = true; /* a part without offsets is not carried by a subtraction */

		for (size_t i = 0; i < a.n; i++)
			all_ranges = all_ranges && a.parts[i].n > 0;
		if (all_ranges && (r3.len != r1.len || memcmp(r3.ptr, r1.ptr, r1.len) != 0))
			abort();
		kiln_buf_free(&r3);
		kiln_replayed_free(&d1);
		kiln_replayed_free(&d2);
		kiln_replayed_free(&b);
	}
	kiln_replayed_free(&a);
	kiln_buf_free(&r1);
	kiln_buf_free(&r2);
	return 0;
}
