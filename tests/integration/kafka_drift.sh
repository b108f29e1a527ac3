#!/usr/bin/env bash
# Drift gauges of a Kafka run (docs/QUALITY.md, "Drift"): a baseline read
# from `kiln broker` and promoted v1; then a long-running `kiln run` reads
# shifted records (session_ms doubled in half, country dropped from a
# quarter more) and, after its snapshot, /metrics carries per-field
# kiln_drift_psi, kiln_drift_null_rate_change and kiln_drift_flagged
# against v1 for the snapshot's records (part="snapshot") and the branch
# (part="branch"), in Prometheus text a scraper reads (parsed here).
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need kcat curl
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY

"$kiln" broker --partitions 1 --topics ev --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
poll 10 test -s "$tmp/pf"
bs=$(head -1 "$tmp/pf" 2>/dev/null)
[ -n "$bs" ] || { echo "FAIL: broker did not start"; cat "$tmp/broker.out"; echo "0 passed, 1 failed"; exit 1; }
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/key")
cat >"$tmp/p.yaml" <<YAML
dataset: user-events
contract: $src/contracts/user-events.yaml
source: {kind: kafka, brokers: $bs, topics: [ev], group: g1, options: {session.timeout.ms: "6000"}}
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/store}
manifest: {repo: $tmp/m.git}
metrics: {listen: "127.0.0.1:0"}
snapshot: {records: 3000}
YAML
$py "$src/bench/gen-user-events.py" --records 3000 --seed 21 --invalid-rate 0 -o "$tmp/base.jsonl"
$py "$src/bench/gen-user-events.py" --records 3000 --seed 22 --invalid-rate 0 -o "$tmp/same.jsonl"
$py - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
with open(t + "/shift.jsonl", "w") as out:
    for i, line in enumerate(open(t + "/same.jsonl")):
        r = json.loads(line)
        if isinstance(r.get("session_ms"), int) and i % 2:
            r["session_ms"] = min(r["session_ms"] * 2, 3599999)
        if i % 4 == 0:
            r.pop("country", None)
        out.write(json.dumps(r) + "\n")
PY
check "kcat produced the baseline" kcat -P -b "$bs" -t ev -p 0 -l "$tmp/base.jsonl"
check "the baseline run" status_is 0 timeout 120 "$kiln" run "$tmp/p.yaml" --stop-at-end --set metrics.listen=
check "promoted v1" status_is 0 "$kiln" promote user-events@main --pipeline "$tmp/p.yaml" --set promote.ratio_tolerance=1

check "kcat produced the shifted records" kcat -P -b "$bs" -t ev -p 0 -l "$tmp/shift.jsonl"
"$kiln" run "$tmp/p.yaml" >"$tmp/run.out" 2>"$tmp/run.log" &
pids+=($!)
port_of() { grep -o '"event":"listening"[^}]*"port":[0-9]*' "$tmp/run.log" 2>/dev/null | grep -o '[0-9]*$' | head -1; }
poll 30 test -n "$(port_of)"
port=$(port_of)
check "the run announced its metrics port" test -n "$port"
scrape() { curl -s --max-time 5 "http://127.0.0.1:$port/metrics" >"$tmp/metrics.txt" 2>/dev/null && grep -q '^kiln_drift_fields_flagged{part="snapshot"} ' "$tmp/metrics.txt"; }
poll 60 scrape
check "after the snapshot /metrics has the drift gauges" grep -q '^kiln_drift_fields_flagged{part="snapshot"} ' "$tmp/metrics.txt"
$py - "$tmp/metrics.txt" >"$tmp/parsed.txt" 2>&1 <<'PY'
import re, sys
series = {}
for line in open(sys.argv[1]):
    if line.startswith("#") or not line.strip():
        continue
    m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$', line.strip())
    assert m, "not Prometheus text: " + line
    series[(m.group(1), m.group(2) or "")] = float(m.group(3))
print("psi session_ms", series[("kiln_drift_psi", '{part="snapshot",field="session_ms"}')])
print("flagged session_ms", series[("kiln_drift_flagged", '{part="snapshot",field="session_ms"}')])
print("flagged country", series[("kiln_drift_flagged", '{part="snapshot",field="country"}')])
print("null change country", series[("kiln_drift_null_rate_change", '{part="snapshot",field="country"}')])
print("flagged event_type", series[("kiln_drift_flagged", '{part="snapshot",field="event_type"}')])
print("fields flagged", series[("kiln_drift_fields_flagged", '{part="snapshot"}')])
PY
cat "$tmp/parsed.txt" | sed 's/^/  /'
check "session_ms: psi past 0.2 and flagged" \
	sh -c "grep -q '^flagged session_ms 1.0' '$tmp/parsed.txt' && awk '/^psi session_ms/ {exit !(\$3 >= 0.2)}' '$tmp/parsed.txt'"
check "country: null rate up, flagged" \
	sh -c "grep -q '^flagged country 1.0' '$tmp/parsed.txt' && awk '/^null change country/ {exit !(\$4 >= 0.05)}' '$tmp/parsed.txt'"
check "event_type: not flagged" grep -q '^flagged event_type 0.0' "$tmp/parsed.txt"
kill -TERM "${pids[1]}" 2>/dev/null
wait "${pids[1]}" 2>/dev/null
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
