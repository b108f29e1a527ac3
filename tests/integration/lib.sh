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

ms_sleep() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }
