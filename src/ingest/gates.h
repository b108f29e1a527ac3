/* Release gates: what a version must meet before `kiln promote` tags it
 * (the pipeline's `promote:` section, docs/PIPELINES.md). Each gate gives a
 * readable result line that goes into the tag message. */
#ifndef KILN_INGEST_GATES_H
#define KILN_INGEST_GATES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "manifest/format.h"
#include "manifest/manifest.h"
#include "contract/quality.h"
#include "quality/profile.h"

typedef struct kiln_gates {
	int64_t min_records[KILN_SPLIT_COUNT]; /* -1: no gate */
	double ratio_tolerance;                /* < 0: no gate; max |share - ratio| per split */
	double max_quarantine_rate;            /* < 0: no gate; quarantined / records_in */
	const char *contract_version;          /* NULL: no gate; "1.2.0" exactly, or "1.x" / "1.2.x" */
	bool contract_compatible;              /* the contract breaks no reader of the last vN's */
	bool drift;                            /* promote.drift: the profile against a baseline's */
	const char *drift_baseline;            /* "previous" (the highest vN) or "vN" */
	double drift_max_psi, drift_max_null_rate;
} kiln_gates;

#define KILN_GATES_MAX 10

typedef struct kiln_gate_result {
	bool pass;
	bool not_run;   /* a rule kiln cannot run (ODCS text, sql, custom): neither passed nor failed */
	char line[256]; /* "min_records train: 950 >= 500: pass" */
} kiln_gate_result;

/* Evaluates every set gate against a version's stats.json and dataset.json
 * (both parsed by the manifest codec). Returns the number of results written
 * to out (at most KILN_GATES_MAX), or a negative error when dataset.json
 * lacks what a gate needs. */
int kiln_gates_check(const kiln_gates *gates, const kiln_stats *stats, const kiln_mfmt_dataset *dataset,
                     kiln_gate_result *out);

/* No gate set. */
void kiln_gates_init(kiln_gates *gates);

/* The drift gate (gates->drift): every field of `now` against `base`
 * (named base_name in the line), failing on the first field past a
 * threshold (the result names it, its figure and the threshold). base NULL:
 * nothing promoted to compare with, a pass that says so. */
int kiln_gates_drift(const kiln_gates *gates, const kiln_profile *base, const char *base_name,
                     const kiln_profile *now, kiln_gate_result *out);

/* The contract's ODCS quality rules against the version (its profile and
 * stats): one result per rule in out[0..rules->count), rules of other
 * types than library marked not_run (they neither pass nor fail) with a
 * line that says so.
 * KILN_EINVALID naming the rule when kiln cannot compute its metric. */
int kiln_gates_quality(const kiln_quality_rules *rules, const kiln_profile *profile, const kiln_stats *stats,
                       kiln_gate_result *out);

#endif
