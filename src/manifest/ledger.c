/* The erasure ledger (ledger.h): entries rendered and parsed here and
 * nowhere else, kept as files of commits on refs/erasures/<dataset>. */
#include "manifest/ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/array.h"
#include "core/error.h"
#include "core/fs.h"
#include "manifest/format.h"
#include "manifest/internal.h"
#include "manifest/sshsig.h"

/* ---- render ------------------------------------------------------------- */

static int render_zone(kiln_buf *out, const char *name, const kiln_ledger_zone *z)
{
	return kiln_buf_printf(
	    out, ",\n\"%s\":{\"objects\":%llu,\"rewritten\":%llu,\"deleted\":%llu,\"records\":%llu}", name,
	    (unsigned long long)z->objects, (unsigned long long)z->rewritten, (unsigned long long)z->deleted,
	    (unsigned long long)z->records);
}

int kiln_ledger_render(kiln_buf *out, const kiln_ledger_entry *e)
{
	int rc = kiln_buf_printf(
	    out,
	    "{\"format\":\"%s\",\"id\":\"%s\",\"dataset\":\"%s\",\"time\":%lld,\"subject\":\"%s\","
	    "\"signer\":\"%s\",\n\"erased\":{",
	    KILN_LEDGER_FORMAT, e->id, e->dataset, (long long)e->time, e->subject, e->signer);

	for (int s = 0; s < KILN_SPLIT_COUNT && rc == 0; s++)
		rc = kiln_buf_printf(out, "%s\"%s\":%llu", s ? "," : "", kiln_split_name((kiln_split)s),
		                     (unsigned long long)e->erased[s]);
	if (rc == 0)
		rc = kiln_buf_puts(out, "}");
	if (rc == 0)
		rc = render_zone(out, "raw", &e->raw);
	if (rc == 0)
		rc = render_zone(out, "quarantine", &e->quarantine);
	if (rc == 0)
		rc = kiln_buf_puts(out, ",\n\"refs\":[");
	for (size_t i = 0; i < e->ref_count && rc == 0; i++)
		rc =
		    kiln_buf_printf(out,
		                    "%s\n{\"ref\":\"%s\",\"old\":\"%s\",\"new\":\"%s\",\"old_commit\":\"%s\","
		                    "\"new_commit\":\"%s\"}",
		                    i ? "," : "", e->refs[i].ref, e->refs[i].old_id, e->refs[i].new_id,
		                    e->refs[i].old_commit, e->refs[i].new_commit);
	if (rc == 0)
		rc = kiln_buf_puts(out, "],\n\"commits\":[");
	for (size_t i = 0; i < e->commit_count && rc == 0; i++)
		rc = kiln_buf_printf(out, "%s\n{\"old\":\"%s\",\"new\":\"%s\"}", i ? "," : "",
		                     e->commits[i].old_id, e->commits[i].new_id);
	if (rc == 0)
		rc = kiln_buf_puts(out, "],\n\"shards\":[");
	for (size_t i = 0; i < e->shard_count && rc == 0; i++) {
		const kiln_ledger_shard *sh = &e->shards[i];

		rc = kiln_buf_printf(out,
		                     "%s\n{\"split\":\"%s\",\"old\":\"%s\",\"new\":%s%s%s,\"erased\":%llu}",
		                     i ? "," : "", kiln_split_name(sh->split), sh->old_hash,
		                     sh->new_hash[0] ? "\"" : "", sh->new_hash[0] ? sh->new_hash : "null",
		                     sh->new_hash[0] ? "\"" : "", (unsigned long long)sh->erased);
	}
	if (rc == 0)
		rc = kiln_buf_puts(out, "]}\n");
	return rc < 0 ? kiln_error_oom("ledger") : 0;
}

void kiln_ledger_entry_free(kiln_ledger_entry *e)
{
	if (!e)
		return;
	free(e->refs);
	free(e->commits);
	free(e->shards);
	memset(e, 0, sizeof(*e));
}

/* ---- parse -------------------------------------------------------------- */

typedef struct parser {
	kiln_json_scanner *sc;
	const char *where;
	kiln_json_token t;
} parser;

static int bad(parser *p, const char *what)
{
	return kiln_error_set(KILN_EINVALID, "%s: %s", p->where, what);
}

static int next(parser *p)
{
	int r = kiln_json_next(p->sc, &p->t);

	if (r < 0)
		return bad(p, "not valid JSON");
	return r == 0 ? bad(p, "the entry ends early") : 0;
}

static bool is_key(const parser *p, const char *name)
{
	return p->t.len == strlen(name) && memcmp(p->t.ptr, name, p->t.len) == 0;
}

static bool hex_only(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* The next value: a string of 1..cap-1 bytes without escapes or control
 * characters; hex_len > 0: exactly that many hex digits. */
static int take_string(parser *p, char *out, size_t cap, size_t hex_len, const char *what)
{
	int rc;

	if ((rc = next(p)) < 0)
		return rc;
	if (p->t.type != KILN_JSON_STRING || (p->t.flags & KILN_JSON_ESCAPED) || p->t.len >= cap ||
	    (hex_len && (p->t.len != hex_len || !hex_only(p->t.ptr, p->t.len))))
		return bad(p, what);
	memcpy(out, p->t.ptr, p->t.len);
	out[p->t.len] = '\0';
	return 0;
}

static int take_u64(parser *p, uint64_t *out, const char *what)
{
	int rc;

	if ((rc = next(p)) < 0)
		return rc;
	if (p->t.type != KILN_JSON_NUMBER || kiln_mfmt_token_u64(&p->t, out) < 0)
		return bad(p, what);
	return 0;
}

static int expect(parser *p, kiln_json_type type, const char *what)
{
	int rc;

	if ((rc = next(p)) < 0)
		return rc;
	return p->t.type == type ? 0 : bad(p, what);
}

static int parse_zone(parser *p, kiln_ledger_zone *z)
{
	int rc;

	if ((rc = expect(p, KILN_JSON_OBJECT_BEGIN, "a zone is an object")) < 0)
		return rc;
	for (;;) {
		uint64_t *v;

		if ((rc = next(p)) < 0)
			return rc;
		if (p->t.type == KILN_JSON_OBJECT_END)
			return 0;
		if (is_key(p, "objects"))
			v = &z->objects;
		else if (is_key(p, "rewritten"))
			v = &z->rewritten;
		else if (is_key(p, "deleted"))
			v = &z->deleted;
		else if (is_key(p, "records"))
			v = &z->records;
		else
			return bad(p, "an unknown member of a zone");
		if ((rc = take_u64(p, v, "a zone count is a non-negative integer")) < 0)
			return rc;
	}
}

static int parse_ref(parser *p, kiln_rewrite_move *r)
{
	int rc, seen = 0;

	memset(r, 0, sizeof(*r));
	for (;;) {
		if ((rc = next(p)) < 0)
			return rc;
		if (p->t.type == KILN_JSON_OBJECT_END)
			break;
		if (is_key(p, "ref"))
			rc = take_string(p, r->ref, sizeof(r->ref), 0, "\"ref\" is a ref name"), seen |= 1;
		else if (is_key(p, "old"))
			rc = take_string(p, r->old_id, sizeof(r->old_id), 40, "an id is 40 hex digits"),
			seen |= 2;
		else if (is_key(p, "new"))
			rc = take_string(p, r->new_id, sizeof(r->new_id), 40, "an id is 40 hex digits"),
			seen |= 4;
		else if (is_key(p, "old_commit"))
			rc = take_string(p, r->old_commit, sizeof(r->old_commit), 40,
			                 "an id is 40 hex digits"),
			seen |= 8;
		else if (is_key(p, "new_commit"))
			rc = take_string(p, r->new_commit, sizeof(r->new_commit), 40,
			                 "an id is 40 hex digits"),
			seen |= 16;
		else
			return bad(p, "an unknown member of a ref");
		if (rc < 0)
			return rc;
	}
	if (seen != 31 || (strncmp(r->ref, "refs/heads/", 11) != 0 && strncmp(r->ref, "refs/tags/", 10) != 0))
		return bad(
		    p,
		    "a ref needs ref (refs/heads/... or refs/tags/...), old, new, old_commit and new_commit");
	r->tag = strncmp(r->ref, "refs/tags/", 10) == 0;
	return 0;
}

static int parse_pair(parser *p, kiln_rewrite_pair *c)
{
	int rc, seen = 0;

	memset(c, 0, sizeof(*c));
	for (;;) {
		if ((rc = next(p)) < 0)
			return rc;
		if (p->t.type == KILN_JSON_OBJECT_END)
			break;
		if (is_key(p, "old"))
			rc = take_string(p, c->old_id, sizeof(c->old_id), 40, "an id is 40 hex digits"),
			seen |= 1;
		else if (is_key(p, "new"))
			rc = take_string(p, c->new_id, sizeof(c->new_id), 40, "an id is 40 hex digits"),
			seen |= 2;
		else
			return bad(p, "an unknown member of a commit");
		if (rc < 0)
			return rc;
	}
	return seen == 3 ? 0 : bad(p, "a commit needs old and new");
}

static int parse_shard(parser *p, kiln_ledger_shard *s)
{
	char split[16];
	int rc, seen = 0;

	memset(s, 0, sizeof(*s));
	for (;;) {
		if ((rc = next(p)) < 0)
			return rc;
		if (p->t.type == KILN_JSON_OBJECT_END)
			break;
		if (is_key(p, "split")) {
			if ((rc = take_string(p, split, sizeof(split), 0,
			                      "\"split\" is train, dev or test")) < 0)
				return rc;
			if (kiln_split_from_name(split, &s->split) < 0)
				return bad(p, "\"split\" is train, dev or test");
			seen |= 1;
		} else if (is_key(p, "old")) {
			rc = take_string(p, s->old_hash, sizeof(s->old_hash), 64, "a shard is 64 hex digits"),
			seen |= 2;
		} else if (is_key(p, "new")) {
			if ((rc = next(p)) < 0)
				return rc;
			if (p->t.type != KILN_JSON_NULL) {
				if (p->t.type != KILN_JSON_STRING || p->t.len != 64 ||
				    !hex_only(p->t.ptr, 64))
					return bad(p, "a shard is 64 hex digits or null");
				memcpy(s->new_hash, p->t.ptr, 64);
				s->new_hash[64] = '\0';
			}
			seen |= 4;
		} else if (is_key(p, "erased")) {
			rc = take_u64(p, &s->erased, "\"erased\" is a non-negative integer"), seen |= 8;
		} else {
			return bad(p, "an unknown member of a shard");
		}
		if (rc < 0)
			return rc;
	}
	return seen == 15 ? 0 : bad(p, "a shard needs split, old, new and erased");
}

/* An array of objects, each parsed by one of the three. */
static int parse_array(parser *p, kiln_ledger_entry *e, int kind)
{
	size_t cap = 0;
	int rc;

	if ((rc = expect(p, KILN_JSON_ARRAY_BEGIN, "refs, commits and shards are arrays")) < 0)
		return rc;
	for (;;) {
		if ((rc = next(p)) < 0)
			return rc;
		if (p->t.type == KILN_JSON_ARRAY_END)
			return 0;
		if (p->t.type != KILN_JSON_OBJECT_BEGIN)
			return bad(p, "refs, commits and shards hold objects");
		if (kind == 0) {
			if ((rc = KILN_ARRAY_GROW(e->refs, cap, e->ref_count, "ledger")) < 0 ||
			    (rc = parse_ref(p, &e->refs[e->ref_count])) < 0)
				return rc;
			e->ref_count++;
		} else if (kind == 1) {
			if ((rc = KILN_ARRAY_GROW(e->commits, cap, e->commit_count, "ledger")) < 0 ||
			    (rc = parse_pair(p, &e->commits[e->commit_count])) < 0)
				return rc;
			e->commit_count++;
		} else {
			if ((rc = KILN_ARRAY_GROW(e->shards, cap, e->shard_count, "ledger")) < 0 ||
			    (rc = parse_shard(p, &e->shards[e->shard_count])) < 0)
				return rc;
			e->shard_count++;
		}
	}
}

int kiln_ledger_parse(kiln_json_scanner *sc, const char *where, const char *text, size_t len,
                      kiln_ledger_entry *e)
{
	parser p = {.sc = sc, .where = where};
	char format[32] = "";
	int rc, seen = 0;

	memset(e, 0, sizeof(*e));
	kiln_json_scanner_reset(sc, text, len);
	if ((rc = expect(&p, KILN_JSON_OBJECT_BEGIN, "an entry is a JSON object")) < 0)
		return rc;
	for (;;) {
		if ((rc = next(&p)) < 0)
			return rc;
		if (p.t.type == KILN_JSON_OBJECT_END)
			break;
		if (is_key(&p, "format")) {
			rc = take_string(&p, format, sizeof(format), 0, "\"format\" is " KILN_LEDGER_FORMAT);
			if (rc == 0 && strcmp(format, KILN_LEDGER_FORMAT) != 0)
				rc = bad(&p, "\"format\" is not " KILN_LEDGER_FORMAT);
			seen |= 1;
		} else if (is_key(&p, "id")) {
			rc = take_string(&p, e->id, sizeof(e->id), 16, "\"id\" is 16 hex digits"), seen |= 2;
		} else if (is_key(&p, "dataset")) {
			rc = take_string(&p, e->dataset, sizeof(e->dataset), 0,
			                 "\"dataset\" is a dataset name");
			if (rc == 0 && !kiln_mfmt_name_valid(e->dataset))
				rc = bad(&p, "\"dataset\" is a dataset name");
			seen |= 4;
		} else if (is_key(&p, "time")) {
			uint64_t t;

			rc = take_u64(&p, &t, "\"time\" is seconds since the epoch");
			if (rc == 0 && t > (uint64_t)INT64_MAX)
				rc = bad(&p, "\"time\" is seconds since the epoch");
			e->time = (int64_t)t;
		} else if (is_key(&p, "subject")) {
			rc = take_string(&p, e->subject, sizeof(e->subject), 64,
			                 "\"subject\" is 64 hex digits"),
			seen |= 8;
		} else if (is_key(&p, "signer")) {
			if ((rc = next(&p)) == 0) {
				if (p.t.type != KILN_JSON_STRING || (p.t.flags & KILN_JSON_ESCAPED) ||
				    p.t.len >= sizeof(e->signer))
					rc = bad(&p, "\"signer\" is a key fingerprint");
				else {
					memcpy(e->signer, p.t.ptr, p.t.len);
					e->signer[p.t.len] = '\0';
				}
			}
		} else if (is_key(&p, "erased")) {
			if ((rc = expect(&p, KILN_JSON_OBJECT_BEGIN, "\"erased\" is an object")) < 0)
				return rc;
			for (;;) {
				kiln_split split;
				char name[16];

				if ((rc = next(&p)) < 0)
					return rc;
				if (p.t.type == KILN_JSON_OBJECT_END)
					break;
				if (p.t.len >= sizeof(name))
					return bad(&p, "\"erased\" counts train, dev and test");
				memcpy(name, p.t.ptr, p.t.len);
				name[p.t.len] = '\0';
				if (kiln_split_from_name(name, &split) < 0)
					return bad(&p, "\"erased\" counts train, dev and test");
				if ((rc = take_u64(&p, &e->erased[split],
				                   "an erased count is a non-negative integer")) < 0)
					return rc;
			}
		} else if (is_key(&p, "raw")) {
			rc = parse_zone(&p, &e->raw);
		} else if (is_key(&p, "quarantine")) {
			rc = parse_zone(&p, &e->quarantine);
		} else if (is_key(&p, "refs")) {
			rc = parse_array(&p, e, 0);
		} else if (is_key(&p, "commits")) {
			rc = parse_array(&p, e, 1);
		} else if (is_key(&p, "shards")) {
			rc = parse_array(&p, e, 2);
		} else {
			rc = bad(&p, "an unknown member");
		}
		if (rc < 0)
			return rc;
	}
	if (kiln_json_next(sc, &p.t) != 0)
		return bad(&p, "text after the entry");
	return seen == 15 ? 0 : bad(&p, "an entry needs format, id, dataset and subject");
}

/* ---- the ledger ref ------------------------------------------------------ */

static int ledger_ref(char *out, size_t cap, const char *dataset)
{
	if (!kiln_mfmt_name_valid(dataset))
		return kiln_error_set(KILN_EINVALID,
		                      "ledger: dataset name must match [a-z0-9][a-z0-9._-]{0,127}");
	snprintf(out, cap, KILN_LEDGER_REF_PREFIX "%s", dataset);
	return 0;
}

/* The tip's erasures/ tree (NULL when none) and the tip (zero when none). */
static int ledger_tip(kiln_manifest *m, const char *ref, git_oid *tip, git_tree **out_dir)
{
	git_repository *repo = kiln_manifest_repo(m);
	git_commit *commit = NULL;
	git_tree *root = NULL;
	git_tree_entry *entry = NULL;
	int gerr;

	*out_dir = NULL;
	memset(tip, 0, sizeof(*tip));
	gerr = git_reference_name_to_id(tip, repo, ref);
	if (gerr == GIT_ENOTFOUND) {
		memset(tip, 0, sizeof(*tip));
		return 0;
	}
	if (gerr < 0 || (gerr = git_commit_lookup(&commit, repo, tip)) < 0 ||
	    (gerr = git_commit_tree(&root, commit)) < 0) {
		git_commit_free(commit);
		return kiln_manifest_git_fail(m, gerr, ref);
	}
	if (git_tree_entry_bypath(&entry, root, "erasures") == 0 &&
	    git_tree_entry_type(entry) == GIT_OBJECT_TREE)
		gerr = git_tree_lookup(out_dir, repo, git_tree_entry_id(entry));
	else
		gerr = 0;
	git_tree_entry_free(entry);
	git_tree_free(root);
	git_commit_free(commit);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, ref) : 0;
}

int kiln_ledger_tip(kiln_manifest *m, const char *dataset, char out[41])
{
	char ref[KILN_MFMT_NAME_MAX + 32];
	git_oid tip;
	int gerr, rc;

	out[0] = '\0';
	if ((rc = ledger_ref(ref, sizeof(ref), dataset)) < 0)
		return rc;
	gerr = git_reference_name_to_id(&tip, kiln_manifest_repo(m), ref);
	if (gerr == GIT_ENOTFOUND)
		return 0;
	if (gerr < 0)
		return kiln_manifest_git_fail(m, gerr, ref);
	git_oid_tostr(out, 41, &tip);
	return 1;
}

/* Whether an entry file "<seq>-<id>.json" is named for id. */
static bool names_id(const char *file, const char *id)
{
	const char *dash = strchr(file, '-');

	return dash && strncmp(dash + 1, id, 16) == 0 && strcmp(dash + 17, ".json") == 0;
}

const kiln_retry_policy kiln_ledger_retry = {.first_us = 20000, .linear = true};

int kiln_ledger_append(kiln_manifest *m, const kiln_ledger_entry *e, const kiln_signing_key *key,
                       char out_commit[41])
{
	git_repository *repo = kiln_manifest_repo(m);
	char ref[sizeof(KILN_LEDGER_REF_PREFIX) + KILN_MFMT_NAME_MAX], file[64];
	kiln_buf text = KILN_BUF_INIT(0), message = KILN_BUF_INIT(0), armour = KILN_BUF_INIT(0);
	int rc;

	if ((rc = ledger_ref(ref, sizeof(ref), e->dataset)) < 0)
		return rc;
	if ((rc = kiln_ledger_render(&text, e)) < 0)
		return rc;
	for (int attempt = 0; attempt < 20; attempt++) {
		git_oid tip, blob_id, dir_id, root_id, commit_id;
		git_tree *dir = NULL, *root = NULL;
		git_treebuilder *dir_bld = NULL, *root_bld = NULL;
		git_commit *parent = NULL;
		git_signature *sig = NULL;
		git_reference *moved = NULL;
		git_buf content = GIT_BUF_INIT;
		const git_commit *parents[1];
		bool have_tip, exists = false;
		size_t count = 0;
		int gerr = 0;

		if ((rc = ledger_tip(m, ref, &tip, &dir)) < 0)
			break;
		have_tip = !git_oid_is_zero(&tip);
		for (size_t i = 0; dir && i < git_tree_entrycount(dir); i++) {
			count++;
			if (names_id(git_tree_entry_name(git_tree_entry_byindex(dir, i)), e->id)) {
				exists = true;
				git_oid_cpy(&commit_id, &tip);
			}
		}
		if (!exists) {
			snprintf(file, sizeof(file), "%04zu-%s.json", count + 1, e->id);
			kiln_buf_reset(&message);
			kiln_buf_reset(&armour);
			if (kiln_buf_printf(
			        &message,
			        "Erasure %s of %s\n\n%zu ref%s rewritten, %zu commit%s superseded.\n", e->id,
			        e->dataset, e->ref_count, e->ref_count == 1 ? "" : "s", e->commit_count,
			        e->commit_count == 1 ? "" : "s") < 0 ||
			    kiln_buf_putc(&message, '\0') < 0) {
				rc = kiln_error_oom("ledger");
				goto attempt_done;
			}
			if ((gerr = git_blob_create_from_buffer(&blob_id, repo, text.ptr, text.len)) < 0 ||
			    (gerr = git_treebuilder_new(&dir_bld, repo, dir)) < 0 ||
			    (gerr = git_treebuilder_insert(NULL, dir_bld, file, &blob_id,
			                                   GIT_FILEMODE_BLOB)) < 0 ||
			    (gerr = git_treebuilder_write(&dir_id, dir_bld)) < 0 ||
			    (gerr = git_treebuilder_new(&root_bld, repo, NULL)) < 0 ||
			    (gerr = git_treebuilder_insert(NULL, root_bld, "erasures", &dir_id,
			                                   GIT_FILEMODE_TREE)) < 0 ||
			    (gerr = git_treebuilder_write(&root_id, root_bld)) < 0 ||
			    (gerr = git_tree_lookup(&root, repo, &root_id)) < 0 ||
			    (have_tip && (gerr = git_commit_lookup(&parent, repo, &tip)) < 0) ||
			    (gerr = git_signature_now(&sig, "kiln", "kiln@localhost")) < 0) {
				rc = kiln_manifest_git_fail(m, gerr, ref);
				goto attempt_done;
			}
			parents[0] = parent;
			if ((gerr = git_commit_create_buffer(&content, repo, sig, sig, NULL, message.ptr,
			                                     root, have_tip ? 1 : 0, parents)) < 0) {
				rc = kiln_manifest_git_fail(m, gerr, ref);
				goto attempt_done;
			}
			if (key) {
				if ((rc = kiln_sshsig_sign(key, "git", content.ptr, content.size, &armour)) <
				    0)
					goto attempt_done;
				armour.ptr[armour.len - 1] = '\0';
			}
			if ((gerr = git_commit_create_with_signature(&commit_id, repo, content.ptr,
			                                             key ? armour.ptr : NULL,
			                                             key ? "gpgsig" : NULL)) < 0) {
				rc = kiln_manifest_git_fail(m, gerr, ref);
				goto attempt_done;
			}
			/* tip is the zero id when there is no ledger yet: then it must not exist */
			gerr = git_reference_create_matching(&moved, repo, ref, &commit_id, 1, &tip,
			                                     "kiln erase");
			if (gerr == GIT_EMODIFIED || gerr == GIT_EEXISTS || gerr == GIT_ELOCKED) {
				rc = KILN_ERETRY;
				goto attempt_done;
			}
			if (gerr < 0) {
				rc = kiln_manifest_git_fail(m, gerr, ref);
				goto attempt_done;
			}
		}
		if (out_commit)
			git_oid_tostr(out_commit, 41, &commit_id);
		rc = 0;
	attempt_done:
		git_buf_dispose(&content);
		git_reference_free(moved);
		git_signature_free(sig);
		git_commit_free(parent);
		git_treebuilder_free(root_bld);
		git_treebuilder_free(dir_bld);
		git_tree_free(root);
		git_tree_free(dir);
		if (rc != KILN_ERETRY)
			break;
		kiln_retry_sleep(&kiln_ledger_retry, (unsigned)attempt + 1);
	}
	if (rc == KILN_ERETRY)
		rc = kiln_error_set(KILN_ERETRY, "ledger: %s kept moving; try again", ref);
	kiln_buf_free(&text);
	kiln_buf_free(&message);
	kiln_buf_free(&armour);
	return rc;
}

static int entry_file_cmp(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	size_t lx = strcspn(x, "-"), ly = strcspn(y, "-");

	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x, y);
}

int kiln_ledger_each(kiln_manifest *m, const char *dataset,
                     int (*cb)(void *ctx, const kiln_ledger_entry *entry), void *ctx)
{
	char ref[sizeof(KILN_LEDGER_REF_PREFIX) + KILN_MFMT_NAME_MAX];
	kiln_json_scanner *sc = NULL;
	const char **names = NULL;
	git_tree *dir = NULL;
	git_oid tip;
	size_t n;
	int rc;

	if ((rc = ledger_ref(ref, sizeof(ref), dataset)) < 0 || (rc = ledger_tip(m, ref, &tip, &dir)) < 0 ||
	    !dir)
		return rc;
	n = git_tree_entrycount(dir);
	if (!(names = calloc(n + 1, sizeof(*names))) || !(sc = kiln_json_scanner_new(NULL))) {
		rc = kiln_error_oom("ledger");
		goto cleanup;
	}
	for (size_t i = 0; i < n; i++)
		names[i] = git_tree_entry_name(git_tree_entry_byindex(dir, i));
	qsort(names, n, sizeof(*names), entry_file_cmp);
	for (size_t i = 0; i < n && rc == 0; i++) {
		const git_tree_entry *te = git_tree_entry_byname(dir, names[i]);
		kiln_ledger_entry e;
		git_blob *blob = NULL;
		char where[512];
		int gerr;

		snprintf(where, sizeof(where), "manifest %s: %s:erasures/%s", kiln_manifest_path(m), ref,
		         names[i]);
		if (git_tree_entry_type(te) != GIT_OBJECT_BLOB) {
			rc = kiln_error_set(KILN_EINVALID, "%s: not a file", where);
			break;
		}
		if ((gerr = git_blob_lookup(&blob, kiln_manifest_repo(m), git_tree_entry_id(te))) < 0) {
			rc = kiln_manifest_git_fail(m, gerr, where);
			break;
		}
		rc = kiln_ledger_parse(sc, where, git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob),
		                       &e);
		if (rc == 0 && (strcmp(e.dataset, dataset) != 0 || !names_id(names[i], e.id)))
			rc = kiln_error_set(KILN_EINVALID, "%s: the entry's dataset or id is not the file's",
			                    where);
		if (rc == 0)
			rc = cb(ctx, &e);
		kiln_ledger_entry_free(&e);
		git_blob_free(blob);
	}
cleanup:
	kiln_json_scanner_free(sc);
	free(names);
	git_tree_free(dir);
	return rc;
}

int kiln_ledger_datasets(kiln_manifest *m, int (*cb)(void *ctx, const char *dataset), void *ctx)
{
	git_reference_iterator *it = NULL;
	git_reference *ref = NULL;
	int gerr, rc = 0;

	if ((gerr = git_reference_iterator_glob_new(&it, kiln_manifest_repo(m), KILN_LEDGER_REF_PREFIX "*")) <
	    0)
		return kiln_manifest_git_fail(m, gerr, "listing refs");
	while (rc == 0 && (gerr = git_reference_next(&ref, it)) == 0) {
		const char *ds = git_reference_name(ref) + strlen(KILN_LEDGER_REF_PREFIX);

		if (kiln_mfmt_name_valid(ds))
			rc = cb(ctx, ds);
		git_reference_free(ref);
	}
	if (rc == 0 && gerr != GIT_ITEROVER)
		rc = kiln_manifest_git_fail(m, gerr, "listing refs");
	git_reference_iterator_free(it);
	return rc;
}

typedef struct id_list {
	char **v;
	size_t n, cap;
	kiln_manifest *m;
	bool shards; /* the superseded shards, not the git objects */
} id_list;

static int id_push(id_list *l, const char *id)
{
	int rc;

	if ((rc = KILN_ARRAY_GROW(l->v, l->cap, l->n, "ledger")) < 0)
		return rc;
	if (!(l->v[l->n] = strdup(id)))
		return kiln_error_oom("ledger");
	l->n++;
	return 0;
}

static int collect_entry(void *ctx, const kiln_ledger_entry *e)
{
	id_list *l = ctx;
	int rc = 0;

	if (l->shards) {
		for (size_t i = 0; i < e->shard_count && rc == 0; i++)
			rc = id_push(l, e->shards[i].old_hash);
		return rc;
	}
	for (size_t i = 0; i < e->ref_count && rc == 0; i++) {
		rc = id_push(l, e->refs[i].old_id);
		if (rc == 0 && strcmp(e->refs[i].old_id, e->refs[i].old_commit) != 0)
			rc = id_push(l, e->refs[i].old_commit);
	}
	for (size_t i = 0; i < e->commit_count && rc == 0; i++)
		rc = id_push(l, e->commits[i].old_id);
	return rc;
}

static int collect_dataset(void *ctx, const char *dataset)
{
	id_list *l = ctx;

	return kiln_ledger_each(l->m, dataset, collect_entry, l);
}

void kiln_ledger_ids_free(char **ids, size_t n)
{
	for (size_t i = 0; ids && i < n; i++)
		free(ids[i]);
	free(ids);
}

static int id_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int superseded(kiln_manifest *m, bool shards, char ***out, size_t *out_n)
{
	id_list l = {.m = m, .shards = shards};
	int rc = kiln_ledger_datasets(m, collect_dataset, &l);

	if (rc < 0) {
		kiln_ledger_ids_free(l.v, l.n);
		return rc;
	}
	if (l.n)
		qsort(l.v, l.n, sizeof(*l.v), id_cmp);
	*out = l.v;
	*out_n = l.n;
	return 0;
}

int kiln_ledger_superseded(kiln_manifest *m, char ***out, size_t *out_n)
{
	return superseded(m, false, out, out_n);
}

int kiln_ledger_superseded_shards(kiln_manifest *m, char ***out, size_t *out_n)
{
	return superseded(m, true, out, out_n);
}

typedef struct successor_ctx {
	char want[41];
	size_t n;
	bool found;
	char erasure[17], commit[41];
	int64_t time;
} successor_ctx;

static int find_successor(void *ctx, const kiln_ledger_entry *e)
{
	successor_ctx *s = ctx;

	for (size_t i = 0; i < e->commit_count; i++)
		if (strncmp(e->commits[i].old_id, s->want, s->n) == 0) {
			s->found = true;
			memcpy(s->erasure, e->id, 17);
			memcpy(s->commit, e->commits[i].new_id, 41);
			s->time = e->time;
			/* a later entry may supersede the successor: follow it */
			memcpy(s->want, e->commits[i].new_id, 41);
			s->n = 40;
			return 0;
		}
	return 0;
}

int kiln_ledger_successor(kiln_manifest *m, const char *dataset, const char *hex, size_t n,
                          char out_erasure[17], int64_t *out_time, char out_commit[41])
{
	successor_ctx s = {.n = n < 40 ? n : 40};
	int rc;

	memcpy(s.want, hex, s.n);
	if ((rc = kiln_ledger_each(m, dataset, find_successor, &s)) < 0)
		return rc;
	if (!s.found)
		return 0;
	memcpy(out_erasure, s.erasure, 17);
	memcpy(out_commit, s.commit, 41);
	*out_time = s.time;
	return 1;
}

typedef struct chain {
	char cur[41];
} chain;

static int follow(void *ctx, const kiln_ledger_entry *e)
{
	chain *c = ctx;

	for (size_t i = 0; i < e->ref_count; i++)
		if (strcmp(e->refs[i].old_id, c->cur) == 0) {
			memcpy(c->cur, e->refs[i].new_id, 41);
			break;
		}
	return 0;
}

int kiln_ledger_ref_successor(kiln_manifest *m, const char *dataset, const char *old_id, char out[41])
{
	chain c;
	int rc;

	snprintf(c.cur, sizeof(c.cur), "%.40s", old_id);
	if ((rc = kiln_ledger_each(m, dataset, follow, &c)) < 0)
		return rc;
	if (strncmp(c.cur, old_id, 40) == 0)
		return 0;
	memcpy(out, c.cur, 41);
	return 1;
}

/* ---- the journal -------------------------------------------------------- */

static int journal_path(kiln_manifest *m, const char *dataset, char *out, size_t cap)
{
	if (!kiln_mfmt_name_valid(dataset))
		return kiln_error_set(KILN_EINVALID,
		                      "ledger: dataset name must match [a-z0-9][a-z0-9._-]{0,127}");
	if ((size_t)snprintf(out, cap, "%s/kiln-erase-%s.journal", kiln_manifest_path(m), dataset) >= cap)
		return kiln_error_set(KILN_EINVALID, "ledger: the manifest path is too long");
	return 0;
}

int kiln_ledger_journal_write(kiln_manifest *m, const char *dataset, const kiln_buf *text)
{
	char path[4096];
	int rc;

	if ((rc = journal_path(m, dataset, path, sizeof(path))) < 0)
		return rc;
	kiln_fs_remove_stale_temps(path);
	return kiln_fs_write_atomic(path, text->ptr ? text->ptr : "", text->len, 0600);
}

int kiln_ledger_journal_read(kiln_manifest *m, const char *dataset, kiln_buf *out)
{
	char path[4096], chunk[65536];
	struct stat st;
	ssize_t n;
	int fd, rc = 1;

	if ((rc = journal_path(m, dataset, path, sizeof(path))) < 0)
		return rc;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		if (errno == ENOENT)
			return 0;
		return kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)1 << 30) {
		close(fd);
		return kiln_error_set(KILN_EINVALID, "%s: not a journal kiln wrote", path);
	}
	rc = 1;
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		if (kiln_buf_put(out, chunk, (size_t)n) < 0) {
			rc = kiln_error_oom("ledger");
			break;
		}
	if (n < 0)
		rc = kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
	close(fd);
	return rc;
}

int kiln_ledger_journal_remove(kiln_manifest *m, const char *dataset)
{
	char path[4096];
	int rc;

	if ((rc = journal_path(m, dataset, path, sizeof(path))) < 0)
		return rc;
	if (unlink(path) < 0 && errno != ENOENT)
		return kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
	kiln_fs_remove_stale_temps(path); /* a kill -9 during a journal write */
	return 0;
}
