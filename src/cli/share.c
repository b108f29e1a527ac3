/* The options and reader set-up `kiln ls` and `kiln cat` share (see share.h). */
#include "cli/share.h"

#include <inttypes.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "core/error.h"
#include "core/units.h"

void kiln_share_init(kiln_share *s)
{
	s->repo = getenv("KILN_MANIFEST");
	s->store = getenv("KILN_STORE");
	s->split = KILN_SPLIT_TRAIN;
	s->rank = 0;
	s->world = 1;
	s->seed = 0;
	s->shuffle = false;
}

int kiln_share_option(const char *cmd, kiln_share *s, int opt, const char *arg)
{
	switch (opt) {
	case KILN_OPT_SPLIT:
		if (kiln_split_from_name(arg, &s->split) < 0)
			return kiln_cli_fail(cmd, "--split wants train, dev or test, not '%s'", arg);
		return 1;
	case KILN_OPT_RANK:
		if (kiln_parse_u64(arg, UINT32_MAX, &s->rank) < 0)
			return kiln_cli_fail(cmd, "--rank wants a number, not '%s'", arg);
		return 1;
	case KILN_OPT_WORLD:
		if (kiln_parse_u64(arg, UINT32_MAX, &s->world) < 0 || s->world == 0)
			return kiln_cli_fail(cmd, "--world-size wants a positive number, not '%s'", arg);
		return 1;
	case KILN_OPT_SEED:
		if (kiln_parse_u64(arg, UINT64_MAX, &s->seed) < 0)
			return kiln_cli_fail(cmd, "--shuffle-seed wants a number 0..2^64-1, not '%s'", arg);
		s->shuffle = true;
		return 1;
	case 'm':
		s->repo = arg;
		return 1;
	case KILN_OPT_STORE:
		s->store = arg;
		return 1;
	default:
		return 0;
	}
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
	if (!s->repo || !*s->repo)
		return kiln_cli_fail(cmd,
		                     "no manifest repository: give --manifest REPO or set KILN_MANIFEST");
	if (!s->store || !*s->store)
		return kiln_cli_fail(cmd, "no store: give --store URL or set KILN_STORE");
	if (kiln_reader_open(out_reader, s->repo, spec, s->store, NULL) < 0 ||
	    kiln_reader_shards(*out_reader, s->split, out_shards, &n) < 0)
		goto fail;
	if (!(*out_idx = malloc((n / s->world + 1) * sizeof(**out_idx)))) {
		kiln_error_set(KILN_ENOMEM, "out of memory");
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
