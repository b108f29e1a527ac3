/* The shared beginning and end of a run (see run_setup.h). */
#include "ingest/run_setup.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "contract/compat.h"
#include "core/error.h"
#include "core/log.h"
#include "core/yaml_doc.h"
#include "ingest/source.h"
#include "manifest/compact.h"
#include "manifest/format.h"
#include "manifest/remote.h"
#include "manifest/version.h"
#include "mask/curate.h"
#include "mask/token.h"
#include "shard/object.h"

/* A ratio as dataset.json writes it: 4 decimals, trailing zeros dropped
 * (0.8, 0.125). */
static void fmt_ratio(char out[32], double r)
{
	size_t n = (size_t)snprintf(out, 32, "%.4f", r);

	while (n > 2 && out[n - 1] == '0' && out[n - 2] != '.')
		out[--n] = '\0';
}

/* dataset.json: what a reader needs to interpret (and recompute) the data. */
static int render_dataset_json(kiln_buf *b, const kiln_pipeline *p, const kiln_contract *k,
                               const kiln_key *key, const char *dedup_key)
{
	char digest[160], key_version[16], prefix[24], ratios[KILN_SPLIT_COUNT][32], zstd_level[16],
	    target_bytes[24], window[24];
	kiln_mfmt_dataset d = {
	    .name = p->dataset,
	    .contract_id = k->id,
	    .contract_version = k->version,
	    .contract_api_version = k->api_version,
	    .contract_schema = k->schema_name,
	    .contract_digest = digest,
	    .have_pseudonymisation = true,
	    .token_scheme = KILN_TOKEN_SCHEME,
	    .key_id = key->id,
	    .key_version = key_version,
	    .token_prefix = prefix,
	    .redact_marker = KILN_REDACTED,
	    .have_split = true,
	    .split_scheme = KILN_SPLIT_SCHEME,
	    .split_key = p->split_key,
	    .split_salt = p->split_salt,
	    .shard_format = "jsonl",
	    .shard_compression = "zstd",
	    .zstd_level = zstd_level,
	    .target_bytes = target_bytes,
	    .shard_hash = "blake2b-256",
	    .shard_key = "shards/<hh>/<hash>.jsonl.zst",
	};

	snprintf(digest, sizeof(digest), "blake2b-256:%s", k->digest_hex);
	snprintf(key_version, sizeof(key_version), "%u", key->version);
	snprintf(prefix, sizeof(prefix), "p%u_", key->version);
	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		fmt_ratio(ratios[i], p->ratios[i]);
		d.ratios[i] = ratios[i];
	}
	if (p->dedup_key_count) {
		snprintf(window, sizeof(window), "%lld", (long long)(p->dedup_window_ms / 1000));
		d.dedup_key = dedup_key;
		d.dedup_window_seconds = window;
	}
	snprintf(zstd_level, sizeof(zstd_level), "%d", p->zstd_level);
	snprintf(target_bytes, sizeof(target_bytes), "%zu", p->target_bytes);
	return kiln_mfmt_dataset_render(b, &d);
}

/* The branch's index answers for the dedup.key its last commit recorded
 * (tip_key; NULL: none, or a branch written before kiln recorded it): a
 * pipeline with another key, or without dedup:, would let duplicates by
 * that key through, so it is refused unless its dedup.replaces_key names
 * tip_key (then the next commit starts a new index, or ends dedup). */
static int check_same_dedup_key(const kiln_pipeline *p, const char *tip_key, const char *key)
{
	kiln_buf replaces = KILN_BUF_INIT(0);
	bool replaced;
	int rc;

	if (!tip_key || (key && strcmp(tip_key, key) == 0))
		return 0;
	if ((rc = kiln_mfmt_dedup_key_render(&replaces, p->dedup_replaces, p->dedup_replaces_count)) < 0 ||
	    (rc = kiln_buf_putc(&replaces, '\0')) < 0)
		goto cleanup;
	replaced = p->dedup_replaces_count && strcmp(replaces.ptr, tip_key) == 0;
	if (replaced)
		KILN_LOG(KILN_LOG_INFO, key ? "dedup_new_index" : "dedup_ended",
		         key ? "dedup.key replaces the branch's: a new index starts"
		             : "dedup ends on the branch: its index goes with the next commit",
		         KILN_F_STR("replaces_key", tip_key));
	else if (key)
		rc = kiln_yaml_fail(p->doc, p->dedup_key_nodes[0], "dedup.key",
		                    "%s differs from %s, the key %s/%s's last commit deduplicated by (its "
		                    "index cannot answer for another key): to start a new index set "
		                    "dedup.replaces_key: %s, or run on a new branch (--set branch=NAME)",
		                    key, tip_key, p->dataset, p->branch, tip_key);
	else
		rc = kiln_error_set(KILN_EINVALID,
		                    "%s: no dedup:, but %s/%s's last commit deduplicated by %s (a run "
		                    "without it would let duplicates through): to end dedup on the "
		                    "branch set dedup.replaces_key: %s, or keep dedup: {key: %s, ...}",
		                    p->file, p->dataset, p->branch, tip_key, tip_key, tip_key);
cleanup:
	kiln_buf_free(&replaces);
	return rc;
}

/* A branch keeps one pseudonymisation key and one split definition for its
 * whole history (kiln_mfmt_dataset_definition_differs). A change is a new
 * dataset version, on a new branch. */
static int check_same_definition(const kiln_pipeline *p, kiln_manifest *m, const kiln_buf *now)
{
	kiln_buf before = KILN_BUF_INIT(0);
	kiln_json_scanner *scanner = NULL;
	kiln_mfmt_dataset a = {0}, b = {0};
	const char *part;
	char where[300];
	int rc = kiln_manifest_read(m, p->dataset, p->branch, "dataset.json", &before);

	if (rc <= 0)
		goto cleanup;
	if (!(scanner = kiln_json_scanner_new(NULL))) {
		rc = kiln_error_oom(NULL);
		goto cleanup;
	}
	snprintf(where, sizeof(where), "manifest: %s/%s:dataset.json", p->dataset, p->branch);
	if ((rc = kiln_mfmt_dataset_parse(scanner, where, before.ptr, before.len, &a)) < 0 ||
	    (rc = kiln_mfmt_dataset_parse(scanner, "dataset.json", now->ptr, now->len, &b)) < 0)
		goto cleanup;
	if ((part = kiln_mfmt_dataset_definition_differs(&a, &b)))
		rc = kiln_error_set(
		    KILN_EINVALID,
		    "%s: the %s settings (%s) differ from those %s/%s was made with; a new key, "
		    "split key, salt or ratios is a new dataset version: run on a new branch (--set "
		    "branch=NAME)",
		    p->file, part, part[0] == 'p' ? "key" : "key, salt, ratios", p->dataset, p->branch);
	else
		rc = check_same_dedup_key(p, a.dedup_key, b.dedup_key);
cleanup:
	kiln_mfmt_dataset_free(&a);
	kiln_mfmt_dataset_free(&b);
	kiln_json_scanner_free(scanner);
	kiln_buf_free(&before);
	return rc < 0 ? rc : 0;
}

/* The major number of a contract version ("2.1.0", "v2": 2; -1 without one). */
static long major_of(const char *version)
{
	char *end;
	long v;

	if (!version)
		return -1;
	if (*version == 'v' || *version == 'V')
		version++;
	v = strtol(version, &end, 10);
	return end == version ? -1 : v;
}

/* A branch's contract may change in ways its readers do not notice; a
 * change that breaks them (contract/compat.h) needs a new major version.
 * The branch tip's contract.yaml is the old contract (a branch made before
 * kiln kept it is checked from its next commit on). */
static int check_contract_change(const kiln_pipeline *p, kiln_manifest *m, const kiln_contract *now)
{
	kiln_buf before = KILN_BUF_INIT(0), list = KILN_BUF_INIT(0);
	kiln_contract_options copts = {.schema = now->schema_name};
	kiln_contract *old = NULL;
	kiln_contract_compat *diff = NULL;
	char name[300];
	int rc = kiln_manifest_read(m, p->dataset, p->branch, "contract.yaml", &before);

	if (rc <= 0 || (before.len == now->text_len && memcmp(before.ptr, now->text, before.len) == 0))
		goto cleanup;
	snprintf(name, sizeof(name), "manifest: %s/%s:contract.yaml", p->dataset, p->branch);
	if ((rc = kiln_contract_load_buffer(&old, name, before.ptr, before.len, &copts)) < 0 ||
	    (rc = kiln_contract_compat_diff(&diff, old, now)) < 0)
		goto cleanup;
	if (diff->breaking == 0 || major_of(now->version) > major_of(old->version))
		goto cleanup;
	if ((rc = kiln_contract_compat_breaking_list(&list, diff, 5)) < 0)
		goto cleanup;
	rc = kiln_error_set(
	    KILN_EINVALID,
	    "%s: contract %s %s -> %s breaks readers of %s/%s (%zu breaking: %s; kiln contract diff "
	    "lists them): raise the contract's major version or run on a new branch (--set "
	    "branch=NAME)",
	    p->contract, now->id ? now->id : "?", old->version ? old->version : "?",
	    now->version ? now->version : "?", p->dataset, p->branch, diff->breaking, list.ptr);
cleanup:
	kiln_contract_compat_free(diff);
	kiln_contract_free(old);
	kiln_buf_free(&before);
	kiln_buf_free(&list);
	return rc < 0 ? rc : 0;
}

/* The split key must name (kiln_contract_field_at: a dotted path through
 * objects, never into an array) a scalar field that keeps a value in the
 * curated record: neither it nor an object above it dropped or redacted.
 * (A record without a value for it cannot be placed: it is quarantined as
 * missing_required with the key's path, whether or not the contract
 * requires the field.) Errors name split.key's file:line:col. */
static int check_split_key(const kiln_pipeline *p, const kiln_contract *k, const kiln_field **out)
{
	const kiln_field *f, *hidden;

	if (kiln_contract_field_at(&f, &hidden, k, p->split_key) < 0)
		return kiln_yaml_fail(p->doc, p->split_key_node, "split.key", "%s", kiln_error_last());
	if (f->type == KILN_LTYPE_OBJECT || f->type == KILN_LTYPE_ARRAY)
		return kiln_yaml_fail(p->doc, p->split_key_node, "split.key", "field \"%s\" must be a scalar",
		                      p->split_key);
	if (hidden)
		return kiln_yaml_fail(p->doc, p->split_key_node, "split.key",
		                      "field \"%s\" is dropped or redacted in curated records", hidden->path);
	*out = f;
	return 0;
}

/* With manifest.remote: sends the branch there (rebased onto what other hosts
 * pushed, see manifest/remote.h); a branch that does not exist yet has nothing
 * to send. */
static int push_branch(const kiln_pipeline *p, kiln_manifest *manifest, char commit[41])
{
	kiln_buf probe = KILN_BUF_INIT(0);
	char ref[300];
	int rc;

	if (!p->manifest_remote)
		return 0;
	rc = kiln_manifest_read(manifest, p->dataset, p->branch, "dataset.json", &probe);
	kiln_buf_free(&probe);
	if (rc <= 0)
		return rc;
	snprintf(ref, sizeof(ref), "refs/heads/%s/%s", p->dataset, p->branch);
	if ((rc = kiln_manifest_push(manifest, p->manifest_remote, ref)) < 0)
		return rc;
	/* a rebased push replaced this run's commit: report the one on the branch */
	if (commit[0]) {
		kiln_version v;

		snprintf(ref, sizeof(ref), "%s@%s", p->dataset, p->branch);
		if ((rc = kiln_version_resolve(manifest, ref, &v)) < 0)
			return rc;
		memcpy(commit, v.commit, 41);
	}
	return 0;
}

/* Each dedup.key path names a scalar field of the contract the way
 * split.key does (a record without a value for one is quarantined as
 * missing_required). Errors name the path's file:line:col. */
static int check_dedup_keys(kiln_run_setup *s)
{
	const kiln_pipeline *p = s->p;
	const kiln_field *f, *hidden;

	for (size_t i = 0; i < p->dedup_key_count; i++) {
		if (kiln_contract_field_at(&f, &hidden, s->contract, p->dedup_keys[i]) < 0)
			return kiln_yaml_fail(p->doc, p->dedup_key_nodes[i], "dedup.key", "%s",
			                      kiln_error_last());
		if (f->type == KILN_LTYPE_OBJECT || f->type == KILN_LTYPE_ARRAY)
			return kiln_yaml_fail(p->doc, p->dedup_key_nodes[i], "dedup.key",
			                      "field \"%s\" must be a scalar", p->dedup_keys[i]);
		if (hidden)
			return kiln_yaml_fail(p->doc, p->dedup_key_nodes[i], "dedup.key",
			                      "field \"%s\" is dropped or redacted in curated records",
			                      hidden->path);
		s->dedup_fields[i] = f;
	}
	return 0;
}

int kiln_run_setup_contract(kiln_run_setup *s)
{
	kiln_contract_options copts = {.schema = s->p->schema};
	int rc;

	if ((rc = kiln_contract_load(&s->contract, s->p->contract, &copts)) < 0 ||
	    (rc = check_split_key(s->p, s->contract, &s->split_field)) < 0)
		return rc;
	return check_dedup_keys(s);
}

int kiln_run_setup_keys(kiln_run_setup *s)
{
	const kiln_pipeline *p = s->p;
	int rc;

	if (sodium_init() < 0)
		return kiln_error_set(KILN_EIO, "libsodium failed to initialise");
	rc = p->key_file ? kiln_key_load_file(&s->key, p->key_file, p->key_version)
	                 : kiln_key_load_env(&s->key, p->key_env, p->key_version);
	if (rc < 0)
		return rc;
	s->key_loaded = true;
	/* the dedup index's hash key: the index reveals nothing without the
	 * pseudonymisation key, and no token can be told from it */
	static const char context[] = "kiln dedup index key v1";
	crypto_generichash(s->dedup_key, sizeof(s->dedup_key), (const unsigned char *)context,
	                   sizeof(context) - 1, s->key.bytes, sizeof(s->key.bytes));
	if (p->signing_key_file && (rc = kiln_signing_key_load(&s->signing_key, p->signing_key_file)) < 0)
		return rc;
	return kiln_splitter_init(&s->splitter, p->split_salt, p->ratios);
}

int kiln_run_setup_store(kiln_run_setup *s)
{
	return kiln_store_open(&s->store, s->p->store_url, &s->p->store);
}

int kiln_run_setup_manifest(kiln_run_setup *s)
{
	const kiln_pipeline *p = s->p;
	int rc;

	if ((rc = kiln_manifest_open(&s->manifest, p->manifest_repo)) < 0)
		return rc;
	return p->manifest_remote ? kiln_manifest_fetch(s->manifest, p->manifest_remote, p->dataset) : 0;
}

int kiln_run_setup_definition(kiln_run_setup *s)
{
	int rc;

	kiln_buf_reset(&s->dataset_json);
	kiln_buf_reset(&s->dedup_key_text);
	if ((rc = kiln_mfmt_dedup_key_render(&s->dedup_key_text, s->p->dedup_keys, s->p->dedup_key_count)) <
	        0 ||
	    (rc = kiln_buf_putc(&s->dedup_key_text, '\0')) < 0 ||
	    (rc = render_dataset_json(&s->dataset_json, s->p, s->contract, &s->key, s->dedup_key_text.ptr)) <
	        0 ||
	    (rc = check_same_definition(s->p, s->manifest, &s->dataset_json)) < 0 ||
	    (rc = check_contract_change(s->p, s->manifest, s->contract)) < 0)
		return rc;
	return kiln_buf_putc(&s->dataset_json, '\0');
}

int kiln_run_setup_open(kiln_run_setup *s, const kiln_pipeline *p)
{
	int rc;

	memset(s, 0, sizeof(*s));
	s->p = p;
	/* settings first: a refused one creates no store folder or repository */
	if ((rc = kiln_source_check_settings(p)) < 0 || (rc = kiln_run_setup_contract(s)) < 0 ||
	    (rc = kiln_run_setup_keys(s)) < 0 || (rc = kiln_run_setup_store(s)) < 0 ||
	    (rc = kiln_run_setup_manifest(s)) < 0 || (rc = kiln_run_setup_definition(s)) < 0 ||
	    (p->dedup_key_count && (rc = kiln_dedup_new(&s->dedup, p->dedup_window_ms)) < 0)) {
		kiln_run_setup_close(s);
		return rc;
	}
	if (s->dedup)
		kiln_dedup_set_max_keys(s->dedup, p->dedup_max_keys);
	if ((rc = kiln_run_setup_dedup_load(s)) < 0) {
		kiln_run_setup_close(s);
		return rc;
	}
	return 0;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int kiln_run_setup_dedup_load(kiln_run_setup *s)
{
	int rc;

	if (!s->dedup)
		return 0;
	rc = kiln_manifest_dedup_load(s->manifest, s->p->dataset, s->p->branch, wall_ms(),
	                              s->dedup_key_text.ptr, s->dedup, s->dedup_base);
	if (rc == KILN_ELIMIT)
		rc = kiln_error_set(KILN_EINVALID,
		                    "%s: dedup.max_keys: %s/%s's index holds more than %zu keys committed "
		                    "within dedup.window: raise dedup.max_keys (10 million keys take about "
		                    "384 MiB) or shorten dedup.window",
		                    s->p->file, s->p->dataset, s->p->branch, s->p->dedup_max_keys);
	if (rc == 0)
		KILN_LOG(KILN_LOG_DEBUG, "dedup_loaded", "",
		         KILN_F_INT("keys", (int64_t)kiln_dedup_committed_count(s->dedup)));
	return rc;
}

void kiln_run_setup_close(kiln_run_setup *s)
{
	kiln_dedup_free(s->dedup);
	s->dedup = NULL;
	sodium_memzero(s->dedup_key, sizeof(s->dedup_key));
	kiln_manifest_close(s->manifest);
	kiln_store_close(s->store);
	kiln_contract_free(s->contract);
	kiln_buf_free(&s->dataset_json);
	kiln_buf_free(&s->dedup_key_text);
	if (s->key_loaded)
		kiln_key_wipe(&s->key);
	kiln_signing_key_wipe(&s->signing_key);
	s->manifest = NULL;
	s->store = NULL;
	s->contract = NULL;
	s->key_loaded = false;
}

/* Every shard the snapshot lists must still be in the store: `kiln gc`
 * spares objects younger than its grace period, and this check refuses a
 * commit whose run held an upload for longer than that and lost it, instead
 * of committing a version whose shards are gone. Nothing is committed then,
 * so the run's input is read again by the next run. */
static int check_shards_stored(const kiln_run_setup *s, const kiln_snapshot *snap)
{
	char key[KILN_SHARD_KEY_CAP];
	uint64_t size;
	int rc;

	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		for (size_t j = 0; j < snap->shard_count[i]; j++) {
			const kiln_shard_entry *e = &snap->shards[i][j];

			if ((rc = kiln_shard_name(key, sizeof(key), NULL, e->hash, NULL)) < 0)
				return rc;
			if ((rc = kiln_store_stat(s->store, key, &size)) < 0)
				return rc;
			if (rc == 0 || size != e->bytes)
				return kiln_error_set(
				    KILN_EIO,
				    "%s: %s: this run's shard is %s (removed by kiln gc or by hand "
				    "while the run held it); nothing committed, run again",
				    s->store->url, key, rc == 0 ? "gone" : "not the size it was written at");
		}
	return 0;
}

/* After a commit: compacts the manifest repository when it has piled up
 * manifest.compact_loose_objects loose objects (manifest/compact.h; one
 * member at a time). The commit is on the branch whatever happens here, so
 * a failure is logged, not returned: the next commit tries again. */
static void auto_compact(kiln_run_setup *s)
{
	kiln_compact_stats cs;
	bool ran = false;
	uint64_t loose = 0;

	if (s->p->compact_loose_objects == 0)
		return;
	if (kiln_manifest_compact_auto(s->manifest, s->p->compact_loose_objects, s->p->compact_grace_seconds,
	                               &ran, &loose, &cs) < 0) {
		KILN_LOG(KILN_LOG_WARN, "compact_failed", kiln_error_last());
		return;
	}
	s->loose_objects = loose;
	if (!ran)
		return;
	s->compactions++;
	KILN_LOG(KILN_LOG_INFO, "compacted", "manifest repository packed", KILN_F_INT("packed", cs.packed),
	         KILN_F_INT("loose_removed", cs.loose_removed), KILN_F_INT("loose_kept", cs.loose_kept),
	         KILN_F_INT("packs_removed", cs.packs_removed));
}

/* Tries a commit that a peer's commit or a peer's ref lock got in the way of
 * again on the new tip, after a random pause that grows with each try; a
 * fence refusal (KILN_EFENCED) is final. */
#define COMMIT_ATTEMPTS 40

const kiln_retry_policy kiln_commit_retry = {
    .first_us = 4000, .max_us = 512000, .jitter = KILN_RETRY_FULL, .floor_us = 2000};

/* quarantine.max_ratio: the one place a snapshot's quarantined share is
 * held to it (file and Kafka runs alike), counts only in the message. */
static int check_quarantine_ratio(const kiln_pipeline *p, const kiln_stats *d)
{
	double share;

	if (p->quarantine_max_ratio <= 0 || d->records_in == 0)
		return 0;
	share = (double)d->quarantined / (double)d->records_in;
	if (share <= p->quarantine_max_ratio)
		return 0;
	return kiln_error_set(KILN_EINVALID,
	                      "quarantine.max_ratio: %llu of %llu records quarantined (%.3f > %.3f); nothing "
	                      "committed",
	                      (unsigned long long)d->quarantined, (unsigned long long)d->records_in, share,
	                      p->quarantine_max_ratio);
}

int kiln_run_setup_commit(kiln_run_setup *s, kiln_snapshot *snap, char out_commit[41])
{
	const kiln_pipeline *p = s->p;
	int rc;

	if ((rc = check_quarantine_ratio(p, &snap->delta)) < 0)
		return rc;
	snap->dataset = p->dataset;
	snap->branch = p->branch;
	snap->author_name = p->author_name;
	snap->author_email = p->author_email;
	snap->dataset_json = s->dataset_json.ptr;
	snap->contract_text = s->contract->text;
	snap->contract_len = s->contract->text_len;
	snap->signing_key = p->signing_key_file ? &s->signing_key : NULL;
	if ((rc = check_shards_stored(s, snap)) < 0)
		return rc;
	bool moved = false;
	if (s->dedup) {
		snap->dedup = true;
		snap->dedup_keys = kiln_dedup_pending(s->dedup, &snap->dedup_count);
		snap->dedup_ms = wall_ms();
		snap->dedup_window_ms = p->dedup_window_ms;
		snap->dedup_base = s->dedup_base;
		snap->dedup_moved = &moved;
	} else if (p->dedup_replaces_count) {
		snap->dedup = snap->dedup_end = true; /* dedup ended: dedup/ goes once the key was replaced */
		snap->dedup_ms = wall_ms();
	}
	for (int attempt = 1;; attempt++) {
		rc = kiln_manifest_commit(s->manifest, snap, out_commit);
		if ((rc != KILN_EMODIFIED && rc != KILN_ERETRY) || attempt == COMMIT_ATTEMPTS)
			break;
		s->commit_retries++;
		KILN_LOG(KILN_LOG_DEBUG, "commit_retry", kiln_error_last(), KILN_F_INT("attempt", attempt));
		kiln_retry_sleep(&kiln_commit_retry, (unsigned)attempt);
	}
	if (rc < 0)
		return rc;
	char local[41];
	memcpy(local, out_commit, sizeof(local));
	if (s->dedup) {
		if ((rc = kiln_dedup_commit(s->dedup, snap->dedup_ms)) < 0)
			return rc;
		memcpy(s->dedup_base, local, sizeof(local));
	}
	if ((rc = push_branch(p, s->manifest, out_commit)) < 0)
		return rc;
	/* the branch had moved since the index was loaded (another writer), or
	 * the push rebased this commit: the index takes the keys others committed */
	if (s->dedup && (moved || strcmp(local, out_commit) != 0) && (rc = kiln_run_setup_dedup_load(s)) < 0)
		return rc;
	auto_compact(s);
	return 0;
}

int kiln_run_setup_push(kiln_run_setup *s, char out_commit[41])
{
	return push_branch(s->p, s->manifest, out_commit);
}
