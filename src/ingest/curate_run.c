/* A batch run over a file or stdin (see curate_run.h). Offsets of a file
 * source are 0-based line numbers; lineage.json keeps the next one, the
 * bytes read and the BLAKE2b-256 of those bytes.
 *
 * The calling thread reads lines into batches for the curate pool
 * (ingest/curate_pool.h), whose workers validate and curate them, and hands
 * the results, in input order, to the shard writers and the quarantine. */
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
#include "core/error.h"
#include "core/line_reader.h"
#include "core/log.h"
#include "ingest/curate_pool.h"
#include "ingest/run_setup.h"
#include "shard/quarantine.h"
#include "shard/writer.h"

struct resume {
	const char *topic;
	bool found;
	int64_t next;
	uint64_t bytes;
	char prefix[65];
	char path[4096];
};

static int find_lineage(void *ctx, const kiln_lineage_entry *e)
{
	struct resume *r = ctx;

	if (e->partition != 0 || strcmp(e->topic, r->topic) != 0)
		return 0;
	r->found = true;
	r->next = e->next;
	r->bytes = e->bytes;
	snprintf(r->prefix, sizeof(r->prefix), "%s", e->prefix_blake2b ? e->prefix_blake2b : "");
	snprintf(r->path, sizeof(r->path), "%s", e->path ? e->path : "");
	return 0;
}

/* The fingerprint of the first `bytes` bytes of a file (docs/FORMATS.md,
 * lineage.json): BLAKE2b-256 of those bytes when there are at most 2 MiB,
 * else of their first MiB followed by their last MiB. It tells a replaced
 * file from a grown one without reading all of it again. */
#define FINGERPRINT_PART (1u << 20)

static int hash_range(int fd, const char *path, uint64_t from, uint64_t to, crypto_generichash_state *st)
{
	static _Thread_local char block[1 << 16];

	while (from < to) {
		size_t want = to - from < sizeof(block) ? (size_t)(to - from) : sizeof(block);
		ssize_t n = pread(fd, block, want, (off_t)from);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return kiln_error_set(KILN_EIO, "%s: read: %s", path, strerror(errno));
		if (n == 0)
			return kiln_error_set(KILN_EINVALID, "%s: shorter (%llu bytes) than the %llu bytes an earlier run read",
					      path, (unsigned long long)from, (unsigned long long)to);
		crypto_generichash_update(st, (const unsigned char *)block, (size_t)n);
		from += (uint64_t)n;
	}
	return 0;
}

static int fingerprint(int fd, const char *path, uint64_t bytes, char out[65])
{
	crypto_generichash_state st;
	unsigned char digest[32];
	int rc;

	crypto_generichash_init(&st, NULL, 0, sizeof(digest));
	if (bytes <= 2 * (uint64_t)FINGERPRINT_PART)
		rc = hash_range(fd, path, 0, bytes, &st);
	else if ((rc = hash_range(fd, path, 0, FINGERPRINT_PART, &st)) == 0)
		rc = hash_range(fd, path, bytes - FINGERPRINT_PART, bytes, &st);
	if (rc < 0)
		return rc;
	crypto_generichash_final(&st, digest, sizeof(digest));
	sodium_bin2hex(out, 65, digest, sizeof(digest));
	return 0;
}

/* The file source: fills batches with lines, offsets counting lines. */
#define BATCH_BYTES (1u << 20)
#define BATCH_LINES 8192

struct file_run {
	const kiln_pipeline *p;
	kiln_shard_writer **writers;
	kiln_quarantine *quarantine;
	kiln_stats *delta;
};

/* Fills a batch from the reader; returns 1 with records, 0 at the end. */
static int fill(kiln_line_reader *reader, kiln_batch *b, const char *topic, int64_t first, uint64_t *bytes_read)
{
	kiln_line line;
	int rc = 0;

	b->topic = topic;
	b->partition = 0;
	while (b->count < BATCH_LINES && b->in.len < BATCH_BYTES && (rc = kiln_line_reader_next(reader, &line)) > 0) {
		if ((rc = kiln_batch_reserve(b)) < 0)
			return rc;
		b->rec[b->count] = (const char *)(uintptr_t)b->in.len; /* an offset into in, until it stops moving */
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

static int consume(void *ctx, kiln_batch *b)
{
	struct file_run *fr = ctx;

	return kiln_batch_deliver(b, fr->writers, fr->quarantine, fr->delta);
}

unsigned kiln_curate_worker_count(const kiln_pipeline *p)
{
	long n = p->workers ? (long)p->workers : sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
}

/* Reads, processes and consumes every record; the run's core loop. */
static int pump(kiln_curate_pool *pool, kiln_line_reader *reader, const char *topic, kiln_run_result *out,
		uint64_t *bytes_read)
{
	for (;;) {
		kiln_batch *b = kiln_curate_pool_batch(pool);
		int rc;

		if (!b)
			return kiln_error_set(KILN_ENOMEM, "out of memory");
		if ((rc = fill(reader, b, topic, (int64_t)out->next_offset, bytes_read)) <= 0) {
			kiln_curate_pool_recycle(pool, b);
			if (rc < 0)
				return rc;
			return kiln_curate_pool_drain(pool);
		}
		out->next_offset += b->count;
		if ((rc = kiln_curate_pool_submit(pool, b)) < 0)
			return rc;
	}
}

/* One pass: resume from lineage.json, read to the end, commit. */
static int curate_once(const kiln_pipeline *p, kiln_run_result *out)
{
	kiln_run_setup setup = { 0 };
	kiln_shard_writer *writers[KILN_SPLIT_COUNT] = { 0 };
	kiln_quarantine *quarantine = NULL;
	kiln_line_reader *reader = NULL;
	kiln_curate_pool *pool = NULL;
	struct resume resume = { .topic = p->source_name };
	kiln_stats *d = &out->delta;
	struct file_run fr = { .p = p, .writers = writers, .delta = d };
	int fd = -1, rc;
	uint64_t bytes_read = 0;
	char prefix_hex[65] = "";

	memset(out, 0, sizeof(*out));
	if ((rc = kiln_run_setup_open(&setup, p)) < 0 ||
	    (rc = kiln_manifest_lineage(setup.manifest, p->dataset, p->branch, find_lineage, &resume)) < 0)
		goto cleanup;

	/* the input, resumed after what earlier runs covered */
	if (p->source_kind == KILN_SOURCE_FILE) {
		fd = open(p->source_path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = kiln_error_set(errno == ENOENT ? KILN_ENOTFOUND : KILN_EIO, "%s: cannot open: %s",
					    p->source_path, strerror(errno));
			goto cleanup;
		}
		if (resume.found && resume.bytes) {
			char now[65];
			if ((rc = fingerprint(fd, p->source_path, resume.bytes, now)) < 0)
				goto cleanup;
			if (strcmp(now, resume.prefix) != 0) {
				rc = kiln_error_set(KILN_EINVALID,
						    "%s: its first %llu bytes are not those an earlier run of source %s "
						    "read (lineage.json on %s/%s); give the new input another source.name",
						    p->source_path, (unsigned long long)resume.bytes, p->source_name,
						    p->dataset, p->branch);
				goto cleanup;
			}
			if (lseek(fd, (off_t)resume.bytes, SEEK_SET) < 0) {
				rc = kiln_error_set(KILN_EIO, "%s: seek: %s", p->source_path, strerror(errno));
				goto cleanup;
			}
		}
	} else {
		fd = STDIN_FILENO;
		resume.bytes = 0; /* stdin: offsets go on, nothing to skip or check */
	}
	out->first_offset = out->next_offset = resume.found ? (uint64_t)resume.next : 0;

	kiln_shard_writer_options wopt = { .target_bytes = p->target_bytes, .level = p->zstd_level, .background = true };
	if ((rc = kiln_quarantine_new(&quarantine, setup.store, p->dataset, p->branch,
				       p->target_bytes, p->zstd_level, NULL)) < 0 ||
	    (rc = kiln_line_reader_new(&reader, fd, p->max_record_bytes)) < 0)
		goto cleanup;
	fr.quarantine = quarantine;
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		if ((rc = kiln_shard_writer_new(&writers[i], setup.store, &wopt)) < 0)
			goto cleanup;
	kiln_curate_pool_options popt = { .pipeline = p, .contract = setup.contract, .key = &setup.key,
					  .splitter = &setup.splitter, .split_field = setup.split_field,
					  .workers = kiln_curate_worker_count(p), .consume = consume, .ctx = &fr };
	if ((rc = kiln_curate_pool_new(&pool, &popt)) < 0 ||
	    (rc = pump(pool, reader, p->source_name, out, &bytes_read)) < 0)
		goto cleanup;
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		if ((rc = kiln_shard_writer_finish(writers[i])) < 0)
			goto cleanup;
	if (d->records_in == 0) {
		/* nothing new: no commit (an earlier one may still need pushing) */
		rc = kiln_run_setup_push(&setup, out->commit);
		goto cleanup;
	}
	if ((rc = kiln_quarantine_flush(quarantine)) < 0)
		goto cleanup;
	out->quarantine_objects = kiln_quarantine_objects(quarantine);

	/* the snapshot */
	kiln_snapshot snap = { 0 };
	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		snap.shards[i] = kiln_shard_writer_shards(writers[i], &snap.shard_count[i]);
		d->splits[i].shards = snap.shard_count[i];
		for (size_t j = 0; j < snap.shard_count[i]; j++) {
			d->splits[i].bytes += snap.shards[i][j].bytes;
			d->splits[i].raw_bytes += snap.shards[i][j].raw_bytes;
		}
		out->shards += snap.shard_count[i];
	}
	/* fenced on the offset this run resumed from: of concurrent runs of one
	 * source, only the first to commit moves it */
	kiln_lineage_entry lineage = { .topic = p->source_name, .partition = 0, .next = (int64_t)out->next_offset,
				       .fenced = true, .expect_next = resume.found ? resume.next : -1 };
	if (p->source_kind == KILN_SOURCE_FILE) {
		lineage.path = p->source_path;
		lineage.bytes = resume.bytes + bytes_read;
		if ((rc = fingerprint(fd, p->source_path, lineage.bytes, prefix_hex)) < 0)
			goto cleanup;
		lineage.prefix_blake2b = prefix_hex;
	}
	snap.lineage = &lineage;
	snap.lineage_count = 1;
	snap.delta = *d;
	rc = kiln_run_setup_commit(&setup, &snap, out->commit);

cleanup:
	kiln_curate_pool_free(pool);
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		kiln_shard_writer_free(writers[i]);
	kiln_quarantine_free(quarantine);
	kiln_line_reader_free(reader);
	kiln_run_setup_close(&setup);
	if (fd >= 0 && fd != STDIN_FILENO)
		close(fd);
	return rc;
}

/* Another run of the same source committed first (the fence refused this
 * one's commit, nothing of it landed): a file is read again from where that
 * run stopped, so nothing is committed twice; stdin cannot be read again. */
#define RERUNS 20

int kiln_curate_run(const kiln_pipeline *p, kiln_run_result *out)
{
	int rc;

	for (int attempt = 1;; attempt++) {
		rc = curate_once(p, out);
		if (rc != KILN_EFENCED || p->source_kind != KILN_SOURCE_FILE || attempt == RERUNS)
			break;
		KILN_LOG(KILN_LOG_INFO, "rerun", "another run of this source committed first; reading on from there",
			 KILN_F_STR("source", p->source_name), KILN_F_INT("attempt", attempt));
	}
	if (rc == KILN_EFENCED)
		rc = kiln_error_set(KILN_EFENCED,
				    "%s@%s: another run of source %s committed first%s; nothing of this run was committed",
				    p->dataset, p->branch, p->source_name,
				    p->source_kind == KILN_SOURCE_FILE ? " every time it was read again"
								       : " (stdin cannot be read again: send this input again)");
	return rc;
}
