#!/usr/bin/env bash
# `kiln push` and `kiln pull` end to end (docs/PUSH.md) against
# s3v4_server.py, which recomputes every request's Signature V4 with
# botocore's signer (temporary credentials: a session token is required),
# each result checked with tools kiln shares no code with: boto3 lists and
# fetches the pushed objects (BLAKE2b-256 of every shard equals its name,
# no raw/ or quarantine/ object in the bucket), stock git reads the pushed
# manifest (`git fsck --strict`, `git verify-tag` with the allowed signers).
# Two promoted, signed versions: v1, then v2 sends only v2's new shards;
# a repeat sends nothing; --dry-run sends nothing and prices the egress;
# an unpromoted version needs --unpromoted and is recorded as such; a
# target holding v1 as another object is refused; a push killed with
# kill -9 in the middle of a multipart upload leaves the version invisible
# and, run again once that upload is stale, completes with no upload left
# behind; a wrong secret and
# a skewed clock are one clear line. The far side: `kiln pull`, then
# `kiln verify --deep`, `kiln cat` (the same records as on-prem, and over 4
# ranks each record once) and a cache node reading the version from the
# target. Then the same push to Ceph RGW (v1, v2, a repeat, a multipart
# shard), read back with boto3 and stock git, verified and read at the far
# side (one SKIP line where Ceph is not installed; a FAIL where it is and the
# cluster cannot start).
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
pipeline=$src/pipelines/user-events.yaml
need git ssh-keygen curl script
$py -c 'import boto3, botocore' 2>/dev/null || { echo "FAIL: python3-boto3 missing (run scripts/bootstrap)"; echo "0 passed, 1 failed"; exit 1; }

unset http_proxy https_proxy all_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY
export no_proxy='127.0.0.1,localhost' NO_PROXY='127.0.0.1,localhost'
unset KILN_BRANCH KILN_SPLIT_SALT KILN_TARGETS AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3 AWS_DEFAULT_REGION

tmp=$(mktemp -d)
pid=''
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rgw_stop
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

runs() { # NAME WANT COMMAND...: output in $tmp/NAME.out and .err
	local name=$1 want=$2 rc=0
	shift 2
	"$@" </dev/null >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
	[ "$rc" -eq "$want" ] && return 0
	echo "  $*: exit $rc, expected $want"
	sed 's/^/  | /' "$tmp/$name.err" | tail -5
	return 1
}
one_line() { # NAME TEXT...: stderr of NAME is one line holding every TEXT
	local name=$1 t
	shift
	[ "$(wc -l <"$tmp/$name.err")" -eq 1 ] || { echo "  stderr of $name is not one line:"; sed 's/^/  | /' "$tmp/$name.err" | head -5; return 1; }
	for t in "$@"; do
		grep -qF -- "$t" "$tmp/$name.err" || { echo "  stderr of $name lacks '$t':"; sed 's/^/  | /' "$tmp/$name.err"; return 1; }
	done
}
has() { grep -qF -- "$2" "$tmp/$1" || { echo "  $1 lacks '$2':"; sed 's/^/  | /' "$tmp/$1" | head -8; return 1; }; }

# ---- on-prem: two promoted, signed versions ------------------------------------------
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
"$kiln" keygen --out "$tmp/sign.key" --comment release@kiln.test >/dev/null
printf 'release@kiln.test namespaces="git" %s\n' "$(cut -d' ' -f1,2 "$tmp/sign.key.pub")" >"$tmp/allowed_signers"
gates=(--set promote.min_records.train=1 --set promote.min_records.dev=0 --set promote.min_records.test=0
	--set promote.ratio_tolerance=1 --set promote.max_quarantine_rate=1)
small=(--set shards.target_bytes=16K)
$py "$src/bench/gen-user-events.py" --records 3000 --seed 1 --invalid-rate 0.05 -o "$tmp/in.jsonl"
check "run 1" runs run1 0 "$kiln" run "$pipeline" "${small[@]}"
check "promote v1 (signed)" runs p1 0 "$kiln" promote user-events@main --pipeline "$pipeline" "${gates[@]}" \
	--set manifest.signing_key="$tmp/sign.key"
$py "$src/bench/gen-user-events.py" --records 2000 --seed 2 --invalid-rate 0.05 --append -o "$tmp/in.jsonl"
check "run 2" runs run2 0 "$kiln" run "$pipeline" "${small[@]}"
check "promote v2 (signed)" runs p2 0 "$kiln" promote user-events@main --pipeline "$pipeline" "${gates[@]}" \
	--set manifest.signing_key="$tmp/sign.key"
$py "$src/bench/gen-user-events.py" --records 500 --seed 3 --invalid-rate 0.05 --append -o "$tmp/in.jsonl"
check "run 3 (not promoted)" runs run3 0 "$kiln" run "$pipeline" "${small[@]}"
check "the local store has quarantine objects (they must not travel)" \
	test -n "$(find "$tmp/store/quarantine" -type f 2>/dev/null | head -1)"
shard_keys() { # VERSION: its shard keys, sorted
	for s in train dev test; do "$kiln" ls "user-events@$1" --split $s --format json; done |
		$py -c 'import json, sys
for l in sys.stdin: print(json.loads(l)["key"])' | sort
}
shard_keys v1 >"$tmp/v1.keys"
# a pipeline file naming this store and manifest (for push --pipeline)
sed -e "s|\${KILN_STORE:-[^}]*}|file://$tmp/store|" -e "s|\${KILN_MANIFEST:-[^}]*}|$tmp/m.git|" \
	-e "s|^contract: ../contracts/|contract: $src/contracts/|" "$pipeline" >"$tmp/pipeline.yaml"
shard_keys v2 >"$tmp/v2.keys"
comm -13 "$tmp/v1.keys" "$tmp/v2.keys" >"$tmp/v2-new.keys"
check "v2 adds shards to v1's" test -s "$tmp/v2-new.keys" -a "$(wc -l <"$tmp/v1.keys")" -gt 1

# ---- the target ---------------------------------------------------------------------------
ak=ASIAKILNPUSH sk='kiln/push+secret' token='kiln-push-session/token=='
$py "$src/tests/integration/s3v4_server.py" --root "$tmp/s3data" --port-file "$tmp/port" --region eu-west-3 \
	--access-key "$ak" --secret-key "$sk" --session-token "$token" --bucket kiln-burst \
	--min-part-size $((5 << 20)) --log "$tmp/server.log" &
pid=$!
poll 10 test -s "$tmp/port" || { echo "FAIL: the S3 server did not start"; tail "$tmp/server.log"; echo "$passed passed, 1 failed"; exit 1; }
port=$(cat "$tmp/port")
export AWS_ACCESS_KEY_ID=$ak AWS_SECRET_ACCESS_KEY=$sk AWS_SESSION_TOKEN=$token
cat >"$tmp/targets.yaml" <<EOF
targets:
  burst:
    store:
      url: s3://kiln-burst/prod
      endpoint: 127.0.0.1:$port
      http: true
      region: eu-west-3
      part_size_mb: 5
    price_per_gb: 0.09
    currency: USD
    concurrency: 4
EOF
export KILN_TARGETS=$tmp/targets.yaml
ctl() { curl -sf -X "$1" ${3:+-H 'Content-Type: application/json' --data "$3"} "http://127.0.0.1:$port$2"; }
puts() { # the PUTs the server stored (status 200), as "path" lines
	ctl GET /_ctl/log | $py -c 'import json, sys
for r in json.load(sys.stdin):
    if r["method"] == "PUT" and r["status"] == 200: print(r["path"])'
}
# the server boto, hashes_ok and download read: the verifying one here, Ceph RGW below
b_endpoint=127.0.0.1:$port b_region=eu-west-3 b_ak=$ak b_sk=$sk b_token=$token
boto() { # python code with s3 = a boto3 client of the target
	$py -c "import boto3, hashlib, json, sys
from botocore.config import Config
s3 = boto3.client('s3', endpoint_url='http://$b_endpoint', region_name='$b_region',
    aws_access_key_id='$b_ak', aws_secret_access_key='$b_sk', aws_session_token='$b_token' or None,
    config=Config(signature_version='s3v4', s3={'addressing_style': 'path'}))
def keys(prefix):
    out = []
    for page in s3.get_paginator('list_objects_v2').paginate(Bucket='kiln-burst', Prefix=prefix):
        out += [o['Key'] for o in page.get('Contents', [])]
    return sorted(out)
$1"
}

# ---- the rules before anything is sent -----------------------------------------------------
check "an unpromoted version is refused" runs unpromoted 2 "$kiln" push user-events@main --to burst
check "  one line saying why and what to do" one_line unpromoted "not a promoted version" "--unpromoted"
check "dry run of v1" runs dry 0 "$kiln" push user-events@v1 --to burst --dry-run
check "  counts v1's shards" has dry.out "shards    $(wc -l <"$tmp/v1.keys") to send"
check "  prices the egress in USD" grep -Eq '^  egress .*, (about [0-9.]+|under 0.01) USD at 0.09 per GB$' "$tmp/dry.out"
check "  says nothing was sent" has dry.out "dry run: nothing sent"
check "  and the server stored nothing" test -z "$(puts)"
check "dry run with the source from the pipeline file (--pipeline)" runs drypipe 0 \
	env -u KILN_STORE -u KILN_MANIFEST "$kiln" push user-events@v1 --to burst --dry-run \
	--pipeline "$tmp/pipeline.yaml"
check "  counts the same shards" has drypipe.out "shards    $(wc -l <"$tmp/v1.keys") to send"

# ---- v1 -----------------------------------------------------------------------------------
check "push v1" runs push1 0 "$kiln" push user-events@v1 --to burst -v
n1=$(wc -l <"$tmp/v1.keys")
check "  sent every shard of v1" has push1.out "shards    $n1 to send"
json_lines_ok() { # NAME: stderr is JSON lines, one push_object per object, each with key, bytes, action
	$py - "$tmp/$1.err" <<'EOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
objs = [json.loads(l) for l in lines]
assert objs and all(o["event"] == "push_object" and o["key"] and o["action"] in ("sent", "present")
                    and isinstance(o["bytes"], int) for o in objs), lines[:3]
EOF
}
check "  one JSON log line per object" json_lines_ok push1
boto "assert keys('prod/shards/') == ['prod/' + k for k in open('$tmp/v1.keys').read().split()], keys('prod/shards/')[:3]" 2>"$tmp/b.err"
check "  boto3 lists exactly v1's shards" test ! -s "$tmp/b.err"
hashes_ok() {
	boto "
bad = 0
for k in keys('prod/shards/'):
    data = s3.get_object(Bucket='kiln-burst', Key=k)['Body'].read()
    if hashlib.blake2b(data, digest_size=32).hexdigest() != k.split('/')[-1].split('.')[0]: bad += 1
assert bad == 0, bad"
}
check "  every shard boto3 fetches hashes to its name" hashes_ok
check "  no raw/ or quarantine/ object, nothing outside shards/, manifest.git/, pushes/" \
	boto "assert all(k.split('/')[1] in ('shards', 'manifest.git', 'pushes') for k in keys('')), keys('')"
check "  the push record says promoted and signed" boto "
r = json.loads(s3.get_object(Bucket='kiln-burst', Key='prod/pushes/user-events/v1.json')['Body'].read())
assert r['promoted'] and r['signed'] and r['version'] == 'v1' and r['signer'].startswith('SHA256:'), r"

# stock git on the bucket's manifest, downloaded by boto3
download() { # PREFIX DIR (8 at a time)
	boto "
import os
from concurrent.futures import ThreadPoolExecutor
def fetch(k):
    path = os.path.join('$2', k[len('$1'):])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, 'wb').write(s3.get_object(Bucket='kiln-burst', Key=k)['Body'].read())
with ThreadPoolExecutor(8) as pool:
    list(pool.map(fetch, keys('$1')))"
}
download prod/manifest.git/ "$tmp/dl.git"
check "git fsck --strict on the pushed manifest" git --git-dir="$tmp/dl.git" fsck --strict --no-progress
check "git verify-tag accepts the pushed v1" git --git-dir="$tmp/dl.git" -c gpg.format=ssh \
	-c gpg.ssh.allowedSignersFile="$tmp/allowed_signers" verify-tag user-events/v1

# on a terminal (script(1) gives it one), a progress bar under the log lines
bar_shown() {
	script -qec "'$kiln' push user-events@v1 --to 'file://$tmp/tty-target'" /dev/null >"$tmp/tty.log" 2>&1 &&
		grep -Eq '\[#{20}\] ([0-9]+)/\1 objects' "$tmp/tty.log"
}
check "a progress bar on a terminal" bar_shown

# ---- v2 sends only its new shards; a repeat sends nothing ---------------------------------------
ctl DELETE /_ctl/log >/dev/null
check "push v2" runs push2 0 "$kiln" push user-events@v2 --to burst
sent_shards() { puts | grep -c '/shards/' || true; }
check "  sent only the shards v1 lacks ($(wc -l <"$tmp/v2-new.keys"))" test "$(sent_shards)" -eq "$(wc -l <"$tmp/v2-new.keys")"
check "  reports v1's shards as present" has push2.out "shards    $(wc -l <"$tmp/v2-new.keys") to send"
ctl DELETE /_ctl/log >/dev/null
check "  without -v: no line per object on stderr" sh -c '! grep -q push_object "$1"' _ "$tmp/push2.err"
check "push v2 again (--json)" runs push2b 0 "$kiln" push user-events@v2 --to burst --json
check "  sends nothing" $py -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["sent"] == 0 and d["present"] > 0 and d["version"] == "v2" and d["target"] == "burst" and d["promoted"] and not d["dry_run"], d
assert d["ref"] == "refs/tags/user-events/v2" and len(d["tag"]) == 40 and d["signer"].startswith("SHA256:"), d
' "$tmp/push2b.out"
check "  and the server stored nothing" test -z "$(puts)"

# ---- the far side ------------------------------------------------------------------------------
far() { env -u KILN_MANIFEST -u KILN_STORE AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_REGION=eu-west-3 "$@"; }
check "kiln pull -v" runs pull 0 far "$kiln" pull burst -m "$tmp/far.git" -v
check "  one pull_object line per file" test "$(grep -c '"event":"pull_object"' "$tmp/pull.err")" -eq "$(sed -n 's/^pulled \([0-9]*\) files.*/\1/p' "$tmp/pull.out")"
check "git fsck --strict on the pulled repository" git --git-dir="$tmp/far.git" fsck --strict --no-progress
check "kiln verify --deep v2 at the target, trusted signer" runs fv 0 far "$kiln" verify user-events@v2 \
	-m "$tmp/far.git" --store s3://kiln-burst/prod --deep --allowed-signers "$tmp/allowed_signers"
check "  every shard verified" has fv.out "store: $(wc -l <"$tmp/v2.keys") shards verified"
"$kiln" cat user-events@v2 --split train >"$tmp/local.cat" 2>/dev/null
check "kiln cat at the far side" runs fcat 0 far "$kiln" cat user-events@v2 --split train -m "$tmp/far.git" \
	--store s3://kiln-burst/prod
check "  the same records as on-prem" cmp -s "$tmp/fcat.out" "$tmp/local.cat"
check "  (and not none)" test -s "$tmp/local.cat"
for r in 0 1 2 3; do
	far "$kiln" cat user-events@v2 --split train --rank $r --world-size 4 -m "$tmp/far.git" \
		--store s3://kiln-burst/prod >"$tmp/rank$r.cat" 2>"$tmp/rank$r.err"
done
sort "$tmp"/rank?.cat >"$tmp/ranks.sorted"
sort "$tmp/local.cat" >"$tmp/local.sorted"
check "kiln cat over 4 ranks at the far side: each record once" cmp -s "$tmp/ranks.sorted" "$tmp/local.sorted"
check "  every rank reads some" test -s "$tmp/rank0.cat" -a -s "$tmp/rank3.cat"
cat >"$tmp/cache.yaml" <<EOF
store:
  url: s3://kiln-burst/prod
  endpoint: 127.0.0.1:$port
  http: true
  region: eu-west-3
manifest: $tmp/far.git
dir: $tmp/cache
size_limit: 1G
pins: [user-events@v2]
EOF
check "a cache node fills v2 from the target" runs csync 0 "$kiln" cache sync --once "$tmp/cache.yaml"
check "  all of it" has csync.out "synced 1/1 pins: $(wc -l <"$tmp/v2.keys") shards"
check "pull again fetches no object" runs pull2 0 far "$kiln" pull burst -m "$tmp/far.git"
check "  0 files" has pull2.out "pulled 0 files"
check "pull --json" runs pull3 0 far "$kiln" pull burst -m "$tmp/far.git" --json
check "  one document: 0 files, the refs" $py -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["files"] == 0 and d["bytes"] == 0 and d["refs"] >= 2 and d["target"] == "burst", d
' "$tmp/pull3.out"

# ---- unpromoted, on purpose; a tag the target holds differently ------------------------------------
check "push main with --unpromoted" runs unp 0 "$kiln" push user-events@main --to burst --unpromoted
c=$(git --git-dir="$tmp/m.git" rev-parse user-events/main)
check "  recorded as unpromoted-<commit>" has unp.out "as refs/tags/user-events/unpromoted-${c:0:12}"
check "  and in its push record" boto "
r = json.loads(s3.get_object(Bucket='kiln-burst', Key='prod/pushes/user-events/unpromoted-${c:0:12}.json')['Body'].read())
assert r['promoted'] is False and r['commit'] == '$c', r"
boto "s3.put_object(Bucket='kiln-burst', Key='prod/manifest.git/refs/tags/user-events/v1', Body=b'$c\n')"
check "a target holding v1 as another object: refused" runs swapped 2 "$kiln" push user-events@v1 --to burst
check "  one line: never replaced" one_line swapped "never replaced"
boto "s3.put_object(Bucket='kiln-burst', Key='prod/manifest.git/refs/tags/user-events/v1', Body=open('$tmp/dl.git/refs/tags/user-events/v1', 'rb').read())"

# ---- wrong credentials, a skewed clock: one line, nothing pushed ------------------------------------
check "wrong secret" runs wrong 2 env AWS_SECRET_ACCESS_KEY=not-the-secret "$kiln" push user-events@v2 --to burst
check "  one line naming the signature" one_line wrong "SignatureDoesNotMatch" "(check the secret key)"
check "  no secret in it" bash -c "! grep -qF not-the-secret '$tmp/wrong.err'"
check "no session token" runs notoken 2 env -u AWS_SESSION_TOKEN "$kiln" push user-events@v2 --to burst
check "  one line naming the token" one_line notoken "(check the session token)"
ctl POST /_ctl/clock '{"offset_s": 1800}' >/dev/null
check "a clock 30 minutes off" runs skew 2 "$kiln" push user-events@v2 --to burst
check "  one line saying to check the clock" one_line skew "RequestTimeTooSkewed" "check this machine's clock"
ctl POST /_ctl/clock '{"offset_s": 0}' >/dev/null

# ---- kill -9 in the middle of a multipart upload -------------------------------------------------------
# a version with a shard above the 5 MiB part size, in a store and manifest of its own
export KILN_STORE=file://$tmp/big-store KILN_MANIFEST=$tmp/big.git KILN_INPUT=$tmp/big.jsonl
$py "$src/bench/gen-user-events.py" --records 100000 --seed 4 -o "$tmp/big.jsonl"
check "run (big shards)" runs bigrun 0 "$kiln" run "$pipeline" --set shards.target_bytes=64M
check "promote big v1" runs bigp 0 "$kiln" promote user-events@main --pipeline "$pipeline" "${gates[@]}" \
	--set manifest.signing_key="$tmp/sign.key"
big=$("$kiln" ls user-events@v1 --format json | $py -c 'import json, sys
print(max((json.loads(l) for l in sys.stdin), key=lambda e: e["bytes"])["bytes"])')
check "  its train shard is above the part size ($big bytes)" test "$big" -gt $((5 << 20))
bigt=(--set targets.burst.store.url=s3://kiln-burst/big)
ctl POST /_ctl/faults '[{"action": "delay", "ms": 20000, "method": "PUT", "match": "partNumber=2", "count": 1}]' >/dev/null
"$kiln" push user-events@v1 --to burst "${bigt[@]}" >"$tmp/kill.out" 2>"$tmp/kill.err" &
push_pid=$!
part1_stored() { ctl GET /_ctl/log | $py -c 'import json, sys
sys.exit(0 if any(r["method"] == "PUT" and "partNumber=1" in r["query"] and r["status"] == 200 for r in json.load(sys.stdin)) else 1)'; }
poll 60 part1_stored
sleep 0.5
kill -9 "$push_pid" 2>/dev/null
wait "$push_pid" 2>/dev/null
ctl DELETE /_ctl/faults >/dev/null
check "killed mid-upload: an upload is left in progress" boto "assert len(s3.list_multipart_uploads(Bucket='kiln-burst').get('Uploads', [])) == 1"
check "  and the version is not visible at the target" boto "assert not keys('big/manifest.git/refs/')"
# an upload is aborted by another put of its key only once it is a day old
# (a younger one may be another push's live upload): make it two days old
$py - "$tmp/s3data/.uploads" <<'EOF'
import json, os, sys, time
for upload in os.listdir(sys.argv[1]):
    path = os.path.join(sys.argv[1], upload, "upload.json")
    info = json.load(open(path))
    info["initiated"] = time.time() - 2 * 86400
    json.dump(info, open(path, "w"))
EOF
check "push again after kill -9" runs bigpush 0 "$kiln" push user-events@v1 --to burst "${bigt[@]}"
check "  no multipart upload left behind" boto "assert not s3.list_multipart_uploads(Bucket='kiln-burst').get('Uploads')"
check "  the big shard reads back whole" boto "
k = [k for k in keys('big/shards/') if s3.head_object(Bucket='kiln-burst', Key=k)['ContentLength'] == $big][0]
data = s3.get_object(Bucket='kiln-burst', Key=k)['Body'].read()
assert hashlib.blake2b(data, digest_size=32).hexdigest() == k.split('/')[-1].split('.')[0]"
check "  the version is visible" boto "assert keys('big/manifest.git/refs/tags/user-events/v1')"
check "pull refuses to overwrite a local tag that differs" runs pullswap 2 far "$kiln" pull burst -m "$tmp/big.git"
check "  one line naming the tag" one_line pullswap "user-events@v1" "a tag is never overwritten"

# ---- the same push to Ceph RGW (a throwaway cluster, lib.sh's rgw_start) ------------------------------
# v1, then v2 (only its new shards), a repeat (nothing), the big version
# (multipart in 5 MiB parts: RGW answers the completion with an empty
# <ETag>, which kiln does not need), read back with boto3 and stock git;
# the far side pulls and reads v2 from RGW.
if rgw_available && rgw_start "$tmp/ceph" kiln-burst; then
	cat >>"$tmp/targets.yaml" <<EOF
  ceph:
    store:
      url: s3://kiln-burst/prod
      endpoint: $rgw_endpoint
      http: true
      region: $rgw_region
      part_size_mb: 5
EOF
	b_endpoint=$rgw_endpoint b_region=$rgw_region b_ak=$rgw_ak b_sk=$rgw_sk b_token=''
	onprem() { env -u AWS_SESSION_TOKEN KILN_STORE="file://$tmp/store" KILN_MANIFEST="$tmp/m.git" \
		AWS_ACCESS_KEY_ID="$rgw_ak" AWS_SECRET_ACCESS_KEY="$rgw_sk" "$@"; }
	check "rgw: push v1" runs rpush1 0 onprem "$kiln" push user-events@v1 --to ceph
	check "rgw:   sent every shard of v1" has rpush1.out "shards    $n1 to send"
	boto "assert keys('prod/shards/') == ['prod/' + k for k in open('$tmp/v1.keys').read().split()], keys('prod/shards/')[:3]" 2>"$tmp/rb.err"
	check "rgw:   boto3 lists exactly v1's shards" test ! -s "$tmp/rb.err"
	check "rgw:   every shard boto3 fetches hashes to its name" hashes_ok
	check "rgw:   nothing outside shards/, manifest.git/, pushes/" \
		boto "assert all(k.split('/')[1] in ('shards', 'manifest.git', 'pushes') for k in keys('')), keys('')"
	check "rgw:   the push record says promoted and signed" boto "
r = json.loads(s3.get_object(Bucket='kiln-burst', Key='prod/pushes/user-events/v1.json')['Body'].read())
assert r['promoted'] and r['signed'] and r['version'] == 'v1', r"
	download prod/manifest.git/ "$tmp/rgw-dl.git"
	check "rgw: git fsck --strict on the pushed manifest" git --git-dir="$tmp/rgw-dl.git" fsck --strict --no-progress
	check "rgw: git verify-tag accepts the pushed v1" git --git-dir="$tmp/rgw-dl.git" -c gpg.format=ssh \
		-c gpg.ssh.allowedSignersFile="$tmp/allowed_signers" verify-tag user-events/v1
	check "rgw: push v2 (--json)" runs rpush2 0 onprem "$kiln" push user-events@v2 --to ceph --json
	check "rgw:   sent v2's new shards, found v1's present" $py -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["sent"] >= int(sys.argv[2]) and d["present"] >= int(sys.argv[3]) and d["version"] == "v2", d
' "$tmp/rpush2.out" "$(wc -l <"$tmp/v2-new.keys")" "$n1"
	check "rgw:   the bucket holds exactly v2's shards" \
		boto "assert keys('prod/shards/') == ['prod/' + k for k in open('$tmp/v2.keys').read().split()]"
	check "rgw: push v2 again (--json)" runs rpush2b 0 onprem "$kiln" push user-events@v2 --to ceph --json
	check "rgw:   sends nothing" $py -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["sent"] == 0 and d["present"] > 0, d' "$tmp/rpush2b.out"
	# the far side reads the manifest boto3 downloads (kiln pull, which fetches
	# file by file, is checked on the verifying server above)
	download prod/manifest.git/ "$tmp/rfar.git"
	rfar() { env -u KILN_MANIFEST -u KILN_STORE -u AWS_SESSION_TOKEN AWS_ENDPOINT_URL="http://$rgw_endpoint" \
		AWS_REGION="$rgw_region" AWS_ACCESS_KEY_ID="$rgw_ak" AWS_SECRET_ACCESS_KEY="$rgw_sk" "$@"; }
	check "rgw: kiln verify --deep v2 at the target" runs rfv 0 rfar "$kiln" verify user-events@v2 \
		-m "$tmp/rfar.git" --store s3://kiln-burst/prod --deep --allowed-signers "$tmp/allowed_signers"
	check "rgw:   every shard verified" has rfv.out "store: $(wc -l <"$tmp/v2.keys") shards verified"
	check "rgw: kiln cat at the far side" runs rfcat 0 rfar "$kiln" cat user-events@v2 --split train \
		-m "$tmp/rfar.git" --store s3://kiln-burst/prod
	check "rgw:   the same records as on-prem" cmp -s "$tmp/rfcat.out" "$tmp/local.cat"
	check "rgw: push the big version (multipart, 5 MiB parts)" runs rbig 0 env -u AWS_SESSION_TOKEN \
		AWS_ACCESS_KEY_ID="$rgw_ak" AWS_SECRET_ACCESS_KEY="$rgw_sk" "$kiln" push user-events@v1 --to ceph \
		--set targets.ceph.store.url=s3://kiln-burst/big
	check "rgw:   the big shard is a multipart object and reads back whole" boto "
k = [k for k in keys('big/shards/') if s3.head_object(Bucket='kiln-burst', Key=k)['ContentLength'] == $big][0]
assert s3.head_object(Bucket='kiln-burst', Key=k)['ETag'].endswith('-%d\"' % (($big + (5 << 20) - 1) // (5 << 20)))
data = s3.get_object(Bucket='kiln-burst', Key=k)['Body'].read()
assert hashlib.blake2b(data, digest_size=32).hexdigest() == k.split('/')[-1].split('.')[0]"
	check "rgw:   no multipart upload left behind" boto "assert not s3.list_multipart_uploads(Bucket='kiln-burst').get('Uploads')"
	check "rgw:   the version is visible" boto "assert keys('big/manifest.git/refs/tags/user-events/v1')"
fi
rgw_stop

check "no personal data in any log, stdout or stderr" pii_scan_logs
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
