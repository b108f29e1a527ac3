/* The manifest repository (see manifest.h): opens or creates it, reads back
 * the files of a branch tip (lineage.json, stats.json, any path) and writes
 * tags with their governance record. The commit path is in commit.c. A
 * handle owns its git_repository; everything else lives for one call. */
#include "manifest/manifest.h"
#include "manifest/format.h"
#include "manifest/loose.h"
#include "manifest/internal.h"

#include <dirent.h>
#include <errno.h>
#include <sodium.h>
#include <git2.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/fs.h"
#include "core/error.h"
#include "core/json.h"
#include "manifest/replayed.h"
#include "manifest/sshsig.h"
#include "quality/profile.h"

#define HASH_LEN 64

struct kiln_manifest {
	git_repository *repo;
	char *path;
};

static pthread_once_t git_once = PTHREAD_ONCE_INIT;

static void git_init_once(void)
{
	git_libgit2_init();
}

static pthread_once_t libgit2_version_once = PTHREAD_ONCE_INIT;
static char libgit2_version[32];

static void libgit2_version_init(void)
{
	int major = 0, minor = 0, rev = 0;

	git_libgit2_version(&major, &minor, &rev);
	snprintf(libgit2_version, sizeof(libgit2_version), "%d.%d.%d", major, minor, rev);
}

const char *kiln_manifest_libgit2_version(void)
{
	pthread_once(&libgit2_version_once, libgit2_version_init);
	return libgit2_version;
}

/* libgit2's message for the last failure, never NULL. */
const char *kiln_manifest_git_message(void)
{
	const git_error *e = git_error_last();

	return e && e->message ? e->message : "unknown libgit2 error";
}

/* A kiln code for a libgit2 failure: a held lock is transient. */
static int git_code(int gerr)
{
	switch (gerr) {
	case GIT_ENOTFOUND:
		return KILN_ENOTFOUND;
	case GIT_ELOCKED:
		return KILN_ERETRY;
	case GIT_EMODIFIED:
	case GIT_EEXISTS:
		return KILN_EMODIFIED;
	case GIT_EINVALIDSPEC:
		return KILN_EINVALID;
	default:
		return KILN_EIO;
	}
}

/* Whether a libgit2 failure (gerr) came from the disk running out of room:
 * the errno it left (saved_errno), its message, or the repository's file
 * system with no block or inode left (libgit2 reports some failed writes
 * as "unknown", or as a ref's target, just written, missing). A plain
 * "not found" is what it says, full disk or not. */
static bool disk_full(const kiln_manifest *m, int gerr, int saved_errno)
{
	const char *msg = kiln_manifest_git_message();
	struct statvfs vfs;

	if (saved_errno == ENOSPC || saved_errno == EDQUOT)
		return true;
	if (strstr(msg, strerror(ENOSPC)) || strstr(msg, strerror(EDQUOT)))
		return true;
	if (gerr == GIT_ENOTFOUND && !strstr(msg, "target OID"))
		return false;
	return statvfs(m->path, &vfs) == 0 && (vfs.f_bavail == 0 || (vfs.f_files && vfs.f_favail == 0));
}

static int git_fail(const kiln_manifest *m, int gerr, const char *what)
{
	int saved_errno = errno;

	if (gerr != GIT_ELOCKED && gerr != GIT_EMODIFIED && gerr != GIT_EEXISTS &&
	    disk_full(m, gerr, saved_errno))
		return kiln_error_set(KILN_EIO,
		                      "manifest %s: %s: disk full (no space left on the file system "
		                      "holding the manifest repository)",
		                      m->path, what);
	return kiln_error_set(git_code(gerr), "manifest %s: %s: %s", m->path, what,
	                      kiln_manifest_git_message());
}

/* ---- names ---------------------------------------------------------------- */

/* refs/heads/<dataset>/<branch> into out, after checking both names (and that
 * git accepts the whole name: no "..", no ".lock" or "." at the end). */
int kiln_manifest_branch_ref(char *out, size_t cap, const char *dataset, const char *branch)
{
	int valid = 0;

	if (!kiln_mfmt_name_valid(dataset))
		return kiln_error_set(KILN_EINVALID,
		                      "manifest: dataset name must match [a-z0-9][a-z0-9._-]{0,127}");
	if (!kiln_mfmt_name_valid(branch))
		return kiln_error_set(KILN_EINVALID,
		                      "manifest: branch name must match [a-z0-9][a-z0-9._-]{0,127}");
	snprintf(out, cap, "refs/heads/%s/%s", dataset, branch);
	if (git_reference_name_is_valid(&valid, out) < 0 || !valid)
		return kiln_error_set(KILN_EINVALID, "manifest: %s is not a valid git reference name", out);
	return 0;
}

static bool hex_valid(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

bool kiln_manifest_hash_valid(const char *s)
{
	return s && strlen(s) == HASH_LEN && hex_valid(s, HASH_LEN);
}

/* ---- open / close --------------------------------------------------------- */

/* A new repository is initialised under a temporary sibling name and
 * renamed into place, so a concurrent opener sees no directory or a whole
 * repository, never one half written; of two creators one rename wins and
 * the other opens the winner's. An existing empty directory counts as none. */
static int create_repository(const char *path)
{
	git_repository_init_options opts;
	git_repository *repo = NULL;
	unsigned char nonce[8];
	char tmp[4096];
	int gerr, rc = 0;

	randombytes_buf(nonce, sizeof(nonce));
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.init-%ld-%02x%02x%02x%02x", path, (long)getpid(), nonce[0],
	                     nonce[1], nonce[2], nonce[3]) >= sizeof(tmp))
		return kiln_error_set(KILN_EINVALID, "manifest %s: path too long", path);
	git_repository_init_options_init(&opts, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
	opts.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_MKPATH;
	if ((gerr = git_repository_init_ext(&repo, tmp, &opts)) < 0) {
		rc = kiln_error_set(KILN_EIO, "manifest %s: %s", path, kiln_manifest_git_message());
		goto cleanup;
	}
	git_repository_free(repo);
	if (rename(tmp, path) < 0 && errno != EEXIST && errno != ENOTEMPTY)
		rc = kiln_error_set(KILN_EIO, "manifest %s: cannot create: %s", path, strerror(errno));
cleanup:
	kiln_fs_remove_tree(tmp); /* gone after a rename; the loser's copy otherwise */
	return rc;
}

static bool dir_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	bool empty = true;

	if (!d)
		return false;
	while (empty && (e = readdir(d)))
		empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
	closedir(d);
	return empty;
}

int kiln_manifest_open(kiln_manifest **out, const char *path)
{
	kiln_manifest *m = NULL;
	struct stat st;
	int rc, gerr;

	*out = NULL;
	pthread_once(&git_once, git_init_once);
	m = calloc(1, sizeof(*m));
	if (!m || !(m->path = strdup(path))) {
		rc = kiln_error_set(KILN_ENOMEM, "manifest %s: out of memory", path);
		goto cleanup;
	}
	if (stat(path, &st) < 0 ? errno == ENOENT : S_ISDIR(st.st_mode) && dir_empty(path)) {
		if ((rc = create_repository(path)) < 0)
			goto cleanup;
	}
	if ((gerr = git_repository_open_bare(&m->repo, path)) < 0) {
		rc = kiln_error_set(gerr == GIT_ENOTFOUND ? KILN_ENOTFOUND : KILN_EIO, "manifest %s: %s",
		                    path, kiln_manifest_git_message());
		goto cleanup;
	}
	if (!git_repository_is_bare(m->repo)) {
		rc = kiln_error_set(KILN_EINVALID, "manifest %s: not a bare repository", path);
		goto cleanup;
	}
	if ((rc = kiln_git_loose_guard(m->repo)) < 0)
		goto cleanup;
	*out = m;
	m = NULL;
	rc = 0;
cleanup:
	kiln_manifest_close(m);
	return rc;
}

int kiln_manifest_has_object(kiln_manifest *m, const char *hex)
{
	git_odb *odb = NULL;
	git_oid oid;
	int held;

	if (strlen(hex) != GIT_OID_HEXSZ || git_oid_fromstr(&oid, hex) < 0)
		return kiln_error_set(KILN_EINVALID, "not an object name");
	if (git_repository_odb(&odb, m->repo) < 0)
		return kiln_error_set(KILN_EIO, "manifest %s: %s", git_repository_path(m->repo),
		                      kiln_manifest_git_message());
	held = git_odb_exists(odb, &oid);
	git_odb_free(odb);
	return held ? 1 : 0;
}

void kiln_manifest_blob_ahead(kiln_manifest *m, const void *data, size_t len)
{
	git_odb *odb = NULL;
	git_oid oid;
	char dir[4096];

	/* the repository's path is set at open and never changes */
	snprintf(dir, sizeof(dir), "%sobjects", git_repository_path(m->repo));
	if (git_odb_open(&odb, dir) == 0)
		(void)git_odb_write(&oid, odb, data, len, GIT_OBJECT_BLOB);
	git_odb_free(odb);
}

void kiln_manifest_close(kiln_manifest *m)
{
	if (!m)
		return;
	git_repository_free(m->repo);
	free(m->path);
	free(m);
}

/* ---- reading the tip ------------------------------------------------------ */

/* The tip commit's tree, or *out_tree = NULL when the branch does not exist.
 * *out_tip (may be NULL) gets the tip id. */
int kiln_manifest_read_tip(kiln_manifest *m, const char *ref, git_oid *out_tip, bool *out_exists,
                           git_tree **out_tree)
{
	git_oid tip;
	git_commit *commit = NULL;
	int gerr;

	*out_tree = NULL;
	*out_exists = false;
	gerr = git_reference_name_to_id(&tip, m->repo, ref);
	if (gerr == GIT_ENOTFOUND)
		return 0;
	if (gerr < 0)
		return git_fail(m, gerr, ref);
	gerr = git_commit_lookup(&commit, m->repo, &tip);
	if (gerr < 0)
		return git_fail(m, gerr, ref);
	gerr = git_commit_tree(out_tree, commit);
	git_commit_free(commit);
	if (gerr < 0)
		return git_fail(m, gerr, ref);
	if (out_tip)
		*out_tip = tip;
	*out_exists = true;
	return 0;
}

/* The blob at `path` in tree, *out = NULL when there is none. */
static int read_blob(kiln_manifest *m, git_tree *tree, const char *ref, const char *path, git_blob **out)
{
	git_tree_entry *entry = NULL;
	int gerr;

	*out = NULL;
	if (!tree)
		return 0;
	gerr = git_tree_entry_bypath(&entry, tree, path);
	if (gerr == GIT_ENOTFOUND)
		return 0;
	if (gerr < 0)
		return git_fail(m, gerr, path);
	if (git_tree_entry_type(entry) != GIT_OBJECT_BLOB) {
		git_tree_entry_free(entry);
		return kiln_error_set(KILN_EINVALID, "manifest %s: %s:%s is not a file", m->path, ref, path);
	}
	gerr = git_blob_lookup(out, m->repo, git_tree_entry_id(entry));
	git_tree_entry_free(entry);
	return gerr < 0 ? git_fail(m, gerr, path) : 0;
}

/* ---- lineage.json and stats.json ---------------------------------------- */

/* "manifest: REF:FILE", how the codec's errors name a file of a tip. */
const char *kiln_manifest_where(char out[KILN_MANIFEST_WHERE_CAP], const char *ref, const char *file)
{
	snprintf(out, KILN_MANIFEST_WHERE_CAP, "manifest: %s:%s", ref, file);
	return out;
}

/* The lineage at the tip into *out (empty without a tip or a lineage.json). */
int kiln_manifest_load_lineage(kiln_manifest *m, kiln_json_scanner *scanner, git_tree *tree, const char *ref,
                               kiln_mfmt_lineage *out)
{
	char w[KILN_MANIFEST_WHERE_CAP];
	git_blob *blob = NULL;
	int rc = read_blob(m, tree, ref, "lineage.json", &blob);

	if (rc < 0 || !blob)
		return rc;
	rc = kiln_mfmt_lineage_parse(scanner, kiln_manifest_where(w, ref, "lineage.json"),
	                             git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob), out);
	git_blob_free(blob);
	return rc;
}

int kiln_manifest_load_stats(kiln_manifest *m, kiln_json_scanner *scanner, git_tree *tree, const char *ref,
                             kiln_stats *out)
{
	char w[KILN_MANIFEST_WHERE_CAP];
	git_blob *blob = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = read_blob(m, tree, ref, "stats.json", &blob);
	if (rc < 0 || !blob)
		return rc;
	rc = kiln_mfmt_stats_parse(scanner, kiln_manifest_where(w, ref, "stats.json"),
	                           git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob), out);
	git_blob_free(blob);
	return rc;
}

int kiln_manifest_load_replayed(kiln_manifest *m, git_tree *tree, const char *ref, kiln_replayed *out)
{
	char w[KILN_MANIFEST_WHERE_CAP];
	git_blob *blob = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = read_blob(m, tree, ref, KILN_REPLAYED_FILE, &blob);
	if (rc < 0 || !blob)
		return rc;
	rc = kiln_replayed_parse(out, git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob),
	                         kiln_manifest_where(w, ref, KILN_REPLAYED_FILE));
	git_blob_free(blob);
	return rc;
}

int kiln_manifest_replayed(kiln_manifest *m, const char *dataset, const char *branch, kiln_replayed *out)
{
	kiln_buf text = KILN_BUF_INIT(0);
	char where[512];
	int rc;

	memset(out, 0, sizeof(*out));
	rc = kiln_manifest_read(m, dataset, branch, KILN_REPLAYED_FILE, &text);
	if (rc > 0) {
		snprintf(where, sizeof(where), "%s@%s:%s", dataset, branch, KILN_REPLAYED_FILE);
		rc = kiln_replayed_parse(out, text.ptr ? text.ptr : "", text.len, where);
	}
	kiln_buf_free(&text);
	return rc < 0 ? rc : 0;
}

int kiln_manifest_load_profile(kiln_manifest *m, git_tree *tree, const char *ref, kiln_profile *out)
{
	char w[KILN_MANIFEST_WHERE_CAP];
	git_blob *blob = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = read_blob(m, tree, ref, "profile.json", &blob);
	if (rc < 0 || !blob)
		return rc;
	rc = kiln_profile_parse_file(git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob),
	                             kiln_manifest_where(w, ref, "profile.json"), out, NULL);
	git_blob_free(blob);
	return rc;
}

/* ---- tags ---------------------------------------------------------------- */

int kiln_manifest_tag_object(kiln_manifest *m, const char *dataset, const char *name, const char *commit_hex,
                             const char *message, const kiln_signing_key *key, git_oid *out_id)
{
	git_oid target;
	git_object *object = NULL;
	git_signature *tagger = NULL;
	git_odb *odb = NULL;
	kiln_buf text = KILN_BUF_INIT(0), armour = KILN_BUF_INIT(0);
	size_t mlen;
	int rc, gerr, offset;

	if (!commit_hex || strlen(commit_hex) != 40 || !hex_valid(commit_hex, 40) ||
	    git_oid_fromstr(&target, commit_hex) < 0)
		return kiln_error_set(KILN_EINVALID,
		                      "manifest: tag %s/%s: a commit id is 40 lower-case hex digits", dataset,
		                      name);
	if (!message)
		message = "";
	/* git takes the last such line as the start of the tag's signature */
	for (const char *line = message;; line++) {
		if (strncmp(line, "-----BEGIN ", 11) == 0)
			return kiln_error_set(
			    KILN_EINVALID, "manifest: tag %s/%s: a message line starts with \"-----BEGIN \"",
			    dataset, name);
		if (!(line = strchr(line, '\n')))
			break;
	}
	if ((gerr = git_object_lookup(&object, m->repo, &target, GIT_OBJECT_COMMIT)) < 0) {
		rc = git_fail(m, gerr, commit_hex);
		goto cleanup;
	}
	if ((gerr = git_signature_now(&tagger, "kiln", "kiln@localhost")) < 0) {
		rc = git_fail(m, gerr, "tagger");
		goto cleanup;
	}
	offset = tagger->when.offset < 0 ? -tagger->when.offset : tagger->when.offset;
	mlen = strlen(message);
	if (kiln_buf_printf(&text,
	                    "object %s\ntype commit\ntag %s/%s\ntagger %s <%s> %lld %c%02d%02d\n\n%s%s",
	                    commit_hex, dataset, name, tagger->name, tagger->email,
	                    (long long)tagger->when.time, tagger->when.offset < 0 ? '-' : '+', offset / 60,
	                    offset % 60, message, mlen && message[mlen - 1] != '\n' ? "\n" : "") < 0 ||
	    (key && kiln_sshsig_sign(key, "git", text.ptr, text.len, &armour) < 0)) {
		rc = kiln_error_last_code();
		goto cleanup;
	}
	if (kiln_buf_put(&text, armour.ptr, armour.len) < 0) {
		rc = kiln_error_oom("manifest");
		goto cleanup;
	}
	if ((gerr = git_repository_odb(&odb, m->repo)) < 0 ||
	    (gerr = git_odb_write(out_id, odb, text.ptr, text.len, GIT_OBJECT_TAG)) < 0) {
		rc = git_fail(m, gerr, "writing the tag");
		goto cleanup;
	}
	rc = 0;
cleanup:
	git_odb_free(odb);
	git_object_free(object);
	git_signature_free(tagger);
	kiln_buf_free(&text);
	kiln_buf_free(&armour);
	return rc;
}

int kiln_manifest_tag(kiln_manifest *m, const char *dataset, const char *name, const char *commit_hex,
                      const char *message, const kiln_signing_key *key, char out_tag_id[41])
{
	char ref[sizeof("refs/tags//") + 2 * KILN_MFMT_NAME_MAX];
	git_reference *existing = NULL, *created = NULL;
	git_oid tag_id;
	int valid = 0, rc, gerr;

	out_tag_id[0] = '\0';
	if (!kiln_mfmt_name_valid(dataset))
		return kiln_error_set(KILN_EINVALID,
		                      "manifest: dataset name must match [a-z0-9][a-z0-9._-]{0,127}");
	if (!kiln_mfmt_name_valid(name))
		return kiln_error_set(KILN_EINVALID,
		                      "manifest: tag name must match [a-z0-9][a-z0-9._-]{0,127}");
	snprintf(ref, sizeof(ref), "refs/tags/%s/%s", dataset, name);
	if (git_reference_name_is_valid(&valid, ref) < 0 || !valid)
		return kiln_error_set(KILN_EINVALID, "manifest: %s is not a valid git reference name", ref);
	gerr = git_reference_lookup(&existing, m->repo, ref);
	if (gerr == 0) {
		rc = kiln_error_set(KILN_EMODIFIED, "manifest %s: %s already exists", m->path, ref);
		goto cleanup;
	}
	if (gerr != GIT_ENOTFOUND) {
		rc = git_fail(m, gerr, ref);
		goto cleanup;
	}
	if ((rc = kiln_manifest_tag_object(m, dataset, name, commit_hex, message, key, &tag_id)) < 0)
		goto cleanup;
	gerr = git_reference_create(&created, m->repo, ref, &tag_id, 0, NULL);
	if (gerr == GIT_EEXISTS) {
		rc = kiln_error_set(KILN_EMODIFIED, "manifest %s: %s already exists", m->path, ref);
		goto cleanup;
	}
	if (gerr < 0) {
		rc = git_fail(m, gerr, ref);
		goto cleanup;
	}
	git_oid_tostr(out_tag_id, 41, &tag_id);
	rc = 0;
cleanup:
	git_reference_free(existing);
	git_reference_free(created);
	return rc;
}

/* ---- reading back --------------------------------------------------------- */

int kiln_manifest_lineage(kiln_manifest *m, const char *dataset, const char *branch,
                          int (*cb)(void *ctx, const kiln_lineage_entry *entry), void *ctx)
{
	char ref[KILN_MANIFEST_REF_CAP];
	git_tree *tree = NULL;
	kiln_json_scanner *scanner = NULL;
	kiln_mfmt_lineage list = {0};
	bool exists;
	int rc;

	if ((rc = kiln_manifest_branch_ref(ref, sizeof(ref), dataset, branch)) < 0)
		return rc;
	if ((rc = kiln_manifest_read_tip(m, ref, NULL, &exists, &tree)) < 0 || !exists)
		goto cleanup;
	scanner = kiln_json_scanner_new(NULL);
	if (!scanner) {
		rc = kiln_error_oom("manifest");
		goto cleanup;
	}
	if ((rc = kiln_manifest_load_lineage(m, scanner, tree, ref, &list)) < 0)
		goto cleanup;
	for (size_t i = 0; i < list.n; i++)
		if ((rc = cb(ctx, &list.v[i])) != 0)
			goto cleanup;
cleanup:
	kiln_mfmt_lineage_free(&list);
	kiln_json_scanner_free(scanner);
	git_tree_free(tree);
	return rc;
}

int kiln_manifest_stats(kiln_manifest *m, const char *dataset, const char *branch, kiln_stats *out)
{
	char ref[KILN_MANIFEST_REF_CAP];
	git_tree *tree = NULL;
	kiln_json_scanner *scanner = NULL;
	bool exists;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = kiln_manifest_branch_ref(ref, sizeof(ref), dataset, branch)) < 0)
		return rc;
	if ((rc = kiln_manifest_read_tip(m, ref, NULL, &exists, &tree)) < 0 || !exists)
		goto cleanup;
	scanner = kiln_json_scanner_new(NULL);
	if (!scanner) {
		rc = kiln_error_oom("manifest");
		goto cleanup;
	}
	rc = kiln_manifest_load_stats(m, scanner, tree, ref, out);
	if (rc < 0)
		memset(out, 0, sizeof(*out));
cleanup:
	kiln_json_scanner_free(scanner);
	git_tree_free(tree);
	return rc;
}

int kiln_manifest_read(kiln_manifest *m, const char *dataset, const char *branch, const char *path,
                       kiln_buf *out)
{
	char ref[KILN_MANIFEST_REF_CAP];
	git_tree *tree = NULL;
	git_blob *blob = NULL;
	bool exists;
	int rc;

	if ((rc = kiln_manifest_branch_ref(ref, sizeof(ref), dataset, branch)) < 0)
		return rc;
	if ((rc = kiln_manifest_read_tip(m, ref, NULL, &exists, &tree)) < 0)
		return rc;
	if (!exists || (rc = read_blob(m, tree, ref, path, &blob)) < 0 || !blob) {
		rc = rc < 0 ? rc : 0;
		goto cleanup;
	}
	rc = kiln_buf_put(out, git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob));
	if (rc == 0)
		rc = 1;
cleanup:
	git_blob_free(blob);
	git_tree_free(tree);
	return rc;
}

git_repository *kiln_manifest_repo(kiln_manifest *m)
{
	return m->repo;
}

const char *kiln_manifest_path(const kiln_manifest *m)
{
	return m->path;
}

int kiln_manifest_git_fail(const kiln_manifest *m, int gerr, const char *what)
{
	return git_fail(m, gerr, what);
}

int kiln_stats_parse(const char *text, size_t len, const char *where, kiln_stats *out)
{
	kiln_json_scanner *scanner = kiln_json_scanner_new(NULL);
	char w[1024];
	int rc;

	if (!scanner)
		return kiln_error_oom("manifest");
	snprintf(w, sizeof(w), "manifest: %s:stats.json", where);
	rc = kiln_mfmt_stats_parse(scanner, w, text, len, out);
	kiln_json_scanner_free(scanner);
	return rc;
}
