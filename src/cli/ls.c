/* `kiln ls DATASET@REF --split S`: a version's shards in one split with their
 * records, compressed bytes and store URLs (text or JSON Lines); optionally
 * only one rank's share, in its reading order (as `kiln cat` reads them). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/error.h"
#include "cli/share.h"

static const char usage_text[] =
    "usage: kiln ls DATASET[@REF] [--split train|dev|test] [--format text|json]\n"
    "               [--rank R --world-size W] [--shuffle-seed S]\n"
    "               [--manifest REPO] [--store URL]\n"
    "\n"
    "Lists the shards of one split of a version (default: train), in hash order:\n"
    "  HASH RECORDS BYTES URL\n"
    "or with --format json one object per line:\n"
    "  {\"shard\":HASH,\"records\":N,\"bytes\":N,\"raw_bytes\":N,\"key\":KEY,\"url\":URL}\n"
    "BYTES is the compressed size; URL is the store URL followed by the object key\n"
    "shards/<hh>/<hash>.jsonl.zst. With --rank/--world-size, only the shards that\n"
    "rank reads, in the order `kiln cat` reads them (docs/READING.md).\n"
    "\n"
    "Options:\n"
    "  --split NAME          train, dev or test (default: train)\n"
    "  -f, --format FORMAT   text (default) or json\n"
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

int kiln_cmd_ls(int argc, char **argv)
{
	static const struct option long_options[] = {
	    KILN_SHARE_LONG_OPTIONS,
	    {"format", required_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	kiln_share share;
	bool json = false;
	kiln_reader *r = NULL;
	kiln_reader_shard *shards;
	size_t *idx = NULL, nidx = 0;
	kiln_buf line = KILN_BUF_INIT(0);
	int opt, rc, status = KILN_EXIT_USAGE;

	kiln_share_init(&share);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "f:m:h", long_options, NULL)) != -1) {
		if ((rc = kiln_share_option("ls", &share, opt, optarg)) != 0) {
			if (rc == KILN_EXIT_USAGE)
				return KILN_EXIT_USAGE;
			continue;
		}
		switch (opt) {
		case 'f':
			if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
				return kiln_cli_fail("ls", "--format wants text or json, not '%s'", optarg);
			json = strcmp(optarg, "json") == 0;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return KILN_EXIT_OK;
		default:
			fputs(usage_text, stderr);
			return KILN_EXIT_USAGE;
		}
	}
	if (optind != argc - 1)
		return kiln_cli_fail("ls", "expected one DATASET[@REF] (see kiln ls --help)");
	if (kiln_share_open("ls", &share, argv[optind], &r, &shards, &idx, &nidx) != 0)
		return KILN_EXIT_USAGE;
	for (size_t i = 0; i < nidx; i++) {
		const kiln_reader_shard *s = &shards[idx[i]];

		if (!json) {
			printf("%s %" PRIu64 " %" PRIu64 " %s\n", s->hash, s->records, s->bytes, s->url);
			continue;
		}
		kiln_buf_reset(&line);
		if (kiln_buf_printf(&line,
		                    "{\"shard\":\"%s\",\"records\":%" PRIu64 ",\"bytes\":%" PRIu64
		                    ",\"raw_bytes\":%" PRIu64 ",\"key\":\"%s\",\"url\":",
		                    s->hash, s->records, s->bytes, s->raw_bytes, s->key) < 0)
			goto fail;
		if (kiln_buf_put_json_string(&line, s->url, strlen(s->url)) < 0 ||
		    kiln_buf_puts(&line, "}\n") < 0)
			goto fail;
		fwrite(line.ptr, 1, line.len, stdout);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("ls", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
	goto cleanup;
fail:
	kiln_cli_fail("ls", "%s", kiln_error_last());
cleanup:
	kiln_buf_free(&line);
	free(idx);
	kiln_reader_close(r);
	return status;
}
