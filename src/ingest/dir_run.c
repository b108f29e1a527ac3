/* The directory source as a streaming row of the run engine, with its
 * source.* keys (ingest/engine.h; the scan and the read of a file are
 * dir_source.c, which calls nothing here). The
 * engine owns the snapshot policy, the commit, backoff, the listener, the
 * drain; this row owns the folder: it scans it at start, again every
 * source.poll_ms and whenever inotify says a file was closed after writing
 * or moved in (IN_CLOSE_WRITE | IN_MOVED_TO on the folder; without inotify
 * the periodic scan alone), and reads each NEW file whole into the curate
 * pool, one file per poll, in name order among the files that are ready.
 *
 * A file is ready once inotify named it (closed after writing, or renamed
 * in) or, without an event, once it has not been modified for
 * source.poll_ms: a file still being written is left alone. A file read
 * while a writer still appends to it is committed as far as it was read and
 * then reported as changed, never read again: write a file aside (a
 * dot-file, which is never read) and rename it into place. --stop-at-end
 * reads what the folder holds at start, as it is, and stops.
 *
 * Exactly once: a file's records always go in one snapshot. Its read
 * submits every batch of it within one poll, a snapshot drains the pool
 * before it asks for the positions, so a snapshot holds each file it names
 * whole: one lineage entry per file (next: its lines, bytes: its size,
 * prefix_blake2b: the fingerprint of those bytes), fenced on "no entry yet".
 * A failure (abandon) forgets what was read since the last commit and scans
 * again; a file another run committed first is DONE by then. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/array.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/yaml_doc.h"
#include "core/config.h"
#include "core/json.h"
#include "core/log.h"
#include "core/notify.h"
#include "ingest/dir_source.h"
#include "ingest/engine_internal.h"

struct dir_run {
	kiln_dir dir;
	kiln_engine *e;
	const kiln_dir_config *c; /* e->p's, the row's settings */
	int inotify;              /* -1: none (scans every source.poll_ms only) */
	char **closed;            /* names inotify reported closed after writing or moved in */
	size_t closed_count, closed_cap;
	bool rescan;        /* an event (or an overflow) arrived since the last scan */
	int64_t scanned_ms; /* the last scan (now_ms) */
	uint64_t bad;       /* files that could not be read whole, this run */
	kiln_buf note;      /* their reasons, for --stop-at-end's error */
	kiln_counter *files, *changed, *unreadable;
};

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- inotify -------------------------------------------------------------- */

static bool was_closed(const struct dir_run *r, const char *name)
{
	for (size_t i = 0; i < r->closed_count; i++)
		if (strcmp(r->closed[i], name) == 0)
			return true;
	return false;
}

static void forget_closed(struct dir_run *r, const char *name)
{
	for (size_t i = 0; i < r->closed_count; i++)
		if (strcmp(r->closed[i], name) == 0) {
			free(r->closed[i]);
			r->closed[i] = r->closed[--r->closed_count];
			return;
		}
}

/* The events that are there (none waits). Too many names: the quiet rule
 * decides for the rest. */
static void read_events(struct dir_run *r)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	while (r->inotify >= 0 && (n = read(r->inotify, buf, sizeof(buf))) > 0) {
		for (char *at = buf; at < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)at;

			at += sizeof(*ev) + ev->len;
			r->rescan = true;
			if (!ev->len || ev->name[0] == '.' || was_closed(r, ev->name) ||
			    r->closed_count >= 4096 ||
			    KILN_ARRAY_GROW(r->closed, r->closed_cap, r->closed_count, NULL) < 0 ||
			    !(r->closed[r->closed_count] = strdup(ev->name)))
				continue;
			r->closed_count++;
		}
	}
}

static void watch(struct dir_run *r)
{
	const kiln_pipeline *p = r->e->p;

	r->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (r->inotify >= 0 &&
	    inotify_add_watch(r->inotify, p->source_path, IN_CLOSE_WRITE | IN_MOVED_TO) >= 0)
		return;
	KILN_LOG(KILN_LOG_INFO, "polling", "no inotify on the folder: it is scanned every source.poll_ms",
	         KILN_F_STR("folder", p->source_path), KILN_F_STR("reason", strerror(errno)),
	         KILN_F_INT("poll_ms", r->c->poll_ms));
	if (r->inotify >= 0)
		close(r->inotify);
	r->inotify = -1;
}

/* ---- the scan ------------------------------------------------------------- */

static void add_changed(kiln_run_result *out, const char *name)
{
	size_t at = strlen(out->changed);

	out->files_changed++;
	if (at < sizeof(out->changed))
		snprintf(out->changed + at, sizeof(out->changed) - at, "%s%s", at ? ", " : "", name);
	if (strlen(out->changed) >= sizeof(out->changed) - 1)
		memcpy(out->changed + sizeof(out->changed) - 4, "...", 4);
}

/* Lists the folder again; committed files left in it move to source.done
 * (killed between a commit and the move, or another run's). */
static int scan(struct dir_run *r)
{
	kiln_engine *e = r->e;
	int rc;

	r->rescan = false;
	r->scanned_ms = now_ms();
	if ((rc = kiln_dir_scan(&r->dir, e->setup.manifest)) < 0)
		return rc;
	for (size_t i = 0; i < r->dir.count; i++) {
		kiln_dir_file *f = &r->dir.files[i];

		if (f->state == KILN_DIR_DONE)
			kiln_dir_move_done(&r->dir, f);
		else if (f->state == KILN_DIR_CHANGED && f->fresh) {
			add_changed(e->out, f->name);
			kiln_counter_add(r->changed, 1);
		}
	}
	return 0;
}

/* ---- the row -------------------------------------------------------------- */

static int dir_open(void **out, kiln_engine *e, kiln_metrics *m)
{
	struct dir_run *r = calloc(1, sizeof(*r));

	*out = r;
	if (!r)
		return kiln_error_oom(NULL);
	r->e = e;
	r->c = e->p->source_config;
	r->dir.p = e->p;
	r->inotify = -1;
	r->note = (kiln_buf)KILN_BUF_INIT(4096);
	if (!(r->files = kiln_metrics_counter(m, "kiln_directory_files_total",
	                                      "Files of the folder committed by this run", NULL)) ||
	    !(r->changed = kiln_metrics_counter(m, "kiln_directory_files_changed_total",
	                                        "Committed files found changed, not read again", NULL)) ||
	    !(r->unreadable = kiln_metrics_counter(
	          m, "kiln_directory_files_unreadable_total",
	          "Files that could not be read whole (corrupt, truncated), not committed", NULL)))
		return kiln_error_oom(NULL);
	return 0;
}

static int dir_start(void *src, kiln_engine *e)
{
	struct dir_run *r = src;
	int rc;

	if ((rc = kiln_dir_prepare_done(e->p)) < 0)
		return rc;
	if (!e->o->stop_at_end)
		watch(r); /* before the scan: nothing renamed in between is missed */
	if ((rc = scan(r)) < 0)
		return rc;
	kiln_notifyf("READY=1\nSTATUS=reading %s", e->p->source_path);
	e->ready = true;
	return 0;
}

/* Whether f may be read now: --stop-at-end reads what is there; else
 * inotify named it, or nobody has written to it for source.poll_ms (as it
 * is now, not as the scan listed it). */
static bool ready(const struct dir_run *r, const kiln_dir_file *f)
{
	struct stat st;

	if (r->e->o->stop_at_end || was_closed(r, f->name))
		return true;
	if (stat(f->path, &st) < 0)
		return true; /* gone: the read says so */
	return wall_ms() - ((int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000) >=
	       (int64_t)r->c->poll_ms;
}

static void unreadable(struct dir_run *r, kiln_dir_file *f)
{
	if (!f->fresh)
		return;
	kiln_counter_add(r->unreadable, 1);
	KILN_LOG(KILN_LOG_WARN, "file_unreadable", f->error ? f->error : f->name,
	         KILN_F_STR("file", f->path));
	/* one line in the end: "a.gz: why; b.zst: why" */
	if (r->bad++)
		(void)kiln_buf_puts(&r->note, "; ");
	(void)kiln_buf_puts(&r->note, f->error ? f->error : f->name);
}

static int dir_poll(void *src, kiln_engine *e, int timeout_ms)
{
	struct dir_run *r = src;
	struct pollfd pfd = {.fd = r->inotify, .events = POLLIN};
	uint64_t records;
	int rc;

	read_events(r);
	if (!e->o->stop_at_end && (r->rescan || now_ms() - r->scanned_ms >= (int64_t)r->c->poll_ms))
		return scan(r);
	for (size_t i = 0; i < r->dir.count; i++) {
		kiln_dir_file *f = &r->dir.files[i];

		if (f->state != KILN_DIR_NEW || !ready(r, f))
			continue;
		rc = kiln_dir_read_file(&r->dir, f, e->sink.pool, &records);
		forget_closed(r, f->name);
		if (rc < 0)
			return rc;
		if (f->state == KILN_DIR_BAD)
			unreadable(r, f);
		return 0; /* one file a turn: the snapshot policy and a stop come between */
	}
	if (e->o->stop_at_end)
		return 0;
	if (r->inotify >= 0)
		(void)poll(&pfd, 1, timeout_ms);
	else
		usleep((useconds_t)timeout_ms * 1000);
	return 0;
}

/* --stop-at-end: every file the start found was read (or left: changed,
 * unreadable, empty). */
static bool dir_at_end(void *src, kiln_engine *e)
{
	struct dir_run *r = src;

	(void)e;
	for (size_t i = 0; i < r->dir.count; i++)
		if (r->dir.files[i].state == KILN_DIR_NEW)
			return false;
	return true;
}

/* A read submits all of its file: nothing stays open. */
static int dir_flush(void *src, kiln_engine *e)
{
	(void)src;
	(void)e;
	return 0;
}

static int dir_delivered(void *src, kiln_engine *e, kiln_batch *b)
{
	(void)src;
	(void)e;
	(void)b;
	return 0;
}

/* One entry per file read since the last commit, fenced on "no entry yet":
 * of two runs over one folder, only the first to commit a file does. */
static int dir_positions(void *src, kiln_engine *e, kiln_lineage_entry **out, size_t *count)
{
	struct dir_run *r = src;
	const kiln_pipeline *p = e->p;
	kiln_lineage_entry *lineage;
	size_t n = 0;

	*out = NULL;
	*count = 0;
	if (!(lineage = calloc(r->dir.count ? r->dir.count : 1, sizeof(*lineage))))
		return kiln_error_oom(NULL);
	for (size_t i = 0; i < r->dir.count; i++) {
		kiln_dir_file *f = &r->dir.files[i];

		if (f->state != KILN_DIR_READ)
			continue;
		/* lineage.json holds UTF-8: a name that is not keeps its topic's spelling */
		if (!kiln_utf8_valid(f->path, strlen(f->path)) && !f->entry_path) {
			if (!(f->entry_path = malloc(strlen(p->source_path) + strlen(f->topic) + 2))) {
				free(lineage);
				return kiln_error_oom(NULL);
			}
			sprintf(f->entry_path, "%s/%s", p->source_path,
			        strchr(f->topic, KILN_SOURCE_DIR_SEP) + 1);
		}
		lineage[n++] = (kiln_lineage_entry){.source = KILN_LINEAGE_DIRECTORY,
		                                    .topic = f->topic,
		                                    .partition = 0,
		                                    .next = f->lines,
		                                    .path = f->entry_path ? f->entry_path : f->path,
		                                    .bytes = f->size,
		                                    .prefix_blake2b = f->prefix,
		                                    .fenced = true,
		                                    .expect_next = -1};
	}
	*out = lineage;
	*count = n;
	return 0;
}

/* On the branch: every file read is done, and moves to source.done. */
static void dir_committed(void *src, kiln_engine *e, const kiln_lineage_entry *lineage, size_t n)
{
	struct dir_run *r = src;

	(void)lineage;
	(void)n;
	for (size_t i = 0; i < r->dir.count; i++) {
		kiln_dir_file *f = &r->dir.files[i];

		if (f->state != KILN_DIR_READ)
			continue;
		f->state = KILN_DIR_DONE;
		e->out->files_read++;
		kiln_counter_add(r->files, 1);
		kiln_dir_move_done(&r->dir, f);
	}
}

/* What was read since the last commit is forgotten; the folder is scanned
 * again against the branch as it is now. */
static int dir_abandon(void *src, kiln_engine *e)
{
	struct dir_run *r = src;

	(void)e;
	for (size_t i = 0; i < r->dir.count; i++)
		if (r->dir.files[i].state == KILN_DIR_READ)
			r->dir.files[i].state = KILN_DIR_NEW;
	return scan(r);
}

/* --stop-at-end with files that could not be read whole: the run's error
 * names them (after the other files' commit). Nothing new committed: the
 * branch is pushed as it is (an earlier run's commit may still need it). */
static void dir_stop(void *src, kiln_engine *e)
{
	struct dir_run *r = src;
	char commit[41];

	if (!e->out->commit[0] && kiln_run_setup_push(&e->setup, commit) < 0)
		KILN_LOG(KILN_LOG_WARN, "push_failed", kiln_error_last());
	if (!e->o->stop_at_end || !r->bad)
		return;
	kiln_engine_fatal(e, KILN_EINVALID,
	                  "%s: %llu file%s skipped and not committed (%.*s)%s%s; fix or remove %s and "
	                  "run again",
	                  e->p->source_path, (unsigned long long)r->bad, r->bad == 1 ? "" : "s",
	                  (int)r->note.len, r->note.ptr ? r->note.ptr : "",
	                  e->out->commit[0] ? "; the other files were committed as version " : "",
	                  e->out->commit, r->bad == 1 ? "it" : "them");
}

static void dir_close(void *src, kiln_engine *e)
{
	struct dir_run *r = src;

	(void)e;
	if (!r)
		return;
	if (r->inotify >= 0)
		close(r->inotify);
	for (size_t i = 0; i < r->closed_count; i++)
		free(r->closed[i]);
	free(r->closed);
	kiln_dir_clear(&r->dir);
	kiln_buf_free(&r->note);
	free(r);
}

static const kiln_source_stream kiln_dir_stream = {
    .open = dir_open,
    .start = dir_start,
    .poll = dir_poll,
    .at_end = dir_at_end,
    .flush = dir_flush,
    .delivered = dir_delivered,
    .positions = dir_positions,
    .committed = dir_committed,
    .abandon = dir_abandon,
    .stop = dir_stop,
    .close = dir_close,
};

/* ---- the row's keys */

/* path (a folder, relative to the pipeline file), glob (file names, no
 * '/'), done (a folder, relative to path; never path itself). The loader
 * names it after the folder unless source.name is set. */
static const char *without_slash(kiln_arena *arena, const char *path)
{
	size_t n = strlen(path);

	while (n > 1 && path[n - 1] == '/')
		n--;
	return kiln_arena_printf(arena, "%.*s", (int)n, path);
}

static int dir_configure(kiln_pipeline *p, kiln_config *cfg, const kiln_yaml_node *src)
{
	kiln_dir_config *c = kiln_arena_alloc(cfg->arena, sizeof(*c));
	const char *done = NULL;
	int64_t poll_ms = 1000;
	int rc;

	if (!c)
		return kiln_error_oom(NULL);
	p->source_config = c;
	c->glob = "*.jsonl";
	if ((rc = kiln_config_int(cfg, src, "source", "poll_ms", 10, 3600000, &poll_ms)) < 0)
		return rc;
	c->poll_ms = (unsigned)poll_ms;
	if ((rc = kiln_config_string(cfg, src, "source", "path", true, &p->source_path)) < 0 ||
	    (rc = kiln_config_string(cfg, src, "source", "glob", false, &c->glob)) < 0 ||
	    (rc = kiln_config_string(cfg, src, "source", "done", false, &done)) < 0)
		return rc;
	if (!(p->source_path = without_slash(cfg->arena, kiln_config_resolve(cfg, p->source_path))))
		return kiln_error_oom(NULL);
	if (!*c->glob || strchr(c->glob, '/'))
		return kiln_yaml_fail(cfg->doc, kiln_yaml_get(src, "glob"), "source.glob",
		                      "a pattern of file names (no '/': subfolders are not read)");
	if (!done)
		return 0;
	if (!*done || strcmp(without_slash(cfg->arena, done), ".") == 0 ||
	    !(c->done = without_slash(
	          cfg->arena,
	          done[0] == '/' ? done : kiln_arena_printf(cfg->arena, "%s/%s", p->source_path, done))) ||
	    strcmp(c->done, p->source_path) == 0)
		return kiln_yaml_fail(cfg->doc, kiln_yaml_get(src, "done"), "source.done",
		                      "must be a folder other than source.path");
	return 0;
}

/* lineage.json records the folder in each path, a JSON string. */
static int dir_settings(const kiln_pipeline *p)
{
	if (!kiln_utf8_valid(p->source_path, strlen(p->source_path)))
		return kiln_error_set(KILN_EINVALID,
		                      "%s: source.path is not valid UTF-8, and lineage.json records it: "
		                      "give the folder (or a link to it) a UTF-8 name",
		                      p->file);
	return 0;
}

static void dir_check(const kiln_pipeline *p, int timeout_ms, kiln_source_say say, void *ctx)
{
	const kiln_dir_config *c = p->source_config;
	char msg[1024];
	DIR *dir = opendir(p->source_path);

	(void)timeout_ms;
	if (!dir) {
		snprintf(msg, sizeof(msg), "%s: cannot open the folder: %s", p->source_path, strerror(errno));
		say(ctx, "source", false, msg);
		return;
	}
	closedir(dir);
	snprintf(msg, sizeof(msg), "%s is a readable folder (source %s, files %s)", p->source_path,
	         p->source_name, c->glob);
	say(ctx, "source", true, msg);
}

static const char *const dir_keys[] = {
    "kind", "path", "glob", "name", "done", "poll_ms", "max_record_bytes", "max_depth", NULL};

const kiln_source kiln_source_directory = {
    .version = KILN_SOURCE_VERSION,
    .kind = KILN_LINEAGE_DIRECTORY,
    .option_keys = dir_keys,
    .stream = &kiln_dir_stream,
    .configure = dir_configure,
    .reads_name = kiln_dir_reads_name,
    .settings = dir_settings,
    .check_name = "source",
    .check = dir_check,
    .reads_files = true,
};
