/* libFuzzer target for the manifest codecs of manifest/format.c: the first
 * byte picks stats.json, lineage.json or a split file's line (full and refs
 * modes, the line's hash and its fast path), the rest is the text. Checks
 * that what parses renders and parses back to the same struct and the same
 * text, and that the three ways of reading a line's hash agree. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manifest/format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_stats(kiln_json_scanner *s, const char *text, size_t len)
{
	kiln_stats a, b;
	kiln_buf r1 = KILN_BUF_INIT(0), r2 = KILN_BUF_INIT(0);

	if (kiln_mfmt_stats_parse(s, "fuzz", text, len, &a) < 0)
		return;
	if (kiln_mfmt_stats_render(&r1, &a) < 0 || kiln_mfmt_stats_parse(s, "fuzz", r1.ptr, r1.len, &b) < 0)
		abort();
	if (memcmp(&a, &b, sizeof(a)) != 0)
		abort();
	if (kiln_mfmt_stats_render(&r2, &b) < 0 || r1.len != r2.len || memcmp(r1.ptr, r2.ptr, r1.len) != 0)
		abort();
	kiln_buf_free(&r1);
	kiln_buf_free(&r2);
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static void check_lineage(kiln_json_scanner *s, const char *text, size_t len)
{
	kiln_mfmt_lineage a = {0}, b = {0};
	kiln_buf r1 = KILN_BUF_INIT(0), r2 = KILN_BUF_INIT(0);

	if (kiln_mfmt_lineage_parse(s, "fuzz", text, len, &a) < 0)
		goto done;
	if (kiln_mfmt_lineage_render(&r1, &a) < 0 ||
	    kiln_mfmt_lineage_parse(s, "fuzz", r1.ptr, r1.len, &b) < 0 || a.n != b.n)
		abort();
	for (size_t i = 0; i < a.n; i++) {
		const kiln_lineage_entry *x = &a.v[i], *y = &b.v[i];

		if (!x->topic || !x->source || !str_eq(x->source, y->source) ||
		    kiln_mfmt_lineage_source_wrong(x) || !str_eq(x->topic, y->topic) ||
		    x->partition != y->partition || x->next != y->next || !str_eq(x->path, y->path) ||
		    x->bytes != y->bytes || !str_eq(x->prefix_blake2b, y->prefix_blake2b) ||
		    x->skipped != y->skipped || x->gaps != y->gaps)
			abort();
		if (kiln_mfmt_lineage_find(&a, x->source, x->topic, x->partition) != (ptrdiff_t)i)
			abort();
	}
	if (kiln_mfmt_lineage_render(&r2, &b) < 0 || r1.len != r2.len || memcmp(r1.ptr, r2.ptr, r1.len) != 0)
		abort();
	kiln_mfmt_lineage_sort(&b);
	for (size_t i = 1; i < b.n; i++) {
		const kiln_lineage_entry *x = &b.v[i - 1], *y = &b.v[i];
		int c = strcmp(x->topic, y->topic);

		if (c == 0 && x->partition == y->partition)
			c = strcmp(x->source, y->source) < 0 ? -1 : 1; /* never equal: one entry per key */
		else if (c == 0)
			c = x->partition < y->partition ? -1 : 1;
		if (c > 0)
			abort();
	}
done:
	kiln_mfmt_lineage_free(&a);
	kiln_mfmt_lineage_free(&b);
	kiln_buf_free(&r1);
	kiln_buf_free(&r2);
}

static bool entries_equal(const kiln_shard_entry *a, const kiln_shard_entry *b)
{
	if (strcmp(a->hash, b->hash) != 0 || a->bytes != b->bytes || a->raw_bytes != b->raw_bytes ||
	    a->records != b->records || a->source_count != b->source_count)
		return false;
	for (size_t i = 0; i < a->source_count; i++) {
		const kiln_source_range *x = &a->sources[i], *y = &b->sources[i];

		if (strcmp(x->topic, y->topic) != 0 || x->partition != y->partition || x->first != y->first ||
		    x->last != y->last)
			return false;
	}
	return true;
}

static void check_line(kiln_json_scanner *s, const char *text, size_t len)
{
	kiln_buf strings = KILN_BUF_INIT(0), strings2 = KILN_BUF_INIT(0), r1 = KILN_BUF_INIT(0),
	         r2 = KILN_BUF_INIT(0);
	kiln_source_range *sources = NULL, *sources2 = NULL;
	size_t cap = 0, cap2 = 0;
	kiln_shard_entry full, refs, back;
	const char *hash = NULL;
	char fast[65];
	bool have_fast = kiln_mfmt_shard_line_fast_hash(text, len, fast);
	bool full_ok = kiln_mfmt_shard_line_parse(s, "fuzz", KILN_MFMT_LINE_FULL, text, len, &full, &strings,
	                                          &sources, &cap) == 0;
	bool refs_ok = kiln_mfmt_shard_line_parse(s, "fuzz", KILN_MFMT_LINE_REFS, text, len, &refs, &strings2,
	                                          &sources2, &cap2) == 0;

	if (have_fast && (strlen(fast) != 64 || memcmp(text + 10, fast, 64) != 0))
		abort();
	/* what the full parse accepts, the refs parse accepts and reads alike */
	if (full_ok && (!refs_ok || strcmp(full.hash, refs.hash) != 0 || full.bytes != refs.bytes ||
	                full.records != refs.records))
		abort();
	if (refs_ok) {
		if (strlen(refs.hash) != 64 || refs.source_count != 0)
			abort();
		if (have_fast && strcmp(fast, refs.hash) != 0)
			abort();
		if (kiln_mfmt_shard_line_hash(s, "fuzz", text, len, refs.hash, &hash) < 0 || !hash ||
		    memcmp(hash, refs.hash, 64) != 0 || hash < text || hash + 64 > text + len)
			abort();
	}
	if (full_ok) {
		if (kiln_mfmt_shard_line_render(&r1, &full) < 0)
			abort();
		kiln_buf_reset(&strings2);
		if (kiln_mfmt_shard_line_parse(s, "fuzz", KILN_MFMT_LINE_FULL, r1.ptr, r1.len, &back,
		                               &strings2, &sources2, &cap2) < 0 ||
		    !entries_equal(&full, &back))
			abort();
		if (!kiln_mfmt_shard_line_fast_hash(r1.ptr, r1.len, fast) || strcmp(fast, full.hash) != 0)
			abort();
		if (kiln_mfmt_shard_line_render(&r2, &back) < 0 || r1.len != r2.len ||
		    memcmp(r1.ptr, r2.ptr, r1.len) != 0)
			abort();
	}
	free(sources);
	free(sources2);
	kiln_buf_free(&strings);
	kiln_buf_free(&strings2);
	kiln_buf_free(&r1);
	kiln_buf_free(&r2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kiln_json_scanner *s;
	const char *text = (const char *)data + 1;
	size_t len = size ? size - 1 : 0;

	if (size == 0)
		return 0;
	if (!(s = kiln_json_scanner_new(NULL)))
		abort();
	switch (data[0] % 3) {
	case 0:
		check_stats(s, text, len);
		break;
	case 1:
		check_lineage(s, text, len);
		break;
	default:
		check_line(s, text, len);
		break;
	}
	kiln_json_scanner_free(s);
	return 0;
}
