/* `kiln ls DATASET@REF --split S`: a version's shards in one split with their
 * records, compressed bytes and store URLs (text or JSON Lines); optionally
 * only one rank's share, in its reading order (as `kiln cat` reads them). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/json_out.h"
#include "core/buf.h"
#include "core/error.h"
#include "cli/share.h"

static const char usage_text[] =
    "usage: kiln ls DATASET[@REF] [--split train|dev|test] [--format text|json] [--json]\n"
    "               [--rank R --world-size W] [--shuffle-seed S]\n"
    "               [--manifest REPO] [--store URL]\n"
    "\n"
    "Lists the shards of one split of a version (default: train), in hash order:\n"
    "  HASH RECORDS BYTES URL\n"
    "or with --json (or --format json) JSON Lines, one object per shard:\n"
    "  {\"shard\":HASH,\"records\":N,\"bytes\":N,\"raw_bytes\":N,\"key\":KEY,\"url\":URL,\n"
    "   \"split\":NAME,\"dataset\":S,\"ref\":REF,\"commit\":HEX40}  (docs/JSON.md)\n"
    "BYTES is the compressed size; URL is the store URL followed by the object key\n"
    "shards/<hh>/<hash>.jsonl.zst. With --rank/--world-size, only the shards that\n"
    "rank reads, in the order `kiln cat` reads them (docs/READING.md).\n"
    "\n"
    "Options:\n"
    "  --split NAME          train, dev or test (default: train)\n"
    "  -f, --format FORMAT   text (default) or json\n"
    "  -j, --json            JSON Lines, one object per shard (= --format json)\n"
    "  --rank R              this worker's rank, 0 <= R < W (default 0)\n"
    "  --world-size W        how many workers share the split (default 1)\n"
    "  --shuffle-seed S      order shards by a seeded hash before assigning them\n"
    "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
    "  --store URL           the object store, file://DIR or s3://BUCKET/PREFIX,\n"
    "                        or a cache node http://HOST:PORT (default: $KILN_STORE)\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on success, 2 on a bad reference, a missing repository or\n"
    "store setting, or another error.\n";

static int parse_format(const char *cmd, const char *arg, void *out)
{
	if (strcmp(arg, "json") != 0 && strcmp(arg, "text") != 0)
		return kiln_cli_fail(cmd, "--format wants text or json, not '%s'", arg);
	*(bool *)out = strcmp(arg, "json") == 0;
	return 0;
}

int kiln_cmd_ls(int argc, char **argv)
{
	kiln_share share;
	bool json = false;
	kiln_cli_option rows[KILN_SHARE_NROWS + 3];
	const kiln_cli_spec spec = {
	    .cmd = "ls",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one DATASET[@REF] (see kiln ls --help)",
	};
	kiln_reader *r = NULL;
	kiln_reader_shard *shards;
	size_t *idx = NULL, nidx = 0;
	kiln_buf line = KILN_BUF_INIT(0);
	int first, rc, status;

	kiln_share_init(&share);
	kiln_share_rows(rows, &share);
	rows[KILN_SHARE_NROWS] = (kiln_cli_option){
	    .name = "format", .letter = 'f', .kind = KILN_CLI_CUSTOM, .out = &json, .parse = parse_format};
	rows[KILN_SHARE_NROWS + 1] =
	    (kiln_cli_option){.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &json};
	rows[KILN_SHARE_NROWS + 2] = KILN_CLI_END;
	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (kiln_share_open("ls", &share, argv[first], &r, &shards, &idx, &nidx) != 0)
		return KILN_EXIT_USAGE;
	for (size_t i = 0; i < nidx; i++) {
		const kiln_reader_shard *s = &shards[idx[i]];

		if (!json) {
			printf("%s %" PRIu64 " %" PRIu64 " %s\n", s->hash, s->records, s->bytes, s->url);
			continue;
		}
		rc = kiln_buf_printf(&line,
		                     "{\"shard\":\"%s\",\"records\":%" PRIu64 ",\"bytes\":%" PRIu64
		                     ",\"raw_bytes\":%" PRIu64 ",\"key\":\"%s\",\"url\":",
		                     s->hash, s->records, s->bytes, s->raw_bytes, s->key);
		rc |= kiln_cli_json_string(&line, s->url);
		rc |= kiln_buf_printf(&line, ",\"split\":\"%s\",\"dataset\":", kiln_split_name(share.split));
		rc |= kiln_cli_json_string(&line, kiln_reader_dataset(r));
		rc |= kiln_buf_puts(&line, ",\"ref\":");
		rc |= kiln_cli_json_string_or_null(&line, kiln_reader_ref(r));
		rc |= kiln_buf_printf(&line, ",\"commit\":\"%s\"}\n", kiln_reader_commit(r));
		if (kiln_cli_put_buf(&line, rc) < 0) {
			kiln_cli_fail("ls", "%s", kiln_error_last());
			goto cleanup;
		}
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("ls", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_buf_free(&line);
	free(idx);
	kiln_reader_close(r);
	return status;
}
