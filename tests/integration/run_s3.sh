#!/usr/bin/env bash
# `kiln run` end to end into an s3:// store: tests/integration/s3v4_server.py
# on 127.0.0.1, which recomputes every request's Signature V4 with botocore's
# signer (see s3_store.sh for the store's own checks). Generated user events
# (5 % invalid) are curated into s3://kiln-run/kiln; every shard the manifest
# lists is read back with an independent client (Debian's python3-boto3) and
# its BLAKE2b-256 compared with its name, then the bucket's kiln/ prefix is
# downloaded and tests/integration/curate_check.py checks it as a file store.
# Also: a wrong secret, a credentials file (0644 refused, 0600 used) and an
# unreachable endpoint, each on a branch of its own: exit 2, one line on
# stderr, no secret in it, nothing committed. Then the same run (a function
# called once per server) on Ceph RGW, a throwaway single-node cluster
# (lib.sh's rgw_start): one SKIP line where Ceph is not installed, a FAIL
# where it is and the cluster cannot start.
# Skips (exit 77) without git or python3-boto3/python3-zstandard.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
checker=$src/tests/integration/curate_check.py
gen=$src/bench/gen-user-events.py
pipeline=$src/pipelines/user-events.yaml
contract=$src/contracts/user-events.yaml
bucket="kiln-run"
ref=refs/heads/user-events/main

for tool in git; do
	command -v "$tool" >/dev/null || { echo "SKIP: $tool is not on PATH (run scripts/bootstrap)"; exit 77; }
done
if ! "$py" -c 'import boto3, zstandard' 2>/dev/null; then
	echo "SKIP: python3-boto3 or python3-zstandard is not installed (run scripts/bootstrap)"
	exit 77
fi
need_kiln

unset http_proxy https_proxy all_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY
export no_proxy='127.0.0.1,localhost,.localhost' NO_PROXY='127.0.0.1,localhost,.localhost'
unset KILN_S3_ENDPOINT KILN_S3_HTTP KILN_S3_CREDENTIALS_FILE KILN_S3_VIRTUAL_HOST KILN_S3_MAX_RETRIES
unset KILN_BRANCH KILN_SPLIT_SALT KILN_STORE

tmp=$(mktemp -d)
pid=''
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	rgw_stop
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the verifying S3 server
ak=AKIDKILNRUN sk=kilnRunSecret42
"$py" "$src/tests/integration/s3v4_server.py" --root "$tmp/data" --port-file "$tmp/port" \
	--access-key "$ak" --secret-key "$sk" --bucket "$bucket" --log "$tmp/server.log" &
pid=$!
if ! poll 10 test -s "$tmp/port"; then
	echo "ERROR: s3v4_server.py did not start within 10 s:"
	tail -20 "$tmp/server.log"
	exit 99
fi
port=$(cat "$tmp/port")
endpoint=127.0.0.1:$port
echo "s3v4_server.py on $endpoint"

export AWS_ACCESS_KEY_ID=$ak AWS_SECRET_ACCESS_KEY=$sk
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_MANIFEST=$tmp/m.git
s3opts=(--set store.endpoint="$endpoint" --set store.http=true --set store.style=path)

runs() { # NAME WANT_STATUS COMMAND...: output in $tmp/NAME.out/.err, seconds in $tmp/NAME.time
	local name=$1 want=$2 rc=0 t0
	shift 2
	t0=$(date +%s.%N)
	"$@" </dev/null >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' >"$tmp/$name.time"
	[ "$rc" -eq "$want" ] && return 0
	echo "  $name: exit $rc, expected $want"
	sed 's/^/  | /' "$tmp/$name.err" | head -5
	return 1
}

one_line_error() { # NAME FIXED-STRING...: stderr of NAME is one line containing every string, stdout empty
	local name=$1 s
	shift
	if [ "$(wc -l <"$tmp/$name.err")" -eq 1 ] && [ ! -s "$tmp/$name.out" ]; then
		for s in "$@"; do
			grep -qiF -- "$s" "$tmp/$name.err" || { echo "  stderr of $name lacks '$s':"; sed 's/^/  | /' "$tmp/$name.err"; return 1; }
		done
		return 0
	fi
	echo "  $name: wanted one line on stderr and nothing on stdout:"
	sed 's/^/  | /' "$tmp/$name.out" "$tmp/$name.err" | head -8
	return 1
}

error_matches() { # NAME ERE: stderr of NAME matches (case-insensitive)
	grep -Eqi -- "$2" "$tmp/$1.err" && return 0
	echo "  stderr of $1 does not match /$2/:"
	sed 's/^/  | /' "$tmp/$1.err" | head -5
	return 1
}

no_secret() { # NAME WORD...: no WORD (a secret) in stdout or stderr of NAME
	local name=$1 w
	shift
	for w in "$@"; do
		if grep -qw -- "$w" "$tmp/$name.out" "$tmp/$name.err"; then
			echo "  $name leaks '$w':"
			sed 's/^/  | /' "$tmp/$name.err" | head -5
			return 1
		fi
	done
}

contains() { # FILE FIXED-STRING
	grep -qF -- "$2" "$1" || { echo "  $1 lacks '$2':"; sed 's/^/  | /' "$1" | head -5; return 1; }
}

gitm() { git --git-dir="$tmp/m.git" "$@"; }
refs() { gitm for-each-ref --format='%(refname) %(objectname)' 2>/dev/null; }
refs_unchanged() { # BEFORE-FILE: the manifest's refs are as they were
	diff -u "$1" <(refs) >"$tmp/refs.diff" && return 0
	echo "  the manifest's refs changed:"
	sed 's/^/  | /' "$tmp/refs.diff"
	return 1
}
no_branch() { # BRANCH
	[ -z "$(gitm rev-parse -q --verify "refs/heads/user-events/$1" 2>/dev/null)" ] && return 0
	echo "  refs/heads/user-events/$1 exists"
	return 1
}

s3py() { # boto3 against the same server, path style: s3py CMD ARGS...
	"$py" - "$port" "$bucket" "$ak" "$sk" "$@" <<'EOF'
import hashlib, json, os, re, subprocess, sys
import boto3
from botocore.config import Config
port, bucket, ak, sk, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
s3 = boto3.client('s3', endpoint_url='http://127.0.0.1:%s' % port, region_name='us-east-1',
                  aws_access_key_id=ak, aws_secret_access_key=sk,
                  config=Config(signature_version='s3v4', s3={'addressing_style': 'path'},
                                retries={'max_attempts': 1}))

def keys(prefix):
    out = []
    for page in s3.get_paginator('list_objects_v2').paginate(Bucket=bucket, Prefix=prefix):
        out += [(o['Key'], o['Size']) for o in page.get('Contents', [])]
    return sorted(out)

if cmd == 'ls':          # PREFIX: "KEY SIZE" lines
    for k, n in keys(args[0]):
        print(k, n)
elif cmd == 'download':  # PREFIX DIR: every object under PREFIX into DIR/<key without PREFIX>
    n = 0
    for k, _ in keys(args[0]):
        rel = k[len(args[0]):]
        assert rel and not rel.startswith('/') and '..' not in rel.split('/'), k
        path = os.path.join(args[1], rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
            f.write(s3.get_object(Bucket=bucket, Key=k)['Body'].read())
        n += 1
    print(n)
elif cmd == 'shards':    # GITDIR REF PREFIX: every shard listed in the manifest, read back and hashed
    gitdir, ref, prefix = args
    def git(*a):
        return subprocess.run(['git', '--git-dir=' + gitdir] + list(a), check=True,
                              stdout=subprocess.PIPE).stdout.decode()
    files = [f for f in git('ls-tree', '-r', '--name-only', ref, '--', 'splits').split('\n') if f]
    bad = n = 0
    for f in files:
        for line in git('show', '%s:%s' % (ref, f)).split('\n'):
            if not line:
                continue
            e = json.loads(line)
            h = e['shard']
            key = '%sshards/%s/%s.jsonl.zst' % (prefix, h[:2], h)
            n += 1
            if not re.fullmatch('[0-9a-f]{64}', h) or not f.endswith('/%s.jsonl' % h[:2]):
                print('  %s: shard %s listed in the wrong file' % (f, h)); bad += 1
                continue
            try:
                data = s3.get_object(Bucket=bucket, Key=key)['Body'].read()
            except s3.exceptions.ClientError as ex:
                print('  %s: %s' % (key, ex.response['Error']['Code'])); bad += 1
                continue
            if hashlib.blake2b(data, digest_size=32).hexdigest() != h:
                print('  %s: BLAKE2b-256 of the object differs from its name' % key); bad += 1
            if len(data) != e['bytes']:
                print('  %s: %d bytes, the manifest says %d' % (key, len(data), e['bytes'])); bad += 1
    if n == 0:
        print('  no shards listed in %s' % ref); bad += 1
    print('%d shards checked' % n, file=sys.stderr)
    sys.exit(1 if bad else 0)
EOF
}

# ---- key and input
(umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$tmp/hmac.key")
check "key is 64 hex characters, mode 0600" \
	test "$(grep -Ec '^[0-9a-f]{64}$' "$tmp/hmac.key")" = 1 -a "$(stat -c %a "$tmp/hmac.key")" = 600
"$py" "$gen" --records 1500 --invalid-rate 0.05 --seed 11 -o "$tmp/in.jsonl" --expect "$tmp/in.expect"
check "generator wrote 1500 records" test "$(wc -l <"$tmp/in.jsonl")" -eq 1500

# ---- the run into s3://kiln-run/kiln, a function called once per server
# (the verifying one here, Ceph RGW at the end): s3py and s3opts name the
# server, MANIFEST the manifest it commits to
shards_ok() { # MANIFEST REF PREFIX
	s3py shards "$1" "$2" "$3" 2>"$tmp/shards.log" || { cat "$tmp/shards.log"; return 1; }
}
curated_ok() { # NAME STOREDIR BRANCH LOGS... (MANIFEST: $manifest, default $tmp/m.git)
	local name=$1 store=$2 branch=$3
	shift 3
	"$py" "$checker" --input "$tmp/in.jsonl" --key "$tmp/hmac.key" --store "$store" --manifest "${manifest:-$tmp/m.git}" \
		--dataset user-events --branch "$branch" --contract "$contract" --expect "$tmp/in.expect" --logs "$@" \
		>"$tmp/$name.check" 2>&1 && return 0
	sed 's/^/  | /' "$tmp/$name.check" | tail -40
	return 1
}
listed_into() { # NAME: boto3 lists kiln/ into $tmp/NAME.ls, not empty
	s3py ls kiln/ >"$tmp/$1.ls" 2>"$tmp/$1.ls.err" && test -s "$tmp/$1.ls"
}
downloaded_into() { # NAME: boto3 downloads kiln/ into $tmp/NAME.dl, every listed object
	local n
	mkdir -p "$tmp/$1.dl" && n=$(s3py download kiln/ "$tmp/$1.dl") && [ "$n" -eq "$(wc -l <"$tmp/$1.ls")" ] && [ "$n" -ge 2 ]
}
run_flow() { # LABEL NAME MANIFEST: the run, read back with boto3 and checked; its files are $tmp/NAME.*
	local label=$1 name=$2 manifest=$3 c
	check "${label}run into s3 exits 0" runs "$name" 0 env KILN_MANIFEST="$manifest" \
		"$kiln" run "$pipeline" --set store.url="s3://$bucket/kiln" "${s3opts[@]}"
	check "${label}run into s3 reports +1500 records" contains "$tmp/$name.out" "+1500 records"
	c=$(git --git-dir="$manifest" rev-parse -q --verify "$ref" 2>/dev/null)
	check "${label}run into s3 committed to $ref" test -n "$c"
	check "${label}run into s3: no secret in the output" no_secret "$name" "$sk"
	check "${label}every listed shard is in the bucket, BLAKE2b-256 = its name" shards_ok "$manifest" "$ref" kiln/
	check "${label}bucket listing (boto3)" listed_into "$name"
	check "${label}quarantine object in the bucket" \
		grep -Eq '^kiln/quarantine/user-events/0/user-events/main/[0-9]+-[0-9]+\.jsonl\.zst [1-9][0-9]* *$' "$tmp/$name.ls"
	check "${label}nothing outside shards/ and quarantine/" \
		test -z "$(grep -Ev '^kiln/(shards/[0-9a-f]{2}/[0-9a-f]{64}\.jsonl\.zst|quarantine/user-events/0/user-events/main/[0-9]+-[0-9]+\.jsonl\.zst) ' "$tmp/$name.ls")"
	check "${label}download kiln/ into a directory" downloaded_into "$name"
	check "${label}the downloaded store passes curate_check.py" curated_ok "$name" "$tmp/$name.dl" main \
		"$tmp/$name.out" "$tmp/$name.err"
	check "${label}git fsck --strict" git --git-dir="$manifest" fsck --strict --no-progress
}
run_flow "" s3run "$tmp/m.git"
c1=$(gitm rev-parse -q --verify "$ref" 2>/dev/null)
cp "$tmp/s3run.ls" "$tmp/bucket.ls"

# ---- a wrong secret: exit 2, one line naming the signature and the endpoint, nothing written
refs >"$tmp/refs.before"
cp "$tmp/bucket.ls" "$tmp/bucket.before"
check "wrong secret: exit 2" runs wrongsecret 2 env AWS_SECRET_ACCESS_KEY=wrong \
	"$kiln" run "$pipeline" --set branch=wrong-secret --set store.url="s3://$bucket/kiln" "${s3opts[@]}"
check "wrong secret: one line naming the endpoint" one_line_error wrongsecret "$endpoint"
check "wrong secret: names the signature or credentials" error_matches wrongsecret 'signature|credential|secret key'
check "wrong secret: no secret in the error" no_secret wrongsecret wrong "$sk"
check "wrong secret: no branch" no_branch wrong-secret
check "wrong secret: manifest refs unchanged" refs_unchanged "$tmp/refs.before"
listed() { s3py ls "$1" >"$tmp/listed" || { echo "  boto3 could not list $1"; return 1; }; }
check "wrong secret: boto3 lists the bucket" listed kiln/
check "wrong secret: bucket unchanged" diff -u "$tmp/bucket.before" "$tmp/listed"

# ---- a credentials file: 0644 refused, 0600 used (environment credentials unset)
printf '# kiln\naccess_key_id = %s\nsecret_access_key=%s\n' "$ak" "$sk" >"$tmp/creds"
chmod 644 "$tmp/creds"
check "credentials file 0644: exit 2" runs creds644 2 env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY \
	"$kiln" run "$pipeline" --set branch=creds-file --set store.url="s3://$bucket/kiln-creds" \
	"${s3opts[@]}" --set store.credentials_file="$tmp/creds"
check "credentials file 0644: one line naming the file and its mode" one_line_error creds644 "$tmp/creds" "0644"
check "credentials file 0644: no secret in the error" no_secret creds644 "$sk"
check "credentials file 0644: no branch" no_branch creds-file
check "credentials file 0644: manifest refs unchanged" refs_unchanged "$tmp/refs.before"
nothing_under() { # PREFIX: boto3 lists the prefix (and succeeds) and finds nothing
	local listing
	listing=$(s3py ls "$1") || { echo "  boto3 could not list $1"; return 1; }
	[ -z "$listing" ] || { echo "  objects under $1"; return 1; }
}
check "credentials file 0644: nothing in the bucket" nothing_under kiln-creds/
chmod 600 "$tmp/creds"
check "credentials file 0600: exit 0" runs creds600 0 env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY \
	"$kiln" run "$pipeline" --set branch=creds-file --set store.url="s3://$bucket/kiln-creds" \
	"${s3opts[@]}" --set store.credentials_file="$tmp/creds"
check "credentials file 0600: reports +1500 records" contains "$tmp/creds600.out" "+1500 records"
check "credentials file 0600: committed to user-events/creds-file" \
	test -n "$(gitm rev-parse -q --verify refs/heads/user-events/creds-file 2>/dev/null)"
check "credentials file 0600: main untouched" test "$(gitm rev-parse -q --verify "$ref" 2>/dev/null)" = "$c1"
check "credentials file 0600: no secret in the output" no_secret creds600 "$sk"
check "credentials file 0600: every listed shard is in the bucket" shards_ok "$tmp/m.git" refs/heads/user-events/creds-file kiln-creds/
cf_downloaded() { mkdir -p "$tmp/dl-creds" && n=$(s3py download kiln-creds/ "$tmp/dl-creds") && [ "$n" -ge 2 ]; }
check "credentials file 0600: download kiln-creds/" cf_downloaded
check "credentials file 0600: passes curate_check.py" curated_ok creds600 "$tmp/dl-creds" creds-file \
	"$tmp/creds600.out" "$tmp/creds600.err"

# ---- an unreachable endpoint (a closed port): exit 2 in bounded time, nothing committed
refs >"$tmp/refs.before"
closed=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
check "unreachable endpoint: exit 2 (within 60 s)" runs unreachable 2 timeout 60 \
	"$kiln" run "$pipeline" --set branch=unreachable --set store.url="s3://$bucket/kiln-unreachable" \
	--set store.endpoint="127.0.0.1:$closed" --set store.http=true --set store.style=path --set store.max_retries=1
check "unreachable endpoint: one line naming the endpoint" one_line_error unreachable "127.0.0.1:$closed"
check "unreachable endpoint: no secret in the error" no_secret unreachable "$sk"
check "unreachable endpoint: no branch" no_branch unreachable
check "unreachable endpoint: manifest refs unchanged" refs_unchanged "$tmp/refs.before"
echo "unreachable endpoint: failed after $(cat "$tmp/unreachable.time") s"

check "git fsck --strict after all runs" gitm fsck --strict --no-progress
check "no S3 key in the manifest" bash -c "! git --git-dir='$tmp/m.git' cat-file --batch-all-objects --batch | grep -qa $sk"

# ---- the same run on Ceph RGW (a throwaway cluster, lib.sh's rgw_start; one
# SKIP line where Ceph is not installed, a FAIL where it cannot start)
server_port=$port
if rgw_available && rgw_start "$tmp/ceph" "$bucket"; then
	port=$rgw_port ak=$rgw_ak sk=$rgw_sk
	s3opts=(--set store.endpoint="$rgw_endpoint" --set store.http=true --set store.style=path
		--set store.region="$rgw_region")
	AWS_ACCESS_KEY_ID=$ak AWS_SECRET_ACCESS_KEY=$sk run_flow "rgw: " rgwrun "$tmp/rgw.git"
	check "rgw: no S3 key in the manifest" bash -c "! git --git-dir='$tmp/rgw.git' cat-file --batch-all-objects --batch | grep -qa $sk"
fi
rgw_stop
port=$server_port

if [ "$failed" -gt 0 ]; then
	echo "server log (last 20 lines):"
	tail -20 "$tmp/server.log"
fi
check "no personal data in any log, stdout or stderr" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
