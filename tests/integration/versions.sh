#!/usr/bin/env bash
# Versioned datasets end to end: three snapshots, v1 and v2 promoted with
# signed tags, log/show/diff, verification with stock git and ssh-keygen, a
# tampered shard named by `kiln verify --deep`, gc removing exactly the
# unreferenced shards, and `kiln cat` over 4 ranks returning every curated
# record exactly once.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
for tool in git zstd; do
	command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
need ssh-keygen # openssh-client: stock git and ssh-keygen check kiln's signatures
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(umask 077 && printf '%s' 5f0e2b9c41d8a7763e1c0b2a9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e >"$tmp/hmac.key") # fixed: the promote gates check split ratios of 600 records, and a random key moves them
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
pipeline=$src/pipelines/user-events.yaml
gen() { "$py" "$src/bench/gen-user-events.py" --records "$1" --seed "$2" >>"$KILN_INPUT"; }
# small test data: gates sized for it
gates=(--set promote.min_records.train=100 --set promote.min_records.dev=5 --set promote.min_records.test=5
	--set promote.ratio_tolerance=0.05 --set promote.max_quarantine_rate=0.05)

# --- signing key and three snapshots --------------------------------------
check "keygen" status_is 0 "$kiln" keygen --out "$tmp/sign.key" --comment "release@kiln.test"
check "keygen prints an allowed-signers line" grep -q 'release@kiln.test namespaces="git" ssh-ed25519 ' "$tmp/out"
grep -o 'release@kiln.test namespaces="git" ssh-ed25519 [A-Za-z0-9+/=]*' "$tmp/out" >"$tmp/allowed_signers"
sign=(--set "manifest.signing_key=$tmp/sign.key")

gen 600 1
check "run 1" status_is 0 "$kiln" run "$pipeline" "${sign[@]}"
gen 600 2
check "run 2" status_is 0 "$kiln" run "$pipeline" "${sign[@]}"
gen 600 3
check "run 3" status_is 0 "$kiln" run "$pipeline" "${sign[@]}"
commits=$(git --git-dir="$tmp/m.git" rev-list refs/heads/user-events/main | wc -l)
check "three commits" test "$commits" -eq 3
c1=$(git --git-dir="$tmp/m.git" rev-list --reverse refs/heads/user-events/main | sed -n 1p)
c2=$(git --git-dir="$tmp/m.git" rev-list --reverse refs/heads/user-events/main | sed -n 2p)

# --- promote -----------------------------------------------------------------
check "a failing gate refuses" status_is 1 "$kiln" promote "user-events@${c1:0:10}" --pipeline "$pipeline" \
	--set promote.min_records.train=100000
check "the failed gate is named" grep -q "release gate failed: min_records train" "$tmp/err"
check "no tag after a failed gate" test -z "$(git --git-dir="$tmp/m.git" tag -l 'user-events/*')"
check "promote v1" status_is 0 "$kiln" promote "user-events@${c1:0:10}" --pipeline "$pipeline" "${gates[@]}" "${sign[@]}"
check "promote v2 (next number)" status_is 0 "$kiln" promote "user-events@${c2:0:10}" --pipeline "$pipeline" "${gates[@]}" "${sign[@]}"
check "tags v1 and v2" test "$(git --git-dir="$tmp/m.git" tag -l 'user-events/*' | tr '\n' ' ')" = "user-events/v1 user-events/v2 "
check "tag message has the governance record" sh -c "git --git-dir='$tmp/m.git' cat-file tag user-events/v1 | grep -q 'key id: hmac-sha256:' && git --git-dir='$tmp/m.git' cat-file tag user-events/v1 | grep -q 'min_records train'"
check "promoting v1 again is refused" status_is 2 "$kiln" promote "user-events@${c1:0:10}" --pipeline "$pipeline" "${gates[@]}" --version v1

# --- inspect ------------------------------------------------------------------
check "log" status_is 0 "$kiln" log user-events --manifest "$tmp/m.git"
check "log lists 3 versions" test "$(grep -c . "$tmp/out")" -eq 3
check "log shows the tags" grep -q "v2" "$tmp/out"
check "show v1" status_is 0 "$kiln" show user-events@v1
check "show names the key id" grep -q "hmac-sha256:" "$tmp/out"
check "diff v1 v2" status_is 0 "$kiln" diff user-events@v1 user-events@v2
check "diff reports added shards" grep -q "+" "$tmp/out"
check "bad ref" status_is 2 "$kiln" show user-events@v9
check "bad ref message" grep -q "user-events@v9" "$tmp/err"

# --- verify with stock tools ----------------------------------------------------
check "git verify-commit" git --git-dir="$tmp/m.git" -c gpg.format=ssh -c gpg.ssh.allowedSignersFile="$tmp/allowed_signers" \
	verify-commit "$c2"
check "git verify-tag" git --git-dir="$tmp/m.git" -c gpg.format=ssh -c gpg.ssh.allowedSignersFile="$tmp/allowed_signers" \
	verify-tag user-events/v2
{
	git --git-dir="$tmp/m.git" cat-file tag user-events/v1 >"$tmp/tag"
	sed -n '/-----BEGIN SSH SIGNATURE-----/,$p' "$tmp/tag" >"$tmp/tag.sig"
	sed '/-----BEGIN SSH SIGNATURE-----/,$d' "$tmp/tag" >"$tmp/tag.payload"
	check "ssh-keygen -Y verify" sh -c "ssh-keygen -Y verify -f '$tmp/allowed_signers' -I release@kiln.test -n git -s '$tmp/tag.sig' <'$tmp/tag.payload' >/dev/null"
}
check "fsck" git --git-dir="$tmp/m.git" fsck --strict
check "kiln verify v2 --deep" status_is 0 "$kiln" verify user-events@v2 --deep --allowed-signers "$tmp/allowed_signers"
"$kiln" keygen --out "$tmp/other.key" --comment other >"$tmp/other.out" 2>&1
grep -o 'other namespaces="git" ssh-ed25519 [A-Za-z0-9+/=]*' "$tmp/other.out" >"$tmp/other_signers"
check "an untrusted signer fails" status_is 1 "$kiln" verify user-events@v2 --allowed-signers "$tmp/other_signers"

# --- tamper with one shard ------------------------------------------------------
victim=$(find "$tmp/store/shards" -name '*.jsonl.zst' | head -1)
victim_hash=$(basename "$victim" .jsonl.zst)
cp "$victim" "$tmp/victim.bak"
printf 'x' | dd of="$victim" bs=1 seek=20 conv=notrunc 2>/dev/null
check "verify --deep fails on a tampered shard" status_is 1 "$kiln" verify user-events@main --deep
check "the tampered shard is named" grep -q "$victim_hash" "$tmp/err"
victim_split=$(git --git-dir="$tmp/m.git" grep -l "$victim_hash" refs/heads/user-events/main -- splits | sed 's|.*:splits/\([a-z]*\)/.*|\1|')
check "cat refuses the tampered shard" status_is 2 "$kiln" cat user-events@main --split "$victim_split"
check "cat names the tampered shard" grep -q "$victim_hash" "$tmp/err"
cp "$tmp/victim.bak" "$victim"
check "verify --deep passes again" status_is 0 "$kiln" verify user-events@main --deep

# --- gc: exactly the unreferenced shards go ---------------------------------------
# an orphan: a shard stored by a run that never committed
mkdir -p "$tmp/store/shards/00"
printf 'orphan' >"$tmp/store/shards/00/0000000000000000000000000000000000000000000000000000000000000000.jsonl.zst"
touch -d '2 hours ago' "$tmp/store/shards/00/0000000000000000000000000000000000000000000000000000000000000000.jsonl.zst"
before=$(find "$tmp/store/shards" -type f | wc -l)
check "gc dry run" status_is 0 "$kiln" gc
check "dry run deletes nothing" test "$(find "$tmp/store/shards" -type f | wc -l)" -eq "$before"
check "gc --apply" status_is 0 "$kiln" gc --apply
after=$(find "$tmp/store/shards" -type f | wc -l)
check "gc removed exactly the orphan" test "$after" -eq $((before - 1))
check "the orphan is gone" test ! -e "$tmp/store/shards/00/0000000000000000000000000000000000000000000000000000000000000000.jsonl.zst"
check "everything still verifies" status_is 0 "$kiln" verify user-events@main --deep

# --- cat across 4 ranks: every curated record exactly once -----------------------
cat_ranks() { # every kiln cat of every rank and split exits 0
	local split r rc=0
	for split in train dev test; do
		: >"$tmp/cat-$split"
		for r in 0 1 2 3; do
			"$kiln" cat user-events@main --split "$split" --rank "$r" --world-size 4 --shuffle-seed 42 \
				>>"$tmp/cat-$split" 2>"$tmp/cat-$split-$r.err" || { rc=1; echo "  kiln cat --split $split --rank $r failed"; }
		done
	done
	return "$rc"
}
check "kiln cat exits 0 for every split and rank" cat_ranks
cat "$tmp/cat-train" "$tmp/cat-dev" "$tmp/cat-test" >"$tmp/cat-all"
for f in $(find "$tmp/store/shards" -name '*.jsonl.zst'); do zstd -dc "$f"; done >"$tmp/all-shards"
check "4 ranks read every record exactly once" "$py" - "$tmp/cat-all" "$tmp/all-shards" "$tmp/m.git" <<'PY'
import collections, json, subprocess, sys
got = collections.Counter(json.loads(l)["event_id"] for l in open(sys.argv[1], encoding="utf-8"))
stats = json.loads(subprocess.check_output(["git", "--git-dir=" + sys.argv[3], "show", "refs/heads/user-events/main:stats.json"]))
want = collections.Counter(json.loads(l)["event_id"] for l in open(sys.argv[2], encoding="utf-8"))
assert sum(got.values()) == stats["valid"], (sum(got.values()), stats["valid"])
assert got == want, "records read differ from the shards"
assert max(got.values()) == 1, "a record was read twice"
PY

check "no personal data in any log, stdout or stderr" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
