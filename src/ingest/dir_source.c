/* The directory source (see dir_source.h): the scan, the read of one file,
 * the move to source.done and the names it reads; the row (its keys and its
 * streaming callbacks) is dir_run.c, which calls into this file. */
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
#include "ingest/curate_run.h"
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

static void free_files(kiln_dir_file *files, size_t count)
{
	for (size_t i = 0; i < count; i++)
		file_free(&files[i]);
	free(files);
}

/* What a scan lists (the notes stay). */
static void clear_listing(kiln_dir *d)
{
	free_files(d->files, d->count);
	for (size_t i = 0; i < d->entry_count; i++)
		free(d->entries[i].topic);
	free(d->entries);
	d->files = NULL;
	d->entries = NULL;
	d->count = d->entry_count = 0;
}

void kiln_dir_clear(kiln_dir *d)
{
	clear_listing(d);
	for (size_t i = 0; i < d->note_count; i++)
		free(d->notes[i].name);
	free(d->notes);
	d->notes = NULL;
	d->note_count = d->note_cap = 0;
}

/* ---- what was reported this run */

static const kiln_dir_note *noted(const kiln_dir *d, const char *name, kiln_dir_state state)
{
	for (size_t i = 0; i < d->note_count; i++)
		if (d->notes[i].state == state && strcmp(d->notes[i].name, name) == 0)
			return &d->notes[i];
	return NULL;
}

/* f is reported now (fresh), once per run; no memory: reported again later. */
static void note(kiln_dir *d, kiln_dir_file *f)
{
	f->fresh = true;
	if (KILN_ARRAY_GROW(d->notes, d->note_cap, d->note_count, NULL) < 0)
		return;
	d->notes[d->note_count] =
	    (kiln_dir_note){.name = strdup(f->name), .size = f->size, .state = f->state};
	if (d->notes[d->note_count].name)
		d->note_count++;
}

/* ---- the branch's entries for this folder */

struct entry_list {
	kiln_dir *d;
	size_t cap;
};

static int add_entry(void *ctx, const kiln_lineage_entry *e)
{
	struct entry_list *l = ctx;
	kiln_dir *d = l->d;
	kiln_dir_entry *x;

	if (e->partition != 0 || strcmp(e->source, KILN_LINEAGE_DIRECTORY) != 0 ||
	    !kiln_dir_reads_name(d->p, e->topic))
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
	const kiln_dir_config *c = p->source_config;
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
		if (e->d_name[0] == '.' || fnmatch(c->glob, e->d_name, 0) != 0)
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
	kiln_dir_file *was = d->files; /* READ files stay READ */
	size_t was_count = d->count;
	int rc;

	d->files = NULL;
	d->count = 0;
	clear_listing(d);
	if ((rc = kiln_manifest_lineage(m, p->dataset, p->branch, add_entry, &l)) < 0 ||
	    (rc = list_folder(d)) < 0)
		goto done;
	if (d->entry_count)
		qsort(d->entries, d->entry_count, sizeof(*d->entries), by_topic);
	for (size_t i = 0; i < d->count && rc >= 0; i++) {
		kiln_dir_file *f = &d->files[i], *old;
		const kiln_dir_entry *e;
		const kiln_dir_note *bad;

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
		if (was_count && (old = bsearch(f, was, was_count, sizeof(*was), by_name)) &&
		    old->state == KILN_DIR_READ) {
			f->state = KILN_DIR_READ; /* as it was read: its entry says so */
			f->size = old->size;
			f->lines = old->lines;
			memcpy(f->prefix, old->prefix, sizeof(f->prefix));
			f->entry_path = old->entry_path;
			old->entry_path = NULL;
			continue;
		}
		if (!(e = find_entry(d, f->topic))) {
			/* empty: left for later; BAD at this size already: not again */
			f->state = !f->size ? KILN_DIR_GONE : KILN_DIR_NEW;
			if (f->size && (bad = noted(d, f->name, KILN_DIR_BAD)) && bad->size == f->size)
				f->state = KILN_DIR_BAD;
			continue;
		}
		if ((rc = matches(f, e)) < 0)
			break;
		f->state = rc == GONE ? KILN_DIR_GONE : rc ? KILN_DIR_DONE : KILN_DIR_CHANGED;
		if (f->state == KILN_DIR_CHANGED && !noted(d, f->name, KILN_DIR_CHANGED)) {
			note(d, f);
			KILN_LOG(KILN_LOG_WARN, "file_changed",
			         "the file changed after it was committed: it is not read again (write new "
			         "records to a new file)",
			         KILN_F_STR("source", p->source_name), KILN_F_STR("file", f->path),
			         KILN_F_INT("committed_bytes", e->bytes), KILN_F_INT("bytes", f->size));
		}
		rc = 0;
	}
done:
	free_files(was, was_count);
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
			note(d, f);
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
	const kiln_dir_config *c = d->p->source_config;
	char *to;

	if (!c->done)
		return;
	if (!(to = malloc(strlen(c->done) + strlen(f->name) + 2)))
		return;
	sprintf(to, "%s/%s", c->done, f->name);
	if (rename(f->path, to) < 0 && errno != ENOENT)
		KILN_LOG(KILN_LOG_WARN, "file_not_moved",
		         "a committed file could not be moved to source.done; the next run moves it",
		         KILN_F_STR("file", f->path), KILN_F_STR("to", to),
		         KILN_F_STR("reason", strerror(errno)));
	free(to);
}

int kiln_dir_prepare_done(const kiln_pipeline *p)
{
	const kiln_dir_config *c = p->source_config;
	struct stat folder, done;

	if (!c->done)
		return 0;
	if (mkdir(c->done, 0700) < 0 && errno != EEXIST)
		return kiln_error_set(KILN_EIO, "source.done %s: cannot make it: %s", c->done,
		                      strerror(errno));
	if (stat(c->done, &done) < 0 || !S_ISDIR(done.st_mode))
		return kiln_error_set(KILN_EINVALID, "source.done %s: not a folder", c->done);
	if (stat(p->source_path, &folder) == 0 && folder.st_dev == done.st_dev &&
	    folder.st_ino == done.st_ino)
		return kiln_error_set(KILN_EINVALID,
		                      "source.done %s is source.path itself: name another folder", c->done);
	return 0;
}

/* The files of its folder: <source.name>=... */
bool kiln_dir_reads_name(const kiln_pipeline *p, const char *name)
{
	size_t n = strlen(p->source_name);

	return strncmp(name, p->source_name, n) == 0 && name[n] == KILN_SOURCE_DIR_SEP;
}
