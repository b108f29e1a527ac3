/* Drift between two profiles (see drift.h). */
#include "quality/drift.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define PSI_FLOOR 1e-4 /* a bin's share never counts as less (empty bins would be infinite) */
#define BINS      10

static double psi_term(double a, double b)
{
	a = a < PSI_FLOOR ? PSI_FLOOR : a;
	b = b < PSI_FLOOR ? PSI_FLOOR : b;
	return (b - a) * log(b / a);
}

/* Values absent or null: the null bin. */
static uint64_t absent(const kiln_profile *p, const kiln_profile_field *f)
{
	return f->types[KILN_PTYPE_NULL] + kiln_profile_missing(p, f);
}

/* The sketch's buckets in ascending value order: (value, count). */
typedef struct bucket {
	double value;
	uint64_t count;
} bucket;

static size_t buckets_of(const kiln_ddsketch *dd, bucket *out)
{
	size_t n = 0;

	for (uint32_t i = dd->neg.len; i > 0; i--)
		if (dd->neg.counts[i - 1])
			out[n++] =
			    (bucket){-kiln_dd_value(dd->neg.offset + (int32_t)i - 1), dd->neg.counts[i - 1]};
	if (dd->zero)
		out[n++] = (bucket){0, dd->zero};
	for (uint32_t i = 0; i < dd->pos.len; i++)
		if (dd->pos.counts[i])
			out[n++] = (bucket){kiln_dd_value(dd->pos.offset + (int32_t)i), dd->pos.counts[i]};
	return n;
}

static size_t bin_of(const double *edges, size_t nedges, double v)
{
	size_t b = 0;

	while (b < nedges && v > edges[b])
		b++;
	return b;
}

static double psi_numbers(const kiln_profile *pb, const kiln_profile_field *base, const kiln_profile *pn,
                          const kiln_profile_field *now)
{
	size_t cap = 2 * KILN_DD_MAX_BINS + 1, nb, nn, nedges = 0;
	bucket *bb = malloc(cap * sizeof(*bb)), *bn = malloc(cap * sizeof(*bn));
	double edges[BINS], share_b[BINS + 1] = {0}, share_n[BINS + 1] = {0};
	uint64_t total_b, total_n, seen = 0, next = 1;
	double psi = -1;

	if (!bb || !bn)
		goto done;
	nb = buckets_of(&base->dd, bb);
	nn = buckets_of(&now->dd, bn);
	total_b = kiln_dd_count(&base->dd);
	total_n = kiln_dd_count(&now->dd);
	/* edges: where base's cumulative count passes each tenth */
	for (size_t i = 0; i < nb && next < BINS; i++) {
		seen += bb[i].count;
		while (next < BINS && seen * BINS >= next * total_b) {
			if (nedges == 0 || edges[nedges - 1] < bb[i].value)
				edges[nedges++] = bb[i].value;
			next++;
		}
	}
	{
		uint64_t ab = absent(pb, base), an = absent(pn, now);
		double db = (double)(total_b + ab), dn = (double)(total_n + an);

		if (db == 0 || dn == 0)
			goto done;
		for (size_t i = 0; i < nb; i++)
			share_b[bin_of(edges, nedges, bb[i].value)] += (double)bb[i].count / db;
		for (size_t i = 0; i < nn; i++)
			share_n[bin_of(edges, nedges, bn[i].value)] += (double)bn[i].count / dn;
		psi = psi_term((double)ab / db, (double)an / dn);
		for (size_t b = 0; b <= nedges; b++)
			psi += psi_term(share_b[b], share_n[b]);
	}
done:
	free(bb);
	free(bn);
	return psi;
}

static double psi_categories(const kiln_profile *pb, const kiln_profile_field *base, const kiln_profile *pn,
                             const kiln_profile_field *now)
{
	uint64_t tb = absent(pb, base), tn = absent(pn, now), other = 0;
	double psi;

	for (size_t i = 0; i < base->cat_count; i++)
		tb += base->cat_counts[i];
	for (size_t i = 0; i < now->cat_count; i++)
		tn += now->cat_counts[i];
	if (tb == 0 || tn == 0)
		return -1;
	psi = psi_term((double)absent(pb, base) / (double)tb, (double)absent(pn, now) / (double)tn);
	/* a lookup by name each way: O((kb + kn) log(kb + kn)) */
	for (size_t i = 0; i < base->cat_count; i++) {
		long j = kiln_profile_category(now, base->cat_names[i], strlen(base->cat_names[i]));
		uint64_t c = j >= 0 ? now->cat_counts[j] : 0;
		psi += psi_term((double)base->cat_counts[i] / (double)tb, (double)c / (double)tn);
	}
	for (size_t j = 0; j < now->cat_count; j++)
		if (kiln_profile_category(base, now->cat_names[j], strlen(now->cat_names[j])) < 0)
			other += now->cat_counts[j];
	return psi + psi_term(0, (double)other / (double)tn);
}

double kiln_drift_psi(const kiln_profile *pb, const kiln_profile_field *base, const kiln_profile *pn,
                      const kiln_profile_field *now)
{
	if (base->tokens || now->tokens)
		return -1;
	/* enum and boolean categories always; categories from the data when
	 * both sides have them (a side past k, or from before them, has none) */
	if ((base->cat_count && now->cat_count) || (base->cat_count && !base->cat_k) ||
	    (now->cat_count && !now->cat_k))
		return psi_categories(pb, base, pn, now);
	if (base->num.count && now->num.count)
		return psi_numbers(pb, base, pn, now);
	return -1;
}

static double null_rate(const kiln_profile *p, const kiln_profile_field *f)
{
	uint64_t miss = kiln_profile_missing(p, f), all = f->present + miss;

	return all ? (double)(f->types[KILN_PTYPE_NULL] + miss) / (double)all : 0;
}

static void compare(kiln_field_drift *d, const kiln_profile *pb, const kiln_profile *pn,
                    const kiln_drift_thresholds *t)
{
	const kiln_profile_field *b = d->base, *n = d->now;
	double psi_max = t && t->psi > 0 ? t->psi : KILN_DRIFT_PSI_DEFAULT;
	double null_max = t && t->null_rate > 0 ? t->null_rate : KILN_DRIFT_NULL_RATE_DEFAULT;

	d->psi = -1;
	if (!b || !n) {
		d->flagged = true;
		snprintf(d->why, sizeof(d->why), "%s", b ? "no longer in the data" : "new in the data");
		if (b)
			d->null_rate_base = null_rate(pb, b), d->distinct_base = kiln_profile_distinct(b);
		if (n)
			d->null_rate_now = null_rate(pn, n), d->distinct_now = kiln_profile_distinct(n);
		return;
	}
	d->null_rate_base = null_rate(pb, b);
	d->null_rate_now = null_rate(pn, n);
	d->distinct_base = kiln_profile_distinct(b);
	d->distinct_now = kiln_profile_distinct(n);
	if (!b->tokens && !n->tokens && b->num.count && n->num.count) {
		d->numbers = true;
		d->mean_base = b->num.mean;
		d->mean_now = n->num.mean;
		d->p50_base = kiln_profile_quantile(b, 0.5);
		d->p50_now = kiln_profile_quantile(n, 0.5);
		d->p95_base = kiln_profile_quantile(b, 0.95);
		d->p95_now = kiln_profile_quantile(n, 0.95);
	}
	d->psi = kiln_drift_psi(pb, b, pn, n);
	if (b->cat_k && b->cat_count && !n->tokens && n->cat_over && n->types[KILN_PTYPE_STRING])
		snprintf(d->why, sizeof(d->why),
		         "categories: %zu in the baseline, now past %u distinct values (or a personal one)",
		         b->cat_count, b->cat_k);
	else if (d->psi >= psi_max)
		snprintf(d->why, sizeof(d->why), "psi %.3f >= %.3g", d->psi, psi_max);
	else if (fabs(d->null_rate_now - d->null_rate_base) >= null_max)
		snprintf(d->why, sizeof(d->why), "null rate %.4f -> %.4f (moved >= %.3g)", d->null_rate_base,
		         d->null_rate_now, null_max);
	d->flagged = d->why[0] != '\0';
}

int kiln_drift_compare(kiln_drift *out, const kiln_profile *base, const kiln_profile *now,
                       const kiln_drift_thresholds *t)
{
	size_t n = 0;

	memset(out, 0, sizeof(*out));
	out->records_base = base->records;
	out->records_now = now->records;
	if (!(out->fields = calloc(base->count + now->count + 1, sizeof(*out->fields))))
		return kiln_error_oom(NULL);
	for (size_t i = 0; i < base->count; i++) {
		kiln_field_drift *d = &out->fields[n++];
		d->path = base->fields[i].path;
		d->base = &base->fields[i];
		d->now = kiln_profile_find(now, d->path);
	}
	for (size_t i = 0; i < now->count; i++)
		if (!kiln_profile_find(base, now->fields[i].path)) {
			kiln_field_drift *d = &out->fields[n++];
			d->path = now->fields[i].path;
			d->now = &now->fields[i];
		}
	out->count = n;
	for (size_t i = 0; i < n; i++) {
		compare(&out->fields[i], base, now, t);
		out->flagged += out->fields[i].flagged;
	}
	return 0;
}

void kiln_drift_free(kiln_drift *d)
{
	if (!d)
		return;
	free(d->fields);
	memset(d, 0, sizeof(*d));
}
