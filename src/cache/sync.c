/* Sync passes (cache.h kiln_cache_sync): fetch a remote manifest, resolve
 * every pin, download the shards each pin lacks (pins in config order,
 * `concurrency` threads, every download through kiln_cache_fill so it
 * joins a miss being filled for a reader), build each pin's view under tmp/
 * and rename it into place, move the pin's link to it, drop views no pin
 * shows, evict. What a pass leaves behind (the last-sync file, the
 * report) is in last_sync.c. */
#include "core/array.h"
#include "core/units.h"
#include "cache/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "manifest/remote.h"
#include "shard/object.h"

/* ---- listings -------------------------------------------------------------------- */

typedef struct listing_ctx {
	cache_listing *l;
	size_t cap;
	kiln_split split;
} listing_ctx;

static int listing_cb(void *ctx, const kiln_shard_entry *e)
{
	listing_ctx *x = ctx;
	cache_listing *l = x->l;

	if (KILN_ARRAY_GROW(l->v, x->cap, l->n, "cache") < 0)
		return KILN_ENOMEM;
	memcpy(l->v[l->n].hash, e->hash, sizeof(l->v[l->n].hash));
	l->v[l->n].bytes = e->bytes;
	l->n++;
	l->count[x->split]++;
	return 0;
}

int kiln_cache_listing(kiln_manifest *manifest, const kiln_version *version, cache_listing *out)
{
	listing_ctx x = {.l = out};

	memset(out, 0, sizeof(*out));
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		int rc;

		x.split = (kiln_split)s;
		if ((rc = kiln_version_shards(manifest, version, (kiln_split)s, listing_cb, &x)) != 0) {
			kiln_cache_listing_free(out);
			return rc < 0 ? rc : kiln_error_set(KILN_EIO, "listing %s failed", version->commit);
		}
	}
	memcpy(out->commit, version->commit, sizeof(out->commit));
	return 0;
}

void kiln_cache_listing_free(cache_listing *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static uint64_t listing_bytes(const cache_listing *l)
{
	uint64_t b = 0;

	for (size_t i = 0; i < l->n; i++)
		b += l->v[i].bytes;
	return b;
}

/* Distinct shards of several listings. */
typedef struct hash_set {
	const cache_entry **v;
	size_t n, cap;
} hash_set;

static int set_add(hash_set *s, const cache_listing *l)
{
	if (s->n + l->n > s->cap) {
		size_t cap = (s->n + l->n) * 2;
		const cache_entry **v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return kiln_error_oom("cache");
		s->v = v;
		s->cap = cap;
	}
	for (size_t i = 0; i < l->n; i++)
		s->v[s->n++] = &l->v[i];
	return 0;
}

static int by_hash(const void *a, const void *b)
{
	return memcmp((*(const cache_entry *const *)a)->hash, (*(const cache_entry *const *)b)->hash, 64);
}

static void set_unique(hash_set *s)
{
	size_t k = 0;

	if (!s->n)
		return;
	qsort(s->v, s->n, sizeof(*s->v), by_hash);
	for (size_t i = 1; i < s->n; i++)
		if (memcmp(s->v[i]->hash, s->v[k]->hash, 64) != 0)
			s->v[++k] = s->v[i];
	s->n = k + 1;
}

static uint64_t set_bytes(const hash_set *s)
{
	uint64_t b = 0;

	for (size_t i = 0; i < s->n; i++)
		b += s->v[i]->bytes;
	return b;
}

static int set_publish(kiln_cache *c, const hash_set *s)
{
	return kiln_cache_set_pinned(c, s->v, s->n);
}

/* ---- views ------------------------------------------------------------------------ */

static void view_path(const kiln_cache *c, char *out, const char *dataset, const char *name)
{
	snprintf(out, PATH_MAX, "%s/views/%s/%s", c->dir, dataset, name);
}

static bool view_ready(const kiln_cache *c, const char *dataset, const char *commit)
{
	char path[PATH_MAX];

	view_path(c, path, dataset, commit);
	strncat(path, "/ready", PATH_MAX - strlen(path) - 1);
	return access(path, F_OK) == 0;
}

/* The commit views/<ds>/<ref> shows (a ready view), "" when none. */
static void read_shown(const kiln_cache *c, const cache_pin *p, char out[41])
{
	char path[PATH_MAX], target[64];
	ssize_t n;

	out[0] = '\0';
	if (kiln_cache_hex40(p->ref)) {
		if (view_ready(c, p->dataset, p->ref))
			memcpy(out, p->ref, 41);
		return;
	}
	view_path(c, path, p->dataset, p->ref);
	n = readlink(path, target, sizeof(target) - 1);
	if (n != 40)
		return;
	target[40] = '\0';
	if (kiln_cache_hex40(target) && view_ready(c, p->dataset, target))
		memcpy(out, target, 41);
}

static int write_ready(const char *dir, const cache_pin *p, const cache_listing *l)
{
	char path[PATH_MAX], text[512], when[32];
	time_t now = time(NULL);
	struct tm tm;
	int fd, n;

	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	n = snprintf(text, sizeof(text), "dataset %s\ncommit %s\nshards %zu\nbytes %" PRIu64 "\nbuilt %s\n",
	             p->dataset, l->commit, l->n, listing_bytes(l), when);
	snprintf(path, sizeof(path), "%s/ready", dir);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
	if (write(fd, text, (size_t)n) != n) {
		int err = errno;

		close(fd);
		return kiln_error_set(err == ENOSPC ? KILN_ELIMIT : KILN_EIO, "%s: %s", path, strerror(err));
	}
	close(fd);
	return 0;
}

/* Re-links view files whose shard was fetched again (another inode). */
static int repair_view(kiln_cache *c, const char *view, const cache_listing *l, uint64_t *repaired)
{
	size_t k = 0;

	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		for (size_t i = 0; i < l->count[s]; i++, k++) {
			char file[PATH_MAX], shard[PATH_MAX], tmp[PATH_MAX];
			struct stat vs, ss;

			snprintf(file, sizeof(file), "%s/%s/%05zu%s", view, kiln_split_name((kiln_split)s), i,
			         kiln_shard_jsonl_zst.extension);
			kiln_cache_shard_path(c, l->v[k].hash, shard);
			if (stat(shard, &ss) < 0)
				return kiln_error_set(KILN_ENOTFOUND,
				                      "shard %s of view %s is not in the cache", l->v[k].hash,
				                      view);
			if (lstat(file, &vs) == 0 && vs.st_ino == ss.st_ino && vs.st_dev == ss.st_dev)
				continue;
			kiln_cache_tmp_name(c, tmp, "relink");
			if (link(shard, tmp) < 0 || rename(tmp, file) < 0) {
				int err = errno;

				unlink(tmp);
				return kiln_error_set(KILN_EIO, "%s: %s", file, strerror(err));
			}
			(*repaired)++;
		}
	return 0;
}

/* views/<ds>/<commit>: built under tmp/, renamed into place with its ready
 * marker; a ready view is only repaired. */
static int build_view(kiln_cache *c, const cache_pin *p, const cache_listing *l, uint64_t *repaired)
{
	char view[PATH_MAX], tmp[PATH_MAX], file[PATH_MAX], shard[PATH_MAX];
	size_t k = 0;
	int rc;

	view_path(c, view, p->dataset, "");
	if (mkdir(view, 0755) < 0 && errno != EEXIST)
		return kiln_error_set(KILN_EIO, "%s: %s", view, strerror(errno));
	view_path(c, view, p->dataset, l->commit);
	if (view_ready(c, p->dataset, l->commit))
		return repair_view(c, view, l, repaired);
	if ((rc = kiln_fs_remove_tree(view)) < 0) /* a view without its marker: never complete */
		return rc;
	kiln_cache_tmp_name(c, tmp, "view");
	if (mkdir(tmp, 0755) < 0)
		return kiln_error_set(errno == ENOSPC ? KILN_ELIMIT : KILN_EIO, "%s: %s", tmp,
		                      strerror(errno));
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		snprintf(file, sizeof(file), "%s/%s", tmp, kiln_split_name((kiln_split)s));
		if (mkdir(file, 0755) < 0) {
			rc = kiln_error_set(errno == ENOSPC ? KILN_ELIMIT : KILN_EIO, "%s: %s", file,
			                    strerror(errno));
			goto fail;
		}
		for (size_t i = 0; i < l->count[s]; i++, k++) {
			snprintf(file, sizeof(file), "%s/%s/%05zu%s", tmp, kiln_split_name((kiln_split)s), i,
			         kiln_shard_jsonl_zst.extension);
			kiln_cache_shard_path(c, l->v[k].hash, shard);
			if (link(shard, file) < 0) {
				rc =
				    errno == ENOENT
				        ? kiln_error_set(
				              KILN_ERETRY,
				              "shard %s left the cache before the view of %s@%.12s was built",
				              l->v[k].hash, p->dataset, l->commit)
				        : kiln_error_set(errno == ENOSPC ? KILN_ELIMIT : KILN_EIO, "%s: %s",
				                         file, strerror(errno));
				goto fail;
			}
		}
	}
	if ((rc = write_ready(tmp, p, l)) < 0)
		goto fail;
	if (rename(tmp, view) < 0) {
		rc = kiln_error_set(KILN_EIO, "%s: %s", view, strerror(errno));
		goto fail;
	}
	KILN_LOG(KILN_LOG_INFO, "cache_view_ready", "a pinned version's view is complete",
	         KILN_F_STR("pin", p->spec), KILN_F_STR("commit", l->commit), KILN_F_INT("shards", l->n));
	return 0;
fail:
	kiln_fs_remove_tree(tmp);
	return rc;
}

/* views/<ds>/<ref> -> <commit>, replaced atomically. */
static int set_link(kiln_cache *c, const cache_pin *p, const char *commit)
{
	char path[PATH_MAX], tmp[PATH_MAX], target[64];
	ssize_t n;

	if (strcmp(p->ref, commit) == 0)
		return 0;
	view_path(c, path, p->dataset, p->ref);
	n = readlink(path, target, sizeof(target) - 1);
	if (n == 40 && memcmp(target, commit, 40) == 0)
		return 0;
	kiln_cache_tmp_name(c, tmp, "link");
	if (symlink(commit, tmp) < 0)
		return kiln_error_set(KILN_EIO, "%s: %s", tmp, strerror(errno));
	if (rename(tmp, path) < 0) {
		/* something else (a directory) sits there: replace it */
		if (kiln_fs_remove_tree(path) < 0 || rename(tmp, path) < 0) {
			int err = errno;

			unlink(tmp);
			return kiln_error_set(KILN_EIO, "%s: %s", path, strerror(err));
		}
	}
	return 0;
}

/* Removes views of datasets no pin names, links no pin owns and commit
 * views no pin shows. */
static void drop_stale(kiln_cache *c)
{
	const size_t np = c->config->pin_count;
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "%s/views", c->dir);
	if (!(d = opendir(path)))
		return;
	while ((e = readdir(d))) {
		bool pinned = false;
		struct dirent *f;
		DIR *sub;
		int fd;

		if (e->d_name[0] == '.')
			continue;
		for (size_t i = 0; i < np; i++)
			pinned |= strcmp(c->pins[i].dataset, e->d_name) == 0;
		if (!pinned) {
			snprintf(path, sizeof(path), "%s/views/%s", c->dir, e->d_name);
			kiln_fs_remove_tree(path);
			continue;
		}
		if ((fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			continue;
		if (!(sub = fdopendir(fd))) {
			close(fd);
			continue;
		}
		while ((f = readdir(sub))) {
			struct stat st;
			bool keep = false;

			if (f->d_name[0] == '.' ||
			    fstatat(dirfd(sub), f->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			if (S_ISLNK(st.st_mode)) {
				for (size_t i = 0; i < np; i++)
					keep |= strcmp(c->pins[i].dataset, e->d_name) == 0 &&
					        strcmp(c->pins[i].ref, f->d_name) == 0;
				if (!keep)
					unlinkat(dirfd(sub), f->d_name, 0);
			} else if (S_ISDIR(st.st_mode) && kiln_cache_hex40(f->d_name)) {
				for (size_t i = 0; i < np; i++)
					keep |= strcmp(c->pins[i].dataset, e->d_name) == 0 &&
					        (strcmp(c->pins[i].shown, f->d_name) == 0 ||
					         strcmp(c->pins[i].version.commit, f->d_name) == 0);
				if (!keep) {
					snprintf(path, sizeof(path), "%s/views/%s/%s", c->dir, e->d_name,
					         f->d_name);
					kiln_fs_remove_tree(path);
					KILN_LOG(KILN_LOG_INFO, "cache_view_dropped",
					         "no pin shows this version any more",
					         KILN_F_STR("dataset", e->d_name),
					         KILN_F_STR("commit", f->d_name));
				}
			}
		}
		closedir(sub);
	}
	closedir(d);
}

/* ---- pins ------------------------------------------------------------------------- */

static void pin_error(kiln_cache *c, cache_pin *p, const char *prefix, const char *msg)
{
	pthread_mutex_lock(&c->lock);
	snprintf(p->error, sizeof(p->error), "%s%s", prefix, msg);
	pthread_mutex_unlock(&c->lock);
}

/* The listing of the commit a pin's view shows, when not its version. */
static void list_shown(kiln_cache *c, cache_pin *p, const kiln_version *v, cache_listing *out)
{
	char shown[41];
	kiln_version old = *v;

	read_shown(c, p, shown);
	pthread_mutex_lock(&c->lock);
	memcpy(p->shown, shown, sizeof(shown));
	pthread_mutex_unlock(&c->lock);
	if (!shown[0] || strcmp(shown, v->commit) == 0)
		return;
	memcpy(old.commit, shown, sizeof(shown));
	old.ref[0] = '\0';
	if (kiln_cache_listing(c->manifest, &old, out) < 0)
		kiln_error_clear(); /* gone from the manifest: nothing to keep */
}

int kiln_cache_pins_init(kiln_cache *c)
{
	const size_t np = c->config->pin_count;
	cache_listing *ls = calloc(2 * np + 1, sizeof(*ls));
	hash_set set = {0};
	bool all = true;
	int rc = 0;

	if (!ls)
		return kiln_error_oom("cache");
	for (size_t i = 0; i < np; i++) {
		cache_pin *p = &c->pins[i];
		kiln_version v;

		if (kiln_version_resolve(c->manifest, p->spec, &v) == 0) {
			p->version = v;
			p->follows = strncmp(v.ref, "refs/heads/", 11) == 0;
		} else if (!p->version.commit[0]) {
			all = false;
			continue;
		}
		if (kiln_cache_listing(c->manifest, &p->version, &ls[2 * i]) < 0) {
			all = false;
			continue;
		}
		p->shards = ls[2 * i].n;
		p->bytes = listing_bytes(&ls[2 * i]);
		p->ready = view_ready(c, p->dataset, p->version.commit);
		list_shown(c, p, &p->version, &ls[2 * i + 1]);
		if ((rc = set_add(&set, &ls[2 * i])) < 0 || (rc = set_add(&set, &ls[2 * i + 1])) < 0)
			goto cleanup;
	}
	kiln_error_clear();
	if (all) {
		set_unique(&set);
		rc = set_publish(c, &set);
	}
cleanup:
	for (size_t i = 0; i < 2 * np; i++)
		kiln_cache_listing_free(&ls[i]);
	free(ls);
	free(set.v);
	return rc;
}

/* ---- downloads -------------------------------------------------------------------- */

typedef struct job {
	kiln_cache *c;
	const cache_entry **todo;
	size_t n;
	_Atomic size_t next;
	_Atomic uint64_t done, done_bytes, failed;
	_Atomic bool stop; /* the cache is full */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned running;
	char stop_msg[512], fail_msg[512];
} job;

static void *worker(void *arg)
{
	job *j = arg;

	pthread_setname_np(pthread_self(), "cache-sync");

	while (!atomic_load(&j->stop)) {
		size_t i = atomic_fetch_add(&j->next, 1);
		int rc;

		if (i >= j->n)
			break;
		rc = kiln_cache_fill(j->c, j->todo[i]->hash, j->todo[i]->bytes, false);
		if (rc == 0) {
			atomic_fetch_add(&j->done, 1);
			atomic_fetch_add(&j->done_bytes, j->todo[i]->bytes);
			continue;
		}
		pthread_mutex_lock(&j->mu);
		if (rc == KILN_ELIMIT) {
			if (!atomic_load(&j->stop))
				snprintf(j->stop_msg, sizeof(j->stop_msg), "%s", kiln_error_last());
			atomic_store(&j->stop, true);
		} else {
			if (atomic_fetch_add(&j->failed, 1) == 0)
				snprintf(j->fail_msg, sizeof(j->fail_msg), "%s", kiln_error_last());
		}
		pthread_mutex_unlock(&j->mu);
	}
	pthread_mutex_lock(&j->mu);
	j->running--;
	pthread_cond_signal(&j->cv);
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

typedef struct progress_fn {
	void (*fn)(void *ctx, const kiln_cache_progress *p);
	void *ctx;
	kiln_cache_progress p;
	uint64_t base_shards, base_bytes; /* present before the downloads */
} progress_fn;

static void report(progress_fn *pf, const job *j)
{
	if (!pf->fn)
		return;
	pf->p.shards_done = pf->base_shards + (j ? atomic_load(&j->done) : 0);
	pf->p.bytes_done = pf->base_bytes + (j ? atomic_load(&j->done_bytes) : 0);
	pf->fn(pf->ctx, &pf->p);
}

static void run_job(kiln_cache *c, job *j, progress_fn *pf)
{
	unsigned want = c->config->concurrency ? c->config->concurrency : 1, started = 0;
	pthread_t *t;

	if (want > j->n)
		want = (unsigned)j->n;
	t = calloc(want, sizeof(*t));
	pthread_mutex_lock(&j->mu);
	for (unsigned i = 0; t && i < want; i++) {
		j->running++;
		if (pthread_create(&t[started], NULL, worker, j) != 0) {
			j->running--;
			break;
		}
		started++;
	}
	pthread_mutex_unlock(&j->mu);
	if (!started) { /* no threads: do it here */
		j->running = 1;
		worker(j);
	}
	pthread_mutex_lock(&j->mu);
	while (j->running > 0) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 200 * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&j->cv, &j->mu, &until);
		pthread_mutex_unlock(&j->mu);
		report(pf, j);
		pthread_mutex_lock(&j->mu);
	}
	pthread_mutex_unlock(&j->mu);
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
}

/* ---- one pass --------------------------------------------------------------------- */

typedef struct outcome {
	int manifest_rc, limit_rc, fail_rc;
	uint64_t manifest_errors;
	char manifest_msg[512], limit_msg[768], fail_msg[512];
} outcome;

static void note(int *rc, char *msg, size_t cap, int code, const char *text)
{
	if (*rc)
		return;
	*rc = code ? code : KILN_EIO;
	snprintf(msg, cap, "%s", text);
}

static void manifest_note(outcome *o, int code, const char *text)
{
	o->manifest_errors++;
	note(&o->manifest_rc, o->manifest_msg, sizeof(o->manifest_msg), code, text);
}

/* "pins need 3.4 GiB (a@main 1.2 GiB, b@v3 2.2 GiB) but size_limit is 2.0 GiB" */
static void limit_message(kiln_cache *c, size_t upto, uint64_t need, char *out, size_t cap)
{
	char a[32], b[32];
	size_t len;

	kiln_size_human(a, sizeof(a), need, false);
	kiln_size_human(b, sizeof(b), c->config->size_limit, false);
	len = (size_t)snprintf(out, cap, "pins need %s (", a);
	for (size_t i = 0; i <= upto && len < cap; i++) {
		kiln_size_human(a, sizeof(a), c->pins[i].bytes, false);
		len += (size_t)snprintf(out + len, cap - len, "%s%s %s", i ? ", " : "", c->pins[i].spec, a);
	}
	if (len < cap)
		snprintf(out + len, cap - len, ") but size_limit is %s: filling stopped at %s", b,
		         c->pins[upto].spec);
}

/* Fills and views one pin; false when its view is not ready. */
static bool sync_pin(kiln_cache *c, size_t i, cache_listing *cur, bool *stopped, outcome *o,
                     kiln_cache_sync_stats *st, void (*progress)(void *, const kiln_cache_progress *),
                     void *ctx)
{
	cache_pin *p = &c->pins[i];
	progress_fn pf = {.fn = progress, .ctx = ctx};
	job j = {.c = c};
	char version[160];
	hash_set todo = {0};
	uint64_t todo_bytes = 0;
	bool ok = false;
	int rc;

	snprintf(version, sizeof(version), "%s@%.12s", p->dataset, cur->commit);
	pf.p.version = version;
	pf.p.shards_total = cur->n;
	pf.p.bytes_total = listing_bytes(cur);
	pthread_mutex_init(&j.mu, NULL);
	pthread_cond_init(&j.cv, NULL);
	if (set_add(&todo, cur) < 0)
		goto out;
	set_unique(&todo);
	for (size_t k = 0, n = todo.n; k < n; k++) {
		rc = kiln_cache_present(c, todo.v[k]->hash, todo.v[k]->bytes);
		if (rc < 0) {
			note(&o->fail_rc, o->fail_msg, sizeof(o->fail_msg), rc, kiln_error_last());
			pin_error(c, p, "", kiln_error_last());
			goto out;
		}
		if (rc == 1) {
			pf.base_shards++;
			pf.base_bytes += todo.v[k]->bytes;
			todo.v[k] = NULL;
		} else {
			todo_bytes += todo.v[k]->bytes;
		}
	}
	/* duplicates within a version count once: add them to what is present */
	pf.base_shards += cur->n - todo.n;
	{
		size_t k = 0;

		for (size_t m = 0; m < todo.n; m++)
			if (todo.v[m])
				todo.v[k++] = todo.v[m];
		todo.n = k;
	}
	report(&pf, NULL);
	if (todo.n && *stopped) {
		pin_error(c, p, "", o->limit_msg);
		goto out;
	}
	if (todo.n) {
		kiln_cache_evict(c, todo_bytes);
		j.todo = todo.v;
		j.n = todo.n;
		run_job(c, &j, &pf);
		st->failed += atomic_load(&j.failed);
		pthread_mutex_lock(&c->lock);
		p->fetched = atomic_load(&j.done);
		p->fetched_bytes = atomic_load(&j.done_bytes);
		pthread_mutex_unlock(&c->lock);
		if (atomic_load(&j.stop)) {
			*stopped = true;
			note(&o->limit_rc, o->limit_msg, sizeof(o->limit_msg), KILN_ELIMIT, j.stop_msg);
			KILN_LOG(KILN_LOG_ERROR, "cache_full", j.stop_msg, KILN_F_STR("pin", p->spec));
			pin_error(c, p, "", j.stop_msg);
			goto out;
		}
		if (atomic_load(&j.failed)) {
			char msg[640];

			snprintf(msg, sizeof(msg), "%" PRIu64 " shards could not be fetched (first: %s)",
			         (uint64_t)atomic_load(&j.failed), j.fail_msg);
			note(&o->fail_rc, o->fail_msg, sizeof(o->fail_msg), KILN_ERETRY, msg);
			pin_error(c, p, "", msg);
			goto out;
		}
	}
	if ((rc = build_view(c, p, cur, &st->repaired)) < 0 || (rc = set_link(c, p, cur->commit)) < 0) {
		if (rc == KILN_ELIMIT) {
			*stopped = true;
			note(&o->limit_rc, o->limit_msg, sizeof(o->limit_msg), rc, kiln_error_last());
		} else {
			note(&o->fail_rc, o->fail_msg, sizeof(o->fail_msg), rc, kiln_error_last());
		}
		pin_error(c, p, "view: ", kiln_error_last());
		goto out;
	}
	pthread_mutex_lock(&c->lock);
	p->ready = true;
	memcpy(p->shown, cur->commit, sizeof(p->shown));
	pthread_mutex_unlock(&c->lock);
	ok = true;
	report(&pf, &j);
out:
	free(todo.v);
	pthread_mutex_destroy(&j.mu);
	pthread_cond_destroy(&j.cv);
	return ok;
}

/* The cache's counters when a pass starts: the pass reports what it added. */
typedef struct counters {
	uint64_t peer_bytes, origin_bytes, fills, evicted, evicted_bytes;
} counters;

static counters read_counters(kiln_cache *c)
{
	return (counters){
	    .peer_bytes = atomic_load(&c->n_bytes_peer),
	    .origin_bytes = atomic_load(&c->n_bytes_origin),
	    .fills = atomic_load(&c->n_fills_peer) + atomic_load(&c->n_fills_origin),
	    .evicted = atomic_load(&c->n_evicted),
	    .evicted_bytes = atomic_load(&c->n_evicted_bytes),
	};
}

/* Fetches the remote manifest once per pinned dataset. */
static void fetch_manifests(kiln_cache *c, outcome *o)
{
	for (size_t i = 0; c->remote && i < c->config->pin_count; i++) {
		bool seen = false;
		int rc;

		for (size_t k = 0; k < i; k++)
			seen |= strcmp(c->pins[k].dataset, c->pins[i].dataset) == 0;
		if (seen)
			continue;
		if ((rc = kiln_manifest_fetch(c->manifest, c->config->manifest, c->pins[i].dataset)) < 0) {
			KILN_LOG(KILN_LOG_WARN, "cache_manifest_fetch_failed", kiln_error_last(),
			         KILN_F_STR("dataset", c->pins[i].dataset));
			manifest_note(o, rc, kiln_error_last());
		}
	}
}

/* Resolves every pin into cur[i] and lists what its view shows into
 * shown[i] (a pin that no longer resolves keeps its last version). */
static void resolve_pins(kiln_cache *c, cache_listing *cur, cache_listing *shown, outcome *o)
{
	for (size_t i = 0; i < c->config->pin_count; i++) {
		cache_pin *p = &c->pins[i];
		kiln_version v;
		char err[512] = "";
		int rc;

		if ((rc = kiln_version_resolve(c->manifest, p->spec, &v)) < 0) {
			snprintf(err, sizeof(err), "%s", kiln_error_last());
			manifest_note(o, rc, err);
			KILN_LOG(KILN_LOG_WARN, "cache_pin_unresolved", err, KILN_F_STR("pin", p->spec));
			if (!p->version.commit[0]) {
				pin_error(c, p, "", err);
				continue;
			}
			v = p->version;
		}
		if ((rc = kiln_cache_listing(c->manifest, &v, &cur[i])) < 0) {
			manifest_note(o, rc, kiln_error_last());
			pin_error(c, p, "", kiln_error_last());
			continue;
		}
		pthread_mutex_lock(&c->lock);
		p->version = v;
		p->follows = strncmp(v.ref, "refs/heads/", 11) == 0;
		p->shards = cur[i].n;
		p->bytes = listing_bytes(&cur[i]);
		p->ready = view_ready(c, p->dataset, v.commit);
		p->fetched = p->fetched_bytes = 0;
		snprintf(p->error, sizeof(p->error), "%s", err);
		pthread_mutex_unlock(&c->lock);
		list_shown(c, p, &v, &shown[i]);
	}
}

/* The pinned set: every pin's version and what its view shows (every
 * view, or with !all_shown only the views that still show another commit). */
static int publish_pinned(kiln_cache *c, const cache_listing *cur, const cache_listing *shown, bool all_shown)
{
	hash_set all = {0};
	int rc = 0;

	for (size_t i = 0; i < c->config->pin_count; i++) {
		if ((rc = set_add(&all, &cur[i])) < 0)
			break;
		if ((all_shown || strcmp(c->pins[i].shown, cur[i].commit) != 0) &&
		    (rc = set_add(&all, &shown[i])) < 0)
			break;
	}
	if (rc == 0) {
		set_unique(&all);
		rc = set_publish(c, &all);
	}
	free(all.v);
	return rc;
}

/* Fills pins in order while what they need fits. */
static int fill_pins(kiln_cache *c, cache_listing *cur, const cache_listing *shown, outcome *o,
                     kiln_cache_sync_stats *st, void (*progress)(void *, const kiln_cache_progress *),
                     void *ctx)
{
	hash_set upto = {0};
	bool stopped = false;
	int rc = 0;

	for (size_t i = 0; i < c->config->pin_count; i++) {
		uint64_t need;

		if (!cur[i].commit[0])
			continue;
		if ((rc = set_add(&upto, &cur[i])) < 0 || (rc = set_add(&upto, &shown[i])) < 0)
			break;
		set_unique(&upto);
		need = set_bytes(&upto);
		if (!stopped && need > c->config->size_limit) {
			stopped = true;
			limit_message(c, i, need, o->limit_msg, sizeof(o->limit_msg));
			o->limit_rc = KILN_ELIMIT;
			KILN_LOG(KILN_LOG_ERROR, "cache_full", o->limit_msg,
			         KILN_F_STR("pin", c->pins[i].spec));
		}
		if (sync_pin(c, i, &cur[i], &stopped, o, st, progress, ctx))
			st->pins_ready++;
	}
	free(upto.v);
	return rc;
}

/* The pass's statistics and outcome (rc, message m) into the cache, the
 * last-sync file, the metrics and the log. */
static void record_pass(kiln_cache *c, const cache_listing *cur, kiln_cache_sync_stats *st, const outcome *o,
                        const counters *start, int rc, const char *m)
{
	hash_set refs = {0}; /* distinct shards the pins reference */
	counters now = read_counters(c);

	for (size_t i = 0; i < c->config->pin_count; i++)
		if (set_add(&refs, &cur[i]) < 0)
			break;
	set_unique(&refs);
	st->shards = refs.n;
	st->bytes = set_bytes(&refs);
	free(refs.v);
	st->peer_bytes = now.peer_bytes - start->peer_bytes;
	st->origin_bytes = now.origin_bytes - start->origin_bytes;
	st->fetched = now.fills - start->fills;
	st->fetched_bytes = st->peer_bytes + st->origin_bytes;
	st->evicted = now.evicted - start->evicted;
	st->evicted_bytes = now.evicted_bytes - start->evicted_bytes;
	st->manifest_errors = o->manifest_errors;
	pthread_mutex_lock(&c->lock);
	c->last_time = (int64_t)time(NULL);
	if (rc == 0)
		c->last_ok = c->last_time;
	c->last_rc = rc;
	snprintf(c->last_msg, sizeof(c->last_msg), "%s", rc ? m : "");
	c->last = *st;
	pthread_mutex_unlock(&c->lock);
	if (kiln_cache_state_save(c) < 0)
		KILN_LOG(KILN_LOG_WARN, "cache_state_not_saved", kiln_error_last());
	if (rc != 0)
		kiln_counter_add(c->m_sync_failures, 1);
	kiln_cache_refresh_lag(c);
	KILN_LOG(rc                                           ? KILN_LOG_WARN
	         : st->fetched || st->evicted || st->repaired ? KILN_LOG_INFO
	                                                      : KILN_LOG_DEBUG,
	         "cache_synced", rc ? m : NULL, KILN_F_INT("pins", st->pins),
	         KILN_F_INT("ready", st->pins_ready), KILN_F_INT("fetched", st->fetched),
	         KILN_F_INT("fetched_bytes", st->fetched_bytes), KILN_F_INT("evicted", st->evicted),
	         KILN_F_INT("failed", st->failed));
}

int kiln_cache_sync(kiln_cache *c, void (*progress)(void *ctx, const kiln_cache_progress *p), void *ctx)
{
	const size_t np = c->config->pin_count;
	cache_listing *cur = calloc(np + 1, sizeof(*cur)), *shown = calloc(np + 1, sizeof(*shown));
	kiln_cache_sync_stats st = {.pins = np};
	outcome o = {0};
	counters start;
	uint64_t erased = 0;
	const char *msg = "";
	char m[768];
	int rc = 0;

	if (!cur || !shown) {
		free(cur);
		free(shown);
		return kiln_error_oom("cache");
	}
	while (flock(c->sync_fd, LOCK_EX) < 0)
		if (errno != EINTR) {
			free(cur);
			free(shown);
			return kiln_error_set(KILN_EIO, "%s/sync.lock: %s", c->dir, strerror(errno));
		}
	start = read_counters(c);
	fetch_manifests(c, &o);
	resolve_pins(c, cur, shown, &o);
	/* what erasures superseded leaves before anything is filled */
	if ((rc = kiln_cache_apply_erasures(c, &erased)) < 0)
		goto cleanup;
	if (erased)
		KILN_LOG(KILN_LOG_INFO, "cache_erased", "shards superseded by erasures were removed",
		         KILN_F_INT("shards", erased));
	if ((rc = publish_pinned(c, cur, shown, true)) < 0 ||
	    (rc = fill_pins(c, cur, shown, &o, &st, progress, ctx)) < 0)
		goto cleanup;
	/* views no pin shows; what stays pinned */
	drop_stale(c);
	if ((rc = publish_pinned(c, cur, shown, false)) < 0)
		goto cleanup;
	/* evict down to the low watermark */
	if ((rc = kiln_cache_evict(c, 0)) < 0)
		note(&o.fail_rc, o.fail_msg, sizeof(o.fail_msg), rc, kiln_error_last());
	rc = o.manifest_rc ? o.manifest_rc : o.limit_rc ? o.limit_rc : o.fail_rc;
	msg = o.manifest_rc ? o.manifest_msg : o.limit_rc ? o.limit_msg : o.fail_msg;
cleanup:
	if (rc < 0 && !*msg)
		msg = kiln_error_last();
	snprintf(m, sizeof(m), "%s", msg);
	record_pass(c, cur, &st, &o, &start, rc, m);
	for (size_t i = 0; i < np; i++) {
		kiln_cache_listing_free(&cur[i]);
		kiln_cache_listing_free(&shown[i]);
	}
	free(cur);
	free(shown);
	flock(c->sync_fd, LOCK_UN);
	if (rc < 0)
		return kiln_error_set(rc, "%s", m);
	return 0;
}
