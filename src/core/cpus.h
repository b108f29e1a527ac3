/* How many CPUs this process may run on. */
#ifndef KILN_CORE_CPUS_H
#define KILN_CORE_CPUS_H

/* The CPUs of this process's affinity mask (taskset, a container's
 * cpuset), else those online; at least 1. */
unsigned kiln_cpu_count(void);

#endif
