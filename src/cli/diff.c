/* `kiln diff A B`: the shards added and removed between two versions, per
 * split, with their record and byte counts; --shards lists each hash. Only
 * the fan-out blobs that differ are read (kiln_version_diff). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/error.h"
#include "manifest/version.h"

static const char usage_text[] =
    "usage: kiln diff DATASET@REF DATASET@REF [--manifest REPO] [--shards]\n"
    "\n"
    "Compares two versions (e.g. kiln diff user-events@v1 user-events@main): for\n"
    "each split, the shards in the second that the first lacks (+) and the\n"
    "shards in the first that the second lacks (-), with their records and\n"
    "compressed bytes:\n"
    "  train: +3 shards (+1500 records, +204800 bytes), -0 shards (-0 records, -0 bytes)\n"
    "\n"
    "Options:\n"
    "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
    "  -s, --shards          also list each shard: '  + HASH RECORDS BYTES' (or -)\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on success (whether or not they differ), 2 on a bad\n"
    "reference, a missing repository or another error.\n";

typedef struct change {
	char hash[65];
	uint64_t records, bytes;
	bool added;
} change;

typedef struct side {
	uint64_t shards, records, bytes;
} side;

typedef struct diff_state {
	side plus[KILN_SPLIT_COUNT], minus[KILN_SPLIT_COUNT];
	bool keep; /* --shards */
	change *list[KILN_SPLIT_COUNT];
	size_t n[KILN_SPLIT_COUNT], cap[KILN_SPLIT_COUNT];
} diff_state;

static int on_change(void *ctx, kiln_split split, const kiln_shard_entry *e, bool added)
{
	diff_state *d = ctx;
	side *s = added ? &d->plus[split] : &d->minus[split];
	change *c;

	s->shards++;
	s->records += e->records;
	s->bytes += e->bytes;
	if (!d->keep)
		return 0;
	if (d->n[split] == d->cap[split]) {
		size_t cap = d->cap[split] ? d->cap[split] * 2 : 64;
		change *v = realloc(d->list[split], cap * sizeof(*v));

		if (!v)
			return kiln_error_set(KILN_ENOMEM, "out of memory");
		d->list[split] = v;
		d->cap[split] = cap;
	}
	c = &d->list[split][d->n[split]++];
	memcpy(c->hash, e->hash, sizeof(c->hash));
	c->records = e->records;
	c->bytes = e->bytes;
	c->added = added;
	return 0;
}

int kiln_cmd_diff(int argc, char **argv)
{
	const char *repo;
	diff_state d;
	const kiln_cli_option rows[] = {
	    KILN_CLI_MANIFEST_ROW(&repo),
	    {.name = "shards", .letter = 's', .kind = KILN_CLI_FLAG, .out = &d.keep},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "diff",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 2,
	    .max_args = 2,
	    .args_error = "expected two versions, DATASET@REF DATASET@REF (see kiln diff --help)",
	};
	kiln_manifest *m = NULL;
	kiln_version a, b;
	int first, status;

	memset(&d, 0, sizeof(d));
	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	if (kiln_cli_need_manifest("diff", repo) != 0)
		return KILN_EXIT_USAGE;
	status = KILN_EXIT_USAGE;
	if (kiln_version_open(&m, repo) < 0 || kiln_version_resolve(m, argv[first], &a) < 0 ||
	    kiln_version_resolve(m, argv[first + 1], &b) < 0 ||
	    kiln_version_diff(m, &a, &b, on_change, &d) < 0) {
		kiln_cli_fail("diff", "%s", kiln_error_last());
		goto cleanup;
	}
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		printf("%s: +%" PRIu64 " shards (+%" PRIu64 " records, +%" PRIu64 " bytes), -%" PRIu64
		       " shards (-%" PRIu64 " records, -%" PRIu64 " bytes)\n",
		       kiln_split_name((kiln_split)s), d.plus[s].shards, d.plus[s].records, d.plus[s].bytes,
		       d.minus[s].shards, d.minus[s].records, d.minus[s].bytes);
		for (size_t i = 0; i < d.n[s]; i++)
			printf("  %c %s %" PRIu64 " %" PRIu64 "\n", d.list[s][i].added ? '+' : '-',
			       d.list[s][i].hash, d.list[s][i].records, d.list[s][i].bytes);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		kiln_cli_fail("diff", "stdout: write error");
		goto cleanup;
	}
	status = KILN_EXIT_OK;
cleanup:
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		free(d.list[s]);
	kiln_manifest_close(m);
	return status;
}
