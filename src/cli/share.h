/* What `kiln ls` and `kiln cat` share: naming a version's split and one
 * rank's share of its shards (--split, --rank, --world-size, --shuffle-seed,
 * --manifest, --store), and opening the reader on it. */
#ifndef KILN_CLI_SHARE_H
#define KILN_CLI_SHARE_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "kiln/reader.h"

enum { KILN_OPT_SPLIT = 256, KILN_OPT_RANK, KILN_OPT_WORLD, KILN_OPT_SEED, KILN_OPT_STORE };

/* getopt_long entries for the shared options (plus -m, --manifest). */
#define KILN_SHARE_LONG_OPTIONS                                                                              \
	{"split", required_argument, NULL, KILN_OPT_SPLIT},                                                  \
	    {"rank", required_argument, NULL, KILN_OPT_RANK},                                                \
	    {"world-size", required_argument, NULL, KILN_OPT_WORLD},                                         \
	    {"shuffle-seed", required_argument, NULL, KILN_OPT_SEED},                                        \
	    {"manifest", required_argument, NULL, 'm'},                                                      \
	{                                                                                                    \
		"store", required_argument, NULL, KILN_OPT_STORE                                             \
	}

typedef struct kiln_share {
	const char *repo, *store; /* default $KILN_MANIFEST, $KILN_STORE */
	kiln_split split;         /* default train */
	uint64_t rank, world, seed;
	bool shuffle;
} kiln_share;

void kiln_share_init(kiln_share *share);

/* Takes one getopt result: 1 when it was a shared option, 0 when it is the
 * command's own, KILN_EXIT_USAGE (message printed) for a bad value. */
int kiln_share_option(const char *cmd, kiln_share *share, int opt, const char *arg);

/* Checks the options, opens the reader on `spec` and picks this rank's
 * shards: (*out_shards)[(*out_idx)[i]] for i < *out_n, in reading order.
 * *out_idx is the caller's to free, *out_reader to close. 0, or
 * KILN_EXIT_USAGE with the one-line error printed. */
int kiln_share_open(const char *cmd, const kiln_share *share, const char *spec, kiln_reader **out_reader,
                    kiln_reader_shard **out_shards, size_t **out_idx, size_t *out_n);

#endif
