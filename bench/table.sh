#!/usr/bin/env bash
# Every speed ratio of issue 12 in one table, each measured side by side in
# one run (what `make bench` prints first):
#   kiln run workers=1 against zstd -3 -T1 on the same file (wall and CPU),
#     on user-events and on orders (contracts/bench-orders.yaml);
#   workers=2 against workers=1 as a speedup, over the bound two zstd -3 -T1
#     give on this machine (one after the other / both in parallel), and
#     how many cores kiln keeps busy (CPU / wall) next to two zstd in parallel;
#   kiln run (default workers) against bench/curate.py, the same work in
#     plain Python (checked first on a sample: same tokens and splits);
#   kiln validate against zstd -3 -T1, on both contracts;
#   Kafka (bench/kafka.sh: kiln's assigned->stopped time against the slower
#     of kcat -C and kiln's file source on the same records);
#   kiln run's peak RSS at two input sizes (under 256 MiB, flat);
# and issue 29's rows:
#   the serial share: the CPU time of what runs one at a time (kiln's main
#     thread, from /proc/PID/task/* by bench/threads.py, plus the workers'
#     serial turns, reading and delivering, which kiln run --json reports as
#     serial_cpu_s) against the whole process, workers=2 and 4, with the
#     main thread's share alone on a row below, and CPU time per thread, by
#     name, under the table;
#   CPU work per byte (zstd -3 -T1 CPU / kiln run workers=1 CPU), run and
#     validate on a third contract too (contracts/bench-mixed.yaml, records
#     from bench/gen-mixed.py);
#   kiln run with the profile against profile.enabled=false;
#   workers=16 against workers=1 (only with 16 cores or more);
#   the readers on a promoted version's train split (bench/read_split.py):
#     the Python reader against python3-zstandard (one-shot and stream
#     loops), on all cores and on one (taskset -c 0); kiln.torch.DataLoader
#     num_workers=2 against 0; kiln cat against zstd -dc of the same shards.
# The commands of each input are run in turn, the round repeated REPS times
# (alternating, so a noisy neighbour hits all of them alike); each cell is
# the median of its REPS wall times with [min-max] beside it. Ratios are
# reference time / kiln time (> 1: kiln is faster), of the medians.
#
# Usage: bench/table.sh [KILN_BINARY]       (default: <repo>/build/kiln)
# Env:   RECORDS         user-events records (default 300000, ~126 MB)
#        ORDERS_RECORDS  orders records (default RECORDS / 1.5, a similar size)
#        MIXED_RECORDS   bench-mixed records (default RECORDS / 2.5, a similar size)
#        READER_RECORDS  user-events records of the version the readers read
#                        (default RECORDS; 4 MB shards; its train split is read)
#        RSS_RECORDS     sizes for the memory rows (default "1000000 4000000")
#        KAFKA_RECORDS   records for the Kafka row (default 80000; 0 skips it)
#        REPS            rounds (default 5)
# Inputs are generated once into bench/out/ (shared with run.sh, validate.sh
# and kafka.sh) and reused. MB = 10^6 bytes, MiB = 2^20.
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
kiln=${1:-$root/build/kiln}
[[ $kiln == /* ]] || kiln=$PWD/$kiln
cd "$root"

die() { echo "table.sh: $*" >&2; exit 1; }

records=${RECORDS:-300000}
orders_records=${ORDERS_RECORDS:-$((records * 2 / 3))}
mixed_records=${MIXED_RECORDS:-$((records * 2 / 5))}
reader_records=${READER_RECORDS:-$records}
rss_records=${RSS_RECORDS:-"1000000 4000000"}
kafka_records=${KAFKA_RECORDS:-80000}
reps=${REPS:-5}
py=/usr/bin/python3
for v in records orders_records mixed_records reader_records kafka_records reps; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "${v^^} must be a number"
done
((records > 0 && orders_records > 0 && mixed_records > 0 && reader_records > 0 && reps > 0)) ||
	die "RECORDS, ORDERS_RECORDS, MIXED_RECORDS, READER_RECORDS and REPS must be positive"
[[ -x $kiln ]] || die "$kiln is not an executable (build kiln first)"
[[ -x /usr/bin/time ]] || die "/usr/bin/time not found (GNU time)"
command -v zstd >/dev/null || die "zstd not found"
$py -c 'import zstandard' 2>/dev/null || die "bench/curate.py needs python3-zstandard (apt-get install python3-zstandard)"

out=bench/out
mkdir -p "$out"
work=$(mktemp -d "$root/$out/table-XXXXXX")
trap 'rm -rf "$work"' EXIT
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/key")

input_for() { # KIND N -> path of a generated input (user-events, orders or mixed)
	local f=$root/$out/$1-$2.jsonl gen=bench/gen-$1.py
	if [[ ! -s $f ]]; then
		echo "generating $2 $1 records into $f ..." >&2
		$py "$gen" --records "$2" --seed 1 -o "$f.tmp"
		mv "$f.tmp" "$f"
	fi
	echo "$f"
}

# --- measuring ---------------------------------------------------------------

# timed NAME CMD...: runs CMD, appends "wall cpu rss_kb" to $work/NAME.t
timed() {
	local name=$1 t0 t1 rc=0 u s m
	shift
	t0=$EPOCHREALTIME
	/usr/bin/time -f '%U %S %M' -o "$work/time" "$@" >"$work/$name.log" 2>&1 || rc=$?
	t1=$EPOCHREALTIME
	((rc == 0)) || die "$name failed (exit $rc): $(tail -n 3 "$work/$name.log")"
	read -r u s m < <(tail -n 1 "$work/time")
	awk -v a="$t0" -v b="$t1" -v u="$u" -v s="$s" -v m="$m" \
		'BEGIN { printf "%.4f %.2f %d\n", b - a, u + s, m }' >>"$work/$name.t"
}

# kiln_run NAME PIPELINE INPUT [ARGS...]: one timed kiln run, fresh store and manifest
kiln_run() {
	local name=$1 pipeline=$2 input=$3
	shift 3
	rm -rf "$work/store" "$work/m.git"
	timed "$name" env KILN_INPUT="$input" KILN_KEY_FILE="$work/key" KILN_STORE="file://$work/store" \
		KILN_MANIFEST="$work/m.git" "$kiln" run "$pipeline" "$@"
}

zstd1() { timed "$1" zstd -3 -T1 -q -c "$2" -o /dev/null; }

# threads_run NAME PIPELINE INPUT [ARGS...]: kiln_run under bench/threads.py:
# appends "wall cpu main_thread_cpu rss_kb serial_turns_cpu" to $work/NAME.t
# and keeps the last run's CPU time per thread in $work/NAME.threads
threads_run() {
	local name=$1 pipeline=$2 input=$3 rc=0
	shift 3
	rm -rf "$work/store" "$work/m.git"
	env KILN_INPUT="$input" KILN_KEY_FILE="$work/key" KILN_STORE="file://$work/store" KILN_MANIFEST="$work/m.git" \
		$py bench/threads.py "$work/$name.threads" -- "$kiln" run "$pipeline" "$@" --json \
		>"$work/$name.out" 2>"$work/$name.log" || rc=$?
	((rc == 0)) || die "$name failed (exit $rc): $(tail -n 3 "$work/$name.log")"
	$py -c 'import json, sys
lines = open(sys.argv[1]).read().splitlines()
print(lines[-1], json.loads(lines[0])["serial_cpu_s"])' "$work/$name.out" >>"$work/$name.t"
}

# col NAME [COLUMN]: the values of one column (1 wall, 2 CPU, 3 RSS) of NAME
col() { awk -v c="${2:-1}" '{ print $c }' "$work/$1.t"; }
median() { sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
spread() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.2f-%.2f", lo, hi }'; }
med() { col "$1" "${2:-1}" | median; }
cell() { printf '%.2f s [%s]' "$(med "$1" "${2:-1}")" "$(col "$1" "${2:-1}" | spread)"; } # NAME [COLUMN]
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }'; }
f2() { printf '%.2f' "$1"; } # shown with 2 decimals, judged on 4
met() { awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN { ok = op == ">=" ? v >= t : op == "<" ? v < t : v <= t; print ok ? "yes" : "NO" }'; }

rows=$work/rows
printf 'what\tkiln\treference\tratio\ttarget\tmet?\n' >"$rows"
row() { local IFS=$'\t'; echo "$*" >>"$rows"; }

# --- the reference is the same work: curate.py against kiln on a sample -------
sample=$work/sample.jsonl
$py bench/gen-user-events.py --records 2000 --seed 3 -o "$sample"
rm -rf "$work/store" "$work/m.git"
KILN_INPUT=$sample KILN_KEY_FILE=$work/key KILN_STORE=file://$work/store KILN_MANIFEST=$work/m.git \
	"$kiln" run pipelines/user-events.yaml >/dev/null
$py bench/curate.py --key "$work/key" -o "$work/cur" "$sample" >/dev/null
for s in train dev test; do
	"$kiln" cat user-events --split "$s" --manifest "$work/m.git" --store "file://$work/store" >"$work/kiln.$s"
	zstd -dcq "$work/cur/$s.jsonl.zst" >"$work/py.$s"
done
$py - "$work" <<'EOF' || die "bench/curate.py does not curate like kiln run (see above)"
import json, sys
work, bad, n = sys.argv[1], 0, 0
for split in ("train", "dev", "test"):
    k = {r["event_id"]: r for r in map(json.loads, open("%s/kiln.%s" % (work, split), "rb"))}
    p = {r["event_id"]: r for r in map(json.loads, open("%s/py.%s" % (work, split), "rb"))}
    n += len(k)
    if set(k) != set(p):
        print("%s: %d records in one split only" % (split, len(set(k) ^ set(p))))
        bad += 1
    bad += sum(k[e] != p[e] for e in set(k) & set(p))
sys.exit(1 if bad or n != 2000 else 0)
EOF
echo "bench/curate.py checked: on 2000 records its tokens, splits and curated records equal kiln's" >&2

# --- user-events and orders: kiln run, validate, zstd, scaling, Python ----------
ue=$(input_for user-events "$records")
od=$(input_for orders "$orders_records")
mx=$(input_for mixed "$mixed_records")
cpus=$(nproc)
mb() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.0f MB", b / 1e6 }'; }
echo "inputs: $ue ($(mb "$ue")), $od ($(mb "$od")), $mx ($(mb "$mx")); $cpus CPUs, $reps rounds" >&2

round() { # TAG PIPELINE CONTRACT INPUT [python]: every command of one input, once
	kiln_run "$1.w1" "$2" "$4" --set workers=1
	zstd1 "$1.zstd" "$4"
	kiln_run "$1.w2" "$2" "$4" --set workers=2
	# shellcheck disable=SC2016 # $1 is the inner shell's
	timed "$1.seq" bash -c 'zstd -3 -T1 -q -c "$1" -o /dev/null && zstd -3 -T1 -q -c "$1" -o /dev/null' _ "$4"
	# shellcheck disable=SC2016
	timed "$1.par" bash -c 'zstd -3 -T1 -q -c "$1" -o /dev/null & p=$!; zstd -3 -T1 -q -c "$1" -o /dev/null && wait $p' _ "$4"
	timed "$1.validate" "$kiln" validate --contract "$3" -q "$4"
	if [[ ${5:-} == python ]]; then
		kiln_run "$1.wdef" "$2" "$4"
		kiln_run "$1.noprof" "$2" "$4" --set profile.enabled=false
		rm -rf "$work/cur"
		timed "$1.py" $py bench/curate.py --key "$work/key" -o "$work/cur" "$4"
		threads_run "$1.t2" "$2" "$4" --set workers=2
		threads_run "$1.t4" "$2" "$4" --set workers=4
		((cpus < 16)) || kiln_run "$1.w16" "$2" "$4" --set workers=16
	fi
}
for ((i = 1; i <= reps; i++)); do
	echo "round $i of $reps ..." >&2
	round ue pipelines/user-events.yaml contracts/user-events.yaml "$ue" python
	round od pipelines/bench-orders.yaml contracts/bench-orders.yaml "$od"
	round mx pipelines/bench-mixed.yaml contracts/bench-mixed.yaml "$mx"
done

name_of() { case $1 in ue) echo user-events ;; od) echo orders ;; mx) echo bench-mixed ;; esac; }
for t in ue od mx; do
	case $t in
	ue) label="user-events, $records records ($(mb "$ue"))" ;;
	od) label="orders, $orders_records records ($(mb "$od"))" ;;
	mx) label="bench-mixed, $mixed_records records ($(mb "$mx"))" ;;
	esac
	r=$(div "$(med $t.zstd)" "$(med $t.w1)")
	row "kiln run workers=1, $label" "$(cell $t.w1)" "zstd -3 -T1 $(cell $t.zstd)" "$(f2 "$r")" ">= 0.5" "$(met "$r" ">=" 0.5)"
	r=$(div "$(med $t.zstd 2)" "$(med $t.w1 2)")
	row "  CPU work per byte: same, CPU time (user+sys)" "$(cell $t.w1 2)" "$(cell $t.zstd 2)" "$(f2 "$r")" ">= 0.5" "$(met "$r" ">=" 0.5)"
done
for t in ue od mx; do
	label=$(name_of $t)
	speedup=$(div "$(med $t.w1)" "$(med $t.w2)")
	bound=$(div "$(med $t.seq)" "$(med $t.par)")
	r=$(div "$speedup" "$bound")
	row "workers=2 / workers=1, $label: speedup / bound" "$(f2 "$speedup")x (w2 $(cell $t.w2))" \
		"$(f2 "$bound")x (2 zstd -T1 seq $(cell $t.seq), par $(cell $t.par))" "$(f2 "$r")" ">= 0.9" "$(met "$r" ">=" 0.9)"
done
# kiln compresses on libzstd's threads while it curates, so workers=1
# already keeps more than one core busy: how busy, next to the bound
for t in ue od mx; do
	label=$(name_of $t)
	for w in w1 w2; do
		busy=$(div "$(med $t.$w 2)" "$(med $t.$w)")
		bound=$(div "$(med $t.par 2)" "$(med $t.par)")
		r=$(div "$busy" "$bound")
		row "  cores busy (CPU / wall) at workers=${w#w}, $label" "$(f2 "$busy")" "2 zstd -T1 in parallel $(f2 "$bound")" "$(f2 "$r")" "(info)" "-"
	done
done
r=$(div "$(med ue.py)" "$(med ue.wdef)")
row "kiln run (default workers) vs bench/curate.py, user-events" "$(cell ue.wdef)" "curate.py $(cell ue.py)" "$(f2 "$r")" \
	">= 10" "$(met "$r" ">=" 10)"
for t in ue od mx; do
	label=$(name_of $t)
	[[ $t != od ]] || label=bench-orders
	r=$(div "$(med $t.zstd)" "$(med $t.validate)")
	row "kiln validate, $label" "$(cell $t.validate)" "zstd -3 -T1 $(cell $t.zstd)" "$(f2 "$r")" ">= 2.0" "$(met "$r" ">=" 2.0)"
done
# kiln's main thread against the whole process, from /proc/PID/task/*/stat
# (bench/threads.py); it sets the run up, waits and commits, while the
# curate-N threads read and deliver in turn (docs/ARCHITECTURE.md, "The
# threads of a run")
for w in 2 4; do
	awk '{ print $3 + $5 }' "$work/ue.t$w.t" >"$work/ue.s$w.t"
	share=$(div "$(med ue.s$w)" "$(med ue.t$w 2)")
	row "serial share: (main thread + serial turns) CPU / process CPU, workers=$w, user-events" \
		"main + turns $(cell ue.s$w)" "process $(cell ue.t$w 2)" "$(printf '%.3f' "$share")" "<= 0.03" \
		"$(met "$share" "<=" 0.03)"
	share=$(div "$(med ue.t$w 3)" "$(med ue.t$w 2)")
	row "  main thread alone / process CPU, workers=$w" "main $(cell ue.t$w 3)" "process $(cell ue.t$w 2)" \
		"$(printf '%.3f' "$share")" "(info)" "-"
done
r=$(div "$(med ue.noprof)" "$(med ue.wdef)")
row "kiln run with profile / without (profile.enabled=false), user-events" "$(cell ue.wdef)" \
	"without $(cell ue.noprof)" "$(printf '%.3f' "$r")" ">= 0.95" "$(met "$r" ">=" 0.95)"
if ((cpus >= 16)); then
	r=$(div "$(med ue.w1)" "$(med ue.w16)")
	row "workers=16 / workers=1, user-events: speedup" "w16 $(cell ue.w16)" "w1 $(cell ue.w1)" "$(f2 "$r")x" ">= 10" \
		"$(met "$r" ">=" 10)"
else
	row "workers=16 / workers=1, user-events" "not measured ($cpus cores)" "-" "-" ">= 10" "-"
fi

# --- readers: the train split of a promoted user-events version --------------
# (bench/lib.sh's bench_version: READER_RECORDS records in 4 MB shards, kept
# in bench/out between runs); each Python way in its own process, its import
# time excluded (bench/read_split.py); "one core" is taskset -c 0
rdata=$root/$out/reader-data-$reader_records-4M
# shellcheck source=bench/lib.sh disable=SC2034 # tmp is lib.sh's
(tmp=$work && . bench/lib.sh && bench_version "$rdata" "$reader_records" 4M) >&2
renv=(env KILN_MANIFEST="$rdata/m.git" KILN_STORE="file://$rdata/store"
	KILN_LIBRARY="$(dirname "$kiln")/.libs/libkiln.so.1" PYTHONPATH="$root/python")
"${renv[@]}" "$kiln" ls user-events@v1 --split train --format json >"$work/train.json"
$py -c 'import json, sys
for l in open(sys.argv[1]): print(json.loads(l)["key"])' "$work/train.json" >"$work/keys"
rmb=$($py -c 'import json, sys
print("%.0f" % (sum(json.loads(l)["raw_bytes"] for l in open(sys.argv[1])) / 1e6))' "$work/train.json")
rn=$("${renv[@]}" "$kiln" cat user-events@v1 --split train | wc -l)
mapfile -t shard_files < <(sed "s|^|$rdata/store/|" "$work/keys")
pyread() { # NAME WAY [taskset -c 0]: one read of the train split, its seconds to $work/NAME.t
	local name=$1 way=$2 rc=0
	shift 2
	"${renv[@]}" "$@" $py bench/read_split.py "$way" "$rn" "$rdata/store" "$work/keys" \
		>>"$work/$name.t" 2>"$work/$name.log" || rc=$?
	((rc == 0)) || die "$name failed (exit $rc): $(tail -n 3 "$work/$name.log")"
}
one=(taskset -c 0)
for ((i = 1; i <= reps; i++)); do
	echo "readers, round $i of $reps ..." >&2
	for c in 2 1; do
		if ((c == 1)); then on=("${one[@]}"); else on=(); fi
		pyread "rd.kiln$c" kiln "${on[@]}"
		pyread "rd.oneshot$c" oneshot "${on[@]}"
		pyread "rd.stream$c" stream "${on[@]}"
		# shellcheck disable=SC2016 # $@ is the inner shell's
		timed "rd.cat$c" "${renv[@]}" "${on[@]}" bash -c '"$@" >/dev/null' _ "$kiln" cat user-events@v1 --split train
		# shellcheck disable=SC2016
		timed "rd.zstd$c" "${on[@]}" bash -c 'zstd -dcq -- "$@" >/dev/null' _ "${shard_files[@]}"
	done
	pyread rd.loader0 loader0
	pyread rd.loader2 loader2
done
what="train split of user-events@v1, $rn records ($rmb MB)"
for c in 2 1; do
	if ((c == 1)); then cores="one core (taskset -c 0)"; else cores="$cpus cores"; fi
	r=$(div "$(med rd.oneshot$c)" "$(med rd.kiln$c)")
	row "Python reader (bytes, hash verified), $cores, $what" "$(cell rd.kiln$c)" \
		"python-zstandard one-shot + split $(cell rd.oneshot$c)" "$(f2 "$r")" ">= 1.0" "$(met "$r" ">=" 1.0)"
	r=$(div "$(med rd.stream$c)" "$(med rd.kiln$c)")
	row "  same reader, $cores" "$(cell rd.kiln$c)" "python-zstandard stream_reader lines $(cell rd.stream$c)" \
		"$(f2 "$r")" ">= 1.0" "$(met "$r" ">=" 1.0)"
done
rate() { awk -v n="$rn" -v t="$(med "$1")" 'BEGIN { printf "%.0fk records/s", (t > 0 ? n / t / 1000 : 0) }'; }
r=$(div "$(med rd.loader0)" "$(med rd.loader2)")
row "kiln.torch.DataLoader num_workers=2 / num_workers=0, records/s" "$(rate rd.loader2) $(cell rd.loader2)" \
	"$(rate rd.loader0) $(cell rd.loader0)" "$(f2 "$r")" ">= 0.8" "$(met "$r" ">=" 0.8)"
for c in 2 1; do
	if ((c == 1)); then cores="one core (taskset -c 0)"; else cores="$cpus cores"; fi
	r=$(div "$(med rd.zstd$c)" "$(med rd.cat$c)")
	row "kiln cat --split train > /dev/null, $cores" "$(cell rd.cat$c)" "zstd -dc of the same shards $(cell rd.zstd$c)" \
		"$(f2 "$r")" ">= 1.0" "$(met "$r" ">=" 1.0)"
done

# --- Kafka: bench/kafka.sh, then the file source on the same records ----------
if ((kafka_records > 0)); then
	echo "Kafka: bench/kafka.sh with $kafka_records records (log: $work/kafka.out) ..." >&2
	if RECORDS=$kafka_records bench/kafka.sh "$kiln" >"$work/kafka.out" 2>&1; then
		best() { sed -n "s/^$1.*best of [0-9]*[,:][^0-9]* \([0-9.]*\)s.*/\1/p" "$work/kafka.out" | head -n 1; }
		kproc=$(best 'kiln processing:')
		kcat=$(best 'kcat -C:')
		kin=$(input_for user-events "$kafka_records")
		for ((i = 1; i <= reps; i++)); do kiln_run kfile pipelines/user-events.yaml "$kin"; done
		slower=$(awk -v a="$kcat" -v b="$(med kfile)" 'BEGIN { print (a > b ? a : b) }')
		r=$(div "$slower" "$kproc")
		row "Kafka, $kafka_records records, assigned->stopped (best of 3)" "$kproc s" \
			"slower of kcat -C ${kcat} s (best of 3), file source $(cell kfile)" "$(f2 "$r")" ">= 0.8" "$(met "$r" ">=" 0.8)"
	else
		tail -n 5 "$work/kafka.out" >&2
		row "Kafka, $kafka_records records" "bench/kafka.sh failed" "-" "-" ">= 0.8" "NO"
	fi
fi

# --- memory ------------------------------------------------------------------
first_rss=
for n in $rss_records; do
	f=$(input_for user-events "$n")
	kiln_run "rss.$n" pipelines/user-events.yaml "$f"
	mib=$(awk -v k="$(col "rss.$n" 3)" 'BEGIN { printf "%.1f", k / 1024 }')
	row "peak RSS of kiln run, $n records" "$mib MiB" "-" "-" "< 256 MiB" "$(met "$mib" "<" 256)"
	if [[ -z $first_rss ]]; then
		first_rss=$mib first_n=$n
	else
		r=$(div "$mib" "$first_rss")
		row "  flat: RSS at $n / RSS at $first_n records" "$mib MiB" "$first_rss MiB" "$(f2 "$r")" "<= 1.25" \
			"$(met "$r" "<=" 1.25)"
	fi
done

echo
echo "kiln $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?'), $(nproc) CPUs," \
	"medians of $reps rounds [min-max]; ratio = reference / kiln"
column -t -s $'\t' -o ' | ' "$rows"

# the serial-share rows per thread: kiln names its threads (curate-N, zstd, shard-feed,
# shard-w; the main thread has the process's name), each shown with its
# start order (tid order)
echo
echo "CPU time per thread, kiln run on user-events, the last round (main: the thread that sets up and commits):"
for w in 2 4; do
	total=$(tail -n 1 "$work/ue.t$w.t" | awk '{ print $2 }')
	awk -F '\t' -v w="$w" -v total="$total" '
		NR == 1 { main = $1 }
		{ tid[NR] = $1; name[NR] = $2; cpu[NR] = $3 }
		END {
			for (i = 1; i <= NR; i++) { order[i] = 1; for (j = 1; j <= NR; j++) if (tid[j] + 0 < tid[i] + 0) order[i]++ }
			printf "  workers=%s: process %.3f s\n", w, total
			for (i = 1; i <= NR; i++)
				printf "    %-28s %8.3f s  %5.1f%%\n", (tid[i] == main ? "main (" name[i] ")" : name[i] " (thread " order[i] ")"),
					cpu[i], (total > 0 ? 100 * cpu[i] / total : 0)
		}' "$work/ue.t$w.threads"
done
