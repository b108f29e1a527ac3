#!/usr/bin/env bash
# Exactly once from Kafka, with real clients and kill -9: kcat and
# python3-confluent-kafka produce into `kiln broker` while `kiln run`
# daemons are killed with SIGKILL at random moments and restarted; at the
# end kafka_check.py counts, against the producers' logs, that every record
# landed exactly once, curated or quarantined, and that stats.json balances.
# Phase 1: one daemon, KILLS kills. Phase 2: two daemons in one group, kills
# across rebalances. Also: SIGTERM drains and exits 0, /metrics and /healthz
# answer, `kiln snapshot` commits, the raw zone holds every record
# byte-exact, a gap under on_gap: stop exits 2, under skip is recorded.
# The records (5 % invalid, of every kind, too_large included) come with the
# generator's expected outcome, which kafka_check.py holds each one to; it
# also recomputes the tokens with the key and scans the shards, and
# pii_scan_logs every log, for the records' personal values.
#
# KILLS (default 3) and RECORDS (default 4000) size it; `make soak` runs it
# with KILLS=20. Every address is 127.0.0.1.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
kills=${KILLS:-3}
records=${RECORDS:-4000}
produce_seconds=${PRODUCE_SECONDS:-$((kills * 6 + 6))} # production overlaps the kills
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT

# --- broker, key, data -------------------------------------------------------
"$kiln" broker --partitions 4 --topics ev,ev2,gap --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/pf" ] && break; sleep 0.1; done
bs=$(head -1 "$tmp/pf" 2>/dev/null)
[ -n "$bs" ] || { echo "broker did not start"; cat "$tmp/broker.out"; exit 1; }
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/key"
chmod 600 "$tmp/key"
limit=16384 # source.max_record_bytes; the generator's too_large records are 1000 bytes longer
"$py" "$src/bench/gen-user-events.py" --records "$records" --seed 11 --invalid-rate 0.05 --max-record-bytes "$limit" \
	-o "$tmp/all.jsonl" --expect "$tmp/all.expect"
"$py" "$src/bench/gen-user-events.py" --records 1 --seed 12 -o "$tmp/marker.jsonl" --expect "$tmp/marker.expect"
expect=(--expect "$tmp/all.jsonl" "$tmp/all.expect" --expect "$tmp/marker.jsonl" "$tmp/marker.expect" --key "$tmp/key")
pii_exempt=(kcat.log kcat2.log py.log py2.log) # what the producers sent
half=$((records / 2))
head -n "$half" "$tmp/all.jsonl" >"$tmp/kcat.jsonl"
tail -n +$((half + 1)) "$tmp/all.jsonl" >"$tmp/py.jsonl"

pipeline() { # FILE TOPIC GROUP DATASET [EXTRA YAML] [SNAPSHOT YAML]
	local snapshot='snapshot: {records: 300, seconds: 1, drain_seconds: 20}'
	[ -z "${6:-}" ] || snapshot=$6
	cat >"$1" <<EOF
dataset: $4
contract: $src/contracts/user-events.yaml
source:
  kind: kafka
  brokers: $bs
  topics: [$2]
  group: $3
  max_record_bytes: $limit
  batch: {records: 200, ms: 50}
  options:
    session.timeout.ms: "${SESSION_MS:-3000}"
    heartbeat.interval.ms: "300"
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/store}
manifest: {repo: $tmp/m.git}
$snapshot
${5:-}
EOF
}

# kcat in chunks (so production overlaps the kills); the log is what kcat acknowledged
produce_kcat() { # TOPIC INPUT LOG
	split -n l/20 "$2" "$tmp/chunk.$1."
	local c rc=0
	: >"$3"
	for c in "$tmp/chunk.$1."*; do
		if kcat -P -b "$bs" -t "$1" -l "$c" 2>>"$tmp/kcat.err"; then
			cat "$c" >>"$3"
		else
			rc=1
			echo "  kcat -P failed on $c"
		fi
		ms_sleep $((produce_seconds * 50))
	done
	return "$rc"
}

starts=0
start_daemon() { # PIPELINE NAME -> $daemon, its log in $daemon_log (all of NAME's in $tmp/NAME.*.log)
	starts=$((starts + 1))
	daemon_log=$tmp/$2.$starts.log
	"$kiln" run "$1" >>"$tmp/$2.out" 2>"$daemon_log" &
	daemon=$!
	pids+=($daemon)
}

wait_assigned() { # LOG: until the daemon owns partitions (the group waits out dead members first)
	for _ in $(seq 300); do
		grep -q '"event":"assigned"' "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "  no assignment within 30 s: $1"
	return 1
}

logs() { cat "$tmp/$1".*.log; }

# --- phase 1: one daemon, kill -9 at random moments --------------------------
pipeline "$tmp/p1.yaml" ev g1 ev
produce_kcat ev "$tmp/kcat.jsonl" "$tmp/kcat.log" &
pk=$!
"$py" "$src/tests/integration/kafka_produce.py" "$bs" ev "$tmp/py.jsonl" "$tmp/py.log" --rate $((half / produce_seconds + 1)) 2>"$tmp/py.err" &
pp=$!
for i in $(seq "$kills"); do
	start_daemon "$tmp/p1.yaml" d1
	wait_assigned "$daemon_log"
	# each life commits once before its kill (slow builds: ASan under load)
	poll 60 grep -q '"event":"snapshot"' "$daemon_log"
	ms_sleep $((300 + RANDOM % 2500))
	kill -KILL "$daemon" 2>/dev/null
	wait "$daemon" 2>/dev/null
done
check "kcat producer acknowledged its records" wait "$pk"
check "python producer acknowledged its records" wait "$pp"
start_daemon "$tmp/p1.yaml" d1
wait_assigned "$daemon_log"
ms_sleep 2000
kill -TERM "$daemon"
rc=0
wait "$daemon" || rc=$?
check "SIGTERM: the daemon drains and exits 0" test "$rc" -eq 0
check "the log is JSON lines" "$py" -c '
import json, sys
for line in open(sys.argv[1]):
    json.loads(line)
' <(logs d1)
check "the log holds no record value" sh -c "! cat '$tmp'/d1.*.log | grep -q '@'"
rc=0
timeout 120 "$kiln" run "$tmp/p1.yaml" --stop-at-end >"$tmp/end1.out" 2>"$tmp/end1.err" || rc=$?
check "--stop-at-end reads the rest and exits 0" test "$rc" -eq 0
check "phase 1: every record exactly once" "$py" "$src/tests/integration/kafka_check.py" --repo "$tmp/m.git" \
	--dataset ev --store "$tmp/store" --topic ev "${expect[@]}" "$tmp/kcat.log" "$tmp/py.log"
check "phase 1: git fsck" git --git-dir "$tmp/m.git" fsck --strict --no-dangling
nshards=$(find "$tmp/store/shards" -name '*.zst' | wc -l)
check "shards pass zstd -t" sh -c "find '$tmp/store/shards' -name '*.zst' -print0 | xargs -0 zstd -tq"
check "some shards were written" test "$nshards" -gt 0
check "snapshots were committed between the kills" test "$(logs d1 | grep -c '"event":"snapshot"')" -gt "$kills"

# raw zone: every produced record, byte-exact, once per offset
"$kiln" raw cat --store "file://$tmp/store" --topic ev --format value >"$tmp/raw.values" 2>"$tmp/raw.err"
check "raw zone: kiln raw cat exits 0" test $? -eq 0
check "raw zone holds every produced record byte-exact" "$py" -c '
import sys, collections
produced = collections.Counter(open(sys.argv[1], "rb").read().splitlines() + open(sys.argv[2], "rb").read().splitlines())
raw = collections.Counter(open(sys.argv[3], "rb").read().splitlines())
sys.exit(0 if raw == produced else 1)
' "$tmp/kcat.log" "$tmp/py.log" "$tmp/raw.values"

# --- metrics, healthz, kiln snapshot -----------------------------------------
# no periodic snapshot within the test (an hour, no record count): only the
# request commits the marker record
pipeline "$tmp/p1m.yaml" ev g1 ev "metrics: {listen: 127.0.0.1:0}" \
	'snapshot: {records: 0, seconds: 3600, drain_seconds: 20}'
before_snap=$(git --git-dir "$tmp/m.git" rev-parse refs/heads/ev/main)
start_daemon "$tmp/p1m.yaml" d1m
port=
for _ in $(seq 100); do
	port=$(grep -o '"event":"listening"[^}]*"port":[0-9]*' "$daemon_log" 2>/dev/null | grep -o '[0-9]*$')
	[ -n "$port" ] && break
	sleep 0.1
done
check "metrics listener announced its port" test -n "$port"
wait_assigned "$daemon_log"
check "kcat produced the marker record" kcat -P -b "$bs" -t ev -l "$tmp/marker.jsonl"
cat "$tmp/marker.jsonl" >>"$tmp/kcat.log"
consumed() { # the daemon read the marker (its records_in counter moved)
	curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/metrics" 2>/dev/null && grep -Eq '^kiln_records_in_total [1-9]' "$tmp/metrics"
}
check "the daemon consumed the marker record (within 60 s)" poll 60 consumed
check "/healthz answers ok" sh -c "curl -sf http://127.0.0.1:$port/healthz | grep -qx ok"
check "no periodic snapshot committed the marker" test "$(git --git-dir "$tmp/m.git" rev-parse refs/heads/ev/main)" = "$before_snap"
check "/metrics counts records in" grep -Eq '^kiln_records_in_total [1-9]' "$tmp/metrics"
check "/metrics counts quarantined by code" grep -q '^kiln_records_quarantined_total{code="' "$tmp/metrics"
check "/metrics has consumer lag per partition" grep -q '^kiln_consumer_lag{topic="ev",partition="0"}' "$tmp/metrics"
check "/metrics has the batch latency histogram" grep -q '^kiln_batch_seconds_bucket{le="+Inf"}' "$tmp/metrics"
"$kiln" snapshot "127.0.0.1:$port" >"$tmp/snap.out" 2>"$tmp/snap.err"
check "kiln snapshot exits 0" test $? -eq 0
tip=$(git --git-dir "$tmp/m.git" rev-parse refs/heads/ev/main)
check "kiln snapshot prints the branch tip" grep -q "\"commit\":\"$tip\"" "$tmp/snap.out"
check "kiln snapshot made a commit (the periodic one is an hour away)" test "$tip" != "$before_snap"
check "the requested snapshot holds the marker record" sh -c "git --git-dir '$tmp/m.git' show refs/heads/ev/main:lineage.json >'$tmp/lin.snap' && \
	git --git-dir '$tmp/m.git' show '$before_snap:lineage.json' >'$tmp/lin.before' && ! cmp -s '$tmp/lin.before' '$tmp/lin.snap'"
check "the snapshot counted the new record" sh -c "git --git-dir '$tmp/m.git' log -1 --format=%s refs/heads/ev/main | grep -q '+1 record'"
kill -TERM "$daemon"
wait "$daemon"
check "SIGTERM with the listener: exit 0" test $? -eq 0
check "after kiln snapshot: still exactly once" "$py" "$src/tests/integration/kafka_check.py" --repo "$tmp/m.git" \
	--dataset ev --store "$tmp/store" --topic ev "${expect[@]}" "$tmp/kcat.log" "$tmp/py.log"

# --- phase 2: two daemons in one group, kills across rebalances --------------
pipeline "$tmp/p2.yaml" ev2 g2 ev2
produce_kcat ev2 "$tmp/kcat.jsonl" "$tmp/kcat2.log" &
pk=$!
"$py" "$src/tests/integration/kafka_produce.py" "$bs" ev2 "$tmp/py.jsonl" "$tmp/py2.log" --rate $((half / produce_seconds + 1)) 2>>"$tmp/py.err" &
pp=$!
start_daemon "$tmp/p2.yaml" d2a
a=$daemon
wait_assigned "$daemon_log"
ms_sleep 500
start_daemon "$tmp/p2.yaml" d2b
b=$daemon
wait_assigned "$daemon_log"
for i in $(seq "$kills"); do
	ms_sleep $((300 + RANDOM % 2500))
	if [ $((i % 2)) -eq 1 ]; then
		kill -KILL "$a"; wait "$a" 2>/dev/null
		start_daemon "$tmp/p2.yaml" d2a; a=$daemon
	else
		kill -KILL "$b"; wait "$b" 2>/dev/null
		start_daemon "$tmp/p2.yaml" d2b; b=$daemon
	fi
	wait_assigned "$daemon_log"
done
check "phase 2: kcat producer acknowledged its records" wait "$pk"
check "phase 2: python producer acknowledged its records" wait "$pp"
ms_sleep 3000
kill -TERM "$a" "$b"
ra=0 rb=0
wait "$a" || ra=$?
wait "$b" || rb=$?
check "phase 2: both daemons exit 0 on SIGTERM" test "$ra" -eq 0 -a "$rb" -eq 0
check "phase 2: both members held partitions" sh -c "logs() { cat '$tmp'/\$1.*.log; }; logs d2a | grep -q '\"event\":\"assigned\"' && logs d2b | grep -q '\"event\":\"assigned\"'"
check "phase 2: rebalances revoked partitions" sh -c "cat '$tmp'/d2[ab].*.log | grep -q '\"event\":\"revoked\"'"
rc=0
timeout 120 "$kiln" run "$tmp/p2.yaml" --stop-at-end >"$tmp/end2.out" 2>"$tmp/end2.err" || rc=$?
check "phase 2: --stop-at-end exits 0" test "$rc" -eq 0
check "phase 2: every record exactly once" "$py" "$src/tests/integration/kafka_check.py" --repo "$tmp/m.git" \
	--dataset ev2 --store "$tmp/store" --topic ev2 "${expect[@]}" "$tmp/kcat2.log" "$tmp/py2.log"
check "phase 2: git fsck" git --git-dir "$tmp/m.git" fsck --strict --no-dangling

check "no personal data in any log, stdout or stderr" pii_scan_logs

echo "kafka_exactly_once: $passed passed, $failed failed (kills: $kills, records: $records)"
[ "$failed" -eq 0 ]
