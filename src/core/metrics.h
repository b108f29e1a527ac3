/* A registry of counters, gauges and histograms rendered in the Prometheus
 * text exposition format (0.0.4). Registration takes a mutex and happens at
 * start-up; updates are lock-free atomics on the hot path. A series may
 * instead be a function the render calls (values read from the system at
 * scrape time). The registry owns every series it hands out until
 * kiln_metrics_free. */
#ifndef KILN_CORE_METRICS_H
#define KILN_CORE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

typedef struct kiln_metrics kiln_metrics;
typedef struct kiln_counter kiln_counter;
typedef struct kiln_gauge kiln_gauge;
typedef struct kiln_histogram kiln_histogram;

int kiln_metrics_new(kiln_metrics **out);
void kiln_metrics_free(kiln_metrics *metrics);

/* Registers a series, or returns the one already registered under the same
 * name and labels. name: [a-zA-Z_:][a-zA-Z0-9_:]*. labels: NULL (or "") or
 * label pairs formatted by the caller, e.g. `topic="t",partition="0"` (see
 * kiln_metrics_label_value). Series of one name share one HELP/TYPE block;
 * the first help given wins. Returns NULL when out of memory, or (with
 * KILN_EINVALID in kiln_error_last()) for a bad name, a name registered
 * with another type, or histogram bounds that are not ascending. NULL
 * series are accepted, as no-ops, by every update function. */
kiln_counter *kiln_metrics_counter(kiln_metrics *metrics, const char *name, const char *help,
                                   const char *labels);
kiln_gauge *kiln_metrics_gauge(kiln_metrics *metrics, const char *name, const char *help, const char *labels);
/* bounds[0..n): ascending finite upper bounds, copied; the +Inf bucket is
 * added. An existing series keeps the bounds it was registered with. */
kiln_histogram *kiln_metrics_histogram(kiln_metrics *metrics, const char *name, const char *help,
                                       const char *labels, const double *bounds, size_t n);

/* A series whose value fn(ctx) gives at each render, like the Prometheus
 * client libraries' GaugeFunc and CounterFunc: for values read from the
 * system at scrape time. fn runs under the registry's mutex, on the thread
 * that renders (so at most one at a time): it must not call the registry,
 * and a counter's fn must never decrease. ctx must outlive the registry.
 * Returns 0, or an error as above; a series already registered under the
 * same name and labels is KILN_EINVALID. */
typedef double (*kiln_metrics_fn)(void *ctx);
int kiln_metrics_counter_fn(kiln_metrics *metrics, const char *name, const char *help, const char *labels,
                            kiln_metrics_fn fn, void *ctx);
int kiln_metrics_gauge_fn(kiln_metrics *metrics, const char *name, const char *help, const char *labels,
                          kiln_metrics_fn fn, void *ctx);

/* Appends v as a quoted label value, escaping \\, \" and \n: the caller
 * writes `topic=`, then this, for `topic="v"`. */
int kiln_metrics_label_value(kiln_buf *out, const char *v);

void kiln_counter_add(kiln_counter *counter, uint64_t n);
uint64_t kiln_counter_value(const kiln_counter *counter); /* 0 for NULL */
void kiln_gauge_set(kiln_gauge *gauge, double v);
void kiln_gauge_add(kiln_gauge *gauge, double v);
double kiln_gauge_value(const kiln_gauge *gauge); /* 0 for NULL */
void kiln_histogram_observe(kiln_histogram *histogram, double v);

/* Appends the whole exposition: names in first-registration order, each
 * with "# HELP" and "# TYPE" lines, then its series in registration order;
 * a histogram as cumulative name_bucket{...,le="..."} lines ending in
 * le="+Inf", then name_sum and name_count; a function's series calls it
 * then. Integers print without decimals,
 * other numbers in their shortest exact form; "+Inf", "-Inf", "NaN". */
int kiln_metrics_render(kiln_metrics *metrics, kiln_buf *out);

#endif
