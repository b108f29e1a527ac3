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
	g->contract_compatible = false;
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

/* The count of a category named v[0..n) (0 when absent); false when the
 * field has no categories. */
static bool category_count(const kiln_profile_field *f, const char *v, size_t n, uint64_t *out)
{
	long i = kiln_profile_category(f, v, n);

	*out = i >= 0 ? f->cat_counts[i] : 0;
	return f->cat_count != 0;
}

/* Values outside the rule's validValues: a lookup per listed value, then
 * the categories no listed value named. */
static int invalid_count(const kiln_quality_rule *r, const kiln_profile_field *f, uint64_t *out)
{
	bool *valid = calloc(f->cat_count, sizeof(*valid));

	if (!valid)
		return kiln_error_oom(NULL);
	for (size_t j = 0; j < r->valid_count; j++) {
		long i = r->valid_values[j].text
		             ? kiln_profile_category(f, r->valid_values[j].text, r->valid_values[j].len)
		             : -1;
		if (i >= 0)
			valid[i] = true;
	}
	*out = 0;
	for (size_t i = 0; i < f->cat_count; i++)
		if (!valid[i])
			*out += f->cat_counts[i];
	free(valid);
	return 0;
}

static int unsupported(const kiln_quality_rule *r, const char *why)
{
	return kiln_error_set(KILN_EINVALID, "%s:%u:%u: quality rule %s (%s on %s): %s",
	                      r->file ? r->file : "contract", r->line, r->column,
	                      r->id[0] ? r->id : "without id", r->metric_name,
	                      r->path[0] ? r->path : "the schema", why);
}

/* The metric's value of rule r (rows), and the rows a percent is of. */
static int metric_value(const kiln_quality_rule *r, const kiln_profile *p, const kiln_stats *st, double *out,
                        double *base)
{
	const kiln_profile_field *f;
	uint64_t v = 0, nulls, missing, c;
	int rc;

	if (r->metric == KILN_QM_ROW_COUNT) {
		*out = *base = (double)st->valid;
		return 0;
	}
	if (!(f = kiln_profile_find(p, r->path)))
		return unsupported(r, "the version's profile has no such field");
	nulls = f->types[KILN_PTYPE_NULL];
	missing = kiln_profile_missing(p, f);
	*base = (double)(f->present + missing);
	if (r->has_other_arguments)
		return unsupported(r, "kiln reads only the arguments missingValues and validValues");
	switch (r->metric) {
	case KILN_QM_NULL_VALUES:
		v = nulls;
		break;
	case KILN_QM_MISSING_VALUES:
		v = nulls + missing;
		for (size_t i = 0; i < r->missing_count; i++) {
			const kiln_quality_value *m = &r->missing_values[i];
			if (!m->text)
				continue; /* null: counted */
			if (m->len == 0 && !f->tokens) {
				v += f->empty;
				continue;
			}
			if (!category_count(f, m->text, m->len, &c))
				return unsupported(r, "a listed missing value other than null and \"\" needs "
				                      "an enum or boolean "
				                      "field (the profile counts no other values)");
			v += c;
		}
		break;
	case KILN_QM_INVALID_VALUES:
		if (!r->has_valid)
			return unsupported(
			    r, "needs arguments.validValues: a value that breaks the contract is "
			       "quarantined, never in a version (gate that with max_quarantine_rate)");
		if (!f->cat_count)
			return unsupported(
			    r, "validValues needs an enum or boolean field (the profile counts no other "
			       "values)");
		if ((rc = invalid_count(r, f, &v)) < 0)
			return rc;
		break;
	case KILN_QM_DUPLICATE_VALUES: {
		uint64_t values = f->present - nulls, distinct = kiln_profile_distinct(f);
		if (f->cat_count) { /* exact: every value beyond the first of its category */
			distinct = 0;
			for (size_t i = 0; i < f->cat_count; i++)
				distinct += f->cat_counts[i] > 0;
		}
		v = values > distinct ? values - distinct : 0;
		*base = (double)values;
		break;
	}
	default:
		return unsupported(r, "not a metric kiln evaluates");
	}
	*out = (double)v;
	return 0;
}

int kiln_gates_quality(const kiln_quality_rules *rules, const kiln_profile *p, const kiln_stats *st,
                       kiln_gate_result *out)
{
	int n = 0, rc;

	for (size_t i = 0; i < rules->count; i++) {
		const kiln_quality_rule *r = &rules->v[i];
		kiln_gate_result *res = &out[n++];
		const char *name = r->id[0] ? r->id : r->metric_name ? r->metric_name : "rule";
		double v = 0, base = 0;
		char range[64];

		if (r->metric == KILN_QM_NONE) {
			res->pass = true;    /* it does not stop the promotion, */
			res->not_run = true; /* nor does it count as passed */
			snprintf(res->line, sizeof(res->line), "quality %s (type %s%s%s): not run by kiln",
			         r->id[0] ? r->id : "without id", r->type, r->path[0] ? " on " : "", r->path);
			continue;
		}
		res->not_run = false;
		if ((rc = metric_value(r, p, st, &v, &base)) < 0)
			return rc;
		if (r->percent)
			v = base > 0 ? 100 * v / base : 0;
		res->pass = kiln_quality_rule_holds(r, v);
		if (r->op == KILN_QOP_BETWEEN || r->op == KILN_QOP_NOT_BETWEEN)
			snprintf(range, sizeof(range), "[%g, %g]", r->a, r->b);
		else
			snprintf(range, sizeof(range), "%g", r->a);
		snprintf(res->line, sizeof(res->line), "quality %s (%s%s%s): %.6g%s %s %s: %s", name,
		         r->metric_name, r->path[0] ? " of " : "", r->path, v, r->percent ? "%" : " rows",
		         r->op_name, range, res->pass ? "pass" : "FAIL");
	}
	return n;
}
