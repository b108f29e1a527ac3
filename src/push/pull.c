/* kiln pull (see push.h): a target's manifest prefix mirrored into a local
 * bare repository, taking from the bucket only what kiln push writes and
 * nothing it could run: loose objects that inflate (bounded) and hash to
 * their names, refs/tags/<dataset>/<version> holding the id of an object
 * the repository then holds, and the erasure ledgers refs/erasures/<dataset>
 * (a tag that differs from the local one replaces it only when the pulled
 * ledger shows the local one superseded by it). HEAD and config are the local repository's own
 * (libgit2 writes them when it creates it); any other file there stops the
 * pull before anything is written. Every file is written to a temporary
 * name and renamed into place; a pull's temporaries left by a killed pull
 * are removed by the next one. */
#include "push/push.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/array.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/fs.h"
#include "manifest/format.h"
#include "manifest/ledger.h"
#include "manifest/loose.h"
#include "manifest/manifest.h"
#include "manifest/version.h"
#include "store/store.h"

/* what a key under the prefix is */
typedef enum kind {
	KIND_IGNORED, /* HEAD, config, info/refs, objects/info/packs: the local repository has its own */
	KIND_OBJECT,  /* objects/xx/<38 hex> */
	KIND_TAG,     /* refs/tags/<dataset>/<version> */
	KIND_BRANCH,  /* refs/heads/<dataset>/<branch>: kiln pushes tags only; not installed */
	KIND_LEDGER,  /* refs/erasures/<dataset>: an erasure ledger's tip commit */
} kind;

typedef struct entry {
	char *rel; /* under the prefix: "objects/ab/...", "refs/tags/ds/v1" */
	uint64_t size;
	kind kind;
	char id[41];    /* a tag's object id */
	bool write;     /* a tag the local repository lacks */
	bool replace;   /* a tag that differs from the local one: written when the ledger says so */
	char local[41]; /* then the local one */
} entry;

typedef struct puller {
	const kiln_push_target *t;
	const char *dir;
	kiln_store *store;
	kiln_manifest *m; /* the local repository */
	entry *v;
	size_t n, cap;
	size_t skip; /* "<prefix>/" */
	void (*on_file)(void *ctx, const char *key, uint64_t bytes);
	void *ctx;
	kiln_pull_result *out;
} puller;

#define PULL_TMP ".tmp-" /* path.tmp-<pid>: a file being written */

static int on_key(void *ctx, const char *key, uint64_t size, int64_t mtime)
{
	puller *p = ctx;

	(void)mtime;
	if (KILN_ARRAY_GROW(p->v, p->cap, p->n, NULL) < 0)
		return KILN_ENOMEM;
	memset(&p->v[p->n], 0, sizeof(p->v[p->n]));
	if (!(p->v[p->n].rel = strdup(key + p->skip)))
		return kiln_error_oom(NULL);
	p->v[p->n++].size = size;
	return 0;
}

/* A bucket's key as it may appear in a message: at most 200 bytes, any byte
 * outside printable ASCII as '?', so that a hostile name cannot break the
 * one-line error. */
static const char *shown(char out[204], const char *s)
{
	size_t i;

	for (i = 0; s[i] && i < 200; i++)
		out[i] = s[i] > ' ' && s[i] < 0x7f ? s[i] : '?';
	strcpy(out + i, s[i] ? "..." : "");
	return out;
}

static bool hex_n(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* "<dataset>/<name>" with both kiln names and the whole ref one git takes. */
static bool ref_name_valid(const char *rel, const char *under)
{
	const char *name = rel + strlen(under), *slash = strchr(name, '/');
	int valid = 0;

	return slash && kiln_mfmt_name_valid_n(name, (size_t)(slash - name)) &&
	       kiln_mfmt_name_valid(slash + 1) && git_reference_name_is_valid(&valid, rel) == 0 && valid;
}

static int classify(puller *p, entry *e)
{
	const char *r = e->rel;
	char key[204];

	if (strcmp(r, "HEAD") == 0 || strcmp(r, "config") == 0 || strcmp(r, "info/refs") == 0 ||
	    strcmp(r, "objects/info/packs") == 0)
		e->kind = KIND_IGNORED;
	else if (strlen(r) == 8 + 2 + 1 + 38 && strncmp(r, "objects/", 8) == 0 && r[10] == '/' &&
	         hex_n(r + 8, 2) && hex_n(r + 11, 38))
		e->kind = KIND_OBJECT;
	else if (strncmp(r, "refs/tags/", 10) == 0 && ref_name_valid(r, "refs/tags/"))
		e->kind = KIND_TAG;
	else if (strncmp(r, "refs/heads/", 11) == 0 && ref_name_valid(r, "refs/heads/"))
		e->kind = KIND_BRANCH;
	else if (strncmp(r, KILN_LEDGER_REF_PREFIX, strlen(KILN_LEDGER_REF_PREFIX)) == 0 &&
	         kiln_mfmt_name_valid(r + strlen(KILN_LEDGER_REF_PREFIX)))
		e->kind = KIND_LEDGER;
	else
		return kiln_error_set(KILN_EINVALID,
		                      "%s: %s/%s: not a file kiln push writes (a pull takes loose objects "
		                      "objects/xx/<38 hex>, refs/tags/<dataset>/<version> and "
		                      "refs/erasures/<dataset>): refused",
		                      p->t->url, p->t->manifest_prefix, shown(key, r));
	if (e->kind == KIND_OBJECT && e->size > KILN_GIT_LOOSE_MAX)
		return kiln_error_set(KILN_EINVALID,
		                      "%s: %s/%s: larger than a loose object kiln reads (%zu bytes)",
		                      p->t->url, p->t->manifest_prefix, r, KILN_GIT_LOOSE_MAX);
	return 0;
}

/* Writes data to path (its folders made) atomically: path.tmp-<pid>, fsync, rename. */
static int write_file(const char *path, const void *data, size_t len)
{
	char dirs[4200];
	char *slash;
	int rc;

	if ((size_t)snprintf(dirs, sizeof(dirs), "%s", path) >= sizeof(dirs))
		return kiln_error_set(KILN_EINVALID, "%s: the path is too long", path);
	if ((slash = strrchr(dirs, '/')) && slash != dirs) {
		*slash = '\0';
		if ((rc = kiln_fs_mkdir_p(dirs, 0755)) < 0)
			return rc;
	}
	return kiln_fs_write_atomic(path, data, len, 0644);
}

/* Removes the temporaries of pulls that are gone (a kill -9) from dir and,
 * with depth, its subdirectories: "<name>.tmp-<pid>" where no process pid
 * runs. A running pull's files are left alone. */
static void sweep(const char *dir, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[4200];

	if (!d)
		return;
	while ((de = readdir(d))) {
		const char *t = strstr(de->d_name, PULL_TMP);
		char *end;
		long pid;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!t) {
			if (depth > 0)
				sweep(path, depth - 1);
			continue;
		}
		pid = strtol(t + strlen(PULL_TMP), &end, 10);
		if (*end == '\0' && pid > 0 &&
		    (pid == (long)getpid() || (kill((pid_t)pid, 0) < 0 && errno == ESRCH)))
			unlink(path);
	}
	closedir(d);
}

/* A tag's id from the target: exactly 40 lower-case hex digits and a
 * newline (a symbolic "ref: ..." or anything else is refused). */
static int fetch_tag(puller *p, entry *e)
{
	char key[1200];
	kiln_buf id = KILN_BUF_INIT(64);
	int rc;

	snprintf(key, sizeof(key), "%s/%s", p->t->manifest_prefix, e->rel);
	if ((rc = kiln_store_get(p->store, key, kiln_buf_sink, &id)) < 0 && rc != KILN_ELIMIT)
		goto cleanup;
	if (rc == KILN_ELIMIT || id.len != 41 || !hex_n(id.ptr, 40) || id.ptr[40] != '\n') {
		rc = kiln_error_set(
		    KILN_EINVALID,
		    "%s: %s: not a ref kiln push writes (40 hex digits and a newline): refused", p->t->url,
		    key);
		goto cleanup;
	}
	memcpy(e->id, id.ptr, 40);
	e->id[40] = '\0';
cleanup:
	kiln_buf_free(&id);
	return rc;
}

/* Whether to write a tag: not when the local repository holds it (by
 * kiln's resolution, so a packed ref counts too), and a local tag that
 * differs is never overwritten. */
static int compare_tag(puller *p, entry *e)
{
	char spec[400];
	const char *name = e->rel + strlen("refs/tags/"), *slash = strchr(name, '/');
	kiln_version v;
	int rc;

	snprintf(spec, sizeof(spec), "%.*s@%s", (int)(slash - name), name, slash + 1);
	if ((rc = kiln_version_lookup(p->m, spec, &v)) == 0) {
		const char *local = v.tag[0] ? v.tag : v.commit;

		if (memcmp(local, e->id, 40) != 0) {
			char ledger[KILN_MFMT_NAME_MAX + 32];
			bool has_ledger = false;

			snprintf(ledger, sizeof(ledger), KILN_LEDGER_REF_PREFIX "%.*s", (int)(slash - name),
			         name);
			for (size_t i = 0; !has_ledger && i < p->n; i++)
				has_ledger = p->v[i].kind == KIND_LEDGER && strcmp(p->v[i].rel, ledger) == 0;
			if (!has_ledger) /* nothing could show it superseded: refused before anything is
			                    written */
				return kiln_error_set(
				    KILN_EINVALID,
				    "%s: the local repository %s holds %s as %.12s, the target as %.12s: "
				    "a tag is never overwritten",
				    spec, p->dir, e->rel, local, e->id);
			/* judged once the ledger is pulled (supersedes) */
			e->replace = e->write = true;
			snprintf(e->local, sizeof(e->local), "%.40s", local);
		}
		return 0; /* the same: nothing to write */
	}
	if (rc != KILN_ENOTFOUND)
		return rc;
	kiln_error_clear();
	e->write = true;
	return 0;
}

/* A loose object: kept when the local file is that object, else fetched,
 * checked against its name and written. */
static int pull_object(puller *p, const entry *e)
{
	char key[1200], path[4200], hex[41];
	kiln_buf z = KILN_BUF_INIT(KILN_GIT_LOOSE_MAX);
	int rc;

	snprintf(hex, sizeof(hex), "%.2s%.38s", e->rel + 8, e->rel + 11);
	snprintf(path, sizeof(path), "%s/%s", p->dir, e->rel);
	if ((rc = kiln_git_loose_check_file(path, hex)) == 0) {
		p->out->present++;
		return 0;
	}
	kiln_error_clear(); /* none, or not that object: fetched again */
	snprintf(key, sizeof(key), "%s/%s", p->t->manifest_prefix, e->rel);
	if ((rc = kiln_store_get(p->store, key, kiln_buf_sink, &z)) == KILN_ELIMIT) {
		rc = kiln_error_set(KILN_EINVALID,
		                    "%s: %s: larger than a loose object kiln reads (%zu bytes): refused",
		                    p->t->url, key, KILN_GIT_LOOSE_MAX);
		goto cleanup;
	}
	if (rc < 0)
		goto cleanup;
	if ((rc = kiln_git_loose_check(z.ptr, z.len, hex)) < 0) {
		char why[512];

		snprintf(why, sizeof(why), "%s", kiln_error_last());
		rc = kiln_error_set(rc, "%s: %s: %s: refused", p->t->url, key, why);
		goto cleanup;
	}
	if ((rc = write_file(path, z.ptr, z.len)) < 0)
		goto cleanup;
	if (p->on_file)
		p->on_file(p->ctx, key, z.len);
	p->out->files++;
	p->out->bytes += z.len;
cleanup:
	kiln_buf_free(&z);
	return rc;
}

/* Whether the object a tag names is listed at the target or held locally:
 * a tag never names an object the repository lacks. */
static int check_held(puller *p, const entry *e)
{
	char rel[64];
	bool held = false;
	int rc;

	snprintf(rel, sizeof(rel), "objects/%.2s/%.38s", e->id, e->id + 2);
	for (size_t i = 0; !held && i < p->n; i++)
		held = p->v[i].kind == KIND_OBJECT && strcmp(p->v[i].rel, rel) == 0;
	if (!held) {
		if ((rc = kiln_manifest_has_object(p->m, e->id)) < 0)
			return rc;
		held = rc == 1;
	}
	if (!held)
		return kiln_error_set(
		    KILN_EINVALID,
		    "%s: %s/%s: names %.40s, an object neither the target nor %s holds: refused", p->t->url,
		    p->t->manifest_prefix, e->rel, e->id, p->dir);
	return 0;
}

/* A tag that differs from the local one: only when the dataset's ledger,
 * as pulled, shows the local object superseded by the target's through
 * one erasure or several; else refused, a tag is never overwritten. */
static int supersedes(puller *p, const entry *e)
{
	const char *name = e->rel + strlen("refs/tags/"), *slash = strchr(name, '/');
	char dataset[KILN_MFMT_NAME_MAX + 1];
	char succ[41];
	int rc;

	snprintf(dataset, sizeof(dataset), "%.*s", (int)(slash - name), name);
	if ((rc = kiln_ledger_ref_successor(p->m, dataset, e->local, succ)) < 0)
		return rc;
	if (rc == 0 || strcmp(succ, e->id) != 0)
		return kiln_error_set(
		    KILN_EINVALID,
		    "%s@%s: the local repository %s holds %s as %.12s, the target as %.12s: "
		    "a tag is never overwritten (unless the erasure ledger shows it superseded)",
		    dataset, slash + 1, p->dir, e->rel, e->local, e->id);
	return 0;
}

/* A ledger's tip (its commit is there by then): written when it differs. */
static int write_ledger(puller *p, const entry *e)
{
	char key[1200], path[4200], line[42], have[41];
	int rc;

	if ((rc = kiln_ledger_tip(p->m, e->rel + strlen(KILN_LEDGER_REF_PREFIX), have)) < 0)
		return rc;
	if (rc == 1 && strncmp(have, e->id, 40) == 0)
		return 0;
	snprintf(key, sizeof(key), "%s/%s", p->t->manifest_prefix, e->rel);
	snprintf(path, sizeof(path), "%s/%s", p->dir, e->rel);
	snprintf(line, sizeof(line), "%.40s\n", e->id);
	if ((rc = write_file(path, line, 41)) < 0)
		return rc;
	if (p->on_file)
		p->on_file(p->ctx, key, 41);
	p->out->files++;
	p->out->bytes += 41;
	return 0;
}

/* A tag the local repository lacks (its object is there: checked, then
 * pulled). */
static int write_tag(puller *p, const entry *e)
{
	char key[1200], path[4200], line[42];
	int rc;

	snprintf(key, sizeof(key), "%s/%s", p->t->manifest_prefix, e->rel);
	snprintf(path, sizeof(path), "%s/%s", p->dir, e->rel);
	snprintf(line, sizeof(line), "%.40s\n", e->id);
	if ((rc = write_file(path, line, 41)) < 0)
		return rc;
	if (p->on_file)
		p->on_file(p->ctx, key, 41);
	p->out->files++;
	p->out->bytes += 41;
	return 0;
}

int kiln_pull(const kiln_push_target *t, const char *dir,
              void (*on_file)(void *ctx, const char *key, uint64_t bytes), void *ctx, kiln_pull_result *out)
{
	puller p = {.t = t, .dir = dir, .on_file = on_file, .ctx = ctx, .out = out};
	char prefix[512], path[4200];
	size_t tags = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	snprintf(prefix, sizeof(prefix), "%s/", t->manifest_prefix);
	p.skip = strlen(prefix);
	if ((rc = kiln_store_open(&p.store, t->url, &t->store)) < 0 ||
	    (rc = kiln_store_list(p.store, prefix, on_key, &p)) < 0)
		goto cleanup;
	/* everything is judged before anything is written */
	for (size_t i = 0; rc == 0 && i < p.n; i++) {
		rc = classify(&p, &p.v[i]);
		tags += p.v[i].kind == KIND_TAG;
		out->refs += p.v[i].kind == KIND_TAG || p.v[i].kind == KIND_BRANCH;
	}
	for (size_t i = 0; rc == 0 && i < p.n; i++)
		if (p.v[i].kind == KIND_TAG || p.v[i].kind == KIND_LEDGER)
			rc = fetch_tag(&p, &p.v[i]);
	if (rc < 0)
		goto cleanup;
	if (!tags) {
		rc = kiln_error_set(KILN_ENOTFOUND, "%s: no pushed version under %s/ (kiln push writes it)",
		                    t->url, t->manifest_prefix);
		goto cleanup;
	}
	/* a bare repository with libgit2's own HEAD and config when dir has none */
	if ((rc = kiln_manifest_open(&p.m, dir)) < 0)
		goto cleanup;
	for (size_t i = 0; rc == 0 && i < p.n; i++)
		if ((p.v[i].kind == KIND_TAG && (rc = compare_tag(&p, &p.v[i])) == 0 && p.v[i].write) ||
		    p.v[i].kind == KIND_LEDGER)
			rc = check_held(&p, &p.v[i]);
	if (rc < 0)
		goto cleanup;
	snprintf(path, sizeof(path), "%s/objects", dir);
	sweep(path, 1);
	snprintf(path, sizeof(path), "%s/refs/tags", dir);
	sweep(path, 2);
	snprintf(path, sizeof(path), "%s/" KILN_LEDGER_REF_PREFIX, dir);
	sweep(path, 0);
	/* the objects, then the tags that name them */
	for (size_t i = 0; rc == 0 && i < p.n; i++)
		if (p.v[i].kind == KIND_OBJECT)
			rc = pull_object(&p, &p.v[i]);
	/* the ledgers, then the tags (a replaced one judged by them) */
	for (size_t i = 0; rc == 0 && i < p.n; i++)
		if (p.v[i].kind == KIND_LEDGER)
			rc = write_ledger(&p, &p.v[i]);
	for (size_t i = 0; rc == 0 && i < p.n; i++)
		if (p.v[i].kind == KIND_TAG && p.v[i].replace)
			rc = supersedes(&p, &p.v[i]);
	for (size_t i = 0; rc == 0 && i < p.n; i++)
		if (p.v[i].kind == KIND_TAG && p.v[i].write)
			rc = write_tag(&p, &p.v[i]);
cleanup:
	for (size_t i = 0; i < p.n; i++)
		free(p.v[i].rel);
	free(p.v);
	kiln_manifest_close(p.m);
	kiln_store_close(p.store);
	return rc;
}
