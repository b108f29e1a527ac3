/* `kiln report`: one version of a dataset as a self-contained static HTML
 * page (docs/REPORT.md). kiln_report_gather reads what the page shows
 * through the modules that own it (the version, its signature as kiln
 * verify judges it, the manifest files, the profile and the drift against
 * a baseline, the quarantine per commit and, given the store, per code and
 * path, the release gates and quality rules, the erasure ledger);
 * kiln_report_html writes the page: inline CSS and SVG drawn here, no
 * script, no network. Every text taken from the repository or the store is
 * escaped. The page holds what profiles and manifests hold, so no personal
 * value: personal fields show counts and distinct tokens only. */
#ifndef KILN_REPORT_REPORT_H
#define KILN_REPORT_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "ingest/gates.h"
#include "ingest/pipeline.h"
#include "manifest/format.h"
#include "manifest/manifest.h"
#include "manifest/promote.h"
#include "manifest/verify.h"
#include "manifest/version.h"
#include "quality/drift.h"
#include "quality/profile.h"
#include "store/store.h"

#define KILN_REPORT_HISTORY_DEFAULT 30 /* commits in the quarantine-over-time chart */

typedef struct kiln_report_options {
	const char *spec;                 /* DATASET@REF */
	const char *baseline;             /* REF or DATASET@REF; NULL: no drift section */
	const kiln_verify_keys *keys;     /* NULL or empty: "not checked against any key" */
	kiln_store *store;                /* NULL: the quarantine per path is not read */
	const kiln_pipeline *pipeline;    /* NULL: the release gates are not run */
	kiln_drift_thresholds thresholds; /* <= 0: the defaults */
	size_t history;                   /* 0: KILN_REPORT_HISTORY_DEFAULT */
} kiln_report_options;

/* One commit of the version's first-parent history: what it added. */
typedef struct kiln_report_commit {
	char commit[41];
	int64_t time;
	char tags[64]; /* "v1,v2", "" for none */
	uint64_t valid, quarantined;
	uint64_t by_code[KILN_REJECT_COUNT_];
} kiln_report_commit;

/* Quarantined records of one code and field path (from the store). */
typedef struct kiln_report_qpath {
	kiln_reject code;
	char *path;
	uint64_t records;
} kiln_report_qpath;

/* An erasure ledger entry, summarised (ids, time, counts). */
typedef struct kiln_report_erasure {
	char id[17];
	int64_t time;
	char signer[64];
	size_t refs, commits, shards;
	uint64_t erased[KILN_SPLIT_COUNT];
	uint64_t raw_records, quarantine_records;
} kiln_report_erasure;

typedef struct kiln_report_doc {
	char spec[320];
	kiln_version version;
	char tags[64]; /* the vN tags on the version's commit */
	kiln_promote_inputs in;
	bool have_erasure;
	kiln_version_erasure erasure;
	/* the signature and the tree, as kiln verify judges them */
	kiln_verify_result verify;
	bool keys_given;
	kiln_buf problems; /* one line each, '\n'-terminated */
	/* the profile */
	bool have_profile;
	kiln_profile profile;
	char profile_note[512]; /* why there is none */
	/* the baseline (have_baseline) */
	bool have_baseline;
	char baseline_spec[320];
	kiln_version baseline;
	kiln_profile baseline_profile;
	kiln_drift drift;
	kiln_drift_thresholds thresholds;
	/* the quarantine */
	kiln_report_commit *history; /* newest first */
	size_t history_n;
	bool history_more; /* older commits than the chart shows */
	bool qpaths_read;
	char qpaths_note[512];
	kiln_report_qpath *qpaths; /* most records first */
	size_t qpaths_n, qpaths_cap;
	uint64_t qpaths_total;
	/* the gates */
	bool gates_run; /* the pipeline's gates (else only the contract's quality rules) */
	char gates_note[512];
	kiln_gate_result *gates;
	size_t gates_n;
	/* the ledger */
	kiln_report_erasure *erasures;
	size_t erasures_n, erasures_cap;
} kiln_report_doc;

/* Reads everything the page shows into *out (zeroed first; free it with
 * kiln_report_free whatever this returns). Errors: a version or baseline
 * that does not resolve, a manifest file that does not parse, a baseline
 * without a profile. A part that cannot be shown (no profile, gates that
 * cannot be computed, a quarantine that cannot be read) is not an error:
 * its note says why and the page shows it. */
int kiln_report_gather(kiln_report_doc *out, kiln_manifest *manifest, const kiln_report_options *options);
void kiln_report_free(kiln_report_doc *report);

/* The page, appended to out. */
int kiln_report_html(kiln_buf *out, const kiln_report_doc *report);

/* The element id of a field's figure: "field-" and the path with every
 * byte other than [A-Za-z0-9_.-] written as "-XX" (two hex digits), so
 * "session_ms" is "field-session_ms" and "tags[]" "field-tags-5b-5d". */
int kiln_report_field_id(kiln_buf *out, const char *path);

#endif
