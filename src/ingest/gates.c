/* Release gates (see gates.h). */
#include "ingest/gates.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "quality/drift.h"

void kiln_gates_init(kiln_gates *g)
{
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		g->min_records[i] = -1;
	g->ratio_tolerance = -1;
	g->max_quarantine_rate = -1;
	g->contract_version = NULL;
	g->drift = false;
	g->drift_baseline = NULL;
	g->drift_max_psi = g->drift_max_null_rate = 0;
}

/* "1.x" matches 1.anything, "1.2.x" matches 1.2.anything, else exact. */
static bool version_matches(const char *pattern, const char *version, size_t vlen)
{
	size_t plen = strlen(pattern);

	if (plen >= 2 && strcmp(pattern + plen - 2, ".x") == 0)
		return vlen >= plen - 1 && memcmp(version, pattern, plen - 1) == 0;
	return plen == vlen && memcmp(version, pattern, vlen) == 0;
}

/* A dataset.json number member as a double; false when absent or not a number. */
static bool number_of(const char *text, double *out)
{
	char *end;

	if (!text || !*text || !((*text >= '0' && *text <= '9') || *text == '-'))
		return false;
	*out = strtod(text, &end);
	return *end == '\0';
}

int kiln_gates_check(const kiln_gates *g, const kiln_stats *st, const kiln_mfmt_dataset *ds,
                     kiln_gate_result *out)
{
	int n = 0;
	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		if (g->min_records[i] < 0)
			continue;
		kiln_gate_result *r = &out[n++];
		r->pass = st->splits[i].records >= (uint64_t)g->min_records[i];
		snprintf(r->line, sizeof(r->line), "min_records %s: %llu >= %lld: %s", kiln_split_name(i),
		         (unsigned long long)st->splits[i].records, (long long)g->min_records[i],
		         r->pass ? "pass" : "FAIL");
	}
	if (g->ratio_tolerance >= 0) {
		kiln_gate_result *r = &out[n++];
		double worst = 0;
		int worst_split = 0;
		r->pass = st->valid > 0;
		for (int i = 0; i < KILN_SPLIT_COUNT && st->valid; i++) {
			double want;
			if (!number_of(ds->ratios[i], &want))
				return kiln_error_set(KILN_EINVALID, "dataset.json has no split.ratios.%s",
				                      kiln_split_name(i));
			double share = (double)st->splits[i].records / (double)st->valid;
			if (fabs(share - want) > worst) {
				worst = fabs(share - want);
				worst_split = i;
			}
		}
		r->pass = r->pass && worst <= g->ratio_tolerance;
		snprintf(r->line, sizeof(r->line), "ratio_tolerance: largest deviation %.4f (%s) <= %.4f: %s",
		         worst, kiln_split_name(worst_split), g->ratio_tolerance, r->pass ? "pass" : "FAIL");
	}
	if (g->max_quarantine_rate >= 0) {
		kiln_gate_result *r = &out[n++];
		double rate = st->records_in ? (double)st->quarantined / (double)st->records_in : 0;
		r->pass = rate <= g->max_quarantine_rate;
		snprintf(r->line, sizeof(r->line), "max_quarantine_rate: %.4f (%llu of %llu) <= %.4f: %s",
		         rate, (unsigned long long)st->quarantined, (unsigned long long)st->records_in,
		         g->max_quarantine_rate, r->pass ? "pass" : "FAIL");
	}
	if (g->contract_version) {
		kiln_gate_result *r = &out[n++];
		const char *version = ds->contract_version;
		size_t vlen;

		if (!version)
			return kiln_error_set(KILN_EINVALID, "dataset.json has no contract.version");
		vlen = strlen(version);
		r->pass = version_matches(g->contract_version, version, vlen);
		snprintf(r->line, sizeof(r->line), "contract_version: %.*s matches %s: %s",
		         (int)(vlen > 64 ? 64 : vlen), version, g->contract_version,
		         r->pass ? "pass" : "FAIL");
	}
	return n;
}

int kiln_gates_drift(const kiln_gates *g, const kiln_profile *base, const char *base_name,
                     const kiln_profile *now, kiln_gate_result *out)
{
	kiln_drift_thresholds t = {g->drift_max_psi, g->drift_max_null_rate};
	kiln_drift d;
	const kiln_field_drift *worst = NULL;
	double worst_psi = 0, worst_null = 0;
	int rc;

	if (!base) {
		out->pass = true;
		snprintf(out->line, sizeof(out->line), "drift: no promoted version to compare with: pass");
		return 0;
	}
	if ((rc = kiln_drift_compare(&d, base, now, &t)) < 0)
		return rc;
	for (size_t i = 0; i < d.count; i++) {
		const kiln_field_drift *f = &d.fields[i];
		if (f->flagged && !worst)
			worst = f;
		if (f->psi > worst_psi)
			worst_psi = f->psi;
		if (f->base && f->now && fabs(f->null_rate_now - f->null_rate_base) > worst_null)
			worst_null = fabs(f->null_rate_now - f->null_rate_base);
	}
	out->pass = worst == NULL;
	if (worst)
		snprintf(out->line, sizeof(out->line),
		         "drift vs %s: %s: %s (%zu of %zu fields flagged): FAIL", base_name, worst->path,
		         worst->why, d.flagged, d.count);
	else
		snprintf(out->line, sizeof(out->line),
		         "drift vs %s: largest psi %.4f <= %.4g, largest null rate change %.4f <= %.4g: pass",
		         base_name, worst_psi, t.psi, worst_null, t.null_rate);
	kiln_drift_free(&d);
	return 0;
}
