#!/usr/bin/env bash
# Cache nodes end to end (`kiln cache`, docs/CACHE.md) against an S3 origin
# that verifies every Signature V4 (s3v4_server.py, as run_s3.sh starts it). Three runs of generated user events
# into s3://kiln-cache/kiln (v1 and v2 promoted, main one run ahead), then:
#  - `kiln cache sync --once` on node A: views/<ds>/v1/<split>/NNNNN.jsonl.zst
#    are hard links into shards/ (same inode), `ready` is written, zstd -t
#    and BLAKE2b-256 pass on every file;
#  - node B (peer: A) fills from A and not from the origin (metrics);
#  - a shard overwritten in place on A is detected, fetched again and served
#    with the right bytes; kiln_cache_corrupt_total counts it;
#  - node C (small size_limit, pins v1 only) filled with unpinned shards
#    evicts them and keeps every file of the pinned view;
#  - Range (0-99, 100-, -50, unsatisfiable 416), HEAD Content-Length, ETag
#    = hash, If-None-Match 304; traversal and malformed paths never 200;
#  - node T with token_env: 401 without or with a wrong bearer token, 200
#    with the right one;
#  - `kiln cat --store http://...` (the http store) prints the records the
#    origin's bytes give, also through T with KILN_CACHE_TOKEN;
#  - `kiln cache status` summarises;
#  - node R fills v1 from an origin on Ceph RGW (a throwaway cluster; one
#    SKIP line where Ceph is not installed, a FAIL where it cannot start).
# Skips (exit 77) without git, curl, zstd or python3-boto3. KEEP_TMP=1 keeps the scratch directory.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
bucket=kiln-cache
ds=user-events
pipeline=$src/pipelines/user-events.yaml

for tool in git curl zstd; do
	command -v "$tool" >/dev/null || { echo "SKIP: $tool is not on PATH (run scripts/bootstrap)"; exit 77; }
done
if ! "$py" -c 'import boto3' 2>/dev/null; then
	echo "SKIP: python3-boto3 is not installed (run scripts/bootstrap)"
	exit 77
fi
need_kiln
if ! "$kiln" cache --help >/dev/null 2>&1; then
	echo "FAIL: this kiln has no 'kiln cache' command"
	echo "0 passed, 1 failed"
	exit 1
fi

unset http_proxy https_proxy all_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY
export no_proxy='127.0.0.1,localhost,.localhost' NO_PROXY='127.0.0.1,localhost,.localhost'
unset KILN_BRANCH KILN_SPLIT_SALT KILN_STORE KILN_CACHE_TOKEN

tmp=$(mktemp -d)
pids=()
cleanup() {
	rgw_stop # first: its watchdog is a child the wait below would wait for
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the verifying S3 server (as in run_s3.sh)
ak=AKIDKILNCACHE sk=kilnCacheSecret42
"$py" "$src/tests/integration/s3v4_server.py" --root "$tmp/data" --port-file "$tmp/s3port" \
	--access-key "$ak" --secret-key "$sk" --bucket "$bucket" --log "$tmp/s3server.log" &
pids+=($!)
if ! poll 10 test -s "$tmp/s3port"; then
	echo "ERROR: s3v4_server.py did not start within 10 s:"
	tail -20 "$tmp/s3server.log"
	exit 99
fi
s3port=$(cat "$tmp/s3port")
endpoint=127.0.0.1:$s3port
echo "s3v4_server.py on $endpoint"

export AWS_ACCESS_KEY_ID=$ak AWS_SECRET_ACCESS_KEY=$sk
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_MANIFEST=$tmp/m.git
(umask 077 && printf 'access_key_id=%s\nsecret_access_key=%s\n' "$ak" "$sk" >"$tmp/s3.credentials")
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
store=(--set store.url="s3://$bucket/kiln" --set store.endpoint="$endpoint" --set store.http=true --set store.style=path
	--set shards.target_bytes=64K)
gates=(--set promote.min_records.train=100 --set promote.min_records.dev=5 --set promote.min_records.test=5
	--set promote.ratio_tolerance=0.05 --set promote.max_quarantine_rate=0.05)

b2() { "$py" -c 'import hashlib, sys; print(hashlib.blake2b(open(sys.argv[1], "rb").read(), digest_size=32).hexdigest())' "$1"; }
verifies() { # FILE HASH: BLAKE2b-256 of FILE is HASH
	local got
	got=$(b2 "$1" 2>/dev/null)
	[ "$got" = "$2" ] && return 0
	echo "  $1: BLAKE2b-256 ${got:-(unreadable)}, expected $2"
	return 1
}

mshards() { # REF [SPLIT] -> "hash bytes split" per shard the version lists
	"$py" - "$tmp/m.git" "$1" "${2:-}" <<'EOF'
import json, subprocess, sys
gitdir, ref, want = sys.argv[1:]
git = lambda *a: subprocess.run(['git', '--git-dir=' + gitdir] + list(a), check=True,
                                stdout=subprocess.PIPE).stdout.decode()
for f in sorted(x for x in git('ls-tree', '-r', '--name-only', ref, '--', 'splits').split('\n') if x):
    split = f.split('/')[1]
    if want and split != want:
        continue
    for line in git('show', '%s:%s' % (ref, f)).split('\n'):
        if line:
            e = json.loads(line)
            print(e['shard'], e['bytes'], split)
EOF
}

code() { # [-o FILE] curl ARGS... -> the status code only (the body into FILE)
	local out=/dev/null
	[ "$1" = -o ] && { out=$2; shift 2; }
	curl -s -o "$out" -w '%{http_code}' --path-as-is "$@"
}

metric() { # PORT NAME [LABEL-SUBSTRING] -> the sum of the matching samples (0 when none match);
	# prints "unreachable" or "absent" (which no numeric check accepts) when
	# /metrics cannot be read or does not declare NAME at all
	local body
	body=$(curl -sf "http://127.0.0.1:$1/metrics") || { echo unreachable; return 1; }
	printf '%s\n' "$body" |
		awk -v n="$2" -v l="${3:-}" '$1 == "#" && $2 == "TYPE" && $3 == n { seen = 1 }
			$1 !~ /^#/ && ($1 == n || index($1, n "{") == 1) { seen = 1; if (index($1, l)) s += $2 }
			END { if (seen) printf "%.0f\n", s; else print "absent" }'
}

gt() { # A B: A > B (integers), with a message
	[ "$1" -gt "$2" ] && return 0
	echo "  $1 is not > $2"
	return 1
}

eq() { # A B
	[ "$1" = "$2" ] && return 0
	echo "  '$1' != '$2'"
	return 1
}

config() { # NAME DIR PINS SIZE [EXTRA YAML LINES]: writes $tmp/NAME.yaml
	cat >"$tmp/$1.yaml" <<EOF
store: {url: s3://$bucket/kiln, endpoint: $endpoint, http: true, style: path, credentials_file: $tmp/s3.credentials}
manifest: $tmp/m.git
dir: $2
size_limit: $4
watermarks: {high: 0.9, low: 0.8}
pins: [$3]
concurrency: 4
listen: 127.0.0.1:0
sync_seconds: 2
${5:-}
EOF
}

serve() { # NAME [ENV=VALUE...]: starts `kiln cache serve $tmp/NAME.yaml`, its port in $port
	local name=$1 p=''
	shift
	env "$@" "$kiln" cache serve "$tmp/$name.yaml" >"$tmp/$name.out" 2>"$tmp/$name.log" &
	pids+=($!)
	eval "pid_$name=$!"
	for _ in $(seq 200); do
		p=$("$py" -c '
import json, sys
for line in open(sys.argv[1], errors="replace"):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if isinstance(e, dict) and e.get("event") == "listening" and "port" in e:
        print(e["port"]); break
' "$tmp/$name.log" 2>/dev/null)
		[ -n "$p" ] && break
		kill -0 "${pids[-1]}" 2>/dev/null || break
		sleep 0.1
	done
	if [ -z "$p" ]; then
		echo "  node $name did not log a \"listening\" event within 20 s:"
		tail -5 "$tmp/$name.log" | sed 's/^/  | /'
		port=''
		return 1
	fi
	port=$p
	echo "node $name on 127.0.0.1:$port"
}

stop() { # NAME
	local v="pid_$1"
	kill "${!v}" 2>/dev/null
	wait "${!v}" 2>/dev/null
}

wait_for() { # SECONDS COMMAND...: until the command succeeds
	local n=$(($1 * 10))
	shift
	for _ in $(seq "$n"); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	"$@"
}

# ---- the origin: three runs, v1 and v2 promoted
gen() { "$py" "$src/bench/gen-user-events.py" --records "$1" --seed "$2" >>"$KILN_INPUT"; }
for i in 1 2 3; do
	gen 3000 "$i"
	check "run $i into s3 exits 0" status_is 0 "$kiln" run "$pipeline" "${store[@]}"
done
commits=($(git --git-dir="$tmp/m.git" rev-list --reverse "refs/heads/$ds/main"))
check "three commits" eq "${#commits[@]}" 3
check "promote v1" status_is 0 "$kiln" promote "$ds@${commits[0]:0:12}" --pipeline "$pipeline" "${store[@]}" "${gates[@]}"
check "promote v2" status_is 0 "$kiln" promote "$ds@${commits[1]:0:12}" --pipeline "$pipeline" "${store[@]}" "${gates[@]}"
mshards "$ds/v1" >"$tmp/v1.shards"
mshards "refs/heads/$ds/main" >"$tmp/main.shards"
awk 'NR == FNR { v1[$1] = 1; next } !($1 in v1)' "$tmp/v1.shards" "$tmp/main.shards" >"$tmp/unpinned.shards"
v1_bytes=$(awk '{ s += $2 } END { print s + 0 }' "$tmp/v1.shards")
echo "v1: $(wc -l <"$tmp/v1.shards") shards, $v1_bytes bytes; main adds $(wc -l <"$tmp/unpinned.shards")"
check "v1 has several train shards" test "$(grep -c ' train$' "$tmp/v1.shards")" -ge 3
check "main has shards v1 has not" test -s "$tmp/unpinned.shards"

# ---- node A: sync --once, views
A=$tmp/cacheA
config A "$A" "$ds@v1, $ds@main" 100M
check "A: kiln cache sync --once exits 0" status_is 0 "$kiln" cache sync "$tmp/A.yaml" --once
cp "$tmp/err" "$tmp/A.sync.err"
view_ok() { # DIR VERSION SHARDS-FILE: every split's view is the version's shards, hard-linked
	local dir=$1 ver=$2 list=$3 split n f h ino bad=0
	for split in train dev test; do
		n=$(grep -c " $split\$" "$list")
		[ "$n" -eq 0 ] && continue
		for i in $(seq 0 $((n - 1))); do
			f=$(printf '%s/views/%s/%s/%s/%05d.jsonl.zst' "$dir" "$ds" "$ver" "$split" "$i")
			[ -f "$f" ] || { echo "  missing $f"; bad=1; continue; }
			h=$(b2 "$f")
			grep -q "^$h [0-9]* $split\$" "$list" || { echo "  $f is not a $split shard of $ver ($h)"; bad=1; continue; }
			ino=$(stat -c %i "$f")
			[ "$(stat -c %i "$dir/shards/${h:0:2}/$h.jsonl.zst" 2>/dev/null)" = "$ino" ] ||
				{ echo "  $f is not a hard link to shards/${h:0:2}/$h.jsonl.zst"; bad=1; }
		done
		[ -e "$(printf '%s/views/%s/%s/%s/%05d.jsonl.zst' "$dir" "$ds" "$ver" "$split" "$n")" ] &&
			{ echo "  $dir/views/$ds/$ver/$split has more than $n files"; bad=1; }
	done
	return $bad
}
check "A: views/$ds/v1/<split>/NNNNN.jsonl.zst are v1's shards, hard links into shards/" view_ok "$A" v1 "$tmp/v1.shards"
check "A: views/$ds/v1/ready exists" test -e "$A/views/$ds/v1/ready"
check "A: a ready view for main too" test "$(find "$A/views/$ds" -mindepth 2 -maxdepth 2 -name ready | wc -l)" -ge 2
check "A: zstd -t passes on every view file" sh -c "find '$A/views' -name '*.jsonl.zst' -print0 | xargs -0 zstd -tq"
all_cached() { # DIR SHARDS-FILE: every listed shard is in DIR/shards and verifies
	local h bad=0
	while read -r h _; do
		verifies "$1/shards/${h:0:2}/$h.jsonl.zst" "$h" || bad=1
	done <"$2"
	return $bad
}
check "A: every shard of main is cached and verifies" all_cached "$A" "$tmp/main.shards"
check "A: nothing left in tmp/" test -z "$(find "$A/tmp" -type f 2>/dev/null)"

serve A
pa=$port
[ -n "$pa" ] || { echo "node A did not start; giving up"; echo "$passed passed, $((failed + 1)) failed"; exit 1; }
check "A: /healthz 200" eq "$(code "http://127.0.0.1:$pa/healthz")" 200

# ---- node B fills from A
B=$tmp/cacheB
config B "$B" "$ds@v1, $ds@main" 100M "peers: [http://127.0.0.1:$pa]"
serve B
pb=$port
check "B: started" test -n "$pb"
check "B: v1 view ready within 30 s" wait_for 30 test -e "$B/views/$ds/v1/ready"
check "B: views are v1's shards, hard links" view_ok "$B" v1 "$tmp/v1.shards"
check "B: every shard of main is cached and verifies" wait_for 10 all_cached "$B" "$tmp/main.shards"
check "A: kiln_cache_requests_total > 0 (B asked A)" gt "$(metric "$pa" kiln_cache_requests_total)" 0
check "B: kiln_cache_fill_bytes_total{source=\"peer\"} > 0" \
	gt "$(metric "$pb" kiln_cache_fill_bytes_total 'source="peer"')" 0
check "B: kiln_cache_fill_bytes_total{source=\"origin\"} = 0" \
	eq "$(metric "$pb" kiln_cache_fill_bytes_total 'source="origin"')" 0
stop B

# ---- a shard corrupted in place on A is detected and fetched again
read -r vh vbytes _ < <(sort -k2,2nr "$tmp/v1.shards" | head -1)
vfile=$A/shards/${vh:0:2}/$vh.jsonl.zst
corrupt0=$(metric "$pa" kiln_cache_corrupt_total)
printf 'kiln-was-here' | dd of="$vfile" bs=1 seek=100 conv=notrunc 2>/dev/null
check "the cached file no longer verifies (corrupted)" test "$(b2 "$vfile")" != "$vh"
check "A: GET of the corrupted shard: 200" eq "$(code -o "$tmp/refetched" "http://127.0.0.1:$pa/v1/shards/$vh")" 200
check "A: the answer has the right bytes (BLAKE2b-256 = its name)" verifies "$tmp/refetched" "$vh"
check "A: the answer has the right size" eq "$(stat -c %s "$tmp/refetched")" "$vbytes"
check "A: kiln_cache_corrupt_total increased" gt "$(metric "$pa" kiln_cache_corrupt_total)" "$corrupt0"
check "A: the file on disk verifies again" verifies "$vfile" "$vh"
view_fixed() { view_ok "$A" v1 "$tmp/v1.shards" >/dev/null 2>&1; }
check "A: the v1 view is whole again after the next sync (within 15 s)" wait_for 15 view_fixed

# ---- Range, HEAD, ETag, conditional GET (against the verified file)
cp "$tmp/refetched" "$tmp/ref.bin"
size=$(stat -c %s "$tmp/ref.bin")
url=http://127.0.0.1:$pa/v1/shards/$vh
range_ok() { # RANGE EXPECTED-FILE
	local c
	c=$(code -o "$tmp/range.out" -H "Range: bytes=$1" "$url")
	[ "$c" = 206 ] || { echo "  bytes=$1: status $c, expected 206"; return 1; }
	cmp -s "$tmp/range.out" "$2" || { echo "  bytes=$1: the bytes differ"; return 1; }
}
dd if="$tmp/ref.bin" of="$tmp/r1" bs=1 count=100 2>/dev/null
dd if="$tmp/ref.bin" of="$tmp/r2" bs=1 skip=100 2>/dev/null
dd if="$tmp/ref.bin" of="$tmp/r3" bs=1 skip=$((size - 50)) 2>/dev/null
check "Range bytes=0-99" range_ok 0-99 "$tmp/r1"
check "Range bytes=100-" range_ok 100- "$tmp/r2"
check "Range bytes=-50" range_ok -50 "$tmp/r3"
check "Range bytes=$size-: 416" eq "$(code -H "Range: bytes=$size-" "$url")" 416
curl -s -I "$url" >"$tmp/head" 2>&1
hdr() { tr -d '\r' <"$tmp/head" | awk -v n="$1" 'BEGIN { IGNORECASE = 1 } tolower($1) == tolower(n) ":" { $1 = ""; sub(/^ /, ""); print; exit }'; }
check "HEAD: 200" grep -q '^HTTP/1.1 200' "$tmp/head"
check "HEAD: Content-Length is the size" eq "$(hdr Content-Length)" "$size"
etag=$(hdr ETag)
check "ETag is the hash" eq "$(echo "$etag" | sed 's/^W\///; s/"//g')" "$vh"
check "If-None-Match: 304" eq "$(code -H "If-None-Match: ${etag:-\"$vh\"}" "$url")" 304
check "If-None-Match on another hash: 200" eq "$(code -H "If-None-Match: \"${vh//?/0}\"" "$url")" 200

# ---- traversal and malformed paths
never_ok() { # PATH: 400 or 404
	local c
	c=$(code "http://127.0.0.1:$pa$1")
	case $c in 400 | 404) return 0 ;; esac
	echo "  $1: status $c"
	return 1
}
check "/v1/shards/..%2F..%2Fetc%2Fpasswd: 400/404" never_ok '/v1/shards/..%2F..%2Fetc%2Fpasswd'
check "/v1/shards/../../etc/passwd: 400/404" never_ok '/v1/shards/../../etc/passwd'
check "/v1/shards/ABCDEF: 400/404" never_ok '/v1/shards/ABCDEF'
check "/v1/shards/<63 hex>: 400/404" never_ok "/v1/shards/${vh:0:63}"
check "/v1/shards/<64 upper-case hex>: 400/404" never_ok "/v1/shards/${vh^^}"
check "/v1/shards/<hash>.jsonl.zst.x: 400/404" never_ok "/v1/shards/$vh.jsonl.zst.x"
check "/v1/shards/<hash>/: 400/404" never_ok "/v1/shards/$vh/"
check "/v1/shards/<hash>.jsonl.zst (the file name) serves the same bytes" \
	sh -c "curl -sf 'http://127.0.0.1:$pa/v1/shards/$vh.jsonl.zst' | cmp -s - '$tmp/ref.bin'"
check "/v1/datasets/../x/y/z: 400/404" never_ok '/v1/datasets/../x/y/z'
check "/v1/datasets/..%2F..%2Fetc/v1/train: 400/404" never_ok '/v1/datasets/..%2F..%2Fetc/v1/train'
check "/v1/datasets/$ds/v9/train: 404" eq "$(code "http://127.0.0.1:$pa/v1/datasets/$ds/v9/train")" 404
listing_ok() {
	curl -s "http://127.0.0.1:$pa/v1/datasets/$ds/v1/train" >"$tmp/listing" || return 1
	"$py" - "$tmp/listing" "$tmp/v1.shards" <<'EOF'
import json, sys
got = [json.loads(l)["shard"] for l in open(sys.argv[1]) if l.strip()]
want = [l.split()[0] for l in open(sys.argv[2]) if l.split()[2] == "train"]
if sorted(got) != sorted(want):
    print("  listing has %d shards, v1 train has %d" % (len(got), len(want)))
    sys.exit(1)
EOF
}
check "/v1/datasets/$ds/v1/train lists v1's train shards" listing_ok

# ---- kiln cat through the http store = the origin's bytes
mkdir -p "$tmp/dl"
"$py" - "$s3port" "$bucket" "$tmp/dl" "$ak" "$sk" <<'EOF'
import os, sys
import boto3
from botocore.config import Config
port, bucket, out, ak, sk = sys.argv[1:]
s3 = boto3.client('s3', endpoint_url='http://127.0.0.1:%s' % port, region_name='us-east-1',
                  aws_access_key_id=ak, aws_secret_access_key=sk,
                  config=Config(signature_version='s3v4', s3={'addressing_style': 'path'}))
for page in s3.get_paginator('list_objects_v2').paginate(Bucket=bucket, Prefix='kiln/shards/'):
    for o in page.get('Contents', []):
        path = os.path.join(out, o['Key'][len('kiln/'):])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
            f.write(s3.get_object(Bucket=bucket, Key=o['Key'])['Body'].read())
EOF
for split in train dev; do
	"$kiln" cat --manifest "$tmp/m.git" --store "file://$tmp/dl" --split "$split" "$ds@v1" >"$tmp/origin.$split" 2>"$tmp/origin.err"
	check "kiln cat --split $split from the origin's bytes" test -s "$tmp/origin.$split"
	check "kiln cat --store http://127.0.0.1:$pa --split $split: exit 0" \
		status_is 0 "$kiln" cat --manifest "$tmp/m.git" --store "http://127.0.0.1:$pa" --split "$split" "$ds@v1"
	check "kiln cat --split $split: the same records as from the origin" cmp -s "$tmp/out" "$tmp/origin.$split"
done

# ---- node T: a bearer token
T=$tmp/cacheT
token=tok-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
config T "$T" "$ds@v1" 100M "token_env: KILN_CACHE_TOKEN"
check "T: a token under 32 characters: exit 2" \
	status_is 2 env KILN_CACHE_TOKEN=short-token "$kiln" cache serve "$tmp/T.yaml"
check "T: ... a config error naming token_env" grep -q "token_env: KILN_CACHE_TOKEN holds a token of 11 characters" "$tmp/err"
check "T: ... not the token" bash -c "! grep -q short-token '$tmp/err'"
serve T KILN_CACHE_TOKEN="$token"
pt=$port
check "T: started" test -n "$pt"
turl=http://127.0.0.1:$pt/v1/shards/$vh
check "T: no Authorization: 401" eq "$(code "$turl")" 401
check "T: a wrong token: 401" eq "$(code -H "Authorization: Bearer wrong-$token" "$turl")" 401
check "T: the right token: 200" eq "$(code -o "$tmp/t.bin" -H "Authorization: Bearer $token" "$turl")" 200
check "T: the right bytes" verifies "$tmp/t.bin" "$vh"
check "T: kiln cat without KILN_CACHE_TOKEN: exit 2" \
	status_is 2 "$kiln" cat --manifest "$tmp/m.git" --store "http://127.0.0.1:$pt" "$ds@v1"
check "T: ... naming the token variable" grep -q KILN_CACHE_TOKEN "$tmp/err"
check "T: kiln cat with KILN_CACHE_TOKEN: the same records" sh -c \
	"KILN_CACHE_TOKEN='$token' '$kiln' cat --manifest '$tmp/m.git' --store 'http://127.0.0.1:$pt' '$ds@v1' | cmp -s - '$tmp/origin.train'"
check "T: the token is not in its log" bash -c "! grep -qF -- '$token' '$tmp/T.log' '$tmp/T.out'"
stop T

# ---- node C: a pinned version survives eviction pressure
C=$tmp/cacheC
limit=$((v1_bytes * 2 / 1024 + 1))K
config C "$C" "$ds@v1" "$limit"
serve C
pc=$port
check "C: started" test -n "$pc"
check "C: v1 view ready within 30 s" wait_for 30 test -e "$C/views/$ds/v1/ready"
fill_unpinned() {
	local h c bad=0
	while read -r h _; do
		c=$(code -o /dev/null "http://127.0.0.1:$pc/v1/shards/$h")
		case $c in 200 | 503 | 507) ;; *) echo "  GET $h: $c"; bad=1 ;; esac
	done <"$tmp/unpinned.shards"
	return $bad
}
check "C: GET every shard main has and v1 has not ($(wc -l <"$tmp/unpinned.shards") shards)" fill_unpinned
evicted() { [ "$(metric "$pc" kiln_cache_evictions_total)" -gt 0 ]; }
check "C: kiln_cache_evictions_total > 0 within 15 s" wait_for 15 evicted
check "C: the pinned view is whole and every file verifies" view_ok "$C" v1 "$tmp/v1.shards"
check "C: every v1 shard is still cached" all_cached "$C" "$tmp/v1.shards"
used=$(find "$C/shards" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
check "C: shards/ under the high watermark after eviction ($used bytes)" test "$used" -le $((v1_bytes * 2 * 9 / 10))
stop C
check "C: kiln cache sync --once afterwards: exit 0" status_is 0 "$kiln" cache sync "$tmp/C.yaml" --once
check "C: ... the pinned view still whole" view_ok "$C" v1 "$tmp/v1.shards"

# ---- status
check "kiln cache status A: exit 0" status_is 0 "$kiln" cache status "$tmp/A.yaml"
check "kiln cache status names the pins" sh -c "grep -q '$ds@v1' '$tmp/out' && grep -q '$ds@main' '$tmp/out'"
cp "$tmp/out" "$tmp/status.out"
echo "kiln cache status:"
sed 's/^/  | /' "$tmp/status.out" | head -20

# ---- node R: the origin on Ceph RGW (a throwaway cluster, lib.sh's rgw_start)
# boto3 copies the origin's shards into an RGW bucket (same keys); node R,
# whose store is that bucket, fills v1 from RGW: views hard-linked, every
# shard verifying, and `kiln cat` through R gives the origin's records.
# One SKIP line where Ceph is not installed; a FAIL where it cannot start.
if rgw_available && rgw_start "$tmp/ceph" "$bucket"; then
	copied() {
		"$py" - "$s3port" "$ak" "$sk" "$rgw_endpoint" "$rgw_ak" "$rgw_sk" "$bucket" <<'EOF'
import sys
import boto3
from botocore.config import Config
port, ak, sk, rgw, rak, rsk, bucket = sys.argv[1:]
cfg = Config(signature_version='s3v4', s3={'addressing_style': 'path'})
src = boto3.client('s3', endpoint_url='http://127.0.0.1:%s' % port, region_name='us-east-1',
                   aws_access_key_id=ak, aws_secret_access_key=sk, config=cfg)
dst = boto3.client('s3', endpoint_url='http://' + rgw, region_name='us-east-1',
                   aws_access_key_id=rak, aws_secret_access_key=rsk, config=cfg)
n = 0
for page in src.get_paginator('list_objects_v2').paginate(Bucket=bucket, Prefix='kiln/shards/'):
    for o in page.get('Contents', []):
        dst.put_object(Bucket=bucket, Key=o['Key'], Body=src.get_object(Bucket=bucket, Key=o['Key'])['Body'].read())
        n += 1
assert n > 0
EOF
	}
	check "R: boto3 copies the origin's shards into RGW" copied
	(umask 077 && printf 'access_key_id=%s\nsecret_access_key=%s\n' "$rgw_ak" "$rgw_sk" >"$tmp/rgw.credentials")
	R=$tmp/cacheR
	config R "$R" "$ds@v1" 100M
	sed -i "s|^store: .*|store: {url: s3://$bucket/kiln, endpoint: $rgw_endpoint, http: true, style: path, region: $rgw_region, credentials_file: $tmp/rgw.credentials}|" "$tmp/R.yaml"
	check "R: kiln cache sync --once from RGW exits 0" status_is 0 env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY \
		"$kiln" cache sync "$tmp/R.yaml" --once
	check "R: ... all of v1" grep -qF "synced 1/1 pins: $(wc -l <"$tmp/v1.shards") shards" "$tmp/out"
	check "R: views/$ds/v1 are v1's shards, hard links into shards/" view_ok "$R" v1 "$tmp/v1.shards"
	check "R: every shard of v1 is cached and verifies" all_cached "$R" "$tmp/v1.shards"
	if serve R; then
		pr=$port
		check "R: kiln cat --store http://R gives the origin's records" bash -c \
			"'$kiln' cat --manifest '$tmp/m.git' --store 'http://127.0.0.1:$pr' --split train '$ds@v1' | cmp -s - '$tmp/origin.train'"
		stop R
	else
		failed=$((failed + 1))
		echo "FAIL: node R did not start"
	fi
fi
rgw_stop

stop A
if [ "$failed" -gt 0 ]; then
	for n in A B C T R; do
		[ -s "$tmp/$n.log" ] && { echo "node $n log (last 5 lines):"; tail -5 "$tmp/$n.log" | sed 's/^/  | /'; }
	done
fi
check "no personal data in any log, stdout or stderr" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
