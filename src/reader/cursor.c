/* A cursor over one worker's records of a split for one epoch (see
 * kiln/reader.h): the shard order of kiln_reader_assign with the epoch's
 * seed, each shard streamed (verified) into memory and cut into lines, an
 * optional shuffle buffer, and a state that says exactly where it is (its
 * one encoder and one strict decoder are here). One shard's JSON Lines text
 * is held at a time (at most shards.target_bytes, 64 MiB by default), plus
 * the shuffle buffer's records. A cursor holds its reader (internal.h) and
 * releases it after its read-ahead threads stopped. */
#include <inttypes.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/cpus.h"
#include "core/error.h"
#include "core/json.h"
#include "reader/internal.h"
#include "reader/loader.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Shards loaded ahead of the one being read, each by its own thread: two,
 * so that verifying and decompressing use two cores while the caller reads
 * (memory: READ_AHEAD + 1 shards' text). */
#define READ_AHEAD 2

typedef struct held {
	char *p;
	size_t len;
} held;

struct kiln_cursor {
	kiln_reader *r;
	kiln_loader
	    *loader[READ_AHEAD]; /* shard si is loaded by loader[si % READ_AHEAD]; NULL without a store */
	kiln_cursor_options o;
	uint64_t epoch_seed;
	kiln_reader_shard *shards;
	size_t *idx, nidx;
	/* the shard being read: idx[si]'s text, the next line at pos (line number) */
	size_t si;
	bool loaded;
	kiln_buf text;
	kiln_buf ends; /* the offsets of text's newlines (size_t each, found by the loader) */
	size_t lines;  /* text's lines */
	size_t pos, line;
	/* the shuffle buffer */
	held *buf;
	size_t nbuf;
	uint64_t rng;
	kiln_buf out;     /* the record last yielded from the buffer */
	kiln_buf batch;   /* the records of the last kiln_cursor_next_batch */
	const char *last; /* that batch (last_len bytes), for kiln_cursor_batch_format */
	size_t last_len;
	size_t last_line; /* when it is text's lines last_line.., else SIZE_MAX */
	kiln_buf format;  /* its records' lengths as a struct format */
	uint64_t yielded;
	uint64_t total; /* the records of this worker's shards (the manifest's counts) */
};

static uint64_t le64(const unsigned char *b)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

static void put_le64(unsigned char *b, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		b[i] = (unsigned char)v;
}

/* The epoch's seed: seed itself for epoch 0, else BLAKE2b-64(seed || 0x1E || epoch). */
static uint64_t epoch_seed(uint64_t seed, uint64_t epoch)
{
	unsigned char in[17], digest[32];

	if (epoch == 0)
		return seed;
	put_le64(in, seed);
	in[8] = 0x1E;
	put_le64(in + 9, epoch);
	crypto_generichash(digest, sizeof(digest), in, sizeof(in), NULL, 0);
	return le64(digest);
}

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void free_buffer(kiln_cursor *c)
{
	for (size_t i = 0; i < c->nbuf; i++)
		free(c->buf[i].p);
	c->nbuf = 0;
}

/* Back to the epoch's first record. */
static void rewind_cursor(kiln_cursor *c)
{
	free_buffer(c);
	kiln_buf_reset(&c->text);
	kiln_buf_reset(&c->ends);
	c->last_len = 0;
	c->lines = 0;
	c->si = 0;
	c->loaded = false;
	c->pos = c->line = 0;
	c->rng = c->epoch_seed ^ ((uint64_t)c->o.rank * 0x9E3779B97F4A7C15ull);
	c->yielded = 0;
}

/* Whether the cursor loads each shard in the caller's thread: a process
 * that may run on one CPU only (taskset, a container's cpuset) reading a
 * local store (file://) gains nothing from read-ahead threads, which only
 * take turns with the caller, and the caller that loads a shard itself
 * reads its text while it is still in the cache. A remote store is read
 * ahead on one CPU too: its waits overlap with the caller's work.
 * $KILN_READ_AHEAD=0 or 1 forces one way or the other. */
static bool load_in_caller(const kiln_store *store)
{
	const char *env = getenv("KILN_READ_AHEAD");

	if (env && (env[0] == '0' || env[0] == '1') && env[1] == '\0')
		return env[0] == '0';
	return strcmp(store->backend->scheme, "file") == 0 && kiln_cpu_count() == 1;
}

int kiln_cursor_open(kiln_cursor **out, kiln_reader *r, const kiln_cursor_options *o)
{
	kiln_cursor *c;
	bool sync;
	size_t n;
	int rc;

	*out = NULL;
	if (!r || !o || (unsigned)o->split >= KILN_SPLIT_COUNT)
		return kiln_error_set(KILN_EINVALID, "kiln_cursor_open: a reader and a split are needed");
	if (o->version != KILN_CURSOR_OPTIONS_VERSION)
		return kiln_error_set(
		    KILN_EINVALID,
		    "kiln_cursor_open: kiln_cursor_options version %u, this libkiln %s knows %d "
		    "(start from KILN_CURSOR_OPTIONS_INIT)",
		    o->version, kiln_library_version(), KILN_CURSOR_OPTIONS_VERSION);
	if (!(c = calloc(1, sizeof(*c))))
		return kiln_error_oom(NULL);
	c->r = r;
	kiln_reader_hold(r);
	c->o = *o;
	if (c->o.world == 0)
		c->o.world = 1;
	c->epoch_seed = epoch_seed(o->seed, o->epoch);
	if ((rc = kiln_reader_shards(r, o->split, &c->shards, &n)) < 0)
		goto fail;
	if (!(c->idx = malloc((n / c->o.world + 1) * sizeof(*c->idx)))) {
		rc = kiln_error_oom(NULL);
		goto fail;
	}
	if ((rc = kiln_reader_assign(c->shards, n, c->o.rank, c->o.world, c->epoch_seed, c->o.shuffle, c->idx,
	                             &c->nidx)) < 0)
		goto fail;
	for (size_t i = 0; i < c->nidx; i++)
		c->total += c->shards[c->idx[i]].records;
	sync = r->store && load_in_caller(r->store);
	for (size_t i = 0; r->store && i < READ_AHEAD; i++)
		if ((rc = kiln_loader_new(&c->loader[i], r->store, sync)) < 0)
			goto fail;
	if (c->o.shuffle_buffer && !(c->buf = calloc(c->o.shuffle_buffer, sizeof(*c->buf)))) {
		rc = kiln_error_oom(NULL);
		goto fail;
	}
	rewind_cursor(c);
	*out = c;
	return 0;
fail:
	kiln_cursor_close(c);
	return rc;
}

void kiln_cursor_close(kiln_cursor *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < READ_AHEAD; i++)
		kiln_loader_free(c->loader[i]);
	free_buffer(c);
	free(c->buf);
	free(c->idx);
	kiln_buf_free(&c->text);
	kiln_buf_free(&c->ends);
	kiln_buf_free(&c->out);
	kiln_buf_free(&c->batch);
	kiln_buf_free(&c->format);
	kiln_reader_release(c->r); /* after the read-ahead threads stopped: they use its store */
	free(c);
}

/* KILN_EINVALID once the cursor's reader is closed: nothing more is read. */
static int check_open(const kiln_cursor *c)
{
	if (atomic_load(&c->r->closed))
		return kiln_error_set(KILN_EINVALID, "cursor: its reader (%s@%.12s) is closed",
		                      kiln_reader_dataset(c->r), kiln_reader_commit(c->r));
	return 0;
}

/* The next line of the shards in order: 1, 0 at the end, < 0 an error. */
static int next_line(kiln_cursor *c, const char **p, size_t *len)
{
	size_t nl;
	int rc;

	while (!c->loaded || c->pos >= c->text.len) {
		if (c->loaded) { /* the shard is done: the next one from its first line */
			c->si++;
			c->loaded = false;
			c->pos = c->line = 0;
		}
		if (c->si >= c->nidx)
			return 0;
		kiln_buf_reset(&c->text);
		kiln_buf_reset(&c->ends);
		if (!c->loader[0])
			return kiln_error_set(KILN_EINVALID, "shard %.64s: no store to read it from",
			                      c->shards[c->idx[c->si]].hash);
		/* the shard in hand (verified), and the next ones are read ahead:
		 * those of the other loaders before waiting for it (so that the
		 * first shard is not loaded alone), its own loader's after */
		if ((rc = kiln_loader_start(c->loader[c->si % READ_AHEAD], &c->shards[c->idx[c->si]],
		                            c->si)) < 0)
			return rc;
		for (size_t k = c->si + 1; k < c->si + READ_AHEAD && k < c->nidx; k++)
			(void)kiln_loader_start(c->loader[k % READ_AHEAD], &c->shards[c->idx[k]], k);
		if ((rc = kiln_loader_take(c->loader[c->si % READ_AHEAD], &c->shards[c->idx[c->si]], c->si,
		                           &c->text, &c->ends, &c->lines)) < 0)
			return rc; /* none of a bad shard's records */
		if (c->si + READ_AHEAD < c->nidx)
			(void)kiln_loader_start(c->loader[(c->si + READ_AHEAD) % READ_AHEAD],
			                        &c->shards[c->idx[c->si + READ_AHEAD]], c->si + READ_AHEAD);
		c->loaded = true;
		c->pos = c->line = 0;
	}
	/* line c->line ends at its newline, or with the text (the last line) */
	*p = c->text.ptr + c->pos;
	if (c->line < c->ends.len / sizeof(size_t)) {
		nl = ((const size_t *)(void *)c->ends.ptr)[c->line];
		*len = nl - c->pos;
		c->pos = nl + 1;
	} else {
		*len = c->text.len - c->pos;
		c->pos = c->text.len;
	}
	c->line++;
	return 1;
}

static int hold(held *h, const char *p, size_t len)
{
	if (!(h->p = malloc(len ? len : 1)))
		return kiln_error_oom(NULL);
	memcpy(h->p, p, len);
	h->len = len;
	return 0;
}

int kiln_cursor_next(kiln_cursor *c, const char **record, size_t *len)
{
	const char *p;
	size_t n, j;
	int rc;

	c->last_len = 0; /* kiln_cursor_batch_format describes no batch now */

	if ((rc = check_open(c)) < 0)
		return rc;
	if (!c->o.shuffle_buffer) {
		if ((rc = next_line(c, record, len)) == 1)
			c->yielded++;
		return rc;
	}
	while (c->nbuf < c->o.shuffle_buffer) { /* fill */
		if ((rc = next_line(c, &p, &n)) < 0)
			return rc;
		if (rc == 0)
			break;
		if ((rc = hold(&c->buf[c->nbuf], p, n)) < 0)
			return rc;
		c->nbuf++;
	}
	if (c->nbuf == 0)
		return 0;
	j = (size_t)(splitmix64(&c->rng) % c->nbuf);
	kiln_buf_reset(&c->out);
	if ((rc = kiln_buf_put(&c->out, c->buf[j].p, c->buf[j].len)) < 0)
		return rc;
	free(c->buf[j].p);
	c->buf[j] = c->buf[--c->nbuf]; /* the hole is refilled by the next call's fill */
	*record = c->out.ptr ? c->out.ptr : "";
	*len = c->out.len;
	c->yielded++;
	return 1;
}

static int next_batch(kiln_cursor *c, size_t max_records, size_t max_bytes, const char **data, size_t *len,
                      size_t *count)
{
	const char *rec;
	size_t n;
	int rc = 0;

	kiln_buf_reset(&c->batch);
	c->last_line = SIZE_MAX;
	*data = "";
	*len = *count = 0;
	if ((rc = check_open(c)) < 0)
		return rc;
	if (max_records == 0)
		max_records = 1;
	if (!c->o.shuffle_buffer) {
		/* the lines of the shard in hand as they are, without a copy */
		if ((rc = next_line(c, &rec, &n)) <= 0)
			return rc;
		if (c->line - 1 <
		    c->ends.len / sizeof(size_t)) { /* else the last line has no newline: copied below */
			const size_t *ends = (const size_t *)(void *)c->ends.ptr;
			size_t nends = c->ends.len / sizeof(size_t);

			c->last_line = c->line - 1;
			/* the rest of the shard within both limits, its last line ended:
			 * handed over as it is, its lines found by the loader */
			if (c->text.ptr[c->text.len - 1] == '\n' && c->lines - c->line < max_records &&
			    (size_t)(c->text.ptr + c->text.len - rec) <= max_bytes) {
				*count = 1 + (c->lines - c->line);
				c->line = c->lines;
				c->pos = c->text.len;
				c->yielded += *count;
				*data = rec;
				*len = (size_t)(c->text.ptr + c->text.len - rec);
				return 1;
			}
			for (*count = 1; *count < max_records && c->line < nends &&
			                 (size_t)(c->text.ptr + c->pos - rec) < max_bytes;
			     (*count)++)
				c->pos = ends[c->line++] + 1;
			c->yielded += *count;
			*data = rec;
			*len = (size_t)(c->text.ptr + c->pos - rec);
			return 1;
		}
		c->yielded++;
		if ((rc = kiln_buf_put(&c->batch, rec, n)) < 0 || (rc = kiln_buf_put(&c->batch, "\n", 1)) < 0)
			return rc;
		*count = 1;
	}
	while (*count < max_records && (*count == 0 || c->batch.len < max_bytes)) {
		if ((rc = kiln_cursor_next(c, &rec, &n)) <= 0)
			break;
		if ((rc = kiln_buf_put(&c->batch, rec, n)) < 0 || (rc = kiln_buf_put(&c->batch, "\n", 1)) < 0)
			return rc; /* out of memory: the cursor has moved on, its state says where */
		(*count)++;
	}
	if (*count == 0)
		return rc; /* 0 at the end, or the error */
	/* An error after some records: hand those over; the next call meets the
	 * error again (the failed shard is read anew) and returns it. */
	*data = c->batch.ptr;
	*len = c->batch.len;
	return 1;
}

int kiln_cursor_next_batch(kiln_cursor *c, size_t max_records, size_t max_bytes, const char **data,
                           size_t *len, size_t *count)
{
	int rc = next_batch(c, max_records, max_bytes, data, len, count);

	c->last = *data;
	c->last_len = *len;
	return rc;
}

/* Appends "<n>sx" (n in decimal) to f, whose room the caller reserved. */
static void put_field(kiln_buf *f, size_t n)
{
	char digits[24];
	size_t k = sizeof(digits);

	do
		digits[--k] = (char)('0' + n % 10);
	while ((n /= 10) != 0);
	memcpy(f->ptr + f->len, digits + k, sizeof(digits) - k);
	f->len += sizeof(digits) - k;
	f->ptr[f->len++] = 's';
	f->ptr[f->len++] = 'x';
}

/* Room for one field: a length of up to 20 digits, 's' and 'x'. */
#define FIELD_ROOM 22

int kiln_cursor_batch_format(kiln_cursor *c, const char **format, size_t *len)
{
	const unsigned char *p = (const unsigned char *)c->last, *end = p + c->last_len, *start = p;
	kiln_buf *f = &c->format;
	int rc;

	*format = "";
	*len = 0;
	kiln_buf_reset(f);
	if (!c->last_len)
		return 0;
	if (c->last_line != SIZE_MAX) { /* lines of the text: their ends are known */
		const size_t *ends = (const size_t *)(void *)c->ends.ptr;
		size_t from = (size_t)(c->last - c->text.ptr);

		if ((rc = kiln_buf_reserve(f, (c->line - c->last_line) * FIELD_ROOM)) < 0)
			return rc;
		for (size_t i = c->last_line; i < c->line; i++) {
			put_field(f, ends[i] - from);
			from = ends[i] + 1;
		}
		*format = f->ptr;
		*len = f->len;
		return 0;
	}
#ifdef __SSE2__
	/* the newlines of 16 bytes at a time as a bit mask, one field per set bit */
	for (const __m128i nl = _mm_set1_epi8('\n'); end - p >= 16; p += 16) {
		unsigned mask = (unsigned)_mm_movemask_epi8(
		    _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)p), nl));

		for (; mask; mask &= mask - 1) {
			const unsigned char *at = p + __builtin_ctz(mask);

			if (f->cap - f->len < FIELD_ROOM && (rc = kiln_buf_reserve(f, FIELD_ROOM * 64)) < 0)
				return rc;
			put_field(f, (size_t)(at - start));
			start = at + 1;
		}
	}
#endif
	for (const unsigned char *at; p < end && (at = memchr(p, '\n', (size_t)(end - p))); p = start) {
		if (f->cap - f->len < FIELD_ROOM && (rc = kiln_buf_reserve(f, FIELD_ROOM * 64)) < 0)
			return rc;
		put_field(f, (size_t)(at - start));
		start = at + 1;
	}
	*format = f->ptr;
	*len = f->len;
	return 0;
}

/* Where the epoch's reading stands after `yielded` records: lines read from
 * the shards (with a buffer of B records, the first yield has read B lines
 * and each later one one more), as a shard index and the line within it.
 * A shard read to its end is reported as the next shard's line 0. */
static void locate(const kiln_cursor *c, uint64_t yielded, size_t *shard, uint64_t *line)
{
	uint64_t read = yielded;

	if (c->o.shuffle_buffer && yielded)
		read = yielded - 1 + c->o.shuffle_buffer < c->total ? yielded - 1 + c->o.shuffle_buffer
		                                                    : c->total;
	for (*shard = 0; *shard < c->nidx && read >= c->shards[c->idx[*shard]].records; (*shard)++)
		read -= c->shards[c->idx[*shard]].records;
	*line = read;
}

/* ---- the state: one encoder, one decoder ----------------------------------- */

int kiln_cursor_state_encode(char *out, size_t cap, const kiln_cursor_fields *f)
{
	int n = snprintf(
	    out, cap,
	    "{\"kiln_cursor\":1,\"commit\":\"%s\",\"split\":\"%s\",\"rank\":%u,\"world\":%u,"
	    "\"seed\":%" PRIu64 ",\"shuffle\":%s,\"epoch\":%" PRIu64 ",\"shuffle_buffer\":%" PRIu64
	    ",\"yielded\":%" PRIu64 ",\"shard\":%" PRIu64 ",\"line\":%" PRIu64 "}",
	    f->commit, kiln_split_name(f->split), f->rank, f->world, f->seed, f->shuffle ? "true" : "false",
	    f->epoch, f->shuffle_buffer, f->yielded, f->shard, f->line);

	if (n < 0 || (size_t)n >= cap)
		return kiln_error_set(KILN_ELIMIT, "kiln_cursor_state: %zu bytes are not enough", cap);
	return 0;
}

/* The keys of a state, in the order the encoder writes them. */
enum {
	K_CURSOR,
	K_COMMIT,
	K_SPLIT,
	K_RANK,
	K_WORLD,
	K_SEED,
	K_SHUFFLE,
	K_EPOCH,
	K_BUFFER,
	K_YIELDED,
	K_SHARD,
	K_LINE,
	K_COUNT
};
static const char *const state_keys[K_COUNT] = {"kiln_cursor",    "commit",  "split",   "rank",
                                                "world",          "seed",    "shuffle", "epoch",
                                                "shuffle_buffer", "yielded", "shard",   "line"};

/* A JSON integer token as a uint64_t no larger than max: 0, or -1 for a
 * fraction, an exponent, a sign or a value out of range. */
static int state_number(const kiln_json_token *t, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (t->type != KILN_JSON_NUMBER || !(t->flags & KILN_JSON_INTEGER) || t->len == 0 || t->ptr[0] == '-')
		return -1;
	for (size_t i = 0; i < t->len; i++) {
		unsigned d = (unsigned)(t->ptr[i] - '0');

		if (d > 9 || v > max / 10 || d > max - v * 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* One value of a state into f: 0, or KILN_EINVALID naming the key. */
static int state_value(kiln_cursor_fields *f, int key, const kiln_json_token *t)
{
	static const uint64_t max[K_COUNT] = {
	    [K_CURSOR] = 1,           [K_RANK] = UINT_MAX,    [K_WORLD] = UINT_MAX,
	    [K_SEED] = UINT64_MAX,    [K_EPOCH] = UINT64_MAX, [K_BUFFER] = SIZE_MAX,
	    [K_YIELDED] = UINT64_MAX, [K_SHARD] = SIZE_MAX,   [K_LINE] = UINT64_MAX};
	uint64_t v;

	switch (key) {
	case K_COMMIT:
		if (t->type != KILN_JSON_STRING || t->len != 40 || (t->flags & KILN_JSON_ESCAPED) ||
		    strspn(t->ptr, "0123456789abcdef") < 40)
			return kiln_error_set(KILN_EINVALID,
			                      "cursor state: commit must be 40 lower-case hex digits");
		memcpy(f->commit, t->ptr, 40);
		f->commit[40] = '\0';
		return 0;
	case K_SPLIT:
		for (int s = 0;
		     t->type == KILN_JSON_STRING && !(t->flags & KILN_JSON_ESCAPED) && s < KILN_SPLIT_COUNT;
		     s++) {
			const char *name = kiln_split_name((kiln_split)s);

			if (strlen(name) == t->len && memcmp(name, t->ptr, t->len) == 0) {
				f->split = (kiln_split)s;
				return 0;
			}
		}
		return kiln_error_set(KILN_EINVALID,
		                      "cursor state: split must be \"train\", \"dev\" or \"test\"");
	case K_SHUFFLE:
		if (t->type != KILN_JSON_TRUE && t->type != KILN_JSON_FALSE)
			return kiln_error_set(KILN_EINVALID, "cursor state: shuffle must be true or false");
		f->shuffle = t->type == KILN_JSON_TRUE;
		return 0;
	default:
		if (state_number(t, max[key], &v) < 0) {
			if (key == K_CURSOR)
				return kiln_error_set(KILN_EINVALID, "not a kiln cursor state");
			return kiln_error_set(KILN_EINVALID,
			                      "cursor state: %s must be a whole number 0..%" PRIu64,
			                      state_keys[key], max[key]);
		}
		switch (key) {
		case K_CURSOR:
			break;
		case K_RANK:
			f->rank = (unsigned)v;
			break;
		case K_WORLD:
			f->world = (unsigned)v;
			break;
		case K_SEED:
			f->seed = v;
			break;
		case K_EPOCH:
			f->epoch = v;
			break;
		case K_BUFFER:
			f->shuffle_buffer = v;
			break;
		case K_YIELDED:
			f->yielded = v;
			break;
		case K_SHARD:
			f->shard = v;
			break;
		default:
			f->line = v;
			break;
		}
		return 0;
	}
}

int kiln_cursor_state_decode(kiln_cursor_fields *out, const char *text, size_t len)
{
	const kiln_json_limits limits = {.max_depth = 1, .max_bytes = KILN_CURSOR_STATE_MAX};
	kiln_json_scanner *sc = kiln_json_scanner_new(&limits);
	kiln_json_token t;
	bool seen[K_COUNT] = {false};
	size_t unknown = SIZE_MAX; /* offset of the first key that is none of state_keys */
	int key = -1, rc = 0, more;

	memset(out, 0, sizeof(*out));
	if (!sc)
		return kiln_error_oom(NULL);
	kiln_json_scanner_reset(sc, text, len);
	while ((more = kiln_json_next(sc, &t)) == 1) {
		if (t.depth == 0 && t.type != KILN_JSON_OBJECT_BEGIN && t.type != KILN_JSON_OBJECT_END) {
			rc = kiln_error_set(KILN_EINVALID, "not a kiln cursor state");
			goto done;
		}
		if (t.type == KILN_JSON_KEY) { /* compared unescaped: "yi\u0065lded" is "yielded" */
			char name[64];
			size_t n =
			    t.len < sizeof(name) ? kiln_json_unescape(name, sizeof(name), &t) : (size_t)-1;

			key = -1;
			for (int k = 0; n != (size_t)-1 && k < K_COUNT; k++)
				if (strlen(state_keys[k]) == n && memcmp(state_keys[k], name, n) == 0)
					key = k;
			if (key < 0 && unknown == SIZE_MAX)
				unknown = t.offset;
			continue;
		}
		if (t.depth == 1 && t.type != KILN_JSON_OBJECT_END && key >= 0) {
			seen[key] = true;
			if ((rc = state_value(out, key, &t)) < 0)
				goto done;
		}
	}
	if (more < 0) {
		size_t at = 0;
		kiln_reject why = kiln_json_scanner_error(sc, &at, NULL);

		if (why == KILN_REJECT_DUPLICATE_KEY)
			rc =
			    kiln_error_set(KILN_EINVALID, "cursor state: a key appears twice (byte %zu)", at);
		else
			rc = kiln_error_set(KILN_EINVALID,
			                    "cursor state: not one JSON object (%s at byte %zu)",
			                    kiln_reject_name(why), at);
		goto done;
	}
	if (!seen[K_CURSOR]) {
		rc = kiln_error_set(KILN_EINVALID, "not a kiln cursor state");
		goto done;
	}
	if (unknown != SIZE_MAX) {
		rc = kiln_error_set(KILN_EINVALID, "cursor state: an unknown key at byte %zu", unknown);
		goto done;
	}
	for (int k = 0; k < K_COUNT; k++)
		if (!seen[k]) {
			rc = kiln_error_set(KILN_EINVALID, "cursor state: no %s", state_keys[k]);
			goto done;
		}
	if (out->world == 0 || out->rank >= out->world)
		rc = kiln_error_set(KILN_EINVALID, "cursor state: rank %u is not below the world size %u",
		                    out->rank, out->world);
done:
	kiln_json_scanner_free(sc);
	if (rc < 0)
		memset(out, 0, sizeof(*out));
	return rc;
}

/* This cursor's state after `yielded` records, as fields. */
static void fields_of(const kiln_cursor *c, uint64_t yielded, kiln_cursor_fields *f)
{
	size_t shard;

	memset(f, 0, sizeof(*f));
	snprintf(f->commit, sizeof(f->commit), "%s", kiln_reader_commit(c->r));
	f->split = c->o.split;
	f->rank = c->o.rank;
	f->world = c->o.world;
	f->seed = c->o.seed;
	f->shuffle = c->o.shuffle;
	f->epoch = c->o.epoch;
	f->shuffle_buffer = c->o.shuffle_buffer;
	f->yielded = yielded;
	locate(c, yielded, &shard, &f->line);
	f->shard = shard;
}

int kiln_cursor_state_at(const kiln_cursor *c, uint64_t yielded, char *out, size_t cap)
{
	kiln_cursor_fields f;

	if (yielded > c->total)
		return kiln_error_set(KILN_EINVALID,
		                      "cursor state: %" PRIu64 " records asked, the epoch has %" PRIu64,
		                      yielded, c->total);
	fields_of(c, yielded, &f);
	return kiln_cursor_state_encode(out, cap, &f);
}

int kiln_cursor_state(const kiln_cursor *c, char *out, size_t cap)
{
	return kiln_cursor_state_at(c, c->yielded, out, cap);
}

uint64_t kiln_cursor_records(const kiln_cursor *c)
{
	return c->total;
}

uint64_t kiln_cursor_yielded(const kiln_cursor *c)
{
	return c->yielded;
}

/* KILN_EINVALID naming the first of state's reading that is not this cursor's. */
static int same_reading(const kiln_cursor_fields *mine, const kiln_cursor_fields *got)
{
#define SAME(field, fmt)                                                                                     \
	if (mine->field != got->field)                                                                       \
	return kiln_error_set(KILN_EINVALID, "cursor state: " #field " is %" fmt ", this reader's is %" fmt, \
	                      got->field, mine->field)
	if (strcmp(mine->commit, got->commit) != 0)
		return kiln_error_set(KILN_EINVALID, "cursor state: commit is %s, this reader's is %s",
		                      got->commit, mine->commit);
	if (mine->split != got->split)
		return kiln_error_set(KILN_EINVALID, "cursor state: split is %s, this reader's is %s",
		                      kiln_split_name(got->split), kiln_split_name(mine->split));
	SAME(rank, "u");
	SAME(world, "u");
	SAME(seed, PRIu64);
	if (mine->shuffle != got->shuffle)
		return kiln_error_set(KILN_EINVALID, "cursor state: shuffle is %s, this reader's is %s",
		                      got->shuffle ? "true" : "false", mine->shuffle ? "true" : "false");
	SAME(epoch, PRIu64);
	SAME(shuffle_buffer, PRIu64);
#undef SAME
	return 0;
}

int kiln_cursor_restore(kiln_cursor *c, const char *state)
{
	kiln_cursor_fields mine, got;
	uint64_t yielded, shard, line;
	int rc;

	if ((rc = check_open(c)) < 0)
		return rc;
	if ((rc = kiln_cursor_state_decode(&got, state, strlen(state))) < 0 ||
	    (fields_of(c, c->yielded, &mine), rc = same_reading(&mine, &got)) < 0)
		return rc;
	yielded = got.yielded;
	shard = got.shard;
	line = got.line;
	if (yielded > c->total)
		return kiln_error_set(KILN_EINVALID,
		                      "cursor state: %" PRIu64 " records yielded, the epoch has %" PRIu64,
		                      yielded, c->total);
	fields_of(c, yielded, &mine);
	if (mine.shard != shard || mine.line != line)
		return kiln_error_set(KILN_EINVALID,
		                      "cursor state: shard %" PRIu64 " line %" PRIu64 " is not where %" PRIu64
		                      " records lead (shard %" PRIu64 " line %" PRIu64 ")",
		                      shard, line, yielded, mine.shard, mine.line);
	rewind_cursor(c);
	if (!c->o.shuffle_buffer) {
		const char *rec;
		size_t len;

		if (shard > c->nidx || (shard == c->nidx && line)) {
			rc = kiln_error_set(KILN_EINVALID, "cursor state: shard %" PRIu64 " of %zu", shard,
			                    c->nidx);
			return rc;
		}
		c->si = (size_t)shard;
		for (uint64_t i = 0; i < line; i++) {
			if ((rc = next_line(c, &rec, &len)) <= 0) {
				if (rc == 0)
					rc = kiln_error_set(KILN_EINVALID,
					                    "cursor state: shard %" PRIu64
					                    " has no line %" PRIu64,
					                    shard, line);
				return rc;
			}
			if (c->si != shard) {
				rc = kiln_error_set(KILN_EINVALID,
				                    "cursor state: shard %" PRIu64 " has no line %" PRIu64,
				                    shard, line);
				return rc;
			}
		}
		c->yielded = yielded;
	} else {
		const char *rec;
		size_t len;

		for (uint64_t i = 0; i < yielded; i++) {
			if ((rc = kiln_cursor_next(c, &rec, &len)) <= 0) {
				if (rc == 0)
					rc = kiln_error_set(KILN_EINVALID,
					                    "cursor state: the epoch has fewer than %" PRIu64
					                    " records",
					                    yielded);
				return rc;
			}
		}
	}
	return 0;
}
