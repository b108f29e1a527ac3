/* A batch run over a file or stdin (see curate_run.h). Offsets of a file
 * source are 0-based line numbers; lineage.json keeps the next one, the
 * bytes read and the BLAKE2b-256 of those bytes (stdin: path "-", 0 bytes).
 *
 * The file and stdin sources (ingest/source.h): the curate pool's workers
 * read lines into batches in turn, curate and deliver them
 * (kiln_curate_pool_pull), and the ingest loop (ingest/ingest_loop.h) lands
 * them and commits one snapshot.
 *
 * A run killed between storing its quarantine object and its commit leaves
 * an object no commit covers; the next run quarantines those records again,
 * under another name when it reads further (a grown file, stdin sent again
 * with more), so they would be in the quarantine twice. Every run of a
 * source holds its run lock (<git dir>/kiln-run-<hash>.lock, flock) shared
 * from its lineage read to its end; a run that gets it exclusively (no run
 * of the source in flight) first removes the source's objects of the branch
 * at or past lineage's next. */
#include "ingest/curate_run.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cpus.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/line_reader.h"
#include "core/log.h"
#include "core/yaml_doc.h"
#include "ingest/curate_pool.h"
#include "ingest/ingest_loop.h"
#include "ingest/run_setup.h"
#include "manifest/repo_lock.h"
#include "shard/quarantine.h"

struct resume {
	const char *topic, *kind; /* the entry of this source's kind and name */
	bool found;
	int64_t next;
	int64_t other_next; /* the highest next of this name's entries of other kinds */
	uint64_t bytes;
	char prefix[65];
	char path[4096];
};

static int find_lineage(void *ctx, const kiln_lineage_entry *e)
{
	struct resume *r = ctx;

	if (e->partition != 0 || strcmp(e->topic, r->topic) != 0)
		return 0;
	if (strcmp(e->source, r->kind) != 0) {
		if (e->next > r->other_next)
			r->other_next = e->next;
		return 0;
	}
	r->found = true;
	r->next = e->next;
	r->bytes = e->bytes;
	snprintf(r->prefix, sizeof(r->prefix), "%s", e->prefix_blake2b ? e->prefix_blake2b : "");
	snprintf(r->path, sizeof(r->path), "%s", e->path ? e->path : "");
	return 0;
}

/* The file and stdin sources: batches of lines, offsets counting lines. */
#define BATCH_BYTES (1u << 20)
#define BATCH_LINES 8192

struct file_source {
	struct resume resume;
	int fd;
	kiln_line_reader *reader;
	uint64_t bytes_read, size; /* size: at open (0: not a regular file) */
	const kiln_run_progress *progress;
	char prefix_hex[65];
	kiln_lineage_entry lineage;
	int run_lock; /* the source's run lock, held shared; -1: none */
	kiln_ingest *in;
};

int kiln_batch_fill_lines(kiln_batch *b, kiln_line_reader *reader, const char *topic, int64_t first,
                          size_t max_lines, uint64_t *bytes_read)
{
	kiln_line line;
	int rc = 0;

	b->topic = topic;
	b->partition = 0;
	if (max_lines > BATCH_LINES)
		max_lines = BATCH_LINES;
	while (b->count < max_lines && b->in.len < BATCH_BYTES &&
	       (rc = kiln_line_reader_next(reader, &line)) > 0) {
		if ((rc = kiln_batch_reserve(b)) < 0)
			return rc;
		b->rec[b->count] =
		    (const char *)(uintptr_t)b->in.len; /* an offset into in, until it stops moving */
		b->len[b->count] = line.len;
		b->too_long[b->count] = line.too_long;
		b->offset[b->count] = first + (int64_t)b->count;
		if (!line.too_long && (rc = kiln_buf_put(&b->in, line.ptr, line.len)) < 0)
			return rc;
		b->count++;
		*bytes_read = line.offset_end;
	}
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < b->count; i++)
		b->rec[i] = b->too_long[i] ? NULL : b->in.ptr + (uintptr_t)b->rec[i];
	return b->count > 0;
}

unsigned kiln_curate_worker_count(const kiln_pipeline *p)
{
	long n = p->workers ? (long)p->workers : (long)kiln_cpu_count();
	return n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
}

/* A file resumes after what earlier runs covered, once its first bytes are
 * checked to be those they read. */
static int open_file(struct file_source *fs, const kiln_pipeline *p)
{
	struct resume *resume = &fs->resume;
	char now[65];
	int rc;

	fs->fd = open(p->source_path, O_RDONLY | O_CLOEXEC);
	if (fs->fd < 0)
		return kiln_error_set(errno == ENOENT ? KILN_ENOTFOUND : KILN_EIO, "%s: cannot open: %s",
		                      p->source_path, strerror(errno));
	if (!resume->found || !resume->bytes)
		return 0;
	if ((rc = kiln_fs_fingerprint(fs->fd, p->source_path, resume->bytes, now)) < 0)
		return rc;
	if (strcmp(now, resume->prefix) != 0)
		return kiln_error_set(KILN_EINVALID,
		                      "%s: its first %llu bytes are not those an earlier run of source %s "
		                      "read (lineage.json on %s/%s); give the new input another source.name",
		                      p->source_path, (unsigned long long)resume->bytes, p->source_name,
		                      p->dataset, p->branch);
	if (lseek(fs->fd, (off_t)resume->bytes, SEEK_SET) < 0)
		return kiln_error_set(KILN_EIO, "%s: seek: %s", p->source_path, strerror(errno));
	return 0;
}

/* The source's objects (its kind as its names carry it: none for a file)
 * on the branch from `from` on: no commit covers them. A name without a
 * kind may also be an object another kind of source of this name wrote
 * before names carried kinds (docs/FORMATS.md): those below that source's
 * next (`legacy`) stay. */
struct uncommitted {
	const kiln_pipeline *p;
	const char *kind; /* NULL: names without a kind */
	int64_t from, legacy;
	kiln_store *store;
	size_t removed;
};

static int remove_uncommitted(void *ctx, const kiln_quarantine_object *o)
{
	struct uncommitted *u = ctx;
	int rc;

	if (!o->dataset || strcmp(o->dataset, u->p->dataset) != 0 || strcmp(o->branch, u->p->branch) != 0 ||
	    o->partition != 0 || o->first < u->from ||
	    (u->kind ? !o->source || strcmp(o->source, u->kind) != 0
	             : o->source != NULL || o->first < u->legacy))
		return 0;
	if ((rc = kiln_store_remove(u->store, o->key)) < 0 && rc != KILN_ENOTFOUND)
		return rc;
	u->removed++;
	return 0;
}

/* Takes the source's run lock (see the top of this file) and reads its
 * lineage entry, first removing what killed runs left past it when no other
 * run of the source is in flight. */
static int lock_and_resume(struct file_source *fs, kiln_ingest *in)
{
	const kiln_pipeline *p = in->p;
	struct uncommitted u = {.p = p,
	                        .kind = p->source == &kiln_source_file ? NULL : p->source->kind,
	                        .store = in->setup.store};
	unsigned char hash[8];
	char name[64], hex[17];
	crypto_generichash_state st;
	int rc, exclusive;

	crypto_generichash_init(&st, NULL, 0, sizeof(hash));
	crypto_generichash_update(&st, (const unsigned char *)p->dataset, strlen(p->dataset) + 1);
	crypto_generichash_update(&st, (const unsigned char *)p->branch, strlen(p->branch) + 1);
	crypto_generichash_update(&st, (const unsigned char *)p->source->kind, strlen(p->source->kind) + 1);
	crypto_generichash_update(&st, (const unsigned char *)p->source_name, strlen(p->source_name));
	crypto_generichash_final(&st, hash, sizeof(hash));
	sodium_bin2hex(hex, sizeof(hex), hash, sizeof(hash));
	snprintf(name, sizeof(name), "kiln-run-%s.lock", hex);
	if ((exclusive = kiln_manifest_lock(in->setup.manifest, name, true, false, &fs->run_lock)) < 0)
		return exclusive;
	if (!exclusive && (rc = kiln_manifest_lock(in->setup.manifest, name, false, true, &fs->run_lock)) < 0)
		return rc;
	if ((rc = kiln_manifest_lineage(in->setup.manifest, p->dataset, p->branch, find_lineage,
	                                &fs->resume)) < 0)
		return rc;
	if (!exclusive)
		return 0;
	u.from = fs->resume.found ? fs->resume.next : 0;
	u.legacy = fs->resume.other_next;
	if ((rc = kiln_quarantine_list(in->setup.store, p->source_name, p->dataset, remove_uncommitted, &u)) <
	    0)
		return rc;
	if (u.removed)
		KILN_LOG(KILN_LOG_INFO, "uncommitted_objects",
		         "removed quarantine objects no commit covers (a run killed before its commit)",
		         KILN_F_STR("source", p->source_name), KILN_F_INT("from", u.from),
		         KILN_F_INT("removed", (int64_t)u.removed));
	/* shared from here: this run has written nothing yet, so another may
	 * take it exclusively in between */
	kiln_manifest_unlock(fs->run_lock);
	rc = kiln_manifest_lock(in->setup.manifest, name, false, true, &fs->run_lock);
	return rc < 0 ? rc : 0;
}

static int file_open(void **out, kiln_ingest *in, const void *args)
{
	const kiln_pipeline *p = in->p;
	struct file_source *fs = calloc(1, sizeof(*fs));
	struct stat st;
	int rc;

	*out = fs;
	if (!fs)
		return kiln_error_oom(NULL);
	fs->fd = -1;
	fs->run_lock = -1;
	fs->progress = args;
	fs->resume.topic = p->source_name;
	fs->resume.kind = p->source->kind;
	if ((rc = lock_and_resume(fs, in)) < 0)
		return rc;
	/* the input, resumed after what earlier runs covered */
	if (p->source == &kiln_source_file) {
		if ((rc = open_file(fs, p)) < 0)
			return rc;
	} else {
		fs->fd = STDIN_FILENO;
		fs->resume.bytes = 0; /* stdin: offsets go on, nothing to skip or check */
	}
	if (fstat(fs->fd, &st) == 0 && S_ISREG(st.st_mode))
		fs->size = (uint64_t)st.st_size;
	in->out->first_offset = in->out->next_offset = fs->resume.found ? (uint64_t)fs->resume.next : 0;
	if ((rc = kiln_line_reader_new(&fs->reader, fs->fd, p->max_record_bytes)) < 0)
		return rc;
	return KILN_SOURCE_GO;
}

/* Fills the workers' next batch (ingest/curate_pool.h, on a worker's thread,
 * one at a time in sequence). */
static int fill_batch(void *ctx, kiln_batch *b)
{
	struct file_source *fs = ctx;
	kiln_ingest *in = fs->in;
	int rc;

	if ((rc = kiln_batch_fill_lines(b, fs->reader, in->p->source_name, (int64_t)in->out->next_offset,
	                                BATCH_LINES, &fs->bytes_read)) <= 0)
		return rc;
	in->out->next_offset += b->count;
	if (fs->progress && fs->progress->fn)
		fs->progress->fn(fs->progress->ctx, fs->resume.bytes + fs->bytes_read, fs->size,
		                 in->out->next_offset - in->out->first_offset);
	return 1;
}

/* Every record, read, curated and delivered by the pool's workers: this
 * thread waits (the serial share of a run is the workers' turns). */
static int file_read(void *src, kiln_ingest *in)
{
	struct file_source *fs = src;
	int rc;

	fs->in = in;
	rc = kiln_curate_pool_pull(in->sink.pool, fill_batch, fs);
	in->out->serial_turns_ns = kiln_curate_pool_turns_cpu_ns(in->sink.pool);
	return rc;
}

static int file_end(void *src, kiln_ingest *in)
{
	(void)src;
	if (in->out->delta.records_in > 0)
		return KILN_SOURCE_GO;
	/* nothing new: no commit (an earlier one may still need pushing) */
	return kiln_run_setup_push(&in->setup, in->out->commit);
}

/* Fenced on the offset this run resumed from: of concurrent runs of one
 * source, only the first to commit moves it. */
static int file_lineage(void *src, kiln_ingest *in, kiln_snapshot *snap)
{
	struct file_source *fs = src;
	const kiln_pipeline *p = in->p;
	int rc;

	fs->lineage = (kiln_lineage_entry){.source = p->source->kind,
	                                   .topic = p->source_name,
	                                   .partition = 0,
	                                   .next = (int64_t)in->out->next_offset,
	                                   .fenced = true,
	                                   .expect_next = fs->resume.found ? fs->resume.next : -1};
	/* stdin: the marker path, none of its bytes to check (the fingerprint of no bytes) */
	fs->lineage.path = p->source == &kiln_source_file ? p->source_path : KILN_SOURCE_STDIN_PATH;
	fs->lineage.bytes = p->source == &kiln_source_file ? fs->resume.bytes + fs->bytes_read : 0;
	if ((rc = kiln_fs_fingerprint(fs->fd, p->source_path, fs->lineage.bytes, fs->prefix_hex)) < 0)
		return rc;
	fs->lineage.prefix_blake2b = fs->prefix_hex;
	snap->lineage = &fs->lineage;
	snap->lineage_count = 1;
	return 0;
}

static void file_close(void *src, kiln_ingest *in)
{
	struct file_source *fs = src;

	(void)in;
	if (!fs)
		return;
	kiln_line_reader_free(fs->reader);
	if (fs->fd >= 0 && fs->fd != STDIN_FILENO)
		close(fs->fd);
	kiln_manifest_unlock(fs->run_lock);
	free(fs);
}

static const char *const file_keys[] = {"kind", "path", "name", "max_record_bytes", "max_depth", NULL};

/* A file source reads path, and path "-" is stdin. */
static int file_configure(kiln_pipeline *p, kiln_config *cfg, const kiln_yaml_node *src)
{
	int rc;

	if ((rc = kiln_config_string(cfg, src, "source", "path", true, &p->source_path)) < 0)
		return rc;
	if (strcmp(p->source_path, "-") == 0) {
		p->source = &kiln_source_stdin;
		p->source_path = NULL;
	} else {
		p->source_path = kiln_config_resolve(cfg, p->source_path);
	}
	return 0;
}

/* lineage.json records the path, a JSON string. */
static int file_settings(const kiln_pipeline *p)
{
	if (!kiln_utf8_valid(p->source_path, strlen(p->source_path)))
		return kiln_error_set(KILN_EINVALID,
		                      "%s: source.path is not valid UTF-8, and lineage.json records it: "
		                      "give the file (or a link to it) a UTF-8 name",
		                      p->file);
	return 0;
}

static void file_check(const kiln_pipeline *p, int timeout_ms, kiln_source_say say, void *ctx)
{
	char msg[1024];
	int fd;

	(void)timeout_ms;
	if ((fd = open(p->source_path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(msg, sizeof(msg), "%s: cannot open: %s", p->source_path, strerror(errno));
		say(ctx, "source", false, msg);
		return;
	}
	close(fd);
	snprintf(msg, sizeof(msg), "%s is readable (source %s)", p->source_path, p->source_name);
	say(ctx, "source", true, msg);
}

static void stdin_check(const kiln_pipeline *p, int timeout_ms, kiln_source_say say, void *ctx)
{
	char msg[600];

	(void)timeout_ms;
	snprintf(msg, sizeof(msg), "stdin (source %s)", p->source_name);
	say(ctx, "source", true, msg);
}

const kiln_source kiln_source_file = {
    .version = KILN_SOURCE_VERSION,
    .kind = KILN_LINEAGE_FILE,
    .option_keys = file_keys,
    .open = file_open,
    .read = file_read,
    .end = file_end,
    .lineage = file_lineage,
    .close = file_close,
    .configure = file_configure,
    .settings = file_settings,
    .check_name = "source",
    .check = file_check,
};

/* stdin: path "-" or kind stdin; the same source, read once. */
const kiln_source kiln_source_stdin = {
    .version = KILN_SOURCE_VERSION,
    .kind = KILN_LINEAGE_STDIN,
    .option_keys = file_keys,
    .open = file_open,
    .read = file_read,
    .end = file_end,
    .lineage = file_lineage,
    .close = file_close,
    .check_name = "source",
    .check = stdin_check,
};

/* Another run of the same source committed first (the fence refused this
 * one's commit, nothing of it landed): a file is read again from where that
 * run stopped, so nothing is committed twice; stdin cannot be read again. */
#define RERUNS 20

int kiln_curate_run(const kiln_pipeline *p, const kiln_run_progress *progress, kiln_run_result *out)
{
	int rc;

	for (int attempt = 1;; attempt++) {
		rc = kiln_ingest_run(p->source, progress, p, out);
		if (rc != KILN_EFENCED || p->source == &kiln_source_stdin || attempt == RERUNS)
			break;
		KILN_LOG(KILN_LOG_INFO, "rerun",
		         "another run of this source committed first; reading on from there",
		         KILN_F_STR("source", p->source_name), KILN_F_INT("attempt", attempt));
	}
	if (rc == KILN_EFENCED)
		rc = kiln_error_set(
		    KILN_EFENCED,
		    "%s@%s: another run of source %s committed first%s; nothing of this run was committed",
		    p->dataset, p->branch, p->source_name,
		    p->source != &kiln_source_stdin ? " every time it was read again"
		                                    : " (stdin cannot be read again: send this input again)");
	return rc;
}
