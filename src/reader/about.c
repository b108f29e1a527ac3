/* What a reader's version is and whether to trust it (include/kiln/reader.h):
 * its stats.json and dataset.json through the manifest codec, and the
 * checks of `kiln verify` (manifest/verify.h) for a training job that must
 * trust a version before reading it. */
#include <stdarg.h>
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
			rc = kiln_error_set(KILN_ENOMEM, "out of memory");
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

typedef struct trust_ctx {
	kiln_reader_trust *out;
	kiln_reader_report report;
	void *ctx;
} trust_ctx;

static void problem(void *ctx, const char *line)
{
	trust_ctx *t = ctx;

	t->out->problems++;
	if (t->report)
		t->report(t->ctx, line);
}

static void problemf(trust_ctx *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problemf(trust_ctx *t, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	problem(t, line);
}

/* The signature, judged as `kiln verify` judges it. */
static int check_signature(kiln_reader *r, const kiln_verify_keys *keys, trust_ctx *t)
{
	const char *shown = r->version.ref[0] ? r->version.ref : r->version.commit;
	kiln_reader_trust *out = t->out;
	kiln_verify_sig sig;
	bool must = false;
	int rc;

	if ((rc = kiln_version_must_be_signed(r->manifest, &r->version, &must)) < 0 ||
	    (rc = kiln_verify_signature(&sig, r->manifest, &r->version, keys)) < 0)
		return rc;
	out->must_be_signed = must;
	out->trusted = sig.trusted;
	switch (sig.state) {
	case KILN_VERIFY_SIG_NONE:
		out->signature = KILN_SIGNATURE_NONE;
		if (keys->count)
			problemf(t, "%s: %s is not signed", r->spec, shown);
		else if (must)
			problemf(t, "%s: %s is not signed, and the repository says it must be (%s)", r->spec,
			         shown, KILN_VERSION_SIGNED_KEY);
		break;
	case KILN_VERIFY_SIG_TAMPERED:
		out->signature = KILN_SIGNATURE_TAMPERED;
		problemf(t, "%s: the signature of %s does not match its content (tampered)", r->spec, shown);
		break;
	case KILN_VERIFY_SIG_GOOD:
		out->signature = KILN_SIGNATURE_GOOD;
		memcpy(out->fingerprint, sig.fingerprint, sizeof(out->fingerprint));
		if (keys->count && !sig.trusted)
			problemf(t, "%s: signed by ssh-ed25519 %s, which is not a trusted key", r->spec,
			         sig.fingerprint);
		break;
	}
	return 0;
}

int kiln_reader_verify(kiln_reader *r, const char *trusted_keys, int deep, kiln_reader_trust *out,
                       kiln_reader_report report, void *ctx)
{
	trust_ctx t = {out, report, ctx};
	kiln_verify_keys keys = {0};
	kiln_verify_tree_result tree;
	int rc;

	memset(out, 0, sizeof(*out));
	if (deep && !r->store)
		return kiln_error_set(KILN_EINVALID, "%s: a deep check needs the reader opened with a store",
		                      r->spec);
	if (trusted_keys && (rc = kiln_verify_keys_load(&keys, trusted_keys)) < 0)
		return rc;
	/* a tag object put under another version's name is refused before its
	 * signature is looked at, whoever signed it */
	if (kiln_version_check_tag(r->manifest, &r->version) < 0) {
		if (kiln_error_last_code() != KILN_EINVALID)
			return kiln_error_last_code();
		problemf(&t, "%s: %s", r->spec, kiln_error_last());
	} else if ((rc = check_signature(r, &keys, &t)) < 0) {
		return rc;
	}
	if ((rc = kiln_verify_tree(&tree, r->manifest, &r->version, r->spec, deep ? r->store : NULL, problem,
	                           &t)) < 0)
		return rc;
	out->shards_ok = tree.shards_ok;
	return 0;
}
