#!/usr/bin/python3
"""Exactly-once check of a Kafka-fed dataset branch, against the producers' logs.

Usage: kafka_check.py --repo M.git --dataset D [--branch main] --store DIR
                      --topic T [--topic T2 ...] PRODUCED_LOG...

Each PRODUCED_LOG holds the records that a producer (kcat, confluent_kafka)
had acknowledged, one per line, exactly as sent. Independently of kiln's code
(git CLI, python3-zstandard, hashlib, json), this checks that at the branch
tip:
  - every produced record is in exactly one place: curated in a shard of the
    branch (found by its event_id, which the contract keeps as is) or in
    quarantine (found by its exact bytes, at an offset below lineage's next);
  - no record is curated twice, and no event_id is curated that nobody produced;
  - lineage.json's next offsets add up to the number of records produced;
  - stats.json balances: records_in = produced, valid = curated,
    quarantined = quarantined records, in = valid + quarantined;
  - every shard's name is the BLAKE2b-256 of its bytes and decompresses.
Prints one line per failed check and a summary; exits 1 on any failure.
"""

import argparse
import base64
import collections
import glob
import hashlib
import json
import os
import subprocess
import sys

import zstandard

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def git(repo, *args):
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--branch", default="main")
    ap.add_argument("--store", required=True)
    ap.add_argument("--topic", action="append", required=True)
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    ref = "refs/heads/%s/%s" % (a.dataset, a.branch)

    produced = []
    for path in a.logs:
        with open(path, "rb") as f:
            produced.extend(line.rstrip(b"\n") for line in f if line.strip())
    produced_set = collections.Counter(produced)
    if any(n > 1 for n in produced_set.values()):
        print("note: a record was produced twice; the check needs unique records")
        sys.exit(2)

    lineage = json.loads(git(a.repo, "show", ref + ":lineage.json"))
    stats = json.loads(git(a.repo, "show", ref + ":stats.json"))
    nexts = {}
    for e in lineage["partitions"]:
        if e["topic"] in a.topic:
            nexts[(e["topic"], e["partition"])] = e["next"]

    # curated: every shard line of the branch tip
    curated = collections.Counter()
    shard_records = 0
    tree = git(a.repo, "ls-tree", "-r", "--name-only", ref, "splits/").decode().split()
    for path in tree:
        for line in git(a.repo, "show", "%s:%s" % (ref, path)).decode().splitlines():
            entry = json.loads(line)
            h = entry["shard"]
            fn = os.path.join(a.store, "shards", h[:2], h + ".jsonl.zst")
            with open(fn, "rb") as f:
                data = f.read()
            if hashlib.blake2b(data, digest_size=32).hexdigest() != h:
                fail("shard %s: its bytes do not hash to its name" % h)
                continue
            text = zstandard.ZstdDecompressor().decompress(data)
            for rec in text.splitlines():
                obj = json.loads(rec)
                curated[obj.get("event_id")] += 1
                shard_records += 1
            if len(text.splitlines()) != entry["records"]:
                fail("shard %s: %d lines, the manifest says %d" % (h, len(text.splitlines()), entry["records"]))

    # quarantine: every object, deduplicated by offset, below lineage's next
    quarantined = {}
    for topic in a.topic:
        for fn in glob.glob(os.path.join(a.store, "quarantine", topic, "*", "*.jsonl.zst")):
            with open(fn, "rb") as f:
                text = zstandard.ZstdDecompressor().decompress(f.read())
            for line in text.splitlines():
                q = json.loads(line)
                key = (q["topic"], q["partition"], q["offset"])
                if q["offset"] >= nexts.get((q["topic"], q["partition"]), 0):
                    continue  # read by a run that did not commit it; read again later
                if "record_base64" in q:
                    raw = base64.b64decode(q["record_base64"])
                elif isinstance(q.get("record"), str):
                    raw = q["record"].encode("utf-8", "surrogatepass")
                else:
                    raw = None  # a tombstone, or longer than max_record_bytes
                if key in quarantined and quarantined[key] != raw:
                    fail("quarantine: offset %s holds two different records" % (key,))
                quarantined[key] = raw
    quarantined_records = collections.Counter(quarantined.values())

    # every produced record exactly once: the quarantined ones by their
    # bytes, the rest by event_id among the curated
    remaining = produced_set - quarantined_records
    extra_q = quarantined_records - produced_set
    if extra_q:
        fail("%d quarantined records were never produced (or are quarantined twice)" % sum(extra_q.values()))
    expected = collections.Counter()
    unidentified = 0
    for rec, n in remaining.items():
        try:
            eid = json.loads(rec).get("event_id")
        except (ValueError, AttributeError):
            eid = None
        if isinstance(eid, str):
            expected[eid] += n
        else:
            unidentified += n
    if unidentified:
        fail("%d produced records without an event_id are not in quarantine" % unidentified)
    lost = expected - curated
    dup = curated - expected
    if lost:
        fail("%d produced records are neither curated nor quarantined" % sum(lost.values()))
    if dup:
        fail("%d curated records are extra (curated twice, or also quarantined, or never produced)"
             % sum(dup.values()))

    total_next = sum(nexts.values())
    if total_next != len(produced):
        fail("lineage next offsets add up to %d, %d records were produced" % (total_next, len(produced)))
    if stats["records_in"] != len(produced):
        fail("stats.json records_in %d, produced %d" % (stats["records_in"], len(produced)))
    if stats["valid"] != shard_records:
        fail("stats.json valid %d, shards hold %d records" % (stats["valid"], shard_records))
    if stats["quarantined"] != len(quarantined):
        fail("stats.json quarantined %d, quarantine holds %d records" % (stats["quarantined"], len(quarantined)))
    if stats["records_in"] != stats["valid"] + stats["quarantined"]:
        fail("stats.json does not balance")
    print("kafka_check: produced %d, curated %d, quarantined %d, %d partitions; %d failed checks"
          % (len(produced), shard_records, len(quarantined), len(nexts), len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
