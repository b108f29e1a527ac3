#!/usr/bin/env bash
# A cache node after kiln erase (docs/CACHE.md, docs/ERASURE.md): a node
# pinning v1 and main syncs them; the subject is erased at the origin (and
# gc --apply); the next sync removes the superseded shards' files and the
# views of superseded commits, lists the hashes in <dir>/erased; the server
# answers 410 (JSON) for a superseded shard, GET and HEAD, and serves the
# rewritten version's shards; the views show the rewritten versions, hard
# links into shards/; an independent scan (python3, not kiln) of the whole
# cache directory finds nothing of the subject. Node B fetches the manifest
# by URL: its next sync takes the ledger, the replaced tag and the rewritten
# branch (never rebased) and drops the superseded shards too.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need git zstd curl ssh-keygen
tmp=$(mktemp -d)
pid=''
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

unset http_proxy https_proxy all_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY
export no_proxy='127.0.0.1,localhost' NO_PROXY='127.0.0.1,localhost'
unset KILN_BRANCH KILN_SPLIT_SALT KILN_CACHE_TOKEN
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
pipeline=$src/pipelines/user-events.yaml
check_py=$src/tests/integration/erase_check.py
ds=user-events
A=$tmp/cacheA
not() { ! "$@"; }

"$kiln" keygen --out "$tmp/sign.key" --comment release@kiln.test >/dev/null 2>&1
sign=(--set "manifest.signing_key=$tmp/sign.key")
gates=(--set promote.min_records.train=10 --set promote.min_records.dev=1 --set promote.min_records.test=1
	--set promote.ratio_tolerance=0.5 --set promote.max_quarantine_rate=0.5)
gen() { "$py" "$src/bench/gen-user-events.py" --records "$1" --seed "$2" >>"$KILN_INPUT"; }
plant() { # N: the subject (user id subject-42) in a curated record
	printf '%s\n' "{\"event_id\":\"00000000-0000-4000-8000-00000000010$1\",\"event_type\":\"click\",\"occurred_at\":\"2026-11-0${1}T10:00:00Z\",\"user_id\":\"subject-42\",\"consent\":true,\"device\":{\"os\":\"linux\"}}" >>"$KILN_INPUT"
}
shards_of() { # REF -> the hashes its splits list
	"$py" - "$tmp/m.git" "$1" <<'EOF'
import json, subprocess, sys
gitdir, ref = sys.argv[1:]
git = lambda *a: subprocess.run(['git', '--git-dir=' + gitdir] + list(a), check=True, stdout=subprocess.PIPE).stdout.decode()
for f in sorted(x for x in git('ls-tree', '-r', '--name-only', ref, '--', 'splits').split('\n') if x):
    for line in git('show', '%s:%s' % (ref, f)).split('\n'):
        if line:
            print(json.loads(line)['shard'])
EOF
}
holding() { # TOKEN HASH...: the hashes whose cached file holds TOKEN
	local t=$1 h
	shift
	for h in "$@"; do
		zstd -dc "$A/shards/${h:0:2}/$h.jsonl.zst" 2>/dev/null | grep -qF -- "$t" && echo "$h"
	done
}

gen 300 1
plant 1
check "run 1" status_is 0 "$kiln" run "$pipeline" "${sign[@]}"
check "promote v1" status_is 0 "$kiln" promote $ds@main --pipeline "$pipeline" "${gates[@]}" "${sign[@]}"
gen 200 2
check "run 2" status_is 0 "$kiln" run "$pipeline" "${sign[@]}"

cat >"$tmp/A.yaml" <<EOF
store: {url: file://$tmp/store}
manifest: $tmp/m.git
dir: $A
size_limit: 100M
watermarks: {high: 0.9, low: 0.8}
pins: [$ds@v1, $ds@main]
concurrency: 2
listen: 127.0.0.1:0
sync_seconds: 3600
EOF
check "sync before the erasure" status_is 0 "$kiln" cache sync "$tmp/A.yaml" --once
# node B fetches the manifest from a remote (the origin's repository by URL)
B=$tmp/cacheB
sed -e "s|^manifest: .*|manifest: file://$tmp/m.git|" -e "s|^dir: .*|dir: $B|" "$tmp/A.yaml" >"$tmp/B.yaml"
check "B: sync before the erasure" status_is 0 "$kiln" cache sync "$tmp/B.yaml" --once
tok=$("$py" "$check_py" tokens "$tmp/hmac.key" user=subject-42)
mapfile -t before < <(shards_of "$ds/v1")
mapfile -t old < <(holding "$tok" "${before[@]}")
check "the cache holds the subject's shard" test "${#old[@]}" -ge 1
check "the erased list does not exist yet" test ! -e "$A/erased"

check "erase" status_is 0 "$kiln" erase $ds --subject user_id=subject-42 --pipeline "$pipeline" "${sign[@]}"
check "gc --apply" status_is 0 "$kiln" gc --apply --pipeline "$pipeline"
check "sync after the erasure" status_is 0 "$kiln" cache sync "$tmp/A.yaml" --once
for h in "${old[@]}"; do
	check "the superseded shard ${h:0:12} left shards/" test ! -e "$A/shards/${h:0:2}/$h.jsonl.zst"
	check "it is listed in erased" grep -qx "$h" "$A/erased"
done
check "B: sync after the erasure (the fetch takes the ledger, the replaced tag and the rewritten branch)" \
	status_is 0 "$kiln" cache sync "$tmp/B.yaml" --once
check "B fetched the ledger" git --git-dir="$B/manifest.git" cat-file -e refs/erasures/$ds
check "B's v1 is the rewritten one" test "$(git --git-dir="$B/manifest.git" rev-parse "$ds/v1")" = "$(git --git-dir="$tmp/m.git" rev-parse "$ds/v1")"
check "B's main is the rewritten one" test "$(git --git-dir="$B/manifest.git" rev-parse "refs/heads/$ds/main")" = "$(git --git-dir="$tmp/m.git" rev-parse "refs/heads/$ds/main")"
for h in "${old[@]}"; do
	check "B: the superseded shard ${h:0:12} left shards/" test ! -e "$B/shards/${h:0:2}/$h.jsonl.zst"
done
mapfile -t after < <(shards_of "$ds/v1")
v1=$(git --git-dir="$tmp/m.git" rev-parse "$ds/v1^{commit}")
check "views/$ds/v1 shows the rewritten v1" test "$(readlink "$A/views/$ds/v1")" = "$v1"
view_links() { # every view file of v1 is a hard link to a shard of the rewritten v1
	local f h n=0
	for f in "$A/views/$ds/v1"/*/*.jsonl.zst; do
		h=$(b2sum -l 256 "$f" | cut -d' ' -f1)
		printf '%s\n' "${after[@]}" | grep -qx "$h" || { echo "  $f: $h is no shard of v1"; return 1; }
		[ "$(stat -c %i "$f")" = "$(stat -c %i "$A/shards/${h:0:2}/$h.jsonl.zst")" ] || { echo "  $f: not a hard link"; return 1; }
		n=$((n + 1))
	done
	[ "$n" -eq "${#after[@]}" ] || { echo "  $n view files, v1 lists ${#after[@]}"; return 1; }
}
check "the v1 view is the rewritten v1's shards, hard-linked" view_links
check "no view of a superseded commit is left" sh -c "ls '$A/views/$ds' | grep -qvx -e v1 -e main -e '$v1' -e \"\$(git --git-dir='$tmp/m.git' rev-parse $ds/main)\" && exit 1 || exit 0"
check "independent scan of the cache directory finds nothing" \
	"$py" "$check_py" scan --cache "$A" --repo "$tmp/m.git" --token "$tok" --value subject-42

# the server
"$kiln" cache serve "$tmp/A.yaml" >"$tmp/serve.out" 2>"$tmp/serve.log" &
pid=$!
port=''
for _ in $(seq 200); do
	port=$(grep -o '"event":"listening"[^}]*"port":[0-9]*' "$tmp/serve.log" | grep -o '[0-9]*$' | head -1)
	[ -n "$port" ] && break
	sleep 0.1
done
check "the server listens" test -n "$port"
h=${old[0]}
code() { curl -s -o "$tmp/body" -w '%{http_code}' "$@"; }
check "GET of a superseded shard: 410" test "$(code "http://127.0.0.1:$port/v1/shards/$h")" = 410
check "...with a JSON error body" "$py" -c "import json; d=json.load(open('$tmp/body')); assert d['error']=='gone', d"
check "HEAD of it: 410" test "$(code -I "http://127.0.0.1:$port/v1/shards/$h")" = 410
check "...and the cache did not fetch it again" test ! -e "$A/shards/${h:0:2}/$h.jsonl.zst"
check "a shard of the rewritten v1: 200" test "$(code "http://127.0.0.1:$port/v1/shards/${after[0]}")" = 200
check "...its bytes" test "$(b2sum -l 256 "$tmp/body" | cut -d' ' -f1)" = "${after[0]}"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
