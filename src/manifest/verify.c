/* Verifying a version: trusted keys read, the signature of a tag object or
 * commit found and checked, and the tree (dataset.json, stats.json, the
 * shard lists, profile.json and, with a store, the shards) checked for
 * consistency. Each
 * problem is reported through the caller's callback; owns nothing beyond a
 * call. */
#include "manifest/verify.h"
#include "manifest/ledger.h"

#include <errno.h>
#include <git2.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "manifest/format.h"
#include "core/base64.h"
#include "manifest/internal.h"
#include "manifest/sshsig.h"
#include "quality/profile.h"
#include "shard/fetch.h"

/* --- trusted keys --------------------------------------------------------- */

/* The ed25519 key of an "ssh-ed25519 AAAA..." field. */
static bool parse_ssh_ed25519(const char *b64, size_t len, unsigned char pk[32])
{
	unsigned char blob[128];
	size_t n = 0;

	if (kiln_base64_decode(blob, sizeof(blob), b64, len, NULL, &n) != 0 || n != 4 + 11 + 4 + 32 ||
	    memcmp(blob + 4, "ssh-ed25519", 11) != 0)
		return false;
	memcpy(pk, blob + 19, 32);
	return true;
}

int kiln_verify_keys_load(kiln_verify_keys *t, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[4096];

	if (!f)
		return kiln_error_set(KILN_ENOTFOUND, "%s: cannot open: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f) && t->count < KILN_VERIFY_MAX_KEYS) {
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

bool kiln_verify_keys_trust(const kiln_verify_keys *keys, const unsigned char pk[32])
{
	bool trusted = false;

	for (size_t i = 0; keys && i < keys->count; i++)
		trusted |= sodium_memcmp(pk, keys->pk[i], 32) == 0;
	return trusted;
}

void kiln_verify_fingerprint(char out[64], const unsigned char pk[32])
{
	unsigned char blob[51], digest[32];
	char b64[48]; /* 44 for 32 bytes (sodium_base64_ENCODED_LEN) */

	memcpy(blob, "\0\0\0\x0bssh-ed25519\0\0\0\x20", 19);
	memcpy(blob + 19, pk, 32);
	crypto_hash_sha256(digest, blob, sizeof(blob));
	sodium_bin2base64(b64, sizeof(b64), digest, sizeof(digest),
	                  sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
	snprintf(out, 64, "SHA256:%s", b64);
}

/* --- the signature -------------------------------------------------------- */

/* The tag object's signature, appended to its message. 1 signed, 0 not. */
static int read_tag_signature(kiln_manifest *m, const kiln_version *v, kiln_buf *sig, kiln_buf *payload)
{
	git_odb *odb = NULL;
	git_odb_object *obj = NULL;
	git_oid oid;
	int gerr, rc = 0;

	if (!v->tag[0])
		return 0;
	if (git_oid_fromstr(&oid, v->tag) < 0)
		return kiln_error_set(KILN_EINVALID, "bad tag id %s", v->tag);
	if ((gerr = git_repository_odb(&odb, kiln_manifest_repo(m))) < 0 ||
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

/* For a tag version the tag object's signature, else the commit's gpgsig
 * header. 1 signed (signature and payload in the buffers), 0 unsigned. */
static int read_signature(kiln_manifest *m, const kiln_version *v, kiln_buf *sig, kiln_buf *payload)
{
	git_buf s = {0}, d = {0};
	git_oid oid;
	int gerr;

	if (strncmp(v->ref, "refs/tags/", 10) == 0)
		return read_tag_signature(m, v, sig, payload);
	if (git_oid_fromstr(&oid, v->commit) < 0)
		return kiln_error_set(KILN_EINVALID, "bad commit id %s", v->commit);
	gerr = git_commit_extract_signature(&s, &d, kiln_manifest_repo(m), &oid, "gpgsig");
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

int kiln_verify_signature(kiln_verify_sig *out, kiln_manifest *manifest, const kiln_version *version,
                          const kiln_verify_keys *keys)
{
	kiln_buf sig = KILN_BUF_INIT(0), payload = KILN_BUF_INIT(0);
	unsigned char pk[32];
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = read_signature(manifest, version, &sig, &payload)) <= 0)
		goto cleanup;
	rc = 0;
	if (kiln_sshsig_verify(sig.ptr, sig.len, "git", payload.ptr, payload.len, pk) < 0) {
		out->state = KILN_VERIFY_SIG_TAMPERED;
		goto cleanup;
	}
	out->state = KILN_VERIFY_SIG_GOOD;
	kiln_verify_fingerprint(out->fingerprint, pk);
	out->trusted = kiln_verify_keys_trust(keys, pk);
cleanup:
	kiln_buf_free(&sig);
	kiln_buf_free(&payload);
	return rc;
}

/* --- the tree ------------------------------------------------------------- */

typedef struct tree_check {
	const kiln_version *v;
	const char *spec;
	kiln_verify_report report;
	void *ctx;
	kiln_verify_tree_result *out;
	kiln_split split;
	char last[65];
	kiln_split_stats sum;
	kiln_store *store;
} tree_check;

/* One problem line, counted, to report (may be NULL). */
static void problem(kiln_verify_report report, void *ctx, unsigned *count, const char *fmt, va_list ap)
{
	char line[2048];

	vsnprintf(line, sizeof(line), fmt, ap);
	(*count)++;
	if (report)
		report(ctx, line);
}

static void say(tree_check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(tree_check *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	problem(c->report, c->ctx, &c->out->problems, fmt, ap);
	va_end(ap);
}

static int check_shard(void *ctx, const kiln_shard_entry *e)
{
	tree_check *c = ctx;
	const char *split = kiln_split_name(c->split);

	if (c->last[0] && strcmp(e->hash, c->last) <= 0)
		say(c, "%s: splits/%s/%.2s.jsonl: shard %s is out of order or listed twice", c->v->dataset,
		    split, e->hash, e->hash);
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
		say(c, "%s: shard %s (%s) is missing from the store", c->v->dataset, e->hash, split);
		return 0;
	}
	if (rc < 0 && f.fault == KILN_SHARD_OK)
		return rc; /* the store cannot be read: not a verdict on the shard */
	if (rc < 0 || f.size != e->bytes) {
		say(c, "%s: shard %s (%s) is corrupt or tampered: %s", c->v->dataset, e->hash, split,
		    f.fault == KILN_SHARD_BAD_HASH ? "its content hash differs from its name"
		                                   : "its size differs from the manifest");
		return 0;
	}
	c->out->shards_ok++;
	return 0;
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

static int check_dataset(tree_check *c, kiln_manifest *m)
{
	kiln_buf text = KILN_BUF_INIT(0);
	int rc = kiln_version_read(m, c->v, "dataset.json", &text);

	if (rc >= 0 && (rc == 0 || !dataset_json_names(&text, c->v->dataset)))
		say(c, "%s: %s", c->spec,
		    rc == 0 ? "dataset.json is missing" : "its dataset.json names another dataset");
	kiln_buf_free(&text);
	return rc < 0 ? rc : 0;
}

/* 1 with stats parsed, 0 when missing or bad (reported). */
static int read_stats(tree_check *c, kiln_manifest *m, kiln_stats *stats)
{
	kiln_buf text = KILN_BUF_INIT(0);
	int rc;

	memset(stats, 0, sizeof(*stats));
	if ((rc = kiln_version_read(m, c->v, "stats.json", &text)) < 0)
		goto cleanup;
	if (rc == 0) {
		say(c, "%s: stats.json is missing", c->spec);
	} else if (kiln_stats_parse(text.ptr, text.len, c->spec, stats) < 0) {
		say(c, "%s: %s", c->spec, kiln_error_last());
		rc = 0;
	}
cleanup:
	kiln_buf_free(&text);
	return rc;
}

/* profile.json, when the version has one, against stats.json and its own
 * sums (kiln_version_profile checks it): a profile that does not hold
 * together is reported, not returned. */
static int check_profile(tree_check *c, kiln_manifest *m)
{
	kiln_profile total = {0}, added = {0};
	int rc = kiln_version_profile(m, c->v, c->spec, &total, &added);

	kiln_profile_free(&total);
	kiln_profile_free(&added);
	if (rc >= 0)
		return 0;
	if (kiln_error_last_code() != KILN_EINVALID)
		return rc;
	say(c, "%s", kiln_error_last());
	return 0;
}

int kiln_verify_tree(kiln_verify_tree_result *out, kiln_manifest *manifest, const kiln_version *version,
                     const char *spec, kiln_store *store, kiln_verify_report report, void *ctx)
{
	tree_check c = {.v = version, .spec = spec, .report = report, .ctx = ctx, .out = out, .store = store};
	kiln_stats stats;
	int rc, have_stats;

	memset(out, 0, sizeof(*out));
	if ((rc = check_dataset(&c, manifest)) < 0 ||
	    (rc = have_stats = read_stats(&c, manifest, &stats)) < 0)
		return rc;
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		const kiln_split_stats *want = &stats.splits[s];

		c.split = (kiln_split)s;
		c.last[0] = '\0';
		memset(&c.sum, 0, sizeof(c.sum));
		if ((rc = kiln_version_shards(manifest, version, c.split, check_shard, &c)) < 0)
			return rc;
		if (have_stats && (want->records != c.sum.records || want->shards != c.sum.shards ||
		                   want->bytes != c.sum.bytes || want->raw_bytes != c.sum.raw_bytes))
			say(&c,
			    "%s: stats.json says %s holds %llu records in %llu shards, the shard list %llu "
			    "in %llu",
			    spec, kiln_split_name(s), (unsigned long long)want->records,
			    (unsigned long long)want->shards, (unsigned long long)c.sum.records,
			    (unsigned long long)c.sum.shards);
	}
	if (have_stats && stats.records_in != stats.valid + stats.quarantined + stats.erased) {
		char erased[40] = "";

		if (stats.erased)
			snprintf(erased, sizeof(erased), ", %llu erased", (unsigned long long)stats.erased);
		say(&c, "%s: stats.json does not balance (%llu in, %llu valid, %llu quarantined%s)", spec,
		    (unsigned long long)stats.records_in, (unsigned long long)stats.valid,
		    (unsigned long long)stats.quarantined, erased);
	}
	/* a profile is judged against stats.json only when stats.json holds together */
	return have_stats && out->problems == 0 ? check_profile(&c, manifest) : 0;
}

/* ---- the whole judgement -------------------------------------------------- */

typedef struct judge {
	kiln_verify_result *out;
	kiln_verify_report report;
	void *ctx;
} judge;

static void judge_line(void *ctx, const char *line)
{
	judge *j = ctx;

	j->out->problems++;
	if (j->report)
		j->report(j->ctx, line);
}

static void judgef(judge *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void judgef(judge *j, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	problem(j->report, j->ctx, &j->out->problems, fmt, ap);
	va_end(ap);
}

/* The signature found, and whether it is a problem. */
static void judge_signature(judge *j, const kiln_version *v, const char *spec, const kiln_verify_keys *keys)
{
	const char *shown = v->ref[0] ? v->ref : v->commit;
	const kiln_verify_sig *sig = &j->out->sig;
	bool have_keys = keys && keys->count;

	j->out->sig_ok = false;
	if (sig->state == KILN_VERIFY_SIG_NONE && have_keys)
		judgef(j, "%s: %s is not signed", spec, shown);
	else if (sig->state == KILN_VERIFY_SIG_NONE && j->out->must_be_signed)
		judgef(j, "%s: %s is not signed, and the repository says it must be (%s)", spec, shown,
		       KILN_VERSION_SIGNED_KEY);
	else if (sig->state == KILN_VERIFY_SIG_TAMPERED)
		judgef(j, "%s: the signature of %s does not match its content (tampered)", spec, shown);
	else if (sig->state == KILN_VERIFY_SIG_GOOD && have_keys && !sig->trusted)
		judgef(j, "%s: signed by ssh-ed25519 %s, which is not a trusted key", spec, sig->fingerprint);
	else
		j->out->sig_ok = true;
}

/* An erasure the version's messages name must be in the ledger, the ledger
 * entry must name this very commit (and tag) as the successor, and with
 * trusted keys the ledger must be signed by one: old tag -> entry -> new tag. */
typedef struct erasure_find {
	const kiln_version_erasure *er;
	const kiln_version *v;
	bool entry, commit, tag;
} erasure_find;

static int find_erasure(void *ctx, const kiln_ledger_entry *e)
{
	erasure_find *f = ctx;

	if (strcmp(e->id, f->er->id) != 0)
		return 0;
	f->entry = true;
	for (size_t i = 0; i < e->commit_count; i++)
		if (strcmp(e->commits[i].old_id, f->er->old_commit) == 0 &&
		    strcmp(e->commits[i].new_id, f->v->commit) == 0)
			f->commit = true;
	for (size_t i = 0; i < e->ref_count; i++)
		if (strcmp(e->refs[i].ref, f->v->ref) == 0 &&
		    strcmp(e->refs[i].old_id, f->er->old_tag) == 0 &&
		    strcmp(e->refs[i].new_id, f->v->tag) == 0)
			f->tag = true;
	return 0;
}

static int judge_erasure(judge *j, kiln_manifest *m, const kiln_version *v, const char *spec,
                         const kiln_verify_keys *keys)
{
	kiln_version_erasure er;
	erasure_find f = {.er = &er, .v = v};
	kiln_version ledger = {0};
	kiln_verify_sig sig;
	int rc = kiln_version_erasure_of(m, v, &er);

	if (rc < 0) {
		if ((rc = kiln_error_last_code()) != KILN_EINVALID)
			return rc;
		judgef(j, "%s: %s", spec, kiln_error_last());
		return 0;
	}
	if (rc == 0)
		return 0;
	if ((rc = kiln_ledger_each(m, v->dataset, find_erasure, &f)) < 0) {
		if (rc != KILN_EINVALID)
			return rc;
		judgef(j, "%s: %s", spec, kiln_error_last());
		return 0;
	}
	if (!f.entry)
		judgef(j,
		       "%s: rewritten by erasure %s, which the ledger (" KILN_LEDGER_REF_PREFIX
		       "%s) does not record",
		       spec, er.id, v->dataset);
	else if (!f.commit)
		judgef(j, "%s: erasure %s in the ledger does not name commit %.12s as the successor of %.12s",
		       spec, er.id, v->commit, er.old_commit);
	else if (er.old_tag[0] && !f.tag)
		judgef(j, "%s: erasure %s in the ledger does not name tag %.12s as superseding tag %.12s",
		       spec, er.id, v->tag, er.old_tag);
	if (!keys || keys->count == 0 || kiln_ledger_tip(m, v->dataset, ledger.commit) != 1)
		return 0;
	snprintf(ledger.dataset, sizeof(ledger.dataset), "%s", v->dataset);
	if ((rc = kiln_verify_signature(&sig, m, &ledger, keys)) < 0)
		return rc;
	if (sig.state != KILN_VERIFY_SIG_GOOD || !sig.trusted)
		judgef(j,
		       "%s: the erasure ledger " KILN_LEDGER_REF_PREFIX "%s is not signed by a trusted key",
		       spec, v->dataset);
	return 0;
}

int kiln_verify_version(kiln_verify_result *out, kiln_manifest *manifest, const kiln_version *version,
                        const char *spec, const kiln_verify_keys *keys, kiln_store *store,
                        kiln_verify_report report, void *ctx)
{
	static const kiln_verify_keys none = {.count = 0};
	judge j = {out, report, ctx};
	kiln_verify_tree_result tree;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = kiln_version_must_be_signed(manifest, version, &out->must_be_signed)) < 0)
		return rc;
	if (kiln_version_check_tag(manifest, version) < 0) {
		if ((rc = kiln_error_last_code()) != KILN_EINVALID)
			return rc;
		judgef(&j, "%s: %s", spec, kiln_error_last());
	} else {
		out->name_ok = true;
		if ((rc = kiln_verify_signature(&out->sig, manifest, version, keys ? keys : &none)) < 0)
			return rc;
		judge_signature(&j, version, spec, keys);
	}
	if ((rc = kiln_verify_tree(&tree, manifest, version, spec, store, judge_line, &j)) < 0)
		return rc;
	out->shards_ok = tree.shards_ok;
	return judge_erasure(&j, manifest, version, spec, keys);
}
