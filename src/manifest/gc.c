/* Garbage collection of shard objects and per-version space accounting (see
 * gc.h). Both read splits/<split>/<hh>.jsonl blobs of chosen commits: gc
 * marks shard hashes in an open-addressing table keyed by the 32 hash bytes,
 * skipping every tree and blob id it has read before (successive commits share
 * almost all of them); du caches each blob's parsed lines by blob id. Nothing
 * is deleted before every kept commit has been read without error: a manifest
 * that cannot be read stops the collection. */
#include "manifest/gc.h"
#include "manifest/internal.h"

#include <dirent.h>
#include <errno.h>
#include <git2.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/array.h"
#include "core/error.h"
#include "core/json.h"
#include "manifest/format.h"
#include "shard/object.h"

#define HASH_HEX 64

/* ---- hex ------------------------------------------------------------------ */

static int hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* 64 lower-case hex digits into 32 bytes; false when s is not that. */
static bool hash_decode(const char *s, size_t len, uint8_t out[32])
{
	if (len != HASH_HEX)
		return false;
	for (size_t i = 0; i < 32; i++) {
		int hi = hex_val(s[2 * i]), lo = hex_val(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

static void hash_encode(const uint8_t h[32], char out[65])
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < 32; i++) {
		out[2 * i] = digits[h[i] >> 4];
		out[2 * i + 1] = digits[h[i] & 15];
	}
	out[64] = '\0';
}

static uint64_t load64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* A table index from key bytes. Shard names are BLAKE2b digests, but keys
 * still go through a full mix: a table must not degrade on names that share a
 * prefix (hand-made test names do). */
static uint64_t mix_key(const uint8_t *k, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;

	for (size_t i = 0; i + 8 <= n; i += 8) {
		h ^= load64(k + i);
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 33;
	}
	for (size_t i = n & ~(size_t)7; i < n; i++)
		h = (h ^ k[i]) * 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 29;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 32);
}

/* ---- shard table: hash -> counters (open addressing, linear probing) ----- */

typedef struct shard_slot {
	uint8_t hash[32];
	uint64_t bytes;
	uint32_t versions; /* du: listed versions that hold the shard */
	uint32_t last;     /* du: index + 1 of the last version that counted it;
	                    * gc: 1 once the store listing showed it */
	bool used;
} shard_slot;

typedef struct shard_table {
	shard_slot *v;
	size_t n, cap; /* cap: 0 or a power of two */
} shard_table;

static void shard_table_free(shard_table *t)
{
	free(t->v);
	memset(t, 0, sizeof(*t));
}

static shard_slot *shard_probe(shard_slot *v, size_t cap, const uint8_t hash[32])
{
	size_t i = (size_t)mix_key(hash, 32) & (cap - 1);

	while (v[i].used && memcmp(v[i].hash, hash, 32) != 0)
		i = (i + 1) & (cap - 1);
	return &v[i];
}

static int shard_table_grow(shard_table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1024;
	shard_slot *v = calloc(cap, sizeof(*v));

	if (!v)
		return kiln_error_oom("gc");
	for (size_t i = 0; i < t->cap; i++)
		if (t->v[i].used)
			*shard_probe(v, cap, t->v[i].hash) = t->v[i];
	free(t->v);
	t->v = v;
	t->cap = cap;
	return 0;
}

/* The slot of hash; created (zeroed counters) when `create`, else NULL when
 * absent. *out_new (may be NULL) says whether it was created. */
static int shard_table_get(shard_table *t, const uint8_t hash[32], bool create, shard_slot **out,
                           bool *out_new)
{
	shard_slot *s;
	int rc;

	*out = NULL;
	if (out_new)
		*out_new = false;
	if (t->cap == 0) {
		if (!create)
			return 0;
		if ((rc = shard_table_grow(t)) < 0)
			return rc;
	}
	s = shard_probe(t->v, t->cap, hash);
	if (s->used || !create) {
		*out = s->used ? s : NULL;
		return 0;
	}
	if ((t->n + 1) * 10 > t->cap * 7) {
		if ((rc = shard_table_grow(t)) < 0)
			return rc;
		s = shard_probe(t->v, t->cap, hash);
	}
	memset(s, 0, sizeof(*s));
	memcpy(s->hash, hash, 32);
	s->used = true;
	t->n++;
	*out = s;
	if (out_new)
		*out_new = true;
	return 0;
}

/* ---- oid map: object id -> a range (blob cache) or nothing (seen set) ----- */

typedef struct oid_slot {
	git_oid id; /* all zero: empty */
	size_t start, count;
} oid_slot;

typedef struct oid_map {
	oid_slot *v;
	size_t n, cap;
} oid_map;

static void oid_map_free(oid_map *m)
{
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static oid_slot *oid_probe(oid_slot *v, size_t cap, const git_oid *id)
{
	size_t i = (size_t)mix_key(id->id, GIT_OID_RAWSZ) & (cap - 1);

	while (!git_oid_is_zero(&v[i].id) && !git_oid_equal(&v[i].id, id))
		i = (i + 1) & (cap - 1);
	return &v[i];
}

static oid_slot *oid_map_find(const oid_map *m, const git_oid *id)
{
	oid_slot *s;

	if (m->cap == 0)
		return NULL;
	s = oid_probe(m->v, m->cap, id);
	return git_oid_is_zero(&s->id) ? NULL : s;
}

/* Adds id: 1 when it was new (*out its slot), 0 when it was there already. */
static int oid_map_add(oid_map *m, const git_oid *id, oid_slot **out)
{
	oid_slot *s;

	if ((m->n + 1) * 10 > m->cap * 7) {
		size_t cap = m->cap ? m->cap * 2 : 1024;
		oid_slot *v = calloc(cap, sizeof(*v));

		if (!v)
			return kiln_error_oom("gc");
		for (size_t i = 0; i < m->cap; i++)
			if (!git_oid_is_zero(&m->v[i].id))
				*oid_probe(v, cap, &m->v[i].id) = m->v[i];
		free(m->v);
		m->v = v;
		m->cap = cap;
	}
	s = oid_probe(m->v, m->cap, id);
	if (out)
		*out = s;
	if (!git_oid_is_zero(&s->id))
		return 0;
	git_oid_cpy(&s->id, id);
	s->start = s->count = 0;
	m->n++;
	return 1;
}

/* ---- reading shard lines ---------------------------------------------------- */

typedef struct line_rec {
	uint8_t hash[32];
	uint64_t bytes, records;
} line_rec;

typedef struct reader {
	kiln_manifest *m;
	git_repository *repo;
	kiln_json_scanner *scanner;
	bool hash_only; /* only "shard" is needed: lines as kiln writes them skip the scanner */
} reader;

static int reader_init(reader *r, kiln_manifest *m)
{
	r->hash_only = false;
	r->m = m;
	r->repo = kiln_manifest_repo(m);
	r->scanner = kiln_json_scanner_new(NULL);
	return r->scanner ? 0 : kiln_error_oom("gc");
}

static void reader_free(reader *r)
{
	kiln_json_scanner_free(r->scanner);
	r->scanner = NULL;
}

/* One splits line: the references only (KILN_MFMT_LINE_REFS), "shard"
 * required, "bytes" and "records" read when present. */
static int parse_line(reader *r, const char *line, size_t len, const char *where, size_t lineno,
                      line_rec *out)
{
	kiln_shard_entry e;
	char w[512];
	int rc;

	snprintf(w, sizeof(w), "manifest %s: %s line %zu", kiln_manifest_path(r->m), where, lineno);
	if ((rc = kiln_mfmt_shard_line_parse(r->scanner, w, KILN_MFMT_LINE_REFS, line, len, &e, NULL, NULL,
	                                     NULL)) < 0)
		return rc;
	hash_decode(e.hash, HASH_HEX, out->hash);
	out->bytes = e.bytes;
	out->records = e.records;
	return 0;
}

typedef int (*line_fn)(void *ctx, const line_rec *rec);

/* Calls fn for every line of the blob (empty lines carry nothing: skipped). */
static int read_blob_lines(reader *r, const git_oid *id, const char *where, line_fn fn, void *ctx)
{
	git_blob *blob = NULL;
	const char *p, *end;
	size_t lineno = 0;
	int gerr, rc = 0;

	if ((gerr = git_blob_lookup(&blob, r->repo, id)) < 0)
		return kiln_manifest_git_fail(r->m, gerr, where);
	p = git_blob_rawcontent(blob);
	end = p + git_blob_rawsize(blob);
	while (p < end && rc == 0) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *stop = nl ? nl : end;
		char hex[HASH_HEX + 1];
		line_rec rec;

		lineno++;
		/* {"shard":"<64 hex>",... : the hash without scanning the line (every
		 * line of every changed blob is read again, so this is gc's hot path) */
		if (r->hash_only && kiln_mfmt_shard_line_fast_hash(p, (size_t)(stop - p), hex) &&
		    hash_decode(hex, HASH_HEX, rec.hash)) {
			rec.bytes = rec.records = 0;
			rc = fn(ctx, &rec);
		} else if (stop > p &&
		           (rc = parse_line(r, p, (size_t)(stop - p), where, lineno, &rec)) == 0) {
			rc = fn(ctx, &rec);
		}
		p = nl ? nl + 1 : end;
	}
	git_blob_free(blob);
	return rc;
}

/* Context for walking a commit's splits/: `seen` (may be NULL) skips trees and
 * blobs read before; `cache` (may be NULL) keeps parsed lines per blob. */
typedef struct splits_walk {
	reader *r;
	oid_map *seen;
	oid_map *cache;
	line_rec **recs; /* the cache's lines */
	size_t *nrecs, *caprecs;
	line_fn fn;
	void *ctx;
	char commit[13];
} splits_walk;

static int cache_line(void *ctx, const line_rec *rec)
{
	splits_walk *w = ctx;

	if (KILN_ARRAY_GROW(*w->recs, *w->caprecs, *w->nrecs, "gc") < 0)
		return KILN_ENOMEM;
	(*w->recs)[(*w->nrecs)++] = *rec;
	return 0;
}

static int walk_blob(splits_walk *w, const git_oid *id, const char *split, const char *name)
{
	char where[256];
	oid_slot *slot;
	size_t start;
	int rc;

	snprintf(where, sizeof(where), "%s:splits/%s/%s", w->commit, split, name);
	if (w->seen && (rc = oid_map_add(w->seen, id, NULL)) <= 0)
		return rc;
	if (!w->cache)
		return read_blob_lines(w->r, id, where, w->fn, w->ctx);
	slot = oid_map_find(w->cache, id);
	if (!slot) {
		start = *w->nrecs;
		if ((rc = read_blob_lines(w->r, id, where, cache_line, w)) < 0) {
			*w->nrecs = start;
			return rc;
		}
		if ((rc = oid_map_add(w->cache, id, &slot)) < 0)
			return rc;
		slot->start = start;
		slot->count = *w->nrecs - start;
	}
	for (size_t i = 0; i < slot->count; i++)
		if ((rc = w->fn(w->ctx, &(*w->recs)[slot->start + i])) != 0)
			return rc;
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n > k && strcmp(s + n - k, suffix) == 0;
}

/* Every splits/<split>/<hh>.jsonl of the commit's tree. */
static int walk_commit(splits_walk *w, const git_oid *commit_id)
{
	git_commit *commit = NULL;
	git_tree *root = NULL, *splits = NULL, *split = NULL;
	const git_tree_entry *e;
	int gerr, rc = 0;

	git_oid_tostr(w->commit, sizeof(w->commit), commit_id);
	if ((gerr = git_commit_lookup(&commit, w->r->repo, commit_id)) < 0) {
		rc = kiln_manifest_git_fail(w->r->m, gerr, w->commit);
		goto cleanup;
	}
	if (w->seen && (rc = oid_map_add(w->seen, git_commit_tree_id(commit), NULL)) <= 0)
		goto cleanup;
	rc = 0;
	if ((gerr = git_commit_tree(&root, commit)) < 0) {
		rc = kiln_manifest_git_fail(w->r->m, gerr, w->commit);
		goto cleanup;
	}
	e = git_tree_entry_byname(root, "splits");
	if (!e || git_tree_entry_type(e) != GIT_OBJECT_TREE)
		goto cleanup; /* a commit without shards */
	if (w->seen && (rc = oid_map_add(w->seen, git_tree_entry_id(e), NULL)) <= 0)
		goto cleanup;
	rc = 0;
	if ((gerr = git_tree_lookup(&splits, w->r->repo, git_tree_entry_id(e))) < 0) {
		rc = kiln_manifest_git_fail(w->r->m, gerr, "splits/");
		goto cleanup;
	}
	for (size_t i = 0; i < git_tree_entrycount(splits) && rc == 0; i++) {
		const git_tree_entry *se = git_tree_entry_byindex(splits, i);
		const char *split_name = git_tree_entry_name(se);

		if (git_tree_entry_type(se) != GIT_OBJECT_TREE)
			continue;
		if (w->seen && (rc = oid_map_add(w->seen, git_tree_entry_id(se), NULL)) <= 0)
			continue;
		rc = 0;
		git_tree_free(split);
		split = NULL;
		if ((gerr = git_tree_lookup(&split, w->r->repo, git_tree_entry_id(se))) < 0) {
			rc = kiln_manifest_git_fail(w->r->m, gerr, split_name);
			break;
		}
		for (size_t j = 0; j < git_tree_entrycount(split) && rc == 0; j++) {
			const git_tree_entry *be = git_tree_entry_byindex(split, j);

			if (git_tree_entry_type(be) == GIT_OBJECT_BLOB &&
			    ends_with(git_tree_entry_name(be), ".jsonl"))
				rc = walk_blob(w, git_tree_entry_id(be), split_name, git_tree_entry_name(be));
		}
	}
cleanup:
	git_tree_free(split);
	git_tree_free(splits);
	git_tree_free(root);
	git_commit_free(commit);
	return rc < 0 ? rc : 0;
}

/* ---- gc ------------------------------------------------------------------- */

/* A listed shard the first marking pass did not reach: an orphan unless the
 * second pass marks it, or young (kept whatever the second pass says). */
typedef struct candidate {
	char *key;
	uint8_t hash[32];
	uint64_t size;
	bool young;
} candidate;

typedef struct gc_state {
	reader r;
	const kiln_gc_policy *policy;
	int64_t cutoff;
	int64_t young_after; /* unreferenced objects written after this are young */
	shard_table marked;
	oid_map seen;         /* trees and blobs read */
	oid_map kept;         /* commits kept */
	oid_map tips_history; /* tips whose whole history was walked */
	oid_map tips_recent;  /* tips whose history was walked for younger_than */
	candidate *cands;
	size_t ncands, capcands;
	kiln_gc_cb cb;
	void *ctx;
	kiln_gc_stats *st;
} gc_state;

static int mark_line(void *ctx, const line_rec *rec)
{
	gc_state *g = ctx;
	shard_slot *s;
	bool created;
	int rc = shard_table_get(&g->marked, rec->hash, true, &s, &created);

	if (rc == 0 && created)
		g->st->referenced++;
	return rc;
}

static int mark_commit(gc_state *g, const git_oid *id)
{
	splits_walk w = {.r = &g->r, .seen = &g->seen, .fn = mark_line, .ctx = g};
	int rc = oid_map_add(&g->kept, id, NULL);

	if (rc <= 0)
		return rc;
	g->st->commits++;
	return walk_commit(&w, id);
}

/* Marks the commits of a walk (recent: only those younger than the cutoff). */
static int mark_walk(gc_state *g, git_revwalk *walk, bool recent)
{
	git_oid id;
	int gerr, rc = 0;

	while (rc == 0 && (gerr = git_revwalk_next(&id, walk)) == 0) {
		if (recent) {
			git_commit *c = NULL;

			if ((gerr = git_commit_lookup(&c, g->r.repo, &id)) < 0)
				return kiln_manifest_git_fail(g->r.m, gerr, "reading history");
			if ((int64_t)git_commit_time(c) < g->cutoff) {
				git_commit_free(c);
				continue;
			}
			git_commit_free(c);
		}
		rc = mark_commit(g, &id);
	}
	if (rc < 0)
		return rc;
	return gerr == GIT_ITEROVER ? 0 : kiln_manifest_git_fail(g->r.m, gerr, "reading history");
}

/* Pushes tip onto walk unless `done` has it (walked in an earlier pass, then
 * hidden: its history is marked already). */
static int push_tip(gc_state *g, git_revwalk *walk, oid_map *done, const git_oid *tip)
{
	int rc = oid_map_add(done, tip, NULL), gerr;

	if (rc < 0)
		return rc;
	gerr = rc == 1 ? git_revwalk_push(walk, tip) : 0;
	return gerr < 0 ? kiln_manifest_git_fail(g->r.m, gerr, "reading history") : 0;
}

static int hide_done(gc_state *g, git_revwalk *walk, const oid_map *done)
{
	for (size_t i = 0; i < done->cap; i++) {
		int gerr;

		if (git_oid_is_zero(&done->v[i].id))
			continue;
		if ((gerr = git_revwalk_hide(walk, &done->v[i].id)) < 0)
			return kiln_manifest_git_fail(g->r.m, gerr, "reading history");
	}
	return 0;
}

/* One marking pass over every ref: tips, then the histories the policy keeps.
 * A second pass only reads what is new since the first. */
static int mark_refs(gc_state *g)
{
	git_reference_iterator *it = NULL;
	git_reference *ref = NULL;
	git_revwalk *history = NULL, *recent = NULL;
	int gerr, rc = 0;

	g->st->refs = 0;
	if ((gerr = git_revwalk_new(&history, g->r.repo)) < 0 ||
	    (gerr = git_revwalk_new(&recent, g->r.repo)) < 0 ||
	    (gerr = git_reference_iterator_glob_new(&it, g->r.repo, "refs/*")) < 0) {
		rc = kiln_manifest_git_fail(g->r.m, gerr, "listing refs");
		goto cleanup;
	}
	if ((rc = hide_done(g, history, &g->tips_history)) < 0 ||
	    (rc = hide_done(g, recent, &g->tips_recent)) < 0)
		goto cleanup;
	while ((gerr = git_reference_next(&ref, it)) == 0) {
		git_object *peeled = NULL;
		bool tag = strncmp(git_reference_name(ref), "refs/tags/", 10) == 0;
		git_oid tip;

		gerr = git_reference_peel(&peeled, ref, GIT_OBJECT_COMMIT);
		if (gerr == GIT_ENOTFOUND || gerr == GIT_EPEEL || gerr == GIT_EINVALIDSPEC) {
			git_reference_free(ref);
			continue; /* a ref to something other than a commit holds no shards */
		}
		if (gerr < 0) {
			rc = kiln_manifest_git_fail(g->r.m, gerr, git_reference_name(ref));
			goto cleanup;
		}
		git_oid_cpy(&tip, git_object_id(peeled));
		git_object_free(peeled);
		git_reference_free(ref);
		ref = NULL;
		g->st->refs++;
		if ((rc = mark_commit(g, &tip)) < 0)
			goto cleanup;
		if ((tag ? g->policy->keep_tags : g->policy->keep_branches) &&
		    (rc = push_tip(g, history, &g->tips_history, &tip)) < 0)
			goto cleanup;
		if (g->policy->younger_than > 0 && (rc = push_tip(g, recent, &g->tips_recent, &tip)) < 0)
			goto cleanup;
	}
	if (gerr != GIT_ITEROVER) {
		rc = kiln_manifest_git_fail(g->r.m, gerr, "listing refs");
		goto cleanup;
	}
	if ((rc = mark_walk(g, history, false)) < 0)
		goto cleanup;
	if (g->policy->younger_than > 0)
		rc = mark_walk(g, recent, true);
cleanup:
	git_reference_free(ref);
	git_reference_iterator_free(it);
	git_revwalk_free(recent);
	git_revwalk_free(history);
	return rc;
}

/* A shard object's key (shard/object.h) into its 32 hash bytes. */
static bool shard_key(const char *key, uint8_t out[32])
{
	char hex[65];

	return kiln_shard_parse_key(key, hex, NULL) && hash_decode(hex, HASH_HEX, out);
}

static int hex_cmp(const void *key, const void *elem)
{
	return strcmp(key, *(const char *const *)elem);
}

/* Whether the shard (its 32-byte hash) is one an erasure superseded. */
static bool erased(const kiln_gc_policy *policy, const uint8_t hash[32])
{
	char hex[65];

	if (policy->erased_count == 0)
		return false;
	sodium_bin2hex(hex, sizeof(hex), hash, 32);
	return bsearch(hex, policy->erased, policy->erased_count, sizeof(*policy->erased), hex_cmp) != NULL;
}

static int list_cb(void *ctx, const char *key, uint64_t size, int64_t mtime)
{
	gc_state *g = ctx;
	uint8_t hash[32];
	shard_slot *s;
	int rc;

	if (!shard_key(key, hash)) {
		g->st->foreign++;
		return g->cb ? g->cb(g->ctx, KILN_GC_FOREIGN, key, size) : 0;
	}
	g->st->objects++;
	g->st->object_bytes += size;
	if ((rc = shard_table_get(&g->marked, hash, false, &s, NULL)) < 0)
		return rc;
	if (s) {
		s->last = 1;
		g->st->live++;
		g->st->live_bytes += size;
		return 0;
	}
	/* a shard an erasure superseded is never young: it goes at once */
	bool young = g->policy->grace > 0 && (mtime <= 0 || mtime > g->young_after);

	young = young && !erased(g->policy, hash);

	if (young) {
		g->st->young++;
		g->st->young_bytes += size;
	}
	if (KILN_ARRAY_GROW(g->cands, g->capcands, g->ncands, "gc") < 0)
		return KILN_ENOMEM;
	if (!(g->cands[g->ncands].key = strdup(key)))
		return kiln_error_oom("gc");
	memcpy(g->cands[g->ncands].hash, hash, 32);
	g->cands[g->ncands].size = size;
	g->cands[g->ncands].young = young;
	g->ncands++;
	return 0;
}

int kiln_gc(kiln_manifest *m, kiln_store *store, const kiln_gc_policy *policy, kiln_gc_cb cb, void *ctx,
            kiln_gc_stats *out)
{
	gc_state g = {.policy = policy, .cb = cb, .ctx = ctx, .st = out};
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = reader_init(&g.r, m)) < 0)
		goto cleanup;
	g.r.hash_only = true;
	if (policy->younger_than > 0)
		g.cutoff = (policy->now ? policy->now : (int64_t)time(NULL)) - policy->younger_than;
	g.young_after = (policy->now ? policy->now : (int64_t)time(NULL)) - policy->grace;

	if ((rc = mark_refs(&g)) < 0)
		goto cleanup;
	if (out->refs == 0) {
		rc = kiln_error_set(
		    KILN_EINVALID,
		    "gc: manifest %s has no branches or tags: every shard would look orphaned; refusing",
		    kiln_manifest_path(m));
		goto cleanup;
	}
	if ((rc = kiln_store_list(store, KILN_SHARD_DIR, list_cb, &g)) != 0)
		goto cleanup;
	/* commits made while the store was listed keep their shards too */
	if ((rc = mark_refs(&g)) < 0)
		goto cleanup;

	/* candidates the second pass marked are live (a commit made while the
	 * store was listed references them, young or not); the rest are young or
	 * orphans */
	for (size_t i = 0; i < g.ncands; i++) {
		candidate *c = &g.cands[i];
		shard_slot *s;

		if ((rc = shard_table_get(&g.marked, c->hash, false, &s, NULL)) < 0)
			goto cleanup;
		if (s) {
			s->last = 1;
			out->live++;
			out->live_bytes += c->size;
			if (c->young) {
				out->young--;
				out->young_bytes -= c->size;
			}
			c->size = UINT64_MAX; /* not an orphan */
			continue;
		}
		if (c->young) {
			c->size = UINT64_MAX; /* kept */
			continue;
		}
		out->orphans++;
		out->orphan_bytes += c->size;
	}
	for (size_t i = 0; i < g.marked.cap; i++) {
		const shard_slot *s = &g.marked.v[i];
		char key[KILN_SHARD_KEY_CAP], hex[65];
		uint64_t size;

		if (!s->used || s->last)
			continue;
		hash_encode(s->hash, hex);
		kiln_shard_name(key, sizeof(key), NULL, hex, NULL);
		/* a commit made while the store was listed may reference a shard
		 * uploaded after the listing passed its place: ask the store */
		if ((rc = kiln_store_stat(store, key, &size)) < 0)
			goto cleanup;
		if (rc == 1) {
			out->objects++;
			out->object_bytes += size;
			out->live++;
			out->live_bytes += size;
			continue;
		}
		out->missing++;
		if (cb && (rc = cb(ctx, KILN_GC_MISSING, key, 0)) != 0)
			goto cleanup;
	}

	if (policy->apply && out->orphans && out->referenced && out->live == 0) {
		rc = kiln_error_set(KILN_EINVALID,
		                    "gc: the store %s holds none of the %llu shards manifest %s lists: "
		                    "they do not belong together; nothing deleted",
		                    store->url, (unsigned long long)out->referenced, kiln_manifest_path(m));
		goto cleanup;
	}
	for (size_t i = 0; i < g.ncands; i++) {
		const candidate *c = &g.cands[i];

		if (c->size == UINT64_MAX)
			continue;
		if (policy->apply) {
			rc = kiln_store_remove(store, c->key);
			if (rc < 0 && rc != KILN_ENOTFOUND)
				goto cleanup;
			out->deleted++;
			out->deleted_bytes += c->size;
		}
		if (cb && (rc = cb(ctx, KILN_GC_ORPHAN, c->key, c->size)) != 0)
			goto cleanup;
	}
	if (policy->apply && (rc = kiln_gc_remove_object_temps(m, g.young_after, &out->temps)) < 0)
		goto cleanup;
	rc = 0;
cleanup:
	for (size_t i = 0; i < g.ncands; i++)
		free(g.cands[i].key);
	free(g.cands);
	shard_table_free(&g.marked);
	oid_map_free(&g.seen);
	oid_map_free(&g.kept);
	oid_map_free(&g.tips_history);
	oid_map_free(&g.tips_recent);
	reader_free(&g.r);
	return rc;
}

/* ---- du ------------------------------------------------------------------- */

/* N of "vN", else -1. */
static long long version_number(const char *name)
{
	long long v = 0;

	if (name[0] != 'v' || !name[1])
		return -1;
	for (const char *p = name + 1; *p; p++) {
		if (*p < '0' || *p > '9' || v > 100000000000LL)
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v;
}

static int row_cmp(const void *pa, const void *pb)
{
	const kiln_du_row *a = pa, *b = pb;
	long long va, vb;

	if (a->tag != b->tag)
		return a->tag ? -1 : 1;
	if (a->tag) {
		va = version_number(a->name);
		vb = version_number(b->name);
		if ((va >= 0) != (vb >= 0))
			return va >= 0 ? -1 : 1;
		if (va >= 0 && va != vb)
			return va < vb ? -1 : 1;
	} else if ((strcmp(a->name, "main") == 0) != (strcmp(b->name, "main") == 0)) {
		return strcmp(a->name, "main") == 0 ? -1 : 1;
	}
	return strcmp(a->name, b->name);
}

typedef struct du_state {
	shard_table table;
	kiln_du_row *row;
	uint32_t index; /* of row, + 1 */
} du_state;

static int du_line(void *ctx, const line_rec *rec)
{
	du_state *d = ctx;
	shard_slot *s;
	int rc = shard_table_get(&d->table, rec->hash, true, &s, NULL);

	if (rc < 0)
		return rc;
	if (s->last == d->index)
		return 0; /* listed twice in this version */
	s->last = d->index;
	s->versions++;
	s->bytes = rec->bytes;
	d->row->shards++;
	d->row->bytes += rec->bytes;
	d->row->records += rec->records;
	return 0;
}

/* Appends the dataset's refs under `prefix` ("refs/heads/<ds>/") to out. */
static int du_collect(kiln_manifest *m, const char *prefix, bool tag, kiln_du_report *out, size_t *cap)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_reference_iterator *it = NULL;
	git_reference *ref = NULL;
	char glob[300];
	size_t plen = strlen(prefix);
	int gerr, rc = 0;

	snprintf(glob, sizeof(glob), "%s*", prefix);
	if ((gerr = git_reference_iterator_glob_new(&it, repo, glob)) < 0)
		return kiln_manifest_git_fail(m, gerr, "listing refs");
	while ((gerr = git_reference_next(&ref, it)) == 0) {
		const char *name = git_reference_name(ref) + plen;
		git_object *peeled = NULL;
		kiln_du_row *row;

		if (strchr(name, '/') || strlen(name) >= sizeof(row->name) ||
		    git_reference_peel(&peeled, ref, GIT_OBJECT_COMMIT) < 0) {
			git_reference_free(ref);
			continue;
		}
		if ((rc = KILN_ARRAY_GROW(out->rows, *cap, out->count, "gc")) < 0) {
			git_object_free(peeled);
			git_reference_free(ref);
			break;
		}
		row = &out->rows[out->count++];
		memset(row, 0, sizeof(*row));
		snprintf(row->name, sizeof(row->name), "%s", name);
		row->tag = tag;
		git_oid_tostr(row->commit, sizeof(row->commit), git_object_id(peeled));
		git_object_free(peeled);
		git_reference_free(ref);
	}
	if (rc == 0 && gerr != GIT_ITEROVER)
		rc = kiln_manifest_git_fail(m, gerr, "listing refs");
	git_reference_iterator_free(it);
	return rc;
}

int kiln_gc_du(kiln_manifest *m, const char *dataset, kiln_du_report *out)
{
	du_state d = {0};
	reader r = {0};
	oid_map cache = {0};
	line_rec *recs = NULL;
	size_t nrecs = 0, caprecs = 0, cap = 0;
	char prefix[300];
	int rc;

	memset(out, 0, sizeof(*out));
	if (!kiln_mfmt_name_valid(dataset))
		return kiln_error_set(KILN_EINVALID,
		                      "du: dataset name must match [a-z0-9][a-z0-9._-]{0,127}");
	snprintf(prefix, sizeof(prefix), "refs/tags/%s/", dataset);
	if ((rc = du_collect(m, prefix, true, out, &cap)) < 0)
		goto cleanup;
	snprintf(prefix, sizeof(prefix), "refs/heads/%s/", dataset);
	if ((rc = du_collect(m, prefix, false, out, &cap)) < 0)
		goto cleanup;
	if (out->count == 0) {
		rc = kiln_error_set(KILN_ENOTFOUND, "du: manifest %s has no branch or tag of dataset %s",
		                    kiln_manifest_path(m), dataset);
		goto cleanup;
	}
	qsort(out->rows, out->count, sizeof(*out->rows), row_cmp);
	if ((rc = reader_init(&r, m)) < 0)
		goto cleanup;
	for (size_t i = 0; i < out->count; i++) {
		splits_walk w = {.r = &r,
		                 .cache = &cache,
		                 .recs = &recs,
		                 .nrecs = &nrecs,
		                 .caprecs = &caprecs,
		                 .fn = du_line,
		                 .ctx = &d};
		git_oid id;

		d.row = &out->rows[i];
		d.index = (uint32_t)i + 1;
		if (git_oid_fromstr(&id, d.row->commit) < 0 || (rc = walk_commit(&w, &id)) < 0)
			goto cleanup;
	}
	for (size_t i = 0; i < d.table.cap; i++) {
		const shard_slot *s = &d.table.v[i];

		if (!s->used)
			continue;
		out->shards++;
		out->bytes += s->bytes;
		if (s->versions == 1) {
			out->rows[s->last - 1].unique_shards++;
			out->rows[s->last - 1].unique_bytes += s->bytes;
		}
	}
	rc = 0;
cleanup:
	if (rc < 0)
		kiln_du_report_free(out);
	free(recs);
	oid_map_free(&cache);
	shard_table_free(&d.table);
	reader_free(&r);
	return rc;
}

void kiln_du_report_free(kiln_du_report *report)
{
	if (!report)
		return;
	free(report->rows);
	memset(report, 0, sizeof(*report));
}
