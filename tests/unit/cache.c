/* Unit tests for the cache (src/cache/): a manifest made with
 * kiln_manifest_commit over real zstd shards in a file:// store (commit A on
 * ds/main, tagged v1; commit C on ds/other, disjoint; ds/feat at C; three
 * loose shards no version lists). Config loading and its errors; a sync
 * (shards, views as hard links, the ready marker, the pin links, nothing
 * fetched twice, resume after a restart, a remote manifest); corruption
 * caught on open and on sync, and views repaired; LRU eviction of unpinned
 * shards, pinned ones kept, a moved branch pin unpinning its old shards;
 * one fetch for eight concurrent misses; a size limit too small; peers
 * (served, corrupt, 404, refused) before the origin; list, status, verify;
 * a pinned shard whose size differs from the manifest's with its mtime
 * reset, a shard larger than size_limit, and the background scrub finding
 * a bit flip the mtime does not show. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "cache/cache.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/log.h"
#include "core/metrics.h"
#include "manifest/internal.h"
#include "manifest/manifest.h"
#include "shard/spool.h"

#define NA     6 /* commit A: train 4, dev 1, test 1 */
#define NC     2 /* commit C: train 2 */
#define NLOOSE 3

static char tmpdir[64], manifest_path[128], store_dir[128], store_url[160], config_path[160];
static char commit_a[41], commit_c[41];
static kiln_shard_entry a[NA], c_shards[NC], loose[NLOOSE];
static uint64_t a_bytes, c_bytes;
static int log_fd = -1;

static void make_shard(kiln_spool *spool, kiln_store *store, ZSTD_CCtx *cctx, kiln_shard_entry *out,
                       int which, size_t lines)
{
	char line[160];

	memset(out, 0, sizeof(*out));
	for (size_t j = 0; j < lines; j++) {
		int n = snprintf(line, sizeof(line), "{\"shard\":%d,\"n\":%zu,\"pad\":\"%08zx\"}\n", which, j,
		                 j * 2654435761u);

		assert_int_equal(kiln_spool_write(spool, line, (size_t)n), 0);
		out->raw_bytes += (uint64_t)n;
	}
	out->records = lines;
	assert_int_equal(kiln_spool_store(spool, store, cctx, 3, NULL, out->hash, &out->bytes), 0);
}

static void commit(kiln_manifest *m, const char *branch, kiln_shard_entry *train, size_t ntrain,
                   kiln_shard_entry *dev, size_t ndev, kiln_shard_entry *test, size_t ntest, char out[41])
{
	kiln_snapshot snap = {0};

	snap.dataset = "ds";
	snap.branch = branch;
	snap.dataset_json = "{\"name\":\"ds\"}";
	snap.shards[KILN_SPLIT_TRAIN] = train;
	snap.shard_count[KILN_SPLIT_TRAIN] = ntrain;
	snap.shards[KILN_SPLIT_DEV] = dev;
	snap.shard_count[KILN_SPLIT_DEV] = ndev;
	snap.shards[KILN_SPLIT_TEST] = test;
	snap.shard_count[KILN_SPLIT_TEST] = ntest;
	assert_int_equal(kiln_manifest_commit(m, &snap, out), 0);
}

static void set_ref(const char *name, const char *commit_hex)
{
	kiln_manifest *m;
	git_reference *ref;
	git_oid id;

	assert_int_equal(kiln_manifest_open(&m, manifest_path), 0);
	assert_int_equal(git_oid_fromstr(&id, commit_hex), 0);
	assert_int_equal(git_reference_create(&ref, kiln_manifest_repo(m), name, &id, 1, NULL), 0);
	git_reference_free(ref);
	kiln_manifest_close(m);
}

static int setup(void **state)
{
	kiln_store *store;
	kiln_spool spool;
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	kiln_manifest *m;
	char tag[41];
	FILE *f;

	(void)state;
	snprintf(manifest_path, sizeof(manifest_path), "%s/manifest.git", tmpdir);
	snprintf(store_dir, sizeof(store_dir), "%s/store", tmpdir);
	snprintf(store_url, sizeof(store_url), "file://%s", store_dir);
	assert_non_null(cctx);
	assert_int_equal(kiln_store_open(&store, store_url, NULL), 0);
	assert_int_equal(kiln_spool_open(&spool, NULL), 0);
	for (int i = 0; i < NA; i++) {
		make_shard(&spool, store, cctx, &a[i], i, (size_t)(3 + i));
		a_bytes += a[i].bytes;
	}
	for (int i = 0; i < NC; i++) {
		make_shard(&spool, store, cctx, &c_shards[i], 20 + i, (size_t)(4 + i));
		c_bytes += c_shards[i].bytes;
	}
	for (int i = 0; i < NLOOSE; i++)
		make_shard(&spool, store, cctx, &loose[i], 30 + i, (size_t)(40 + 10 * i));
	kiln_spool_close(&spool);
	kiln_store_close(store);
	ZSTD_freeCCtx(cctx);

	assert_int_equal(kiln_manifest_open(&m, manifest_path), 0);
	commit(m, "main", a, 4, a + 4, 1, a + 5, 1, commit_a);
	assert_int_equal(kiln_manifest_tag(m, "ds", "v1", commit_a, "v1", NULL, tag), 0);
	commit(m, "other", c_shards, NC, NULL, 0, NULL, 0, commit_c);
	kiln_manifest_close(m);
	set_ref("refs/heads/ds/feat", commit_c);

	snprintf(config_path, sizeof(config_path), "%s/cache.yaml", tmpdir);
	assert_non_null(f = fopen(config_path, "w"));
	fprintf(f,
	        "store: {url: \"%s\"}\n"
	        "manifest: %s\n"
	        "dir: ${KILN_TEST_CACHE_DIR:-%s/default-cache}\n"
	        "size_limit: 10M\n"
	        "pins: [ds@main]\n"
	        "concurrency: 4\n",
	        store_url, manifest_path, tmpdir);
	fclose(f);
	kiln_log_setup(false, KILN_LOG_ERROR);
	log_fd = open("/dev/null", O_WRONLY);
	kiln_log_set_fd(log_fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	kiln_log_set_fd(2);
	close(log_fd);
	return 0;
}

/* ---- helpers -------------------------------------------------------------------------- */

typedef struct node {
	kiln_cache_config *config;
	kiln_metrics *metrics;
	kiln_cache *cache;
	char dir[192];
} node;

/* A cache in tmpdir/<name> with the base config plus --set overrides. */
static void open_node(node *n, const char *name, const char *const *sets)
{
	char *argv[16], copies[16][256]; /* the loader writes into --set strings */
	size_t k = 0;

	memset(n, 0, sizeof(*n));
	snprintf(n->dir, sizeof(n->dir), "%s/%s", tmpdir, name);
	snprintf(copies[k], sizeof(copies[k]), "dir=%s", n->dir);
	argv[k] = copies[k];
	k++;
	for (; sets && *sets && k < 15; sets++, k++) {
		snprintf(copies[k], sizeof(copies[k]), "%s", *sets);
		argv[k] = copies[k];
	}
	assert_int_equal(kiln_cache_config_load(&n->config, config_path, argv, k), 0);
	assert_int_equal(kiln_metrics_new(&n->metrics), 0);
	if (kiln_cache_open(&n->cache, n->config, n->metrics) != 0)
		fail_msg("open: %s", kiln_error_last());
}

static void close_node(node *n)
{
	kiln_cache_close(n->cache);
	kiln_metrics_free(n->metrics);
	kiln_cache_config_free(n->config);
	memset(n, 0, sizeof(*n));
}

static uint64_t counter(node *n, const char *name, const char *labels)
{
	return kiln_counter_value(kiln_metrics_counter(n->metrics, name, NULL, labels));
}

static uint64_t origin_fills(node *n)
{
	return counter(n, "kiln_cache_fills_total", "source=\"origin\"");
}

static void shard_file(const node *n, const char *hash, char out[512])
{
	snprintf(out, 512, "%s/shards/%.2s/%s.jsonl.zst", n->dir, hash, hash);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static void sync_ok(node *n)
{
	if (kiln_cache_sync(n->cache, NULL, NULL) != 0)
		fail_msg("sync: %s", kiln_error_last());
}

static size_t count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t k = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		k += e->d_name[0] != '.';
	closedir(d);
	return k;
}

static size_t count_shards(const node *n)
{
	char sub[256];
	size_t k = 0;

	for (int i = 0; i < 256; i++) {
		snprintf(sub, sizeof(sub), "%s/shards/%02x", n->dir, i);
		k += count_entries(sub);
	}
	return k;
}

/* The view file of commit's split at index i. */
static void view_file(const node *n, const char *version, const char *split, int i, char out[512])
{
	snprintf(out, 512, "%s/views/ds/%s/%s/%05d.jsonl.zst", n->dir, version, split, i);
}

static void flip_byte(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	unsigned char b;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, at), 1);
	b ^= 0x5a;
	assert_int_equal(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

static void hash_of_fd(int fd, char out[65])
{
	crypto_generichash_state hs;
	unsigned char buf[4096], d[32];
	ssize_t got;
	off_t off = 0;

	crypto_generichash_init(&hs, NULL, 0, 32);
	while ((got = pread(fd, buf, sizeof(buf), off)) > 0) {
		crypto_generichash_update(&hs, buf, (size_t)got);
		off += got;
	}
	crypto_generichash_final(&hs, d, 32);
	sodium_bin2hex(out, 65, d, 32);
}

/* A train shard of A in manifest (hash) order. */
static const kiln_shard_entry *a_train_sorted(int i)
{
	static const kiln_shard_entry *v[4];

	for (int k = 0; k < 4; k++)
		v[k] = &a[k];
	for (int x = 0; x < 4; x++)
		for (int y = x + 1; y < 4; y++)
			if (strcmp(v[y]->hash, v[x]->hash) < 0) {
				const kiln_shard_entry *t = v[x];
				v[x] = v[y];
				v[y] = t;
			}
	return v[i];
}

/* ---- config --------------------------------------------------------------------------- */

static void expect_config_error(const char *yaml, const char *needle1, const char *needle2)
{
	char path[160];
	kiln_cache_config *c = (kiln_cache_config *)1;

	snprintf(path, sizeof(path), "%s/bad.yaml", tmpdir);
	kiln_test_write_file(path, yaml, 0644);
	assert_int_equal(kiln_cache_config_load(&c, path, NULL, 0), KILN_EINVALID);
	assert_null(c);
	if (!strstr(kiln_error_last(), needle1) || (needle2 && !strstr(kiln_error_last(), needle2)))
		fail_msg("\"%s\" lacks \"%s\" / \"%s\"", kiln_error_last(), needle1, needle2 ? needle2 : "");
}

static void test_config(void **state)
{
	char path[160], yaml[1024], token_path[160], want[512],
	    set_size[] = "size_limit=64M", set_pins[] = "pins=ds@v1,ds@feat", set_bad[] = "nodot";
	char *sets[] = {set_size, set_pins};
	kiln_cache_config *c;

	(void)state;
	/* the base file, with ${} expansion and --set */
	setenv("KILN_TEST_CACHE_DIR", "/var/tmp/kiln-cache-test", 1);
	assert_int_equal(kiln_cache_config_load(&c, config_path, sets, 2), 0);
	unsetenv("KILN_TEST_CACHE_DIR");
	assert_string_equal(c->dir, "/var/tmp/kiln-cache-test");
	assert_string_equal(c->store_url, store_url);
	assert_string_equal(c->manifest, manifest_path);
	assert_int_equal(c->size_limit, 64u << 20);
	assert_int_equal(c->pin_count, 2);
	assert_string_equal(c->pins[0], "ds@v1");
	assert_string_equal(c->pins[1], "ds@feat");
	assert_true(c->high == 0.9 && c->low == 0.8);
	assert_int_equal(c->concurrency, 4);
	assert_int_equal(c->sync_seconds, 60);
	assert_int_equal(c->connections_per_address, 256);
	assert_int_equal(c->misses_per_second, 100);
	assert_int_equal(c->scrub_rate, 16u << 20);
	assert_string_equal(c->listen, "127.0.0.1:9470");
	assert_null(c->token);
	assert_int_equal(c->peer_count, 0);
	kiln_cache_config_free(c);
	kiln_cache_config_free(NULL);
	assert_int_equal(kiln_cache_config_load(&c, config_path, (char *[]){set_bad}, 1), KILN_EINVALID);

	/* every key, a token file, relative paths */
	snprintf(token_path, sizeof(token_path), "%s/cache.token", tmpdir);
	kiln_test_write_file(token_path, "  s3cr3t-token-0123456789abcdef0123 \nsecond line\n", 0600);
	snprintf(path, sizeof(path), "%s/full.yaml", tmpdir);
	snprintf(
	    yaml, sizeof(yaml),
	    "store: {url: \"s3://bucket/prefix\", endpoint: \"127.0.0.1:4569\", http: true, style: path}\n"
	    "manifest: https://git.example.com/manifest.git\n"
	    "dir: rel-cache\n"
	    "size_limit: 100G\n"
	    "watermarks: {high: 0.95, low: 0.5}\n"
	    "pins:\n  - user-events@main\n  - user-events@v3\n  - other\n"
	    "concurrency: 16\n"
	    "peers: [\"http://10.0.0.2:9470/\", \"https://cache-b:9470\"]\n"
	    "listen: 0.0.0.0:9471\n"
	    "token_file: cache.token\n"
	    "sync_seconds: 30\n"
	    "connections_per_address: 32\n"
	    "misses_per_second: 7\n"
	    "scrub_rate: 4M\n");
	kiln_test_write_file(path, yaml, 0644);
	assert_int_equal(kiln_cache_config_load(&c, path, NULL, 0), 0);
	assert_string_equal(c->store_url, "s3://bucket/prefix");
	assert_string_equal(c->store.endpoint, "127.0.0.1:4569");
	assert_true(c->store.http);
	assert_false(c->store.virtual_host);
	assert_string_equal(c->manifest, "https://git.example.com/manifest.git");
	snprintf(yaml, sizeof(yaml), "%s/rel-cache", tmpdir);
	assert_string_equal(c->dir, yaml);
	assert_int_equal(c->size_limit, 100ull << 30);
	assert_true(c->high == 0.95 && c->low == 0.5);
	assert_int_equal(c->pin_count, 3);
	assert_string_equal(c->pins[2], "other@main");
	assert_int_equal(c->peer_count, 2);
	assert_string_equal(c->peers[0], "http://10.0.0.2:9470");
	assert_string_equal(c->listen, "0.0.0.0:9471");
	assert_string_equal(c->token, "s3cr3t-token-0123456789abcdef0123");
	assert_int_equal(c->connections_per_address, 32);
	assert_int_equal(c->misses_per_second, 7);
	assert_int_equal(c->scrub_rate, 4u << 20);
	assert_int_equal(c->concurrency, 16);
	assert_int_equal(c->sync_seconds, 30);
	kiln_cache_config_free(c);

	/* token_env */
	kiln_test_write_file(
	    path,
	    "store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\ntoken_env: KILN_TEST_TOKEN\n",
	    0644);
	unsetenv("KILN_TEST_TOKEN");
	assert_int_equal(kiln_cache_config_load(&c, path, NULL, 0), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "KILN_TEST_TOKEN is not set"));
	/* a token under 128 bits (32 characters) is refused, naming the key, not the token */
	setenv("KILN_TEST_TOKEN", "0123456789abcdef0123456789abcde", 1);
	assert_int_equal(kiln_cache_config_load(&c, path, NULL, 0), KILN_EINVALID);
	assert_non_null(
	    strstr(kiln_error_last(),
	           ":5:12: token_env: KILN_TEST_TOKEN holds a token of 31 characters; at least 32"));
	assert_null(strstr(kiln_error_last(), "0123456789abcdef"));
	assert_null(strchr(kiln_error_last(), '\n'));
	setenv("KILN_TEST_TOKEN", "x", 1);
	assert_int_equal(kiln_cache_config_load(&c, path, NULL, 0), KILN_EINVALID);
	setenv("KILN_TEST_TOKEN", "from-env-0123456789abcdef01234567", 1);
	assert_int_equal(kiln_cache_config_load(&c, path, NULL, 0), 0);
	assert_string_equal(c->token, "from-env-0123456789abcdef01234567");
	snprintf(yaml, sizeof(yaml), "file://%s/s", tmpdir);
	assert_string_equal(c->store_url, yaml); /* file://relative is relative to the config */
	kiln_cache_config_free(c);
	unsetenv("KILN_TEST_TOKEN");

	/* errors name file:line:col and the key */
	expect_config_error("store: {url: file://s}\nmanifest: m.git\nbogus: 1\n", "bad.yaml:3:1: bogus",
	                    "unknown key (see docs/CACHE.md)");
	expect_config_error("store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\ntoken: abc\n",
	                    "bad.yaml:5:1: token", "secrets do not belong");
	expect_config_error("store: {url: ftp://s}\n", "bad.yaml:1:14: store.url", "file://DIR or s3://");
	expect_config_error("store: {url: file://s, sekret: 1}\n", "store.sekret",
	                    "unknown key (see docs/CACHE.md)");
	expect_config_error("manifest: m.git\n", "bad.yaml:1:1: store", "required key is missing");
	expect_config_error("store: {url: file://s}\ndir: d\n", "manifest", "required key is missing");
	expect_config_error("store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: lots\n",
	                    "bad.yaml:4:13: size_limit", "expected a size");
	expect_config_error("store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\n"
	                    "watermarks: {high: 0.5, low: 0.7}\n",
	                    "bad.yaml:5:13: watermarks", "low (0.7) must be below high (0.5)");
	expect_config_error("store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\n"
	                    "watermarks: {high: 1.5}\n",
	                    "watermarks.high", "at most 1");
	expect_config_error(
	    "store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\npins: [\"Bad@main\"]\n",
	    "bad.yaml:5:8: pins", "is not DATASET@REF");
	expect_config_error(
	    "store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\npins: [a@main, a@main]\n",
	    "pins", "pinned twice");
	expect_config_error(
	    "store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\npeers: [\"ftp://x\"]\n",
	    "peers", "not an http");
	expect_config_error("store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\n"
	                    "peers: [\"http://u:p@x:1\"]\n",
	                    "peers", "no user");
	expect_config_error(
	    "store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\nconcurrency: 0\n",
	    "bad.yaml:5:14: concurrency", "between 1 and 256");
	expect_config_error("store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\n"
	                    "token_file: a\ntoken_env: B\n",
	                    "token_env", "at most one");
	kiln_test_write_file(token_path, "short-token\n", 0600);
	snprintf(yaml, sizeof(yaml),
	         "store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\ntoken_file: %s\n",
	         token_path);
	expect_config_error(yaml, "token_file", "the token is 11 characters; at least 32 are needed");
	expect_config_error("store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\n"
	                    "misses_per_second: 0\n",
	                    "misses_per_second", "between 1 and");
	expect_config_error("store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\n"
	                    "scrub_rate: fast\n",
	                    "scrub_rate", "expected a size");
	kiln_test_write_file(token_path, "open-token-0123456789abcdef0123456789\n", 0644);
	snprintf(yaml, sizeof(yaml),
	         "store: {url: file://s}\nmanifest: m.git\ndir: d\nsize_limit: 1M\ntoken_file: %s\n",
	         token_path);
	snprintf(
	    want, sizeof(want),
	    "bad.yaml:5:13: token_file: %s: token file mode 0644 lets group or others read it; chmod 600 %s",
	    token_path, token_path);
	expect_config_error(yaml, want, NULL);
	assert_null(strstr(kiln_error_last(), "open-token"));
	/* a FIFO is refused at once: an open that waited for a writer would
	 * block forever, and the alarm ends the test program (a failure) */
	unlink(token_path);
	assert_int_equal(mkfifo(token_path, 0600), 0);
	alarm(30);
	snprintf(want, sizeof(want), "bad.yaml:5:13: token_file: %s: token file is not a regular file",
	         token_path);
	expect_config_error(yaml, want, NULL);
	alarm(0);
	unlink(token_path);
	expect_config_error("", "empty cache config", NULL);
}

/* ---- sync ----------------------------------------------------------------------------- */

static void test_sync_views(void **state)
{
	static const char *const sets[] = {"pins=ds@main,ds@v1", NULL};
	node n;
	char path[512], shard[512], target[64];
	struct stat vs, ss;
	kiln_cache_sync_stats st;
	kiln_buf report = KILN_BUF_INIT(0);
	FILE *f;

	(void)state;
	open_node(&n, "sync", sets);
	sync_ok(&n);
	assert_int_equal(count_shards(&n), NA);
	assert_int_equal(origin_fills(&n), NA);
	assert_int_equal(counter(&n, "kiln_cache_fill_bytes_total", "source=\"origin\""), a_bytes);
	kiln_cache_last_sync(n.cache, &st);
	assert_int_equal(st.pins, 2);
	assert_int_equal(st.pins_ready, 2);
	assert_int_equal(st.shards, NA);
	assert_int_equal(st.fetched, NA);
	assert_int_equal(st.fetched_bytes, a_bytes);
	assert_int_equal(st.failed, 0);

	/* views/ds/<commit>/<split>/NNNNN.jsonl.zst: hard links in manifest order */
	for (int i = 0; i < 4; i++) {
		view_file(&n, commit_a, "train", i, path);
		shard_file(&n, a_train_sorted(i)->hash, shard);
		assert_int_equal(stat(path, &vs), 0);
		assert_int_equal(stat(shard, &ss), 0);
		assert_int_equal(vs.st_ino, ss.st_ino);
		assert_true(ss.st_nlink >= 2);
		assert_int_equal(ss.st_mtim.tv_sec, 1);
		assert_int_equal(ss.st_size, a_train_sorted(i)->bytes);
	}
	view_file(&n, commit_a, "dev", 0, path);
	assert_true(exists(path));
	view_file(&n, commit_a, "test", 0, path);
	assert_true(exists(path));
	view_file(&n, commit_a, "test", 1, path);
	assert_false(exists(path));
	/* the ready marker, and one link per pin through which the view reads */
	snprintf(path, sizeof(path), "%s/views/ds/%s/ready", n.dir, commit_a);
	assert_non_null(f = fopen(path, "r"));
	assert_true(fgets(target, sizeof(target), f) != NULL);
	assert_string_equal(target, "dataset ds\n");
	assert_true(fgets(target, sizeof(target), f) != NULL);
	assert_int_equal(strncmp(target, "commit ", 7), 0);
	assert_int_equal(strncmp(target + 7, commit_a, 40), 0);
	assert_true(fgets(target, sizeof(target), f) != NULL);
	assert_string_equal(target, "shards 6\n");
	fclose(f);
	for (const char *const *ref = (const char *const[]){"main", "v1", NULL}; *ref; ref++) {
		snprintf(path, sizeof(path), "%s/views/ds/%s", n.dir, *ref);
		ssize_t len = readlink(path, target, sizeof(target));
		assert_int_equal(len, 40);
		assert_int_equal(memcmp(target, commit_a, 40), 0);
		view_file(&n, *ref, "train", 3, path);
		assert_int_equal(stat(path, &vs), 0);
		snprintf(path, sizeof(path), "%s/views/ds/%s/ready", n.dir, *ref);
		assert_true(exists(path));
	}
	snprintf(path, sizeof(path), "%s/tmp", n.dir);
	assert_int_equal(count_entries(path), 0);
	assert_int_equal(kiln_cache_sync_report(n.cache, &report), 0);
	assert_non_null(strstr(report.ptr, "ds@main "));
	assert_non_null(strstr(report.ptr, " ready 6 shards"));
	kiln_buf_free(&report);

	kiln_cache_refresh_metrics(n.cache);
	assert_true(
	    kiln_gauge_value(kiln_metrics_gauge(n.metrics, "kiln_cache_sync_lag_seconds", NULL, NULL)) < 60);
	assert_int_equal(kiln_gauge_value(kiln_metrics_gauge(n.metrics, "kiln_cache_used_bytes", NULL, NULL)),
	                 (double)a_bytes);

	/* a second pass downloads nothing */
	sync_ok(&n);
	assert_int_equal(origin_fills(&n), NA);
	kiln_cache_last_sync(n.cache, &st);
	assert_int_equal(st.fetched, 0);
	assert_int_equal(st.pins_ready, 2);
	close_node(&n);

	/* a restart: tmp/ is emptied (a half download, a half-built view tree
	 * holding a link that is removed, never followed), shards and views
	 * are kept and trusted */
	snprintf(path, sizeof(path), "%s/sync/tmp/%s.half", tmpdir, a[0].hash);
	kiln_test_write_file(path, "half a download", 0644);
	snprintf(shard, sizeof(shard), "%s/sync/tmp/view.half", tmpdir);
	assert_int_equal(mkdir(shard, 0755), 0);
	snprintf(shard, sizeof(shard), "%s/sync/tmp/view.half/train", tmpdir);
	assert_int_equal(mkdir(shard, 0755), 0);
	snprintf(shard, sizeof(shard), "%s/sync/tmp/view.half/train/outside", tmpdir);
	assert_int_equal(symlink(config_path, shard), 0);
	open_node(&n, "sync", sets);
	assert_false(exists(path));
	snprintf(shard, sizeof(shard), "%s/sync/tmp", tmpdir);
	assert_int_equal(count_entries(shard), 0);
	assert_true(exists(config_path));
	sync_ok(&n);
	assert_int_equal(origin_fills(&n), 0);
	assert_int_equal(count_shards(&n), NA);
	close_node(&n);
}

/* A remote manifest (a file:// URL) is fetched into <dir>/manifest.git. */
static void test_remote_manifest(void **state)
{
	char set_manifest[256], path[512];
	const char *sets[] = {set_manifest, "pins=ds@v1", NULL};
	node n;

	(void)state;
	snprintf(set_manifest, sizeof(set_manifest), "manifest=file://%s", manifest_path);
	open_node(&n, "remote", sets);
	sync_ok(&n);
	snprintf(path, sizeof(path), "%s/manifest.git/HEAD", n.dir);
	assert_true(exists(path));
	snprintf(path, sizeof(path), "%s/views/ds/v1/ready", n.dir);
	assert_true(exists(path));
	assert_int_equal(count_shards(&n), NA);
	close_node(&n);
}

/* ---- corruption ------------------------------------------------------------------------ */

static void test_corrupt_refetched(void **state)
{
	static const char *const sets[] = {"pins=ds@main", NULL};
	const kiln_shard_entry *s0 = a_train_sorted(0), *s1 = a_train_sorted(1), *s2 = a_train_sorted(2);
	node n;
	char path[512], view[512], got[65];
	struct stat st, vs;
	kiln_cache_sync_stats stats;
	uint64_t size;
	int fd;

	(void)state;
	open_node(&n, "corrupt", sets);
	sync_ok(&n);

	/* one byte changed in place (through the view: the same inode) */
	view_file(&n, "main", "train", 0, view);
	flip_byte(view, 7);
	shard_file(&n, s0->hash, path);
	assert_int_equal(stat(path, &st), 0);
	assert_int_not_equal(st.st_mtim.tv_sec, 1);
	assert_int_equal(kiln_cache_open_shard(n.cache, s0->hash, true, false, &fd, &size), 0);
	assert_int_equal(size, s0->bytes);
	hash_of_fd(fd, got);
	assert_string_equal(got, s0->hash);
	close(fd);
	assert_int_equal(counter(&n, "kiln_cache_corrupt_total", NULL), 1);
	assert_int_equal(origin_fills(&n), NA + 1);
	assert_int_equal(counter(&n, "kiln_cache_misses_total", NULL), 1);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mtim.tv_sec, 1);
	/* the view still holds the bad inode until the next sync relinks it */
	assert_int_equal(stat(view, &vs), 0);
	assert_int_not_equal(vs.st_ino, st.st_ino);
	sync_ok(&n);
	kiln_cache_last_sync(n.cache, &stats);
	assert_int_equal(stats.repaired, 1);
	assert_int_equal(stats.fetched, 0);
	assert_int_equal(stat(view, &vs), 0);
	assert_int_equal(vs.st_ino, st.st_ino);

	/* truncated: without fill it is a miss, and the file is gone */
	shard_file(&n, s1->hash, path);
	assert_int_equal(truncate(path, 10), 0);
	assert_int_equal(kiln_cache_open_shard(n.cache, s1->hash, false, false, &fd, &size), KILN_ENOTFOUND);
	assert_int_equal(fd, -1);
	assert_false(exists(path));
	assert_int_equal(counter(&n, "kiln_cache_corrupt_total", NULL), 2);

	/* corrupt and never opened: the sync finds it by its mtime */
	shard_file(&n, s2->hash, path);
	flip_byte(path, 3);
	sync_ok(&n);
	kiln_cache_last_sync(n.cache, &stats);
	assert_int_equal(stats.fetched, 2); /* s1 and s2 */
	assert_int_equal(stats.repaired, 2);
	assert_int_equal(counter(&n, "kiln_cache_corrupt_total", NULL), 3);
	for (int i = 0; i < 4; i++) {
		view_file(&n, "main", "train", i, view);
		assert_int_equal((fd = open(view, O_RDONLY)) >= 0, 1);
		hash_of_fd(fd, got);
		close(fd);
		assert_string_equal(got, a_train_sorted(i)->hash);
	}

	/* only the mtime changed (touch): verified, kept, mtime restored */
	shard_file(&n, s0->hash, path);
	assert_int_equal(
	    utimensat(AT_FDCWD, path, (const struct timespec[]){{0, UTIME_OMIT}, {0, UTIME_NOW}}, 0), 0);
	assert_int_equal(kiln_cache_open_shard(n.cache, s0->hash, false, false, &fd, &size), 0);
	close(fd);
	assert_int_equal(counter(&n, "kiln_cache_corrupt_total", NULL), 3);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mtim.tv_sec, 1);

	/* verify: hashes everything, removes what is bad */
	shard_file(&n, a[4].hash, path);
	flip_byte(path, 1);
	uint64_t bad = 99;
	assert_int_equal(kiln_cache_verify(n.cache, &bad), 0);
	assert_int_equal(bad, 1);
	assert_false(exists(path));
	assert_int_equal(kiln_cache_verify(n.cache, &bad), 0);
	assert_int_equal(bad, 0);
	close_node(&n);
}

/* Sets path's mtime back to the published sentinel (1 s past the epoch). */
static void reset_mtime(const char *path)
{
	assert_int_equal(utimensat(AT_FDCWD, path, (const struct timespec[]){{0, UTIME_OMIT}, {1, 0}}, 0), 0);
}

/* Truncated or grown, then given the sentinel mtime back: the size the
 * manifest gives a pinned shard still catches it. */
static void test_wrong_size_with_sentinel_mtime(void **state)
{
	static const char *const sets[] = {"pins=ds@main", NULL};
	const kiln_shard_entry *s1 = a_train_sorted(1), *s2 = a_train_sorted(2);
	node n;
	char path[512], got[65];
	uint64_t size;
	int fd;

	(void)state;
	open_node(&n, "wrong-size", sets);
	sync_ok(&n);

	/* truncated: the event loop's call refuses it, a filling open refetches it */
	shard_file(&n, s1->hash, path);
	assert_int_equal(truncate(path, 10), 0);
	reset_mtime(path);
	assert_int_equal(kiln_cache_open_trusted(n.cache, s1->hash, &fd, &size), KILN_ENOTFOUND);
	assert_int_equal(fd, -1);
	assert_false(exists(path));
	assert_int_equal(counter(&n, "kiln_cache_corrupt_total", NULL), 1);
	assert_int_equal(kiln_cache_open_shard(n.cache, s1->hash, true, false, &fd, &size), 0);
	assert_int_equal(size, s1->bytes);
	hash_of_fd(fd, got);
	close(fd);
	assert_string_equal(got, s1->hash);

	/* grown by a byte: the sync counts it missing and fetches it again */
	shard_file(&n, s2->hash, path);
	fd = open(path, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
	reset_mtime(path);
	sync_ok(&n);
	assert_int_equal(counter(&n, "kiln_cache_corrupt_total", NULL), 2);
	assert_int_equal(kiln_cache_open_shard(n.cache, s2->hash, false, false, &fd, &size), 0);
	assert_int_equal(size, s2->bytes);
	hash_of_fd(fd, got);
	close(fd);
	assert_string_equal(got, s2->hash);
	close_node(&n);
}

/* The scrub hashes files the mtime vouches for: a bit flip is found,
 * removed and (pinned) fetched again without any reader asking. */
static void test_scrub_finds_bit_flip(void **state)
{
	static const char *const sets[] = {"pins=ds@main", "scrub_rate=1G", NULL};
	const kiln_shard_entry *s0 = a_train_sorted(0);
	node n;
	char path[512], got[65] = "";
	struct stat before, st;
	uint64_t size;
	int fd;

	(void)state;
	open_node(&n, "scrub", sets);
	sync_ok(&n);
	shard_file(&n, s0->hash, path);
	assert_int_equal(stat(path, &before), 0);
	flip_byte(path, 5);
	reset_mtime(path);
	/* unseen by a reader: same size, the sentinel mtime */
	assert_int_equal(kiln_cache_open_trusted(n.cache, s0->hash, &fd, &size), 0);
	close(fd);
	assert_int_equal(counter(&n, "kiln_cache_corrupt_total", NULL), 0);

	assert_int_equal(kiln_cache_scrub_start(n.cache), 0);
	/* poll: the pass ends with the shard fetched again (a new inode) */
	for (int i = 0; i < 3000; i++) {
		if (counter(&n, "kiln_cache_scrub_passes_total", NULL) >= 1)
			break;
		usleep(10 * 1000);
	}
	assert_int_equal(counter(&n, "kiln_cache_scrub_passes_total", NULL), 1);
	kiln_cache_scrub_stop(n.cache);
	assert_int_equal(counter(&n, "kiln_cache_corrupt_total", NULL), 1);
	assert_true(counter(&n, "kiln_cache_scrubbed_bytes_total", NULL) >= a_bytes);
	assert_int_equal(origin_fills(&n), NA + 1);
	assert_int_equal(stat(path, &st), 0);
	assert_int_not_equal(st.st_ino, before.st_ino);
	assert_int_equal(kiln_cache_open_trusted(n.cache, s0->hash, &fd, &size), 0);
	hash_of_fd(fd, got);
	close(fd);
	assert_string_equal(got, s0->hash);
	kiln_cache_scrub_stop(n.cache); /* twice is fine */
	close_node(&n);
}

/* A shard larger than size_limit is refused as such, not blamed on the origin. */
static void test_shard_larger_than_limit(void **state)
{
	char set_limit[64];
	const char *sets[] = {"pins=", set_limit, NULL};
	node n;
	uint64_t size;
	int fd;

	(void)state;
	snprintf(set_limit, sizeof(set_limit), "size_limit=%llu", (unsigned long long)(loose[0].bytes - 1));
	open_node(&n, "too-large", sets);
	assert_int_equal(kiln_cache_open_shard(n.cache, loose[0].hash, true, false, &fd, &size), KILN_ELIMIT);
	assert_int_equal(fd, -1);
	assert_non_null(strstr(kiln_error_last(), loose[0].hash));
	assert_non_null(strstr(kiln_error_last(), "is larger than the cache's size_limit ("));
	assert_null(strstr(kiln_error_last(), "corrupt"));
	assert_int_equal(count_shards(&n), 0);
	close_node(&n);
}

/* ---- eviction ------------------------------------------------------------------------- */

static void set_atime(const node *n, const char *hash, time_t t)
{
	char path[512];

	shard_file(n, hash, path);
	assert_int_equal(utimensat(AT_FDCWD, path, (const struct timespec[]){{t, 0}, {0, UTIME_OMIT}}, 0), 0);
}

static void test_evict_lru_unpinned(void **state)
{
	uint64_t s1 = loose[0].bytes, s2 = loose[1].bytes, s3 = loose[2].bytes, all = a_bytes + s1 + s2 + s3;
	uint64_t limit = 2 * all;
	char set_limit[64], set_high[64], set_low[64], path[512];
	const char *sets[] = {"pins=ds@v1", set_limit, set_high, set_low, NULL};
	node n;
	uint64_t size;
	int fd;

	(void)state;
	snprintf(set_limit, sizeof(set_limit), "size_limit=%llu", (unsigned long long)limit);
	snprintf(set_high, sizeof(set_high), "watermarks.high=%.12f", (double)(all - 1) / (double)limit);
	snprintf(set_low, sizeof(set_low), "watermarks.low=%.12f",
	         (double)(a_bytes + s3 + s1 / 2) / (double)limit);
	open_node(&n, "evict", sets);
	sync_ok(&n);
	/* two shards no pin lists, served on demand: still under the high watermark */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(kiln_cache_open_shard(n.cache, loose[i].hash, true, false, &fd, &size), 0);
		close(fd);
	}
	assert_int_equal(count_shards(&n), NA + 2);
	sync_ok(&n);
	assert_int_equal(counter(&n, "kiln_cache_evictions_total", NULL), 0);
	/* least recently used: loose[1], then loose[0]; pinned ones oldest of all */
	set_atime(&n, loose[1].hash, 1000);
	set_atime(&n, loose[0].hash, 2000);
	for (int i = 0; i < NA; i++)
		set_atime(&n, a[i].hash, 10);
	/* the third passes the high watermark: evicted down to low, the new one kept */
	assert_int_equal(kiln_cache_open_shard(n.cache, loose[2].hash, true, false, &fd, &size), 0);
	close(fd);
	assert_int_equal(counter(&n, "kiln_cache_evictions_total", NULL), 2);
	sync_ok(&n); /* under high now: nothing more */
	assert_int_equal(counter(&n, "kiln_cache_evictions_total", NULL), 2);
	shard_file(&n, loose[1].hash, path);
	assert_false(exists(path));
	shard_file(&n, loose[0].hash, path);
	assert_false(exists(path));
	shard_file(&n, loose[2].hash, path);
	assert_true(exists(path));
	for (int i = 0; i < NA; i++) {
		shard_file(&n, a[i].hash, path);
		assert_true(exists(path));
	}
	assert_int_equal(kiln_gauge_value(kiln_metrics_gauge(n.metrics, "kiln_cache_used_bytes", NULL, NULL)),
	                 (double)(a_bytes + s3));
	close_node(&n);
}

/* A branch pin that moves leaves its old version's shards unpinned. */
static void test_branch_pin_moves(void **state)
{
	static const char *const sets[] = {"pins=ds@v1,ds@feat", NULL};
	char set_limit[64], path[512], target[64], set_low[64];
	const char *tight[] = {"pins=ds@v1,ds@feat", set_limit, "watermarks.high=0.99", set_low, NULL};
	node n;
	ssize_t len;

	(void)state;
	open_node(&n, "moves", sets);
	sync_ok(&n);
	snprintf(path, sizeof(path), "%s/views/ds/feat", n.dir);
	len = readlink(path, target, sizeof(target));
	assert_int_equal(len, 40);
	assert_int_equal(memcmp(target, commit_c, 40), 0);
	assert_int_equal(count_shards(&n), NA + NC);

	set_ref("refs/heads/ds/feat", commit_a);
	sync_ok(&n);
	len = readlink(path, target, sizeof(target));
	assert_int_equal(len, 40);
	assert_int_equal(memcmp(target, commit_a, 40), 0);
	snprintf(path, sizeof(path), "%s/views/ds/%s", n.dir, commit_c);
	assert_false(exists(path));                  /* no pin shows it any more */
	assert_int_equal(count_shards(&n), NA + NC); /* no pressure: kept */
	close_node(&n);

	/* under pressure C's shards go, A's (pinned twice) stay */
	snprintf(set_limit, sizeof(set_limit), "size_limit=%llu", (unsigned long long)(a_bytes + c_bytes));
	snprintf(set_low, sizeof(set_low), "watermarks.low=%.12f",
	         (double)(a_bytes + 1) / (double)(a_bytes + c_bytes));
	open_node(&n, "moves", tight);
	sync_ok(&n);
	assert_int_equal(count_shards(&n), NA);
	assert_int_equal(counter(&n, "kiln_cache_evictions_total", NULL), NC);
	for (int i = 0; i < NC; i++) {
		shard_file(&n, c_shards[i].hash, path);
		assert_false(exists(path));
	}
	snprintf(path, sizeof(path), "%s/views/ds/feat/train/00003.jsonl.zst", n.dir);
	assert_true(exists(path));
	close_node(&n);
	set_ref("refs/heads/ds/feat", commit_c);
}

/* ---- size limit -------------------------------------------------------------------------- */

static void test_size_limit(void **state)
{
	static const char *const tiny[] = {"pins=ds@main", "size_limit=100", NULL};
	char set_limit[64], path[512];
	const char *fits_one[] = {"pins=ds@v1,ds@other", set_limit, NULL};
	kiln_buf out = KILN_BUF_INIT(0);
	node n;

	(void)state;
	open_node(&n, "tiny", tiny);
	assert_int_equal(kiln_cache_sync(n.cache, NULL, NULL), KILN_ELIMIT);
	assert_non_null(strstr(kiln_error_last(), "but size_limit is 100 B"));
	assert_non_null(strstr(kiln_error_last(), "ds@main"));
	assert_int_equal(count_shards(&n), 0);
	snprintf(path, sizeof(path), "%s/views/ds", n.dir);
	assert_int_equal(count_entries(path), 0);
	snprintf(path, sizeof(path), "%s/tmp", n.dir);
	assert_int_equal(count_entries(path), 0);
	assert_int_equal(counter(&n, "kiln_cache_sync_failures_total", NULL), 1);
	assert_int_equal(kiln_cache_status(n.cache, &out), 0);
	assert_non_null(strstr(out.ptr, "failed: pins need"));
	kiln_buf_free(&out);
	close_node(&n);

	/* pins fill in order: the first fits and is ready, the second stops */
	snprintf(set_limit, sizeof(set_limit), "size_limit=%llu", (unsigned long long)(a_bytes + 1));
	open_node(&n, "fits-one", fits_one);
	assert_int_equal(kiln_cache_sync(n.cache, NULL, NULL), KILN_ELIMIT);
	assert_non_null(strstr(kiln_error_last(), "filling stopped at ds@other"));
	snprintf(path, sizeof(path), "%s/views/ds/v1/ready", n.dir);
	assert_true(exists(path));
	snprintf(path, sizeof(path), "%s/views/ds/other", n.dir);
	assert_false(exists(path));
	assert_int_equal(count_shards(&n), NA);
	close_node(&n);
}

/* ---- peers ----------------------------------------------------------------------------- */

typedef struct fake_peer {
	int fd;
	uint16_t port;
	pthread_t thread;
	_Atomic int mode; /* 0 the shard, 1 corrupt bytes, 2 404 */
	_Atomic int requests;
	_Atomic int delay_ms; /* before answering */
	char last_request[2048];
} fake_peer;

static void *peer_main(void *arg)
{
	fake_peer *p = arg;

	for (;;) {
		char req[2048], path[512], head[256], *body = NULL;
		size_t got = 0;
		ssize_t n;
		long size = 0;
		int c = accept(p->fd, NULL, NULL);
		FILE *f;

		if (c < 0)
			break;
		while (got < sizeof(req) - 1 && (n = read(c, req + got, sizeof(req) - 1 - got)) > 0) {
			got += (size_t)n;
			req[got] = '\0';
			if (strstr(req, "\r\n\r\n"))
				break;
		}
		req[got] = '\0';
		memcpy(p->last_request, req, got + 1);
		atomic_fetch_add(&p->requests, 1);
		if (atomic_load(&p->delay_ms))
			usleep((useconds_t)atomic_load(&p->delay_ms) * 1000);
		if (atomic_load(&p->mode) == 2 || strncmp(req, "GET /v1/shards/", 15) != 0 || got < 15 + 64) {
			const char *nf =
			    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
			(void)!write(c, nf, strlen(nf));
			close(c);
			continue;
		}
		snprintf(path, sizeof(path), "%s/shards/%.2s/%.64s.jsonl.zst", store_dir, req + 15, req + 15);
		if ((f = fopen(path, "rb"))) {
			fseek(f, 0, SEEK_END);
			size = ftell(f);
			rewind(f);
			body = malloc((size_t)size + 1);
			if (fread(body, 1, (size_t)size, f) != (size_t)size)
				size = 0;
			fclose(f);
		}
		if (body && size > 4 && atomic_load(&p->mode) == 1)
			body[size / 2] ^= 1;
		snprintf(head, sizeof(head),
		         "HTTP/1.1 200 OK\r\nContent-Length: %ld\r\nConnection: close\r\n\r\n", size);
		(void)!write(c, head, strlen(head));
		if (body)
			(void)!write(c, body, (size_t)size);
		free(body);
		close(c);
	}
	return NULL;
}

static void peer_start(fake_peer *p)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);

	memset(p, 0, sizeof(*p));
	assert_true((p->fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(bind(p->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(p->fd, 16), 0);
	assert_int_equal(getsockname(p->fd, (struct sockaddr *)&sa, &len), 0);
	p->port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&p->thread, NULL, peer_main, p), 0);
}

static void peer_stop(fake_peer *p)
{
	shutdown(p->fd, SHUT_RDWR);
	pthread_join(p->thread, NULL);
	close(p->fd);
}

/* ---- single flight ---------------------------------------------------------------------- */

typedef struct racer {
	kiln_cache *cache;
	pthread_barrier_t *go;
	int rc, fd;
	uint64_t size;
} racer;

static void *race(void *arg)
{
	racer *r = arg;

	pthread_barrier_wait(r->go);
	r->rc = kiln_cache_open_shard(r->cache, loose[2].hash, true, false, &r->fd, &r->size);
	return NULL;
}

static void test_one_fetch_for_concurrent_misses(void **state)
{
	char set_peers[128];
	const char *sets[] = {"pins=", set_peers, NULL};
	pthread_barrier_t go;
	pthread_t t[8];
	fake_peer peer;
	racer r[8];
	node n;

	(void)state;
	/* a slow peer keeps the first fetch in flight while the others miss */
	peer_start(&peer);
	atomic_store(&peer.delay_ms, 300);
	snprintf(set_peers, sizeof(set_peers), "peers=http://127.0.0.1:%u", peer.port);
	open_node(&n, "race", sets);
	pthread_barrier_init(&go, NULL, 8);
	for (int i = 0; i < 8; i++) {
		r[i] = (racer){.cache = n.cache, .go = &go, .fd = -1};
		assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(r[i].rc, 0);
		assert_int_equal(r[i].size, loose[2].bytes);
		close(r[i].fd);
	}
	assert_int_equal(atomic_load(&peer.requests), 1);
	assert_int_equal(counter(&n, "kiln_cache_fills_total", "source=\"peer\""), 1);
	assert_int_equal(counter(&n, "kiln_cache_fill_bytes_total", "source=\"peer\""), loose[2].bytes);
	assert_int_equal(origin_fills(&n), 0);
	assert_int_equal(counter(&n, "kiln_cache_misses_total", NULL), 8);
	assert_int_equal(counter(&n, "kiln_cache_hits_total", NULL), 0);
	peer_stop(&peer);

	/* the same without peers: one origin fetch */
	close_node(&n);
	sets[1] = "peers=";
	open_node(&n, "race2", sets);
	pthread_barrier_init(&go, NULL, 8);
	for (int i = 0; i < 8; i++) {
		r[i] = (racer){.cache = n.cache, .go = &go, .fd = -1};
		assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(r[i].rc, 0);
		close(r[i].fd);
	}
	assert_int_equal(origin_fills(&n), 1);
	assert_int_equal(counter(&n, "kiln_cache_fill_bytes_total", "source=\"origin\""), loose[2].bytes);
	assert_int_equal(
	    counter(&n, "kiln_cache_hits_total", NULL) + counter(&n, "kiln_cache_misses_total", NULL), 8);

	/* absent everywhere */
	char missing[65];
	int fd;
	uint64_t size;
	memset(missing, 'e', 64);
	missing[64] = '\0';
	assert_int_equal(kiln_cache_open_shard(n.cache, missing, true, false, &fd, &size), KILN_ENOTFOUND);
	assert_int_equal(kiln_cache_open_shard(n.cache, "not-a-hash", true, false, &fd, &size),
	                 KILN_EINVALID);
	close_node(&n);
}

/* A sync and readers missing the same shards at once: each fetched once. */
typedef struct reader_arg {
	kiln_cache *cache;
	pthread_barrier_t *go;
	int bad;
} reader_arg;

static void *read_all(void *arg)
{
	reader_arg *r = arg;

	pthread_barrier_wait(r->go);
	for (int i = NA - 1; i >= 0; i--) {
		uint64_t size;
		int fd;

		if (kiln_cache_open_shard(r->cache, a[i].hash, true, false, &fd, &size) != 0 ||
		    size != a[i].bytes)
			r->bad++;
		else
			close(fd);
	}
	return NULL;
}

static void *run_sync(void *arg)
{
	reader_arg *r = arg;

	pthread_barrier_wait(r->go);
	r->bad = kiln_cache_sync(r->cache, NULL, NULL) != 0;
	return NULL;
}

static void test_sync_races_readers(void **state)
{
	static const char *const sets[] = {"pins=ds@main", "concurrency=3", NULL};
	pthread_barrier_t go;
	pthread_t t[5];
	reader_arg r[5];
	node n;

	(void)state;
	open_node(&n, "sync-race", sets);
	pthread_barrier_init(&go, NULL, 5);
	for (int i = 0; i < 5; i++) {
		r[i] = (reader_arg){.cache = n.cache, .go = &go};
		assert_int_equal(pthread_create(&t[i], NULL, i == 0 ? run_sync : read_all, &r[i]), 0);
	}
	for (int i = 0; i < 5; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < 5; i++)
		assert_int_equal(r[i].bad, 0);
	assert_int_equal(origin_fills(&n), NA);
	assert_int_equal(count_shards(&n), NA);
	sync_ok(&n);
	assert_int_equal(origin_fills(&n), NA);
	close_node(&n);
}

static void test_peers_first(void **state)
{
	fake_peer peer;
	char set_peers[128];
	const char *sets[] = {"pins=", set_peers, "token_env=KILN_TEST_PEER_TOKEN", NULL};
	node n;
	uint64_t size;
	int fd;

	(void)state;
	peer_start(&peer);
	/* a refused connection first, then the fake peer */
	snprintf(set_peers, sizeof(set_peers), "peers=http://127.0.0.1:1,http://127.0.0.1:%u/", peer.port);
	setenv("KILN_TEST_PEER_TOKEN", "peer-secret-0123456789abcdef012345", 1);
	open_node(&n, "peers", sets);
	unsetenv("KILN_TEST_PEER_TOKEN");

	assert_int_equal(kiln_cache_open_shard(n.cache, loose[0].hash, true, false, &fd, &size), 0);
	close(fd);
	assert_int_equal(counter(&n, "kiln_cache_fills_total", "source=\"peer\""), 1);
	assert_int_equal(counter(&n, "kiln_cache_fill_bytes_total", "source=\"peer\""), loose[0].bytes);
	assert_int_equal(origin_fills(&n), 0);
	assert_non_null(strstr(peer.last_request, "GET /v1/shards/"));
	assert_non_null(strstr(peer.last_request, loose[0].hash));
	assert_non_null(strstr(peer.last_request, "X-Kiln-Peer: 1\r\n"));
	assert_non_null(
	    strstr(peer.last_request, "Authorization: Bearer peer-secret-0123456789abcdef012345\r\n"));

	/* corrupt bytes from the peer: not published, the origin fills it */
	atomic_store(&peer.mode, 1);
	assert_int_equal(kiln_cache_open_shard(n.cache, loose[1].hash, true, false, &fd, &size), 0);
	close(fd);
	assert_int_equal(counter(&n, "kiln_cache_fills_total", "source=\"peer\""), 1);
	assert_int_equal(origin_fills(&n), 1);

	/* 404 from the peer: the origin */
	atomic_store(&peer.mode, 2);
	assert_int_equal(kiln_cache_open_shard(n.cache, loose[2].hash, true, false, &fd, &size), 0);
	close(fd);
	assert_int_equal(origin_fills(&n), 2);

	/* a request from a peer is never passed on to peers */
	int before = atomic_load(&peer.requests);
	char path[512];
	shard_file(&n, loose[0].hash, path);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(kiln_cache_open_shard(n.cache, loose[0].hash, true, true, &fd, &size), 0);
	close(fd);
	assert_int_equal(atomic_load(&peer.requests), before);
	assert_int_equal(origin_fills(&n), 3);
	close_node(&n);
	peer_stop(&peer);
}

/* ---- list and status ---------------------------------------------------------------------- */

static void test_list_status(void **state)
{
	static const char *const sets[] = {"pins=ds@v1,ds@nope", NULL};
	kiln_buf out = KILN_BUF_INIT(0);
	node n;
	char line[256];

	(void)state;
	open_node(&n, "list", sets);
	assert_int_equal(kiln_cache_list(n.cache, "ds", "v1", "train", &out), 0);
	assert_non_null(strstr(out.ptr, "\"cached\":false"));
	kiln_buf_reset(&out);
	assert_true(kiln_cache_sync(n.cache, NULL, NULL) < 0); /* ds@nope does not resolve */
	assert_non_null(strstr(kiln_error_last(), "ds@nope"));
	assert_int_equal(kiln_cache_list(n.cache, "ds", "v1", "train", &out), 0);
	for (int i = 0; i < 4; i++) {
		snprintf(line, sizeof(line),
		         "{\"shard\":\"%s\",\"bytes\":%llu,\"records\":%llu,\"cached\":true}\n",
		         a_train_sorted(i)->hash, (unsigned long long)a_train_sorted(i)->bytes,
		         (unsigned long long)a_train_sorted(i)->records);
		assert_non_null(strstr(out.ptr, line));
	}
	kiln_buf_reset(&out);
	assert_int_equal(kiln_cache_list(n.cache, "ds", "other", "train", &out), 0);
	assert_non_null(strstr(out.ptr, "\"cached\":false"));
	kiln_buf_reset(&out);
	assert_int_equal(kiln_cache_list(n.cache, "ds", "v1", "holdout", &out), KILN_ENOTFOUND);
	assert_int_equal(kiln_cache_list(n.cache, "nope", "main", "train", &out), KILN_ENOTFOUND);
	assert_int_equal(kiln_cache_list(n.cache, "ds", "v9", "train", &out), KILN_ENOTFOUND);
	assert_int_equal(out.len, 0);

	assert_int_equal(kiln_cache_status(n.cache, &out), 0);
	assert_non_null(strstr(out.ptr, "shards 6, pinned 6"));
	assert_non_null(strstr(out.ptr, "pin ds@v1: "));
	assert_non_null(strstr(out.ptr, " ready, 6 shards"));
	assert_non_null(strstr(out.ptr, "pin ds@nope: not resolved"));
	assert_non_null(strstr(out.ptr, "last sync "));
	kiln_buf_free(&out);
	close_node(&n);

	/* another process reads the last sync from <dir>/last-sync */
	open_node(&n, "list", sets);
	assert_int_equal(kiln_cache_status(n.cache, &out), 0);
	assert_non_null(strstr(out.ptr, "failed: ds@nope"));
	kiln_buf_free(&out);
	close_node(&n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config),
	    cmocka_unit_test(test_sync_views),
	    cmocka_unit_test(test_remote_manifest),
	    cmocka_unit_test(test_corrupt_refetched),
	    cmocka_unit_test(test_wrong_size_with_sentinel_mtime),
	    cmocka_unit_test(test_scrub_finds_bit_flip),
	    cmocka_unit_test(test_shard_larger_than_limit),
	    cmocka_unit_test(test_evict_lru_unpinned),
	    cmocka_unit_test(test_branch_pin_moves),
	    cmocka_unit_test(test_size_limit),
	    cmocka_unit_test(test_one_fetch_for_concurrent_misses),
	    cmocka_unit_test(test_sync_races_readers),
	    cmocka_unit_test(test_peers_first),
	    cmocka_unit_test(test_list_status),
	};

	return kiln_test_git_main(tests, tmpdir, "cache", setup, teardown);
}
