#!/usr/bin/env bash
# Kafka source operations against `kiln broker`, checked with kcat and
# python3-confluent-kafka:
#  - gaps: offsets that expired before they were read (the mock cluster keeps
#    about 5 MB per partition) stop the run under on_gap: stop (exit 2, one
#    line naming the offsets, lineage unchanged) and are skipped, logged,
#    counted and recorded in lineage.json under on_gap: skip;
#  - the dead-letter topic gets each quarantined record with its key, value,
#    original headers and kiln.* reason headers;
#  - pipeline errors name file:line:col and the key;
#  - a broker that cannot be reached gives rate-limited log lines, no exit;
#    with --stop-at-end, one line and exit 2 after source.connect_timeout;
#  - a store that fails is retried with backoff, `kiln snapshot` says why it
#    fails (exit 1); when it is back the run goes on and every record is
#    still committed exactly once, with the outcome the generator expects
#    for it (kafka_check.py --expect, tokens recomputed with the key);
#  - a broker gone longer than session.timeout.ms does not hold SIGTERM: the
#    run exits 0 within drain_seconds, and a run against the broker back
#    resumes with every record exactly once; nor does a watermark query
#    waiting for that broker after a failed snapshot;
#  - quarantine lines tell a tombstone (null) from an empty value, and code
#    bytes that are not UTF-8 invalid_utf8 as the file source does;
#  - no log, stdout or stderr holds a personal value (pii_scan_logs).
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT

"$kiln" broker --partitions 2 --topics gap,ev,ev.dlq,late,tomb --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/pf" ] && break; sleep 0.1; done
bs=$(head -1 "$tmp/pf" 2>/dev/null)
[ -n "$bs" ] || { echo "broker did not start"; cat "$tmp/broker.out"; exit 1; }
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/key"
chmod 600 "$tmp/key"

pipeline() { # FILE TOPIC GROUP DATASET [EXTRA SOURCE YAML]
	cat >"$1" <<EOF
dataset: $4
contract: $src/contracts/user-events.yaml
source:
  kind: kafka
  brokers: $bs
  topics: [$2]
  group: $3
  options: {session.timeout.ms: "6000"}
${5:-}
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/store}
manifest: {repo: $tmp/m.git}
EOF
}

watermarks() { # TOPIC PARTITION -> "low high"
	"$py" -c '
import sys
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "wm"})
lo, hi = c.get_watermark_offsets(TopicPartition(sys.argv[2], int(sys.argv[3])), timeout=10)
print(lo, hi)
' "$bs" "$1" "$2"
}

lineage_of() { # DATASET TOPIC PARTITION FIELD
	git --git-dir "$tmp/m.git" show "refs/heads/$1/main:lineage.json" |
		"$py" -c '
import json, sys
for e in json.load(sys.stdin)["partitions"]:
    if e["topic"] == sys.argv[1] and e["partition"] == int(sys.argv[2]):
        print(e.get(sys.argv[3], 0))
' "$2" "$3" "$4"
}

# --- gaps ----------------------------------------------------------------------
pipeline "$tmp/gap.yaml" gap g-gap gap
"$py" "$src/bench/gen-user-events.py" --records 10 --seed 3 -o "$tmp/ten.jsonl"
check "gap: kcat produced 10 records" kcat -P -b "$bs" -t gap -p 0 -l "$tmp/ten.jsonl"
check "gap: first run commits 10 records" status_is 0 timeout 60 "$kiln" run "$tmp/gap.yaml" --stop-at-end
check "gap: lineage next is 10" test "$(lineage_of gap gap 0 next)" = 10
"$py" -c '
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(7000):
        f.write(json.dumps({"event_id": "big-%d" % i, "pad": "x" * 1000}) + "\n")
' "$tmp/big.jsonl"
check "gap: kcat produced 7000 records" kcat -P -b "$bs" -t gap -p 0 -l "$tmp/big.jsonl"
read -r lo hi < <(watermarks gap 0)
check "gap: the mock cluster dropped the oldest offsets (low watermark $lo > 10)" test "${lo:-0}" -gt 10
tip=$(git --git-dir "$tmp/m.git" rev-parse refs/heads/gap/main)
check "gap, on_gap stop: exits 2" status_is 2 timeout 60 "$kiln" run "$tmp/gap.yaml" --stop-at-end
check "gap, on_gap stop: the error names the expired offsets" grep -q "gap/0: offsets 10-$((lo - 1)) expired" "$tmp/err"
check "gap, on_gap stop: the last line is the one error" sh -c "tail -1 '$tmp/err' | grep -q '^kiln run: '"
check "gap, on_gap stop: a gap event is logged" grep -q '"event":"gap"' "$tmp/err"
check "gap, on_gap stop: the branch did not move" test "$(git --git-dir "$tmp/m.git" rev-parse refs/heads/gap/main)" = "$tip"
check "gap, on_gap skip: exits 0" status_is 0 timeout 60 "$kiln" run "$tmp/gap.yaml" --stop-at-end --set source.on_gap=skip
check "gap, on_gap skip: a gap event is logged" grep -q '"event":"gap".*"policy":"skip"' "$tmp/err"
check "gap, on_gap skip: lineage records one gap" test "$(lineage_of gap gap 0 gaps)" = 1
check "gap, on_gap skip: lineage records the skipped offsets" test "$(lineage_of gap gap 0 skipped)" = $((lo - 10))
check "gap, on_gap skip: lineage next is the high watermark" test "$(lineage_of gap gap 0 next)" = "$hi"
check "gap, on_gap skip: stats count only what was read" sh -c "git --git-dir '$tmp/m.git' show refs/heads/gap/main:stats.json | grep -q '\"records_in\": $((10 + hi - lo))'"

# a branch whose lineage is past the partition's end (the topic was recreated)
"$kiln" broker --partitions 2 --topics gap --port-file "$tmp/pf-fresh" >"$tmp/broker-fresh.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/pf-fresh" ] && break; sleep 0.1; done
check "recreated topic: exits 2 whatever on_gap says" status_is 2 timeout 60 "$kiln" run "$tmp/gap.yaml" --stop-at-end \
	--set source.on_gap=skip --set "source.brokers=$(head -1 "$tmp/pf-fresh")"
check "recreated topic: the error says so" grep -q "gap/0 ends at offset 0, before $hi where lineage.json on gap/main resumes" "$tmp/err"

# --- start: latest ---------------------------------------------------------------
pipeline "$tmp/late.yaml" late g-late late "  start: latest"
"$py" "$src/bench/gen-user-events.py" --records 15 --seed 6 -o "$tmp/late.jsonl"
check "start latest: kcat produced 10 records" sh -c "head -n 10 '$tmp/late.jsonl' | kcat -P -b '$bs' -t late -p 0"
before0=$(watermarks late 0 | cut -d' ' -f2)
before1=$(watermarks late 1 | cut -d' ' -f2)
check "start latest: a first run reads nothing and exits 0" status_is 0 timeout 60 "$kiln" run "$tmp/late.yaml" --stop-at-end
check "start latest: ... but pins where it started in lineage.json" test "$(lineage_of late late 0 next)" = "$before0" -a "$(lineage_of late late 1 next)" = "$before1" -a "$before0" = 10
check "start latest: kcat produced 5 more" sh -c "tail -n 5 '$tmp/late.jsonl' | kcat -P -b '$bs' -t late -p 0"
check "start latest: the next run reads just what came after" status_is 0 timeout 60 "$kiln" run "$tmp/late.yaml" --stop-at-end
check "start latest: +5 records" grep -q '+5 records' "$tmp/out"

# --- dead-letter topic ---------------------------------------------------------
pipeline "$tmp/dlq.yaml" ev g-dlq ev "  dead_letter_topic: ev.dlq"
printf '%s\n' '{"event_id":"not-a-uuid","x":1}' '{broken' >"$tmp/bad.jsonl"
"$py" "$src/bench/gen-user-events.py" --records 20 --seed 4 -o "$tmp/good.jsonl"
check "dlq: kcat produced 20 records" kcat -P -b "$bs" -t ev -p 0 -l "$tmp/good.jsonl"
check "dlq: kcat produced 2 more" kcat -P -b "$bs" -t ev -p 1 -k key-1 -H origin=test -l "$tmp/bad.jsonl"
check "dlq: run exits 0" status_is 0 timeout 60 "$kiln" run "$tmp/dlq.yaml" --stop-at-end
check "dlq: 2 quarantined" grep -q '(20 valid, 2 quarantined)' "$tmp/out"
check "dlq: kcat reads the dead-letter topic" sh -c "kcat -C -b '$bs' -t ev.dlq -e -q -f '%k\t%h\t%s\n' >'$tmp/dlq.txt' 2>'$tmp/dlq.kcat.err'"
check "dlq: two records on the dead-letter topic" test "$(wc -l <"$tmp/dlq.txt")" -eq 2
check "dlq: the original value, key and headers" grep -qF "key-1	origin=test,kiln.reason=" "$tmp/dlq.txt"
check "dlq: the json_syntax record with its reason" grep -q 'kiln.reason=json_syntax,.*kiln.source.topic=ev,kiln.source.partition=1,kiln.source.offset=1	{broken$' "$tmp/dlq.txt"
check "dlq: the value is byte-exact" grep -qF '{"event_id":"not-a-uuid","x":1}' "$tmp/dlq.txt"

# --- config errors ---------------------------------------------------------------
pipeline "$tmp/bad1.yaml" ev g ev "  on_gap: later"
check "config: a bad on_gap exits 2" status_is 2 "$kiln" run "$tmp/bad1.yaml"
check "config: ... naming file:line:col and the key" grep -Eq "bad1.yaml:[0-9]+:[0-9]+: source.on_gap" "$tmp/err"
pipeline "$tmp/bad2.yaml" ev g ev
sed -i 's/options: {/options: {enable.auto.commit: "true", /' "$tmp/bad2.yaml"
check "config: a property kiln owns exits 2" status_is 2 "$kiln" run "$tmp/bad2.yaml"
check "config: ... naming the property" grep -q "source.options.enable.auto.commit" "$tmp/err"
pipeline "$tmp/bad3.yaml" ev g ev
sed -i 's/options: {/options: {no.such.property: "1", /' "$tmp/bad3.yaml"
check "config: an unknown librdkafka property exits 2" status_is 2 "$kiln" run "$tmp/bad3.yaml"
check "config: ... naming it" grep -q "source.options.no.such.property" "$tmp/err"
pipeline "$tmp/bad4.yaml" "ev, bad/topic" g ev
check "config: a bad topic name exits 2" status_is 2 "$kiln" run "$tmp/bad4.yaml"
check "config: --stop-at-end on a file source exits 2" status_is 2 "$kiln" run "$src/pipelines/user-events.yaml" --stop-at-end

# --- an unreachable broker: logged, rate-limited, no exit; SIGTERM still works ---
pipeline "$tmp/down.yaml" ev g-down ev
sed -i "s|brokers: .*|brokers: 127.0.0.1:1|" "$tmp/down.yaml"
down_start=$SECONDS
"$kiln" run "$tmp/down.yaml" >"$tmp/down.out" 2>"$tmp/down.err" &
down=$!
pids+=($down)
check "broker down: logged (within 30 s)" poll 30 grep -q '"event":"broker_error"' "$tmp/down.err"
check "broker down: still running" kill -0 "$down"
n=$(grep -c '"event":"broker_error"' "$tmp/down.err")
elapsed=$((SECONDS - down_start))
check "broker down: at most a line per 10 s ($n in ${elapsed} s)" test "$n" -ge 1 -a "$n" -le $((elapsed / 10 + 2))
check "broker down: the log names the endpoint" grep -q '"brokers":"127.0.0.1:1"' "$tmp/down.err"
kill -TERM "$down"
rc=0
wait "$down" || rc=$?
check "broker down: SIGTERM exits 0" test "$rc" -eq 0
check "broker down, --stop-at-end: gives up after source.connect_timeout, exit 2" \
	status_is 2 timeout 60 "$kiln" run "$tmp/down.yaml" --stop-at-end --set source.connect_timeout=2
check "broker down, --stop-at-end: the last line names the brokers and the key" sh -c \
	"tail -1 '$tmp/err' | grep -qx 'kiln run: 127.0.0.1:1: no broker answered within source.connect_timeout (2 s); nothing was read'"

# --- a store outage: logged, retried with backoff, nothing lost or doubled -------
"$kiln" broker --partitions 2 --topics out --port-file "$tmp/pf2" >"$tmp/broker2.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/pf2" ] && break; sleep 0.1; done
pipeline "$tmp/out.yaml" out g-out out
sed -i -e "s|brokers: .*|brokers: $(head -1 "$tmp/pf2")|" -e "s|store: .*|store: {url: file://$tmp/ostore}|" "$tmp/out.yaml"
printf 'snapshot: {records: 50, seconds: 1}\nmetrics: {listen: "127.0.0.1:0"}\n' >>"$tmp/out.yaml"
printf '  max_record_bytes: 16384\n' >"$tmp/limit.yaml"
sed -i "/^  group: /r $tmp/limit.yaml" "$tmp/out.yaml"
"$py" "$src/bench/gen-user-events.py" --records 600 --seed 9 --invalid-rate 0.05 --max-record-bytes 16384 \
	-o "$tmp/o.jsonl" --expect "$tmp/o.expect"
head -n 300 "$tmp/o.jsonl" >"$tmp/o1.jsonl"
tail -n +301 "$tmp/o.jsonl" >"$tmp/o2.jsonl"
bs2=$(head -1 "$tmp/pf2")
check "store outage: kcat produced the first 300 records" kcat -P -b "$bs2" -t out -l "$tmp/o1.jsonl"
"$kiln" run "$tmp/out.yaml" >"$tmp/out.out" 2>"$tmp/out.err" &
od=$!
pids+=($od)
for _ in $(seq 300); do grep -q '"event":"snapshot"' "$tmp/out.err" && break; sleep 0.1; done
mv "$tmp/ostore" "$tmp/ostore.away" && : >"$tmp/ostore" # every write now fails, even as root
away=$SECONDS
check "store outage: kcat produced the other 300" kcat -P -b "$bs2" -t out -l "$tmp/o2.jsonl"
failures() { grep -Ec '"event":"(batch|snapshot)_failed"' "$tmp/out.err"; }
failed_once() { [ "$(failures)" -ge 1 ]; }
check "store down: the failure is logged (within 60 s)" poll 60 failed_once
check "store down: still running" kill -0 "$od"
check "store down: the log names the store" grep -q "$tmp/ostore" "$tmp/out.err"
port=$(grep -o '"event":"listening".*"port":[0-9]*' "$tmp/out.err" | grep -o '[0-9]*$')
check "store down: kiln snapshot exits 1" status_is 1 timeout 150 "$kiln" snapshot "127.0.0.1:$port"
check "store down: ... one line with the reason, naming the store" sh -c \
	"test \$(wc -l <'$tmp/err') -eq 1 && grep -q '^kiln snapshot: .*the snapshot failed (HTTP 500): .*$tmp/ostore' '$tmp/err'"
check "store down: ... and no commit on stdout" test ! -s "$tmp/out"
rm "$tmp/ostore" && mv "$tmp/ostore.away" "$tmp/ostore"
before=$(grep -c '"event":"snapshot"' "$tmp/out.err")
for _ in $(seq 400); do [ "$(grep -c '"event":"snapshot"' "$tmp/out.err")" -gt "$before" ] && break; sleep 0.1; done
check "store back: snapshots resume" test "$(grep -c '"event":"snapshot"' "$tmp/out.err")" -gt "$before"
n=$(failures)
elapsed=$((SECONDS - away))
check "store outage: retried with backoff, not spinning ($n failures in $elapsed s)" test "$n" -le $((elapsed + 2))
check "store back: kiln snapshot exits 0" status_is 0 timeout 150 "$kiln" snapshot "127.0.0.1:$port"
check "store back: ... and prints the commit" grep -Eq '^\{"commit":"[0-9a-f]{40}","dataset":"out","branch":"main"\}$' "$tmp/out"
kill -TERM "$od"
rc=0
wait "$od" || rc=$?
check "store back: SIGTERM exits 0" test "$rc" -eq 0
check "store outage: every record exactly once" "$py" "$src/tests/integration/kafka_check.py" --repo "$tmp/m.git" \
	--dataset out --store "$tmp/ostore" --topic out --expect "$tmp/o.jsonl" "$tmp/o.expect" --key "$tmp/key" \
	"$tmp/o1.jsonl" "$tmp/o2.jsonl"

# --- the broker gone past session.timeout.ms: SIGTERM still ends the run ------------
start_broker() { # PORT_FILE: starts a broker for topic "down", sets bs3
	rm -f "$1"
	"$kiln" broker --partitions 2 --topics down --port-file "$1" >"$1.out" 2>&1 &
	pids+=($!)
	b3=$!
	for _ in $(seq 100); do [ -s "$1" ] && break; sleep 0.1; done
	bs3=$(head -1 "$1")
}
start_broker "$tmp/pf3"
pipeline "$tmp/gone.yaml" down g-gone gone
sed -i -e "s|brokers: .*|brokers: $bs3|" -e "s|store: .*|store: {url: file://$tmp/gstore}|" \
	-e 's|session.timeout.ms: "6000"|session.timeout.ms: "3000", heartbeat.interval.ms: "500"|' "$tmp/gone.yaml"
printf 'snapshot: {records: 50, seconds: 1, drain_seconds: 20}\n' >>"$tmp/gone.yaml"
"$py" "$src/bench/gen-user-events.py" --records 500 --seed 11 --invalid-rate 0.05 -o "$tmp/g.jsonl"
head -n 200 "$tmp/g.jsonl" >"$tmp/g0.jsonl"
sed -n 201,400p "$tmp/g.jsonl" >"$tmp/g1.jsonl"
tail -n +401 "$tmp/g.jsonl" >"$tmp/g2.jsonl"
kcat -P -b "$bs3" -t down -p 0 -l "$tmp/g0.jsonl"
kcat -P -b "$bs3" -t down -p 1 -l "$tmp/g1.jsonl"
"$kiln" run "$tmp/gone.yaml" >"$tmp/gone.out" 2>"$tmp/gone.err" &
gp=$!
pids+=($gp)
for _ in $(seq 600); do grep -q '"event":"snapshot"' "$tmp/gone.err" && break; sleep 0.1; done
check "broker gone: a first snapshot" grep -q '"event":"snapshot"' "$tmp/gone.err"
kill -KILL "$b3"
wait "$b3" 2>/dev/null
for _ in $(seq 600); do grep -q '"msg":"the assignment was lost"' "$tmp/gone.err" && break; sleep 0.1; done
check "broker gone: the assignment is lost after session.timeout.ms" grep -q '"msg":"the assignment was lost"' "$tmp/gone.err"
kill -TERM "$gp"
for _ in $(seq 300); do kill -0 "$gp" 2>/dev/null || break; sleep 0.1; done # drain_seconds + 10 s
check "broker gone: SIGTERM ends the run within drain_seconds" sh -c "! kill -0 $gp 2>/dev/null"
kill -KILL "$gp" 2>/dev/null
rc=0
wait "$gp" || rc=$?
check "broker gone: exit 0 (what was not committed is read again)" test "$rc" -eq 0
# a new mock cluster holds nothing: the same records to the same partitions
# give the same offsets; then records the first run never saw
start_broker "$tmp/pf4"
kcat -P -b "$bs3" -t down -p 0 -l "$tmp/g0.jsonl"
kcat -P -b "$bs3" -t down -p 1 -l "$tmp/g1.jsonl"
kcat -P -b "$bs3" -t down -p 0 -l "$tmp/g2.jsonl"
check "broker back: a new run resumes and exits 0" status_is 0 timeout 120 "$kiln" run "$tmp/gone.yaml" --stop-at-end \
	--set "source.brokers=$bs3"
check "broker back: every record exactly once" "$py" "$src/tests/integration/kafka_check.py" --repo "$tmp/m.git" \
	--dataset gone --store "$tmp/gstore" --topic down "$tmp/g0.jsonl" "$tmp/g1.jsonl" "$tmp/g2.jsonl"

# --- the broker gone while a snapshot fails: the watermark query does not hold SIGTERM
# (reading again asks the broker for the partition's oldest offset; librdkafka
# 2.0.2 waits for a broker that is gone past the query's timeout)
start_broker "$tmp/pf5"
pipeline "$tmp/stuck.yaml" down g-stuck stuck
sed -i -e "s|brokers: .*|brokers: $bs3|" -e "s|store: .*|store: {url: file://$tmp/sstore}|" \
	-e 's|session.timeout.ms: "6000"|session.timeout.ms: "60000"|' "$tmp/stuck.yaml"
printf 'snapshot: {records: 0, seconds: 0, drain_seconds: 20}\nmetrics: {listen: "127.0.0.1:0"}\n' >>"$tmp/stuck.yaml"
kcat -P -b "$bs3" -t down -p 0 -l "$tmp/g0.jsonl"
"$kiln" run "$tmp/stuck.yaml" >"$tmp/stuck.out" 2>"$tmp/stuck.err" &
sp=$!
pids+=($sp)
for _ in $(seq 600); do grep -q '"event":"listening"' "$tmp/stuck.err" && break; sleep 0.1; done
port=$(grep -o '"event":"listening".*"port":[0-9]*' "$tmp/stuck.err" | grep -o '[0-9]*$')
records_in() { curl -s "http://127.0.0.1:$port/metrics" | grep -q "^kiln_records_in_total $1\$"; }
for _ in $(seq 600); do records_in 200 && break; sleep 0.1; done
check "stuck query: a first snapshot" status_is 0 timeout 150 "$kiln" snapshot "127.0.0.1:$port"
kcat -P -b "$bs3" -t down -p 0 -l "$tmp/g1.jsonl"
for _ in $(seq 600); do records_in 400 && break; sleep 0.1; done
kill -KILL "$b3"
wait "$b3" 2>/dev/null
mv "$tmp/sstore" "$tmp/sstore.away" && : >"$tmp/sstore"
kill -USR1 "$sp"
for _ in $(seq 600); do grep -q '"event":"snapshot_failed"' "$tmp/stuck.err" && break; sleep 0.1; done
check "stuck query: the snapshot failed" grep -q '"event":"snapshot_failed"' "$tmp/stuck.err"
kill -TERM "$sp"
for _ in $(seq 300); do kill -0 "$sp" 2>/dev/null || break; sleep 0.1; done # drain_seconds + 10 s
check "stuck query: SIGTERM ends the run within drain_seconds" sh -c "! kill -0 $sp 2>/dev/null"
kill -KILL "$sp" 2>/dev/null
rc=0
wait "$sp" || rc=$?
check "stuck query: exit 0 (what was not committed is read again)" test "$rc" -eq 0
rm "$tmp/sstore" && mv "$tmp/sstore.away" "$tmp/sstore"
start_broker "$tmp/pf6"
kcat -P -b "$bs3" -t down -p 0 -l "$tmp/g0.jsonl"
kcat -P -b "$bs3" -t down -p 0 -l "$tmp/g1.jsonl"
check "stuck query: a new run resumes and exits 0" status_is 0 timeout 120 "$kiln" run "$tmp/stuck.yaml" --stop-at-end \
	--set "source.brokers=$bs3"
check "stuck query: every record exactly once" "$py" "$src/tests/integration/kafka_check.py" --repo "$tmp/m.git" \
	--dataset stuck --store "$tmp/sstore" --topic down "$tmp/g0.jsonl" "$tmp/g1.jsonl"

# --- quarantine: tombstones, empty values, bytes that are not UTF-8 ----------------
pipeline "$tmp/tomb.yaml" tomb g-tomb tomb
printf '%s\n' '<tombstone>' '' >"$tmp/tomb.in"
printf '\377\376{}\n{"a":1}\303\n' >>"$tmp/tomb.in"
"$py" "$src/tests/integration/kafka_produce.py" "$bs" tomb "$tmp/tomb.in" "$tmp/tomb.log" --partition 0 --tombstone '<tombstone>'
check "tombstones: the run exits 0" status_is 0 timeout 60 "$kiln" run "$tmp/tomb.yaml" --stop-at-end
check "tombstones: 4 quarantined" grep -q '(0 valid, 4 quarantined)' "$tmp/out"
"$py" -c '
import glob, json, sys, zstandard
for fn in sorted(glob.glob(sys.argv[1] + "/quarantine/tomb/0/*/*/*.jsonl.zst")):
    for line in zstandard.ZstdDecompressor().decompress(open(fn, "rb").read()).splitlines():
        q = json.loads(line)
        rec = ("base64:" + q["record_base64"]) if "record_base64" in q else json.dumps(q["record"])
        print(q["offset"], q["code"], rec)
' "$tmp/store" >"$tmp/tomb.q"
check "tombstone: \"record\":null" grep -qx '0 json_syntax null' "$tmp/tomb.q"
check "empty value: \"record\":\"\"" grep -qx '1 json_syntax ""' "$tmp/tomb.q"
check "not UTF-8 outside strings: invalid_utf8" grep -qx '2 invalid_utf8 base64://57fQ==' "$tmp/tomb.q"
check "not UTF-8 at the end: invalid_utf8" grep -qx '3 invalid_utf8 base64:eyJhIjoxfcM=' "$tmp/tomb.q"
tail -n 2 "$tmp/tomb.in" >"$tmp/utf8.jsonl"
check "the file source codes the same bytes the same" sh -c \
	"'$kiln' validate --contract '$src/contracts/user-events.yaml' '$tmp/utf8.jsonl' | grep -c ': invalid_utf8 ' | grep -qx 2"

check "no personal data in any log, stdout or stderr" pii_scan_logs

echo "kafka_ops: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
