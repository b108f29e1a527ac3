#!/usr/bin/env bash
# The bash completion (contrib/completion/kiln.bash) in `bash --norc` with
# bash-completion loaded first, as an interactive shell has it: COMP_WORDS,
# COMP_CWORD, COMP_LINE and COMP_POINT set as bash sets them (words split at
# the COMP_WORDBREAKS characters, a run of them a word of its own), then
# _kiln called and COMPREPLY compared with what kiln and git say:
#  - command names (kiln --help), long options (kiln CMD --help, read once
#    per shell), subcommands (kiln cache, kiln raw), option values and files;
#  - DATASET[@REF] from a manifest repository a real `kiln run` made: the
#    dataset name, after '@' its branch main and the promoted v1 (also with
#    '@' in COMP_WORDBREAKS), the repository from -m/--manifest on the line
#    before $KILN_MANIFEST.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
bash_completion=/usr/share/bash-completion/bash_completion
need git "$py"
[ -r "$bash_completion" ] || { echo "FAIL: not installed: bash-completion (run scripts/bootstrap)"; echo "0 passed, 1 failed"; exit 1; }
tmp=$(mktemp -d)
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT

# --- a manifest repository: one file run, its version promoted v1 -------------------
(umask 077 && printf '%s' 5f0e2b9c41d8a7763e1c0b2a9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e >"$tmp/hmac.key") # fixed: the promote gates check split ratios of 600 records, and a random key moves them
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store
"$py" "$src/bench/gen-user-events.py" --records 600 --seed 1 >"$KILN_INPUT"
pipeline=$src/pipelines/user-events.yaml
check "kiln run" status_is 0 "$kiln" run "$pipeline" --set "manifest.repo=$tmp/m.git"
check "promote v1" status_is 0 "$kiln" promote user-events@main --pipeline "$pipeline" \
	--set "manifest.repo=$tmp/m.git" --set promote.min_records.train=100 --set promote.min_records.dev=5 \
	--set promote.min_records.test=5 --set promote.ratio_tolerance=0.05 --set promote.max_quarantine_rate=0.05
has_ref() { git --git-dir="$tmp/m.git" rev-parse -q --verify "$1" >/dev/null; }
check "the run made refs/heads/user-events/main" has_ref refs/heads/user-events/main
check "the promotion made refs/tags/user-events/v1" has_ref refs/tags/user-events/v1
unset KILN_MANIFEST

# --- the driver: complete LINE... in one shell --------------------------------------------
# Each LINE is completed at its end; its COMPREPLY is printed sorted, one a
# line, then "--". "+@" adds '@' to COMP_WORDBREAKS for the lines after it.
cat >"$tmp/complete.sh" <<'EOF'
. "$1"
. "$2"
shift 2
complete -p kiln
echo --
for line in "$@"; do
	[ "$line" = +@ ] && { COMP_WORDBREAKS+=@; continue; }
	words=() w= brk=0
	for ((i = 0; i < ${#line}; i++)); do
		c=${line:i:1}
		if [[ $c == ' ' ]]; then
			[[ $w ]] && words+=("$w")
			w= brk=0
		elif [[ $c == [:=@] && $COMP_WORDBREAKS == *"$c"* ]]; then
			[[ $w && $brk == 0 ]] && { words+=("$w"); w=; }
			w+=$c brk=1
		else
			[[ $w && $brk == 1 ]] && { words+=("$w"); w=; }
			w+=$c brk=0
		fi
	done
	if [[ $w ]]; then words+=("$w"); else words+=(""); fi
	COMP_WORDS=("${words[@]}") COMP_CWORD=$((${#words[@]} - 1)) COMP_LINE=$line COMP_POINT=${#line}
	COMPREPLY=()
	_kiln kiln "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
	[ ${#COMPREPLY[@]} -eq 0 ] || printf '%s\n' "${COMPREPLY[@]}" | LC_ALL=C sort
	echo --
done
EOF
# complete LINE...: the replies in $tmp/reply.N (N from 1), the shell's errors in $tmp/complete.err
complete_lines() {
	rm -f "$tmp"/reply.*
	PATH="$(dirname "$kiln"):$PATH" bash --norc "$tmp/complete.sh" "$bash_completion" "$src/contrib/completion/kiln.bash" "$@" \
		>"$tmp/replies" 2>"$tmp/complete.err" || { echo "  the completion shell failed"; cat "$tmp/complete.err"; return 1; }
	awk -v dir="$tmp" 'BEGIN { n = 0 } /^--$/ { n++; printf "" >(dir "/reply." n); next } { print >(dir "/reply." n) }' "$tmp/replies"
}
reply_is() { # N EXPECTED...: reply N is exactly EXPECTED (any order)
	local n=$1
	shift
	[ $# -eq 0 ] || printf '%s\n' "$@" | LC_ALL=C sort >"$tmp/want"
	[ $# -gt 0 ] || : >"$tmp/want"
	diff -u "$tmp/want" "$tmp/reply.$n" >"$tmp/diff" || { sed 's/^/  | /' "$tmp/diff"; return 1; }
}

# what kiln and git say, for the expected replies
mapfile -t commands < <("$kiln" --help | awk '/^Commands:$/ { t = 1; next } t && /^  [a-z]/ { print $1 } t && /^$/ { t = 0 }')
long_options() { "$kiln" "$@" --help | grep -oE '^ {1,10}(-[A-Za-z0-9], )?--[a-z][a-z0-9-]*' | grep -oE -- '--[a-z0-9-]+$'; }
subcommands() { "$kiln" "$1" --help | awk -v c="$1" '/^$/ { exit } { sub(/^(usage:)? +/, "") } $1 == "kiln" && $2 == c { print $3 }'; }
refs_of() { git --git-dir="$tmp/m.git" for-each-ref --format='%(refname)' "refs/heads/$1" "refs/tags/$1" | sed "s|^refs/[a-z]*/$1/||"; }
starting() { local p=$1 w; shift; for w in "$@"; do [[ $w == "$p"* ]] && printf '%s\n' "$w"; done; }
check "kiln --help lists commands" test ${#commands[@]} -gt 10
check "the manifest has refs main and v1 for user-events" test "$(refs_of user-events | LC_ALL=C sort | tr '\n' ' ')" = "main v1 "

lines=(
	"kiln lo"                                               # 1
	"kiln "                                                 # 2
	"kiln log --ma"                                         # 3
	"kiln cache "                                           # 4
	"kiln raw "                                             # 5
	"kiln cache serve --"                                   # 6
	"kiln ls --split "                                      # 7
	"kiln help ca"                                          # 8
	"kiln show us"                                          # 9: no manifest anywhere
	"kiln show -m $tmp/m.git us"                            # 10
	"kiln show --manifest $tmp/m.git user-events@"          # 11
	"kiln log --manifest=$tmp/m.git user-events@m"          # 12
	"kiln diff -m $tmp/m.git user-events@v1 us"             # 13
	"kiln run $src/pipelines/user-e"                        # 14
	"kiln log --manifest $tmp/m.g"                          # 15
	"kiln --"                                               # 16
	+@
	"kiln show -m $tmp/m.git user-events@"                  # 17
	"kiln show -m $tmp/m.git user-events@v"                 # 18
)
check "complete" complete_lines "${lines[@]}"
check "complete -F _kiln kiln is registered" grep -qx 'complete -F _kiln kiln' "$tmp/reply.0"
check "no error from the completion shell" test ! -s "$tmp/complete.err"
check "kiln lo -> log" reply_is 1 $(starting lo "${commands[@]}")
check "kiln lo is log" reply_is 1 log
check "kiln <TAB>: every command, and help" reply_is 2 help "${commands[@]}"
check "kiln log --ma -> --manifest --max-count" reply_is 3 --manifest --max-count
check "kiln log --ma: the options of kiln log --help" reply_is 3 $(starting --ma $(long_options log))
check "kiln cache <TAB>: its subcommands" reply_is 4 $(subcommands cache)
check "kiln cache <TAB> has sync and serve" sh -c "grep -qx sync '$tmp/reply.4' && grep -qx serve '$tmp/reply.4'"
check "kiln raw <TAB>: ls and cat" reply_is 5 $(subcommands raw)
check "kiln raw <TAB> has ls" grep -qx ls "$tmp/reply.5"
check "kiln cache serve --: the options of kiln cache serve --help" reply_is 6 $(long_options cache serve)
check "kiln ls --split: the splits" reply_is 7 train dev test
check "kiln help ca" reply_is 8 $(starting ca "${commands[@]}")
check "no manifest: no dataset" reply_is 9
check "-m REPO: the dataset" reply_is 10 user-events
check "--manifest REPO user-events@: main and v1" reply_is 11 $(refs_of user-events | sed 's/^/user-events@/')
check "... which are main and v1" reply_is 11 user-events@main user-events@v1
check "--manifest=REPO: user-events@main" reply_is 12 user-events@main
check "diff's second DATASET@REF" reply_is 13 user-events
check "a pipeline file for kiln run" reply_is 14 $(cd / && compgen -f -- "$src/pipelines/user-e")
check "a directory for --manifest" reply_is 15 "$tmp/m.git"
check "kiln --" reply_is 16 --help --version
check "'@' a word break: the refs alone" reply_is 17 main v1
check "'@' a word break: v" reply_is 18 v1

# $KILN_MANIFEST, and -m on the line before it
export KILN_MANIFEST=$tmp/m.git
check "complete with KILN_MANIFEST" complete_lines "kiln show us" "kiln profile user-events@" "kiln show -m $tmp/none us"
check "\$KILN_MANIFEST: the dataset" reply_is 1 user-events
check "\$KILN_MANIFEST: the refs" reply_is 2 user-events@main user-events@v1
check "-m REPO before \$KILN_MANIFEST" reply_is 3
unset KILN_MANIFEST

# Ref names are anyone's bytes (a pulled bucket, a shared repository):
# names holding $(...) or `...` are neither run nor offered (they were run
# through compgen -W once: completing user-events@ ran `id`).
cp -r "$tmp/m.git" "$tmp/hostile.git"
main_id=$(git --git-dir="$tmp/hostile.git" rev-parse refs/heads/user-events/main)
mkdir -p "$tmp/cwd"
check "plant hostile ref names" sh -c "git --git-dir='$tmp/hostile.git' update-ref 'refs/heads/user-events/we\$(id>pwned1)ird' $main_id &&
	git --git-dir='$tmp/hostile.git' update-ref 'refs/tags/user-events/v\`id>pwned2\`' $main_id &&
	git --git-dir='$tmp/hostile.git' update-ref 'refs/heads/u\$(id>pwned3)/main' $main_id"
check "complete against hostile ref names" sh -c "cd '$tmp/cwd' && $(declare -f complete_lines); tmp='$tmp' kiln='$kiln' src='$src' bash_completion='$bash_completion'; complete_lines 'kiln show -m $tmp/hostile.git user-events@' 'kiln show -m $tmp/hostile.git u' +@ 'kiln show -m $tmp/hostile.git user-events@'"
check "no command ran from a ref name" sh -c "! ls '$tmp/cwd' | grep -q pwned"
check "hostile refs not offered after @" reply_is 1 user-events@main user-events@v1
check "hostile dataset names not offered" reply_is 2 user-events
check "hostile refs not offered ('@' a word break)" reply_is 3 main v1

# Loaded the way bash-completion loads an installed file (completions/kiln,
# on the first TAB after kiln, from inside a function), the options are
# read once per shell: the second completion of kiln log works with no
# kiln left on PATH.
mkdir -p "$tmp/bin" "$tmp/user/completions"
printf '#!/bin/sh\nexit 1\n' >"$tmp/bin/kiln"
chmod +x "$tmp/bin/kiln"
cp "$src/contrib/completion/kiln.bash" "$tmp/user/completions/kiln"
cat >"$tmp/twice.sh" <<EOF
PATH=$(dirname "$kiln"):\$PATH
BASH_COMPLETION_USER_DIR=$tmp/user
. "$bash_completion"
__load_completion kiln || echo "not loaded"
ask() { COMP_LINE="kiln log --ma" COMP_POINT=13 COMP_WORDS=(kiln log --ma) COMP_CWORD=2; COMPREPLY=(); _kiln kiln --ma log; echo "\${COMPREPLY[*]}"; }
ask
PATH=$tmp/bin:/usr/bin:/bin
hash -r
ask
EOF
check "the options are read once per shell" sh -c "bash --norc '$tmp/twice.sh' >'$tmp/twice.out' 2>&1 && test \"\$(sed -n 2p '$tmp/twice.out')\" = \"\$(sed -n 1p '$tmp/twice.out')\" && test -n \"\$(sed -n 2p '$tmp/twice.out')\""

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
