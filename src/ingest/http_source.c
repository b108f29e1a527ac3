/* The http source: a streaming row of the run engine (ingest/source.h,
 * kiln_source_http below; docs/PIPELINES.md "Sources: http"). Clients POST
 * newline-delimited JSON to /v1/records on source.listen with a bearer
 * token; each body line is a record. The row runs its own listener (the
 * core HTTP server, a thread per connection, bodies kept up to
 * source.max_body_bytes); the engine owns the snapshot policy, the commit,
 * backoff and the drain.
 *
 * Threads: a request's thread checks the token and the content type,
 * counts the body's lines, queues a copy of the body (a `post`) under
 * r->lock and waits on r->cond until the post is answered: with ack
 * committed once the snapshot holding all its records committed (200 with
 * the commit), or failed (503: the snapshot failed and the engine
 * abandoned, or the run stopped); with ack received once its batches
 * reached the sink, the raw zone written (202). The engine's thread takes
 * the queued posts in arrival order (poll, flush), gives each its offsets
 * (one sequence per source, contiguous per post: lineage next is the first
 * offset not yet committed), and submits its lines as batches (borrowed
 * from the post's body). A snapshot commits every offset taken, fenced on
 * the lineage this run last saw; an abandon fails the posts taken since
 * the last commit (ack committed: 503, their offsets reused by the next
 * posts) or queues them again at the head (ack received: they were
 * acknowledged, so they are curated again under the same offsets).
 *
 * A post is freed by whichever lets go of it last: its request's thread
 * (gone) or the engine (done, out of its lists), under r->lock. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include "core/arena.h"
#include "core/array.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/notify.h"
#include "core/secret.h"
#include "core/yaml_doc.h"
#include "ingest/engine_internal.h"
#include "ingest/http_source.h"
#include "shard/raw.h"
#include "store/store.h"

#define HTTP_KIND     "http"
#define TOKEN_MAX     4096
#define RETRY_AFTER_S 1

enum post_state {
	POST_QUEUED,    /* in r->queue, no offsets */
	POST_TAKEN,     /* in r->taken, offsets given, batches submitted */
	POST_COMMITTED, /* answered 200 */
	POST_FAILED,    /* answered 503 */
};

struct post {
	struct post *next;
	char *body;
	size_t len;
	uint64_t count; /* lines */
	int64_t first;  /* offset of the first line (taken) */
	bool received;  /* every batch reached the sink (ack received answers) */
	bool gone;      /* its request's thread let go */
	enum post_state state;
	char commit[41];
};

struct hrun {
	kiln_engine *e;
	const kiln_pipeline *p;
	const kiln_http_config *c; /* p's, the row's settings */
	kiln_http_server *server;
	char *token;
	size_t token_len;
	pthread_mutex_t lock;
	pthread_cond_t cond;             /* posts answered */
	pthread_cond_t arrived;          /* a post queued */
	struct post *queue, *queue_tail; /* arrived, not taken */
	struct post *taken, *taken_tail; /* taken since the last commit, in offset order */
	uint64_t waiting;                /* records queued or taken */
	bool stopping;                   /* no more posts: 503 */
	int64_t last_arrival_ms;
	/* the engine's thread only */
	int64_t committed; /* lineage next at the tip as this run last saw it (-1: none) */
	int64_t next;      /* the next offset to give */
	int64_t consumed;  /* the offset after the last record delivered (-1: none since the commit) */
	kiln_counter *posts, *records, *refused;
	kiln_gauge *waiting_gauge;
};

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void post_free(struct post *po)
{
	if (po) {
		free(po->body);
		free(po);
	}
}

/* Under r->lock: the engine is done with po (answered, out of its lists). */
static void post_done(struct post *po, enum post_state state, const char *commit)
{
	po->state = state;
	if (commit)
		snprintf(po->commit, sizeof(po->commit), "%s", commit);
	po->next = NULL;
	if (po->gone)
		post_free(po);
}

/* ---- the request's thread -------------------------------------------------- */

static int answer(kiln_http_response *res, int status, const char *msg)
{
	res->status = status;
	res->content_type = "application/json";
	if (status == 503)
		kiln_http_response_add_header(res, "Retry-After", "%d", RETRY_AFTER_S);
	if (status == 401)
		kiln_http_response_add_header(res, "WWW-Authenticate", "Bearer");
	kiln_buf_puts(&res->body, "{\"error\":");
	kiln_buf_put_json_string(&res->body, msg, strlen(msg));
	return kiln_buf_puts(&res->body, "}\n") < 0 ? KILN_ENOMEM : 0;
}

static bool authorized(const struct hrun *r, const char *auth)
{
	static const char prefix[] = "Bearer ";
	size_t n;

	if (!auth || strncasecmp(auth, prefix, sizeof(prefix) - 1) != 0)
		return false;
	auth += sizeof(prefix) - 1;
	while (*auth == ' ')
		auth++;
	n = strlen(auth);
	while (n && auth[n - 1] == ' ')
		n--;
	return n == r->token_len && sodium_memcmp(auth, r->token, n) == 0;
}

static bool ndjson(const char *type)
{
	static const char want[] = "application/x-ndjson";
	size_t n = sizeof(want) - 1;

	if (!type || strncasecmp(type, want, n) != 0)
		return false;
	type += n;
	while (*type == ' ')
		type++;
	return *type == '\0' || *type == ';';
}

static uint64_t count_lines(const char *body, size_t len)
{
	uint64_t n = 0;
	const char *at = body, *end = body + len;

	while (at < end) {
		const char *nl = memchr(at, '\n', (size_t)(end - at));
		n++;
		at = nl ? nl + 1 : end;
	}
	return n;
}

static int http_post(void *ctx, const kiln_http_request *req, kiln_http_response *res)
{
	struct hrun *r = ctx;
	kiln_engine *e = r->e;
	struct post *po;
	char msg[128];
	uint64_t n;

	if (!authorized(r, req->authorization)) {
		kiln_counter_add(r->refused, 1);
		return answer(res, 401, "a valid bearer token is required");
	}
	if (!ndjson(kiln_http_request_header(req, "Content-Type"))) {
		kiln_counter_add(r->refused, 1);
		return answer(res, 415, "the body must be application/x-ndjson");
	}
	if (req->body_too_large) {
		kiln_counter_add(r->refused, 1);
		snprintf(msg, sizeof(msg), "the body is over source.max_body_bytes (%zu)",
		         r->c->max_body_bytes);
		return answer(res, 413, msg);
	}
	if (req->body_len == 0) {
		res->content_type = "application/json";
		return kiln_buf_puts(&res->body, "{\"records\":0}\n") < 0 ? KILN_ENOMEM : 0;
	}
	n = count_lines(req->body, req->body_len);
	if (!(po = calloc(1, sizeof(*po))) || !(po->body = malloc(req->body_len))) {
		free(po);
		return kiln_error_oom(NULL);
	}
	memcpy(po->body, req->body, req->body_len);
	po->len = req->body_len;
	po->count = n;
	po->first = -1;

	pthread_mutex_lock(&r->lock);
	if (r->stopping || *e->o->stop || e->fatal) {
		pthread_mutex_unlock(&r->lock);
		post_free(po);
		kiln_counter_add(r->refused, 1);
		return answer(res, 503, "the run is stopping");
	}
	if (r->waiting + n > r->c->max_waiting && r->waiting > 0) {
		pthread_mutex_unlock(&r->lock);
		post_free(po);
		kiln_counter_add(r->refused, 1);
		return answer(res, 503, "too many records wait for their commit");
	}
	r->waiting += n;
	if (r->queue_tail)
		r->queue_tail->next = po;
	else
		r->queue = po;
	r->queue_tail = po;
	r->last_arrival_ms = now_ms();
	pthread_cond_signal(&r->arrived);
	while (po->state < POST_COMMITTED && !(r->c->ack_received && po->received))
		pthread_cond_wait(&r->cond, &r->lock);
	kiln_counter_add(r->posts, 1);
	res->content_type = "application/json";
	if (po->state == POST_FAILED) {
		answer(res, 503,
		       "the records were not committed (the snapshot failed or the run stopped); post them "
		       "again");
	} else if (r->c->ack_received) {
		res->status = 202;
		kiln_buf_printf(&res->body, "{\"records\":%" PRIu64 ",\"first_offset\":%" PRId64 "}\n",
		                po->count, po->first);
	} else {
		kiln_counter_add(r->records, po->count);
		kiln_buf_printf(&res->body,
		                "{\"records\":%" PRIu64 ",\"first_offset\":%" PRId64 ",\"commit\":\"%s\"}\n",
		                po->count, po->first, po->commit);
	}
	if (po->state >= POST_COMMITTED)
		post_free(po);
	else
		po->gone = true; /* ack received: the engine frees it once committed */
	pthread_mutex_unlock(&r->lock);
	return 0;
}

/* ---- the engine's thread ----------------------------------------------------- */

static int note_lineage(void *ctx, const kiln_lineage_entry *le)
{
	struct hrun *r = ctx;

	if (strcmp(le->source, HTTP_KIND) == 0 && strcmp(le->topic, r->p->source_name) == 0 &&
	    le->partition == 0)
		r->committed = le->next;
	return 0;
}

static int read_lineage(struct hrun *r)
{
	r->committed = -1;
	return kiln_manifest_lineage(r->e->setup.manifest, r->p->dataset, r->p->branch, note_lineage, r);
}

/* ---- what a run left beyond the last commit ------------------------------------ */

struct stale {
	struct hrun *r;
	char **keys;
	size_t n, cap;
	kiln_buf body; /* ack received: the records of the object being read */
	int64_t seen;  /* the offset after the last record taken (each offset once) */
};

static int note_stale_raw(void *ctx, const kiln_raw_object *o)
{
	struct stale *st = ctx;
	char *key;

	if (o->first < (st->r->committed > 0 ? st->r->committed : 0))
		return 0;
	if (KILN_ARRAY_GROW(st->keys, st->cap, st->n, NULL) < 0 || !(key = strdup(o->key)))
		return kiln_error_oom(NULL);
	st->keys[st->n++] = key;
	return 0;
}

static int note_stale_quarantine(void *ctx, const char *key, uint64_t size, int64_t mtime)
{
	struct stale *st = ctx;
	const char *name = strrchr(key, '/');
	char *end, *copy;
	long long first;

	(void)size;
	(void)mtime;
	name = name ? name + 1 : key;
	errno = 0;
	first = strtoll(name, &end, 10);
	if (errno || end == name || *end != '-' || first < (st->r->committed > 0 ? st->r->committed : 0))
		return 0;
	if (KILN_ARRAY_GROW(st->keys, st->cap, st->n, NULL) < 0 || !(copy = strdup(key)))
		return kiln_error_oom(NULL);
	st->keys[st->n++] = copy;
	return 0;
}

static int take_raw_record(void *ctx, const kiln_raw_record *rec)
{
	struct stale *st = ctx;
	int rc;

	if (rec->offset < st->seen || rec->null_value)
		return 0;
	st->seen = rec->offset + 1;
	if ((rc = kiln_buf_put(&st->body, rec->value, rec->value_len)) < 0 ||
	    (rc = kiln_buf_putc(&st->body, '\n')) < 0)
		return rc;
	return 0;
}

/* Queues the records of raw object `key` past st->seen as one post nobody
 * waits for (ack received: they were acknowledged, not committed). */
static int recover_object(struct stale *st, const char *key)
{
	struct hrun *r = st->r;
	struct post *po;
	int rc;

	st->body.len = 0;
	if ((rc = kiln_raw_read(r->e->setup.store, key, take_raw_record, st)) < 0)
		return rc;
	if (!st->body.len)
		return 0;
	if (!(po = calloc(1, sizeof(*po))))
		return kiln_error_oom(NULL);
	po->body = st->body.ptr;
	po->len = st->body.len;
	po->count = count_lines(po->body, po->len);
	po->first = -1;
	po->gone = true;
	st->body = (kiln_buf)KILN_BUF_INIT(0);
	pthread_mutex_lock(&r->lock);
	r->waiting += po->count;
	if (r->queue_tail)
		r->queue_tail->next = po;
	else
		r->queue = po;
	r->queue_tail = po;
	pthread_mutex_unlock(&r->lock);
	return 0;
}

/* Offsets at or past lineage's next are given again, to other records: a
 * run that stopped before its commit (kill -9, a failed snapshot) leaves
 * raw and quarantine objects there that no commit covers. Its quarantine
 * objects go; its raw objects go too (their POSTs were never acknowledged)
 * unless ack is received: then their records were acknowledged, and are
 * queued again (once per offset) to be curated and committed first. */
static int settle_stale(struct hrun *r, bool recover)
{
	const kiln_pipeline *p = r->p;
	struct stale st = {.r = r, .body = KILN_BUF_INIT(0), .seen = r->committed > 0 ? r->committed : 0};
	kiln_store *store = r->e->setup.store;
	kiln_buf prefix = KILN_BUF_INIT(0);
	size_t raw_count = 0, removed = 0;
	int rc = 0;

	if (p->raw_zone && (rc = kiln_raw_list_objects(store, p->source_name, 0, note_stale_raw, &st)) < 0)
		goto done;
	raw_count = st.n;
	if ((rc = kiln_buf_printf(&prefix, "quarantine/%s/0/%s/%s/", p->source_name, p->dataset, p->branch)) <
	        0 ||
	    (rc = kiln_store_list(store, prefix.ptr, note_stale_quarantine, &st)) < 0)
		goto done;
	for (size_t i = 0; i < st.n; i++) {
		if (i < raw_count && r->c->ack_received) {
			if (recover && (rc = recover_object(&st, st.keys[i])) < 0)
				goto done;
			continue; /* after an abandon its posts are queued again, as they were */
		}
		if ((rc = kiln_store_remove(store, st.keys[i])) < 0 && rc != KILN_ENOTFOUND)
			goto done;
		removed++;
		rc = 0;
	}
	if (st.n)
		KILN_LOG(KILN_LOG_INFO, "uncommitted_objects", NULL,
		         KILN_F_INT("from", r->committed > 0 ? r->committed : 0),
		         KILN_F_INT("removed", removed), KILN_F_INT("kept", st.n - removed));
done:
	for (size_t i = 0; i < st.n; i++)
		free(st.keys[i]);
	free(st.keys);
	kiln_buf_free(&st.body);
	kiln_buf_free(&prefix);
	return rc;
}

/* Submits po's lines as batches (offsets from po->first), each at most
 * source.batch records or bytes; the raw zone keeps them. */
static int submit_post(struct hrun *r, struct post *po)
{
	const kiln_pipeline *p = r->p;
	const char *at = po->body, *end = po->body + po->len;
	int64_t offset = po->first, received = wall_ms();
	kiln_batch *b = NULL;
	int rc;

	while (at < end) {
		const char *nl = memchr(at, '\n', (size_t)(end - at));
		size_t len = (size_t)((nl ? nl : end) - at);
		size_t i;

		if (!b) {
			if (!(b = kiln_curate_pool_batch(r->e->sink.pool)))
				return kiln_error_oom(NULL);
			b->topic = p->source_name;
			b->partition = 0;
			b->keep_raw = p->raw_zone;
			b->source_ctx = po;
			b->opened_ms = now_ms();
		}
		if ((rc = kiln_batch_reserve(b)) < 0 || (b->keep_raw && b->raw_cap <= b->count)) {
			kiln_curate_pool_recycle(r->e->sink.pool, b);
			return rc < 0 ? rc : kiln_error_oom(NULL);
		}
		i = b->count++;
		b->offset[i] = offset++;
		b->len[i] = len;
		b->too_long[i] = len > p->max_record_bytes;
		b->rec[i] = b->too_long[i] ? NULL : at;
		b->bytes += len;
		if (b->keep_raw)
			b->raw[i] = (kiln_raw_record){.topic = p->source_name,
			                              .offset = b->offset[i],
			                              .timestamp = received,
			                              .timestamp_type = 2,
			                              .null_key = true,
			                              .value = at,
			                              .value_len = len};
		at = nl ? nl + 1 : end;
		if (at >= end || b->count >= p->batch_records || b->bytes >= p->batch_bytes) {
			rc = kiln_curate_pool_submit(r->e->sink.pool, b);
			b = NULL;
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/* Takes the queued posts in arrival order, gives them offsets and submits
 * them. */
static int take(struct hrun *r)
{
	struct post *list, *po, *next;
	int rc;

	pthread_mutex_lock(&r->lock);
	list = r->queue;
	r->queue = r->queue_tail = NULL;
	for (po = list; po; po = po->next) {
		po->state = POST_TAKEN;
		po->first = r->next;
		r->next += (int64_t)po->count;
	}
	if (list) {
		if (r->taken_tail)
			r->taken_tail->next = list;
		else
			r->taken = list;
		for (po = list; po->next; po = po->next)
			;
		r->taken_tail = po;
	}
	pthread_mutex_unlock(&r->lock);
	for (po = list; po; po = next) {
		next = po->next; /* read before submitting: only the engine's thread moves the lists */
		if ((rc = submit_post(r, po)) < 0)
			return rc;
	}
	return 0;
}

static int http_poll(void *src, kiln_engine *e, int timeout_ms)
{
	struct hrun *r = src;
	struct timespec until;
	bool ask;
	int64_t now;
	int rc;

	pthread_mutex_lock(&r->lock);
	if (!r->queue) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (long)timeout_ms * 1000000L;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&r->arrived, &r->lock, &until);
	}
	pthread_mutex_unlock(&r->lock);
	if ((rc = take(r)) < 0)
		return rc;
	/* a POST waits for its commit: ask for a snapshot once no more arrive
	 * within source.batch.ms (while they keep arriving, snapshot.records
	 * and snapshot.seconds bound the wait) */
	now = now_ms();
	pthread_mutex_lock(&r->lock);
	ask = !r->c->ack_received && r->taken && now - r->last_arrival_ms >= (int64_t)r->p->batch_ms;
	pthread_mutex_unlock(&r->lock);
	if (ask)
		kiln_engine_request_snapshot(e);
	return 0;
}

static int http_flush(void *src, kiln_engine *e)
{
	struct hrun *r = src;

	if (*e->o->stop) {
		pthread_mutex_lock(&r->lock);
		r->stopping = true; /* posts queued before this are taken below */
		pthread_mutex_unlock(&r->lock);
	}
	return take(r);
}

static int http_delivered(void *src, kiln_engine *e, kiln_batch *b)
{
	struct hrun *r = src;
	struct post *po = b->source_ctx;

	(void)e;
	r->consumed = b->offset[b->count - 1] + 1;
	pthread_mutex_lock(&r->lock);
	if (po->first + (int64_t)po->count == r->consumed) { /* its last batch */
		po->received = true;
		if (r->c->ack_received)
			pthread_cond_broadcast(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static int http_positions(void *src, kiln_engine *e, kiln_lineage_entry **out, size_t *n)
{
	struct hrun *r = src;

	(void)e;
	*out = NULL;
	*n = 0;
	if (r->consumed < 0)
		return 0;
	if (!(*out = calloc(1, sizeof(**out))))
		return kiln_error_oom(NULL);
	**out = (kiln_lineage_entry){
	    .source = HTTP_KIND,
	    .topic = r->p->source_name,
	    .partition = 0,
	    .next = r->consumed,
	    .fenced = true,
	    .expect_next = r->committed,
	};
	*n = 1;
	return 0;
}

static void http_committed(void *src, kiln_engine *e, const kiln_lineage_entry *lineage, size_t n)
{
	struct hrun *r = src;
	struct post *po;

	if (n == 0)
		return;
	r->committed = lineage[0].next;
	r->consumed = -1;
	pthread_mutex_lock(&r->lock);
	while ((po = r->taken) && po->first + (int64_t)po->count <= r->committed) {
		if (!(r->taken = po->next))
			r->taken_tail = NULL;
		r->waiting -= po->count;
		post_done(po, POST_COMMITTED, e->out->commit);
	}
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* What was taken since the last commit is dropped: ack committed answers
 * 503 (offsets reused by the next posts), ack received queues it again at
 * the head, to be curated again under the same offsets. */
static int http_abandon(void *src, kiln_engine *e)
{
	struct hrun *r = src;
	struct post *po, *next, *requeue = NULL, *last = NULL;
	int rc;

	(void)e;
	r->consumed = -1;
	pthread_mutex_lock(&r->lock);
	for (po = r->taken; po; po = next) {
		next = po->next;
		po->next = NULL;
		if (r->c->ack_received) {
			po->state = POST_QUEUED;
			po->received = false;
			if (last)
				last->next = po;
			else
				requeue = po;
			last = po;
		} else {
			r->waiting -= po->count;
			post_done(po, POST_FAILED, NULL);
		}
	}
	r->taken = r->taken_tail = NULL;
	if (requeue) {
		last->next = r->queue;
		if (!r->queue)
			r->queue_tail = last;
		r->queue = requeue;
	}
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	if ((rc = read_lineage(r)) < 0)
		return rc;
	r->next = r->committed > 0 ? r->committed : 0;
	return settle_stale(r, false);
}

static void http_tick(void *src, kiln_engine *e)
{
	struct hrun *r = src;

	(void)e;
	pthread_mutex_lock(&r->lock);
	kiln_gauge_set(r->waiting_gauge, (double)r->waiting);
	pthread_mutex_unlock(&r->lock);
}

static int http_open(void **out, kiln_engine *e, kiln_metrics *m)
{
	struct hrun *r = calloc(1, sizeof(*r));

	*out = r;
	if (!r)
		return kiln_error_oom(NULL);
	r->e = e;
	r->p = e->p;
	r->c = e->p->source_config;
	r->committed = r->consumed = -1;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	pthread_cond_init(&r->arrived, NULL);
	if (!(r->posts = kiln_metrics_counter(
	          m, "kiln_http_posts_total",
	          "POSTs to /v1/records answered 200 or 202 or 503 after queueing", NULL)) ||
	    !(r->records = kiln_metrics_counter(m, "kiln_http_records_acknowledged_total",
	                                        "Records acknowledged committed", NULL)) ||
	    !(r->refused =
	          kiln_metrics_counter(m, "kiln_http_refused_total",
	                               "POSTs refused before queueing (401, 413, 415, 503)", NULL)) ||
	    !(r->waiting_gauge = kiln_metrics_gauge(m, "kiln_http_waiting_records",
	                                            "Records received and not yet committed", NULL)))
		return kiln_error_oom(NULL);
	return 0;
}

static int write_port_file(const char *path, uint16_t port)
{
	char text[16];
	int n = snprintf(text, sizeof(text), "%u\n", (unsigned)port);

	return kiln_fs_write_atomic(path, text, (size_t)n, 0644);
}

static int http_start(void *src, kiln_engine *e)
{
	struct hrun *r = src;
	const kiln_pipeline *p = r->p;
	const kiln_http_config *c = r->c;
	const kiln_http_route routes[] = {{"POST", "/v1/records", http_post, r}};
	kiln_http_server_options opts = {
	    .connection_limit = 1024,
	    .per_address_limit = 1024,
	    .body_max = c->max_body_bytes,
	};
	size_t len = 0;
	int rc;

	if ((rc = kiln_secret_read_file(&r->token, &len, c->token_file, "token file", TOKEN_MAX)) < 0)
		return rc;
	while (len && (r->token[len - 1] == '\n' || r->token[len - 1] == '\r'))
		r->token[--len] = '\0';
	r->token_len = len;
	if (len == 0)
		return kiln_error_set(KILN_EINVALID, "%s: the token file is empty", c->token_file);
	if ((rc = read_lineage(r)) < 0 || (rc = settle_stale(r, true)) < 0)
		return rc;
	r->next = r->committed > 0 ? r->committed : 0;
	if ((rc = kiln_http_server_start_ex(&r->server, c->listen, routes, 1, &opts)) < 0)
		return rc;
	if (c->port_file && (rc = write_port_file(c->port_file, kiln_http_server_port(r->server))) < 0)
		return rc;
	KILN_LOG(KILN_LOG_INFO, "started", NULL, KILN_F_STR("dataset", p->dataset),
	         KILN_F_STR("branch", p->branch), KILN_F_STR("listen", c->listen),
	         KILN_F_INT("port", kiln_http_server_port(r->server)), KILN_F_INT("resume", r->next));
	kiln_notifyf("READY=1\nSTATUS=listening on %s", c->listen);
	e->ready = true;
	return 0;
}

/* Stops the listener: the posts still waiting are answered 503 first. */
static void http_close(void *src, kiln_engine *e)
{
	struct hrun *r = src;
	struct post *next;

	(void)e;
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stopping = true;
	for (struct post *list = r->taken; list; list = next) {
		next = list->next;
		post_done(list, POST_FAILED, NULL);
	}
	for (struct post *list = r->queue; list; list = next) {
		next = list->next;
		post_done(list, POST_FAILED, NULL);
	}
	r->taken = r->taken_tail = r->queue = r->queue_tail = NULL;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	kiln_http_server_stop(r->server); /* waits for the handlers: they free their posts */
	if (r->token)
		kiln_secret_free(r->token, r->token_len);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	pthread_cond_destroy(&r->arrived);
	free(r);
}

static const kiln_source_stream http_stream = {
    .open = http_open,
    .start = http_start,
    .poll = http_poll,
    .flush = http_flush,
    .delivered = http_delivered,
    .positions = http_positions,
    .committed = http_committed,
    .abandon = http_abandon,
    .tick = http_tick,
    .close = http_close,
};

/* ---- configuration -------------------------------------------------------- */

static const char *const http_option_keys[] = {
    "kind",      "name",           "max_record_bytes",    "max_depth", "listen", "token_file",
    "port_file", "max_body_bytes", "max_waiting_records", "ack",       "batch",  NULL};

static int http_configure(kiln_pipeline *p, struct kiln_config *cfg, const struct kiln_yaml_node *src)
{
	const kiln_yaml_doc *doc = cfg->doc;
	const char *ack = NULL, *token = NULL, *port_file = NULL;
	kiln_http_config *c = kiln_arena_alloc(cfg->arena, sizeof(*c));
	char *text = NULL, reason[512];
	size_t len = 0;
	int64_t v = 0;
	int rc;

	if (!c)
		return kiln_error_oom(NULL);
	p->source_config = c;
	if (kiln_yaml_get(src, "path"))
		return kiln_yaml_fail(doc, kiln_yaml_get(src, "path"), "source.path",
		                      "an http source has no path");
	if ((rc = kiln_config_string(cfg, src, "source", "listen", true, &c->listen)) < 0 ||
	    (rc = kiln_config_string(cfg, src, "source", "token_file", true, &token)) < 0 ||
	    (rc = kiln_config_string(cfg, src, "source", "port_file", false, &port_file)) < 0 ||
	    (rc = kiln_config_string(cfg, src, "source", "ack", false, &ack)) < 0)
		return rc;
	c->max_body_bytes = 16u << 20;
	if ((rc = kiln_config_size(cfg, src, "source", "max_body_bytes", 1, &c->max_body_bytes)) < 0)
		return rc;
	v = 1000000;
	if ((rc = kiln_config_int(cfg, src, "source", "max_waiting_records", 1, INT64_MAX, &v)) < 0)
		return rc;
	c->max_waiting = (uint64_t)v;
	if (ack && strcmp(ack, "received") == 0)
		c->ack_received = true;
	else if (ack && strcmp(ack, "committed") != 0)
		return kiln_yaml_fail(doc, kiln_yaml_get(src, "ack"), "source.ack",
		                      "expected committed or received");
	c->token_file = kiln_config_resolve(cfg, token);
	c->port_file = port_file ? kiln_config_resolve(cfg, port_file) : NULL;
	/* the token file is checked here (owner-only, not empty), read again by the run */
	if ((rc = kiln_secret_read_file(&text, &len, c->token_file, "token file", TOKEN_MAX)) < 0) {
		snprintf(reason, sizeof(reason), "%s", kiln_error_last());
		return kiln_yaml_fail(doc, kiln_yaml_get(src, "token_file"), "source.token_file", "%s",
		                      reason);
	}
	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
		len--;
	kiln_secret_free(text, len);
	if (len == 0)
		return kiln_yaml_fail(doc, kiln_yaml_get(src, "token_file"), "source.token_file",
		                      "the token file is empty");
	if ((rc = kiln_pipeline_read_batch(p, cfg, src)) < 0)
		return rc;
	p->raw_zone = true;
	return 0;
}

/* ack: received answers once the raw zone holds the body: without one it
 * would promise nothing. */
static int http_settings(const kiln_pipeline *p)
{
	const kiln_http_config *c = p->source_config;

	if (c->ack_received && !p->raw_zone)
		return kiln_error_set(KILN_EINVALID,
		                      "%s: source.ack: received needs the raw zone (raw.enabled: true)",
		                      p->file);
	return 0;
}

const kiln_source kiln_source_http = {
    .version = KILN_SOURCE_VERSION,
    .kind = HTTP_KIND,
    .option_keys = http_option_keys,
    .stream = &http_stream,
    .raw_zone = true,
    .configure = http_configure,
    .settings = http_settings,
    .check_name = "listen",
};
