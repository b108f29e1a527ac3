/* Unit tests for the purge of what erasure superseded (kiln_manifest_purge
 * in src/manifest/compact.c) and the scans of every object and file
 * (src/manifest/scan.c), on repositories written with stock git: a branch
 * whose history holds a blob with a marker, then rewritten without it and
 * its annotated tag re-created. After the purge, stock git finds no object
 * holding the marker (inflated), no file holds it or an old id, fsck is
 * clean, the refs and reflogs resolve; what both the old and the new
 * history reach stays, and so does a young unreachable object the old
 * history does not reach (also when it shared a pack with the marker). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "core/error.h"
#include "manifest/compact.h"
#include "manifest/internal.h"
#include "manifest/manifest.h"
#include "manifest/scan.h"

static char tmpdir[64];

#define MARKER "subject-7f3a-erase-me@example.com"

/* The history: base commit c0 (dataset.json), c1 adding the marker's split
 * file, c2 adding later.json, tag ds/v1 on c2; HEAD follows ds/main and
 * every update is logged. FETCH_HEAD and ORIG_HEAD name c2. Ids go to
 * $3 as "name id" lines. */
static const char build_sh[] =
    "set -e\n"
    "export GIT_DIR=\"$1\" GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t\n"
    "export GIT_COMMITTER_EMAIL=t@example.com GIT_AUTHOR_DATE=2026-01-01T00:00:00Z\n"
    "export GIT_COMMITTER_DATE=2026-01-01T00:00:00Z\n"
    "git config core.logAllRefUpdates always\n"
    "git symbolic-ref HEAD refs/heads/ds/main\n"
    "mk() {\n"
    "  train=$(printf '100644 blob %s\\taa.jsonl\\n' $2 | git mktree)\n"
    "  splits=$(printf '040000 tree %s\\ttrain\\n' $train | git mktree)\n"
    "  { printf '100644 blob %s\\tdataset.json\\n' $1; printf '040000 tree %s\\tsplits\\n' $splits\n"
    "    if [ -n \"$3\" ]; then printf '100644 blob %s\\tlater.json\\n' $3; fi; } | git mktree\n"
    "}\n"
    "base=$(printf '{\"name\":\"ds\"}\\n' | git hash-object -w --stdin)\n"
    "keep=$(printf '{\"shard\":\"keep\"}\\n' | git hash-object -w --stdin)\n"
    "mark=$(printf '{\"shard\":\"%s\"}\\n{\"shard\":\"keep\"}\\n' \"$2\" | git hash-object -w --stdin)\n"
    "later=$(printf 'later\\n' | git hash-object -w --stdin)\n"
    "t0=$(printf '100644 blob %s\\tdataset.json\\n' $base | git mktree)\n"
    "c0=$(git commit-tree -m base $t0)\n"
    "git update-ref -m c0 refs/heads/ds/main $c0\n"
    "c1=$(git commit-tree -p $c0 -m one $(mk $base $mark))\n"
    "git update-ref -m c1 refs/heads/ds/main $c1\n"
    "c2=$(git commit-tree -p $c1 -m two $(mk $base $mark $later))\n"
    "git update-ref -m c2 refs/heads/ds/main $c2\n"
    "git tag -a -m 'ds v1' ds/v1 $c2\n"
    "git update-ref --no-deref ORIG_HEAD $c2\n"
    "printf '%s\\t\\tbranch x of elsewhere\\n' $c2 > \"$GIT_DIR/FETCH_HEAD\"\n"
    "for v in base keep mark later t0 c0 c1 c2; do eval echo $v \\$$v; done > \"$3\"\n"
    "echo tag1 $(git rev-parse refs/tags/ds/v1) >> \"$3\"\n";

/* The rewrite: c1b and c2b without the marker, ds/main moved, ds/v1
 * re-created on c2b; an unrelated unreachable blob written (young). */
static const char rewrite_sh[] =
    "set -e\n"
    "export GIT_DIR=\"$1\" GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t\n"
    "export GIT_COMMITTER_EMAIL=t@example.com GIT_AUTHOR_DATE=2026-01-02T00:00:00Z\n"
    "export GIT_COMMITTER_DATE=2026-01-02T00:00:00Z\n"
    "mk() {\n"
    "  train=$(printf '100644 blob %s\\taa.jsonl\\n' $2 | git mktree)\n"
    "  splits=$(printf '040000 tree %s\\ttrain\\n' $train | git mktree)\n"
    "  { printf '100644 blob %s\\tdataset.json\\n' $1; printf '040000 tree %s\\tsplits\\n' $splits\n"
    "    if [ -n \"$3\" ]; then printf '100644 blob %s\\tlater.json\\n' $3; fi; } | git mktree\n"
    "}\n"
    "ids=\"$3\"\n"
    "id() { sed -n \"s/^$1 //p\" \"$ids\"; }\n"
    "c1b=$(git commit-tree -p $(id c0) -m one $(mk $(id base) $(id keep)))\n"
    "c2b=$(git commit-tree -p $c1b -m two $(mk $(id base) $(id keep) $(id later)))\n"
    "git update-ref -m erase refs/heads/ds/main $c2b $(id c2)\n"
    "git tag -f -a -m 'ds v1' ds/v1 $c2b >/dev/null\n"
    "young=$(printf 'young and unrelated\\n' | git hash-object -w --stdin)\n"
    "echo c1b $c1b >> \"$3\"; echo c2b $c2b >> \"$3\"; echo young $young >> \"$3\"\n"
    "echo tag1b $(git rev-parse refs/tags/ds/v1) >> \"$3\"\n";

typedef struct fixture {
	char *repo, *ids_file;
	char ids[16][2][48]; /* name, id */
	int n;
	kiln_manifest *m;
} fixture;

static void run_sh(const char *script, const fixture *f, const char *name)
{
	char *path = kiln_test_path(tmpdir, name), cmd[8192];

	kiln_test_write_file(path, script, 0644);
	snprintf(cmd, sizeof(cmd), "bash '%s' '%s' '%s' '%s' >/dev/null", path, f->repo, MARKER, f->ids_file);
	assert_int_equal(system(cmd), 0);
	free(path);
}

static void load_ids(fixture *f)
{
	FILE *in = fopen(f->ids_file, "r");

	assert_non_null(in);
	for (f->n = 0; f->n < 16 && fscanf(in, "%47s %47s", f->ids[f->n][0], f->ids[f->n][1]) == 2; f->n++)
		;
	fclose(in);
}

static const char *id(const fixture *f, const char *name)
{
	for (int i = 0; i < f->n; i++)
		if (strcmp(f->ids[i][0], name) == 0)
			return f->ids[i][1];
	fail_msg("no id %s", name);
	return NULL;
}

/* The exit status of a shell command line. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* What a shell command line prints (allocated; *len its length). */
static char *capture(size_t *len, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *capture(size_t *len, const char *fmt, ...)
{
	char cmd[8192], *out = NULL;
	size_t n = 0, cap = 0, r;
	va_list ap;
	FILE *p;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_non_null(p = popen(cmd, "r"));
	do {
		if (cap - n < 65536)
			assert_non_null(out = realloc(out, cap = cap * 2 + 65536));
		n += r = fread(out + n, 1, cap - n - 1, p);
	} while (r > 0);
	assert_int_equal(pclose(p), 0);
	out[n] = '\0';
	*len = n;
	return out;
}

static bool has_object(const fixture *f, const char *hex)
{
	return sh("git --git-dir='%s' cat-file -e %s 2>/dev/null", f->repo, hex) == 0;
}

/* A repository under tmpdir/name with the history and (when `packed`) it
 * compacted into a pack, then rewritten. */
static void setup(fixture *f, const char *name, bool packed)
{
	kiln_compact_stats st;
	char ids_name[64];

	memset(f, 0, sizeof(*f));
	f->repo = kiln_test_path(tmpdir, name);
	snprintf(ids_name, sizeof(ids_name), "%s.ids", name);
	f->ids_file = kiln_test_path(tmpdir, ids_name);
	assert_int_equal(kiln_manifest_open(&f->m, f->repo), 0);
	run_sh(build_sh, f, "build.sh");
	if (packed) {
		assert_int_equal(kiln_manifest_compact(f->m, 3600, &st), 0);
		assert_int_equal(sh("ls '%s'/objects/pack/*.pack >/dev/null 2>&1", f->repo), 0);
	}
	run_sh(rewrite_sh, f, "rewrite.sh");
	load_ids(f);
	assert_true(has_object(f, id(f, "mark")));
}

static void teardown(fixture *f)
{
	kiln_manifest_close(f->m);
	free(f->repo);
	free(f->ids_file);
}

/* ---- the scans ------------------------------------------------------------ */

typedef struct seen {
	char *lines; /* "id type size\n" per object */
	size_t len, cap;
	int marker; /* objects whose content holds MARKER */
} seen;

static int on_object(void *ctx, const char *hex, const char *type, const void *data, size_t len)
{
	seen *s = ctx;
	char line[128];
	int n = snprintf(line, sizeof(line), "%s %s %zu\n", hex, type, len);

	if (s->cap - s->len <= (size_t)n)
		assert_non_null(s->lines = realloc(s->lines, s->cap = s->cap * 2 + 4096));
	memcpy(s->lines + s->len, line, (size_t)n + 1);
	s->len += (size_t)n;
	s->marker += memmem(data, len, MARKER, strlen(MARKER)) != NULL;
	return 0;
}

static int cmp_lines(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* text's lines, sorted, joined again (text is changed). */
static char *sorted(char *text)
{
	char *v[4096], *save = NULL, *out;
	size_t n = 0, len = 0;

	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		assert_true(n < 4096);
		v[n++] = l;
		len += strlen(l) + 1;
	}
	qsort(v, n, sizeof(*v), cmp_lines);
	assert_non_null(out = calloc(1, len + 1));
	for (size_t i = 0; i < n; i++) {
		strcat(out, v[i]);
		strcat(out, "\n");
	}
	return out;
}

/* kiln_manifest_each_object gives what `git cat-file --batch-all-objects`
 * lists, each once, with its type and size; *marker: how many hold MARKER. */
static void check_each_object(const fixture *f, int *marker)
{
	seen s = {0};
	size_t len;
	char *git = capture(&len,
	                    "git --git-dir='%s' cat-file --batch-all-objects "
	                    "--batch-check='%%(objectname) %%(objecttype) %%(objectsize)'",
	                    f->repo);
	char *a, *b;

	assert_int_equal(kiln_manifest_each_object(f->m, on_object, &s), 0);
	assert_non_null(s.lines);
	a = sorted(s.lines);
	b = sorted(git);
	assert_string_equal(a, b);
	*marker = s.marker;
	free(a);
	free(b);
	free(s.lines);
	free(git);
}

typedef struct files_seen {
	bool branch_log, fetch_head, config, object_file;
	int marker;
} files_seen;

static int on_file(void *ctx, const char *path, const void *data, size_t len)
{
	files_seen *s = ctx;
	size_t n = strlen(path);

	s->branch_log |= strcmp(path, "logs/refs/heads/ds/main") == 0;
	s->fetch_head |= strcmp(path, "FETCH_HEAD") == 0;
	s->config |= strcmp(path, "config") == 0;
	s->object_file |= (n == 49 && strncmp(path, "objects/", 8) == 0 && path[10] == '/') ||
	                  (n > 5 && strcmp(path + n - 5, ".pack") == 0);
	s->marker += memmem(data, len, MARKER, strlen(MARKER)) != NULL;
	return 0;
}

static int stop_at_first(void *ctx, const char *path, const void *data, size_t len)
{
	(void)path, (void)data, (void)len;
	++*(int *)ctx;
	return 7;
}

/* ---- after the purge ------------------------------------------------------ */

/* Nothing of the old history anywhere, everything of the new, git happy. */
static void check_purged(const fixture *f)
{
	static const char *const gone[] = {"mark", "c1", "c2", "tag1"};
	static const char *const stay[] = {"base", "keep", "later", "t0",   "c0",
	                                   "c1b",  "c2b",  "tag1b", "young"};
	files_seen fs = {0};
	size_t len;
	char *dump;
	int marker = -1;

	/* every object inflated, by stock git */
	dump = capture(&len, "git --git-dir='%s' cat-file --batch-all-objects --batch", f->repo);
	assert_true(len > 0);
	assert_null(memmem(dump, len, MARKER, strlen(MARKER)));
	free(dump);
	/* every file as stored: neither the marker nor an old id */
	assert_int_equal(sh("grep -r -a -q -F '%s' '%s'", MARKER, f->repo), 1);
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
		assert_false(has_object(f, id(f, gone[i])));
		assert_int_equal(sh("grep -r -a -q -F '%s' '%s'", id(f, gone[i]), f->repo), 1);
	}
	for (size_t i = 0; i < sizeof(stay) / sizeof(stay[0]); i++)
		assert_true(has_object(f, id(f, stay[i])));
	assert_int_equal(
	    sh("git --git-dir='%s' fsck --full --strict --no-dangling --no-progress >/dev/null 2>&1",
	       f->repo),
	    0);
	/* every ref, and every reflog entry left, resolves with its history */
	assert_int_equal(sh("git --git-dir='%s' rev-list --objects --all --reflog >/dev/null", f->repo), 0);
	assert_int_equal(sh("test \"$(git --git-dir='%s' rev-parse refs/heads/ds/main refs/tags/ds/v1)\" = "
	                    "\"$(printf '%%s\\n%%s' %s %s)\"",
	                    f->repo, id(f, "c2b"), id(f, "tag1b")),
	                 0);
	/* the scans see it so too */
	check_each_object(f, &marker);
	assert_int_equal(marker, 0);
	assert_int_equal(kiln_manifest_each_file(f->m, on_file, &fs), 0);
	assert_int_equal(fs.marker, 0);
	assert_true(fs.branch_log && fs.config);
	assert_false(fs.fetch_head); /* it named c2 */
	assert_false(fs.object_file);
}

static void purge_old(fixture *f, kiln_compact_stats *st)
{
	const char *old[] = {id(f, "c2"), id(f, "tag1"), "0123456789abcdef0123456789abcdef01234567"};
	uint64_t would = 0;

	/* the old tag and branch tip, and an id the repository lacks */
	assert_int_equal(kiln_manifest_purge_count(f->m, old, 3, &would), 0);
	/* c1, c2, tag1, the marker blob, its train and splits trees, two roots */
	assert_int_equal(would, 8);
	assert_int_equal(kiln_manifest_purge(f->m, old, 3, 3600, st), 0);
	assert_int_equal(st->purged, 8);
}

static void test_loose(void **state)
{
	kiln_compact_stats st;
	files_seen fs = {0};
	fixture f;
	int marker = 0, calls = 0;

	(void)state;
	setup(&f, "loose", false);
	/* before: the scans see the marker, stock git's every object, the logs */
	check_each_object(&f, &marker);
	assert_int_equal(marker, 1);
	assert_int_equal(kiln_manifest_each_file(f.m, on_file, &fs), 0);
	assert_true(fs.branch_log && fs.fetch_head && fs.config);
	assert_int_equal(fs.marker, 0); /* loose objects are deflated, and not files it gives */
	assert_false(fs.object_file);
	assert_int_equal(kiln_manifest_each_file(f.m, stop_at_first, &calls), 7);
	assert_int_equal(calls, 1);

	purge_old(&f, &st);
	assert_int_equal(st.loose_kept, 1); /* young */
	check_purged(&f);
	/* again: nothing left to purge */
	assert_int_equal(kiln_manifest_purge(f.m, (const char *[]){id(&f, "c2")}, 1, 3600, &st), 0);
	assert_int_equal(st.purged, 0);
	teardown(&f);
}

/* The marker in a pack (a compaction packed the old history); and in a
 * second pack with a young unrelated unreachable blob: that pack is
 * rewritten without the marker, the blob kept. */
static void test_packed(void **state)
{
	kiln_compact_stats st;
	fixture f;
	char young2[48];
	size_t len;
	char *out;

	(void)state;
	setup(&f, "packed", true);
	out =
	    capture(&len, "printf 'young and packed\\n' | git --git-dir='%s' hash-object -w --stdin", f.repo);
	assert_int_equal(sscanf(out, "%47s", young2), 1);
	free(out);
	assert_int_equal(sh("printf '%s\\n%s\\n' | git --git-dir='%s' pack-objects -q '%s/objects/pack/pack' "
	                    ">/dev/null && rm -f '%s/objects/%.2s/%s'",
	                    id(&f, "mark"), young2, f.repo, f.repo, f.repo, young2, young2 + 2),
	                 0);
	purge_old(&f, &st);
	assert_true(st.packs_removed >= 2);
	check_purged(&f);
	assert_true(has_object(&f, young2));
	teardown(&f);
}

/* A .keep'd pack holding a superseded object: refused, naming it, nothing
 * removed; without the .keep, purged. */
static void test_kept_pack(void **state)
{
	kiln_compact_stats st;
	const char *old[2];
	fixture f;

	(void)state;
	setup(&f, "kept", true);
	old[0] = id(&f, "c2");
	old[1] = id(&f, "tag1");
	assert_int_equal(sh("for p in '%s'/objects/pack/*.pack; do touch \"${p%%.pack}.keep\"; done", f.repo),
	                 0);
	assert_int_equal(kiln_manifest_purge(f.m, old, 2, 3600, &st), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), ".keep"));
	assert_non_null(strstr(kiln_error_last(), "/objects/pack/pack-"));
	assert_true(has_object(&f, id(&f, "mark")));
	assert_int_equal(sh("rm '%s'/objects/pack/*.keep", f.repo), 0);
	assert_int_equal(kiln_manifest_purge(f.m, old, 2, 3600, &st), 0);
	assert_false(has_object(&f, id(&f, "mark")));
	/* a malformed id is refused */
	old[1] = "not an id";
	assert_int_equal(kiln_manifest_purge(f.m, old, 2, 3600, &st), KILN_EINVALID);
	teardown(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_loose),
	    cmocka_unit_test(test_packed),
	    cmocka_unit_test(test_kept_pack),
	};

	return kiln_test_git_main(tests, tmpdir, "purge", NULL, NULL);
}
