#!/usr/bin/env bash
# Slowloris against both HTTP servers at once (docs/CACHE.md, "Limits";
# docs/STREAMING.md, "Metrics"): `kiln cache serve` and the metrics server of
# a Kafka `kiln run` against `kiln broker`. slowloris.py opens many
# connections from 127.0.0.1 at once and trickles a request head that never
# ends into each, one byte a second, while a prober asks /healthz from
# 127.0.0.2 every 0.2 s:
#  - /healthz answers 200 to every probe, each within BOUND seconds;
#  - the server closes every attacking connection: those past the
#    per-address limit at once, the ones it held by the 10 s head deadline
#    (a trickle resets the 30 s idle timeout, so without the deadline they
#    would stay open until the attack gives up, after ATTACK_S seconds);
#  - the run keeps consuming meanwhile: records produced during the attack
#    are committed, `kiln snapshot` answers, every record is there exactly
#    once (kafka_check.py), SIGTERM exits 0.
# make check: 300 connections against each server (the cache's default of
# 256 per address, the metrics server's 16). KILN_HOSTILE=1 (make hostile):
# 4200 against the cache, with connections_per_address 3000 so that most
# are held and cut by the deadline (3000 + the prober stay under the node's
# 4096 connections in all), and 1000 against the metrics server.
# Prints the figures of each attack.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
loris=$src/tests/integration/slowloris.py

need kcat git
[ -x "$kiln" ] || { echo "FAIL: no kiln binary at $kiln (set KILN)"; exit 1; }

# shellcheck disable=SC2034 # cache_n and metrics_n are read as ${!n}
if [ "${KILN_HOSTILE:-0}" = 1 ]; then
	cache_n=4200 cache_per_address=3000 metrics_n=1000
else
	cache_n=300 cache_per_address=256 metrics_n=300
fi
bound=5     # seconds a /healthz probe may take
attack_s=40 # an attack gives up after this long (head deadline 10 s, idle timeout 30 s)

unset http_proxy https_proxy all_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY
unset KILN_BRANCH KILN_SPLIT_SALT KILN_STORE KILN_CACHE_TOKEN

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT

port_of() { # LOG: the port of its "listening" event, after waiting up to 30 s for it
	local p=''
	for _ in $(seq 300); do
		p=$(grep -o '"event":"listening".*"port":[0-9]*' "$1" 2>/dev/null | grep -o '[0-9]*$' | head -1)
		[ -n "$p" ] && break
		ms_sleep 100
	done
	echo "$p"
}

# ---- a version for the cache: one file run into a file store
export KILN_KEY_FILE=$tmp/hmac.key
(umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$tmp/hmac.key")
"$py" "$src/bench/gen-user-events.py" --records 2000 --invalid-rate 0 --seed 41 -o "$tmp/in.jsonl"
check "a version for the cache" status_is 0 "$kiln" run "$src/pipelines/user-events.yaml" \
	--set source.path="$tmp/in.jsonl" --set store.url="file://$tmp/store" --set manifest.repo="$tmp/m.git"
cat >"$tmp/cache.yaml" <<EOF
store: {url: file://$tmp/store}
manifest: $tmp/m.git
dir: $tmp/cachedir
size_limit: 1G
pins: [user-events@main]
listen: 127.0.0.1:0
sync_seconds: 5
connections_per_address: $cache_per_address
EOF
"$kiln" cache serve "$tmp/cache.yaml" >"$tmp/cache.out" 2>"$tmp/cache.log" &
cache_pid=$!
pids+=("$cache_pid")
cache_port=$(port_of "$tmp/cache.log")
[ -n "$cache_port" ] || { echo "FAIL: the cache did not start"; tail -5 "$tmp/cache.log"; exit 1; }

# ---- a Kafka run with a metrics server
"$kiln" broker --partitions 2 --topics slow --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
for _ in $(seq 300); do [ -s "$tmp/pf" ] && break; ms_sleep 100; done
bs=$(head -1 "$tmp/pf" 2>/dev/null)
[ -n "$bs" ] || { echo "FAIL: the broker did not start"; cat "$tmp/broker.out"; exit 1; }
cat >"$tmp/p.yaml" <<EOF
dataset: slow
contract: $src/contracts/user-events.yaml
source:
  kind: kafka
  brokers: $bs
  topics: [slow]
  group: g-slow
  options: {session.timeout.ms: "6000"}
pseudonymise: {key_file: $tmp/hmac.key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/kstore}
manifest: {repo: $tmp/k.git}
snapshot: {records: 100000, seconds: 1}
metrics: {listen: "127.0.0.1:0"}
EOF
"$py" "$src/bench/gen-user-events.py" --records 1000 --invalid-rate 0.02 --seed 42 -o "$tmp/k.jsonl"
head -n 500 "$tmp/k.jsonl" >"$tmp/k1.jsonl"
tail -n +501 "$tmp/k.jsonl" >"$tmp/k2.jsonl"
check "kcat produced the first 500 records" kcat -P -b "$bs" -t slow -l "$tmp/k1.jsonl"
"$kiln" run "$tmp/p.yaml" >"$tmp/run.out" 2>"$tmp/run.log" &
run_pid=$!
pids+=("$run_pid")
metrics_port=$(port_of "$tmp/run.log")
[ -n "$metrics_port" ] || { echo "FAIL: the run's metrics server did not start"; tail -5 "$tmp/run.log"; exit 1; }
committed() { git --git-dir="$tmp/k.git" show refs/heads/slow/main:stats.json 2>/dev/null |
	"$py" -c 'import json,sys; print(json.load(sys.stdin)["records_in"])' 2>/dev/null || echo 0; }
has_committed() { [ "$(committed)" -ge "$1" ]; }
check "the run committed the first 500 records" poll 60 has_committed 500

# ---- the attacks, both at once, each watched by a prober from 127.0.0.2
for t in cache metrics; do
	port=${t}_port n=${t}_n
	"$py" "$loris" probe "127.0.0.1:${!port}" --source 127.0.0.2 --bound "$bound" --stop "$tmp/$t.stop" \
		--out "$tmp/$t.probes" 2>"$tmp/$t.probe.err" &
	pids+=($!)
	eval "probe_$t=$!"
done
probing() { [ -s "$tmp/cache.probes" ] && [ -s "$tmp/metrics.probes" ]; }
check "the probers answer before the attacks" poll 30 probing
for t in cache metrics; do
	port=${t}_port n=${t}_n
	"$py" "$loris" attack "127.0.0.1:${!port}" --connections "${!n}" --source 127.0.0.1 --seconds "$attack_s" \
		--out "$tmp/$t.attack" 2>"$tmp/$t.attack.err" &
	pids+=($!)
	eval "attack_$t=$!"
done
check "kcat produced 500 more during the attacks" kcat -P -b "$bs" -t slow -l "$tmp/k2.jsonl"
attack_ok=true
for t in cache metrics; do
	v=attack_$t
	wait "${!v}" || { attack_ok=false; echo "  the $t attack failed:"; sed 's/^/  | /' "$tmp/$t.attack.err" | tail -5; }
done
check "both attacks ran" $attack_ok
for t in cache metrics; do
	: >"$tmp/$t.stop"
	v=probe_$t
	wait "${!v}"
done

# FILE KEY: a number from the attack's summary
field() { "$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# PROBES ATTACK: "N OK LATE median max" over the probes that began during the attack
probes() {
	"$py" - "$1" "$2" "$bound" <<'EOF'
import json, sys
a = json.load(open(sys.argv[2]))
bound = float(sys.argv[3])
p = [json.loads(l) for l in open(sys.argv[1])]
p = [x for x in p if a["start"] <= x["start"] <= a["end"]]
secs = sorted(x["seconds"] for x in p)
ok = sum(1 for x in p if x["status"] == 200 and x["seconds"] <= bound)
med = secs[len(secs) // 2] if secs else 0
print(len(p), ok, "%.3f" % med, "%.3f" % (secs[-1] if secs else 0))
EOF
}

for t in cache metrics; do
	a=$tmp/$t.attack n=${t}_n
	[ -s "$a" ] || continue
	read -r np nok pmed pmax < <(probes "$tmp/$t.probes" "$a")
	echo "  $t: ${!n} connections opened in $(field "$a" open_seconds) s ($(field "$a" connected) connected," \
		"$(field "$a" connect_failed) failed); closed by the server: $(field "$a" closed_by_server)" \
		"($(field "$a" closed_at_once) at once, $(field "$a" held_then_closed) held then closed after" \
		"$(field "$a" held_lifetime_min)-$(field "$a" held_lifetime_max) s, median $(field "$a" held_lifetime_median) s);" \
		"$(field "$a" survived) survived; $(field "$a" bytes_trickled) bytes trickled; the attack took $(field "$a" seconds) s"
	echo "  $t: /healthz from 127.0.0.2 during the attack: $np probes, $nok answered 200 within $bound s," \
		"latency median ${pmed} s, max ${pmax} s"
	check "$t: every connection was established" test "$(field "$a" connected)" -eq "${!n}"
	check "$t: the server closed every attacking connection (none survived $attack_s s)" \
		test "$(field "$a" closed_by_server)" -eq "${!n}"
	check "$t: trickling connections were held, then closed by the head deadline" \
		test "$(field "$a" held_then_closed)" -ge 1
	check "$t: /healthz was probed during the attack" test "$np" -ge 5
	check "$t: /healthz answered 200 within $bound s every time" test "$nok" -eq "$np"
done
check "cache: the head deadline is logged" grep -q '"event":"http_head_timeout"' "$tmp/cache.log"
check "metrics: the head deadline is logged" grep -q '"event":"http_head_timeout"' "$tmp/run.log"
check "cache: still serving" sh -c "curl -s --max-time $bound http://127.0.0.1:$cache_port/healthz | grep -qx ok"
check "cache: serves a dataset listing after the attack" \
	sh -c "curl -sf --max-time 30 http://127.0.0.1:$cache_port/v1/datasets/user-events/main/train >/dev/null"

# ---- the run went on consuming while its metrics server was attacked
check "the run committed the records produced during the attack" poll 60 has_committed 1000
check "kiln snapshot answers after the attack" status_is 0 timeout 150 "$kiln" snapshot "127.0.0.1:$metrics_port"
kill -TERM "$run_pid"
rc=0
wait "$run_pid" || rc=$?
check "the run exits 0 on SIGTERM" test "$rc" -eq 0
check "every record exactly once" "$py" "$src/tests/integration/kafka_check.py" --repo "$tmp/k.git" \
	--dataset slow --store "$tmp/kstore" --topic slow "$tmp/k1.jsonl" "$tmp/k2.jsonl"
kill -TERM "$cache_pid"
rc=0
wait "$cache_pid" || rc=$?
check "the cache exits 0 on SIGTERM" test "$rc" -eq 0

check "no personal data in any log" pii_scan_logs

echo "slowloris: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
