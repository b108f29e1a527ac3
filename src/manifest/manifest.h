/* The manifest repository: a bare git repository (libgit2) holding every
 * dataset's versions. A snapshot commit on refs/heads/<dataset>/<branch>
 * adds shard lines under splits/<split>/<hh>.jsonl, replaces lineage.json
 * entries, adds to the cumulative stats.json and writes dataset.json, in one
 * commit, compare-and-swap on the branch (docs/FORMATS.md has every file). */
#ifndef KILN_MANIFEST_MANIFEST_H
#define KILN_MANIFEST_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/reject.h"
#include "shard/object.h"
#include "shard/split.h"

/* The kinds of source a lineage.json entry names in "source" that the
 * manifest knows the shape of (a later source writes its own row's kind):
 * a Kafka partition (no path), a file (its path), stdin (path
 * KILN_LINEAGE_STDIN_PATH) and a directory's file (its path, and a topic
 * <source.name>=<file name>: no other kind's names hold
 * KILN_LINEAGE_DIR_SEP). An entry written before "source" existed has the
 * kind its shape tells (docs/FORMATS.md, "lineage.json"). */
#define KILN_LINEAGE_KAFKA      "kafka"
#define KILN_LINEAGE_FILE       "file"
#define KILN_LINEAGE_STDIN      "stdin"
#define KILN_LINEAGE_DIRECTORY  "directory"
#define KILN_LINEAGE_STDIN_PATH "-"
#define KILN_LINEAGE_DIR_SEP    '='

/* An entry is keyed by (source, topic, partition): a file and a Kafka topic
 * of one name on one branch keep two positions, neither read by the other. */
typedef struct kiln_lineage_entry {
	const char *source; /* the kind of source that wrote it ("kafka", "file", ...) */
	const char *topic;
	int32_t partition;
	int64_t next; /* the next offset not yet covered (curated or quarantined) */
	/* file sources only (NULL/0 otherwise): the file, and the prefix of it
	 * that `next` covers, so a later run can check it is the same file */
	const char *path;
	uint64_t bytes;
	const char *prefix_blake2b; /* 64 hex */
	/* offsets a gap policy skipped (they had expired from the topic before
	 * they were read): how many in all, in how many gaps (0: never) */
	uint64_t skipped, gaps;
	/* commits only: when fenced, the commit is refused (KILN_EMODIFIED,
	 * nothing changes) unless the tip's entry for this source, topic and
	 * partition has next == expect_next (-1: the tip has no entry for it).
	 * A worker that lost the partition to another one cannot move it. */
	bool fenced;
	int64_t expect_next;
} kiln_lineage_entry;

typedef struct kiln_split_stats {
	uint64_t records, shards, bytes, raw_bytes;
} kiln_split_stats;

/* records_in = valid + quarantined + erased. valid: the curated records the
 * version holds (the sum of the splits' records); erased: curated records
 * `kiln erase` removed (stats.json writes it only when non-zero). */
typedef struct kiln_stats {
	uint64_t records_in, valid, quarantined, erased;
	uint64_t quarantined_by_code[KILN_REJECT_COUNT_];
	kiln_split_stats splits[KILN_SPLIT_COUNT];
} kiln_stats;

struct kiln_signing_key; /* manifest/sshsig.h */
struct kiln_profile;     /* quality/profile.h */
struct kiln_replayed;    /* manifest/replayed.h */

typedef struct kiln_snapshot {
	const char *dataset;       /* [a-z0-9][a-z0-9._-]{0,127} */
	const char *branch;        /* "main" or another [a-z0-9][a-z0-9._-]* name */
	const char *dataset_json;  /* whole dataset.json text */
	const char *contract_text; /* the contract file's bytes (contract.yaml); NULL: keep the tip's */
	size_t contract_len;
	const kiln_shard_entry *shards[KILN_SPLIT_COUNT];
	size_t shard_count[KILN_SPLIT_COUNT];
	const kiln_lineage_entry *lineage; /* replace the entries with the same source/topic/partition */
	size_t lineage_count;
	kiln_stats delta;                   /* added to the branch's stats.json */
	const struct kiln_profile *profile; /* what the snapshot's records add to profile.json; NULL: none */
	/* `kiln quarantine replay` only (NULL/zero otherwise): the quarantined
	 * offsets this commit curates, added to quarantine-replayed.json
	 * (KILN_EFENCED, nothing changed, when the tip lists one already), and
	 * their first-violation codes, subtracted from stats.json's quarantined
	 * and quarantined_by_code (manifest/replayed.h) */
	const struct kiln_replayed *replayed;
	uint64_t unquarantined[KILN_REJECT_COUNT_];
	/* pipeline dedup only (dedup false: the tip's dedup/ stays as it is):
	 * the keys the snapshot commits (sorted ascending, manifest/dedup.h),
	 * written as one segment of dedup/ stamped dedup_ms, and the segments
	 * stamped before dedup_ms - dedup_window_ms dropped; every segment of
	 * the tip is dropped when its dataset.json records another dedup.key
	 * than dataset_json does, or with dedup_end (a pipeline that ended
	 * dedup: no keys, dedup/ goes) */
	bool dedup, dedup_end;
	const unsigned char (*dedup_keys)[16];
	size_t dedup_count;
	int64_t dedup_ms, dedup_window_ms;
	/* the commit (40 hex; "" for no branch yet) whose dedup/ the writer's
	 * index was checked against, NULL: none. When the tip is another one,
	 * a key that a segment the tip holds and that commit does not also
	 * holds refuses the commit with KILN_EFENCED (nothing changed): another
	 * writer committed it first */
	const char *dedup_base;
	bool *dedup_moved; /* NULL, or set when the commit went on a tip other than dedup_base */
	const char *author_name, *author_email;
	const struct kiln_signing_key *signing_key; /* NULL: unsigned commit */
} kiln_snapshot;

typedef struct kiln_manifest kiln_manifest;

/* Opens the bare repository at `path`, creating it (and missing parent
 * folders) when it does not exist. */
int kiln_manifest_open(kiln_manifest **out, const char *path);
void kiln_manifest_close(kiln_manifest *manifest);

/* Whether the repository holds the object named hex (40 hex digits):
 * 1 yes, 0 no, KILN_EINVALID for a name that is not one, KILN_EIO. */
int kiln_manifest_has_object(kiln_manifest *manifest, const char *hex);

/* Writes a blob into the repository's objects ahead of the commit that
 * will list it, from any thread (an object database handle of its own): the
 * commit then finds it there instead of compressing it on its own thread.
 * Best effort (the commit writes what is missing); a blob no commit comes
 * to list stays unreachable, as git leaves one. */
void kiln_manifest_blob_ahead(kiln_manifest *manifest, const void *data, size_t len);

/* The version of the libgit2 loaded at run time ("1.5.1"), static. */
const char *kiln_manifest_libgit2_version(void);

/* A ref lock file older than this many seconds was left by a killed process. */
#define KILN_MANIFEST_STALE_LOCK_S 60

/* Makes one commit with the snapshot on the branch, whose parent is the
 * branch tip (none for a new branch), and moves the branch only if it still
 * points at that tip (KILN_EMODIFIED otherwise: nothing changed). A fenced
 * lineage entry whose tip value is not the one expected refuses the commit
 * with KILN_EFENCED (nothing changed). A branch locked by a peer gives
 * KILN_ERETRY; a lock left by a killed process KILN_EIO, naming the file. The
 * message is a readable summary with counts. out_commit: 40 hex + NUL.
 * With snapshot->signing_key the commit carries an SSH signature (namespace
 * "git") in its gpgsig header, which `git verify-commit` checks. */
int kiln_manifest_commit(kiln_manifest *manifest, const kiln_snapshot *snapshot, char out_commit[41]);

/* Creates the annotated tag refs/tags/<dataset>/<name> on the commit
 * commit_hex (40 hex; it must exist), tagger "kiln <kiln@localhost>" at the
 * current time, with `message` (a newline is added when it lacks one; no
 * line may start with "-----BEGIN ") and, when key is not NULL, its SSH
 * signature (namespace "git") appended, which `git verify-tag` checks.
 * KILN_EMODIFIED when the tag already exists (nothing changes).
 * out_tag_id: the tag object's id, 40 hex + NUL. */
int kiln_manifest_tag(kiln_manifest *manifest, const char *dataset, const char *name, const char *commit_hex,
                      const char *message, const struct kiln_signing_key *key, char out_tag_id[41]);

/* Calls cb for each lineage.json entry at the branch tip; returns 0 (also
 * when the branch does not exist yet: no calls), a negative error, or cb's
 * non-zero return. Strings passed to cb live until cb returns. */
int kiln_manifest_lineage(kiln_manifest *manifest, const char *dataset, const char *branch,
                          int (*cb)(void *ctx, const kiln_lineage_entry *entry), void *ctx);

/* Appends the file `path` of the branch tip to out: 1 when it was there,
 * 0 when the branch or the file does not exist, or a negative error. */
int kiln_manifest_read(kiln_manifest *manifest, const char *dataset, const char *branch, const char *path,
                       kiln_buf *out);

/* Parses a stats.json text (docs/FORMATS.md); errors name `where`. */
int kiln_stats_parse(const char *text, size_t len, const char *where, kiln_stats *out);

/* Cumulative stats at the branch tip (all zero when it does not exist). */
int kiln_manifest_stats(kiln_manifest *manifest, const char *dataset, const char *branch, kiln_stats *out);

#endif
