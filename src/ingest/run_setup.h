/* What every run shares before and after its source is read: the source's
 * settings checked (kiln_source_check_settings), the contract
 * and split key checked, the pseudonymisation key and signing key loaded,
 * the store and the manifest repository opened (fetched from
 * manifest.remote), dataset.json rendered and checked against the branch
 * (a branch keeps one key and one split definition), and at the end the
 * snapshot committed and pushed. */
#ifndef KILN_INGEST_RUN_SETUP_H
#define KILN_INGEST_RUN_SETUP_H

#include <stdbool.h>

#include "contract/contract.h"
#include "core/buf.h"
#include "core/retry.h"
#include "ingest/pipeline.h"
#include "manifest/dedup.h"
#include "manifest/manifest.h"
#include "manifest/sshsig.h"
#include "mask/key.h"
#include "shard/split.h"
#include "store/store.h"

typedef struct kiln_run_setup {
	const kiln_pipeline *p;
	kiln_contract *contract;
	const kiln_field *split_field;
	const kiln_field *dedup_fields[16]; /* the pipeline's dedup.key fields */
	unsigned char dedup_key[32];        /* the dedup hash key, derived from key */
	kiln_dedup *dedup;                  /* the branch's dedup index; NULL: no dedup */
	char dedup_base[41];                /* the commit the index is of ("" before the first) */
	kiln_buf dedup_key_text; /* dedup.key as dataset.json records it, NUL-terminated ("" without) */
	kiln_key key;
	bool key_loaded;
	kiln_signing_key signing_key;
	kiln_splitter splitter;
	kiln_store *store;
	kiln_manifest *manifest;
	kiln_buf dataset_json;   /* NUL-terminated */
	uint64_t commit_retries; /* commits tried again: the branch moved or a peer held its lock */
	uint64_t compactions;    /* automatic compactions of the manifest this run did */
	uint64_t loose_objects;  /* loose objects in the manifest after the last commit */
} kiln_run_setup;

/* Everything above, in that order; on failure what was opened is closed. */
int kiln_run_setup_open(kiln_run_setup *out, const kiln_pipeline *pipeline);

/* kiln_run_setup_open's steps, in its order, each needing the ones before
 * it (s zeroed, s->p set): kiln check (ingest/check.h) runs them one at a
 * time to report every problem, not the first. Close with
 * kiln_run_setup_close either way. */
int kiln_run_setup_contract(kiln_run_setup *s); /* the contract; the split key is in it */
int kiln_run_setup_keys(kiln_run_setup *s);     /* the pseudonymisation and signing keys; the splitter */
int kiln_run_setup_store(kiln_run_setup *s);    /* the store opened */
/* the manifest repository opened (created when missing), fetched from manifest.remote */
int kiln_run_setup_manifest(kiln_run_setup *s);
/* dataset.json rendered and compared with the branch's (the dedup.key too, docs/PIPELINES.md);
 * a contract change checked against the branch tip's contract.yaml (needs the contract, the key
 * and the manifest) */
int kiln_run_setup_definition(kiln_run_setup *s);
/* With dedup: the index set to the branch tip's (pending keys dropped). */
int kiln_run_setup_dedup_load(kiln_run_setup *s);
/* Wipes the keys and closes everything; a zeroed setup is fine. */
void kiln_run_setup_close(kiln_run_setup *s);

/* Commits `snap` (shards, lineage and delta set by the caller; dataset,
 * branch, author, dataset.json and signature filled in here) and pushes the
 * branch to manifest.remote. First holds the delta to quarantine.max_ratio
 * (KILN_EINVALID "quarantine.max_ratio: Q of N records quarantined (...);
 * nothing committed" when its quarantined share exceeds it), then checks
 * that every shard it lists is in the store (KILN_EIO, nothing committed,
 * when one is gone). A commit the
 * branch moved under, or whose ref a peer had locked, is rebuilt on the new
 * tip and tried again (counted in commit_retries); a fenced lineage entry
 * that moved gives KILN_EFENCED: another writer covered those offsets. out_commit: the commit on the branch
 * after the push (a rebased push replaces ours). Then compacts the manifest
 * when manifest.compact_loose_objects says so (counted in compactions; a
 * failure there is logged and leaves the commit as it is). With dedup the
 * index's pending keys go in the commit (dedup/) and become committed once
 * it is on the branch; when the branch had moved since the index was
 * loaded (another writer's commit, a rebased push) the index is loaded
 * again from the new tip. A key another
 * writer committed since the index was loaded gives KILN_EFENCED (nothing
 * committed: read again, the record is a duplicate). */
int kiln_run_setup_commit(kiln_run_setup *s, kiln_snapshot *snap, char out_commit[41]);

/* The pause before commit attempt n + 1: 2 ms plus a uniform draw below
 * 2 ms * 2^min(n, 8), so peers racing for the branch spread out. */
extern const kiln_retry_policy kiln_commit_retry;
/* Pushes the branch as it is (when a run had nothing new to commit). */
int kiln_run_setup_push(kiln_run_setup *s, char out_commit[41]);

#endif
