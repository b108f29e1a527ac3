/* The manifest codec's dataset.json and governance record (see format.h):
 * the dataset definition rendered and parsed member by member, the check of
 * whether two definitions differ where a branch may not, and the governance
 * text a promotion writes. Stateless; nothing here touches git. */
#include "manifest/format.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "manifest/format_internal.h"

/* ---- dataset.json --------------------------------------------------------- */

/* Where each member lives: its dotted path. */
static const struct {
	const char *path;
	size_t offset;
} dataset_members[] = {
#define M(path, field)                                                                                       \
	{                                                                                                    \
		path, offsetof(kiln_mfmt_dataset, field)                                                     \
	}
    M("name", name),
    M("contract.id", contract_id),
    M("contract.version", contract_version),
    M("contract.api_version", contract_api_version),
    M("contract.schema", contract_schema),
    M("contract.digest", contract_digest),
    M("pseudonymisation.scheme", token_scheme),
    M("pseudonymisation.key_id", key_id),
    M("pseudonymisation.key_version", key_version),
    M("pseudonymisation.prefix", token_prefix),
    M("pseudonymisation.redact_marker", redact_marker),
    M("split.scheme", split_scheme),
    M("split.key", split_key),
    M("split.salt", split_salt),
    M("split.ratios.train", ratios[KILN_SPLIT_TRAIN]),
    M("split.ratios.dev", ratios[KILN_SPLIT_DEV]),
    M("split.ratios.test", ratios[KILN_SPLIT_TEST]),
    M("shards.format", shard_format),
    M("shards.compression", shard_compression),
    M("shards.zstd_level", zstd_level),
    M("shards.target_bytes", target_bytes),
    M("shards.hash", shard_hash),
    M("shards.key", shard_key),
    M("dedup.key", dedup_key),
    M("dedup.window_seconds", dedup_window_seconds),
#undef M
};

#define DATASET_DEPTH 3 /* the deepest member: split.ratios.<split> */

void kiln_mfmt_dataset_free(kiln_mfmt_dataset *d)
{
	if (d->owned)
		for (size_t i = 0; i < sizeof(dataset_members) / sizeof(dataset_members[0]); i++)
			free(*(char **)((char *)d + dataset_members[i].offset));
	memset(d, 0, sizeof(*d));
}

/* The member at keys[0..depth) ("split", "ratios", "dev"), or NULL. */
static const char **dataset_member(kiln_mfmt_dataset *d, char keys[DATASET_DEPTH][64], size_t depth)
{
	char path[3 * 64 + 3];
	size_t n = 0;

	for (size_t i = 0; i < depth; i++)
		n += (size_t)snprintf(path + n, sizeof(path) - n, "%s%s", i ? "." : "", keys[i]);
	for (size_t i = 0; i < sizeof(dataset_members) / sizeof(dataset_members[0]); i++)
		if (strcmp(path, dataset_members[i].path) == 0)
			return (const char **)((char *)d + dataset_members[i].offset);
	return NULL;
}

int kiln_mfmt_dedup_key_render(kiln_buf *b, const char *const *paths, size_t count)
{
	int rc = kiln_buf_putc(b, '[');

	for (size_t i = 0; rc == 0 && i < count; i++)
		if ((i && (rc = kiln_buf_putc(b, ',')) < 0) ||
		    (rc = kiln_buf_put_json_string(b, paths[i], strlen(paths[i]))) < 0)
			break;
	return rc < 0 ? rc : kiln_buf_putc(b, ']');
}

/* dedup.key's value (t, its first token): an array of 1 to 16 strings,
 * rendered again as kiln_mfmt_dedup_key_render writes it (*out malloc'd). */
static int parse_dedup_key(kiln_mfmt_jreader *r, kiln_json_token *t, char **out)
{
	kiln_buf text = KILN_BUF_INIT(0);
	char path[512];
	size_t count = 0;
	int rc = 0;

	*out = NULL;
	if (t->type != KILN_JSON_ARRAY_BEGIN)
		return kiln_mfmt_jr_bad(r, "dedup.key is not an array of field paths");
	rc = kiln_buf_putc(&text, '[');
	while (rc == 0 && (rc = kiln_mfmt_jr_next(r, t)) == 0 && t->type != KILN_JSON_ARRAY_END) {
		size_t n;

		if (t->type != KILN_JSON_STRING || t->len >= sizeof(path) || ++count > 16) {
			rc = kiln_mfmt_jr_bad(r, "dedup.key is not an array of 1 to 16 field paths");
			break;
		}
		n = kiln_json_unescape(path, sizeof(path), t);
		if (memchr(path, '\0', n)) {
			rc = kiln_mfmt_jr_bad(r, "a member holds a NUL character");
			break;
		}
		if ((count > 1 && (rc = kiln_buf_putc(&text, ',')) < 0) ||
		    (rc = kiln_buf_put_json_string(&text, path, n)) < 0)
			break;
	}
	if (rc == 0 && count == 0)
		rc = kiln_mfmt_jr_bad(r, "dedup.key is not an array of 1 to 16 field paths");
	if (rc == 0 && (rc = kiln_buf_putc(&text, ']')) == 0 && (rc = kiln_buf_putc(&text, '\0')) == 0) {
		*out = text.ptr;
		return 0;
	}
	kiln_buf_free(&text);
	return rc;
}

int kiln_mfmt_dataset_parse(kiln_json_scanner *scanner, const char *where, const char *text, size_t len,
                            kiln_mfmt_dataset *out)
{
	kiln_mfmt_jreader r = {scanner, where};
	char keys[DATASET_DEPTH][64];
	kiln_json_token t;
	int rc;

	memset(out, 0, sizeof(*out));
	out->owned = true;
	if ((rc = kiln_mfmt_jr_begin(&r, text, len, "must be an object")) < 0)
		return rc;
	for (;;) {
		const char **field;
		uint32_t depth;
		char *s;

		if ((rc = kiln_mfmt_jr_next(&r, &t)) < 0)
			goto fail;
		if (t.type == KILN_JSON_OBJECT_END && t.depth == 0)
			break;
		if (t.type == KILN_JSON_ARRAY_BEGIN && t.depth < DATASET_DEPTH)
			strcpy(keys[t.depth], "[]"); /* members inside arrays are none of ours */
		if (t.type != KILN_JSON_KEY)
			continue;
		depth = t.depth; /* 1 for a top-level member */
		if (depth > DATASET_DEPTH || t.len >= sizeof(keys[0])) {
			if ((rc = kiln_mfmt_jr_skip(&r)) < 0)
				goto fail;
			continue;
		}
		keys[depth - 1][kiln_json_unescape(keys[depth - 1], sizeof(keys[0]), &t)] = '\0';
		for (uint32_t i = depth; i < DATASET_DEPTH; i++)
			keys[i][0] = '\0';
		if (depth == 1 && strcmp(keys[0], "pseudonymisation") == 0)
			out->have_pseudonymisation = true;
		if (depth == 1 && strcmp(keys[0], "split") == 0)
			out->have_split = true;
		if (!(field = dataset_member(out, keys, depth)))
			continue; /* a container walks on; another value is skipped below */
		if ((rc = kiln_mfmt_jr_next(&r, &t)) < 0)
			goto fail;
		if (field == &out->dedup_key) {
			if ((rc = parse_dedup_key(&r, &t, &s)) < 0)
				goto fail;
			free((char *)*field);
			*field = s;
			continue;
		}
		if (t.type == KILN_JSON_OBJECT_BEGIN || t.type == KILN_JSON_ARRAY_BEGIN) {
			rc = kiln_mfmt_jr_bad(&r, "a member holds a container where a value belongs");
			goto fail;
		}
		if (!(s = malloc(t.len + 1))) {
			rc = kiln_error_oom("manifest");
			goto fail;
		}
		if (t.type == KILN_JSON_STRING) {
			size_t n = kiln_json_unescape(s, t.len + 1, &t);

			s[n] = '\0';
			if (memchr(s, '\0', n)) {
				free(s);
				rc = kiln_mfmt_jr_bad(&r, "a member holds a NUL character");
				goto fail;
			}
		} else {
			memcpy(s, t.ptr, t.len);
			s[t.len] = '\0';
		}
		free((char *)*field);
		*field = s;
	}
	if ((rc = kiln_mfmt_jr_end(&r)) < 0)
		goto fail;
	return 0;
fail:
	kiln_mfmt_dataset_free(out);
	return rc;
}

static int put_string(kiln_buf *b, const char *s)
{
	return kiln_buf_put_json_string(b, s, strlen(s));
}

int kiln_mfmt_dataset_render(kiln_buf *b, const kiln_mfmt_dataset *d)
{
	int rc = 0;

	rc |= kiln_buf_puts(b, "{\n  \"name\": ");
	rc |= put_string(b, d->name);
	rc |= kiln_buf_puts(b, ",\n  \"contract\": {\"id\":");
	rc |= put_string(b, d->contract_id);
	rc |= kiln_buf_puts(b, ",\"version\":");
	rc |= put_string(b, d->contract_version);
	rc |= kiln_buf_puts(b, ",\"api_version\":");
	rc |= put_string(b, d->contract_api_version);
	rc |= kiln_buf_puts(b, ",\"schema\":");
	rc |= put_string(b, d->contract_schema);
	rc |= kiln_buf_puts(b, ",\"digest\":");
	rc |= put_string(b, d->contract_digest);
	rc |= kiln_buf_puts(b, "},\n  \"pseudonymisation\": {\"scheme\":");
	rc |= put_string(b, d->token_scheme);
	rc |= kiln_buf_puts(b, ",\"key_id\":");
	rc |= put_string(b, d->key_id);
	rc |= kiln_buf_printf(b, ",\"key_version\":%s,\"prefix\":", d->key_version);
	rc |= put_string(b, d->token_prefix);
	rc |= kiln_buf_puts(b, ",\"redact_marker\":");
	rc |= put_string(b, d->redact_marker);
	rc |= kiln_buf_puts(b, "},\n  \"split\": {\"scheme\":");
	rc |= put_string(b, d->split_scheme);
	rc |= kiln_buf_puts(b, ",\"key\":");
	rc |= put_string(b, d->split_key);
	rc |= kiln_buf_puts(b, ",\"salt\":");
	rc |= put_string(b, d->split_salt);
	rc |= kiln_buf_puts(b, ",\"ratios\":{");
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		rc |= kiln_buf_printf(b, "%s\"%s\":%s", i ? "," : "", kiln_split_name((kiln_split)i),
		                      d->ratios[i]);
	rc |= kiln_buf_puts(b, "}},\n  \"shards\": {\"format\":");
	rc |= put_string(b, d->shard_format);
	rc |= kiln_buf_puts(b, ",\"compression\":");
	rc |= put_string(b, d->shard_compression);
	rc |= kiln_buf_printf(b, ",\"zstd_level\":%s,\"target_bytes\":%s,\"hash\":", d->zstd_level,
	                      d->target_bytes);
	rc |= put_string(b, d->shard_hash);
	rc |= kiln_buf_puts(b, ",\"key\":");
	rc |= put_string(b, d->shard_key);
	if (d->dedup_key)
		rc |= kiln_buf_printf(b, "},\n  \"dedup\": {\"key\":%s,\"window_seconds\":%s", d->dedup_key,
		                      d->dedup_window_seconds);
	rc |= kiln_buf_puts(b, "}\n}\n");
	return rc ? kiln_error_oom("manifest") : 0;
}

static bool text_equal(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

const char *kiln_mfmt_dataset_definition_differs(const kiln_mfmt_dataset *a, const kiln_mfmt_dataset *b)
{
	if (a->have_pseudonymisation != b->have_pseudonymisation ||
	    !text_equal(a->token_scheme, b->token_scheme) || !text_equal(a->key_id, b->key_id) ||
	    !text_equal(a->key_version, b->key_version) || !text_equal(a->token_prefix, b->token_prefix) ||
	    !text_equal(a->redact_marker, b->redact_marker))
		return "pseudonymisation";
	if (a->have_split != b->have_split || !text_equal(a->split_scheme, b->split_scheme) ||
	    !text_equal(a->split_key, b->split_key) || !text_equal(a->split_salt, b->split_salt))
		return "split";
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		if (!text_equal(a->ratios[i], b->ratios[i]))
			return "split";
	return NULL;
}

/* ---- the governance record ------------------------------------------------ */

static const char *or_unknown(const char *s)
{
	return s ? s : "?";
}

int kiln_mfmt_governance_render(kiln_buf *b, const kiln_mfmt_governance *g)
{
	const kiln_mfmt_dataset *d = g->definition;
	const kiln_stats *st = g->stats;
	int rc = 0;

	rc |= kiln_buf_printf(b, "%s %s\n\ncommit: %s\nfrom: %s\nsource offsets: ", g->dataset, g->version,
	                      g->commit, g->from);
	for (size_t i = 0; i < g->lineage->n; i++) {
		const kiln_lineage_entry *e = &g->lineage->v[i];

		rc |= kiln_buf_printf(b, "%s%s%s%s/%" PRId32 " next %" PRId64, i ? ", " : "",
		                      kiln_mfmt_lineage_shared(g->lineage, i) ? e->source : "",
		                      kiln_mfmt_lineage_shared(g->lineage, i) ? ":" : "", e->topic,
		                      e->partition, e->next);
	}
	if (g->lineage->n == 0)
		rc |= kiln_buf_puts(b, "none");
	rc |= kiln_buf_printf(
	    b, "\ncontract: %s %s (%s)\nkey id: %s\nsplit: %s key %s salt %s\n", or_unknown(d->contract_id),
	    or_unknown(d->contract_version), or_unknown(d->contract_digest), or_unknown(d->key_id),
	    or_unknown(d->split_scheme), or_unknown(d->split_key), or_unknown(d->split_salt));
	rc |= kiln_buf_printf(b, "records: %" PRIu64 " in, %" PRIu64 " valid, %" PRIu64 " quarantined",
	                      st->records_in, st->valid, st->quarantined);
	if (st->erased)
		rc |= kiln_buf_printf(b, ", %" PRIu64 " erased", st->erased);
	rc |= kiln_buf_putc(b, '\n');
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		rc |= kiln_buf_printf(b, "%s: %" PRIu64 " records in %" PRIu64 " shards\n",
		                      kiln_split_name((kiln_split)i), st->splits[i].records,
		                      st->splits[i].shards);
	rc |= kiln_buf_puts(b, "gates:\n");
	if (g->gate_count == 0)
		rc |= kiln_buf_puts(b, "  none configured\n");
	for (size_t i = 0; i < g->gate_count; i++)
		rc |= kiln_buf_printf(b, "  %s\n", g->gates[i]);
	return rc ? kiln_error_oom("manifest") : 0;
}
