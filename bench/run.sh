#!/usr/bin/env bash
# End-to-end `kiln run` (file source, file store, fresh manifest) against
# `zstd -3 -T1` on the same input, in the same run, the same run with
# profile.enabled: false (what the data profile costs: the target is at most
# 10%), plus kiln's peak RSS at two input sizes (it must stay flat).
#
# Usage: bench/run.sh [KILN_BINARY]       (default: <repo>/build/kiln)
# Env:   RECORDS      records for the throughput comparison (default 1000000)
#        RSS_RECORDS  sizes for the memory check (default "1000000 4000000")
# Inputs are generated once into bench/out/ and reused. Each timed command
# runs 3 times, alternating; the best wall time counts. MB = 10^6 bytes.
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
kiln=${1:-$root/build/kiln}
[[ $kiln == /* ]] || kiln=$PWD/$kiln
cd "$root"
[[ -x $kiln ]] || { echo "run.sh: $kiln is not an executable (build kiln first)" >&2; exit 1; }
records=${RECORDS:-1000000}
rss_records=${RSS_RECORDS:-"1000000 4000000"}
out=bench/out
mkdir -p "$out"

input_for() { # N -> path of a generated input with N records
	local f=$root/$out/user-events-$1.jsonl
	if [[ ! -s $f ]]; then
		echo "generating $1 records into $f ..." >&2
		/usr/bin/python3 bench/gen-user-events.py --records "$1" --seed 1 -o "$f.tmp"
		mv "$f.tmp" "$f"
	fi
	echo "$f"
}

work=$(mktemp -d "$root/$out/run-XXXXXX")
trap 'rm -rf "$work"' EXIT
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/key")

kiln_run() { # INPUT [--set ...] -> runs kiln into a fresh store and manifest
	local input=$1
	shift
	rm -rf "$work/store" "$work/m.git"
	KILN_INPUT=$input KILN_KEY_FILE=$work/key KILN_STORE=file://$work/store KILN_MANIFEST=$work/m.git \
		"$kiln" run pipelines/user-events.yaml "$@" >"$work/stdout"
}

now() { date +%s.%N; }

input=$(input_for "$records")
bytes=$(stat -c %s "$input")
best_kiln= best_zstd= best_noprof=
for i in 1 2 3; do
	t0=$(now); kiln_run "$input"; t1=$(now)
	zstd -3 -T1 -q -c "$input" >/dev/null; t2=$(now)
	kiln_run "$input" --set profile.enabled=false; t3=$(now)
	k=$(echo "$t1 - $t0" | bc); z=$(echo "$t2 - $t1" | bc); p=$(echo "$t3 - $t2" | bc)
	echo "run $i: kiln run ${k}s  zstd -3 -T1 ${z}s  kiln run without profile ${p}s"
	[[ -z $best_kiln ]] || (( $(echo "$k < $best_kiln" | bc) )) && best_kiln=$k
	[[ -z $best_zstd ]] || (( $(echo "$z < $best_zstd" | bc) )) && best_zstd=$z
	[[ -z $best_noprof ]] || (( $(echo "$p < $best_noprof" | bc) )) && best_noprof=$p
done
cat "$work/stdout"

for n in $rss_records; do
	f=$(input_for "$n")
	rm -rf "$work/store" "$work/m.git"
	rss=$(KILN_INPUT=$f KILN_KEY_FILE=$work/key KILN_STORE=file://$work/store KILN_MANIFEST=$work/m.git \
		/usr/bin/time -f %M "$kiln" run pipelines/user-events.yaml 2>&1 >/dev/null | tail -1)
	echo "peak RSS, $n records: $rss KB ($(echo "scale=1; $rss / 1024" | bc) MiB)"
done

mb=$(echo "scale=1; $bytes / 1000000" | bc)
echo "input: $input ($mb MB, $records records), $(nproc) CPUs"
echo "kiln run:    $(echo "scale=1; $bytes / 1000000 / $best_kiln" | bc) MB/s (best of 3: ${best_kiln}s)"
echo "zstd -3 -T1: $(echo "scale=1; $bytes / 1000000 / $best_zstd" | bc) MB/s (best of 3: ${best_zstd}s)"
echo "ratio run/zstd-3-T1: $(echo "scale=2; $best_zstd / $best_kiln" | bc) (target >= 0.5)"
echo "kiln run without profile: best of 3 ${best_noprof}s; profiled/unprofiled: $(echo "scale=3; $best_noprof / $best_kiln" | bc) (target >= 0.91, at most 10% slower)"
