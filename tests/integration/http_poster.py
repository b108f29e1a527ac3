#!/usr/bin/python3
"""Posters and the exactly-once check for an http source (http_source.sh).

post: http_poster.py post --port P --token-file T --input FILE --posters N
                          --batches K --acked LOG --sent LOG [--expect-status S]
  N threads (http.client, one connection each) post FILE's lines, each
  thread its own share in K POSTs to /v1/records, one after the other, no
  retry. Every line sent goes to --sent; the lines of each POST answered
  with --expect-status (200) go to --acked. Prints the count per status
  (or error) as "status S: N" lines.

check: http_poster.py check --repo M.git --dataset D [--branch main] --store DIR
                            --topic T --acked LOG... [--sent LOG...]
  Independently of kiln's code (git CLI, python3-zstandard, json), at the
  branch tip: every acknowledged record is in exactly one place, curated
  in a shard (by its event_id) or in quarantine (by its bytes, at an offset
  below lineage's next); no record is curated twice or quarantined twice;
  nothing committed was never sent; lineage.json's next for the http
  topic equals the records committed (curated + quarantined); stats.json
  balances. Exits 1 on any failure.
"""

import argparse
import base64
import collections
import glob
import hashlib
import http.client
import json
import os
import subprocess
import sys
import threading

import zstandard


def post(a):
    lines = open(a.input, "rb").read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    token = open(a.token_file).read().strip()
    lock = threading.Lock()
    counts = collections.Counter()
    acked = open(a.acked, "ab")
    sent = open(a.sent, "ab")

    def worker(i):
        mine = lines[i::a.posters]
        if not mine:
            return
        per = max(1, (len(mine) + a.batches - 1) // a.batches)
        conn = None
        for at in range(0, len(mine), per):
            chunk = mine[at:at + per]
            body = b"\n".join(chunk) + b"\n"
            with lock:
                sent.write(body)
                sent.flush()
            status = "error"
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=a.timeout)
                conn.request("POST", "/v1/records", body=body,
                             headers={"Authorization": "Bearer " + token,
                                      "Content-Type": "application/x-ndjson"})
                res = conn.getresponse()
                answer = res.read()
                status = res.status
                if status == a.expect_status:
                    got = json.loads(answer)
                    if got.get("records") != len(chunk):
                        status = "bad-count"
            except (OSError, http.client.HTTPException, ValueError):
                if conn is not None:
                    conn.close()
                conn = None
            with lock:
                counts[status] += 1
                if status == a.expect_status:
                    acked.write(body)
                    acked.flush()
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(a.posters)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in sorted(counts, key=str):
        print("status %s: %d" % (k, counts[k]))


def git(repo, *args):
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True).stdout


def read_lines(paths):
    out = []
    for p in paths:
        with open(p, "rb") as f:
            out.extend(line.rstrip(b"\n") for line in f if line.strip())
    return out


def check(a):
    failures = []

    def fail(msg):
        failures.append(msg)
        print("FAIL: " + msg)

    ref = "refs/heads/%s/%s" % (a.dataset, a.branch)
    acked = read_lines(a.acked)
    sent = set(read_lines(a.sent)) | set(acked)
    if len(set(acked)) != len(acked):
        fail("a record was acknowledged twice (the posters send unique records)")
    lineage = json.loads(git(a.repo, "show", ref + ":lineage.json"))
    stats = json.loads(git(a.repo, "show", ref + ":stats.json"))
    nexts = [e["next"] for e in lineage["partitions"] if e.get("source") == "http" and e["topic"] == a.topic]
    if len(nexts) != 1:
        fail("lineage.json has %d http entries for %s" % (len(nexts), a.topic))
    nxt = nexts[0] if nexts else 0

    curated = collections.Counter()
    shard_records = 0
    for path in git(a.repo, "ls-tree", "-r", "--name-only", ref, "splits/").decode().split():
        for line in git(a.repo, "show", "%s:%s" % (ref, path)).decode().splitlines():
            h = json.loads(line)["shard"]
            with open(os.path.join(a.store, "shards", h[:2], h + ".jsonl.zst"), "rb") as f:
                data = f.read()
            if hashlib.blake2b(data, digest_size=32).hexdigest() != h:
                fail("shard %s: its bytes do not hash to its name" % h)
            for rec in zstandard.ZstdDecompressor().decompress(data).splitlines():
                curated[json.loads(rec).get("event_id")] += 1
                shard_records += 1

    # the quarantine, by offset below lineage's next: a run killed before
    # its commit leaves objects whose offsets a later run gives to other
    # records, and which that run removes (docs/PIPELINES.md): no offset
    # may hold two different records
    quarantined = {}
    for fn in glob.glob(os.path.join(a.store, "quarantine", a.topic, "*", a.dataset, a.branch, "*.jsonl.zst")):
        with open(fn, "rb") as f:
            text = zstandard.ZstdDecompressor().decompress(f.read())
        for line in text.splitlines():
            q = json.loads(line)
            if q["offset"] >= nxt:
                continue  # read by a run that did not commit it
            if isinstance(q.get("record"), str):
                raw = q["record"].encode("utf-8", "surrogatepass")
            elif "record_base64" in q:
                raw = base64.b64decode(q["record_base64"])
            else:
                raw = None
            if q["offset"] in quarantined and quarantined[q["offset"]] != raw:
                fail("quarantine: offset %d holds two different records" % q["offset"])
            quarantined[q["offset"]] = raw
    q_records = collections.Counter(r for r in quarantined.values() if r is not None)

    def eid(rec):
        try:
            v = json.loads(rec)
            return v.get("event_id") if isinstance(v, dict) else None
        except ValueError:
            return None

    lost = twice = 0
    for rec in acked:
        n = q_records[rec] + (curated[eid(rec)] if eid(rec) and rec not in q_records else 0)
        if n == 0:
            lost += 1
        elif n > 1:
            twice += 1
    if lost:
        fail("%d acknowledged records are not committed" % lost)
    if twice:
        fail("%d acknowledged records are committed more than once" % twice)
    dup = [k for k, n in curated.items() if n > 1]
    if dup:
        fail("%d event_ids are curated more than once" % len(dup))
    qdup = [r for r, n in q_records.items() if n > 1]
    if qdup:
        fail("%d records are quarantined more than once" % len(qdup))
    sent_ids = {eid(r) for r in sent}
    stray = [k for k in curated if k not in sent_ids]
    if stray:
        fail("%d curated records were never sent" % len(stray))
    stray_q = [r for r in q_records if r not in sent]
    if stray_q:
        fail("%d quarantined records were never sent" % len(stray_q))
    if nxt != shard_records + len(quarantined):
        fail("lineage next %d, %d records committed (%d curated, %d quarantined)"
             % (nxt, shard_records + len(quarantined), shard_records, len(quarantined)))
    if stats["records_in"] != nxt:
        fail("stats.json records_in %d, lineage next %d" % (stats["records_in"], nxt))
    if stats["valid"] != shard_records or stats["quarantined"] != len(quarantined):
        fail("stats.json valid %d quarantined %d, the store holds %d and %d"
             % (stats["valid"], stats["quarantined"], shard_records, len(quarantined)))
    if stats["records_in"] != stats["valid"] + stats["quarantined"] + stats.get("erased", 0):
        fail("stats.json does not balance")
    print("http_check: acknowledged %d, sent %d, committed %d (curated %d, quarantined %d); %d failed checks"
          % (len(acked), len(sent), nxt, shard_records, len(quarantined), len(failures)))
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("post")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--token-file", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--posters", type=int, default=200)
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--acked", required=True)
    p.add_argument("--sent", required=True)
    p.add_argument("--expect-status", type=int, default=200)
    p.add_argument("--timeout", type=float, default=120)
    c = sub.add_parser("check")
    c.add_argument("--repo", required=True)
    c.add_argument("--dataset", required=True)
    c.add_argument("--branch", default="main")
    c.add_argument("--store", required=True)
    c.add_argument("--topic", required=True)
    c.add_argument("--acked", nargs="+", required=True)
    c.add_argument("--sent", nargs="*", default=[])
    a = ap.parse_args()
    if a.cmd == "post":
        post(a)
        return 0
    return check(a)


if __name__ == "__main__":
    sys.exit(main())
