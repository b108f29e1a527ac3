#!/usr/bin/env bash
# Automatic compaction of the manifest repository by the members of a
# consumer group (manifest.compact_loose_objects, like git's gc.auto):
# MEMBERS `kiln run` daemons (3 in make check for ~20 s, 8 for minutes under
# KILN_HOSTILE=1) snapshot every second into one repository with a small
# threshold. Sampled all along, the loose objects stay under a bound (before,
# they grew by every commit's objects and every lost attempt's, until
# someone ran `kiln gc --apply`), some member compacted (its log and
# kiln_manifest_compactions_total say so), every record lands exactly once
# (kafka_check.py) and git fsck accepts the repository.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3

for tool in kcat git curl; do
	command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed (run scripts/bootstrap)"; exit 1; }
done
[ -x "$kiln" ] || { echo "FAIL: no kiln binary at $kiln (set KILN)"; exit 1; }

# chunks of records produced 250 ms apart (and a kcat start each): ~20 s
# here, minutes when hostile
if [ "${KILN_HOSTILE:-0}" = 1 ]; then members=8 records=48000 chunks=240; else members=3 records=4000 chunks=30; fi
partitions=$((members * 2))
threshold=60
grace=10

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

"$kiln" broker --partitions "$partitions" --topics cmp --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
for _ in $(seq 300); do [ -s "$tmp/pf" ] && break; ms_sleep 100; done
bs=$(head -1 "$tmp/pf" 2>/dev/null)
[ -n "$bs" ] || { echo "FAIL: the broker did not start"; cat "$tmp/broker.out"; exit 1; }
(umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$tmp/key")
"$py" "$src/bench/gen-user-events.py" --records "$records" --seed 37 --invalid-rate 0.02 -o "$tmp/in.jsonl"

cat >"$tmp/p.yaml" <<EOF
dataset: cmp
contract: $src/contracts/user-events.yaml
source:
  kind: kafka
  brokers: $bs
  topics: [cmp]
  group: g
  batch: {records: 200, ms: 50}
  options:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "500"
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/store}
manifest: {repo: $tmp/m.git, compact_loose_objects: $threshold, compact_grace_seconds: $grace}
snapshot: {records: 1000000, seconds: 1, drain_seconds: 30}
metrics: {listen: "127.0.0.1:0"}
EOF
for i in $(seq 1 "$members"); do
	"$kiln" run "$tmp/p.yaml" >"$tmp/m$i.out" 2>"$tmp/m$i.log" &
	pids+=($!)
	eval "member_$i=$!"
done

# objects/<hh>/<38 hex digits>
loose_name=$(printf '%.0s[0-9a-f]' $(seq 38))
loose() { find "$tmp/m.git/objects" -mindepth 2 -maxdepth 2 -path '*/objects/[0-9a-f][0-9a-f]/*' \
	-name "$loose_name" 2>/dev/null | wc -l; }
max_loose=0
sample() {
	local n
	n=$(loose)
	[ "$n" -gt "$max_loose" ] && max_loose=$n
}

split -n l/"$chunks" "$tmp/in.jsonl" "$tmp/chunk."
: >"$tmp/produced.log"
produce_ok=true
for c in "$tmp"/chunk.*; do
	if kcat -P -b "$bs" -t cmp -l "$c" 2>>"$tmp/kcat.err"; then cat "$c" >>"$tmp/produced.log"; else produce_ok=false; fi
	sample
	ms_sleep 250
done
check "kcat produced every chunk" $produce_ok
echo "  produced at $SECONDS s" 

committed() { git --git-dir="$tmp/m.git" show refs/heads/cmp/main:stats.json 2>/dev/null |
	"$py" -c 'import json,sys; print(json.load(sys.stdin)["records_in"])' 2>/dev/null || echo 0; }
for _ in $(seq 1 1800); do
	[ "$(committed)" -ge "$records" ] && break
	sample
	ms_sleep 100
done
check "the group committed every record ($(committed) of $records)" test "$(committed)" -ge "$records"
sample
echo "  committed at $SECONDS s"

# every member's /metrics, now that nothing is left to commit
retries=0 compactions_total=0 metrics_ok=true
for i in $(seq 1 "$members"); do
	port=$(grep -o '"event":"listening".*"port":[0-9]*' "$tmp/m$i.log" | head -1 | grep -o '[0-9]*$')
	curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/metrics$i" 2>/dev/null || metrics_ok=false
	grep -q '^kiln_manifest_loose_objects [0-9]' "$tmp/metrics$i" || metrics_ok=false
	n=$(awk '$1 == "kiln_manifest_compactions_total" {print $2}' "$tmp/metrics$i")
	compactions_total=$((compactions_total + ${n:-0}))
	n=$(awk '$1 == "kiln_commit_retries_total" {print $2}' "$tmp/metrics$i")
	retries=$((retries + ${n:-0}))
done
check "every member's /metrics has kiln_manifest_compactions_total and kiln_manifest_loose_objects" $metrics_ok

status_ok=true
for i in $(seq 1 "$members"); do kill -TERM "$(eval echo "\$member_$i")" 2>/dev/null; done
for i in $(seq 1 "$members"); do
	rc=0
	wait "$(eval echo "\$member_$i")" || rc=$?
	[ "$rc" -eq 0 ] || { status_ok=false; echo "  member $i: exit $rc"; tail -3 "$tmp/m$i.log" | sed 's/^/  | /'; }
done
check "every member drains and exits 0 on SIGTERM" $status_ok

snapshots=$(cat "$tmp"/m*.log | grep -c '"event":"snapshot"')
compactions=$(cat "$tmp"/m*.log | grep -c '"event":"compacted"')
failed_compactions=$(cat "$tmp"/m*.log | grep -c '"event":"compact_failed"')
packs=$(find "$tmp/m.git/objects/pack" -name 'pack-*.pack' | wc -l)
# A compaction starts once a commit finds `threshold` loose objects more than
# the last one left, and leaves the unreachable objects younger than `grace`
# (those of lost compare-and-swaps, about a dozen each: a blob per shard
# prefix, the split trees, lineage, stats, profile, the root tree and the
# commit) and what peers wrote meanwhile. The bound: five thresholds plus 16
# objects for every attempt that lost its compare-and-swap in the whole run.
bound=$((5 * threshold + 16 * retries))
echo "  $members members: $snapshots snapshots, $retries retried, $compactions compactions," \
	"at most $max_loose loose objects (bound $bound), $packs pack(s) at the end"
check "members compacted the repository" test "$compactions" -gt 0
# (the log lines counted at the end, the metrics before the members drained)
check "kiln_manifest_compactions_total counts them ($compactions_total)" \
	test "$compactions_total" -ge 1 -a "$compactions_total" -le "$compactions"
check "no compaction failed" test "$failed_compactions" -eq 0
check "the loose objects stayed under the bound ($max_loose <= $bound)" test "$max_loose" -le "$bound"
check "every record exactly once" "$py" "$src/tests/integration/kafka_check.py" --repo "$tmp/m.git" \
	--dataset cmp --store "$tmp/store" --topic cmp "$tmp/produced.log"
check "git fsck" git --git-dir "$tmp/m.git" fsck --strict --no-dangling --no-progress
ls_branch() { "$kiln" ls cmp@main --manifest "$tmp/m.git" --store "file://$tmp/store" >/dev/null; }
check "kiln ls reads the branch" ls_branch

pii_exempt=(produced.log)
check "no personal data in any log" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
