/* serve.c over the real cache (src/cache/cache.c): a manifest made with
 * kiln_manifest_commit over zstd shards in a file:// store, as in
 * tests/unit/reader.c, and a cache.yaml pinning it. A miss is fetched from
 * the store and verified, then served whole and by range; an unknown hash is
 * a 404; the version's shard list; the cache's own metrics beside the
 * server's; the bearer token from token_env, checked before anything is
 * fetched or logged; misses bounded (a recent miss is answered without a
 * fetch, misses past misses_per_second are 503) and not logged as
 * warnings. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <fcntl.h>
#include <git2.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "fixture.h"
#include "cache/cache.h"
#include "cache/serve.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/log.h"
#include "manifest/manifest.h"
#include "shard/spool.h"

#define NTRAIN 3

static char tmpdir[64];
static char manifest_path[128], store_dir[128], store_url[160], config_path[128];
static kiln_shard_entry train[NTRAIN];

typedef struct reply {
	long status;
	kiln_buf body;
	char headers[4096];
	size_t hlen;
} reply;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	reply *r = ud;

	assert_int_equal(kiln_buf_put(&r->body, p, size * n), 0);
	return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	reply *r = ud;
	size_t len = size * n;

	if (r->hlen + len < sizeof(r->headers)) {
		memcpy(r->headers + r->hlen, p, len);
		r->hlen += len;
		r->headers[r->hlen] = '\0';
	}
	return len;
}

static void fetch(reply *r, uint16_t port, const char *target, const char *line)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hdrs = line ? curl_slist_append(NULL, line) : NULL;
	char url[512];

	kiln_buf_free(&r->body);
	memset(r, 0, sizeof(*r));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)port, target);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	kiln_buf_putc(&r->body, '\0');
	r->body.len--;
}

/* The shard's bytes as the store holds them. */
static void store_bytes(kiln_buf *out, const char *hash)
{
	char path[512];
	FILE *f;
	char chunk[8192];
	size_t n;

	snprintf(path, sizeof(path), "%s/shards/%.2s/%s.jsonl.zst", store_dir, hash, hash);
	assert_non_null(f = fopen(path, "rb"));
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		assert_int_equal(kiln_buf_put(out, chunk, n), 0);
	fclose(f);
}

static int setup(void **state)
{
	kiln_store *store;
	kiln_spool spool;
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	kiln_manifest *m;
	kiln_snapshot snap = {0};
	char commit[41], line[160];
	FILE *f;

	snprintf(manifest_path, sizeof(manifest_path), "%s/manifest.git", tmpdir);
	snprintf(store_dir, sizeof(store_dir), "%s/store", tmpdir);
	snprintf(store_url, sizeof(store_url), "file://%s", store_dir);
	assert_int_equal(kiln_store_open(&store, store_url, NULL), 0);
	assert_int_equal(kiln_spool_open(&spool, NULL), 0);
	for (int i = 0; i < NTRAIN; i++) {
		size_t lines = i == 2 ? 20000 : (size_t)(5 + i);

		memset(&train[i], 0, sizeof(train[i]));
		for (size_t j = 0; j < lines; j++) {
			int n = snprintf(line, sizeof(line), "{\"shard\":%d,\"n\":%zu,\"pad\":\"%08zx\"}\n",
			                 i, j, j * 2654435761u);

			assert_int_equal(kiln_spool_write(&spool, line, (size_t)n), 0);
			train[i].raw_bytes += (uint64_t)n;
		}
		train[i].records = lines;
		assert_int_equal(
		    kiln_spool_store(&spool, store, cctx, 3, NULL, train[i].hash, &train[i].bytes), 0);
	}
	kiln_spool_close(&spool);
	kiln_store_close(store);
	ZSTD_freeCCtx(cctx);
	assert_int_equal(kiln_manifest_open(&m, manifest_path), 0);
	snap.dataset = "ds";
	snap.branch = "main";
	snap.dataset_json = "{\"name\":\"ds\"}";
	snap.shards[KILN_SPLIT_TRAIN] = train;
	snap.shard_count[KILN_SPLIT_TRAIN] = NTRAIN;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	kiln_manifest_close(m);

	snprintf(config_path, sizeof(config_path), "%s/cache.yaml", tmpdir);
	assert_non_null(f = fopen(config_path, "w"));
	fprintf(f,
	        "store: {url: %s}\nmanifest: %s\ndir: %s/cache\nsize_limit: 1G\npins: [ds@main]\n"
	        "listen: 127.0.0.1:0\nsync_seconds: 60\n",
	        store_url, manifest_path, tmpdir);
	fclose(f);
	return 0;
}

static void serve(kiln_cache_config **config, kiln_cache **cache, kiln_metrics **metrics,
                  kiln_cache_server **server, char *const *sets, size_t nsets)
{
	assert_int_equal(kiln_cache_config_load(config, config_path, sets, nsets), 0);
	assert_int_equal(kiln_metrics_new(metrics), 0);
	if (kiln_cache_open(cache, *config, *metrics) < 0)
		fail_msg("kiln_cache_open: %s", kiln_error_last());
	assert_int_equal(kiln_cache_serve_start(server, *cache, *config, *metrics), 0);
}

static void unserve(kiln_cache_config *config, kiln_cache *cache, kiln_metrics *metrics,
                    kiln_cache_server *server)
{
	kiln_cache_serve_stop(server);
	kiln_cache_close(cache);
	kiln_metrics_free(metrics);
	kiln_cache_config_free(config);
}

static void test_serve(void **state)
{
	kiln_cache_config *config;
	kiln_cache *cache;
	kiln_metrics *metrics;
	kiln_cache_server *server;
	kiln_buf want = KILN_BUF_INIT(0);
	reply r = {0};
	char target[256], expect[512];
	uint16_t port;

	serve(&config, &cache, &metrics, &server, NULL, 0);
	port = kiln_cache_serve_port(server);

	/* misses, before any sync: fetched from the store, verified, served */
	for (int i = 0; i < NTRAIN; i++) {
		kiln_buf_reset(&want);
		store_bytes(&want, train[i].hash);
		snprintf(target, sizeof(target), "/v1/shards/%s", train[i].hash);
		fetch(&r, port, target, NULL);
		if (r.status != 200)
			fail_msg("%s: %ld %s", target, r.status, r.body.ptr);
		assert_int_equal(r.body.len, want.len);
		assert_memory_equal(r.body.ptr, want.ptr, want.len);
		/* a hit, by range */
		fetch(&r, port, target, "Range: bytes=3-");
		assert_int_equal(r.status, 206);
		assert_int_equal(r.body.len, want.len - 3);
		assert_memory_equal(r.body.ptr, want.ptr + 3, want.len - 3);
	}
	fetch(&r, port,
	      "/v1/shards/"
	      "5555555555555555555555555555555555555555555555555555555555555555",
	      NULL);
	assert_int_equal(r.status, 404);

	fetch(&r, port, "/v1/datasets/ds/main/train", NULL);
	if (r.status != 200)
		fail_msg("list: %ld %s", r.status, r.body.ptr);
	for (int i = 0; i < NTRAIN; i++) {
		snprintf(expect, sizeof(expect), "{\"shard\":\"%s\",\"bytes\":%llu,\"records\":%llu,",
		         train[i].hash, (unsigned long long)train[i].bytes,
		         (unsigned long long)train[i].records);
		if (!strstr(r.body.ptr, expect))
			fail_msg("%s not in %s", expect, r.body.ptr);
	}
	fetch(&r, port, "/v1/datasets/ds/nope/train", NULL);
	assert_int_equal(r.status, 404);
	fetch(&r, port, "/v1/datasets/nope/main/train", NULL);
	assert_int_equal(r.status, 404);

	/* a sync while serving, then the metrics of both */
	if (kiln_cache_sync(cache, NULL, NULL) < 0)
		fail_msg("sync: %s", kiln_error_last());
	fetch(&r, port,
	      "/v1/shards/"
	      "5555555555555555555555555555555555555555555555555555555555555555",
	      NULL);
	fetch(&r, port, "/metrics", NULL);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body.ptr, "kiln_cache_requests_total{code=\"200\"} "));
	assert_non_null(strstr(r.body.ptr, "kiln_cache_requests_total{code=\"404\"} "));
	assert_non_null(strstr(r.body.ptr, "kiln_cache_served_bytes_total "));
	fetch(&r, port, "/healthz", NULL);
	assert_string_equal(r.body.ptr, "ok");
	kiln_buf_free(&r.body);
	kiln_buf_free(&want);
	unserve(config, cache, metrics, server);
}

static uint64_t counter(kiln_metrics *m, const char *name, const char *labels)
{
	return kiln_counter_value(kiln_metrics_counter(m, name, NULL, labels));
}

static char log_path[160];

/* From here on, log lines at info and above go to a fresh log_path. */
static void capture_log(void)
{
	int fd;

	snprintf(log_path, sizeof(log_path), "%s/serve.log", tmpdir);
	fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
	assert_true(fd >= 0);
	kiln_log_setup(true, KILN_LOG_INFO);
	kiln_log_set_fd(fd);
}

/* Back to stderr; the number of warning (or worse) lines captured. */
static int end_capture(void)
{
	char line[4096];
	int bad = 0;
	FILE *f;

	kiln_log_set_fd(2);
	kiln_log_setup(true, KILN_LOG_ERROR);
	assert_non_null(f = fopen(log_path, "r"));
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "\"level\":\"warn") || strstr(line, "\"level\":\"error")) {
			fprintf(stderr, "logged: %s", line);
			bad++;
		}
	fclose(f);
	return bad;
}

static void random_hash(char out[65])
{
	unsigned char b[32];

	randombytes_buf(b, sizeof(b));
	sodium_bin2hex(out, 65, b, sizeof(b));
}

static void test_misses_bounded(void **state)
{
	char set[] = "misses_per_second=1";
	char *sets[] = {set};
	kiln_cache_config *config;
	kiln_cache *cache;
	kiln_metrics *metrics;
	kiln_cache_server *server;
	reply r = {0};
	char target[256], hash[65];
	uint64_t misses;
	int refused = 0;
	uint16_t port;

	capture_log();
	serve(&config, &cache, &metrics, &server, sets, 1);
	port = kiln_cache_serve_port(server);

	/* absent at the origin: a 404; asked again, answered without a fetch */
	random_hash(hash);
	snprintf(target, sizeof(target), "/v1/shards/%s", hash);
	fetch(&r, port, target, NULL);
	assert_int_equal(r.status, 404);
	misses = counter(metrics, "kiln_cache_misses_total", NULL);
	assert_int_equal(misses, 1);
	fetch(&r, port, target, NULL);
	assert_int_equal(r.status, 404);
	assert_int_equal(counter(metrics, "kiln_cache_misses_total", NULL), misses);
	assert_int_equal(counter(metrics, "kiln_cache_misses_refused_total", "reason=\"recent\""), 1);

	/* one miss a second: a run of distinct random hashes meets 503s */
	for (int i = 0; i < 20; i++) {
		random_hash(hash);
		snprintf(target, sizeof(target), "/v1/shards/%s", hash);
		fetch(&r, port, target, NULL);
		if (r.status == 503) {
			assert_non_null(strstr(r.headers, "Retry-After: 1\r\n"));
			refused++;
		} else {
			assert_int_equal(r.status, 404);
		}
	}
	assert_true(refused > 0);
	assert_int_equal(counter(metrics, "kiln_cache_misses_refused_total", "reason=\"rate\""), refused);
	assert_int_equal(counter(metrics, "kiln_cache_misses_total", NULL), misses + 20 - refused);
	kiln_buf_free(&r.body);
	unserve(config, cache, metrics, server);
	/* none of it is a warning */
	assert_int_equal(end_capture(), 0);
}

static void test_token(void **state)
{
	char set[] = "token_env=KILN_TEST_CACHE_TOKEN"; /* writable, like argv */
	char *sets[] = {set};
	kiln_cache_config *config;
	kiln_cache *cache;
	kiln_metrics *metrics;
	kiln_cache_server *server;
	reply r = {0};
	char target[256];
	uint16_t port;

	setenv("KILN_TEST_CACHE_TOKEN", "tok-123-0123456789abcdef0123456789ab", 1);
	capture_log();
	serve(&config, &cache, &metrics, &server, sets, 1);
	port = kiln_cache_serve_port(server);
	/* without the token a miss is neither fetched nor logged */
	snprintf(target, sizeof(target), "/v1/shards/%s",
	         "5555555555555555555555555555555555555555555555555555555555555555");
	fetch(&r, port, target, NULL);
	assert_int_equal(r.status, 401);
	assert_int_equal(counter(metrics, "kiln_cache_misses_total", NULL), 0);
	assert_int_equal(counter(metrics, "kiln_cache_fills_total", "source=\"origin\""), 0);
	snprintf(target, sizeof(target), "/v1/shards/%s", train[0].hash);
	fetch(&r, port, target, NULL);
	assert_int_equal(r.status, 401);
	fetch(&r, port, target, "Authorization: Bearer tok-12");
	assert_int_equal(r.status, 401);
	fetch(&r, port, target, "Authorization: Bearer tok-123-0123456789abcdef0123456789ab");
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body.len, train[0].bytes);
	fetch(&r, port, "/healthz", NULL);
	assert_int_equal(r.status, 200);
	kiln_buf_free(&r.body);
	unserve(config, cache, metrics, server);
	assert_int_equal(end_capture(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_serve),
	    cmocka_unit_test(test_token),
	    cmocka_unit_test(test_misses_bounded),
	};
	int rc;

	signal(SIGPIPE, SIG_IGN);
	kiln_log_setup(true, KILN_LOG_ERROR);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = kiln_test_git_main(tests, tmpdir, "cache-serve-real", setup, NULL);
	curl_global_cleanup();
	return rc;
}
