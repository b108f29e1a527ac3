/* libFuzzer target for a branch's quarantine replay list
 * (quarantine-replayed.json, manifest/replayed.c): a pulled manifest is
 * foreign bytes. Checks that what parses renders and parses back to the
 * same text, and that the set holds each range's ends and not the offset
 * just before each range. */
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

				if (!kiln_replayed_has(&b, p->topic, p->partition, p->v[j].first) ||
				    !kiln_replayed_has(&b, p->topic, p->partition, p->v[j].last) ||
				    (p->v[j].first > 0 &&
				     kiln_replayed_has(&b, p->topic, p->partition, p->v[j].first - 1)))
					abort();
			}
		kiln_replayed_free(&b);
	}
	kiln_replayed_free(&a);
	kiln_buf_free(&r1);
	kiln_buf_free(&r2);
	return 0;
}
