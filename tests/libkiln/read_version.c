/* A program outside the tree: reads one split of a dataset version through
 * the installed libkiln, the way a training job would, and writes its
 * records to stdout as JSON Lines, shard after shard in hash order (what
 * `kiln cat SPEC --split SPLIT` writes). Built by
 * tests/integration/libkiln.sh with nothing but
 * `pkg-config --cflags --libs kiln`.
 *
 * usage: read_version MANIFEST SPEC STORE_URL SPLIT */
#include <stdio.h>
#include <stdlib.h>

#include <kiln/kiln.h>

static int to_stdout(void *ctx, const void *data, size_t len)
{
	(void)ctx;
	return fwrite(data, 1, len, stdout) == len ? 0 : KILN_EIO;
}

int main(int argc, char **argv)
{
	kiln_reader *r = NULL;
	kiln_reader_shard *shards;
	kiln_split split;
	size_t n, i;
	int rc;

	if (argc != 5) {
		fputs("usage: read_version MANIFEST SPEC STORE_URL train|dev|test\n", stderr);
		return 2;
	}
	if (kiln_split_from_name(argv[4], &split) != 0) {
		fprintf(stderr, "read_version: no split named %s\n", argv[4]);
		return 2;
	}
	rc = kiln_reader_open(&r, argv[1], argv[2], argv[3], NULL);
	if (rc == 0)
		rc = kiln_reader_shards(r, split, &shards, &n);
	for (i = 0; rc == 0 && i < n; i++)
		rc = kiln_reader_stream(r, &shards[i], to_stdout, NULL);
	if (rc != 0)
		fprintf(stderr, "read_version: %s (%d)\n", kiln_error_last(), rc);
	else
		fprintf(stderr, "read_version: %s %s: %zu shards of %s\n", kiln_reader_dataset(r),
		        kiln_reader_commit(r), n, kiln_split_name(split));
	kiln_reader_close(r);
	if (fflush(stdout) != 0)
		return 1;
	return rc == 0 ? 0 : 1;
}
