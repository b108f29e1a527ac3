#!/usr/bin/env bash
# A full disk says so: `kiln run` with its manifest repository, or its spool
# files (TMPDIR), on a file system with no room left fails with one line
# that says "disk full" and names the manifest repository, or names the
# spool folder and TMPDIR (before: "unknown libgit2 error", "target OID
# doesn't exist", "spool file: write: No space left on device"). Once room
# is made, the next run commits and git fsck accepts the repository.
# The full file system is a small tmpfs: needs root (or CAP_SYS_ADMIN) to
# mount it, and skips (exit 77) where mounting is refused. ulimit -f gives
# EFBIG, not ENOSPC, and LD_PRELOAD tricks are not what a disk does.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3

command -v git >/dev/null || { echo "SKIP: git is not installed (run scripts/bootstrap)"; exit 77; }
[ -x "$kiln" ] || { echo "FAIL: no kiln binary at $kiln (set KILN)"; exit 1; }

tmp=$(mktemp -d)
mkdir -p "$tmp/small"
cleanup() {
	umount "$tmp/small" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
if ! mount -t tmpfs -o size=2m,mode=0700 tmpfs "$tmp/small" 2>"$tmp/mount.err"; then
	echo "SKIP: cannot mount a tmpfs to fill ($(head -1 "$tmp/mount.err"))"
	exit 77
fi

(umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$tmp/key")
"$py" "$src/bench/gen-user-events.py" --records 400 --seed 41 -o "$tmp/in1.jsonl"
"$py" "$src/bench/gen-user-events.py" --records 400 --seed 42 -o "$tmp/in2.jsonl"
cat "$tmp/in1.jsonl" "$tmp/in2.jsonl" >"$tmp/in.jsonl"

pipeline() { # INPUT MANIFEST
	cat <<EOF
dataset: df
contract: $src/contracts/user-events.yaml
source: {kind: file, path: $1, name: df}
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/store}
manifest: {repo: $2}
EOF
}
fill() { # fills the tmpfs (dd stops at ENOSPC)
	dd if=/dev/zero of="$tmp/small/fill" bs=4096 2>/dev/null
	sync
}

# -- the manifest repository on a full disk
m=$tmp/small/m.git
cp "$tmp/in1.jsonl" "$tmp/input.jsonl"
pipeline "$tmp/input.jsonl" "$m" >"$tmp/p.yaml"
check "a first run commits" status_is 0 "$kiln" run "$tmp/p.yaml"
cat "$tmp/in2.jsonl" >>"$tmp/input.jsonl"
fill
rc=0
"$kiln" run "$tmp/p.yaml" >"$tmp/out" 2>"$tmp/err" || rc=$?
echo "  | $(tail -1 "$tmp/err" | cut -c1-300)"
check "the run on a full manifest disk fails ($rc)" test "$rc" -ne 0
check "its error says disk full and names the repository" grep -q "manifest $m.*disk full" "$tmp/err"
check "no libgit2 riddle" sh -c "! grep -Eqi 'unknown libgit2 error|target OID' '$tmp/err'"
rm -f "$tmp/small/fill"
check "with room again, the run commits" status_is 0 "$kiln" run "$tmp/p.yaml"
check "git fsck" git --git-dir "$m" fsck --strict --no-dangling --no-progress
records=$(git --git-dir="$m" show refs/heads/df/main:stats.json | "$py" -c 'import json,sys; print(json.load(sys.stdin)["records_in"])')
check "every record committed once ($records of 800)" test "$records" = 800

# -- spool files (TMPDIR) on a full disk
rm -rf "${tmp:?}/small/"*
pipeline "$tmp/in.jsonl" "$tmp/m2.git" >"$tmp/p2.yaml"
fill
rc=0
TMPDIR=$tmp/small "$kiln" run "$tmp/p2.yaml" >"$tmp/out" 2>"$tmp/err" || rc=$?
echo "  | $(tail -1 "$tmp/err" | cut -c1-300)"
check "the run with a full TMPDIR fails ($rc)" test "$rc" -ne 0
check "its error names the spool folder and TMPDIR" grep -q "spool file in $tmp/small (TMPDIR): write: No space left" "$tmp/err"

check "no personal data in any log" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
