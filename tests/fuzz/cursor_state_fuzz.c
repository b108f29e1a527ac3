/* libFuzzer target for the cursor state decoder (kiln_cursor_state_decode,
 * src/reader/cursor.c): hostile bytes either are refused with one line of
 * error (and zeroed fields), or decode to fields that the encoder writes
 * out and the decoder reads back to the very same fields. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "reader/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const kiln_cursor_fields zero;
	kiln_cursor_fields f, g;
	char text[KILN_CURSOR_STATE_SIZE];
	int rc = kiln_cursor_state_decode(&f, (const char *)data, size);

	if (rc < 0) {
		const char *e = kiln_error_last();

		if (rc != KILN_EINVALID && rc != KILN_ENOMEM)
			abort();
		if (!e || !*e || strchr(e, '\n') || memcmp(&f, &zero, sizeof(f)) != 0)
			abort();
		return 0;
	}
	if (rc != 0 || strlen(f.commit) != 40 || (unsigned)f.split >= KILN_SPLIT_COUNT || f.rank >= f.world)
		abort();
	if (kiln_cursor_state_encode(text, sizeof(text), &f) != 0 ||
	    kiln_cursor_state_decode(&g, text, strlen(text)) != 0 || memcmp(&f, &g, sizeof(f)) != 0)
		abort();
	return 0;
}
