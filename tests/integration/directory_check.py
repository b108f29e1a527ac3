#!/usr/bin/python3
"""Check what `kiln run` made of a directory source, from the store and the
manifest alone, against the generator's ground truth.

Usage: directory_check.py --store DIR --manifest REPO.git --dataset NAME
                          [--branch main] --file TOPIC EXPECT PATH ...

Each --file is one file of the folder: its topic (<source.name>=<encoded
name>, docs/FORMATS.md), the --expect file bench/gen-user-events.py wrote
for it (one line per record: outcome, event_id, code) and the file as it is
now (compressed or not; its size and fingerprint are lineage.json's).

Checks, recomputed from docs/FORMATS.md and not from kiln's code:
lineage.json has exactly one entry per --file (next = its records, bytes =
its size, prefix_blake2b = its fingerprint) and none other; every valid
record (by event_id) is in exactly one shard the branch lists, and nothing
else is; every invalid record is in exactly one quarantine object line
(topic, offset = its line number, code) and no other line is there;
stats.json counts them. Prints one line per failed check, then
"N passed, M failed"; exits 1 when a check failed. Standard library and
python3-zstandard only.
"""

import argparse
import collections
import hashlib
import json
import os
import subprocess
import sys

import zstandard

PART = 1 << 20


def fingerprint(data):
    if len(data) > 2 * PART:
        data = data[:PART] + data[-PART:]
    return hashlib.blake2b(data, digest_size=32).hexdigest()


def unzstd(data):
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--branch", default="main")
    ap.add_argument("--file", nargs=3, action="append", required=True, metavar=("TOPIC", "EXPECT", "PATH"))
    a = ap.parse_args()
    ref = "refs/heads/%s/%s" % (a.dataset, a.branch)
    passed = failed = 0

    def check(name, ok, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print("FAIL %s%s" % (name, ": " + str(detail)[:300] if detail else ""))

    def git(*args):
        return subprocess.run(["git", "--git-dir", a.manifest] + list(args), check=True,
                              capture_output=True).stdout

    # ---- ground truth
    want_curated = collections.Counter()  # event_id -> times
    want_quarantined = {}  # (topic, offset) -> code
    n_records = 0
    files = {}
    for topic, expect, path in a.file:
        facts = [json.loads(l) for l in open(expect, encoding="utf-8")]
        files[topic] = (len(facts), path)
        n_records += len(facts)
        for i, f in enumerate(facts):
            if f["outcome"] == "valid":
                want_curated[f["event_id"]] += 1
            else:
                want_quarantined[(topic, i)] = f["code"]

    # ---- lineage.json
    lineage = json.loads(git("show", ref + ":lineage.json"))
    entries = {e["topic"]: e for e in lineage["partitions"]}
    check("lineage.json topics are the files'", set(entries) == set(files),
          sorted(set(entries) ^ set(files)))
    for topic, (n, path) in files.items():
        e = entries.get(topic)
        if not e:
            continue
        data = open(path, "rb").read()
        check("lineage %s next" % topic, e.get("next") == n, (e.get("next"), n))
        check("lineage %s partition 0" % topic, e.get("partition") == 0, e)
        check("lineage %s bytes" % topic, e.get("bytes") == len(data), (e.get("bytes"), len(data)))
        check("lineage %s prefix_blake2b" % topic, e.get("prefix_blake2b") == fingerprint(data), e)
        check("lineage %s path names the file" % topic,
              os.path.basename(e.get("path", "")) == os.path.basename(path) or "=" in e.get("path", ""), e)

    # ---- shards the branch lists
    curated = collections.Counter()
    names = git("ls-tree", "-r", "--name-only", ref, "splits").decode().split()
    for name in names:
        for line in git("show", ref + ":" + name).decode().splitlines():
            s = json.loads(line)
            h = s["shard"]
            obj = os.path.join(a.store, "shards", h[:2], h + ".jsonl.zst")
            raw = open(obj, "rb").read()
            check("shard %s is named by its bytes" % h, hashlib.blake2b(raw, digest_size=32).hexdigest() == h)
            recs = unzstd(raw).decode("utf-8").splitlines()
            check("shard %s records" % h, len(recs) == s["records"], (len(recs), s["records"]))
            for src in s["sources"]:
                check("shard %s source topic is a file's" % h, src["topic"] in files, src)
            for r in recs:
                curated[json.loads(r)["event_id"]] += 1
    extra = {k: v for k, v in curated.items() if want_curated.get(k) != v}
    missing = [k for k in want_curated if k not in curated]
    check("every valid record curated exactly once, nothing else curated", not extra and not missing,
          "%d wrong counts %s, %d missing" % (len(extra), list(extra.items())[:3], len(missing)))

    # ---- quarantine objects of these topics
    quarantined = collections.Counter()
    codes = {}
    for topic in files:
        qdir = os.path.join(a.store, "quarantine", topic, "0", a.dataset, a.branch)
        for qn in sorted(os.listdir(qdir)) if os.path.isdir(qdir) else []:
            for line in unzstd(open(os.path.join(qdir, qn), "rb").read()).decode("utf-8").splitlines():
                q = json.loads(line)
                check("quarantine line names its topic", q["topic"] == topic, (q["topic"], topic))
                quarantined[(topic, q["offset"])] += 1
                codes[(topic, q["offset"])] = q["code"]
    wrong = [k for k in set(quarantined) | set(want_quarantined)
             if quarantined.get(k) != 1 or k not in want_quarantined]
    check("every invalid record quarantined exactly once, nothing else", not wrong,
          "%d wrong: %s" % (len(wrong), sorted(wrong)[:5]))
    bad_code = [k for k, c in want_quarantined.items() if k in codes and codes[k] != c]
    check("quarantine codes are the generator's", not bad_code, bad_code[:5])

    # ---- stats.json
    stats = json.loads(git("show", ref + ":stats.json"))
    check("stats records_in", stats["records_in"] == n_records, (stats["records_in"], n_records))
    check("stats valid", stats["valid"] == sum(want_curated.values()), stats["valid"])
    check("stats quarantined", stats["quarantined"] == len(want_quarantined), stats["quarantined"])

    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
