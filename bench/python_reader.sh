#!/usr/bin/env bash
# Records per second through the Python reader (python/kiln over libkiln),
# against the same shards read by a plain Python loop over python3-zstandard
# stream readers (no hash check), and against `kiln cat` to /dev/null, in
# the same run, alternating, ROUNDS times (medians):
#   kiln.py  sum(1 for _ in version.records("train")): each shard fetched
#            from the file store, its BLAKE2b-256 checked, decompressed and
#            cut into records (bytes), the next shard read ahead in a thread
#   zstd.py  for each shard file of the split, in the same order:
#            io.BufferedReader(ZstdDecompressor().stream_reader(f)) line by
#            line (what a job that trusts its files would write)
#   cat      kiln cat DS@v1 > /dev/null (the same rule, C all the way)
# Each Python reader runs in its own process (its import time excluded).
# ratio = reference time / kiln.py time (above 1: the kiln reader is faster).
#
# Usage: bench/python_reader.sh [KILN_BINARY]      (default: <repo>/build/kiln)
# Env:   ROUNDS (5), RECORDS (400000), SHARD (4M: shards.target_bytes)
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
kiln=${1:-$root/build/kiln}
[[ $kiln == /* ]] || kiln=$PWD/$kiln
cd "$root"
[[ -x $kiln ]] || { echo "python_reader.sh: $kiln is not an executable (build kiln first)" >&2; exit 1; }
rounds=${ROUNDS:-5}
records=${RECORDS:-400000}
shard=${SHARD:-4M}
py=/usr/bin/python3
out=bench/out
mkdir -p "$out"
KILN_LIBRARY=$(dirname "$kiln")/.libs/libkiln.so.1
export KILN_LIBRARY PYTHONPATH=$root/python

. bench/lib.sh
data=$root/$out/reader-data-$records-$shard
bench_version "$data" "$records" "$shard"
"$kiln" ls user-events@v1 --split train --format json |
	$py -c 'import json, sys
for l in sys.stdin: print(json.loads(l)["key"])' >"$data/keys"
n=$("$kiln" cat user-events@v1 | wc -l)
raw=$("$kiln" ls user-events@v1 --split train --format json | $py -c 'import json, sys; print(sum(json.loads(l)["raw_bytes"] for l in sys.stdin))')

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# each prints its own seconds (after imports) and checks the record count
cat >"$tmp/read_kiln.py" <<'PY'
import sys, time, kiln
v = kiln.open("user-events@v1")
t = time.perf_counter()
n = sum(1 for _ in v.records("train"))
print(time.perf_counter() - t)
assert n == int(sys.argv[1]), n
PY
cat >"$tmp/read_zstd.py" <<'PY'
import io, sys, time, zstandard
store, keys = sys.argv[2], open(sys.argv[3]).read().split()
t = time.perf_counter()
n = 0
d = zstandard.ZstdDecompressor()
for k in keys:
    with open("%s/%s" % (store, k), "rb") as f:
        for _ in io.BufferedReader(d.stream_reader(f)):
            n += 1
print(time.perf_counter() - t)
assert n == int(sys.argv[1]), n
PY
: >"$tmp/k" && : >"$tmp/z" && : >"$tmp/c"
for _ in $(seq "$rounds"); do
	$py "$tmp/read_kiln.py" "$n" >>"$tmp/k"
	$py "$tmp/read_zstd.py" "$n" "$data/store" "$data/keys" >>"$tmp/z"
	secs "$kiln" cat user-events@v1 >>"$tmp/c"
done
k=$(median <"$tmp/k") z=$(median <"$tmp/z") c=$(median <"$tmp/c")
printf '\nreading the train split: %d records, %d shards, %.1f MB of JSON Lines; %d CPUs; median of %d rounds\n' \
	"$n" "$(wc -l <"$data/keys")" "$(echo "$raw / 1000000" | bc -l)" "$(nproc)" "$rounds"
printf '%-58s | %8s | %10s | %s\n' what seconds records/s ratio
printf '%-58s | %8.3f | %10.0f | -\n' "kiln (Python): verify, decompress, records as bytes" "$k" "$(echo "$n / $k" | bc -l)"
printf '%-58s | %8.3f | %10.0f | %.2f\n' "python3-zstandard stream readers, line by line (no hash)" "$z" "$(echo "$n / $z" | bc -l)" "$(echo "$z / $k" | bc -l)"
printf '%-58s | %8.3f | %10.0f | %.2f\n' "kiln cat > /dev/null (process start included)" "$c" "$(echo "$n / $c" | bc -l)" "$(echo "$c / $k" | bc -l)"
