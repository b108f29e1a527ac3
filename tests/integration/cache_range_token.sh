#!/usr/bin/env bash
# `kiln cache serve` with a bearer token (docs/CACHE.md): a Range request
# is no way around it. A node pins a version of a small file run's dataset
# (a file store) and serves its shard; then, for GET and HEAD, a Range
# request (bytes=0-9, a suffix range, and with If-Range) without a token or
# with a wrong one gets 401, and with the right token 206 and the 10 bytes.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need curl git "$py"

unset http_proxy https_proxy all_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY KILN_BRANCH KILN_SPLIT_SALT
export no_proxy='127.0.0.1,localhost' NO_PROXY='127.0.0.1,localhost'
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in ${pids[@]+"${pids[@]}"}; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT

(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/key")
"$py" "$src/bench/gen-user-events.py" --records 40 --invalid-rate 0 --seed 4 -o "$tmp/in.jsonl"
check "a file run makes user-events@main" status_is 0 env KILN_INPUT="$tmp/in.jsonl" KILN_KEY_FILE="$tmp/key" \
	KILN_STORE="file://$tmp/store" KILN_MANIFEST="$tmp/m.git" "$kiln" run "$src/pipelines/user-events.yaml"
shard=$(find "$tmp/store/shards" -name '*.jsonl.zst' | head -1)
hash=$(basename "${shard:-none}" .jsonl.zst)
check "  it has a shard" test -s "${shard:-/nonexistent}"

token=tok-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
cat >"$tmp/node.yaml" <<EOF
store: {url: file://$tmp/store}
manifest: $tmp/m.git
dir: $tmp/cache
size_limit: 100M
pins: [user-events@main]
listen: 127.0.0.1:0
sync_seconds: 60
token_env: KILN_CACHE_TOKEN
EOF
KILN_CACHE_TOKEN=$token "$kiln" cache serve "$tmp/node.yaml" >"$tmp/node.out" 2>"$tmp/node.log" &
pids+=($!)
port_of() { grep -o '"event":"listening".*"port":[0-9]*' "$tmp/node.log" | head -1 | grep -o '[0-9]*$'; }
check "the node listens" poll 20 sh -c "grep -q '\"event\":\"listening\"' '$tmp/node.log'"
url=http://127.0.0.1:$(port_of)/v1/shards/$hash
code() { curl -s -o "$tmp/body" -w '%{http_code}' "$@"; }
served() { [ "$(code -H "Authorization: Bearer $token" "$url")" = 200 ]; }
check "  and serves the shard with the token (after its first sync)" poll 30 served

refused() { # CURL ARGS...: 401
	local c
	c=$(code "$@" "$url")
	[ "$c" = 401 ] || { echo "  curl $*: $c, expected 401"; return 1; }
}
for ranged in "-H Range:bytes=0-9" "-H Range:bytes=-5" "-H Range:bytes=0-9 -H If-Range:\"$hash\""; do
	for method in GET HEAD; do
		m=()
		[ "$method" = HEAD ] && m=(-I)
		# shellcheck disable=SC2086 # the header arguments split on purpose
		check "$method $ranged without a token: 401" refused "${m[@]}" $ranged
		# shellcheck disable=SC2086
		check "$method $ranged with a wrong token: 401" refused "${m[@]}" $ranged -H "Authorization: Bearer wrong-$token"
	done
done
check "a Range with the right token: 206" test "$(code -H 'Range: bytes=0-9' -H "Authorization: Bearer $token" "$url")" = 206
check "  the shard's first 10 bytes" cmp -s "$tmp/body" <(head -c 10 "$shard")
check "the token is not in the node's log" sh -c "! grep -qF -- '$token' '$tmp/node.log' '$tmp/node.out'"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
