/* `kiln push`: one version to another store, for training runs elsewhere
 * (a cloud burst). What travels is the version's curated shards (only the
 * objects its splits list, so raw-zone and quarantine objects cannot go by
 * construction) and its manifest: the git objects of the version (its
 * signed tag, the commit and history, their trees) as a bare repository
 * under a prefix of the target store, which kiln and stock git read as it
 * is. Shards go first, then the manifest objects, then the version's ref
 * and a push record: a version becomes visible at the target only once
 * everything it names is there, and a push stopped at any point is resumed
 * by running it again (objects already there, same name and size, are not
 * sent again). `kiln pull` mirrors a target's manifest into a local
 * repository, so the far side resolves, verifies and reads the version with
 * kiln (docs/PUSH.md). */
#ifndef KILN_PUSH_PUSH_H
#define KILN_PUSH_PUSH_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/common.h" /* kiln_store_options */

/* Where the manifest lives in a target store, unless configured. */
#define KILN_PUSH_MANIFEST_PREFIX "manifest.git"

/* A named target of a targets file, or a store URL taken as one. */
typedef struct kiln_push_target {
	const char *name; /* the target's name, or the URL */
	const char *url;  /* its store */
	kiln_store_options store;
	const char *manifest_prefix; /* key prefix of the bare repository: "manifest.git" */
	double price_per_gb;         /* egress price per GB (2^30 bytes), for the estimate */
	const char *currency;        /* printed after a price: "USD" */
	unsigned concurrency;        /* uploads at once */
	struct kiln_push_target_owned *owned;
} kiln_push_target;

#define KILN_PUSH_DEFAULT_CONCURRENCY 4

/* Loads target `name` from the targets file at path (with --set overrides,
 * "targets.NAME.key=value"), or, when `name` holds "://", a target for that
 * store URL with default settings (path may then be NULL). Errors are one
 * line, "file:line:col: targets.NAME.key: message" for the file. */
int kiln_push_target_load(kiln_push_target **out, const char *path, const char *name, char *const *sets,
                          size_t nsets);
void kiln_push_target_free(kiln_push_target *target);

/* One object a push sends or finds there. */
typedef struct kiln_push_event {
	const char *key;  /* the target store key */
	const char *kind; /* "shard", "manifest" (a git object or a ref), "record" */
	uint64_t bytes;
	bool present;   /* already at the target: not sent */
	double seconds; /* sending it took (0 for present) */
} kiln_push_event;

typedef struct kiln_push_totals {
	uint64_t objects, bytes;         /* to send */
	uint64_t present, present_bytes; /* at the target already */
	uint64_t sent, sent_bytes;       /* sent so far */
	uint64_t shards, shard_bytes;    /* of the version: all its shards */
	uint64_t shards_to_send, shard_bytes_to_send;
	uint64_t git_objects, git_objects_to_send, git_bytes_to_send;
} kiln_push_totals;

typedef struct kiln_push_request {
	const char *manifest;                     /* the local manifest repository */
	const char *spec;                         /* "ds@v3" */
	const char *source_url;                   /* the store the version's shards are in */
	const kiln_store_options *source_options; /* may be NULL */
	const kiln_push_target *target;
	bool allow_unpromoted; /* push a version that is not a signed vN tag */
	const char *keys_file; /* allowed signers the tag's signature must be by; NULL: any good one */
	bool dry_run;          /* plan and print, send nothing */
	unsigned concurrency;  /* 0: the target's */
	/* each object sent or found present (from several threads, one at a time) */
	void (*on_object)(void *ctx, const kiln_push_event *e);
	/* the totals after each object sent (one thread at a time) */
	void (*on_progress)(void *ctx, const kiln_push_totals *t);
	void *ctx;
} kiln_push_request;

typedef struct kiln_push_result {
	char dataset[129];
	char version[160]; /* "v3", or "unpromoted-<12 hex>" */
	char ref[320];     /* the ref written at the target */
	char commit[41], tag[41];
	bool promoted, signed_by_key;
	char signer[64]; /* the signature's key, "SHA256:..." ("" unsigned) */
	kiln_push_totals totals;
	/* an erasure (docs/ERASURE.md): the target held the version as
	 * replaced_id, which the local ledger shows superseded by this one */
	bool replaced;
	char replaced_id[41];
	bool ledger; /* refs/erasures/<dataset> went with it */
	/* after a replacement: superseded shards and git objects deleted at the
	 * target; deferred when a ref there still names a superseded version
	 * or one this repository does not hold (the push that replaces the
	 * last of them deletes them) */
	uint64_t deleted_shards, deleted_objects;
	bool deletion_deferred;
} kiln_push_result;

/* Plans the push (what the target has, what to send); with dry_run stops
 * there, else sends. The version must be a vN tag with a good signature
 * (by a key of keys_file when given) unless allow_unpromoted. A target
 * that holds the version's ref as another object is refused, unless the
 * local erasure ledger shows that object superseded (through one or more
 * erasures) by this one: the ref is then replaced, the ledger ref pushed
 * with it, and what only the superseded versions used deleted there. Returns 0
 * with *out filled, or an error, one line naming the version, the object
 * or the endpoint. */
int kiln_push(const kiln_push_request *req, kiln_push_result *out);

typedef struct kiln_pull_result {
	uint64_t files, bytes; /* fetched */
	uint64_t present;      /* objects already in the local repository */
	uint64_t refs;         /* refs at the target */
} kiln_pull_result;

/* Mirrors the target's manifest (its manifest_prefix) into the bare
 * repository at dir (created when missing): objects not there yet, then
 * refs (tags and erasure ledgers, refs/erasures/<dataset>). A local tag
 * that differs from the target's is overwritten only when the pulled
 * ledger shows the local one superseded by the target's through an
 * erasure; else KILN_EINVALID naming it (before anything is written when
 * the target has no ledger for the dataset; else objects and ledgers
 * fetched by then stay, no tag is written). on_file (may be NULL) is called for each file
 * fetched. */
int kiln_pull(const kiln_push_target *target, const char *dir,
              void (*on_file)(void *ctx, const char *key, uint64_t bytes), void *ctx, kiln_pull_result *out);

#endif
