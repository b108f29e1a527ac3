/* A batch run over a file or stdin (see curate_run.h). Offsets of a file
 * source are 0-based line numbers; lineage.json keeps the next one, the
 * bytes read and the BLAKE2b-256 of those bytes.
 *
 * Threads: the calling thread reads lines into batches and, in sequence
 * order, hands finished batches to the shard writers and the quarantine;
 * `workers` threads validate and curate batches (each with its own
 * validator and curator); each split's shard writer compresses and stores
 * closed shards on its own thread. Batches live in a ring of RING slots that
 * cycle FREE -> FILLED -> TAKEN -> DONE -> FREE, so memory stays bounded
 * whatever the input size, and output order is input order. */
#include "ingest/curate_run.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "contract/contract.h"
#include "contract/validate.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/line_reader.h"
#include "manifest/remote.h"
#include "manifest/sshsig.h"
#include "manifest/version.h"
#include "mask/curate.h"
#include "mask/key.h"
#include "mask/token.h"
#include "shard/quarantine.h"
#include "shard/split.h"
#include "shard/writer.h"
#include "store/store.h"

struct resume {
	const char *topic;
	bool found;
	int64_t next;
	uint64_t bytes;
	char prefix[65];
	char path[4096];
};

static int find_lineage(void *ctx, const kiln_lineage_entry *e)
{
	struct resume *r = ctx;

	if (e->partition != 0 || strcmp(e->topic, r->topic) != 0)
		return 0;
	r->found = true;
	r->next = e->next;
	r->bytes = e->bytes;
	snprintf(r->prefix, sizeof(r->prefix), "%s", e->prefix_blake2b ? e->prefix_blake2b : "");
	snprintf(r->path, sizeof(r->path), "%s", e->path ? e->path : "");
	return 0;
}

/* The fingerprint of the first `bytes` bytes of a file (docs/FORMATS.md,
 * lineage.json): BLAKE2b-256 of those bytes when there are at most 2 MiB,
 * else of their first MiB followed by their last MiB. It tells a replaced
 * file from a grown one without reading all of it again. */
#define FINGERPRINT_PART (1u << 20)

static int hash_range(int fd, const char *path, uint64_t from, uint64_t to, crypto_generichash_state *st)
{
	static _Thread_local char block[1 << 16];

	while (from < to) {
		size_t want = to - from < sizeof(block) ? (size_t)(to - from) : sizeof(block);
		ssize_t n = pread(fd, block, want, (off_t)from);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return kiln_error_set(KILN_EIO, "%s: read: %s", path, strerror(errno));
		if (n == 0)
			return kiln_error_set(KILN_EINVALID, "%s: shorter (%llu bytes) than the %llu bytes an earlier run read",
					      path, (unsigned long long)from, (unsigned long long)to);
		crypto_generichash_update(st, (const unsigned char *)block, (size_t)n);
		from += (uint64_t)n;
	}
	return 0;
}

static int fingerprint(int fd, const char *path, uint64_t bytes, char out[65])
{
	crypto_generichash_state st;
	unsigned char digest[32];
	int rc;

	crypto_generichash_init(&st, NULL, 0, sizeof(digest));
	if (bytes <= 2 * (uint64_t)FINGERPRINT_PART)
		rc = hash_range(fd, path, 0, bytes, &st);
	else if ((rc = hash_range(fd, path, 0, FINGERPRINT_PART, &st)) == 0)
		rc = hash_range(fd, path, bytes - FINGERPRINT_PART, bytes, &st);
	if (rc < 0)
		return rc;
	crypto_generichash_final(&st, digest, sizeof(digest));
	sodium_bin2hex(out, 65, digest, sizeof(digest));
	return 0;
}

static void fmt_ratio(kiln_buf *b, double r)
{
	kiln_buf_printf(b, "%.4f", r);
	while (b->len && b->ptr[b->len - 1] == '0' && b->ptr[b->len - 2] != '.')
		b->len--;
}

/* dataset.json: what a reader needs to interpret (and recompute) the data. */
static int render_dataset_json(kiln_buf *b, const kiln_pipeline *p, const kiln_contract *k, const kiln_key *key)
{
	kiln_buf_puts(b, "{\n  \"name\": ");
	kiln_buf_put_json_string(b, p->dataset, strlen(p->dataset));
	kiln_buf_puts(b, ",\n  \"contract\": {\"id\":");
	kiln_buf_put_json_string(b, k->id, strlen(k->id));
	kiln_buf_puts(b, ",\"version\":");
	kiln_buf_put_json_string(b, k->version, strlen(k->version));
	kiln_buf_puts(b, ",\"api_version\":");
	kiln_buf_put_json_string(b, k->api_version, strlen(k->api_version));
	kiln_buf_puts(b, ",\"schema\":");
	kiln_buf_put_json_string(b, k->schema_name, strlen(k->schema_name));
	kiln_buf_printf(b, ",\"digest\":\"blake2b-256:%s\"},\n", k->digest_hex);
	kiln_buf_printf(b,
			"  \"pseudonymisation\": {\"scheme\":\"%s\",\"key_id\":\"%s\",\"key_version\":%u,"
			"\"prefix\":\"p%u_\",\"redact_marker\":\"%s\"},\n",
			KILN_TOKEN_SCHEME, key->id, key->version, key->version, KILN_REDACTED);
	kiln_buf_printf(b, "  \"split\": {\"scheme\":\"%s\",\"key\":", KILN_SPLIT_SCHEME);
	kiln_buf_put_json_string(b, p->split_key, strlen(p->split_key));
	kiln_buf_puts(b, ",\"salt\":");
	kiln_buf_put_json_string(b, p->split_salt, strlen(p->split_salt));
	kiln_buf_puts(b, ",\"ratios\":{");
	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		kiln_buf_printf(b, "%s\"%s\":", i ? "," : "", kiln_split_name(i));
		fmt_ratio(b, p->ratios[i]);
	}
	kiln_buf_puts(b, "}},\n");
	return kiln_buf_printf(b,
			       "  \"shards\": {\"format\":\"jsonl\",\"compression\":\"zstd\",\"zstd_level\":%d,"
			       "\"target_bytes\":%zu,\"hash\":\"blake2b-256\",\"key\":\"shards/<hh>/<hash>.jsonl.zst\"}\n}\n",
			       p->zstd_level, p->target_bytes);
}

/* The line of dataset.json that starts with `"name":`, or NULL. */
static const char *json_line(const char *text, size_t len, const char *name, size_t *out_len)
{
	char needle[64];
	int n = snprintf(needle, sizeof(needle), "\n  \"%s\":", name);
	const char *at = memmem(text, len, needle, (size_t)n);
	const char *end;

	if (!at)
		return NULL;
	at++;
	end = memchr(at, '\n', len - (size_t)(at - text));
	*out_len = end ? (size_t)(end - at) : len - (size_t)(at - text);
	return at;
}

/* A branch keeps one pseudonymisation key and one split definition for its
 * whole history: tokens and splits of old and new shards must agree. A
 * change is a new dataset version, on a new branch. */
static int check_same_definition(const kiln_pipeline *p, kiln_manifest *m, const kiln_buf *now)
{
	static const char *const parts[] = { "pseudonymisation", "split" };
	kiln_buf before = KILN_BUF_INIT(0);
	int rc = kiln_manifest_read(m, p->dataset, p->branch, "dataset.json", &before);

	if (rc <= 0) {
		kiln_buf_free(&before);
		return rc;
	}
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		size_t a_len = 0, b_len = 0;
		const char *a = json_line(before.ptr, before.len, parts[i], &a_len);
		const char *b = json_line(now->ptr, now->len, parts[i], &b_len);
		if (a && b && (a_len != b_len || memcmp(a, b, a_len) != 0)) {
			rc = kiln_error_set(KILN_EINVALID,
					    "%s: the %s settings (%s) differ from those %s/%s was made with; a new key, "
					    "split key, salt or ratios is a new dataset version: run on a new branch (--set branch=NAME)",
					    p->file, parts[i], i == 0 ? "key" : "key, salt, ratios", p->dataset, p->branch);
			break;
		}
	}
	kiln_buf_free(&before);
	return rc < 0 ? rc : 0;
}

/* The split key must be a scalar field at the top level that keeps a value
 * in the curated record. (A record without a value for it cannot be placed:
 * it is quarantined as missing_required, whether or not the contract
 * requires the field.) */
static int check_split_key(const kiln_pipeline *p, const kiln_contract *k, const kiln_field **out)
{
	const kiln_field *f = kiln_field_child(k->root, p->split_key, strlen(p->split_key),
					       kiln_json_hash(p->split_key, strlen(p->split_key)));

	if (!f)
		return kiln_error_set(KILN_EINVALID, "%s: split.key: the contract %s has no top-level field \"%s\"",
				      p->file, k->file, p->split_key);
	if (f->type == KILN_LTYPE_OBJECT || f->type == KILN_LTYPE_ARRAY)
		return kiln_error_set(KILN_EINVALID, "%s: split.key: field \"%s\" must be a scalar", p->file, p->split_key);
	if (f->pseudo_mode == KILN_PSEUDO_DROP || f->pseudo_mode == KILN_PSEUDO_REDACT)
		return kiln_error_set(KILN_EINVALID,
				      "%s: split.key: field \"%s\" is dropped or redacted in curated records", p->file,
				      p->split_key);
	*out = f;
	return 0;
}


#define RING 8
#define BATCH_BYTES (1u << 20)
#define BATCH_LINES 8192

enum slot_state { SLOT_FREE, SLOT_FILLED, SLOT_TAKEN, SLOT_DONE };

struct qitem {
	size_t line;
	kiln_report report;
};

struct batch {
	enum slot_state state;
	uint64_t seq;
	int64_t first_offset;
	kiln_buf in; /* the lines' bytes, back to back */
	size_t *start, *len;
	bool *too_long;
	size_t count, cap;
	/* results */
	kiln_buf out[KILN_SPLIT_COUNT]; /* curated lines, '\n'-terminated */
	size_t *out_line[KILN_SPLIT_COUNT]; /* input line of each curated line */
	size_t *out_len[KILN_SPLIT_COUNT];  /* its length, without the '\n' */
	size_t out_count[KILN_SPLIT_COUNT], out_cap[KILN_SPLIT_COUNT];
	struct qitem *q;
	size_t q_count, q_cap;
	int rc;
	char err[512];
};

struct worker {
	struct run *run;
	pthread_t thread;
	kiln_validator *validator;
	kiln_curator *curator;
	kiln_buf line;
};

struct run {
	const kiln_pipeline *p;
	const kiln_splitter *splitter;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct batch ring[RING];
	uint64_t next_take; /* seq the next idle worker takes */
	bool stop;
};

static int grow(void **ptr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap * 2 : 64;
	while (n < need)
		n *= 2;
	void *p = realloc(*ptr, n * elem);
	if (!p)
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	*ptr = p;
	*cap = n;
	return 0;
}

static void batch_free(struct batch *b)
{
	kiln_buf_free(&b->in);
	free(b->start);
	free(b->len);
	free(b->too_long);
	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		kiln_buf_free(&b->out[i]);
		free(b->out_line[i]);
		free(b->out_len[i]);
	}
	free(b->q);
}

/* Validates and curates every line of a batch (on a worker thread). */
static int process(struct worker *wk, struct batch *b)
{
	const kiln_pipeline *p = wk->run->p;
	int rc;

	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		kiln_buf_reset(&b->out[i]);
		b->out_count[i] = 0;
	}
	b->q_count = 0;
	for (size_t i = 0; i < b->count; i++) {
		const char *rec = b->in.ptr + b->start[i];
		kiln_report *report;
		const char *split_value = "";
		size_t split_len = 0;

		if ((rc = grow((void **)&b->q, &b->q_cap, b->q_count + 1, sizeof(*b->q))) < 0)
			return rc;
		report = &b->q[b->q_count].report;
		kiln_buf_reset(&wk->line);
		kiln_curate_begin(wk->curator, &wk->line);
		if (b->too_long[i])
			kiln_report_single(report, KILN_REJECT_TOO_LARGE, p->max_record_bytes);
		else
			kiln_validate_hook(wk->validator, rec, b->len[i], report, kiln_curate_token, wk->curator);
		if (report->count) {
			b->q[b->q_count++].line = i;
			continue;
		}
		if ((rc = kiln_curate_end(wk->curator, &split_value, &split_len)) == KILN_ENOTFOUND) {
			/* valid under the contract, but nothing to split on */
			kiln_report_single(report, KILN_REJECT_MISSING_REQUIRED, 0);
			snprintf(report->v[0].path, sizeof(report->v[0].path), "%s", p->split_key);
			b->q[b->q_count++].line = i;
			continue;
		}
		if (rc < 0)
			return rc;
		kiln_split s = kiln_split_assign(wk->run->splitter, split_value, split_len);
		if (b->out_count[s] == b->out_cap[s]) {
			size_t cap = b->out_cap[s] ? b->out_cap[s] * 2 : 1024;
			size_t *ol = realloc(b->out_line[s], cap * sizeof(*ol));
			size_t *on = ol ? realloc(b->out_len[s], cap * sizeof(*on)) : NULL;
			if (ol)
				b->out_line[s] = ol;
			if (!on)
				return kiln_error_set(KILN_ENOMEM, "out of memory");
			b->out_len[s] = on;
			b->out_cap[s] = cap;
		}
		if ((rc = kiln_buf_put(&b->out[s], wk->line.ptr, wk->line.len)) < 0)
			return rc;
		b->out_line[s][b->out_count[s]] = i;
		b->out_len[s][b->out_count[s]++] = wk->line.len;
	}
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	struct run *r = wk->run;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		struct batch *b = &r->ring[r->next_take % RING];
		if (r->stop)
			break;
		if (b->state != SLOT_FILLED || b->seq != r->next_take) {
			pthread_cond_wait(&r->cond, &r->lock);
			continue;
		}
		b->state = SLOT_TAKEN;
		r->next_take++;
		pthread_mutex_unlock(&r->lock);
		b->rc = process(wk, b);
		if (b->rc < 0)
			snprintf(b->err, sizeof(b->err), "%s", kiln_error_last());
		pthread_mutex_lock(&r->lock);
		b->state = SLOT_DONE;
		pthread_cond_broadcast(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* Fills a batch from the reader; returns lines read (0 at end) or an error. */
static int fill(kiln_line_reader *reader, struct batch *b, uint64_t *bytes_read)
{
	kiln_line line;
	int rc = 0;

	kiln_buf_reset(&b->in);
	b->count = 0;
	while (b->count < BATCH_LINES && b->in.len < BATCH_BYTES && (rc = kiln_line_reader_next(reader, &line)) > 0) {
		if (b->count == b->cap) {
			size_t cap = b->cap ? b->cap * 2 : 1024;
			size_t *st = realloc(b->start, cap * sizeof(*st));
			size_t *ln = st ? realloc(b->len, cap * sizeof(*ln)) : NULL;
			bool *tl = ln ? realloc(b->too_long, cap * sizeof(*tl)) : NULL;
			if (st)
				b->start = st;
			if (ln)
				b->len = ln;
			if (!tl)
				return kiln_error_set(KILN_ENOMEM, "out of memory");
			b->too_long = tl;
			b->cap = cap;
		}
		b->start[b->count] = b->in.len;
		b->len[b->count] = line.len;
		b->too_long[b->count] = line.too_long;
		if (!line.too_long && (rc = kiln_buf_put(&b->in, line.ptr, line.len)) < 0)
			return rc;
		b->count++;
		*bytes_read = line.offset_end;
	}
	return rc < 0 ? rc : (int)(b->count > 0);
}

/* Hands a processed batch to the writers and the quarantine (in order). */
static int consume(const kiln_pipeline *p, struct batch *b, kiln_shard_writer **writers, kiln_quarantine *q,
		   kiln_stats *d)
{
	int rc;

	if (b->rc < 0)
		return kiln_error_set(b->rc, "%s", b->err);
	d->records_in += b->count;
	for (size_t i = 0; i < b->q_count; i++) {
		const struct qitem *x = &b->q[i];
		d->quarantined++;
		d->quarantined_by_code[x->report.v[0].code]++;
		if ((rc = kiln_quarantine_add(q, p->source_name, 0, b->first_offset + (int64_t)x->line, &x->report,
					      b->too_long[x->line] ? NULL : b->in.ptr + b->start[x->line],
					      b->len[x->line])) < 0)
			return rc;
	}
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		const char *line = b->out[s].ptr;
		for (size_t i = 0; i < b->out_count[s]; i++) {
			if ((rc = kiln_shard_writer_append(writers[s], line, b->out_len[s][i], p->source_name, 0,
							   b->first_offset + (int64_t)b->out_line[s][i])) < 0)
				return rc;
			line += b->out_len[s][i];
		}
		d->valid += b->out_count[s];
		d->splits[s].records += b->out_count[s];
	}
	return 0;
}

static unsigned worker_count(const kiln_pipeline *p)
{
	long n = p->workers ? (long)p->workers : sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
}

/* Reads, processes and consumes every record; the run's core loop. */
static int pump(const kiln_pipeline *p, struct run *r, struct worker *workers, unsigned nworkers,
		kiln_line_reader *reader, kiln_shard_writer **writers, kiln_quarantine *q, kiln_run_result *out,
		uint64_t *bytes_read)
{
	uint64_t next_fill = 0, next_consume = 0;
	bool eof = false;
	int rc = 0;

	for (unsigned i = 0; i < nworkers; i++)
		if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0) {
			rc = kiln_error_set(KILN_EIO, "cannot start worker threads");
			nworkers = i;
			goto stop;
		}
	pthread_mutex_lock(&r->lock);
	while (!eof || next_consume < next_fill) {
		struct batch *c = &r->ring[next_consume % RING];
		struct batch *f = &r->ring[next_fill % RING];

		if (next_consume < next_fill && c->state == SLOT_DONE) {
			pthread_mutex_unlock(&r->lock);
			rc = consume(p, c, writers, q, &out->delta);
			pthread_mutex_lock(&r->lock);
			if (rc < 0)
				break;
			c->state = SLOT_FREE;
			next_consume++;
			continue;
		}
		if (!eof && f->state == SLOT_FREE) {
			pthread_mutex_unlock(&r->lock);
			f->first_offset = (int64_t)out->next_offset;
			rc = fill(reader, f, bytes_read);
			pthread_mutex_lock(&r->lock);
			if (rc < 0)
				break;
			if (rc == 0) {
				eof = true;
				continue;
			}
			out->next_offset += f->count;
			f->seq = next_fill++;
			f->state = SLOT_FILLED;
			pthread_cond_broadcast(&r->cond);
			continue;
		}
		pthread_cond_wait(&r->cond, &r->lock);
	}
	r->stop = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
stop:
	if (nworkers && rc < 0) {
		pthread_mutex_lock(&r->lock);
		r->stop = true;
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
	}
	for (unsigned i = 0; i < nworkers; i++)
		pthread_join(workers[i].thread, NULL);
	return rc < 0 ? rc : 0;
}

/* With manifest.remote: sends the branch there (rebased onto what other hosts
 * pushed, see manifest/remote.h); a branch that does not exist yet has nothing
 * to send. */
static int push_branch(const kiln_pipeline *p, kiln_manifest *manifest, char commit[41])
{
	kiln_buf probe = KILN_BUF_INIT(0);
	char ref[300];
	int rc;

	if (!p->manifest_remote)
		return 0;
	rc = kiln_manifest_read(manifest, p->dataset, p->branch, "dataset.json", &probe);
	kiln_buf_free(&probe);
	if (rc <= 0)
		return rc;
	snprintf(ref, sizeof(ref), "refs/heads/%s/%s", p->dataset, p->branch);
	if ((rc = kiln_manifest_push(manifest, p->manifest_remote, ref)) < 0)
		return rc;
	/* a rebased push replaced this run's commit: report the one on the branch */
	if (commit[0]) {
		kiln_version v;

		snprintf(ref, sizeof(ref), "%s@%s", p->dataset, p->branch);
		if ((rc = kiln_version_resolve(manifest, ref, &v)) < 0)
			return rc;
		memcpy(commit, v.commit, 41);
	}
	return 0;
}

int kiln_curate_run(const kiln_pipeline *p, kiln_run_result *out)
{
	kiln_contract *contract = NULL;
	kiln_contract_options copts = { .schema = p->schema };
	kiln_validator_options vopts = { .unknown_fields = p->unknown_fields,
					 .limits = { .max_depth = p->max_depth, .max_bytes = p->max_record_bytes } };
	kiln_key key;
	kiln_signing_key signing_key = { 0 };
	kiln_store *store = NULL;
	kiln_manifest *manifest = NULL;
	kiln_shard_writer *writers[KILN_SPLIT_COUNT] = { 0 };
	kiln_quarantine *quarantine = NULL;
	kiln_line_reader *reader = NULL;
	kiln_splitter splitter;
	kiln_buf dataset_json = KILN_BUF_INIT(0);
	const kiln_field *split_field = NULL;
	struct resume resume = { .topic = p->source_name };
	struct run *run = NULL;
	struct worker *workers = NULL;
	unsigned nworkers = worker_count(p);
	kiln_stats *d = &out->delta;
	int fd = -1, rc;
	bool key_loaded = false;
	uint64_t bytes_read = 0;
	char prefix_hex[65] = "";

	memset(out, 0, sizeof(*out));
	if (sodium_init() < 0)
		return kiln_error_set(KILN_EIO, "libsodium failed to initialise");

	if ((rc = kiln_contract_load(&contract, p->contract, &copts)) < 0 ||
	    (rc = check_split_key(p, contract, &split_field)) < 0)
		goto cleanup;
	rc = p->key_file ? kiln_key_load_file(&key, p->key_file, p->key_version)
			 : kiln_key_load_env(&key, p->key_env, p->key_version);
	if (rc < 0)
		goto cleanup;
	key_loaded = true;
	if (p->signing_key_file && (rc = kiln_signing_key_load(&signing_key, p->signing_key_file)) < 0)
		goto cleanup;
	if ((rc = kiln_splitter_init(&splitter, p->split_salt, p->ratios)) < 0 ||
	    (rc = kiln_store_open(&store, p->store_url, &p->store)) < 0 ||
	    (rc = kiln_manifest_open(&manifest, p->manifest_repo)) < 0 ||
	    (p->manifest_remote && (rc = kiln_manifest_fetch(manifest, p->manifest_remote, p->dataset)) < 0) ||
	    (rc = render_dataset_json(&dataset_json, p, contract, &key)) < 0 ||
	    (rc = check_same_definition(p, manifest, &dataset_json)) < 0 ||
	    (rc = kiln_manifest_lineage(manifest, p->dataset, p->branch, find_lineage, &resume)) < 0)
		goto cleanup;

	/* the input, resumed after what earlier runs covered */
	if (p->source_kind == KILN_SOURCE_FILE) {
		fd = open(p->source_path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = kiln_error_set(errno == ENOENT ? KILN_ENOTFOUND : KILN_EIO, "%s: cannot open: %s",
					    p->source_path, strerror(errno));
			goto cleanup;
		}
		if (resume.found && resume.bytes) {
			char now[65];
			if ((rc = fingerprint(fd, p->source_path, resume.bytes, now)) < 0)
				goto cleanup;
			if (strcmp(now, resume.prefix) != 0) {
				rc = kiln_error_set(KILN_EINVALID,
						    "%s: its first %llu bytes are not those an earlier run of source %s "
						    "read (lineage.json on %s/%s); give the new input another source.name",
						    p->source_path, (unsigned long long)resume.bytes, p->source_name,
						    p->dataset, p->branch);
				goto cleanup;
			}
			if (lseek(fd, (off_t)resume.bytes, SEEK_SET) < 0) {
				rc = kiln_error_set(KILN_EIO, "%s: seek: %s", p->source_path, strerror(errno));
				goto cleanup;
			}
		}
	} else {
		fd = STDIN_FILENO;
		resume.bytes = 0; /* stdin: offsets go on, nothing to skip or check */
	}
	out->first_offset = out->next_offset = resume.found ? (uint64_t)resume.next : 0;

	run = calloc(1, sizeof(*run));
	workers = calloc(nworkers, sizeof(*workers));
	if (!run || !workers) {
		rc = kiln_error_set(KILN_ENOMEM, "out of memory");
		goto cleanup;
	}
	run->p = p;
	run->splitter = &splitter;
	pthread_mutex_init(&run->lock, NULL);
	pthread_cond_init(&run->cond, NULL);
	kiln_curator_options copt = { .contract = contract, .key = &key, .split_field = split_field,
				      .limits = vopts.limits };
	for (unsigned i = 0; i < nworkers; i++) {
		workers[i].run = run;
		if (!(workers[i].validator = kiln_validator_new(contract, &vopts))) {
			rc = kiln_error_set(KILN_ENOMEM, "out of memory");
			goto cleanup;
		}
		if ((rc = kiln_curator_new(&workers[i].curator, &copt)) < 0)
			goto cleanup;
	}
	kiln_shard_writer_options wopt = { .target_bytes = p->target_bytes, .level = p->zstd_level, .background = true };
	if ((rc = kiln_quarantine_new(&quarantine, store, p->target_bytes, p->zstd_level, NULL)) < 0 ||
	    (rc = kiln_line_reader_new(&reader, fd, p->max_record_bytes)) < 0)
		goto cleanup;
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		if ((rc = kiln_shard_writer_new(&writers[i], store, &wopt)) < 0)
			goto cleanup;

	if ((rc = pump(p, run, workers, nworkers, reader, writers, quarantine, out, &bytes_read)) < 0)
		goto cleanup;
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		if ((rc = kiln_shard_writer_finish(writers[i])) < 0)
			goto cleanup;
	if (d->records_in == 0) {
		/* nothing new: no commit (an earlier one may still need pushing) */
		rc = push_branch(p, manifest, out->commit);
		goto cleanup;
	}
	if ((rc = kiln_quarantine_flush(quarantine)) < 0)
		goto cleanup;
	out->quarantine_objects = kiln_quarantine_objects(quarantine);

	/* the snapshot */
	kiln_snapshot snap = { .dataset = p->dataset, .branch = p->branch, .author_name = p->author_name,
			       .author_email = p->author_email };
	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		snap.shards[i] = kiln_shard_writer_shards(writers[i], &snap.shard_count[i]);
		d->splits[i].shards = snap.shard_count[i];
		for (size_t j = 0; j < snap.shard_count[i]; j++) {
			d->splits[i].bytes += snap.shards[i][j].bytes;
			d->splits[i].raw_bytes += snap.shards[i][j].raw_bytes;
		}
		out->shards += snap.shard_count[i];
	}
	kiln_lineage_entry lineage = { .topic = p->source_name, .partition = 0, .next = (int64_t)out->next_offset };
	if (p->source_kind == KILN_SOURCE_FILE) {
		lineage.path = p->source_path;
		lineage.bytes = resume.bytes + bytes_read;
		if ((rc = fingerprint(fd, p->source_path, lineage.bytes, prefix_hex)) < 0)
			goto cleanup;
		lineage.prefix_blake2b = prefix_hex;
	}
	snap.lineage = &lineage;
	snap.lineage_count = 1;
	snap.delta = *d;
	if ((rc = kiln_buf_putc(&dataset_json, '\0')) < 0)
		goto cleanup;
	snap.dataset_json = dataset_json.ptr;
	snap.signing_key = p->signing_key_file ? &signing_key : NULL;
	rc = kiln_manifest_commit(manifest, &snap, out->commit);
	if (rc == 0)
		rc = push_branch(p, manifest, out->commit);

cleanup:
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		kiln_shard_writer_free(writers[i]);
	if (workers)
		for (unsigned i = 0; i < nworkers; i++) {
			kiln_validator_free(workers[i].validator);
			kiln_curator_free(workers[i].curator);
			kiln_buf_free(&workers[i].line);
		}
	free(workers);
	if (run) {
		for (int i = 0; i < RING; i++)
			batch_free(&run->ring[i]);
		pthread_mutex_destroy(&run->lock);
		pthread_cond_destroy(&run->cond);
		free(run);
	}
	kiln_quarantine_free(quarantine);
	kiln_line_reader_free(reader);
	kiln_manifest_close(manifest);
	kiln_store_close(store);
	kiln_contract_free(contract);
	kiln_buf_free(&dataset_json);
	if (key_loaded)
		kiln_key_wipe(&key);
	kiln_signing_key_wipe(&signing_key);
	if (fd >= 0 && fd != STDIN_FILENO)
		close(fd);
	return rc;
}
