/* The directory source (source.kind: directory, docs/PIPELINES.md): every
 * regular file of source.path whose name matches source.glob (and does not
 * start with '.': a writer's temporary), read once, exactly once, in name
 * order; NAME.gz and NAME.zst are decompressed (core/instream.h). Each file
 * has its own lineage.json entry, topic <source.name>=<encoded file name>
 * (KILN_SOURCE_DIR_SEP), offsets its 0-based line numbers, `bytes` its size
 * and `prefix_blake2b` its fingerprint: a file with a matching entry is
 * done, one whose entry no longer matches has changed since it was
 * committed and is reported, never read again.
 *
 * The row (kiln_source_directory, ingest/source.h) streams: the run engine
 * drives it (dir_run.c), which scans the folder again every source.poll_ms
 * and on inotify events, reads each new file whole into the curate pool and
 * commits the files read in snapshots (a file never spans two). The scan
 * and the read of one file below are apart from that glue. */
#ifndef KILN_INGEST_DIR_SOURCE_H
#define KILN_INGEST_DIR_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "ingest/curate_pool.h"
#include "ingest/pipeline.h"
#include "manifest/manifest.h"

/* The directory row's own settings (kiln_pipeline.source_config, made by
 * its configure from source.glob, source.done and source.poll_ms; the
 * folder is the pipeline's source_path). */
typedef struct kiln_dir_config {
	const char *glob; /* the names read (fnmatch), default "*.jsonl" */
	const char *done; /* committed files move here; NULL: they stay */
	unsigned poll_ms; /* scan the folder again this often (default 1000) */
} kiln_dir_config;

/* The longest topic a file gets (its quarantine objects are named by it);
 * a file whose name encodes longer is refused (KILN_DIR_BAD). */
#define KILN_DIR_TOPIC_MAX 400

typedef enum kiln_dir_state {
	KILN_DIR_NEW,     /* no entry: to be read */
	KILN_DIR_READ,    /* read by this process, its entry not yet committed */
	KILN_DIR_DONE,    /* an entry matches it: committed */
	KILN_DIR_CHANGED, /* an entry that no longer matches: reported, not read */
	KILN_DIR_BAD,     /* could not be read whole (corrupt, truncated): `error` */
	KILN_DIR_GONE,    /* empty, or gone since the scan: left for a later scan */
} kiln_dir_state;

typedef struct kiln_dir_file {
	char *name;       /* in the folder */
	char *path;       /* the folder / name */
	char *topic;      /* <source.name>=<encoded name>: stable while the file is listed */
	char *error;      /* KILN_DIR_BAD: the one-line reason */
	char *entry_path; /* lineage.json's path when `path` is not UTF-8 (the folder / encoded name) */
	kiln_dir_state state;
	bool fresh;      /* CHANGED, BAD: reported by this scan or read, first time this run */
	uint64_t size;   /* KILN_DIR_READ: the bytes read (the file's, compressed) */
	int64_t lines;   /* KILN_DIR_READ: the records read */
	char prefix[65]; /* KILN_DIR_READ: the fingerprint of those bytes */
} kiln_dir_file;

/* A committed file's entry, as the scan found it. */
typedef struct kiln_dir_entry {
	char *topic;
	uint64_t bytes;
	char prefix[65];
} kiln_dir_entry;

/* A file reported once this run (CHANGED or BAD), not again. */
typedef struct kiln_dir_note {
	char *name;
	uint64_t size;
	kiln_dir_state state;
} kiln_dir_note;

typedef struct kiln_dir {
	const kiln_pipeline *p;
	kiln_dir_file *files; /* name order */
	size_t count;
	kiln_dir_entry *entries; /* the branch's entries for this folder, by topic */
	size_t entry_count;
	kiln_dir_note *notes; /* kept across scans: what was reported */
	size_t note_count, note_cap;
} kiln_dir;

/* name's topic under source_name into out (cleared first). */
int kiln_dir_topic(kiln_buf *out, const char *source_name, const char *name);

/* Lists the folder (again) and sorts each file by the branch's lineage.json
 * (`manifest`): NEW, DONE, CHANGED (one warning logged per file and run:
 * `fresh` the first time) or BAD (a name too long, or a file that was BAD at
 * this size before: not read again). What an earlier scan listed READ (read,
 * not yet committed) stays READ as it was read; the rest of it is dropped. */
int kiln_dir_scan(kiln_dir *dir, kiln_manifest *manifest);

/* Reads file f (NEW) into batches of `pool`, offsets from 0: f becomes READ
 * (*records: its records), BAD (a compressed file that does not decompress
 * whole: nothing of it was submitted; `fresh`, noted so that scans skip it
 * while its size stays) or GONE. An error (the file shrank, a
 * read failed) fails the run: some of it may have been submitted. */
int kiln_dir_read_file(kiln_dir *dir, kiln_dir_file *f, kiln_curate_pool *pool, uint64_t *records);

/* Moves a committed file (READ once committed, or DONE) into source.done;
 * a failure is logged, and the next scan, which finds it DONE, moves it. */
void kiln_dir_move_done(kiln_dir *dir, kiln_dir_file *f);

/* source.done exists (made 0700 when missing) and is not the folder. */
int kiln_dir_prepare_done(const kiln_pipeline *p);

/* Whether `name` is one of p's files' topics (<source.name>=...). */
bool kiln_dir_reads_name(const kiln_pipeline *p, const char *name);

/* Frees everything, the notes too. */
void kiln_dir_clear(kiln_dir *dir);

#endif
