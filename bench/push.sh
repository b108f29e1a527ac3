#!/usr/bin/env bash
# Push throughput: `kiln push` of one version against python3-boto3 and
# `curl --aws-sigv4` uploading the same shard files to the same S3 test
# server, in the same run, alternating, ROUNDS times (medians; each round
# writes under fresh prefixes so nothing is skipped as present).
#   kiln   kiln push DS@v1 --to s3://bench/kiln-R --jobs JOBS (it also reads
#          every shard back from the source store, checks its BLAKE2b-256,
#          and sends the version's git objects, ref and push record)
#   boto3  put_object of each shard file from a pool of JOBS threads
#   curl   JOBS parallel `curl --aws-sigv4 -T FILE`, each after sha256sum:
#          curl 7.88 sends no x-amz-content-sha256 itself, which S3 (and
#          the test server) requires, so the caller computes and sends it
# The server is tests/integration/s3v4_server.py (botocore verifies every
# request's signature and payload hash); it runs on the same machine and
# costs every client the same per request and per byte, so the ratios
# compare the clients, not the server. ratio = reference time / kiln time
# (above 1: kiln is faster).
#
# Usage: bench/push.sh [KILN_BINARY]      (default: <repo>/build/kiln)
# Env:   ROUNDS (3), RECORDS (60000), SHARD (256K: shards.target_bytes), JOBS (4)
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
kiln=${1:-$root/build/kiln}
[[ $kiln == /* ]] || kiln=$PWD/$kiln
cd "$root"
[[ -x $kiln ]] || { echo "push.sh: $kiln is not an executable (build kiln first)" >&2; exit 1; }
command -v curl >/dev/null || { echo "push.sh: needs curl" >&2; exit 1; }
rounds=${ROUNDS:-3}
records=${RECORDS:-60000}
shard=${SHARD:-256K}
jobs=${JOBS:-4}
py=/usr/bin/python3
out=bench/out
mkdir -p "$out"

# ---- the data, once: one promoted, signed version in a file store
. bench/lib.sh
data=$root/$out/push-data-$records-$shard
bench_version "$data" "$records" "$shard" sign
for s in train dev test; do "$kiln" ls user-events@v1 --split $s --format json; done |
	$py -c 'import json, sys
for l in sys.stdin: print(json.loads(l)["key"])' >"$data/keys"
nshards=$(wc -l <"$data/keys")
bytes=$(cd "$data/store" && cat "$data/keys" | xargs stat -c %s | awk '{s += $1} END {print s}')

# ---- the server
tmp=$(mktemp -d)
pid=''
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
ak=AKIDBENCH sk=benchsecret
$py tests/integration/s3v4_server.py --root "$tmp/root" --port-file "$tmp/port" --access-key $ak --secret-key $sk \
	--bucket bench --log /dev/null &
pid=$!
for _ in $(seq 100); do [[ -s $tmp/port ]] && break; sleep 0.1; done
port=$(cat "$tmp/port")
export AWS_ACCESS_KEY_ID=$ak AWS_SECRET_ACCESS_KEY=$sk AWS_REGION=us-east-1 AWS_ENDPOINT_URL=http://127.0.0.1:$port
unset AWS_SESSION_TOKEN

boto_up() { # PREFIX
	$py - "$port" "$1" "$data/store" "$data/keys" "$jobs" <<'EOF'
import sys, boto3
from concurrent.futures import ThreadPoolExecutor
from botocore.config import Config
port, prefix, store, keys, jobs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
s3 = boto3.client('s3', endpoint_url='http://127.0.0.1:%s' % port, region_name='us-east-1',
                  config=Config(signature_version='s3v4', s3={'addressing_style': 'path'},
                                max_pool_connections=jobs))
def put(key):
    with open('%s/%s' % (store, key), 'rb') as f:
        s3.put_object(Bucket='bench', Key='%s/%s' % (prefix, key), Body=f)
with ThreadPoolExecutor(jobs) as pool:
    list(pool.map(put, open(keys).read().split()))
EOF
}
curl_up() { # PREFIX
	(cd "$data/store" && xargs -P "$jobs" -n 1 sh -c 'sha=$(sha256sum "$1" | cut -d" " -f1) &&
		curl -sf -o /dev/null --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
			-H "x-amz-content-sha256: $sha" -T "$1" "$AWS_ENDPOINT_URL/bench/$0/$1"' "$1" <"$data/keys")
}

: >"$tmp/kiln" && : >"$tmp/boto" && : >"$tmp/curl"
for r in $(seq "$rounds"); do
	secs "$kiln" push user-events@v1 --to "s3://bench/kiln-$r" --jobs "$jobs" >>"$tmp/kiln"
	secs boto_up "boto-$r" >>"$tmp/boto"
	secs curl_up "curl-$r" >>"$tmp/curl"
done
k=$(median <"$tmp/kiln") b=$(median <"$tmp/boto") c=$(median <"$tmp/curl")
mb=$(echo "$bytes / 1000000" | bc -l)
printf '\npush of %d shards (%.1f MB), %d at once, median of %d rounds; ratio = reference / kiln\n' \
	"$nshards" "$mb" "$jobs" "$rounds"
printf '%-46s | %8s | %8s | %s\n' what seconds "MB/s" ratio
printf '%-46s | %8.2f | %8.1f | -\n' "kiln push (shards + manifest, hashes checked)" "$k" "$(echo "$mb / $k" | bc -l)"
printf '%-46s | %8.2f | %8.1f | %.2f\n' "python3-boto3 put_object, $jobs threads" "$b" "$(echo "$mb / $b" | bc -l)" "$(echo "$b / $k" | bc -l)"
printf '%-46s | %8.2f | %8.1f | %.2f\n' "curl --aws-sigv4, $jobs processes" "$c" "$(echo "$mb / $c" | bc -l)" "$(echo "$c / $k" | bc -l)"
