/* Pruning after a repack (compact.h): the packs and loose objects the new
 * pack makes redundant, those a purge plan removes, and the unreachable
 * ones past the grace period; and counting loose objects. The walk, the
 * plan, the lock and the repack itself are compact.c's. */
#include "manifest/compact_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <git2/sys/odb_backend.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/array.h"
#include "core/error.h"
#include "manifest/internal.h"
#include "manifest/loose.h"

/* ---- pruning -------------------------------------------------------------- */

/* The pack whose index is idx_path, alone in an object database. */
int kiln_compact_open_pack(git_odb **out, const char *idx_path)
{
	git_odb_backend *one = NULL;
	int gerr;

	*out = NULL;
	if ((gerr = git_odb_new(out)) < 0 || (gerr = git_odb_backend_one_pack(&one, idx_path)) < 0)
		goto fail;
	if ((gerr = git_odb_add_backend(*out, one, 1)) < 0) {
		one->free(one); /* the odb owns it only once added */
		goto fail;
	}
	return 0;
fail:
	git_odb_free(*out);
	*out = NULL;
	return gerr;
}

/* What an older pack holds, against the new pack and a purge's plan. */
struct pack_scan {
	git_odb *packed;
	const purge_plan *plan;
	bool all_packed; /* every object is in the new pack (or goes) */
	uint64_t doomed; /* objects the purge removes */
	git_oid *rest;   /* with a plan: the others the new pack lacks */
	size_t n_rest, cap_rest;
	bool nomem;
};

static int scan_object(const git_oid *id, void *payload)
{
	struct pack_scan *c = payload;

	if (kiln_compact_doomed(c->plan, c->packed, id)) {
		c->doomed++;
		return 0;
	}
	if (git_odb_exists(c->packed, id))
		return 0;
	c->all_packed = false;
	if (!c->plan)
		return 1; /* stop: one is missing */
	if (KILN_ARRAY_GROW(c->rest, c->cap_rest, c->n_rest, NULL) < 0) {
		c->nomem = true;
		return 1;
	}
	git_oid_cpy(&c->rest[c->n_rest++], id);
	return 0;
}

/* Scans the pack whose index is idx_path into *c: 0, or -1 when its index
 * cannot be read (the pack is then left to age) or memory ran out. */
static int scan_pack(struct pack_scan *c, const char *idx_path)
{
	git_odb *odb = NULL;
	int r;

	c->all_packed = true;
	if (kiln_compact_open_pack(&odb, idx_path) < 0)
		return -1;
	r = git_odb_foreach(odb, scan_object, c);
	git_odb_free(odb);
	return r < 0 && r != GIT_EUSER ? -1 : c->nomem ? -1 : 0;
}

/* A new pack of the objects rest[0..n) (a pack's objects a purge does not
 * remove and the new pack lacks: young unreachable ones), dated like the
 * pack they come from so that their grace period runs on. */
static int repack_rest(kiln_manifest *m, const char *objects, const git_oid *rest, size_t n,
                       const struct stat *from)
{
	git_packbuilder *pb = NULL;
	char path[4096 + 128];
	int gerr, rc = 0;

	if ((gerr = git_packbuilder_new(&pb, kiln_manifest_repo(m))) < 0)
		goto fail;
	for (size_t i = 0; i < n; i++)
		if ((gerr = git_packbuilder_insert(pb, &rest[i], NULL)) < 0)
			goto fail;
	if ((gerr = git_packbuilder_write(pb, NULL, 0, NULL, NULL)) < 0)
		goto fail;
	static const char *const exts[] = {".pack", ".idx"};
	for (size_t i = 0; i < 2; i++) {
		struct timespec t[2] = {from->st_atim, from->st_mtim};

		snprintf(path, sizeof(path), "%s/pack/pack-%s%s", objects, git_packbuilder_name(pb), exts[i]);
		(void)utimensat(AT_FDCWD, path, t, 0); /* a fresher date only delays its removal */
	}
	git_packbuilder_free(pb);
	return rc;
fail:
	rc = kiln_manifest_git_fail(m, gerr, "rewriting a pack without superseded objects");
	git_packbuilder_free(pb);
	return rc;
}

/* The pack-<hex> names in objects/pack/ (the new pack's, keep_name, left
 * out), listed once before anything is removed: a pack written later is
 * not touched. */
static int list_packs(kiln_manifest *m, const char *dir, const char *keep_name, char ***out, size_t *out_n)
{
	DIR *d;
	struct dirent *e;
	char **v = NULL;
	size_t n = 0, cap = 0;

	*out = NULL;
	*out_n = 0;
	if (!(d = opendir(dir)))
		return errno == ENOENT ? 0 : kiln_error_set(KILN_EIO, "%s: %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (len < 10 || len > 200 || strncmp(e->d_name, "pack-", 5) != 0 ||
		    strcmp(e->d_name + len - 5, ".pack") != 0 ||
		    (len - 10 == strlen(keep_name) && strncmp(e->d_name + 5, keep_name, len - 10) == 0))
			continue;
		if (KILN_ARRAY_GROW(v, cap, n, NULL) < 0)
			goto nomem;
		if (!(v[n] = strndup(e->d_name, len - 5)))
			goto nomem;
		n++;
	}
	closedir(d);
	(void)m;
	*out = v;
	*out_n = n;
	return 0;
nomem:
	closedir(d);
	while (n)
		free(v[--n]);
	free(v);
	return kiln_error_set(KILN_ENOMEM, "out of memory (listing packs)");
}

/* Removes <dir>/<base>.{rev,bitmap,mtimes,pack,idx}: the index last, so a
 * reader that still sees it finds its pack. */
static int remove_pack(kiln_manifest *m, const char *dir, const char *base)
{
	static const char *const exts[] = {".rev", ".bitmap", ".mtimes", ".pack", ".idx"};
	char path[4096 + 300];

	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s%s", dir, base, exts[i]);
		if (unlink(path) < 0 && errno != ENOENT)
			return kiln_error_set(KILN_EIO, "manifest %s: %s: %s", kiln_manifest_path(m), path,
			                      strerror(errno));
	}
	return 0;
}

/* Removes the packs other than the new one (`keep_name`, whose objects are
 * `packed`) without a .keep file, when older than the cutoff or when the
 * new pack holds every object they have. With a plan, a pack holding an
 * object it removes goes whatever its age, its young objects the new pack
 * lacks written first into a pack of their own; a .keep'd pack holding one
 * is an error, found before anything is removed. */
int kiln_compact_prune_packs(kiln_manifest *m, const char *objects, const char *keep_name, git_odb *packed,
                             const purge_plan *plan, time_t cutoff, kiln_compact_stats *out)
{
	char dir[4096 + 8], path[sizeof(dir) + 300 + 8];
	char **bases = NULL;
	size_t n = 0;
	int rc;

	snprintf(dir, sizeof(dir), "%s/pack", objects);
	if ((rc = list_packs(m, dir, keep_name, &bases, &n)) < 0)
		return rc;
	for (size_t i = 0; i < n && plan; i++) {
		struct pack_scan c = {.packed = packed, .plan = plan};

		snprintf(path, sizeof(path), "%s/%s.keep", dir, bases[i]);
		if (access(path, F_OK) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s.idx", dir, bases[i]);
		if (scan_pack(&c, path) < 0)
			rc = kiln_error_set(KILN_EIO,
			                    "manifest %s: %s/%s.pack has a .keep file and cannot be read",
			                    kiln_manifest_path(m), dir, bases[i]);
		else if (c.doomed)
			rc = kiln_error_set(
			    KILN_EINVALID,
			    "manifest %s: %s/%s.pack has a .keep file and holds %" PRIu64
			    " objects of superseded versions: remove its .keep file, then run again",
			    kiln_manifest_path(m), dir, bases[i], c.doomed);
		free(c.rest);
		if (rc < 0)
			goto cleanup;
	}
	for (size_t i = 0; i < n; i++) {
		struct pack_scan c = {.packed = packed, .plan = plan};
		struct stat st;
		bool old;

		snprintf(path, sizeof(path), "%s/%s.keep", dir, bases[i]);
		if (access(path, F_OK) == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s.pack", dir, bases[i]);
		if (stat(path, &st) < 0)
			continue;
		old = kiln_compact_old_enough(&st, cutoff);
		if (plan || !old) {
			snprintf(path, sizeof(path), "%s/%s.idx", dir, bases[i]);
			if (scan_pack(&c, path) < 0) {
				free(c.rest);
				if (c.nomem) {
					rc = kiln_error_set(KILN_ENOMEM, "out of memory (scanning a pack)");
					goto cleanup;
				}
				if (!old) {
					out->packs_kept++;
					continue;
				}
			} else if (c.doomed && !old && c.n_rest) {
				rc = repack_rest(m, objects, c.rest, c.n_rest, &st);
				free(c.rest);
				if (rc < 0)
					goto cleanup;
			} else {
				free(c.rest);
				if (!c.doomed && !old && !c.all_packed) {
					out->packs_kept++;
					continue;
				}
			}
		}
		if ((rc = remove_pack(m, dir, bases[i])) < 0)
			goto cleanup;
		out->packs_removed++;
	}
cleanup:
	while (n)
		free(bases[--n]);
	free(bases);
	return rc;
}

/* A loose object's file name in objects/<hh>/: 38 lower-case hex digits. */
static bool loose_name(const char *name)
{
	return strlen(name) == 38 && strspn(name, "0123456789abcdef") == 38;
}

/* Removes loose objects (objects/<hh>/<38 hex>) that the new pack
 * (`packed`) holds or the plan removes, and the others older than the
 * cutoff: those are unreachable, garbage. */
int kiln_compact_prune_loose(kiln_manifest *m, const char *objects, git_odb *packed, const purge_plan *plan,
                             time_t cutoff, kiln_compact_stats *out)
{
	char dir[4096 + 8], path[4096 + 64];

	for (int hh = 0; hh < 256; hh++) {
		DIR *d;
		struct dirent *e;

		snprintf(dir, sizeof(dir), "%s/%02x", objects, hh);
		if (!(d = opendir(dir)))
			continue;
		while ((e = readdir(d))) {
			char hex[GIT_OID_HEXSZ + 1];
			struct stat st;
			git_oid id;

			if (!loose_name(e->d_name))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
				continue;
			snprintf(hex, sizeof(hex), "%02x%s", hh, e->d_name);
			if (!kiln_compact_old_enough(&st, cutoff) &&
			    (git_oid_fromstr(&id, hex) < 0 ||
			     !(git_odb_exists(packed, &id) || kiln_compact_doomed(plan, packed, &id)))) {
				out->loose_kept++;
				continue;
			}
			if (unlink(path) < 0 && errno != ENOENT) {
				int err = errno;
				closedir(d);
				return kiln_error_set(KILN_EIO, "manifest %s: %s: %s", kiln_manifest_path(m),
				                      path, strerror(err));
			}
			out->loose_removed++;
		}
		/* the fan-out directory stays even when empty: a writer may have just
		 * created it and be about to put its object in */
		closedir(d);
	}
	return 0;
}

int kiln_manifest_loose_objects(kiln_manifest *m, uint64_t *out)
{
	char dir[4096 + 16];
	uint64_t n = 0;

	for (int hh = 0; hh < 256; hh++) {
		DIR *d;
		struct dirent *e;

		snprintf(dir, sizeof(dir), "%sobjects/%02x", git_repository_path(kiln_manifest_repo(m)), hh);
		if (!(d = opendir(dir))) {
			if (errno == ENOENT || errno == ENOTDIR)
				continue;
			int err = errno;
			return kiln_error_set(KILN_EIO, "manifest %s: %s: %s", kiln_manifest_path(m), dir,
			                      strerror(err));
		}
		while ((e = readdir(d)))
			n += loose_name(e->d_name);
		closedir(d);
	}
	*out = n;
	return 0;
}
