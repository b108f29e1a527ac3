#!/usr/bin/env bash
# Signature V4 and the S3 client, checked by code no one here wrote:
#  - kiln's signer against botocore's on generated requests (sigv4_botocore.py);
#  - the test server (s3v4_server.py: botocore recomputes every request's
#    signature, checks the payload hash, the clock and the session token)
#    against boto3 and curl (s3v4_server_selftest.py), so it is known strict;
#  - kiln's S3 client (tests/s3_client_tool) against that server: every
#    request verified, the bytes read back by boto3, a listing of 1001 keys
#    over two pages, path-style and virtual-hosted, multipart uploads (one
#    killed midway and put again: nothing left behind), retries through injected
#    503s, a dropped connection and a cut-off answer (resumed with a Range),
#    and one clear line for a wrong secret, a skewed clock or a missing token.
# Needs Debian's python3-boto3 and python3-botocore (scripts/bootstrap).
set -uo pipefail
src=${KILN_SRCDIR:?} build=${KILN_BUILDDIR:?}
. "$src/tests/integration/lib.sh"
py=/usr/bin/python3
$py -c 'import boto3, botocore' 2>/dev/null || { echo "FAIL: python3-boto3 missing (run scripts/bootstrap)"; echo "0 passed, 1 failed"; exit 1; }
tool=$build/tests/s3_client_tool
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-s3v4-XXXXXX")
pid=''
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

check "kiln's signatures and canonical requests equal botocore's (500 generated requests)" \
	$py "$src/tests/integration/sigv4_botocore.py" "$build/tests/sigv4_tool" 500
check "the test server verifies SigV4 as AWS does (its self-test with boto3 and curl)" \
	$py "$src/tests/integration/s3v4_server_selftest.py"

# --- kiln's client against the verifying server --------------------------------
ak=AKIDKILNTEST sk='kiln/test+secret' token='kiln-session-token'
$py "$src/tests/integration/s3v4_server.py" --root "$tmp/s3data" --port-file "$tmp/port" --region eu-central-1 \
	--access-key "$ak" --secret-key "$sk" --session-token "$token" --bucket kiln --log "$tmp/server.log" &
pid=$!
poll 10 test -s "$tmp/port" || { echo "FAIL: the test server did not start"; tail "$tmp/server.log"; echo "$passed passed, 1 failed"; exit 1; }
port=$(cat "$tmp/port")
export AWS_ACCESS_KEY_ID=$ak AWS_SECRET_ACCESS_KEY=$sk AWS_SESSION_TOKEN=$token AWS_REGION=eu-central-1
s3() { "$tool" "127.0.0.1:$port" kiln "$@"; }
ctl() { # METHOD PATH [JSON]
	curl -sf -X "$1" ${3:+-H 'Content-Type: application/json' --data "$3"} "http://127.0.0.1:$port$2"
}
boto() { # python code with s3 = a boto3 client of the server, bucket "kiln"
	$py -c "import boto3, sys
from botocore.config import Config
s3 = boto3.client('s3', endpoint_url='http://127.0.0.1:$port', region_name='eu-central-1',
    aws_access_key_id='$ak', aws_secret_access_key='$sk', aws_session_token='$token',
    config=Config(signature_version='s3v4', s3={'addressing_style': 'path'}))
$1"
}
key='shards/ab/a b+c(1)!*'"'"'~é.jsonl.zst'
head -c 3000000 /dev/urandom >"$tmp/obj"

check "put: a key with spaces, reserved and UTF-8 characters" s3 put "$key" "$tmp/obj"
check "boto3 reads back exactly the bytes kiln put" \
	boto "sys.stdout.buffer.write(s3.get_object(Bucket='kiln', Key='''$key''')['Body'].read())" >"$tmp/boto.out"
check "  ...byte for byte" cmp -s "$tmp/boto.out" "$tmp/obj"
check "get returns the object byte for byte" bash -c 's3() { "$0" "$1" kiln "${@:2}"; }; s3 127.0.0.1:'"$port"' get "$2" | cmp -s - "$3"' "$tool" _ "$key" "$tmp/obj"
size_is() { [ "$(s3 head "$key")" = 3000000 ]; }
check "head gives the size" size_is
status_is 3 s3 head shards/none
check "head of a missing object: not found, one line naming it" grep -q "s3://kiln/shards/none at 127.0.0.1:$port: HTTP 404 NoSuchKey" "$tmp/err"
s3 ls shards/ >"$tmp/ls"
check "list names the key with its size" grep -qF "$key 3000000 " "$tmp/ls"
check "virtual-hosted addressing (Host kiln.localhost:PORT) reads the same object" \
	bash -c 'S3_VIRTUAL=1 "$0" localhost:'"$port"' kiln get "$1" | cmp -s - "$2"' "$tool" "$key" "$tmp/obj"

# a listing over two pages (the server pages at 1000 keys, as S3 does)
boto "
for i in range(1001):
    s3.put_object(Bucket='kiln', Key='many/%04d' % i, Body=b'x')"
s3 ls many/ >"$tmp/many"
many_listed() { [ "$(wc -l <"$tmp/many")" -eq 1001 ] && [ "$(head -n1 "$tmp/many" | cut -d' ' -f1)" = many/0000 ] && [ "$(tail -n1 "$tmp/many" | cut -d' ' -f1)" = many/1000 ]; }
check "list: 1001 keys over two pages, in order" many_listed
check "rm removes; rm of a missing object is fine" bash -c '"$0" 127.0.0.1:'"$port"' kiln rm many/0000 && "$0" 127.0.0.1:'"$port"' kiln rm many/0000' "$tool"

# multipart: above the part size (5 MiB here), parts signed one by one
head -c 12000000 /dev/urandom >"$tmp/big"
uploads_left() { boto "print(len(s3.list_multipart_uploads(Bucket='kiln').get('Uploads', [])))"; }
check "multipart put of 12 MB in 5 MiB parts" env S3_PART_SIZE=5242880 "$tool" "127.0.0.1:$port" kiln put big "$tmp/big"
boto "sys.stdout.buffer.write(s3.get_object(Bucket='kiln', Key='big')['Body'].read())" >"$tmp/boto.big"
check "boto3 reads the multipart object back byte for byte" cmp -s "$tmp/boto.big" "$tmp/big"
# killed in the middle (part 2 held by the server), then put again
ctl POST /_ctl/faults '[{"method": "PUT", "match": "partNumber=2", "action": "delay", "ms": 5000}]' >/dev/null
env S3_PART_SIZE=5242880 "$tool" "127.0.0.1:$port" kiln put big2 "$tmp/big" &
killed=$!
poll 10 bash -c '[ "$(curl -s http://127.0.0.1:'"$port"'/_ctl/faults)" = "[]" ]'
kill -9 "$killed"; wait "$killed" 2>/dev/null
ctl DELETE /_ctl/faults >/dev/null
check "a put killed mid-upload leaves its upload and no object" \
	bash -c '[ "$0" = 1 ] && ! "$1" 127.0.0.1:'"$port"' kiln head big2 2>/dev/null' "$(uploads_left)" "$tool"
# a put aborts an upload of its key only once it is a day old (a younger
# one may be another process's live upload): make the killed one two days old
$py - "$tmp/s3data/.uploads" <<'EOF'
import json, os, sys, time
for upload in os.listdir(sys.argv[1]):
    path = os.path.join(sys.argv[1], upload, "upload.json")
    info = json.load(open(path))
    info["initiated"] = time.time() - 2 * 86400
    json.dump(info, open(path, "w"))
EOF
check "put again: the object complete, the stale upload aborted" \
	bash -c 'env S3_PART_SIZE=5242880 "$0" 127.0.0.1:'"$port"' kiln put big2 "$1" && "$0" 127.0.0.1:'"$port"' kiln get big2 | cmp -s - "$1"' "$tool" "$tmp/big"
check "  ...no upload left" test "$(uploads_left)" = 0
# a part refused for good: the upload is aborted, the error says why
ctl POST /_ctl/faults '[{"method": "PUT", "match": "partNumber=2", "action": "status", "status": 400}]' >/dev/null
status_is 1 env S3_PART_SIZE=5242880 "$tool" "127.0.0.1:$port" kiln put big3 "$tmp/big"
ctl DELETE /_ctl/faults >/dev/null
check "a part refused: the put fails with the service's answer, nothing left" \
	bash -c 'grep -q "s3://kiln/big3 at .*HTTP 400" "$0" && [ "$1" = 0 ]' "$tmp/err" "$(uploads_left)"

# failures the client retries, and those it reports at once
ctl DELETE /_ctl/log >/dev/null
ctl POST /_ctl/faults '[{"method": "PUT", "action": "status", "status": 503, "count": 2}]' >/dev/null
check "put through two injected 503s" s3 put retried "$tmp/obj"
ctl POST /_ctl/faults '[{"method": "GET", "match": "retried", "action": "drop"}]' >/dev/null
check "get through a dropped connection" bash -c '"$0" 127.0.0.1:'"$port"' kiln get retried | cmp -s - "$1"' "$tool" "$tmp/obj"
ctl POST /_ctl/faults '[{"method": "GET", "match": "retried", "action": "truncate"}]' >/dev/null
check "get through an answer cut off halfway (resumed)" bash -c '"$0" 127.0.0.1:'"$port"' kiln get retried | cmp -s - "$1"' "$tool" "$tmp/obj"
ctl GET /_ctl/log >"$tmp/log.json"
log_ok() {
	$py - "$tmp/log.json" <<'PY'
import json, sys
log = json.load(open(sys.argv[1]))
assert all(e["signed"] for e in log if e["status"] is not None and e["status"] < 500), "an unsigned request"
# (only this key's: a part request of the refused upload above may finish late)
puts = [e["status"] for e in log if e["method"] == "PUT" and e["path"].endswith("/retried")]
assert puts == [503, 503, 200], puts
gets = [e["status"] for e in log if e["method"] == "GET" and e["path"].endswith("/retried")]
assert gets[0] is None and gets[1] == 200 and gets[2] == 200 and gets[3] in (200, 206), gets
PY
}
check "the server saw each request signed, the retries as injected" log_ok
ctl POST /_ctl/faults '[{"action": "status", "status": 503, "count": 10}]' >/dev/null
status_is 1 env S3_RETRIES=2 "$tool" "127.0.0.1:$port" kiln head retried
check "a service that stays down: gives up after 3 attempts, says so" grep -q "HTTP 503.*gave up after 3 attempts" "$tmp/err"
ctl DELETE /_ctl/faults >/dev/null

status_is 1 env AWS_SECRET_ACCESS_KEY=wrong-secret "$tool" "127.0.0.1:$port" kiln head retried
check "a wrong secret: SignatureDoesNotMatch and what to check, in one line" \
	bash -c '[ "$(wc -l <"$0")" -eq 1 ] && grep -q "HTTP 403 SignatureDoesNotMatch.*(check the secret key)" "$0" && ! grep -q "wrong-secret\|$1" "$0"' "$tmp/err" "$sk"
status_is 1 env -u AWS_SESSION_TOKEN "$tool" "127.0.0.1:$port" kiln head retried
check "no session token: InvalidToken" grep -q "HTTP 403 InvalidToken.*(check the session token)" "$tmp/err"
ctl POST /_ctl/clock '{"offset_s": 1200}' >/dev/null
status_is 1 s3 head retried
check "a clock 20 minutes off: RequestTimeTooSkewed, check the clock" grep -q "RequestTimeTooSkewed.*check this machine's clock" "$tmp/err"
ctl POST /_ctl/clock '{"offset_s": 0}' >/dev/null

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
