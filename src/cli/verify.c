/* `kiln verify DATASET@REF [--deep]`: checks that a tag version's tag object
 * carries the version's name, the version's SSH signature (the tag's for a
 * promoted version, else the commit's) against trusted keys or, without
 * them, that a version the repository's kiln.signed requires signed is,
 * the consistency of its tree (shard lines in the right fan-out file and
 * order, stats.json agreeing with the shards listed), and with --deep that
 * every shard in the store still hashes to its name. Names what is wrong. */
#include <errno.h>
#include <getopt.h>
#include <git2.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "manifest/format.h"
#include "manifest/internal.h"
#include "manifest/manifest.h"
#include "manifest/sshsig.h"
#include "manifest/version.h"
#include "shard/fetch.h"
#include "store/store.h"

static const char usage_text[] =
    "usage: kiln verify DATASET@REF [--deep] [--allowed-signers FILE | --public-key FILE]\n"
    "                   [--manifest REPO] [--store URL]\n"
    "\n"
    "Checks the version's signature (the tag's for DATASET@vN, else the\n"
    "commit's) against the trusted keys, the consistency of its tree, and with\n"
    "--deep that every shard in the store hashes to its name and size.\n"
    "\n"
    "Options:\n"
    "      --allowed-signers FILE  trusted keys, git's allowed-signers format\n"
    "      --public-key FILE       a trusted key, ssh-ed25519 public key line\n"
    "      --deep                  also read every shard from the store\n"
    "  -m, --manifest REPO         manifest repository (default $KILN_MANIFEST)\n"
    "  -s, --store URL             object store for --deep (default $KILN_STORE)\n"
    "  -h, --help                  show this help\n"
    "\n"
    "For DATASET@vN the tag object must be named DATASET/vN. Without trusted\n"
    "keys the signature is reported, not checked, and an unsigned version fails\n"
    "only where the repository's kiln.signed requires it (docs/RELEASES.md).\n"
    "Exit status:\n"
    "0 verified, 1 a check failed (named on stderr), 2 usage or access error.\n";

#define MAX_TRUSTED 64

typedef struct trusted {
	unsigned char pk[MAX_TRUSTED][32];
	size_t count;
} trusted;

/* The ed25519 key of an "ssh-ed25519 AAAA..." field. */
static bool parse_ssh_ed25519(const char *b64, size_t len, unsigned char pk[32])
{
	unsigned char blob[128];
	size_t n = 0;

	if (sodium_base642bin(blob, sizeof(blob), b64, len, NULL, &n, NULL, sodium_base64_VARIANT_ORIGINAL) !=
	        0 ||
	    n != 4 + 11 + 4 + 32 || memcmp(blob + 4, "ssh-ed25519", 11) != 0)
		return false;
	memcpy(pk, blob + 19, 32);
	return true;
}

/* Every "ssh-ed25519 <base64>" in a file (allowed-signers lines or a .pub). */
static int load_trusted(trusted *t, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[4096];

	if (!f)
		return kiln_error_set(KILN_ENOTFOUND, "%s: cannot open: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f) && t->count < MAX_TRUSTED) {
		char *at = strstr(line, "ssh-ed25519 ");
		if (!at || line[0] == '#')
			continue;
		at += 12;
		size_t len = strcspn(at, " \t\r\n");
		if (parse_ssh_ed25519(at, len, t->pk[t->count]))
			t->count++;
	}
	fclose(f);
	if (!t->count)
		return kiln_error_set(KILN_EINVALID, "%s: no ssh-ed25519 key in it", path);
	return 0;
}

static void fingerprint(const unsigned char pk[32], char out[64])
{
	unsigned char blob[51], digest[32];
	char b64[64];

	memcpy(blob, "\0\0\0\x0bssh-ed25519\0\0\0\x20", 19);
	memcpy(blob + 19, pk, 32);
	crypto_hash_sha256(digest, blob, sizeof(blob));
	sodium_bin2base64(b64, sizeof(b64), digest, sizeof(digest),
	                  sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
	snprintf(out, 64, "SHA256:%s", b64);
}

/* Finds the signature of the version: for a tag version the tag object's
 * (appended to its message; a lightweight tag has none), else the commit's
 * gpgsig header. The tag object is the one resolution found (v->tag), not
 * whatever the ref holds by now. 1 signed (signature and payload in the
 * buffers), 0 unsigned. */
static int read_signature(kiln_manifest *m, const kiln_version *v, kiln_buf *sig, kiln_buf *payload)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_oid oid;
	int gerr;

	if (strncmp(v->ref, "refs/tags/", 10) == 0) {
		git_odb *odb = NULL;
		git_odb_object *obj = NULL;
		int rc = 0;

		if (!v->tag[0])
			return 0;
		if (git_oid_fromstr(&oid, v->tag) < 0)
			return kiln_error_set(KILN_EINVALID, "bad tag id %s", v->tag);
		if ((gerr = git_repository_odb(&odb, repo)) < 0 ||
		    (gerr = git_odb_read(&obj, odb, &oid)) < 0) {
			git_odb_free(odb);
			return kiln_manifest_git_fail(m, gerr, v->ref);
		}
		if (git_odb_object_type(obj) == GIT_OBJECT_TAG) {
			const char *data = git_odb_object_data(obj);
			size_t len = git_odb_object_size(obj);
			const char *begin = memmem(data, len, "-----BEGIN SSH SIGNATURE-----", 29);
			if (begin) {
				kiln_buf_put(payload, data, (size_t)(begin - data));
				kiln_buf_put(sig, begin, len - (size_t)(begin - data));
				rc = 1;
			}
		}
		git_odb_object_free(obj);
		git_odb_free(odb);
		return rc;
	}
	git_buf s = {0}, d = {0};
	if (git_oid_fromstr(&oid, v->commit) < 0)
		return kiln_error_set(KILN_EINVALID, "bad commit id %s", v->commit);
	gerr = git_commit_extract_signature(&s, &d, repo, &oid, "gpgsig");
	if (gerr == GIT_ENOTFOUND)
		return 0;
	if (gerr < 0)
		return kiln_manifest_git_fail(m, gerr, v->commit);
	kiln_buf_put(sig, s.ptr, s.size);
	kiln_buf_put(payload, d.ptr, d.size);
	git_buf_dispose(&s);
	git_buf_dispose(&d);
	return 1;
}

/* The "name" of a dataset.json text equals dataset. */
static bool dataset_json_names(const kiln_buf *json, const char *dataset)
{
	kiln_json_scanner *scanner = kiln_json_scanner_new(NULL);
	kiln_mfmt_dataset d = {0};
	bool match;

	if (!scanner)
		return false;
	match = kiln_mfmt_dataset_parse(scanner, "dataset.json", json->ptr, json->len, &d) == 0 && d.name &&
	        strcmp(d.name, dataset) == 0;
	kiln_mfmt_dataset_free(&d);
	kiln_json_scanner_free(scanner);
	return match;
}

/* --- tree consistency ----------------------------------------------------- */

typedef struct tree_check {
	const kiln_version *v;
	kiln_split split;
	char last[65];
	kiln_split_stats sum;
	int problems;
	/* --deep */
	kiln_store *store;
	uint64_t deep_ok;
} tree_check;

static int check_shard(void *ctx, const kiln_shard_entry *e)
{
	tree_check *c = ctx;
	const char *split = kiln_split_name(c->split);

	if (c->last[0] && strcmp(e->hash, c->last) <= 0) {
		fprintf(stderr,
		        "kiln verify: %s: splits/%s/%.2s.jsonl: shard %s is out of order or listed twice\n",
		        c->v->dataset, split, e->hash, e->hash);
		c->problems++;
	}
	memcpy(c->last, e->hash, 65);
	c->sum.records += e->records;
	c->sum.shards++;
	c->sum.bytes += e->bytes;
	c->sum.raw_bytes += e->raw_bytes;
	if (!c->store)
		return 0;

	kiln_shard_request f = {.hash = e->hash, .bytes = e->bytes};
	int rc = kiln_shard_fetch(c->store, &f);

	if (rc == KILN_ENOTFOUND) {
		fprintf(stderr, "kiln verify: %s: shard %s (%s) is missing from the store\n", c->v->dataset,
		        e->hash, split);
		c->problems++;
		return 0;
	}
	if (rc < 0 && f.fault == KILN_SHARD_OK)
		return rc; /* the store cannot be read: not a verdict on the shard */
	if (rc < 0 || f.size != e->bytes) {
		fprintf(stderr, "kiln verify: %s: shard %s (%s) is corrupt or tampered: %s\n", c->v->dataset,
		        e->hash, split,
		        f.fault == KILN_SHARD_BAD_HASH ? "its content hash differs from its name"
		                                       : "its size differs from the manifest");
		c->problems++;
		return 0;
	}
	c->deep_ok++;
	return 0;
}

int kiln_cmd_verify(int argc, char **argv)
{
	static const struct option long_options[] = {
	    {"deep", no_argument, NULL, 'd'},
	    {"allowed-signers", required_argument, NULL, 'a'},
	    {"public-key", required_argument, NULL, 'k'},
	    {"manifest", required_argument, NULL, 'm'},
	    {"store", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *manifest_path = getenv("KILN_MANIFEST"), *store_url = getenv("KILN_STORE");
	bool deep = false;
	trusted keys = {.count = 0};
	kiln_manifest *m = NULL;
	kiln_store *store = NULL;
	kiln_version v;
	kiln_buf sig = KILN_BUF_INIT(0), payload = KILN_BUF_INIT(0), stats_text = KILN_BUF_INIT(0),
	         dataset_text = KILN_BUF_INIT(0);
	kiln_stats stats;
	const char *shown;
	bool must_sign = false;
	int opt, rc, problems = 0, status = KILN_EXIT_USAGE;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "m:s:h", long_options, NULL)) != -1) {
		switch (opt) {
		case 'd':
			deep = true;
			break;
		case 'a':
		case 'k':
			if (load_trusted(&keys, optarg) < 0)
				return kiln_cli_fail("verify", "%s", kiln_error_last());
			break;
		case 'm':
			manifest_path = optarg;
			break;
		case 's':
			store_url = optarg;
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
		return kiln_cli_fail("verify", "expected one DATASET@REF (see kiln verify --help)");
	if (!manifest_path || !*manifest_path)
		return kiln_cli_fail("verify", "no manifest repository: use --manifest or set KILN_MANIFEST");
	if (deep && (!store_url || !*store_url))
		return kiln_cli_fail("verify", "--deep needs the store: use --store or set KILN_STORE");
	if (kiln_manifest_open(&m, manifest_path) < 0 || kiln_version_lookup(m, argv[optind], &v) < 0 ||
	    kiln_version_must_be_signed(m, &v, &must_sign) < 0 ||
	    (deep && kiln_store_open(&store, store_url, NULL) < 0)) {
		kiln_cli_fail("verify", "%s", kiln_error_last());
		goto cleanup;
	}
	shown = v.ref[0] ? v.ref : v.commit;

	/* the name: a tag object put under another version's name is refused
	 * before its signature is looked at, whoever signed it */
	if (kiln_version_check_tag(m, &v) < 0) {
		if (kiln_error_last_code() != KILN_EINVALID) {
			kiln_cli_fail("verify", "%s", kiln_error_last());
			goto cleanup;
		}
		fprintf(stderr, "kiln verify: %s: %s\n", argv[optind], kiln_error_last());
		problems++;
		goto tree;
	}

	/* the signature */
	rc = read_signature(m, &v, &sig, &payload);
	if (rc < 0) {
		kiln_cli_fail("verify", "%s", kiln_error_last());
		goto cleanup;
	}
	if (rc == 0) {
		if (keys.count) {
			fprintf(stderr, "kiln verify: %s: %s is not signed\n", argv[optind], shown);
			problems++;
		} else if (must_sign) {
			fprintf(
			    stderr,
			    "kiln verify: %s: %s is not signed, and the repository says it must be (%s)\n",
			    argv[optind], shown, KILN_VERSION_SIGNED_KEY);
			problems++;
		} else {
			printf("signature: none (%s is unsigned)\n", shown);
		}
	} else {
		unsigned char pk[32];
		char fp[64];
		bool trusted_key = false;
		if (kiln_sshsig_verify(sig.ptr, sig.len, "git", payload.ptr, payload.len, pk) < 0) {
			fprintf(
			    stderr,
			    "kiln verify: %s: the signature of %s does not match its content (tampered)\n",
			    argv[optind], shown);
			problems++;
		} else {
			fingerprint(pk, fp);
			for (size_t i = 0; i < keys.count; i++)
				trusted_key |= sodium_memcmp(pk, keys.pk[i], 32) == 0;
			if (keys.count && !trusted_key) {
				fprintf(
				    stderr,
				    "kiln verify: %s: signed by ssh-ed25519 %s, which is not a trusted key\n",
				    argv[optind], fp);
				problems++;
			} else {
				printf("signature: good, ssh-ed25519 %s%s\n", fp,
				       keys.count ? " (trusted)"
				                  : " (no trusted keys given: not checked against any)");
			}
		}
	}

tree:
	/* the dataset: the version's dataset.json names it */
	if ((rc = kiln_version_read(m, &v, "dataset.json", &dataset_text)) < 0) {
		kiln_cli_fail("verify", "%s", kiln_error_last());
		goto cleanup;
	}
	if (rc == 0 || !dataset_json_names(&dataset_text, v.dataset)) {
		fprintf(stderr, "kiln verify: %s: %s\n", argv[optind],
		        rc == 0 ? "dataset.json is missing" : "its dataset.json names another dataset");
		problems++;
	}

	/* the tree */
	tree_check c = {.v = &v, .store = store};
	bool have_stats = false;
	memset(&stats, 0, sizeof(stats));
	if ((rc = kiln_version_read(m, &v, "stats.json", &stats_text)) < 0) {
		kiln_cli_fail("verify", "%s", kiln_error_last());
		goto cleanup;
	}
	if (rc == 0) {
		fprintf(stderr, "kiln verify: %s: stats.json is missing\n", argv[optind]);
		problems++;
	} else if (kiln_stats_parse(stats_text.ptr, stats_text.len, argv[optind], &stats) < 0) {
		fprintf(stderr, "kiln verify: %s: %s\n", argv[optind], kiln_error_last());
		problems++;
	} else {
		have_stats = true;
	}
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		c.split = (kiln_split)s;
		c.last[0] = '\0';
		memset(&c.sum, 0, sizeof(c.sum));
		if ((rc = kiln_version_shards(m, &v, c.split, check_shard, &c)) < 0) {
			kiln_cli_fail("verify", "%s", kiln_error_last());
			goto cleanup;
		}
		if (have_stats &&
		    (stats.splits[s].records != c.sum.records || stats.splits[s].shards != c.sum.shards ||
		     stats.splits[s].bytes != c.sum.bytes || stats.splits[s].raw_bytes != c.sum.raw_bytes)) {
			fprintf(stderr,
			        "kiln verify: %s: stats.json says %s holds %llu records in %llu shards, the "
			        "shard list %llu in %llu\n",
			        argv[optind], kiln_split_name(s), (unsigned long long)stats.splits[s].records,
			        (unsigned long long)stats.splits[s].shards, (unsigned long long)c.sum.records,
			        (unsigned long long)c.sum.shards);
			problems++;
		}
	}
	problems += c.problems;
	if (have_stats && stats.records_in != stats.valid + stats.quarantined) {
		fprintf(
		    stderr,
		    "kiln verify: %s: stats.json does not balance (%llu in, %llu valid, %llu quarantined)\n",
		    argv[optind], (unsigned long long)stats.records_in, (unsigned long long)stats.valid,
		    (unsigned long long)stats.quarantined);
		problems++;
	}
	if (!problems) {
		printf("tree: consistent (%s, commit %.12s)\n", v.ref[0] ? v.ref : "commit", v.commit);
		if (deep)
			printf("store: %llu shards verified\n", (unsigned long long)c.deep_ok);
		status = KILN_EXIT_OK;
	} else {
		status = KILN_EXIT_INVALID;
	}
cleanup:
	kiln_buf_free(&sig);
	kiln_buf_free(&payload);
	kiln_buf_free(&stats_text);
	kiln_buf_free(&dataset_text);
	kiln_store_close(store);
	kiln_manifest_close(m);
	return status;
}
