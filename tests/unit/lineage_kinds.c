/* Unit tests for lineage entries keyed by source kind (docs/FORMATS.md,
 * "lineage.json"): a file source and a Kafka topic of one name on one
 * branch keep two entries, each commit is fenced on its own kind's entry
 * only, an entry without a kind is never committed, the listings name the
 * kind where two entries share a topic and partition, and
 * quarantine-replayed.json keeps each kind's offsets apart. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "core/buf.h"
#include "core/error.h"
#include "manifest/format.h"
#include "manifest/manifest.h"
#include "manifest/replayed.h"

#define PREFIX_HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static char tmpdir[64];

static void lineage_is(kiln_manifest *m, const char *want)
{
	kiln_buf b = KILN_BUF_INIT(0);

	assert_int_equal(kiln_manifest_read(m, "ds", "main", "lineage.json", &b), 1);
	assert_int_equal(kiln_buf_putc(&b, '\0'), 0);
	assert_string_equal(b.ptr, want);
	kiln_buf_free(&b);
}

/* The reproduced bug: the Kafka partition's first commit was fenced on
 * (and resumed from) the file's entry of the topic's name. */
static void test_fence_per_kind(void **state)
{
	kiln_lineage_entry file = {.source = "file",
	                           .topic = "t",
	                           .partition = 0,
	                           .next = 60,
	                           .path = "/in/t.jsonl",
	                           .bytes = 30,
	                           .prefix_blake2b = PREFIX_HEX,
	                           .fenced = true,
	                           .expect_next = -1};
	kiln_lineage_entry kafka = {
	    .source = "kafka", .topic = "t", .partition = 0, .next = 90, .fenced = true, .expect_next = -1};
	kiln_lineage_entry no_kind = {.topic = "t", .partition = 0, .next = 1};
	kiln_snapshot snap = {.dataset = "ds", .branch = "main", .dataset_json = "{}", .lineage_count = 1};
	char *path = kiln_test_path(tmpdir, "kinds.git");
	kiln_manifest *m;
	char commit[41];

	(void)state;
	assert_int_equal(kiln_manifest_open(&m, path), 0);
	snap.lineage = &file;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	/* the partition was never read: its fence expects no entry, the file's 60 is not its own */
	snap.lineage = &kafka;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	lineage_is(
	    m,
	    "{\n  \"partitions\": [\n"
	    "    {\"source\":\"file\",\"topic\":\"t\",\"partition\":0,\"next\":60,\"path\":\"/in/t.jsonl\","
	    "\"bytes\":30,\"prefix_blake2b\":\"" PREFIX_HEX "\"},\n"
	    "    {\"source\":\"kafka\",\"topic\":\"t\",\"partition\":0,\"next\":90}\n"
	    "  ]\n}\n");
	/* a stale Kafka writer is refused on its own entry, naming its kind */
	kafka.next = 95;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EFENCED);
	assert_non_null(strstr(kiln_error_last(), "kafka:t/0 moved to 90 (expected -1)"));
	/* each moves from its own offset */
	kafka.expect_next = 90;
	kafka.next = 130;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	file.expect_next = 60;
	file.next = 90;
	snap.lineage = &file;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	lineage_is(
	    m,
	    "{\n  \"partitions\": [\n"
	    "    {\"source\":\"file\",\"topic\":\"t\",\"partition\":0,\"next\":90,\"path\":\"/in/t.jsonl\","
	    "\"bytes\":30,\"prefix_blake2b\":\"" PREFIX_HEX "\"},\n"
	    "    {\"source\":\"kafka\",\"topic\":\"t\",\"partition\":0,\"next\":130}\n"
	    "  ]\n}\n");
	/* an entry without its kind, or with one its shape contradicts, is not committed */
	snap.lineage = &no_kind;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "is not a source kind"));
	no_kind.source = "kafka";
	no_kind.path = "/in/t.jsonl";
	no_kind.bytes = 1;
	no_kind.prefix_blake2b = PREFIX_HEX;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "a \"kafka\" entry has no \"path\""));
	kiln_manifest_close(m);
	free(path);
}

/* A promoted version's tag message names the kind where two entries share
 * a topic and partition, and only there. */
static void test_governance_names_kinds(void **state)
{
	static const char text[] = "{\"partitions\":[{\"source\":\"file\",\"topic\":\"t\",\"partition\":0,"
	                           "\"next\":60,\"path\":\"/t\","
	                           "\"bytes\":3,\"prefix_blake2b\":\"" PREFIX_HEX "\"},"
	                           "{\"source\":\"kafka\",\"topic\":\"t\",\"partition\":0,\"next\":90},"
	                           "{\"source\":\"kafka\",\"topic\":\"u\",\"partition\":1,\"next\":7}]}";
	kiln_json_scanner *sc = kiln_json_scanner_new(NULL);
	kiln_mfmt_lineage l = {0};
	kiln_mfmt_dataset def = {0};
	kiln_stats st = {0};
	kiln_mfmt_governance g = {.dataset = "ds",
	                          .version = "v1",
	                          .commit = "3ece5d6a709c7561441e1a91bb32158d568a703a",
	                          .from = "main",
	                          .lineage = &l,
	                          .definition = &def,
	                          .stats = &st};
	kiln_buf b = KILN_BUF_INIT(0);

	(void)state;
	assert_non_null(sc);
	assert_int_equal(kiln_mfmt_lineage_parse(sc, "W", text, strlen(text), &l), 0);
	assert_int_equal(kiln_mfmt_governance_render(&b, &g), 0);
	assert_int_equal(kiln_buf_putc(&b, '\0'), 0);
	assert_non_null(strstr(b.ptr, "\nsource offsets: file:t/0 next 60, kafka:t/0 next 90, u/1 next 7\n"));
	kiln_buf_free(&b);
	kiln_mfmt_lineage_free(&l);
	kiln_json_scanner_free(sc);
}

/* A file's and a Kafka topic's records at one offset, and an entry of an
 * older list (no kind), are three different records. */
static void test_replayed_kinds(void **state)
{
	static const char text[] =
	    "{\n  \"partitions\": [\n"
	    "    {\"topic\":\"t\",\"partition\":0,\"offsets\":[[1,1]]},\n"
	    "    {\"source\":\"file\",\"topic\":\"t\",\"partition\":0,\"offsets\":[[3,5]]},\n"
	    "    {\"source\":\"kafka\",\"topic\":\"t\",\"partition\":0,\"offsets\":[[3,3]]}\n"
	    "  ]\n}\n";
	static const char *const bad[][2] = {
	    {"{\"partitions\":[{\"source\":\"kafka\",\"topic\":\"t\",\"partition\":0,\"offsets\":[[1,1]]},"
	     "{\"source\":\"file\",\"topic\":\"t\",\"partition\":0,\"offsets\":[[1,1]]}]}",
	     "W: partitions entries must ascend by topic, partition and source, once each"},
	    {"{\"partitions\":[{\"source\":\"file\",\"topic\":\"t\",\"partition\":0,\"offsets\":[[1,1]]},"
	     "{\"topic\":\"t\",\"partition\":0,\"offsets\":[[2,2]]}]}",
	     "W: partitions entries must ascend by topic, partition and source, once each"},
	    {"{\"partitions\":[{\"source\":\"Kafka\",\"topic\":\"t\",\"partition\":0,\"offsets\":[[1,1]]}]}",
	     "W: \"source\" must be a source kind"},
	};
	kiln_replayed a, more = {0}, d = {0};
	kiln_buf b = KILN_BUF_INIT(0);

	(void)state;
	assert_int_equal(kiln_replayed_parse(&a, text, strlen(text), "W"), 0);
	assert_int_equal(a.count, 5);
	assert_true(kiln_replayed_has(&a, "file", "t", 0, 4));
	assert_false(kiln_replayed_has(&a, "kafka", "t", 0, 4));
	assert_true(kiln_replayed_has(&a, "kafka", "t", 0, 3));
	assert_false(kiln_replayed_has(&a, NULL, "t", 0, 3));
	assert_true(kiln_replayed_has(&a, NULL, "t", 0, 1));
	assert_false(kiln_replayed_has(&a, "file", "t", 0, 1));
	assert_int_equal(kiln_replayed_render(&b, &a), 0);
	assert_int_equal(b.len, strlen(text));
	assert_memory_equal(b.ptr, text, b.len);
	/* stdin's offset 4 is new: merged beside the others, subtracted alone */
	assert_int_equal(kiln_replayed_add(&more, "stdin", "t", 0, 4), 0);
	assert_int_equal(kiln_replayed_add(&more, "file", "t", 0, 4), 0);
	assert_int_equal(kiln_replayed_subtract(&d, &more, &a), 0);
	assert_int_equal(d.count, 1);
	assert_true(kiln_replayed_has(&d, "stdin", "t", 0, 4));
	assert_int_equal(kiln_replayed_merge(&a, &more, NULL), 0);
	assert_int_equal(a.count, 6);
	assert_string_equal(a.parts[3].source, "stdin");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kiln_replayed x;

		assert_int_equal(kiln_replayed_parse(&x, bad[i][0], strlen(bad[i][0]), "W"), KILN_EINVALID);
		assert_non_null(strstr(kiln_error_last(), bad[i][1]));
	}
	kiln_buf_free(&b);
	kiln_replayed_free(&a);
	kiln_replayed_free(&more);
	kiln_replayed_free(&d);
}

/* A directory source's entries written before "source" existed (a path and
 * a topic NAME=FILE) are read as "directory"; a kind their shape
 * contradicts is refused. */
static void test_directory_entries(void **state)
{
	static const char legacy[] =
	    "{\"partitions\":[{\"topic\":\"ev=a.jsonl\",\"partition\":0,\"next\":3,"
	    "\"path\":\"/in/a.jsonl\",\"bytes\":9,\"prefix_blake2b\":\"" PREFIX_HEX "\"},"
	    "{\"topic\":\"ev\",\"partition\":0,\"next\":5,\"path\":\"/in/ev.jsonl\","
	    "\"bytes\":9,\"prefix_blake2b\":\"" PREFIX_HEX "\"}]}";
	static const char file_eq[] =
	    "{\"partitions\":[{\"source\":\"file\",\"topic\":\"ev=a.jsonl\",\"partition\":0,"
	    "\"next\":3,\"path\":\"/in/a.jsonl\",\"bytes\":9,\"prefix_blake2b\":\"" PREFIX_HEX "\"}]}";
	static const char dir_plain[] =
	    "{\"partitions\":[{\"source\":\"directory\",\"topic\":\"ev\",\"partition\":0,"
	    "\"next\":3,\"path\":\"/in/a.jsonl\",\"bytes\":9,\"prefix_blake2b\":\"" PREFIX_HEX "\"}]}";
	kiln_json_scanner *sc = kiln_json_scanner_new(NULL);
	kiln_mfmt_lineage l = {0};

	(void)state;
	assert_non_null(sc);
	assert_int_equal(kiln_mfmt_lineage_parse(sc, "W", legacy, strlen(legacy), &l), 0);
	assert_string_equal(l.v[0].source, "directory");
	assert_string_equal(l.v[1].source, "file");
	kiln_mfmt_lineage_free(&l);
	assert_int_equal(kiln_mfmt_lineage_parse(sc, "W", file_eq, strlen(file_eq), &l), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "a \"file\" entry's topic holds no '='"));
	kiln_mfmt_lineage_free(&l);
	assert_int_equal(kiln_mfmt_lineage_parse(sc, "W", dir_plain, strlen(dir_plain), &l), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "a \"directory\" entry needs"));
	kiln_mfmt_lineage_free(&l);
	kiln_json_scanner_free(sc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fence_per_kind),
	    cmocka_unit_test(test_governance_names_kinds),
	    cmocka_unit_test(test_replayed_kinds),
	    cmocka_unit_test(test_directory_entries),
	};

	return kiln_test_git_main(tests, tmpdir, "lineage-kinds", NULL, NULL);
}
