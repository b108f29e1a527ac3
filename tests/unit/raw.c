/* Unit tests for src/shard/raw.c: batches written to the raw zone and read
 * back byte-exact (UTF-8 and binary keys, values and headers, null and empty
 * ones, every timestamp type), the object's name and line format, corrupt
 * objects refused with an error (never a crash, never a partial record), and
 * listing order. KILN_RAW_TEST_KEEP=DIR writes the store into DIR and leaves
 * it there, to try `kiln raw ls/cat --store file://DIR` by hand. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "fixture.h"
#include "core/error.h"
#include "shard/raw.h"

static char tmp[PATH_MAX];
static const char *dir = tmp;
static char url[600];

/* Every decoded record, deep-copied. */
typedef struct copy {
	kiln_raw_record r[16];
	size_t n;
	int stop_after; /* 0: never */
} copy;

static void *dup_bytes(const void *p, size_t n)
{
	char *d = malloc(n + 1);
	assert_non_null(d);
	if (n)
		memcpy(d, p, n);
	d[n] = '\0';
	return d;
}

static int collect(void *ctx, const kiln_raw_record *r)
{
	copy *c = ctx;
	kiln_raw_record *o;
	kiln_raw_header *h;

	assert_true(c->n < 16);
	o = &c->r[c->n++];
	*o = *r;
	o->topic = dup_bytes(r->topic, strlen(r->topic));
	o->key = r->null_key ? NULL : dup_bytes(r->key, r->key_len);
	o->value = r->null_value ? NULL : dup_bytes(r->value, r->value_len);
	h = calloc(r->header_count + 1, sizeof(*h));
	for (size_t i = 0; i < r->header_count; i++) {
		h[i] = r->headers[i];
		h[i].name = dup_bytes(r->headers[i].name, r->headers[i].name_len);
		h[i].value =
		    r->headers[i].null_value ? NULL : dup_bytes(r->headers[i].value, r->headers[i].value_len);
	}
	o->headers = h;
	return c->stop_after && (int)c->n == c->stop_after ? 42 : 0;
}

static void copy_free(copy *c)
{
	for (size_t i = 0; i < c->n; i++) {
		kiln_raw_record *o = &c->r[i];
		for (size_t j = 0; j < o->header_count; j++) {
			free((void *)o->headers[j].name);
			free((void *)o->headers[j].value);
		}
		free((void *)o->headers);
		free((void *)o->topic);
		free((void *)o->key);
		free((void *)o->value);
	}
	c->n = 0;
}

static void assert_bytes(const void *got, size_t got_len, bool got_null, const void *want, size_t want_len,
                         bool want_null)
{
	assert_int_equal(got_null, want_null);
	if (want_null)
		return;
	assert_int_equal(got_len, want_len);
	if (want_len)
		assert_memory_equal(got, want, want_len);
}

static void assert_same(const kiln_raw_record *got, const kiln_raw_record *want)
{
	assert_string_equal(got->topic, want->topic);
	assert_int_equal(got->partition, want->partition);
	assert_int_equal(got->offset, want->offset);
	assert_int_equal(got->timestamp_type, want->timestamp_type);
	if (want->timestamp_type)
		assert_int_equal(got->timestamp, want->timestamp);
	assert_bytes(got->key, got->key_len, got->null_key, want->key, want->key_len, want->null_key);
	assert_bytes(got->value, got->value_len, got->null_value, want->value, want->value_len,
	             want->null_value);
	assert_int_equal(got->header_count, want->header_count);
	for (size_t i = 0; i < want->header_count; i++) {
		const kiln_raw_header *g = &got->headers[i], *w = &want->headers[i];
		assert_bytes(g->name, g->name_len, false, w->name, w->name_len, false);
		assert_bytes(g->value, g->value_len, g->null_value, w->value, w->value_len, w->null_value);
	}
}

static void read_object(const char *key, char **out, size_t *len)
{
	char path[1200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/store/%s", dir, key);
	assert_non_null(f = fopen(path, "rb"));
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	*out = malloc(*len + 1);
	assert_int_equal(fread(*out, 1, *len, f), *len);
	fclose(f);
}

static kiln_store *open_store(void)
{
	kiln_store *store = NULL;
	assert_int_equal(kiln_store_open(&store, url, NULL), 0);
	return store;
}

/* The batch of the round trip: one record per case. */
static const char bin_value[] = {'a', '\0', (char)0xFF, 'b', '\0', (char)0xC3};
static const char bin_hvalue[] = {(char)0xFF, '\0', (char)0x80};
static const char bin_hname[] = {'x', (char)0xC3};                  /* truncated UTF-8 */
static const char bin_key[] = {(char)0xED, (char)0xA0, (char)0x80}; /* an encoded surrogate: not UTF-8 */
static const char utf8_value[] = "h\xC3\xA9llo \"w\"\\\n\t\x01\x1F\x7F \xE2\x9C\x93 \xF0\x9F\x98\x80 </>";
static const kiln_raw_header headers[] = {
    {"trace-id", 8, "abc", 3, false}, {"bin", 3, bin_hvalue, sizeof(bin_hvalue), false},
    {"none", 4, NULL, 0, true},       {bin_hname, sizeof(bin_hname), "", 0, false},
    {"", 0, "\xC3\xA9", 2, false},
};

static void batch(kiln_raw_record r[5])
{
	memset(r, 0, 5 * sizeof(*r));
	for (int i = 0; i < 5; i++) {
		r[i].topic = "user-events.v1";
		r[i].partition = 3;
	}
	/* UTF-8 value with everything JSON escapes, create time */
	r[0].offset = 17;
	r[0].timestamp = 1700000000000;
	r[0].timestamp_type = 1;
	r[0].key = "k1";
	r[0].key_len = 2;
	r[0].value = utf8_value;
	r[0].value_len = sizeof(utf8_value) - 1;
	/* binary value with NUL and 0xFF, null key, log-append time */
	r[1].offset = 18;
	r[1].timestamp = -5;
	r[1].timestamp_type = 2;
	r[1].null_key = true;
	r[1].value = bin_value;
	r[1].value_len = sizeof(bin_value);
	/* empty value, empty key, no timestamp, headers of every kind */
	r[2].offset = 20;
	r[2].timestamp = 99; /* ignored: type none */
	r[2].key = "";
	r[2].value = "";
	r[2].headers = headers;
	r[2].header_count = sizeof(headers) / sizeof(headers[0]);
	/* null value, binary key */
	r[3].offset = 21;
	r[3].timestamp_type = 1;
	r[3].timestamp = 0;
	r[3].key = bin_key;
	r[3].key_len = sizeof(bin_key);
	r[3].null_value = true;
	/* a lone NUL byte is valid UTF-8: a JSON string with \u0000 */
	r[4].offset = 1000000000000;
	r[4].key = "\0";
	r[4].key_len = 1;
	r[4].value = "{\"json\":true}";
	r[4].value_len = 13;
}

static void test_round_trip(void **state)
{
	kiln_store *store = open_store();
	kiln_raw_writer *w = NULL;
	kiln_raw_record recs[5];
	char key[512], *data, *plain;
	size_t len;
	unsigned long long content;
	copy c = {0};
	kiln_buf b = KILN_BUF_INIT(0);

	(void)state;
	batch(recs);
	assert_int_equal(kiln_raw_writer_new(&w, store, 0, dir), 0);
	assert_int_equal(kiln_raw_write(w, recs, 5, key), 0);
	assert_string_equal(key, "raw/user-events.v1/3/17-1000000000000.jsonl.zst");

	/* one frame, content size and checksum in its header */
	read_object(key, &data, &len);
	content = ZSTD_getFrameContentSize(data, len);
	assert_true(content > 0 && content < 10000);
	assert_true(len > 4 && (((unsigned char)data[4] >> 2) & 1));
	assert_int_equal(ZSTD_findFrameCompressedSize(data, len), len);
	plain = malloc(content);
	assert_int_equal(ZSTD_decompress(plain, content, data, len), content);
	static const char want[] =
	    "{\"topic\":\"user-events.v1\",\"partition\":3,\"offset\":17,\"timestamp\":1700000000000,"
	    "\"timestamp_type\":\"create\",\"key\":\"k1\",\"value\":\"h\xC3\xA9llo "
	    "\\\"w\\\"\\\\\\n\\t\\u0001\\u001f"
	    "\x7F \xE2\x9C\x93 \xF0\x9F\x98\x80 </>\"}\n"
	    "{\"topic\":\"user-events.v1\",\"partition\":3,\"offset\":18,\"timestamp\":-5,"
	    "\"timestamp_type\":\"log_append\",\"key\":null,\"value_base64\":\"YQD/YgDD\"}\n"
	    "{\"topic\":\"user-events.v1\",\"partition\":3,\"offset\":20,\"timestamp_type\":\"none\",\"key\":"
	    "\"\","
	    "\"value\":\"\",\"headers\":[{\"name\":\"trace-id\",\"value\":\"abc\"},{\"name\":\"bin\",\"value_"
	    "base64\":"
	    "\"/wCA\"},{\"name\":\"none\",\"value\":null},{\"name_base64\":\"eMM=\",\"value\":\"\"},"
	    "{\"name\":\"\",\"value\":\"\xC3\xA9\"}]}\n"
	    "{\"topic\":\"user-events.v1\",\"partition\":3,\"offset\":21,\"timestamp\":0,\"timestamp_type\":"
	    "\"create\","
	    "\"key_base64\":\"7aCA\",\"value\":null}\n"
	    "{\"topic\":\"user-events.v1\",\"partition\":3,\"offset\":1000000000000,\"timestamp_type\":"
	    "\"none\","
	    "\"key\":\"\\u0000\",\"value\":\"{\\\"json\\\":true}\"}\n";
	assert_int_equal(content, sizeof(want) - 1);
	assert_memory_equal(plain, want, sizeof(want) - 1);

	/* decoded byte-exact, through the store and from the bytes */
	assert_int_equal(kiln_raw_read(store, key, collect, &c), 0);
	assert_int_equal(c.n, 5);
	for (size_t i = 0; i < 5; i++) {
		assert_same(&c.r[i], &recs[i]);
		assert_int_equal(kiln_raw_render(&b, &c.r[i]), 0); /* re-rendered identically */
	}
	assert_int_equal(b.len, sizeof(want) - 1);
	assert_memory_equal(b.ptr, want, b.len);
	copy_free(&c);
	assert_int_equal(kiln_raw_decode(data, len, "mem", collect, &c), 0);
	assert_int_equal(c.n, 5);
	copy_free(&c);

	/* the callback's non-zero return stops decoding and is returned */
	c.stop_after = 2;
	assert_int_equal(kiln_raw_decode(data, len, "mem", collect, &c), 42);
	assert_int_equal(c.n, 2);
	copy_free(&c);
	free(data);

	/* a replay writes the same bytes under the same name */
	read_object(key, &data, &len);
	assert_int_equal(kiln_raw_write(w, recs, 5, NULL), 0);
	{
		char *again;
		size_t again_len;
		read_object(key, &again, &again_len);
		assert_int_equal(again_len, len);
		assert_memory_equal(again, data, len);
		free(again);
	}
	free(data);
	free(plain);
	kiln_buf_free(&b);
	kiln_raw_writer_free(w);
	kiln_store_close(store);
}

static void test_write_rejects(void **state)
{
	kiln_store *store = open_store();
	kiln_raw_writer *w = NULL;
	kiln_raw_record recs[5], one;
	char key[512] = "untouched";

	(void)state;
	assert_int_equal(kiln_raw_writer_new(&w, store, 1, NULL), 0);
	batch(recs);
	assert_int_equal(kiln_raw_write(w, recs, 0, key), KILN_EINVALID);
	recs[2].offset = 18; /* not strictly ascending */
	assert_int_equal(kiln_raw_write(w, recs, 5, key), KILN_EINVALID);
	batch(recs);
	recs[3].partition = 4;
	assert_int_equal(kiln_raw_write(w, recs, 5, key), KILN_EINVALID);
	batch(recs);
	recs[4].topic = "other";
	assert_int_equal(kiln_raw_write(w, recs, 5, key), KILN_EINVALID);
	batch(recs);
	recs[1].timestamp_type = 3;
	assert_int_equal(kiln_raw_write(w, recs, 5, key), KILN_EINVALID);
	batch(recs);
	one = recs[0];
	one.topic = "a/b";
	assert_int_equal(kiln_raw_write(w, &one, 1, key), KILN_EINVALID);
	one.topic = "..";
	assert_int_equal(kiln_raw_write(w, &one, 1, key), KILN_EINVALID);
	one.topic = "sp ace";
	assert_int_equal(kiln_raw_write(w, &one, 1, key), KILN_EINVALID);
	one.topic = "";
	assert_int_equal(kiln_raw_write(w, &one, 1, key), KILN_EINVALID);
	one.topic = "t";
	one.offset = -1;
	assert_int_equal(kiln_raw_write(w, &one, 1, key), KILN_EINVALID);
	assert_string_equal(key, "untouched");
	/* a single record names first and last alike */
	one.offset = 7;
	assert_int_equal(kiln_raw_write(w, &one, 1, key), 0);
	assert_string_equal(key, "raw/t/3/7-7.jsonl.zst");

	/* a failed store leaves nothing behind for the next object */
	{
		char path[1200];
		copy c = {0};

		snprintf(path, sizeof(path), "%s/store/raw/t/3/8-8.jsonl.zst", dir);
		assert_int_equal(mkdir(path, 0700), 0); /* the object cannot be renamed over a directory */
		one.offset = 8;
		assert_true(kiln_raw_write(w, &one, 1, NULL) < 0);
		assert_int_equal(rmdir(path), 0);
		one.offset = 9;
		assert_int_equal(kiln_raw_write(w, &one, 1, key), 0);
		assert_int_equal(kiln_raw_read(store, key, collect, &c), 0);
		assert_int_equal(c.n, 1);
		assert_int_equal(c.r[0].offset, 9);
		copy_free(&c);
	}
	kiln_raw_writer_free(w);
	kiln_raw_writer_free(NULL);
	kiln_store_close(store);
}

/* zstd of text (one frame, checksum on) into a malloc'd buffer. */
static char *compress_text(const char *text, size_t *out_len)
{
	size_t len = strlen(text), cap = ZSTD_compressBound(len);
	char *out = malloc(cap);
	ZSTD_CCtx *cctx = ZSTD_createCCtx();

	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	*out_len = ZSTD_compress2(cctx, out, cap, text, len);
	assert_false(ZSTD_isError(*out_len));
	ZSTD_freeCCtx(cctx);
	return out;
}

#define GOOD                                                                                                 \
	"{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,\"value\":"  \
	"\"v\"}\n"

/* Decoding text must fail with KILN_EINVALID, a message naming "obj" (and
 * `mention` when not NULL), and no record passed on. */
static void expect_bad_text(const char *text, const char *mention)
{
	size_t len;
	char *z = compress_text(text, &len);
	copy c = {0};

	assert_int_equal(kiln_raw_decode(z, len, "obj", collect, &c), KILN_EINVALID);
	if (!strstr(kiln_error_last(), "obj") || (mention && !strstr(kiln_error_last(), mention)))
		fail_msg("message '%s' for '%s' lacks '%s'", kiln_error_last(), text,
		         mention ? mention : "obj");
	copy_free(&c);
	free(z);
}

static void test_decode_errors(void **state)
{
	size_t len;
	char *z = compress_text(GOOD GOOD, &len), *junk;
	copy c = {0};

	(void)state;
	/* the good text decodes */
	assert_int_equal(kiln_raw_decode(z, len, "obj", collect, &c), 0);
	assert_int_equal(c.n, 2);
	copy_free(&c);

	/* truncated or corrupt frames: an error, no record */
	for (size_t cut = 0; cut < len; cut++) {
		assert_int_equal(kiln_raw_decode(z, cut, "obj", collect, &c), KILN_EINVALID);
		assert_int_equal(c.n, 0);
	}
	assert_non_null(strstr(kiln_error_last(), "obj"));
	for (size_t i = 0; i < len; i++) {
		char *flip = malloc(len);
		int rc;

		memcpy(flip, z, len);
		flip[i] ^= 0x10;
		/* an error and no record, or (a flip zstd ignores: the frame
		 * header's reserved bit) the very same records */
		rc = kiln_raw_decode(flip, len, "obj", collect, &c);
		if (rc == 0) {
			assert_int_equal(c.n, 2);
			assert_memory_equal(c.r[1].value, "v", 2);
			copy_free(&c);
		} else {
			assert_int_equal(rc, KILN_EINVALID);
		}
		assert_int_equal(c.n, 0);
		free(flip);
	}
	junk = malloc(len + 3);
	memcpy(junk, z, len);
	memcpy(junk + len, "abc", 3);
	assert_int_equal(kiln_raw_decode(junk, len + 3, "obj", collect, &c), KILN_EINVALID);
	assert_int_equal(kiln_raw_decode("not zstd at all", 15, "obj", collect, &c), KILN_EINVALID);
	assert_int_equal(c.n, 0);
	free(junk);
	free(z);

	/* malformed lines, named by number */
	expect_bad_text(GOOD "{\"topic\":\"t\",\"partition\":0,\n", "line 2");
	expect_bad_text(GOOD "not json\n", "line 2");
	expect_bad_text(GOOD "\n", "line 2");
	expect_bad_text(GOOD "[1]\n", "line 2");
	expect_bad_text(GOOD GOOD "{}\n", "line 3");
	expect_bad_text(GOOD "{\"topic\":\"t\"} {}\n", "line 2");
	expect_bad_text(GOOD GOOD GOOD
	                "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\","
	                "\"key\":null,\"value\":\"v\"}", /* no final newline */
	                "line 4");
	/* bad base64: wrong alphabet, bad padding, non-canonical bits, escapes */
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value_base64\":\"YQ-_\"}\n",
	    "value_base64");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value_base64\":\"YQD\"}\n",
	    "value_base64");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value_base64\":\"YR==\"}\n",
	    "value_base64");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value_base64\":\"Y\\u0051==\"}\n",
	    "value_base64");
	/* bytes above 0x7f are no base64 digits (libsodium 1.0.18 decodes
	 * "QU\xc2\xad", valid UTF-8, to three bytes) */
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value_base64\":\"QU\xc2\xad\"}\n",
	    "value_base64");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key_base64\":null,"
	    "\"value\":\"v\"}\n",
	    "key_base64");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\",\"headers\":[{\"name\":\"h\",\"value_base64\":\"***\"}]}\n",
	    "headers[0].value_base64");
	/* shape: missing, unknown, doubled, mistyped, out-of-range members */
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null}\n",
	    "\"value\"");
	expect_bad_text("{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"key\":null,\"value\":\"v\"}\n",
	                "timestamp_type");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"create\",\"key\":null,"
	    "\"value\":\"v\"}\n",
	    "timestamp");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp\":5,\"timestamp_type\":\"none\","
	    "\"key\":null,\"value\":\"v\"}\n",
	    "timestamp");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"later\",\"key\":null,"
	    "\"value\":\"v\"}\n",
	    "timestamp_type");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\",\"extra\":1}\n",
	    "unknown member");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\",\"value\":\"w\"}\n",
	    "line 1");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\",\"value_base64\":\"dg==\"}\n",
	    "both");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":-1,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\"}\n",
	    "partition");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":2147483648,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\"}\n",
	    "partition");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":9223372036854775808,\"timestamp_type\":\"none\","
	    "\"key\":null,\"value\":\"v\"}\n",
	    "offset");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1.5,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\"}\n",
	    "offset");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":\"0\",\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\"}\n",
	    "partition");
	expect_bad_text(
	    "{\"topic\":null,\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\"}\n",
	    "topic");
	expect_bad_text(
	    "{\"topic\":\"t\\u0000x\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\"}\n",
	    "topic");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\",\"headers\":[{\"name\":\"h\"}]}\n",
	    "header 0");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\",\"headers\":[{\"name\":null,\"value\":null}]}\n",
	    "headers[0].name");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\",\"headers\":[\"h\"]}\n",
	    "header 0");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"v\",\"headers\":{}}\n",
	    "headers");
	/* JSON itself: lone surrogate, invalid UTF-8, control character */
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"\\ud83d\"}\n",
	    "invalid JSON");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"\xFF\"}\n",
	    "invalid JSON");
	expect_bad_text(
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":null,"
	    "\"value\":\"a\tb\"}\n",
	    "invalid JSON");
}

/* Escapes written by other producers of the format decode to the same bytes. */
static void test_decode_escapes(void **state)
{
	const char *text =
	    "{\"value\":\"\\ud83d\\ude00\\u00e9\\/\\u0041\\b\\f\",\"key\":\"\\u0000\","
	    "\"timestamp_type\":\"log_append\",\"timestamp\":-9223372036854775808,"
	    "\"offset\":9223372036854775807,\"partition\":2147483647,\"topic\":\"\\u0074\"}\n"
	    "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"timestamp_type\":\"none\",\"key\":\"\","
	    "\"value_base64\":\"\",\"headers\":[]}\n";
	size_t len;
	char *z = compress_text(text, &len);
	copy c = {0};

	(void)state;
	assert_int_equal(kiln_raw_decode(z, len, "obj", collect, &c), 0);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.r[0].topic, "t");
	assert_int_equal(c.r[0].partition, INT32_MAX);
	assert_int_equal(c.r[0].offset, INT64_MAX);
	assert_int_equal(c.r[0].timestamp, INT64_MIN);
	assert_int_equal(c.r[0].timestamp_type, 2);
	assert_int_equal(c.r[0].value_len, 10);
	assert_memory_equal(c.r[0].value, "\xF0\x9F\x98\x80\xC3\xA9/A\b\f", 10);
	assert_int_equal(c.r[0].key_len, 1);
	assert_int_equal(((const char *)c.r[0].key)[0], '\0');
	assert_false(c.r[1].null_value);
	assert_int_equal(c.r[1].value_len, 0);
	assert_int_equal(c.r[1].header_count, 0);
	copy_free(&c);
	free(z);

	/* an empty object (zero lines) is valid */
	z = compress_text("", &len);
	assert_int_equal(kiln_raw_decode(z, len, "obj", collect, &c), 0);
	assert_int_equal(c.n, 0);
	free(z);
}

/* Lines longer than the decoder's chunk and a batch larger than the spool's
 * write buffer come back whole. */
static void test_large(void **state)
{
	kiln_store *store = open_store();
	kiln_raw_writer *w = NULL;
	kiln_raw_record recs[3];
	size_t big = (size_t)3 << 20, text = 700000;
	char *bin = malloc(big), *utf8 = malloc(text), key[512];
	copy c = {0};

	(void)state;
	for (size_t i = 0; i < big; i++)
		bin[i] = (char)(i * 2654435761u >> 13);
	for (size_t i = 0; i < text; i++)
		utf8[i] = "ab\"\\\n\x01"
		          "cd"[i % 8];
	memset(recs, 0, sizeof(recs));
	for (int i = 0; i < 3; i++) {
		recs[i].topic = "big";
		recs[i].offset = 100 + i;
		recs[i].null_key = true;
	}
	recs[0].value = bin;
	recs[0].value_len = big;
	recs[1].value = utf8;
	recs[1].value_len = text;
	recs[2].value = "small";
	recs[2].value_len = 5;
	assert_int_equal(kiln_raw_writer_new(&w, store, 1, dir), 0);
	assert_int_equal(kiln_raw_write(w, recs, 3, key), 0);
	assert_string_equal(key, "raw/big/0/100-102.jsonl.zst");
	assert_int_equal(kiln_raw_read(store, key, collect, &c), 0);
	assert_int_equal(c.n, 3);
	for (int i = 0; i < 3; i++)
		assert_same(&c.r[i], &recs[i]);
	copy_free(&c);
	kiln_raw_writer_free(w);
	kiln_store_close(store);
	free(bin);
	free(utf8);
}

typedef struct listed {
	char lines[32][160];
	size_t n;
} listed;

static int on_listed(void *ctx, const char *key, const char *topic, int32_t partition, int64_t first,
                     int64_t last)
{
	listed *l = ctx;
	char want[512];

	assert_true(l->n < 32);
	snprintf(want, sizeof(want), "raw/%s/%d/%lld-%lld.jsonl.zst", topic, (int)partition, (long long)first,
	         (long long)last);
	assert_string_equal(key, want);
	snprintf(l->lines[l->n++], 160, "%s %d %lld %lld", topic, (int)partition, (long long)first,
	         (long long)last);
	return 0;
}

static void write_range(kiln_raw_writer *w, const char *topic, int32_t partition, int64_t first, int64_t last)
{
	kiln_raw_record recs[16];
	char values[16][24];
	size_t n = 0;

	assert_true(last - first < 16);
	memset(recs, 0, sizeof(recs));
	for (int64_t o = first; o <= last; o++, n++) {
		snprintf(values[n], sizeof(values[n]), "%s-%d-%lld", topic, (int)partition, (long long)o);
		recs[n].topic = topic;
		recs[n].partition = partition;
		recs[n].offset = o;
		recs[n].timestamp_type = 1;
		recs[n].timestamp = 1700000000000 + o;
		recs[n].null_key = true;
		recs[n].value = values[n];
		recs[n].value_len = strlen(values[n]);
	}
	assert_int_equal(kiln_raw_write(w, recs, n, NULL), 0);
}

static void put_junk(kiln_store *store, const char *key)
{
	char path[700];
	FILE *f;

	snprintf(path, sizeof(path), "%s/junk", dir);
	assert_non_null(f = fopen(path, "wb"));
	fputs("junk", f);
	fclose(f);
	assert_int_equal(kiln_store_put_file(store, key, path, 4), 0);
	unlink(path);
}

static void test_list(void **state)
{
	kiln_store *store = open_store();
	kiln_raw_writer *w = NULL;
	listed l = {0};
	static const char *const all[] = {
	    "clicks 0 0 4", "clicks 0 3 7",  "clicks 0 3 9",    "clicks 0 20 21",
	    "clicks 2 5 5", "clicks 10 0 1", "clicks.v2 0 1 1",
	};
	static const char *const p0[] = {"clicks 0 0 4", "clicks 0 3 7", "clicks 0 3 9", "clicks 0 20 21"};

	(void)state;
	assert_int_equal(kiln_raw_writer_new(&w, store, 0, dir), 0);
	/* written out of order; the overlaps are what a crash and re-consume leave */
	write_range(w, "clicks", 10, 0, 1);
	write_range(w, "clicks", 0, 20, 21);
	write_range(w, "clicks", 0, 3, 9);
	write_range(w, "clicks", 0, 0, 4);
	write_range(w, "clicks", 2, 5, 5);
	write_range(w, "clicks.v2", 0, 1, 1);
	write_range(w, "clicks", 0, 3, 7);
	/* names that do not parse are skipped */
	put_junk(store, "raw/clicks/0/junk.jsonl.zst");
	put_junk(store, "raw/clicks/0/5-4.jsonl.zst");
	put_junk(store, "raw/clicks/0/05-6.jsonl.zst");
	put_junk(store, "raw/clicks/x/1-2.jsonl.zst");
	put_junk(store, "raw/clicks/0/1-2.jsonl");
	put_junk(store, "raw/clicks/0/sub/1-2.jsonl.zst");
	put_junk(store, "raw/stray.jsonl.zst");
	put_junk(store, "shards/ab/1-2.jsonl.zst");

	assert_int_equal(kiln_raw_list(store, "clicks", -1, on_listed, &l), 0);
	assert_int_equal(l.n, 6);
	for (size_t i = 0; i < l.n; i++)
		assert_string_equal(l.lines[i], all[i]);
	l.n = 0;
	assert_int_equal(kiln_raw_list(store, "clicks", 0, on_listed, &l), 0);
	assert_int_equal(l.n, 4);
	for (size_t i = 0; i < l.n; i++)
		assert_string_equal(l.lines[i], p0[i]);
	l.n = 0;
	assert_int_equal(kiln_raw_list(store, NULL, 0, on_listed, &l), 0);
	assert_int_equal(l.n, 6); /* with test_large's */
	assert_string_equal(l.lines[0], "big 0 100 102");
	for (size_t i = 1; i < 5; i++)
		assert_string_equal(l.lines[i], p0[i - 1]);
	assert_string_equal(l.lines[5], "clicks.v2 0 1 1");
	l.n = 0;
	assert_int_equal(kiln_raw_list(store, NULL, -1, on_listed, &l), 0);
	assert_true(l.n >= 7); /* plus the round trip's objects */
	l.n = 0;
	assert_int_equal(kiln_raw_list(store, "nothing", -1, on_listed, &l), 0);
	assert_int_equal(l.n, 0);
	assert_int_equal(kiln_raw_list(store, "a/b", -1, on_listed, &l), KILN_EINVALID);

	/* a corrupt object read through the store names its key */
	{
		copy c = {0};
		assert_int_equal(kiln_raw_read(store, "raw/clicks/0/junk.jsonl.zst", collect, &c),
		                 KILN_EINVALID);
		assert_non_null(strstr(kiln_error_last(), "raw/clicks/0/junk.jsonl.zst"));
		assert_int_equal(kiln_raw_read(store, "raw/clicks/0/404-404.jsonl.zst", collect, &c),
		                 KILN_ENOTFOUND);
		assert_int_equal(c.n, 0);
	}
	kiln_raw_writer_free(w);
	kiln_store_close(store);
}

static int setup(void **state)
{
	(void)state;
	snprintf(url, sizeof(url), "file://%s/store", dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),    cmocka_unit_test(test_write_rejects),
	    cmocka_unit_test(test_decode_errors), cmocka_unit_test(test_decode_escapes),
	    cmocka_unit_test(test_large),         cmocka_unit_test(test_list),
	};
	const char *keep = getenv("KILN_RAW_TEST_KEEP");
	char store[PATH_MAX + 8];

	if (!(keep && *keep))
		return kiln_test_main(tests, tmp, "raw", setup, NULL);
	/* a kept store: emptied first, left in place */
	dir = keep;
	snprintf(store, sizeof(store), "%s/store", keep);
	if (sodium_init() < 0 || kiln_test_rmtree(store) != 0 || (mkdir(keep, 0700) != 0 && errno != EEXIST))
		return 1;
	return cmocka_run_group_tests(tests, setup, NULL);
}
