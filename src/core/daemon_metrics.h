/* The families every kiln daemon serves beside its own (docs/METRICS.md):
 * kiln_build_info, what the binary was built from and runs with, and the
 * process_* families of the Prometheus client libraries, read from
 * getrusage, getrlimit and /proc at each scrape. */
#ifndef KILN_CORE_DAEMON_METRICS_H
#define KILN_CORE_DAEMON_METRICS_H

#include "core/metrics.h"

/* The label values of kiln_build_info. The strings are borrowed; the
 * registry copies them. */
typedef struct kiln_build_info {
	const char *version;                     /* PACKAGE_VERSION */
	const char *commit;                      /* the git commit built, "unknown" outside a checkout */
	const char *zstd, *librdkafka, *libgit2; /* each library's version as loaded at run time */
} kiln_build_info;

/* Registers kiln_build_info{version,commit,zstd,librdkafka,libgit2} = 1
 * (not when info is NULL) and process_cpu_seconds_total,
 * process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_open_fds, process_max_fds and process_start_time_seconds. A
 * value the system does not give renders as NaN. */
int kiln_daemon_metrics_register(kiln_metrics *metrics, const kiln_build_info *info);

#endif
