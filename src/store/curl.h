/* What the two backends that speak HTTP through libcurl share (the s3
 * client, s3_client.c, and the cache-node store, http.c): libcurl's one-time
 * initialisation, a pool of idle handles (each keeps its connection, so
 * threads sharing a store reuse connections), the options every request
 * sets, and which failures are transient and worth a retry. */
#ifndef KILN_STORE_CURL_H
#define KILN_STORE_CURL_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define KILN_CURL_POOL_MAX  64  /* idle handles kept: as many as uploads run at once */
#define KILN_CURL_CONNECT_S 10L /* connect timeout, seconds */
#define KILN_CURL_STALL_S   20L /* below 1 byte/s this long: a failure (under WatchdogSec=30s) */

typedef struct kiln_curl_pool {
	pthread_mutex_t lock;
	CURL *idle[KILN_CURL_POOL_MAX];
	size_t count;
} kiln_curl_pool;

/* curl_global_init, once per process; KILN_EIO when it failed. */
int kiln_curl_init(void);

void kiln_curl_pool_init(kiln_curl_pool *pool);
void kiln_curl_pool_free(kiln_curl_pool *pool);
/* An idle handle, or a new one (NULL when out of memory). */
CURL *kiln_curl_take(kiln_curl_pool *pool);
/* Back to the pool, or cleaned up when the pool is full; NULL is fine. */
void kiln_curl_give(kiln_curl_pool *pool, CURL *handle);

/* Resets e and sets what every kiln request has: url, http and https only,
 * no redirects followed (a credential goes nowhere else), no signals, the
 * connect and stall limits, errbuf for curl's message, user agent "kiln". */
void kiln_curl_request(CURL *e, const char *url, char errbuf[CURL_ERROR_SIZE]);

/* Transient: the connection (refused, reset, cut short, timed out, name
 * lookup, TLS handshake) and the server's answers 408, 429 and 5xx other
 * than 501 and 505 (a feature the server lacks is not transient). TLS
 * verification, bad options and other answers are not. */
bool kiln_curl_retriable(CURLcode cc, long status);

#endif
