/* `kiln ls DATASET@REF --split S`: a version's shards in one split with their
 * records, compressed bytes and store URLs (text or JSON Lines); optionally
 * only one rank's share, in its reading order (as `kiln cat` reads them). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/units.h"
#include "kiln/reader.h"

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
	"  --store URL           the object store, file://DIR or s3://BUCKET/PREFIX\n"
	"                        (default: $KILN_STORE)\n"
	"  -h, --help            show this help\n"
	"\n"
	"Exit status: 0 on success, 2 on a bad reference, a missing repository or\n"
	"store setting, or another error.\n";

enum { OPT_SPLIT = 256, OPT_RANK, OPT_WORLD, OPT_SEED, OPT_STORE };

int kiln_cmd_ls(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "split", required_argument, NULL, OPT_SPLIT },
		{ "format", required_argument, NULL, 'f' },
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
	bool json = false, shuffle = false;
	kiln_reader *r = NULL;
	kiln_reader_shard *shards;
	size_t n, *idx = NULL, nidx = 0;
	kiln_buf line = KILN_BUF_INIT(0);
	int opt, status = KILN_EXIT_USAGE;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "f:m:h", long_options, NULL)) != -1) {
		switch (opt) {
		case OPT_SPLIT:
			if (kiln_split_from_name(optarg, &split) < 0)
				return kiln_cli_fail("ls", "--split wants train, dev or test, not '%s'",
						     optarg);
			break;
		case 'f':
			if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
				return kiln_cli_fail("ls", "--format wants text or json, not '%s'", optarg);
			json = strcmp(optarg, "json") == 0;
			break;
		case OPT_RANK:
			if (kiln_parse_u64(optarg, UINT32_MAX, &rank) < 0)
				return kiln_cli_fail("ls", "--rank wants a number, not '%s'", optarg);
			break;
		case OPT_WORLD:
			if (kiln_parse_u64(optarg, UINT32_MAX, &world) < 0 || world == 0)
				return kiln_cli_fail("ls", "--world-size wants a positive number, not '%s'",
						     optarg);
			break;
		case OPT_SEED:
			if (kiln_parse_u64(optarg, UINT64_MAX, &seed) < 0)
				return kiln_cli_fail(
					"ls", "--shuffle-seed wants a number 0..2^64-1, not '%s'", optarg);
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
		return kiln_cli_fail("ls", "expected one DATASET[@REF] (see kiln ls --help)");
	if (rank >= world)
		return kiln_cli_fail("ls", "--rank %" PRIu64 " must be below --world-size %" PRIu64, rank,
				     world);
	if (!repo || !*repo)
		return kiln_cli_fail("ls",
				     "no manifest repository: give --manifest REPO or set KILN_MANIFEST");
	if (!store || !*store)
		return kiln_cli_fail("ls", "no store: give --store URL or set KILN_STORE");
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
