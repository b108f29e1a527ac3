#!/usr/bin/env bash
# kiln's man pages and `kiln help` (docs/OPERATIONS.md):
#  - `kiln --help` lists every command of src/cli/main.c's table, each of
#    which answers --help with its own usage line;
#  - `kiln help CMD` prints exactly what `kiln CMD --help` prints;
#  - make wrote kiln.1 and kiln-CMD.1 for every command, none older than
#    the kiln they describe, and `make clean` removes them;
#  - man renders each page without a warning, and each holds its command's
#    usage line(s) and every option line of its --help (name, argument and
#    description), kiln.1 every command with its summary;
#  - `make install DESTDIR=...` puts the pages in share/man/man1 and the
#    bash completion in bash-completion's completions directory as "kiln".
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
builddir=${KILN_BUILDDIR:-$(dirname "$kiln")}
need man col make
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LC_ALL=C

# --- the command list ---------------------------------------------------------
mapfile -t commands < <("$kiln" --help | awk '/^Commands:$/ { t = 1; next } t && /^  [a-z]/ { print $1 } t && /^$/ { t = 0 }')
mapfile -t table < <(sed -n '/^static const kiln_command commands\[\] = {/,/^};/s/^ *{"\([a-z0-9-]*\)",.*/\1/p' "$src/src/cli/main.c")
check "main.c's command table is read" test ${#table[@]} -gt 10
check "kiln --help lists every command of main.c's table, in order" test "${commands[*]}" = "${table[*]}"

# --- kiln help CMD == kiln CMD --help ---------------------------------------------
help_matches() { # CMD
	local rc1=0 rc2=0
	"$kiln" help "$1" >"$tmp/help-$1" 2>"$tmp/help-$1.err" || rc1=$?
	"$kiln" "$1" --help >"$tmp/opt-$1" 2>"$tmp/opt-$1.err" || rc2=$?
	[ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] || { echo "  $1: exit $rc1 (help) and $rc2 (--help)"; return 1; }
	[ ! -s "$tmp/help-$1.err" ] && [ ! -s "$tmp/opt-$1.err" ] || { echo "  $1: something on stderr"; return 1; }
	head -1 "$tmp/opt-$1" | grep -q "^usage: kiln $1\( \|$\)" || { echo "  $1: --help does not start with 'usage: kiln $1'"; return 1; }
	cmp "$tmp/help-$1" "$tmp/opt-$1"
}
for c in "${commands[@]}"; do
	check "kiln help $c is kiln $c --help, byte for byte" help_matches "$c"
done

# --- the pages make wrote -------------------------------------------------------------
# A page as text, one paragraph a line, runs of spaces squeezed.
render() { MANWIDTH=4000 man -l "$1" 2>/dev/null | col -b | sed 's/^ *//' | tr -s ' '; }
# "usage: kiln X ..." and its continuation lines as one line per form.
usage_forms() {
	awk 'NR == 1 { sub(/^usage: /, "") } /^$/ { exit } { sub(/^ +/, "") } NR > 1 && !/^kiln / { l = l " " $0; next }
		{ if (l != "") print l; l = $0 } END { print l }' "$1" | tr -s ' '
}
# Every option line of a --help: "SPEC<TAB>DESCRIPTION", the description's
# continuation lines joined.
option_lines() {
	awk 'function flush() { if (spec != "") print spec "\t" desc; spec = "" }
		/^ +-/ && match($0, /^ */) && RLENGTH <= 10 {
			flush(); l = substr($0, RLENGTH + 1)
			p = index(l, "  "); spec = p ? substr(l, 1, p - 1) : l; desc = p ? substr(l, p) : ""
			sub(/^ +/, "", desc); next }
		spec != "" && match($0, /^ */) && RLENGTH >= 12 { l = substr($0, RLENGTH + 1); desc = desc (desc == "" ? "" : " ") l; next }
		{ flush() }
		END { flush() }' "$1" | tr -s ' '
}
has() { # TEXT FILE: FILE holds TEXT
	grep -qF -- "$1" "$2" || { echo "  not in ${2##*/}: $1"; return 1; }
}
page_ok() { # PAGE HELP: renders without a warning, holds HELP's usage and options
	local page=$1 help=$2 warnings form spec desc rc=0
	[ -s "$page" ] || { echo "  no page $page"; return 1; }
	[ ! "$kiln" -nt "$page" ] || { echo "  $page is older than $kiln"; rc=1; }
	warnings=$(MANWIDTH=80 man -l --warnings "$page" 2>&1 >/dev/null)
	[ -z "$warnings" ] || { echo "  $page: $warnings"; rc=1; }
	render "$page" >"$tmp/page.txt"
	grep -q '^SYNOPSIS$' "$tmp/page.txt" || { echo "  no SYNOPSIS in $page"; rc=1; }
	while IFS= read -r form; do has "$form" "$tmp/page.txt" || rc=1; done < <(usage_forms "$help")
	while IFS=$'\t' read -r spec desc; do
		has "$spec" "$tmp/page.txt" || rc=1
		[ -z "$desc" ] || has "$desc" "$tmp/page.txt" || rc=1
	done < <(option_lines "$help")
	return $rc
}
check "option_lines reads kiln log --help's options" test "$(option_lines "$tmp/opt-log" | grep -c .)" -ge 3
"$kiln" --help >"$tmp/kiln-help"
check "kiln.1" page_ok "$builddir/man/kiln.1" "$tmp/kiln-help"
render "$builddir/man/kiln.1" >"$tmp/kiln.txt"
kiln_lists() { # every row of kiln --help's table (NAME, then SUMMARY) and a kiln-NAME(1) reference
	local name summary rc=0 n=0
	while read -r name summary; do
		n=$((n + 1))
		grep -Eq "^$name( |\$)" "$tmp/kiln.txt" || { echo "  no line starts with $name"; rc=1; }
		has "$summary" "$tmp/kiln.txt" || rc=1
		has "kiln-$name(1)" "$tmp/kiln.txt" || rc=1
	done < <(awk '/^Commands:$/ { t = 1; next } t && /^  [a-z]/ { print } t && /^$/ { t = 0 }' "$tmp/kiln-help")
	[ "$n" -gt 0 ] || { echo "  no command table"; rc=1; }
	return $rc
}
check "kiln.1 lists every command with its summary and page" kiln_lists
for c in "${commands[@]}"; do
	check "kiln-$c.1" page_ok "$builddir/man/kiln-$c.1" "$tmp/opt-$c"
	summary=$(awk -v c="$c" '/^Commands:$/ { t = 1; next } t && $1 == c { sub(/^ *[^ ]+ +/, ""); print; exit }' "$tmp/kiln-help")
	render "$builddir/man/kiln-$c.1" >"$tmp/page.txt"
	check "kiln-$c.1 is named by its summary" has "kiln-$c - $summary" "$tmp/page.txt"
	check "kiln-$c.1 refers to kiln(1)" has "kiln(1)" "$tmp/page.txt"
done
check "make clean removes every page" sh -c "make -s -C '$builddir' -n clean | grep -q 'man/kiln.1 .*man/kiln-${commands[0]}.1 .*man/kiln-${commands[${#commands[@]} - 1]}.1'"

# --- make install -------------------------------------------------------------------
check "make install DESTDIR" status_is 0 make -s -C "$builddir" install DESTDIR="$tmp/inst"
man1=$(find "$tmp/inst" -type d -path '*/share/man/man1')
check "one man1 directory" test "$(printf '%s' "$man1" | grep -c .)" -eq 1
installed() { # PAGE: installed as built
	cmp "$builddir/man/$1" "$man1/$1"
}
check "kiln.1 installed" installed kiln.1
for c in "${commands[@]}"; do
	check "kiln-$c.1 installed" installed "kiln-$c.1"
done
completion=$(find "$tmp/inst" -path '*/bash-completion/completions/kiln')
check "the completion is installed as bash-completion/completions/kiln" test -n "$completion"
check "the installed completion is contrib/completion/kiln.bash" cmp "$src/contrib/completion/kiln.bash" "$completion"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
