/* `kiln raw ls|cat`: the raw zone (src/shard/raw.h) from the command line:
 * lists the objects of a topic/partition, or decodes them byte-exact as JSON
 * Lines or as bare values, printing each offset once where objects overlap. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/units.h"
#include "shard/raw.h"
#include "store/store.h"

static const char usage_text[] =
    "usage: kiln raw ls  [--store URL] [--topic T] [--partition N] [--json]\n"
    "       kiln raw cat [--store URL] [--topic T] [--partition N]\n"
    "                    [--from OFFSET] [--to OFFSET] [--format jsonl|value] [KEY...]\n"
    "\n"
    "The raw zone holds every consumed Kafka batch byte-exact, one object per\n"
    "batch at raw/<topic>/<partition>/<first>-<last>.jsonl.zst (docs/FORMATS.md).\n"
    "\n"
    "ls prints one line per object, sorted by topic, partition, first and last\n"
    "offset:\n"
    "  KEY FIRST LAST\n"
    "or with --json JSON Lines, one object per object (docs/JSON.md):\n"
    "  {\"key\":KEY,\"topic\":T,\"partition\":N,\"first\":N,\"last\":N}\n"
    "cat decodes the objects named by KEY, in the order given, or else every\n"
    "object of the topic/partition in ls order; then it prints each offset of a\n"
    "topic/partition once (objects overlap after a crash and a re-consume: a\n"
    "record at or below the highest offset already printed is skipped).\n"
    "--topic, --partition, --from and --to select records in named objects too.\n"
    "\n"
    "Options:\n"
    "      --store URL       the object store, file://DIR or s3://BUCKET/PREFIX\n"
    "                        (default: $KILN_STORE; S3 credentials from\n"
    "                        AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)\n"
    "      --topic T         only this topic\n"
    "      --partition N     only this partition\n"
    "      --from OFFSET     cat: only records at or after OFFSET\n"
    "      --to OFFSET       cat: only records at or before OFFSET\n"
    "  -f, --format FORMAT   cat: jsonl (default) prints each record's line as it\n"
    "                        is stored; value writes each record's value bytes\n"
    "                        exactly, each followed by a newline (a null value\n"
    "                        gives an empty line)\n"
    "  -j, --json            ls: JSON Lines, one object per raw object\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on success, 2 on a usage error, a store error or a corrupt\n"
    "object (the message names the key and line).\n";

typedef struct raw_cat {
	kiln_store *store;
	const char *topic; /* NULL: any */
	int32_t partition; /* -1: any */
	int64_t from, to;
	bool values;
	kiln_buf line;
	/* listing mode: the topic/partition being printed, its highest printed offset */
	bool dedup;
	char *cur_topic;
	int32_t cur_partition;
	int64_t printed;      /* -1: none yet */
	const char *cat_only; /* the option given that only cat takes; NULL: none */
	bool json;            /* ls --json */
} raw_cat;

static int on_record(void *ctx, const kiln_raw_record *r)
{
	raw_cat *c = ctx;

	if ((c->topic && strcmp(r->topic, c->topic) != 0) ||
	    (c->partition >= 0 && r->partition != c->partition) || r->offset < c->from || r->offset > c->to)
		return 0;
	if (c->dedup) {
		if (r->offset <= c->printed)
			return 0;
		c->printed = r->offset;
	}
	if (c->values) {
		if (r->value_len)
			fwrite(r->value, 1, r->value_len, stdout);
		putchar('\n');
	} else {
		int rc;

		kiln_buf_reset(&c->line);
		if ((rc = kiln_raw_render(&c->line, r)) < 0)
			return rc;
		fwrite(c->line.ptr, 1, c->line.len, stdout);
	}
	return ferror(stdout) ? kiln_error_set(KILN_EIO, "stdout: write error") : 0;
}

static int on_object(void *ctx, const char *key, const char *topic, int32_t partition, int64_t first,
                     int64_t last)
{
	raw_cat *c = ctx;

	if (!c->cur_topic || strcmp(c->cur_topic, topic) != 0 || c->cur_partition != partition) {
		free(c->cur_topic);
		if (!(c->cur_topic = strdup(topic)))
			return kiln_error_oom(NULL);
		c->cur_partition = partition;
		c->printed = -1;
	}
	if (last < c->from || first > c->to || last <= c->printed)
		return 0; /* nothing in it to print: not even fetched */
	return kiln_raw_read(c->store, key, on_record, c);
}

static int on_listed(void *ctx, const char *key, const char *topic, int32_t partition, int64_t first,
                     int64_t last)
{
	raw_cat *c = ctx;

	if (c->json) {
		int rc = kiln_buf_puts(&c->line, "{\"key\":");

		rc |= kiln_cli_json_string(&c->line, key);
		rc |= kiln_buf_puts(&c->line, ",\"topic\":");
		rc |= kiln_cli_json_string(&c->line, topic);
		rc |= kiln_buf_printf(
		    &c->line, ",\"partition\":%" PRId32 ",\"first\":%" PRId64 ",\"last\":%" PRId64 "}\n",
		    partition, first, last);
		return kiln_cli_put_buf(&c->line, rc);
	}
	printf("%s %" PRId64 " %" PRId64 "\n", key, first, last);
	return ferror(stdout) ? kiln_error_set(KILN_EIO, "stdout: write error") : 0;
}

/* ---- the options ---------------------------------------------------------- */

static int parse_topic(const char *cmd, const char *arg, void *out)
{
	if (!*arg || strchr(arg, '/'))
		return kiln_cli_fail(cmd, "--topic wants a topic name, not '%s'", arg);
	((raw_cat *)out)->topic = arg;
	return 0;
}

static int parse_partition(const char *cmd, const char *arg, void *out)
{
	uint64_t v;

	if (kiln_parse_u64(arg, INT32_MAX, &v) < 0)
		return kiln_cli_fail(cmd, "--partition wants a number 0..%d, not '%s'", INT32_MAX, arg);
	((raw_cat *)out)->partition = (int32_t)v;
	return 0;
}

/* --from or --to (which) OFFSET into *at. */
static int parse_offset(raw_cat *c, const char *cmd, const char *arg, const char *which, int64_t *at)
{
	uint64_t v;

	if (kiln_parse_u64(arg, INT64_MAX, &v) < 0)
		return kiln_cli_fail(cmd, "%s wants an offset, not '%s'", which, arg);
	*at = (int64_t)v;
	c->cat_only = which;
	return 0;
}

static int parse_from(const char *cmd, const char *arg, void *out)
{
	return parse_offset(out, cmd, arg, "--from", &((raw_cat *)out)->from);
}

static int parse_to(const char *cmd, const char *arg, void *out)
{
	return parse_offset(out, cmd, arg, "--to", &((raw_cat *)out)->to);
}

static int parse_format(const char *cmd, const char *arg, void *out)
{
	raw_cat *c = out;

	if (strcmp(arg, "jsonl") != 0 && strcmp(arg, "value") != 0)
		return kiln_cli_fail(cmd, "--format wants jsonl or value, not '%s'", arg);
	c->values = strcmp(arg, "value") == 0;
	c->cat_only = "--format";
	return 0;
}

/* ---- the command ---------------------------------------------------------- */

int kiln_cmd_raw(int argc, char **argv)
{
	raw_cat c = {.partition = -1, .from = 0, .to = INT64_MAX, .printed = -1, .line = KILN_BUF_INIT(0)};
	const char *store_url;
	const kiln_cli_option rows[] = {
	    {.name = "store", .kind = KILN_CLI_STORE, .out = &store_url},
	    {.name = "topic", .kind = KILN_CLI_CUSTOM, .out = &c, .parse = parse_topic},
	    {.name = "partition", .kind = KILN_CLI_CUSTOM, .out = &c, .parse = parse_partition},
	    {.name = "from", .kind = KILN_CLI_CUSTOM, .out = &c, .parse = parse_from},
	    {.name = "to", .kind = KILN_CLI_CUSTOM, .out = &c, .parse = parse_to},
	    {.name = "format", .letter = 'f', .kind = KILN_CLI_CUSTOM, .out = &c, .parse = parse_format},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &c.json},
	    KILN_CLI_END,
	};
	kiln_cli_spec spec = {.usage = usage_text, .rows = rows, .max_args = -1};
	bool ls;
	int first, rc = 0, status;

	if (argc < 2)
		return kiln_cli_fail("raw", "expected ls or cat (see kiln raw --help)");
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage_text, stdout);
		return KILN_EXIT_OK;
	}
	if (strcmp(argv[1], "ls") != 0 && strcmp(argv[1], "cat") != 0)
		return kiln_cli_fail("raw", "'%s' is not ls or cat (see kiln raw --help)", argv[1]);
	ls = strcmp(argv[1], "ls") == 0;
	spec.cmd = ls ? "raw ls" : "raw cat";
	if ((status = kiln_cli_parse(&first, &spec, argc - 1, argv + 1)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	first++; /* an index into argv, not argv + 1 */
	if (ls && c.cat_only)
		return kiln_cli_fail(spec.cmd, "%s applies to kiln raw cat only", c.cat_only);
	if (!ls && c.json)
		return kiln_cli_fail(spec.cmd,
		                     "--json applies to kiln raw ls only (cat prints JSON Lines already)");
	if (ls && first != argc)
		return kiln_cli_fail(spec.cmd, "unexpected argument '%s' (see kiln raw --help)", argv[first]);
	if (c.from > c.to)
		return kiln_cli_fail(spec.cmd, "--from %" PRId64 " is past --to %" PRId64, c.from, c.to);
	if (kiln_cli_need_store(spec.cmd, store_url) != 0)
		return KILN_EXIT_USAGE;
	if (kiln_store_open(&c.store, store_url, NULL) < 0) {
		kiln_cli_fail(spec.cmd, "%s", kiln_error_last());
		goto cleanup;
	}
	if (ls) {
		rc = kiln_raw_list(c.store, c.topic, c.partition, on_listed, &c);
	} else if (first < argc) {
		for (int i = first; i < argc && rc == 0; i++)
			rc = kiln_raw_read(c.store, argv[i], on_record, &c);
	} else {
		c.dedup = true;
		rc = kiln_raw_list(c.store, c.topic, c.partition, on_object, &c);
	}
	if (rc != 0) {
		fflush(stdout);
		kiln_cli_fail(spec.cmd, "%s", kiln_error_last());
		goto cleanup;
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail(spec.cmd, "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_store_close(c.store);
	kiln_buf_free(&c.line);
	free(c.cur_topic);
	return status;
}
