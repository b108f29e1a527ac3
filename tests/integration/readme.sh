#!/usr/bin/env bash
# The README is the front door: every ```sh block after the first runs as
# pasted, in order, in one shell, after scripts/quickstart (the first
# block's first command), in a copy of this tree (its tracked files and
# untracked ones git does not ignore) whose build/ is this build. A block
# may be skipped only when the line before its fence says why:
# <!-- readme-test: skip: REASON --> (one today: "Building by hand", which
# is what scripts/test runs). A command that fails fails the test with the
# block's line number; nothing may be left running. The block that runs
# `scripts/quickstart --store ceph` needs Debian's Ceph: where it is not
# installed that block alone is left out, with a SKIP line.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
build=$(cd "$(dirname "$kiln")" && pwd)
need git kcat zstd /usr/bin/python3
tmp=$(mktemp -d)
left_running() { # the processes whose working directory is in the copy, or
	# whose command line names a file there (the Ceph daemons run in /)
	local p c
	for p in /proc/[0-9]*; do
		c=$(readlink "$p/cwd" 2>/dev/null) || continue
		case "$c" in "$tmp/r" | "$tmp/r/"*) echo "${p#/proc/}" && continue ;; esac
		tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$tmp/r/" && echo "${p#/proc/}"
	done
}
cleanup() {
	local p
	for p in $(left_running); do kill -KILL "$p" 2>/dev/null; done
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT

# the tree as it is now, without build outputs
git -C "$src" ls-files -co --exclude-standard -z | (cd "$src" && tar --null -T - -cf -) | (mkdir -p "$tmp/r" && tar -C "$tmp/r" -xf -)
check "the copy holds the README and the quickstart" test -f "$tmp/r/README.md" -a -x "$tmp/r/scripts/quickstart"
check "the copy has no .kiln of this checkout" test ! -e "$tmp/r/.kiln"

# the blocks: [line, text] in order, and the skips with their reasons
/usr/bin/python3 - "$tmp/r/README.md" "$tmp/blocks" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().split("\n")
blocks, i = [], 0
while i < len(lines):
    if lines[i] == "```sh":
        start, body = i + 1, []
        i += 1
        while lines[i] != "```":
            body.append(lines[i]); i += 1
        prev = lines[start - 2] if start >= 2 else ""
        skip = prev[len("<!-- readme-test: skip: "):-len(" -->")] if prev.startswith("<!-- readme-test: skip: ") else None
        blocks.append({"line": start + 1, "text": "\n".join(body) + "\n", "skip": skip})
    i += 1
json.dump(blocks, open(sys.argv[2], "w"))
PY
nblocks=$(/usr/bin/python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$tmp/blocks")
check "the README has its blocks ($nblocks)" test "$nblocks" -ge 10
check "the first block is the front door: scripts/quickstart, scripts/test" /usr/bin/python3 -c '
import json, sys
b = json.load(open(sys.argv[1]))[0]["text"].split()
assert b == ["scripts/quickstart", "scripts/test"], b' "$tmp/blocks"
check "one block skipped, with its reason" /usr/bin/python3 -c '
import json, sys
skips = [b for b in json.load(open(sys.argv[1])) if b["skip"] is not None]
assert len(skips) == 1 and "scripts/test" in skips[0]["skip"], skips' "$tmp/blocks"

# one script: the quickstart, then every block, each announced with its line
preload=
if ldd "$build/.libs/libkiln.so.1" 2>/dev/null | grep -q libasan; then
	preload=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)
fi
no_ceph=
rgw_available >"$tmp/ceph-skip" || no_ceph=1
/usr/bin/python3 - "$tmp/blocks" "$tmp/readme.sh" "$preload" "$no_ceph" <<'PY'
import json, shlex, sys
blocks = json.load(open(sys.argv[1]))
no_ceph = len(sys.argv) > 4 and sys.argv[4] == "1"
out = ["set -e"]
if len(sys.argv) > 3 and sys.argv[3]:
    # the sanitizer build: its libkiln needs ASan loaded first in the Python
    # that imports it, as python_reader.sh does (the README's text is
    # unchanged). verify_asan_link_order=0: one CI run of the DataLoader
    # block died at start with "ASan runtime does not come first" although
    # the preload names it first (not reproduced in 9 runs since); ASan is
    # preloaded all the same, the check only stops a process it suspects
    out.append("/usr/bin/python3() { LD_PRELOAD=%s ASAN_OPTIONS=detect_leaks=0:handle_segv=0:verify_asan_link_order=0 command /usr/bin/python3 \"$@\"; }" % shlex.quote(sys.argv[3]))
out += ["echo '== scripts/quickstart'", "scripts/quickstart"]
for b in blocks[1:]:
    if b["skip"] is not None:
        continue
    if no_ceph and "scripts/quickstart --store ceph" in b["text"]:
        continue
    out.append("echo %s" % shlex.quote("== README.md:%d" % b["line"]))
    out.append(b["text"])
out.append("echo '== all blocks ran'")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
(cd "$tmp/r" && env -u KILN_MANIFEST -u KILN_STORE -u KILN_INPUT -u KILN_KEY_FILE -u KILN_TARGETS \
	-u PYTHONPATH -u KILN_LIBRARY KILN_BUILD_DIR="$build" HOME="$tmp/home" \
	timeout 600 bash "$tmp/readme.sh") </dev/null >"$tmp/out" 2>&1
rc=$?
check "every block ran as pasted (exit 0)" sh -c "[ $rc -eq 0 ] || { grep '^== ' '$tmp/out' | tail -1; tail -40 '$tmp/out'; exit 1; }"
check "  to its end" grep -qx '== all blocks ran' "$tmp/out"
check "  the quickstart made user-events@stream" git --git-dir="$tmp/r/.kiln/manifest.git" rev-parse -q --verify refs/heads/user-events/stream
check "  the blocks promoted v1 and erased a person" sh -c "git --git-dir='$tmp/r/.kiln/manifest.git' rev-parse -q --verify refs/tags/user-events/v1 >/dev/null && git --git-dir='$tmp/r/.kiln/manifest.git' rev-parse -q --verify refs/erasures/user-events >/dev/null"
check "  the report page exists" test -s "$tmp/r/.kiln/report/index.html"
check "  nothing left running" test -z "$(left_running)"
[ -n "$no_ceph" ] || check "  the quickstart on Ceph made user-events@stream in .kiln/ceph/manifest.git" \
	git --git-dir="$tmp/r/.kiln/ceph/manifest.git" rev-parse -q --verify refs/heads/user-events/stream
check "  git fsck --strict of its manifest" git --git-dir="$tmp/r/.kiln/manifest.git" fsck --strict --no-progress
check "  zstd -t of every shard" sh -c "zstd -tq '$tmp/r/.kiln/store/shards'/*/*.jsonl.zst"

[ -n "$no_ceph" ] && echo "$(cat "$tmp/ceph-skip") (the README block running scripts/quickstart --store ceph)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
