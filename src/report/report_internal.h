/* What the files of src/report/ share: html.c's escaping and the SVG
 * charts that render.c draws the page with. Each chart is one <svg>
 * element with role="img", an aria-label and a <title>; shares are
 * fractions (0..1), drawn against the largest of the chart. */
#ifndef KILN_REPORT_INTERNAL_H
#define KILN_REPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

/* s as HTML text or attribute value: & < > " ' escaped, control bytes
 * as \xNN, bytes that are not UTF-8 as U+FFFD. */
int kiln_report_escape(kiln_buf *out, const char *s);
int kiln_report_escape_n(kiln_buf *out, const char *s, size_t n);

/* A histogram of n equal-width bins over [lo, hi]: the version's shares
 * (now) as bars, the baseline's (base, may be NULL) as an outline drawn
 * over them. label names the chart for screen readers (escaped). */
int kiln_report_svg_hist(kiln_buf *out, const double *now, const double *base, size_t n, double lo, double hi,
                         const char *label);

/* Horizontal bars, one row per name (escaped): the version's share, and
 * the baseline's under it when base is not NULL. */
int kiln_report_svg_bars(kiln_buf *out, const char *const *names, const double *now, const double *base,
                         size_t n, const char *label);

/* Null and missing shares as one stacked bar (and the baseline's under it
 * when has_base). */
int kiln_report_svg_rates(kiln_buf *out, double null_now, double missing_now, bool has_base, double null_base,
                          double missing_base, const char *label);

/* Vertical bars of counts, oldest left, one per name (escaped, shown
 * under the bar). */
int kiln_report_svg_columns(kiln_buf *out, const char *const *names, const double *v, size_t n,
                            const char *label);

#endif
