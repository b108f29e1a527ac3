/* Reading dataset versions (see version.h): "ds@ref" resolution through
 * branches, tags (an annotated tag object must carry the name it is found
 * under) and commit prefixes, the repository's kiln.signed policy, the files and shard lines of a
 * version's tree, first-parent history with the dataset's vN tags, and the
 * shards added and removed between two versions (a git tree diff of splits/
 * then a merge walk of each changed fan-out blob). Read-only: nothing here
 * writes to the repository, and every libgit2 object lives for one call. */
#include "manifest/version.h"
#include "manifest/internal.h"
#include "manifest/ledger.h"
#include "manifest/version_internal.h"

#include <errno.h>
#include <git2.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/error.h"
#include "manifest/format.h"
#include "quality/profile.h"

#define HASH_LEN  64
#define SHORT_LEN 12

/* ---- names and specs ------------------------------------------------------ */

static bool is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static bool lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_lower_hex(s[i]))
			return false;
	return true;
}

/* A ref after '@': [A-Za-z0-9][A-Za-z0-9._-]{0,127} (upper case for commit
 * ids typed that way), and a valid git reference name once prefixed. */
static bool ref_valid(const char *s, const char *dataset)
{
	char full[KILN_MFMT_NAME_MAX * 2 + 32];
	size_t n = strlen(s);
	int valid = 0;

	if (n == 0 || n > KILN_MFMT_NAME_MAX || s[0] == '.' || s[0] == '-' || s[0] == '_')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	snprintf(full, sizeof(full), "refs/heads/%s/%s", dataset, s);
	return git_reference_name_is_valid(&valid, full) == 0 && valid;
}

/* The spec for a message: printable ASCII kept, anything else as '?', cut. */
static const char *spec_for_message(const char *spec, char out[160])
{
	size_t i;

	for (i = 0; i < 159 && spec[i]; i++)
		out[i] = spec[i] >= 0x20 && spec[i] < 0x7f ? spec[i] : '?';
	out[i] = '\0';
	return out;
}

static int parse_spec(const char *spec, char dataset[KILN_MFMT_NAME_MAX + 1],
                      char ref[KILN_MFMT_NAME_MAX + 1])
{
	const char *at = spec ? strchr(spec, '@') : NULL;
	size_t dn = at ? (size_t)(at - spec) : spec ? strlen(spec) : 0;
	char shown[160];

	if (!spec)
		return kiln_error_set(KILN_EINVALID, "no version given (expected DATASET[@REF])");
	if (!kiln_mfmt_name_valid_n(spec, dn))
		return kiln_error_set(KILN_EINVALID,
		                      "%s: not a version (expected DATASET[@REF], DATASET matching "
		                      "[a-z0-9][a-z0-9._-]{0,127})",
		                      spec_for_message(spec, shown));
	memcpy(dataset, spec, dn);
	dataset[dn] = '\0';
	if (!at) {
		strcpy(ref, "main");
		return 0;
	}
	if (strlen(at + 1) > KILN_MFMT_NAME_MAX || !ref_valid(at + 1, dataset))
		return kiln_error_set(
		    KILN_EINVALID,
		    "%s: not a version (REF after '@' must be a branch, a tag vN or a commit id)",
		    spec_for_message(spec, shown));
	strcpy(ref, at + 1);
	return 0;
}

/* ---- opening -------------------------------------------------------------- */

int kiln_version_open(kiln_manifest **out, const char *path)
{
	struct stat st;

	*out = NULL;
	if (!path || !*path)
		return kiln_error_set(KILN_EINVALID, "no manifest repository given");
	if (stat(path, &st) < 0)
		return kiln_error_set(errno == ENOENT ? KILN_ENOTFOUND : KILN_EIO, "manifest %s: %s", path,
		                      errno == ENOENT ? "no such repository" : strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return kiln_error_set(KILN_EINVALID, "manifest %s: not a repository (not a directory)", path);
	return kiln_manifest_open(out, path);
}

/* ---- trees and blobs ------------------------------------------------------ */

int kiln_version_commit(kiln_manifest *m, const kiln_version *v, git_commit **out)
{
	git_oid id;
	int gerr;

	*out = NULL;
	if (strlen(v->commit) != 40 || git_oid_fromstr(&id, v->commit) < 0)
		return kiln_error_set(KILN_EINVALID, "manifest %s: bad commit id in a version",
		                      kiln_manifest_path(m));
	gerr = git_commit_lookup(out, kiln_manifest_repo(m), &id);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, v->commit) : 0;
}

static int tree_of(kiln_manifest *m, const kiln_version *v, git_tree **out)
{
	git_commit *commit;
	int rc = kiln_version_commit(m, v, &commit), gerr;

	*out = NULL;
	if (rc < 0)
		return rc;
	gerr = git_commit_tree(out, commit);
	git_commit_free(commit);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, v->commit) : 0;
}

/* The blob at path in tree: 1 found, 0 absent, < 0 error. */
static int blob_at(kiln_manifest *m, git_tree *tree, const char *commit, const char *path, git_blob **out)
{
	git_tree_entry *entry = NULL;
	int gerr;

	*out = NULL;
	gerr = git_tree_entry_bypath(&entry, tree, path);
	if (gerr == GIT_ENOTFOUND)
		return 0;
	if (gerr < 0)
		return kiln_manifest_git_fail(m, gerr, path);
	if (git_tree_entry_type(entry) != GIT_OBJECT_BLOB) {
		git_tree_entry_free(entry);
		return kiln_error_set(KILN_EINVALID, "manifest %s: %.*s:%s is not a file",
		                      kiln_manifest_path(m), SHORT_LEN, commit, path);
	}
	gerr = git_blob_lookup(out, kiln_manifest_repo(m), git_tree_entry_id(entry));
	git_tree_entry_free(entry);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, path) : 1;
}

int kiln_version_read(kiln_manifest *m, const kiln_version *v, const char *path, kiln_buf *out)
{
	git_tree *tree = NULL;
	git_blob *blob = NULL;
	int rc;

	if ((rc = tree_of(m, v, &tree)) < 0)
		return rc;
	rc = blob_at(m, tree, v->commit, path, &blob);
	if (rc == 1 &&
	    (rc = kiln_buf_put(out, git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob))) == 0)
		rc = 1;
	git_blob_free(blob);
	git_tree_free(tree);
	return rc;
}

/* ---- resolution ----------------------------------------------------------- */

/* The "name" of a dataset.json text equals dataset. */
static bool dataset_json_names(const char *text, size_t len, const char *dataset)
{
	kiln_json_scanner *scanner = kiln_json_scanner_new(NULL);
	kiln_mfmt_dataset d;
	bool match;

	if (!scanner)
		return false;
	match = kiln_mfmt_dataset_parse(scanner, "dataset.json", text, len, &d) == 0 && d.name &&
	        strcmp(d.name, dataset) == 0;
	kiln_mfmt_dataset_free(&d);
	kiln_json_scanner_free(scanner);
	return match;
}

static int try_ref(kiln_manifest *m, const char *name, git_oid *out, git_oid *out_tag)
{
	git_reference *ref = NULL, *direct = NULL;
	git_object *obj = NULL;
	int gerr = git_reference_lookup(&ref, kiln_manifest_repo(m), name);

	memset(out_tag, 0, sizeof(*out_tag));
	if (gerr == GIT_ENOTFOUND || gerr == GIT_EINVALIDSPEC)
		return 0;
	if (gerr < 0)
		return kiln_manifest_git_fail(m, gerr, name);
	/* a symbolic reference is followed to the one that names an object */
	if ((gerr = git_reference_resolve(&direct, ref)) < 0) {
		git_reference_free(ref);
		return kiln_error_set(KILN_EINVALID, "manifest %s: %s does not lead to a commit",
		                      kiln_manifest_path(m), name);
	}
	git_reference_free(ref);
	if (git_object_lookup(&obj, kiln_manifest_repo(m), git_reference_target(direct), GIT_OBJECT_TAG) == 0)
		git_oid_cpy(out_tag, git_object_id(obj));
	git_object_free(obj);
	obj = NULL;
	gerr = git_reference_peel(&obj, direct, GIT_OBJECT_COMMIT);
	git_reference_free(direct);
	if (gerr < 0)
		return kiln_error_set(KILN_EINVALID, "manifest %s: %s does not lead to a commit",
		                      kiln_manifest_path(m), name);
	git_oid_cpy(out, git_object_id(obj));
	git_object_free(obj);
	return 1;
}

int kiln_version_lookup(kiln_manifest *m, const char *spec, kiln_version *out)
{
	char dataset[KILN_MFMT_NAME_MAX + 1], ref[KILN_MFMT_NAME_MAX + 1], name[sizeof(out->ref)];
	char shown[160];
	git_oid id, tag;
	git_commit *commit = NULL;
	int rc, gerr;

	memset(out, 0, sizeof(*out));
	if ((rc = parse_spec(spec, dataset, ref)) < 0)
		return rc;
	spec_for_message(spec, shown);

	/* a branch, then a tag */
	snprintf(name, sizeof(name), "refs/heads/%s/%s", dataset, ref);
	if ((rc = try_ref(m, name, &id, &tag)) == 0) {
		snprintf(name, sizeof(name), "refs/tags/%s/%s", dataset, ref);
		rc = try_ref(m, name, &id, &tag);
	}
	if (rc < 0)
		return rc;
	if (rc == 1) {
		strcpy(out->ref, name);
		if (strncmp(name, "refs/tags/", 10) == 0 && !git_oid_is_zero(&tag))
			git_oid_tostr(out->tag, sizeof(out->tag), &tag);
	} else {
		/* a commit id or a unique prefix of one */
		char hex[41];
		git_object *obj = NULL;
		git_blob *blob = NULL;
		git_tree *tree = NULL;
		size_t n = strlen(ref);
		bool ok;

		for (size_t i = 0; i < n && i < 40; i++)
			hex[i] = ref[i] >= 'A' && ref[i] <= 'F' ? (char)(ref[i] - 'A' + 'a') : ref[i];
		if (n < 4 || n > 40 || !lower_hex(hex, n))
			return kiln_error_set(KILN_ENOTFOUND,
			                      "%s: no branch, tag or commit of that name in %s", shown,
			                      kiln_manifest_path(m));
		hex[n] = '\0';
		{
			char erasure[17], successor[41];
			int64_t when;

			if ((rc = kiln_ledger_successor(m, dataset, hex, n, erasure, &when, successor)) < 0)
				return rc;
			if (rc == 1) {
				char day[32] = "?";
				time_t t = (time_t)when;
				struct tm tm;

				if (gmtime_r(&t, &tm))
					strftime(day, sizeof(day), "%Y-%m-%d", &tm);
				return kiln_error_set(
				    KILN_ENOTFOUND,
				    "%s: commit %s was rewritten by erasure %s (kiln erase, %s): its "
				    "successor is %s@%.12s",
				    shown, hex, erasure, day, dataset, successor);
			}
		}
		git_oid_fromstrn(&id, hex, n);
		gerr = git_object_lookup_prefix(&obj, kiln_manifest_repo(m), &id, n, GIT_OBJECT_COMMIT);
		if (gerr == GIT_EAMBIGUOUS)
			return kiln_error_set(
			    KILN_EINVALID,
			    "%s: %s is ambiguous (several objects start with it); give more digits", shown,
			    hex);
		if (gerr == GIT_ENOTFOUND)
			return kiln_error_set(KILN_ENOTFOUND,
			                      "%s: no branch, tag or commit of that name in %s", shown,
			                      kiln_manifest_path(m));
		if (gerr < 0)
			return kiln_manifest_git_fail(m, gerr, hex);
		git_oid_cpy(&id, git_object_id(obj));
		gerr = git_commit_tree(&tree, (git_commit *)obj);
		git_object_free(obj);
		if (gerr < 0)
			return kiln_manifest_git_fail(m, gerr, hex);
		rc = blob_at(m, tree, hex, "dataset.json", &blob);
		ok = rc == 1 &&
		     dataset_json_names(git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob), dataset);
		git_blob_free(blob);
		git_tree_free(tree);
		if (rc < 0)
			return rc;
		if (!ok) {
			git_oid_tostr(hex, sizeof(hex), &id);
			return kiln_error_set(KILN_EINVALID, "%s: commit %.*s is not a version of %s (%s)",
			                      shown, SHORT_LEN, hex, dataset,
			                      rc == 1 ? "its dataset.json names another dataset"
			                              : "it has no dataset.json");
		}
	}
	gerr = git_commit_lookup(&commit, kiln_manifest_repo(m), &id);
	if (gerr < 0)
		return kiln_manifest_git_fail(m, gerr, shown);
	strcpy(out->dataset, dataset);
	git_oid_tostr(out->commit, sizeof(out->commit), &id);
	out->time = (int64_t)git_commit_time(commit);
	git_commit_free(commit);
	return 0;
}

int kiln_version_check_tag(kiln_manifest *m, const kiln_version *v)
{
	char expected[sizeof(v->ref)], shown[160];
	git_oid id;
	git_tag *tag = NULL;
	const char *tag_name;
	int gerr, rc = 0;

	if (!v->tag[0])
		return 0;
	if (git_oid_fromstr(&id, v->tag) < 0)
		return kiln_error_set(KILN_EINVALID, "manifest %s: bad tag id in a version",
		                      kiln_manifest_path(m));
	if ((gerr = git_tag_lookup(&tag, kiln_manifest_repo(m), &id)) < 0)
		return kiln_manifest_git_fail(m, gerr, v->ref);
	snprintf(expected, sizeof(expected), "%s",
	         strncmp(v->ref, "refs/tags/", 10) == 0 ? v->ref + 10 : v->ref);
	tag_name = git_tag_name(tag);
	if (!tag_name || strcmp(tag_name, expected) != 0)
		rc = kiln_error_set(
		    KILN_EINVALID,
		    "%s: the tag object %.*s is named %s, not %s (a tag of another version put "
		    "under this name)",
		    v->ref, SHORT_LEN, v->tag, spec_for_message(tag_name ? tag_name : "", shown), expected);
	else if (git_tag_target_type(tag) != GIT_OBJECT_COMMIT || git_oid_fromstr(&id, v->commit) < 0 ||
	         !git_oid_equal(git_tag_target_id(tag), &id))
		rc = kiln_error_set(KILN_EINVALID,
		                    "%s: the tag object %.*s does not point straight at commit %.*s", v->ref,
		                    SHORT_LEN, v->tag, SHORT_LEN, v->commit);
	git_tag_free(tag);
	return rc;
}

int kiln_version_resolve(kiln_manifest *m, const char *spec, kiln_version *out)
{
	int rc = kiln_version_lookup(m, spec, out);

	if (rc == 0 && (rc = kiln_version_check_tag(m, out)) < 0)
		memset(out, 0, sizeof(*out));
	return rc;
}

int kiln_version_must_be_signed(kiln_manifest *m, const kiln_version *v, bool *out)
{
	git_config *cfg = NULL;
	const char *value = NULL;
	char shown[160];
	int gerr, rc = 0;

	*out = false;
	if ((gerr = git_repository_config_snapshot(&cfg, kiln_manifest_repo(m))) < 0)
		return kiln_manifest_git_fail(m, gerr, "config");
	gerr = git_config_get_string(&value, cfg, KILN_VERSION_SIGNED_KEY);
	if (gerr == GIT_ENOTFOUND) {
		gerr = 0;
	} else if (gerr < 0) {
		rc = kiln_manifest_git_fail(m, gerr, KILN_VERSION_SIGNED_KEY);
	} else if (strcasecmp(value, "all") == 0 || strcasecmp(value, "true") == 0) {
		*out = true;
	} else if (strcasecmp(value, "tags") == 0) {
		*out = v->ref[0] && strncmp(v->ref, "refs/tags/", 10) == 0;
	} else if (strcasecmp(value, "false") != 0) {
		rc = kiln_error_set(
		    KILN_EINVALID, "manifest %s: config %s = '%s': expected tags, all or false",
		    kiln_manifest_path(m), KILN_VERSION_SIGNED_KEY, spec_for_message(value, shown));
	}
	git_config_free(cfg);
	return rc;
}

/* ---- walking a split ------------------------------------------------------ */

/* Parsing state reused over every line of a walk. */
typedef struct line_state {
	kiln_json_scanner *scanner;
	kiln_buf strings;
	kiln_source_range *sources;
	size_t sources_cap;
} line_state;

static int line_state_init(line_state *s)
{
	memset(s, 0, sizeof(*s));
	s->scanner = kiln_json_scanner_new(NULL);
	return s->scanner ? 0 : kiln_error_oom(NULL);
}

static void line_state_free(line_state *s)
{
	kiln_json_scanner_free(s->scanner);
	kiln_buf_free(&s->strings);
	free(s->sources);
}

/* Re-sets the last error with where it happened in front. */
static int in_file(kiln_manifest *m, int rc, const char *commit, const char *path, size_t line)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "%s", kiln_error_last());
	return kiln_error_set(rc, "manifest %s: %.*s:%s line %zu: %s", kiln_manifest_path(m), SHORT_LEN,
	                      commit, path, line, msg);
}

static int parse_line(kiln_manifest *m, line_state *s, const char *commit, const char *path, size_t lineno,
                      const char *text, size_t len, kiln_shard_entry *out)
{
	int rc;

	kiln_buf_reset(&s->strings);
	rc =
	    kiln_shard_line_parse_with(s->scanner, text, len, out, &s->strings, &s->sources, &s->sources_cap);
	return rc < 0 ? in_file(m, rc, commit, path, lineno) : 0;
}

/* "hh.jsonl" with hh two lower-case hex digits. */
static bool fanout_name(const char *name)
{
	return strlen(name) == 8 && is_lower_hex(name[0]) && is_lower_hex(name[1]) &&
	       strcmp(name + 2, ".jsonl") == 0;
}

/* splits/<split> of tree (*out NULL when absent). */
static int split_tree(kiln_manifest *m, git_tree *tree, const char *commit, kiln_split split, git_tree **out)
{
	char path[32];
	git_tree_entry *entry = NULL;
	int gerr;

	*out = NULL;
	snprintf(path, sizeof(path), "splits/%s", kiln_split_name(split));
	gerr = git_tree_entry_bypath(&entry, tree, path);
	if (gerr == GIT_ENOTFOUND)
		return 0;
	if (gerr < 0)
		return kiln_manifest_git_fail(m, gerr, path);
	if (git_tree_entry_type(entry) != GIT_OBJECT_TREE) {
		git_tree_entry_free(entry);
		return kiln_error_set(KILN_EINVALID, "manifest %s: %.*s:%s is not a folder",
		                      kiln_manifest_path(m), SHORT_LEN, commit, path);
	}
	gerr = git_tree_lookup(out, kiln_manifest_repo(m), git_tree_entry_id(entry));
	git_tree_entry_free(entry);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, path) : 0;
}

int kiln_version_shards(kiln_manifest *m, const kiln_version *v, kiln_split split,
                        int (*cb)(void *ctx, const kiln_shard_entry *entry), void *ctx)
{
	git_tree *tree = NULL, *dir = NULL;
	git_blob *blob = NULL;
	line_state ls;
	char prev[HASH_LEN + 1] = "";
	int rc;

	if ((rc = line_state_init(&ls)) < 0)
		return rc;
	if ((rc = tree_of(m, v, &tree)) < 0 || (rc = split_tree(m, tree, v->commit, split, &dir)) < 0 || !dir)
		goto cleanup;
	for (size_t i = 0, n = git_tree_entrycount(dir); i < n; i++) {
		const git_tree_entry *e = git_tree_entry_byindex(dir, i);
		const char *name = git_tree_entry_name(e);
		char path[48];
		const char *p, *end;
		size_t lineno = 0;
		int gerr;

		snprintf(path, sizeof(path), "splits/%s/%s", kiln_split_name(split), name);
		if (!fanout_name(name) || git_tree_entry_type(e) != GIT_OBJECT_BLOB) {
			rc = kiln_error_set(KILN_EINVALID,
			                    "manifest %s: %.*s:%s: not a shard list (<hh>.jsonl)",
			                    kiln_manifest_path(m), SHORT_LEN, v->commit, path);
			goto cleanup;
		}
		if ((gerr = git_blob_lookup(&blob, kiln_manifest_repo(m), git_tree_entry_id(e))) < 0) {
			rc = kiln_manifest_git_fail(m, gerr, path);
			goto cleanup;
		}
		p = git_blob_rawcontent(blob);
		end = p + git_blob_rawsize(blob);
		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			const char *stop = nl ? nl : end;
			kiln_shard_entry entry;

			lineno++;
			if (stop == p) { /* an empty line */
				p++;
				continue;
			}
			if ((rc = parse_line(m, &ls, v->commit, path, lineno, p, (size_t)(stop - p),
			                     &entry)) < 0)
				goto cleanup;
			if (memcmp(entry.hash, name, 2) != 0 || strcmp(entry.hash, prev) <= 0) {
				rc =
				    kiln_error_set(KILN_EINVALID,
				                   "manifest %s: %.*s:%s line %zu: shard out of order or in "
				                   "the wrong file",
				                   kiln_manifest_path(m), SHORT_LEN, v->commit, path, lineno);
				goto cleanup;
			}
			memcpy(prev, entry.hash, sizeof(prev));
			if ((rc = cb(ctx, &entry)) != 0)
				goto cleanup;
			p = nl ? nl + 1 : end;
		}
		git_blob_free(blob);
		blob = NULL;
	}
	rc = 0;
cleanup:
	git_blob_free(blob);
	git_tree_free(dir);
	git_tree_free(tree);
	line_state_free(&ls);
	return rc;
}

/* ---- diff ----------------------------------------------------------------- */

/* Lines of one fan-out blob, walked in order. */
typedef struct cursor {
	const char *p, *end; /* what is left */
	const char *text;    /* the current line (NULL when done) */
	size_t len, lineno;
	char hash[HASH_LEN + 1], prev[HASH_LEN + 1];
	const char *commit, *path;
} cursor;

static void cursor_init(cursor *c, git_blob *blob, const char *commit, const char *path)
{
	memset(c, 0, sizeof(*c));
	if (blob) {
		c->p = git_blob_rawcontent(blob);
		c->end = c->p + git_blob_rawsize(blob);
	}
	c->commit = commit;
	c->path = path;
}

/* Moves to the next non-empty line and reads its hash: straight from the
 * text when the line starts the way kiln writes it, else by parsing it. */
static int cursor_next(kiln_manifest *m, line_state *s, cursor *c, const char *hh)
{
	c->text = NULL;
	while (c->p && c->p < c->end) {
		const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
		const char *text = c->p, *stop = nl ? nl : c->end;
		size_t len = (size_t)(stop - text);

		c->p = nl ? nl + 1 : c->end;
		c->lineno++;
		if (stop == text) /* an empty line */
			continue;
		c->text = text;
		c->len = len;
		if (!kiln_mfmt_shard_line_fast_hash(text, len, c->hash)) {
			kiln_shard_entry e;
			int rc = parse_line(m, s, c->commit, c->path, c->lineno, text, len, &e);

			if (rc < 0)
				return rc;
			memcpy(c->hash, e.hash, sizeof(c->hash));
		}
		if (memcmp(c->hash, hh, 2) != 0 || strcmp(c->hash, c->prev) <= 0)
			return kiln_error_set(
			    KILN_EINVALID,
			    "manifest %s: %.*s:%s line %zu: shard out of order or in the wrong file",
			    kiln_manifest_path(m), SHORT_LEN, c->commit, c->path, c->lineno);
		memcpy(c->prev, c->hash, sizeof(c->prev));
		return 0;
	}
	return 0;
}

typedef int (*diff_cb)(void *ctx, kiln_split split, const kiln_shard_entry *entry, bool added);

/* Reports the cursor's current line and moves on. */
static int report(kiln_manifest *m, line_state *s, cursor *c, const char *hh, kiln_split split, bool added,
                  diff_cb cb, void *ctx)
{
	kiln_shard_entry e;
	int rc = parse_line(m, s, c->commit, c->path, c->lineno, c->text, c->len, &e);

	if (rc < 0)
		return rc;
	if ((rc = cb(ctx, split, &e, added)) != 0)
		return rc;
	return cursor_next(m, s, c, hh);
}

/* The split and hh of "splits/<split>/<hh>.jsonl"; false for another path. */
static bool diff_path(const char *path, kiln_split *out_split, char hh[3])
{
	const char *rest = path + strlen("splits/"), *slash;

	if (strncmp(path, "splits/", 7) != 0 || !(slash = strchr(rest, '/')) || !fanout_name(slash + 1))
		return false;
	for (int s = 0; s < KILN_SPLIT_COUNT; s++) {
		const char *name = kiln_split_name((kiln_split)s);

		if (strlen(name) == (size_t)(slash - rest) &&
		    memcmp(rest, name, (size_t)(slash - rest)) == 0) {
			*out_split = (kiln_split)s;
			hh[0] = slash[1];
			hh[1] = slash[2];
			hh[2] = '\0';
			return true;
		}
	}
	return false;
}

static int diff_blob_pair(kiln_manifest *m, line_state *s, const git_diff_delta *d, const kiln_version *a,
                          const kiln_version *b, diff_cb cb, void *ctx)
{
	const char *path = d->status == GIT_DELTA_DELETED ? d->old_file.path : d->new_file.path;
	git_blob *old_blob = NULL, *new_blob = NULL;
	kiln_split split;
	char hh[3];
	cursor o, n;
	int rc = 0, gerr;

	if (!diff_path(path, &split, hh))
		return kiln_error_set(KILN_EINVALID,
		                      "manifest %s: %s: not a shard list (splits/<split>/<hh>.jsonl)",
		                      kiln_manifest_path(m), path);
	if (d->status != GIT_DELTA_ADDED &&
	    (gerr = git_blob_lookup(&old_blob, kiln_manifest_repo(m), &d->old_file.id)) < 0)
		return kiln_manifest_git_fail(m, gerr, path);
	if (d->status != GIT_DELTA_DELETED &&
	    (gerr = git_blob_lookup(&new_blob, kiln_manifest_repo(m), &d->new_file.id)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, path);
		goto cleanup;
	}
	cursor_init(&o, old_blob, a->commit, path);
	cursor_init(&n, new_blob, b->commit, path);
	if ((rc = cursor_next(m, s, &o, hh)) < 0 || (rc = cursor_next(m, s, &n, hh)) < 0)
		goto cleanup;
	while (o.text || n.text) {
		int c = !o.text ? 1 : !n.text ? -1 : memcmp(o.hash, n.hash, HASH_LEN);

		if (c < 0)
			rc = report(m, s, &o, hh, split, false, cb, ctx);
		else if (c > 0)
			rc = report(m, s, &n, hh, split, true, cb, ctx);
		else if ((rc = cursor_next(m, s, &o, hh)) == 0)
			rc = cursor_next(m, s, &n, hh);
		if (rc != 0)
			goto cleanup;
	}
cleanup:
	git_blob_free(old_blob);
	git_blob_free(new_blob);
	return rc;
}

int kiln_version_diff(kiln_manifest *m, const kiln_version *a, const kiln_version *b, diff_cb cb, void *ctx)
{
	char *paths[] = {"splits/"};
	git_diff_options opts;
	git_tree *ta = NULL, *tb = NULL;
	git_diff *diff = NULL;
	line_state ls;
	int rc, gerr;

	if ((rc = line_state_init(&ls)) < 0)
		return rc;
	if ((rc = tree_of(m, a, &ta)) < 0 || (rc = tree_of(m, b, &tb)) < 0)
		goto cleanup;
	/* literal path prefix, no fnmatch; no content is read for a tree diff */
	git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
	opts.flags = GIT_DIFF_DISABLE_PATHSPEC_MATCH;
	opts.pathspec.strings = paths;
	opts.pathspec.count = 1;
	if ((gerr = git_diff_tree_to_tree(&diff, kiln_manifest_repo(m), ta, tb, &opts)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "diff");
		goto cleanup;
	}
	for (size_t i = 0, n = git_diff_num_deltas(diff); i < n; i++) {
		const git_diff_delta *d = git_diff_get_delta(diff, i);

		if (d->status != GIT_DELTA_ADDED && d->status != GIT_DELTA_DELETED &&
		    d->status != GIT_DELTA_MODIFIED) {
			rc = kiln_error_set(KILN_EINVALID,
			                    "manifest %s: %s: unexpected change between %.*s and %.*s",
			                    kiln_manifest_path(m), d->new_file.path, SHORT_LEN, a->commit,
			                    SHORT_LEN, b->commit);
			goto cleanup;
		}
		if ((rc = diff_blob_pair(m, &ls, d, a, b, cb, ctx)) != 0)
			goto cleanup;
	}
	rc = 0;
cleanup:
	git_diff_free(diff);
	git_tree_free(ta);
	git_tree_free(tb);
	line_state_free(&ls);
	return rc;
}

/* The version's valid records (stats.json) into *valid: 1, or 0 when it
 * has no stats.json. */
static int version_valid(kiln_manifest *m, const kiln_version *v, const char *spec, uint64_t *valid)
{
	kiln_buf text = {0};
	kiln_stats stats;
	int rc;

	*valid = 0;
	if ((rc = kiln_version_read(m, v, "stats.json", &text)) == 1 &&
	    (rc = kiln_stats_parse(text.ptr, text.len, spec, &stats)) == 0) {
		*valid = stats.valid;
		rc = 1;
	}
	kiln_buf_free(&text);
	return rc;
}

/* The profile's records against the commit's parent: `added` holds what
 * the commit added to stats.json's valid count, and `total` the parent's
 * total plus that (the commit's alone when the parent has no profile, as
 * after a commit made with profiling off). Merge commits are not checked. */
static int check_profile_chain(kiln_manifest *m, const kiln_version *v, const char *where,
                               const kiln_profile *total, const kiln_profile *added, uint64_t valid)
{
	kiln_version parent = *v;
	kiln_profile before = {0};
	kiln_buf text = {0};
	git_commit *commit = NULL;
	git_oid oid;
	uint64_t parent_valid = 0;
	unsigned parents;
	int rc = 0, gerr;

	if ((gerr = git_oid_fromstr(&oid, v->commit)) < 0 ||
	    (gerr = git_commit_lookup(&commit, kiln_manifest_repo(m), &oid)) < 0)
		return kiln_manifest_git_fail(m, gerr, v->commit);
	parents = git_commit_parentcount(commit);
	if (parents == 1) {
		git_oid_tostr(parent.commit, sizeof(parent.commit), git_commit_parent_id(commit, 0));
		parent.ref[0] = parent.tag[0] = '\0';
		if ((rc = version_valid(m, &parent, parent.commit, &parent_valid)) < 0 ||
		    (rc = kiln_version_read(m, &parent, "profile.json", &text)) < 0 ||
		    (rc == 1 &&
		     (rc = kiln_profile_parse_file(text.ptr, text.len, parent.commit, &before, NULL)) < 0))
			goto done;
	}
	rc = 0;
	if (parents > 1)
		goto done;
	if (added->records + parent_valid != valid)
		rc = kiln_error_set(
		    KILN_EINVALID,
		    "%s: added holds %llu records, the commit added %llu valid ones (stats.json)", where,
		    (unsigned long long)added->records,
		    (unsigned long long)(valid - (parent_valid < valid ? parent_valid : valid)));
	else if (total->records != before.records + added->records)
		rc = kiln_error_set(KILN_EINVALID,
		                    "%s: total holds %llu records, the parent's total and added %llu", where,
		                    (unsigned long long)total->records,
		                    (unsigned long long)(before.records + added->records));
done:
	kiln_profile_free(&before);
	kiln_buf_free(&text);
	git_commit_free(commit);
	return rc;
}

int kiln_version_profile(kiln_manifest *m, const kiln_version *v, const char *spec, kiln_profile *total,
                         kiln_profile *added)
{
	kiln_buf text = {0};
	kiln_profile total_scratch = {0}, added_scratch = {0};
	uint64_t valid;
	char where[512];
	int rc;

	if (!total)
		total = &total_scratch;
	if (!added)
		added = &added_scratch;
	if ((rc = kiln_version_read(m, v, "profile.json", &text)) < 0)
		goto done;
	if (rc == 0) {
		kiln_error_set(
		    KILN_ENOTFOUND,
		    "%s: no profile.json (a version made before profiles, or with profile.enabled: false)",
		    spec);
		goto done;
	}
	snprintf(where, sizeof(where), "%s:profile.json", spec);
	if ((rc = kiln_profile_parse_file(text.ptr, text.len, where, total, added)) < 0)
		goto done;
	/* checked against the version's stats.json and its parent before use */
	if ((rc = version_valid(m, v, spec, &valid)) < 0)
		goto fail;
	if (rc == 0) {
		rc = kiln_error_set(KILN_EINVALID, "%s: a profile.json without a stats.json", spec);
		goto fail;
	}
	if ((rc = kiln_profile_check(total, added, valid, where)) < 0 ||
	    (rc = check_profile_chain(m, v, where, total, added, valid)) < 0)
		goto fail;
	rc = 1;
	goto done;
fail:
	kiln_profile_free(total);
	kiln_profile_free(added);
done:
	kiln_profile_free(&total_scratch);
	kiln_profile_free(&added_scratch);
	kiln_buf_free(&text);
	return rc;
}

/* The last line of text that starts with prefix and then holds 16 hex, the
 * infix and 40 hex: 1 with them copied, 0 when none. */
static int last_erasure_line(const char *text, const char *infix, char id[17], char hex[41])
{
	static const char prefix[] = "Erasure ";
	size_t infix_len = strlen(infix);
	int found = 0;

	for (const char *line = text; line && *line;
	     line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		const char *p = line;

		if (strncmp(p, prefix, sizeof(prefix) - 1) != 0)
			continue;
		p += sizeof(prefix) - 1;
		if (!lower_hex(p, 16) || strncmp(p + 16, infix, infix_len) != 0 ||
		    !lower_hex(p + 16 + infix_len, 40))
			continue;
		memcpy(id, p, 16);
		id[16] = '\0';
		memcpy(hex, p + 16 + infix_len, 40);
		hex[40] = '\0';
		found = 1;
	}
	return found;
}

int kiln_version_erasure_of(kiln_manifest *m, const kiln_version *v, kiln_version_erasure *out)
{
	git_commit *commit = NULL;
	git_tag *tag = NULL;
	git_oid id;
	int rc, gerr;

	memset(out, 0, sizeof(*out));
	if ((rc = kiln_version_commit(m, v, &commit)) < 0)
		return rc;
	rc = last_erasure_line(git_commit_message(commit), ": rewritten from commit ", out->id,
	                       out->old_commit);
	git_commit_free(commit);
	if (v->tag[0] && git_oid_fromstr(&id, v->tag) == 0) {
		char tid[17];

		if ((gerr = git_tag_lookup(&tag, kiln_manifest_repo(m), &id)) < 0)
			return kiln_manifest_git_fail(m, gerr, v->tag);
		if (last_erasure_line(git_tag_message(tag), ": supersedes tag ", tid, out->old_tag) &&
		    rc == 1 && strcmp(tid, out->id) != 0)
			rc = kiln_error_set(KILN_EINVALID,
			                    "manifest %s: %s names erasure %s, its commit erasure %s",
			                    kiln_manifest_path(m), v->ref, tid, out->id);
		else if (out->old_tag[0] && rc == 0)
			rc =
			    kiln_error_set(KILN_EINVALID, "manifest %s: %s names erasure %s, its commit none",
			                   kiln_manifest_path(m), v->ref, tid);
		git_tag_free(tag);
	}
	return rc;
}
