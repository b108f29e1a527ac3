#!/usr/bin/env bash
# `make mutate` proves the suite can fail only while its edits still match
# the code they break: every edit of scripts/mutate's list must change its
# file (scripts/mutate --check, no build), and a stale edit stops the full
# run before it builds anything, naming the edit.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0

check "every mutation's edit applies to today's code" status_is 0 "$src/scripts/mutate" --check
check "--check says so" grep -q '^mutate: all [0-9]* edits apply' "$tmp/out"

# a copy of the script with one edit that matches nothing: refused at once
sed 's/^mutations=(/mutations=(\n\t'"'"'stale_edit|src\/core\/json.c|s\/no such code anywhere\/x\/|run_file.sh|'"'"'/' \
	"$src/scripts/mutate" >"$tmp/mutate"
mkdir -p "$tmp/scripts"
mv "$tmp/mutate" "$tmp/scripts/mutate"
chmod +x "$tmp/scripts/mutate"
ln -s "$src/src" "$tmp/src"
ln -s "$src/tests" "$tmp/tests"
check "a stale edit stops the run before any build" status_is 2 "$tmp/scripts/mutate" stale_edit
check "... naming it" grep -q 'stale_edit: the edit does not apply to src/core/json.c' "$tmp/err"
check "... and nothing was built" sh -c "! grep -q 'building' '$tmp/out'"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
