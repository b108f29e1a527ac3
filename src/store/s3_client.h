/* An S3 client on libcurl that signs every request with Signature V4
 * (sigv4.h) and reads S3's XML answers (s3_xml.h): the cloud-ready client
 * of issue 13 (AWS S3 and current S3 services refuse the V2 signatures of
 * Debian's libs3). Objects are addressed path-style (HOST/BUCKET/KEY) or
 * virtual-hosted (BUCKET.HOST/KEY). Every request carries the payload's
 * SHA-256 (the service checks the bytes it got), is signed afresh on each
 * attempt and retried with backoff on connection failures, 408, 429 and
 * 5xx (not 501/505); a get that broke off resumes with a Range request and
 * If-Match on the first answer's ETag. Messages name the
 * method, endpoint, bucket and key and the service's error code, never a
 * credential. A client keeps a few curl handles (their connections) and
 * may be shared by threads. */
#ifndef KILN_STORE_S3_CLIENT_H
#define KILN_STORE_S3_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/common.h" /* kiln_store_sink */
#include "store/sigv4.h"

typedef struct kiln_s3_config {
	const char *endpoint; /* host[:port] */
	bool http;            /* plain HTTP (tests, some on-prem endpoints) */
	bool virtual_host;    /* BUCKET.HOST/KEY instead of HOST/BUCKET/KEY */
	const char *bucket;
	const char *region; /* NULL: us-east-1 */
	kiln_sigv4_credentials credentials;
	int max_retries;    /* 0: 5 */
	uint64_t part_size; /* a put above it is a multipart upload of parts this size; 0: 16 MiB, 5 MiB at
	                       least */
} kiln_s3_config;

#define KILN_S3_DEFAULT_PART_SIZE (16u << 20)
#define KILN_S3_MIN_PART_SIZE     (5u << 20)          /* S3's smallest part but the last */
#define KILN_S3_MAX_PUT           (UINT64_C(5) << 30) /* S3's largest single PUT */

typedef struct kiln_s3_client kiln_s3_client;

/* Copies what it keeps of config (the credentials are zeroed on free). */
int kiln_s3_client_new(kiln_s3_client **out, const kiln_s3_config *config);
void kiln_s3_client_free(kiln_s3_client *client);

/* The regular file at path (size bytes) under key: one PUT, or above the
 * part size a multipart upload (each part's SHA-256 signed; completed, or
 * aborted on failure). Uploads of the same key left by an earlier attempt
 * (a killed process) more than a day ago are aborted first (a younger one
 * may be another process's live upload of the same key): an object appears
 * whole or not at all. A 2xx answer with an <Error> body is a failure
 * (retried), as is an answer body over 8 MiB (refused). */
int kiln_s3_put_file(kiln_s3_client *client, const char *key, const char *path, uint64_t size);
/* The same, but only when key holds no object yet: one PUT with
 * If-None-Match: * (at most KILN_S3_MAX_PUT bytes), KILN_EMODIFIED when the
 * key exists (412), a 409 retried. A service that ignores the header
 * overwrites; AWS S3 and current MinIO and Ceph RGW honour it. */
int kiln_s3_put_file_new(kiln_s3_client *client, const char *key, const char *path, uint64_t size);
/* GET: the object's bytes to sink, in order, each byte once. */
int kiln_s3_get(kiln_s3_client *client, const char *key, kiln_store_sink sink, void *ctx);
/* HEAD: the object's size; KILN_ENOTFOUND when there is none. A 4xx answer
 * (no body, so no reason) is explained by a GET of the key, as is a 404
 * until a NoSuchKey has shown that the bucket exists (a missing bucket is
 * KILN_EINVALID, not an absent object). */
int kiln_s3_head(kiln_s3_client *client, const char *key, uint64_t *out_size);
/* DELETE (0 also when there was no such object). */
int kiln_s3_delete(kiln_s3_client *client, const char *key);

/* Called once per object under a prefix, in key order; non-zero stops the
 * listing and is returned. mtime: seconds since the epoch. */
typedef int (*kiln_s3_list_cb)(void *ctx, const char *key, uint64_t size, int64_t mtime);
/* ListObjectsV2 with encoding-type=url, page after page. */
int kiln_s3_list(kiln_s3_client *client, const char *prefix, kiln_s3_list_cb cb, void *ctx);

#endif
