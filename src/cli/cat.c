/* `kiln cat DATASET@REF --split S`: streams a version's records to stdout as
 * JSON Lines, shard by shard, each shard's bytes verified against its name
 * before a byte of it is written; optionally one rank's share, shuffled by
 * a seed (the same assignment as `kiln ls` and kiln_reader_assign). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/error.h"
#include "core/units.h"
#include "kiln/reader.h"

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
	"  --store URL           the object store, file://DIR or s3://BUCKET/PREFIX\n"
	"                        (default: $KILN_STORE)\n"
	"  -h, --help            show this help\n"
	"\n"
	"Exit status: 0 on success; 2 on a shard that fails verification (hash\n"
	"mismatch, broken zstd frame; `kiln verify --deep` checks them all), a bad\n"
	"reference, a missing repository, store setting or object, or another error.\n";

enum { OPT_SPLIT = 256, OPT_RANK, OPT_WORLD, OPT_SEED, OPT_STORE };

static int to_stdout(void *ctx, const void *data, size_t len)
{
	(void)ctx;
	if (fwrite(data, 1, len, stdout) != len)
		return kiln_error_set(KILN_EIO, "stdout: write error: %s", strerror(errno));
	return 0;
}

int kiln_cmd_cat(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "split", required_argument, NULL, OPT_SPLIT },
		{ "rank", required_argument, NULL, OPT_RANK },
		{ "world-size", required_argument, NULL, OPT_WORLD },
		{ "shuffle-seed", required_argument, NULL, OPT_SEED },
		{ "manifest", required_argument, NULL, 'm' },
		{ "store", required_argument, NULL, OPT_STORE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *repo = getenv("KILN_MANIFEST"), *store = getenv("KILN_STORE");
	kiln_split split = KILN_SPLIT_TRAIN;
	uint64_t rank = 0, world = 1, seed = 0;
	bool shuffle = false;
	kiln_reader *r = NULL;
	kiln_reader_shard *shards;
	size_t n, *idx = NULL, nidx = 0;
	int opt, status = KILN_EXIT_USAGE;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "m:h", long_options, NULL)) != -1) {
		switch (opt) {
		case OPT_SPLIT:
			if (kiln_split_from_name(optarg, &split) < 0)
				return kiln_cli_fail("cat", "--split wants train, dev or test, not '%s'",
						     optarg);
			break;
		case OPT_RANK:
			if (kiln_parse_u64(optarg, UINT32_MAX, &rank) < 0)
				return kiln_cli_fail("cat", "--rank wants a number, not '%s'", optarg);
			break;
		case OPT_WORLD:
			if (kiln_parse_u64(optarg, UINT32_MAX, &world) < 0 || world == 0)
				return kiln_cli_fail("cat", "--world-size wants a positive number, not '%s'",
						     optarg);
			break;
		case OPT_SEED:
			if (kiln_parse_u64(optarg, UINT64_MAX, &seed) < 0)
				return kiln_cli_fail(
					"cat", "--shuffle-seed wants a number 0..2^64-1, not '%s'", optarg);
			shuffle = true;
			break;
		case 'm':
			repo = optarg;
			break;
		case OPT_STORE:
			store = optarg;
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
		return kiln_cli_fail("cat", "expected one DATASET[@REF] (see kiln cat --help)");
	if (rank >= world)
		return kiln_cli_fail("cat", "--rank %" PRIu64 " must be below --world-size %" PRIu64, rank,
				     world);
	if (!repo || !*repo)
		return kiln_cli_fail("cat",
				     "no manifest repository: give --manifest REPO or set KILN_MANIFEST");
	if (!store || !*store)
		return kiln_cli_fail("cat", "no store: give --store URL or set KILN_STORE");
	if (kiln_reader_open(&r, repo, argv[optind], store, NULL) < 0 ||
	    kiln_reader_shards(r, split, &shards, &n) < 0)
		goto fail;
	if (!(idx = malloc((n / world + 1) * sizeof(*idx)))) {
		kiln_error_set(KILN_ENOMEM, "out of memory");
		goto fail;
	}
	if (kiln_reader_assign(shards, n, (unsigned)rank, (unsigned)world, seed, shuffle, idx, &nidx) < 0)
		goto fail;
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
