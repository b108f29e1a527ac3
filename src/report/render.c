/* The report page (report.h): one HTML document, its CSS inline, its
 * charts inline SVG (html.c), no script. Sections in order: the version,
 * drift against the baseline (flagged fields first), every field's
 * profile as pictures, the quarantine, the gates and quality rules, the
 * erasure ledger. Every text from the repository or the store goes
 * through kiln_report_escape. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "report/report.h"
#include "report/report_internal.h"

#define HIST_BINS 40
#define MAX_CATS  24 /* category rows drawn; the rest are one "other" row */

static const char css[] =
    "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;color:#1f2937;margin:24px "
    "auto;max-width:1120px;"
    "padding:0 16px;font-size:14px;background:#fff}"
    "h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;border-bottom:2px solid #e5e7eb;padding-bottom:4px;"
    "margin-top:32px}h3{font-size:15px;margin:0 0 6px;font-family:'DejaVu Sans Mono',monospace}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #e5e7eb;padding:3px "
    "8px;text-align:left;"
    "vertical-align:top}th{background:#f3f4f6}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "code{font-family:'DejaVu Sans Mono',monospace;font-size:13px}"
    ".field{border:1px solid #e5e7eb;border-left:6px solid #93c5fd;border-radius:4px;padding:10px 12px;"
    "margin:12px 0}.field.flagged{border-left-color:#dc2626;background:#fef2f2}"
    ".badge{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;margin-left:6px;color:#fff;"
    "background:#6b7280}.badge.flag,.badge.fail{background:#dc2626}.badge.pass{background:#16a34a}"
    ".badge.tokens{background:#7c3aed}.note{color:#6b7280}.figs{color:#374151;margin:4px 0}"
    ".legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}"
    "svg text{font-size:11px;fill:#374151;font-family:'DejaVu Sans',sans-serif}svg text.small{font-size:9px}"
    "svg .axis{stroke:#9ca3af}svg rect.now{fill:#3b82f6}svg polyline.base{fill:none;stroke:#ea580c;"
    "stroke-width:2}svg rect.base{fill:#f59e0b}svg rect.present{fill:#e5e7eb}svg rect.null{fill:#6b7280}"
    "svg rect.missing{fill:#f87171}svg rect.q{fill:#dc2626}";

/* ---- small writers ------------------------------------------------------------- */

static int text(kiln_buf *b, const char *s)
{
	return kiln_report_escape(b, s);
}

static int date(kiln_buf *b, int64_t t)
{
	char s[32] = "?";
	time_t tt = (time_t)t;
	struct tm tm;

	if (t > 0 && gmtime_r(&tt, &tm))
		strftime(s, sizeof(s), "%Y-%m-%d %H:%M:%SZ", &tm);
	return kiln_buf_puts(b, s);
}

/* <tr><th>KEY</th><td>VALUE (escaped)</td></tr> */
static int row(kiln_buf *b, const char *key, const char *value)
{
	int rc = kiln_buf_printf(b, "<tr><th>%s</th><td>", key);

	rc |= text(b, value ? value : "?");
	return rc | kiln_buf_puts(b, "</td></tr>\n");
}

static int num(kiln_buf *b, double v)
{
	return kiln_buf_printf(b, "%.4g", isfinite(v) ? v : 0);
}

static const char *short_tag(const kiln_report_doc *r)
{
	const char *p = strrchr(r->version.ref, '/');

	return strncmp(r->version.ref, "refs/tags/", 10) == 0 && p ? p + 1 : NULL;
}

/* ---- the version ----------------------------------------------------------------- */

static int signature(kiln_buf *b, const kiln_report_doc *r)
{
	const kiln_verify_sig *s = &r->verify.sig;
	int rc = kiln_buf_puts(b, "<tr><th>signature</th><td>");

	if (!r->verify.name_ok)
		rc |= kiln_buf_puts(
		    b, "<span class=\"badge fail\">wrong name</span> the tag object carries another "
		       "version's name: its signature is not judged");
	else if (s->state == KILN_VERIFY_SIG_TAMPERED)
		rc |= kiln_buf_puts(
		    b, "<span class=\"badge fail\">tampered</span> a signature that does not match "
		       "the content");
	else if (s->state == KILN_VERIFY_SIG_NONE)
		rc |= kiln_buf_printf(
		    b, "none: unsigned%s%s",
		    r->verify.must_be_signed ? " (the repository's kiln.signed requires a signature)" : "",
		    r->keys_given ? "" : " (not checked against any key)");
	else if (!r->keys_given)
		rc |= kiln_buf_printf(
		    b,
		    "not checked against any key: signed by ssh-ed25519 <code>%s</code> (give "
		    "--allowed-signers to check it)",
		    s->fingerprint);
	else
		rc |= kiln_buf_printf(
		    b, "<span class=\"badge %s\">%s</span> signed by ssh-ed25519 <code>%s</code>",
		    s->trusted ? "pass" : "fail", s->trusted ? "good, trusted" : "good, not a trusted key",
		    s->fingerprint);
	return rc | kiln_buf_puts(b, "</td></tr>\n");
}

static int version_section(kiln_buf *b, const kiln_report_doc *r)
{
	const kiln_mfmt_dataset *d = &r->in.definition;
	const kiln_stats *st = &r->in.stats;
	char line[512];
	int rc = kiln_buf_puts(b, "<section id=\"version\"><h2>Version</h2><table>\n");

	rc |= row(b, "commit", r->version.commit);
	rc |= row(b, "ref", r->version.ref[0] ? r->version.ref : "(a commit id)");
	rc |= row(b, "tags", r->tags[0] ? r->tags : "none");
	rc |= kiln_buf_puts(b, "<tr><th>date</th><td>");
	rc |= date(b, r->version.time);
	rc |= kiln_buf_puts(b, "</td></tr>\n");
	rc |= signature(b, r);
	rc |= kiln_buf_printf(b, "<tr><th>verify</th><td>%s",
	                      r->verify.problems ? "<span class=\"badge fail\">"
	                                         : "<span class=\"badge pass\">");
	rc |= kiln_buf_printf(b, "%s</span>", r->verify.problems ? "problems" : "consistent");
	if (r->verify.problems) {
		rc |= kiln_buf_puts(b, "<ul>");
		for (size_t at = 0, len; at < r->problems.len; at += len + 1) {
			const char *p = r->problems.ptr + at, *e = memchr(p, '\n', r->problems.len - at);

			len = e ? (size_t)(e - p) : r->problems.len - at;
			rc |= kiln_buf_puts(b, "<li>");
			rc |= kiln_report_escape_n(b, p, len);
			rc |= kiln_buf_puts(b, "</li>");
		}
		rc |= kiln_buf_puts(b, "</ul>");
	}
	rc |= kiln_buf_puts(b, "</td></tr>\n");
	snprintf(line, sizeof(line), "%s %s (%s)", d->contract_id ? d->contract_id : "?",
	         d->contract_version ? d->contract_version : "?",
	         d->contract_digest ? d->contract_digest : "?");
	rc |= row(b, "contract", line);
	snprintf(line, sizeof(line), "%s (scheme %s, key version %s)", d->key_id ? d->key_id : "?",
	         d->token_scheme ? d->token_scheme : "?", d->key_version ? d->key_version : "?");
	rc |= row(b, "key id", line);
	snprintf(line, sizeof(line), "%s, key %s, ratios train %s dev %s test %s",
	         d->split_scheme ? d->split_scheme : "?", d->split_key ? d->split_key : "?",
	         d->ratios[0] ? d->ratios[0] : "?", d->ratios[1] ? d->ratios[1] : "?",
	         d->ratios[2] ? d->ratios[2] : "?");
	rc |= row(b, "split", line);
	snprintf(line, sizeof(line), "%" PRIu64 " in, %" PRIu64 " valid, %" PRIu64 " quarantined%s",
	         st->records_in, st->valid, st->quarantined, st->erased ? ", some erased" : "");
	rc |= row(b, "records", line);
	if (r->have_erasure) {
		snprintf(line, sizeof(line), "erasure %s rewrote it from commit %.12s", r->erasure.id,
		         r->erasure.old_commit);
		rc |= row(b, "rewritten", line);
	}
	rc |= kiln_buf_puts(b, "</table>\n<h3>Lineage</h3>");
	if (r->in.lineage.n == 0)
		return rc | kiln_buf_puts(b, "<p class=\"note\">no lineage.json</p></section>\n");
	rc |= kiln_buf_puts(
	    b, "<table><tr><th>source</th><th>topic or name</th><th>partition</th><th>next offset</th>"
	       "<th>file</th><th>bytes read</th></tr>\n");
	for (size_t i = 0; i < r->in.lineage.n; i++) {
		const kiln_lineage_entry *e = &r->in.lineage.v[i];

		rc |= kiln_buf_puts(b, "<tr><td>");
		rc |= text(b, e->source);
		rc |= kiln_buf_puts(b, "</td><td>");
		rc |= text(b, e->topic);
		rc |= kiln_buf_printf(
		    b, "</td><td class=\"n\">%" PRId32 "</td><td class=\"n\">%" PRId64 "</td><td>",
		    e->partition, e->next);
		rc |= text(b, e->path ? e->path : "");
		if (e->path)
			rc |= kiln_buf_printf(b, "</td><td class=\"n\">%" PRIu64 "</td></tr>\n", e->bytes);
		else
			rc |= kiln_buf_puts(b, "</td><td></td></tr>\n");
	}
	return rc | kiln_buf_puts(b, "</table></section>\n");
}

/* ---- fields ---------------------------------------------------------------------- */

static double rate(uint64_t part, uint64_t whole)
{
	return whole ? (double)part / (double)whole : 0;
}

/* Null and missing shares of a field (of its values and missing ones). */
static void rates(const kiln_profile *p, const kiln_profile_field *f, double *nul, double *missing)
{
	uint64_t miss = kiln_profile_missing(p, f), all = f->present + miss;

	*nul = rate(f->types[KILN_PTYPE_NULL], all);
	*missing = rate(miss, all);
}

/* The sketch's counts in n equal bins over [lo, hi], as shares. */
static void sketch_shares(const kiln_profile_field *f, double lo, double hi, double *out, size_t n)
{
	uint64_t total = kiln_dd_count(&f->dd);
	const kiln_dd_store *stores[2] = {&f->dd.pos, &f->dd.neg};

	memset(out, 0, n * sizeof(*out));
	if (!total || !(hi > lo))
		return;
	for (int s = 0; s < 3; s++) {
		uint32_t len = s < 2 ? stores[s]->len : 1;

		for (uint32_t i = 0; i < len; i++) {
			uint64_t c = s < 2 ? stores[s]->counts[i] : f->dd.zero;
			double v = s == 0   ? kiln_dd_value(stores[0]->offset + (int32_t)i)
			           : s == 1 ? -kiln_dd_value(stores[1]->offset + (int32_t)i)
			                    : 0;
			double at;
			size_t bin;

			if (!c)
				continue;
			v = v < f->num.min ? f->num.min : v > f->num.max ? f->num.max : v;
			at = (v - lo) / (hi - lo) * (double)n;
			bin = at <= 0 ? 0 : at >= (double)n ? n - 1 : (size_t)at;
			out[bin] += (double)c / (double)total;
		}
	}
}

static int number_plot(kiln_buf *b, const kiln_profile_field *now, const kiln_profile_field *base,
                       const char *path)
{
	double lo, hi, a[HIST_BINS], c[HIST_BINS];
	char label[300];
	bool has_base = base && base->num.count && !base->tokens, has_now = now && now->num.count;
	const kiln_profile_field *f = has_now ? now : base;
	int rc = 0;

	lo = has_now ? now->num.min : base->num.min;
	hi = has_now ? now->num.max : base->num.max;
	if (has_base && has_now) {
		lo = fmin(lo, base->num.min);
		hi = fmax(hi, base->num.max);
	}
	if (!(hi > lo))
		hi = lo + 1;
	if (has_now)
		sketch_shares(now, lo, hi, a, HIST_BINS);
	else
		memset(a, 0, sizeof(a));
	if (has_base)
		sketch_shares(base, lo, hi, c, HIST_BINS);
	snprintf(label, sizeof(label), "histogram of %s%s", path,
	         has_base ? ", version bars, baseline outline" : "");
	rc |= kiln_report_svg_hist(b, a, has_base ? c : NULL, HIST_BINS, lo, hi, label);
	rc |= kiln_buf_puts(b, "<div class=\"figs\">min ");
	rc |= num(b, f->num.min);
	rc |= kiln_buf_puts(b, " · p05 ");
	rc |= num(b, kiln_profile_quantile(f, 0.05));
	rc |= kiln_buf_puts(b, " · p50 ");
	rc |= num(b, kiln_profile_quantile(f, 0.5));
	rc |= kiln_buf_puts(b, " · mean ");
	rc |= num(b, f->num.mean);
	rc |= kiln_buf_puts(b, " · p95 ");
	rc |= num(b, kiln_profile_quantile(f, 0.95));
	rc |= kiln_buf_puts(b, " · max ");
	rc |= num(b, f->num.max);
	if (has_base && has_now) {
		rc |= kiln_buf_puts(b, " (baseline mean ");
		rc |= num(b, base->num.mean);
		rc |= kiln_buf_puts(b, ", p50 ");
		rc |= num(b, kiln_profile_quantile(base, 0.5));
		rc |= kiln_buf_putc(b, ')');
	}
	return rc | kiln_buf_puts(b, "</div>");
}

static uint64_t cat_sum(const kiln_profile_field *f)
{
	uint64_t s = 0;

	for (size_t i = 0; f && i < f->cat_count; i++)
		s += f->cat_counts[i];
	return s;
}

static uint64_t cat_count(const kiln_profile_field *f, const char *name)
{
	long i = f ? kiln_profile_category(f, name, strlen(name)) : -1;

	return i >= 0 ? f->cat_counts[i] : 0;
}

typedef struct cat_row {
	const char *name;
	uint64_t now, base;
} cat_row;

static int cat_cmp(const void *pa, const void *pb)
{
	const cat_row *a = pa, *b = pb;

	if (a->now != b->now)
		return a->now > b->now ? -1 : 1;
	if (a->base != b->base)
		return a->base > b->base ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* Category bars: the version's categories and the baseline's, the largest
 * MAX_CATS drawn and the rest summed in one row. */
static int category_plot(kiln_buf *b, const kiln_profile_field *now, const kiln_profile_field *base,
                         const char *path)
{
	size_t n = 0, cap = (now ? now->cat_count : 0) + (base ? base->cat_count : 0), shown;
	cat_row *rows = calloc(cap ? cap : 1, sizeof(*rows));
	const char **names = calloc(MAX_CATS + 1, sizeof(*names));
	double *a = calloc(MAX_CATS + 1, sizeof(*a)), *c = calloc(MAX_CATS + 1, sizeof(*c));
	uint64_t sum_now = cat_sum(now), sum_base = cat_sum(base);
	char label[300], other[64];
	int rc = 0;

	if (!rows || !names || !a || !c) {
		rc = kiln_error_oom("report");
		goto done;
	}
	for (size_t i = 0; now && i < now->cat_count; i++)
		rows[n++] =
		    (cat_row){now->cat_names[i], now->cat_counts[i], cat_count(base, now->cat_names[i])};
	for (size_t i = 0; base && i < base->cat_count; i++)
		if (!now || kiln_profile_category(now, base->cat_names[i], strlen(base->cat_names[i])) < 0)
			rows[n++] = (cat_row){base->cat_names[i], 0, base->cat_counts[i]};
	qsort(rows, n, sizeof(*rows), cat_cmp);
	shown = n > MAX_CATS ? MAX_CATS : n;
	for (size_t i = 0; i < n; i++) {
		size_t k = i < shown ? i : shown;

		names[k] = rows[i].name;
		a[k] += rate(rows[i].now, sum_now);
		c[k] += rate(rows[i].base, sum_base);
	}
	if (n > shown) {
		snprintf(other, sizeof(other), "(%zu others)", n - shown);
		names[shown] = other;
		shown++;
	}
	snprintf(label, sizeof(label), "categories of %s%s", path, base ? ", version and baseline" : "");
	rc = kiln_report_svg_bars(b, names, a, base ? c : NULL, shown, label);
done:
	free(rows);
	free(names);
	free(a);
	free(c);
	return rc;
}

static int types(kiln_buf *b, const kiln_profile_field *f)
{
	int rc = 0, first = 1;

	for (int t = 1; t < KILN_PTYPE_COUNT_; t++)
		if (f->types[t]) {
			rc |= kiln_buf_printf(b, "%s%s", first ? "" : ", ", kiln_ptype_name((kiln_ptype)t));
			first = 0;
		}
	return rc | (first ? kiln_buf_puts(b, "none") : 0);
}

/* One field's figure: its counts, null and missing rates, and the plot of
 * its values (tokens fields: counts only). d: its drift, or NULL. */
static int field_figure(kiln_buf *b, const kiln_report_doc *r, const char *path,
                        const kiln_profile_field *now, const kiln_profile_field *base,
                        const kiln_field_drift *d)
{
	const kiln_profile_field *f = now ? now : base;
	double nn = 0, mn = 0, nb = 0, mb = 0;
	char label[300];
	int rc = kiln_buf_puts(b, "<figure class=\"field");

	rc |= kiln_buf_puts(b, d && d->flagged ? " flagged\" id=\"" : "\" id=\"");
	rc |= kiln_report_field_id(b, path);
	rc |= kiln_buf_puts(b, "\"><h3>");
	rc |= text(b, path);
	rc |= kiln_buf_printf(b, "<span class=\"badge%s\">%s</span>", f->tokens ? " tokens" : "",
	                      f->tokens ? "personal: tokens only" : "values");
	if (d && d->flagged) {
		rc |= kiln_buf_puts(b, "<span class=\"badge flag\">drift: ");
		rc |= text(b, d->why);
		rc |= kiln_buf_puts(b, "</span>");
	}
	rc |= kiln_buf_puts(b, "</h3><div class=\"figs\">");
	if (now) {
		rc |= kiln_buf_printf(b,
		                      "present %" PRIu64 " · missing %" PRIu64 " · null %" PRIu64
		                      " · distinct ~%" PRIu64 " · types ",
		                      now->present, kiln_profile_missing(&r->profile, now),
		                      now->types[KILN_PTYPE_NULL], kiln_profile_distinct(now));
		rc |= types(b, now);
		rates(&r->profile, now, &nn, &mn);
	} else {
		rc |= kiln_buf_puts(b, "only in the baseline");
	}
	if (!base && r->have_baseline)
		rc |= kiln_buf_puts(b, " · not in the baseline");
	if (base)
		rates(&r->baseline_profile, base, &nb, &mb);
	if (d && d->psi >= 0) {
		rc |= kiln_buf_puts(b, " · PSI ");
		rc |= kiln_buf_printf(b, "%.4f", d->psi);
	}
	rc |= kiln_buf_puts(b, "</div>");
	snprintf(label, sizeof(label), "null and missing rates of %s", path);
	rc |= kiln_report_svg_rates(b, nn, mn, base != NULL, nb, mb, label);
	if (f->tokens) {
		rc |= kiln_buf_puts(
		    b, "<p class=\"note\">A personal field: its profile holds counts and the distinct "
		       "count of its tokens, never a value.</p>");
	} else if (f->cat_count || (base && base->cat_count)) {
		rc |= category_plot(b, now, base, path);
	} else if ((now && now->num.count) || (base && base->num.count)) {
		rc |= number_plot(b, now, base, path);
	} else if (f->types[KILN_PTYPE_STRING]) {
		uint64_t strings = f->types[KILN_PTYPE_STRING];

		rc |= kiln_buf_printf(b,
		                      "<div class=\"figs\">length %" PRIu64 "..%" PRIu64
		                      ", mean %.1f code points; %" PRIu64 " empty</div>",
		                      f->len_min, f->len_max, (double)f->len_sum / (double)strings, f->empty);
	}
	return rc | kiln_buf_puts(b, "</figure>\n");
}

static int legend(kiln_buf *b, bool baseline)
{
	int rc = kiln_buf_puts(b, "<p class=\"legend\">");

	rc |= kiln_buf_puts(b, "<span style=\"background:#3b82f6\"></span>this version");
	if (baseline)
		rc |= kiln_buf_puts(
		    b, "<span style=\"background:#ea580c\"></span>the baseline (outline, lower bars)");
	rc |= kiln_buf_puts(
	    b, "<span style=\"background:#6b7280\"></span>null<span style=\"background:#f87171\"></span>"
	       "missing");
	return rc | kiln_buf_puts(b, "</p>\n");
}

/* The drift order, flagged fields first (each group in profile order). */
static size_t *drift_order(const kiln_drift *d)
{
	size_t *order = calloc(d->count ? d->count : 1, sizeof(*order)), n = 0;

	if (!order)
		return NULL;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < d->count; i++)
			if (d->fields[i].flagged == (pass == 0))
				order[n++] = i;
	return order;
}

static int drift_section(kiln_buf *b, const kiln_report_doc *r, const size_t *order)
{
	const kiln_drift *d = &r->drift;
	int rc = kiln_buf_puts(b, "<section id=\"drift\"><h2>Drift against ");

	rc |= text(b, r->baseline_spec);
	rc |= kiln_buf_printf(
	    b,
	    "</h2><p>%zu of %zu fields flagged (PSI &ge; %g or a null rate moved by &ge; %g); "
	    "baseline commit <code>%.12s</code>, %" PRIu64 " records; this version %" PRIu64
	    " records.</p>\n",
	    d->flagged, d->count, r->thresholds.psi, r->thresholds.null_rate, r->baseline.commit,
	    d->records_base, d->records_now);
	rc |= kiln_buf_puts(
	    b, "<table><tr><th>field</th><th>PSI</th><th>null rate</th><th>distinct</th><th>mean</th>"
	       "<th>p50</th><th>flagged</th></tr>\n");
	for (size_t k = 0; k < d->count; k++) {
		const kiln_field_drift *f = &d->fields[order[k]];

		rc |= kiln_buf_puts(b, "<tr><td><a href=\"#");
		rc |= kiln_report_field_id(b, f->path);
		rc |= kiln_buf_puts(b, "\"><code>");
		rc |= text(b, f->path);
		rc |= kiln_buf_puts(b, "</code></a></td><td class=\"n\">");
		rc |= f->psi >= 0 ? kiln_buf_printf(b, "%.4f", f->psi) : kiln_buf_puts(b, "-");
		rc |= kiln_buf_printf(b,
		                      "</td><td class=\"n\">%.3f &rarr; %.3f</td><td class=\"n\">%" PRIu64
		                      " &rarr; %" PRIu64 "</td><td class=\"n\">",
		                      f->null_rate_base, f->null_rate_now, f->distinct_base, f->distinct_now);
		if (f->numbers) {
			rc |= num(b, f->mean_base);
			rc |= kiln_buf_puts(b, " &rarr; ");
			rc |= num(b, f->mean_now);
			rc |= kiln_buf_puts(b, "</td><td class=\"n\">");
			rc |= num(b, f->p50_base);
			rc |= kiln_buf_puts(b, " &rarr; ");
			rc |= num(b, f->p50_now);
		} else {
			rc |= kiln_buf_puts(b, "</td><td class=\"n\">");
		}
		rc |= kiln_buf_puts(b, "</td><td>");
		if (f->flagged) {
			rc |= kiln_buf_puts(b, "<span class=\"badge flag\">drift</span> ");
			rc |= text(b, f->why);
		}
		rc |= kiln_buf_puts(b, "</td></tr>\n");
	}
	return rc | kiln_buf_puts(b, "</table></section>\n");
}

static int fields_section(kiln_buf *b, const kiln_report_doc *r, const size_t *order)
{
	int rc = kiln_buf_puts(b, "<section id=\"fields\"><h2>Fields</h2>");

	if (!r->have_profile) {
		rc |= kiln_buf_puts(b, "<p class=\"note\">No profile: ");
		rc |= text(b, r->profile_note);
		return rc | kiln_buf_puts(b, "</p></section>\n");
	}
	rc |= kiln_buf_printf(b, "<p>The profile of the version's %" PRIu64 " curated records%s.</p>",
	                      r->profile.records,
	                      r->have_baseline ? ", drawn over the baseline's; flagged fields first" : "");
	rc |= legend(b, r->have_baseline);
	if (r->have_baseline) {
		for (size_t k = 0; k < r->drift.count; k++) {
			const kiln_field_drift *d = &r->drift.fields[order[k]];

			rc |= field_figure(b, r, d->path, d->now, d->base, d);
		}
	} else {
		for (size_t i = 0; i < r->profile.count; i++)
			rc |=
			    field_figure(b, r, r->profile.fields[i].path, &r->profile.fields[i], NULL, NULL);
	}
	if (r->profile.omitted)
		rc |= kiln_buf_printf(
		    b, "<p class=\"note\">%" PRIu64 " fields past the profile's bound are not profiled.</p>",
		    r->profile.omitted);
	return rc | kiln_buf_puts(b, "</section>\n");
}

/* ---- the quarantine ------------------------------------------------------------ */

static int quarantine_codes(kiln_buf *b, const kiln_report_doc *r)
{
	const kiln_stats *st = &r->in.stats;
	const char *names[KILN_REJECT_COUNT_];
	double shares[KILN_REJECT_COUNT_];
	size_t n = 0;
	int rc = 0;

	for (int k = 1; k < KILN_REJECT_COUNT_; k++)
		if (st->quarantined_by_code[k]) {
			names[n] = kiln_reject_name((kiln_reject)k);
			shares[n++] = rate(st->quarantined_by_code[k], st->quarantined);
		}
	if (!n)
		return kiln_buf_puts(b, "<p>No record of this version was quarantined.</p>");
	rc |= kiln_buf_puts(b, "<h3>By code (stats.json)</h3><table><tr><th>code</th><th>records</th></tr>");
	for (int k = 1; k < KILN_REJECT_COUNT_; k++)
		if (st->quarantined_by_code[k])
			rc |= kiln_buf_printf(
			    b, "<tr><td><code>%s</code></td><td class=\"n\">%" PRIu64 "</td></tr>",
			    kiln_reject_name((kiln_reject)k), st->quarantined_by_code[k]);
	rc |= kiln_buf_puts(b, "</table>");
	return rc | kiln_report_svg_bars(b, names, shares, NULL, n, "quarantined records by code");
}

static int quarantine_paths(kiln_buf *b, const kiln_report_doc *r)
{
	int rc = kiln_buf_puts(b, "<h3>By code and field path (the quarantine objects)</h3>");

	if (!r->qpaths_read) {
		rc |= kiln_buf_puts(b, "<p class=\"note\">");
		rc |= text(b, r->qpaths_note);
		return rc | kiln_buf_puts(b, "</p>");
	}
	rc |=
	    kiln_buf_printf(b, "<p>%" PRIu64 " records in the quarantine of %s.</p>", r->qpaths_total,
	                    strncmp(r->version.ref, "refs/heads/", 11) == 0 ? "the version's branch"
	                                                                    : "every branch of the dataset");
	if (!r->qpaths_n)
		return rc;
	rc |= kiln_buf_puts(b, "<table><tr><th>code</th><th>field path</th><th>records</th></tr>\n");
	for (size_t i = 0; i < r->qpaths_n; i++) {
		rc |= kiln_buf_printf(b, "<tr><td><code>%s</code></td><td><code>",
		                      kiln_reject_name(r->qpaths[i].code));
		rc |= text(b, r->qpaths[i].path[0] ? r->qpaths[i].path : "(the record)");
		rc |= kiln_buf_printf(b, "</code></td><td class=\"n\">%" PRIu64 "</td></tr>\n",
		                      r->qpaths[i].records);
	}
	return rc | kiln_buf_puts(b, "</table>");
}

static int quarantine_history(kiln_buf *b, const kiln_report_doc *r)
{
	size_t n = r->history_n;
	const char **names = calloc(n ? n : 1, sizeof(*names));
	char(*labels)[16] = calloc(n ? n : 1, sizeof(*labels));
	double *v = calloc(n ? n : 1, sizeof(*v));
	int rc = 0;

	if (!names || !labels || !v) {
		rc = kiln_error_oom("report");
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		const kiln_report_commit *c = &r->history[n - 1 - i]; /* oldest left */

		snprintf(labels[i], sizeof(labels[i]), "%.7s", c->commit);
		names[i] = labels[i];
		v[i] = (double)c->quarantined;
	}
	rc |= kiln_buf_printf(b, "<h3>Per commit (the %s%zu commits of its history%s)</h3>",
	                      r->history_more ? "last " : "", n, r->history_more ? "" : ", all");
	rc |= kiln_report_svg_columns(b, names, v, n, "quarantined records added per commit, oldest left");
	rc |= kiln_buf_puts(b, "<table><tr><th>commit</th><th>date</th><th>tags</th><th>valid added</th>"
	                       "<th>quarantined added</th><th>codes</th></tr>\n");
	for (size_t i = 0; i < n; i++) {
		const kiln_report_commit *c = &r->history[i];
		bool first = true;

		rc |= kiln_buf_printf(b, "<tr><td><code>%.12s</code></td><td>", c->commit);
		rc |= date(b, c->time);
		rc |= kiln_buf_puts(b, "</td><td>");
		rc |= text(b, c->tags);
		rc |= kiln_buf_printf(
		    b, "</td><td class=\"n\">%" PRIu64 "</td><td class=\"n\">%" PRIu64 "</td><td>", c->valid,
		    c->quarantined);
		for (int k = 1; k < KILN_REJECT_COUNT_; k++)
			if (c->by_code[k]) {
				rc |= kiln_buf_printf(b, "%s%s %" PRIu64, first ? "" : ", ",
				                      kiln_reject_name((kiln_reject)k), c->by_code[k]);
				first = false;
			}
		rc |= kiln_buf_puts(b, "</td></tr>\n");
	}
	rc |= kiln_buf_puts(b, "</table>");
done:
	free(names);
	free(labels);
	free(v);
	return rc;
}

static int quarantine_section(kiln_buf *b, const kiln_report_doc *r)
{
	const kiln_stats *st = &r->in.stats;
	int rc =
	    kiln_buf_printf(b,
	                    "<section id=\"quarantine\"><h2>Quarantine</h2><p>%" PRIu64 " of %" PRIu64
	                    " records quarantined (%.2f%%).</p>",
	                    st->quarantined, st->records_in, rate(st->quarantined, st->records_in) * 100);

	rc |= quarantine_codes(b, r);
	rc |= quarantine_paths(b, r);
	rc |= quarantine_history(b, r);
	return rc | kiln_buf_puts(b, "</section>\n");
}

/* ---- gates and rules, the ledger ------------------------------------------------- */

static int gates_section(kiln_buf *b, const kiln_report_doc *r)
{
	int rc = kiln_buf_puts(b, "<section id=\"gates\"><h2>Release gates and quality rules</h2>");

	if (r->gates_run)
		rc |= kiln_buf_puts(b, "<p>The pipeline's release gates and its contract's quality rules, as "
		                       "<code>kiln promote</code> checks them, against this version.</p>");
	else
		rc |= kiln_buf_puts(
		    b, "<p>The quality rules of the contract the version was curated under. The "
		       "release gates are the pipeline's: give <code>--pipeline FILE</code> to check "
		       "them.</p>");
	if (r->gates_note[0]) {
		rc |= kiln_buf_puts(b, "<p class=\"note\">");
		rc |= text(b, r->gates_note);
		rc |= kiln_buf_puts(b, "</p>");
	}
	if (!r->gates_n)
		return rc | kiln_buf_puts(b, r->gates_note[0] ? "</section>\n"
		                                              : "<p>None configured.</p></section>\n");
	rc |=
	    kiln_buf_puts(b, "<table><tr><th>result</th><th>gate or rule: figure and threshold</th></tr>\n");
	for (size_t i = 0; i < r->gates_n; i++) {
		const kiln_gate_result *g = &r->gates[i];

		rc |= kiln_buf_printf(b, "<tr><td><span class=\"badge %s\">%s</span></td><td><code>",
		                      g->not_run ? "skip"
		                      : g->pass  ? "pass"
		                                 : "fail",
		                      g->not_run ? "not run"
		                      : g->pass  ? "pass"
		                                 : "FAIL");
		rc |= text(b, g->line);
		rc |= kiln_buf_puts(b, "</code></td></tr>\n");
	}
	return rc | kiln_buf_puts(b, "</table></section>\n");
}

static int ledger_section(kiln_buf *b, const kiln_report_doc *r)
{
	int rc = kiln_buf_puts(b, "<section id=\"erasures\"><h2>Erasure ledger</h2>");

	if (!r->erasures_n)
		return rc | kiln_buf_puts(b, "<p>No erasure is recorded for this dataset.</p></section>\n");
	rc |= kiln_buf_puts(
	    b, "<p>Each <code>kiln erase</code> of the dataset (the subject is kept only as a keyed "
	       "hash, and not shown).</p><table><tr><th>erasure</th><th>date</th><th>signed by</th>"
	       "<th>refs moved</th><th>commits superseded</th><th>shards rewritten</th><th>records "
	       "erased (train/dev/test)</th><th>raw records</th><th>quarantined records</th></tr>\n");
	for (size_t i = 0; i < r->erasures_n; i++) {
		const kiln_report_erasure *e = &r->erasures[i];

		rc |= kiln_buf_printf(b, "<tr><td><code>%s</code></td><td>", e->id);
		rc |= date(b, e->time);
		rc |= kiln_buf_puts(b, "</td><td>");
		rc |= e->signer[0] ? kiln_buf_printf(b, "<code>%s</code>", e->signer)
		                   : kiln_buf_puts(b, "unsigned");
		rc |= kiln_buf_printf(
		    b,
		    "</td><td class=\"n\">%zu</td><td class=\"n\">%zu</td><td class=\"n\">%zu</td><td "
		    "class=\"n\">%" PRIu64 "/%" PRIu64 "/%" PRIu64 "</td><td class=\"n\">%" PRIu64
		    "</td><td class=\"n\">%" PRIu64 "</td></tr>\n",
		    e->refs, e->commits, e->shards, e->erased[KILN_SPLIT_TRAIN], e->erased[KILN_SPLIT_DEV],
		    e->erased[KILN_SPLIT_TEST], e->raw_records, e->quarantine_records);
	}
	return rc | kiln_buf_puts(b, "</table></section>\n");
}

/* ---- the page ---------------------------------------------------------------------- */

int kiln_report_html(kiln_buf *b, const kiln_report_doc *r)
{
	size_t *order = NULL;
	const char *tag = short_tag(r);
	int rc;

	if (r->have_baseline && !(order = drift_order(&r->drift)))
		return kiln_error_oom("report");
	rc = kiln_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
	rc |= text(b, r->version.dataset);
	rc |= kiln_buf_putc(b, '@');
	rc |= tag ? text(b, tag) : kiln_buf_printf(b, "%.12s", r->version.commit);
	rc |=
	    kiln_buf_puts(b, ": kiln report</title>\n<meta name=\"viewport\" content=\"width=device-width\">"
	                     "<style>");
	rc |= kiln_buf_puts(b, css);
	rc |= kiln_buf_puts(b, "</style></head>\n<body><header><h1>");
	rc |= text(b, r->spec);
	rc |= kiln_buf_printf(b, "</h1><p class=\"note\">kiln report of commit <code>%s</code>",
	                      r->version.commit);
	if (r->have_baseline) {
		rc |= kiln_buf_puts(b, " against ");
		rc |= text(b, r->baseline_spec);
	}
	rc |= kiln_buf_puts(b, ". Counts and sketches of curated records only: no personal value.</p>"
	                       "<nav><a href=\"#version\">version</a> · ");
	if (r->have_baseline)
		rc |= kiln_buf_puts(b, "<a href=\"#drift\">drift</a> · ");
	rc |= kiln_buf_puts(
	    b, "<a href=\"#fields\">fields</a> · <a href=\"#quarantine\">quarantine</a> · "
	       "<a href=\"#gates\">gates</a> · <a href=\"#erasures\">erasures</a></nav></header>\n<main>");
	rc |= version_section(b, r);
	if (r->have_baseline)
		rc |= drift_section(b, r, order);
	rc |= fields_section(b, r, order);
	rc |= quarantine_section(b, r);
	rc |= gates_section(b, r);
	rc |= ledger_section(b, r);
	rc |= kiln_buf_puts(b, "</main></body></html>\n");
	free(order);
	return rc ? kiln_error_oom("report") : 0;
}
