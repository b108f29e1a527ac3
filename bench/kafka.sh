#!/usr/bin/env bash
# Kafka -> curated throughput: `kiln run PIPELINE --stop-at-end` (kafka source,
# file store, fresh manifest, raw zone on) next to `kcat` consuming the same
# topic of the same embedded broker (`kiln broker`, librdkafka's mock
# cluster), in the same run.
#
# Usage: bench/kafka.sh [KILN_BINARY]       (default: <repo>/build/kiln)
# Env:   RECORDS     generated records (default 1000000, about 420 MB)
#        PARTITIONS  topic partitions (default: enough for <= 3.5 MB each,
#                    at least 32; a mock partition keeps only about 5 MB and
#                    drops older messages as if by retention)
#        KEEP=1      keep the work directory bench/out/kafka-XXXXXX
#
# The input is generated once into bench/out/user-events-$RECORDS.jsonl
# (shared with run.sh and validate.sh) and produced to the topic before any
# timing. Then, 3 times, alternating:
#   kcat -C   assign mode, no group: the raw consume rate
#   kcat -G   a fresh consumer group: pays the mock's group join like kiln
#   kiln run  a fresh group, store and manifest each time
# The best (minimum) wall time of each counts. Besides its wall time, kiln's
# time from its first "assigned" log event to its "stopped" event (consume,
# curate, write raw zone and shards, commit; no process start, no join) is
# reported. Every kiln run is checked: records in == produced (stdout and
# stats.json), no quarantine, `zstd -t` of every shard and raw-zone object.
# The topic's low watermarks must stay 0 (nothing dropped). MB = 10^6 bytes.
set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
root=$(cd -- "$script_dir/.." && pwd)

# An explicit KILN_BINARY is taken relative to the caller's directory (or
# looked up in PATH when it has no slash); the default relative to the root.
if [[ $# -ge 1 ]]; then
	kiln=$1
	if [[ $kiln != */* ]]; then
		kiln=$(command -v -- "$kiln" || true)
		[[ -n $kiln ]] || { echo "kafka.sh: $1 not found in PATH" >&2; exit 1; }
	elif [[ $kiln != /* ]]; then
		kiln=$PWD/$kiln
	fi
else
	kiln=$root/build/kiln
fi
cd "$root"

records=${RECORDS:-1000000}
runs=3
topic=bench
contract=$root/contracts/user-events.yaml
gen=bench/gen-user-events.py
out_dir=bench/out
input=$out_dir/user-events-$records.jsonl

die() { echo "kafka.sh: $*" >&2; exit 1; }

[[ $records =~ ^[0-9]+$ && $records -gt 0 ]] || die "RECORDS must be a positive integer"
[[ -x $kiln ]] || die "kiln binary not found or not executable: $kiln"
for tool in kcat zstd git; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
[[ -x /usr/bin/time ]] || die "/usr/bin/time not found (GNU time, for peak RSS)"
[[ -f $contract ]] || die "contract not found: $contract"

mkdir -p "$out_dir"
if [[ ! -s $input ]]; then
	echo "generating $records records into $input ..."
	tmp=$input.tmp.$$
	trap 'rm -f "$tmp"' EXIT
	/usr/bin/python3 "$gen" --records "$records" --seed 1 -o "$tmp" ||
		die "generator failed"
	mv -f "$tmp" "$input"
	trap - EXIT
fi

bytes=$(wc -c <"$input")
bytes=${bytes//[[:space:]]/}
lines=$(wc -l <"$input")
lines=${lines//[[:space:]]/}
((lines == records)) || die "$input has $lines lines, expected $records"
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }')
partitions=${PARTITIONS:-$(awk -v b="$bytes" \
	'BEGIN { p = int((b + 3.5e6 - 1) / 3.5e6); print (p < 32) ? 32 : p }')}
[[ $partitions =~ ^[0-9]+$ && $partitions -gt 0 ]] || die "PARTITIONS must be a positive integer"
per_part=$(awk -v b="$bytes" -v p="$partitions" 'BEGIN { printf "%.1f", b / p / 1e6 }')

work=$(mktemp -d "$root/$out_dir/kafka-XXXXXX")
broker_pid=
ok=0
cleanup() {
	if [[ -n $broker_pid ]]; then
		kill "$broker_pid" 2>/dev/null || true
		wait "$broker_pid" 2>/dev/null || true
	fi
	if [[ ${KEEP:-0} == 1 || $ok != 1 ]]; then
		echo "kafka.sh: work directory kept: $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

now() {
	if [[ -n ${EPOCHREALTIME:-} ]]; then
		echo "${EPOCHREALTIME/,/.}"
	else
		date +%s.%N
	fi
}
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b < a) ? b : a }'; }
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b > a) ? b : a }'; }
sub_s() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
rate() { awk -v n="$records" -v t="$1" 'BEGIN { printf "%.0f", n / t }'; }
krate() { awk -v n="$records" -v t="$1" 'BEGIN { printf "%.0fk", n / t / 1000 }'; }
ratio() { awk -v k="$1" -v c="$2" 'BEGIN { printf "%.2f", c / k }'; } # KILN_S KCAT_S

# --- broker and topic -------------------------------------------------------
"$kiln" broker --partitions "$partitions" --topics "$topic" --port-file "$work/port" \
	>"$work/broker.log" 2>&1 &
broker_pid=$!
for ((i = 0; i < 300; i++)); do
	[[ -s $work/port ]] && break
	kill -0 "$broker_pid" 2>/dev/null || die "kiln broker exited: $(cat "$work/broker.log")"
	sleep 0.1
done
[[ -s $work/port ]] || die "kiln broker wrote no port file in 30 s"
bootstrap=$(head -n 1 "$work/port")

# watermarks low|high: prints the sum over partitions and the maximum
watermarks() {
	local which=$1 q=-1 args=() p
	[[ $which == low ]] && q=-2
	for ((p = 0; p < partitions; p++)); do args+=(-t "$topic:$p:$q"); done
	kcat -Q -b "$bootstrap" "${args[@]}" |
		awk -v n="$partitions" '/ offset / { s += $NF; if ($NF > m) m = $NF; c++ }
			END { if (c != n) exit 1; print s + 0, m + 0 }' ||
		die "kcat -Q ($which watermarks) failed or answered for too few partitions"
}

# Produce: the input cut into $partitions line-aligned parts, part i to
# partition i, 4 kcat producers at a time.
echo "input: $input ($mb MB, $records records), $(nproc) CPUs"
echo "broker: $bootstrap, topic $topic, $partitions partitions (~$per_part MB each)"
split -n "l/$partitions" -d -a 4 "$input" "$work/part."
t0=$(now)
pids=()
for ((p = 0; p < partitions; p++)); do
	kcat -P -b "$bootstrap" -t "$topic" -p "$p" -l "$(printf '%s/part.%04d' "$work" "$p")" &
	pids+=($!)
	if ((${#pids[@]} == 4 || p == partitions - 1)); then
		for pid in "${pids[@]}"; do wait "$pid" || die "kcat -P failed (partition <= $p)"; done
		pids=()
	fi
done
t1=$(now)
rm -f "$work"/part.*
wm=$(watermarks high)
read -r high_sum _ <<<"$wm"
wm=$(watermarks low)
read -r low_sum low_max <<<"$wm"
echo "produced with kcat -P in $(sub_s "$t0" "$t1")s: high watermarks sum $high_sum, low watermarks max $low_max"
((high_sum == records)) || die "topic holds $high_sum offsets, produced $records"
if ((low_sum != 0)); then
	echo "WARNING: $low_sum records already dropped by the mock's retention (lower RECORDS or raise PARTITIONS)"
	die "the comparison needs every record readable"
fi

# One untimed pass to check what kcat reads (and to warm the broker).
n=$(kcat -C -b "$bootstrap" -t "$topic" -e -q -o beginning -f '%s\n' | wc -l)
((n == records)) || die "kcat -C read $n records, expected $records"

# --- kiln pipeline ----------------------------------------------------------
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/key")
pipeline=$work/pipeline.yaml
cat >"$pipeline" <<EOF
dataset: bench
contract: $contract
source:
  kind: kafka
  brokers: $bootstrap
  topics: [$topic]
  group: bench-$$-0
  options: {session.timeout.ms: "6000"}
pseudonymise: {key_file: $work/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$work/store}
manifest: {repo: $work/m.git}
snapshot: {records: 0, seconds: 0}
raw: {enabled: true}
EOF

ts_of() { # EVENT FIRST|LAST < log: epoch seconds of that event
	local line
	if [[ $2 == first ]]; then
		line=$(grep -m 1 "\"event\":\"$1\"" "$work/kiln.err" || true)
	else
		line=$(grep "\"event\":\"$1\"" "$work/kiln.err" | tail -n 1 || true)
	fi
	[[ $line =~ \"ts\":\"([^\"]+)\" ]] || die "no \"$1\" event in kiln's log ($work/kiln.err)"
	date -d "${BASH_REMATCH[1]}" +%s.%N
}

# kiln_run RUN: fresh store, manifest and group; sets k_wall k_proc k_join
# k_rss k_cpu
kiln_run() {
	local rc=0 t0 t1 got
	rm -rf "$work/store" "$work/m.git"
	t0=$(now)
	/usr/bin/time -v -o "$work/time.txt" "$kiln" run "$pipeline" --stop-at-end \
		--set "source.group=bench-$$-$1" >"$work/kiln.out" 2>"$work/kiln.err" || rc=$?
	t1=$(now)
	((rc == 0)) || die "kiln run failed (exit $rc); see $work/kiln.err"
	k_wall=$(sub_s "$t0" "$t1")
	k_rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$work/time.txt")
	k_cpu=$(awk -F': ' '/(User|System) time \(seconds\)/ { s += $2 } END { printf "%.2f", s }' "$work/time.txt")
	local started assigned stopped
	started=$(ts_of started first)
	assigned=$(ts_of assigned first)
	stopped=$(ts_of stopped last)
	k_proc=$(sub_s "$assigned" "$stopped")
	k_join=$(sub_s "$started" "$assigned")
	# verify the output (untimed)
	got=$(sed -n 's/.*: +\([0-9][0-9]*\) records.*/\1/p' "$work/kiln.out" | head -n 1)
	[[ $got == "$records" ]] || die "kiln stdout says +${got:-?} records, expected $records: $(cat "$work/kiln.out")"
	git --git-dir "$work/m.git" show bench/main:stats.json >"$work/stats.json" ||
		die "no stats.json in bench/main of $work/m.git"
	grep -q "\"records_in\": *${records}[,}]" "$work/stats.json" ||
		die "stats.json records_in != $records: $(cat "$work/stats.json")"
	grep -q '"quarantined": *0[,}]' "$work/stats.json" ||
		die "kiln quarantined records: $(cat "$work/stats.json")"
	k_shards=$(find "$work/store/shards" -name '*.zst' | wc -l)
	k_raw=$(find "$work/store/raw" -name '*.zst' | wc -l)
	((k_shards > 0 && k_raw > 0)) || die "no shards ($k_shards) or raw objects ($k_raw) in $work/store"
	find "$work/store" -name '*.zst' -print0 | xargs -0 zstd -t -q ||
		die "zstd -t failed on kiln's store"
	k_store=$(du -sb "$work/store" | awk '{ printf "%.1f", $1 / 1e6 }')
}

# time_kcat NAME ARGS...: seconds for kcat ARGS (stdout to /dev/null)
time_kcat() {
	local name=$1 t0 t1 rc=0
	shift
	t0=$(now)
	kcat "$@" >/dev/null || rc=$?
	t1=$(now)
	((rc == 0)) || die "$name failed (exit $rc)"
	sub_s "$t0" "$t1"
}

best_c='' best_g='' best_k='' best_p='' rss_max=''
for ((i = 1; i <= runs; i++)); do
	tc=$(time_kcat "kcat -C" -C -b "$bootstrap" -t "$topic" -e -q -o beginning -f '%s\n')
	tg=$(time_kcat "kcat -G" -G "bench-kcat-$$-$i" -b "$bootstrap" -e -q -o beginning -f '%s\n' "$topic")
	kiln_run "$i"
	echo "run $i: kcat -C ${tc}s  kcat -G ${tg}s  kiln ${k_wall}s" \
		"(join ${k_join}s, assigned->stopped ${k_proc}s, CPU ${k_cpu}s, peak RSS $((k_rss / 1024)) MiB)"
	best_c=$(min "$best_c" "$tc")
	best_g=$(min "$best_g" "$tg")
	best_k=$(min "$best_k" "$k_wall")
	best_p=$(min "$best_p" "$k_proc")
	rss_max=$(max "$rss_max" "$k_rss")
done
cat "$work/kiln.out"
echo "kiln output checked each run: +$records records in (stdout, stats.json), 0 quarantined," \
	"$k_shards shards + $k_raw raw objects pass zstd -t ($k_store MB in the store)"

wm=$(watermarks low)
read -r low_sum low_max <<<"$wm"
if ((low_sum == 0)); then
	echo "low watermarks: all 0 after the runs (nothing dropped by the mock's retention)"
else
	echo "WARNING: low watermarks sum $low_sum after the runs (records dropped by retention)"
fi

echo "records: $records, $mb MB, $partitions partitions"
echo "kcat -C:         $(rate "$best_c") rec/s (best of $runs: ${best_c}s)"
echo "kcat -G:         $(rate "$best_g") rec/s (best of $runs: ${best_g}s, includes the group join)"
echo "kiln run:        $(rate "$best_k") rec/s (best of $runs: ${best_k}s, includes the group join)"
echo "kiln processing: $(rate "$best_p") rec/s (best of $runs, assigned->stopped: ${best_p}s)"
echo "kiln peak RSS:   $rss_max KB ($(awk -v k="$rss_max" 'BEGIN { printf "%.1f", k / 1024 }') MiB, max of $runs)"
echo "ratio kiln/kcat -C: $(ratio "$best_k" "$best_c") (target >= 0.5)"
echo "ratio kiln/kcat -G: $(ratio "$best_k" "$best_g")"
echo "ratio kiln assigned->stopped / kcat -C: $(ratio "$best_p" "$best_c")"
echo "kafka bench: kiln/kcat -C = $(ratio "$best_k" "$best_c") (kiln $(krate "$best_k") rec/s," \
	"kcat $(krate "$best_c") rec/s; $records records, $mb MB)"
ok=1
