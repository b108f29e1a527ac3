/* What every public kiln header shares: the export macro, the error codes
 * and the last-error calls, the dataset splits, and the store options and
 * byte sink the reader takes. src/ includes this file for the same
 * definitions (core/error.h, shard/split.h, store/store.h), so each is
 * written once. Includes only the C library. */
#ifndef KILN_COMMON_H
#define KILN_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Marks a function that libkiln.so exports; everything else is hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Functions return 0 on success or one of these negative codes; the
 * one-line message explaining the failure sits in a per-thread slot until
 * the next failure on that thread. Messages never carry a value taken from
 * a record. */
enum {
	KILN_OK = 0,
	KILN_EINVALID = -1,  /* bad input or config: fatal, do not retry */
	KILN_ENOTFOUND = -2, /* file, key or reference missing */
	KILN_EIO = -3,       /* local I/O failure */
	KILN_ENOMEM = -4,    /* allocation failed */
	KILN_ERETRY = -5,    /* transient: back off and try again */
	KILN_EMODIFIED = -6, /* compare-and-swap lost */
	KILN_ELIMIT = -7,    /* a configured bound was exceeded */
	KILN_EFENCED = -8,   /* a fenced lineage entry moved: another writer covered
	                      * those offsets first (retrying the same work cannot help) */
};

/* The library's version, "MAJOR.MINOR.PATCH" (configure.ac's AC_INIT), a
 * static string; kiln_library_version_number() is the same as
 * MAJOR * 10000 + MINOR * 100 + PATCH (0.1.0: 100). A binding loaded at run
 * time (python/kiln) checks it before it trusts its declarations. */
KILN_API const char *kiln_library_version(void);
KILN_API unsigned kiln_library_version_number(void);

/* The last message set on this thread; never NULL ("" when none). The
 * string belongs to the library and changes with the next failure. */
KILN_API const char *kiln_error_last(void);

/* The code of the last failure on this thread (0 when none). */
KILN_API int kiln_error_last_code(void);

/* Empties this thread's message. */
KILN_API void kiln_error_clear(void);

/* A dataset version's three splits. */
typedef enum kiln_split {
	KILN_SPLIT_TRAIN = 0,
	KILN_SPLIT_DEV,
	KILN_SPLIT_TEST,
	KILN_SPLIT_COUNT
} kiln_split;

/* "train", "dev", "test" (static strings). */
KILN_API const char *kiln_split_name(kiln_split split);

/* The split a name means into *out; -1 for any other name. */
KILN_API int kiln_split_from_name(const char *name, kiln_split *out);

/* Options a store URL cannot carry. `version` comes first and is
 * KILN_STORE_OPTIONS_VERSION: start from KILN_STORE_OPTIONS_INIT and set the
 * fields you need; a call given another version refuses it (KILN_EINVALID),
 * so a program built against another layout fails instead of misreading.
 * Every other field may be zero/NULL; strings are borrowed for the call
 * that takes them. */
#define KILN_STORE_OPTIONS_VERSION 1
#define KILN_STORE_OPTIONS_INIT                                                                              \
	{                                                                                                    \
		.version = KILN_STORE_OPTIONS_VERSION                                                        \
	}
typedef struct kiln_store_options {
	unsigned version; /* KILN_STORE_OPTIONS_VERSION */
	/* s3 */
	const char *endpoint; /* host[:port]; NULL = AWS's for the region (s3.REGION.amazonaws.com) */
	const char *region;   /* signed into every request (Signature V4); NULL = us-east-1 */
	bool virtual_host;    /* bucket.host/key instead of host/bucket/key */
	bool http;            /* plain HTTP instead of HTTPS (tests, some on-prem endpoints) */
	/* a 0600 file "access_key_id=...\nsecret_access_key=...\n" (and
	 * session_token=... for temporary credentials); NULL = AWS_ACCESS_KEY_ID,
	 * AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN from the environment */
	const char *credentials_file;
	int max_retries;  /* retriable failures retried with backoff; 0 = 5 */
	int part_size_mb; /* a put above it is a multipart upload; 0 = 16, 5 at least */
	/* http(s): a cache node */
	const char *bearer_token; /* sent as Authorization: Bearer; NULL = $KILN_CACHE_TOKEN */
	bool as_peer;             /* ask as a peer cache node (X-Kiln-Peer: 1): it answers from
	                           * what it has or the origin, never from its own peers */
} kiln_store_options;

/* Called with successive chunks of an object's bytes (borrowed for the
 * call); non-zero stops the read and is returned by the call that read. */
typedef int (*kiln_store_sink)(void *ctx, const void *data, size_t len);

#ifdef __cplusplus
}
#endif

#endif
