/* AWS Signature Version 4 for S3 requests: the canonical request, the
 * string to sign, the derived key and the headers a request carries
 * (Authorization, x-amz-date, x-amz-content-sha256 and, with temporary
 * credentials, x-amz-security-token). The rules S3 checks and lenient
 * servers do not: the payload hash header on every request (a hex SHA-256
 * or UNSIGNED-PAYLOAD), host and every x-amz-* header signed, the path
 * URI-encoded once (S3 does not encode it twice, unlike other services),
 * the query sorted by name with "name=" for an empty value, and a clock
 * within 15 minutes of the service's. kiln builds the query it sends from
 * the same parameters it signs (kiln_sigv4_query), so the two cannot
 * differ. Checked against AWS's published examples (tests/unit/sigv4.c)
 * and against botocore's signer (tests/integration/sigv4_botocore.py). */
#ifndef KILN_STORE_SIGV4_H
#define KILN_STORE_SIGV4_H

#include <stddef.h>
#include <time.h>

#include "core/buf.h"

#define KILN_SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
#define KILN_SIGV4_EMPTY_SHA256     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

typedef struct kiln_sigv4_credentials {
	const char *access_key;
	const char *secret_key;
	const char *session_token; /* NULL: long-term credentials */
} kiln_sigv4_credentials;

/* A header or a query parameter: name and value as they are, unencoded. */
typedef struct kiln_sigv4_pair {
	const char *name;
	const char *value; /* "" for a query parameter without value ("?uploads") */
} kiln_sigv4_pair;

typedef struct kiln_sigv4_request {
	const char *method; /* "GET", "PUT", "POST", "HEAD", "DELETE" */
	const char *host;   /* the Host header: "bucket.s3.eu-west-1.amazonaws.com", "127.0.0.1:9000" */
	const char *path;   /* unencoded, from "/": "/bucket/shards/ab/x.jsonl.zst" */
	const kiln_sigv4_pair *query;
	size_t query_count;
	/* headers sent besides those kiln_sigv4_sign adds; all are signed
	 * (names in any case, values trimmed); none named Authorization */
	const kiln_sigv4_pair *headers;
	size_t header_count;
	const char *payload_sha256; /* lower-case hex, or KILN_SIGV4_UNSIGNED_PAYLOAD */
	const char *region;         /* "us-east-1" */
	const char *service;        /* "s3" */
	time_t now;
} kiln_sigv4_request;

/* The headers kiln_sigv4_sign adds, as "Name: value" lines ready for a
 * curl_slist. */
typedef struct kiln_sigv4_signed {
	char authorization[1024];
	char amz_date[32];       /* "x-amz-date: 20130524T000000Z" */
	char content_sha256[96]; /* "x-amz-content-sha256: ..." */
	kiln_buf security_token; /* "x-amz-security-token: ..." ("" without a token) */
	char signature[65];      /* the hex signature, for tests */
} kiln_sigv4_signed;

/* Appends the path URI-encoded the S3 way: unreserved characters
 * (A-Z a-z 0-9 - . _ ~) and '/' as they are, every other byte as %XX. */
int kiln_sigv4_encode_path(kiln_buf *out, const char *path);

/* Appends the canonical query string: parameters sorted by encoded name
 * (then value), name and value URI-encoded ('/' too), "name=" when empty.
 * It is also the query string to send. */
int kiln_sigv4_query(kiln_buf *out, const kiln_sigv4_pair *query, size_t count);

/* The canonical request (for tests and for messages on a signature
 * mismatch: it holds no secret). */
int kiln_sigv4_canonical_request(kiln_buf *out, const kiln_sigv4_request *r, const kiln_sigv4_credentials *c);

/* Signs r: fills out (free it with kiln_sigv4_signed_free). KILN_EINVALID
 * for a request that cannot be signed (no credentials, too many headers,
 * a header value with a line break). */
int kiln_sigv4_sign(kiln_sigv4_signed *out, const kiln_sigv4_request *r, const kiln_sigv4_credentials *c);
void kiln_sigv4_signed_free(kiln_sigv4_signed *out);

/* hex SHA-256 of len bytes (65 with the terminator). */
void kiln_sigv4_sha256_hex(char out[65], const void *data, size_t len);

#endif
