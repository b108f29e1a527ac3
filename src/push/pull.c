/* kiln pull (see push.h): a target's manifest prefix mirrored into a local
 * bare repository. Objects are immutable, so one already there with its
 * size is not fetched again; refs are fetched each time and a local tag
 * that differs is never overwritten. Every file is written to a temporary
 * name and renamed into place: a pull stopped midway leaves whole files. */
#include "push/push.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/fs.h"
#include "manifest/version.h"
#include "store/store.h"

typedef struct entry {
	char *rel; /* under the prefix: "objects/ab/...", "refs/tags/ds/v1" */
	uint64_t size;
} entry;

typedef struct puller {
	const kiln_push_target *t;
	const char *dir;
	kiln_store *store;
	entry *v;
	size_t n, cap;
	size_t skip; /* "<prefix>/" */
	void (*on_file)(void *ctx, const char *key, uint64_t bytes);
	void *ctx;
	kiln_pull_result *out;
} puller;

static int on_key(void *ctx, const char *key, uint64_t size, int64_t mtime)
{
	puller *p = ctx;

	(void)mtime;
	if (p->n == p->cap) {
		size_t ncap = p->cap ? p->cap * 2 : 1024;
		entry *nv = realloc(p->v, ncap * sizeof(*nv));

		if (!nv)
			return kiln_error_set(KILN_ENOMEM, "out of memory");
		p->v = nv;
		p->cap = ncap;
	}
	if (!(p->v[p->n].rel = strdup(key + p->skip)))
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	p->v[p->n++].size = size;
	return 0;
}

static int mkdirs(char *path)
{
	for (char *s = path + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			int e = errno;

			*s = '/';
			return kiln_error_set(KILN_EIO, "%s: mkdir: %s", path, strerror(e));
		}
		*s = '/';
	}
	return 0;
}

static int to_fd(void *ctx, const void *data, size_t len)
{
	return kiln_fs_write_all(*(int *)ctx, data, len, "pulled file");
}

/* Fetches key into path through path.tmp-<pid> and a rename. */
static int fetch(puller *p, const char *rel, const char *path)
{
	char key[1200], tmp[4200];
	int fd, rc;

	snprintf(key, sizeof(key), "%s/%s", p->t->manifest_prefix, rel);
	snprintf(tmp, sizeof(tmp), "%s.tmp-%d", path, (int)getpid());
	if ((rc = mkdirs(tmp)) < 0)
		return rc;
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return kiln_error_set(KILN_EIO, "%s: %s", tmp, strerror(errno));
	rc = kiln_store_get(p->store, key, to_fd, &fd);
	if (rc == 0 && fsync(fd) < 0)
		rc = kiln_error_set(KILN_EIO, "%s: fsync: %s", tmp, strerror(errno));
	close(fd);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = kiln_error_set(KILN_EIO, "rename %s: %s", tmp, strerror(errno));
	if (rc < 0) {
		unlink(tmp);
		return rc;
	}
	return 0;
}

/* A tag ref: fetched, compared with the local one (by kiln's resolution,
 * so a packed ref counts too) and, with write, written when the local
 * repository has none. */
static int pull_tag(puller *p, const entry *e, const char *path, bool write)
{
	char key[1200], spec[400];
	const char *name = e->rel + strlen("refs/tags/"), *slash = strrchr(name, '/');
	kiln_buf id = KILN_BUF_INIT(64);
	kiln_manifest *m = NULL;
	kiln_version v;
	int rc;

	snprintf(key, sizeof(key), "%s/%s", p->t->manifest_prefix, e->rel);
	if ((rc = kiln_store_get(p->store, key, kiln_buf_sink, &id)) < 0)
		goto cleanup;
	if (id.len < 40 || !slash) {
		rc = kiln_error_set(KILN_EINVALID, "%s: not a ref", key);
		goto cleanup;
	}
	snprintf(spec, sizeof(spec), "%.*s@%s", (int)(slash - name), name, slash + 1);
	if ((rc = kiln_version_open(&m, p->dir)) == KILN_ENOTFOUND && !write) {
		kiln_error_clear(); /* no local repository yet: nothing to differ from */
		rc = 0;
		goto cleanup;
	}
	if (rc == 0 && (rc = kiln_version_lookup(m, spec, &v)) == 0) {
		const char *local = v.tag[0] ? v.tag : v.commit;

		if (memcmp(local, id.ptr, 40) != 0)
			rc = kiln_error_set(
			    KILN_EINVALID,
			    "%s: the local repository %s holds %s as %.12s, the target as %.12s: "
			    "a tag is never overwritten",
			    spec, p->dir, e->rel, local, id.ptr);
		goto cleanup; /* the same: nothing to write */
	}
	if (rc != KILN_ENOTFOUND)
		goto cleanup;
	kiln_error_clear();
	rc = 0;
	if (!write)
		goto cleanup;
	rc = fetch(p, e->rel, path);
	if (rc == 0 && p->on_file)
		p->on_file(p->ctx, key, e->size);
	p->out->files++;
	p->out->bytes += e->size;
cleanup:
	if (m)
		kiln_manifest_close(m);
	kiln_buf_free(&id);
	return rc;
}

/* pass 0: check the tags; 1: objects, HEAD, config; 2: write the tags */
static int pull_one(puller *p, const entry *e, int pass)
{
	char path[4200], key[1200];
	struct stat st;
	bool is_ref = strncmp(e->rel, "refs/", 5) == 0;

	if (is_ref != (pass != 1) || strncmp(e->rel, "info/", 5) == 0 ||
	    strncmp(e->rel, "objects/info/", 13) == 0)
		return 0;
	snprintf(path, sizeof(path), "%s/%s", p->dir, e->rel);
	if (is_ref) {
		if (pass == 2)
			p->out->refs++;
		if (strncmp(e->rel, "refs/tags/", 10) == 0)
			return pull_tag(p, e, path, pass == 2);
		return 0; /* kiln pushes tags only */
	}
	if (stat(path, &st) == 0 &&
	    (strncmp(e->rel, "objects/", 8) != 0 || (uint64_t)st.st_size == e->size)) {
		p->out->present++; /* an object, or HEAD and config: kept as they are */
		return 0;
	}
	snprintf(key, sizeof(key), "%s/%s", p->t->manifest_prefix, e->rel);
	if (fetch(p, e->rel, path) < 0)
		return kiln_error_last_code();
	if (p->on_file)
		p->on_file(p->ctx, key, e->size);
	p->out->files++;
	p->out->bytes += e->size;
	return 0;
}

int kiln_pull(const kiln_push_target *t, const char *dir,
              void (*on_file)(void *ctx, const char *key, uint64_t bytes), void *ctx, kiln_pull_result *out)
{
	puller p = {.t = t, .dir = dir, .on_file = on_file, .ctx = ctx, .out = out};
	char prefix[512], path[4200];
	bool any_ref = false;
	int rc;

	memset(out, 0, sizeof(*out));
	snprintf(prefix, sizeof(prefix), "%s/", t->manifest_prefix);
	p.skip = strlen(prefix);
	if ((rc = kiln_store_open(&p.store, t->url, &t->store)) < 0 ||
	    (rc = kiln_store_list(p.store, prefix, on_key, &p)) < 0)
		goto cleanup;
	for (size_t i = 0; i < p.n; i++)
		any_ref = any_ref || strncmp(p.v[i].rel, "refs/tags/", 10) == 0;
	if (!any_ref) {
		rc = kiln_error_set(KILN_ENOTFOUND, "%s: no pushed version under %s/ (kiln push writes it)",
		                    t->url, t->manifest_prefix);
		goto cleanup;
	}
	/* a tag that differs stops the pull before anything is written; then
	 * objects (and HEAD, config), then the refs that name them */
	for (int pass = 0; rc == 0 && pass < 3; pass++) {
		if (pass == 1) {
			snprintf(path, sizeof(path), "%s/objects/", dir);
			if ((rc = mkdirs(path)) < 0)
				break;
			snprintf(path, sizeof(path), "%s/refs/tags/", dir);
			if ((rc = mkdirs(path)) < 0)
				break;
		}
		for (size_t i = 0; rc == 0 && i < p.n; i++)
			rc = pull_one(&p, &p.v[i], pass);
	}
cleanup:
	for (size_t i = 0; i < p.n; i++)
		free(p.v[i].rel);
	free(p.v);
	kiln_store_close(p.store);
	return rc;
}
