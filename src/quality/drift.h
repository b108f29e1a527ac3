/* Drift between two profiles of one dataset (a baseline and a candidate):
 * per field, the change in null rate, distinct count, mean and quantiles,
 * and a population stability index (PSI) over bins of the baseline:
 * ten quantile bins of its number sketch, or its categories, plus a bin
 * for nulls. docs/QUALITY.md has the formula and the default thresholds. */
#ifndef KILN_QUALITY_DRIFT_H
#define KILN_QUALITY_DRIFT_H

#include <stdbool.h>
#include <stddef.h>

#include "quality/profile.h"

#define KILN_DRIFT_PSI_DEFAULT       0.2  /* flag a field whose PSI reaches this */
#define KILN_DRIFT_NULL_RATE_DEFAULT 0.05 /* or whose null rate moves this much (absolute) */

typedef struct kiln_drift_thresholds {
	double psi;       /* <= 0: KILN_DRIFT_PSI_DEFAULT */
	double null_rate; /* <= 0: KILN_DRIFT_NULL_RATE_DEFAULT */
} kiln_drift_thresholds;

typedef struct kiln_field_drift {
	const char *path;                     /* borrowed from a profile */
	const kiln_profile_field *base, *now; /* NULL where the field is absent */
	double null_rate_base, null_rate_now; /* nulls and missing over records (or enclosing objects) */
	uint64_t distinct_base, distinct_now;
	bool numbers; /* both have numbers: means and quantiles below */
	double mean_base, mean_now, p50_base, p50_now, p95_base, p95_now;
	double psi; /* -1 when no bins apply (tokens, objects, no values) */
	bool flagged;
	char why[160]; /* what crossed a threshold, "" when none */
} kiln_field_drift;

typedef struct kiln_drift {
	kiln_field_drift *fields;
	size_t count;
	size_t flagged;
	uint64_t records_base, records_now;
} kiln_drift;

/* Compares every field of base and now (by path, in base's order, then
 * the fields only now has). The profiles must outlive *out. */
int kiln_drift_compare(kiln_drift *out, const kiln_profile *base, const kiln_profile *now,
                       const kiln_drift_thresholds *thresholds);
void kiln_drift_free(kiln_drift *drift);

/* The PSI of two number sketches over ten quantile bins of `base`, with
 * their null and missing counts as an eleventh bin; of two category
 * lists over base's categories (plus one for names only `now` has); -1
 * when neither applies. */
double kiln_drift_psi(const kiln_profile *pb, const kiln_profile_field *base, const kiln_profile *pn,
                      const kiln_profile_field *now);

#endif
