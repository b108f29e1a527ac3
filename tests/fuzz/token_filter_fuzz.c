/* libFuzzer target for the token filter decoder (shard/filter.c): any
 * bytes are decoded; a filter that decodes is probed, and its bitmap must
 * lie inside the input. The input is also scanned for tokens as a curated
 * line, and the filter built from them must hold each one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "shard/filter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kiln_filter f;
	kiln_filter_set set = {0};
	kiln_buf b = KILN_BUF_INIT(0);
	const char *text = (const char *)data;

	if (kiln_filter_decode(&f, data, size, "fuzz") == 0) {
		if (f.bitmap < data || f.bitmap + f.bits / 8 != data + size)
			abort();
		(void)kiln_filter_may_hold(&f, "p1_aaaaaaaaaaaaaaaaaaaaaaaaaa", 29);
	}
	if (kiln_filter_scan(&set, text, size) == 0 && kiln_filter_encode(&b, &set) == 0) {
		if (kiln_filter_decode(&f, b.ptr, b.len, "fuzz") != 0)
			abort();
		for (size_t i = 0; i < size; i++) {
			size_t n = kiln_filter_token_part(text + i, size - i);

			if (n && !kiln_filter_may_hold(&f, text + i, n))
				abort();
		}
	}
	kiln_filter_set_free(&set);
	kiln_buf_free(&b);
	return 0;
}
