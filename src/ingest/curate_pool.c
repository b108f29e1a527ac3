/* The curate stage's workers and ring (see curate_pool.h). One mutex and
 * one condition variable guard the ring; workers take batches in sequence
 * order, and the owner consumes them in the same order, or (options'
 * deliver_on_workers) the worker that finds the oldest batch done does,
 * one worker at a time (`delivering`), while the others curate on.
 *
 * Ring positions: next_reclaim <= next_consume <= next_take <= next_submit;
 * a consumed batch keeps its slot until the owner reclaims it (recycles it
 * to the free list, which only the owner's thread touches). */
#include "ingest/curate_pool.h"

#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "mask/curate.h"

#define RING 8

/* zstd level of raw-zone objects: written once per batch on the hot path,
 * read rarely (replay, audits), so speed before ratio */
#define RAW_LEVEL 1

enum { BATCH_FREE, BATCH_FILLING, BATCH_FILLED, BATCH_TAKEN, BATCH_DONE, BATCH_CONSUMED };

struct worker {
	kiln_curate_pool *pool;
	pthread_t thread;
	kiln_validator *validator;
	kiln_curator *curator;
	kiln_raw_writer *raw;
	kiln_buf line;
	kiln_buf unescaped; /* a dedup key string's decoded bytes */
};

struct kiln_curate_pool {
	kiln_curate_pool_options o;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_cond_t pulled;  /* the owner's, in a pull: the input ended and was consumed, or a failure */
	kiln_batch *ring[RING]; /* ring[seq % RING]: submitted, not yet consumed */
	uint64_t next_submit, next_take, next_consume, next_reclaim;
	bool stop;
	bool delivering;   /* a worker is consuming (deliver_on_workers) */
	uint64_t turns_ns; /* CPU time of the workers' serial turns (fills, deliveries) */
	bool hold;         /* abandoning: no worker consumes */
	/* kiln_curate_pool_pull: the workers fill batches too, one at a time */
	kiln_batch_fill fill; /* NULL: the owner submits */
	void *fill_ctx;
	bool filling, fill_end;
	int error; /* the first failure a worker consumed, and its message */
	char error_msg[512];
	kiln_batch *free_list;
	struct worker *workers;
	unsigned started;
};

static int grow(void **ptr, size_t *cap, size_t need, size_t elem)
{
	size_t n;
	void *p;

	if (need <= *cap)
		return 0;
	n = *cap ? *cap * 2 : 256;
	while (n < need)
		n *= 2;
	if (!(p = realloc(*ptr, n * elem)))
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	*ptr = p;
	*cap = n;
	return 0;
}

int kiln_batch_reserve(kiln_batch *b)
{
	size_t cap;

	if (b->keep_raw && b->raw_cap <= b->count) {
		size_t n = b->cap > b->count ? b->cap : b->count + 1024;
		kiln_raw_record *r = realloc(b->raw, n * sizeof(*r));
		if (!r)
			return kiln_error_set(KILN_ENOMEM, "out of memory");
		b->raw = r;
		b->raw_cap = n;
	}
	if (b->count < b->cap)
		return 0;
	cap = b->cap ? b->cap * 2 : 1024;
#define GROW(field)                                                                                          \
	do {                                                                                                 \
		void *p_ = realloc(b->field, cap * sizeof(*b->field));                                       \
		if (!p_)                                                                                     \
			return kiln_error_set(KILN_ENOMEM, "out of memory");                                 \
		b->field = p_;                                                                               \
	} while (0)
	GROW(rec);
	GROW(len);
	GROW(offset);
	GROW(too_long);
	GROW(borrowed);
	if (b->keep_raw) {
		GROW(raw);
		b->raw_cap = cap;
	}
#undef GROW
	b->cap = cap;
	return 0;
}

/* Appends a split's curated records to its writer in runs: each run ends
 * with the record that fills the open shard (the writer then closes it), as
 * record-by-record appends would, so the shards do not depend on batching. */
static int deliver_split(kiln_batch *b, int s, kiln_shard_writer *w)
{
	const char *run = b->out[s].ptr;
	size_t i = 0;
	int rc;

	while (i < b->out_count[s]) {
		uint64_t room = kiln_shard_writer_room(w), bytes = 0;
		size_t first = i, tok_first;

		while (i < b->out_count[s] && bytes < room)
			bytes += b->out_len[s][i++];
		int64_t lo = b->offset[b->out_index[s][first]], hi = b->offset[b->out_index[s][i - 1]];
		bool listed = b->tokens_listed && !b->deduped;

		tok_first = first ? b->tokens_end[s][first - 1] : 0;
		/* the worker found the records' tokens, unless dedup moved records
		 * since (then the writer scans them); a run of all the split's
		 * bytes may be taken as it is */
		if (first == 0 && i == b->out_count[s] && bytes == b->out[s].len)
			rc = kiln_shard_writer_take_run(w, &b->out[s], i, b->topic, b->partition, lo, hi,
			                                listed ? &b->tokens[s] : NULL, 0,
			                                listed ? b->tokens_end[s][i - 1] : 0);
		else if (!listed)
			rc = kiln_shard_writer_append_run(w, run, bytes, i - first, b->topic, b->partition,
			                                  lo, hi);
		else {
			rc = kiln_shard_writer_append_run_tokens(
			    w, run, bytes, i - first, b->topic, b->partition, lo, hi, &b->tokens[s],
			    tok_first, b->tokens_end[s][i - 1] - tok_first);
		}
		if (rc < 0)
			return rc;
		run += bytes;
	}
	return 0;
}

int kiln_batch_deliver(kiln_batch *b, kiln_shard_writer *const writers[KILN_SPLIT_COUNT],
                       kiln_quarantine *quarantine, kiln_stats *d, kiln_profile *profile)
{
	int rc;

	if (profile && b->profiled && (rc = kiln_profile_merge(profile, &b->profile)) < 0)
		return rc;
	for (size_t i = 0; i < b->reject_count; i++) {
		const kiln_batch_reject *x = &b->rejects[i];

		if ((rc = kiln_quarantine_add(quarantine, b->topic, b->partition, b->offset[x->index],
		                              &x->report, b->rec[x->index], b->len[x->index])) < 0)
			return rc;
		d->quarantined_by_code[x->report.v[0].code]++;
	}
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		if ((rc = deliver_split(b, s, writers[s])) < 0)
			return rc;
		d->valid += b->out_count[s];
		d->splits[s].records += b->out_count[s];
	}
	d->quarantined += b->reject_count;
	d->records_in += b->count;
	return 0;
}

static void batch_reset(kiln_batch *b)
{
	if (b->release)
		b->release(b);
	b->release = NULL;
	b->keep_raw = false;
	b->count = 0;
	b->bytes = 0;
	b->topic = NULL;
	b->partition = 0;
	b->opened_ms = 0;
	b->source_ctx = NULL;
	b->decode = NULL;
	b->decode_ctx = NULL;
	b->raw_key[0] = '\0';
	b->tokens_listed = false;
	kiln_buf_reset(&b->in);
	b->state = BATCH_FREE;
	b->rc = 0;
}

static void batch_destroy(kiln_batch *b)
{
	batch_reset(b);
	kiln_buf_free(&b->in);
	free(b->rec);
	free(b->len);
	free(b->offset);
	free(b->too_long);
	kiln_buf_free(&b->decoded);
	free(b->borrowed);
	free(b->raw);
	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		kiln_buf_free(&b->out[i]);
		free(b->out_index[i]);
		free(b->out_len[i]);
		kiln_filter_set_free(&b->tokens[i]);
		free(b->tokens_end[i]);
	}
	free(b->rejects);
	kiln_profile_free(&b->profile);
	free(b->dedup_hash);
	free(b->value_first);
	free(b->value_n);
	free(b->values);
	free(b);
}

/* Writes the raw object of a batch that carries raw records. */
static int land_raw(struct worker *wk, kiln_batch *b)
{
	if (!b->keep_raw || !wk->raw || b->count == 0)
		return 0;
	return kiln_raw_write(wk->raw, b->raw, b->count, b->raw_key);
}

/* Adds the record just curated (wk->line) to the batch's profile. */
static int profile_record(struct worker *wk, kiln_batch *b)
{
	size_t n;
	const kiln_curate_value *v = kiln_curate_values(wk->curator, &n);
	int rc;

	b->profile.records++;
	for (size_t i = 0; i < n; i++)
		if ((rc = kiln_profile_add_value(&b->profile, wk->pool->o.profile, v[i].field, v[i].type,
		                                 v[i].flags, wk->line.ptr + v[i].offset, v[i].len)) < 0)
			return rc;
	return 0;
}

/* The dedup key hash of the record just curated (its values from the
 * curator): KILN_ENOTFOUND, *missing set, when a key field has no value
 * (absent or null). Each field adds its type ('s', 'n', 't', 'f'), its
 * length (u32 LE) and its bytes, strings decoded, to a keyed BLAKE2b-128
 * (docs/FORMATS.md, "dedup/"). */
static int dedup_hash(struct worker *wk, unsigned char out[16], const char **missing)
{
	const kiln_curate_pool_options *o = &wk->pool->o;
	crypto_generichash_state st;
	size_t n;
	const kiln_curate_value *v = kiln_curate_values(wk->curator, &n);

	crypto_generichash_init(&st, o->dedup_key, 32, 16);
	for (size_t k = 0; k < o->dedup_field_count; k++) {
		const kiln_curate_value *x = NULL;
		const char *text;
		size_t len;
		unsigned char head[5];

		for (size_t i = 0; i < n && !x; i++)
			if (v[i].field == o->dedup_fields[k])
				x = &v[i];
		if (!x || x->type == KILN_JSON_NULL) {
			*missing = o->dedup_paths[k];
			return KILN_ENOTFOUND;
		}
		text = wk->line.ptr + x->offset;
		len = x->len;
		if (x->type == KILN_JSON_STRING && (x->flags & KILN_JSON_ESCAPED)) {
			kiln_json_token t = {
			    .type = KILN_JSON_STRING, .flags = x->flags, .ptr = text, .len = len};
			int rc;

			kiln_buf_reset(&wk->unescaped);
			if ((rc = kiln_buf_reserve(&wk->unescaped, len + 1)) < 0)
				return rc;
			len = kiln_json_unescape(wk->unescaped.ptr, len + 1, &t);
			text = wk->unescaped.ptr;
		}
		head[0] = x->type == KILN_JSON_STRING   ? 's'
		          : x->type == KILN_JSON_NUMBER ? 'n'
		          : x->type == KILN_JSON_TRUE   ? 't'
		                                        : 'f';
		for (int i = 0; i < 4; i++)
			head[1 + i] = (unsigned char)((uint64_t)len >> (8 * i));
		crypto_generichash_update(&st, head, sizeof(head));
		crypto_generichash_update(&st, (const unsigned char *)text, len);
	}
	crypto_generichash_final(&st, out, 16);
	return 0;
}

/* Room for the dedup results of every record of b. */
static int dedup_reserve(kiln_batch *b)
{
	size_t cap = b->count ? b->count : 1;

	if (b->dedup_cap >= cap)
		return 0;
	void *h = realloc(b->dedup_hash, cap * sizeof(*b->dedup_hash));
	if (h)
		b->dedup_hash = h;
	void *f = h ? realloc(b->value_first, cap * sizeof(size_t)) : NULL;
	if (f)
		b->value_first = f;
	void *c = f ? realloc(b->value_n, cap * sizeof(size_t)) : NULL;
	if (!c)
		return kiln_error_oom(NULL);
	b->value_n = c;
	b->dedup_cap = cap;
	return 0;
}

/* Keeps the record's curated values (dedup with a profile: the sink
 * profiles the records that are not duplicates). */
static int keep_values(struct worker *wk, kiln_batch *b, size_t i)
{
	size_t n;
	const kiln_curate_value *v = kiln_curate_values(wk->curator, &n);
	int rc;

	if ((rc = grow((void **)&b->values, &b->value_cap, b->value_count + n, sizeof(*v))) < 0)
		return rc;
	memcpy(b->values + b->value_count, v, n * sizeof(*v));
	b->value_first[i] = b->value_count;
	b->value_n[i] = n;
	b->value_count += n;
	return 0;
}

/* Validates and curates every record of a batch (on a worker thread). */
static int process(struct worker *wk, kiln_batch *b)
{
	const kiln_pipeline *p = wk->pool->o.pipeline;
	bool dedup = wk->pool->o.dedup_field_count > 0;
	int rc;

	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		kiln_buf_reset(&b->out[i]);
		b->out_count[i] = 0;
		kiln_filter_set_clear(&b->tokens[i]);
	}
	b->reject_count = 0;
	b->value_count = 0;
	b->deduped = false;
	b->tokens_listed = true;
	if (dedup && (rc = dedup_reserve(b)) < 0)
		return rc;
	if (wk->pool->o.profile && !dedup) {
		if (!b->profiled && (rc = kiln_profile_init(&b->profile, wk->pool->o.profile)) < 0)
			return rc;
		b->profiled = true;
		kiln_profile_clear(&b->profile);
	}
	if ((rc = land_raw(wk, b)) < 0)
		return rc;
	for (size_t i = 0; i < b->count; i++) {
		kiln_report *report;
		const char *split_value = "", *limit_path;
		size_t split_len = 0;

		if ((rc = grow((void **)&b->rejects, &b->reject_cap, b->reject_count + 1,
		               sizeof(*b->rejects))) < 0)
			return rc;
		report = &b->rejects[b->reject_count].report;
		kiln_buf_reset(&wk->line);
		kiln_curate_begin(wk->curator, &wk->line);
		if (b->too_long[i])
			kiln_report_single(report, KILN_REJECT_TOO_LARGE, p->max_record_bytes);
		else if (b->decode) {
			kiln_buf_reset(&b->decoded);
			if ((rc = b->decode(b->decode_ctx, b->rec[i], b->len[i], p->max_record_bytes,
			                    &b->decoded, report)) < 0)
				return rc;
			if (rc == 0)
				kiln_validate_hook(wk->validator, b->decoded.ptr, b->decoded.len, report,
				                   kiln_curate_token, wk->curator);
		} else
			kiln_validate_hook(wk->validator, b->rec[i], b->len[i], report, kiln_curate_token,
			                   wk->curator);
		if (report->count) {
			b->rejects[b->reject_count++].index = i;
			continue;
		}
		if ((rc = kiln_curate_end(wk->curator, &split_value, &split_len)) == KILN_ENOTFOUND) {
			/* valid under the contract, but nothing to split on */
			kiln_report_single(report, KILN_REJECT_MISSING_REQUIRED, 0);
			snprintf(report->v[0].path, sizeof(report->v[0].path), "%s", p->split_key);
			b->rejects[b->reject_count++].index = i;
			continue;
		}
		if (rc == KILN_ELIMIT && (limit_path = kiln_curate_limit_path(wk->curator))) {
			/* a hostile value no detector could decide: the record, not the run */
			kiln_report_single(report, KILN_REJECT_PATTERN_LIMIT, 0);
			snprintf(report->v[0].path, sizeof(report->v[0].path), "%s", limit_path);
			b->rejects[b->reject_count++].index = i;
			continue;
		}
		if (rc < 0)
			return rc;
		const char *missing = NULL;
		if (dedup && (rc = dedup_hash(wk, b->dedup_hash[i], &missing)) == KILN_ENOTFOUND) {
			/* nothing to tell a duplicate by */
			kiln_report_single(report, KILN_REJECT_MISSING_REQUIRED, 0);
			snprintf(report->v[0].path, sizeof(report->v[0].path), "%s", missing);
			b->rejects[b->reject_count++].index = i;
			continue;
		}
		if (rc < 0)
			return rc;
		kiln_split s = kiln_split_assign(wk->pool->o.splitter, split_value, split_len);
		if (b->out_count[s] == b->out_cap[s]) {
			size_t cap = b->out_cap[s];
			if ((rc = grow((void **)&b->out_index[s], &cap, b->out_count[s] + 1,
			               sizeof(size_t))) < 0)
				return rc;
			cap = b->out_cap[s];
			if ((rc = grow((void **)&b->out_len[s], &cap, b->out_count[s] + 1, sizeof(size_t))) <
			    0)
				return rc;
			cap = b->out_cap[s];
			if ((rc = grow((void **)&b->tokens_end[s], &cap, b->out_count[s] + 1,
			               sizeof(size_t))) < 0)
				return rc;
			b->out_cap[s] = cap;
		}
		if ((rc = kiln_buf_put(&b->out[s], wk->line.ptr, wk->line.len)) < 0 ||
		    (rc = kiln_buf_put(&b->out[s], "\n", 1)) < 0)
			return rc;
		if ((rc = kiln_filter_collect(&b->tokens[s], wk->line.ptr, wk->line.len)) < 0)
			return rc;
		b->tokens_end[s][b->out_count[s]] = b->tokens[s].count;
		b->out_index[s][b->out_count[s]] = i;
		b->out_len[s][b->out_count[s]++] = wk->line.len + 1;
		if (b->profiled && !dedup && (rc = profile_record(wk, b)) < 0)
			return rc;
		if (dedup && wk->pool->o.profile && (rc = keep_values(wk, b, i)) < 0)
			return rc;
	}
	return 0;
}

/* Wakes the owner sleeping in a pull once the pull is over (lock held): it
 * sleeps on a condition of its own, so the workers' every step does not
 * wake it. */
static void pull_over(kiln_curate_pool *pool)
{
	if (pool->error || (pool->fill_end && !pool->filling && pool->next_consume == pool->next_submit))
		pthread_cond_signal(&pool->pulled);
}

/* This thread's CPU time, in ns (0 where the clock is missing). */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* deliver_on_workers: consumes the oldest batch and every one after it
 * that is done, unless another worker is at it or one failed (lock held on
 * entry and exit; the first failure is kept for the owner). */
static void deliver_done(kiln_curate_pool *pool)
{
	while (!pool->delivering && !pool->hold && !pool->error && pool->next_consume < pool->next_submit) {
		kiln_batch *b = pool->ring[pool->next_consume % RING];
		int rc;

		if (b->state != BATCH_DONE)
			break;
		uint64_t t0;

		pool->delivering = true;
		pthread_mutex_unlock(&pool->lock);
		t0 = thread_cpu_ns();
		rc = b->rc < 0 ? kiln_error_set(b->rc, "%s", b->err) : pool->o.consume(pool->o.ctx, b);
		t0 = thread_cpu_ns() - t0;
		pthread_mutex_lock(&pool->lock);
		pool->turns_ns += t0;
		pool->delivering = false;
		if (rc < 0) {
			pool->error = rc;
			snprintf(pool->error_msg, sizeof(pool->error_msg), "%s", kiln_error_last());
		} else {
			b->state = BATCH_CONSUMED;
			pool->next_consume++;
		}
		pthread_cond_broadcast(&pool->cond);
		pull_over(pool);
	}
}

/* kiln_curate_pool_pull: the next batch, filled by this worker and taken
 * by it, or NULL when it is not this worker's turn (another fills, the ring
 * is full, the input ended or something failed). Lock held on entry and
 * exit; the owner sleeps in the pull, so the workers reclaim and use the
 * free list. */
static void reclaim_consumed(kiln_curate_pool *pool);

static kiln_batch *pull_batch(kiln_curate_pool *pool)
{
	kiln_batch *b;
	uint64_t t0;
	int rc;

	if (!pool->fill || pool->filling || pool->fill_end || pool->error || pool->hold || pool->stop)
		return NULL;
	reclaim_consumed(pool);
	if (pool->next_submit - pool->next_reclaim >= RING)
		return NULL;
	if (!(b = kiln_curate_pool_batch(pool))) {
		pool->error = kiln_error_oom(NULL);
		snprintf(pool->error_msg, sizeof(pool->error_msg), "%s", kiln_error_last());
		pthread_cond_broadcast(&pool->cond);
		pull_over(pool);
		return NULL;
	}
	pool->filling = true;
	pthread_mutex_unlock(&pool->lock);
	t0 = thread_cpu_ns();
	rc = pool->fill(pool->fill_ctx, b);
	if (rc < 0)
		snprintf(b->err, sizeof(b->err), "%s", kiln_error_last());
	t0 = thread_cpu_ns() - t0;
	pthread_mutex_lock(&pool->lock);
	pool->turns_ns += t0;
	pool->filling = false;
	pthread_cond_broadcast(&pool->cond);
	pull_over(pool); /* the owner may wait for this fill to be over */
	if (rc <= 0 || b->count == 0) {
		if (rc < 0 && !pool->error) {
			pool->error = rc;
			snprintf(pool->error_msg, sizeof(pool->error_msg), "%s", b->err);
		}
		pool->fill_end = pool->fill_end || rc == 0;
		kiln_curate_pool_recycle(pool, b);
		pull_over(pool);
		return NULL;
	}
	b->seq = pool->next_submit;
	b->state = BATCH_TAKEN;
	pool->ring[pool->next_submit % RING] = b;
	pool->next_submit++;
	pool->next_take++;
	return b;
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	kiln_curate_pool *pool = wk->pool;
	char name[16];

	snprintf(name, sizeof(name), "curate-%u", (unsigned)(wk - pool->workers));
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&pool->lock);
	for (;;) {
		kiln_batch *b;

		if (pool->stop)
			break;
		b = pool->next_take < pool->next_submit ? pool->ring[pool->next_take % RING] : NULL;
		if (b && b->state == BATCH_FILLED) {
			b->state = BATCH_TAKEN;
			pool->next_take++;
		} else if (!(b = pull_batch(pool))) {
			pthread_cond_wait(&pool->cond, &pool->lock);
			continue;
		}
		pthread_mutex_unlock(&pool->lock);
		b->rc = process(wk, b);
		if (b->rc < 0)
			snprintf(b->err, sizeof(b->err), "%s", kiln_error_last());
		pthread_mutex_lock(&pool->lock);
		b->state = BATCH_DONE;
		pthread_cond_broadcast(&pool->cond);
		if (pool->o.deliver_on_workers)
			deliver_done(pool);
	}
	pthread_mutex_unlock(&pool->lock);
	return NULL;
}

static void stop_workers(kiln_curate_pool *pool)
{
	pthread_mutex_lock(&pool->lock);
	pool->stop = true;
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
	for (unsigned i = 0; i < pool->started; i++)
		pthread_join(pool->workers[i].thread, NULL);
	pool->started = 0;
}

static int start_workers(kiln_curate_pool *pool)
{
	pool->stop = false;
	for (unsigned i = 0; i < pool->o.workers; i++) {
		if (pthread_create(&pool->workers[i].thread, NULL, worker_main, &pool->workers[i]) != 0) {
			stop_workers(pool);
			return kiln_error_set(KILN_EIO, "cannot start worker threads");
		}
		pool->started++;
	}
	return 0;
}

int kiln_curate_pool_new(kiln_curate_pool **out, const kiln_curate_pool_options *o)
{
	kiln_curate_pool *pool = calloc(1, sizeof(*pool));
	kiln_validator_options vopts = {
	    .unknown_fields = o->pipeline->unknown_fields,
	    .limits = {.max_depth = o->pipeline->max_depth, .max_bytes = o->pipeline->max_record_bytes}};
	kiln_curator_options copts = {.contract = o->contract,
	                              .key = o->key,
	                              .split_field = o->split_field,
	                              .limits = vopts.limits,
	                              .observe = o->profile != NULL || o->dedup_field_count > 0};
	int rc;

	*out = NULL;
	if (!pool || !(pool->workers = calloc(o->workers, sizeof(*pool->workers)))) {
		free(pool);
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	}
	pool->o = *o;
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->cond, NULL);
	pthread_cond_init(&pool->pulled, NULL);
	for (unsigned i = 0; i < o->workers; i++) {
		struct worker *wk = &pool->workers[i];

		wk->pool = pool;
		if (!(wk->validator = kiln_validator_new(o->contract, &vopts))) {
			rc = kiln_error_set(KILN_ENOMEM, "out of memory");
			goto fail;
		}
		if ((rc = kiln_curator_new(&wk->curator, &copts)) < 0)
			goto fail;
		if (o->raw_store && (rc = kiln_raw_writer_new(&wk->raw, o->raw_store, RAW_LEVEL, NULL)) < 0)
			goto fail;
	}
	if ((rc = start_workers(pool)) < 0)
		goto fail;
	*out = pool;
	return 0;
fail:
	kiln_curate_pool_free(pool);
	return rc;
}

void kiln_curate_pool_free(kiln_curate_pool *pool)
{
	if (!pool)
		return;
	kiln_curate_pool_abandon(pool);
	stop_workers(pool);
	for (unsigned i = 0; i < pool->o.workers; i++) {
		kiln_validator_free(pool->workers[i].validator);
		kiln_curator_free(pool->workers[i].curator);
		kiln_raw_writer_free(pool->workers[i].raw);
		kiln_buf_free(&pool->workers[i].line);
		kiln_buf_free(&pool->workers[i].unescaped);
	}
	while (pool->free_list) {
		kiln_batch *b = pool->free_list;
		pool->free_list = b->next_free;
		batch_destroy(b);
	}
	pthread_mutex_destroy(&pool->lock);
	pthread_cond_destroy(&pool->cond);
	pthread_cond_destroy(&pool->pulled);
	free(pool->workers);
	free(pool);
}

kiln_batch *kiln_curate_pool_batch(kiln_curate_pool *pool)
{
	kiln_batch *b = pool->free_list;

	if (b)
		pool->free_list = b->next_free;
	else if (!(b = calloc(1, sizeof(*b))))
		return NULL;
	b->next_free = NULL;
	b->state = BATCH_FILLING;
	return b;
}

void kiln_curate_pool_recycle(kiln_curate_pool *pool, kiln_batch *b)
{
	if (!b)
		return;
	batch_reset(b);
	b->next_free = pool->free_list;
	pool->free_list = b;
}

/* Consumes the oldest batch if it is done (lock held on entry and exit).
 * 1: consumed one, 0: none ready, < 0: an error. */
static int consume_one(kiln_curate_pool *pool)
{
	kiln_batch *b;
	int rc;

	if (pool->next_consume == pool->next_submit)
		return 0;
	b = pool->ring[pool->next_consume % RING];
	if (b->state != BATCH_DONE)
		return 0;
	pthread_mutex_unlock(&pool->lock);
	rc = b->rc < 0 ? kiln_error_set(b->rc, "%s", b->err) : pool->o.consume(pool->o.ctx, b);
	pthread_mutex_lock(&pool->lock);
	if (rc < 0)
		return rc;
	pool->ring[pool->next_consume % RING] = NULL;
	pool->next_consume++;
	pool->next_reclaim = pool->next_consume;
	kiln_curate_pool_recycle(pool, b);
	return 1;
}

/* deliver_on_workers: recycles what the workers consumed (lock held). */
static void reclaim_consumed(kiln_curate_pool *pool)
{
	while (pool->next_reclaim < pool->next_consume) {
		kiln_batch *b = pool->ring[pool->next_reclaim % RING];

		pool->ring[pool->next_reclaim % RING] = NULL;
		pool->next_reclaim++;
		kiln_curate_pool_recycle(pool, b);
	}
}

/* reclaim_consumed; 0, or the first failure of a worker (lock held). */
static int reclaim(kiln_curate_pool *pool)
{
	reclaim_consumed(pool);
	if (pool->error)
		return kiln_error_set(pool->error, "%s", pool->error_msg);
	return 0;
}

/* One step of waiting for the oldest batch: the owner consumes it when it
 * is done (1), or the workers' progress is reclaimed (0 when nothing moved,
 * the caller then waits); < 0: an error (lock held on entry and exit). */
static int settle_one(kiln_curate_pool *pool)
{
	uint64_t before = pool->next_reclaim;
	int rc;

	if (!pool->o.deliver_on_workers)
		return consume_one(pool);
	if ((rc = reclaim(pool)) < 0)
		return rc;
	return pool->next_reclaim > before;
}

int kiln_curate_pool_submit(kiln_curate_pool *pool, kiln_batch *b)
{
	int rc = 0;

	if (b->count == 0) {
		kiln_curate_pool_recycle(pool, b);
		return 0;
	}
	pthread_mutex_lock(&pool->lock);
	if (pool->o.deliver_on_workers)
		rc = reclaim(pool);
	while (rc >= 0 && pool->next_submit - pool->next_reclaim >= RING) {
		if ((rc = settle_one(pool)) < 0)
			break;
		if (rc == 0)
			pthread_cond_wait(&pool->cond, &pool->lock);
	}
	if (rc >= 0) {
		b->seq = pool->next_submit;
		b->state = BATCH_FILLED;
		pool->ring[pool->next_submit % RING] = b;
		pool->next_submit++;
		pthread_cond_broadcast(&pool->cond);
		rc = 0;
	}
	pthread_mutex_unlock(&pool->lock);
	if (rc < 0)
		kiln_curate_pool_recycle(pool, b);
	return rc;
}

int kiln_curate_pool_poll(kiln_curate_pool *pool)
{
	int rc;

	pthread_mutex_lock(&pool->lock);
	while ((rc = settle_one(pool)) > 0)
		;
	pthread_mutex_unlock(&pool->lock);
	return rc;
}

int kiln_curate_pool_drain(kiln_curate_pool *pool)
{
	int rc = 0;

	pthread_mutex_lock(&pool->lock);
	while (pool->next_reclaim < pool->next_submit) {
		if ((rc = settle_one(pool)) < 0)
			break;
		if (rc == 0)
			pthread_cond_wait(&pool->cond, &pool->lock);
	}
	pthread_mutex_unlock(&pool->lock);
	return rc < 0 ? rc : 0;
}

int kiln_curate_pool_pull(kiln_curate_pool *pool, kiln_batch_fill fill, void *ctx)
{
	int rc;

	if (!pool->o.deliver_on_workers)
		return kiln_error_set(KILN_EINVALID, "curate pool: pull needs deliver_on_workers");
	pthread_mutex_lock(&pool->lock);
	pool->fill = fill;
	pool->fill_ctx = ctx;
	pool->fill_end = false;
	pthread_cond_broadcast(&pool->cond);
	while (!pool->error && !(pool->fill_end && pool->next_consume == pool->next_submit))
		pthread_cond_wait(&pool->pulled, &pool->lock);
	/* no fill from here, and none in flight: the source is the caller's again */
	pool->fill = NULL;
	while (pool->filling)
		pthread_cond_wait(&pool->pulled, &pool->lock);
	rc = reclaim(pool);
	pthread_mutex_unlock(&pool->lock);
	return rc;
}

void kiln_curate_pool_abandon(kiln_curate_pool *pool)
{
	pthread_mutex_lock(&pool->lock);
	/* let the workers finish what they hold and deliver; nothing new is
	 * taken (a stored failure stops delivery) */
	pool->hold = true;
	for (;;) {
		bool busy = pool->delivering;

		for (uint64_t s = pool->next_consume; s < pool->next_submit; s++)
			if (pool->ring[s % RING]->state == BATCH_TAKEN)
				busy = true;
		if (!busy)
			break;
		pthread_cond_wait(&pool->cond, &pool->lock);
	}
	for (uint64_t s = pool->next_reclaim; s < pool->next_submit; s++) {
		kiln_batch *b = pool->ring[s % RING];
		pool->ring[s % RING] = NULL;
		kiln_curate_pool_recycle(pool, b);
	}
	pool->next_reclaim = pool->next_consume = pool->next_take = pool->next_submit;
	pool->error = 0;
	pool->hold = false;
	pthread_mutex_unlock(&pool->lock);
}

uint64_t kiln_curate_pool_turns_cpu_ns(kiln_curate_pool *pool)
{
	uint64_t ns;

	pthread_mutex_lock(&pool->lock);
	ns = pool->turns_ns;
	pthread_mutex_unlock(&pool->lock);
	return ns;
}
