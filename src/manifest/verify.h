/* Verifying a version, for `kiln verify` and any program that must trust a
 * version before reading it: its signature (the tag's for a promoted
 * version, else the commit's) against trusted ssh-ed25519 keys, the
 * dataset its dataset.json names, the consistency of its tree with
 * stats.json and, given a store, that every shard hashes to its name. Each
 * problem found is handed to the caller's callback as one line; only an
 * error that stops the check is returned. */
#ifndef KILN_MANIFEST_VERIFY_H
#define KILN_MANIFEST_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "manifest/manifest.h"
#include "manifest/version.h"
#include "store/store.h"

#define KILN_VERIFY_MAX_KEYS 64

/* Trusted keys: the raw ed25519 public keys. */
typedef struct kiln_verify_keys {
	unsigned char pk[KILN_VERIFY_MAX_KEYS][32];
	size_t count;
} kiln_verify_keys;

/* Adds every "ssh-ed25519 <base64>" of a file (allowed-signers lines or a
 * .pub) to keys. KILN_ENOTFOUND when it cannot be opened, KILN_EINVALID
 * when it holds no such key. */
int kiln_verify_keys_load(kiln_verify_keys *keys, const char *path);

/* Whether pk is one of keys. */
bool kiln_verify_keys_trust(const kiln_verify_keys *keys, const unsigned char pk[32]);

/* "SHA256:<base64>" of an ssh-ed25519 public key, as ssh-keygen -l prints. */
void kiln_verify_fingerprint(char out[64], const unsigned char pk[32]);

typedef enum kiln_verify_sig_state {
	KILN_VERIFY_SIG_NONE,     /* unsigned */
	KILN_VERIFY_SIG_TAMPERED, /* a signature that does not match the content */
	KILN_VERIFY_SIG_GOOD,     /* a good signature, by `fingerprint` */
} kiln_verify_sig_state;

typedef struct kiln_verify_sig {
	kiln_verify_sig_state state;
	bool trusted;         /* GOOD and by one of the keys given */
	char fingerprint[64]; /* GOOD: the signer's key, "SHA256:..." */
} kiln_verify_sig;

/* The version's signature: for a tag version the tag object's (the one
 * resolution found, version->tag; a lightweight tag has none), else the
 * commit's gpgsig header, checked (namespace "git") and its key looked up
 * in keys (may be NULL). Errors only when the objects cannot be read. */
int kiln_verify_signature(kiln_verify_sig *out, kiln_manifest *manifest, const kiln_version *version,
                          const kiln_verify_keys *keys);

/* Called with each problem found, one line without the "kiln verify: "
 * prefix or a newline; the text lives until it returns. */
typedef void (*kiln_verify_report)(void *ctx, const char *problem);

typedef struct kiln_verify_tree_result {
	unsigned problems;  /* lines reported */
	uint64_t shards_ok; /* shards the store gave back intact (with a store) */
} kiln_verify_tree_result;

/* Checks the version's dataset.json names its dataset, stats.json is there,
 * parses and balances, and agrees with the shard lists, which are in order
 * and without repeats; with a store (may be NULL), that every shard is there
 * with its size and hash. spec names the version in the lines. Returns 0
 * (problems counted in out) or the error that stopped the check (a
 * repository or store that cannot be read). */
int kiln_verify_tree(kiln_verify_tree_result *out, kiln_manifest *manifest, const kiln_version *version,
                     const char *spec, kiln_store *store, kiln_verify_report report, void *ctx);

/* What `kiln verify` and kiln_reader_verify judge (docs/RELEASES.md). */
typedef struct kiln_verify_result {
	bool name_ok;        /* false: a tag object under another version's name (then no signature judged) */
	kiln_verify_sig sig; /* the signature found (name_ok only) */
	bool sig_ok;         /* the signature is not a problem (name_ok only) */
	bool must_be_signed; /* the repository's kiln.signed covers this version */
	unsigned problems;   /* lines reported */
	uint64_t shards_ok;  /* shards the store gave back intact (with a store) */
} kiln_verify_result;

/* The whole judgement, each problem one line to report (spec names the
 * version): the tag object must carry the version's name (checked first:
 * a tag put under another name is refused whoever signed it); then the
 * signature: an unsigned version is a problem when keys were given (keys
 * may be NULL) or kiln.signed requires it, a tampered signature is one, and
 * so is a good one by a key not among the keys given; then the tree, and
 * with a store every shard (kiln_verify_tree). Returns 0 when the checks
 * ran, whatever they found, or the error that stopped them. */
int kiln_verify_version(kiln_verify_result *out, kiln_manifest *manifest, const kiln_version *version,
                        const char *spec, const kiln_verify_keys *keys, kiln_store *store,
                        kiln_verify_report report, void *ctx);

#endif
