#!/usr/bin/env bash
# `kiln push` and kiln's S3 client against a hostile or unlucky target
# (issue 25), with s3v4_server.py's hostile answers (its fault rules) and
# AWS's answer to a key sent without its session token: a push stopped after
# the ref was written, then resumed, writes info/refs and the push record;
# two pushes of different v1 tags at once: exactly one wins, the ref and the
# record name the same tag, the other fails in one line; a truncated git
# object at the target is sent again; a listing that always says IsTruncated
# with the same token ends; a 200 with an <Error> body is a failure; a 307
# and a 20 MiB answer are one line naming the method, bucket, key and
# endpoint; an upload of the same key younger than a day (a live push's) is
# not aborted by another put, an older one is; the refusal for a signer not
# in --allowed-signers names that option; a create-only put (the ref's) on
# file:// and s3:// refuses a key that exists.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${KILN_BUILDDIR:-$src/build}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
tool=$build/tests/s3_client_tool
py=/usr/bin/python3
pipeline=$src/pipelines/user-events.yaml
need git curl
$py -c 'import boto3, botocore' 2>/dev/null || { echo "FAIL: python3-boto3 missing (run scripts/bootstrap)"; echo "0 passed, 1 failed"; exit 1; }

unset http_proxy https_proxy all_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY
export no_proxy='127.0.0.1,localhost' NO_PROXY='127.0.0.1,localhost'
unset KILN_BRANCH KILN_SPLIT_SALT KILN_TARGETS AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3 AWS_DEFAULT_REGION

tmp=$(mktemp -d)
pid=''
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
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
last_line() { # NAME TEXT...: the last line of NAME's stderr (after the push_object lines) holds every TEXT
	local name=$1 t
	shift
	for t in "$@"; do
		tail -1 "$tmp/$name.err" | grep -qF -- "$t" || { echo "  last line of $name's stderr lacks '$t':"; tail -3 "$tmp/$name.err" | sed 's/^/  | /'; return 1; }
	done
}
has() { grep -qF -- "$2" "$tmp/$1" || { echo "  $1 lacks '$2':"; sed 's/^/  | /' "$tmp/$1" | head -8; return 1; }; }

# ---- two sites, each with its own signed v1 of user-events ------------------------------
gates=(--set promote.min_records.train=1 --set promote.min_records.dev=0 --set promote.min_records.test=0
	--set promote.ratio_tolerance=1 --set promote.max_quarantine_rate=1)
"$kiln" keygen --out "$tmp/sign.key" --comment release@kiln.test >/dev/null
"$kiln" keygen --out "$tmp/other.key" --comment other@kiln.test >/dev/null
printf 'other@kiln.test namespaces="git" %s\n' "$(cut -d' ' -f1,2 "$tmp/other.key.pub")" >"$tmp/other_signers"
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
export KILN_KEY_FILE=$tmp/hmac.key
site() { # NAME SEED: a store, a manifest and a promoted, signed v1 in $tmp/NAME-*
	KILN_INPUT=$tmp/$1.jsonl KILN_STORE=file://$tmp/$1-store KILN_MANIFEST=$tmp/$1.git
	export KILN_INPUT KILN_STORE KILN_MANIFEST
	$py "$src/bench/gen-user-events.py" --records 300 --seed "$2" -o "$tmp/$1.jsonl" &&
		"$kiln" run "$pipeline" --set shards.target_bytes=16K >/dev/null 2>"$tmp/$1.err" &&
		"$kiln" promote user-events@main --pipeline "$pipeline" "${gates[@]}" \
			--set manifest.signing_key="$tmp/sign.key" >/dev/null 2>>"$tmp/$1.err"
}
check "site b: a signed v1" site b 2
check "site a: another signed v1 (the one pushed by default below)" site a 1

# ---- the target: temporary credentials, answered as AWS answers them -------------------------
ak=ASIAKILNHOSTILE sk='kiln/hostile+secret' token='kiln-hostile-session/token=='
$py "$src/tests/integration/s3v4_server.py" --root "$tmp/s3data" --port-file "$tmp/port" \
	--access-key "$ak" --secret-key "$sk" --session-token "$token" --bucket kiln \
	--missing-token-code InvalidAccessKeyId --log "$tmp/server.log" &
pid=$!
poll 10 test -s "$tmp/port" || { echo "FAIL: the S3 server did not start"; tail "$tmp/server.log"; echo "$passed passed, 1 failed"; exit 1; }
port=$(cat "$tmp/port")
export AWS_ACCESS_KEY_ID=$ak AWS_SECRET_ACCESS_KEY=$sk AWS_SESSION_TOKEN=$token AWS_REGION=us-east-1
cat >"$tmp/targets.yaml" <<EOF
targets:
  burst:
    store:
      url: s3://kiln/prod
      endpoint: 127.0.0.1:$port
      http: true
      max_retries: 1
EOF
export KILN_TARGETS=$tmp/targets.yaml
ctl() { curl -sf -X "$1" ${3:+-H 'Content-Type: application/json' --data "$3"} "http://127.0.0.1:$port$2"; }
fault() { ctl DELETE /_ctl/faults >/dev/null && ctl POST /_ctl/faults "$1" >/dev/null; }
boto() { # python code with s3 = a boto3 client of the target
	$py -c "import boto3, json, os, sys
from botocore.config import Config
s3 = boto3.client('s3', endpoint_url='http://127.0.0.1:$port', region_name='us-east-1',
    aws_access_key_id='$ak', aws_secret_access_key='$sk', aws_session_token='$token',
    config=Config(signature_version='s3v4', s3={'addressing_style': 'path'}))
def get(key): return s3.get_object(Bucket='kiln', Key=key)['Body'].read()
def exists(key):
    return any(o['Key'] == key for o in s3.list_objects_v2(Bucket='kiln', Prefix=key).get('Contents', []))
$1"
}
to() { echo "--set targets.burst.store.url=s3://kiln/$1"; }
tag_a=$(git --git-dir="$tmp/a.git" rev-parse refs/tags/user-events/v1)
tag_b=$(git --git-dir="$tmp/b.git" rev-parse refs/tags/user-events/v1)
check "the two sites' v1 tags differ" test "$tag_a" != "$tag_b"

# ---- item 11: a push stopped after the ref was written, then resumed ----------------------
fault '[{"action": "status", "status": 500, "method": "PUT", "match": "/manifest.git/info/refs", "count": 100}]'
check "push stopped at info/refs (after the ref)" runs cut1 2 "$kiln" push user-events@v1 --to burst $(to r1)
check "  the ref is there, info/refs is not" boto "assert exists('r1/manifest.git/refs/tags/user-events/v1') and not exists('r1/manifest.git/info/refs')"
ctl DELETE /_ctl/faults >/dev/null
check "resumed: exit 0" runs resume1 0 "$kiln" push user-events@v1 --to burst $(to r1)
check "  info/refs names the version" boto "assert b'$tag_a\trefs/tags/user-events/v1\n' in get('r1/manifest.git/info/refs')"
check "  the push record is written" boto "assert json.loads(get('r1/pushes/user-events/v1.json'))['tag'] == '$tag_a'"
fault '[{"action": "status", "status": 500, "method": "PUT", "match": "/pushes/user-events/v1.json", "count": 100}]'
check "push stopped at the push record (after the ref and info/refs)" runs cut2 2 "$kiln" push user-events@v1 --to burst $(to r2)
ctl DELETE /_ctl/faults >/dev/null
check "resumed: exit 0" runs resume2 0 "$kiln" push user-events@v1 --to burst $(to r2)
check "  the push record is written" boto "assert json.loads(get('r2/pushes/user-events/v1.json'))['tag'] == '$tag_a'"
ctl DELETE /_ctl/log >/dev/null
check "a repeat: exit 0" runs repeat 0 "$kiln" push user-events@v1 --to burst $(to r2)
check "  stores nothing" test -z "$(ctl GET /_ctl/log | $py -c 'import json, sys
print(" ".join(r["path"] for r in json.load(sys.stdin) if r["method"] == "PUT"))')"

# ---- item 3: a truncated git object at the target is sent again --------------------------------
obj=$(boto "print(sorted(o['Key'] for o in s3.list_objects_v2(Bucket='kiln', Prefix='r1/manifest.git/objects/')['Contents'] if '/info/' not in o['Key'])[0])")
size=$(boto "print(len(get('$obj')))")
boto "s3.put_object(Bucket='kiln', Key='$obj', Body=get('$obj')[:$size // 2])"
check "push again over a truncated git object" runs trunc 0 "$kiln" push user-events@v1 --to burst $(to r1)
check "  sends it again" has trunc.out "manifest  1 git objects to send"
check "  it is whole at the target" boto "assert len(get('$obj')) == $size"

# ---- item 11: two pushes of different v1 tags at once ------------------------------------------
# both ref PUTs are held until both arrived: each push has checked the ref absent
fault '[{"action": "barrier", "method": "PUT", "match": "/manifest.git/refs/tags/user-events/v1", "count": 2}]'
"$kiln" push user-events@v1 --to burst $(to race) >"$tmp/race-a.out" 2>"$tmp/race-a.err" </dev/null &
pa=$!
KILN_STORE=file://$tmp/b-store KILN_MANIFEST=$tmp/b.git "$kiln" push user-events@v1 --to burst $(to race) \
	>"$tmp/race-b.out" 2>"$tmp/race-b.err" </dev/null &
pb=$!
ra=0 rb=0
wait $pa || ra=$?
wait $pb || rb=$?
ctl DELETE /_ctl/faults >/dev/null
zeros=$(((ra == 0) + (rb == 0)))
check "two pushes at once: exactly one exits 0 ($ra, $rb)" test "$zeros" -eq 1 -a "$((ra + rb))" -eq 2
loser=race-b winner=$tag_a
[ "$ra" -eq 0 ] || loser=race-a winner=$tag_b
check "  the other: a last line saying never replaced" last_line "$loser" "never replaced"
check "  the ref, info/refs and the record name the winner's tag" boto "
assert get('race/manifest.git/refs/tags/user-events/v1') == b'$winner\n'
assert json.loads(get('race/pushes/user-events/v1.json'))['tag'] == '$winner'
assert b'$winner\t' in get('race/manifest.git/info/refs')"

# ---- item 11: a listing that never ends; a 200 with an <Error> inside -------------------------------
fault '[{"action": "list_loop", "method": "GET", "match": "list-type=2", "count": 1000000}]'
check "IsTruncated forever with the same token: refused" runs loop 2 timeout 60 "$kiln" push user-events@v1 --to burst $(to r3) --dry-run
check "  one line naming the endpoint" one_line loop "GET s3://kiln/r3/" "at 127.0.0.1:$port" "the one just sent"
fault '[{"action": "error200", "method": "PUT", "match": "/manifest.git/refs/tags/user-events/v1", "count": 100}]'
check "a 200 with an <Error> body on PUT is a failure" runs e200 2 "$kiln" push user-events@v1 --to burst $(to r4)
check "  a last line naming the key, the endpoint and the error" last_line e200 \
	"PUT s3://kiln/r4/manifest.git/refs/tags/user-events/v1 at 127.0.0.1:$port: HTTP 200 InternalError"
check "  the version is not visible" boto "assert not exists('r4/manifest.git/refs/tags/user-events/v1')"
fault '[{"action": "error200", "method": "PUT", "match": "/manifest.git/refs/tags/user-events/v1", "count": 1}]'
check "  once: retried, then pushed" runs e200b 0 "$kiln" push user-events@v1 --to burst $(to r4)
check "  and the version is there" boto "assert get('r4/manifest.git/refs/tags/user-events/v1') == b'$tag_a\n'"

# ---- item 15: every HTTP error names the endpoint; a huge answer is refused -----------------------
fault '[{"action": "redirect", "match": "list-type=2", "count": 100}]'
check "a 307: refused" runs r307 2 "$kiln" push user-events@v1 --to burst $(to r5) --dry-run
check "  one line naming the method, bucket, key and endpoint" one_line r307 "GET s3://kiln/r5/" \
	"at 127.0.0.1:$port: HTTP 307 TemporaryRedirect" "set the endpoint or region"
fault '[{"action": "huge", "match": "list-type=2", "count": 100}]'
check "a 20 MiB answer: refused" runs huge 2 "$kiln" push user-events@v1 --to burst $(to r5) --dry-run
check "  one line naming it" one_line huge "GET s3://kiln/r5/" "at 127.0.0.1:$port" "over 8 MiB"
ctl DELETE /_ctl/faults >/dev/null
check "no session token (AWS answers InvalidAccessKeyId)" runs notoken 2 env -u AWS_SESSION_TOKEN "$kiln" push user-events@v1 --to burst $(to r5)
check "  one line: check the session token" one_line notoken "InvalidAccessKeyId" "check the session token"
check "a signer not in --allowed-signers" runs signers 2 "$kiln" push user-events@v1 --to burst $(to r5) --allowed-signers "$tmp/other_signers"
check "  one line naming --allowed-signers" one_line signers "not signed by a key of --allowed-signers"

# ---- item 11: a put aborts only the stale uploads of its key, never a live one --------------------------
head -c $((6 << 20)) /dev/urandom >"$tmp/big.bin"
old=$(boto "print(s3.create_multipart_upload(Bucket='kiln', Key='st/big')['UploadId'])")
live=$(boto "print(s3.create_multipart_upload(Bucket='kiln', Key='st/big')['UploadId'])")
$py - "$tmp/s3data/.uploads/$old/upload.json" <<'EOF'
import json, sys, time
info = json.load(open(sys.argv[1]))
info["initiated"] = time.time() - 2 * 86400  # abandoned two days ago
json.dump(info, open(sys.argv[1], "w"))
EOF
check "a multipart put of the key" runs stale 0 env S3_PART_SIZE=$((5 << 20)) "$tool" "127.0.0.1:$port" kiln put st/big "$tmp/big.bin"
check "  aborted the upload two days old, kept the live one" boto "
ids = [u['UploadId'] for u in s3.list_multipart_uploads(Bucket='kiln').get('Uploads', [])]
assert ids == ['$live'], ids"
check "  the object is whole" boto "assert get('st/big') == open('$tmp/big.bin', 'rb').read()"

# ---- the create-only put under the ref, on both backends -----------------------------------------------
echo first >"$tmp/first" && echo second >"$tmp/second"
for url in "file://$tmp/cas-store" "s3://kiln/cas"; do
	st() { KILN_S3_ENDPOINT=127.0.0.1:$port KILN_S3_HTTP=1 "$build/tests/store_tool" "$url" "$@"; }
	check "$url: put-new of an absent key" runs cas1 0 st put-new refs/x "$tmp/first"
	check "  put-new again: refused, one line" runs cas2 1 st put-new refs/x "$tmp/second"
	check "  saying it exists" one_line cas2 "exists already"
	check "  the first bytes stay" runs cas3 0 st get refs/x
	check "  (first)" cmp -s "$tmp/cas3.out" "$tmp/first"
done

check "no personal data in any log, stdout or stderr" pii_scan_logs
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
