/* Unit tests for the metrics registry (src/core/metrics.c): the exact
 * exposition text of counters with and without labels, label sets sharing a
 * name, gauges, histograms (cumulative buckets, sum, count), number and
 * label escaping, bad registrations, counters added to from threads, and
 * series whose function the render calls. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/metrics.h"

/* The registry's whole exposition, NUL-terminated, in a static buffer. */
static const char *render(kiln_metrics *m)
{
	static kiln_buf out = KILN_BUF_INIT(0);

	kiln_buf_reset(&out);
	assert_int_equal(kiln_metrics_render(m, &out), 0);
	assert_int_equal(kiln_buf_putc(&out, '\0'), 0);
	return out.ptr;
}

static void test_counters(void **state)
{
	kiln_metrics *m;
	kiln_counter *plain, *a, *b, *again;

	assert_int_equal(kiln_metrics_new(&m), 0);
	plain = kiln_metrics_counter(m, "kiln_records_total", "Records read.", NULL);
	a = kiln_metrics_counter(m, "kiln_rejects_total", "Records rejected, by code.", "code=\"type\"");
	b = kiln_metrics_counter(m, "kiln_rejects_total", "ignored", "code=\"json_syntax\"");
	again = kiln_metrics_counter(m, "kiln_rejects_total", NULL, "code=\"type\"");
	assert_non_null(plain);
	assert_non_null(a);
	assert_non_null(b);
	assert_ptr_equal(a, again);
	assert_ptr_not_equal(a, b);
	kiln_counter_add(plain, 12);
	kiln_counter_add(a, 2);
	kiln_counter_add(again, 1);
	kiln_counter_add(NULL, 5);
	assert_int_equal(kiln_counter_value(a), 3);
	assert_int_equal(kiln_counter_value(NULL), 0);
	kiln_counter_add(b, UINT64_C(18446744073709551615));
	assert_string_equal(render(m), "# HELP kiln_records_total Records read.\n"
	                               "# TYPE kiln_records_total counter\n"
	                               "kiln_records_total 12\n"
	                               "# HELP kiln_rejects_total Records rejected, by code.\n"
	                               "# TYPE kiln_rejects_total counter\n"
	                               "kiln_rejects_total{code=\"type\"} 3\n"
	                               "kiln_rejects_total{code=\"json_syntax\"} 18446744073709551615\n");
	kiln_metrics_free(m);
	kiln_metrics_free(NULL);
}

static void test_names_interleaved(void **state)
{
	kiln_metrics *m;

	/* names keep their first-registration order, series group under them */
	assert_int_equal(kiln_metrics_new(&m), 0);
	kiln_counter_add(kiln_metrics_counter(m, "b_total", "B.", "x=\"1\""), 1);
	kiln_counter_add(kiln_metrics_counter(m, "a_total", NULL, NULL), 2);
	kiln_counter_add(kiln_metrics_counter(m, "b_total", "B.", "x=\"2\""), 3);
	kiln_counter_add(kiln_metrics_counter(m, "b_total", "B.", ""), 4);
	assert_string_equal(render(m), "# HELP b_total B.\n"
	                               "# TYPE b_total counter\n"
	                               "b_total{x=\"1\"} 1\n"
	                               "b_total{x=\"2\"} 3\n"
	                               "b_total 4\n"
	                               "# TYPE a_total counter\n"
	                               "a_total 2\n");
	kiln_metrics_free(m);
}

static void test_gauges(void **state)
{
	kiln_metrics *m;
	kiln_gauge *g, *h, *inf, *nan_, *big, *tiny;

	assert_int_equal(kiln_metrics_new(&m), 0);
	g = kiln_metrics_gauge(m, "kiln_lag_seconds", "Consumer lag.", "topic=\"t\",partition=\"0\"");
	h = kiln_metrics_gauge(m, "kiln_lag_seconds", NULL, "topic=\"t\",partition=\"1\"");
	inf = kiln_metrics_gauge(m, "kiln_g", "Odd values.", "v=\"inf\"");
	nan_ = kiln_metrics_gauge(m, "kiln_g", NULL, "v=\"nan\"");
	big = kiln_metrics_gauge(m, "kiln_g", NULL, "v=\"big\"");
	tiny = kiln_metrics_gauge(m, "kiln_g", NULL, "v=\"tiny\"");
	kiln_gauge_set(g, 1.5);
	kiln_gauge_add(g, 0.25);
	kiln_gauge_set(h, 3);
	kiln_gauge_add(h, -5);
	kiln_gauge_set(inf, -INFINITY);
	kiln_gauge_set(nan_, NAN);
	kiln_gauge_set(big, 1e300);
	kiln_gauge_set(tiny, 0.1);
	kiln_gauge_add(tiny, 0.2);
	kiln_gauge_set(NULL, 1);
	kiln_gauge_add(NULL, 1);
	assert_true(kiln_gauge_value(g) == 1.75);
	assert_string_equal(render(m), "# HELP kiln_lag_seconds Consumer lag.\n"
	                               "# TYPE kiln_lag_seconds gauge\n"
	                               "kiln_lag_seconds{topic=\"t\",partition=\"0\"} 1.75\n"
	                               "kiln_lag_seconds{topic=\"t\",partition=\"1\"} -2\n"
	                               "# HELP kiln_g Odd values.\n"
	                               "# TYPE kiln_g gauge\n"
	                               "kiln_g{v=\"inf\"} -Inf\n"
	                               "kiln_g{v=\"nan\"} NaN\n"
	                               "kiln_g{v=\"big\"} 1e+300\n"
	                               "kiln_g{v=\"tiny\"} 0.30000000000000004\n");
	kiln_metrics_free(m);
}

static void test_histogram(void **state)
{
	static const double bounds[] = {0.005, 0.1, 1, 2.5};
	kiln_metrics *m;
	kiln_histogram *h, *l;

	assert_int_equal(kiln_metrics_new(&m), 0);
	h = kiln_metrics_histogram(m, "kiln_put_seconds", "Store put latency.", NULL, bounds, 4);
	l = kiln_metrics_histogram(m, "kiln_put_seconds", NULL, "store=\"s3\"", bounds, 2);
	assert_non_null(h);
	assert_non_null(l);
	assert_ptr_equal(kiln_metrics_histogram(m, "kiln_put_seconds", NULL, NULL, NULL, 0), h);
	kiln_histogram_observe(h, 0.00390625); /* 0.005 */
	kiln_histogram_observe(h, 0.0625);     /* 0.1 */
	kiln_histogram_observe(h, 1);          /* 1: le is inclusive */
	kiln_histogram_observe(h, 0.5);        /* 1 */
	kiln_histogram_observe(h, 2);          /* 2.5 */
	kiln_histogram_observe(h, 7);          /* +Inf */
	kiln_histogram_observe(l, 3);
	kiln_histogram_observe(NULL, 3);
	assert_string_equal(render(m), "# HELP kiln_put_seconds Store put latency.\n"
	                               "# TYPE kiln_put_seconds histogram\n"
	                               "kiln_put_seconds_bucket{le=\"0.005\"} 1\n"
	                               "kiln_put_seconds_bucket{le=\"0.1\"} 2\n"
	                               "kiln_put_seconds_bucket{le=\"1\"} 4\n"
	                               "kiln_put_seconds_bucket{le=\"2.5\"} 5\n"
	                               "kiln_put_seconds_bucket{le=\"+Inf\"} 6\n"
	                               "kiln_put_seconds_sum 10.56640625\n"
	                               "kiln_put_seconds_count 6\n"
	                               "kiln_put_seconds_bucket{store=\"s3\",le=\"0.005\"} 0\n"
	                               "kiln_put_seconds_bucket{store=\"s3\",le=\"0.1\"} 0\n"
	                               "kiln_put_seconds_bucket{store=\"s3\",le=\"+Inf\"} 1\n"
	                               "kiln_put_seconds_sum{store=\"s3\"} 3\n"
	                               "kiln_put_seconds_count{store=\"s3\"} 1\n");
	kiln_metrics_free(m);
}

static void test_histogram_edges(void **state)
{
	static const double with_inf[] = {1, INFINITY};
	static const double unsorted[] = {1, 0.5};
	static const double nan_bound[] = {NAN};
	kiln_metrics *m;
	kiln_histogram *h;

	assert_int_equal(kiln_metrics_new(&m), 0);
	/* no finite bounds: only +Inf; a trailing +Inf bound is not doubled */
	h = kiln_metrics_histogram(m, "only_inf", NULL, NULL, NULL, 0);
	kiln_histogram_observe(h, NAN);
	h = kiln_metrics_histogram(m, "with_inf", NULL, NULL, with_inf, 2);
	kiln_histogram_observe(h, 1);
	kiln_histogram_observe(h, -1);
	assert_null(kiln_metrics_histogram(m, "unsorted", NULL, NULL, unsorted, 2));
	assert_int_equal(kiln_error_last_code(), KILN_EINVALID);
	assert_null(kiln_metrics_histogram(m, "nan_bound", NULL, NULL, nan_bound, 1));
	assert_string_equal(render(m), "# TYPE only_inf histogram\n"
	                               "only_inf_bucket{le=\"+Inf\"} 1\n"
	                               "only_inf_sum NaN\n"
	                               "only_inf_count 1\n"
	                               "# TYPE with_inf histogram\n"
	                               "with_inf_bucket{le=\"1\"} 2\n"
	                               "with_inf_bucket{le=\"+Inf\"} 2\n"
	                               "with_inf_sum 0\n"
	                               "with_inf_count 2\n");
	kiln_metrics_free(m);
}

static void test_escaping(void **state)
{
	kiln_metrics *m;
	kiln_buf labels = KILN_BUF_INIT(0);

	assert_int_equal(kiln_metrics_new(&m), 0);
	assert_int_equal(kiln_buf_puts(&labels, "path="), 0);
	assert_int_equal(kiln_metrics_label_value(&labels, "a\\b\"c\nd\xc3\xa9"), 0);
	assert_int_equal(kiln_buf_putc(&labels, '\0'), 0);
	assert_string_equal(labels.ptr, "path=\"a\\\\b\\\"c\\nd\xc3\xa9\"");
	kiln_buf_reset(&labels);
	assert_int_equal(kiln_metrics_label_value(&labels, ""), 0);
	assert_int_equal(kiln_buf_putc(&labels, '\0'), 0);
	assert_string_equal(labels.ptr, "\"\"");
	kiln_buf_reset(&labels);
	assert_int_equal(kiln_buf_puts(&labels, "path="), 0);
	assert_int_equal(kiln_metrics_label_value(&labels, "a\\b\"c\nd\xc3\xa9"), 0);
	assert_int_equal(kiln_buf_putc(&labels, '\0'), 0);
	kiln_counter_add(
	    kiln_metrics_counter(m, "esc_total", "Help with \\ and\nnewline \"quoted\".", labels.ptr), 1);
	assert_string_equal(render(m), "# HELP esc_total Help with \\\\ and\\nnewline \"quoted\".\n"
	                               "# TYPE esc_total counter\n"
	                               "esc_total{path=\"a\\\\b\\\"c\\nd\xc3\xa9\"} 1\n");
	kiln_buf_free(&labels);
	kiln_metrics_free(m);
}

static void test_bad_registrations(void **state)
{
	kiln_metrics *m;

	assert_int_equal(kiln_metrics_new(&m), 0);
	assert_null(kiln_metrics_counter(m, "9lives", NULL, NULL));
	assert_int_equal(kiln_error_last_code(), KILN_EINVALID);
	assert_null(kiln_metrics_counter(m, "", NULL, NULL));
	assert_null(kiln_metrics_counter(m, "has-dash", NULL, NULL));
	assert_null(kiln_metrics_counter(m, NULL, NULL, NULL));
	assert_non_null(kiln_metrics_counter(m, "ns:sub_name_total", NULL, NULL));
	assert_non_null(kiln_metrics_counter(m, "x_total", NULL, NULL));
	assert_null(kiln_metrics_gauge(m, "x_total", NULL, NULL));
	assert_int_equal(kiln_error_last_code(), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "metric x_total is already registered as a counter");
	assert_string_equal(render(m), "# TYPE ns:sub_name_total counter\n"
	                               "ns:sub_name_total 0\n"
	                               "# TYPE x_total counter\n"
	                               "x_total 0\n");
	kiln_metrics_free(m);
}

/* A function series' value: calls counted, so each render asks once. */
static double calls_so_far(void *ctx)
{
	return (double)++*(int *)ctx;
}

static double half(void *ctx)
{
	return *(double *)ctx / 2;
}

static void test_functions(void **state)
{
	kiln_metrics *m;
	int calls = 0;
	double v = 3;

	assert_int_equal(kiln_metrics_new(&m), 0);
	assert_int_equal(kiln_metrics_counter_fn(m, "f_seconds_total", "CPU.", NULL, calls_so_far, &calls),
	                 0);
	assert_int_equal(kiln_metrics_gauge_fn(m, "g_bytes", "Half.", "x=\"1\"", half, &v), 0);
	kiln_gauge_set(kiln_metrics_gauge(m, "g_bytes", NULL, "x=\"2\""), 7);
	assert_int_equal(calls, 0); /* nothing is called before a render */
	assert_string_equal(render(m), "# HELP f_seconds_total CPU.\n"
	                               "# TYPE f_seconds_total counter\n"
	                               "f_seconds_total 1\n"
	                               "# HELP g_bytes Half.\n"
	                               "# TYPE g_bytes gauge\n"
	                               "g_bytes{x=\"1\"} 1.5\n"
	                               "g_bytes{x=\"2\"} 7\n");
	v = 5;
	assert_non_null(strstr(render(m), "f_seconds_total 2\n#"));
	assert_non_null(strstr(render(m), "g_bytes{x=\"1\"} 2.5\n"));
	/* a function series is registered once, and never handed out as a value */
	assert_int_equal(kiln_metrics_gauge_fn(m, "g_bytes", NULL, "x=\"1\"", half, &v), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "metric g_bytes{x=\"1\"} is already registered");
	assert_null(kiln_metrics_gauge(m, "g_bytes", NULL, "x=\"1\""));
	assert_int_equal(kiln_metrics_gauge_fn(m, "g_bytes", NULL, "x=\"2\"", half, &v), KILN_EINVALID);
	assert_int_equal(kiln_metrics_gauge_fn(m, "f_seconds_total", NULL, NULL, half, &v), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), "metric f_seconds_total is already registered as a counter");
	assert_int_equal(kiln_metrics_counter_fn(m, "bad name", NULL, NULL, half, &v), KILN_EINVALID);
	kiln_metrics_free(m);
}

#define THREADS 4
#define ADDS    250000

static void *adder(void *arg)
{
	kiln_counter *c = arg;

	for (int i = 0; i < ADDS; i++)
		kiln_counter_add(c, 1);
	return NULL;
}

static void *observer(void *arg)
{
	kiln_histogram *h = arg;

	for (int i = 0; i < ADDS / 10; i++)
		kiln_histogram_observe(h, (double)(i % 4));
	return NULL;
}

static void test_threads(void **state)
{
	static const double bounds[] = {1, 2};
	pthread_t t[2 * THREADS];
	kiln_metrics *m;
	kiln_counter *c;
	kiln_histogram *h;
	char expect[512];

	assert_int_equal(kiln_metrics_new(&m), 0);
	c = kiln_metrics_counter(m, "adds_total", NULL, NULL);
	h = kiln_metrics_histogram(m, "obs", NULL, NULL, bounds, 2);
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_create(&t[i], NULL, adder, c), 0);
		assert_int_equal(pthread_create(&t[THREADS + i], NULL, observer, h), 0);
	}
	/* rendering while they run is safe (values are whatever they are) */
	assert_non_null(strstr(render(m), "adds_total "));
	for (int i = 0; i < 2 * THREADS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(kiln_counter_value(c), (uint64_t)THREADS * ADDS);
	/* each observer: 6250 each of 0, 1, 2, 3 -> sum 37500 */
	snprintf(expect, sizeof(expect),
	         "# TYPE adds_total counter\nadds_total %d\n# TYPE obs histogram\n"
	         "obs_bucket{le=\"1\"} %d\nobs_bucket{le=\"2\"} %d\nobs_bucket{le=\"+Inf\"} %d\n"
	         "obs_sum %d\nobs_count %d\n",
	         THREADS * ADDS, THREADS * ADDS / 20, THREADS * ADDS * 3 / 40, THREADS * ADDS / 10,
	         THREADS * 37500, THREADS * ADDS / 10);
	assert_string_equal(render(m), expect);
	kiln_metrics_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counters),
	    cmocka_unit_test(test_names_interleaved),
	    cmocka_unit_test(test_gauges),
	    cmocka_unit_test(test_histogram),
	    cmocka_unit_test(test_histogram_edges),
	    cmocka_unit_test(test_escaping),
	    cmocka_unit_test(test_bad_registrations),
	    cmocka_unit_test(test_threads),
	    cmocka_unit_test(test_functions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
