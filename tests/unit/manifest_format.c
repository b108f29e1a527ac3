/* Unit tests for the manifest codec (src/manifest/format.c): the name rule,
 * the integer readers, and each manifest file parsed and rendered again.
 * The golden texts are the bytes kiln at main (a890f1e) wrote for the sample
 * file pipeline (pipelines/user-events.yaml, 3000 then 1000 generated records,
 * bench/gen-user-events.py --seed 7 and --seed 8), or, where noted, what main's
 * renderer gives for hand-made input; a render must reproduce them exactly. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "manifest/format.h"

static kiln_json_scanner *scanner;

static int setup(void **state)
{
	(void)state;
	scanner = kiln_json_scanner_new(NULL);
	return scanner ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	kiln_json_scanner_free(scanner);
	return 0;
}

/* The error of the last call contains `part`. */
static void assert_error_has(const char *part)
{
	if (!strstr(kiln_error_last(), part))
		fail_msg("error \"%s\" lacks \"%s\"", kiln_error_last(), part);
}

/* ---- names ---------------------------------------------------------------- */

static void test_names(void **state)
{
	static const char *const good[] = {"a", "0", "user-events", "ds.v2_b-c", "9lives"};
	static const char *const bad[] = {"",        "-a",   ".a", "_a",  "A", "user events",
	                                  "ds/main", "ds@x", "é",  "ab\n"};
	char longest[KILN_MFMT_NAME_MAX + 2];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_true(kiln_mfmt_name_valid(good[i]));
		assert_true(kiln_mfmt_name_valid_n(good[i], strlen(good[i])));
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_false(kiln_mfmt_name_valid(bad[i]));
		assert_false(kiln_mfmt_name_valid_n(bad[i], strlen(bad[i])));
	}
	assert_false(kiln_mfmt_name_valid(NULL));
	/* 128 characters is the longest name; the _n form reads only n bytes */
	memset(longest, 'a', sizeof(longest) - 1);
	longest[KILN_MFMT_NAME_MAX] = '\0';
	assert_true(kiln_mfmt_name_valid(longest));
	longest[KILN_MFMT_NAME_MAX] = 'a';
	longest[KILN_MFMT_NAME_MAX + 1] = '\0';
	assert_false(kiln_mfmt_name_valid(longest));
	assert_true(kiln_mfmt_name_valid_n(longest, KILN_MFMT_NAME_MAX));
	assert_true(kiln_mfmt_name_valid_n("ds/main", 2));
}

/* ---- integers ------------------------------------------------------------- */

/* The first token of a JSON text. */
static kiln_json_token token_of(const char *text)
{
	kiln_json_token t;

	kiln_json_scanner_reset(scanner, text, strlen(text));
	assert_int_equal(kiln_json_next(scanner, &t), 1);
	return t;
}

static void test_integers(void **state)
{
	kiln_json_token t;
	uint64_t u = 7;
	int64_t i = 7;

	(void)state;
	t = token_of("0");
	assert_int_equal(kiln_mfmt_token_u64(&t, &u), 0);
	assert_int_equal(u, 0);
	t = token_of("18446744073709551615"); /* 2^64 - 1 */
	assert_int_equal(kiln_mfmt_token_u64(&t, &u), 0);
	assert_true(u == UINT64_MAX);
	u = 7;
	t = token_of("18446744073709551616"); /* 2^64 */
	assert_int_equal(kiln_mfmt_token_u64(&t, &u), KILN_MFMT_NOT_INTEGER);
	t = token_of("-1");
	assert_int_equal(kiln_mfmt_token_u64(&t, &u), KILN_MFMT_NOT_INTEGER);
	t = token_of("1.0");
	assert_int_equal(kiln_mfmt_token_u64(&t, &u), KILN_MFMT_NOT_INTEGER);
	t = token_of("1e3");
	assert_int_equal(kiln_mfmt_token_u64(&t, &u), KILN_MFMT_NOT_INTEGER);
	t = token_of("\"1\"");
	assert_int_equal(kiln_mfmt_token_u64(&t, &u), KILN_MFMT_NOT_INTEGER);
	assert_int_equal(u, 7); /* untouched on failure */

	t = token_of("-9223372036854775808"); /* INT64_MIN */
	assert_int_equal(kiln_mfmt_token_i64(&t, INT64_MIN, INT64_MAX, &i), 0);
	assert_true(i == INT64_MIN);
	t = token_of("9223372036854775807");
	assert_int_equal(kiln_mfmt_token_i64(&t, INT64_MIN, INT64_MAX, &i), 0);
	assert_true(i == INT64_MAX);
	t = token_of("9223372036854775808");
	assert_int_equal(kiln_mfmt_token_i64(&t, INT64_MIN, INT64_MAX, &i), KILN_MFMT_OUT_OF_RANGE);
	t = token_of("-9223372036854775809");
	assert_int_equal(kiln_mfmt_token_i64(&t, INT64_MIN, INT64_MAX, &i), KILN_MFMT_OUT_OF_RANGE);
	t = token_of("99999999999999999999"); /* beyond 64 bits: not an integer at all */
	assert_int_equal(kiln_mfmt_token_i64(&t, INT64_MIN, INT64_MAX, &i), KILN_MFMT_NOT_INTEGER);
	t = token_of("2147483648"); /* a partition is an int32 */
	assert_int_equal(kiln_mfmt_token_i64(&t, INT32_MIN, INT32_MAX, &i), KILN_MFMT_OUT_OF_RANGE);
	t = token_of("-2147483648");
	assert_int_equal(kiln_mfmt_token_i64(&t, INT32_MIN, INT32_MAX, &i), 0);
	assert_true(i == INT32_MIN);
}

/* ---- stats.json ----------------------------------------------------------- */

/* main's stats.json after both runs of the sample pipeline */
static const char golden_stats[] =
    "{\n"
    "  \"records_in\": 4000,\n"
    "  \"valid\": 3785,\n"
    "  \"quarantined\": 215,\n"
    "  \"quarantined_by_code\": {\"json_syntax\":17,\"invalid_utf8\":10,\"duplicate_key\":16,"
    "\"too_deep\":19,\"too_large\":9,\"not_object\":15,\"missing_required\":14,\"type\":22,"
    "\"pattern\":14,\"range\":15,\"length\":14,\"enum\":10,\"format\":18,\"unknown_field\":22},\n"
    "  \"splits\": {\n"
    "    \"train\": {\"records\":3017,\"shards\":2,\"bytes\":372238,\"raw_bytes\":1403255},\n"
    "    \"dev\": {\"records\":384,\"shards\":2,\"bytes\":52339,\"raw_bytes\":178681},\n"
    "    \"test\": {\"records\":384,\"shards\":2,\"bytes\":52263,\"raw_bytes\":179681}\n"
    "  }\n"
    "}\n";

/* main's renderer for all-zero stats (a branch's first commit with nothing) */
static const char golden_stats_zero[] =
    "{\n"
    "  \"records_in\": 0,\n"
    "  \"valid\": 0,\n"
    "  \"quarantined\": 0,\n"
    "  \"quarantined_by_code\": {},\n"
    "  \"splits\": {\n"
    "    \"train\": {\"records\":0,\"shards\":0,\"bytes\":0,\"raw_bytes\":0},\n"
    "    \"dev\": {\"records\":0,\"shards\":0,\"bytes\":0,\"raw_bytes\":0},\n"
    "    \"test\": {\"records\":0,\"shards\":0,\"bytes\":0,\"raw_bytes\":0}\n"
    "  }\n"
    "}\n";

/* golden_stats after `kiln erase` removed 3 curated records (2 train, 1
 * test): valid and those splits' records go down by as much as "erased"
 * goes up, so records_in = valid + quarantined + erased still holds */
static const char golden_stats_erased[] =
    "{\n"
    "  \"records_in\": 4000,\n"
    "  \"valid\": 3782,\n"
    "  \"quarantined\": 215,\n"
    "  \"erased\": 3,\n"
    "  \"quarantined_by_code\": {\"json_syntax\":17,\"invalid_utf8\":10,\"duplicate_key\":16,"
    "\"too_deep\":19,\"too_large\":9,\"not_object\":15,\"missing_required\":14,\"type\":22,"
    "\"pattern\":14,\"range\":15,\"length\":14,\"enum\":10,\"format\":18,\"unknown_field\":22},\n"
    "  \"splits\": {\n"
    "    \"train\": {\"records\":3015,\"shards\":2,\"bytes\":372101,\"raw_bytes\":1402710},\n"
    "    \"dev\": {\"records\":384,\"shards\":2,\"bytes\":52339,\"raw_bytes\":178681},\n"
    "    \"test\": {\"records\":383,\"shards\":2,\"bytes\":52190,\"raw_bytes\":179410}\n"
    "  }\n"
    "}\n";

static void render_stats_equal(const kiln_stats *s, const char *want)
{
	kiln_buf b = KILN_BUF_INIT(0);

	assert_int_equal(kiln_mfmt_stats_render(&b, s), 0);
	assert_int_equal(b.len, strlen(want));
	assert_memory_equal(b.ptr, want, b.len);
	kiln_buf_free(&b);
}

static void test_stats_round_trip(void **state)
{
	kiln_stats s, zero = {0};

	(void)state;
	assert_int_equal(kiln_mfmt_stats_parse(scanner, "t", golden_stats, strlen(golden_stats), &s), 0);
	assert_int_equal(s.records_in, 4000);
	assert_int_equal(s.valid, 3785);
	assert_int_equal(s.quarantined, 215);
	assert_int_equal(s.quarantined_by_code[KILN_REJECT_TOO_LARGE], 9);
	assert_int_equal(s.splits[KILN_SPLIT_TRAIN].records, 3017);
	assert_int_equal(s.splits[KILN_SPLIT_TEST].raw_bytes, 179681);
	render_stats_equal(&s, golden_stats);
	render_stats_equal(&zero, golden_stats_zero);
	assert_int_equal(
	    kiln_mfmt_stats_parse(scanner, "t", golden_stats_zero, strlen(golden_stats_zero), &s), 0);
	assert_memory_equal(&s, &zero, sizeof(s));
	/* members may come in any order or be left out; whitespace is free */
	assert_int_equal(kiln_mfmt_stats_parse(scanner, "t", "{\"valid\":2,\"records_in\":3}", 26, &s), 0);
	assert_int_equal(s.records_in, 3);
	assert_int_equal(s.valid, 2);
	assert_int_equal(s.erased, 0);
}

/* "erased" is read, and written only when not zero: every stats.json of a
 * version never erased stays byte for byte what it was (golden_stats
 * above has none and renders back as it is). */
static void test_stats_erased(void **state)
{
	kiln_stats s;

	(void)state;
	assert_int_equal(
	    kiln_mfmt_stats_parse(scanner, "t", golden_stats_erased, strlen(golden_stats_erased), &s), 0);
	assert_int_equal(s.erased, 3);
	assert_int_equal(s.valid, 3782);
	assert_int_equal(s.records_in, s.valid + s.quarantined + s.erased);
	assert_int_equal(s.splits[KILN_SPLIT_TRAIN].records + s.splits[KILN_SPLIT_DEV].records +
	                     s.splits[KILN_SPLIT_TEST].records,
	                 s.valid);
	render_stats_equal(&s, golden_stats_erased);
	s.erased = 0;
	s.valid = 3785;
	assert_int_equal(kiln_mfmt_stats_parse(scanner, "t", golden_stats, strlen(golden_stats), &s), 0);
	assert_int_equal(s.erased, 0);
	render_stats_equal(&s, golden_stats);
	/* the member is checked like the others */
	assert_int_equal(kiln_mfmt_stats_parse(scanner, "W", "{\"erased\":-1}", 13, &s), KILN_EINVALID);
	assert_error_has("W: \"erased\" must be a non-negative integer");
	assert_int_equal(kiln_mfmt_stats_parse(scanner, "t", "{\"erased\":0}", 12, &s), 0);
	assert_int_equal(s.erased, 0);
}

static void test_stats_errors(void **state)
{
	static const struct {
		const char *text, *error;
	} bad[] = {
	    {"[]", "W: must be an object"},
	    {"{\"records\":1}", "W: unexpected key at the top level"},
	    {"{\"valid\":-1}", "W: \"valid\" must be a non-negative integer"},
	    {"{\"valid\":1.5}", "W: \"valid\" must be a non-negative integer"},
	    {"{\"quarantined_by_code\":{\"nope\":1}}", "W: unknown code in \"quarantined_by_code\""},
	    {"{\"quarantined_by_code\":[]}", "W: \"quarantined_by_code\" must be an object"},
	    {"{\"splits\":{\"holdout\":{}}}", "W: unknown split in \"splits\""},
	    {"{\"splits\":{\"train\":{\"rows\":1}}}", "W: unexpected key in a split's stats"},
	    {"{} {}", "W: json_syntax at byte 3"}, /* the scanner stops at a second value */
	    {"{\"valid\":1,\"valid\":2}", "W: duplicate_key at byte"},
	    {"{", "W: "},
	};
	kiln_stats s;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(kiln_mfmt_stats_parse(scanner, "W", bad[i].text, strlen(bad[i].text), &s),
		                 KILN_EINVALID);
		assert_error_has(bad[i].error);
	}
}

/* ---- lineage.json --------------------------------------------------------- */

/* main's lineage.json after both runs of the sample pipeline (a file source) */
static const char golden_lineage_file[] =
    "{\n"
    "  \"partitions\": [\n"
    "    {\"topic\":\"user-events\",\"partition\":0,\"next\":4000,\"path\":\"/data/in.jsonl\","
    "\"bytes\":1835038,\"prefix_blake2b\":"
    "\"ee6fa67962a107c49afa2a76718be6e63b6967b096e1e60c3a655a9ec843863b\"}\n"
    "  ]\n"
    "}\n";

/* main's renderer for Kafka partitions, one with gaps (docs/FORMATS.md's example) */
static const char golden_lineage_kafka[] =
    "{\n"
    "  \"partitions\": [\n"
    "    {\"topic\":\"clicks\",\"partition\":0,\"next\":5000,\"gaps\":1,\"skipped\":1200},\n"
    "    {\"topic\":\"clicks\",\"partition\":1,\"next\":4870},\n"
    "    {\"topic\":\"q\\\"\\\\\\n\",\"partition\":-1,\"next\":-9223372036854775808}\n"
    "  ]\n"
    "}\n";

static const char golden_lineage_empty[] = "{\n  \"partitions\": []\n}\n";

/* The same two files as this kiln renders them: each entry opens with the
 * kind of source that wrote it, which the parser reads from the shape of
 * main's entries (a path: "file"; none: "kafka"): the migration */
static const char golden_lineage_file_v2[] =
    "{\n"
    "  \"partitions\": [\n"
    "    {\"source\":\"file\",\"topic\":\"user-events\",\"partition\":0,\"next\":4000,"
    "\"path\":\"/data/in.jsonl\",\"bytes\":1835038,\"prefix_blake2b\":"
    "\"ee6fa67962a107c49afa2a76718be6e63b6967b096e1e60c3a655a9ec843863b\"}\n"
    "  ]\n"
    "}\n";
static const char golden_lineage_kafka_v2[] =
    "{\n"
    "  \"partitions\": [\n"
    "    {\"source\":\"kafka\",\"topic\":\"clicks\",\"partition\":0,\"next\":5000,\"gaps\":1,"
    "\"skipped\":1200},\n"
    "    {\"source\":\"kafka\",\"topic\":\"clicks\",\"partition\":1,\"next\":4870},\n"
    "    {\"source\":\"kafka\",\"topic\":\"q\\\"\\\\\\n\",\"partition\":-1,"
    "\"next\":-9223372036854775808}\n"
    "  ]\n"
    "}\n";

/* One name read by three kinds of source on one branch (the stdin entry
 * written before "source" existed, recognised by its path "-"), and a kind
 * the manifest does not know the shape of: sorted by topic, partition,
 * then source, each its own entry. */
static const char mixed_lineage[] =
    "{\"partitions\":[{\"source\":\"kafka\",\"topic\":\"tickets\",\"partition\":0,\"next\":6466},"
    "{\"topic\":\"tickets\",\"partition\":0,\"next\":12,\"path\":\"-\",\"bytes\":0,"
    "\"prefix_blake2b\":\"0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8\"},"
    "{\"source\":\"file\",\"topic\":\"tickets\",\"partition\":0,\"next\":4000,\"path\":\"/t\","
    "\"bytes\":9,\"prefix_blake2b\":\"ee6fa67962a107c49afa2a76718be6e63b6967b096e1e60c3a655a9ec843863b\"},"
    "{\"source\":\"dir\",\"topic\":\"a\",\"partition\":0,\"next\":1,\"path\":\"/l/a\",\"bytes\":9,"
    "\"prefix_blake2b\":\"ee6fa67962a107c49afa2a76718be6e63b6967b096e1e60c3a655a9ec843863b\"}]}";

static void render_lineage_equal(const kiln_mfmt_lineage *l, const char *want)
{
	kiln_buf b = KILN_BUF_INIT(0);

	assert_int_equal(kiln_mfmt_lineage_render(&b, l), 0);
	assert_int_equal(b.len, strlen(want));
	assert_memory_equal(b.ptr, want, b.len);
	kiln_buf_free(&b);
}

static void test_lineage_round_trip(void **state)
{
	kiln_mfmt_lineage l = {0};

	(void)state;
	assert_int_equal(
	    kiln_mfmt_lineage_parse(scanner, "t", golden_lineage_file, strlen(golden_lineage_file), &l), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.v[0].topic, "user-events");
	assert_string_equal(l.v[0].path, "/data/in.jsonl");
	assert_int_equal(l.v[0].bytes, 1835038);
	assert_int_equal(l.v[0].next, 4000);
	assert_string_equal(l.v[0].source, "file");
	render_lineage_equal(&l, golden_lineage_file_v2);
	kiln_mfmt_lineage_free(&l);
	assert_int_equal(
	    kiln_mfmt_lineage_parse(scanner, "t", golden_lineage_file_v2, strlen(golden_lineage_file_v2), &l),
	    0);
	render_lineage_equal(&l, golden_lineage_file_v2);
	kiln_mfmt_lineage_free(&l);

	assert_int_equal(
	    kiln_mfmt_lineage_parse(scanner, "t", golden_lineage_kafka, strlen(golden_lineage_kafka), &l), 0);
	assert_int_equal(l.n, 3);
	assert_int_equal(l.v[0].gaps, 1);
	assert_int_equal(l.v[0].skipped, 1200);
	assert_null(l.v[1].path);
	assert_string_equal(l.v[2].topic, "q\"\\\n");
	assert_int_equal(l.v[2].partition, -1);
	assert_true(l.v[2].next == INT64_MIN);
	for (size_t i = 0; i < 3; i++)
		assert_string_equal(l.v[i].source, "kafka");
	render_lineage_equal(&l, golden_lineage_kafka_v2);
	kiln_mfmt_lineage_free(&l);
	assert_int_equal(kiln_mfmt_lineage_parse(scanner, "t", golden_lineage_kafka_v2,
	                                         strlen(golden_lineage_kafka_v2), &l),
	                 0);
	render_lineage_equal(&l, golden_lineage_kafka_v2);
	kiln_mfmt_lineage_free(&l);

	assert_int_equal(kiln_mfmt_lineage_parse(scanner, "t", mixed_lineage, strlen(mixed_lineage), &l), 0);
	assert_int_equal(l.n, 4);
	assert_int_equal(kiln_mfmt_lineage_find(&l, "kafka", "tickets", 0), 0);
	assert_int_equal(kiln_mfmt_lineage_find(&l, "stdin", "tickets", 0), 1);
	assert_int_equal(kiln_mfmt_lineage_find(&l, "file", "tickets", 0), 2);
	assert_int_equal(kiln_mfmt_lineage_find(&l, "dir", "a", 0), 3);
	assert_int_equal(kiln_mfmt_lineage_find(&l, "file", "a", 0), -1);
	assert_int_equal(l.v[0].next, 6466);
	assert_int_equal(l.v[1].next, 12);
	assert_int_equal(l.v[2].next, 4000);
	assert_true(kiln_mfmt_lineage_shared(&l, 0) && kiln_mfmt_lineage_shared(&l, 2));
	assert_false(kiln_mfmt_lineage_shared(&l, 3));
	kiln_mfmt_lineage_sort(&l);
	render_lineage_equal(
	    &l,
	    "{\n  \"partitions\": [\n"
	    "    "
	    "{\"source\":\"dir\",\"topic\":\"a\",\"partition\":0,\"next\":1,\"path\":\"/l/a\",\"bytes\":9,"
	    "\"prefix_blake2b\":\"ee6fa67962a107c49afa2a76718be6e63b6967b096e1e60c3a655a9ec843863b\"},\n"
	    "    {\"source\":\"file\",\"topic\":\"tickets\",\"partition\":0,\"next\":4000,\"path\":\"/t\","
	    "\"bytes\":9,\"prefix_blake2b\":"
	    "\"ee6fa67962a107c49afa2a76718be6e63b6967b096e1e60c3a655a9ec843863b\"},\n"
	    "    {\"source\":\"kafka\",\"topic\":\"tickets\",\"partition\":0,\"next\":6466},\n"
	    "    {\"source\":\"stdin\",\"topic\":\"tickets\",\"partition\":0,\"next\":12,\"path\":\"-\","
	    "\"bytes\":0,\"prefix_blake2b\":"
	    "\"0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8\"}\n"
	    "  ]\n}\n");
	kiln_mfmt_lineage_free(&l);

	assert_int_equal(
	    kiln_mfmt_lineage_parse(scanner, "t", golden_lineage_empty, strlen(golden_lineage_empty), &l), 0);
	assert_int_equal(l.n, 0);
	render_lineage_equal(&l, golden_lineage_empty);
	kiln_mfmt_lineage_free(&l);
}

static void test_lineage_list(void **state)
{
	kiln_lineage_entry b1 = {.source = "kafka", .topic = "b", .partition = 1, .next = 3},
	                   a2 = {.source = "kafka", .topic = "a", .partition = 2, .next = 2},
	                   b0 = {.source = "kafka", .topic = "b", .partition = 0, .next = 1};
	kiln_mfmt_lineage l = {0};
	char *owned = strdup("a"), *owned_kind = strdup("kafka");

	(void)state;
	assert_non_null(owned);
	assert_non_null(owned_kind);
	assert_int_equal(kiln_mfmt_lineage_push(&l, &b1, false), 0);
	assert_int_equal(kiln_mfmt_lineage_push(&l, &a2, false), 0);
	a2.topic = owned; /* an owned entry is freed with the list, wherever sorting moves it */
	a2.source = owned_kind;
	a2.partition = 0;
	assert_int_equal(kiln_mfmt_lineage_push(&l, &a2, true), 0);
	assert_int_equal(kiln_mfmt_lineage_push(&l, &b0, false), 0);
	assert_int_equal(kiln_mfmt_lineage_find(&l, "kafka", "b", 0), 3);
	assert_int_equal(kiln_mfmt_lineage_find(&l, "file", "b", 0), -1);
	assert_int_equal(kiln_mfmt_lineage_find(&l, "kafka", "c", 0), -1);
	kiln_mfmt_lineage_sort(&l);
	render_lineage_equal(&l, "{\n  \"partitions\": [\n"
	                         "    {\"source\":\"kafka\",\"topic\":\"a\",\"partition\":0,\"next\":2},\n"
	                         "    {\"source\":\"kafka\",\"topic\":\"a\",\"partition\":2,\"next\":2},\n"
	                         "    {\"source\":\"kafka\",\"topic\":\"b\",\"partition\":0,\"next\":1},\n"
	                         "    {\"source\":\"kafka\",\"topic\":\"b\",\"partition\":1,\"next\":3}\n"
	                         "  ]\n}\n");
	assert_true(l.owned[0] && !l.owned[1] && !l.owned[2] && !l.owned[3]);
	kiln_mfmt_lineage_free(&l);
	assert_int_equal(l.n, 0);
}

static void test_lineage_errors(void **state)
{
	static const struct {
		const char *text, *error;
	} bad[] = {
	    {"{}", "W: missing \"partitions\""},
	    {"{\"partitions\":{}}", "W: \"partitions\" must be an array"},
	    {"{\"partitions\":[1]}", "W: \"partitions\" entries must be objects"},
	    {"{\"partitions\":[{\"topic\":\"t\",\"partition\":0}]}",
	     "W: a partitions entry needs \"topic\", \"partition\" and \"next\""},
	    {"{\"partitions\":[{\"topic\":\"t\",\"partition\":0,\"next\":1,\"path\":\"/p\"}]}",
	     "W: \"path\", \"bytes\" and \"prefix_blake2b\" come together"},
	    {"{\"partitions\":[{\"topic\":\"t\",\"partition\":0,\"next\":1,\"prefix_blake2b\":\"AB\"}]}",
	     "W: \"prefix_blake2b\" must be 64 lower-case hex digits"},
	    {"{\"partitions\":[{\"topic\":\"t\",\"partition\":2147483648,\"next\":1}]}",
	     "W: \"partition\" is out of range"},
	    {"{\"partitions\":[{\"topic\":\"t\",\"partition\":0,\"next\":0.5}]}",
	     "W: \"next\" must be an integer"},
	    {"{\"partitions\":[{\"topic\":1,\"partition\":0,\"next\":0}]}", "W: \"topic\" must be a string"},
	    {"{\"partitions\":[{\"topic\":\"a\\u0000\",\"partition\":0,\"next\":0}]}",
	     "W: \"topic\" holds a NUL character"},
	    {"{\"partitions\":[{\"topic\":\"t\",\"partition\":0,\"next\":0,\"x\":0}]}",
	     "W: unexpected key in a partitions entry"},
	    {"{\"partitions\":[{\"topic\":\"t\",\"partition\":0,\"next\":0},{\"topic\":\"t\",\"partition\":0,"
	     "\"next\":1}]}",
	     "W: two entries for one source, topic and partition"},
	    {"{\"partitions\":[{\"topic\":\"t\",\"partition\":0,\"next\":0},{\"source\":\"kafka\",\"topic\":"
	     "\"t\",\"partition\":0,\"next\":1}]}",
	     "W: two entries for one source, topic and partition"},
	    {"{\"partitions\":[{\"source\":\"kafka\",\"topic\":\"t\",\"partition\":0,\"next\":0},"
	     "{\"source\":\"kafka\",\"topic\":\"t\",\"partition\":3,\"next\":1,\"path\":\"/p\",\"bytes\":1,"
	     "\"prefix_blake2b\":\"ee6fa67962a107c49afa2a76718be6e63b6967b096e1e60c3a655a9ec843863b\"}]}",
	     "W: partitions entry 2 (partition 3): a \"kafka\" entry has no \"path\""},
	    {"{\"partitions\":[{\"source\":\"file\",\"topic\":\"t\",\"partition\":0,\"next\":0}]}",
	     "W: partitions entry 1 (partition 0): a \"file\" entry needs the file's \"path\""},
	    {"{\"partitions\":[{\"source\":\"file\",\"topic\":\"t\",\"partition\":0,\"next\":0,\"path\":\"-"
	     "\","
	     "\"bytes\":0,\"prefix_blake2b\":"
	     "\"ee6fa67962a107c49afa2a76718be6e63b6967b096e1e60c3a655a9ec843863b\"}]}",
	     "W: partitions entry 1 (partition 0): a \"file\" entry needs the file's \"path\""},
	    {"{\"partitions\":[{\"source\":\"stdin\",\"topic\":\"t\",\"partition\":0,\"next\":0}]}",
	     "W: partitions entry 1 (partition 0): a \"stdin\" entry has \"path\" \"-\""},
	    {"{\"partitions\":[{\"source\":\"Kafka\",\"topic\":\"t\",\"partition\":0,\"next\":0}]}",
	     "W: partitions entry 1 (partition 0): \"source\" is not a source kind"},
	    {"{\"partitions\":[{\"source\":\"\",\"topic\":\"t\",\"partition\":0,\"next\":0}]}",
	     "W: partitions entry 1 (partition 0): \"source\" is not a source kind"},
	    {"{\"partitions\":[{\"source\":7,\"topic\":\"t\",\"partition\":0,\"next\":0}]}",
	     "W: \"source\" must be a string"},
	    {"{\"partitions\":[],\"x\":1}", "W: unexpected key at the top level"},
	};
	kiln_mfmt_lineage l = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(kiln_mfmt_lineage_parse(scanner, "W", bad[i].text, strlen(bad[i].text), &l),
		                 KILN_EINVALID);
		assert_error_has(bad[i].error);
		kiln_mfmt_lineage_free(&l);
	}
}

/* ---- splits/<split>/<hh>.jsonl -------------------------------------------- */

static void test_shard_line_hash(void **state)
{
	static const char line[] =
	    "{\"shard\":\"ab00000000000000000000000000000000000000000000000000000000000001\","
	    "\"bytes\":1,\"raw_bytes\":2,\"records\":3,\"sources\":[]}";
	const char *hash = NULL;

	(void)state;
	assert_int_equal(kiln_mfmt_shard_line_hash(scanner, "W", line, strlen(line), "ab", &hash), 0);
	assert_ptr_equal(hash, line + 10);
	assert_int_equal(kiln_mfmt_shard_line_hash(scanner, "W", line, strlen(line), "ac", &hash),
	                 KILN_EINVALID);
	assert_error_has("W: a shard's hash does not start with the file's name");
	assert_int_equal(kiln_mfmt_shard_line_hash(scanner, "W", "{\"bytes\":1}", 11, "ab", &hash),
	                 KILN_EINVALID);
	assert_error_has("W: a line lacks \"shard\"");
	assert_int_equal(kiln_mfmt_shard_line_hash(scanner, "W", "{\"shard\":\"AB\"}", 14, "ab", &hash),
	                 KILN_EINVALID);
	assert_error_has("W: \"shard\" must be 64 lower-case hex digits");
	assert_int_equal(kiln_mfmt_shard_line_hash(scanner, "W", "[]", 2, "ab", &hash), KILN_EINVALID);
	assert_error_has("W: each line must be an object");
}

/* main's splits/dev/79.jsonl line from the sample pipeline's first run */
static const char golden_line[] =
    "{\"shard\":\"79c1d91141ffcfe12250f567320223880b2b4386461379bb4ff5a521836ae0e7\",\"bytes\":38794,"
    "\"raw_bytes\":134717,\"records\":290,\"sources\":[{\"topic\":\"user-events\",\"partition\":0,\"first\":"
    "4,"
    "\"last\":2998}]}";

static void test_shard_line_round_trip(void **state)
{
	kiln_buf strings = KILN_BUF_INIT(0), b = KILN_BUF_INIT(0);
	kiln_source_range *sources = NULL, two[2] = {{"a\"b", -1, INT64_MIN, -1}, {"c", 7, 0, 0}};
	size_t cap = 0;
	kiln_shard_entry e, none = {.bytes = 0};
	char hash[65];

	(void)state;
	assert_int_equal(kiln_mfmt_shard_line_parse(scanner, "W", KILN_MFMT_LINE_FULL, golden_line,
	                                            strlen(golden_line), &e, &strings, &sources, &cap),
	                 0);
	assert_string_equal(e.hash, "79c1d91141ffcfe12250f567320223880b2b4386461379bb4ff5a521836ae0e7");
	assert_int_equal(e.bytes, 38794);
	assert_int_equal(e.raw_bytes, 134717);
	assert_int_equal(e.records, 290);
	assert_int_equal(e.source_count, 1);
	assert_string_equal(e.sources[0].topic, "user-events");
	assert_int_equal(e.sources[0].first, 4);
	assert_int_equal(e.sources[0].last, 2998);
	assert_int_equal(kiln_mfmt_shard_line_render(&b, &e), 0);
	assert_int_equal(b.len, strlen(golden_line));
	assert_memory_equal(b.ptr, golden_line, b.len);
	assert_true(kiln_mfmt_shard_line_fast_hash(b.ptr, b.len, hash));
	assert_string_equal(hash, e.hash);

	/* two sources (an escaped topic, extreme offsets) and none, as main renders them */
	e.sources = two;
	e.source_count = 2;
	kiln_buf_reset(&b);
	assert_int_equal(kiln_mfmt_shard_line_render(&b, &e), 0);
	assert_int_equal(kiln_buf_put(&b, "", 1), 0);
	assert_string_equal(
	    b.ptr, "{\"shard\":\"79c1d91141ffcfe12250f567320223880b2b4386461379bb4ff5a521836ae0e7\","
	           "\"bytes\":38794,\"raw_bytes\":134717,\"records\":290,\"sources\":["
	           "{\"topic\":\"a\\\"b\",\"partition\":-1,\"first\":-9223372036854775808,\"last\":-1},"
	           "{\"topic\":\"c\",\"partition\":7,\"first\":0,\"last\":0}]}");
	memcpy(none.hash, e.hash, sizeof(none.hash));
	kiln_buf_reset(&b);
	assert_int_equal(kiln_mfmt_shard_line_render(&b, &none), 0);
	assert_int_equal(kiln_buf_put(&b, "", 1), 0);
	assert_string_equal(b.ptr,
	                    "{\"shard\":\"79c1d91141ffcfe12250f567320223880b2b4386461379bb4ff5a521836ae0e7\","
	                    "\"bytes\":0,\"raw_bytes\":0,\"records\":0,\"sources\":[]}");
	/* parsed back: no sources */
	kiln_buf_reset(&strings);
	assert_int_equal(kiln_shard_line_parse_with(scanner, b.ptr, b.len - 1, &e, &strings, &sources, &cap),
	                 0);
	assert_int_equal(e.source_count, 0);
	assert_null(e.sources);

	/* the fast path only takes lines that start the way kiln writes them */
	assert_false(kiln_mfmt_shard_line_fast_hash("{ \"shard\":\"79c1\"}", 17, hash));
	assert_false(kiln_mfmt_shard_line_fast_hash(golden_line, 75, hash)); /* {"shard":"<hash>" alone */
	kiln_buf_free(&strings);
	kiln_buf_free(&b);
	free(sources);
}

static void test_shard_line_modes(void **state)
{
	/* what gc reads: only "shard" required, the counts when present, sources skipped */
	static const char refs[] = "{\"bytes\":5,\"sh\\u0061rd\":"
	                           "\"ab00000000000000000000000000000000000000000000000000000000000001\","
	                           "\"sources\":[{\"shard\":\"x\"}],\"future\":[1,{\"a\":null}]}";
	kiln_buf strings = KILN_BUF_INIT(0);
	kiln_source_range *sources = NULL;
	size_t cap = 0;
	kiln_shard_entry e;

	(void)state;
	assert_int_equal(kiln_mfmt_shard_line_parse(scanner, "W", KILN_MFMT_LINE_REFS, refs, strlen(refs), &e,
	                                            NULL, NULL, NULL),
	                 0);
	assert_string_equal(e.hash, "ab00000000000000000000000000000000000000000000000000000000000001");
	assert_int_equal(e.bytes, 5);
	assert_int_equal(e.records, 0);
	/* the full parser wants every count and well-formed sources */
	assert_int_equal(kiln_mfmt_shard_line_parse(scanner, "W", KILN_MFMT_LINE_FULL, refs, strlen(refs), &e,
	                                            &strings, &sources, &cap),
	                 KILN_EINVALID);
	assert_error_has("W: a source needs \"topic\", \"partition\", \"first\" and \"last\"");
	assert_int_equal(kiln_mfmt_shard_line_parse(scanner, "W", KILN_MFMT_LINE_REFS, "{\"bytes\":1}", 11,
	                                            &e, NULL, NULL, NULL),
	                 KILN_EINVALID);
	assert_error_has("W: no \"shard\"");
	assert_int_equal(
	    kiln_mfmt_shard_line_parse(
	        scanner, "W", KILN_MFMT_LINE_FULL,
	        "{\"shard\":\"ab00000000000000000000000000000000000000000000000000000000000001\"}", 76, &e,
	        &strings, &sources, &cap),
	    KILN_EINVALID);
	assert_error_has("W: a line needs \"shard\", \"bytes\", \"raw_bytes\" and \"records\"");
	assert_int_equal(kiln_mfmt_shard_line_parse(scanner, "W", KILN_MFMT_LINE_REFS, "{\"shard\":1}", 11,
	                                            &e, NULL, NULL, NULL),
	                 KILN_EINVALID);
	assert_error_has("W: \"shard\" must be 64 lower-case hex digits");
	kiln_buf_free(&strings);
	free(sources);
}

/* ---- dataset.json --------------------------------------------------------- */

/* main's dataset.json for the sample pipeline with the key printf '%064x' 12345 */
static const char golden_dataset[] =
    "{\n"
    "  \"name\": \"user-events\",\n"
    "  \"contract\": "
    "{\"id\":\"user-events\",\"version\":\"1.2.0\",\"api_version\":\"v3.1.0\",\"schema\":\"user_event\","
    "\"digest\":\"blake2b-256:53dedd75fdf6c0f3d6f2bddb74f556351cb96f377296e81759bc3b0a6d3c7d44\"},\n"
    "  \"pseudonymisation\": {\"scheme\":\"hmac-sha256-b32-v1\",\"key_id\":\"hmac-sha256:479dbd7438bd4b11\","
    "\"key_version\":1,\"prefix\":\"p1_\",\"redact_marker\":\"[REDACTED]\"},\n"
    "  \"split\": {\"scheme\":\"blake2b64-mod10000-v1\",\"key\":\"user_id\",\"salt\":\"user-events-v1\","
    "\"ratios\":{\"train\":0.8,\"dev\":0.1,\"test\":0.1}},\n"
    "  \"shards\": {\"format\":\"jsonl\",\"compression\":\"zstd\",\"zstd_level\":3,\"target_bytes\":67108864,"
    "\"hash\":\"blake2b-256\",\"key\":\"shards/<hh>/<hash>.jsonl.zst\"}\n"
    "}\n";

static void test_dataset_round_trip(void **state)
{
	kiln_mfmt_dataset d, e;
	kiln_buf b = KILN_BUF_INIT(0);

	(void)state;
	assert_int_equal(kiln_mfmt_dataset_parse(scanner, "W", golden_dataset, strlen(golden_dataset), &d),
	                 0);
	assert_string_equal(d.name, "user-events");
	assert_string_equal(d.contract_digest,
	                    "blake2b-256:53dedd75fdf6c0f3d6f2bddb74f556351cb96f377296e81759bc3b0a6d3c7d44");
	assert_string_equal(d.key_version, "1");
	assert_string_equal(d.ratios[KILN_SPLIT_DEV], "0.1");
	assert_string_equal(d.target_bytes, "67108864");
	assert_true(d.have_pseudonymisation && d.have_split);
	assert_int_equal(kiln_mfmt_dataset_render(&b, &d), 0);
	assert_int_equal(b.len, strlen(golden_dataset));
	assert_memory_equal(b.ptr, golden_dataset, b.len);
	assert_null(kiln_mfmt_dataset_definition_differs(&d, &d));

	/* other whitespace, member order and unknown members: the same definition */
	static const char same[] =
	    "{\"split\":{\"ratios\":{\"test\":0.1,\"dev\":0.1,\"train\":0.8},\"salt\":\"user-events-v1\","
	    "\"key\":\"user_id\",\"scheme\":\"blake2b64-mod10000-v1\",\"x\":[{\"key\":\"no\"}]},"
	    "\"pseudonymisation\":{\"prefix\":\"p1_\",\"key_version\":1,\"scheme\":\"hmac-sha256-b32-v1\","
	    "\"key_id\":\"hmac-sha256:479dbd7438bd4b11\",\"redact_marker\":\"[REDACTED]\"},\"name\":"
	    "\"other\"}";
	assert_int_equal(kiln_mfmt_dataset_parse(scanner, "W", same, strlen(same), &e), 0);
	assert_null(kiln_mfmt_dataset_definition_differs(&d, &e));
	assert_null(e.contract_id);
	kiln_mfmt_dataset_free(&e);

	/* another salt, key version or ratio; a part left out */
	static const char *const other[] = {
	    "{\"split\":{\"ratios\":{\"test\":0.1,\"dev\":0.1,\"train\":0.8},\"salt\":\"v2\",\"key\":\"user_"
	    "id\","
	    "\"scheme\":\"blake2b64-mod10000-v1\"},\"pseudonymisation\":{\"prefix\":\"p1_\",\"key_version\":"
	    "1,"
	    "\"scheme\":\"hmac-sha256-b32-v1\",\"key_id\":\"hmac-sha256:479dbd7438bd4b11\",\"redact_marker\":"
	    "\"[REDACTED]\"}}",
	    "{\"split\":{\"ratios\":{\"test\":0.1,\"dev\":0.2,\"train\":0.7},\"salt\":\"user-events-v1\","
	    "\"key\":\"user_id\","
	    "\"scheme\":\"blake2b64-mod10000-v1\"},\"pseudonymisation\":{\"prefix\":\"p1_\",\"key_version\":"
	    "1,"
	    "\"scheme\":\"hmac-sha256-b32-v1\",\"key_id\":\"hmac-sha256:479dbd7438bd4b11\",\"redact_marker\":"
	    "\"[REDACTED]\"}}",
	    "{\"split\":{\"ratios\":{\"test\":0.1,\"dev\":0.1,\"train\":0.8},\"salt\":\"user-events-v1\","
	    "\"key\":\"user_id\","
	    "\"scheme\":\"blake2b64-mod10000-v1\"},\"pseudonymisation\":{\"prefix\":\"p2_\",\"key_version\":"
	    "2,"
	    "\"scheme\":\"hmac-sha256-b32-v1\",\"key_id\":\"hmac-sha256:479dbd7438bd4b11\",\"redact_marker\":"
	    "\"[REDACTED]\"}}",
	    "{\"pseudonymisation\":{\"prefix\":\"p1_\",\"key_version\":1,\"scheme\":\"hmac-sha256-b32-v1\","
	    "\"key_id\":\"hmac-sha256:479dbd7438bd4b11\",\"redact_marker\":\"[REDACTED]\"}}",
	};
	static const char *const part[] = {"split", "split", "pseudonymisation", "split"};
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		assert_int_equal(kiln_mfmt_dataset_parse(scanner, "W", other[i], strlen(other[i]), &e), 0);
		assert_string_equal(kiln_mfmt_dataset_definition_differs(&d, &e), part[i]);
		assert_string_equal(kiln_mfmt_dataset_definition_differs(&e, &d), part[i]);
		kiln_mfmt_dataset_free(&e);
	}

	assert_int_equal(kiln_mfmt_dataset_parse(scanner, "W", "[]", 2, &e), KILN_EINVALID);
	assert_error_has("W: must be an object");
	assert_int_equal(kiln_mfmt_dataset_parse(scanner, "W", "{\"split\":{\"key\":{}}}", 20, &e),
	                 KILN_EINVALID);
	assert_int_equal(kiln_mfmt_dataset_parse(scanner, "W", "{\"name\":\"a\\u0000\"}", 18, &e),
	                 KILN_EINVALID);
	kiln_mfmt_dataset_free(&d);
	kiln_buf_free(&b);
}

/* ---- the governance record ------------------------------------------------ */

/* main's tag message for user-events@v1 of the sample pipeline (kiln promote
 * with promote.max_quarantine_rate=0.1) */
static const char golden_governance[] =
    "user-events v1\n"
    "\n"
    "commit: 3ece5d6a709c7561441e1a91bb32158d568a703a\n"
    "from: refs/heads/user-events/main\n"
    "source offsets: user-events/0 next 4000\n"
    "contract: user-events 1.2.0 "
    "(blake2b-256:53dedd75fdf6c0f3d6f2bddb74f556351cb96f377296e81759bc3b0a6d3c7d44)\n"
    "key id: hmac-sha256:479dbd7438bd4b11\n"
    "split: blake2b64-mod10000-v1 key user_id salt user-events-v1\n"
    "records: 4000 in, 3785 valid, 215 quarantined\n"
    "train: 3017 records in 2 shards\n"
    "dev: 384 records in 2 shards\n"
    "test: 384 records in 2 shards\n"
    "gates:\n"
    "  min_records train: 3017 >= 1000: pass\n"
    "  min_records dev: 384 >= 100: pass\n"
    "  min_records test: 384 >= 100: pass\n"
    "  ratio_tolerance: largest deviation 0.0029 (train) <= 0.0200: pass\n"
    "  max_quarantine_rate: 0.0537 (215 of 4000) <= 0.1000: pass\n"
    "  contract_version: 1.2.0 matches 1.x: pass\n";

static void test_governance(void **state)
{
	static const char *const gates[] = {
	    "min_records train: 3017 >= 1000: pass",
	    "min_records dev: 384 >= 100: pass",
	    "min_records test: 384 >= 100: pass",
	    "ratio_tolerance: largest deviation 0.0029 (train) <= 0.0200: pass",
	    "max_quarantine_rate: 0.0537 (215 of 4000) <= 0.1000: pass",
	    "contract_version: 1.2.0 matches 1.x: pass",
	};
	kiln_mfmt_dataset d, empty = {0};
	kiln_mfmt_lineage l = {0}, none = {0};
	kiln_stats st, zero = {0};
	kiln_buf b = KILN_BUF_INIT(0);
	kiln_mfmt_governance g = {
	    .dataset = "user-events",
	    .version = "v1",
	    .commit = "3ece5d6a709c7561441e1a91bb32158d568a703a",
	    .from = "refs/heads/user-events/main",
	    .lineage = &l,
	    .definition = &d,
	    .stats = &st,
	    .gates = gates,
	    .gate_count = 6,
	};

	(void)state;
	assert_int_equal(kiln_mfmt_dataset_parse(scanner, "W", golden_dataset, strlen(golden_dataset), &d),
	                 0);
	assert_int_equal(
	    kiln_mfmt_lineage_parse(scanner, "W", golden_lineage_file, strlen(golden_lineage_file), &l), 0);
	assert_int_equal(kiln_mfmt_stats_parse(scanner, "W", golden_stats, strlen(golden_stats), &st), 0);
	assert_int_equal(kiln_mfmt_governance_render(&b, &g), 0);
	assert_int_equal(b.len, strlen(golden_governance));
	assert_memory_equal(b.ptr, golden_governance, b.len);

	/* nothing known: "none" and "?" as main writes them */
	g.lineage = &none;
	g.definition = &empty;
	g.stats = &zero;
	g.gate_count = 0;
	g.from = g.commit;
	kiln_buf_reset(&b);
	assert_int_equal(kiln_mfmt_governance_render(&b, &g), 0);
	assert_int_equal(kiln_buf_put(&b, "", 1), 0);
	assert_string_equal(
	    b.ptr, "user-events v1\n\ncommit: 3ece5d6a709c7561441e1a91bb32158d568a703a\n"
	           "from: 3ece5d6a709c7561441e1a91bb32158d568a703a\nsource offsets: none\n"
	           "contract: ? ? (?)\nkey id: ?\nsplit: ? key ? salt ?\n"
	           "records: 0 in, 0 valid, 0 quarantined\ntrain: 0 records in 0 shards\n"
	           "dev: 0 records in 0 shards\ntest: 0 records in 0 shards\ngates:\n  none configured\n");
	/* an erased version says how many records erasure removed */
	assert_int_equal(
	    kiln_mfmt_stats_parse(scanner, "W", golden_stats_erased, strlen(golden_stats_erased), &st), 0);
	g.stats = &st;
	kiln_buf_reset(&b);
	assert_int_equal(kiln_mfmt_governance_render(&b, &g), 0);
	assert_int_equal(kiln_buf_put(&b, "", 1), 0);
	assert_non_null(
	    strstr(b.ptr, "\nrecords: 4000 in, 3782 valid, 215 quarantined, 3 erased\ntrain: 3015 "));
	kiln_mfmt_dataset_free(&d);
	kiln_mfmt_lineage_free(&l);
	kiln_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_integers),
	    cmocka_unit_test(test_stats_round_trip),
	    cmocka_unit_test(test_stats_erased),
	    cmocka_unit_test(test_stats_errors),
	    cmocka_unit_test(test_lineage_round_trip),
	    cmocka_unit_test(test_lineage_list),
	    cmocka_unit_test(test_lineage_errors),
	    cmocka_unit_test(test_shard_line_hash),
	    cmocka_unit_test(test_shard_line_round_trip),
	    cmocka_unit_test(test_shard_line_modes),
	    cmocka_unit_test(test_dataset_round_trip),
	    cmocka_unit_test(test_governance),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
