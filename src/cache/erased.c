/* Erasures on a cache node (internal.h, docs/CACHE.md): the shards the
 * manifest's erasure ledgers name as superseded leave the cache on the next
 * sync (files and the views of superseded commits) and their hashes go to
 * <dir>/erased, so that a server, in this process or another, answers 410
 * for them and never fetches them again from a peer or the origin. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/internal.h"
#include "core/array.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "manifest/ledger.h"
#include "shard/object.h"

static int cmp65(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

static void erased_path(const kiln_cache *c, char *out)
{
	snprintf(out, PATH_MAX, "%s/erased", c->dir);
}

/* Reads the list when the file is not the one last read (called with
 * `lock` held). A file that cannot be read keeps the list as it was. */
static void reload(kiln_cache *c)
{
	char path[PATH_MAX];
	struct stat st;
	char(*v)[65] = NULL;
	size_t n = 0, cap = 0;
	char line[80];
	FILE *f;

	erased_path(c, path);
	if (stat(path, &st) < 0) {
		if (errno == ENOENT && c->nerased) {
			free(c->erased);
			c->erased = NULL;
			c->nerased = 0;
			c->erased_size = 0;
		}
		return;
	}
	if (st.st_size == c->erased_size && st.st_ino == c->erased_ino &&
	    st.st_mtim.tv_sec == c->erased_mtime.tv_sec && st.st_mtim.tv_nsec == c->erased_mtime.tv_nsec)
		return;
	if (!(f = fopen(path, "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		size_t len = strcspn(line, "\n");

		line[len] = '\0';
		if (!kiln_shard_hash_valid(line))
			continue; /* kiln writes only hashes: anything else is not one */
		if (KILN_ARRAY_GROW(v, cap, n, "cache") < 0) {
			free(v);
			fclose(f);
			return;
		}
		memcpy(v[n++], line, 65);
	}
	fclose(f);
	if (n)
		qsort(v, n, sizeof(*v), cmp65);
	free(c->erased);
	c->erased = v;
	c->nerased = n;
	c->erased_size = st.st_size;
	c->erased_ino = st.st_ino;
	c->erased_mtime = st.st_mtim;
}

bool kiln_cache_is_erased(kiln_cache *c, const char *hash)
{
	bool hit;

	pthread_mutex_lock(&c->lock);
	reload(c);
	hit = c->nerased && bsearch(hash, c->erased, c->nerased, sizeof(*c->erased), cmp65);
	pthread_mutex_unlock(&c->lock);
	return hit;
}

/* The list, written whole (kiln_fs_write_atomic_via a temporary in tmp/). */
static int write_list(kiln_cache *c, char **hashes, size_t n)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	kiln_buf text = KILN_BUF_INIT(0);
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = kiln_buf_printf(&text, "%s\n", hashes[i]);
	if (rc == 0) {
		erased_path(c, path);
		kiln_cache_tmp_name(c, tmp, "erased");
		rc = kiln_fs_write_atomic_via(path, tmp, text.ptr ? text.ptr : "", text.len, 0644);
	}
	kiln_buf_free(&text);
	return rc;
}

int kiln_cache_apply_erasures(kiln_cache *c, uint64_t *out_dropped)
{
	char **shards = NULL, **commits = NULL, path[PATH_MAX];
	size_t nshards = 0, ncommits = 0;
	uint64_t freed = 0;
	int rc;

	*out_dropped = 0;
	if ((rc = kiln_ledger_superseded_shards(c->manifest, &shards, &nshards)) < 0 ||
	    (rc = kiln_ledger_superseded(c->manifest, &commits, &ncommits)) < 0)
		goto cleanup;
	if (nshards && (rc = write_list(c, shards, nshards)) < 0)
		goto cleanup;
	/* the views of superseded commits: their files are the shards' links */
	for (size_t i = 0; i < c->config->pin_count; i++)
		for (size_t k = 0; k < ncommits; k++) {
			struct stat st;

			snprintf(path, sizeof(path), "%s/views/%s/%s", c->dir, c->pins[i].dataset,
			         commits[k]);
			if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && kiln_fs_remove_tree(path) == 0)
				KILN_LOG(KILN_LOG_INFO, "cache_view_erased",
				         "the view of a version an erasure superseded was removed",
				         KILN_F_STR("dataset", c->pins[i].dataset),
				         KILN_F_STR("commit", commits[k]));
		}
	for (size_t i = 0; i < nshards; i++) {
		struct stat st;

		kiln_cache_shard_path(c, shards[i], path);
		if (lstat(path, &st) < 0 || unlink(path) < 0)
			continue;
		(*out_dropped)++;
		freed += S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
		KILN_LOG(KILN_LOG_INFO, "cache_shard_erased", "a shard an erasure superseded was removed",
		         KILN_F_STR("hash", shards[i]));
	}
	pthread_mutex_lock(&c->lock);
	reload(c);
	kiln_cache_set_used(c, c->bytes_used > freed ? c->bytes_used - freed : 0);
	pthread_mutex_unlock(&c->lock);
cleanup:
	kiln_ledger_ids_free(shards, nshards);
	kiln_ledger_ids_free(commits, ncommits);
	return rc;
}
