/* The directory source (see dir_source.h): the scan, the read of one file,
 * the move to source.done, and the row that reads a folder once and
 * commits one snapshot. */
#include "ingest/dir_source.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/array.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/instream.h"
#include "core/json.h"
#include "core/line_reader.h"
#include "core/log.h"
#include "core/yaml_doc.h"
#include "ingest/ingest_loop.h"
#include "ingest/source.h"

static bool plain_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
	       c == '_' || c == '-';
}

int kiln_dir_topic(kiln_buf *out, const char *source_name, const char *name)
{
	static const char hex[] = "0123456789ABCDEF";
	int rc;

	kiln_buf_reset(out);
	if ((rc = kiln_buf_puts(out, source_name)) < 0 || (rc = kiln_buf_putc(out, KILN_SOURCE_DIR_SEP)) < 0)
		return rc;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
		char esc[3] = {KILN_SOURCE_DIR_SEP, hex[*c >> 4], hex[*c & 15]};
		if ((rc = plain_char(*c) ? kiln_buf_putc(out, (char)*c) : kiln_buf_put(out, esc, 3)) < 0)
			return rc;
	}
	return kiln_buf_putc(out, '\0');
}

static void file_free(kiln_dir_file *f)
{
	free(f->name);
	free(f->path);
	free(f->topic);
	free(f->error);
	free(f->entry_path);
}

void kiln_dir_clear(kiln_dir *d)
{
	for (size_t i = 0; i < d->count; i++)
		file_free(&d->files[i]);
	for (size_t i = 0; i < d->entry_count; i++)
		free(d->entries[i].topic);
	free(d->files);
	free(d->entries);
	d->files = NULL;
	d->entries = NULL;
	d->count = d->entry_count = 0;
}

/* ---- the branch's entries for this folder */

struct entry_list {
	kiln_dir *d;
	size_t cap;
};

static bool dir_reads_name(const kiln_pipeline *p, const char *name);

static int add_entry(void *ctx, const kiln_lineage_entry *e)
{
	struct entry_list *l = ctx;
	kiln_dir *d = l->d;
	kiln_dir_entry *x;

	if (e->partition != 0 || !dir_reads_name(d->p, e->topic))
		return 0;
	if (KILN_ARRAY_GROW(d->entries, l->cap, d->entry_count, NULL) < 0)
		return KILN_ENOMEM;
	x = &d->entries[d->entry_count];
	if (!(x->topic = strdup(e->topic)))
		return kiln_error_oom(NULL);
	x->bytes = e->bytes;
	snprintf(x->prefix, sizeof(x->prefix), "%s", e->prefix_blake2b ? e->prefix_blake2b : "");
	d->entry_count++;
	return 0;
}

static int by_topic(const void *a, const void *b)
{
	return strcmp(((const kiln_dir_entry *)a)->topic, ((const kiln_dir_entry *)b)->topic);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const kiln_dir_file *)a)->name, ((const kiln_dir_file *)b)->name);
}

static const kiln_dir_entry *find_entry(const kiln_dir *d, const char *topic)
{
	kiln_dir_entry key = {.topic = (char *)topic};

	return d->entry_count ? bsearch(&key, d->entries, d->entry_count, sizeof(key), by_topic) : NULL;
}

/* ---- the scan */

static int list_folder(kiln_dir *d)
{
	const kiln_pipeline *p = d->p;
	DIR *dir = opendir(p->source_path);
	size_t cap = 0;
	struct dirent *e;
	int rc = 0;

	if (!dir)
		return kiln_error_set(errno == ENOENT ? KILN_ENOTFOUND : KILN_EIO,
		                      "%s: cannot open the folder: %s", p->source_path, strerror(errno));
	while ((errno = 0, e = readdir(dir))) {
		struct stat st;
		kiln_dir_file *f;

		/* dot-files are a writer's temporaries (and . and ..) */
		if (e->d_name[0] == '.' || fnmatch(p->source_glob, e->d_name, 0) != 0)
			continue;
		if (fstatat(dirfd(dir), e->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode))
			continue; /* gone, a folder, a socket: only regular files are read */
		if ((rc = KILN_ARRAY_GROW(d->files, cap, d->count, NULL)) < 0)
			break;
		f = &d->files[d->count];
		*f = (kiln_dir_file){.name = strdup(e->d_name), .size = (uint64_t)st.st_size};
		d->count++;
		if (!f->name || !(f->path = malloc(strlen(p->source_path) + strlen(f->name) + 2))) {
			rc = kiln_error_oom(NULL);
			break;
		}
		sprintf(f->path, "%s/%s", p->source_path, f->name);
	}
	if (!rc && errno)
		rc = kiln_error_set(KILN_EIO, "%s: cannot list the folder: %s", p->source_path,
		                    strerror(errno));
	closedir(dir);
	if (!rc && d->count)
		qsort(d->files, d->count, sizeof(*d->files), by_name);
	return rc;
}

/* Whether the file still is the one its entry covers: same size, same
 * fingerprint. 1 yes, 0 no, GONE (moved away since it was listed: another
 * run's source.done), or an error. */
#define GONE 2

static int matches(const kiln_dir_file *f, const kiln_dir_entry *e)
{
	char now[65];
	struct stat st;
	int fd = open(f->path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return errno == ENOENT
		           ? GONE
		           : kiln_error_set(KILN_EIO, "%s: cannot open: %s", f->path, strerror(errno));
	if (fstat(fd, &st) < 0)
		rc = kiln_error_set(KILN_EIO, "%s: stat: %s", f->path, strerror(errno));
	else if ((uint64_t)st.st_size != e->bytes)
		rc = 0;
	else if ((rc = kiln_fs_fingerprint(fd, f->path, e->bytes, now)) == 0)
		rc = strcmp(now, e->prefix) == 0;
	else if (rc == KILN_EINVALID)
		rc = 0; /* shorter than its entry by now: changed */
	close(fd);
	return rc;
}

int kiln_dir_scan(kiln_dir *d, kiln_manifest *m)
{
	const kiln_pipeline *p = d->p;
	struct entry_list l = {.d = d};
	kiln_buf topic = KILN_BUF_INIT(0);
	int rc;

	kiln_dir_clear(d);
	if ((rc = kiln_manifest_lineage(m, p->dataset, p->branch, add_entry, &l)) < 0 ||
	    (rc = list_folder(d)) < 0)
		return rc;
	if (d->entry_count)
		qsort(d->entries, d->entry_count, sizeof(*d->entries), by_topic);
	for (size_t i = 0; i < d->count && rc >= 0; i++) {
		kiln_dir_file *f = &d->files[i];
		const kiln_dir_entry *e;

		if ((rc = kiln_dir_topic(&topic, p->source_name, f->name)) < 0 ||
		    !(f->topic = strdup(topic.ptr))) {
			rc = rc < 0 ? rc : kiln_error_oom(NULL);
			break;
		}
		if (strlen(f->topic) > KILN_DIR_TOPIC_MAX) {
			f->state = KILN_DIR_BAD;
			if (asprintf(&f->error,
			             "%s: the name is too long for a topic (%zu bytes encoded, at most %d)",
			             f->path, strlen(f->topic), KILN_DIR_TOPIC_MAX) < 0)
				f->error = NULL;
			continue;
		}
		if (!(e = find_entry(d, f->topic))) {
			f->state = f->size ? KILN_DIR_NEW : KILN_DIR_GONE; /* empty: left for later */
			continue;
		}
		if ((rc = matches(f, e)) < 0)
			break;
		f->state = rc == GONE ? KILN_DIR_GONE : rc ? KILN_DIR_DONE : KILN_DIR_CHANGED;
		if (f->state == KILN_DIR_CHANGED)
			KILN_LOG(KILN_LOG_WARN, "file_changed",
			         "the file changed after it was committed: it is not read again (write new "
			         "records to a new file)",
			         KILN_F_STR("source", p->source_name), KILN_F_STR("file", f->path),
			         KILN_F_INT("committed_bytes", e->bytes), KILN_F_INT("bytes", f->size));
		rc = 0;
	}
	kiln_buf_free(&topic);
	return rc < 0 ? rc : 0;
}

/* ---- reading one file */

#define READ_BATCH_LINES 8192

static int submit_lines(kiln_dir_file *f, kiln_line_reader *reader, kiln_curate_pool *pool, uint64_t *records)
{
	uint64_t bytes_read = 0;

	for (;;) {
		kiln_batch *b = kiln_curate_pool_batch(pool);
		int rc;

		if (!b)
			return kiln_error_oom(NULL);
		if ((rc = kiln_batch_fill_lines(b, reader, f->topic, f->lines, READ_BATCH_LINES,
		                                &bytes_read)) <= 0) {
			kiln_curate_pool_recycle(pool, b);
			return rc;
		}
		f->lines += (int64_t)b->count;
		*records += b->count;
		if ((rc = kiln_curate_pool_submit(pool, b)) < 0)
			return rc;
	}
}

int kiln_dir_read_file(kiln_dir *d, kiln_dir_file *f, kiln_curate_pool *pool, uint64_t *records)
{
	kiln_instream_kind kind = kiln_instream_kind_of(f->name);
	kiln_instream *stream = NULL;
	kiln_line_reader *reader = NULL;
	struct stat st;
	int fd = open(f->path, O_RDONLY | O_CLOEXEC), rc;

	*records = 0;
	if (fd < 0 && errno == ENOENT) {
		f->state = KILN_DIR_GONE; /* moved away since the scan (another run's done) */
		return 0;
	}
	if (fd < 0)
		return kiln_error_set(KILN_EIO, "%s: cannot open: %s", f->path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		rc = kiln_error_set(KILN_EIO, "%s: stat: %s", f->path, strerror(errno));
		goto done;
	}
	f->size = (uint64_t)st.st_size;
	f->lines = 0;
	if (!f->size) {
		f->state = KILN_DIR_GONE;
		rc = 0;
		goto done;
	}
	/* a compressed file decompresses whole before any line of it is used */
	if (kind != KILN_INSTREAM_PLAIN) {
		if ((rc = kiln_instream_open(&stream, fd, f->size, kind, f->path)) < 0)
			goto done;
		if ((rc = kiln_instream_check(stream)) < 0) {
			if (rc != KILN_EINVALID)
				goto done;
			f->state = KILN_DIR_BAD;
			f->error = strdup(kiln_error_last()); /* the run's error names it, once */
			rc = 0;
			goto done;
		}
		kiln_instream_free(stream);
		stream = NULL;
	}
	if ((rc = kiln_instream_open(&stream, fd, f->size, kind, f->path)) < 0 ||
	    (rc = kiln_line_reader_new_stream(&reader, kiln_instream_read, stream, d->p->max_record_bytes)) <
	        0 ||
	    (rc = submit_lines(f, reader, pool, records)) < 0 ||
	    (rc = kiln_fs_fingerprint(fd, f->path, f->size, f->prefix)) < 0)
		goto done;
	f->state = KILN_DIR_READ;

done:
	kiln_line_reader_free(reader);
	kiln_instream_free(stream);
	close(fd);
	return rc;
}

/* ---- source.done */

void kiln_dir_move_done(kiln_dir *d, kiln_dir_file *f)
{
	char *to;

	if (!d->p->source_done)
		return;
	if (!(to = malloc(strlen(d->p->source_done) + strlen(f->name) + 2)))
		return;
	sprintf(to, "%s/%s", d->p->source_done, f->name);
	if (rename(f->path, to) < 0 && errno != ENOENT)
		KILN_LOG(KILN_LOG_WARN, "file_not_moved",
		         "a committed file could not be moved to source.done; the next run moves it",
		         KILN_F_STR("file", f->path), KILN_F_STR("to", to),
		         KILN_F_STR("reason", strerror(errno)));
	free(to);
}

/* source.done exists (made 0700 when missing) and is not the folder. */
static int prepare_done(const kiln_pipeline *p)
{
	struct stat folder, done;

	if (!p->source_done)
		return 0;
	if (mkdir(p->source_done, 0700) < 0 && errno != EEXIST)
		return kiln_error_set(KILN_EIO, "source.done %s: cannot make it: %s", p->source_done,
		                      strerror(errno));
	if (stat(p->source_done, &done) < 0 || !S_ISDIR(done.st_mode))
		return kiln_error_set(KILN_EINVALID, "source.done %s: not a folder", p->source_done);
	if (stat(p->source_path, &folder) == 0 && folder.st_dev == done.st_dev &&
	    folder.st_ino == done.st_ino)
		return kiln_error_set(KILN_EINVALID,
		                      "source.done %s is source.path itself: name another folder",
		                      p->source_done);
	return 0;
}

/* ---- the row: what the folder holds, read once, one commit */

struct dir_run {
	kiln_dir dir;
	kiln_lineage_entry *lineage;
	uint64_t bad;
	kiln_buf note; /* the bad files' reasons, for the run's error */
};

/* "a, b, c" into out (at most its size), the names of files in `state`. */
static void list_names(const kiln_dir *d, kiln_dir_state state, char *out, size_t size, uint64_t *count)
{
	size_t at = 0;

	*count = 0;
	out[0] = '\0';
	for (size_t i = 0; i < d->count; i++) {
		if (d->files[i].state != state)
			continue;
		(*count)++;
		if (at < size) {
			int n = snprintf(out + at, size - at, "%s%s", at ? ", " : "", d->files[i].name);
			at += n > 0 ? (size_t)n : 0;
		}
	}
	if (at >= size && size > 4)
		memcpy(out + size - 4, "...", 4);
}

static int dir_open(void **out, kiln_ingest *in, const void *args)
{
	struct dir_run *r = calloc(1, sizeof(*r));
	int rc;

	(void)args;
	*out = r;
	if (!r)
		return kiln_error_oom(NULL);
	r->dir.p = in->p;
	r->note = (kiln_buf)KILN_BUF_INIT(4096);
	if ((rc = prepare_done(in->p)) < 0 || (rc = kiln_dir_scan(&r->dir, in->setup.manifest)) < 0)
		return rc;
	/* committed, then killed before the move: move it now */
	for (size_t i = 0; i < r->dir.count; i++)
		if (r->dir.files[i].state == KILN_DIR_DONE)
			kiln_dir_move_done(&r->dir, &r->dir.files[i]);
	list_names(&r->dir, KILN_DIR_CHANGED, in->out->changed, sizeof(in->out->changed),
	           &in->out->files_changed);
	return KILN_SOURCE_GO;
}

static int dir_read(void *src, kiln_ingest *in)
{
	struct dir_run *r = src;

	for (size_t i = 0; i < r->dir.count; i++) {
		kiln_dir_file *f = &r->dir.files[i];
		uint64_t records;
		int rc;

		if (f->state == KILN_DIR_NEW &&
		    (rc = kiln_dir_read_file(&r->dir, f, in->sink.pool, &records)) < 0)
			return rc;
		if (f->state == KILN_DIR_READ) {
			in->out->files_read++;
			in->out->next_offset += records;
		} else if (f->state == KILN_DIR_BAD) {
			/* one line in the end: "a.gz: why; b.zst: why" (capped) */
			if (r->bad++)
				(void)kiln_buf_puts(&r->note, "; ");
			(void)kiln_buf_puts(&r->note, f->error ? f->error : f->name);
		}
	}
	return 0;
}

static int bad_files(struct dir_run *r, const char *committed)
{
	const kiln_pipeline *p = r->dir.p;

	return kiln_error_set(KILN_EINVALID,
	                      "%s: %llu file%s skipped and not committed (%.*s)%s%s; fix or remove %s and "
	                      "run again",
	                      p->source_path, (unsigned long long)r->bad, r->bad == 1 ? "" : "s",
	                      (int)r->note.len, r->note.ptr ? r->note.ptr : "",
	                      committed ? "; the other files were committed as version " : "",
	                      committed ? committed : "", r->bad == 1 ? "it" : "them");
}

static int dir_end(void *src, kiln_ingest *in)
{
	struct dir_run *r = src;
	int rc;

	if (in->out->files_read > 0)
		return KILN_SOURCE_GO;
	/* nothing new: no commit (an earlier one may still need pushing) */
	if ((rc = kiln_run_setup_push(&in->setup, in->out->commit)) < 0)
		return rc;
	return r->bad ? bad_files(r, NULL) : KILN_SOURCE_DONE;
}

/* One entry per file read, fenced on "no entry yet": of two runs over one
 * folder, only the first to commit a file does. */
static int dir_lineage(void *src, kiln_ingest *in, kiln_snapshot *snap)
{
	struct dir_run *r = src;
	size_t n = 0;

	(void)in;
	if (!(r->lineage = calloc(r->dir.count ? r->dir.count : 1, sizeof(*r->lineage))))
		return kiln_error_oom(NULL);
	for (size_t i = 0; i < r->dir.count; i++) {
		kiln_dir_file *f = &r->dir.files[i];

		if (f->state != KILN_DIR_READ)
			continue;
		/* lineage.json holds UTF-8: a name that is not keeps its topic's spelling */
		if (!kiln_utf8_valid(f->path, strlen(f->path)) && !f->entry_path) {
			if (!(f->entry_path = malloc(strlen(r->dir.p->source_path) + strlen(f->topic) + 2)))
				return kiln_error_oom(NULL);
			sprintf(f->entry_path, "%s/%s", r->dir.p->source_path,
			        strchr(f->topic, KILN_SOURCE_DIR_SEP) + 1);
		}
		r->lineage[n++] = (kiln_lineage_entry){.topic = f->topic,
		                                       .partition = 0,
		                                       .next = f->lines,
		                                       .path = f->entry_path ? f->entry_path : f->path,
		                                       .bytes = f->size,
		                                       .prefix_blake2b = f->prefix,
		                                       .fenced = true,
		                                       .expect_next = -1};
	}
	snap->lineage = r->lineage;
	snap->lineage_count = n;
	return 0;
}

static int dir_committed(void *src, kiln_ingest *in, int rc)
{
	struct dir_run *r = src;

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < r->dir.count; i++)
		if (r->dir.files[i].state == KILN_DIR_READ)
			kiln_dir_move_done(&r->dir, &r->dir.files[i]);
	return r->bad ? bad_files(r, in->out->commit) : rc;
}

static void dir_close(void *src, kiln_ingest *in)
{
	struct dir_run *r = src;

	(void)in;
	if (!r)
		return;
	kiln_dir_clear(&r->dir);
	kiln_buf_free(&r->note);
	free(r->lineage);
	free(r);
}

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
	const char *done = NULL;
	int rc;

	p->source_glob = "*.jsonl";
	if ((rc = kiln_config_string(cfg, src, "source", "path", true, &p->source_path)) < 0 ||
	    (rc = kiln_config_string(cfg, src, "source", "glob", false, &p->source_glob)) < 0 ||
	    (rc = kiln_config_string(cfg, src, "source", "done", false, &done)) < 0)
		return rc;
	if (!(p->source_path = without_slash(cfg->arena, kiln_config_resolve(cfg, p->source_path))))
		return kiln_error_oom(NULL);
	if (!*p->source_glob || strchr(p->source_glob, '/'))
		return kiln_yaml_fail(cfg->doc, kiln_yaml_get(src, "glob"), "source.glob",
		                      "a pattern of file names (no '/': subfolders are not read)");
	if (!done)
		return 0;
	if (!*done || strcmp(without_slash(cfg->arena, done), ".") == 0 ||
	    !(p->source_done = without_slash(
	          cfg->arena,
	          done[0] == '/' ? done : kiln_arena_printf(cfg->arena, "%s/%s", p->source_path, done))) ||
	    strcmp(p->source_done, p->source_path) == 0)
		return kiln_yaml_fail(cfg->doc, kiln_yaml_get(src, "done"), "source.done",
		                      "must be a folder other than source.path");
	return 0;
}

/* The files of its folder: <source.name>=... */
static bool dir_reads_name(const kiln_pipeline *p, const char *name)
{
	size_t n = strlen(p->source_name);

	return strncmp(name, p->source_name, n) == 0 && name[n] == KILN_SOURCE_DIR_SEP;
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
	         p->source_name, p->source_glob);
	say(ctx, "source", true, msg);
}

static const char *const dir_keys[] = {"kind",      "path", "glob", "name", "done", "max_record_bytes",
                                       "max_depth", NULL};

const kiln_source kiln_source_directory = {
    .version = KILN_SOURCE_VERSION,
    .kind = "directory",
    .option_keys = dir_keys,
    .open = dir_open,
    .read = dir_read,
    .end = dir_end,
    .lineage = dir_lineage,
    .committed = dir_committed,
    .close = dir_close,
    .configure = dir_configure,
    .reads_name = dir_reads_name,
    .settings = dir_settings,
    .check_name = "source",
    .check = dir_check,
};
