# Shared by the integration scripts: `. "$src/tests/integration/lib.sh"`
# after setting src (and tmp, for status_is). Each script counts its checks
# with check and prints "N passed, M failed" at its end.

passed=0 failed=0

check() { # NAME COMMAND...: passes when the command succeeds
	local name=$1
	shift
	if "$@"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL: $name"
	fi
}

status_is() { # EXPECTED COMMAND...: runs it, output in $tmp/out and $tmp/err
	local want=$1 rc=0
	shift
	"$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	[ "$rc" -eq "$want" ] || { echo "  exit $rc, expected $want: $*"; tail -5 "$tmp/err" | sed 's/^/  | /'; return 1; }
}

need_kiln() { # the kiln binary at $kiln, else the test fails
	[ -x "$kiln" ] && return 0
	echo "FAIL: no kiln binary at $kiln (set KILN)"
	echo "0 passed, 1 failed"
	exit 1
}

need_py() { # MODULE...: Debian's /usr/bin/python3 imports each, else the test fails (scripts/bootstrap installs them)
	local m missing=()
	for m in "$@"; do /usr/bin/python3 -c "import $m" 2>/dev/null || missing+=("$m"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "FAIL: /usr/bin/python3 cannot import: ${missing[*]} (run scripts/bootstrap)"
	echo "0 passed, 1 failed"
	exit 1
}

need() { # TOOL...: every TOOL on PATH, else the test fails (scripts/bootstrap installs them all)
	local t missing=()
	for t in "$@"; do command -v "$t" >/dev/null || missing+=("$t"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "FAIL: not installed: ${missing[*]} (run scripts/bootstrap)"
	echo "0 passed, 1 failed"
	exit 1
}

ms_sleep() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }

poll() { # SECONDS COMMAND...: runs COMMAND every 0.1 s until it succeeds (0) or SECONDS pass (1)
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.1
	done
}

# The one personal-data scanner (curate_check.py scan-pii) over every log,
# stdout and stderr a test wrote under $tmp: files named *.log, *.err, *.out,
# *.check, out or err, outside manifest repositories (*.git) and stores.
# The personal values are those of the generator's inputs under $tmp
# (*.expect files, their "pii" lists, and the user-events *.jsonl inputs),
# plus the inputs listed in the array pii_inputs. Files that hold records
# by design (a producer's log of what it sent) go in the array pii_exempt
# (base names). Prints the files that hold a value, never the value.
pii_inputs=() pii_exempt=()
pii_scan_logs() {
	local args=() files=() f base skip e
	while IFS= read -r -d '' f; do args+=(--expect "$f"); done < <(find "$tmp" -type f -name '*.expect' -print0)
	while IFS= read -r -d '' f; do args+=(--input "$f"); done < <(find "$tmp" -maxdepth 1 -type f -name '*.jsonl' -print0)
	for f in ${pii_inputs[@]+"${pii_inputs[@]}"}; do args+=(--input "$f"); done
	while IFS= read -r -d '' f; do
		base=${f##*/} skip=false
		for e in ${pii_exempt[@]+"${pii_exempt[@]}"}; do
			# shellcheck disable=SC2053 # the exemptions are globs
			[[ $base == $e ]] && skip=true
		done
		$skip || files+=("$f")
	done < <(find "$tmp" \( -name '*.git' -o -name 'store*' -o -name 'raw' -o -name 'quarantine' \) -prune -o -type f \
		\( -name '*.log' -o -name '*.err' -o -name '*.out' -o -name '*.check' -o -name out -o -name err \) -print0)
	[ ${#files[@]} -gt 0 ] || { echo "  pii_scan_logs: no log under $tmp"; return 1; }
	/usr/bin/python3 "$src/tests/integration/curate_check.py" scan-pii "${args[@]}" "${files[@]}" >"$tmp/pii-scan.txt" 2>&1 && return 0
	sed 's/^/  | /' "$tmp/pii-scan.txt" | tail -20
	return 1
}
