/* `kiln cat DATASET@REF --split S`: streams a version's records to stdout as
 * JSON Lines, shard by shard, each shard's bytes verified against its name
 * before a byte of it is written; optionally one rank's share, shuffled by
 * a seed (the same assignment as `kiln ls` and kiln_reader_assign). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/error.h"
#include "cli/share.h"

static const char usage_text[] =
    "usage: kiln cat DATASET[@REF] [--split train|dev|test] [--rank R --world-size W]\n"
    "                [--shuffle-seed S] [--manifest REPO] [--store URL]\n"
    "\n"
    "Writes the records of one split of a version (default: train) to stdout as\n"
    "JSON Lines, shard after shard. Each shard is downloaded, its BLAKE2b-256\n"
    "checked against its name, and only then decompressed: a corrupt or\n"
    "tampered shard stops the stream before any of its bytes are written.\n"
    "Without --shuffle-seed shards come in hash order; with it, in an order\n"
    "every worker computes alike from the seed. With --rank/--world-size, the\n"
    "i-th shard of that order goes to rank i mod W (docs/READING.md).\n"
    "\n"
    "Options:\n"
    "  --split NAME          train, dev or test (default: train)\n"
    "  --rank R              this worker's rank, 0 <= R < W (default 0)\n"
    "  --world-size W        how many workers share the split (default 1)\n"
    "  --shuffle-seed S      shuffle the shard order with seed S (0..2^64-1)\n"
    "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
    "  --store URL           the object store, file://DIR or s3://BUCKET/PREFIX,\n"
    "                        or a cache node http://HOST:PORT (default: $KILN_STORE)\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on success; 2 on a shard that fails verification (hash\n"
    "mismatch, broken zstd frame; `kiln verify --deep` checks them all), a bad\n"
    "reference, a missing repository, store setting or object, or another error.\n";

static int to_stdout(void *ctx, const void *data, size_t len)
{
	(void)ctx;
	if (fwrite(data, 1, len, stdout) != len)
		return kiln_error_set(KILN_EIO, "stdout: write error: %s", strerror(errno));
	return 0;
}

int kiln_cmd_cat(int argc, char **argv)
{
	kiln_share share;
	kiln_cli_option rows[KILN_SHARE_NROWS + 1];
	const kiln_cli_spec spec = {
	    .cmd = "cat",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one DATASET[@REF] (see kiln cat --help)",
	};
	kiln_reader *r = NULL;
	kiln_reader_shard *shards;
	size_t *idx = NULL, nidx = 0;
	int first, status;

	kiln_share_init(&share);
	kiln_share_rows(rows, &share);
	rows[KILN_SHARE_NROWS] = KILN_CLI_END;
	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (kiln_share_open("cat", &share, argv[first], &r, &shards, &idx, &nidx) != 0)
		return KILN_EXIT_USAGE;
	for (size_t i = 0; i < nidx; i++) {
		if (kiln_reader_stream(r, &shards[idx[i]], to_stdout, NULL) != 0) {
			fflush(stdout); /* what was verified and written stays written */
			goto fail;
		}
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("cat", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
	goto cleanup;
fail:
	kiln_cli_fail("cat", "%s", kiln_error_last());
cleanup:
	free(idx);
	kiln_reader_close(r);
	return status;
}
