#!/usr/bin/env bash
# The bytes kiln writes, pinned: the sample pipeline run three times on a
# growing file (samples/user-events.jsonl, then the invalid samples, then
# 20000 generated records at a 4 % invalid rate, 256 KiB shards) with a
# fixed key. What it wrote must match tests/golden/sample-run.txt: the tree
# of each commit (every file's blob id except lineage.json, which names the
# input's absolute path) and the sha256 of every object in the store, shards
# and quarantine. A refactoring or a faster path (issue 11, 12) must leave
# this file unchanged; a deliberate format change updates it
# (KILN_GOLDEN_UPDATE=1 rewrites it) and says so in docs/FORMATS.md (the
# changes so far: shards in libzstd's multithreaded framing, issue 12;
# profile.json and contract.yaml added to each commit's tree, issue 15;
# filters/<hh>/<hash>.bloom, each shard's token filter, issue 26;
# the tokens, splits, shard contents and quarantine objects did not change;
# issue 27 names other kinds' quarantine objects with their kind, not the
# file source's, so this listing is the same; issue 28 changes only
# profile.json: categories from the data, times, clamped quantiles and
# distinct counts).
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
golden=$src/tests/golden/sample-run.txt
need git

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
umask 077
printf '%064x' 42 >"$tmp/hmac.key"
/usr/bin/python3 "$src/bench/gen-user-events.py" --records 20000 --seed 7 --invalid-rate 0.04 \
	--max-record-bytes 1048576 -o "$tmp/gen.jsonl"
export KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git KILN_INPUT=$tmp/in.jsonl

n=0
for input in "$src/samples/user-events.jsonl" "$src/samples/user-events-invalid.jsonl" "$tmp/gen.jsonl"; do
	n=$((n + 1))
	cat "$input" >>"$tmp/in.jsonl"
	check "run $n" status_is 0 "$kiln" run "$src/pipelines/user-events.yaml" --set shards.target_bytes=256K
done

{
	for c in $(git -C "$tmp/m.git" rev-list --reverse refs/heads/user-events/main); do
		echo "commit $(git -C "$tmp/m.git" log -1 --format=%s "$c")"
		git -C "$tmp/m.git" ls-tree -r "$c" | grep -v '	lineage.json$'
	done
	echo "objects"
	(cd "$tmp/store" && find . -type f | LC_ALL=C sort | xargs sha256sum)
} >"$tmp/got.txt"

# Shards of 2 MiB (the shards above are too small to be cut into libzstd's
# 1 MiB jobs, and their bytes are those of the single-threaded framing):
# the generated records again, into fresh stores and repositories, with
# workers=1 and 1 zstd thread and with workers=3 and 4 threads. The bytes
# must not depend on either (docs/FORMATS.md), and are pinned too.
one_run() { # DIR WORKERS THREADS
	KILN_STORE=file://$1/store KILN_MANIFEST=$1/m.git KILN_INPUT=$tmp/gen.jsonl \
		"$kiln" run "$src/pipelines/user-events.yaml" --set shards.target_bytes=2M \
		--set workers="$2" --set shards.zstd_threads="$3" >/dev/null
}
listing() { # DIR: its tree (without lineage.json) and its shards' sha256
	git -C "$1/m.git" ls-tree -r refs/heads/user-events/main | grep -v '	lineage.json$'
	(cd "$1/store" && find shards -type f | LC_ALL=C sort | xargs sha256sum)
}
check "2 MiB shards, workers=1, 1 zstd thread" one_run "$tmp/w1" 1 1
check "2 MiB shards, workers=3, 4 zstd threads" one_run "$tmp/w3" 3 4
listing "$tmp/w1" >"$tmp/w1.txt"
listing "$tmp/w3" >"$tmp/w3.txt"
check "the same tree and shards whatever the workers and threads" cmp -s "$tmp/w1.txt" "$tmp/w3.txt"
{
	echo "2 MiB shards"
	cat "$tmp/w1.txt"
} >>"$tmp/got.txt"

if [ "${KILN_GOLDEN_UPDATE:-}" = 1 ]; then
	cp "$tmp/got.txt" "$golden"
	echo "golden: rewrote $golden"
fi
same() {
	diff -u "$golden" "$tmp/got.txt" >"$tmp/diff" && return 0
	echo "  what kiln wrote differs from $golden:"
	head -30 "$tmp/diff" | sed 's/^/  | /'
	return 1
}
check "trees and objects match tests/golden/sample-run.txt" same
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
