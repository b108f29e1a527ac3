/* Unit tests for the families every daemon serves (src/core/daemon_metrics.c):
 * kiln_build_info's labels (escaped, "unknown" for a missing value, absent
 * without build info), the process_* families' names and types in the
 * order client_golang gives them, and their values against what the
 * kernel says: the CPU time between two getrusage calls, the descriptors
 * this test opens, the soft RLIMIT_NOFILE, memory sizes, a start time
 * between boot and now. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/daemon_metrics.h"
#include "core/error.h"

static const char *render(kiln_metrics *m)
{
	static kiln_buf out = KILN_BUF_INIT(0);

	kiln_buf_reset(&out);
	assert_int_equal(kiln_metrics_render(m, &out), 0);
	assert_int_equal(kiln_buf_putc(&out, '\0'), 0);
	return out.ptr;
}

/* The value of the sample "NAME VALUE" (no labels) in text. */
static double value_of(const char *text, const char *name)
{
	char want[128];
	const char *p;

	snprintf(want, sizeof(want), "\n%s ", name);
	p = strstr(text, want);
	assert_non_null(p);
	return strtod(p + strlen(want), NULL);
}

static double rusage_seconds(void)
{
	struct rusage ru;

	assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

static void test_build_info(void **state)
{
	const kiln_build_info info = {"1.2.3", "0123456789ab", "1.5.4", "2.0\"x\\y", NULL};
	kiln_metrics *m;

	assert_int_equal(kiln_metrics_new(&m), 0);
	assert_int_equal(kiln_daemon_metrics_register(m, &info), 0);
	assert_non_null(strstr(render(m),
	                       "# TYPE kiln_build_info gauge\n"
	                       "kiln_build_info{version=\"1.2.3\",commit=\"0123456789ab\",zstd=\"1.5.4\","
	                       "librdkafka=\"2.0\\\"x\\\\y\",libgit2=\"unknown\"} 1\n"));
	/* twice into one registry: the function series are registered once */
	assert_int_equal(kiln_daemon_metrics_register(m, &info), KILN_EINVALID);
	kiln_metrics_free(m);

	assert_int_equal(kiln_metrics_new(&m), 0);
	assert_int_equal(kiln_daemon_metrics_register(m, NULL), 0);
	assert_null(strstr(render(m), "kiln_build_info"));
	kiln_metrics_free(m);
}

static void test_process_families(void **state)
{
	kiln_metrics *m;
	const char *text, *p;
	const char *want[] = {"process_cpu_seconds_total counter",
	                      "process_resident_memory_bytes gauge",
	                      "process_virtual_memory_bytes gauge",
	                      "process_open_fds gauge",
	                      "process_max_fds gauge",
	                      "process_start_time_seconds gauge"};

	assert_int_equal(kiln_metrics_new(&m), 0);
	assert_int_equal(kiln_daemon_metrics_register(m, NULL), 0);
	text = render(m);
	p = text;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char line[96];

		snprintf(line, sizeof(line), "# TYPE %s\n", want[i]);
		assert_non_null(p = strstr(p, line)); /* in this order */
	}
	assert_null(strstr(text, "NaN"));
	kiln_metrics_free(m);
}

static void test_process_values(void **state)
{
	kiln_metrics *m;
	struct rlimit rl;
	volatile double spin = 0;
	double before, after, cpu, fds, rss, vsz, start;
	int extra[3];

	assert_int_equal(kiln_metrics_new(&m), 0);
	assert_int_equal(kiln_daemon_metrics_register(m, NULL), 0);
	for (int i = 0; i < 20000000; i++) /* some CPU time to measure */
		spin += i;
	before = rusage_seconds();
	cpu = value_of(render(m), "process_cpu_seconds_total");
	after = rusage_seconds();
	assert_true(before > 0 && before <= cpu && cpu <= after);

	fds = value_of(render(m), "process_open_fds");
	for (int i = 0; i < 3; i++)
		assert_true((extra[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
	assert_true(value_of(render(m), "process_open_fds") == fds + 3);
	for (int i = 0; i < 3; i++)
		close(extra[i]);
	assert_true(value_of(render(m), "process_open_fds") == fds);
	assert_true(fds >= 3); /* stdin, stdout, stderr at least */

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	assert_true(value_of(render(m), "process_max_fds") == (double)rl.rlim_cur);

	rss = value_of(render(m), "process_resident_memory_bytes");
	vsz = value_of(render(m), "process_virtual_memory_bytes");
	assert_true(rss > 0 && rss <= vsz);
	assert_true((long long)rss % sysconf(_SC_PAGESIZE) == 0);

	start = value_of(render(m), "process_start_time_seconds");
	assert_true(start > 1e9 && start <= (double)time(NULL) + 1);
	kiln_metrics_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_build_info),
	    cmocka_unit_test(test_process_families),
	    cmocka_unit_test(test_process_values),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
