/* Unit tests for src/shard/quarantine.c: records written by the writer
 * (kiln_quarantine_add/flush on a file store) decode back byte-exact
 * (UTF-8, binary kept as base64, null and empty records, up to eight
 * violations and a larger count), kiln_quarantine_render_line gives the
 * writer's bytes, corrupt objects and lines are refused with a one-line
 * error that holds no value, and both name shapes list in key order. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "fixture.h"
#include "core/error.h"
#include "shard/quarantine.h"

static char tmp[PATH_MAX];
static char url[PATH_MAX + 16];

/* Every decoded line rendered again, and a few of its members. */
typedef struct got {
	kiln_buf rendered;
	size_t n;
	char record[8][64];
	size_t record_len[8];
	bool null[8], b64[8];
	int stop_after; /* 0: never */
} got;

static int collect(void *ctx, const kiln_quarantine_line *l)
{
	got *g = ctx;

	assert_int_equal(kiln_quarantine_render_line(&g->rendered, l), 0);
	assert_int_equal(l->code, l->violations[0].code);
	assert_string_equal(l->path, l->violations[0].path);
	if (g->n < 8) {
		assert_true(l->record_len < 64);
		if (!l->record_null)
			memcpy(g->record[g->n], l->record, l->record_len);
		g->record_len[g->n] = l->record_len;
		g->null[g->n] = l->record_null;
		g->b64[g->n] = l->record_base64;
	}
	g->n++;
	return g->stop_after && g->n == (size_t)g->stop_after ? 9 : 0;
}

static void *compress(const char *src, size_t len, size_t *out_len)
{
	size_t cap = ZSTD_compressBound(len);
	void *dst = malloc(cap);
	ZSTD_CCtx *cctx = ZSTD_createCCtx();

	assert_non_null(dst);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	*out_len = ZSTD_compress2(cctx, dst, cap, src, len);
	assert_false(ZSTD_isError(*out_len));
	ZSTD_freeCCtx(cctx);
	return dst;
}

static void report_of(kiln_report *r, size_t count)
{
	memset(r, 0, sizeof(*r));
	r->count = count;
	r->kept = count < KILN_VIOLATIONS_MAX ? count : KILN_VIOLATIONS_MAX;
	for (size_t i = 0; i < r->kept; i++) {
		r->v[i].code = i ? KILN_REJECT_RANGE : KILN_REJECT_TYPE;
		snprintf(r->v[i].path, sizeof(r->v[i].path), "f%zu.\"x\\", i);
	}
}

static void test_round_trip(void **state)
{
	kiln_store *store;
	kiln_quarantine *q;
	kiln_report one, many;
	kiln_buf direct = KILN_BUF_INIT(0), object = KILN_BUF_INIT(0);
	got g = {.rendered = KILN_BUF_INIT(0)};
	const char bin[] = {'{', (char)0xff, 0, 'a'};
	const char *key = "quarantine/t/3/ds/main/10-14.file.jsonl.zst"; /* named with its kind */

	(void)state;
	report_of(&one, 1);
	report_of(&many, 11);
	assert_int_equal(kiln_store_open(&store, url, NULL), 0);
	assert_int_equal(kiln_quarantine_new(&q, store, "ds", "main", "file", 0, 1, tmp), 0);
	assert_int_equal(kiln_quarantine_add(q, "t", 3, 10, &one, "{\"a\":\"é\\n\"}", 13), 0);
	assert_int_equal(kiln_quarantine_add(q, "t", 3, 11, &many, bin, sizeof(bin)), 0);
	assert_int_equal(kiln_quarantine_add(q, "t", 3, 12, &one, NULL, 0), 0);
	assert_int_equal(kiln_quarantine_add(q, "t", 3, 13, &one, "", 0), 0);
	assert_int_equal(kiln_quarantine_add(q, "t", 3, 14, &one, "a\"\x01", 3), 0);
	assert_int_equal(kiln_quarantine_flush(q), 0);
	kiln_quarantine_free(q);

	assert_int_equal(kiln_quarantine_read(store, key, collect, &g), 0);
	assert_int_equal(g.n, 5);
	assert_true(g.record_len[0] == 13 && memcmp(g.record[0], "{\"a\":\"é\\n\"}", 13) == 0 && !g.b64[0]);
	assert_true(g.record_len[1] == sizeof(bin) && memcmp(g.record[1], bin, sizeof(bin)) == 0 && g.b64[1]);
	assert_true(g.null[2] && !g.null[3] && g.record_len[3] == 0);
	assert_true(g.record_len[4] == 3 && memcmp(g.record[4], "a\"\x01", 3) == 0);

	/* the lines rendered again are the object's bytes */
	assert_int_equal(kiln_store_get(store, key, kiln_buf_sink, &object), 0);
	{
		unsigned long long n = ZSTD_getFrameContentSize(object.ptr, object.len);
		char *text = malloc(n + 1);

		assert_true(n == g.rendered.len);
		assert_int_equal(ZSTD_decompress(text, n + 1, object.ptr, object.len), n);
		assert_memory_equal(text, g.rendered.ptr, n);
		assert_non_null(strstr(text, "\"count\":11,\"record_base64\":\"e/8AYQ==\"}\n"));
		assert_non_null(strstr(text, "\"record\":null}\n"));
		free(text);
	}

	/* kiln_quarantine_put stores rendered lines as the writer does */
	assert_int_equal(kiln_quarantine_put(store, "quarantine/t/3/ds/main/20-24.jsonl.zst", &g.rendered, 1),
	                 0);
	kiln_buf_reset(&direct);
	assert_int_equal(
	    kiln_store_get(store, "quarantine/t/3/ds/main/20-24.jsonl.zst", kiln_buf_sink, &direct), 0);
	assert_int_equal(direct.len, object.len);
	assert_memory_equal(direct.ptr, object.ptr, object.len);

	/* a callback's non-zero return stops there */
	kiln_buf_reset(&g.rendered);
	g.n = 0;
	g.stop_after = 2;
	assert_int_equal(kiln_quarantine_read(store, key, collect, &g), 9);
	assert_int_equal(g.n, 2);

	kiln_buf_free(&g.rendered);
	kiln_buf_free(&direct);
	kiln_buf_free(&object);
	kiln_store_close(store);
}

/* One line decoded alone: the return and, on error, the message. */
static int decode_text(const char *text, size_t *out_n)
{
	size_t zlen;
	void *z = compress(text, strlen(text), &zlen);
	got g = {.rendered = KILN_BUF_INIT(0)};
	int rc = kiln_quarantine_decode(z, zlen, "obj", collect, &g);

	*out_n = g.n;
	kiln_buf_free(&g.rendered);
	free(z);
	return rc;
}

#define GOOD                                                                                                 \
	"{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"code\":\"type\",\"path\":\"a\",\"violations\":[{"   \
	"\"code\":"                                                                                          \
	"\"type\",\"path\":\"a\"}],\"count\":1,\"record\":\"SECRET\"}\n"

static void test_decode_errors(void **state)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
	    {GOOD "[1]\n", "obj: line 2: not a JSON object"},
	    {GOOD "{\"topic\":\"t\"}\n", "obj: line 2: lacks \"partition\""},
	    {GOOD GOOD "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"code\":\"nope\"}\n",
	     "obj: line 3: \"code\" is not a rejection code"},
	    {"{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"code\":\"type\",\"path\":\"b\",\"violations\":["
	     "{"
	     "\"code\":\"type\",\"path\":\"a\"}],\"count\":1,\"record\":\"SECRET\"}\n",
	     "obj: line 1: \"code\" and \"path\" are not those of the first violation"},
	    {"{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"code\":\"type\",\"path\":\"a\",\"violations\":["
	     "],"
	     "\"count\":1,\"record\":\"SECRET\"}\n",
	     "obj: line 1: \"violations\" is empty"},
	    {"{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"code\":\"type\",\"path\":\"a\",\"violations\":["
	     "{"
	     "\"code\":\"type\",\"path\":\"a\"}],\"count\":0,\"record\":\"SECRET\"}\n",
	     "obj: line 1: \"count\" is below the number of violations listed"},
	    {"{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"code\":\"type\",\"path\":\"a\",\"violations\":["
	     "{"
	     "\"code\":\"type\",\"path\":\"a\"}],\"count\":1,\"record\":\"SECRET\",\"record_base64\":\"AA=="
	     "\"}\n",
	     "obj: line 1: both \"record\" and \"record_base64\""},
	    {"{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"code\":\"type\",\"path\":\"a\",\"violations\":["
	     "{"
	     "\"code\":\"type\",\"path\":\"a\"}],\"count\":1,\"record_base64\":\"SECRET\"}\n",
	     "obj: line 1: \"record_base64\" is not valid base64 (standard alphabet, padded)"},
	    {"{\"topic\":\"t\",\"partition\":-1}\n",
	     "obj: line 1: \"partition\" is not a non-negative integer"},
	    {"{\"topic\":\"t\",\"partition\":2147483648}\n", "obj: line 1: \"partition\" is out of range"},
	    {"{\"topic\":\"t\",\"SECRET\":1}\n", "obj: line 1: unknown member at byte 14"},
	    {"{\"topic\":\"SECRET\",\"x\":\"SECRET}\n", "obj: line 1: invalid JSON"},
	    {GOOD "{\"topic\":\"t\"", "obj: line 2: no newline at the end (truncated object)"},
	};
	char nine[2048];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(decode_text(cases[i].text, &n), KILN_EINVALID);
		if (strncmp(kiln_error_last(), cases[i].want, strlen(cases[i].want)) != 0)
			fail_msg("case %zu: got \"%s\", want \"%s\"", i, kiln_error_last(), cases[i].want);
		assert_null(strstr(kiln_error_last(), "SECRET"));
		assert_null(strchr(kiln_error_last(), '\n'));
		/* the lines before the bad one were passed */
		assert_int_equal(n, strncmp(cases[i].want, "obj: line 3", 11) == 0   ? 2
		                    : strncmp(cases[i].want, "obj: line 2", 11) == 0 ? 1
		                                                                     : 0);
	}
	/* nine violations: more than a writer keeps */
	strcpy(nine, "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"code\":\"type\",\"path\":\"a\","
	             "\"violations\":[");
	for (int i = 0; i < 9; i++)
		strcat(nine,
		       i ? ",{\"code\":\"type\",\"path\":\"a\"}" : "{\"code\":\"type\",\"path\":\"a\"}");
	strcat(nine, "],\"count\":9,\"record\":null}\n");
	assert_int_equal(decode_text(nine, &n), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "obj: line 1: more than 8 violations");

	/* not one whole frame: refused before any line */
	{
		size_t zlen;
		char *z = compress(GOOD GOOD, strlen(GOOD GOOD), &zlen);
		got g = {.rendered = KILN_BUF_INIT(0)};

		z[zlen - 1] ^= 1; /* the checksum */
		assert_int_equal(kiln_quarantine_decode(z, zlen, "obj", collect, &g), KILN_EINVALID);
		assert_int_equal(g.n, 0);
		assert_int_equal(kiln_quarantine_decode(z, zlen - 3, "obj", collect, &g), KILN_EINVALID);
		assert_non_null(strstr(kiln_error_last(), "obj: truncated zstd frame"));
		assert_int_equal(kiln_quarantine_decode(GOOD, strlen(GOOD), "obj", collect, &g),
		                 KILN_EINVALID);
		assert_int_equal(g.n, 0);
		free(z);
		kiln_buf_free(&g.rendered);
	}
	assert_int_equal(decode_text(GOOD GOOD, &n), 0);
	assert_int_equal(n, 2);
}

typedef struct listed {
	char lines[16][200];
	size_t n;
} listed;

static int on_listed(void *ctx, const kiln_quarantine_object *o)
{
	listed *l = ctx;

	assert_true(l->n < 16);
	snprintf(l->lines[l->n++], 200, "%s %s %d %s %s %s %lld %lld %d", o->key, o->topic, (int)o->partition,
	         o->dataset ? o->dataset : "-", o->branch ? o->branch : "-", o->source ? o->source : "-",
	         (long long)o->first, (long long)o->last, o->size > 0 && o->mtime > 0);
	return 0;
}

static void test_list(void **state)
{
	static const char *const keys[] = {
	    "quarantine/l/0/ds/main/5-9.jsonl.zst",
	    "quarantine/l/0/0-4.jsonl.zst",
	    "quarantine/l/0/other/b/0-1.jsonl.zst",
	    "quarantine/m/1/ds/dev/3-3.jsonl.zst",
	    "quarantine/l/0/ds/main/9-5.jsonl.zst",
	    "quarantine/l/x/0-4.jsonl.zst",
	    "quarantine/l/0/ds/0-4.jsonl.zst",
	    "quarantine/l/0/ds/main/01-4.jsonl.zst",
	    "quarantine/l/0/ds/main/1-4.jsonl",
	    /* named with the kind of source that wrote it: a file source and a
	     * Kafka topic of one name on one branch write two objects */
	    "quarantine/l/0/ds/main/5-9.file.jsonl.zst",
	    "quarantine/l/0/ds/main/5-9.Kafka.jsonl.zst",
	    "quarantine/l/0/0-4.file.jsonl.zst",
	    "quarantine/l/0/ds/main/5-9..jsonl.zst",
	    "quarantine/l/0/ds/main/5-9.file.x.jsonl.zst",
	};
	kiln_store *store;
	kiln_buf lines = KILN_BUF_INIT(0);
	listed l = {0};

	(void)state;
	assert_int_equal(kiln_store_open(&store, url, NULL), 0);
	kiln_buf_puts(&lines, GOOD);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_int_equal(kiln_quarantine_put(store, keys[i], &lines, 1), 0);
	assert_int_equal(kiln_quarantine_list(store, "l", "ds", on_listed, &l), 0);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.lines[0], "quarantine/l/0/0-4.jsonl.zst l 0 - - - 0 4 1");
	assert_string_equal(l.lines[1], "quarantine/l/0/ds/main/5-9.file.jsonl.zst l 0 ds main file 5 9 1");
	assert_string_equal(l.lines[2], "quarantine/l/0/ds/main/5-9.jsonl.zst l 0 ds main - 5 9 1");
	l.n = 0;
	assert_int_equal(kiln_quarantine_list(store, NULL, NULL, on_listed, &l), 0);
	assert_int_equal(l.n, 7); /* and test_round_trip's two */
	assert_string_equal(l.lines[2], "quarantine/l/0/ds/main/5-9.jsonl.zst l 0 ds main - 5 9 1");
	assert_string_equal(l.lines[3], "quarantine/l/0/other/b/0-1.jsonl.zst l 0 other b - 0 1 1");
	assert_string_equal(l.lines[4], "quarantine/m/1/ds/dev/3-3.jsonl.zst m 1 ds dev - 3 3 1");
	assert_string_equal(l.lines[5],
	                    "quarantine/t/3/ds/main/10-14.file.jsonl.zst t 3 ds main file 10 14 1");
	assert_int_equal(kiln_quarantine_list(store, "a/b", NULL, on_listed, &l), KILN_EINVALID);
	kiln_buf_free(&lines);
	kiln_store_close(store);
}

static int setup(void **state)
{
	(void)state;
	snprintf(url, sizeof(url), "file://%s/store", tmp);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_decode_errors),
	    cmocka_unit_test(test_list),
	};

	return kiln_test_main(tests, tmp, "quarantine", setup, NULL);
}
