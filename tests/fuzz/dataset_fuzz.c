/* libFuzzer target for dataset.json (manifest/format_dataset.c): parses the
 * input; a definition never differs from itself; when every member is set
 * and the number members hold numbers, the rendered text parses back to the
 * same members and renders to the same text (the dedup member too, when
 * its key is set and its window a number; its key text is the parser's own
 * rendering, so it comes back the same). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manifest/format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The members of d in one array, for walking them all. */
static size_t members(const kiln_mfmt_dataset *d, const char *out[32])
{
	size_t n = 0;

	out[n++] = d->name;
	out[n++] = d->contract_id;
	out[n++] = d->contract_version;
	out[n++] = d->contract_api_version;
	out[n++] = d->contract_schema;
	out[n++] = d->contract_digest;
	out[n++] = d->token_scheme;
	out[n++] = d->key_id;
	out[n++] = d->key_version;
	out[n++] = d->token_prefix;
	out[n++] = d->redact_marker;
	out[n++] = d->split_scheme;
	out[n++] = d->split_key;
	out[n++] = d->split_salt;
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		out[n++] = d->ratios[i];
	out[n++] = d->shard_format;
	out[n++] = d->shard_compression;
	out[n++] = d->zstd_level;
	out[n++] = d->target_bytes;
	out[n++] = d->shard_hash;
	out[n++] = d->shard_key;
	return n;
}

/* Whether s is one JSON number, as the renderer writes number members. */
static bool is_number(kiln_json_scanner *sc, const char *s)
{
	kiln_json_token t;

	kiln_json_scanner_reset(sc, s, strlen(s));
	return kiln_json_next(sc, &t) > 0 && t.type == KILN_JSON_NUMBER && kiln_json_next(sc, &t) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kiln_json_scanner *sc = kiln_json_scanner_new(NULL);
	kiln_mfmt_dataset a, b;
	kiln_buf r1 = KILN_BUF_INIT(0), r2 = KILN_BUF_INIT(0);
	const char *ma[32], *mb[32];
	size_t n;
	bool all = true;

	if (!sc)
		abort();
	if (kiln_mfmt_dataset_parse(sc, "fuzz", (const char *)data, size, &a) < 0) {
		/* a failed parse leaves nothing behind */
		n = members(&a, ma);
		for (size_t i = 0; i < n; i++)
			if (ma[i])
				abort();
		goto done;
	}
	if (kiln_mfmt_dataset_definition_differs(&a, &a) != NULL)
		abort();
	n = members(&a, ma);
	for (size_t i = 0; i < n; i++)
		if (!ma[i])
			all = false;
	if (!all)
		goto free_a;
	if (!is_number(sc, a.key_version) || !is_number(sc, a.zstd_level) || !is_number(sc, a.target_bytes))
		goto free_a;
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		if (!is_number(sc, a.ratios[i]))
			goto free_a;
	if (a.dedup_key && (!a.dedup_window_seconds || !is_number(sc, a.dedup_window_seconds)))
		goto free_a;
	if (kiln_mfmt_dataset_render(&r1, &a) < 0 ||
	    kiln_mfmt_dataset_parse(sc, "fuzz", r1.ptr, r1.len, &b) < 0)
		abort();
	members(&b, mb);
	for (size_t i = 0; i < n; i++)
		if (!mb[i] || strcmp(ma[i], mb[i]) != 0)
			abort();
	if (!b.have_pseudonymisation || !b.have_split || kiln_mfmt_dataset_definition_differs(&a, &b) != NULL)
		abort();
	if (!a.dedup_key != !b.dedup_key ||
	    (a.dedup_key && (strcmp(a.dedup_key, b.dedup_key) != 0 ||
	                     strcmp(a.dedup_window_seconds, b.dedup_window_seconds) != 0)))
		abort();
	if (kiln_mfmt_dataset_render(&r2, &b) < 0 || r1.len != r2.len || memcmp(r1.ptr, r2.ptr, r1.len) != 0)
		abort();
	kiln_mfmt_dataset_free(&b);
free_a:
	kiln_mfmt_dataset_free(&a);
done:
	kiln_buf_free(&r1);
	kiln_buf_free(&r2);
	kiln_json_scanner_free(sc);
	return 0;
}
