/* quarantine-replayed.json (see replayed.h): the set of replayed offsets,
 * its one renderer and its one parser. */
#include "manifest/replayed.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"
#include "core/json.h"
#include "manifest/format.h"
#include "manifest/format_internal.h"

void kiln_replayed_free(kiln_replayed *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++) {
		free(set->parts[i].topic);
		free(set->parts[i].v);
	}
	free(set->parts);
	memset(set, 0, sizeof(*set));
}

static int part_cmp(const char *topic, int32_t partition, const kiln_replayed_part *p)
{
	int c = strcmp(topic, p->topic);

	if (c)
		return c;
	return (partition > p->partition) - (partition < p->partition);
}

/* The index of the part, or where it would go (*found false). */
static size_t part_find(const kiln_replayed *set, const char *topic, int32_t partition, bool *found)
{
	size_t lo = 0, hi = set->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = part_cmp(topic, partition, &set->parts[mid]);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	*found = false;
	return lo;
}

/* The first range whose last >= offset (n when none). */
static size_t range_find(const kiln_replayed_part *p, int64_t offset)
{
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->v[mid].last < offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool kiln_replayed_has(const kiln_replayed *set, const char *topic, int32_t partition, int64_t offset)
{
	bool found;
	size_t at = part_find(set, topic, partition, &found);
	const kiln_replayed_part *p;
	size_t i;

	if (!found)
		return false;
	p = &set->parts[at];
	i = range_find(p, offset);
	return i < p->n && p->v[i].first <= offset;
}

static int part_get(kiln_replayed *set, const char *topic, int32_t partition, kiln_replayed_part **out)
{
	bool found;
	size_t at = part_find(set, topic, partition, &found);

	if (!found) {
		if (KILN_ARRAY_GROW(set->parts, set->cap, set->n, NULL) < 0)
			return KILN_ENOMEM;
		memmove(&set->parts[at + 1], &set->parts[at], (set->n - at) * sizeof(*set->parts));
		memset(&set->parts[at], 0, sizeof(*set->parts));
		set->n++;
		set->parts[at].partition = partition;
		if (!(set->parts[at].topic = strdup(topic))) {
			memmove(&set->parts[at], &set->parts[at + 1],
			        (set->n - at - 1) * sizeof(*set->parts));
			set->n--;
			return kiln_error_oom(NULL);
		}
	}
	*out = &set->parts[at];
	return 0;
}

int kiln_replayed_add(kiln_replayed *set, const char *topic, int32_t partition, int64_t offset)
{
	kiln_replayed_part *p = NULL;
	size_t i;
	int rc;

	if ((rc = part_get(set, topic, partition, &p)) < 0)
		return rc;
	i = range_find(p, offset);
	if (i < p->n && p->v[i].first <= offset)
		return 0; /* there already */
	set->count++;
	/* joins the range before (its last + 1), the range at i (its first - 1), or both */
	bool join_prev = i > 0 && p->v[i - 1].last == offset - 1;
	bool join_next = i < p->n && p->v[i].first == offset + 1;

	if (join_prev && join_next) {
		p->v[i - 1].last = p->v[i].last;
		memmove(&p->v[i], &p->v[i + 1], (p->n - i - 1) * sizeof(*p->v));
		p->n--;
		return 0;
	}
	if (join_prev) {
		p->v[i - 1].last = offset;
		return 0;
	}
	if (join_next) {
		p->v[i].first = offset;
		return 0;
	}
	if (KILN_ARRAY_GROW(p->v, p->cap, p->n, NULL) < 0) {
		set->count--;
		return KILN_ENOMEM;
	}
	memmove(&p->v[i + 1], &p->v[i], (p->n - i) * sizeof(*p->v));
	p->v[i] = (kiln_replayed_range){offset, offset};
	p->n++;
	return 0;
}

/* Adds [first, last] offset by offset where it is not there yet. */
static int add_range(kiln_replayed *set, const char *topic, int32_t partition, int64_t first, int64_t last,
                     bool *overlap)
{
	for (int64_t o = first;; o++) {
		int rc;

		if (kiln_replayed_has(set, topic, partition, o)) {
			*overlap = true;
		} else if ((rc = kiln_replayed_add(set, topic, partition, o)) < 0) {
			return rc;
		}
		if (o == last)
			return 0;
	}
}

int kiln_replayed_merge(kiln_replayed *set, const kiln_replayed *from, bool *overlap)
{
	bool any = false;

	for (size_t i = 0; i < from->n; i++)
		for (size_t j = 0; j < from->parts[i].n; j++) {
			const kiln_replayed_part *p = &from->parts[i];
			int rc = add_range(set, p->topic, p->partition, p->v[j].first, p->v[j].last, &any);

			if (rc < 0)
				return rc;
		}
	if (overlap)
		*overlap = any;
	return 0;
}

/* Appends [first, last] to out, whose offsets so far all lie before it. */
static int append_range(kiln_replayed *out, const char *topic, int32_t partition, int64_t first, int64_t last)
{
	kiln_replayed_part *p = NULL;
	int rc;

	if ((rc = part_get(out, topic, partition, &p)) < 0)
		return rc;
	if (KILN_ARRAY_GROW(p->v, p->cap, p->n, NULL) < 0)
		return KILN_ENOMEM;
	p->v[p->n++] = (kiln_replayed_range){first, last};
	out->count += (uint64_t)(last - first) + 1;
	return 0;
}

int kiln_replayed_subtract(kiln_replayed *out, const kiln_replayed *a, const kiln_replayed *b)
{
	for (size_t i = 0; i < a->n; i++) {
		const kiln_replayed_part *pa = &a->parts[i];
		bool found;
		size_t at = part_find(b, pa->topic, pa->partition, &found);
		const kiln_replayed_part *pb = found ? &b->parts[at] : NULL;
		size_t j = 0;

		for (size_t k = 0; k < pa->n; k++) {
			int64_t lo = pa->v[k].first, hi = pa->v[k].last;
			bool left = true; /* [lo, hi] is still to place */
			int rc;

			/* b's ranges that end before lo do not matter any more */
			while (pb && j < pb->n && pb->v[j].last < lo)
				j++;
			while (pb && j < pb->n && pb->v[j].first <= hi) {
				if (pb->v[j].first > lo && (rc = append_range(out, pa->topic, pa->partition,
				                                              lo, pb->v[j].first - 1)) < 0)
					return rc;
				if (pb->v[j].last >= hi) {
					left = false;
					break;
				}
				lo = pb->v[j].last + 1;
				j++;
			}
			if (left && (rc = append_range(out, pa->topic, pa->partition, lo, hi)) < 0)
				return rc;
		}
	}
	return 0;
}

int kiln_replayed_render(kiln_buf *out, const kiln_replayed *set)
{
	int rc = kiln_buf_puts(out, "{\n  \"partitions\": [");

	for (size_t i = 0; rc == 0 && i < set->n; i++) {
		const kiln_replayed_part *p = &set->parts[i];

		rc |= kiln_buf_puts(out, i ? ",\n    {\"topic\":" : "\n    {\"topic\":");
		rc |= kiln_buf_put_json_string(out, p->topic, strlen(p->topic));
		rc |= kiln_buf_printf(out, ",\"partition\":%" PRId32 ",\"offsets\":[", p->partition);
		for (size_t j = 0; rc == 0 && j < p->n; j++)
			rc |= kiln_buf_printf(out, "%s[%" PRId64 ",%" PRId64 "]", j ? "," : "", p->v[j].first,
			                      p->v[j].last);
		rc |= kiln_buf_puts(out, "]}");
	}
	if (rc == 0)
		rc = kiln_buf_puts(out, set->n ? "\n  ]\n}\n" : "]\n}\n");
	return rc < 0 ? kiln_error_oom(NULL) : 0;
}

/* ---- parsing ---------------------------------------------------------------- */

static bool key_is(const kiln_json_token *t, const char *name)
{
	char tmp[32];
	size_t n;

	if (t->len >= sizeof(tmp))
		return false;
	n = kiln_json_unescape(tmp, sizeof(tmp), t);
	return n == strlen(name) && memcmp(tmp, name, n) == 0;
}

static int expect(kiln_mfmt_jreader *r, kiln_json_token *t, kiln_json_type type, const char *what)
{
	int rc = kiln_mfmt_jr_next(r, t);

	if (rc < 0)
		return rc;
	return t->type == type ? 0 : kiln_mfmt_jr_bad(r, what);
}

static int number(kiln_mfmt_jreader *r, int64_t lo, int64_t hi, int64_t *out, const char *what)
{
	kiln_json_token t;
	int rc = kiln_mfmt_jr_next(r, &t);

	if (rc < 0)
		return rc;
	if (t.type != KILN_JSON_NUMBER || kiln_mfmt_token_i64(&t, lo, hi, out) != 0)
		return kiln_mfmt_jr_bad(r, what);
	return 0;
}

/* "offsets": [[first,last], ...], ascending, disjoint, not adjacent. */
static int parse_offsets(kiln_mfmt_jreader *r, kiln_replayed_part *p, uint64_t *count)
{
	kiln_json_token t;
	int rc;

	if ((rc = expect(r, &t, KILN_JSON_ARRAY_BEGIN, "\"offsets\" must be an array")) < 0)
		return rc;
	for (;;) {
		kiln_replayed_range g;

		if ((rc = kiln_mfmt_jr_next(r, &t)) < 0)
			return rc;
		if (t.type == KILN_JSON_ARRAY_END)
			return 0;
		if (t.type != KILN_JSON_ARRAY_BEGIN)
			return kiln_mfmt_jr_bad(r, "\"offsets\" entries must be [first,last]");
		if ((rc = number(r, 0, INT64_MAX, &g.first, "an offset must be an integer >= 0")) < 0 ||
		    (rc = number(r, 0, INT64_MAX, &g.last, "an offset must be an integer >= 0")) < 0 ||
		    (rc = expect(r, &t, KILN_JSON_ARRAY_END, "\"offsets\" entries must be [first,last]")) < 0)
			return rc;
		if (g.last < g.first || (p->n && g.first <= p->v[p->n - 1].last + 1))
			return kiln_mfmt_jr_bad(r, "\"offsets\" ranges must ascend, apart, first <= last");
		if (KILN_ARRAY_GROW(p->v, p->cap, p->n, NULL) < 0)
			return KILN_ENOMEM;
		p->v[p->n++] = g;
		*count += (uint64_t)(g.last - g.first) + 1;
	}
}

static int parse_part(kiln_mfmt_jreader *r, kiln_replayed *out)
{
	kiln_replayed_part p = {0};
	kiln_json_token t;
	bool have_partition = false, have_offsets = false;
	uint64_t count = 0;
	int rc;

	while ((rc = kiln_mfmt_jr_next(r, &t)) == 0 && t.type != KILN_JSON_OBJECT_END) {
		int64_t v;

		if (key_is(&t, "topic") && !p.topic) {
			size_t n;

			if ((rc = expect(r, &t, KILN_JSON_STRING, "\"topic\" must be a string")) < 0)
				goto fail;
			if (!(p.topic = malloc(t.len + 1))) {
				rc = kiln_error_oom(NULL);
				goto fail;
			}
			n = kiln_json_unescape(p.topic, t.len + 1, &t);
			p.topic[n] = '\0';
			if (n == 0 || memchr(p.topic, '\0', n) || memchr(p.topic, '/', n)) {
				rc = kiln_mfmt_jr_bad(r, "\"topic\" must be a name without '/' or NUL");
				goto fail;
			}
		} else if (key_is(&t, "partition") && !have_partition) {
			if ((rc = number(r, INT32_MIN, INT32_MAX, &v, "\"partition\" must be an integer")) <
			    0)
				goto fail;
			p.partition = (int32_t)v;
			have_partition = true;
		} else if (key_is(&t, "offsets") && !have_offsets) {
			if ((rc = parse_offsets(r, &p, &count)) < 0)
				goto fail;
			have_offsets = true;
		} else {
			rc = kiln_mfmt_jr_bad(r, "unexpected key in a partitions entry");
			goto fail;
		}
	}
	if (rc < 0)
		goto fail;
	if (!p.topic || !have_partition || !have_offsets) {
		rc = kiln_mfmt_jr_bad(r, "a partitions entry needs \"topic\", \"partition\" and \"offsets\"");
		goto fail;
	}
	bool found;
	size_t at = part_find(out, p.topic, p.partition, &found);

	if (found || at != out->n) {
		rc = kiln_mfmt_jr_bad(r, "partitions entries must ascend by topic and partition, once each");
		goto fail;
	}
	if ((rc = KILN_ARRAY_GROW(out->parts, out->cap, out->n, NULL)) < 0)
		goto fail;
	out->parts[out->n++] = p;
	out->count += count;
	return 0;
fail:
	free(p.topic);
	free(p.v);
	return rc;
}

int kiln_replayed_parse(kiln_replayed *out, const char *text, size_t len, const char *where)
{
	kiln_json_scanner *scanner = kiln_json_scanner_new(NULL);
	kiln_mfmt_jreader r = {scanner, where};
	kiln_json_token t;
	bool have = false;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!scanner)
		return kiln_error_oom(NULL);
	if ((rc = kiln_mfmt_jr_begin(&r, text, len, "must be an object")) < 0)
		goto cleanup;
	while ((rc = kiln_mfmt_jr_next(&r, &t)) == 0 && t.type != KILN_JSON_OBJECT_END) {
		if (!key_is(&t, "partitions") || have) {
			rc = kiln_mfmt_jr_bad(&r, "unexpected key at the top level");
			goto cleanup;
		}
		have = true;
		if ((rc = expect(&r, &t, KILN_JSON_ARRAY_BEGIN, "\"partitions\" must be an array")) < 0)
			goto cleanup;
		while ((rc = kiln_mfmt_jr_next(&r, &t)) == 0 && t.type != KILN_JSON_ARRAY_END) {
			if (t.type != KILN_JSON_OBJECT_BEGIN) {
				rc = kiln_mfmt_jr_bad(&r, "\"partitions\" entries must be objects");
				goto cleanup;
			}
			if ((rc = parse_part(&r, out)) < 0)
				goto cleanup;
		}
		if (rc < 0)
			goto cleanup;
	}
	if (rc < 0)
		goto cleanup;
	if (!have) {
		rc = kiln_mfmt_jr_bad(&r, "missing \"partitions\"");
		goto cleanup;
	}
	rc = kiln_mfmt_jr_end(&r);
cleanup:
	kiln_json_scanner_free(scanner);
	if (rc < 0)
		kiln_replayed_free(out);
	return rc;
}
