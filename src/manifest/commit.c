/* The commit path of the manifest (see manifest.h): renders a snapshot into
 * the files of a dataset commit (dataset.json, splits/<split>/<hh>.jsonl
 * merged with the tip's, lineage.json, stats.json), writes the commit, signed
 * when a key is given, and moves the branch with a compare-and-swap. Owns
 * nothing beyond one call. */
#include "core/units.h"
#include "manifest/manifest.h"
#include "manifest/format.h"
#include "manifest/internal.h"

#include <git2.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "manifest/replayed.h"
#include "manifest/repo_lock.h"
#include "manifest/sshsig.h"
#include "quality/profile.h"
#include "shard/filter.h"

#define HASH_LEN 64

/* The expected old value "no such ref": libgit2 checks it under the ref's
 * lock, so of two writers creating one ref only one wins (a plain create
 * checks before locking and could let the second overwrite the first). */
static const git_oid absent = {{0}};

/* ---- text buffer ----------------------------------------------------------- */

/* kiln_buf with a sticky out-of-memory flag, so rendering code appends
 * without checking each call and checks once at the end (buf_check). The
 * text stays NUL-terminated. */
typedef struct buf {
	kiln_buf k;
	bool oom;
} buf;

static void buf_put(buf *b, const char *s, size_t n)
{
	if (!b->oom && (kiln_buf_put(&b->k, s, n) < 0 || kiln_buf_reserve(&b->k, 1) < 0))
		b->oom = true;
	if (!b->oom)
		b->k.ptr[b->k.len] = '\0';
}

static void buf_puts(buf *b, const char *s)
{
	buf_put(b, s, strlen(s));
}

static void buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(buf *b, const char *fmt, ...)
{
	char small[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(small)) {
		buf_put(b, small, (size_t)n);
		return;
	}
	if (n < 0 || b->oom || kiln_buf_reserve(&b->k, (size_t)n + 1) < 0) {
		b->oom = true;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(b->k.ptr + b->k.len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->k.len += (size_t)n;
}

static void buf_free(buf *b)
{
	kiln_buf_free(&b->k);
	b->oom = false;
}

static int buf_check(const buf *b)
{
	return b->oom ? kiln_error_set(KILN_ENOMEM, "manifest: out of memory") : 0;
}

/* ---- stats.json ----------------------------------------------------------- */

static int add_u64(uint64_t *acc, uint64_t v, const char *field)
{
	if (*acc > UINT64_MAX - v)
		return kiln_error_set(KILN_EINVALID, "manifest: stats.json %s would overflow", field);
	*acc += v;
	return 0;
}

static int stats_add(kiln_stats *acc, const kiln_stats *d)
{
	int rc = 0;

	rc |= add_u64(&acc->records_in, d->records_in, "records_in");
	rc |= add_u64(&acc->valid, d->valid, "valid");
	rc |= add_u64(&acc->quarantined, d->quarantined, "quarantined");
	rc |= add_u64(&acc->erased, d->erased, "erased");
	for (int c = 0; c < KILN_REJECT_COUNT_; c++)
		rc |= add_u64(&acc->quarantined_by_code[c], d->quarantined_by_code[c], "quarantined_by_code");
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		rc |= add_u64(&acc->splits[s].records, d->splits[s].records, "splits records");
		rc |= add_u64(&acc->splits[s].shards, d->splits[s].shards, "splits shards");
		rc |= add_u64(&acc->splits[s].bytes, d->splits[s].bytes, "splits bytes");
		rc |= add_u64(&acc->splits[s].raw_bytes, d->splits[s].raw_bytes, "splits raw_bytes");
	}
	return rc ? KILN_EINVALID : 0;
}

/* ---- shard lines ---------------------------------------------------------- */

typedef struct shard_line {
	const char *hash; /* HASH_LEN hex, not NUL-terminated for existing lines */
	const char *text; /* without the newline */
	size_t len;
	size_t seq; /* existing lines first, then new ones in order */
	bool is_new;
} shard_line;

static int shard_line_cmp(const void *a, const void *b)
{
	const shard_line *x = a, *y = b;
	int c = memcmp(x->hash, y->hash, HASH_LEN);

	if (c)
		return c;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static int shard_ptr_cmp(const void *a, const void *b)
{
	const kiln_shard_entry *x = *(const kiln_shard_entry *const *)a,
	                       *y = *(const kiln_shard_entry *const *)b;

	return strcmp(x->hash, y->hash);
}

/* Writes the merged blob for the new shards group[0..n) (all with the same
 * first two hex digits) into the split's tree builder. */
static int merge_hh(kiln_manifest *m, kiln_json_scanner *scanner, const char *ref, const char *split_name,
                    git_treebuilder *split_bld, const kiln_shard_entry *const *group, size_t n)
{
	char hh[3] = {group[0]->hash[0], group[0]->hash[1], '\0'};
	char name[16], file[64], w[KILN_MANIFEST_WHERE_CAP];
	const git_tree_entry *entry;
	git_blob *blob = NULL;
	shard_line *lines = NULL;
	buf *rendered = NULL;
	size_t count = 0, cap = n;
	buf out = {0};
	git_oid id;
	int rc, gerr;

	snprintf(name, sizeof(name), "%s.jsonl", hh);
	snprintf(file, sizeof(file), "splits/%s/%s", split_name, name);
	entry = git_treebuilder_get(split_bld, name);
	if (entry) {
		if (git_tree_entry_type(entry) != GIT_OBJECT_BLOB)
			return kiln_error_set(KILN_EINVALID, "manifest %s: %s:%s is not a file",
			                      kiln_manifest_path(m), ref, file);
		gerr = git_blob_lookup(&blob, kiln_manifest_repo(m), git_tree_entry_id(entry));
		if (gerr < 0)
			return kiln_manifest_git_fail(m, gerr, file);
		for (const char *p = git_blob_rawcontent(blob), *end = p + git_blob_rawsize(blob); p < end;
		     p++)
			cap += *p == '\n';
		cap++;
	}
	lines = calloc(cap, sizeof(*lines));
	rendered = calloc(n, sizeof(*rendered));
	if (!lines || !rendered) {
		rc = kiln_error_set(KILN_ENOMEM, "manifest: out of memory");
		goto cleanup;
	}
	if (blob) {
		const char *p = git_blob_rawcontent(blob), *end = p + git_blob_rawsize(blob);

		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
			shard_line *l = &lines[count];

			rc = kiln_mfmt_shard_line_hash(scanner, kiln_manifest_where(w, ref, file), p, len, hh,
			                               &l->hash);
			if (rc < 0)
				goto cleanup;
			l->text = p;
			l->len = len;
			l->seq = count++;
			p += len + (nl != NULL);
		}
	}
	for (size_t i = 0; i < n; i++) {
		shard_line *l = &lines[count];

		if ((rc = kiln_mfmt_shard_line_render(&rendered[i].k, group[i])) < 0)
			goto cleanup;
		if (kiln_json_check(scanner, rendered[i].k.ptr, rendered[i].k.len) != KILN_REJECT_NONE) {
			rc = kiln_error_set(KILN_EINVALID,
			                    "manifest: a source topic of a %s shard is not valid UTF-8",
			                    split_name);
			goto cleanup;
		}
		l->hash = group[i]->hash;
		l->text = rendered[i].k.ptr;
		l->len = rendered[i].k.len;
		l->seq = count++;
		l->is_new = true;
	}
	qsort(lines, count, sizeof(*lines), shard_line_cmp);
	for (size_t i = 0; i < count; i++) {
		if (i > 0 && memcmp(lines[i].hash, lines[i - 1].hash, HASH_LEN) == 0)
			continue; /* same bytes, same shard: the first line stays */
		buf_put(&out, lines[i].text, lines[i].len);
		buf_put(&out, "\n", 1);
	}
	if ((rc = buf_check(&out)) < 0)
		goto cleanup;
	gerr = git_blob_create_from_buffer(&id, kiln_manifest_repo(m), out.k.ptr, out.k.len);
	if (gerr == 0)
		gerr = git_treebuilder_insert(NULL, split_bld, name, &id, GIT_FILEMODE_BLOB);
	rc = gerr < 0 ? kiln_manifest_git_fail(m, gerr, file) : 0;
cleanup:
	if (rendered)
		for (size_t i = 0; i < n; i++)
			buf_free(&rendered[i]);
	free(rendered);
	free(lines);
	buf_free(&out);
	git_blob_free(blob);
	return rc;
}

/* A tree builder over the subtree `name` of parent (empty when absent). */
static int sub_builder(kiln_manifest *m, git_treebuilder *parent, const char *name, const char *ref,
                       const char *path, git_treebuilder **out)
{
	const git_tree_entry *entry = parent ? git_treebuilder_get(parent, name) : NULL;
	git_tree *tree = NULL;
	int gerr;

	*out = NULL;
	if (entry) {
		if (git_tree_entry_type(entry) != GIT_OBJECT_TREE)
			return kiln_error_set(KILN_EINVALID, "manifest %s: %s:%s is not a folder",
			                      kiln_manifest_path(m), ref, path);
		gerr = git_tree_lookup(&tree, kiln_manifest_repo(m), git_tree_entry_id(entry));
		if (gerr < 0)
			return kiln_manifest_git_fail(m, gerr, path);
	}
	gerr = git_treebuilder_new(out, kiln_manifest_repo(m), tree);
	git_tree_free(tree);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, path) : 0;
}

/* Writes bld as a tree and inserts it into parent as `name`. */
static int insert_subtree(kiln_manifest *m, git_treebuilder *parent, const char *name, git_treebuilder *bld,
                          const char *path)
{
	git_oid id;
	int gerr = git_treebuilder_write(&id, bld);

	if (gerr == 0)
		gerr = git_treebuilder_insert(NULL, parent, name, &id, GIT_FILEMODE_TREE);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, path) : 0;
}

static int write_splits(kiln_manifest *m, kiln_json_scanner *scanner, const char *ref,
                        const kiln_snapshot *snap, git_treebuilder *root)
{
	git_treebuilder *splits = NULL, *split_bld = NULL;
	const kiln_shard_entry **sorted = NULL;
	size_t total = 0;
	int rc;

	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		total += snap->shard_count[s];
	if (total == 0)
		return 0;
	if ((rc = sub_builder(m, root, "splits", ref, "splits", &splits)) < 0)
		goto cleanup;
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		const char *split_name = kiln_split_name((kiln_split)s);
		size_t n = snap->shard_count[s];
		char path[32];

		if (n == 0)
			continue;
		snprintf(path, sizeof(path), "splits/%s", split_name);
		free(sorted);
		sorted = malloc(n * sizeof(*sorted));
		if (!sorted) {
			rc = kiln_error_set(KILN_ENOMEM, "manifest: out of memory");
			goto cleanup;
		}
		for (size_t i = 0; i < n; i++)
			sorted[i] = &snap->shards[s][i];
		qsort(sorted, n, sizeof(*sorted), shard_ptr_cmp);
		if ((rc = sub_builder(m, splits, split_name, ref, path, &split_bld)) < 0)
			goto cleanup;
		for (size_t i = 0, j; i < n; i = j) {
			for (j = i + 1; j < n && memcmp(sorted[j]->hash, sorted[i]->hash, 2) == 0; j++)
				;
			if ((rc = merge_hh(m, scanner, ref, split_name, split_bld, sorted + i, j - i)) < 0)
				goto cleanup;
		}
		if ((rc = insert_subtree(m, splits, split_name, split_bld, path)) < 0)
			goto cleanup;
		git_treebuilder_free(split_bld);
		split_bld = NULL;
	}
	rc = insert_subtree(m, root, "splits", splits, "splits");
cleanup:
	free(sorted);
	git_treebuilder_free(split_bld);
	git_treebuilder_free(splits);
	return rc;
}

/* ---- the commit message --------------------------------------------------- */

static const char *plural(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static void buf_size(buf *b, uint64_t bytes)
{
	char text[32];

	kiln_size_human(text, sizeof(text), bytes, true);
	buf_printf(b, "%s", text);
}

/* A name for a commit message: control characters become '?'. */
static void buf_plain(buf *b, const char *s)
{
	for (; *s; s++)
		buf_put(b, (unsigned char)*s < 0x20 || *s == 0x7f ? "?" : s, 1);
}

static void render_message(buf *b, const kiln_snapshot *snap, const kiln_mfmt_lineage *before)
{
	const kiln_stats *d = &snap->delta;
	uint64_t shards = 0;
	int order[KILN_REJECT_COUNT_], nq = 0;

	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		shards += d->splits[s].shards;
	if (snap->replayed)
		buf_printf(b, "%s: %" PRIu64 " %s replayed from the quarantine, %" PRIu64 " %s\n\n",
		           snap->dataset, d->valid, plural(d->valid, "record", "records"), shards,
		           plural(shards, "shard", "shards"));
	else
		buf_printf(
		    b, "%s: +%" PRIu64 " %s (%" PRIu64 " valid, %" PRIu64 " quarantined), %" PRIu64 " %s\n\n",
		    snap->dataset, d->records_in, plural(d->records_in, "record", "records"), d->valid,
		    d->quarantined, shards, plural(shards, "shard", "shards"));
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		const kiln_split_stats *p = &d->splits[s];

		if (!p->records && !p->shards && !snap->shard_count[s])
			continue;
		buf_printf(b, "%s: +%" PRIu64 " %s in %" PRIu64 " %s (", kiln_split_name((kiln_split)s),
		           p->records, plural(p->records, "record", "records"), p->shards,
		           plural(p->shards, "shard", "shards"));
		buf_size(b, p->bytes);
		buf_puts(b, ")\n");
	}
	/* quarantine codes, largest count first, ties in code order */
	for (int c = 1; c < KILN_REJECT_COUNT_; c++) {
		int k;

		if (!d->quarantined_by_code[c])
			continue;
		for (k = nq; k > 0 && d->quarantined_by_code[order[k - 1]] < d->quarantined_by_code[c]; k--)
			order[k] = order[k - 1];
		order[k] = c;
		nq++;
	}
	if (nq > 0) {
		buf_puts(b, "quarantined: ");
		for (int k = 0; k < nq; k++)
			buf_printf(b, "%s%s %" PRIu64, k ? ", " : "", kiln_reject_name((kiln_reject)order[k]),
			           d->quarantined_by_code[order[k]]);
		buf_puts(b, "\n");
	} else if (d->quarantined) {
		buf_printf(b, "quarantined: %" PRIu64 "\n", d->quarantined);
	}
	if (snap->lineage_count == 0)
		return;
	buf_puts(b, "sources: ");
	for (size_t i = 0; i < snap->lineage_count; i++) {
		const kiln_lineage_entry *e = &snap->lineage[i];
		ptrdiff_t old = kiln_mfmt_lineage_find(before, e->source, e->topic, e->partition);
		bool known = old >= 0, found = false;
		int64_t start = known ? before->v[old].next : 0;

		/* a new partition starts at its first shard source, if any */
		for (int s = 0; old < 0 && s < KILN_SPLIT_COUNT; s++)
			for (size_t j = 0; j < snap->shard_count[s]; j++)
				for (size_t k = 0; k < snap->shards[s][j].source_count; k++) {
					const kiln_source_range *r = &snap->shards[s][j].sources[k];

					if (r->partition != e->partition || strcmp(r->topic, e->topic) != 0)
						continue;
					if (!found || r->first < start)
						start = r->first;
					found = known = true;
				}
		buf_puts(b, i ? ", " : "");
		buf_plain(b, e->topic);
		buf_printf(b, "/%" PRId32 " ", e->partition);
		if (known && start < e->next)
			buf_printf(b, "%" PRId64 "-%" PRId64, start, e->next - 1);
		else if (known)
			buf_printf(b, "next %" PRId64 " (no new offsets)", e->next);
		else
			buf_printf(b, "next %" PRId64, e->next);
	}
	buf_puts(b, "\n");
}

/* ---- signed commits and tags ---------------------------------------------- */

/* Writes the commit with an SSH signature over its bytes in the gpgsig
 * header (git writes each armour line after a space, no empty last line). */
static int create_signed_commit(kiln_manifest *m, git_oid *out, const git_signature *sig, const char *message,
                                const git_tree *tree, const git_commit *parent, const kiln_signing_key *key)
{
	const git_commit *parents[1] = {parent};
	git_buf content = GIT_BUF_INIT;
	kiln_buf armour = KILN_BUF_INIT(0);
	int rc, gerr;

	gerr = git_commit_create_buffer(&content, kiln_manifest_repo(m), sig, sig, NULL, message, tree,
	                                parent ? 1 : 0, parents);
	if (gerr < 0)
		return kiln_manifest_git_fail(m, gerr, "creating the commit");
	if ((rc = kiln_sshsig_sign(key, "git", content.ptr, content.size, &armour)) < 0)
		goto cleanup;
	armour.ptr[armour.len - 1] = '\0';
	gerr =
	    git_commit_create_with_signature(out, kiln_manifest_repo(m), content.ptr, armour.ptr, "gpgsig");
	rc = gerr < 0 ? kiln_manifest_git_fail(m, gerr, "creating the signed commit") : 0;
cleanup:
	git_buf_dispose(&content);
	kiln_buf_free(&armour);
	return rc;
}

/* ---- commit --------------------------------------------------------------- */

static int check_snapshot(const kiln_snapshot *snap)
{
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		if (snap->shard_count[s] && !snap->shards[s])
			return kiln_error_set(KILN_EINVALID, "manifest: %s shards missing",
			                      kiln_split_name((kiln_split)s));
		for (size_t i = 0; i < snap->shard_count[s]; i++) {
			const kiln_shard_entry *e = &snap->shards[s][i];

			if (!kiln_manifest_hash_valid(e->hash))
				return kiln_error_set(
				    KILN_EINVALID,
				    "manifest: a %s shard hash is not 64 lower-case hex digits",
				    kiln_split_name((kiln_split)s));
			if (e->source_count && !e->sources)
				return kiln_error_set(KILN_EINVALID,
				                      "manifest: a %s shard's sources are missing",
				                      kiln_split_name((kiln_split)s));
			for (size_t k = 0; k < e->source_count; k++)
				if (!e->sources[k].topic)
					return kiln_error_set(KILN_EINVALID,
					                      "manifest: a %s shard source has no topic",
					                      kiln_split_name((kiln_split)s));
		}
	}
	if (snap->lineage_count && !snap->lineage)
		return kiln_error_set(KILN_EINVALID, "manifest: lineage entries missing");
	for (size_t i = 0; i < snap->lineage_count; i++) {
		const kiln_lineage_entry *e = &snap->lineage[i];

		if (!e->topic)
			return kiln_error_set(KILN_EINVALID, "manifest: a lineage entry has no topic");
		if (e->path && !kiln_manifest_hash_valid(e->prefix_blake2b))
			return kiln_error_set(
			    KILN_EINVALID,
			    "manifest: lineage prefix_blake2b must be 64 lower-case hex digits");
		for (size_t j = 0; j < i; j++)
			if (snap->lineage[j].partition == e->partition &&
			    strcmp(snap->lineage[j].topic, e->topic) == 0)
				return kiln_error_set(
				    KILN_EINVALID,
				    "manifest: two lineage entries for one topic and partition");
	}
	return 0;
}

/* A blob already in the objects (a filter the shard writer's thread wrote
 * ahead, kiln_manifest_blob_ahead) is only hashed: libgit2 would compress
 * it again before finding it there. */
static int insert_blob(kiln_manifest *m, git_treebuilder *bld, const char *name, const char *data, size_t len)
{
	git_oid id;
	git_odb *odb = NULL;
	int gerr = git_odb_hash(&id, data, len, GIT_OBJECT_BLOB);

	if (gerr == 0 && git_repository_odb(&odb, kiln_manifest_repo(m)) == 0 && git_odb_exists(odb, &id))
		gerr = 0;
	else if (gerr == 0)
		gerr = git_blob_create_from_buffer(&id, kiln_manifest_repo(m), data, len);
	git_odb_free(odb);

	if (gerr == 0)
		gerr = git_treebuilder_insert(NULL, bld, name, &id, GIT_FILEMODE_BLOB);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, name) : 0;
}

/* filters/<hh>/<hash>.bloom for every new shard that has a filter
 * (shard/filter.h): one blob per shard under a fan-out by the hash's first
 * two digits, so a commit rewrites only the <hh> trees of its new shards
 * (small trees, local diffs) and a filter, named by its shard, is shared by
 * every version listing that shard. */
static int write_filters(kiln_manifest *m, const char *ref, const kiln_snapshot *snap, git_treebuilder *root)
{
	git_treebuilder *filters = NULL, *hh_bld = NULL;
	const kiln_shard_entry **sorted = NULL;
	size_t n = 0;
	int rc = 0;

	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		for (size_t i = 0; i < snap->shard_count[s]; i++)
			n += snap->shards[s][i].filter != NULL;
	if (n == 0)
		return 0;
	if (!(sorted = malloc(n * sizeof(*sorted))))
		return kiln_error_set(KILN_ENOMEM, "manifest: out of memory");
	n = 0;
	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		for (size_t i = 0; i < snap->shard_count[s]; i++)
			if (snap->shards[s][i].filter)
				sorted[n++] = &snap->shards[s][i];
	qsort(sorted, n, sizeof(*sorted), shard_ptr_cmp);
	if ((rc = sub_builder(m, root, KILN_FILTER_DIR, ref, KILN_FILTER_DIR, &filters)) < 0)
		goto cleanup;
	for (size_t i = 0, j; i < n; i = j) {
		char hh[3] = {sorted[i]->hash[0], sorted[i]->hash[1], '\0'}, path[16], name[80];

		snprintf(path, sizeof(path), "%s/%s", KILN_FILTER_DIR, hh);
		if ((rc = sub_builder(m, filters, hh, ref, path, &hh_bld)) < 0)
			goto cleanup;
		for (j = i; j < n && memcmp(sorted[j]->hash, sorted[i]->hash, 2) == 0; j++) {
			snprintf(name, sizeof(name), "%s%s", sorted[j]->hash, KILN_FILTER_EXTENSION);
			if ((rc = insert_blob(m, hh_bld, name, (const char *)sorted[j]->filter,
			                      sorted[j]->filter_len)) < 0)
				goto cleanup;
		}
		if ((rc = insert_subtree(m, filters, hh, hh_bld, path)) < 0)
			goto cleanup;
		git_treebuilder_free(hh_bld);
		hh_bld = NULL;
	}
	rc = insert_subtree(m, root, KILN_FILTER_DIR, filters, KILN_FILTER_DIR);
cleanup:
	free(sorted);
	git_treebuilder_free(hh_bld);
	git_treebuilder_free(filters);
	return rc;
}

/* The branch's lock file exists. A writer holds a ref lock for the moment
 * of one rename, so a young lock is a peer committing now (KILN_ERETRY: try
 * again). One older than KILN_MANIFEST_STALE_LOCK_S was left by a process
 * killed inside its ref update; like git, kiln never breaks it by itself (a
 * stopped, not dead, writer could still rename it over a newer tip), and
 * says which file to remove. */
static int ref_locked(kiln_manifest *m, const char *ref)
{
	char lock[KILN_MANIFEST_REF_CAP + 4096];
	struct stat st;
	time_t now = time(NULL);

	snprintf(lock, sizeof(lock), "%s%s.lock", git_repository_path(kiln_manifest_repo(m)), ref);
	if (stat(lock, &st) < 0)
		return kiln_error_set(KILN_ERETRY, "manifest %s: %s is being updated by another writer",
		                      kiln_manifest_path(m), ref);
	if (now - st.st_mtime < KILN_MANIFEST_STALE_LOCK_S)
		return kiln_error_set(KILN_ERETRY, "manifest %s: %s is locked by another writer (%s)",
		                      kiln_manifest_path(m), ref, lock);
	return kiln_error_set(
	    KILN_EIO,
	    "manifest %s: %s is locked by %s, %lld s old: a process was killed while updating it; "
	    "if no kiln or git process is writing this repository, remove that file",
	    kiln_manifest_path(m), ref, lock, (long long)(now - st.st_mtime));
}

/* dataset.json: the snapshot's text, with a final newline. */
static int write_dataset_json(kiln_manifest *m, git_treebuilder *root, const kiln_snapshot *snap, buf *text)
{
	int rc;

	text->k.len = 0;
	buf_puts(text, snap->dataset_json);
	if (text->k.len == 0 || text->k.ptr[text->k.len - 1] != '\n')
		buf_put(text, "\n", 1);
	if ((rc = buf_check(text)) < 0)
		return rc;
	return insert_blob(m, root, "dataset.json", text->k.ptr, text->k.len);
}

/* lineage.json: the tip's entries (into *before, for the message) with the
 * snapshot's over them. A fenced entry commits only where the tip's offset
 * is the one its writer expected (KILN_EFENCED otherwise). */
static int write_lineage(kiln_manifest *m, kiln_json_scanner *scanner, const char *ref, git_tree *tip_tree,
                         const kiln_snapshot *snap, git_treebuilder *root, buf *text,
                         kiln_mfmt_lineage *before)
{
	kiln_mfmt_lineage merged = {0};
	int rc;

	if ((rc = kiln_manifest_load_lineage(m, scanner, tip_tree, ref, before)) < 0)
		goto cleanup;
	for (size_t i = 0; i < before->n; i++)
		if ((rc = kiln_mfmt_lineage_push(&merged, &before->v[i], false)) < 0)
			goto cleanup;
	for (size_t i = 0; i < snap->lineage_count; i++) {
		const kiln_lineage_entry *e = &snap->lineage[i];
		const char *wrong = kiln_mfmt_lineage_source_wrong(e);
		ptrdiff_t was;
		int64_t now;

		if (wrong) {
			rc = kiln_error_set(KILN_EINVALID, "manifest: %s: lineage entry %s/%" PRId32 ": %s",
			                    ref, e->topic, e->partition, wrong);
			goto cleanup;
		}
		was = kiln_mfmt_lineage_find(before, e->source, e->topic, e->partition);
		now = was >= 0 ? before->v[was].next : -1;
		if (e->fenced && now != e->expect_next) {
			rc = kiln_error_set(KILN_EFENCED,
			                    "manifest: %s: %s:%s/%" PRId32 " moved to %" PRId64
			                    " (expected %" PRId64
			                    "): another writer committed those offsets first",
			                    ref, e->source, e->topic, e->partition, now, e->expect_next);
			goto cleanup;
		}
	}
	for (size_t i = 0; i < snap->lineage_count; i++) {
		ptrdiff_t at = kiln_mfmt_lineage_find(&merged, snap->lineage[i].source,
		                                      snap->lineage[i].topic, snap->lineage[i].partition);

		if (at >= 0)
			merged.v[at] = snap->lineage[i];
		else if ((rc = kiln_mfmt_lineage_push(&merged, &snap->lineage[i], false)) < 0)
			goto cleanup;
	}
	kiln_mfmt_lineage_sort(&merged);
	text->k.len = 0;
	if ((rc = kiln_mfmt_lineage_render(&text->k, &merged)) < 0)
		goto cleanup;
	if (kiln_json_check(scanner, text->k.ptr, text->k.len) != KILN_REJECT_NONE) {
		rc = kiln_error_set(KILN_EINVALID, "manifest: %s: a lineage topic or path is not valid UTF-8",
		                    ref);
		goto cleanup;
	}
	rc = insert_blob(m, root, "lineage.json", text->k.ptr, text->k.len);
cleanup:
	kiln_mfmt_lineage_free(&merged);
	return rc;
}

/* stats.json: the tip's totals plus the snapshot's delta. */
static int write_stats(kiln_manifest *m, kiln_json_scanner *scanner, const char *ref, git_tree *tip_tree,
                       const kiln_snapshot *snap, git_treebuilder *root, buf *text)
{
	kiln_stats stats;
	int rc;

	if ((rc = kiln_manifest_load_stats(m, scanner, tip_tree, ref, &stats)) < 0)
		return rc;
	if ((rc = stats_add(&stats, &snap->delta)) < 0)
		return rc;
	for (int c = 0; c < KILN_REJECT_COUNT_; c++) {
		uint64_t n = snap->unquarantined[c];

		if (stats.quarantined_by_code[c] < n || stats.quarantined < n)
			return kiln_error_set(
			    KILN_EINVALID,
			    "manifest: %s: stats.json holds fewer quarantined %s records than "
			    "the quarantine replay takes",
			    ref, kiln_reject_name((kiln_reject)c));
		stats.quarantined_by_code[c] -= n;
		stats.quarantined -= n;
	}
	text->k.len = 0;
	if ((rc = kiln_mfmt_stats_render(&text->k, &stats)) < 0)
		return rc;
	return insert_blob(m, root, "stats.json", text->k.ptr, text->k.len);
}

/* quarantine-replayed.json: the tip's list with the snapshot's offsets
 * added; none of them may be listed already (another replay took it). */
static int write_replayed(kiln_manifest *m, const char *ref, git_tree *tip_tree, const kiln_snapshot *snap,
                          git_treebuilder *root, buf *text)
{
	kiln_replayed list;
	bool overlap = false;
	int rc;

	if (!snap->replayed)
		return 0;
	if ((rc = kiln_manifest_load_replayed(m, tip_tree, ref, &list)) < 0)
		return rc;
	if ((rc = kiln_replayed_merge(&list, snap->replayed, &overlap)) < 0)
		goto done;
	if (overlap) {
		rc = kiln_error_set(KILN_EFENCED,
		                    "manifest: %s: another quarantine replay committed some of these records "
		                    "first",
		                    ref);
		goto done;
	}
	text->k.len = 0;
	if ((rc = kiln_replayed_render(&text->k, &list)) < 0)
		goto done;
	rc = insert_blob(m, root, KILN_REPLAYED_FILE, text->k.ptr, text->k.len);
done:
	kiln_replayed_free(&list);
	return rc;
}

/* profile.json: the tip's total merged with what the snapshot added, and
 * that addition. Without a profile in the snapshot (profiling off) the
 * commit has no profile.json, even when its parent had one: a total that
 * left out the commit's records would pass for the whole version. */
static int write_profile(kiln_manifest *m, const char *ref, git_tree *tip_tree, const kiln_snapshot *snap,
                         git_treebuilder *root, buf *text)
{
	kiln_profile total;
	int rc;

	if (!snap->profile) {
		if (git_treebuilder_get(root, "profile.json") &&
		    git_treebuilder_remove(root, "profile.json") < 0)
			return kiln_manifest_git_fail(m, -1, ref);
		return 0;
	}
	if ((rc = kiln_manifest_load_profile(m, tip_tree, ref, &total)) < 0)
		return rc;
	if ((rc = kiln_profile_merge(&total, snap->profile)) < 0)
		goto done;
	text->k.len = 0;
	if ((rc = kiln_profile_render_file(&text->k, &total, snap->profile)) < 0)
		goto done;
	rc = insert_blob(m, root, "profile.json", text->k.ptr, text->k.len);
done:
	kiln_profile_free(&total);
	return rc;
}

/* The commit of root's tree on parent (NULL for a first commit), signed
 * when the snapshot has a key; its message is left in *msg. */
static int create_commit(kiln_manifest *m, const kiln_snapshot *snap, git_treebuilder *root,
                         const git_commit *parent, const kiln_mfmt_lineage *before, buf *msg, git_oid *out)
{
	git_oid tree_id;
	git_tree *tree = NULL;
	git_signature *sig = NULL;
	int rc, gerr;

	if ((gerr = git_treebuilder_write(&tree_id, root)) < 0 ||
	    (gerr = git_tree_lookup(&tree, kiln_manifest_repo(m), &tree_id)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "writing the tree");
		goto cleanup;
	}
	gerr = git_signature_now(&sig, snap->author_name ? snap->author_name : "kiln",
	                         snap->author_email ? snap->author_email : "kiln@localhost");
	if (gerr < 0) {
		rc = kiln_error_set(KILN_EINVALID, "manifest: author: %s", kiln_manifest_git_message());
		goto cleanup;
	}
	render_message(msg, snap, before);
	if ((rc = buf_check(msg)) < 0)
		goto cleanup;
	if (snap->signing_key) {
		rc = create_signed_commit(m, out, sig, msg->k.ptr, tree, parent, snap->signing_key);
	} else {
		const git_commit *parents[1] = {parent};

		gerr = git_commit_create(out, kiln_manifest_repo(m), NULL, sig, sig, NULL, msg->k.ptr, tree,
		                         parent ? 1 : 0, parents);
		rc = gerr < 0 ? kiln_manifest_git_fail(m, gerr, "creating the commit") : 0;
	}
cleanup:
	git_signature_free(sig);
	git_tree_free(tree);
	return rc;
}

/* The compare-and-swap: ref moves from tip_id (or from "no such ref" when
 * !have_tip) to commit_id, with reflog_msg; KILN_EMODIFIED when another
 * writer moved it first, ref_locked's answer when its lock is held. */
static int move_branch(kiln_manifest *m, const char *ref, bool have_tip, const git_oid *tip_id,
                       const git_oid *commit_id, const char *reflog_msg)
{
	git_reference *moved = NULL;
	int lock, gerr, rc;

	/* shared with other commits; an erasure that keeps losing to them
	 * holds it exclusively for its last attempts (repo_lock.h) */
	if ((rc = kiln_manifest_lock(m, KILN_REFS_LOCK, false, true, &lock)) < 0)
		return rc;
	gerr = git_reference_create_matching(&moved, kiln_manifest_repo(m), ref, commit_id, 1,
	                                     have_tip ? tip_id : &absent, reflog_msg);
	kiln_manifest_unlock(lock);
	git_reference_free(moved);
	if (gerr == GIT_EMODIFIED || gerr == GIT_EEXISTS)
		return kiln_error_set(KILN_EMODIFIED, "manifest %s: %s moved since it was read",
		                      kiln_manifest_path(m), ref);
	if (gerr == GIT_ELOCKED)
		return ref_locked(m, ref);
	if (gerr < 0)
		return kiln_manifest_git_fail(m, gerr, ref);
	return 0;
}

int kiln_manifest_commit(kiln_manifest *m, const kiln_snapshot *snap, char out_commit[41])
{
	char ref[KILN_MANIFEST_REF_CAP];
	git_oid tip_id, commit_id;
	bool have_tip = false;
	git_tree *tip_tree = NULL;
	git_commit *parent = NULL;
	git_treebuilder *root = NULL;
	kiln_json_scanner *scanner = NULL;
	kiln_mfmt_lineage before = {0};
	buf text = {0}, msg = {0};
	char *nl;
	int rc, gerr;

	out_commit[0] = '\0';
	if ((rc = kiln_manifest_branch_ref(ref, sizeof(ref), snap->dataset, snap->branch)) < 0)
		return rc;
	if (!snap->dataset_json)
		return kiln_error_set(KILN_EINVALID, "manifest: %s: dataset.json text missing", ref);
	if ((rc = check_snapshot(snap)) < 0)
		return rc;
	scanner = kiln_json_scanner_new(NULL);
	if (!scanner) {
		rc = kiln_error_set(KILN_ENOMEM, "manifest: out of memory");
		goto cleanup;
	}
	if (kiln_json_check(scanner, snap->dataset_json, strlen(snap->dataset_json)) != KILN_REJECT_NONE) {
		rc = kiln_error_set(KILN_EINVALID, "manifest: %s: dataset.json text is not valid JSON", ref);
		goto cleanup;
	}

	if ((rc = kiln_manifest_read_tip(m, ref, &tip_id, &have_tip, &tip_tree)) < 0)
		goto cleanup;
	if (have_tip && (gerr = git_commit_lookup(&parent, kiln_manifest_repo(m), &tip_id)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, ref);
		goto cleanup;
	}
	if ((gerr = git_treebuilder_new(&root, kiln_manifest_repo(m), tip_tree)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, ref);
		goto cleanup;
	}

	/* dataset.json, splits/<split>/<hh>.jsonl, filters/<hh>/<hash>.bloom,
	 * lineage.json, quarantine-replayed.json, stats.json, profile.json,
	 * dedup/ */
	if ((rc = write_dataset_json(m, root, snap, &text)) < 0 ||
	    (rc = write_splits(m, scanner, ref, snap, root)) < 0 ||
	    (rc = write_filters(m, ref, snap, root)) < 0 ||
	    (rc = write_lineage(m, scanner, ref, tip_tree, snap, root, &text, &before)) < 0 ||
	    (rc = write_replayed(m, ref, tip_tree, snap, root, &text)) < 0 ||
	    (rc = write_stats(m, scanner, ref, tip_tree, snap, root, &text)) < 0 ||
	    (rc = write_profile(m, ref, tip_tree, snap, root, &text)) < 0 ||
	    (rc = kiln_manifest_write_dedup(m, ref, have_tip ? &tip_id : NULL, tip_tree, snap, root)) < 0 ||
	    (snap->contract_text &&
	     (rc = insert_blob(m, root, "contract.yaml", snap->contract_text, snap->contract_len)) < 0))
		goto cleanup;

	/* the commit, then the compare-and-swap on the branch with the first
	 * line of the message as the reflog entry */
	if ((rc = create_commit(m, snap, root, parent, &before, &msg, &commit_id)) < 0)
		goto cleanup;
	if ((nl = strchr(msg.k.ptr, '\n')))
		*nl = '\0';
	if ((rc = move_branch(m, ref, have_tip, &tip_id, &commit_id, msg.k.ptr)) < 0)
		goto cleanup;
	git_oid_tostr(out_commit, 41, &commit_id);
	/* a new repository's HEAD names an unborn master: point it at the first
	 * dataset branch so a plain `git log` shows something */
	if (git_repository_head_unborn(kiln_manifest_repo(m)) == 1)
		git_repository_set_head(kiln_manifest_repo(m), ref);
	rc = 0;
cleanup:
	git_treebuilder_free(root);
	git_commit_free(parent);
	git_tree_free(tip_tree);
	kiln_mfmt_lineage_free(&before);
	kiln_json_scanner_free(scanner);
	buf_free(&text);
	buf_free(&msg);
	return rc;
}
