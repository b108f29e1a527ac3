/* The options and reader set-up `kiln ls` and `kiln cat` share (see share.h). */
#include "cli/share.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/error.h"

void kiln_share_init(kiln_share *s)
{
	s->repo = NULL;
	s->store = NULL;
	s->split = KILN_SPLIT_TRAIN;
	s->rank = 0;
	s->world = 1;
	s->seed = 0;
	s->shuffle = false;
}

static int parse_split(const char *cmd, const char *arg, void *out)
{
	if (kiln_split_from_name(arg, out) < 0)
		return kiln_cli_fail(cmd, "--split wants train, dev or test, not '%s'", arg);
	return 0;
}

void kiln_share_rows(kiln_cli_option *out, kiln_share *s)
{
	const kiln_cli_option rows[KILN_SHARE_NROWS] = {
	    {.name = "split", .kind = KILN_CLI_CUSTOM, .out = &s->split, .parse = parse_split},
	    {.name = "rank",
	     .kind = KILN_CLI_U64,
	     .out = &s->rank,
	     .max = UINT32_MAX,
	     .bad = "--rank wants a number"},
	    {.name = "world-size",
	     .kind = KILN_CLI_U64,
	     .out = &s->world,
	     .min = 1,
	     .max = UINT32_MAX,
	     .bad = "--world-size wants a positive number"},
	    {.name = "shuffle-seed",
	     .kind = KILN_CLI_U64,
	     .out = &s->seed,
	     .seen = &s->shuffle,
	     .max = UINT64_MAX,
	     .bad = "--shuffle-seed wants a number 0..2^64-1"},
	    KILN_CLI_MANIFEST_ROW(&s->repo),
	    {.name = "store", .kind = KILN_CLI_STORE, .out = &s->store},
	};

	memcpy(out, rows, sizeof(rows));
}

int kiln_share_open(const char *cmd, const kiln_share *s, const char *spec, kiln_reader **out_reader,
                    kiln_reader_shard **out_shards, size_t **out_idx, size_t *out_n)
{
	size_t n;

	*out_reader = NULL;
	*out_idx = NULL;
	if (s->rank >= s->world)
		return kiln_cli_fail(cmd, "--rank %" PRIu64 " must be below --world-size %" PRIu64, s->rank,
		                     s->world);
	if (kiln_cli_need_manifest(cmd, s->repo) != 0 || kiln_cli_need_store(cmd, s->store) != 0)
		return KILN_EXIT_USAGE;
	if (kiln_reader_open(out_reader, s->repo, spec, s->store, NULL) < 0 ||
	    kiln_reader_shards(*out_reader, s->split, out_shards, &n) < 0)
		goto fail;
	if (!(*out_idx = malloc((n / s->world + 1) * sizeof(**out_idx)))) {
		kiln_error_oom(NULL);
		goto fail;
	}
	if (kiln_reader_assign(*out_shards, n, (unsigned)s->rank, (unsigned)s->world, s->seed, s->shuffle,
	                       *out_idx, out_n) < 0)
		goto fail;
	return 0;
fail:
	kiln_cli_fail(cmd, "%s", kiln_error_last());
	free(*out_idx);
	*out_idx = NULL;
	kiln_reader_close(*out_reader);
	*out_reader = NULL;
	return KILN_EXIT_USAGE;
}
