/* Rebasing a dataset branch on a remote tip (see rebase.h), for push and
 * fetch: each local commit the remote lacks becomes a kiln snapshot (the
 * shard lines it added, the lineage entries it moved, its stats delta, the
 * quarantine records it replayed, its dataset.json) committed with kiln_manifest_commit on a temporary branch
 * that starts at the remote tip; the local branch then moves to the result
 * with a compare-and-swap. Everything parsed here lives for one call. */
#include "manifest/rebase.h"
#include "manifest/internal.h"

/* The expected old value "no such ref" (see remote.c). */
static const git_oid absent = {{0}};

#include <git2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/array.h"
#include "core/error.h"
#include "core/json.h"
#include "manifest/format.h"
#include "manifest/replayed.h"
#include "manifest/repo_lock.h"
#include "quality/profile.h"

/* ---- files of a commit ------------------------------------------------------ */

/* The blob at path in the commit's tree; *out NULL when there is none. */
static int blob_at(kiln_manifest *m, const git_oid *commit_id, const char *path, git_blob **out)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_commit *commit = NULL;
	git_tree *tree = NULL;
	git_tree_entry *e = NULL;
	int gerr, rc = 0;

	*out = NULL;
	if ((gerr = git_commit_lookup(&commit, repo, commit_id)) < 0 ||
	    (gerr = git_commit_tree(&tree, commit)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "reading a commit");
		goto cleanup;
	}
	gerr = git_tree_entry_bypath(&e, tree, path);
	if (gerr == GIT_ENOTFOUND)
		goto cleanup;
	if (gerr == 0 && git_tree_entry_type(e) == GIT_OBJECT_BLOB)
		gerr = git_blob_lookup(out, repo, git_tree_entry_id(e));
	if (gerr < 0)
		rc = kiln_manifest_git_fail(m, gerr, path);
cleanup:
	git_tree_entry_free(e);
	git_tree_free(tree);
	git_commit_free(commit);
	return rc;
}

static int bad_file(kiln_manifest *m, const git_oid *commit_id, const char *path, const char *what)
{
	return kiln_error_set(KILN_EINVALID, "manifest %s: %.12s:%s: %s", kiln_manifest_path(m),
	                      git_oid_tostr_s(commit_id), path, what);
}

/* ---- lineage.json and stats.json ------------------------------------------ */

/* The blob at path of a commit and how errors name it ("manifest PATH:
 * <commit>:path"); *out NULL when commit_id is NULL or the file is absent. */
static int file_at(kiln_manifest *m, const git_oid *commit_id, const char *path, git_blob **out,
                   char where[512])
{
	*out = NULL;
	if (!commit_id)
		return 0;
	snprintf(where, 512, "manifest %s: %.12s:%s", kiln_manifest_path(m), git_oid_tostr_s(commit_id),
	         path);
	return blob_at(m, commit_id, path, out);
}

static int lineage_read(kiln_manifest *m, kiln_json_scanner *sc, const git_oid *commit_id,
                        kiln_mfmt_lineage *out)
{
	git_blob *blob = NULL;
	char where[512];
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = file_at(m, commit_id, "lineage.json", &blob, where)) < 0 || !blob)
		return rc;
	rc = kiln_mfmt_lineage_parse(sc, where, git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob),
	                             out);
	git_blob_free(blob);
	if (rc < 0)
		kiln_mfmt_lineage_free(out);
	return rc;
}

static const kiln_lineage_entry *lineage_find(const kiln_mfmt_lineage *l, const kiln_lineage_entry *e)
{
	ptrdiff_t i = kiln_mfmt_lineage_find(l, e->source, e->topic, e->partition);

	return i >= 0 ? &l->v[i] : NULL;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static bool lineage_equal(const kiln_lineage_entry *a, const kiln_lineage_entry *b)
{
	return a->next == b->next && a->bytes == b->bytes && str_eq(a->path, b->path) &&
	       str_eq(a->prefix_blake2b, b->prefix_blake2b);
}

static int stats_read(kiln_manifest *m, kiln_json_scanner *sc, const git_oid *commit_id, kiln_stats *out)
{
	git_blob *blob = NULL;
	char where[512];
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = file_at(m, commit_id, "stats.json", &blob, where)) < 0 || !blob)
		return rc;
	rc = kiln_mfmt_stats_parse(sc, where, git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob), out);
	git_blob_free(blob);
	return rc;
}

/* quarantine-replayed.json of a commit into an empty *out (empty without one). */
static int replayed_read(kiln_manifest *m, const git_oid *commit_id, kiln_replayed *out)
{
	git_blob *blob = NULL;
	char where[512];
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = file_at(m, commit_id, KILN_REPLAYED_FILE, &blob, where)) < 0 || !blob)
		return rc;
	rc = kiln_replayed_parse(out, git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob), where);
	git_blob_free(blob);
	return rc;
}

/* A quarantine replay commit lowers its parent's quarantined counts by
 * what it replayed: those go to snap->unquarantined and come off *before,
 * so that the rest is a plain delta. */
static void stats_unquarantine(kiln_snapshot *snap, const kiln_stats *after, kiln_stats *before)
{
	for (int c = 0; c < KILN_REJECT_COUNT_; c++) {
		uint64_t u = before->quarantined_by_code[c] > after->quarantined_by_code[c]
		                 ? before->quarantined_by_code[c] - after->quarantined_by_code[c]
		                 : 0;

		if (u > before->quarantined)
			u = before->quarantined;
		snap->unquarantined[c] = u;
		before->quarantined_by_code[c] -= u;
		before->quarantined -= u;
	}
}

/* *d = a - b, false when some count went down. */
static bool u64_sub(uint64_t *d, uint64_t a, uint64_t b)
{
	*d = a - b;
	return a >= b;
}

static bool stats_delta(kiln_stats *d, const kiln_stats *after, const kiln_stats *before)
{
	bool ok = u64_sub(&d->records_in, after->records_in, before->records_in) &&
	          u64_sub(&d->valid, after->valid, before->valid) &&
	          u64_sub(&d->quarantined, after->quarantined, before->quarantined) &&
	          u64_sub(&d->erased, after->erased, before->erased);

	for (int c = 0; ok && c < KILN_REJECT_COUNT_; c++)
		ok = u64_sub(&d->quarantined_by_code[c], after->quarantined_by_code[c],
		             before->quarantined_by_code[c]);
	for (int s = 0; ok && s < KILN_SPLIT_COUNT; s++) {
		const kiln_split_stats *a = &after->splits[s], *b = &before->splits[s];
		kiln_split_stats *x = &d->splits[s];

		ok = u64_sub(&x->records, a->records, b->records) &&
		     u64_sub(&x->shards, a->shards, b->shards) && u64_sub(&x->bytes, a->bytes, b->bytes) &&
		     u64_sub(&x->raw_bytes, a->raw_bytes, b->raw_bytes);
	}
	return ok;
}

/* ---- replaying one commit ------------------------------------------------- */

/* The snapshot of one replayed commit and everything its pointers point into. */
typedef struct replay {
	kiln_shard_entry *shards[KILN_SPLIT_COUNT];
	size_t nshards[KILN_SPLIT_COUNT], capshards[KILN_SPLIT_COUNT];
	char **topics; /* the sources' topic strings */
	size_t ntopics, captopics;
	kiln_source_range **sources; /* each entry's sources array */
	size_t nsources, capsources;
	kiln_lineage_entry *moved; /* lineage entries the commit changed */
	size_t nmoved;
} replay;

static void replay_free(replay *r)
{
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		free(r->shards[s]);
	for (size_t i = 0; i < r->ntopics; i++)
		free(r->topics[i]);
	free(r->topics);
	for (size_t i = 0; i < r->nsources; i++)
		free(r->sources[i]);
	free(r->sources);
	free(r->moved);
	memset(r, 0, sizeof(*r));
}

/* The "shard" hash of each line of a blob, sorted (for set difference). */
typedef struct hash_list {
	char (*v)[65];
	size_t n, cap;
} hash_list;

static int hash_cmp(const void *a, const void *b)
{
	return memcmp(a, b, 64);
}

/* Calls fn with each line of the blob parsed by the codec; the entry and its
 * strings live until fn returns. */
static int blob_lines(kiln_manifest *m, kiln_json_scanner *sc, const git_oid *blob_id, const char *where,
                      int (*fn)(void *ctx, const kiln_shard_entry *e), void *ctx)
{
	git_blob *blob = NULL;
	kiln_buf strings = KILN_BUF_INIT(0);
	kiln_source_range *sources = NULL;
	size_t sources_cap = 0;
	const char *p, *end;
	char w[512];
	int gerr, rc = 0;

	if ((gerr = git_blob_lookup(&blob, kiln_manifest_repo(m), blob_id)) < 0)
		return kiln_manifest_git_fail(m, gerr, where);
	snprintf(w, sizeof(w), "manifest %s: %s", kiln_manifest_path(m), where);
	p = git_blob_rawcontent(blob);
	end = p + git_blob_rawsize(blob);
	while (p < end && rc == 0) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *stop = nl ? nl : end;
		kiln_shard_entry e;

		kiln_buf_reset(&strings);
		if (stop > p &&
		    (rc = kiln_mfmt_shard_line_parse(sc, w, KILN_MFMT_LINE_FULL, p, (size_t)(stop - p), &e,
		                                     &strings, &sources, &sources_cap)) == 0)
			rc = fn(ctx, &e);
		p = nl ? nl + 1 : end;
	}
	kiln_buf_free(&strings);
	free(sources);
	git_blob_free(blob);
	return rc;
}

static int collect_hash(void *ctx, const kiln_shard_entry *e)
{
	hash_list *l = ctx;
	int rc = KILN_ARRAY_GROW(l->v, l->cap, l->n, "remote");

	if (rc < 0)
		return rc;
	memcpy(l->v[l->n++], e->hash, 65);
	return 0;
}

typedef struct add_ctx {
	replay *r;
	kiln_split split;
	const hash_list *before;
} add_ctx;

/* A line of the commit's blob that its parent's blob lacks becomes an entry
 * (its sources and their topics copied into the replay). */
static int add_line(void *ctx, const kiln_shard_entry *line)
{
	add_ctx *a = ctx;
	replay *r = a->r;
	kiln_shard_entry *e;
	kiln_source_range *ranges = NULL;
	size_t n = line->source_count;
	int rc;

	if (a->before->n && bsearch(line->hash, a->before->v, a->before->n, sizeof(*a->before->v), hash_cmp))
		return 0;
	if ((rc = KILN_ARRAY_GROW(r->sources, r->capsources, r->nsources, "remote")) < 0 ||
	    (rc = KILN_ARRAY_GROW(r->shards[a->split], r->capshards[a->split], r->nshards[a->split],
	                          "remote")) < 0)
		return rc;
	if (n && (rc = KILN_ARRAY_GROW(r->topics, r->captopics, r->ntopics + n - 1, "remote")) < 0)
		return rc;
	if (n && !(ranges = calloc(n, sizeof(*ranges))))
		return kiln_error_oom("remote");
	r->sources[r->nsources++] = ranges;
	for (size_t i = 0; i < n; i++) {
		ranges[i] = line->sources[i];
		if (!(ranges[i].topic = r->topics[r->ntopics] = strdup(line->sources[i].topic)))
			return kiln_error_oom("remote");
		r->ntopics++;
	}
	e = &r->shards[a->split][r->nshards[a->split]++];
	*e = *line;
	e->sources = ranges;
	return 0;
}

static int split_of(const char *name, kiln_split *out)
{
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		if (strcmp(name, kiln_split_name((kiln_split)s)) == 0) {
			*out = (kiln_split)s;
			return 0;
		}
	return -1;
}

/* The subtree at path of a commit (NULL when absent or no commit). */
static int subtree(kiln_manifest *m, const git_oid *commit_id, const char *path, git_tree **out)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_commit *c = NULL;
	git_tree *root = NULL;
	git_tree_entry *e = NULL;
	int gerr = 0;

	*out = NULL;
	if (!commit_id)
		return 0;
	if ((gerr = git_commit_lookup(&c, repo, commit_id)) == 0 && (gerr = git_commit_tree(&root, c)) == 0) {
		gerr = git_tree_entry_bypath(&e, root, path);
		if (gerr == GIT_ENOTFOUND)
			gerr = 0;
		else if (gerr == 0 && git_tree_entry_type(e) == GIT_OBJECT_TREE)
			gerr = git_tree_lookup(out, repo, git_tree_entry_id(e));
	}
	git_tree_entry_free(e);
	git_tree_free(root);
	git_commit_free(c);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, path) : 0;
}

/* The shard lines `commit` added to its parent's (NULL: none) splits. */
static int added_shards(kiln_manifest *m, kiln_json_scanner *sc, const git_oid *commit, const git_oid *parent,
                        replay *r)
{
	git_tree *splits = NULL, *psplits = NULL, *st = NULL, *pst = NULL;
	hash_list before = {0};
	int rc;

	if ((rc = subtree(m, commit, "splits", &splits)) < 0 || !splits ||
	    (rc = subtree(m, parent, "splits", &psplits)) < 0)
		goto cleanup;
	for (size_t i = 0; i < git_tree_entrycount(splits) && rc == 0; i++) {
		const git_tree_entry *se = git_tree_entry_byindex(splits, i);
		const git_tree_entry *pse =
		    psplits ? git_tree_entry_byname(psplits, git_tree_entry_name(se)) : NULL;
		kiln_split split;
		int gerr;

		if (git_tree_entry_type(se) != GIT_OBJECT_TREE)
			continue;
		if (split_of(git_tree_entry_name(se), &split) < 0) {
			rc = bad_file(m, commit, "splits/", "a split other than train, dev and test");
			break;
		}
		if (pse && git_oid_equal(git_tree_entry_id(se), git_tree_entry_id(pse)))
			continue;
		git_tree_free(st);
		git_tree_free(pst);
		st = pst = NULL;
		if ((gerr = git_tree_lookup(&st, kiln_manifest_repo(m), git_tree_entry_id(se))) < 0 ||
		    (pse && git_tree_entry_type(pse) == GIT_OBJECT_TREE &&
		     (gerr = git_tree_lookup(&pst, kiln_manifest_repo(m), git_tree_entry_id(pse))) < 0)) {
			rc = kiln_manifest_git_fail(m, gerr, "splits/");
			break;
		}
		for (size_t j = 0; j < git_tree_entrycount(st) && rc == 0; j++) {
			const git_tree_entry *be = git_tree_entry_byindex(st, j);
			const git_tree_entry *pbe =
			    pst ? git_tree_entry_byname(pst, git_tree_entry_name(be)) : NULL;
			add_ctx a = {.r = r, .split = split, .before = &before};
			char where[128];

			if (git_tree_entry_type(be) != GIT_OBJECT_BLOB ||
			    (pbe && git_oid_equal(git_tree_entry_id(be), git_tree_entry_id(pbe))))
				continue;
			before.n = 0;
			if (pbe && git_tree_entry_type(pbe) == GIT_OBJECT_BLOB) {
				snprintf(where, sizeof(where), "%.12s:splits/%s/%s", git_oid_tostr_s(parent),
				         git_tree_entry_name(se), git_tree_entry_name(pbe));
				if ((rc = blob_lines(m, sc, git_tree_entry_id(pbe), where, collect_hash,
				                     &before)) < 0)
					break;
				if (before.n > 1)
					qsort(before.v, before.n, sizeof(*before.v), hash_cmp);
			}
			snprintf(where, sizeof(where), "%.12s:splits/%s/%s", git_oid_tostr_s(commit),
			         git_tree_entry_name(se), git_tree_entry_name(be));
			rc = blob_lines(m, sc, git_tree_entry_id(be), where, add_line, &a);
		}
	}
cleanup:
	free(before.v);
	git_tree_free(pst);
	git_tree_free(st);
	git_tree_free(psplits);
	git_tree_free(splits);
	return rc;
}

/* dataset.json of a commit, parsed (all NULL when absent). */
static int dataset_read(kiln_manifest *m, kiln_json_scanner *sc, const git_oid *commit_id,
                        kiln_mfmt_dataset *out)
{
	git_blob *blob = NULL;
	char where[512];
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = file_at(m, commit_id, "dataset.json", &blob, where)) < 0 || !blob)
		return rc;
	rc = kiln_mfmt_dataset_parse(sc, where, git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob),
	                             out);
	git_blob_free(blob);
	return rc < 0 ? rc : 1;
}

/* The two commits' dataset.json define the same key and split
 * (kiln_mfmt_dataset_definition_differs), or an error naming the part. */
static int same_definition(kiln_manifest *m, kiln_json_scanner *sc, const git_oid *a, const git_oid *b,
                           const char *ref, const char *url)
{
	kiln_mfmt_dataset da = {0}, db = {0};
	const char *part;
	int fa, fb = 0, rc = 0;

	if ((fa = dataset_read(m, sc, a, &da)) < 0 || (fb = dataset_read(m, sc, b, &db)) < 0) {
		rc = fa < 0 ? fa : fb;
		goto cleanup;
	}
	if (fa && fb && (part = kiln_mfmt_dataset_definition_differs(&da, &db))) {
		char u[512];

		kiln_remote_safe_url(u, sizeof(u), url);
		rc = kiln_error_set(KILN_EINVALID,
		                    "manifest %s: %s here and at %s have different %s settings (a different "
		                    "dataset version): not combined; push to another branch",
		                    kiln_manifest_path(m), ref, u, part);
	}
cleanup:
	kiln_mfmt_dataset_free(&da);
	kiln_mfmt_dataset_free(&db);
	return rc;
}

typedef struct rebase_ctx {
	kiln_manifest *m;
	kiln_json_scanner *sc;
	const char *url, *ref;
	const kiln_ref_parts *parts;
	char tmp_branch[64];
} rebase_ctx;

/* Replays commit (whose parent is `parent`, may be NULL) on the temporary
 * branch, whose tip is `tip`; *out the new commit. */
static int replay_commit(rebase_ctx *x, const git_oid *commit, const git_oid *parent, const git_oid *tip,
                         git_oid *out)
{
	kiln_manifest *m = x->m;
	git_commit *c = NULL;
	git_blob *ds = NULL, *pj = NULL, *cy = NULL, *dd = NULL;
	kiln_profile added = {0};
	replay r = {0};
	kiln_mfmt_lineage lc = {0}, lp = {0}, lt = {0};
	kiln_replayed rc_ = {0}, rp = {0}, radded = {0};
	kiln_stats sc_, sp;
	kiln_snapshot snap = {0};
	char *ds_text = NULL, *author_name = NULL, *author_email = NULL, id[41];
	int gerr, rc;

	if ((gerr = git_commit_lookup(&c, kiln_manifest_repo(m), commit)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "reading a commit");
		goto cleanup;
	}
	if ((rc = blob_at(m, commit, "dataset.json", &ds)) < 0)
		goto cleanup;
	if (!ds) {
		rc = bad_file(m, commit, "dataset.json", "missing");
		goto cleanup;
	}
	if ((rc = same_definition(m, x->sc, commit, tip, x->ref, x->url)) < 0)
		goto cleanup;
	ds_text = strndup(git_blob_rawcontent(ds), (size_t)git_blob_rawsize(ds));
	author_name = strdup(git_commit_author(c)->name);
	author_email = strdup(git_commit_author(c)->email);
	if (!ds_text || !author_name || !author_email) {
		rc = kiln_error_oom("remote");
		goto cleanup;
	}

	/* lineage: the entries the commit moved, if the remote did not move them too */
	if ((rc = lineage_read(m, x->sc, commit, &lc)) < 0 ||
	    (rc = lineage_read(m, x->sc, parent, &lp)) < 0 || (rc = lineage_read(m, x->sc, tip, &lt)) < 0)
		goto cleanup;
	if (lc.n && !(r.moved = calloc(lc.n, sizeof(*r.moved)))) {
		rc = kiln_error_oom("remote");
		goto cleanup;
	}
	for (size_t i = 0; i < lc.n; i++) {
		const kiln_lineage_entry *e = &lc.v[i];
		const kiln_lineage_entry *base = lineage_find(&lp, e);
		const kiln_lineage_entry *now = lineage_find(&lt, e);

		if (base && lineage_equal(base, e))
			continue;
		/* compare-and-swap on the tree: the remote must still hold the value
		 * this commit moved the partition from */
		if (base ? !(now && lineage_equal(now, base)) : now != NULL) {
			char u[512];

			kiln_remote_safe_url(u, sizeof(u), x->url);
			rc = kiln_error_set(
			    KILN_EINVALID,
			    "manifest %s: %s: %s:%s/%d was advanced both here (to %lld) and at %s (to %lld): "
			    "the same offsets would be curated twice; not combined",
			    kiln_manifest_path(m), x->ref, e->source, e->topic, (int)e->partition,
			    (long long)e->next, u, now ? (long long)now->next : 0LL);
			goto cleanup;
		}
		r.moved[r.nmoved++] = *e;
	}

	/* stats: the commit's delta; a quarantine replay's records, listed */
	if ((rc = stats_read(m, x->sc, commit, &sc_)) < 0 || (rc = stats_read(m, x->sc, parent, &sp)) < 0)
		goto cleanup;
	if ((rc = replayed_read(m, commit, &rc_)) < 0 || (rc = replayed_read(m, parent, &rp)) < 0 ||
	    (rc = kiln_replayed_subtract(&radded, &rc_, &rp)) < 0)
		goto cleanup;
	if (radded.count) {
		stats_unquarantine(&snap, &sc_, &sp);
		snap.replayed = &radded;
	}
	if (!stats_delta(&snap.delta, &sc_, &sp)) {
		rc = bad_file(m, commit, "stats.json",
		              "counts lower than its parent's: not a kiln snapshot commit");
		goto cleanup;
	}

	if ((rc = added_shards(m, x->sc, commit, parent, &r)) < 0)
		goto cleanup;

	/* the contract it was curated under, as it was */
	if ((rc = blob_at(m, commit, "contract.yaml", &cy)) < 0)
		goto cleanup;
	if (cy) {
		snap.contract_text = git_blob_rawcontent(cy);
		snap.contract_len = (size_t)git_blob_rawsize(cy);
	}

	/* profile: what the commit added (its profile.json's "added") */
	if ((rc = blob_at(m, commit, "profile.json", &pj)) < 0)
		goto cleanup;
	if (pj) {
		char where[128];

		snprintf(where, sizeof(where), "manifest: %s:profile.json",
		         git_oid_tostr(id, sizeof(id), commit));
		if ((rc = kiln_profile_parse_file(git_blob_rawcontent(pj), (size_t)git_blob_rawsize(pj),
		                                  where, NULL, &added)) < 0)
			goto cleanup;
		snap.profile = &added;
	}

	/* dedup: the segment of keys the commit added */
	if ((rc = kiln_manifest_dedup_added(m, commit, parent, &dd, &snap)) < 0)
		goto cleanup;

	snap.dataset = x->parts->dataset;
	snap.branch = x->tmp_branch;
	snap.dataset_json = ds_text;
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		snap.shards[s] = r.shards[s];
		snap.shard_count[s] = r.nshards[s];
	}
	snap.lineage = r.moved;
	snap.lineage_count = r.nmoved;
	snap.author_name = author_name;
	snap.author_email = author_email;
	if ((rc = kiln_manifest_commit(m, &snap, id)) < 0)
		goto cleanup;
	rc = git_oid_fromstr(out, id) < 0 ? kiln_error_set(KILN_EIO, "manifest: bad commit id") : 0;
cleanup:
	free(ds_text);
	free(author_name);
	free(author_email);
	kiln_mfmt_lineage_free(&lc);
	kiln_mfmt_lineage_free(&lp);
	kiln_mfmt_lineage_free(&lt);
	kiln_replayed_free(&rc_);
	kiln_replayed_free(&rp);
	kiln_replayed_free(&radded);
	replay_free(&r);
	git_blob_free(ds);
	git_blob_free(pj);
	git_blob_free(cy);
	git_blob_free(dd);
	kiln_profile_free(&added);
	git_commit_free(c);
	return rc;
}

/* Replays the commits of `local` that `remote` lacks on top of `remote`;
 * *out the new tip (remote itself when local has nothing new). */
static int rebase(kiln_manifest *m, const char *url, const char *ref, const kiln_ref_parts *parts,
                  const git_oid *local, const git_oid *remote, git_oid *out)
{
	git_repository *repo = kiln_manifest_repo(m);
	static unsigned counter;
	unsigned serial = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
	rebase_ctx x = {.m = m, .url = url, .ref = ref, .parts = parts};
	git_revwalk *walk = NULL;
	git_reference *tmp = NULL, *head = NULL;
	git_oid *list = NULL, id, tip;
	size_t n = 0, cap = 0;
	char tmp_ref[KILN_REMOTE_REF_CAP];
	int gerr, rc = 0;

	if ((gerr = git_revwalk_new(&walk, repo)) < 0 ||
	    (gerr = git_revwalk_sorting(walk, GIT_SORT_TOPOLOGICAL | GIT_SORT_REVERSE)) < 0 ||
	    (gerr = git_revwalk_push(walk, local)) < 0 || (gerr = git_revwalk_hide(walk, remote)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "rebase");
		goto cleanup;
	}
	while ((gerr = git_revwalk_next(&id, walk)) == 0) {
		if ((rc = KILN_ARRAY_GROW(list, cap, n, "remote")) < 0)
			goto cleanup;
		list[n++] = id;
	}
	if (gerr != GIT_ITEROVER) {
		rc = kiln_manifest_git_fail(m, gerr, "rebase");
		goto cleanup;
	}
	git_oid_cpy(out, remote);
	if (n == 0)
		goto cleanup;

	if (!(x.sc = kiln_json_scanner_new(NULL))) {
		rc = kiln_error_oom("remote");
		goto cleanup;
	}
	snprintf(x.tmp_branch, sizeof(x.tmp_branch), "kiln-rebase-%ld-%u", (long)getpid(), serial);
	snprintf(tmp_ref, sizeof(tmp_ref), "refs/heads/%s/%s", parts->dataset, x.tmp_branch);
	if ((gerr = git_reference_create(&tmp, repo, tmp_ref, remote, 0, "kiln: rebase")) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, tmp_ref);
		goto cleanup;
	}
	git_oid_cpy(&tip, remote);
	for (size_t i = 0; i < n; i++) {
		git_commit *c = NULL;
		git_oid parent;
		bool has_parent;
		unsigned np;

		if ((gerr = git_commit_lookup(&c, repo, &list[i])) < 0) {
			rc = kiln_manifest_git_fail(m, gerr, "rebase");
			goto cleanup;
		}
		np = git_commit_parentcount(c);
		has_parent = np == 1;
		if (has_parent)
			git_oid_cpy(&parent, git_commit_parent_id(c, 0));
		git_commit_free(c);
		if (np > 1) {
			rc = kiln_error_set(KILN_EINVALID,
			                    "manifest %s: %s: %.12s is a merge commit: cannot rebase it",
			                    kiln_manifest_path(m), ref, git_oid_tostr_s(&list[i]));
			goto cleanup;
		}
		if ((rc = replay_commit(&x, &list[i], has_parent ? &parent : NULL, &tip, &tip)) < 0)
			goto cleanup;
	}
	git_oid_cpy(out, &tip);
cleanup:
	if (tmp) {
		/* a new repository's HEAD may have been pointed at the temporary branch */
		if (git_reference_lookup(&head, repo, "HEAD") == 0 &&
		    git_reference_type(head) == GIT_REFERENCE_SYMBOLIC &&
		    strcmp(git_reference_symbolic_target(head), tmp_ref) == 0)
			git_repository_set_head(repo, ref);
		git_reference_free(head);
		git_reference_remove(repo, tmp_ref);
		git_reference_free(tmp);
	}
	kiln_json_scanner_free(x.sc);
	git_revwalk_free(walk);
	free(list);
	return rc;
}

/* Brings the local branch `ref` together with the remote tip: creates it,
 * fast-forwards it, leaves it (ahead), or rebases it (diverged); every move
 * is a compare-and-swap (KILN_EMODIFIED when the branch moved meanwhile). */
int kiln_remote_integrate_branch(kiln_manifest *m, const char *url, const char *ref,
                                 const kiln_ref_parts *parts, const git_oid *remote)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_reference *moved = NULL;
	git_oid local, target;
	int lock, gerr, rc;

	gerr = git_reference_name_to_id(&local, repo, ref);
	if (gerr == GIT_ENOTFOUND) {
		if ((rc = kiln_manifest_lock(m, KILN_REFS_LOCK, false, true, &lock)) < 0)
			return rc;
		gerr = git_reference_create_matching(&moved, repo, ref, remote, 1, &absent, "kiln: fetched");
		kiln_manifest_unlock(lock);
		git_reference_free(moved);
		if (gerr == GIT_EEXISTS)
			return kiln_error_set(KILN_EMODIFIED, "manifest %s: %s appeared meanwhile",
			                      kiln_manifest_path(m), ref);
		if (gerr == 0 && git_repository_head_unborn(repo) == 1)
			git_repository_set_head(repo, ref);
		return gerr < 0 ? kiln_manifest_git_fail(m, gerr, ref) : 0;
	}
	if (gerr < 0)
		return kiln_manifest_git_fail(m, gerr, ref);
	if (git_oid_equal(&local, remote) || git_graph_descendant_of(repo, &local, remote) == 1)
		return 0; /* the same, or ahead: the next push sends it */
	if (git_graph_descendant_of(repo, remote, &local) == 1)
		git_oid_cpy(&target, remote);
	else if ((rc = rebase(m, url, ref, parts, &local, remote, &target)) < 0)
		return rc;
	if ((rc = kiln_manifest_lock(m, KILN_REFS_LOCK, false, true, &lock)) < 0)
		return rc;
	gerr =
	    git_reference_create_matching(&moved, repo, ref, &target, 1, &local, "kiln: updated from remote");
	kiln_manifest_unlock(lock);
	git_reference_free(moved);
	if (gerr == GIT_EMODIFIED)
		return kiln_error_set(KILN_EMODIFIED, "manifest %s: %s moved meanwhile",
		                      kiln_manifest_path(m), ref);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, ref) : 0;
}
