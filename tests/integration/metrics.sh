#!/usr/bin/env bash
# /metrics of both daemons against docs/METRICS.md and promtool
# (metrics_check.py does the comparing):
#  - a Kafka `kiln run` over `kiln broker` (a baseline promoted v1, then a
#    long-running run whose snapshot brings the drift gauges) and a
#    `kiln cache serve` of that dataset over the file store (a view synced,
#    a shard fetched, a 404) are scraped after that work;
#  - every family served is listed in docs/METRICS.md for that daemon with
#    the same type and label names, and every family listed is served (an
#    "Only after" family too, once the test made its event happen; an early
#    scrape of the run may lack one);
#  - `promtool check metrics` prints nothing on either scrape;
#  - kiln_build_info: version and commit as `kiln --version` says, the
#    commit as `git rev-parse --short=12 HEAD` of the source when it is a
#    git checkout, the library versions as pkg-config knows them, and
#    librdkafka's as kcat reports the one it loads;
#  - process_*: the start time within the daemon's real start (and as
#    /proc/PID/stat gives it), CPU time between two readings of
#    /proc/PID/stat, resident and virtual memory within half to twice
#    VmRSS and VmSize, max fds as /proc/PID/limits, and open fds growing
#    while the test holds 8 more connections open;
#  - both daemons exit 0 on SIGTERM, and no log or scrape holds a personal
#    value of the records produced (pii_scan_logs).
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
check_py=$src/tests/integration/metrics_check.py
need kcat curl git pkg-config /usr/bin/promtool
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT
unset http_proxy https_proxy all_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY

now() { date +%s.%N; }
port_of() { # LOG: the port of its "listening" event
	grep -o '"event":"listening"[^}]*"port":[0-9]*' "$1" 2>/dev/null | grep -o '[0-9]*$' | head -1
}
scrape() { # PORT FILE: /metrics into FILE
	curl -sf --max-time 30 "http://127.0.0.1:$1/metrics" >"$2"
}
promtool_quiet() { # FILE: promtool check metrics exits 0 and prints nothing
	/usr/bin/promtool check metrics <"$1" >"$1.promtool" 2>&1
	local rc=$?
	[ "$rc" -eq 0 ] && [ ! -s "$1.promtool" ] && return 0
	echo "  promtool exit $rc:"
	sed 's/^/  | /' "$1.promtool"
	return 1
}
doc_matches() { # DAEMON FILE [--all]
	"$py" "$check_py" doc "$src/docs/METRICS.md" "$@" | sed 's/^/  /'
	return "${PIPESTATUS[0]}"
}

# ---- the Kafka run: a baseline promoted v1, then a long-running run
"$kiln" broker --partitions 2 --topics ev --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
poll 10 test -s "$tmp/pf"
bs=$(head -1 "$tmp/pf" 2>/dev/null)
[ -n "$bs" ] || { echo "FAIL: broker did not start"; cat "$tmp/broker.out"; echo "0 passed, 1 failed"; exit 1; }
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/key")
cat >"$tmp/p.yaml" <<YAML
dataset: ev
contract: $src/contracts/user-events.yaml
source: {kind: kafka, brokers: $bs, topics: [ev], group: g1, options: {session.timeout.ms: "6000"}}
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/store}
manifest: {repo: $tmp/m.git}
metrics: {listen: "127.0.0.1:0"}
snapshot: {records: 1000}
YAML
"$py" "$src/bench/gen-user-events.py" --records 1000 --seed 31 --invalid-rate 0.05 -o "$tmp/base.jsonl"
"$py" "$src/bench/gen-user-events.py" --records 1000 --seed 32 --invalid-rate 0.05 -o "$tmp/more.jsonl"
check "kcat produced the baseline" kcat -P -b "$bs" -t ev -l "$tmp/base.jsonl"
check "the baseline run" status_is 0 timeout 120 "$kiln" run "$tmp/p.yaml" --stop-at-end --set metrics.listen=
check "promoted v1" status_is 0 "$kiln" promote ev@main --pipeline "$tmp/p.yaml" \
	--set promote.ratio_tolerance=1 --set promote.max_quarantine_rate=1

run_before=$(now)
"$kiln" run "$tmp/p.yaml" >"$tmp/run.out" 2>"$tmp/run.log" &
run_pid=$!
pids+=($run_pid)
poll 60 test -n "$(port_of "$tmp/run.log")"
run_after=$(now)
rport=$(port_of "$tmp/run.log")
check "the run announced its metrics port" test -n "$rport"
scrape "$rport" "$tmp/run-early.prom"
check "kafka, early scrape: every family is documented, every one listed served (but Only after ones)" \
	doc_matches kafka "$tmp/run-early.prom"
check "kafka, early scrape: promtool check metrics prints nothing" promtool_quiet "$tmp/run-early.prom"
check "kcat produced 1000 more" kcat -P -b "$bs" -t ev -l "$tmp/more.jsonl"
drifted() { scrape "$rport" "$tmp/run.prom" && grep -q '^kiln_drift_fields_flagged{part="snapshot"} ' "$tmp/run.prom"; }
check "kafka: the snapshot of the 1000 brings the drift gauges (within 120 s)" poll 120 drifted
check "kafka: every family is documented, and every one listed is served" doc_matches kafka "$tmp/run.prom" --all
check "kafka: promtool check metrics prints nothing" promtool_quiet "$tmp/run.prom"

# ---- the cache node: the dataset's main and v1 over the file store
cat >"$tmp/c.yaml" <<YAML
store: {url: file://$tmp/store}
manifest: $tmp/m.git
dir: $tmp/cache
size_limit: 100M
pins: [ev@main, ev@v1]
listen: 127.0.0.1:0
sync_seconds: 2
YAML
cache_before=$(now)
"$kiln" cache serve "$tmp/c.yaml" >"$tmp/cache.out" 2>"$tmp/cache.log" &
cache_pid=$!
pids+=($cache_pid)
poll 60 test -n "$(port_of "$tmp/cache.log")"
cache_after=$(now)
cport=$(port_of "$tmp/cache.log")
check "the cache node announced its port" test -n "$cport"
check "cache: the v1 view is ready (within 60 s)" poll 60 test -e "$tmp/cache/views/ev/v1/ready"
shard=$(find "$tmp/cache/shards" -name '*.jsonl.zst' | head -1)
hash=$(basename "${shard:-none}" .jsonl.zst)
check "cache: a shard is served" sh -c "curl -sf -o '$tmp/shard' 'http://127.0.0.1:$cport/v1/shards/$hash' && cmp -s '$tmp/shard' '$shard'"
check "cache: an unknown path is 404" test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$cport/nowhere")" = 404
scrape "$cport" "$tmp/cache.prom"
check "cache: every family is documented, and every one listed is served" doc_matches cache "$tmp/cache.prom" --all
check "cache: promtool check metrics prints nothing" promtool_quiet "$tmp/cache.prom"
check "cache: the shard request counted" grep -q '^kiln_cache_requests_total{code="200"} [1-9]' "$tmp/cache.prom"

# ---- kiln_build_info and kiln --version
"$kiln" --version >"$tmp/version.txt"
check "kiln --version: the first line is still 'kiln X.Y.Z'" grep -Eqx 'kiln [0-9]+\.[0-9]+\.[0-9]+' <(head -1 "$tmp/version.txt")
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "${KILN_BUILDDIR:-$src/build}/config.h" 2>/dev/null)
[ -n "$version" ] || version=$(head -1 "$tmp/version.txt" | cut -d' ' -f2)
if [ -e "$src/.git" ]; then
	commit=$(git -C "$src" rev-parse --short=12 HEAD)
else
	commit=unknown
fi
lib_versions=(zstd="$(pkg-config --modversion libzstd)" librdkafka="$(pkg-config --modversion rdkafka)"
	libgit2="$(pkg-config --modversion libgit2)")
echo "expected: version=$version commit=$commit ${lib_versions[*]}"
for d in run cache; do
	check "$d: kiln_build_info = version, commit, library versions; kiln --version agrees" \
		"$py" "$check_py" build-info "$tmp/$d.prom" "$tmp/version.txt" version="$version" commit="$commit" "${lib_versions[@]}"
done
kcat_rdkafka=$(kcat -V 2>&1 | grep -o 'librdkafka [0-9][0-9.]*' | head -1 | cut -d' ' -f2)
check "librdkafka as kcat reports the one it loads ($kcat_rdkafka)" grep -q "librdkafka=${kcat_rdkafka:-none} " "$tmp/version.txt"

# ---- process_* against /proc
check "kafka: process_* match /proc/PID" "$py" "$check_py" process "http://127.0.0.1:$rport/metrics" "$run_pid" "$run_before" "$run_after"
check "cache: process_* match /proc/PID" "$py" "$check_py" process "http://127.0.0.1:$cport/metrics" "$cache_pid" "$cache_before" "$cache_after"
check "kafka: process_open_fds grows with 8 connections held" "$py" "$check_py" fds "http://127.0.0.1:$rport/metrics" 8
check "cache: process_open_fds grows with 8 connections held" "$py" "$check_py" fds "http://127.0.0.1:$cport/metrics" 8

stops() { # PID: SIGTERM ends it with exit 0 (under the sanitizers: nothing reported)
	local rc=0
	kill -TERM "$1" && wait "$1" || rc=$?
	[ "$rc" -eq 0 ] || echo "  exit $rc"
	[ "$rc" -eq 0 ]
}
check "kafka: SIGTERM exits 0" stops "$run_pid"
check "cache: SIGTERM exits 0" stops "$cache_pid"
for f in run-early run cache; do cp "$tmp/$f.prom" "$tmp/$f.prom.out"; done
check "no personal value in a log or a scrape" pii_scan_logs
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
