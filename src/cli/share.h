/* What `kiln ls` and `kiln cat` share: naming a version's split and one
 * rank's share of its shards (--split, --rank, --world-size, --shuffle-seed,
 * --manifest, --store) as kiln_cli_option rows, and opening the reader on it. */
#ifndef KILN_CLI_SHARE_H
#define KILN_CLI_SHARE_H

#include <stdbool.h>
#include <stdint.h>

#include "cli/args.h"
#include "kiln/reader.h"

typedef struct kiln_share {
	const char *repo, *store; /* default $KILN_MANIFEST, $KILN_STORE (set by kiln_cli_parse) */
	kiln_split split;         /* default train */
	uint64_t rank, world, seed;
	bool shuffle;
} kiln_share;

void kiln_share_init(kiln_share *share);

/* How many rows kiln_share_rows writes. */
#define KILN_SHARE_NROWS 6

/* Writes the KILN_SHARE_NROWS kiln_cli_option rows of the shared options,
 * whose values go into share, to out. */
void kiln_share_rows(kiln_cli_option *out, kiln_share *share);

/* Checks the options, opens the reader on `spec` and picks this rank's
 * shards: (*out_shards)[(*out_idx)[i]] for i < *out_n, in reading order.
 * *out_idx is the caller's to free, *out_reader to close. 0, or
 * KILN_EXIT_USAGE with the one-line error printed. */
int kiln_share_open(const char *cmd, const kiln_share *share, const char *spec, kiln_reader **out_reader,
                    kiln_reader_shard **out_shards, size_t **out_idx, size_t *out_n);

#endif
