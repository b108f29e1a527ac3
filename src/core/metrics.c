/* Prometheus metrics registry (see metrics.h). Families and series are kept
 * in registration order, each series in its own allocation so the pointers
 * handed out stay valid while the arrays grow. The mutex guards the arrays
 * (registration, rendering); values are atomics. A double lives in a
 * uint64_t as its bit pattern, updated with compare-and-swap. A function's
 * series (fn set) holds no value: the render calls fn under the mutex. */
#include "core/metrics.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef enum kind { KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM } kind;

static const char *const kind_names[] = {"counter", "gauge", "histogram"};

struct kiln_counter {
	_Atomic uint64_t value;
};

struct kiln_gauge {
	_Atomic uint64_t bits;
};

struct kiln_histogram {
	size_t n; /* finite bounds; counts has n + 1 slots */
	double *bounds;
	_Atomic uint64_t *counts; /* per bucket, not cumulative; [n] is +Inf */
	_Atomic uint64_t sum_bits;
};

typedef struct series {
	char *labels;       /* "" when none */
	kiln_metrics_fn fn; /* a counter or gauge whose value fn(fn_ctx) gives; NULL: u holds it */
	void *fn_ctx;
	union {
		kiln_counter counter;
		kiln_gauge gauge;
		kiln_histogram histogram;
	} u;
} series;

typedef struct family {
	char *name, *help; /* help NULL: no # HELP line */
	kind kind;
	series **series;
	size_t n, cap;
} family;

struct kiln_metrics {
	pthread_mutex_t lock;
	family **families;
	size_t n, cap;
};

static uint64_t double_bits(double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	return bits;
}

static double bits_double(uint64_t bits)
{
	double v;

	memcpy(&v, &bits, sizeof(v));
	return v;
}

static void atomic_add_double(_Atomic uint64_t *slot, double v)
{
	uint64_t old = atomic_load_explicit(slot, memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(slot, &old, double_bits(bits_double(old) + v),
	                                              memory_order_relaxed, memory_order_relaxed))
		;
}

int kiln_metrics_new(kiln_metrics **out)
{
	kiln_metrics *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return kiln_error_oom(NULL);
	if (pthread_mutex_init(&m->lock, NULL) != 0) {
		free(m);
		return kiln_error_set(KILN_ENOMEM, "cannot create a mutex");
	}
	*out = m;
	return 0;
}

static void series_free(series *s, kind k)
{
	if (!s)
		return;
	if (k == KIND_HISTOGRAM) {
		free(s->u.histogram.bounds);
		free(s->u.histogram.counts);
	}
	free(s->labels);
	free(s);
}

static void family_free(family *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++)
		series_free(f->series[i], f->kind);
	free(f->series);
	free(f->name);
	free(f->help);
	free(f);
}

void kiln_metrics_free(kiln_metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		family_free(m->families[i]);
	free(m->families);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static bool name_valid(const char *name)
{
	if (!name || !name[0] || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '_' || *p == ':'))
			return false;
	return true;
}

/* Capacity after growing one holding cap (8, then doubling). */
static size_t next_cap(size_t cap)
{
	return cap ? cap * 2 : 8;
}

static family *find_or_add_family(kiln_metrics *m, const char *name, const char *help, kind k)
{
	family *f = NULL;

	for (size_t i = 0; i < m->n; i++) {
		if (strcmp(m->families[i]->name, name) == 0) {
			if (m->families[i]->kind != k) {
				kiln_error_set(KILN_EINVALID, "metric %s is already registered as a %s", name,
				               kind_names[m->families[i]->kind]);
				return NULL;
			}
			return m->families[i];
		}
	}
	if (m->n == m->cap) {
		family **grown = realloc(m->families, next_cap(m->cap) * sizeof(*grown));

		if (!grown)
			goto oom;
		m->families = grown;
		m->cap = next_cap(m->cap);
	}
	if (!(f = calloc(1, sizeof(*f))) || !(f->name = strdup(name)) || (help && !(f->help = strdup(help))))
		goto oom;
	f->kind = k;
	m->families[m->n++] = f;
	return f;
oom:
	family_free(f);
	kiln_error_oom(NULL);
	return NULL;
}

static series *new_series(const char *labels, kind k, const double *bounds, size_t n)
{
	series *s = calloc(1, sizeof(*s));

	if (!s || !(s->labels = strdup(labels)))
		goto fail;
	if (k == KIND_HISTOGRAM) {
		kiln_histogram *h = &s->u.histogram;

		h->n = n;
		if (!(h->bounds = malloc((n ? n : 1) * sizeof(*h->bounds))) ||
		    !(h->counts = calloc(n + 1, sizeof(*h->counts))))
			goto fail;
		if (n)
			memcpy(h->bounds, bounds, n * sizeof(*bounds));
	}
	return s;
fail:
	series_free(s, k);
	kiln_error_oom(NULL);
	return NULL;
}

/* fn: NULL for a series that holds its value, which registering again
 * returns; a function's series is registered once. */
static series *register_series(kiln_metrics *m, const char *name, const char *help, const char *labels,
                               kind k, const double *bounds, size_t n, kiln_metrics_fn fn, void *fn_ctx)
{
	family *f;
	series *s = NULL;

	if (!name_valid(name)) {
		kiln_error_set(KILN_EINVALID, "metric name \"%s\" is not valid", name ? name : "");
		return NULL;
	}
	if (!labels)
		labels = "";
	pthread_mutex_lock(&m->lock);
	if (!(f = find_or_add_family(m, name, help, k)))
		goto done;
	for (size_t i = 0; i < f->n; i++) {
		if (strcmp(f->series[i]->labels, labels) == 0) {
			if (fn || f->series[i]->fn)
				kiln_error_set(KILN_EINVALID, "metric %s{%s} is already registered", name,
				               labels);
			else
				s = f->series[i];
			goto done;
		}
	}
	if (f->n == f->cap) {
		series **grown = realloc(f->series, next_cap(f->cap) * sizeof(*grown));

		if (!grown) {
			kiln_error_oom(NULL);
			goto done;
		}
		f->series = grown;
		f->cap = next_cap(f->cap);
	}
	if ((s = new_series(labels, k, bounds, n))) {
		s->fn = fn;
		s->fn_ctx = fn_ctx;
		f->series[f->n++] = s;
	}
done:
	pthread_mutex_unlock(&m->lock);
	return s;
}

kiln_counter *kiln_metrics_counter(kiln_metrics *m, const char *name, const char *help, const char *labels)
{
	series *s = register_series(m, name, help, labels, KIND_COUNTER, NULL, 0, NULL, NULL);

	return s ? &s->u.counter : NULL;
}

kiln_gauge *kiln_metrics_gauge(kiln_metrics *m, const char *name, const char *help, const char *labels)
{
	series *s = register_series(m, name, help, labels, KIND_GAUGE, NULL, 0, NULL, NULL);

	return s ? &s->u.gauge : NULL;
}

kiln_histogram *kiln_metrics_histogram(kiln_metrics *m, const char *name, const char *help,
                                       const char *labels, const double *bounds, size_t n)
{
	series *s;

	/* a trailing +Inf is the bucket added anyway */
	if (n > 0 && isinf(bounds[n - 1]) && bounds[n - 1] > 0)
		n--;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1]))) {
			kiln_error_set(KILN_EINVALID, "histogram %s: bounds must be finite and ascending",
			               name ? name : "");
			return NULL;
		}
	}
	s = register_series(m, name, help, labels, KIND_HISTOGRAM, bounds, n, NULL, NULL);
	return s ? &s->u.histogram : NULL;
}

int kiln_metrics_counter_fn(kiln_metrics *m, const char *name, const char *help, const char *labels,
                            kiln_metrics_fn fn, void *ctx)
{
	assert(fn);
	if (!register_series(m, name, help, labels, KIND_COUNTER, NULL, 0, fn, ctx))
		return kiln_error_last_code();
	return 0;
}

int kiln_metrics_gauge_fn(kiln_metrics *m, const char *name, const char *help, const char *labels,
                          kiln_metrics_fn fn, void *ctx)
{
	assert(fn);
	if (!register_series(m, name, help, labels, KIND_GAUGE, NULL, 0, fn, ctx))
		return kiln_error_last_code();
	return 0;
}

void kiln_counter_add(kiln_counter *c, uint64_t n)
{
	if (c)
		atomic_fetch_add_explicit(&c->value, n, memory_order_relaxed);
}

uint64_t kiln_counter_value(const kiln_counter *c)
{
	return c ? atomic_load_explicit(&((kiln_counter *)c)->value, memory_order_relaxed) : 0;
}

void kiln_gauge_set(kiln_gauge *g, double v)
{
	if (g)
		atomic_store_explicit(&g->bits, double_bits(v), memory_order_relaxed);
}

void kiln_gauge_add(kiln_gauge *g, double v)
{
	if (g)
		atomic_add_double(&g->bits, v);
}

double kiln_gauge_value(const kiln_gauge *g)
{
	return g ? bits_double(atomic_load_explicit(&((kiln_gauge *)g)->bits, memory_order_relaxed)) : 0;
}

void kiln_histogram_observe(kiln_histogram *h, double v)
{
	size_t lo = 0, hi;

	if (!h)
		return;
	/* first bucket with v <= bound; NaN compares false and lands in +Inf */
	hi = h->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v <= h->bounds[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	atomic_fetch_add_explicit(&h->counts[lo], 1, memory_order_relaxed);
	atomic_add_double(&h->sum_bits, v);
}

int kiln_metrics_label_value(kiln_buf *out, const char *v)
{
	int rc = kiln_buf_putc(out, '"');

	for (const char *p = v; *p && rc == 0; p++) {
		switch (*p) {
		case '\\':
			rc = kiln_buf_put(out, "\\\\", 2);
			break;
		case '"':
			rc = kiln_buf_put(out, "\\\"", 2);
			break;
		case '\n':
			rc = kiln_buf_put(out, "\\n", 2);
			break;
		default:
			rc = kiln_buf_putc(out, *p);
			break;
		}
	}
	return rc < 0 ? rc : kiln_buf_putc(out, '"');
}

/* Prometheus number text: "+Inf", "-Inf", "NaN", integers without a
 * fraction, others in the fewest digits that read back exactly. */
static void format_double(char *out, size_t cap, double v)
{
	if (isnan(v)) {
		snprintf(out, cap, "NaN");
	} else if (isinf(v)) {
		snprintf(out, cap, v > 0 ? "+Inf" : "-Inf");
	} else if (v == trunc(v) && fabs(v) < 1e17) {
		snprintf(out, cap, "%.0f", v);
	} else {
		for (int digits = 1; digits <= 17; digits++) {
			snprintf(out, cap, "%.*g", digits, v);
			if (strtod(out, NULL) == v)
				break;
		}
	}
}

static int put_help(kiln_buf *out, const family *f)
{
	int rc = 0;

	if (!f->help)
		return 0;
	if ((rc = kiln_buf_printf(out, "# HELP %s ", f->name)) < 0)
		return rc;
	for (const char *p = f->help; *p && rc == 0; p++) {
		if (*p == '\\')
			rc = kiln_buf_put(out, "\\\\", 2);
		else if (*p == '\n')
			rc = kiln_buf_put(out, "\\n", 2);
		else
			rc = kiln_buf_putc(out, *p);
	}
	return rc < 0 ? rc : kiln_buf_putc(out, '\n');
}

/* name<suffix>{labels[,le="le"]} value\n */
static int put_sample(kiln_buf *out, const char *name, const char *suffix, const char *labels, const char *le,
                      const char *value)
{
	const char *sep = labels[0] && le ? "," : "";

	if (!labels[0] && !le)
		return kiln_buf_printf(out, "%s%s %s\n", name, suffix, value);
	return kiln_buf_printf(out, "%s%s{%s%s%s%s%s} %s\n", name, suffix, labels, sep, le ? "le=\"" : "",
	                       le ? le : "", le ? "\"" : "", value);
}

static int put_histogram(kiln_buf *out, const char *name, const series *s)
{
	const kiln_histogram *h = &s->u.histogram;
	char le[32], value[32];
	uint64_t total = 0;
	int rc;

	for (size_t i = 0; i <= h->n; i++) {
		total += atomic_load_explicit(&h->counts[i], memory_order_relaxed);
		if (i < h->n)
			format_double(le, sizeof(le), h->bounds[i]);
		else
			snprintf(le, sizeof(le), "+Inf");
		snprintf(value, sizeof(value), "%" PRIu64, total);
		if ((rc = put_sample(out, name, "_bucket", s->labels, le, value)) < 0)
			return rc;
	}
	format_double(
	    value, sizeof(value),
	    bits_double(atomic_load_explicit(&((kiln_histogram *)h)->sum_bits, memory_order_relaxed)));
	if ((rc = put_sample(out, name, "_sum", s->labels, NULL, value)) < 0)
		return rc;
	/* the count is the +Inf bucket, so the two always agree */
	snprintf(value, sizeof(value), "%" PRIu64, total);
	return put_sample(out, name, "_count", s->labels, NULL, value);
}

static int put_family(kiln_buf *out, const family *f)
{
	char value[32];
	int rc;

	if ((rc = put_help(out, f)) < 0 ||
	    (rc = kiln_buf_printf(out, "# TYPE %s %s\n", f->name, kind_names[f->kind])) < 0)
		return rc;
	for (size_t i = 0; i < f->n; i++) {
		const series *s = f->series[i];

		switch (f->kind) {
		case KIND_COUNTER:
		case KIND_GAUGE:
			if (s->fn)
				format_double(value, sizeof(value), s->fn(s->fn_ctx));
			else if (f->kind == KIND_COUNTER)
				snprintf(value, sizeof(value), "%" PRIu64, kiln_counter_value(&s->u.counter));
			else
				format_double(value, sizeof(value), kiln_gauge_value(&s->u.gauge));
			rc = put_sample(out, f->name, "", s->labels, NULL, value);
			break;
		case KIND_HISTOGRAM:
			rc = put_histogram(out, f->name, s);
			break;
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

int kiln_metrics_render(kiln_metrics *m, kiln_buf *out)
{
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->n && rc == 0; i++)
		rc = put_family(out, m->families[i]);
	pthread_mutex_unlock(&m->lock);
	return rc;
}
