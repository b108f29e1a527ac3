/* libFuzzer target for the erasure ledger's entries (manifest/ledger.c): a
 * pulled repository's refs/erasures/<dataset> is foreign bytes. Checks that
 * what parses renders and parses back to the same entry and the same text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manifest/ledger.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static kiln_json_scanner *s;
	kiln_ledger_entry a, b;
	kiln_buf r1 = KILN_BUF_INIT(0), r2 = KILN_BUF_INIT(0);

	if (!s && !(s = kiln_json_scanner_new(NULL)))
		abort();
	if (kiln_ledger_parse(s, "fuzz", (const char *)data, size, &a) == 0) {
		if (kiln_ledger_render(&r1, &a) < 0 || kiln_ledger_parse(s, "fuzz", r1.ptr, r1.len, &b) < 0)
			abort();
		if (a.ref_count != b.ref_count || a.commit_count != b.commit_count ||
		    a.shard_count != b.shard_count || strcmp(a.id, b.id) != 0 ||
		    strcmp(a.subject, b.subject) != 0 || a.time != b.time ||
		    (a.ref_count && memcmp(a.refs, b.refs, a.ref_count * sizeof(*a.refs)) != 0) ||
		    (a.commit_count &&
		     memcmp(a.commits, b.commits, a.commit_count * sizeof(*a.commits)) != 0) ||
		    memcmp(a.erased, b.erased, sizeof(a.erased)) != 0)
			abort();
		if (kiln_ledger_render(&r2, &b) < 0 || r1.len != r2.len ||
		    memcmp(r1.ptr, r2.ptr, r1.len) != 0)
			abort();
		kiln_ledger_entry_free(&b);
	}
	kiln_ledger_entry_free(&a);
	kiln_buf_free(&r1);
	kiln_buf_free(&r2);
	return 0;
}
