#!/usr/bin/env bash
# kiln push after kiln erase (docs/PUSH.md, docs/ERASURE.md): v1 and v2,
# both holding a planted subject, pushed to a file:// target and pulled to a
# far repository; the subject erased here; pushing v1 again replaces it at
# the target (the ledger goes with it) but keeps what v2, still the old
# one there, needs; pushing v2 replaces it too and deletes the superseded
# shards and git objects. Then an independent scan (python3, not kiln) of
# every file of the target finds nothing of the subject, stock git verifies
# the new tags and fscks the target's repository, `kiln pull` takes the
# replaced tags and the ledger, and a tag changed without a ledger entry is
# still refused by push and by pull.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need git zstd ssh-keygen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

unset KILN_BRANCH KILN_SPLIT_SALT KILN_TARGETS
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
pipeline=$src/pipelines/user-events.yaml
check_py=$src/tests/integration/erase_check.py
target=file://$tmp/target
tgit() { git --git-dir="$tmp/target/manifest.git" "$@"; }
not() { ! "$@"; }

"$kiln" keygen --out "$tmp/sign.key" --comment release@kiln.test >"$tmp/keygen.out" 2>&1
grep -o 'release@kiln.test namespaces="git" ssh-ed25519 [A-Za-z0-9+/=]*' "$tmp/keygen.out" >"$tmp/allowed_signers"
sign=(--set "manifest.signing_key=$tmp/sign.key")
gates=(--set promote.min_records.train=10 --set promote.min_records.dev=1 --set promote.min_records.test=1
	--set promote.ratio_tolerance=0.5 --set promote.max_quarantine_rate=0.5)
verify_tag() { # REPO TAG
	git --git-dir="$1" -c gpg.format=ssh -c gpg.ssh.allowedSignersFile="$tmp/allowed_signers" verify-tag "$2"
}

gen() { "$py" "$src/bench/gen-user-events.py" --records "$1" --seed "$2" >>"$KILN_INPUT"; }
plant() { # N: the subject (user id subject-42) in a curated record
	printf '%s\n' "{\"event_id\":\"00000000-0000-4000-8000-00000000010$1\",\"event_type\":\"click\",\"occurred_at\":\"2026-11-0${1}T10:00:00Z\",\"user_id\":\"subject-42\",\"consent\":true,\"device\":{\"os\":\"linux\"}}" >>"$KILN_INPUT"
}

gen 300 1
plant 1
check "run 1" status_is 0 "$kiln" run "$pipeline" "${sign[@]}"
check "promote v1" status_is 0 "$kiln" promote user-events@main --pipeline "$pipeline" "${gates[@]}" "${sign[@]}"
gen 200 2
plant 2
check "run 2" status_is 0 "$kiln" run "$pipeline" "${sign[@]}"
check "promote v2" status_is 0 "$kiln" promote user-events@main --pipeline "$pipeline" "${gates[@]}" "${sign[@]}"

tok=$("$py" "$check_py" tokens "$tmp/hmac.key" user=subject-42)
needles=(--token "$tok" --value subject-42)

check "push v1" status_is 0 "$kiln" push user-events@v1 --to "$target"
check "push v2" status_is 0 "$kiln" push user-events@v2 --to "$target"
check "pull to a far repository" status_is 0 "$kiln" pull "$target" -m "$tmp/far.git"
check "the target holds the subject before" not "$py" "$check_py" scan --store "$tmp/target" --repo "$tmp/target/manifest.git" "${needles[@]}"
old_v1=$(tgit rev-parse refs/tags/user-events/v1)

check "erase" status_is 0 "$kiln" erase user-events --subject user_id=subject-42 --pipeline "$pipeline" "${sign[@]}"
check "gc --apply" status_is 0 "$kiln" gc --apply --pipeline "$pipeline"
new_v1=$(git --git-dir="$tmp/m.git" rev-parse refs/tags/user-events/v1)
check "the erasure made a new v1 tag" test "$old_v1" != "$new_v1"

check "push v1 again: replaced" status_is 0 "$kiln" push user-events@v1 --to "$target"
check "it says so" grep -q "replaced ${old_v1:0:12} at .*superseded by erasure" "$tmp/out"
check "it keeps what v2 (old there) needs" grep -q "kept at" "$tmp/out"
check "the target's v1 is the new tag" test "$(tgit rev-parse refs/tags/user-events/v1)" = "$new_v1"
check "the ledger went with it" test "$(tgit rev-parse refs/erasures/user-events)" = "$(git --git-dir="$tmp/m.git" rev-parse refs/erasures/user-events)"
check "the target's old v2 still reads (git fsck)" tgit fsck --strict --no-dangling
check "push v2 again: replaced, superseded deleted" status_is 0 "$kiln" push user-events@v2 --to "$target"
check "it deleted shards and objects" grep -q "deleted at .*: [1-9][0-9]* superseded shards, [1-9][0-9]* git objects" "$tmp/out"
check "no file of the target holds the subject (independent scan)" \
	"$py" "$check_py" scan --store "$tmp/target" --repo "$tmp/target/manifest.git" "${needles[@]}"
check "git fsck of the target's repository" tgit fsck --strict --no-dangling
check "no object of the old v1 tag left" not tgit cat-file -e "$old_v1"
for v in v1 v2; do
	check "git verify-tag accepts the target's $v" verify_tag "$tmp/target/manifest.git" "user-events/$v"
done
check "a repeated push changes nothing" status_is 0 "$kiln" push user-events@v2 --to "$target"
check "...and deletes nothing" not grep -q "deleted at\|replaced" "$tmp/out"

# the far side
check "pull again: the replaced tags and the ledger" status_is 0 "$kiln" pull "$target" -m "$tmp/far.git"
check "the far v1 is the new tag" test "$(git --git-dir="$tmp/far.git" rev-parse refs/tags/user-events/v1)" = "$new_v1"
check "the far ledger" git --git-dir="$tmp/far.git" cat-file -e refs/erasures/user-events
check "git verify-tag in the far repository" verify_tag "$tmp/far.git" user-events/v1

# a tag changed without a ledger entry is still refused
v2id=$(tgit rev-parse refs/tags/user-events/v2)
printf '%s\n' "$v2id" >"$tmp/target/manifest.git/refs/tags/user-events/v1"
check "push of v1 over another object: refused" status_is 2 "$kiln" push user-events@v1 --to "$target"
check "...with one line naming the rule" grep -q "a pushed version is never replaced" "$tmp/err"
printf '%s\n' "$new_v1" >"$tmp/target/manifest.git/refs/tags/user-events/v1"
printf '%s\n' "$v2id" >"$tmp/far.git/refs/tags/user-events/v1"
check "pull over a local tag changed without a ledger entry: refused" status_is 2 "$kiln" pull "$target" -m "$tmp/far.git"
check "...naming it" grep -q "a tag is never overwritten" "$tmp/err"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
