#!/usr/bin/env bash
# `kiln diff` and `kiln ls` on a generated manifest with SHARDS shard lines
# per split (default 100000), next to `git diff --stat` on the same two
# commits, in the same run. The second commit adds 1000 shards per split.
# Prints milliseconds (best of 3 each).
# Usage: bench/manifest.sh [KILN_BINARY]     (default: <repo>/build/kiln)
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
kiln=${1:-$root/build/kiln}
[[ $kiln == /* ]] || kiln=$PWD/$kiln
shards=${SHARDS:-100000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo=$work/m.git
git init -q --bare "$repo"

# A fast-import stream: commit 1 with $shards lines per split, commit 2 with
# 1000 more per split (touching at most 256 fan-out blobs per split).
/usr/bin/python3 - "$shards" >"$work/stream" <<'PY'
import hashlib, json, sys
n = int(sys.argv[1])
out = sys.stdout.buffer
def h(i, salt):
    return hashlib.blake2b(b"%s-%d" % (salt, i), digest_size=32).hexdigest()
def blob(data):
    out.write(b"data %d\n" % len(data)); out.write(data); out.write(b"\n")
splits = ["train", "dev", "test"]
def lines(hashes):
    fan = {}
    for x in sorted(hashes):
        rec = {"shard": x, "bytes": 1000, "raw_bytes": 4000, "records": 10,
               "sources": [{"topic": "t", "partition": 0, "first": 0, "last": 9}]}
        fan.setdefault(x[:2], []).append(json.dumps(rec, separators=(",", ":")).encode() + b"\n")
    return fan
base = {s: [h(i, s.encode()) for i in range(n)] for s in splits}
more = {s: [h(i, s.encode() + b"-more") for i in range(1000)] for s in splits}
dataset = json.dumps({"name": "bench", "contract": {"id": "c", "version": "1.0.0"},
    "pseudonymisation": {"scheme": "hmac-sha256-b32-v1", "key_id": "hmac-sha256:0000000000000000", "key_version": 1},
    "split": {"scheme": "blake2b64-mod10000-v1", "key": "id", "salt": "s", "ratios": {"train": 0.8, "dev": 0.1, "test": 0.1}}},
    indent=2).encode() + b"\n"
def stats(count):
    s = {"records_in": 10 * count * 3, "valid": 10 * count * 3, "quarantined": 0, "quarantined_by_code": {},
         "splits": {x: {"records": 10 * count, "shards": count, "bytes": 1000 * count, "raw_bytes": 4000 * count} for x in splits}}
    return json.dumps(s, indent=2).encode() + b"\n"
for c, (sets, count) in enumerate([(base, n), ({s: base[s] + more[s] for s in splits}, n + 1000)], 1):
    out.write(b"commit refs/heads/bench/main\n")
    out.write(b"committer kiln <kiln@localhost> %d +0000\n" % (1700000000 + c))
    blob(b"bench: commit %d" % c)
    if c == 1:
        out.write(b"deleteall\n")
    if c == 1:
        for name, data in (("dataset.json", dataset),
                           ("lineage.json", b'{\n  "partitions": [\n    {"topic":"t","partition":0,"next":1}\n  ]\n}\n')):
            out.write(b"M 100644 inline %s\n" % name.encode()); blob(data)
    out.write(b"M 100644 inline stats.json\n"); blob(stats(count))
    touched = None if c == 1 else {s: {x[:2] for x in more[s]} for s in splits}
    for s in splits:
        for hh, ls in lines(sets[s]).items():
            if touched is None or hh in touched[s]:
                out.write(b"M 100644 inline splits/%s/%s.jsonl\n" % (s.encode(), hh.encode())); blob(b"".join(ls))
    out.write(b"\n")
PY
git --git-dir="$repo" fast-import --quiet <"$work/stream"
a=$(git --git-dir="$repo" rev-parse refs/heads/bench/main~1)
b=$(git --git-dir="$repo" rev-parse refs/heads/bench/main)

ms() { # COMMAND... -> best of 3 wall times in milliseconds
	local best= t0 t1 d
	for _ in 1 2 3; do
		t0=$(date +%s%N); "$@" >"$work/out" 2>&1 || { cat "$work/out" >&2; return 1; }; t1=$(date +%s%N)
		d=$(((t1 - t0) / 1000000))
		[[ -z $best || $d -lt $best ]] && best=$d
	done
	echo "$best"
}

export KILN_MANIFEST=$repo KILN_STORE=file://$work/store
git_ms=$(ms git --git-dir="$repo" diff --stat "$a" "$b")
diff_ms=$(ms "$kiln" diff "bench@${a:0:12}" "bench@${b:0:12}")
ls_ms=$(ms "$kiln" ls "bench@${b:0:12}" --split train)
listed=$(wc -l <"$work/out")
echo "manifest: $shards shards per split (+1000 per split in the second commit), $(nproc) CPUs"
echo "git diff --stat A B:  ${git_ms} ms"
echo "kiln diff A B:        ${diff_ms} ms"
echo "kiln ls B --split train: ${ls_ms} ms ($listed shards listed)"
