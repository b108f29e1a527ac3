/* A program outside the tree: what a training job asks before it trusts a
 * version, through the installed libkiln: the version's counts
 * (stats.json), how it was made (dataset.json) and kiln_reader_verify's
 * judgement (tag name, signature, tree and, with --deep, every shard).
 * Built by tests/integration/libkiln.sh with nothing but
 * `pkg-config --cflags --libs kiln`.
 *
 * usage: verify_version MANIFEST SPEC STORE_URL [--deep] [--keys FILE]
 * Exit 0 when the version can be trusted, 1 when problems were found, 2 on
 * an error that stopped the checks. */
#include <stdio.h>
#include <string.h>

#include <kiln/kiln.h>

static void print_problem(void *ctx, const char *problem)
{
	(void)ctx;
	printf("problem: %s\n", problem);
}

static const char *signature_name(kiln_signature s)
{
	return s == KILN_SIGNATURE_GOOD ? "good" : s == KILN_SIGNATURE_TAMPERED ? "tampered" : "none";
}

int main(int argc, char **argv)
{
	kiln_reader *r = NULL;
	kiln_reader_stats st;
	kiln_reader_definition d;
	kiln_reader_trust t;
	const char *keys = NULL;
	int deep = 0, rc;

	if (argc < 4) {
		fputs("usage: verify_version MANIFEST SPEC STORE_URL [--deep] [--keys FILE]\n", stderr);
		return 2;
	}
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--deep") == 0)
			deep = 1;
		else if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc)
			keys = argv[++i];
		else
			return 2;
	}
	if ((rc = kiln_reader_open(&r, argv[1], argv[2], argv[3], NULL)) == 0 &&
	    (rc = kiln_reader_read_stats(r, &st)) == 0 && (rc = kiln_reader_read_definition(r, &d)) == 0) {
		printf("stats: records_in=%llu valid=%llu quarantined=%llu",
		       (unsigned long long)st.records_in, (unsigned long long)st.valid,
		       (unsigned long long)st.quarantined);
		for (int s = 0; s < KILN_SPLIT_COUNT; s++)
			printf(" %s=%llu/%llu/%llu/%llu", kiln_split_name((kiln_split)s),
			       (unsigned long long)st.splits[s].records,
			       (unsigned long long)st.splits[s].shards,
			       (unsigned long long)st.splits[s].bytes,
			       (unsigned long long)st.splits[s].raw_bytes);
		printf("\ndefinition: contract=%s@%s token=%s key=%s/%s split=%s(%s,%s) shards=%s/%s\n",
		       d.contract_id, d.contract_version, d.token_scheme, d.key_id, d.key_version,
		       d.split_scheme, d.split_key, d.split_salt, d.shard_format, d.shard_compression);
		rc = kiln_reader_verify(r, keys, deep, &t, print_problem, NULL);
	}
	if (rc != 0) {
		fprintf(stderr, "verify_version: %s (%d)\n", kiln_error_last(), rc);
		kiln_reader_close(r);
		return 2;
	}
	printf("signature: %s%s%s trusted=%d must_be_signed=%d\n", signature_name(t.signature),
	       t.fingerprint[0] ? " " : "", t.fingerprint, t.trusted, t.must_be_signed);
	printf("problems: %u shards_ok: %llu\n", t.problems, (unsigned long long)t.shards_ok);
	kiln_reader_close(r);
	return t.problems ? 1 : 0;
}
