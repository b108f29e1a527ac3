/* libFuzzer target for a dedup segment (dedup/<ms>-<id>.keys in a commit
 * tree, manifest/dedup.c): a pulled manifest is foreign bytes. What decodes
 * encodes back to the same bytes, loads into an index where every key is
 * then a duplicate within the window and none after it; a segment name
 * parsed from the input's first bytes renders back the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manifest/dedup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const unsigned char(*keys)[KILN_DEDUP_HASH_LEN];
	kiln_buf again = KILN_BUF_INIT(0);
	kiln_dedup *d = NULL;
	size_t n;
	int64_t ms;
	char name[64];

	if (size >= 35 && size < 64) {
		memcpy(name, data, size);
		name[size] = '\0';
		int64_t t = kiln_dedup_segment_name_ms(name);
		if (t > 0) {
			char back[64];
			unsigned char id[8];

			for (int i = 0; i < 8; i++) {
				char h[3] = {name[14 + 2 * i], name[15 + 2 * i], '\0'};
				id[i] = (unsigned char)strtoul(h, NULL, 16);
			}
			kiln_dedup_segment_name(back, sizeof(back), t, id);
			if (strcmp(back, name) != 0)
				abort();
		}
	}
	if (kiln_dedup_segment_decode(data, size, "fuzz", &ms, &keys, &n) != 0)
		return 0;
	if (ms <= 0 || kiln_dedup_segment_encode(&again, keys, n, ms) < 0 || again.len != size ||
	    memcmp(again.ptr, data, size) != 0)
		abort();
	if (kiln_dedup_new(&d, 1000) < 0)
		abort();
	for (size_t i = 0; i < n; i++)
		if (kiln_dedup_add(d, keys[i], ms) < 0)
			abort();
	if (kiln_dedup_committed_count(d) != n)
		abort();
	for (size_t i = 0; i < n; i++)
		if (kiln_dedup_seen(d, keys[i], ms + 1000) != 1 ||
		    (ms < INT64_MAX - 2000 && kiln_dedup_seen(d, keys[i], ms + 1001) != 0))
			abort();
	kiln_dedup_free(d);
	kiln_buf_free(&again);
	return 0;
}
