/* The erasure ledger (docs/ERASURE.md): one entry per erasure of a dataset,
 * kept in the manifest repository on the ref refs/erasures/<dataset>, a
 * chain of commits (signed with the release key when one is given) whose
 * tree holds erasures/<seq>-<id>.json, one file per entry, every earlier
 * entry kept. An entry says when, who signed, which refs moved from which
 * commit or tag to which, which commits and shards were superseded, how
 * many records went per split and from the raw zone and the quarantine,
 * and names the subject only by a keyed hash. While an erasure moves refs,
 * its entry also waits in a journal file in the repository folder, so a
 * rerun after a crash finishes the moves and records the entry. */
#ifndef KILN_MANIFEST_LEDGER_H
#define KILN_MANIFEST_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/retry.h"
#include "manifest/format.h"
#include "manifest/manifest.h"
#include "manifest/rewrite.h"

#define KILN_LEDGER_FORMAT     "kiln-erasure-v1"
#define KILN_LEDGER_REF_PREFIX "refs/erasures/"

typedef struct kiln_ledger_zone {
	uint64_t objects, rewritten, deleted, records;
} kiln_ledger_zone;

typedef struct kiln_ledger_shard {
	char old_hash[65];
	char new_hash[65]; /* "" when no record was left */
	kiln_split split;
	uint64_t erased;
} kiln_ledger_shard;

typedef struct kiln_ledger_entry {
	char id[17]; /* 16 lower-case hex digits */
	char dataset[KILN_MFMT_NAME_MAX + 1];
	int64_t time;     /* seconds since the epoch */
	char subject[65]; /* the keyed hash of the subject (erase/subject.h) */
	char signer[64];  /* "SHA256:..." of the key that signed the entry, "" when unsigned */
	kiln_rewrite_move *refs;
	size_t ref_count;
	kiln_rewrite_pair *commits;
	size_t commit_count;
	kiln_ledger_shard *shards;
	size_t shard_count;
	uint64_t erased[KILN_SPLIT_COUNT];
	kiln_ledger_zone raw, quarantine;
} kiln_ledger_entry;

void kiln_ledger_entry_free(kiln_ledger_entry *entry);

/* The entry as one JSON document (with a final newline). */
int kiln_ledger_render(kiln_buf *out, const kiln_ledger_entry *entry);

/* Parses an entry (*out zeroed first; free it whatever this returns);
 * KILN_EINVALID "WHERE: what" for anything the format does not allow. */
int kiln_ledger_parse(kiln_json_scanner *scanner, const char *where, const char *text, size_t len,
                      kiln_ledger_entry *out);

/* The pause before ledger append attempt n + 1 when the ref moved: 20 ms * n. */
extern const kiln_retry_policy kiln_ledger_retry;

/* Adds the entry to refs/erasures/<dataset> (compare-and-swap; tried again
 * when another erasure moved it). An entry with the same id already there
 * is left as it is (a rerun after a crash). out_commit (may be NULL): the
 * ledger's tip. */
int kiln_ledger_append(kiln_manifest *manifest, const kiln_ledger_entry *entry,
                       const struct kiln_signing_key *key, char out_commit[41]);

/* Calls cb with every entry of the dataset's ledger, oldest first (none
 * when it has none). The entry lives until cb returns; a non-zero return
 * stops the walk and is returned. */
int kiln_ledger_each(kiln_manifest *manifest, const char *dataset,
                     int (*cb)(void *ctx, const kiln_ledger_entry *entry), void *ctx);

/* The tip of refs/erasures/<dataset>: 1 with its commit id in out, 0 when
 * the dataset has no ledger. */
int kiln_ledger_tip(kiln_manifest *manifest, const char *dataset, char out[41]);

/* Every dataset that has a ledger: cb(ctx, dataset). */
int kiln_ledger_datasets(kiln_manifest *manifest, int (*cb)(void *ctx, const char *dataset), void *ctx);

/* The ids every ledger of the repository names as superseded (old commits
 * and old tag objects), for gc's purge: *out an array of *out_n strings
 * (40 hex), sorted bytewise, freed by the caller with kiln_ledger_ids_free. */
int kiln_ledger_superseded(kiln_manifest *manifest, char ***out, size_t *out_n);
/* The shards every ledger names as superseded (64 hex each), sorted
 * bytewise: gc collects them without a grace period. */
int kiln_ledger_superseded_shards(kiln_manifest *manifest, char ***out, size_t *out_n);
void kiln_ledger_ids_free(char **ids, size_t n);

/* Whether the dataset's ledger names a commit starting with hex[0..n) as
 * superseded: 1 with the erasure, its time and the commit that replaced it
 * (followed through later erasures to the newest), 0 when none does. */
int kiln_ledger_successor(kiln_manifest *manifest, const char *dataset, const char *hex, size_t n,
                          char out_erasure[17], int64_t *out_time, char out_commit[41]);

/* What the dataset's ledger makes of a ref target old_id (40 hex: a tag
 * object, or a branch's commit): 1 with the id that superseded it, through
 * one erasure or several (the newest), in out; 0 when no erasure superseded
 * it. The one rule push, pull and fetch apply before a ref may be replaced. */
int kiln_ledger_ref_successor(kiln_manifest *manifest, const char *dataset, const char *old_id, char out[41]);

/* The journal of an erasure in progress: <repository>/kiln-erase-<dataset>.journal,
 * the rendered entry, written whole (temporary file, fsync, rename). read:
 * 1 with the text appended to out, 0 when there is none. */
int kiln_ledger_journal_write(kiln_manifest *manifest, const char *dataset, const kiln_buf *text);
int kiln_ledger_journal_read(kiln_manifest *manifest, const char *dataset, kiln_buf *out);
int kiln_ledger_journal_remove(kiln_manifest *manifest, const char *dataset);

#endif
