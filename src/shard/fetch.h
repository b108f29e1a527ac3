/* The verified fetch of a shard object: its bytes are read from a store
 * under the shard's name (shard/object.h), counted and hashed on the way to
 * the caller's sink, and checked against the name (BLAKE2b-256) and the
 * size the manifest gives once the store has sent them all. A fetch that
 * broke off is resumed by the store backend itself (a Range request over
 * http, If-Match over s3), so the sink sees every byte once. Nothing the
 * sink got may be used before kiln_shard_fetch returned 0: callers spool
 * the bytes (the reader to a temporary file, the cache to tmp/) or only
 * hash them (kiln verify --deep). kiln_shard_check is the same check over
 * bytes already at hand (a cached file hashed again). */
#ifndef KILN_SHARD_FETCH_H
#define KILN_SHARD_FETCH_H

#include <sodium.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* What is wrong with a shard's bytes. */
typedef enum kiln_shard_fault {
	KILN_SHARD_OK = 0,
	KILN_SHARD_BAD_HASH, /* their BLAKE2b-256 is not the name */
	KILN_SHARD_BAD_SIZE, /* the hash is the name, the size is not the one expected */
	KILN_SHARD_TOO_LONG, /* more bytes than the limit came: the read was stopped */
} kiln_shard_fault;

/* A running check of a shard's bytes. */
typedef struct kiln_shard_check {
	crypto_generichash_state hs;
	uint64_t size; /* bytes seen */
} kiln_shard_check;

void kiln_shard_check_init(kiln_shard_check *check);
void kiln_shard_check_update(kiln_shard_check *check, const void *data, size_t len);
/* Whether the bytes seen hash to `hash` (64 lower-case hex) and, when bytes
 * is not 0, are that many. */
kiln_shard_fault kiln_shard_check_final(kiln_shard_check *check, const char *hash, uint64_t bytes);

typedef struct kiln_shard_request {
	/* set by the caller */
	const char *hash;     /* 64 lower-case hex: the object fetched and the hash its bytes must have */
	uint64_t bytes;       /* the size they must have; 0: not known */
	uint64_t limit;       /* stop as soon as more bytes than this came; 0: no limit */
	const char *from;     /* named in messages ("peer http://...", "the origin"); NULL: not named
	                       * (a failed read then says "the store") */
	kiln_store_sink sink; /* receives the bytes as they come, unverified; may be NULL */
	void *ctx;
	/* set by kiln_shard_fetch */
	uint64_t size;          /* bytes received */
	kiln_shard_fault fault; /* when it returned KILN_EINVALID for the bytes */
} kiln_shard_request;

/* Reads shard f->hash from store into f->sink and checks it. 0: the bytes
 * the sink got are the shard. KILN_EINVALID "shard <hash>[ from <from>]:
 * content hash mismatch (corrupt or tampered)" with f->fault set when the
 * bytes are not it (also for a hash that is not one, fault OK then);
 * KILN_ENOTFOUND when the store has no such object; the sink's negative
 * return as it is; any other store error. A positive return from the sink
 * (a read the sink stopped without an error) becomes KILN_EIO "shard
 * <hash>: reading from <from> failed". */
int kiln_shard_fetch(kiln_store *store, kiln_shard_request *f);

#endif
