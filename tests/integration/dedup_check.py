#!/usr/bin/python3
"""Independent check of a dedup run (tests/integration/dedup.sh), without kiln.

Reads the branch tip of a manifest repository (git), its shards and the
quarantine (python3-zstandard) and holds them to the input: the records in
delivery order (one partition), each with a unique "seq". The first
occurrence of each key (the values at --key paths; a record without one is
missing_required) is curated, every later one is quarantined as duplicate
with the first key path; every input record is curated or quarantined
exactly once (quarantine lines at offsets below lineage's next, one per
offset), and stats.json and profile.json count the same. --fresh N: the
first N input records were committed by runs whose window has expired (they
take part as inputs, not as earlier keys for the rest).
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import zstandard


def fail(msg):
    print("dedup_check: " + msg)
    sys.exit(1)


def value_at(rec, path):
    for step in path.split("."):
        if not isinstance(rec, dict) or rec.get(step) is None:
            return None
        rec = rec[step]
    return json.dumps(rec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--branch", default="main")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--key", action="append", required=True)
    ap.add_argument("--fresh", type=int, default=0)
    ap.add_argument("inputs", nargs="+", help="the input records, files in delivery order")
    a = ap.parse_args()

    def git(*args):
        return subprocess.run(["git", "--git-dir", a.repo] + list(args), check=True,
                              capture_output=True, text=True).stdout

    ref = "refs/heads/%s/%s" % (a.dataset, a.branch)
    records = []
    for fn in a.inputs:
        with open(fn) as f:
            records += [json.loads(line) for line in f if line.strip()]

    # the expectation, in delivery order
    want_curated, want_dup, want_missing = set(), set(), set()
    seen = set()
    for i, r in enumerate(records):
        if i == a.fresh:
            seen = set()  # the window expired between the runs
        key = tuple(value_at(r, p) for p in a.key)
        if None in key:
            want_missing.add(r["seq"])
        elif key in seen:
            want_dup.add(r["seq"])
        else:
            seen.add(key)
            want_curated.add(r["seq"])

    curated = {}
    dctx = zstandard.ZstdDecompressor()
    for path in git("ls-tree", "-r", "--name-only", ref, "splits").split():
        for line in git("show", ref + ":" + path).splitlines():
            h = json.loads(line)["shard"]
            with open(os.path.join(a.store, "shards", h[:2], h + ".jsonl.zst"), "rb") as f:
                for rec in dctx.decompress(f.read()).decode().splitlines():
                    seq = json.loads(rec)["seq"]
                    curated[seq] = curated.get(seq, 0) + 1
    twice = [s for s, n in curated.items() if n > 1]
    if twice:
        fail("%d records curated twice (e.g. seq %s)" % (len(twice), twice[0]))
    if set(curated) != want_curated:
        fail("curated %d records, want the %d first occurrences; extra %s, missing %s" % (
            len(curated), len(want_curated), sorted(set(curated) - want_curated)[:5],
            sorted(want_curated - set(curated))[:5]))

    nexts = {(e["topic"], e["partition"]): e["next"]
             for e in json.loads(git("show", ref + ":lineage.json"))["partitions"]}
    quarantined = {}  # offset -> (seq, code, path)
    for fn in glob.glob(os.path.join(a.store, "quarantine", a.topic, "*", a.dataset, a.branch, "*.jsonl.zst")):
        with open(fn, "rb") as f:
            for line in dctx.decompress(f.read()).splitlines():
                q = json.loads(line)
                if q["offset"] >= nexts.get((q["topic"], q["partition"]), 0):
                    continue  # read by a run that did not commit it
                got = (json.loads(q["record"])["seq"], q["code"], q["path"])
                if quarantined.setdefault((q["partition"], q["offset"]), got) != got:
                    fail("offset %s quarantined twice, differently" % q["offset"])
    qseqs = {}
    for seq, code, path in quarantined.values():
        if seq in qseqs:
            fail("seq %s quarantined at two offsets" % seq)
        qseqs[seq] = (code, path)
    both = set(qseqs) & set(curated)
    if both:
        fail("%d records both curated and quarantined" % len(both))
    dups = {s for s, (c, p) in qseqs.items() if c == "duplicate"}
    if dups != want_dup:
        fail("quarantined %d as duplicate, want %d; extra %s, missing %s" % (
            len(dups), len(want_dup), sorted(dups - want_dup)[:5], sorted(want_dup - dups)[:5]))
    bad_path = [s for s in dups if qseqs[s][1] != a.key[0]]
    if bad_path:
        fail("duplicate with path %s, want %s" % (qseqs[bad_path[0]][1], a.key[0]))
    missing = {s for s, (c, p) in qseqs.items() if c == "missing_required"}
    if missing != want_missing or len(qseqs) != len(dups) + len(missing):
        fail("missing_required: %d, want %d; other codes: %d" % (
            len(missing), len(want_missing), len(qseqs) - len(dups) - len(missing)))
    lost = {r["seq"] for r in records} - set(curated) - set(qseqs)
    if lost:
        fail("%d input records neither curated nor quarantined" % len(lost))

    stats = json.loads(git("show", ref + ":stats.json"))
    want = {"records_in": len(records), "valid": len(curated), "quarantined": len(qseqs)}
    got = {k: stats[k] for k in want}
    if got != want or stats.get("quarantined_by_code", {}).get("duplicate", 0) != len(dups):
        fail("stats.json %s, want %s and %d duplicate" % (stats, want, len(dups)))
    if "profile.json" in git("ls-tree", "--name-only", ref).split():
        prof = json.loads(git("show", ref + ":profile.json"))
        if prof["total"]["records"] != len(curated):
            fail("profile.json counts %d records, %d curated" % (prof["total"]["records"], len(curated)))
    print("ok: %d in, %d curated, %d duplicate, %d missing_required" % (
        len(records), len(curated), len(dups), len(missing)))


if __name__ == "__main__":
    main()
