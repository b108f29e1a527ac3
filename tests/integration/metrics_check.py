#!/usr/bin/python3
"""Checks for tests/integration/metrics.sh (standard library only).

metrics_check.py doc METRICS.md DAEMON SCRAPE [--all]
    Holds a /metrics scrape of DAEMON ("kafka": a Kafka `kiln run`; "cache":
    `kiln cache serve`) to docs/METRICS.md: every family served is listed in
    a table of a section for that daemon, with the same type and label
    names; every family listed there is served, except, without --all, one
    whose meaning starts with "**Only after**" (it appears after an event;
    --all: the test made every such event happen). Prints each difference.

metrics_check.py build-info SCRAPE VERSION_OUTPUT KEY=VALUE...
    kiln_build_info has one series, of value 1, with exactly these labels,
    and `kiln --version` (its output in the file VERSION_OUTPUT) agrees.

metrics_check.py process URL PID BEFORE AFTER
    The process_* values URL serves against /proc/PID (BEFORE, AFTER: Unix
    times before the daemon was started and once it listened).

metrics_check.py fds URL N
    process_open_fds grows by N or more while this holds N connections open.

Each prints what differs and exits 1 when something does.
"""
import os
import re
import socket
import sys
import time
import urllib.parse
import urllib.request

# The sections of METRICS.md whose tables list what a daemon serves.
SECTIONS = {
    "Served by both daemons": {"kafka", "cache"},
    "`kiln run` (Kafka source)": {"kafka"},
    "`kiln cache serve`": {"cache"},
}
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count")}
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def parse_labels(text):
    labels, at = {}, 0
    while at < len(text):
        m = LABEL.match(text, at)
        if not m:
            raise ValueError("bad labels: " + text)
        labels[m.group(1)] = re.sub(r'\\(.)', lambda e: {"n": "\n"}.get(e.group(1), e.group(1)), m.group(2))
        at = m.end()
    return labels


def parse_scrape(path):
    with open(path, encoding="utf-8") as f:
        return parse_text(f.read())


def parse_text(text):
    """{family: {"type": t, "labels": set of names, "samples": [(name, labels, value)]}}"""
    families, types = {}, {}
    for line in text.splitlines():
        line = line.rstrip("\n")
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            families[name] = {"type": kind, "labels": set(), "samples": []}
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError("not Prometheus text: " + line)
        name, labels, value = m.group(1), parse_labels(m.group(2) or ""), float(m.group(3))
        family = name
        if name not in types:
            family = next((name[: -len(s)] for s in SUFFIXES.get("histogram") if name.endswith(s)
                           and types.get(name[: -len(s)]) == "histogram"), None)
            if family is None:
                raise ValueError("a sample without # TYPE: " + line)
        f = families[family]
        f["labels"] |= {k for k in labels if not (f["type"] == "histogram" and k == "le")}
        f["samples"].append((name, labels, value))
    return families


def parse_doc(path, daemon):
    """{family: (type, set of label names, only_after)} for DAEMON."""
    listed, section, header = {}, None, None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith("#"):
            section, header = line.lstrip("#").strip(), None
            continue
        if not line.startswith("|") or daemon not in SECTIONS.get(section, ()):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if header[:3] != ["family", "type", "labels"] or set(cells[0]) <= set("-"):
            continue
        row = dict(zip(header, cells))
        name = row["family"].strip("`")
        labels = {x.strip() for x in row["labels"].split(",") if x.strip()}
        listed[name] = (row["type"], labels, row["meaning"].startswith("**Only after**"))
    return listed


def doc(argv):
    path, daemon, scrape = argv[:3]
    every = "--all" in argv[3:]
    listed, served = parse_doc(path, daemon), parse_scrape(scrape)
    bad = []
    if not listed:
        bad.append(f"{path} lists nothing for {daemon}")
    for name, f in sorted(served.items()):
        if name not in listed:
            bad.append(f"{name} ({f['type']}) is served but {path} does not list it for {daemon}")
            continue
        kind, labels, _ = listed[name]
        if kind != f["type"]:
            bad.append(f"{name}: served as a {f['type']}, {path} says {kind}")
        if labels != f["labels"]:
            bad.append(f"{name}: served with labels {sorted(f['labels'])}, {path} says {sorted(labels)}")
    for name, (kind, _, only_after) in sorted(listed.items()):
        if name not in served and (every or not only_after):
            bad.append(f"{name} ({kind}) is listed in {path} for {daemon} but not served")
    for b in bad:
        print(b)
    print(f"{daemon}: {len(served)} families served, {len(listed)} listed, {len(bad)} differences")
    return 1 if bad else 0


def scrape(url):
    """GET url (a /metrics), parsed."""
    with urllib.request.urlopen(url, timeout=30) as r:
        return parse_text(r.read().decode("utf-8"))


def value(families, name):
    samples = families.get(name, {}).get("samples", [])
    if len(samples) != 1:
        raise KeyError(f"{name}: {len(samples)} samples")
    return samples[0][2]


def proc_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 (fields[11], fields[12] after "pid (comm)")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_start_time(pid):
    with open(f"/proc/{pid}/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def proc_status_bytes(pid, key):
    with open(f"/proc/{pid}/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith(key + ":"))
    return kib * 1024


def proc_soft_nofile(pid):
    with open(f"/proc/{pid}/limits") as f:
        soft = next(line for line in f if line.startswith("Max open files")).split()[3]
    return float("inf") if soft == "unlimited" else float(soft)


def process(argv):
    """process URL PID BEFORE AFTER: the process_* values of URL's scrape
    against /proc/PID; BEFORE and AFTER: Unix times around the start."""
    url, pid, before, after = argv[0], int(argv[1]), float(argv[2]), float(argv[3])
    cpu0 = proc_cpu_seconds(pid)
    f = scrape(url)
    cpu1 = proc_cpu_seconds(pid)
    rss, vsz = proc_status_bytes(pid, "VmRSS"), proc_status_bytes(pid, "VmSize")
    got = {n: value(f, n) for n in ("process_cpu_seconds_total", "process_resident_memory_bytes",
                                     "process_virtual_memory_bytes", "process_max_fds",
                                     "process_start_time_seconds", "process_open_fds")}
    start = proc_start_time(pid)
    tick = 1 / os.sysconf("SC_CLK_TCK")
    checks = [
        # the boot time in /proc/stat is whole seconds: a second either way
        ("process_start_time_seconds is within the process's start (launched after %.2f, "
         "listening by %.2f)" % (before, after), before - 1 <= got["process_start_time_seconds"] <= after + 1),
        # the kernel recomputes btime from the realtime clock at each read of
        # /proc/stat, so two reads seconds apart can differ by whole seconds
        # when the clock is stepped or slewed (seen in CI: exactly 2.00 s)
        ("process_start_time_seconds = /proc/PID/stat's start (%.2f) within 3 s" % start,
         abs(got["process_start_time_seconds"] - start) <= 3 + 2 * tick),
        # getrusage counts finer than the ticks /proc gives
        ("process_cpu_seconds_total is between /proc/PID/stat's %.2f and %.2f" % (cpu0, cpu1),
         cpu0 - 2 * tick <= got["process_cpu_seconds_total"] <= cpu1 + 2 * tick),
        ("process_resident_memory_bytes is within half to twice VmRSS (%d)" % rss,
         rss / 2 <= got["process_resident_memory_bytes"] <= rss * 2),
        ("process_virtual_memory_bytes is within half to twice VmSize (%d)" % vsz,
         vsz / 2 <= got["process_virtual_memory_bytes"] <= vsz * 2),
        ("process_max_fds = /proc/PID/limits' soft Max open files (%s)" % proc_soft_nofile(pid),
         got["process_max_fds"] == proc_soft_nofile(pid)),
        ("process_open_fds = the entries of /proc/PID/fd (%d) within 8" % len(os.listdir(f"/proc/{pid}/fd")),
         abs(got["process_open_fds"] - len(os.listdir(f"/proc/{pid}/fd"))) <= 8),
    ]
    bad = 0
    for what, ok in checks:
        if not ok:
            print(f"{what}: served {got}")
            bad += 1
    return 1 if bad else 0


def fds(argv):
    """fds URL N: process_open_fds grows by N or more while this holds N
    more connections to URL's server open (tried up to 5 times, as the
    daemon's own descriptors come and go)."""
    url, n = argv[0], int(argv[1])
    host, port = urllib.parse.urlsplit(url).hostname, urllib.parse.urlsplit(url).port
    for attempt in range(5):
        before = value(scrape(url), "process_open_fds")
        held = [socket.create_connection((host, port), timeout=30) for _ in range(n)]
        time.sleep(0.5)  # lets the server accept them (not a measure: a retry follows a miss)
        during = value(scrape(url), "process_open_fds")
        for s in held:
            s.close()
        print(f"try {attempt + 1}: process_open_fds {before:.0f}, {during:.0f} while holding {n} connections")
        if during >= before + n:
            return 0
    return 1


def build_info(argv):
    """build-info SCRAPE VERSION_OUTPUT KEY=VALUE...: kiln_build_info's
    one series has exactly these labels, and `kiln --version` (its output
    in VERSION_OUTPUT) says "kiln VERSION" then the other labels as
    "key=value" in the order of kiln_build_info's labels."""
    f = parse_scrape(argv[0])
    with open(argv[1]) as v:
        lines = v.read().splitlines()
    want = dict(a.split("=", 1) for a in argv[2:])
    samples = f.get("kiln_build_info", {}).get("samples", [])
    bad = []
    if len(samples) != 1 or samples[0][2] != 1:
        bad.append(f"kiln_build_info: expected one series of value 1, got {samples}")
    else:
        labels = samples[0][1]
        for k in sorted(set(labels) | set(want)):
            if labels.get(k) != want.get(k):
                bad.append(f"kiln_build_info: {k}={labels.get(k)!r}, expected {want.get(k)!r}")
        second = " ".join(f"{k}={v}" for k, v in labels.items() if k != "version")
        if lines[:2] != ["kiln " + labels.get("version", ""), second]:
            bad.append(f"kiln --version says {lines[:2]}, expected {['kiln ' + labels.get('version', ''), second]}")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    commands = {"doc": doc, "process": process, "fds": fds, "build-info": build_info}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(commands[sys.argv[1]](sys.argv[2:]))
