/* The file:// store and the front end's key rules: round trips, atomic
 * overwrite, nested keys, stat/remove, sorted recursive listing, bad keys,
 * relative URLs and the errors a caller sees. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "core/error.h"
#include "store/store.h"

typedef struct fixture {
	char dir[64];  /* scratch directory for source files */
	char root[80]; /* the store's directory */
	char url[96];
	kiln_store *store;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(kiln_test_tmpdir(f->dir, sizeof(f->dir), "store-test"), 0);
	snprintf(f->root, sizeof(f->root), "%s/store", f->dir);
	snprintf(f->url, sizeof(f->url), "file://%s", f->root);
	assert_int_equal(kiln_store_open(&f->store, f->url, NULL), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;

	kiln_store_close(f->store);
	assert_int_equal(kiln_test_rmtree(f->dir), 0);
	free(f);
	return 0;
}

/* Writes len bytes to the scratch directory's name; the path goes to out. */
static void write_source(const fixture *f, const char *name, const void *data, size_t len, char *out,
                         size_t cap)
{
	FILE *fp;

	snprintf(out, cap, "%s/%s", f->dir, name);
	fp = fopen(out, "wb");
	assert_non_null(fp);
	if (len)
		assert_int_equal(fwrite(data, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
}

static int put_bytes(const fixture *f, const char *key, const void *data, size_t len)
{
	char path[PATH_MAX];

	write_source(f, "src", data, len, path, sizeof(path));
	return kiln_store_put_file(f->store, key, path, len);
}

typedef struct collect {
	unsigned char *data;
	size_t len, cap;
} collect;

static int collect_sink(void *ctx, const void *data, size_t len)
{
	collect *c = ctx;

	if (c->len + len > c->cap) {
		size_t ncap = (c->len + len) * 2;
		unsigned char *nd = realloc(c->data, ncap);

		if (!nd)
			return KILN_ENOMEM;
		c->data = nd;
		c->cap = ncap;
	}
	memcpy(c->data + c->len, data, len);
	c->len += len;
	return 0;
}

static void assert_get(const fixture *f, const char *key, const void *want, size_t len)
{
	collect c = {0};

	assert_int_equal(kiln_store_get(f->store, key, collect_sink, &c), 0);
	assert_int_equal(c.len, len);
	if (len)
		assert_memory_equal(c.data, want, len);
	free(c.data);
}

static int count_entries(const char *dir)
{
	char cmd[PATH_MAX + 64];
	int n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_int_equal(fscanf(p, "%d", &n), 1);
	pclose(p);
	return n;
}

static void assert_no_temp(const fixture *f)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s/.tmp", f->root);
	assert_int_equal(count_entries(tmp), 0);
}

static unsigned char *random_bytes(size_t len, unsigned seed)
{
	unsigned char *b = malloc(len ? len : 1);
	uint32_t x = seed * 2654435761u + 1;

	assert_non_null(b);
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		b[i] = (unsigned char)x;
	}
	return b;
}

static void test_roundtrip_binary(void **state)
{
	fixture *f = *state;
	unsigned char all[512];

	for (size_t i = 0; i < sizeof(all); i++)
		all[i] = (unsigned char)(i * 7);
	all[3] = 0;
	all[4] = '\n';
	assert_int_equal(put_bytes(f, "bin", all, sizeof(all)), 0);
	assert_get(f, "bin", all, sizeof(all));
	assert_no_temp(f);
}

static void test_roundtrip_empty(void **state)
{
	fixture *f = *state;
	uint64_t size = 99;

	assert_int_equal(put_bytes(f, "empty", "", 0), 0);
	assert_int_equal(kiln_store_stat(f->store, "empty", &size), 1);
	assert_int_equal(size, 0);
	assert_get(f, "empty", "", 0);
}

static void test_roundtrip_5mib(void **state)
{
	fixture *f = *state;
	size_t len = 5u << 20;
	unsigned char *data = random_bytes(len, 5);
	uint64_t size = 0;

	assert_int_equal(put_bytes(f, "shards/ab/big.jsonl.zst", data, len), 0);
	assert_int_equal(kiln_store_stat(f->store, "shards/ab/big.jsonl.zst", &size), 1);
	assert_int_equal(size, len);
	assert_get(f, "shards/ab/big.jsonl.zst", data, len);
	free(data);
}

static void test_source_untouched(void **state)
{
	fixture *f = *state;
	char path[PATH_MAX];
	struct stat st;

	write_source(f, "keep", "abc", 3, path, sizeof(path));
	assert_int_equal(kiln_store_put_file(f->store, "k", path, 3), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 3);
	assert_int_equal(st.st_nlink, 1);
}

/* A reader running beside a writer sees one version whole, never a mix. */
typedef struct race {
	fixture *f;
	const unsigned char *a, *b;
	size_t alen, blen;
	atomic_bool stop;
	atomic_int reads, bad;
} race;

static void *reader(void *arg)
{
	race *r = arg;

	while (!atomic_load(&r->stop)) {
		collect c = {0};
		int rc = kiln_store_get(r->f->store, "obj", collect_sink, &c);

		if (rc != 0 || !((c.len == r->alen && memcmp(c.data, r->a, c.len) == 0) ||
		                 (c.len == r->blen && memcmp(c.data, r->b, c.len) == 0)))
			atomic_fetch_add(&r->bad, 1);
		atomic_fetch_add(&r->reads, 1);
		free(c.data);
	}
	return NULL;
}

static void test_overwrite_atomic(void **state)
{
	fixture *f = *state;
	race r = {.f = f, .alen = 300000, .blen = 700001};
	unsigned char *a = random_bytes(r.alen, 1), *b = random_bytes(r.blen, 2);
	char pa[PATH_MAX], pb[PATH_MAX];
	pthread_t t;

	r.a = a;
	r.b = b;
	write_source(f, "a", a, r.alen, pa, sizeof(pa));
	write_source(f, "b", b, r.blen, pb, sizeof(pb));
	assert_int_equal(kiln_store_put_file(f->store, "obj", pa, r.alen), 0);
	assert_int_equal(pthread_create(&t, NULL, reader, &r), 0);
	for (int i = 0; i < 40; i++) {
		int odd = i & 1;

		assert_int_equal(kiln_store_put_file(f->store, "obj", odd ? pa : pb, odd ? r.alen : r.blen),
		                 0);
	}
	while (atomic_load(&r.reads) < 5)
		usleep(1000);
	atomic_store(&r.stop, true);
	pthread_join(t, NULL);
	assert_int_equal(atomic_load(&r.bad), 0);
	/* the last put (i = 39) stored a */
	assert_get(f, "obj", a, r.alen);
	assert_no_temp(f);
	free(a);
	free(b);
}

static void test_nested_keys(void **state)
{
	fixture *f = *state;
	char path[PATH_MAX];
	struct stat st;

	assert_int_equal(put_bytes(f, "a/b/c/d.txt", "x", 1), 0);
	snprintf(path, sizeof(path), "%s/a/b/c/d.txt", f->root);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_get(f, "a/b/c/d.txt", "x", 1);
}

static void test_stat(void **state)
{
	fixture *f = *state;
	uint64_t size = 0;

	assert_int_equal(put_bytes(f, "dir/obj", "hello", 5), 0);
	assert_int_equal(kiln_store_stat(f->store, "dir/obj", &size), 1);
	assert_int_equal(size, 5);
	assert_int_equal(kiln_store_stat(f->store, "dir/obj", NULL), 1);
	assert_int_equal(kiln_store_stat(f->store, "dir/none", &size), 0);
	assert_int_equal(kiln_store_stat(f->store, "nodir/none", NULL), 0);
	assert_int_equal(kiln_store_stat(f->store, "dir/obj/below", NULL), 0);
	assert_int_equal(kiln_store_stat(f->store, "dir", NULL), 0); /* a prefix, not an object */
}

static void test_remove(void **state)
{
	fixture *f = *state;
	collect c = {0};

	assert_int_equal(put_bytes(f, "gone/soon", "x", 1), 0);
	assert_int_equal(kiln_store_remove(f->store, "gone/soon"), 0);
	assert_int_equal(kiln_store_stat(f->store, "gone/soon", NULL), 0);
	assert_int_equal(kiln_store_remove(f->store, "gone/soon"), KILN_ENOTFOUND);
	assert_non_null(strstr(kiln_error_last(), "gone/soon"));
	assert_int_equal(kiln_store_get(f->store, "gone/soon", collect_sink, &c), KILN_ENOTFOUND);
	assert_non_null(strstr(kiln_error_last(), "gone/soon"));
	assert_int_equal(kiln_store_remove(f->store, "gone"), KILN_ENOTFOUND);
	free(c.data);
}

typedef struct listing {
	char text[1024];
	int calls, stop_after;
} listing;

static int list_cb(void *ctx, const char *key, uint64_t size, int64_t mtime)
{
	listing *l = ctx;
	size_t n = strlen(l->text);

	/* every object here was written by this test moments ago */
	assert_true(mtime > (int64_t)time(NULL) - 600 && mtime <= (int64_t)time(NULL) + 1);
	snprintf(l->text + n, sizeof(l->text) - n, "%s:%llu ", key, (unsigned long long)size);
	if (++l->calls == l->stop_after)
		return 42;
	return 0;
}

static void assert_list(const fixture *f, const char *prefix, const char *want)
{
	listing l = {.calls = 0};

	assert_int_equal(kiln_store_list(f->store, prefix, list_cb, &l), 0);
	assert_string_equal(l.text, want);
}

static void test_list(void **state)
{
	fixture *f = *state;
	listing l = {.stop_after = 2};

	assert_int_equal(put_bytes(f, "b", "1", 1), 0);
	assert_int_equal(put_bytes(f, "a/y/z", "22", 2), 0);
	assert_int_equal(put_bytes(f, "a-c", "333", 3), 0);
	assert_int_equal(put_bytes(f, "a/x", "4444", 4), 0);
	assert_int_equal(put_bytes(f, "c/d", "", 0), 0);
	assert_int_equal(put_bytes(f, "a.b", "1", 1), 0);
	/* strcmp order: '-' < '.' < '/' */
	assert_list(f, "", "a-c:3 a.b:1 a/x:4 a/y/z:2 b:1 c/d:0 ");
	assert_list(f, "a/", "a/x:4 a/y/z:2 ");
	assert_list(f, "a", "a-c:3 a.b:1 a/x:4 a/y/z:2 ");
	assert_list(f, "a/y", "a/y/z:2 ");
	assert_list(f, "a/y/", "a/y/z:2 ");
	assert_list(f, "c/d", "c/d:0 ");
	assert_list(f, "zz", "");
	assert_list(f, "nodir/", "");
	/* a non-zero return from the callback stops the walk and is returned */
	assert_int_equal(kiln_store_list(f->store, "", list_cb, &l), 42);
	assert_string_equal(l.text, "a-c:3 a.b:1 ");
	/* bad prefixes */
	assert_int_equal(kiln_store_list(f->store, "../", list_cb, &l), KILN_EINVALID);
	assert_int_equal(kiln_store_list(f->store, "/a", list_cb, &l), KILN_EINVALID);
	assert_int_equal(kiln_store_list(f->store, "a//", list_cb, &l), KILN_EINVALID);
}

static void test_list_skips_scratch(void **state)
{
	fixture *f = *state;
	char path[PATH_MAX];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/.tmp/put-leftover", f->root);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fclose(fp);
	assert_int_equal(put_bytes(f, "k", "v", 1), 0);
	assert_list(f, "", "k:1 ");
	assert_list(f, ".tmp/", "");
	assert_int_equal(put_bytes(f, ".tmp/x", "v", 1), KILN_EINVALID);
	assert_int_equal(kiln_store_stat(f->store, ".tmp/put-leftover", NULL), KILN_EINVALID);
}

static void test_key_rules(void **state)
{
	static const char *const bad[] = {"../x", "/abs", "a//b", "a/./b", "",  "a/",   ".",
	                                  "..",   "a/..", "a b",  "a\nb",  "ä", "a\\b", "x/../y"};
	static const char *const good[] = {"a", "a.b/c_d=e-f", "shards/ab/0123.jsonl.zst", ".hidden", "a..b"};
	fixture *f = *state;
	char longkey[1026];
	collect c = {0};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_false(kiln_store_key_valid(bad[i]));
		assert_int_equal(put_bytes(f, bad[i], "x", 1), KILN_EINVALID);
		assert_non_null(strstr(kiln_error_last(), "invalid key"));
		assert_int_equal(kiln_store_get(f->store, bad[i], collect_sink, &c), KILN_EINVALID);
		assert_int_equal(kiln_store_stat(f->store, bad[i], NULL), KILN_EINVALID);
		assert_int_equal(kiln_store_remove(f->store, bad[i]), KILN_EINVALID);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(kiln_store_key_valid(good[i]));
	assert_false(kiln_store_key_valid(NULL));
	memset(longkey, 'k', 1024);
	longkey[1024] = '\0';
	assert_true(kiln_store_key_valid(longkey));
	longkey[1024] = 'k';
	longkey[1025] = '\0';
	assert_false(kiln_store_key_valid(longkey));
	/* "../x" reached nothing outside the store */
	{
		char outside[PATH_MAX];

		snprintf(outside, sizeof(outside), "%s/x", f->dir);
		assert_int_equal(access(outside, F_OK), -1);
	}
	assert_no_temp(f);
	free(c.data);
}

static void test_relative_url(void **state)
{
	fixture *f = *state;
	char cwd[PATH_MAX], path[PATH_MAX], src[PATH_MAX];
	kiln_store *rel = NULL;
	struct stat st;

	write_source(f, "relsrc", "rel", 3, src, sizeof(src));
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(f->dir), 0);
	assert_int_equal(kiln_store_open(&rel, "file://rel/store/", NULL), 0);
	assert_int_equal(chdir(cwd), 0);
	/* the root was resolved at open: a later chdir does not move the store */
	assert_int_equal(kiln_store_put_file(rel, "k", src, 3), 0);
	snprintf(path, sizeof(path), "%s/rel/store/k", f->dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 3);
	kiln_store_close(rel);
}

static void test_open_errors(void **state)
{
	fixture *f = *state;
	kiln_store *s = (kiln_store *)f; /* any non-NULL: open must reset it */
	char path[PATH_MAX];

	assert_int_equal(kiln_store_open(&s, "ftp://example/x", NULL), KILN_EINVALID);
	assert_null(s);
	assert_non_null(strstr(kiln_error_last(), "ftp://example/x"));
	assert_non_null(strstr(kiln_error_last(), "unknown scheme"));
	assert_int_equal(kiln_store_open(&s, "/no/scheme", NULL), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "/no/scheme"));
	assert_int_equal(kiln_store_open(&s, "", NULL), KILN_EINVALID);
	assert_int_equal(kiln_store_open(&s, "file://", NULL), KILN_EINVALID);
	assert_int_equal(kiln_store_open(&s, "s3://user:secret@bucket/p", NULL), KILN_EINVALID);
	assert_null(strstr(kiln_error_last(), "secret"));
	/* a file where the directory should be */
	write_source(f, "plain", "x", 1, path, sizeof(path));
	{
		char url[PATH_MAX + 8];

		snprintf(url, sizeof(url), "file://%s", path);
		assert_int_equal(kiln_store_open(&s, url, NULL), KILN_EIO);
		assert_non_null(strstr(kiln_error_last(), path));
	}
	kiln_store_close(NULL);
}

static void test_source_errors(void **state)
{
	fixture *f = *state;
	char missing[PATH_MAX], path[PATH_MAX];

	snprintf(missing, sizeof(missing), "%s/does-not-exist", f->dir);
	assert_int_equal(kiln_store_put_file(f->store, "k", missing, 1), KILN_ENOTFOUND);
	assert_non_null(strstr(kiln_error_last(), missing));
	assert_non_null(strstr(kiln_error_last(), strerror(ENOENT)));
	assert_int_equal(kiln_store_stat(f->store, "k", NULL), 0);
	/* a size that does not match the file */
	write_source(f, "three", "abc", 3, path, sizeof(path));
	assert_int_equal(kiln_store_put_file(f->store, "k", path, 4), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), path));
	/* a directory is no source */
	assert_int_equal(kiln_store_put_file(f->store, "k", f->dir, 0), KILN_EINVALID);
	assert_int_equal(kiln_store_stat(f->store, "k", NULL), 0);
	/* a key whose parent is an object */
	assert_int_equal(put_bytes(f, "leaf", "x", 1), 0);
	assert_int_equal(put_bytes(f, "leaf/below", "x", 1), KILN_EIO);
	assert_non_null(strstr(kiln_error_last(), "leaf"));
	assert_no_temp(f);
}

static int stop_sink(void *ctx, const void *data, size_t len)
{
	(void)data;
	(void)len;
	++*(int *)ctx;
	return 7;
}

static mode_t mode_of(const fixture *f, const char *rel)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", f->root, rel);
	if (stat(path, &st) != 0)
		fail_msg("%s: %s", path, strerror(errno));
	return st.st_mode & 07777;
}

/* Under umask 022 (and 0), raw/ and quarantine/ objects are 0600 in 0700
 * directories; shards keep 0644 in 0755 directories. A zone directory an
 * older kiln left 0755 is tightened by the next put into it. */
static void test_restricted_zone_modes(void **state)
{
	fixture *f = *state;
	mode_t old = umask(022);
	char path[PATH_MAX];

	assert_int_equal(put_bytes(f, "raw/events/0/0-9.kraw.zst", "raw", 3), 0);
	assert_int_equal(put_bytes(f, "quarantine/events/0/0-9.jsonl.zst", "bad", 3), 0);
	assert_int_equal(put_bytes(f, "shards/ab/abcd.jsonl.zst", "ok", 2), 0);
	assert_int_equal(mode_of(f, "raw/events/0/0-9.kraw.zst"), 0600);
	assert_int_equal(mode_of(f, "raw/events/0"), 0700);
	assert_int_equal(mode_of(f, "raw/events"), 0700);
	assert_int_equal(mode_of(f, "raw"), 0700);
	assert_int_equal(mode_of(f, "quarantine/events/0/0-9.jsonl.zst"), 0600);
	assert_int_equal(mode_of(f, "quarantine/events/0"), 0700);
	assert_int_equal(mode_of(f, "quarantine/events"), 0700);
	assert_int_equal(mode_of(f, "quarantine"), 0700);
	assert_int_equal(mode_of(f, "shards/ab/abcd.jsonl.zst"), 0644);
	assert_int_equal(mode_of(f, "shards/ab"), 0755);
	assert_int_equal(mode_of(f, "shards"), 0755);

	/* an overwrite stays 0600; a permissive umask changes nothing */
	umask(0);
	assert_int_equal(put_bytes(f, "raw/events/0/0-9.kraw.zst", "raw2", 4), 0);
	assert_int_equal(put_bytes(f, "raw/events/1/0-9.kraw.zst", "raw", 3), 0);
	assert_int_equal(mode_of(f, "raw/events/0/0-9.kraw.zst"), 0600);
	assert_int_equal(mode_of(f, "raw/events/1/0-9.kraw.zst"), 0600);
	assert_int_equal(mode_of(f, "raw/events/1"), 0700);

	/* a key merely starting with the zone's letters is not in it */
	umask(022);
	assert_int_equal(put_bytes(f, "rawish/x", "x", 1), 0);
	assert_int_equal(mode_of(f, "rawish/x"), 0644);

	/* an old, open zone directory is closed by the next put */
	snprintf(path, sizeof(path), "%s/quarantine", f->root);
	assert_int_equal(chmod(path, 0755), 0);
	assert_int_equal(put_bytes(f, "quarantine/events/0/10-19.jsonl.zst", "bad", 3), 0);
	assert_int_equal(mode_of(f, "quarantine"), 0700);
	umask(old);
}

static void test_sink_stops_get(void **state)
{
	fixture *f = *state;
	size_t len = 3u << 20;
	unsigned char *data = random_bytes(len, 9);
	int calls = 0;

	assert_int_equal(put_bytes(f, "big", data, len), 0);
	assert_int_equal(kiln_store_get(f->store, "big", stop_sink, &calls), 7);
	assert_int_equal(calls, 1);
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_roundtrip_binary, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_roundtrip_empty, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_roundtrip_5mib, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_source_untouched, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_overwrite_atomic, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nested_keys, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stat, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_remove, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list_skips_scratch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_key_rules, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_relative_url, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_source_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sink_stops_get, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_restricted_zone_modes, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
