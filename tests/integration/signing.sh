#!/usr/bin/env bash
# Signed commits end to end: `kiln keygen` (files, modes, the printed
# allowed-signers line, no overwrite, no private key on screen), `kiln run`
# with manifest.signing_key (from --set and, relative, from the pipeline
# file), then the stock tools: `git verify-commit` with gpg.format=ssh
# accepts the commits for the right allowed-signers file and refuses them
# for another key's, `ssh-keygen -Y verify` accepts the extracted payload
# and signature, `git fsck --strict` stays clean. Also: unsigned runs stay
# unsigned, and a readable, missing or malformed signing key stops a run
# before anything is written (exit 2, one line).
# Promoted versions: `kiln promote` with the key signs the tag and records
# kiln.signed=tags; a signed tag object moved under another version's name
# with `git update-ref` is refused by `kiln verify` (even with trusted keys),
# `kiln cat` and `kiln ls`; a tag rewritten to an unsigned commit fails
# verify without trusted keys; and verify's failure paths (unsigned version
# with trusted keys, tampered tag object, tampered commit, --public-key good
# and bad, stats.json that does not balance or does not match the shard
# lists) each exit 1 with one line naming the reason.
# Needs git (skips, exit 77, without it); the checks that need ssh-keygen
# (openssh-client) are skipped with a message when it is missing.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
pipeline=$src/pipelines/user-events.yaml
ref=refs/heads/user-events/main

command -v git >/dev/null || { echo "SKIP: git is not installed"; exit 77; }
need_kiln
need ssh-keygen # openssh-client: git verify-commit and ssh-keygen -Y check kiln's signatures
have_ssh_keygen=true

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

status_is() { # NAME WANT COMMAND...: output in $tmp/NAME.out and .err
	local name=$1 want=$2 rc=0
	shift 2
	"$@" </dev/null >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
	[ "$rc" -eq "$want" ] && return 0
	echo "  $*: exit $rc, expected $want"
	sed 's/^/  | /' "$tmp/$name.err" | head -5
	return 1
}

one_line_error() { # NAME ERE: stderr of NAME is one line matching, stdout empty
	[ "$(wc -l <"$tmp/$1.err")" -eq 1 ] && grep -Eq -- "$2" "$tmp/$1.err" && [ ! -s "$tmp/$1.out" ] && return 0
	echo "  stderr of $1 (wanted one line matching /$2/):"
	sed 's/^/  | /' "$tmp/$1.err" | head -5
	return 1
}

mode_is() { [ "$(stat -c %a "$1")" = "$2" ] || { echo "  $1: mode $(stat -c %a "$1"), expected $2"; return 1; }; }
gitm() { git --git-dir="$tmp/m.git" "$@"; }
verify_commit() { # ALLOWED COMMIT
	gitm -c gpg.format=ssh -c gpg.ssh.allowedSignersFile="$1" verify-commit "$2" >"$tmp/verify.out" 2>&1
}
not() { ! "$@"; }

unset KILN_BRANCH KILN_SPLIT_SALT
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
head -n 120 "$src/samples/user-events.jsonl" >"$tmp/in.jsonl"

# ---- kiln keygen
check "keygen exits 0" status_is keygen 0 "$kiln" keygen --out "$tmp/sign.key" --comment release@kiln.test
check "private key file is mode 0600" mode_is "$tmp/sign.key" 600
check "private key file is kiln's format" \
	test "$(sed -n 1p "$tmp/sign.key")" = kiln-ed25519-v1 -a "$(sed -n 2p "$tmp/sign.key" | grep -Ec '^[0-9a-f]{128}$')" = 1 \
	-a "$(sed -n 3p "$tmp/sign.key")" = release@kiln.test -a "$(wc -l <"$tmp/sign.key")" -eq 3
check "public key file is one OpenSSH line" \
	grep -Eqx 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI[A-Za-z0-9+/]{43} release@kiln.test' "$tmp/sign.key.pub"
pub_b64=$(cut -d' ' -f2 "$tmp/sign.key.pub")
line="release@kiln.test namespaces=\"git\" ssh-ed25519 $pub_b64"
check "keygen prints the allowed-signers line" grep -qxF -- "$line" "$tmp/keygen.out"
check "keygen tells how to verify" grep -qF "gpg.ssh.allowedSignersFile" "$tmp/keygen.out"
secret=$(sed -n 2p "$tmp/sign.key")
check "keygen never prints the private key" \
	not grep -qF -e "${secret:0:64}" -e "${secret:64:64}" "$tmp/keygen.out" "$tmp/keygen.err"
printf '%s\n' "$line" >"$tmp/allowed_signers"
if $have_ssh_keygen; then
	check "ssh-keygen reads the public key" ssh-keygen -l -f "$tmp/sign.key.pub" >/dev/null
fi

cp "$tmp/sign.key" "$tmp/sign.key.orig"
check "keygen refuses to overwrite" status_is keygen-again 2 "$kiln" keygen --out "$tmp/sign.key"
check "keygen overwrite error is one line" one_line_error keygen-again "already exists"
check "the key is unchanged" cmp -s "$tmp/sign.key" "$tmp/sign.key.orig"
check "keygen refuses a comment with a space" status_is keygen-comment 2 "$kiln" keygen --out "$tmp/c.key" --comment "two words"
check "and writes nothing" test ! -e "$tmp/c.key" -a ! -e "$tmp/c.key.pub"
mkdir "$tmp/cwd"
check "keygen defaults to ./kiln-signing.key" sh -c "cd '$tmp/cwd' && '$kiln' keygen >'$tmp/default.out' 2>&1"
check "default files and principal" \
	test -f "$tmp/cwd/kiln-signing.key" -a -f "$tmp/cwd/kiln-signing.key.pub" -a \
	"$(grep -c '^kiln@localhost namespaces="git" ssh-ed25519 ' "$tmp/default.out")" = 1
cut -d' ' -f1,2 "$tmp/cwd/kiln-signing.key.pub" | sed 's/^/kiln@localhost namespaces="git" /' >"$tmp/other_signers"

# ---- signed runs
sign=(--set "manifest.signing_key=$tmp/sign.key")
check "signed run 1 exits 0" status_is run1 0 "$kiln" run "$pipeline" "${sign[@]}"
c1=$(gitm rev-parse -q --verify "$ref" 2>/dev/null)
check "run 1 committed" test -n "$c1"
check "the commit has a gpgsig header" sh -c "git --git-dir='$tmp/m.git' cat-file commit $c1 | grep -q '^gpgsig -----BEGIN SSH SIGNATURE-----$'"
check "run output never shows the private key" \
	not grep -qF -e "${secret:0:64}" -e "${secret:64:64}" "$tmp/run1.out" "$tmp/run1.err"

# the same key from the pipeline file, as a path relative to it
mkdir "$tmp/p"
sed -e "s#\.\./contracts/#$src/contracts/#" -e 's#^  author_email: .*#&\n  signing_key: ../sign.key#' \
	"$pipeline" >"$tmp/p/pipeline.yaml"
check "the pipeline copy names the key" grep -q '^  signing_key: ../sign.key$' "$tmp/p/pipeline.yaml"
sed -n 121,160p "$src/samples/user-events.jsonl" >>"$tmp/in.jsonl"
check "signed run 2 (key in the pipeline file) exits 0" status_is run2 0 "$kiln" run "$tmp/p/pipeline.yaml"
c2=$(gitm rev-parse -q --verify "$ref" 2>/dev/null)
check "run 2 committed on top of run 1" test -n "$c2" -a "$c2" != "$c1" -a "$(gitm rev-parse -q --verify "$ref^")" = "$c1"

# an unsigned run stays unsigned
sed -n 161,200p "$src/samples/user-events.jsonl" >>"$tmp/in.jsonl"
check "unsigned run 3 exits 0" status_is run3 0 "$kiln" run "$pipeline"
c3=$(gitm rev-parse -q --verify "$ref" 2>/dev/null)
check "run 3 committed without a signature" \
	sh -c "test -n '$c3' && test '$c3' != '$c2' && ! git --git-dir='$tmp/m.git' cat-file commit '$c3' | grep -q '^gpgsig'"

# ---- stock git and ssh-keygen
if $have_ssh_keygen; then
	check "git verify-commit accepts run 1" verify_commit "$tmp/allowed_signers" "$c1"
	check "git names the principal" grep -qF 'Good "git" signature for release@kiln.test' "$tmp/verify.out"
	check "git verify-commit accepts run 2" verify_commit "$tmp/allowed_signers" "$c2"
	check "git verify-commit refuses the unsigned run 3" not verify_commit "$tmp/allowed_signers" "$c3"
	check "another key's allowed-signers file: run 1 refused" not verify_commit "$tmp/other_signers" "$c1"
	check "another key's allowed-signers file: run 2 refused" not verify_commit "$tmp/other_signers" "$c2"
	check "git log --show-signature shows a good signature" \
		sh -c "git --git-dir='$tmp/m.git' -c gpg.format=ssh -c gpg.ssh.allowedSignersFile='$tmp/allowed_signers' \
			log -1 --show-signature '$c2' 2>&1 | grep -q 'Good \"git\" signature'"

	# the payload is the commit without its gpgsig header; the signature is that header
	gitm cat-file commit "$c1" >"$tmp/c1.raw"
	awk 'h && /^ / { next } { h = 0 } /^gpgsig / { h = 1; next } { print }' "$tmp/c1.raw" >"$tmp/c1.payload"
	awk '/^gpgsig / { h = 1; sub(/^gpgsig /, ""); print; next } h && /^ / { sub(/^ /, ""); print; next } { h = 0 }' \
		"$tmp/c1.raw" >"$tmp/c1.sig"
	check "extracted a signature" grep -q '^-----END SSH SIGNATURE-----$' "$tmp/c1.sig"
	check "ssh-keygen -Y verify accepts it" sh -c "ssh-keygen -Y verify -f '$tmp/allowed_signers' -I release@kiln.test \
		-n git -s '$tmp/c1.sig' <'$tmp/c1.payload' >/dev/null 2>&1"
	check "ssh-keygen -Y verify refuses another namespace" sh -c "! ssh-keygen -Y verify -f '$tmp/allowed_signers' \
		-I release@kiln.test -n file -s '$tmp/c1.sig' <'$tmp/c1.payload' >/dev/null 2>&1"
	sed 's/^author kiln/author kilm/' "$tmp/c1.payload" >"$tmp/c1.changed"
	check "the changed payload differs" not cmp -s "$tmp/c1.payload" "$tmp/c1.changed"
	check "ssh-keygen -Y verify refuses a changed payload" sh -c "! ssh-keygen -Y verify -f '$tmp/allowed_signers' \
		-I release@kiln.test -n git -s '$tmp/c1.sig' <'$tmp/c1.changed' >/dev/null 2>&1"
	check "ssh-keygen -Y find-principals names the signer" sh -c "ssh-keygen -Y find-principals -f '$tmp/allowed_signers' \
		-s '$tmp/c1.sig' 2>/dev/null | grep -qx release@kiln.test"
fi
check "git fsck --strict is clean" gitm fsck --strict --no-dangling

# ---- a bad signing key stops the run before anything is written
sed -n 1,10p "$src/samples/user-events.jsonl" >>"$tmp/in.jsonl"
before=$(find "$tmp/store" -type f | sort | md5sum)
chmod 644 "$tmp/sign.key"
check "a group/others-readable key: exit 2" status_is readable 2 "$kiln" run "$pipeline" "${sign[@]}"
check "  one line naming chmod 600" one_line_error readable "sign\.key: signing key file mode 0644 .*chmod 600"
chmod 600 "$tmp/sign.key"
check "a missing key: exit 2" status_is missing 2 "$kiln" run "$pipeline" --set "manifest.signing_key=$tmp/nope.key"
check "  one line" one_line_error missing "nope\.key: signing key file not found"
(umask 077 && cp "$tmp/hmac.key" "$tmp/hmac-as-sign.key")
check "an HMAC key as signing key: exit 2" status_is wrongkey 2 "$kiln" run "$pipeline" \
	--set "manifest.signing_key=$tmp/hmac-as-sign.key"
check "  one line, no key material" sh -c "[ \$(wc -l <'$tmp/wrongkey.err') -eq 1 ] && grep -q 'not a kiln signing key file' '$tmp/wrongkey.err' && ! grep -qF '$(cat "$tmp/hmac.key")' '$tmp/wrongkey.err'"
check "an unknown manifest key is still refused" status_is unknown 2 "$kiln" run "$pipeline" --set manifest.signing_keys=x
check "no commit and no object from the failed runs" \
	test "$(gitm rev-parse -q --verify "$ref")" = "$c3" -a "$(find "$tmp/store" -type f | sort | md5sum)" = "$before"

# ---- promoted versions: the signature binds the dataset and version name
one_reason() { # NAME ERE: stderr of NAME is exactly one line, matching
	[ "$(wc -l <"$tmp/$1.err")" -eq 1 ] && grep -Eq -- "$2" "$tmp/$1.err" && return 0
	echo "  stderr of $1 (wanted one line matching /$2/):"
	sed 's/^/  | /' "$tmp/$1.err" | head -5
	return 1
}
gates=(--set promote.min_records.train=1 --set promote.min_records.dev=0 --set promote.min_records.test=0
	--set promote.ratio_tolerance=1 --set promote.max_quarantine_rate=1)
trusted=(--allowed-signers "$tmp/allowed_signers")
tags=refs/tags/user-events
check "promote v1 (signed) exits 0" status_is promote1 0 "$kiln" promote "user-events@$c1" --pipeline "$pipeline" \
	"${gates[@]}" "${sign[@]}"
check "promote v2 (signed) exits 0" status_is promote2 0 "$kiln" promote "user-events@$c2" --pipeline "$pipeline" \
	"${gates[@]}" "${sign[@]}"
check "a signed promotion records kiln.signed=tags" test "$(gitm config kiln.signed)" = tags
t1=$(gitm rev-parse -q --verify "$tags/v1")
t2=$(gitm rev-parse -q --verify "$tags/v2")
check "verify v2 with trusted keys exits 0" status_is v2 0 "$kiln" verify user-events@v2 "${trusted[@]}"
check "  says trusted" grep -q '^signature: good, ssh-ed25519 SHA256:.* (trusted)$' "$tmp/v2.out"
check "verify v2 without keys exits 0" status_is v2-nokeys 0 "$kiln" verify user-events@v2
check "  says first that it checked it against no key" grep -q '^signature: not checked against any key (signed by ssh-ed25519 SHA256:' "$tmp/v2-nokeys.out"
check "  and never 'good'" not grep -q 'good' "$tmp/v2-nokeys.out"
check "--require-trusted without keys exits 1" status_is v2-require 1 "$kiln" verify user-events@v2 --require-trusted
check "  naming why" grep -q '^kiln verify: --require-trusted: no trusted keys given' "$tmp/v2-require.err"
check "--require-trusted with trusted keys exits 0" status_is v2-require-keys 0 "$kiln" verify user-events@v2 --require-trusted "${trusted[@]}"
if $have_ssh_keygen; then
	check "git verify-tag accepts v2" gitm -c gpg.format=ssh -c gpg.ssh.allowedSignersFile="$tmp/allowed_signers" \
		verify-tag user-events/v2
fi

# v1's signed tag object put under v2's name
gitm update-ref "$tags/v2" "$t1"
check "swapped v2: verify with trusted keys exits 1" status_is swap-verify 1 "$kiln" verify user-events@v2 "${trusted[@]}"
check "  one line: the tag object is named for v1" \
	one_reason swap-verify "refs/tags/user-events/v2: the tag object [0-9a-f]{12} is named user-events/v1, not user-events/v2"
check "  nothing says trusted" not grep -q trusted "$tmp/swap-verify.out"
check "swapped v2: verify without keys exits 1" status_is swap-verify-nokeys 1 "$kiln" verify user-events@v2
check "swapped v2: kiln cat refuses (exit 2)" status_is swap-cat 2 "$kiln" cat user-events@v2
check "  one line, no records" one_line_error swap-cat "is named user-events/v1, not user-events/v2"
check "swapped v2: kiln ls refuses (exit 2)" status_is swap-ls 2 "$kiln" ls user-events@v2
check "  one line" one_line_error swap-ls "is named user-events/v1, not user-events/v2"
check "v1 itself still reads" status_is v1-cat 0 "$kiln" cat user-events@v1
gitm update-ref "$tags/v2" "$t2"
check "v2 put back verifies" status_is v2-back 0 "$kiln" verify user-events@v2 "${trusted[@]}"

# a tag rewritten to an unsigned commit: refused without trusted keys (kiln.signed=tags)
gitm update-ref "$tags/v2" "$c3"
check "v2 rewritten to unsigned run 3: verify without keys exits 1" status_is unsigned-nokeys 1 "$kiln" verify user-events@v2
check "  one line: not signed, and the repository says it must be" \
	one_reason unsigned-nokeys "refs/tags/user-events/v2 is not signed, and the repository says it must be \(kiln\.signed\)"
gitm update-ref -d "$tags/v2"
gitm -c user.name=x -c user.email=x@x tag -a -m "user-events v2" user-events/v2 "$c3"
check "an unsigned annotated v2: verify without keys exits 1" status_is unsigned-tag 1 "$kiln" verify user-events@v2
check "  one line" one_reason unsigned-tag "refs/tags/user-events/v2 is not signed, and the repository says it must be"
gitm config --unset kiln.signed
check "without kiln.signed an unsigned tag is reported, not refused" status_is unsigned-nopolicy 0 "$kiln" verify user-events@v2
check "  but refused with --require-trusted" status_is unsigned-require 1 "$kiln" verify user-events@v2 --require-trusted "${trusted[@]}"
check "  as unsigned" grep -q '^signature: none' "$tmp/unsigned-nopolicy.out"
gitm config kiln.signed all
check "kiln.signed=all: the unsigned branch tip fails" status_is unsigned-main 1 "$kiln" verify user-events@main
check "kiln.signed=all: the signed run 2 commit passes" status_is signed-c2 0 "$kiln" verify "user-events@$c2"
check "a bad kiln.signed value: exit 2, one line" status_is bad-policy 2 \
	sh -c "git --git-dir='$tmp/m.git' config kiln.signed sometimes && '$kiln' verify user-events@v1"
check "  naming the key" one_line_error bad-policy "kiln\.signed = 'sometimes': expected tags, all or false"
gitm config kiln.signed tags
gitm update-ref "$tags/v2" "$t2"

# ---- verify's failure paths: each exit 1 with one line
check "unsigned version with trusted keys exits 1" status_is unsigned-keys 1 "$kiln" verify "user-events@$c3" "${trusted[@]}"
check "  one line" one_reason unsigned-keys "user-events@$c3: $c3 is not signed"

gitm cat-file tag "$t2" | sed 's/^user-events v2$/user-events v2 (edited)/' >"$tmp/t2.edited"
check "the edited tag differs" not sh -c "git --git-dir='$tmp/m.git' cat-file tag '$t2' | cmp -s - '$tmp/t2.edited'"
t2x=$(gitm hash-object -t tag -w --stdin <"$tmp/t2.edited")
gitm update-ref "$tags/v2" "$t2x"
check "a tampered tag object exits 1" status_is tampered-tag 1 "$kiln" verify user-events@v2 "${trusted[@]}"
check "  one line" one_reason tampered-tag "the signature of refs/tags/user-events/v2 does not match its content \(tampered\)"
gitm update-ref "$tags/v2" "$t2"

gitm cat-file commit "$c1" | sed "s/^tree .*/tree $(gitm rev-parse "$c2^{tree}")/" >"$tmp/c1.edited"
c1x=$(gitm hash-object -t commit -w --stdin <"$tmp/c1.edited")
check "the tampered commit keeps the signature" grep -q '^gpgsig -----BEGIN SSH SIGNATURE-----$' "$tmp/c1.edited"
check "a tampered commit (tree changed) exits 1" status_is tampered-commit 1 "$kiln" verify "user-events@$c1x" "${trusted[@]}"
check "  the first line says tampered" sh -c "head -1 '$tmp/tampered-commit.err' | grep -Eq 'the signature of $c1x does not match its content \(tampered\)'"
# its tree is another commit's, so its profile does not follow from its parent's either
check "  any other line is the profile's" sh -c "sed 1d '$tmp/tampered-commit.err' | grep -v ':profile.json: ' | grep -q . && exit 1 || exit 0"

check "--public-key with the signer's key exits 0" status_is pub-good 0 "$kiln" verify user-events@v2 --public-key "$tmp/sign.key.pub"
check "  trusted" grep -q '(trusted)$' "$tmp/pub-good.out"
check "--public-key with another key exits 1" status_is pub-bad 1 "$kiln" verify user-events@v2 \
	--public-key "$tmp/cwd/kiln-signing.key.pub"
check "  one line" one_reason pub-bad "signed by ssh-ed25519 SHA256:[A-Za-z0-9+/]{43}, which is not a trusted key"

# stats.json edited in a commit of its own (plain git plumbing), on a branch
stats_commit() { # SED-EXPRESSION BRANCH: c3's tree with stats.json edited
	local blob tree
	blob=$(gitm show "$c3:stats.json" | sed -E "$1" | gitm hash-object -w --stdin)
	tree=$(gitm ls-tree "$c3" | sed -E "s/^(100644 blob )[0-9a-f]{40}(\tstats\.json)$/\1$blob\2/" | gitm mktree)
	gitm update-ref "refs/heads/user-events/$2" "$(echo edited | gitm commit-tree "$tree" -p "$c3")"
}
stats_commit 's/"records_in": *([0-9]+)/"records_in":1\1/' unbalanced
check "unbalanced stats.json: verify exits 1" status_is unbalanced 1 "$kiln" verify user-events@unbalanced
check "  one line" one_reason unbalanced "stats.json does not balance \(1[0-9]+ in, [0-9]+ valid, [0-9]+ quarantined\)"
# "erased" (kiln erase) counts in the balance: records_in = valid + quarantined + erased
stats_commit 's/("quarantined": *[0-9]+,)/\1 "erased": 7,/' overerased
check "erased records that do not balance: verify exits 1" status_is overerased 1 "$kiln" verify user-events@overerased
check "  one line" one_reason overerased "stats.json does not balance \([0-9]+ in, [0-9]+ valid, [0-9]+ quarantined, 7 erased\)"
check "  kiln show says how many were erased" sh -c "'$kiln' show user-events@overerased | grep -qx 'erased 7 curated records (kiln erase)'"
check "  kiln show --json too" sh -c "'$kiln' show user-events@overerased --json | grep -q '\"quarantined\":[0-9]*,\"erased\":7,'"
check "  and a version never erased has no such line" sh -c "! '$kiln' show user-events@unbalanced | grep -q '^erased'"
stats_commit 's/("train": *\{"records": *)([0-9]+)/\11\2/' splitoff
check "split counts that differ from the shard lists: verify exits 1" status_is splitoff 1 "$kiln" verify user-events@splitoff
check "  one line" one_reason splitoff "stats.json says train holds 1[0-9]+ records in [0-9]+ shards, the shard list [0-9]+ in"
check "git fsck --strict is still clean" gitm fsck --strict --no-dangling

pii_inputs=("$src/samples/user-events.jsonl")
check "no personal data in any log, stdout or stderr" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
