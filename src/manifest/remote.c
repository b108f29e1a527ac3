/* Pushing and fetching dataset refs (see remote.h). A local remote (a path or
 * file:// URL) is updated directly: the objects it lacks are packed into its
 * objects/pack, then its ref moves with a compare-and-swap, so two pushers can
 * never overwrite each other. Other URLs go through libgit2's transports,
 * whose servers check the old value themselves. A rejected branch push is
 * rebased on the remote tip (rebase.c). Everything parsed here lives for one
 * call. */
#include "manifest/remote.h"
#include "manifest/internal.h"
#include "manifest/rebase.h"

/* The expected old value "no such ref": libgit2 checks it under the ref's
 * lock, so of two writers creating one ref only one wins (a plain create
 * checks before locking and could let the second overwrite the first). */
static const git_oid absent = {{0}};

#include <git2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sodium.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/array.h"
#include "core/error.h"
#include "manifest/format.h"
#include "manifest/ledger.h"
#include "core/json.h"

const kiln_retry_policy kiln_remote_push_retry = {
    .first_us = 20000, .linear = true, .jitter = KILN_RETRY_STEP};

static const char *git_message(void)
{
	const git_error *e = git_error_last();

	return e && e->message ? e->message : "unknown libgit2 error";
}

static int remote_fail(int code, const char *url, const char *what)
{
	char u[512];

	kiln_remote_safe_url(u, sizeof(u), url);
	return kiln_error_set(code, "remote %s: %s: %s", u, what, git_message());
}

static int parse_ref(const char *ref, kiln_ref_parts *out)
{
	const char *rest, *slash;
	int valid = 0;

	memset(out, 0, sizeof(*out));
	if (strncmp(ref, "refs/heads/", 11) == 0) {
		rest = ref + 11;
	} else if (strncmp(ref, "refs/tags/", 10) == 0) {
		rest = ref + 10;
		out->tag = true;
	} else {
		goto bad;
	}
	slash = strchr(rest, '/');
	if (!slash || !kiln_mfmt_name_valid_n(rest, (size_t)(slash - rest)) ||
	    !kiln_mfmt_name_valid_n(slash + 1, strlen(slash + 1)) ||
	    git_reference_name_is_valid(&valid, ref) < 0 || !valid)
		goto bad;
	memcpy(out->dataset, rest, (size_t)(slash - rest));
	strcpy(out->name, slash + 1);
	return 0;
bad:
	return kiln_error_set(KILN_EINVALID,
	                      "remote: %s is not refs/heads/<dataset>/<branch> or refs/tags/<dataset>/<tag> "
	                      "with names of [a-z0-9][a-z0-9._-]*",
	                      ref);
}

/* ---- talking to the remote --------------------------------------------------- */

typedef struct head {
	char *name;
	git_oid id;
} head;

typedef struct heads {
	head *v;
	size_t n, cap;
} heads;

static void heads_free(heads *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->v[i].name);
	free(h->v);
	memset(h, 0, sizeof(*h));
}

typedef struct callbacks_state {
	int credential_tries;
	bool rejected;
	char status[256];
} callbacks_state;

/* ssh: keys from the ssh-agent, once; everything else: libgit2's defaults. */
static int credentials(git_credential **out, const char *url, const char *username, unsigned int allowed,
                       void *payload)
{
	callbacks_state *s = payload;

	(void)url;
	if (!(allowed & GIT_CREDENTIAL_SSH_KEY) || s->credential_tries++ > 0)
		return GIT_PASSTHROUGH;
	return git_credential_ssh_key_from_agent(out, username ? username : "git");
}

static int push_status(const char *refname, const char *status, void *payload)
{
	callbacks_state *s = payload;

	(void)refname;
	if (status) {
		s->rejected = true;
		snprintf(s->status, sizeof(s->status), "%s", status);
	}
	return 0;
}

static void init_callbacks(git_remote_callbacks *cb, callbacks_state *s)
{
	git_remote_init_callbacks(cb, GIT_REMOTE_CALLBACKS_VERSION);
	cb->credentials = credentials;
	cb->push_update_reference = push_status;
	cb->payload = s;
}

/* An in-memory remote for url. url.<base>.insteadOf rewriting is skipped:
 * the URL is used as given (and libgit2 1.5's insteadOf lookup leaks PCRE2
 * match data on every call; libgit2 PR #6382). */
static int remote_new(git_remote **out, kiln_manifest *m, const char *url)
{
	git_remote_create_options o;

	git_remote_create_options_init(&o, GIT_REMOTE_CREATE_OPTIONS_VERSION);
	o.repository = kiln_manifest_repo(m);
	o.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
	return git_remote_create_with_opts(out, url, &o);
}

/* Lists the remote's refs that `match` selects and downloads their objects;
 * out gets their names and ids. */
static int remote_download(kiln_manifest *m, const char *url,
                           bool (*match)(const char *name, const void *arg), const void *arg, heads *out)
{
	git_remote *remote = NULL;
	git_remote_callbacks cb;
	callbacks_state state = {0};
	const git_remote_head **ls;
	git_fetch_options fo;
	git_strarray specs = {0};
	size_t n;
	int gerr, rc = 0;

	memset(out, 0, sizeof(*out));
	init_callbacks(&cb, &state);
	if ((gerr = remote_new(&remote, m, url)) < 0 ||
	    (gerr = git_remote_connect(remote, GIT_DIRECTION_FETCH, &cb, NULL, NULL)) < 0 ||
	    (gerr = git_remote_ls(&ls, &n, remote)) < 0) {
		rc = remote_fail(gerr == GIT_ENOTFOUND ? KILN_ENOTFOUND : KILN_ERETRY, url, "connecting");
		goto cleanup;
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(ls[i]->name);

		if ((len > 3 && strcmp(ls[i]->name + len - 3, "^{}") == 0) || !match(ls[i]->name, arg))
			continue;
		if ((rc = KILN_ARRAY_GROW(out->v, out->cap, out->n, "remote")) < 0)
			goto cleanup;
		if (!(out->v[out->n].name = strdup(ls[i]->name))) {
			rc = kiln_error_oom("remote");
			goto cleanup;
		}
		git_oid_cpy(&out->v[out->n++].id, &ls[i]->oid);
	}
	if (out->n == 0)
		goto cleanup;
	if (!(specs.strings = calloc(out->n, sizeof(char *)))) {
		rc = kiln_error_oom("remote");
		goto cleanup;
	}
	for (size_t i = 0; i < out->n; i++)
		specs.strings[i] = out->v[i].name;
	specs.count = out->n;
	git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
	fo.callbacks = cb;
	fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
	if ((gerr = git_remote_download(remote, &specs, &fo)) < 0)
		rc = remote_fail(KILN_ERETRY, url, "fetching");
cleanup:
	free(specs.strings);
	if (remote)
		git_remote_disconnect(remote);
	git_remote_free(remote);
	if (rc < 0)
		heads_free(out);
	return rc;
}

/* A path for a local remote (path or file:// URL), else NULL. */
static char *local_path(const char *url)
{
	const char *colon = strchr(url, ':'), *slash = strchr(url, '/');

	if (strncmp(url, "file://", 7) == 0)
		return strdup(url + 7);
	if (strstr(url, "://") || (colon && (!slash || colon < slash)))
		return NULL; /* a URL, or scp-like host:path */
	return strdup(url);
}

/* Pushes to a bare repository on this machine: objects first (a pack), then
 * the ref with a compare-and-swap. KILN_EMODIFIED: not a fast-forward. */
static int push_local(kiln_manifest *m, const char *path, const char *url, const char *ref, bool tag,
                      const git_oid *local)
{
	git_repository *repo = kiln_manifest_repo(m), *rrepo = NULL;
	git_reference_iterator *it = NULL;
	git_reference *r = NULL, *moved = NULL;
	git_revwalk *walk = NULL;
	git_packbuilder *pb = NULL;
	git_object *obj = NULL, *peeled = NULL;
	git_odb *odb = NULL;
	git_buf dir = {0};
	git_oid remote;
	bool have_remote;
	char *pack_dir = NULL;
	int gerr, rc = 0;

	if ((gerr = git_repository_open_bare(&rrepo, path)) < 0) {
		rc = remote_fail(gerr == GIT_ENOTFOUND ? KILN_ENOTFOUND : KILN_EIO, url,
		                 "opening (a bare repository is needed)");
		goto cleanup;
	}
	gerr = git_reference_name_to_id(&remote, rrepo, ref);
	if (gerr < 0 && gerr != GIT_ENOTFOUND) {
		rc = remote_fail(KILN_EIO, url, ref);
		goto cleanup;
	}
	have_remote = gerr == 0;
	if (have_remote && git_oid_equal(&remote, local))
		goto cleanup; /* up to date */
	if (have_remote && tag) {
		rc = KILN_EMODIFIED;
		goto cleanup;
	}
	if ((gerr = git_repository_odb(&odb, repo)) < 0 ||
	    (gerr = git_object_lookup(&obj, repo, local, GIT_OBJECT_ANY)) < 0 ||
	    (gerr = git_object_peel(&peeled, obj, GIT_OBJECT_COMMIT)) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, ref);
		goto cleanup;
	}
	if (have_remote && (!git_odb_exists(odb, &remote) ||
	                    git_graph_descendant_of(repo, git_object_id(peeled), &remote) != 1)) {
		rc = KILN_EMODIFIED; /* the remote has commits this branch lacks */
		goto cleanup;
	}

	/* the objects: everything reachable from the ref that no remote ref reaches */
	if ((gerr = git_revwalk_new(&walk, repo)) < 0 ||
	    (gerr = git_revwalk_push(walk, git_object_id(peeled))) < 0 ||
	    (gerr = git_reference_iterator_glob_new(&it, rrepo, "refs/*")) < 0) {
		rc = kiln_manifest_git_fail(m, gerr, "push");
		goto cleanup;
	}
	while (git_reference_next(&r, it) == 0) {
		git_object *o = NULL, *c = NULL;
		const git_oid *t = git_reference_target(r);

		if (t && git_odb_exists(odb, t) && git_object_lookup(&o, repo, t, GIT_OBJECT_ANY) == 0 &&
		    git_object_peel(&c, o, GIT_OBJECT_COMMIT) == 0)
			git_revwalk_hide(walk, git_object_id(c));
		git_object_free(c);
		git_object_free(o);
		git_reference_free(r);
		r = NULL;
	}
	if ((gerr = git_packbuilder_new(&pb, repo)) < 0 ||
	    (gerr = git_packbuilder_insert_walk(pb, walk)) < 0 ||
	    (!git_oid_equal(local, git_object_id(peeled)) &&
	     (gerr = git_packbuilder_insert(pb, local, NULL)) < 0)) {
		rc = kiln_manifest_git_fail(m, gerr, "packing objects");
		goto cleanup;
	}
	if (git_packbuilder_object_count(pb) > 0) {
		if ((gerr = git_repository_item_path(&dir, rrepo, GIT_REPOSITORY_ITEM_OBJECTS)) < 0 ||
		    asprintf(&pack_dir, "%s%spack", dir.ptr,
		             dir.size && dir.ptr[dir.size - 1] == '/' ? "" : "/") < 0) {
			pack_dir = NULL;
			rc = gerr < 0 ? remote_fail(KILN_EIO, url, "objects") : kiln_error_oom("remote");
			goto cleanup;
		}
		if ((gerr = git_packbuilder_write(pb, pack_dir, 0, NULL, NULL)) < 0) {
			rc = remote_fail(KILN_EIO, url, "writing objects");
			goto cleanup;
		}
	}

	/* the ref, only from the value read above */
	if (have_remote)
		gerr = git_reference_create_matching(&moved, rrepo, ref, local, 1, &remote, "kiln: push");
	else
		gerr = git_reference_create_matching(&moved, rrepo, ref, local, 1, &absent, "kiln: push");
	if (gerr == GIT_EMODIFIED || gerr == GIT_EEXISTS || gerr == GIT_ELOCKED)
		rc = KILN_EMODIFIED; /* another pusher got there first (or holds the lock): fetch, rebase,
		                        retry */
	else if (gerr < 0)
		rc = remote_fail(KILN_EIO, url, ref);
	else if (!tag && git_repository_head_unborn(rrepo) == 1)
		git_repository_set_head(rrepo, ref);
cleanup:
	free(pack_dir);
	git_buf_dispose(&dir);
	git_reference_free(moved);
	git_reference_free(r);
	git_reference_iterator_free(it);
	git_packbuilder_free(pb);
	git_revwalk_free(walk);
	git_object_free(peeled);
	git_object_free(obj);
	git_odb_free(odb);
	git_repository_free(rrepo);
	return rc;
}

/* Through libgit2's transports. KILN_EMODIFIED: rejected as not a fast-forward. */
static int push_network(kiln_manifest *m, const char *url, const char *ref, char *status, size_t status_cap)
{
	git_remote *remote = NULL;
	git_push_options po;
	callbacks_state state = {0};
	char spec[2 * KILN_REMOTE_REF_CAP + 2];
	char *specs[] = {spec};
	git_strarray arr = {specs, 1};
	int gerr, rc = 0;

	snprintf(spec, sizeof(spec), "%s:%s", ref, ref);
	git_push_options_init(&po, GIT_PUSH_OPTIONS_VERSION);
	init_callbacks(&po.callbacks, &state);
	if ((gerr = remote_new(&remote, m, url)) < 0) {
		rc = remote_fail(KILN_EINVALID, url, "push");
		goto cleanup;
	}
	gerr = git_remote_push(remote, &arr, &po);
	if (gerr == GIT_ENONFASTFORWARD) {
		snprintf(status, status_cap, "%s", git_message());
		rc = KILN_EMODIFIED;
	} else if (gerr < 0) {
		rc = remote_fail(KILN_ERETRY, url, "push");
	} else if (state.rejected) {
		snprintf(status, status_cap, "%s", state.status);
		rc = KILN_EMODIFIED;
	}
cleanup:
	git_remote_free(remote);
	return rc;
}

static bool match_exact(const char *name, const void *arg)
{
	return strcmp(name, (const char *)arg) == 0;
}

int kiln_manifest_push(kiln_manifest *m, const char *url, const char *ref)
{
	git_repository *repo = kiln_manifest_repo(m);
	kiln_ref_parts parts;
	char *path = local_path(url), status[256] = "", u[512];
	int rc, gerr;

	kiln_remote_safe_url(u, sizeof(u), url);
	if ((rc = parse_ref(ref, &parts)) < 0)
		goto cleanup;
	for (int attempt = 1;; attempt++) {
		heads h;
		git_oid local;

		if ((gerr = git_reference_name_to_id(&local, repo, ref)) < 0) {
			rc = gerr == GIT_ENOTFOUND
			         ? kiln_error_set(KILN_ENOTFOUND, "manifest %s: no %s to push",
			                          kiln_manifest_path(m), ref)
			         : kiln_manifest_git_fail(m, gerr, ref);
			goto cleanup;
		}
		rc = path ? push_local(m, path, url, ref, parts.tag, &local)
		          : push_network(m, url, ref, status, sizeof(status));
		if (rc != KILN_EMODIFIED)
			goto cleanup;
		if (parts.tag) {
			rc = kiln_error_set(
			    KILN_EINVALID,
			    "remote %s: %s exists there with another target; tags are never overwritten", u,
			    ref);
			goto cleanup;
		}
		if (attempt >= KILN_REMOTE_RETRIES) {
			rc = kiln_error_set(KILN_ERETRY,
			                    "remote %s: %s kept moving; gave up after %d attempts%s%s", u,
			                    ref, attempt, status[0] ? ": " : "", status);
			goto cleanup;
		}
		/* fetch the remote branch, rebase onto it, try again, after a short
		 * randomised pause so that racing pushers do not collide again */
		kiln_retry_sleep(&kiln_remote_push_retry, (unsigned)attempt);
		if ((rc = remote_download(m, url, match_exact, ref, &h)) < 0)
			goto cleanup;
		rc = h.n ? kiln_remote_integrate_branch(m, url, ref, &parts, &h.v[0].id) : 0;
		heads_free(&h);
		if (rc < 0 && rc != KILN_EMODIFIED)
			goto cleanup;
	}
cleanup:
	free(path);
	return rc;
}

/* ---- fetch ----------------------------------------------------------------- */

typedef struct dataset_refs {
	char heads[KILN_REMOTE_REF_CAP], tags[KILN_REMOTE_REF_CAP], ledger[KILN_REMOTE_REF_CAP];
} dataset_refs;

static bool match_dataset(const char *name, const void *arg)
{
	const dataset_refs *d = arg;
	const char *rest = NULL;

	if (strcmp(name, d->ledger) == 0)
		return true;
	if (strncmp(name, d->heads, strlen(d->heads)) == 0)
		rest = name + strlen(d->heads);
	else if (strncmp(name, d->tags, strlen(d->tags)) == 0)
		rest = name + strlen(d->tags);
	return rest && kiln_mfmt_name_valid_n(rest, strlen(rest));
}

/* 1 when the dataset's ledger (as fetched) shows old superseded by new
 * through one erasure or several, 0 when not. */
static int erased_successor(kiln_manifest *m, const char *dataset, const git_oid *old, const git_oid *new)
{
	char from[41], to[41], succ[41];
	int rc;

	git_oid_tostr(from, sizeof(from), old);
	git_oid_tostr(to, sizeof(to), new);
	if ((rc = kiln_ledger_ref_successor(m, dataset, from, succ)) <= 0)
		return rc;
	return strcmp(succ, to) == 0 ? 1 : 0;
}

/* A local branch whose tip the ledger names superseded by a commit the
 * remote's tip is or descends from: set to the remote's tip (never rebased, which would bring erased commits
 * back). 1 when taken so, 0 when the branch is integrated as usual. */
static int take_erased_branch(kiln_manifest *m, const kiln_ref_parts *parts, const char *name,
                              const git_oid *id)
{
	git_reference *made = NULL;
	git_oid local;
	int gerr, rc;

	if (git_reference_name_to_id(&local, kiln_manifest_repo(m), name) < 0 || git_oid_equal(&local, id))
		return 0;
	char hex[41], next[41];
	git_oid succ;

	git_oid_tostr(hex, sizeof(hex), &local);
	if ((rc = kiln_ledger_ref_successor(m, parts->dataset, hex, next)) <= 0)
		return rc;
	/* the remote's tip neither is its successor nor descends from it */
	if (git_oid_fromstr(&succ, next) < 0 ||
	    (!git_oid_equal(&succ, id) && git_graph_descendant_of(kiln_manifest_repo(m), id, &succ) != 1))
		return 0;
	gerr = git_reference_create_matching(&made, kiln_manifest_repo(m), name, id, 1, &local,
	                                     "kiln: fetched (erasure)");
	git_reference_free(made);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, name) : 1;
}

int kiln_manifest_fetch(kiln_manifest *m, const char *url, const char *dataset)
{
	git_repository *repo = kiln_manifest_repo(m);
	dataset_refs d;
	heads h = {0};
	char first_error[1024] = "", u[512];
	int first_code = 0, rc;

	kiln_remote_safe_url(u, sizeof(u), url);
	if (!kiln_mfmt_name_valid(dataset))
		return kiln_error_set(KILN_EINVALID,
		                      "remote: dataset name must match [a-z0-9][a-z0-9._-]{0,127}");
	snprintf(d.heads, sizeof(d.heads), "refs/heads/%s/", dataset);
	snprintf(d.tags, sizeof(d.tags), "refs/tags/%s/", dataset);
	snprintf(d.ledger, sizeof(d.ledger), KILN_LEDGER_REF_PREFIX "%s", dataset);
	if ((rc = remote_download(m, url, match_dataset, &d, &h)) < 0)
		return rc;
	/* the erasure ledger first: the remote's, as it is (it only grows there) */
	for (size_t i = 0; i < h.n; i++) {
		git_reference *made = NULL;
		int gerr;

		if (strcmp(h.v[i].name, d.ledger) != 0)
			continue;
		gerr = git_reference_create(&made, repo, d.ledger, &h.v[i].id, 1, "kiln: fetched");
		git_reference_free(made);
		if (gerr < 0) {
			rc = kiln_manifest_git_fail(m, gerr, d.ledger);
			goto cleanup;
		}
	}
	for (size_t i = 0; i < h.n; i++) {
		kiln_ref_parts parts;
		git_reference *made = NULL;
		git_oid local;
		int gerr;

		if (strcmp(h.v[i].name, d.ledger) == 0)
			continue;
		if ((rc = parse_ref(h.v[i].name, &parts)) < 0)
			goto next;
		if (!parts.tag && (rc = take_erased_branch(m, &parts, h.v[i].name, &h.v[i].id)) != 0) {
			rc = rc < 0 ? rc : 0;
			goto next;
		}
		if (!parts.tag) {
			/* a branch that moves while we integrate it: read it again */
			for (int attempt = 0; attempt < KILN_REMOTE_RETRIES; attempt++)
				if ((rc = kiln_remote_integrate_branch(m, url, h.v[i].name, &parts,
				                                       &h.v[i].id)) != KILN_EMODIFIED)
					break;
			goto next;
		}
		gerr = git_reference_name_to_id(&local, repo, h.v[i].name);
		if (gerr == GIT_ENOTFOUND) {
			gerr = git_reference_create(&made, repo, h.v[i].name, &h.v[i].id, 0, "kiln: fetched");
			git_reference_free(made);
			if (gerr == GIT_EEXISTS && git_reference_name_to_id(&local, repo, h.v[i].name) == 0)
				gerr = 0;
			else if (gerr == 0)
				git_oid_cpy(&local, &h.v[i].id);
		}
		if (gerr == 0 && !git_oid_equal(&local, &h.v[i].id) &&
		    (rc = erased_successor(m, parts.dataset, &local, &h.v[i].id)) != 0) {
			if (rc == 1) { /* superseded by an erasure: the remote's replaces it */
				gerr = git_reference_create(&made, repo, h.v[i].name, &h.v[i].id, 1,
				                            "kiln: fetched (erasure)");
				git_reference_free(made);
				git_oid_cpy(&local, &h.v[i].id);
			}
			if (rc < 0)
				goto next;
		}
		if (gerr < 0)
			rc = kiln_manifest_git_fail(m, gerr, h.v[i].name);
		else if (!git_oid_equal(&local, &h.v[i].id))
			rc = kiln_error_set(
			    KILN_EINVALID,
			    "manifest %s: %s differs from the one at %s; tags are never overwritten",
			    kiln_manifest_path(m), h.v[i].name, u);
		else
			rc = 0;
	next:
		if (rc < 0 && rc != KILN_EINVALID && rc != KILN_EMODIFIED)
			goto cleanup; /* I/O: stop */
		if (rc < 0 && !first_code) {
			first_code = rc;
			snprintf(first_error, sizeof(first_error), "%s", kiln_error_last());
		}
	}
	rc = first_code ? kiln_error_set(first_code, "%s", first_error) : 0;
cleanup:
	heads_free(&h);
	return rc;
}
