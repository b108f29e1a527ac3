# bash completion for kiln (installed as bash-completion's completions/kiln;
# docs/OPERATIONS.md). Everything offered comes from kiln itself or from the
# manifest repository, so new commands and options need no edit here:
# command names from `kiln --help`, each command's long options, option
# arguments and subcommands from `kiln CMD --help` (read once per shell),
# files where an option or argument takes one, and DATASET[@REF] arguments
# from the refs of the manifest repository (-m/--manifest on the line, else
# $KILN_MANIFEST): dataset names, then after '@' its branches and vN tags.

# _kiln_spec KILN [CMD [SUB]] sets the caller's spec to what `KILN [CMD
# [SUB]] --help` says, one fact a line:
#   cmd NAME                   a command (kiln --help's table)
#   sub NAME                   a subcommand (kiln CMD NAME ... in the usage)
#   opt LONG SHORT ARG         an option; SHORT and ARG are - when it has none
#   choice LONG A|B|C          the values an option takes
#   arg SUB NAME REPEAT        the positional arguments of SUB (- for none) in
#                              order; REPEAT 1 when the last one repeats (FILE...)
# _kiln_specs caches them per shell: global (bash-completion sources this file
# inside a function) and filled outside any subshell.
declare -gA _kiln_specs=()

_kiln_spec() {
	local key="$*"
	if [[ -z ${_kiln_specs[$key]+set} ]]; then
		_kiln_specs[$key]=$("$1" "${@:2}" --help 2>/dev/null | awk -v cmd="${2-}" '
		function indent(s) { match(s, /^ */); return RLENGTH }
		NR == 1 { usage = 1 }
		usage && /^$/ { usage = 0 }
		usage {
			l = $0
			sub(/^usage: +/, "", l)
			sub(/^ +/, "", l)
			if (l ~ /^kiln /) form[++nforms] = l
			else form[nforms] = form[nforms] " " l
			next
		}
		/^Commands:$/ { table = 1; next }
		table && /^  [a-z]/ { print "cmd", $1 }
		table && /^$/ { table = 0 }
		/^ +-/ && indent($0) <= 10 {
			l = substr($0, indent($0) + 1)
			short = "-"
			if (l ~ /^-[A-Za-z0-9], /) { short = substr(l, 1, 2); l = substr(l, 5) }
			if (!match(l, /^--[a-z][a-z0-9-]*/)) next
			long = substr(l, 1, RLENGTH)
			rest = substr(l, RLENGTH + 1)
			arg = "-"
			if (rest ~ /^ [^ ]/) {
				rest = substr(rest, 2)
				p = index(rest, "  ")
				arg = p ? substr(rest, 1, p - 1) : rest
			}
			print "opt", long, short, arg
			if (arg ~ /^[a-z][^ ]*\|/) print "choice", long, arg
		}
		END {
			for (f = 1; f <= nforms; f++) {
				nt = split(form[f], t, " ")
				if (cmd == "" || t[2] != cmd) continue
				k = 3
				s = "-"
				if (t[3] ~ /^[a-z][a-z-]*$/) { s = t[3]; print "sub", s; k = 4 }
				if (s in done) continue
				done[s] = 1
				depth = 0
				open = ""
				for (j = k; j <= nt; j++) {
					tok = t[j]
					if (tok == "|") { open = ""; continue }
					lead = match(tok, /^\[+/) ? RLENGTH : 0
					core = substr(tok, lead + 1)
					sub(/[].]*$/, "", core)
					before = depth
					depth += gsub(/\[/, "[", tok) - gsub(/\]/, "]", tok)
					if (core ~ /^-/) { open = tok ~ /\]/ ? "" : core; continue }
					if (open != "" && !lead) {
						if (core ~ /^[a-z][^ ]*\|/) print "choice", open, core
						open = ""
						continue
					}
					open = ""
					if (before == 0 && core ~ /^[A-Z]/) print "arg", s, core, (tok ~ /\.\.\./ ? 1 : 0)
				}
			}
		}')
	fi
	spec=${_kiln_specs[$key]}
}

# Drops from each of COMPREPLY what readline keeps of cur: the text up to
# its last ':' or '@' where COMP_WORDBREAKS breaks words there.
_kiln_ltrim() {
	local i c
	for ((i = ${#cur} - 1; i >= 0; i--)); do
		c=${cur:i:1}
		if [[ ($c == : || $c == @) && $COMP_WORDBREAKS == *"$c"* ]]; then
			COMPREPLY=("${COMPREPLY[@]#"${cur:0:i+1}"}")
			return
		fi
	done
}

# PREFIX WORD NAME...: COMPREPLY is PREFIX+NAME for each NAME that starts
# with WORD and is a name kiln makes ([a-z0-9][a-z0-9._-]*). Ref names come
# from a repository anyone may have written: they never go through compgen
# -W, which expands $(...) and `...` in its word list, and a name kiln would
# not make (one holding $, `, quotes or spaces) is not offered at all.
_kiln_offer() {
	local prefix=$1 word=$2 name
	shift 2
	COMPREPLY=()
	for name in "$@"; do
		[[ $name =~ ^[a-z0-9][a-z0-9._-]*$ && $name == "$word"* ]] && COMPREPLY+=("$prefix$name")
	done
}

# KIND ("DATASET@REF", "DATASET[@REF]", "DATASET"): completes cur as a
# dataset name, or after '@' as one of its branches and tags.
_kiln_datasets() {
	local repo=${KILN_MANIFEST-} i ref refs ds names=()
	for ((i = 1; i < ${#words[@]}; i++)); do
		((i == cword)) && continue
		case ${words[i]} in
		-m | --manifest) ((i + 1 != cword)) && repo=${words[i + 1]-} ;;
		--manifest=*) repo=${words[i]#--manifest=} ;;
		-m?*) repo=${words[i]#-m} ;;
		esac
	done
	[[ $repo == \~/* ]] && repo=$HOME/${repo#\~/}
	[[ $repo ]] || return
	# kiln's manifest repositories are bare: refs/heads/DATASET/BRANCH,
	# refs/tags/DATASET/vN
	refs=$(git --git-dir="$repo" for-each-ref --format='%(refname)' refs/heads refs/tags 2>/dev/null)
	if [[ $cur == *@* ]]; then
		ds=${cur%%@*}
		while IFS= read -r ref; do
			case $ref in
			refs/heads/"$ds"/*) names+=("${ref#refs/heads/"$ds"/}") ;;
			refs/tags/"$ds"/*) names+=("${ref#refs/tags/"$ds"/}") ;;
			esac
		done <<<"$refs"
		_kiln_offer "$ds@" "${cur#*@}" "${names[@]}"
	else
		while IFS= read -r ref; do
			ref=${ref#refs/*/}
			[[ $ref == */* ]] && names+=("${ref%%/*}")
		done <<<"$refs"
		_kiln_offer "" "$cur" "${names[@]}"
		mapfile -t COMPREPLY < <(printf '%s\n' "${COMPREPLY[@]}" | sort -u)
		[[ ${COMPREPLY[*]} ]] || COMPREPLY=()
		# a DATASET@REF goes on with '@'
		[[ $1 == *@* && ${#COMPREPLY[@]} -gt 0 ]] && compopt -o nospace 2>/dev/null
	fi
	_kiln_ltrim
}

_kiln() {
	# shellcheck disable=SC2034 # split: set by _init_completion -s
	local cur prev words cword split
	_init_completion -s -n :@ || return

	local kiln=${words[0]} i cmd='' cmdi=0 sub='' subi=0 spec
	[[ $kiln == \~/* ]] && kiln=$HOME/${kiln#\~/}
	for ((i = 1; i < cword; i++)); do
		[[ ${words[i]} == -* ]] && continue
		cmd=${words[i]} cmdi=$i
		break
	done
	if [[ -z $cmd && $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W '--help --version' -- "$cur")
		return
	fi
	if [[ -z $cmd || $cmd == help ]]; then
		((cmdi && cword > cmdi + 1)) && return # kiln help CMD takes one
		local help=help
		[[ $cmd ]] && help=
		_kiln_spec "$kiln"
		mapfile -t COMPREPLY < <(compgen -W "$help $(awk '$1 == "cmd" { print $2 }' <<<"$spec")" -- "$cur")
		return
	fi

	_kiln_spec "$kiln" "$cmd"
	local subs
	subs=$(awk '$1 == "sub" { print $2 }' <<<"$spec")
	if [[ $subs ]]; then
		for ((i = cmdi + 1; i < cword; i++)); do
			[[ ${words[i]} == -* ]] && continue
			sub=${words[i]} subi=$i
			break
		done
		if [[ -z $sub && $cur != -* ]]; then
			mapfile -t COMPREPLY < <(compgen -W "$subs" -- "$cur")
			return
		fi
		# `kiln cache serve --help` has a text of its own
		[[ $sub ]] && _kiln_spec "$kiln" "$cmd" "$sub"
	fi

	# an option's argument: its values, or files where it takes one
	local opt
	opt=$(awk -v o="$prev" '$1 == "opt" && $4 != "-" && ($2 == o || $3 == o) { print $2, $4; exit }' <<<"$spec")
	if [[ $opt ]]; then
		local choices
		choices=$(awk -v o="${opt% *}" '$1 == "choice" && $2 == o { gsub(/\|/, " ", $3); gsub(/=[A-Z]+/, "=", $3); print $3; exit }' <<<"$spec")
		if [[ $choices ]]; then
			mapfile -t COMPREPLY < <(compgen -W "$choices" -- "$cur")
			[[ ${COMPREPLY[*]} == *= ]] && compopt -o nospace 2>/dev/null
		else
			case ${opt#* } in
			FILE | PATH | PIPELINE | CONFIG | STATE) _filedir ;;
			REPO | DIR) _filedir -d ;;
			esac
		fi
		return
	fi
	if [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$(awk '$1 == "opt" { print $2 }' <<<"$spec")" -- "$cur")
		return
	fi

	# a positional argument: which one, not counting options and their arguments
	local n=0 w arg
	for ((i = (subi ? subi : cmdi) + 1; i < cword; i++)); do
		w=${words[i]}
		if [[ $w == -* ]]; then
			[[ $w != *=* ]] && awk -v o="$w" '$1 == "opt" && $4 != "-" && ($2 == o || $3 == o) { f = 1 } END { exit !f }' <<<"$spec" && ((i++))
			continue
		fi
		((n++))
	done
	arg=$(awk -v s="${sub:--}" -v n="$n" '$1 == "arg" && $2 == s { a[k++] = $3; r = $4 } END { if (n < k) print a[n]; else if (k && r) print a[k - 1] }' <<<"$spec")
	case $arg in
	*DATASET* | *@REF*) _kiln_datasets "$arg" ;;
	FILE | PATH | PIPELINE | CONFIG | OLD | NEW) _filedir ;;
	esac
} && complete -F _kiln kiln
