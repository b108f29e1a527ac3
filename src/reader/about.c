/* What a reader's version is and whether to trust it (include/kiln/reader.h):
 * its stats.json and dataset.json through the manifest codec, and the
 * checks of `kiln verify` (manifest/verify.h) for a training job that must
 * trust a version before reading it. */
#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "manifest/manifest.h"
#include "manifest/verify.h"
#include "reader/internal.h"

/* The file at `path` of the version's tree into out; KILN_ENOTFOUND naming
 * it when the tree has none. */
static int read_file(kiln_reader *r, const char *path, kiln_buf *out)
{
	int rc = kiln_version_read(r->manifest, &r->version, path, out);

	if (rc == 0)
		return kiln_error_set(KILN_ENOTFOUND, "%s: %s is missing", r->spec, path);
	return rc < 0 ? rc : 0;
}

int kiln_reader_read_stats(kiln_reader *r, kiln_reader_stats *out)
{
	kiln_buf text = KILN_BUF_INIT(0);
	kiln_stats s;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = read_file(r, "stats.json", &text)) == 0 &&
	    (rc = kiln_stats_parse(text.ptr, text.len, r->spec, &s)) == 0) {
		out->records_in = s.records_in;
		out->valid = s.valid;
		out->quarantined = s.quarantined;
		out->erased = s.erased;
		for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
			out->splits[i].records = s.splits[i].records;
			out->splits[i].shards = s.splits[i].shards;
			out->splits[i].bytes = s.splits[i].bytes;
			out->splits[i].raw_bytes = s.splits[i].raw_bytes;
		}
	}
	kiln_buf_free(&text);
	return rc;
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

int kiln_reader_read_definition(kiln_reader *r, kiln_reader_definition *out)
{
	memset(out, 0, sizeof(*out));
	if (!r->have_definition) {
		kiln_buf text = KILN_BUF_INIT(0);
		kiln_json_scanner *scanner = kiln_json_scanner_new(NULL);
		char where[300];
		int rc;

		snprintf(where, sizeof(where), "%s:dataset.json", r->spec);
		if (!scanner)
			rc = kiln_error_oom(NULL);
		else if ((rc = read_file(r, "dataset.json", &text)) == 0)
			rc = kiln_mfmt_dataset_parse(scanner, where, text.ptr, text.len, &r->definition);
		kiln_json_scanner_free(scanner);
		kiln_buf_free(&text);
		if (rc < 0) {
			kiln_mfmt_dataset_free(&r->definition);
			return rc;
		}
		r->have_definition = true;
	}
	out->contract_id = or_empty(r->definition.contract_id);
	out->contract_version = or_empty(r->definition.contract_version);
	out->token_scheme = or_empty(r->definition.token_scheme);
	out->key_id = or_empty(r->definition.key_id);
	out->key_version = or_empty(r->definition.key_version);
	out->split_scheme = or_empty(r->definition.split_scheme);
	out->split_key = or_empty(r->definition.split_key);
	out->split_salt = or_empty(r->definition.split_salt);
	out->shard_format = or_empty(r->definition.shard_format);
	out->shard_compression = or_empty(r->definition.shard_compression);
	return 0;
}

/* ---- trust ------------------------------------------------------------------ */

int kiln_reader_verify(kiln_reader *r, const char *trusted_keys, int deep, kiln_reader_trust *out,
                       kiln_reader_report report, void *ctx)
{
	static const kiln_signature states[] = {[KILN_VERIFY_SIG_NONE] = KILN_SIGNATURE_NONE,
	                                        [KILN_VERIFY_SIG_TAMPERED] = KILN_SIGNATURE_TAMPERED,
	                                        [KILN_VERIFY_SIG_GOOD] = KILN_SIGNATURE_GOOD};
	kiln_verify_keys keys = {0};
	kiln_verify_result v;
	int rc;

	memset(out, 0, sizeof(*out));
	if (deep && !r->store)
		return kiln_error_set(KILN_EINVALID, "%s: a deep check needs the reader opened with a store",
		                      r->spec);
	if ((trusted_keys && (rc = kiln_verify_keys_load(&keys, trusted_keys)) < 0) ||
	    (rc = kiln_verify_version(&v, r->manifest, &r->version, r->spec, &keys, deep ? r->store : NULL,
	                              report, ctx)) < 0)
		return rc;
	out->signature = states[v.sig.state];
	out->trusted = v.sig.trusted;
	out->must_be_signed = v.must_be_signed;
	memcpy(out->fingerprint, v.sig.fingerprint, sizeof(out->fingerprint));
	out->problems = v.problems;
	out->shards_ok = v.shards_ok;
	return 0;
}
