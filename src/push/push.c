/* kiln push (see push.h): resolve and judge the version, list what the
 * target holds, plan the objects to send, send them from a pool of
 * threads, then write the version's ref and its push record. */
#include "push/push.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "core/array.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/fs.h"
#include "manifest/export.h"
#include "manifest/ledger.h"
#include "manifest/loose.h"
#include "manifest/oidset.h"
#include "manifest/verify.h"
#include "manifest/version.h"
#include "shard/fetch.h"
#include "shard/object.h"
#include "store/store.h"

typedef struct listed {
	char *key;
	uint64_t size;
} listed;

typedef struct task {
	char *key;        /* at the target */
	const char *kind; /* "shard" or "manifest" */
	uint64_t bytes;
	char hash[65]; /* a shard's; "" for a file */
	char *path;    /* a file's (in the staging folder) */
} task;

typedef struct pusher {
	const kiln_push_request *req;
	const kiln_push_target *target;
	kiln_push_result *out;
	kiln_manifest *m;
	kiln_version v;
	kiln_store *src, *dst;
	char staging[4096];
	listed *have;
	size_t nhave, have_cap;
	task *tasks;
	size_t ntasks, task_cap;
	/* sending */
	atomic_size_t next;
	atomic_bool failed;
	pthread_mutex_t lock;
	int err_code;
	char err[1024];
	bool ref_there;      /* the target holds the version's ref already (the same object) */
	char ledger_tip[41]; /* refs/erasures/<dataset> here, "" when none */
} pusher;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- what the target holds ---------------------------------------------------- */

static int on_listed(void *ctx, const char *key, uint64_t size, int64_t mtime)
{
	pusher *p = ctx;

	(void)mtime;
	if (KILN_ARRAY_GROW(p->have, p->have_cap, p->nhave, NULL) < 0)
		return KILN_ENOMEM;
	if (!(p->have[p->nhave].key = strdup(key)))
		return kiln_error_oom(NULL);
	p->have[p->nhave++].size = size;
	return 0;
}

static int cmp_listed(const void *a, const void *b)
{
	return strcmp(((const listed *)a)->key, ((const listed *)b)->key);
}

/* The size of key at the target, or -1 when it is not there. */
static int64_t target_size(const pusher *p, const char *key)
{
	listed k = {.key = (char *)key}, *hit;

	hit = p->nhave ? bsearch(&k, p->have, p->nhave, sizeof(*p->have), cmp_listed) : NULL;
	return hit ? (int64_t)hit->size : -1;
}

static int list_target(pusher *p)
{
	char prefix[512];
	int rc;

	snprintf(prefix, sizeof(prefix), "%s/objects/", p->target->manifest_prefix);
	if ((rc = kiln_store_list(p->dst, KILN_SHARD_DIR, on_listed, p)) < 0 ||
	    (rc = kiln_store_list(p->dst, prefix, on_listed, p)) < 0)
		return rc;
	if (p->nhave)
		qsort(p->have, p->nhave, sizeof(*p->have), cmp_listed);
	return 0;
}

/* ---- the plan -------------------------------------------------------------------- */

static void report(pusher *p, const char *key, const char *kind, uint64_t bytes, bool present, double s)
{
	kiln_push_event e = {.key = key, .kind = kind, .bytes = bytes, .present = present, .seconds = s};

	if (p->req->on_object)
		p->req->on_object(p->req->ctx, &e);
}

static int add_task(pusher *p, const char *key, const char *kind, uint64_t bytes, const char *hash,
                    const char *path)
{
	task *t;

	if (KILN_ARRAY_GROW(p->tasks, p->task_cap, p->ntasks, NULL) < 0)
		return KILN_ENOMEM;
	t = &p->tasks[p->ntasks];
	memset(t, 0, sizeof(*t));
	t->kind = kind;
	t->bytes = bytes;
	if (hash)
		snprintf(t->hash, sizeof(t->hash), "%s", hash);
	if (!(t->key = strdup(key)) || (path && !(t->path = strdup(path)))) {
		free(t->key);
		return kiln_error_oom(NULL);
	}
	p->ntasks++;
	p->out->totals.objects++;
	p->out->totals.bytes += bytes;
	return 0;
}

static int on_shard(void *ctx, const kiln_shard_entry *e)
{
	pusher *p = ctx;
	char key[KILN_SHARD_KEY_CAP];
	int64_t there;
	int rc;

	if ((rc = kiln_shard_name(key, sizeof(key), NULL, e->hash, NULL)) < 0)
		return rc;
	p->out->totals.shards++;
	p->out->totals.shard_bytes += e->bytes;
	there = target_size(p, key);
	if (there >= 0 && (uint64_t)there == e->bytes) {
		p->out->totals.present++;
		p->out->totals.present_bytes += e->bytes;
		report(p, key, "shard", e->bytes, true, 0);
		return 0;
	}
	p->out->totals.shards_to_send++;
	p->out->totals.shard_bytes_to_send += e->bytes;
	return add_task(p, key, "shard", e->bytes, e->hash, NULL);
}

/* Every object of the version is exported to the staging folder; one the
 * target lists with the same name and the size of kiln's own loose file is
 * there (a name alone is not enough: a truncated object keeps its name). */
static int wrote_object(void *ctx, const char *name, uint64_t size)
{
	pusher *p = ctx;
	char key[512], path[4096 + 64];
	int64_t there;

	snprintf(key, sizeof(key), "%s/objects/%s", p->target->manifest_prefix, name);
	snprintf(path, sizeof(path), "%s/objects/%s", p->staging, name);
	p->out->totals.git_objects++;
	if ((there = target_size(p, key)) >= 0 && (uint64_t)there == size) {
		p->out->totals.present++;
		p->out->totals.present_bytes += size;
		report(p, key, "manifest", size, true, 0);
		return 0;
	}
	p->out->totals.git_objects_to_send++;
	p->out->totals.git_bytes_to_send += size;
	return add_task(p, key, "manifest", size, NULL, path);
}

/* An object the staging folder holds already (the ledger's walk meeting
 * one the version's wrote): not written or counted twice. */
static bool staged(void *ctx, const char *id)
{
	const pusher *p = ctx;
	char path[4096 + 64];
	struct stat st;

	snprintf(path, sizeof(path), "%s/objects/%.2s/%.38s", p->staging, id, id + 2);
	return stat(path, &st) == 0;
}

/* ---- sending ------------------------------------------------------------------------ */

static int to_fd(void *ctx, const void *data, size_t len)
{
	return kiln_fs_write_all(*(int *)ctx, data, len, "temporary file");
}

/* Copies shard t from the source (its hash checked on the way) to the
 * target: through an anonymous file, stored by /proc/self/fd. */
static int send_shard(pusher *p, const task *t)
{
	kiln_shard_request f = {.hash = t->hash, .bytes = t->bytes, .from = "the source store"};
	char path[64];
	int fd = kiln_fs_temp_file(NULL, "push"), rc;

	if (fd < 0)
		return fd;
	f.sink = to_fd;
	f.ctx = &fd;
	if ((rc = kiln_shard_fetch(p->src, &f)) == 0) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		rc = kiln_store_put_file(p->dst, t->key, path, f.size);
	}
	close(fd);
	return rc;
}

/* Stores len bytes under key (small files: refs, HEAD, the push record);
 * with create_only, only when key holds no object (KILN_EMODIFIED). */
static int put_bytes(kiln_store *store, const char *key, const void *data, size_t len, bool create_only)
{
	char path[64];
	int fd = kiln_fs_temp_file(NULL, "push"), rc;

	if (fd < 0)
		return fd;
	if ((rc = kiln_fs_write_all(fd, data, len, "temporary file")) == 0) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		rc = create_only ? kiln_store_put_file_new(store, key, path, len)
		                 : kiln_store_put_file(store, key, path, len);
	}
	close(fd);
	return rc;
}

static void *worker(void *arg)
{
	pusher *p = arg;

	pthread_setname_np(pthread_self(), "push");

	for (;;) {
		size_t i = atomic_fetch_add(&p->next, 1);
		const task *t;
		double t0;
		int rc;

		if (i >= p->ntasks || atomic_load(&p->failed))
			break;
		t = &p->tasks[i];
		t0 = now_s();
		rc = t->path ? kiln_store_put_file(p->dst, t->key, t->path, t->bytes) : send_shard(p, t);
		pthread_mutex_lock(&p->lock);
		if (rc < 0) {
			if (!atomic_exchange(&p->failed, true)) {
				p->err_code = rc;
				snprintf(p->err, sizeof(p->err), "%s", kiln_error_last());
			}
		} else {
			p->out->totals.sent++;
			p->out->totals.sent_bytes += t->bytes;
			report(p, t->key, t->kind, t->bytes, false, now_s() - t0);
			if (p->req->on_progress)
				p->req->on_progress(p->req->ctx, &p->out->totals);
		}
		pthread_mutex_unlock(&p->lock);
	}
	return NULL;
}

static int send_all(pusher *p, unsigned jobs)
{
	pthread_t threads[64];
	unsigned started = 0;

	if (jobs > 64)
		jobs = 64;
	if (jobs > p->ntasks)
		jobs = (unsigned)p->ntasks;
	atomic_store(&p->next, 0);
	for (; started < jobs; started++)
		if (pthread_create(&threads[started], NULL, worker, p) != 0)
			break;
	if (started == 0 && p->ntasks > 0)
		worker(p); /* no thread could start: send from this one */
	for (unsigned i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	if (atomic_load(&p->failed))
		return kiln_error_set(p->err_code, "%s", p->err);
	return 0;
}

/* ---- refs and the record ------------------------------------------------------------- */

typedef struct refs_ctx {
	pusher *p;
	kiln_buf *out;
	size_t skip; /* "<prefix>/" */
} refs_ctx;

static int on_ref(void *ctx, const char *key, uint64_t size, int64_t mtime)
{
	refs_ctx *r = ctx;
	kiln_buf id = KILN_BUF_INIT(64);
	int rc;

	(void)mtime;
	if (size > 64)
		return 0; /* not a ref file */
	if ((rc = kiln_store_get(r->p->dst, key, kiln_buf_sink, &id)) == 0 && id.len >= 40)
		rc = kiln_buf_printf(r->out, "%.40s\t%s\n", id.ptr, key + r->skip);
	kiln_buf_free(&id);
	return rc < 0 ? rc : 0;
}

/* info/refs and objects/info/packs: what git's dumb HTTP transport reads,
 * so a target served over HTTP can be cloned with stock git. */
static int write_info_refs(pusher *p)
{
	kiln_buf refs = KILN_BUF_INIT(256);
	char prefix[512], key[512];
	refs_ctx r = {.p = p, .out = &refs};
	int rc;

	snprintf(prefix, sizeof(prefix), "%s/refs/", p->target->manifest_prefix);
	r.skip = strlen(p->target->manifest_prefix) + 1;
	if ((rc = kiln_store_list(p->dst, prefix, on_ref, &r)) == 0) {
		snprintf(key, sizeof(key), "%s/info/refs", p->target->manifest_prefix);
		rc = put_bytes(p->dst, key, refs.ptr ? refs.ptr : "", refs.len, false);
	}
	if (rc == 0) {
		snprintf(key, sizeof(key), "%s/objects/info/packs", p->target->manifest_prefix);
		rc = put_bytes(p->dst, key, "\n", 1, false);
	}
	kiln_buf_free(&refs);
	return rc;
}

/* HEAD and config, once: what makes the prefix a bare repository git opens. */
static int write_repo_files(pusher *p)
{
	static const char head[] = "ref: refs/heads/main\n";
	static const char config[] =
	    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n";
	char key[512];
	int rc;

	snprintf(key, sizeof(key), "%s/HEAD", p->target->manifest_prefix);
	if ((rc = kiln_store_stat(p->dst, key, NULL)) == 0)
		rc = put_bytes(p->dst, key, head, sizeof(head) - 1, false);
	if (rc < 0)
		return rc;
	snprintf(key, sizeof(key), "%s/config", p->target->manifest_prefix);
	if ((rc = kiln_store_stat(p->dst, key, NULL)) == 0)
		rc = put_bytes(p->dst, key, config, sizeof(config) - 1, false);
	return rc < 0 ? rc : 0;
}

static const char *ref_id(const pusher *p)
{
	return p->v.tag[0] ? p->v.tag : p->v.commit;
}

static bool kiln_push_hex40(const char *s)
{
	for (int i = 0; i < 40; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* 1 when the local ledger shows old (40 hex) superseded by the version's
 * object through one erasure or several, 0 when it does not. */
static int superseded_by_erasure(pusher *p, const char *old)
{
	char succ[41];
	int rc = kiln_ledger_ref_successor(p->m, p->out->dataset, old, succ);

	return rc <= 0 ? rc : strncmp(succ, ref_id(p), 40) == 0 ? 1 : 0;
}

/* The ref's file at the target: absent, the same, another object the
 * erasure ledger shows superseded by this one (replaced), or another
 * object (refused). */
static int check_target_ref(pusher *p)
{
	kiln_buf have = KILN_BUF_INIT(4096);
	char key[512];
	int rc;

	snprintf(key, sizeof(key), "%s/%s", p->target->manifest_prefix, p->out->ref);
	rc = kiln_store_get(p->dst, key, kiln_buf_sink, &have);
	if (rc == KILN_ENOTFOUND) {
		kiln_error_clear();
		rc = 0;
	} else if (rc == 0 && have.len >= 40 && memcmp(have.ptr, ref_id(p), 40) == 0) {
		p->ref_there = true;
	} else if (rc == 0 && have.len >= 40 && kiln_push_hex40(have.ptr) &&
	           (rc = superseded_by_erasure(p, have.ptr)) != 0) {
		if (rc == 1) {
			p->out->replaced = true;
			snprintf(p->out->replaced_id, sizeof(p->out->replaced_id), "%.40s", have.ptr);
			rc = 0;
		}
	} else if (rc == 0) {
		rc = kiln_error_set(KILN_EINVALID,
		                    "%s@%s: the target %s already holds this version as another object "
		                    "(%.12s, this one is %.12s): a pushed version is never replaced "
		                    "(unless the erasure ledger shows it superseded)",
		                    p->out->dataset, p->out->version, p->target->name,
		                    have.len >= 12 ? have.ptr : "?", ref_id(p));
	}
	kiln_buf_free(&have);
	return rc;
}

/* The version's ref, created only where there is none: of two pushes of
 * different objects under one name at once, exactly one writes it and the
 * other is refused as check_target_ref refuses (never replaced). */
static int write_ref(pusher *p)
{
	char key[512], line[48];
	int rc;

	if (p->ref_there)
		return 0;
	snprintf(key, sizeof(key), "%s/%s", p->target->manifest_prefix, p->out->ref);
	snprintf(line, sizeof(line), "%s\n", ref_id(p));
	if (p->out->replaced) /* judged again just before: still the superseded object */
		return (rc = check_target_ref(p)) < 0 || p->ref_there
		           ? rc
		           : put_bytes(p->dst, key, line, strlen(line), false);
	if ((rc = put_bytes(p->dst, key, line, strlen(line), true)) != KILN_EMODIFIED)
		return rc;
	kiln_error_clear(); /* written meanwhile: the same object, or refused */
	if ((rc = check_target_ref(p)) < 0)
		return rc;
	if (!p->ref_there)
		return kiln_error_set(KILN_EMODIFIED, "%s@%s: the target %s's ref %s changed during the push",
		                      p->out->dataset, p->out->version, p->target->name, p->out->ref);
	return 0;
}

/* 1 when info/refs at the target names the version's ref, 0 when not. */
static int info_refs_names(pusher *p)
{
	kiln_buf refs = KILN_BUF_INIT(4u << 20), want = KILN_BUF_INIT(512);
	char key[512];
	int rc;

	snprintf(key, sizeof(key), "%s/info/refs", p->target->manifest_prefix);
	rc = kiln_store_get(p->dst, key, kiln_buf_sink, &refs);
	if (rc == KILN_ENOTFOUND || rc == KILN_ELIMIT) {
		kiln_error_clear(); /* none, or not one kiln wrote: written again */
		rc = 0;
	} else if (rc == 0 && (rc = kiln_buf_printf(&want, "%s\t%s\n", ref_id(p), p->out->ref)) == 0) {
		rc = refs.len >= want.len && memmem(refs.ptr, refs.len, want.ptr, want.len) ? 1 : 0;
	}
	kiln_buf_free(&refs);
	kiln_buf_free(&want);
	return rc;
}

static int write_record(pusher *p)
{
	kiln_buf rec = KILN_BUF_INIT(512);
	char key[512], when[32];
	time_t now = time(NULL);
	struct tm tm;
	int rc;

	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	rc = kiln_buf_printf(
	    &rec,
	    "{\"dataset\":\"%s\",\"version\":\"%s\",\"ref\":\"%s\",\"commit\":\"%s\","
	    "\"tag\":\"%s\",\"promoted\":%s,\"signed\":%s,\"signer\":\"%s\","
	    "\"shards\":%" PRIu64 ",\"shard_bytes\":%" PRIu64 ",\"pushed_at\":\"%s\",\"kiln\":\"%s\"}\n",
	    p->out->dataset, p->out->version, p->out->ref, p->out->commit, p->out->tag,
	    p->out->promoted ? "true" : "false", p->out->signed_by_key ? "true" : "false", p->out->signer,
	    p->out->totals.shards, p->out->totals.shard_bytes, when, PACKAGE_VERSION);
	snprintf(key, sizeof(key), "pushes/%s/%s.json", p->out->dataset, p->out->version);
	if (rc == 0)
		rc = put_bytes(p->dst, key, rec.ptr, rec.len, false);
	kiln_buf_free(&rec);
	return rc;
}

/* ---- after an erasure ------------------------------------------------------------- */

/* refs/erasures/<dataset> at the target, written before the version's ref
 * so that a reader who sees a replaced tag finds what replaced it. */
static int write_ledger_ref(pusher *p)
{
	char key[512], line[48];

	if (!p->ledger_tip[0])
		return 0;
	snprintf(key, sizeof(key), "%s/" KILN_LEDGER_REF_PREFIX "%s", p->target->manifest_prefix,
	         p->out->dataset);
	snprintf(line, sizeof(line), "%s\n", p->ledger_tip);
	return put_bytes(p->dst, key, line, strlen(line), false);
}

typedef struct sweep {
	pusher *p;
	kiln_oidset keep; /* objects the target's refs reach */
	char (*need)[65]; /* shards the target's refs list */
	size_t nneed, need_cap;
	char **gone; /* superseded commits and tags (sorted) */
	size_t ngone;
	bool deferred;
	size_t skip; /* "<prefix>/" */
} sweep;

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_gone(const sweep *w, const char *id)
{
	const char *k = id;

	return w->ngone && bsearch(&k, w->gone, w->ngone, sizeof(*w->gone), str_cmp);
}

static bool keep_id(void *ctx, const char *id)
{
	sweep *w = ctx;
	git_oid oid;

	if (git_oid_fromstr(&oid, id) == 0 && kiln_oidset_add(&w->keep, &oid) < 0)
		w->deferred = true; /* out of memory: delete nothing */
	return true;                /* nothing written; its objects still visited */
}

static int need_shard(void *ctx, const kiln_shard_entry *e)
{
	sweep *w = ctx;

	if (KILN_ARRAY_GROW(w->need, w->need_cap, w->nneed, NULL) < 0)
		return KILN_ENOMEM;
	snprintf(w->need[w->nneed++], 65, "%s", e->hash);
	return 0;
}

/* One ref at the target: what it reaches is kept. A ref naming a
 * superseded version, or one this repository does not hold as it is
 * there, defers the deletion (what it needs is not known here). */
static int on_target_ref(void *ctx, const char *key, uint64_t size, int64_t mtime)
{
	sweep *w = ctx;
	pusher *p = w->p;
	const char *rel = key + w->skip;
	kiln_buf id = KILN_BUF_INIT(64);
	kiln_version v = {0};
	kiln_export_sink sink = {.have = keep_id, .ctx = w};
	char spec[400], objects[4096 + 16];
	int rc;

	(void)mtime;
	if (size > 64 || w->deferred)
		return 0;
	if ((rc = kiln_store_get(p->dst, key, kiln_buf_sink, &id)) < 0)
		goto cleanup;
	if (id.len < 40 || !kiln_push_hex40(id.ptr) ||
	    is_gone(w, (snprintf(spec, 41, "%.40s", id.ptr), spec))) {
		w->deferred = true;
		goto cleanup;
	}
	if (strncmp(rel, KILN_LEDGER_REF_PREFIX, strlen(KILN_LEDGER_REF_PREFIX)) == 0) {
		if ((rc = kiln_manifest_has_object(p->m, spec)) < 0)
			goto cleanup;
		if (rc == 0) {
			w->deferred = true;
			goto cleanup;
		}
		snprintf(v.commit, sizeof(v.commit), "%.40s", spec);
	} else {
		const char *name = strncmp(rel, "refs/tags/", 10) == 0 ? rel + 10 : NULL;
		const char *slash = name ? strchr(name, '/') : NULL;

		snprintf(spec, sizeof(spec), "%.*s@%s", slash ? (int)(slash - name) : 0, name ? name : "",
		         slash ? slash + 1 : "");
		rc = slash ? kiln_version_lookup(p->m, spec, &v) : KILN_ENOTFOUND;
		if (rc == KILN_ENOTFOUND ||
		    (rc == 0 && strncmp(v.tag[0] ? v.tag : v.commit, id.ptr, 40) != 0)) {
			kiln_error_clear();
			w->deferred = true;
			rc = 0;
			goto cleanup;
		}
		if (rc < 0)
			goto cleanup;
		for (int s = 0; rc == 0 && s < KILN_SPLIT_COUNT; s++)
			rc = kiln_version_shards(p->m, &v, (kiln_split)s, need_shard, w);
		if (rc < 0)
			goto cleanup;
	}
	snprintf(objects, sizeof(objects), "%s/objects", p->staging);
	rc = kiln_manifest_export(p->m, &v, objects, &sink, NULL);
cleanup:
	kiln_buf_free(&id);
	return rc;
}

static int need_cmp(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* The ids a git object names: a tag's object, a commit's tree and
 * parents, a tree's entries (submodules skipped); pushed on the stack. */
static int children(const kiln_buf *body, git_object_t type, char (**stack)[41], size_t *n, size_t *cap)
{
	const char *c = body->ptr, *end = body->ptr + body->len;

	while (c < end) {
		char id[41] = "";

		if (type == GIT_OBJECT_TREE) {
			const char *sp = memchr(c, ' ', (size_t)(end - c));
			const char *nul = sp ? memchr(sp, '\0', (size_t)(end - sp)) : NULL;

			if (!nul || end - nul < 21)
				break;
			if (!(sp - c == 6 && memcmp(c, "160000", 6) == 0))
				for (int i = 0; i < 20; i++)
					snprintf(id + 2 * i, 3, "%02x", (unsigned char)nul[1 + i]);
			c = nul + 21;
		} else {
			const char *nl = memchr(c, '\n', (size_t)(end - c));

			if (!nl || nl == c)
				break; /* the header ends at the first empty line */
			if ((type == GIT_OBJECT_TAG && nl - c == 47 && memcmp(c, "object ", 7) == 0) ||
			    (type == GIT_OBJECT_COMMIT && nl - c == 45 && memcmp(c, "tree ", 5) == 0) ||
			    (type == GIT_OBJECT_COMMIT && nl - c == 47 && memcmp(c, "parent ", 7) == 0))
				snprintf(id, sizeof(id), "%.40s", nl - 40);
			c = nl + 1;
		}
		if (!id[0] || !kiln_push_hex40(id))
			continue;
		if (KILN_ARRAY_GROW(*stack, *cap, *n, NULL) < 0)
			return KILN_ENOMEM;
		memcpy((*stack)[(*n)++], id, 41);
	}
	return 0;
}

/* Deletes at the target the objects the superseded commits and tags reach
 * that no ref there reaches: walked through the target's own loose
 * objects (this repository may have purged them), each read checked
 * against its name. */
static int delete_objects(sweep *w)
{
	pusher *p = w->p;
	kiln_oidset seen = KILN_OIDSET_INIT;
	char(*stack)[41] = NULL;
	size_t n = 0, cap = 0;
	kiln_buf z = KILN_BUF_INIT(KILN_GIT_LOOSE_MAX), body = KILN_BUF_INIT(KILN_GIT_LOOSE_MAX);
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < w->ngone; i++) {
		if ((rc = KILN_ARRAY_GROW(stack, cap, n, NULL)) < 0)
			break;
		snprintf(stack[n++], 41, "%.40s", w->gone[i]);
	}
	while (rc == 0 && n > 0) {
		char id[41], key[600];
		git_object_t type;
		git_oid oid;

		memcpy(id, stack[--n], 41);
		snprintf(key, sizeof(key), "%s/objects/%.2s/%.38s", p->target->manifest_prefix, id, id + 2);
		if (git_oid_fromstr(&oid, id) < 0 || kiln_oidset_has(&w->keep, &oid) ||
		    target_size(p, key) < 0)
			continue;
		if ((rc = kiln_oidset_add(&seen, &oid)) <= 0)
			continue; /* visited (0), or out of memory */
		kiln_buf_reset(&z);
		if ((rc = kiln_store_get(p->dst, key, kiln_buf_sink, &z)) == KILN_ENOTFOUND) {
			kiln_error_clear(); /* deleted by an earlier push */
			rc = 0;
			continue;
		}
		if (rc < 0 || (rc = kiln_git_loose_decode(&body, &type, z.ptr, z.len, id)) < 0 ||
		    (rc = children(&body, type, &stack, &n, &cap)) < 0 ||
		    (rc = kiln_store_remove(p->dst, key)) < 0)
			break;
		p->out->deleted_objects++;
	}
	kiln_oidset_free(&seen);
	free(stack);
	kiln_buf_free(&z);
	kiln_buf_free(&body);
	return rc < 0 ? rc : 0;
}

/* What an erasure superseded, deleted at the target once no ref there
 * needs it: the superseded shards, then the git objects only superseded
 * versions reached. */
static int delete_superseded(pusher *p)
{
	sweep w = {.p = p, .keep = KILN_OIDSET_INIT};
	char prefix[512], **shards = NULL;
	size_t nshards = 0;
	int rc;

	if ((rc = kiln_ledger_superseded(p->m, &w.gone, &w.ngone)) < 0 ||
	    (rc = kiln_ledger_superseded_shards(p->m, &shards, &nshards)) < 0)
		goto cleanup;
	snprintf(prefix, sizeof(prefix), "%s/refs/", p->target->manifest_prefix);
	w.skip = strlen(p->target->manifest_prefix) + 1;
	if ((rc = kiln_store_list(p->dst, prefix, on_target_ref, &w)) < 0)
		goto cleanup;
	if (w.deferred) {
		p->out->deletion_deferred = true;
		goto cleanup;
	}
	if (w.nneed)
		qsort(w.need, w.nneed, sizeof(*w.need), need_cmp);
	for (size_t i = 0; rc == 0 && i < nshards; i++) {
		char key[KILN_SHARD_KEY_CAP];

		if (w.nneed && bsearch(shards[i], w.need, w.nneed, sizeof(*w.need), need_cmp))
			continue;
		if ((rc = kiln_shard_name(key, sizeof(key), NULL, shards[i], NULL)) < 0 ||
		    target_size(p, key) < 0)
			continue;
		if ((rc = kiln_store_remove(p->dst, key)) == KILN_ENOTFOUND) {
			kiln_error_clear();
			rc = 0;
		} else if (rc == 0) {
			p->out->deleted_shards++;
		}
	}
	if (rc == 0)
		rc = delete_objects(&w);
cleanup:
	kiln_ledger_ids_free(w.gone, w.ngone);
	kiln_ledger_ids_free(shards, nshards);
	kiln_oidset_free(&w.keep);
	free(w.need);
	return rc;
}

/* ---- judging the version -------------------------------------------------------------- */

static void first_problem(void *ctx, const char *problem)
{
	char *out = ctx;

	if (!out[0])
		snprintf(out, 512, "%s", problem);
}

static bool vn_name(const char *name)
{
	if (name[0] != 'v' || !name[1])
		return false;
	for (const char *c = name + 1; *c; c++)
		if (*c < '0' || *c > '9')
			return false;
	return true;
}

static int judge(pusher *p)
{
	const kiln_push_request *req = p->req;
	kiln_push_result *out = p->out;
	kiln_verify_keys *keys = NULL;
	kiln_verify_sig sig;
	kiln_verify_tree_result tree;
	char problem[512] = "";
	const char *tag_prefix;
	size_t dlen = strlen(p->v.dataset);
	int rc;

	snprintf(out->dataset, sizeof(out->dataset), "%s", p->v.dataset);
	snprintf(out->commit, sizeof(out->commit), "%s", p->v.commit);
	snprintf(out->tag, sizeof(out->tag), "%s", p->v.tag);
	tag_prefix = strncmp(p->v.ref, "refs/tags/", 10) == 0 &&
	                     strncmp(p->v.ref + 10, p->v.dataset, dlen) == 0 && p->v.ref[10 + dlen] == '/'
	                 ? p->v.ref + 11 + dlen
	                 : NULL;
	out->promoted = p->v.tag[0] && tag_prefix && vn_name(tag_prefix);
	if (req->keys_file) {
		if (!(keys = calloc(1, sizeof(*keys))))
			return kiln_error_oom(NULL);
		if ((rc = kiln_verify_keys_load(keys, req->keys_file)) < 0)
			goto cleanup;
	}
	if ((rc = kiln_verify_signature(&sig, p->m, &p->v, keys)) < 0)
		goto cleanup;
	if (sig.state == KILN_VERIFY_SIG_TAMPERED) {
		rc = kiln_error_set(KILN_EINVALID, "%s: its signature does not match its content: not pushed",
		                    req->spec);
		goto cleanup;
	}
	out->signed_by_key = sig.state == KILN_VERIFY_SIG_GOOD && (!keys || sig.trusted);
	if (sig.state == KILN_VERIFY_SIG_GOOD)
		snprintf(out->signer, sizeof(out->signer), "%s", sig.fingerprint);
	if (!req->allow_unpromoted && !(out->promoted && out->signed_by_key)) {
		rc = kiln_error_set(
		    KILN_EINVALID, "%s: %s; only promoted, signed versions are pushed (or give --unpromoted)",
		    req->spec,
		    !out->promoted ? "not a promoted version (no vN tag)"
		    : sig.state != KILN_VERIFY_SIG_GOOD
		        ? "its tag is not signed"
		        : "its tag is not signed by a key of --allowed-signers");
		goto cleanup;
	}
	if (tag_prefix && p->v.tag[0]) {
		snprintf(out->version, sizeof(out->version), "%s", tag_prefix);
		snprintf(out->ref, sizeof(out->ref), "%s", p->v.ref);
	} else {
		snprintf(out->version, sizeof(out->version), "unpromoted-%.12s", p->v.commit);
		snprintf(out->ref, sizeof(out->ref), "refs/tags/%s/%s", p->v.dataset, out->version);
	}
	/* the tree must be whole: a version that does not check out is not sent */
	if ((rc = kiln_verify_tree(&tree, p->m, &p->v, req->spec, NULL, first_problem, problem)) < 0)
		goto cleanup;
	if (tree.problems)
		rc = kiln_error_set(KILN_EINVALID, "%s: not pushed: %s", req->spec, problem);
cleanup:
	free(keys);
	return rc;
}

/* ---- kiln_push ------------------------------------------------------------------------ */

static int plan(pusher *p)
{
	char objects[4096 + 16];
	uint64_t reachable;
	kiln_export_sink sink = {.wrote = wrote_object, .ctx = p}; /* no have: every object compared */
	int rc;

	if ((rc = check_target_ref(p)) < 0 || (rc = list_target(p)) < 0)
		return rc;
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		if ((rc = kiln_version_shards(p->m, &p->v, (kiln_split)s, on_shard, p)) < 0)
			return rc;
	snprintf(p->staging, sizeof(p->staging), "%s/kiln-push-XXXXXX", kiln_fs_temp_dir(NULL));
	if (!mkdtemp(p->staging)) {
		rc = kiln_error_set(KILN_EIO, "%s: cannot create a staging folder: %s",
		                    kiln_fs_temp_dir(NULL), strerror(errno));
		p->staging[0] = '\0';
		return rc;
	}
	snprintf(objects, sizeof(objects), "%s/objects", p->staging);
	if ((rc = kiln_manifest_export(p->m, &p->v, objects, &sink, &reachable)) < 0)
		return rc;
	/* the erasure ledger goes with every version of a dataset that has one */
	if ((rc = kiln_ledger_tip(p->m, p->out->dataset, p->ledger_tip)) <= 0)
		return rc;
	kiln_version lv = {0};

	snprintf(lv.dataset, sizeof(lv.dataset), "%s", p->out->dataset);
	snprintf(lv.commit, sizeof(lv.commit), "%s", p->ledger_tip);
	sink.have = staged;
	p->out->ledger = true;
	return kiln_manifest_export(p->m, &lv, objects, &sink, &reachable);
}

int kiln_push(const kiln_push_request *req, kiln_push_result *out)
{
	pusher p = {.req = req, .target = req->target, .out = out};
	char key[512];
	bool had_ref;
	int rc;

	memset(out, 0, sizeof(*out));
	pthread_mutex_init(&p.lock, NULL);
	if ((rc = kiln_version_open(&p.m, req->manifest)) < 0 ||
	    (rc = kiln_version_resolve(p.m, req->spec, &p.v)) < 0 || (rc = judge(&p)) < 0)
		goto cleanup;
	if ((rc = kiln_store_open(&p.src, req->source_url, req->source_options)) < 0 ||
	    (rc = kiln_store_open(&p.dst, p.target->url, &p.target->store)) < 0)
		goto cleanup;
	if ((rc = plan(&p)) < 0 || req->dry_run)
		goto cleanup;
	if ((rc = send_all(&p, req->concurrency ? req->concurrency : p.target->concurrency)) < 0)
		goto cleanup;
	/* the version appears last, once everything it names is there; a push
	 * resumed after the ref was written still writes what follows it */
	had_ref = p.ref_there;
	if ((rc = write_repo_files(&p)) < 0 || (rc = write_ledger_ref(&p)) < 0 || (rc = write_ref(&p)) < 0)
		goto cleanup;
	if ((rc = had_ref ? info_refs_names(&p) : 0) < 0 || (rc == 0 && (rc = write_info_refs(&p)) < 0))
		goto cleanup;
	snprintf(key, sizeof(key), "pushes/%s/%s.json", out->dataset, out->version);
	if ((rc = had_ref ? kiln_store_stat(p.dst, key, NULL) : 0) < 0 ||
	    (rc == 0 && (rc = write_record(&p)) < 0))
		goto cleanup;
	if (p.ledger_tip[0] && (rc = delete_superseded(&p)) < 0)
		goto cleanup;
	rc = 0;
cleanup:
	if (p.staging[0])
		kiln_fs_remove_tree(p.staging);
	for (size_t i = 0; i < p.ntasks; i++) {
		free(p.tasks[i].key);
		free(p.tasks[i].path);
	}
	free(p.tasks);
	for (size_t i = 0; i < p.nhave; i++)
		free(p.have[i].key);
	free(p.have);
	kiln_store_close(p.src);
	kiln_store_close(p.dst);
	if (p.m)
		kiln_manifest_close(p.m);
	pthread_mutex_destroy(&p.lock);
	return rc;
}
