/* Unit tests for the reader API (src/reader/reader.c): a manifest made with
 * kiln_manifest_commit over real zstd shards in a file:// store (written
 * with the spool, so their names are their BLAKE2b-256); opening (and what
 * fails to open), the shard lists with keys and URLs, the rank assignment
 * (every shard exactly once, deterministic, the documented shuffle key,
 * another seed another order), streaming (bytes equal the records written,
 * a shard larger than the chunk size) and corrupt, truncated, grown and
 * missing shard files caught before anything reaches the sink. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <git2.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "fixture.h"
#include "core/buf.h"
#include "core/error.h"
#include "kiln/reader.h"
#include "manifest/manifest.h"
#include "reader/internal.h"
#include "shard/spool.h"

#define NTRAIN 6

static char tmpdir[64];
static char manifest_path[128], store_dir[128], store_url[160];

/* What each shard holds, by hash, to compare streams against. */
typedef struct fixture_shard {
	kiln_shard_entry entry;
	kiln_buf text;
} fixture_shard;

static fixture_shard train[NTRAIN], dev[1];

static void make_shard(kiln_spool *spool, kiln_store *store, ZSTD_CCtx *cctx, fixture_shard *out, int which,
                       size_t lines)
{
	char line[160];

	memset(&out->entry, 0, sizeof(out->entry));
	for (size_t j = 0; j < lines; j++) {
		int n = snprintf(line, sizeof(line), "{\"shard\":%d,\"n\":%zu,\"pad\":\"%08zx-%08zx\"}\n",
		                 which, j, j * 2654435761u, j ^ 0x5bd1e995u);

		assert_int_equal(kiln_spool_write(spool, line, (size_t)n), 0);
		assert_int_equal(kiln_buf_put(&out->text, line, (size_t)n), 0);
	}
	out->entry.records = lines;
	out->entry.raw_bytes = out->text.len;
	assert_int_equal(kiln_spool_store(spool, store, cctx, 3, NULL, out->entry.hash, &out->entry.bytes),
	                 0);
}

static int setup(void **state)
{
	kiln_store *store;
	kiln_spool spool;
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	kiln_manifest *m;
	kiln_shard_entry te[NTRAIN], de[1];
	kiln_snapshot snap = {0};
	char commit[41];

	(void)state;
	snprintf(manifest_path, sizeof(manifest_path), "%s/manifest.git", tmpdir);
	snprintf(store_dir, sizeof(store_dir), "%s/store", tmpdir);
	snprintf(store_url, sizeof(store_url), "file://%s/", store_dir); /* trailing '/' on purpose */
	assert_non_null(cctx);
	assert_int_equal(kiln_store_open(&store, store_url, NULL), 0);
	assert_int_equal(kiln_spool_open(&spool, NULL), 0);
	for (int i = 0; i < NTRAIN; i++) {
		/* shard 5 is about 3 MiB of text: several chunks each way */
		make_shard(&spool, store, cctx, &train[i], i, i == 5 ? 60000 : (size_t)(3 + i));
		te[i] = train[i].entry;
	}
	make_shard(&spool, store, cctx, &dev[0], 100, 2);
	de[0] = dev[0].entry;
	kiln_spool_close(&spool);
	kiln_store_close(store);
	ZSTD_freeCCtx(cctx);

	assert_int_equal(kiln_manifest_open(&m, manifest_path), 0);
	snap.dataset = "ds";
	snap.branch = "main";
	snap.dataset_json = "{\"name\":\"ds\"}";
	snap.shards[KILN_SPLIT_TRAIN] = te;
	snap.shard_count[KILN_SPLIT_TRAIN] = NTRAIN;
	snap.shards[KILN_SPLIT_DEV] = de;
	snap.shard_count[KILN_SPLIT_DEV] = 1;
	assert_int_equal(kiln_manifest_commit(m, &snap, commit), 0);
	kiln_manifest_close(m);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < NTRAIN; i++)
		kiln_buf_free(&train[i].text);
	kiln_buf_free(&dev[0].text);
	return 0;
}

static const fixture_shard *by_hash(const char *hash)
{
	for (int i = 0; i < NTRAIN; i++)
		if (strcmp(train[i].entry.hash, hash) == 0)
			return &train[i];
	return strcmp(dev[0].entry.hash, hash) == 0 ? &dev[0] : NULL;
}

static void shard_file(char out[512], const char *hash)
{
	snprintf(out, 512, "%s/shards/%.2s/%s.jsonl.zst", store_dir, hash, hash);
}

/* ---- open and list -------------------------------------------------------- */

static void test_open_and_list(void **state)
{
	kiln_reader *r;
	kiln_reader_shard *list, *again;
	size_t n, n2;
	char url[512];

	(void)state;
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds@main", store_url, NULL), 0);
	assert_string_equal(kiln_reader_dataset(r), "ds");
	assert_string_equal(kiln_reader_ref(r), "refs/heads/ds/main");
	assert_int_equal(strlen(kiln_reader_commit(r)), 40);

	assert_int_equal(kiln_reader_shards(r, KILN_SPLIT_TRAIN, &list, &n), 0);
	assert_int_equal(n, NTRAIN);
	for (size_t i = 0; i < n; i++) {
		const fixture_shard *f = by_hash(list[i].hash);

		assert_non_null(f);
		if (i > 0)
			assert_true(strcmp(list[i - 1].hash, list[i].hash) < 0);
		assert_int_equal(list[i].bytes, f->entry.bytes);
		assert_int_equal(list[i].raw_bytes, f->entry.raw_bytes);
		assert_int_equal(list[i].records, f->entry.records);
		snprintf(url, sizeof(url), "shards/%.2s/%s.jsonl.zst", list[i].hash, list[i].hash);
		assert_string_equal(list[i].key, url);
		snprintf(url, sizeof(url), "file://%s/shards/%.2s/%s.jsonl.zst", store_dir, list[i].hash,
		         list[i].hash);
		assert_string_equal(list[i].url, url);
	}
	/* cached: the same list again */
	assert_int_equal(kiln_reader_shards(r, KILN_SPLIT_TRAIN, &again, &n2), 0);
	assert_ptr_equal(again, list);
	assert_int_equal(n2, n);
	assert_int_equal(kiln_reader_shards(r, KILN_SPLIT_DEV, &list, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(list[0].hash, dev[0].entry.hash);
	assert_int_equal(kiln_reader_shards(r, KILN_SPLIT_TEST, &list, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(kiln_reader_shards(r, (kiln_split)7, &list, &n), KILN_EINVALID);
	kiln_reader_close(r);
	kiln_reader_close(NULL);
}

static void test_open_errors(void **state)
{
	kiln_reader *r = (kiln_reader *)1;
	kiln_reader_shard *list;
	size_t n;
	char missing[160];

	(void)state;
	snprintf(missing, sizeof(missing), "%s/nothing.git", tmpdir);
	assert_int_equal(kiln_reader_open(&r, missing, "ds", store_url, NULL), KILN_ENOTFOUND);
	assert_null(r);
	assert_non_null(strstr(kiln_error_last(), "no such repository"));
	assert_int_equal(access(missing, F_OK), -1); /* not created */

	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds@nope", store_url, NULL), KILN_ENOTFOUND);
	assert_non_null(strstr(kiln_error_last(), "no branch, tag or commit"));
	assert_int_equal(kiln_reader_open(&r, manifest_path, "other", store_url, NULL), KILN_ENOTFOUND);
	assert_int_equal(kiln_reader_open(&r, manifest_path, "Bad@@", store_url, NULL), KILN_EINVALID);
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", "ftp://example.com/x", NULL),
	                 KILN_EINVALID);
	assert_null(r);

	/* options of another layout are refused; KILN_STORE_OPTIONS_INIT's are taken */
	{
		kiln_store_options zero = {0}, next = {.version = KILN_STORE_OPTIONS_VERSION + 1};
		kiln_store_options init = KILN_STORE_OPTIONS_INIT;

		assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, &zero), KILN_EINVALID);
		assert_null(r);
		assert_non_null(strstr(kiln_error_last(), "kiln_store_options version 0"));
		assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, &next), KILN_EINVALID);
		assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, &init), 0);
		kiln_reader_close(r);
	}

	/* no store: listing works, streaming does not */
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", NULL, NULL), 0);
	assert_int_equal(kiln_reader_shards(r, KILN_SPLIT_TRAIN, &list, &n), 0);
	assert_int_equal(n, NTRAIN);
	assert_null(list[0].url);
	assert_int_equal(kiln_reader_stream(r, &list[0], NULL, NULL), KILN_EINVALID);
	kiln_reader_close(r);
}

/* An annotated tag on the fixture's commit under `name` (made with libgit2). */
static void tag_head(git_repository *repo, const char *name, git_oid *out)
{
	git_object *head;
	git_signature *sig;

	assert_int_equal(git_revparse_single(&head, repo, "refs/heads/ds/main"), 0);
	assert_int_equal(git_signature_now(&sig, "kiln test", "test@localhost"), 0);
	assert_int_equal(git_tag_create(out, repo, name, head, sig, "promoted\n", 0), 0);
	git_signature_free(sig);
	git_object_free(head);
}

/* A version asked for by its tag must be the tag object of that name: v1's
 * tag object put under v2's name (git update-ref) is refused, unsigned as
 * it is. */
static void test_open_refuses_renamed_tag(void **state)
{
	kiln_reader *r = (kiln_reader *)1;
	git_repository *repo;
	git_reference *ref;
	git_oid v1, v2;

	(void)state;
	git_libgit2_init();
	assert_int_equal(git_repository_open(&repo, manifest_path), 0);
	tag_head(repo, "ds/v1", &v1);
	tag_head(repo, "ds/v2", &v2);
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds@v2", NULL, NULL), 0);
	assert_string_equal(kiln_reader_ref(r), "refs/tags/ds/v2");
	kiln_reader_close(r);

	assert_int_equal(git_reference_create(&ref, repo, "refs/tags/ds/v2", &v1, 1, NULL), 0);
	git_reference_free(ref);
	r = (kiln_reader *)1;
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds@v2", store_url, NULL), KILN_EINVALID);
	assert_null(r);
	assert_non_null(strstr(kiln_error_last(), "is named ds/v1, not ds/v2"));
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds@v1", store_url, NULL), 0);
	kiln_reader_close(r);
	assert_int_equal(git_reference_remove(repo, "refs/tags/ds/v1"), 0);
	assert_int_equal(git_reference_remove(repo, "refs/tags/ds/v2"), 0);
	git_repository_free(repo);
	git_libgit2_shutdown();
}

/* ---- assignment ----------------------------------------------------------- */

static void synthetic(kiln_reader_shard *v, size_t n)
{
	memset(v, 0, n * sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		unsigned char d[32];
		char in[32];

		snprintf(in, sizeof(in), "shard %zu", i);
		crypto_generichash(d, sizeof(d), (const unsigned char *)in, strlen(in), NULL, 0);
		sodium_bin2hex(v[i].hash, sizeof(v[i].hash), d, sizeof(d));
	}
}

/* The documented key: uint64_le(BLAKE2b-256(seed_le64 || 0x1F || hash)[0:8]). */
static uint64_t documented_key(uint64_t seed, const char *hash)
{
	unsigned char msg[73], d[32];
	uint64_t k = 0;

	for (int i = 0; i < 8; i++)
		msg[i] = (unsigned char)(seed >> (8 * i));
	msg[8] = 0x1F;
	memcpy(msg + 9, hash, 64);
	crypto_generichash(d, sizeof(d), msg, sizeof(msg), NULL, 0);
	for (int i = 0; i < 8; i++)
		k |= (uint64_t)d[i] << (8 * i);
	return k;
}

static void test_assign_covers_every_shard_once(void **state)
{
	static const size_t sizes[] = {0, 1, 5, 100, 257};
	static const unsigned worlds[] = {1, 2, 3, 7, 16, 300};
	kiln_reader_shard v[257];
	size_t idx[258], n_out, hits[257];

	(void)state;
	synthetic(v, 257);
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
		for (size_t wi = 0; wi < sizeof(worlds) / sizeof(worlds[0]); wi++)
			for (int shuffle = 0; shuffle < 2; shuffle++) {
				size_t n = sizes[si];
				unsigned world = worlds[wi];

				memset(hits, 0, sizeof(hits));
				for (unsigned rank = 0; rank < world; rank++) {
					assert_int_equal(
					    kiln_reader_assign(v, n, rank, world, 1234, shuffle, idx, &n_out),
					    0);
					/* an even share: n / world, one more for the first n % world */
					assert_int_equal(n_out, n / world + (rank < n % world));
					for (size_t i = 0; i < n_out; i++) {
						assert_true(idx[i] < n);
						hits[idx[i]]++;
						if (!shuffle)
							assert_int_equal(idx[i], rank + i * world);
					}
				}
				for (size_t i = 0; i < n; i++)
					assert_int_equal(hits[i], 1);
			}
	/* bad arguments */
	assert_int_equal(kiln_reader_assign(v, 5, 0, 0, 0, false, idx, &n_out), KILN_EINVALID);
	assert_int_equal(kiln_reader_assign(v, 5, 3, 3, 0, true, idx, &n_out), KILN_EINVALID);
}

static void test_assign_shuffle(void **state)
{
	enum { N = 100 };
	kiln_reader_shard v[N], reversed[N];
	size_t a[N], b[N], c[N], n_a, n_b, n_c;

	(void)state;
	synthetic(v, N);
	/* deterministic */
	assert_int_equal(kiln_reader_assign(v, N, 0, 1, 42, true, a, &n_a), 0);
	assert_int_equal(kiln_reader_assign(v, N, 0, 1, 42, true, b, &n_b), 0);
	assert_int_equal(n_a, N);
	assert_memory_equal(a, b, sizeof(a));
	/* the documented key, ascending */
	for (size_t i = 1; i < N; i++)
		assert_true(documented_key(42, v[a[i - 1]].hash) < documented_key(42, v[a[i]].hash));
	/* not the input order */
	{
		size_t same = 0;

		for (size_t i = 0; i < N; i++)
			same += a[i] == i;
		assert_true(same < N / 2);
	}
	/* another seed, another order */
	assert_int_equal(kiln_reader_assign(v, N, 0, 1, 43, true, c, &n_c), 0);
	assert_int_equal(n_c, N);
	assert_memory_not_equal(a, c, sizeof(a));
	/* the order depends on the hashes, not on their order in the input */
	for (size_t i = 0; i < N; i++)
		reversed[i] = v[N - 1 - i];
	assert_int_equal(kiln_reader_assign(reversed, N, 0, 1, 42, true, c, &n_c), 0);
	for (size_t i = 0; i < N; i++)
		assert_string_equal(reversed[c[i]].hash, v[a[i]].hash);
	/* ranks take turns along that order */
	assert_int_equal(kiln_reader_assign(v, N, 2, 3, 42, true, c, &n_c), 0);
	assert_int_equal(n_c, 33);
	for (size_t i = 0; i < n_c; i++)
		assert_int_equal(c[i], a[2 + 3 * i]);
}

/* ---- streaming ------------------------------------------------------------ */

typedef struct sink_state {
	kiln_buf got;
	size_t calls;
	int stop_after; /* return 5 at this call; 0 never */
} sink_state;

static int collect(void *ctx, const void *data, size_t len)
{
	sink_state *s = ctx;

	s->calls++;
	assert_int_equal(kiln_buf_put(&s->got, data, len), 0);
	return s->stop_after && (int)s->calls == s->stop_after ? 5 : 0;
}

static void test_stream(void **state)
{
	kiln_reader *r;
	kiln_reader_shard *list;
	size_t n;

	(void)state;
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
	assert_int_equal(kiln_reader_shards(r, KILN_SPLIT_TRAIN, &list, &n), 0);
	for (size_t i = 0; i < n; i++) {
		const fixture_shard *f = by_hash(list[i].hash);
		sink_state s = {KILN_BUF_INIT(0), 0, 0};

		assert_int_equal(kiln_reader_stream(r, &list[i], collect, &s), 0);
		assert_int_equal(s.got.len, f->text.len);
		assert_memory_equal(s.got.ptr, f->text.ptr, f->text.len);
		if (f->text.len > (1u << 20))
			assert_true(s.calls > 1);
		kiln_buf_free(&s.got);
	}
	/* a sink's non-zero return stops the stream */
	for (size_t i = 0; i < n; i++) {
		sink_state s = {KILN_BUF_INIT(0), 0, 1};

		if (list[i].raw_bytes < (2u << 20))
			continue;
		assert_int_equal(kiln_reader_stream(r, &list[i], collect, &s), 5);
		assert_int_equal(s.calls, 1);
		kiln_buf_free(&s.got);
	}
	kiln_reader_close(r);
}

static void rewrite(const char *path, const char *data, size_t len)
{
	FILE *f;

	chmod(path, 0644);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *p;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	p = malloc((size_t)n + 16);
	assert_non_null(p);
	assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return p;
}

static void test_tampered_shards(void **state)
{
	kiln_reader *r;
	kiln_reader_shard *list;
	size_t n, len;
	char path[512], want[160];
	char *orig, *bad;

	(void)state;
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
	assert_int_equal(kiln_reader_shards(r, KILN_SPLIT_DEV, &list, &n), 0);
	assert_int_equal(n, 1);
	shard_file(path, list[0].hash);
	orig = slurp(path, &len);
	bad = malloc(len + 16);
	assert_non_null(bad);
	snprintf(want, sizeof(want), "shard %s: content hash mismatch (corrupt or tampered)", list[0].hash);

	/* one byte changed (in the middle: a valid frame header stays) */
	{
		sink_state s = {KILN_BUF_INIT(0), 0, 0};

		memcpy(bad, orig, len);
		bad[len / 2] ^= 0x01;
		rewrite(path, bad, len);
		assert_int_equal(kiln_reader_stream(r, &list[0], collect, &s), KILN_EINVALID);
		assert_string_equal(kiln_error_last(), want);
		assert_int_equal(s.calls, 0);
	}
	/* truncated */
	{
		sink_state s = {KILN_BUF_INIT(0), 0, 0};

		rewrite(path, orig, len - 3);
		assert_int_equal(kiln_reader_stream(r, &list[0], collect, &s), KILN_EINVALID);
		assert_string_equal(kiln_error_last(), want);
		assert_int_equal(s.calls, 0);
	}
	/* grown: a second, valid-looking frame appended */
	{
		sink_state s = {KILN_BUF_INIT(0), 0, 0};

		memcpy(bad, orig, len);
		memcpy(bad + len, orig, 16);
		rewrite(path, bad, len + 16);
		assert_int_equal(kiln_reader_stream(r, &list[0], collect, &s), KILN_EINVALID);
		assert_string_equal(kiln_error_last(), want);
		assert_int_equal(s.calls, 0);
	}
	/* missing */
	{
		sink_state s = {KILN_BUF_INIT(0), 0, 0};

		assert_int_equal(unlink(path), 0);
		assert_int_equal(kiln_reader_stream(r, &list[0], collect, &s), KILN_ENOTFOUND);
		assert_int_equal(s.calls, 0);
	}
	/* restored: reads again */
	{
		sink_state s = {KILN_BUF_INIT(0), 0, 0};

		rewrite(path, orig, len);
		assert_int_equal(kiln_reader_stream(r, &list[0], collect, &s), 0);
		assert_int_equal(s.got.len, dev[0].text.len);
		assert_memory_equal(s.got.ptr, dev[0].text.ptr, dev[0].text.len);
		kiln_buf_free(&s.got);
	}
	/* a hash that is not one */
	{
		kiln_reader_shard fake = list[0];

		fake.hash[3] = 'X';
		assert_int_equal(kiln_reader_stream(r, &fake, collect, NULL), KILN_EINVALID);
	}
	free(orig);
	free(bad);
	kiln_reader_close(r);
}

/* ---- the cursor ------------------------------------------------------------ */

/* Every record a cursor yields, one per line, into out; 0 or the error. */
static int drain(kiln_cursor *c, kiln_buf *out, size_t max)
{
	const char *rec;
	size_t len;
	int rc;

	for (size_t i = 0; i < max && (rc = kiln_cursor_next(c, &rec, &len)) == 1; i++) {
		assert_int_equal(kiln_buf_put(out, rec, len), 0);
		assert_int_equal(kiln_buf_putc(out, '\n'), 0);
	}
	return rc < 0 ? rc : 0;
}

static void epoch_of(kiln_reader *r, unsigned world, uint64_t epoch, size_t buffer, kiln_buf *all)
{
	for (unsigned rank = 0; rank < world; rank++) {
		kiln_cursor_options o = {.version = KILN_CURSOR_OPTIONS_VERSION,
		                         .split = KILN_SPLIT_TRAIN,
		                         .rank = rank,
		                         .world = world,
		                         .seed = 42,
		                         .shuffle = true,
		                         .epoch = epoch,
		                         .shuffle_buffer = buffer};
		kiln_cursor *c;

		assert_int_equal(kiln_cursor_open(&c, r, &o), 0);
		assert_int_equal(drain(c, all, SIZE_MAX), 0);
		kiln_cursor_close(c);
	}
}

static int cmp_lines(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lines of text, sorted, joined again (text is changed). */
static char *sorted(kiln_buf *text)
{
	size_t n = 0, cap = 0;
	char **v = NULL, *save = NULL, *out;
	kiln_buf joined = KILN_BUF_INIT(0);

	assert_int_equal(kiln_buf_putc(text, '\0'), 0);
	for (char *l = strtok_r(text->ptr, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (n == cap)
			assert_non_null(v = realloc(v, (cap = cap ? cap * 2 : 1024) * sizeof(*v)));
		v[n++] = l;
	}
	qsort(v, n, sizeof(*v), cmp_lines);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(kiln_buf_puts(&joined, v[i]), 0);
		assert_int_equal(kiln_buf_putc(&joined, '\n'), 0);
	}
	assert_int_equal(kiln_buf_putc(&joined, '\0'), 0);
	free(v);
	out = strdup(joined.ptr);
	kiln_buf_free(&joined);
	return out;
}

static void test_cursor_epochs(void **state)
{
	kiln_buf want = KILN_BUF_INIT(0), e0 = KILN_BUF_INIT(0), e1 = KILN_BUF_INIT(0),
	         again = KILN_BUF_INIT(0), buffered = KILN_BUF_INIT(0);
	kiln_reader *r;
	char *s_want, *s0, *s1, *sb;

	(void)state;
	for (int i = 0; i < NTRAIN; i++)
		assert_int_equal(kiln_buf_put(&want, train[i].text.ptr, train[i].text.len), 0);
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
	epoch_of(r, 3, 0, 0, &e0);
	epoch_of(r, 3, 1, 0, &e1);
	epoch_of(r, 3, 1, 0, &again);
	epoch_of(r, 3, 1, 100, &buffered);
	/* the same seed and epoch: the same order; another epoch or a buffer: another */
	assert_int_equal(again.len, e1.len);
	assert_memory_equal(again.ptr, e1.ptr, e1.len);
	assert_true(e0.len == e1.len && memcmp(e0.ptr, e1.ptr, e0.len) != 0);
	assert_true(buffered.len == e1.len && memcmp(buffered.ptr, e1.ptr, e1.len) != 0);
	/* and every record exactly once per epoch, over the ranks */
	s_want = sorted(&want);
	s0 = sorted(&e0);
	s1 = sorted(&e1);
	sb = sorted(&buffered);
	assert_string_equal(s0, s_want);
	assert_string_equal(s1, s_want);
	assert_string_equal(sb, s_want);
	free(s_want), free(s0), free(s1), free(sb);
	kiln_buf_free(&want), kiln_buf_free(&e0), kiln_buf_free(&e1), kiln_buf_free(&again),
	    kiln_buf_free(&buffered);
	kiln_reader_close(r);
}

/* Epoch 0 reads the shards in kiln_reader_assign's order for the seed itself. */
static void test_cursor_epoch0_is_the_seed_order(void **state)
{
	kiln_reader *r;
	kiln_reader_shard *list;
	size_t n, idx[NTRAIN], nidx;
	kiln_buf want = KILN_BUF_INIT(0), got = KILN_BUF_INIT(0);
	kiln_cursor_options o = {.version = KILN_CURSOR_OPTIONS_VERSION,
	                         .split = KILN_SPLIT_TRAIN,
	                         .rank = 1,
	                         .world = 2,
	                         .seed = 7,
	                         .shuffle = true};
	kiln_cursor *c;

	(void)state;
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
	assert_int_equal(kiln_reader_shards(r, KILN_SPLIT_TRAIN, &list, &n), 0);
	assert_int_equal(kiln_reader_assign(list, n, 1, 2, 7, true, idx, &nidx), 0);
	for (size_t i = 0; i < nidx; i++) {
		const fixture_shard *f = by_hash(list[idx[i]].hash);

		assert_int_equal(kiln_buf_put(&want, f->text.ptr, f->text.len), 0);
	}
	o.version = 0; /* a program built against another layout */
	assert_int_equal(kiln_cursor_open(&c, r, &o), KILN_EINVALID);
	assert_null(c);
	assert_non_null(strstr(kiln_error_last(), "kiln_cursor_options version 0"));
	o.version = KILN_CURSOR_OPTIONS_VERSION;
	assert_int_equal(kiln_cursor_open(&c, r, &o), 0);
	assert_int_equal(drain(c, &got, SIZE_MAX), 0);
	assert_int_equal(got.len, want.len);
	assert_memory_equal(got.ptr, want.ptr, want.len);
	kiln_cursor_close(c);
	kiln_buf_free(&want), kiln_buf_free(&got);
	kiln_reader_close(r);
}

static void test_cursor_resume(void **state)
{
	static const size_t buffers[] = {0, 7};
	static const size_t stops[] = {0, 1, 3, 12, 25, 26, 30000, 60024, 60025};
	kiln_reader *r;

	(void)state;
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
	for (size_t b = 0; b < 2; b++) {
		kiln_cursor_options o = {.version = KILN_CURSOR_OPTIONS_VERSION,
		                         .split = KILN_SPLIT_TRAIN,
		                         .world = 1,
		                         .seed = 9,
		                         .shuffle = true,
		                         .epoch = 3,
		                         .shuffle_buffer = buffers[b]};
		kiln_buf full = KILN_BUF_INIT(0);
		kiln_cursor *c;

		assert_int_equal(kiln_cursor_open(&c, r, &o), 0);
		assert_int_equal(drain(c, &full, SIZE_MAX), 0);
		kiln_cursor_close(c);
		for (size_t s = 0; s < sizeof(stops) / sizeof(stops[0]); s++) {
			kiln_buf head = KILN_BUF_INIT(0), tail = KILN_BUF_INIT(0);
			char st[256];
			kiln_cursor *d;

			assert_int_equal(kiln_cursor_open(&c, r, &o), 0);
			assert_int_equal(drain(c, &head, stops[s]), 0);
			assert_int_equal(kiln_cursor_state(c, st, sizeof(st)), 0);
			kiln_cursor_close(c);
			assert_int_equal(kiln_cursor_open(&d, r, &o), 0);
			if (kiln_cursor_restore(d, st) != 0)
				fail_msg("restore %s: %s", st, kiln_error_last());
			assert_int_equal(drain(d, &tail, SIZE_MAX), 0);
			kiln_cursor_close(d);
			/* what was read before the stop, then what the restored cursor reads: the whole epoch
			 */
			assert_int_equal(head.len + tail.len, full.len);
			if (head.len)
				assert_memory_equal(head.ptr, full.ptr, head.len);
			if (tail.len)
				assert_memory_equal(tail.ptr, full.ptr + head.len, tail.len);
			kiln_buf_free(&head), kiln_buf_free(&tail);
		}
		/* a cursor that reached the end says so, and a restored one yields nothing */
		{
			char st[256];
			const char *rec;
			size_t len;
			kiln_cursor *d;
			kiln_buf rest = KILN_BUF_INIT(0);

			assert_int_equal(kiln_cursor_open(&c, r, &o), 0);
			assert_int_equal(drain(c, &rest, SIZE_MAX), 0);
			assert_int_equal(kiln_cursor_next(c, &rec, &len), 0);
			assert_int_equal(kiln_cursor_state(c, st, sizeof(st)), 0);
			kiln_cursor_close(c);
			kiln_buf_reset(&rest);
			assert_int_equal(kiln_cursor_open(&d, r, &o), 0);
			if (kiln_cursor_restore(d, st) != 0)
				fail_msg("restore %s: %s", st, kiln_error_last());
			assert_int_equal(drain(d, &rest, SIZE_MAX), 0);
			assert_int_equal(rest.len, 0);
			kiln_cursor_close(d);
			kiln_buf_free(&rest);
		}
		kiln_buf_free(&full);
	}
	kiln_reader_close(r);
}

/* Batches hold the records kiln_cursor_next yields, in order, and the state
 * after the k-th record of a batch (kiln_cursor_state_at) is the state a
 * cursor reading one record at a time has after it: from any of them a
 * restored cursor goes on with the record that follows. */
static void test_cursor_batches(void **state)
{
	static const size_t buffers[] = {0, 7};
	kiln_reader *r;

	(void)state;
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
	for (size_t b = 0; b < 2; b++) {
		kiln_cursor_options o = {.version = KILN_CURSOR_OPTIONS_VERSION,
		                         .split = KILN_SPLIT_TRAIN,
		                         .rank = 1,
		                         .world = 2,
		                         .seed = 5,
		                         .shuffle = true,
		                         .epoch = 2,
		                         .shuffle_buffer = buffers[b]};
		kiln_buf one = KILN_BUF_INIT(0), batched = KILN_BUF_INIT(0);
		kiln_cursor *c, *d;
		const char *data, *rec;
		size_t len, count, n;
		uint64_t k = 0, lines = 0;
		char st[256], want[256];
		int rc;

		assert_int_equal(kiln_cursor_open(&c, r, &o), 0);
		assert_int_equal(drain(c, &one, SIZE_MAX), 0);
		for (size_t i = 0; i < one.len; i++)
			lines += one.ptr[i] == '\n';
		assert_int_equal(kiln_cursor_records(c), lines);
		assert_int_equal(kiln_cursor_state_at(c, lines + 1, st, sizeof(st)), KILN_EINVALID);
		kiln_cursor_close(c);
		assert_int_equal(kiln_cursor_open(&c, r, &o), 0);
		assert_int_equal(kiln_cursor_open(&d, r, &o), 0);
		while ((rc = kiln_cursor_next_batch(c, 1000, 64 << 10, &data, &len, &count)) == 1) {
			assert_true(count >= 1 && count <= 1000 && len > 0 && data[len - 1] == '\n');
			assert_int_equal(kiln_buf_put(&batched, data, len), 0);
			/* the state after the batch's first record, against a cursor read one by one */
			assert_int_equal(kiln_cursor_next(d, &rec, &n), 1);
			assert_int_equal(kiln_cursor_state(d, want, sizeof(want)), 0);
			assert_int_equal(kiln_cursor_state_at(c, k + 1, st, sizeof(st)), 0);
			assert_string_equal(st, want);
			for (size_t i = 1; i < count; i++)
				assert_int_equal(kiln_cursor_next(d, &rec, &n), 1);
			k += count;
			assert_int_equal(kiln_cursor_state(d, want, sizeof(want)), 0);
			assert_int_equal(kiln_cursor_state(c, st, sizeof(st)), 0);
			assert_string_equal(st, want);
		}
		assert_int_equal(rc, 0);
		assert_int_equal(k, lines);
		assert_int_equal(batched.len, one.len);
		assert_memory_equal(batched.ptr, one.ptr, one.len);
		/* a state whose shard and line are not where its yielded count leads */
		assert_int_equal(kiln_cursor_state_at(c, 12, st, sizeof(st)), 0);
		*strstr(st, "\"yielded\":12") = '\0';
		strcat(st, "\"yielded\":13,\"shard\":0,\"line\":12}");
		kiln_cursor_close(c);
		assert_int_equal(kiln_cursor_open(&c, r, &o), 0);
		assert_int_equal(kiln_cursor_restore(c, st), KILN_EINVALID);
		assert_non_null(strstr(kiln_error_last(), "is not where 13 records lead"));
		kiln_cursor_close(c);
		kiln_cursor_close(d);
		kiln_buf_free(&one), kiln_buf_free(&batched);
	}
	kiln_reader_close(r);
}

static void test_cursor_restore_refuses_another_reading(void **state)
{
	kiln_reader *r;
	kiln_cursor_options o = {.version = KILN_CURSOR_OPTIONS_VERSION,
	                         .split = KILN_SPLIT_TRAIN,
	                         .world = 2,
	                         .seed = 1,
	                         .shuffle = true,
	                         .epoch = 1};
	kiln_cursor *c, *d;
	char st[256];
	const char *rec;
	size_t len;

	(void)state;
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
	assert_int_equal(kiln_cursor_open(&c, r, &o), 0);
	assert_int_equal(kiln_cursor_next(c, &rec, &len), 1);
	assert_int_equal(kiln_cursor_state(c, st, sizeof(st)), 0);
	assert_int_equal(kiln_cursor_state(c, st, 20), KILN_ELIMIT);
	assert_int_equal(kiln_cursor_state(c, st, sizeof(st)), 0);
	o.epoch = 2;
	assert_int_equal(kiln_cursor_open(&d, r, &o), 0);
	assert_int_equal(kiln_cursor_restore(d, st), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "cursor state: epoch is 1, this reader's is 2");
	kiln_cursor_close(d);
	o.epoch = 1;
	o.world = 4;
	assert_int_equal(kiln_cursor_open(&d, r, &o), 0);
	assert_int_equal(kiln_cursor_restore(d, st), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "cursor state: world is 2, this reader's is 4");
	assert_int_equal(kiln_cursor_restore(d, "{\"x\":1}"), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "not a kiln cursor state");
	kiln_cursor_close(d);
	kiln_cursor_close(c);
	kiln_reader_close(r);
}

/* Closing the reader while its cursors are open, their read-ahead threads
 * busy with the next shards (issue 25): the cursors hold the reader, refuse
 * to read once it is closed (naming it), and close cleanly after it, in
 * either order; the ASan build sees no use after free. */
static void test_cursor_outlives_reader(void **state)
{
	kiln_cursor_options o = {.version = KILN_CURSOR_OPTIONS_VERSION,
	                         .split = KILN_SPLIT_TRAIN,
	                         .world = 1,
	                         .seed = 4,
	                         .shuffle = true};

	(void)state;
	for (int round = 0; round < 3; round++) {
		const char *rec, *data;
		size_t len, count;
		char st[KILN_CURSOR_STATE_SIZE];
		kiln_reader *r;
		kiln_cursor *c, *d;

		assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
		assert_int_equal(kiln_cursor_open(&c, r, &o), 0);
		assert_int_equal(kiln_cursor_open(&d, r, &o), 0);
		assert_int_equal(kiln_cursor_next(c, &rec, &len),
		                 1); /* the next shards are being read ahead */
		assert_int_equal(kiln_cursor_next_batch(d, 2, 1 << 20, &data, &len, &count), 1);
		assert_int_equal(kiln_cursor_state(c, st, sizeof(st)), 0);
		if (round == 2) { /* a cursor closed before the reader is no hold any more */
			kiln_cursor_close(d);
			d = NULL;
		}
		kiln_reader_close(r);
		assert_int_equal(kiln_cursor_next(c, &rec, &len), KILN_EINVALID);
		assert_non_null(strstr(kiln_error_last(), "cursor: its reader (ds@"));
		assert_non_null(strstr(kiln_error_last(), ") is closed"));
		assert_int_equal(kiln_cursor_next_batch(c, 10, 1 << 20, &data, &len, &count), KILN_EINVALID);
		assert_int_equal(count, 0);
		assert_int_equal(kiln_cursor_restore(c, st), KILN_EINVALID);
		if (d)
			assert_int_equal(kiln_cursor_next(d, &rec, &len), KILN_EINVALID);
		if (round == 1) {
			kiln_cursor_close(d); /* the last hold: the reader is freed here */
			kiln_cursor_close(c);
		} else {
			kiln_cursor_close(c);
			kiln_cursor_close(d);
		}
	}
}

/* Replaces the first `from` in st (a state) by `to`. */
static void edit(char *st, size_t cap, const char *from, const char *to)
{
	char *at = strstr(st, from), rest[KILN_CURSOR_STATE_MAX];

	assert_non_null(at);
	snprintf(rest, sizeof(rest), "%s", at + strlen(from));
	snprintf(at, cap - (size_t)(at - st), "%s%s", to, rest);
}

/* The state has one strict decoder (issue 25): a key twice (also written
 * with an escape), bytes after the object, a number negative, fractional or
 * out of its range, an unknown key, a nested value, a missing key are all
 * refused with one line that names the key or the byte; a state as written
 * (or with trailing whitespace, or a key written with an escape once) is
 * taken; the encoder's output for extreme values decodes to the same fields. */
static void test_cursor_state_strict(void **state)
{
	static const struct {
		const char *from, *to, *error;
	} bad[] = {
	    {"{\"kiln_cursor\":1,", "{\"kiln_cursor\":1,\"yielded\":0,", "cursor state: a key appears twice"},
	    {"{\"kiln_cursor\":1,", "{\"kiln_cursor\":1,\"yi\\u0065lded\":0,",
	     "cursor state: a key appears twice"},
	    {"}", "}x", "cursor state: not one JSON object"},
	    {"}", "} {}", "cursor state: not one JSON object"},
	    {"\"yielded\":2", "\"yielded\":-1",
	     "cursor state: yielded must be a whole number 0..18446744073709551615"},
	    {"\"yielded\":2", "\"yielded\":1000000000000000000000000000000", "cursor state: yielded must be"},
	    {"\"yielded\":2", "\"yielded\":18446744073709551616", "cursor state: yielded must be"},
	    {"\"yielded\":2", "\"yielded\":2.0", "cursor state: yielded must be"},
	    {"\"yielded\":2", "\"yielded\":2e0", "cursor state: yielded must be"},
	    {"\"yielded\":2", "\"yielded\":\"3\"", "cursor state: yielded must be"},
	    {"\"seed\":4", "\"seed\":-0", "cursor state: seed must be"},
	    {"\"world\":1", "\"world\":4294967297",
	     "cursor state: world must be a whole number 0..4294967295"},
	    {"\"world\":1", "\"world\":0", "cursor state: rank 0 is not below the world size 0"},
	    {"\"shuffle\":true", "\"shuffle\":1", "cursor state: shuffle must be true or false"},
	    {"\"split\":\"train\"", "\"split\":\"tr\\u0061in\"", "cursor state: split must be"},
	    {"\"commit\":\"", "\"commit\":\"X", "cursor state: commit must be 40 lower-case hex digits"},
	    {"\"line\":", "\"lines\":0,\"line\":", "cursor state: an unknown key at byte"},
	    {"\"line\":", "\"x\":{},\"line\":", "cursor state: not one JSON object"},
	    {",\"line\":2", "", "cursor state: no line"},
	    {"{\"kiln_cursor\":1,", "{\"kiln_cursor\":2,", "not a kiln cursor state"},
	    {"{\"kiln_cursor\":1,", "[{\"kiln_cursor\":1,", "not a kiln cursor state"},
	};
	kiln_cursor_options o = {.version = KILN_CURSOR_OPTIONS_VERSION,
	                         .split = KILN_SPLIT_TRAIN,
	                         .world = 1,
	                         .seed = 4,
	                         .shuffle = true};
	char st[KILN_CURSOR_STATE_SIZE], ed[KILN_CURSOR_STATE_MAX];
	kiln_cursor_fields f, g;
	const char *rec;
	size_t len;
	kiln_reader *r;
	kiln_cursor *c, *d;

	(void)state;
	assert_int_equal(kiln_reader_open(&r, manifest_path, "ds", store_url, NULL), 0);
	assert_int_equal(kiln_cursor_open(&c, r, &o), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(kiln_cursor_next(c, &rec, &len), 1);
	assert_int_equal(kiln_cursor_state(c, st, sizeof(st)), 0);
	assert_non_null(strstr(st, "\"yielded\":2,\"shard\":0,\"line\":2}"));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(ed, sizeof(ed), "%s", st);
		edit(ed, sizeof(ed), bad[i].from, bad[i].to);
		assert_int_equal(kiln_cursor_open(&d, r, &o), 0);
		if (kiln_cursor_restore(d, ed) != KILN_EINVALID)
			fail_msg("taken: %s", ed);
		if (strncmp(kiln_error_last(), bad[i].error, strlen(bad[i].error)) != 0)
			fail_msg("%s: %s", ed, kiln_error_last());
		assert_int_equal(kiln_cursor_yielded(d), 0);
		kiln_cursor_close(d);
	}
	/* taken: trailing whitespace, and a key written with an escape once */
	snprintf(ed, sizeof(ed), "%s \r\n\t\n", st);
	assert_int_equal(kiln_cursor_open(&d, r, &o), 0);
	assert_int_equal(kiln_cursor_restore(d, ed), 0);
	assert_int_equal(kiln_cursor_yielded(d), 2);
	kiln_cursor_close(d);
	snprintf(ed, sizeof(ed), "%s", st);
	edit(ed, sizeof(ed), "\"yielded\"", "\"yi\\u0065lded\"");
	assert_int_equal(kiln_cursor_open(&d, r, &o), 0);
	assert_int_equal(kiln_cursor_restore(d, ed), 0);
	assert_int_equal(kiln_cursor_yielded(d), 2);
	kiln_cursor_close(d);
	/* longer than a state may be */
	memset(ed, ' ', sizeof(ed));
	memcpy(ed, st, strlen(st));
	ed[sizeof(ed) - 1] = '\0';
	assert_int_equal(kiln_cursor_state_decode(&f, ed, sizeof(ed) - 1), 0);
	assert_int_equal(kiln_cursor_state_decode(&f, ed, KILN_CURSOR_STATE_MAX + 1), KILN_EINVALID);
	kiln_cursor_close(c);
	kiln_reader_close(r);

	/* the largest values round-trip */
	memset(&f, 0, sizeof(f));
	memset(f.commit, 'f', 40);
	f.split = KILN_SPLIT_TEST;
	f.rank = UINT_MAX - 1;
	f.world = UINT_MAX;
	f.seed = f.epoch = f.shuffle_buffer = f.yielded = f.shard = f.line = UINT64_MAX;
	f.shuffle = true;
	assert_int_equal(kiln_cursor_state_encode(st, sizeof(st), &f), 0);
	assert_int_equal(kiln_cursor_state_decode(&g, st, strlen(st)), 0);
	assert_memory_equal(&f, &g, sizeof(f));
}

/* kiln_library_version is configure.ac's version, kiln_library_version_number the same as
 * MAJOR * 10000 + MINOR * 100 + PATCH. */
static void test_version(void **state)
{
	unsigned major, minor, patch;

	(void)state;
	assert_string_equal(kiln_library_version(), PACKAGE_VERSION);
	assert_int_equal(sscanf(kiln_library_version(), "%u.%u.%u", &major, &minor, &patch), 3);
	assert_int_equal(kiln_library_version_number(), major * 10000 + minor * 100 + patch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_open_and_list),
	    cmocka_unit_test(test_open_errors),
	    cmocka_unit_test(test_open_refuses_renamed_tag),
	    cmocka_unit_test(test_assign_covers_every_shard_once),
	    cmocka_unit_test(test_assign_shuffle),
	    cmocka_unit_test(test_stream),
	    cmocka_unit_test(test_cursor_epochs),
	    cmocka_unit_test(test_cursor_epoch0_is_the_seed_order),
	    cmocka_unit_test(test_cursor_resume),
	    cmocka_unit_test(test_cursor_batches),
	    cmocka_unit_test(test_cursor_restore_refuses_another_reading),
	    cmocka_unit_test(test_tampered_shards),
	    cmocka_unit_test(test_cursor_outlives_reader),
	    cmocka_unit_test(test_cursor_state_strict),
	    cmocka_unit_test(test_version),
	};

	return kiln_test_git_main(tests, tmpdir, "reader", setup, teardown);
}
