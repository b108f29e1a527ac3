/* Erasing a subject from a dataset (docs/ERASURE.md): every shard any
 * version lists that holds one of the subject's tokens is written again
 * without those records (records keep their order; a shard left empty is
 * dropped), every commit of every branch and tag listing one is rewritten
 * (manifest/rewrite.h), promoted versions are signed again under the same
 * names, the raw zone and the quarantine lose the subject's records
 * (erase/zones.h), and the erasure is recorded in the ledger
 * (manifest/ledger.h). The ref moves wait in a journal first: a rerun of an
 * erasure killed at any point finishes it. Runs that commit meanwhile are
 * taken in: a branch that moved is read again and its new commits rewritten
 * too. */
#ifndef KILN_ERASE_ERASE_H
#define KILN_ERASE_ERASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "erase/subject.h"
#include "manifest/ledger.h"
#include "manifest/manifest.h"
#include "manifest/rewrite.h"
#include "manifest/sshsig.h"
#include "mask/key.h"
#include "store/store.h"

typedef struct kiln_erase_options {
	const char *dataset;
	kiln_manifest *manifest;
	kiln_store *store;
	const kiln_key *key;                 /* the dataset's pseudonymisation key (its id is checked) */
	const kiln_signing_key *signing_key; /* re-signs; NULL: a signed version cannot be rewritten */
	kiln_subject *subject;               /* resolved here against every contract of the history */
	bool dry_run;                        /* count only: nothing written, nothing moved */
	const char *spool_dir;               /* NULL: $TMPDIR or /tmp */
	uint32_t profile_categories_k;       /* the pipeline's profile.categories.k; 0: its default */
} kiln_erase_options;

typedef struct kiln_erase_report {
	char id[17];      /* the erasure; "" for a dry run or when nothing held the subject */
	char resumed[17]; /* an interrupted erasure finished first ("" when none) */
	char ledger_commit[41];
	uint64_t shards;      /* distinct shards the dataset's versions list */
	uint64_t shards_read; /* of them, read to look for the subject */
	uint64_t shards_rewritten, shards_dropped;
	uint64_t erased[KILN_SPLIT_COUNT]; /* curated records erased, per split */
	uint64_t commits;                  /* commits rewritten */
	kiln_ledger_zone raw, quarantine;
	kiln_rewrite_move *moves; /* refs moved (dry run: refs that would move, ids empty) */
	size_t move_count;
	uint64_t (*move_erased)[KILN_SPLIT_COUNT]; /* dry run: records each ref's version holds, per split */
	kiln_ledger_shard *changed;                /* the shards that held the subject, by hash */
	size_t changed_count;
	unsigned attempts; /* plans made (more than 1: a run committed meanwhile) */
} kiln_erase_report;

/* Erases opt->subject from opt->dataset. 0 (also when nothing held the
 * subject: then no entry is recorded), or a negative error with nothing of
 * the refs half-moved that a rerun does not finish. */
int kiln_erase(const kiln_erase_options *opt, kiln_erase_report *out);
void kiln_erase_report_free(kiln_erase_report *report);

/* Finishes an erasure a killed process left in the journal (its ref moves,
 * then its ledger entry): 1 with its id in out_id, 0 when there was none. */
int kiln_erase_resume(kiln_manifest *manifest, const char *dataset, const kiln_signing_key *signing_key,
                      char out_id[17]);

#endif
