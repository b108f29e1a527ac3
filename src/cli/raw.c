/* `kiln raw ls|cat`: the raw zone (src/shard/raw.h) from the command line:
 * lists the objects of a topic/partition, or decodes them byte-exact as JSON
 * Lines or as bare values, printing each offset once where objects overlap. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/units.h"
#include "shard/raw.h"
#include "store/store.h"

static const char usage_text[] =
    "usage: kiln raw ls  [--store URL] [--topic T] [--partition N]\n"
    "       kiln raw cat [--store URL] [--topic T] [--partition N]\n"
    "                    [--from OFFSET] [--to OFFSET] [--format jsonl|value] [KEY...]\n"
    "\n"
    "The raw zone holds every consumed Kafka batch byte-exact, one object per\n"
    "batch at raw/<topic>/<partition>/<first>-<last>.jsonl.zst (docs/FORMATS.md).\n"
    "\n"
    "ls prints one line per object, sorted by topic, partition, first and last\n"
    "offset:\n"
    "  KEY FIRST LAST\n"
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
	int64_t printed; /* -1: none yet */
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
			return kiln_error_set(KILN_ENOMEM, "out of memory");
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
	(void)ctx;
	(void)topic;
	(void)partition;
	printf("%s %" PRId64 " %" PRId64 "\n", key, first, last);
	return ferror(stdout) ? kiln_error_set(KILN_EIO, "stdout: write error") : 0;
}

int kiln_cmd_raw(int argc, char **argv)
{
	enum { OPT_STORE = 256, OPT_TOPIC, OPT_PARTITION, OPT_FROM, OPT_TO };
	static const struct option long_options[] = {
	    {"store", required_argument, NULL, OPT_STORE},
	    {"topic", required_argument, NULL, OPT_TOPIC},
	    {"partition", required_argument, NULL, OPT_PARTITION},
	    {"from", required_argument, NULL, OPT_FROM},
	    {"to", required_argument, NULL, OPT_TO},
	    {"format", required_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	raw_cat c = {.partition = -1, .from = 0, .to = INT64_MAX, .printed = -1, .line = KILN_BUF_INIT(0)};
	const char *store_url = getenv("KILN_STORE"), *sub, *cmd, *cat_only = NULL;
	uint64_t v;
	bool ls;
	int opt, rc = 0, status = KILN_EXIT_USAGE;

	if (argc < 2)
		return kiln_cli_fail("raw", "expected ls or cat (see kiln raw --help)");
	sub = argv[1];
	if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
		fputs(usage_text, stdout);
		return KILN_EXIT_OK;
	}
	if (strcmp(sub, "ls") != 0 && strcmp(sub, "cat") != 0)
		return kiln_cli_fail("raw", "'%s' is not ls or cat (see kiln raw --help)", sub);
	ls = strcmp(sub, "ls") == 0;
	cmd = ls ? "raw ls" : "raw cat";
	optind = 1;
	while ((opt = getopt_long(argc - 1, argv + 1, "f:h", long_options, NULL)) != -1) {
		switch (opt) {
		case OPT_STORE:
			store_url = optarg;
			break;
		case OPT_TOPIC:
			if (!*optarg || strchr(optarg, '/'))
				return kiln_cli_fail(cmd, "--topic wants a topic name, not '%s'", optarg);
			c.topic = optarg;
			break;
		case OPT_PARTITION:
			if (kiln_parse_u64(optarg, INT32_MAX, &v) < 0)
				return kiln_cli_fail(cmd, "--partition wants a number 0..%d, not '%s'",
				                     INT32_MAX, optarg);
			c.partition = (int32_t)v;
			break;
		case OPT_FROM:
		case OPT_TO:
			if (kiln_parse_u64(optarg, INT64_MAX, &v) < 0)
				return kiln_cli_fail(cmd, "--%s wants an offset, not '%s'",
				                     opt == OPT_FROM ? "from" : "to", optarg);
			*(opt == OPT_FROM ? &c.from : &c.to) = (int64_t)v;
			cat_only = opt == OPT_FROM ? "--from" : "--to";
			break;
		case 'f':
			if (strcmp(optarg, "jsonl") != 0 && strcmp(optarg, "value") != 0)
				return kiln_cli_fail(cmd, "--format wants jsonl or value, not '%s'", optarg);
			c.values = strcmp(optarg, "value") == 0;
			cat_only = "--format";
			break;
		case 'h':
			fputs(usage_text, stdout);
			return KILN_EXIT_OK;
		default:
			fputs(usage_text, stderr);
			return KILN_EXIT_USAGE;
		}
	}
	optind++; /* an index into argv + 1 */
	if (ls && cat_only)
		return kiln_cli_fail(cmd, "%s applies to kiln raw cat only", cat_only);
	if (ls && optind != argc)
		return kiln_cli_fail(cmd, "unexpected argument '%s' (see kiln raw --help)", argv[optind]);
	if (c.from > c.to)
		return kiln_cli_fail(cmd, "--from %" PRId64 " is past --to %" PRId64, c.from, c.to);
	if (!store_url || !*store_url)
		return kiln_cli_fail(cmd, "no store: give --store URL or set KILN_STORE");
	if (kiln_store_open(&c.store, store_url, NULL) < 0) {
		kiln_cli_fail(cmd, "%s", kiln_error_last());
		goto cleanup;
	}
	if (ls) {
		rc = kiln_raw_list(c.store, c.topic, c.partition, on_listed, NULL);
	} else if (optind < argc) {
		for (int i = optind; i < argc && rc == 0; i++)
			rc = kiln_raw_read(c.store, argv[i], on_record, &c);
	} else {
		c.dedup = true;
		rc = kiln_raw_list(c.store, c.topic, c.partition, on_object, &c);
	}
	if (rc != 0) {
		fflush(stdout);
		kiln_cli_fail(cmd, "%s", kiln_error_last());
		goto cleanup;
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail(cmd, "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_store_close(c.store);
	kiln_buf_free(&c.line);
	free(c.cur_topic);
	return status;
}
