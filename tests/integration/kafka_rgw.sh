#!/usr/bin/env bash
# Exactly once from Kafka into Ceph RGW, with kill -9: kcat produces into
# `kiln broker` while a `kiln run` daemon whose store is an s3:// bucket on a
# throwaway single-node Ceph cluster (scripts/ceph-rgw, via lib.sh's
# rgw_start) is killed with SIGKILL at random moments and restarted. Then
# boto3 downloads the bucket and kafka_check.py holds every produced record
# to being exactly once curated in a shard or quarantined (shards named by
# their BLAKE2b-256, stats.json balanced), and the raw zone read back from
# the download holds every produced record byte-exact, once.
# Skips (exit 77, one SKIP line) where Ceph is not installed; fails where it
# is and the cluster cannot start. KILLS (default 2) and RECORDS (default
# 2000) size it. Every address is 127.0.0.1.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
kills=${KILLS:-2}
records=${RECORDS:-2000}
bucket='kiln-kafka'
need_kiln
need kcat git zstd
need_py boto3 zstandard
rgw_available || exit 77

unset http_proxy https_proxy all_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY
export no_proxy='127.0.0.1,localhost' NO_PROXY='127.0.0.1,localhost'
unset KILN_STORE KILN_MANIFEST KILN_BRANCH KILN_S3_ENDPOINT AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3 AWS_SESSION_TOKEN

tmp=$(mktemp -d)
pids=()
cleanup() {
	rgw_stop # first: its watchdog is a child the wait below would wait for
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rgw_start "$tmp/ceph" "$bucket" || { echo "$passed passed, $failed failed"; exit 1; }
echo "Ceph RGW on $rgw_endpoint"
export AWS_ACCESS_KEY_ID=$rgw_ak AWS_SECRET_ACCESS_KEY=$rgw_sk

"$kiln" broker --partitions 4 --topics ev --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
poll 10 test -s "$tmp/pf"
bs=$(head -1 "$tmp/pf" 2>/dev/null)
[ -n "$bs" ] || { echo "FAIL: the broker did not start"; cat "$tmp/broker.out"; echo "0 passed, 1 failed"; exit 1; }
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/key")
limit=16384
"$py" "$src/bench/gen-user-events.py" --records "$records" --seed 21 --invalid-rate 0.05 --max-record-bytes "$limit" \
	-o "$tmp/all.jsonl" --expect "$tmp/all.expect"
pii_exempt=(kcat.log)

cat >"$tmp/p.yaml" <<EOF
dataset: ev
contract: $src/contracts/user-events.yaml
source:
  kind: kafka
  brokers: $bs
  topics: [ev]
  group: g1
  max_record_bytes: $limit
  batch: {records: 200, ms: 50}
  options:
    session.timeout.ms: "3000"
    heartbeat.interval.ms: "300"
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: s3://$bucket/ev, endpoint: $rgw_endpoint, http: true, style: path, region: $rgw_region}
manifest: {repo: $tmp/m.git}
snapshot: {records: 200, seconds: 1, drain_seconds: 20}
EOF

# kcat in chunks, so that production overlaps the kills; the log is what kcat acknowledged
produce() {
	split -n l/10 "$tmp/all.jsonl" "$tmp/chunk."
	local c rc=0
	: >"$tmp/kcat.log"
	for c in "$tmp/chunk."*; do
		if kcat -P -b "$bs" -t ev -l "$c" 2>>"$tmp/kcat.err"; then
			cat "$c" >>"$tmp/kcat.log"
		else
			rc=1
		fi
		sleep 0.5
	done
	return "$rc"
}
produce &
pk=$!
starts=0
for _ in $(seq "$kills"); do
	starts=$((starts + 1))
	"$kiln" run "$tmp/p.yaml" >>"$tmp/d.out" 2>"$tmp/d.$starts.log" &
	d=$!
	pids+=("$d")
	poll 30 grep -q '"event":"assigned"' "$tmp/d.$starts.log"
	poll 60 grep -q '"event":"snapshot"' "$tmp/d.$starts.log" # each life commits to RGW before its kill
	ms_sleep $((300 + RANDOM % 1500))
	kill -KILL "$d" 2>/dev/null
	wait "$d" 2>/dev/null
done
check "kcat acknowledged every record" wait "$pk"
check "kcat acknowledged $records records" test "$(wc -l <"$tmp/kcat.log")" -eq "$records"
rc=0
timeout 120 "$kiln" run "$tmp/p.yaml" --stop-at-end >"$tmp/end.out" 2>"$tmp/end.err" || rc=$?
check "--stop-at-end reads the rest into RGW and exits 0" test "$rc" -eq 0
check "snapshots were committed between the kills" test "$(cat "$tmp"/d.*.log | grep -c '"event":"snapshot"')" -ge "$kills"

# boto3 reads the bucket back into a directory: the store as RGW holds it
downloaded() {
	"$py" - "$rgw_endpoint" "$rgw_ak" "$rgw_sk" "$bucket" ev/ "$tmp/dl" <<'EOF'
import os, sys
import boto3
from botocore.config import Config
endpoint, ak, sk, bucket, prefix, out = sys.argv[1:]
s3 = boto3.client('s3', endpoint_url='http://' + endpoint, region_name='us-east-1',
                  aws_access_key_id=ak, aws_secret_access_key=sk,
                  config=Config(signature_version='s3v4', s3={'addressing_style': 'path'}))
zones = set()
for page in s3.get_paginator('list_objects_v2').paginate(Bucket=bucket, Prefix=prefix):
    for o in page.get('Contents', []):
        rel = o['Key'][len(prefix):]
        assert rel and '..' not in rel.split('/'), o['Key']
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
            f.write(s3.get_object(Bucket=bucket, Key=o['Key'])['Body'].read())
        zones.add(rel.split('/')[0])
missing = {'raw', 'shards', 'quarantine'} - zones
if missing:
    sys.exit('no %s objects in the bucket' % ', '.join(sorted(missing)))
EOF
}
check "boto3 downloads raw/, shards/ and quarantine/ from RGW" downloaded
check "every record exactly once in shards or quarantine (kafka_check.py)" "$py" \
	"$src/tests/integration/kafka_check.py" --repo "$tmp/m.git" --dataset ev --store "$tmp/dl" --topic ev \
	--expect "$tmp/all.jsonl" "$tmp/all.expect" --key "$tmp/key" "$tmp/kcat.log"
check "git fsck --strict" git --git-dir "$tmp/m.git" fsck --strict --no-dangling
check "the shards pass zstd -t" sh -c "find '$tmp/dl/shards' -name '*.zst' -print0 | xargs -0 zstd -tq"
"$kiln" raw cat --store "file://$tmp/dl" --topic ev --format value >"$tmp/raw.values" 2>"$tmp/raw.err"
check "kiln raw cat of the download exits 0" test $? -eq 0
check "the raw zone holds every produced record byte-exact, once" "$py" -c '
import sys, collections
produced = collections.Counter(open(sys.argv[1], "rb").read().splitlines())
raw = collections.Counter(open(sys.argv[2], "rb").read().splitlines())
sys.exit(0 if raw == produced else 1)
' "$tmp/kcat.log" "$tmp/raw.values"
rgw_stop # before the scan: the cluster's own logs hold no record
check "no personal data in any log, stdout or stderr" pii_scan_logs

echo "kafka_rgw: $passed passed, $failed failed (kills: $kills, records: $records)"
[ "$failed" -eq 0 ]
