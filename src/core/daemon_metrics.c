/* kiln_build_info and the process_* families (see daemon_metrics.h). The
 * process values are function series (kiln_metrics_gauge_fn): each reads
 * the kernel when rendered, so nothing here keeps state but the start
 * time, a gauge set once. Linux: /proc/self/statm, /proc/self/fd,
 * /proc/self/stat and /proc/stat's btime, as client_golang reads them. */
#include "core/daemon_metrics.h"

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/error.h"

static double cpu_seconds(void *ctx)
{
	struct rusage ru;

	(void)ctx;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return NAN;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

/* Field `field` (0: size, 1: resident) of /proc/self/statm, in bytes. */
static double statm_bytes(int field)
{
	unsigned long long v[2];
	long page = sysconf(_SC_PAGESIZE);
	FILE *f = fopen("/proc/self/statm", "re");
	int n = f ? fscanf(f, "%llu %llu", &v[0], &v[1]) : 0;

	if (f)
		fclose(f);
	return n == 2 && page > 0 ? (double)v[field] * (double)page : NAN;
}

static double resident_bytes(void *ctx)
{
	(void)ctx;
	return statm_bytes(1);
}

static double virtual_bytes(void *ctx)
{
	(void)ctx;
	return statm_bytes(0);
}

static double open_fds(void *ctx)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	double n = 0;

	(void)ctx;
	if (!d)
		return NAN;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			n++;
	closedir(d);
	return n;
}

static double max_fds(void *ctx)
{
	struct rlimit rl;

	(void)ctx;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return NAN;
	return (double)rl.rlim_cur;
}

/* Unix time the process started: /proc/self/stat's starttime (clock ticks
 * after boot, field 22) plus /proc/stat's btime; NAN when unreadable. */
static double start_time(void)
{
	char buf[1024], *p;
	unsigned long long ticks = 0, btime = 0;
	long hz = sysconf(_SC_CLK_TCK);
	size_t n = 0;
	FILE *f = fopen("/proc/self/stat", "re");
	bool found = false;

	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	/* after "pid (comm)", whose comm may hold spaces and parentheses */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
	           &ticks) != 1 ||
	    hz <= 0 || !(f = fopen("/proc/stat", "re")))
		return NAN;
	while (!found && fgets(buf, sizeof(buf), f))
		found = sscanf(buf, "btime %llu", &btime) == 1;
	fclose(f);
	return found ? (double)btime + (double)ticks / (double)hz : NAN;
}

static int build_info(kiln_metrics *m, const kiln_build_info *info)
{
	const char *names[] = {"version", "commit", "zstd", "librdkafka", "libgit2"};
	const char *values[] = {info->version, info->commit, info->zstd, info->librdkafka, info->libgit2};
	kiln_buf labels = KILN_BUF_INIT(0);
	kiln_gauge *g = NULL;
	int rc = 0;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && rc == 0; i++)
		if ((rc = kiln_buf_printf(&labels, "%s%s=", i ? "," : "", names[i])) == 0)
			rc = kiln_metrics_label_value(&labels, values[i] ? values[i] : "unknown");
	if (rc == 0 && (rc = kiln_buf_putc(&labels, '\0')) == 0 &&
	    !(g = kiln_metrics_gauge(m, "kiln_build_info",
	                             "1; the labels say what this kiln was built from and runs with",
	                             labels.ptr)))
		rc = kiln_error_last_code();
	kiln_gauge_set(g, 1);
	kiln_buf_free(&labels);
	return rc;
}

int kiln_daemon_metrics_register(kiln_metrics *m, const kiln_build_info *info)
{
	kiln_gauge *started;
	int rc;

	if ((info && (rc = build_info(m, info)) < 0) ||
	    (rc = kiln_metrics_counter_fn(m, "process_cpu_seconds_total",
	                                  "Total user and system CPU time spent in seconds.", NULL,
	                                  cpu_seconds, NULL)) < 0 ||
	    (rc = kiln_metrics_gauge_fn(m, "process_resident_memory_bytes", "Resident memory size in bytes.",
	                                NULL, resident_bytes, NULL)) < 0 ||
	    (rc = kiln_metrics_gauge_fn(m, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
	                                NULL, virtual_bytes, NULL)) < 0 ||
	    (rc = kiln_metrics_gauge_fn(m, "process_open_fds", "Number of open file descriptors.", NULL,
	                                open_fds, NULL)) < 0 ||
	    (rc = kiln_metrics_gauge_fn(m, "process_max_fds", "Maximum number of open file descriptors.",
	                                NULL, max_fds, NULL)) < 0)
		return rc;
	if (!(started = kiln_metrics_gauge(m, "process_start_time_seconds",
	                                   "Start time of the process since unix epoch in seconds.", NULL)))
		return kiln_error_last_code();
	kiln_gauge_set(started, start_time());
	return 0;
}
