/* The manifest codec (see format.h): the naming rules, the reader every
 * parser uses (format_internal.h) over the JSON scanner of core/json.h, and
 * the renderers and parsers of stats.json, lineage.json and the split
 * files; dataset.json and the governance record are in format_dataset.c.
 * Stateless; nothing here touches git. */
#include "manifest/format.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/reject.h"
#include "manifest/format_internal.h"

#define HASH_LEN 64

static bool hex_valid(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* ---- names ---------------------------------------------------------------- */

bool kiln_mfmt_name_valid_n(const char *s, size_t n)
{
	if (!s || n == 0 || n > KILN_MFMT_NAME_MAX ||
	    !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 1; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

bool kiln_mfmt_name_valid(const char *s)
{
	return s && kiln_mfmt_name_valid_n(s, strnlen(s, KILN_MFMT_NAME_MAX + 1));
}

/* ---- integers ------------------------------------------------------------- */

/* The magnitude and sign of an integer token. */
static int token_int(const kiln_json_token *t, bool negative_ok, uint64_t *out_mag, bool *out_neg)
{
	uint64_t v = 0;
	size_t i = 0;
	bool neg;

	if (t->type != KILN_JSON_NUMBER || !(t->flags & KILN_JSON_INTEGER) || t->len == 0)
		return KILN_MFMT_NOT_INTEGER;
	neg = t->ptr[0] == '-';
	if (neg) {
		if (!negative_ok)
			return KILN_MFMT_NOT_INTEGER;
		i = 1;
	}
	for (; i < t->len; i++) {
		unsigned d = (unsigned)(t->ptr[i] - '0');

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return KILN_MFMT_NOT_INTEGER;
		v = v * 10 + d;
	}
	*out_mag = v;
	*out_neg = neg;
	return 0;
}

int kiln_mfmt_token_u64(const kiln_json_token *t, uint64_t *out)
{
	bool neg;

	return token_int(t, false, out, &neg);
}

int kiln_mfmt_token_i64(const kiln_json_token *t, int64_t lo, int64_t hi, int64_t *out)
{
	uint64_t mag = 0;
	bool neg = false;
	int64_t v;
	int rc = token_int(t, true, &mag, &neg);

	if (rc < 0)
		return rc;
	if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX)
		return KILN_MFMT_OUT_OF_RANGE;
	v = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
	if (v < lo || v > hi)
		return KILN_MFMT_OUT_OF_RANGE;
	*out = v;
	return 0;
}

/* ---- reading a file with the scanner -------------------------------------- */

int kiln_mfmt_jr_bad(const kiln_mfmt_jreader *r, const char *what)
{
	return kiln_error_set(KILN_EINVALID, "%s: %s", r->where, what);
}

int kiln_mfmt_jr_next(kiln_mfmt_jreader *r, kiln_json_token *t)
{
	int rc = kiln_json_next(r->scanner, t);
	size_t off = 0;
	kiln_reject code;

	if (rc > 0)
		return 0;
	if (rc == 0)
		return kiln_mfmt_jr_bad(r, "unexpected end of text");
	code = kiln_json_scanner_error(r->scanner, &off, NULL);
	return kiln_error_set(KILN_EINVALID, "%s: %s at byte %zu", r->where, kiln_reject_name(code), off);
}

static int jr_expect(kiln_mfmt_jreader *r, kiln_json_token *t, kiln_json_type type, const char *what)
{
	int rc = kiln_mfmt_jr_next(r, t);

	if (rc < 0)
		return rc;
	return t->type == type ? 0 : kiln_mfmt_jr_bad(r, what);
}

/* After the top-level value: nothing but whitespace. */
int kiln_mfmt_jr_end(kiln_mfmt_jreader *r)
{
	kiln_json_token t;
	int rc = kiln_json_next(r->scanner, &t);

	if (rc == 0)
		return 0;
	if (rc > 0)
		return kiln_mfmt_jr_bad(r, "text after the top-level value");
	return kiln_mfmt_jr_next(r, &t);
}

/* Starts reading text: its top-level value must be an object ("where: what"). */
int kiln_mfmt_jr_begin(kiln_mfmt_jreader *r, const char *text, size_t len, const char *what)
{
	kiln_json_token t;

	kiln_json_scanner_reset(r->scanner, text, len);
	return jr_expect(r, &t, KILN_JSON_OBJECT_BEGIN, what);
}

/* The next member's key into *t: 1, or 0 at the end of the object. */
static int jr_next_key(kiln_mfmt_jreader *r, kiln_json_token *t)
{
	int rc = kiln_mfmt_jr_next(r, t);

	if (rc < 0)
		return rc;
	return t->type == KILN_JSON_OBJECT_END ? 0 : 1;
}

/* The next entry of an array of objects: 1 at an entry's '{', 0 at the
 * array's end; anything else is bad (what). */
static int jr_next_object(kiln_mfmt_jreader *r, kiln_json_token *t, const char *what)
{
	int rc = kiln_mfmt_jr_next(r, t);

	if (rc < 0)
		return rc;
	if (t->type == KILN_JSON_ARRAY_END)
		return 0;
	return t->type == KILN_JSON_OBJECT_BEGIN ? 1 : kiln_mfmt_jr_bad(r, what);
}

/* Whether key token t decodes to name. */
static bool jr_key_is(const kiln_json_token *t, const char *name)
{
	char tmp[64];
	size_t n;

	if (t->len >= sizeof(tmp))
		return false;
	n = kiln_json_unescape(tmp, sizeof(tmp), t);
	return n == strlen(name) && memcmp(tmp, name, n) == 0;
}

static int jr_u64(kiln_mfmt_jreader *r, const char *field, uint64_t *out)
{
	kiln_json_token t;
	char msg[96];
	int rc = kiln_mfmt_jr_next(r, &t);

	if (rc < 0)
		return rc;
	if (kiln_mfmt_token_u64(&t, out) == 0)
		return 0;
	snprintf(msg, sizeof(msg), "\"%s\" must be a non-negative integer", field);
	return kiln_mfmt_jr_bad(r, msg);
}

static int jr_i64(kiln_mfmt_jreader *r, const char *field, int64_t lo, int64_t hi, int64_t *out)
{
	kiln_json_token t;
	char msg[96];
	int rc = kiln_mfmt_jr_next(r, &t);

	if (rc < 0)
		return rc;
	rc = kiln_mfmt_token_i64(&t, lo, hi, out);
	if (rc == 0)
		return 0;
	if (rc == KILN_MFMT_NOT_INTEGER)
		snprintf(msg, sizeof(msg), "\"%s\" must be an integer", field);
	else
		snprintf(msg, sizeof(msg), "\"%s\" is out of range", field);
	return kiln_mfmt_jr_bad(r, msg);
}

/* A string value, decoded into a fresh NUL-terminated copy. */
static int jr_string(kiln_mfmt_jreader *r, const char *field, char **out)
{
	kiln_json_token t;
	size_t n;
	char *s;
	char msg[96];
	int rc = kiln_mfmt_jr_next(r, &t);

	if (rc < 0)
		return rc;
	snprintf(msg, sizeof(msg), "\"%s\" must be a string", field);
	if (t.type != KILN_JSON_STRING)
		return kiln_mfmt_jr_bad(r, msg);
	s = malloc(t.len + 1);
	if (!s)
		return kiln_error_oom("manifest");
	n = kiln_json_unescape(s, t.len + 1, &t);
	s[n] = '\0';
	if (memchr(s, '\0', n)) {
		free(s);
		snprintf(msg, sizeof(msg), "\"%s\" holds a NUL character", field);
		return kiln_mfmt_jr_bad(r, msg);
	}
	*out = s;
	return 0;
}

/* The value of "shard" into *t: 64 lower-case hex digits, unescaped. */
static int jr_shard_hash(kiln_mfmt_jreader *r, kiln_json_token *t)
{
	int rc = kiln_mfmt_jr_next(r, t);

	if (rc < 0)
		return rc;
	if (t->type != KILN_JSON_STRING || t->len != HASH_LEN || (t->flags & KILN_JSON_ESCAPED) ||
	    !hex_valid(t->ptr, HASH_LEN))
		return kiln_mfmt_jr_bad(r, "\"shard\" must be 64 lower-case hex digits");
	return 0;
}

/* Skips the value that follows a key. */
int kiln_mfmt_jr_skip(kiln_mfmt_jreader *r)
{
	kiln_json_token t;
	int depth = 0;

	do {
		int rc = kiln_mfmt_jr_next(r, &t);

		if (rc < 0)
			return rc;
		if (t.type == KILN_JSON_OBJECT_BEGIN || t.type == KILN_JSON_ARRAY_BEGIN)
			depth++;
		else if (t.type == KILN_JSON_OBJECT_END || t.type == KILN_JSON_ARRAY_END)
			depth--;
	} while (depth > 0);
	return 0;
}

/* ---- stats.json ----------------------------------------------------------- */

static int parse_split_stats(kiln_mfmt_jreader *r, kiln_split_stats *s)
{
	kiln_json_token t;
	int rc;

	if ((rc = jr_expect(r, &t, KILN_JSON_OBJECT_BEGIN, "a split's stats must be an object")) < 0)
		return rc;
	while ((rc = jr_next_key(r, &t)) > 0) {
		if (jr_key_is(&t, "records"))
			rc = jr_u64(r, "records", &s->records);
		else if (jr_key_is(&t, "shards"))
			rc = jr_u64(r, "shards", &s->shards);
		else if (jr_key_is(&t, "bytes"))
			rc = jr_u64(r, "bytes", &s->bytes);
		else if (jr_key_is(&t, "raw_bytes"))
			rc = jr_u64(r, "raw_bytes", &s->raw_bytes);
		else
			rc = kiln_mfmt_jr_bad(r, "unexpected key in a split's stats");
		if (rc < 0)
			return rc;
	}
	return rc;
}

static int parse_codes(kiln_mfmt_jreader *r, kiln_stats *out)
{
	kiln_json_token t;
	int rc;

	if ((rc = jr_expect(r, &t, KILN_JSON_OBJECT_BEGIN, "\"quarantined_by_code\" must be an object")) < 0)
		return rc;
	while ((rc = jr_next_key(r, &t)) > 0) {
		int code = 1;

		while (code < KILN_REJECT_COUNT_ && !jr_key_is(&t, kiln_reject_name((kiln_reject)code)))
			code++;
		if (code == KILN_REJECT_COUNT_)
			return kiln_mfmt_jr_bad(r, "unknown code in \"quarantined_by_code\"");
		if ((rc = jr_u64(r, "quarantined_by_code", &out->quarantined_by_code[code])) < 0)
			return rc;
	}
	return rc;
}

static int parse_splits(kiln_mfmt_jreader *r, kiln_stats *out)
{
	kiln_json_token t;
	int rc;

	if ((rc = jr_expect(r, &t, KILN_JSON_OBJECT_BEGIN, "\"splits\" must be an object")) < 0)
		return rc;
	while ((rc = jr_next_key(r, &t)) > 0) {
		int split = 0;

		while (split < KILN_SPLIT_COUNT && !jr_key_is(&t, kiln_split_name((kiln_split)split)))
			split++;
		if (split == KILN_SPLIT_COUNT)
			return kiln_mfmt_jr_bad(r, "unknown split in \"splits\"");
		if ((rc = parse_split_stats(r, &out->splits[split])) < 0)
			return rc;
	}
	return rc;
}

int kiln_mfmt_stats_parse(kiln_json_scanner *scanner, const char *where, const char *text, size_t len,
                          kiln_stats *out)
{
	kiln_mfmt_jreader r = {scanner, where};
	kiln_json_token t;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = kiln_mfmt_jr_begin(&r, text, len, "must be an object")) < 0)
		return rc;
	while ((rc = jr_next_key(&r, &t)) > 0) {
		if (jr_key_is(&t, "records_in"))
			rc = jr_u64(&r, "records_in", &out->records_in);
		else if (jr_key_is(&t, "valid"))
			rc = jr_u64(&r, "valid", &out->valid);
		else if (jr_key_is(&t, "quarantined"))
			rc = jr_u64(&r, "quarantined", &out->quarantined);
		else if (jr_key_is(&t, "erased"))
			rc = jr_u64(&r, "erased", &out->erased);
		else if (jr_key_is(&t, "quarantined_by_code"))
			rc = parse_codes(&r, out);
		else if (jr_key_is(&t, "splits"))
			rc = parse_splits(&r, out);
		else
			rc = kiln_mfmt_jr_bad(&r, "unexpected key at the top level");
		if (rc < 0)
			return rc;
	}
	return rc < 0 ? rc : kiln_mfmt_jr_end(&r);
}

int kiln_mfmt_stats_render(kiln_buf *out, const kiln_stats *s)
{
	bool first = true;
	int rc;

	rc = kiln_buf_printf(out,
	                     "{\n  \"records_in\": %" PRIu64 ",\n  \"valid\": %" PRIu64
	                     ",\n  \"quarantined\": %" PRIu64 ",\n",
	                     s->records_in, s->valid, s->quarantined);
	/* only when non-zero: a stats.json of a version never erased is unchanged */
	if (rc == 0 && s->erased)
		rc = kiln_buf_printf(out, "  \"erased\": %" PRIu64 ",\n", s->erased);
	if (rc == 0)
		rc = kiln_buf_puts(out, "  \"quarantined_by_code\": {");
	for (int c = 1; rc == 0 && c < KILN_REJECT_COUNT_; c++) {
		if (!s->quarantined_by_code[c])
			continue;
		rc = kiln_buf_printf(out, "%s\"%s\":%" PRIu64, first ? "" : ",",
		                     kiln_reject_name((kiln_reject)c), s->quarantined_by_code[c]);
		first = false;
	}
	if (rc == 0)
		rc = kiln_buf_puts(out, "},\n  \"splits\": {\n");
	for (int i = 0; rc == 0 && i < KILN_SPLIT_COUNT; i++) {
		const kiln_split_stats *p = &s->splits[i];

		rc = kiln_buf_printf(out,
		                     "    \"%s\": {\"records\":%" PRIu64 ",\"shards\":%" PRIu64
		                     ",\"bytes\":%" PRIu64 ",\"raw_bytes\":%" PRIu64 "}%s\n",
		                     kiln_split_name((kiln_split)i), p->records, p->shards, p->bytes,
		                     p->raw_bytes, i + 1 < KILN_SPLIT_COUNT ? "," : "");
	}
	if (rc == 0)
		rc = kiln_buf_puts(out, "  }\n}\n");
	return rc < 0 ? kiln_error_oom("manifest") : 0;
}

/* ---- lineage.json --------------------------------------------------------- */

static void lineage_entry_free_strings(kiln_lineage_entry *e)
{
	free((char *)e->topic);
	free((char *)e->path);
	free((char *)e->prefix_blake2b);
}

void kiln_mfmt_lineage_free(kiln_mfmt_lineage *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->owned[i])
			lineage_entry_free_strings(&l->v[i]);
	free(l->v);
	free(l->owned);
	memset(l, 0, sizeof(*l));
}

int kiln_mfmt_lineage_push(kiln_mfmt_lineage *l, const kiln_lineage_entry *e, bool owned)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		kiln_lineage_entry *v = realloc(l->v, cap * sizeof(*v));
		bool *o;

		if (!v)
			return kiln_error_oom("manifest");
		l->v = v;
		o = realloc(l->owned, cap * sizeof(*o));
		if (!o)
			return kiln_error_oom("manifest");
		l->owned = o;
		l->cap = cap;
	}
	l->v[l->n] = *e;
	l->owned[l->n] = owned;
	l->n++;
	return 0;
}

ptrdiff_t kiln_mfmt_lineage_find(const kiln_mfmt_lineage *l, const char *topic, int32_t partition)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].partition == partition && strcmp(l->v[i].topic, topic) == 0)
			return (ptrdiff_t)i;
	return -1;
}

static int lineage_cmp(const void *a, const void *b)
{
	const kiln_lineage_entry *x = a, *y = b;
	int c = strcmp(x->topic, y->topic);

	if (c)
		return c;
	return (x->partition > y->partition) - (x->partition < y->partition);
}

void kiln_mfmt_lineage_sort(kiln_mfmt_lineage *l)
{
	/* the owned flags go with their entries: sort pairs through an index */
	if (l->n < 2)
		return;
	for (size_t i = 1; i < l->n; i++) {
		kiln_lineage_entry e = l->v[i];
		bool o = l->owned[i];
		size_t j = i;

		for (; j > 0 && lineage_cmp(&l->v[j - 1], &e) > 0; j--) {
			l->v[j] = l->v[j - 1];
			l->owned[j] = l->owned[j - 1];
		}
		l->v[j] = e;
		l->owned[j] = o;
	}
}

static int parse_lineage_entry(kiln_mfmt_jreader *r, kiln_mfmt_lineage *out)
{
	kiln_lineage_entry e = {0};
	kiln_json_token t;
	bool have_partition = false, have_next = false, have_bytes = false;
	int rc;

	while ((rc = jr_next_key(r, &t)) > 0) {
		int64_t v;

		if (jr_key_is(&t, "topic") && !e.topic) {
			rc = jr_string(r, "topic", (char **)&e.topic);
		} else if (jr_key_is(&t, "partition")) {
			rc = jr_i64(r, "partition", INT32_MIN, INT32_MAX, &v);
			e.partition = (int32_t)v;
			have_partition = true;
		} else if (jr_key_is(&t, "next")) {
			rc = jr_i64(r, "next", INT64_MIN, INT64_MAX, &e.next);
			have_next = true;
		} else if (jr_key_is(&t, "path") && !e.path) {
			rc = jr_string(r, "path", (char **)&e.path);
		} else if (jr_key_is(&t, "bytes")) {
			rc = jr_u64(r, "bytes", &e.bytes);
			have_bytes = true;
		} else if (jr_key_is(&t, "skipped")) {
			rc = jr_u64(r, "skipped", &e.skipped);
		} else if (jr_key_is(&t, "gaps")) {
			rc = jr_u64(r, "gaps", &e.gaps);
		} else if (jr_key_is(&t, "prefix_blake2b") && !e.prefix_blake2b) {
			rc = jr_string(r, "prefix_blake2b", (char **)&e.prefix_blake2b);
			if (rc == 0 &&
			    !(strlen(e.prefix_blake2b) == HASH_LEN && hex_valid(e.prefix_blake2b, HASH_LEN)))
				rc = kiln_mfmt_jr_bad(r,
				                      "\"prefix_blake2b\" must be 64 lower-case hex digits");
		} else {
			rc = kiln_mfmt_jr_bad(r, "unexpected key in a partitions entry");
		}
		if (rc < 0)
			goto fail;
	}
	if (rc < 0)
		goto fail;
	if (!e.topic || !have_partition || !have_next) {
		rc = kiln_mfmt_jr_bad(r, "a partitions entry needs \"topic\", \"partition\" and \"next\"");
		goto fail;
	}
	if (e.skipped && !e.gaps) { /* the renderer writes both only when there were gaps */
		rc = kiln_mfmt_jr_bad(r, "\"skipped\" without \"gaps\"");
		goto fail;
	}
	if ((e.path != NULL) != (e.prefix_blake2b != NULL) || (e.path != NULL) != have_bytes) {
		rc = kiln_mfmt_jr_bad(r, "\"path\", \"bytes\" and \"prefix_blake2b\" come together");
		goto fail;
	}
	if (kiln_mfmt_lineage_find(out, e.topic, e.partition) >= 0) {
		rc = kiln_mfmt_jr_bad(r, "two entries for one topic and partition");
		goto fail;
	}
	if ((rc = kiln_mfmt_lineage_push(out, &e, true)) < 0)
		goto fail;
	return 0;
fail:
	lineage_entry_free_strings(&e);
	return rc;
}

int kiln_mfmt_lineage_parse(kiln_json_scanner *scanner, const char *where, const char *text, size_t len,
                            kiln_mfmt_lineage *out)
{
	kiln_mfmt_jreader r = {scanner, where};
	kiln_json_token t;
	bool have_partitions = false;
	int rc;

	if ((rc = kiln_mfmt_jr_begin(&r, text, len, "must be an object")) < 0)
		return rc;
	while ((rc = jr_next_key(&r, &t)) > 0) {
		if (!jr_key_is(&t, "partitions"))
			return kiln_mfmt_jr_bad(&r, "unexpected key at the top level");
		have_partitions = true;
		if ((rc = jr_expect(&r, &t, KILN_JSON_ARRAY_BEGIN, "\"partitions\" must be an array")) < 0)
			return rc;
		while ((rc = jr_next_object(&r, &t, "\"partitions\" entries must be objects")) > 0)
			if ((rc = parse_lineage_entry(&r, out)) < 0)
				return rc;
		if (rc < 0)
			return rc;
	}
	if (rc < 0)
		return rc;
	if (!have_partitions)
		return kiln_mfmt_jr_bad(&r, "missing \"partitions\"");
	return kiln_mfmt_jr_end(&r);
}

int kiln_mfmt_lineage_render(kiln_buf *out, const kiln_mfmt_lineage *l)
{
	int rc = kiln_buf_puts(out, "{\n  \"partitions\": [");

	for (size_t i = 0; rc == 0 && i < l->n; i++) {
		const kiln_lineage_entry *e = &l->v[i];

		rc = kiln_buf_puts(out, i ? ",\n    {\"topic\":" : "\n    {\"topic\":");
		if (rc == 0)
			rc = kiln_buf_put_json_string(out, e->topic, strlen(e->topic));
		if (rc == 0)
			rc = kiln_buf_printf(out, ",\"partition\":%" PRId32 ",\"next\":%" PRId64,
			                     e->partition, e->next);
		if (rc == 0 && e->path) {
			rc = kiln_buf_puts(out, ",\"path\":");
			if (rc == 0)
				rc = kiln_buf_put_json_string(out, e->path, strlen(e->path));
			if (rc == 0)
				rc = kiln_buf_printf(out, ",\"bytes\":%" PRIu64 ",\"prefix_blake2b\":\"%s\"",
				                     e->bytes, e->prefix_blake2b);
		}
		if (rc == 0 && e->gaps)
			rc = kiln_buf_printf(out, ",\"gaps\":%" PRIu64 ",\"skipped\":%" PRIu64, e->gaps,
			                     e->skipped);
		if (rc == 0)
			rc = kiln_buf_puts(out, "}");
	}
	if (rc == 0)
		rc = kiln_buf_puts(out, l->n ? "\n  ]\n}\n" : "]\n}\n");
	return rc < 0 ? kiln_error_oom("manifest") : 0;
}

/* ---- splits/<split>/<hh>.jsonl -------------------------------------------- */

int kiln_mfmt_shard_line_hash(kiln_json_scanner *scanner, const char *where, const char *text, size_t len,
                              const char hh[2], const char **out_hash)
{
	kiln_mfmt_jreader r = {scanner, where};
	kiln_json_token t;
	int rc;

	*out_hash = NULL;
	if ((rc = kiln_mfmt_jr_begin(&r, text, len, "each line must be an object")) < 0)
		return rc;
	while ((rc = kiln_mfmt_jr_next(&r, &t)) == 0) {
		if (t.type == KILN_JSON_OBJECT_END && t.depth == 0)
			break;
		if (t.type == KILN_JSON_KEY && t.depth == 1 && jr_key_is(&t, "shard")) {
			if ((rc = jr_shard_hash(&r, &t)) < 0)
				return rc;
			*out_hash = t.ptr;
		}
	}
	if (rc < 0)
		return rc;
	if ((rc = kiln_mfmt_jr_end(&r)) < 0)
		return rc;
	if (!*out_hash)
		return kiln_mfmt_jr_bad(&r, "a line lacks \"shard\"");
	if (memcmp(*out_hash, hh, 2) != 0)
		return kiln_mfmt_jr_bad(&r, "a shard's hash does not start with the file's name");
	return 0;
}

int kiln_mfmt_shard_line_render(kiln_buf *out, const kiln_shard_entry *e)
{
	int rc = kiln_buf_printf(out,
	                         "{\"shard\":\"%s\",\"bytes\":%" PRIu64 ",\"raw_bytes\":%" PRIu64
	                         ",\"records\":%" PRIu64 ",\"sources\":[",
	                         e->hash, e->bytes, e->raw_bytes, e->records);

	for (size_t i = 0; rc == 0 && i < e->source_count; i++) {
		const kiln_source_range *s = &e->sources[i];

		rc = kiln_buf_puts(out, i ? ",{\"topic\":" : "{\"topic\":");
		if (rc == 0)
			rc = kiln_buf_put_json_string(out, s->topic, strlen(s->topic));
		if (rc == 0)
			rc = kiln_buf_printf(
			    out, ",\"partition\":%" PRId32 ",\"first\":%" PRId64 ",\"last\":%" PRId64 "}",
			    s->partition, s->first, s->last);
	}
	if (rc == 0)
		rc = kiln_buf_puts(out, "]}");
	return rc < 0 ? kiln_error_oom("manifest") : 0;
}

#define CANON_PREFIX     "{\"shard\":\""
#define CANON_PREFIX_LEN (sizeof(CANON_PREFIX) - 1)

bool kiln_mfmt_shard_line_fast_hash(const char *text, size_t len, char out[65])
{
	if (len <= CANON_PREFIX_LEN + HASH_LEN + 1 || memcmp(text, CANON_PREFIX, CANON_PREFIX_LEN) != 0 ||
	    text[CANON_PREFIX_LEN + HASH_LEN] != '"' || !hex_valid(text + CANON_PREFIX_LEN, HASH_LEN))
		return false;
	memcpy(out, text + CANON_PREFIX_LEN, HASH_LEN);
	out[HASH_LEN] = '\0';
	return true;
}

/* One "sources" entry; its topic is appended (NUL-terminated) to strings and
 * its offset there stored in *topic_off. */
static int parse_source(kiln_mfmt_jreader *r, kiln_source_range *out, size_t *topic_off, kiln_buf *strings)
{
	kiln_json_token t;
	bool have_topic = false, have_partition = false, have_first = false, have_last = false;
	int64_t v;

	int rc;

	while ((rc = jr_next_key(r, &t)) > 0) {
		if (jr_key_is(&t, "topic")) {
			size_t n;

			if ((rc = kiln_mfmt_jr_next(r, &t)) < 0)
				return rc;
			if (t.type != KILN_JSON_STRING)
				return kiln_mfmt_jr_bad(r, "\"topic\" must be a string");
			if ((rc = kiln_buf_reserve(strings, t.len + 1)) < 0)
				return rc;
			n = kiln_json_unescape(strings->ptr + strings->len, t.len + 1, &t);
			if (memchr(strings->ptr + strings->len, '\0', n))
				return kiln_mfmt_jr_bad(r, "\"topic\" holds a NUL character");
			*topic_off = strings->len;
			strings->ptr[strings->len + n] = '\0';
			strings->len += n + 1;
			have_topic = true;
		} else if (jr_key_is(&t, "partition")) {
			if ((rc = jr_i64(r, "partition", INT32_MIN, INT32_MAX, &v)) < 0)
				return rc;
			out->partition = (int32_t)v;
			have_partition = true;
		} else if (jr_key_is(&t, "first")) {
			if ((rc = jr_i64(r, "first", INT64_MIN, INT64_MAX, &out->first)) < 0)
				return rc;
			have_first = true;
		} else if (jr_key_is(&t, "last")) {
			if ((rc = jr_i64(r, "last", INT64_MIN, INT64_MAX, &out->last)) < 0)
				return rc;
			have_last = true;
		} else if ((rc = kiln_mfmt_jr_skip(r)) < 0) {
			return rc;
		}
	}
	if (rc < 0)
		return rc;
	if (!have_topic || !have_partition || !have_first || !have_last)
		return kiln_mfmt_jr_bad(r, "a source needs \"topic\", \"partition\", \"first\" and \"last\"");
	return 0;
}

/* The "sources" array; count entries into *sources. */
static int parse_sources(kiln_mfmt_jreader *r, kiln_buf *strings, kiln_source_range **sources,
                         size_t *sources_cap, size_t *count)
{
	kiln_json_token t;
	int rc;

	if ((rc = jr_expect(r, &t, KILN_JSON_ARRAY_BEGIN, "\"sources\" must be an array")) < 0)
		return rc;
	while ((rc = jr_next_object(r, &t, "\"sources\" entries must be objects")) > 0) {
		size_t topic_off = 0;

		if (*count == *sources_cap) {
			size_t cap = *sources_cap ? *sources_cap * 2 : 4;
			kiln_source_range *v = realloc(*sources, cap * sizeof(*v));

			if (!v)
				return kiln_error_oom("manifest");
			*sources = v;
			*sources_cap = cap;
		}
		memset(&(*sources)[*count], 0, sizeof(**sources));
		if ((rc = parse_source(r, &(*sources)[*count], &topic_off, strings)) < 0)
			return rc;
		/* strings may move while later topics are added: keep the offset
		 * in the pointer until the line is done */
		(*sources)[*count].topic = (const char *)(uintptr_t)topic_off;
		(*count)++;
	}
	return rc;
}

int kiln_mfmt_shard_line_parse(kiln_json_scanner *scanner, const char *where, kiln_mfmt_line_mode mode,
                               const char *line, size_t len, kiln_shard_entry *out, kiln_buf *strings,
                               kiln_source_range **sources, size_t *sources_cap)
{
	kiln_mfmt_jreader r = {scanner, where};
	kiln_json_token t;
	bool have_hash = false, have_bytes = false, have_raw = false, have_records = false;
	size_t count = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = kiln_mfmt_jr_begin(&r, line, len, "must be an object")) < 0)
		return rc;
	while ((rc = jr_next_key(&r, &t)) > 0) {
		if (jr_key_is(&t, "shard")) {
			if ((rc = jr_shard_hash(&r, &t)) < 0)
				return rc;
			memcpy(out->hash, t.ptr, HASH_LEN);
			out->hash[HASH_LEN] = '\0';
			have_hash = true;
		} else if (jr_key_is(&t, "bytes")) {
			rc = jr_u64(&r, "bytes", &out->bytes);
			have_bytes = true;
		} else if (mode == KILN_MFMT_LINE_FULL && jr_key_is(&t, "raw_bytes")) {
			rc = jr_u64(&r, "raw_bytes", &out->raw_bytes);
			have_raw = true;
		} else if (jr_key_is(&t, "records")) {
			rc = jr_u64(&r, "records", &out->records);
			have_records = true;
		} else if (mode == KILN_MFMT_LINE_FULL && jr_key_is(&t, "sources")) {
			rc = parse_sources(&r, strings, sources, sources_cap, &count);
		} else {
			rc = kiln_mfmt_jr_skip(&r);
		}
		if (rc < 0)
			return rc;
	}
	if (rc < 0 || (rc = kiln_mfmt_jr_end(&r)) < 0)
		return rc;
	if (mode == KILN_MFMT_LINE_REFS)
		return have_hash ? 0 : kiln_mfmt_jr_bad(&r, "no \"shard\"");
	if (!have_hash || !have_bytes || !have_raw || !have_records)
		return kiln_mfmt_jr_bad(&r,
		                        "a line needs \"shard\", \"bytes\", \"raw_bytes\" and \"records\"");
	for (size_t i = 0; i < count; i++)
		(*sources)[i].topic = strings->ptr + (uintptr_t)(*sources)[i].topic;
	out->sources = count ? *sources : NULL;
	out->source_count = count;
	return 0;
}

int kiln_shard_line_parse_with(kiln_json_scanner *scanner, const char *line, size_t len,
                               kiln_shard_entry *out, kiln_buf *strings, kiln_source_range **sources,
                               size_t *sources_cap)
{
	return kiln_mfmt_shard_line_parse(scanner, "shard line", KILN_MFMT_LINE_FULL, line, len, out, strings,
	                                  sources, sources_cap);
}

int kiln_shard_line_parse(const char *line, size_t len, kiln_shard_entry *out, kiln_buf *strings,
                          kiln_source_range **sources, size_t *sources_cap)
{
	kiln_json_scanner *scanner = kiln_json_scanner_new(NULL);
	int rc;

	if (!scanner)
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	rc = kiln_shard_line_parse_with(scanner, line, len, out, strings, sources, sources_cap);
	kiln_json_scanner_free(scanner);
	return rc;
}
