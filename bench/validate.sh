#!/usr/bin/env bash
# Throughput of `kiln validate` against `zstd -3 -T1` on the same input.
#
# Usage: bench/validate.sh [KILN_BINARY]      (default: <repo>/build/kiln)
# Env:   RECORDS   number of generated records (default 1000000)
#
# The input is generated once into bench/out/user-events-$RECORDS.jsonl
# (reused when it exists and is non-empty). Each command runs 3 times,
# alternating, and the best (minimum) wall time counts. MB = 10^6 bytes.
set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
root=$(cd -- "$script_dir/.." && pwd)

# An explicit KILN_BINARY is taken relative to the caller's directory (or
# looked up in PATH when it has no slash); the default relative to the root.
if [[ $# -ge 1 ]]; then
	kiln=$1
	if [[ $kiln != */* ]]; then
		kiln=$(command -v -- "$kiln" || true)
		[[ -n $kiln ]] || { echo "validate.sh: $1 not found in PATH" >&2; exit 1; }
	elif [[ $kiln != /* ]]; then
		kiln=$PWD/$kiln
	fi
else
	kiln=$root/build/kiln
fi
cd "$root"

records=${RECORDS:-1000000}
runs=3
contract=contracts/user-events.yaml
gen=bench/gen-user-events.py
out_dir=bench/out
input=$out_dir/user-events-$records.jsonl

die() { echo "validate.sh: $*" >&2; exit 1; }

[[ $records =~ ^[0-9]+$ && $records -gt 0 ]] || die "RECORDS must be a positive integer"
[[ -x $kiln ]] || die "kiln binary not found or not executable: $kiln"
command -v zstd >/dev/null || die "zstd not found"
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
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }')

now() {
	if [[ -n ${EPOCHREALTIME:-} ]]; then
		echo "${EPOCHREALTIME/,/.}"
	else
		date +%s.%N
	fi
}

# time_cmd NAME CMD...: runs CMD (stdout to /dev/null), prints seconds.
time_cmd() {
	local name=$1 t0 t1 rc=0
	shift
	t0=$(now)
	"$@" >/dev/null || rc=$?
	t1=$(now)
	((rc == 0)) || die "$name failed (exit $rc): $*"
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }'
}

min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b < a) ? b : a }'; }

best_v=""
best_z=""
echo "input: $input ($mb MB, $records records)"
for ((i = 1; i <= runs; i++)); do
	tv=$(time_cmd "kiln validate" "$kiln" validate --contract "$contract" "$input")
	tz=$(time_cmd "zstd" zstd -3 -T1 -c "$input")
	echo "run $i: validate ${tv}s  zstd ${tz}s"
	best_v=$(min "$best_v" "$tv")
	best_z=$(min "$best_z" "$tz")
done

v_mbps=$(awk -v b="$bytes" -v t="$best_v" 'BEGIN { printf "%.1f", b / 1e6 / t }')
z_mbps=$(awk -v b="$bytes" -v t="$best_z" 'BEGIN { printf "%.1f", b / 1e6 / t }')
ratio=$(awk -v b="$bytes" -v v="$best_v" -v z="$best_z" \
	'BEGIN { printf "%.2f", (b / v) / (b / z) }')

if [[ -x /usr/bin/time ]]; then
	rss_file=$(mktemp)
	rc=0
	/usr/bin/time -f %M -o "$rss_file" \
		"$kiln" validate --contract "$contract" "$input" >/dev/null || rc=$?
	rss_kb=$(tail -n 1 "$rss_file")
	rm -f "$rss_file"
	((rc == 0)) || die "kiln validate failed (exit $rc) under /usr/bin/time"
	echo "kiln peak RSS: $rss_kb KB ($(awk -v k="$rss_kb" 'BEGIN { printf "%.1f", k / 1024 }') MiB)"
fi

echo "input size: $mb MB"
echo "kiln validate: $v_mbps MB/s (best of $runs: ${best_v}s)"
echo "zstd -3 -T1:   $z_mbps MB/s (best of $runs: ${best_z}s)"
echo "ratio validate/zstd-3-T1: $ratio (target >= 2.0)"
