/* `kiln check`: everything `kiln run` would refuse, found without running
 * it. The checks are kiln run's own setup steps (ingest/run_setup.h) run one
 * at a time so that each problem is reported, not only the first, plus
 * probes run does not need up front: the store answers a HEAD, the source
 * file is readable, the brokers answer and list the topics. Nothing is
 * kept: a manifest repository or file store folder that does not exist is
 * reported as the one the first run creates (once an empty folder was made
 * and removed where it would go), and no topic is created. With a sample, a few
 * records go through validation and pseudonymisation exactly as a run
 * would curate them (the curate pool), and their curated form is reported:
 * personal data appears only as tokens. */
#ifndef KILN_INGEST_CHECK_H
#define KILN_INGEST_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "contract/validate.h"
#include "ingest/pipeline.h"
#include "shard/split.h"

typedef enum kiln_check_status {
	KILN_CHECK_OK,      /* the check passed */
	KILN_CHECK_PROBLEM, /* kiln run would refuse (or fail on) this */
	KILN_CHECK_SKIPPED, /* not run: a check it needs found a problem */
} kiln_check_status;

/* Called once per check, in order: its name ("contract", "key", "store",
 * ...), its status and a one-line message (no secret, no record value). */
typedef void (*kiln_check_report)(void *ctx, const char *check, kiln_check_status status,
                                  const char *message);

/* Called once per sample record, in input order: line (1-based), then either
 * its curated form (curated[0..len), no newline) and split, or, rejected,
 * the report (field paths and reasons only). */
typedef void (*kiln_check_sample)(void *ctx, uint64_t line, const char *curated, size_t len, kiln_split split,
                                  const kiln_report *rejected);

typedef struct kiln_check_options {
	const char *sample_path; /* NULL: no sample */
	size_t sample_records;   /* how many of its first lines (default 5) */
	int broker_timeout_ms;   /* kafka: how long to wait for a broker (0: source.connect_timeout) */
	kiln_check_report report;
	kiln_check_sample sample;
	void *ctx;
} kiln_check_options;

/* Runs every check on a loaded pipeline. Returns the number of problems
 * (0: kiln run would start), or a negative error when checking itself
 * failed (out of memory). */
int kiln_check_pipeline(const kiln_pipeline *pipeline, const kiln_check_options *options);

#endif
