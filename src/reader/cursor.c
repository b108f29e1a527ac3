/* A cursor over one worker's records of a split for one epoch (see
 * kiln/reader.h): the shard order of kiln_reader_assign with the epoch's
 * seed, each shard streamed (verified) into memory and cut into lines, an
 * optional shuffle buffer, and a state that says exactly where it is. One
 * shard's JSON Lines text is held at a time (at most shards.target_bytes,
 * 64 MiB by default), plus the shuffle buffer's records. */
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "reader/internal.h"
#include "reader/loader.h"

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
	size_t pos, line;
	/* the shuffle buffer */
	held *buf;
	size_t nbuf;
	uint64_t rng;
	kiln_buf out;   /* the record last yielded from the buffer */
	kiln_buf batch; /* the records of the last kiln_cursor_next_batch */
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
	c->si = 0;
	c->loaded = false;
	c->pos = c->line = 0;
	c->rng = c->epoch_seed ^ ((uint64_t)c->o.rank * 0x9E3779B97F4A7C15ull);
	c->yielded = 0;
}

int kiln_cursor_open(kiln_cursor **out, kiln_reader *r, const kiln_cursor_options *o)
{
	kiln_cursor *c;
	size_t n;
	int rc;

	*out = NULL;
	if (!r || !o || (unsigned)o->split >= KILN_SPLIT_COUNT)
		return kiln_error_set(KILN_EINVALID, "kiln_cursor_open: a reader and a split are needed");
	if (!(c = calloc(1, sizeof(*c))))
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	c->r = r;
	c->o = *o;
	if (c->o.world == 0)
		c->o.world = 1;
	c->epoch_seed = epoch_seed(o->seed, o->epoch);
	if ((rc = kiln_reader_shards(r, o->split, &c->shards, &n)) < 0)
		goto fail;
	if (!(c->idx = malloc((n / c->o.world + 1) * sizeof(*c->idx)))) {
		rc = kiln_error_set(KILN_ENOMEM, "out of memory");
		goto fail;
	}
	if ((rc = kiln_reader_assign(c->shards, n, c->o.rank, c->o.world, c->epoch_seed, c->o.shuffle, c->idx,
	                             &c->nidx)) < 0)
		goto fail;
	for (size_t i = 0; i < c->nidx; i++)
		c->total += c->shards[c->idx[i]].records;
	for (size_t i = 0; r->store && i < READ_AHEAD; i++)
		if ((rc = kiln_loader_new(&c->loader[i], r->store)) < 0)
			goto fail;
	if (c->o.shuffle_buffer && !(c->buf = calloc(c->o.shuffle_buffer, sizeof(*c->buf)))) {
		rc = kiln_error_set(KILN_ENOMEM, "out of memory");
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
	kiln_buf_free(&c->out);
	kiln_buf_free(&c->batch);
	free(c);
}

/* The next line of the shards in order: 1, 0 at the end, < 0 an error. */
static int next_line(kiln_cursor *c, const char **p, size_t *len)
{
	const char *nl;
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
		if (!c->loader[0])
			return kiln_error_set(KILN_EINVALID, "shard %.64s: no store to read it from",
			                      c->shards[c->idx[c->si]].hash);
		/* the shard in hand (verified), and the next ones are read ahead */
		if ((rc = kiln_loader_take(c->loader[c->si % READ_AHEAD], &c->shards[c->idx[c->si]], c->si,
		                           &c->text)) < 0)
			return rc; /* none of a bad shard's records */
		for (size_t k = c->si + 1; k <= c->si + READ_AHEAD && k < c->nidx; k++)
			(void)kiln_loader_start(c->loader[k % READ_AHEAD], &c->shards[c->idx[k]], k);
		c->loaded = true;
		c->pos = c->line = 0;
	}
	nl = memchr(c->text.ptr + c->pos, '\n', c->text.len - c->pos);
	*p = c->text.ptr + c->pos;
	*len = nl ? (size_t)(nl - *p) : c->text.len - c->pos;
	c->pos += *len + (nl ? 1 : 0);
	c->line++;
	return 1;
}

static int hold(held *h, const char *p, size_t len)
{
	if (!(h->p = malloc(len ? len : 1)))
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	memcpy(h->p, p, len);
	h->len = len;
	return 0;
}

int kiln_cursor_next(kiln_cursor *c, const char **record, size_t *len)
{
	const char *p;
	size_t n, j;
	int rc;

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

int kiln_cursor_next_batch(kiln_cursor *c, size_t max_records, size_t max_bytes, const char **data,
                           size_t *len, size_t *count)
{
	const char *rec;
	size_t n;
	int rc = 0;

	kiln_buf_reset(&c->batch);
	*data = "";
	*len = *count = 0;
	if (max_records == 0)
		max_records = 1;
	if (!c->o.shuffle_buffer) {
		/* the lines of the shard in hand as they are, without a copy */
		if ((rc = next_line(c, &rec, &n)) <= 0)
			return rc;
		if (rec[n] == '\n') { /* else the last line has no newline: copied below */
			const char *nl;

			for (*count = 1; *count < max_records && c->pos < c->text.len &&
			                 (size_t)(c->text.ptr + c->pos - rec) < max_bytes &&
			                 (nl = memchr(c->text.ptr + c->pos, '\n', c->text.len - c->pos));
			     (*count)++) {
				c->pos = (size_t)(nl + 1 - c->text.ptr);
				c->line++;
			}
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

int kiln_cursor_state_at(const kiln_cursor *c, uint64_t yielded, char *out, size_t cap)
{
	uint64_t line;
	size_t shard;
	int n;

	if (yielded > c->total)
		return kiln_error_set(KILN_EINVALID,
		                      "cursor state: %" PRIu64 " records asked, the epoch has %" PRIu64,
		                      yielded, c->total);
	locate(c, yielded, &shard, &line);
	n = snprintf(out, cap,
	             "{\"kiln_cursor\":1,\"commit\":\"%s\",\"split\":\"%s\",\"rank\":%u,\"world\":%u,"
	             "\"seed\":%" PRIu64 ",\"shuffle\":%s,\"epoch\":%" PRIu64 ",\"shuffle_buffer\":%zu,"
	             "\"yielded\":%" PRIu64 ",\"shard\":%zu,\"line\":%" PRIu64 "}",
	             kiln_reader_commit(c->r), kiln_split_name(c->o.split), c->o.rank, c->o.world, c->o.seed,
	             c->o.shuffle ? "true" : "false", c->o.epoch, c->o.shuffle_buffer, yielded, shard, line);
	if (n < 0 || (size_t)n >= cap)
		return kiln_error_set(KILN_ELIMIT, "kiln_cursor_state: %zu bytes are not enough", cap);
	return 0;
}

int kiln_cursor_state(const kiln_cursor *c, char *out, size_t cap)
{
	return kiln_cursor_state_at(c, c->yielded, out, cap);
}

uint64_t kiln_cursor_records(const kiln_cursor *c)
{
	return c->total;
}

/* The value of key in state as text (strings without quotes), or NULL. */
static const char *field(kiln_json_scanner *sc, const char *state, const char *key, char *out, size_t cap)
{
	kiln_json_token t;

	if (kiln_json_lookup(sc, state, strlen(state), key, &t) != 1 || t.len + 1 > cap ||
	    (t.type != KILN_JSON_STRING && t.type != KILN_JSON_NUMBER && t.type != KILN_JSON_TRUE &&
	     t.type != KILN_JSON_FALSE))
		return NULL;
	memcpy(out, t.ptr, t.len);
	out[t.len] = '\0';
	return out;
}

int kiln_cursor_restore(kiln_cursor *c, const char *state)
{
	static const char *const same[] = {"commit", "split",   "rank",  "world",
	                                   "seed",   "shuffle", "epoch", "shuffle_buffer"};
	kiln_json_scanner *sc = kiln_json_scanner_new(NULL);
	char mine[256], want[96], got[96], *end;
	uint64_t yielded, shard, line;
	const char *p;
	int rc = 0;

	if (!sc)
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	if ((rc = kiln_cursor_state(c, mine, sizeof(mine))) < 0)
		goto done;
	if (!field(sc, state, "kiln_cursor", got, sizeof(got)) || strcmp(got, "1") != 0) {
		rc = kiln_error_set(KILN_EINVALID, "not a kiln cursor state");
		goto done;
	}
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		if (!field(sc, mine, same[i], want, sizeof(want)) ||
		    !field(sc, state, same[i], got, sizeof(got))) {
			rc = kiln_error_set(KILN_EINVALID, "cursor state: no %s", same[i]);
			goto done;
		}
		if (strcmp(want, got) != 0) {
			rc = kiln_error_set(KILN_EINVALID, "cursor state: %s is %s, this reader's is %s",
			                    same[i], got, want);
			goto done;
		}
	}
	if (!(p = field(sc, state, "yielded", got, sizeof(got))) || (yielded = strtoull(p, &end, 10), *end) ||
	    !(p = field(sc, state, "shard", want, sizeof(want))) || (shard = strtoull(p, &end, 10), *end) ||
	    !(p = field(sc, state, "line", mine, sizeof(mine))) || (line = strtoull(p, &end, 10), *end)) {
		rc = kiln_error_set(KILN_EINVALID, "cursor state: yielded, shard and line must be numbers");
		goto done;
	}
	if (yielded > c->total) {
		rc = kiln_error_set(KILN_EINVALID,
		                    "cursor state: %" PRIu64 " records yielded, the epoch has %" PRIu64,
		                    yielded, c->total);
		goto done;
	}
	{
		size_t at_shard;
		uint64_t at_line;

		locate(c, yielded, &at_shard, &at_line);
		if (at_shard != shard || at_line != line) {
			rc = kiln_error_set(KILN_EINVALID,
			                    "cursor state: shard %" PRIu64 " line %" PRIu64
			                    " is not where %" PRIu64 " records lead (shard %zu line %" PRIu64
			                    ")",
			                    shard, line, yielded, at_shard, at_line);
			goto done;
		}
	}
	rewind_cursor(c);
	if (!c->o.shuffle_buffer) {
		const char *rec;
		size_t len;

		if (shard > c->nidx || (shard == c->nidx && line)) {
			rc = kiln_error_set(KILN_EINVALID, "cursor state: shard %" PRIu64 " of %zu", shard,
			                    c->nidx);
			goto done;
		}
		c->si = (size_t)shard;
		for (uint64_t i = 0; i < line; i++) {
			if ((rc = next_line(c, &rec, &len)) <= 0) {
				if (rc == 0)
					rc = kiln_error_set(KILN_EINVALID,
					                    "cursor state: shard %" PRIu64
					                    " has no line %" PRIu64,
					                    shard, line);
				goto done;
			}
			if (c->si != shard) {
				rc = kiln_error_set(KILN_EINVALID,
				                    "cursor state: shard %" PRIu64 " has no line %" PRIu64,
				                    shard, line);
				goto done;
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
				goto done;
			}
		}
	}
	rc = 0;
done:
	kiln_json_scanner_free(sc);
	return rc;
}
