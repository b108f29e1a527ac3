#!/usr/bin/python3
"""Exactly-once check of a Kafka-fed dataset branch, against the producers' logs.

Usage: kafka_check.py --repo M.git --dataset D [--branch main] --store DIR
                      --topic T [--topic T2 ...] [--expect INPUT EXPECT ...]
                      [--key KEYFILE] [--max-record-bytes N] PRODUCED_LOG...

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
With --expect INPUT EXPECT (bench/gen-user-events.py's input and --expect
files; repeatable), the generator's ground truth decides, record by record:
every produced record it wrote as valid is curated exactly once and never
quarantined; every invalid one is quarantined (not curated) with the code
and path it gave (too_large records, whose bytes the quarantine does not
keep, are counted among the quarantine lines with a null record).
Without it, a produced record longer than --max-record-bytes (default 1 MiB)
is expected among those null-record lines.
With --key, every curated record is compared with its produced record as
curate_check.py does (tokens recomputed with the key, other fields equal),
and no personal value of the produced records (curate_check.py's scanner)
may appear in a shard.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import curate_check  # noqa: E402  (the one personal-data scanner and record comparison)

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
    ap.add_argument("--expect", nargs=2, action="append", default=[], metavar=("INPUT", "EXPECT"))
    ap.add_argument("--key")
    ap.add_argument("--max-record-bytes", type=int, default=1 << 20)
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    ref = "refs/heads/%s/%s" % (a.dataset, a.branch)

    # the generator's ground truth: record bytes -> fact
    facts = {}
    for inp, exp in a.expect:
        lines = open(inp, "rb").read().split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        ex = curate_check.load_expect([exp])
        if len(ex) != len(lines):
            print("kafka_check: %s has %d expectations for %d lines of %s" % (exp, len(ex), len(lines), inp))
            sys.exit(2)
        for line, e in zip(lines, ex):
            facts[line] = e

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
    curated_recs = []  # (shard, line number, parsed record)
    shard_texts = []
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
            shard_texts.append(text)
            for i, rec in enumerate(text.splitlines()):
                obj = json.loads(rec)
                curated[obj.get("event_id")] += 1
                shard_records += 1
                curated_recs.append((h, i + 1, rec))
            if len(text.splitlines()) != entry["records"]:
                fail("shard %s: %d lines, the manifest says %d" % (h, len(text.splitlines()), entry["records"]))

    # quarantine: every object, deduplicated by offset, below lineage's next
    quarantined = {}
    q_code = {}  # (topic, partition, offset) -> (code, path)
    for topic in a.topic:
        for fn in glob.glob(os.path.join(a.store, "quarantine", topic, "*", a.dataset, a.branch, "*.jsonl.zst")):
            with open(fn, "rb") as f:
                text = zstandard.ZstdDecompressor().decompress(f.read())
            for line in text.splitlines():
                q = json.loads(line)
                key = (q["topic"], q["partition"], q["offset"])
                if q["offset"] >= nexts.get((q["topic"], q["partition"]), 0):
                    continue  # read by a run that did not commit it; read again later
                if isinstance(q.get("record"), str):
                    raw = q["record"].encode("utf-8", "surrogatepass")
                elif "record_base64" in q:
                    raw = base64.b64decode(q["record_base64"])
                else:
                    raw = None  # a tombstone, or longer than source.max_record_bytes: not kept
                if key in quarantined and quarantined[key] != raw:
                    fail("quarantine: offset %s holds two different records" % (key,))
                quarantined[key] = raw
                q_code[key] = (q.get("code"), q.get("path"))
    quarantined_records = collections.Counter(r for r in quarantined.values() if r is not None)
    unkept = [k for k, r in quarantined.items() if r is None]

    # records whose bytes the quarantine does not keep: too_large ones
    def too_large(rec):
        if a.expect:
            return facts.get(rec, {}).get("code") == "too_large"
        return len(rec) > a.max_record_bytes
    large = [rec for rec in produced if too_large(rec)]
    if len(unkept) != len(large):
        fail("%d quarantine lines without their record, %d too_large records produced" % (len(unkept), len(large)))
    for k in unkept:
        if q_code[k] != ("too_large", "$"):
            fail("quarantine %s: no record kept, but code/path %s %s (too_large $ expected)" % ((k,) + q_code[k]))

    # every produced record exactly once: the quarantined ones by their
    # bytes, the rest by event_id among the curated
    remaining = produced_set - quarantined_records - collections.Counter(large)
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

    # the generator's ground truth, record by record
    if a.expect:
        q_by_record = {}
        for k, r in quarantined.items():
            if r is not None:
                q_by_record[r] = q_code[k]
        missing = [rec for rec in produced if rec not in facts]
        if missing:
            fail("%d produced records have no expectation (not from an --expect INPUT)" % len(missing))
        bad_valid = bad_invalid = bad_code = 0
        outcomes = collections.Counter()
        for rec in produced:
            e = facts.get(rec)
            if e is None:
                continue
            outcomes[e.get("code") or e.get("outcome")] += 1
            if e.get("outcome") == "valid":
                if rec in q_by_record or curated[e.get("event_id")] != 1:
                    bad_valid += 1
                    if bad_valid <= 10:
                        print("  valid record %s: curated %d times%s" % (e.get("event_id"), curated[e.get("event_id")],
                              ", quarantined as %s %s" % q_by_record[rec] if rec in q_by_record else ""))
            elif e.get("code") == "too_large":
                if isinstance(e.get("event_id"), str) and curated[e["event_id"]]:
                    bad_invalid += 1
            else:
                want = (e.get("code"), e.get("path"))
                if rec not in q_by_record:
                    bad_invalid += 1
                    if bad_invalid <= 10:
                        print("  invalid record (%s %s) is not in quarantine" % want)
                elif q_by_record[rec] != want:
                    bad_code += 1
                    if bad_code <= 10:
                        print("  invalid record quarantined as %s %s, expected %s %s" % (q_by_record[rec] + want))
        if bad_valid:
            fail("%d records the generator wrote as valid are not curated exactly once" % bad_valid)
        if bad_invalid:
            fail("%d records the generator wrote as invalid are not quarantined (or are curated)" % bad_invalid)
        if bad_code:
            fail("%d quarantined records carry another code or path than the generator's" % bad_code)
        print("kafka_check: expected outcomes %s" % ", ".join("%s %d" % kv for kv in sorted(outcomes.items())))

    # curated records against what was produced; no personal data in shards
    if a.key:
        key = curate_check.read_key(a.key)
        ds = json.loads(git(a.repo, "show", ref + ":dataset.json"))
        prefix = (ds.get("pseudonymisation") or {}).get("prefix", "p1_")
        fields = curate_check.DEFAULT_SPEC["fields"]
        by_id = {}
        parsed = []
        for rec in produced:
            try:
                v, dups = curate_check.jparse(rec.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                continue
            parsed.append({"obj": v})
            if curate_check.is_obj(v) and not dups:
                found, eid = curate_check.obj_get(v, "event_id")
                if found and isinstance(eid, str):
                    by_id[eid] = v
        R = curate_check.Report()
        for h, i, line in curated_recs:
            cur, _ = curate_check.jparse(line.decode("utf-8"))
            found, eid = curate_check.obj_get(cur, "event_id")
            src = by_id.get(eid) if found else None
            if R.check("curated records match a produced record by event_id", src is not None, "%s line %d" % (h, i)):
                curate_check.check_record(R, key, prefix, fields, src, cur, "shard %s line %d" % (h, i))
        pii = curate_check.collect_pii(parsed, fields, list(facts.values()))
        if not pii:
            fail("no personal values collected from the produced records")
        found = curate_check.pii_found(pii, b"\n".join(shard_texts))
        if found:
            fail("shards hold %d raw personal values" % len(found))
        for name, fails in R.checks.items():
            if fails:
                fail("%s: %d records (first: %s)" % (name, len(fails), fails[0]))

    total_next = sum(nexts.values())
    if total_next != len(produced):
        fail("lineage next offsets add up to %d, %d records were produced" % (total_next, len(produced)))
    if stats["records_in"] != len(produced):
        fail("stats.json records_in %d, produced %d" % (stats["records_in"], len(produced)))
    if stats["valid"] != shard_records:
        fail("stats.json valid %d, shards hold %d records" % (stats["valid"], shard_records))
    if stats["quarantined"] != len(quarantined):
        fail("stats.json quarantined %d, quarantine holds %d records" % (stats["quarantined"], len(quarantined)))
    if stats["records_in"] != stats["valid"] + stats["quarantined"] + stats.get("erased", 0):
        fail("stats.json does not balance")
    print("kafka_check: produced %d, curated %d, quarantined %d, %d partitions; %d failed checks"
          % (len(produced), shard_records, len(quarantined), len(nexts), len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
