#!/usr/bin/env bash
# `kiln replay`: a Kafka-fed branch is rebuilt from the raw zone onto a new
# branch with a rotated key, without the broker's help: kafka_check.py finds
# every produced record exactly once on it, lineage.json equals the source
# branch's, stats balance, tokens carry the new prefix and differ from the
# old ones, and a `kiln run` on the new branch goes on where the source
# stopped. Refusals (existing target, target = source, unknown source, a
# file pipeline) exit 2 with one line; a raw object moved away or corrupted
# exits 1 naming the partition and commits nothing, and --allow-missing
# commits without it. Every record (of every invalid kind, too_large
# included) is held to the generator's expected outcome on every branch, and
# no log holds a personal value. A tombstone replayed from the raw zone is
# quarantined as "record":null, like kiln run's. Every address is 127.0.0.1.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
tmp=$(mktemp -d)
broker_pid=
cleanup() {
	[ -n "$broker_pid" ] && kill -KILL "$broker_pid" 2>/dev/null
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT

one_line() { test "$(wc -l <"$tmp/err")" -eq 1; }
git_m() { git --git-dir "$tmp/m.git" "$@"; }
no_branch() { ! git_m rev-parse -q --verify "refs/heads/ev/$1" >/dev/null; }
count_files() { find "$tmp/store" -type f | wc -l; }

# --- broker, keys, data, the source branch -----------------------------------
"$kiln" broker --partitions 3 --topics ev,tomb --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
broker_pid=$!
for _ in $(seq 100); do [ -s "$tmp/pf" ] && break; sleep 0.1; done
bs=$(head -1 "$tmp/pf" 2>/dev/null)
[ -n "$bs" ] || { echo "broker did not start"; cat "$tmp/broker.out"; exit 1; }
for k in key key2; do
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/$k"
	chmod 600 "$tmp/$k"
done
"$py" "$src/bench/gen-user-events.py" --records 1500 --seed 5 --invalid-rate 0.05 --max-record-bytes 16384 \
	-o "$tmp/all.jsonl" --expect "$tmp/all.expect"
expect=(--expect "$tmp/all.jsonl" "$tmp/all.expect" --key "$tmp/key")
split -n l/3 -d "$tmp/all.jsonl" "$tmp/part." # one third per partition: each has a history
rc=0
for p in 0 1 2; do
	kcat -P -b "$bs" -t ev -p "$p" -l "$tmp/part.0$p" 2>>"$tmp/kcat.err" || rc=$?
done
check "kcat produced the records" test "$rc" -eq 0

cat >"$tmp/p.yaml" <<EOF
dataset: ev
contract: $src/contracts/user-events.yaml
source:
  kind: kafka
  brokers: $bs
  topics: [ev]
  group: g1
  max_record_bytes: 16384
  batch: {records: 200, ms: 50}
  options:
    session.timeout.ms: "3000"
    heartbeat.interval.ms: "300"
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/store}
manifest: {repo: $tmp/m.git}
snapshot: {records: 300, seconds: 1, drain_seconds: 20}
EOF
rc=0
timeout 120 "$kiln" run "$tmp/p.yaml" --stop-at-end >"$tmp/run.out" 2>"$tmp/run.err" || rc=$?
check "kiln run --stop-at-end exits 0" test "$rc" -eq 0
check "main: every record exactly once" "$py" "$src/tests/integration/kafka_check.py" --repo "$tmp/m.git" \
	--dataset ev --store "$tmp/store" --topic ev "${expect[@]}" "$tmp/all.jsonl"

# --- the replay with a rotated key -------------------------------------------
rot=(--set branch=rotated --set "pseudonymise.key_file=$tmp/key2" --set pseudonymise.key_version=2)
check "--help" status_is 0 "$kiln" replay --help
check "--help names --allow-missing" grep -q -- '--allow-missing' "$tmp/out"
check "kiln replay exits 0" status_is 0 "$kiln" replay "$tmp/p.yaml" --from main "${rot[@]}"
cp "$tmp/out" "$tmp/replay.out"
check "summary line" grep -Eq '^ev@[0-9a-f]{12}: \+1500 records \([0-9]+ valid, [0-9]+ quarantined\) in [0-9]+ shards, replayed from main$' "$tmp/replay.out"
check "version line" grep -Eq "^version: [0-9a-f]{40} \(refs/heads/ev/rotated in .*m\.git\)$" "$tmp/replay.out"
check "the version line names the branch tip" grep -q "^version: $(git_m rev-parse refs/heads/ev/rotated) " "$tmp/replay.out"
check "rotated: every record exactly once" "$py" "$src/tests/integration/kafka_check.py" --repo "$tmp/m.git" \
	--dataset ev --branch rotated --store "$tmp/store" --topic ev --expect "$tmp/all.jsonl" "$tmp/all.expect" \
	--key "$tmp/key2" "$tmp/all.jsonl"
check "rotated: lineage.json equals main's" cmp -s <(git_m show refs/heads/ev/main:lineage.json) \
	<(git_m show refs/heads/ev/rotated:lineage.json)
check "rotated: stats records_in, valid, quarantined equal main's" "$py" -c '
import json, subprocess, sys
def stats(b):
    return json.loads(subprocess.check_output(["git", "--git-dir", sys.argv[1], "show", "refs/heads/ev/%s:stats.json" % b]))
a, b = stats("main"), stats("rotated")
sys.exit(0 if all(a[k] == b[k] for k in ("records_in", "valid", "quarantined")) and a["records_in"] == 1500 else 1)
' "$tmp/m.git"
check "rotated: one commit, no parent" test "$(git_m rev-list --count refs/heads/ev/rotated)" -eq 1
check "rotated: dataset.json has key_version 2" sh -c "git --git-dir '$tmp/m.git' show refs/heads/ev/rotated:dataset.json | grep -q '\"key_version\":2'"
for b in main rotated; do
	for s in train dev test; do
		"$kiln" cat "ev@$b" --split "$s" --manifest "$tmp/m.git" --store "file://$tmp/store" >>"$tmp/cat.$b" 2>>"$tmp/cat.err"
	done
done
check "tokens: p2_ on rotated, p1_ on main, different for every record" "$py" -c '
import json, sys
def users(path):
    return {r["event_id"]: r["user_id"] for r in map(json.loads, open(path))}
main, rot = users(sys.argv[1]), users(sys.argv[2])
ok = len(main) > 1000 and main.keys() == rot.keys()
ok = ok and all(v.startswith("p1_") for v in main.values()) and all(v.startswith("p2_") for v in rot.values())
ok = ok and all(main[e][3:] != rot[e][3:] for e in main)
sys.exit(0 if ok else 1)
' "$tmp/cat.main" "$tmp/cat.rotated"
check "git fsck --strict" git_m fsck --strict --no-dangling

# --- refusals ------------------------------------------------------------------
check "onto an existing branch: exit 2" status_is 2 "$kiln" replay "$tmp/p.yaml" --from main "${rot[@]}"
check "onto an existing branch: one line naming it" sh -c "test \$(wc -l <'$tmp/err') -eq 1 && grep -q 'ev@rotated already exists' '$tmp/err'"
check "onto the source branch: exit 2" status_is 2 "$kiln" replay "$tmp/p.yaml" --from main
check "onto the source branch: one line" one_line
check "from an unknown branch: exit 2" status_is 2 "$kiln" replay "$tmp/p.yaml" --from nosuch --set branch=x1
check "from an unknown branch: one line naming it" sh -c "test \$(wc -l <'$tmp/err') -eq 1 && grep -q 'ev@nosuch' '$tmp/err'"
check "without --from: exit 2" status_is 2 "$kiln" replay "$tmp/p.yaml" --set branch=x2
cat >"$tmp/file.yaml" <<EOF
dataset: ev
contract: $src/contracts/user-events.yaml
source: {kind: file, path: $tmp/all.jsonl, name: ev}
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/store}
manifest: {repo: $tmp/m.git}
EOF
check "a file pipeline: exit 2" status_is 2 "$kiln" replay "$tmp/file.yaml" --from main --set branch=x3
check "a file pipeline: one line naming kafka" sh -c "test \$(wc -l <'$tmp/err') -eq 1 && grep -q 'kafka' '$tmp/err'"
check "refusals created no branch" sh -c "! git --git-dir '$tmp/m.git' for-each-ref refs/heads/ev/ | grep -Eq 'ev/(x[0-9]|nosuch)'"

# --- a kiln run on the replayed branch goes on where main stopped -------------
"$py" "$src/bench/gen-user-events.py" --records 120 --seed 6 --invalid-rate 0.05 --max-record-bytes 16384 \
	-o "$tmp/more.jsonl" --expect "$tmp/more.expect"
check "kcat produced 120 more records" kcat -P -b "$bs" -t ev -l "$tmp/more.jsonl" 2>>"$tmp/kcat.err"
rc=0
timeout 120 "$kiln" run "$tmp/p.yaml" --stop-at-end "${rot[@]}" >"$tmp/run2.out" 2>"$tmp/run2.err" || rc=$?
check "kiln run on rotated exits 0" test "$rc" -eq 0
check "kiln run on rotated read only the new records" grep -q '+120 records' "$tmp/run2.out"
check "rotated after the run: every record exactly once" "$py" "$src/tests/integration/kafka_check.py" \
	--repo "$tmp/m.git" --dataset ev --branch rotated --store "$tmp/store" --topic ev --expect "$tmp/all.jsonl" \
	"$tmp/all.expect" --expect "$tmp/more.jsonl" "$tmp/more.expect" --key "$tmp/key2" "$tmp/all.jsonl" "$tmp/more.jsonl"

# --- a raw object missing -----------------------------------------------------
# (main's lineage stops before the 120 new records: their objects are ignored)
objs=$(ls "$tmp/store/raw/ev/1" | sort -t- -k1,1n)
victim=$(echo "$objs" | sed -n 2p)
[ -n "$victim" ] || victim=$(echo "$objs" | sed -n 1p)
first=${victim%%-*}
last=${victim#*-}
last=${last%%.*}
n=$((last - first + 1))
mv "$tmp/store/raw/ev/1/$victim" "$tmp/victim"
before=$(count_files)
check "an object missing: exit 1" status_is 1 "$kiln" replay "$tmp/p.yaml" --from main --set branch=holes
check "an object missing: the warning names ev/1 and $n records" grep -q "warning: ev/1: $n records missing" "$tmp/err"
check "an object missing: the last line says nothing was committed" sh -c "tail -1 '$tmp/err' | grep -q 'nothing committed'"
check "an object missing: no branch" no_branch holes
check "an object missing: nothing written to the store" test "$(count_files)" -eq "$before"
check "--allow-missing: exit 0" status_is 0 "$kiln" replay "$tmp/p.yaml" --from main --set branch=holes --allow-missing
check "--allow-missing: the summary says how many are missing" grep -q "replayed from main ($n records missing from the raw zone)" "$tmp/out"
check "--allow-missing: still warns on stderr" grep -q "warning: ev/1: $n records missing" "$tmp/err"
check "--allow-missing: stats count the records found" "$py" -c '
import json, subprocess, sys
s = json.loads(subprocess.check_output(["git", "--git-dir", sys.argv[1], "show", "refs/heads/ev/holes:stats.json"]))
sys.exit(0 if s["records_in"] == 1500 - int(sys.argv[2]) == s["valid"] + s["quarantined"] else 1)
' "$tmp/m.git" "$n"
check "--allow-missing: lineage.json still equals main's" cmp -s <(git_m show refs/heads/ev/main:lineage.json) \
	<(git_m show refs/heads/ev/holes:lineage.json)
mv "$tmp/victim" "$tmp/store/raw/ev/1/$victim"

# --- a raw object corrupt (its name intact: found only when read) -------------
victim=$(ls "$tmp/store/raw/ev/2" | sort -t- -k1,1n | head -1)
cp "$tmp/store/raw/ev/2/$victim" "$tmp/victim"
printf 'not zstd' >"$tmp/store/raw/ev/2/$victim"
check "an object corrupt: exit 1" status_is 1 "$kiln" replay "$tmp/p.yaml" --from main --set branch=corrupt
check "an object corrupt: the warning names the object" grep -q "warning: .*raw/ev/2/$victim" "$tmp/err"
check "an object corrupt: the warning names ev/2" grep -q "warning: ev/2: [0-9]* records missing" "$tmp/err"
check "an object corrupt: no branch" no_branch corrupt
cp "$tmp/victim" "$tmp/store/raw/ev/2/$victim"

# --- overlapping objects (a crashed run's batches read again with other
# boundaries): each offset is replayed once ------------------------------------
check "an overlapping object written" "$py" -c '
import os, sys, zstandard
d = sys.argv[1]
objs = sorted(os.listdir(d), key=lambda n: int(n.split("-")[0]))
lines = []
for n in objs[:2]:
    with open(os.path.join(d, n), "rb") as f:
        lines += zstandard.ZstdDecompressor().decompress(f.read()).splitlines(keepends=True)
first = int(objs[0].split("-")[0]) + 50
mid = lines[50:50 + 200]
data = zstandard.ZstdCompressor(write_checksum=True, write_content_size=True).compress(b"".join(mid))
with open(os.path.join(d, "%d-%d.jsonl.zst" % (first, first + len(mid) - 1)), "wb") as f:
    f.write(data)
' "$tmp/store/raw/ev/0"
check "overlapping objects: exit 0" status_is 0 "$kiln" replay "$tmp/p.yaml" --from main --set branch=overlap
check "overlapping objects: every record exactly once" "$py" "$src/tests/integration/kafka_check.py" --repo "$tmp/m.git" \
	--dataset ev --branch overlap --store "$tmp/store" --topic ev "${expect[@]}" "$tmp/all.jsonl"
# --- a tombstone read back from the raw zone: "record":null, as kiln run ------
# writes it; an empty value stays "" (dataset tomb, topic tomb, partition 0)
sed -e 's/^dataset: ev$/dataset: tomb/' -e 's/topics: \[ev\]/topics: [tomb]/' -e 's/group: g1$/group: g-tomb/' \
	"$tmp/p.yaml" >"$tmp/tomb.yaml"
printf '%s\n' '<tombstone>' '' >"$tmp/tomb.in"
check "a tombstone and an empty value produced" "$py" "$src/tests/integration/kafka_produce.py" "$bs" tomb \
	"$tmp/tomb.in" "$tmp/tomb.log" --partition 0 --tombstone '<tombstone>'
rc=0
timeout 120 "$kiln" run "$tmp/tomb.yaml" --stop-at-end >"$tmp/tomb-run.out" 2>"$tmp/tomb-run.err" || rc=$?
check "tomb: kiln run exits 0" test "$rc" -eq 0
check "tomb: kiln replay exits 0" status_is 0 "$kiln" replay "$tmp/tomb.yaml" --from main --set branch=replayed
tomb_quarantine() { # BRANCH -> "offset code record" per line
	"$py" -c '
import glob, json, sys, zstandard
for fn in sorted(glob.glob(sys.argv[1] + "/quarantine/tomb/0/tomb/" + sys.argv[2] + "/*.jsonl.zst")):
    for line in zstandard.ZstdDecompressor().decompress(open(fn, "rb").read()).splitlines():
        q = json.loads(line)
        print(q["offset"], q["code"], json.dumps(q["record"]) if "record" in q else "base64")
' "$tmp/store" "$1"
}
tomb_quarantine main >"$tmp/tomb.main.q"
tomb_quarantine replayed >"$tmp/tomb.replayed.q"
check "tomb: kiln run's tombstone line has \"record\":null" grep -qx '0 json_syntax null' "$tmp/tomb.main.q"
check "tomb: the replay's tombstone line has \"record\":null" grep -qx '0 json_syntax null' "$tmp/tomb.replayed.q"
check "tomb: the replay's empty value keeps \"record\":\"\"" grep -qx '1 json_syntax ""' "$tmp/tomb.replayed.q"
check "tomb: the replay's quarantine lines equal kiln run's" cmp -s "$tmp/tomb.main.q" "$tmp/tomb.replayed.q"
check "tomb: 2 lines" test "$(wc -l <"$tmp/tomb.replayed.q")" -eq 2

check "git fsck --strict at the end" git_m fsck --strict --no-dangling

check "no personal data in any log, stdout or stderr" pii_scan_logs

echo "replay: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
