#!/usr/bin/env bash
# Token filters (docs/FORMATS.md "filters/<hh>/<hash>.bloom"): after runs,
# every shard a version lists has its filter in the commit tree, and an
# independent reader (python3 hashlib, from the format's text alone) finds
# the subject's token in the filter of the shard that holds it. kiln erase
# then reads fewer shards than the dataset has (only those whose filter may
# hold the subject), erases the subject all the same (kiln gc --apply, then
# kiln erase --verify),
# and the rewritten version carries the successor's filter instead of the
# old shard's. KILN_ERASE_NO_FILTER=1 reads every shard.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need git
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

unset KILN_BRANCH KILN_SPLIT_SALT
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
pipeline=$src/pipelines/user-events.yaml
small=(--set shards.target_bytes=16K)
gitm() { git --git-dir="$tmp/m.git" "$@"; }
check_py=$src/tests/integration/erase_check.py

"$py" "$src/bench/gen-user-events.py" --records 600 --seed 1 >>"$KILN_INPUT"
check "run 1" status_is 0 "$kiln" run "$pipeline" "${small[@]}"
"$py" "$src/bench/gen-user-events.py" --records 300 --seed 2 >>"$KILN_INPUT"
printf '%s\n' '{"event_id":"00000000-0000-4000-8000-000000000101","event_type":"click","occurred_at":"2026-11-01T10:00:00Z","user_id":"subject-42","consent":true,"device":{"os":"linux"}}' >>"$KILN_INPUT"
"$py" "$src/bench/gen-user-events.py" --records 300 --seed 3 >>"$KILN_INPUT"
check "run 2" status_is 0 "$kiln" run "$pipeline" "${small[@]}"
tok=$("$py" "$check_py" tokens "$tmp/hmac.key" user=subject-42)

# The shards the tip lists, the filters its tree holds, and the filter check.
cat >"$tmp/filters.py" <<'PY'
import hashlib, json, struct, subprocess, sys

repo, rev, token = sys.argv[1], sys.argv[2], sys.argv[3].encode()
def git(*a):
    return subprocess.run(["git", "--git-dir", repo] + list(a), check=True, capture_output=True).stdout
shards = {}
for line in git("ls-tree", "-r", rev).decode().splitlines():
    meta, path = line.split("\t")
    if path.startswith("splits/"):
        for l in git("cat-file", "blob", meta.split()[2]).splitlines():
            shards[json.loads(l)["shard"]] = path
filters = {}
for line in git("ls-tree", "-r", rev, "filters").decode().splitlines():
    meta, path = line.split("\t")
    hh, name = path.split("/")[1:]
    assert name.endswith(".bloom") and name[:2] == hh, path
    filters[name[:-6]] = git("cat-file", "blob", meta.split()[2])
def may_hold(f, t):
    magic = b"kiln-tokens-bloom-v1\n"
    assert f[:21] == magic and f[21:24] == b"\0\0\0"
    k, n, m = struct.unpack("<IQQ", f[24:44])
    assert 1 <= k <= 32 and m % 64 == 0 and len(f) == 44 + m // 8
    d = hashlib.blake2b(t, digest_size=16).digest()
    h1, h2 = struct.unpack("<QQ", d)
    h2 |= 1
    return all(f[44 + ((h1 + i * h2) % 2**64 % m) // 8] >> (((h1 + i * h2) % 2**64 % m) % 8) & 1 for i in range(k))
holding = [h for h in shards if h in filters and may_hold(filters[h], token)]
print(len(shards), len(set(shards) - set(filters)), len(holding))
PY
read -r shards missing holding < <("$py" "$tmp/filters.py" "$tmp/m.git" refs/heads/user-events/main "$tok")
check "several shards ($shards)" test "${shards:-0}" -ge 6
check "every shard listed has its filter" test "$missing" = 0
check "the filter of the shard holding the subject says so (python3)" test "$holding" -ge 1
check "most filters rule the subject out" test "$holding" -lt $((shards / 2))

subject=(--subject user_id=subject-42)
status_is 0 env KILN_ERASE_NO_FILTER=1 "$kiln" erase user-events "${subject[@]}" --pipeline "$pipeline" --dry-run --json
cp "$tmp/out" "$tmp/nofilter.json"
check "KILN_ERASE_NO_FILTER=1: every shard is read" "$py" -c '
import json, sys; r = json.load(open(sys.argv[1])); sys.exit(r["shards_read"] != r["shards"])' "$tmp/nofilter.json"
check "erase" status_is 0 "$kiln" erase user-events "${subject[@]}" --pipeline "$pipeline" --json
cp "$tmp/out" "$tmp/erase.json"
check "only the shards whose filter may hold the subject are read" "$py" -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("  shards", r["shards"], "read", r["shards_read"], "rewritten", r["shards_rewritten"], file=sys.stderr)
sys.exit(not (1 <= r["shards_read"] < r["shards"] and r["shards_read"] <= int(sys.argv[2])
              and r["shards_rewritten"] + r["shards_dropped"] == 1))' "$tmp/erase.json" "$holding"
check "gc --apply" status_is 0 "$kiln" gc --apply --pipeline "$pipeline"
check "the subject is gone (kiln erase --verify)" status_is 0 "$kiln" erase user-events --verify "${subject[@]}" --pipeline "$pipeline"
read -r shards2 missing2 holding2 < <("$py" "$tmp/filters.py" "$tmp/m.git" refs/heads/user-events/main "$tok")
check "the rewritten version still has a filter per shard" test "$missing2" = 0
check "and no filter that holds the subject is left" test "$holding2" -lt "$holding"
check "no filter of a shard no version lists" test "$(gitm ls-tree -r refs/heads/user-events/main filters | wc -l)" = "$shards2"
check "git fsck" gitm fsck --no-dangling

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
