#!/usr/bin/python3
"""CPU time per thread of one command, from /proc (no perf).

Usage: threads.py BREAKDOWN_FILE -- COMMAND [ARG...]

Runs COMMAND (its stdout and stderr go to this script's), samples
/proc/PID/task/*/stat and schedstat every 20 ms, keeping the last sample
of each thread, and once the process has exited, but before it is reaped
(waitid with WNOWAIT), reads the main thread's own CPU time exactly (the
thread group leader stays readable as a zombie) and the whole process's
from the rusage of the reap. Prints one line to stdout:

    WALL_S TOTAL_CPU_S MAIN_CPU_S MAXRSS_KB

and writes BREAKDOWN_FILE, one thread a line, the main thread first, then
the others by CPU time: "TID<TAB>NAME<TAB>CPU_S" (NAME is the thread's
comm; CPU time from schedstat's nanoseconds where the kernel has them,
else utime + stime in clock ticks; a thread that ended before the process
counts with its last sample, at most 20 ms old). Exits with the
command's status.
"""

import os
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def thread_cpu(pid, tid):
    """(name, cpu seconds) of one thread, or None when it is gone."""
    stat = read("/proc/%d/task/%d/stat" % (pid, tid))
    if stat is None:
        return None
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    sched = read("/proc/%d/task/%d/schedstat" % (pid, tid))
    if sched:
        cpu = int(sched.split()[0]) / 1e9
    return name, cpu


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: threads.py BREAKDOWN_FILE -- COMMAND [ARG...]")
    out, cmd = sys.argv[1], sys.argv[3:]
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    last = {}
    while True:
        # exited (not reaped)? then one last sample of the leader, exact
        done = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        try:
            tids = [int(t) for t in os.listdir("/proc/%d/task" % pid)]
        except OSError:
            tids = []
        for tid in tids:
            s = thread_cpu(pid, tid)
            if s is not None:
                last[tid] = s
        if done is not None:
            break
        time.sleep(0.02)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    total = usage.ru_utime + usage.ru_stime
    main_name, main_cpu = last.get(pid, ("?", 0.0))
    others = sorted(((cpu, tid, name) for tid, (name, cpu) in last.items() if tid != pid), reverse=True)
    with open(out, "w", encoding="utf-8") as f:
        f.write("%d\t%s\t%.4f\n" % (pid, main_name, main_cpu))
        for cpu, tid, name in others:
            f.write("%d\t%s\t%.4f\n" % (tid, name, cpu))
    print("%.4f %.4f %.4f %d" % (wall, total, main_cpu, usage.ru_maxrss))
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
