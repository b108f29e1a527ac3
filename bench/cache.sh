#!/usr/bin/env bash
# Serving throughput of `kiln cache serve` against nginx serving the same
# files from the same disk, in the same run: wrk -t2 -c32 for DURATION
# seconds per case, kiln then nginx, ROUNDS times (alternating; the best
# round of each counts, as in bench/run.sh), on two cases:
#   small  random picks among the ~64 KB shards (requests/s matters)
#   large  one hot shard, the biggest (MB/s matters)
# The cache directory is filled once (`kiln run` into a file store, then
# `kiln cache sync --once`) under bench/out/ and reused. nginx runs as a
# foreground process of this user with a generated config (root = the cache's
# shards/, sendfile on, access_log off, keepalive_requests raised so neither
# server closes wrk's connections, pid and temp paths in a scratch
# directory), as many worker processes as kiln has threads (the CPUs).
#
# Usage: bench/cache.sh [KILN_BINARY]       (default: <repo>/build/kiln)
# Env:   DURATION   seconds per wrk run (default 10)
#        CONNS      wrk connections (default 32)
#        ROUNDS     rounds per server and case (default 3)
# Needs wrk and nginx (scripts/bootstrap --bench-tools, or apt-get install -y wrk nginx;
# see its comment about the nginx service). MB = 10^6 bytes.
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
kiln=${1:-$root/build/kiln}
[[ $kiln == /* ]] || kiln=$PWD/$kiln
cd "$root"
[[ -x $kiln ]] || { echo "cache.sh: $kiln is not an executable (build kiln first)" >&2; exit 1; }
nginx_bin=$(command -v nginx || true)
[[ -n $nginx_bin ]] || { [[ -x /usr/sbin/nginx ]] && nginx_bin=/usr/sbin/nginx; }
if ! command -v wrk >/dev/null || [[ -z $nginx_bin ]]; then
	echo "cache.sh: needs wrk and nginx (apt-get install -y wrk nginx, or scripts/bootstrap)" >&2
	exit 1
fi
duration=${DURATION:-10}
conns=${CONNS:-32}
rounds=${ROUNDS:-3}
out=bench/out
mkdir -p "$out"
py=/usr/bin/python3
ds=user-events

# ---- the data, once: ~64 KB shards (256 KiB of JSON Lines each) from one
# run, a few large ones (64 MiB of JSON Lines) from a second
data=$root/$out/cache-data
if [[ ! -e $data/ready ]]; then
	echo "building the bench dataset into $data ..." >&2
	rm -rf "$data"
	mkdir -p "$data"
	(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$data/key")
	export KILN_INPUT=$data/in.jsonl KILN_KEY_FILE=$data/key KILN_STORE=file://$data/store KILN_MANIFEST=$data/m.git
	$py bench/gen-user-events.py --records 60000 --seed 1 -o "$KILN_INPUT"
	"$kiln" run pipelines/user-events.yaml --set shards.target_bytes=256K >/dev/null
	$py bench/gen-user-events.py --records 400000 --seed 2 >>"$KILN_INPUT"
	"$kiln" run pipelines/user-events.yaml --set shards.target_bytes=64M >/dev/null
	cat >"$data/cache.yaml" <<EOF
store: {url: file://$data/store}
manifest: $data/m.git
dir: $data/cache
size_limit: 10G
pins: [$ds@main]
listen: 127.0.0.1:0
sync_seconds: 86400
EOF
	"$kiln" cache sync "$data/cache.yaml" --once >/dev/null
	touch "$data/ready"
fi
cache=$data/cache

work=$(mktemp -d "$root/$out/cache-XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# shards by size: "size hh/hash.jsonl.zst"
find "$cache/shards" -name '*.jsonl.zst' -printf '%s %P\n' | sort -n >"$work/shards"
awk '$1 < 128 * 1024' "$work/shards" >"$work/small"
[[ -s $work/small ]] || { echo "cache.sh: no shard under 128 KB in $cache" >&2; exit 1; }
big=$(tail -1 "$work/shards")
big_size=${big%% *}
big_path=${big#* }
big_hash=$(basename "$big_path" .jsonl.zst)
small_n=$(wc -l <"$work/small")
small_avg=$(awk '{ s += $1 } END { printf "%.0f", s / NR }' "$work/small")

free_port() { $py -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# ---- kiln cache serve
kport=$(free_port)
sed "s/^listen: .*/listen: 127.0.0.1:$kport/" "$data/cache.yaml" >"$work/cache.yaml"
"$kiln" cache serve "$work/cache.yaml" >"$work/kiln.out" 2>"$work/kiln.log" &
pids+=($!)

# ---- nginx, same files
nport=$(free_port)
mkdir -p "$work/nginx"
threads=$(nproc)
{
	[[ $(id -u) -eq 0 ]] && echo "user $(id -un) $(id -gn);" # workers stay this user, not nobody
	cat <<EOF
worker_processes $threads;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    default_type application/octet-stream;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    server {
        listen 127.0.0.1:$nport;
        root $cache/shards;
    }
}
EOF
} >"$work/nginx/nginx.conf"
"$nginx_bin" -p "$work/nginx" -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf" &
pids+=($!)

up() { curl -sf -o /dev/null "$1"; }
for _ in $(seq 100); do
	up "http://127.0.0.1:$kport/v1/shards/$big_hash" && up "http://127.0.0.1:$nport/$big_path" && break
	sleep 0.1
done
up "http://127.0.0.1:$kport/v1/shards/$big_hash" ||
	{ echo "cache.sh: kiln cache serve did not answer on $kport:" >&2; tail -5 "$work/kiln.log" >&2; exit 1; }
up "http://127.0.0.1:$nport/$big_path" ||
	{ echo "cache.sh: nginx did not answer on $nport:" >&2; tail -5 "$work/nginx/error.log" >&2; exit 1; }
cmp -s <(curl -s "http://127.0.0.1:$kport/v1/shards/$big_hash") <(curl -s "http://127.0.0.1:$nport/$big_path") ||
	{ echo "cache.sh: kiln and nginx serve different bytes for $big_hash" >&2; exit 1; }

# ---- wrk: a Lua script per case picking paths from a list; done() prints
# requests, bytes, microseconds and non-2xx/socket errors
wrk_script() { # PATH-LIST-FILE -> a Lua script requesting random paths from it
	cat <<EOF
local paths = {}
for line in io.lines("$1") do paths[#paths + 1] = line end
math.randomseed(os.time())
request = function()
    return wrk.format("GET", paths[math.random(#paths)])
end
done = function(summary, latency, requests)
    local e = summary.errors
    io.write(string.format("RESULT %d %d %d %d %.0f\n", summary.requests, summary.bytes, summary.duration,
        e.status + e.connect + e.read + e.write + e.timeout, latency:percentile(99)))
end
EOF
}
awk '{ print "/v1/shards/" substr($2, 4, 64) }' "$work/small" >"$work/kiln.small"
awk '{ print "/" $2 }' "$work/small" >"$work/nginx.small"
echo "/v1/shards/$big_hash" >"$work/kiln.large"
echo "/$big_path" >"$work/nginx.large"
for f in kiln.small nginx.small kiln.large nginx.large; do wrk_script "$work/$f" >"$work/$f.lua"; done

declare -A rps mbs p99s errs
bench() { # SERVER CASE PORT: one wrk run; keeps the best round's figures
	local r n bytes us e p99 q m
	r=$(wrk -t2 -c"$conns" -d"${duration}s" --latency -s "$work/$1.$2.lua" "http://127.0.0.1:$3" | grep '^RESULT')
	read -r _ n bytes us e p99 <<<"$r"
	q=$(awk -v n="$n" -v us="$us" 'BEGIN { printf "%.0f", n / (us / 1e6) }')
	m=$(awk -v b="$bytes" -v us="$us" 'BEGIN { printf "%.1f", b / 1e6 / (us / 1e6) }')
	printf '  %-6s %-5s %8s req/s %8s MB/s  p99 %6.1f ms  errors %s\n' "$1" "$2" "$q" "$m" \
		"$(awk -v p="$p99" 'BEGIN { print p / 1000 }')" "$e"
	errs[$1.$2]=$((${errs[$1.$2]:-0} + e))
	if [[ -z ${mbs[$1.$2]:-} ]] || awk -v a="$m" -v b="${mbs[$1.$2]}" 'BEGIN { exit !(a > b) }'; then
		rps[$1.$2]=$q mbs[$1.$2]=$m p99s[$1.$2]=$(awk -v p="$p99" 'BEGIN { printf "%.1f", p / 1000 }')
	fi
}

echo "kiln cache serve on :$kport, nginx $("$nginx_bin" -v 2>&1 | sed 's/.*nginx\///') ($threads workers) on :$nport;" \
	"wrk -t2 -c$conns -d${duration}s, $rounds rounds; $(nproc) CPUs"
echo "small: $small_n shards, $small_avg bytes on average; large: $big_hash, $big_size bytes"
for i in $(seq "$rounds"); do
	echo "round $i:"
	for c in small large; do
		bench kiln "$c" "$kport"
		bench nginx "$c" "$nport"
	done
done
echo "best of $rounds:"
for c in small large; do
	for s in kiln nginx; do
		printf '%-6s %-5s %8s req/s %8s MB/s  p99 %6s ms  errors %s (all rounds)\n' "$s" "$c" "${rps[$s.$c]}" \
			"${mbs[$s.$c]}" "${p99s[$s.$c]}" "${errs[$s.$c]}"
	done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
small_ratio=$(ratio "${rps[kiln.small]}" "${rps[nginx.small]}")
large_ratio=$(ratio "${mbs[kiln.large]}" "${mbs[nginx.large]}")
worst=$(awk -v a="$small_ratio" -v b="$large_ratio" 'BEGIN { print (a < b ? a : b) }')
echo "ratio small (req/s): $small_ratio   ratio large (MB/s): $large_ratio   (target >= 0.8)"
echo "cache bench: kiln/nginx = $worst (small $small_ratio: ${rps[kiln.small]} vs ${rps[nginx.small]} req/s;" \
	"large $large_ratio: ${mbs[kiln.large]} vs ${mbs[nginx.large]} MB/s)"
