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

# ---- Ceph RGW: a throwaway single-node cluster (scripts/ceph-rgw) per test.
# The rule (issue 30): where Ceph is installed (scripts/bootstrap
# --test-servers) the RGW checks run, and a cluster that cannot start is a
# FAIL; where it is not, the test prints one SKIP line for its RGW part and
# runs the rest.
#   rgw_available          0 when Ceph's binaries are installed, else prints
#                          "SKIP: ..." (the caller's RGW part) and returns 1
#   rgw_start DIR BUCKET...  starts a cluster in DIR (new or empty) and makes
#                          the buckets; sets rgw_dir, rgw_port, rgw_endpoint
#                          (127.0.0.1:PORT), rgw_ak, rgw_sk, rgw_region; on
#                          failure prints FAIL with the end of the log,
#                          counts a failure and returns 1
#   rgw_stop               stops the cluster and removes DIR (its objects
#                          were in memory; its logs would only slow the
#                          personal-data scan); call it in the cleanup trap
#                          before rm -rf of the test's folder; does nothing
#                          when none runs
# A watchdog stops the cluster when the test's shell is gone however it
# ended (kill -9 included), so the daemons never outlive the test.
rgw_dir='' rgw_port='' rgw_endpoint='' rgw_ak='' rgw_sk='' rgw_region='' rgw_watchdog=''
rgw_available() {
	local b missing=()
	for b in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool; do
		command -v "$b" >/dev/null || missing+=("$b")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "SKIP: the Ceph RGW checks: not installed: ${missing[*]} (scripts/bootstrap --test-servers installs Ceph)"
	return 1
}

rgw_start() {
	local dir=$1 k v shell_pid rc=0
	shift
	"$src/scripts/ceph-rgw" start "$dir" >"$dir.start.log" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ]; then
		failed=$((failed + 1))
		echo "FAIL: the Ceph cluster did not start (scripts/ceph-rgw start: exit $rc; Ceph is installed, so this is a failure):"
		sed 's/^/  | /' "$dir.start.log" | tail -20
		rm -f "$dir.start.log"
		"$src/scripts/ceph-rgw" stop "$dir" >/dev/null 2>&1
		return 1
	fi
	rm -f "$dir.start.log"
	rgw_dir=$(cd "$dir" && pwd)
	shell_pid=$BASHPID
	(
		trap '' INT TERM HUP # rgw_stop ends it with SIGKILL
		while kill -0 "$shell_pid" 2>/dev/null && [ -d "$rgw_dir/run" ]; do sleep 1; done
		[ -d "$rgw_dir/run" ] && "$src/scripts/ceph-rgw" stop "$rgw_dir"
	) </dev/null >/dev/null 2>&1 &
	rgw_watchdog=$!
	while IFS='=' read -r k v; do
		case $k in
		AWS_ACCESS_KEY_ID) rgw_ak=$v ;;
		AWS_SECRET_ACCESS_KEY) rgw_sk=$v ;;
		AWS_REGION) rgw_region=$v ;;
		CEPH_RGW_PORT) rgw_port=$v ;;
		esac
	done <"$rgw_dir/env"
	rgw_endpoint=127.0.0.1:$rgw_port
	[ $# -eq 0 ] && return 0
	/usr/bin/python3 - "$rgw_endpoint" "$rgw_ak" "$rgw_sk" "$rgw_region" "$@" >"$rgw_dir/buckets.log" 2>&1 <<'PY' && return 0
import sys, boto3
from botocore.config import Config
endpoint, ak, sk, region, buckets = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
s3 = boto3.client('s3', endpoint_url='http://' + endpoint, region_name=region,
                  aws_access_key_id=ak, aws_secret_access_key=sk,
                  config=Config(signature_version='s3v4', s3={'addressing_style': 'path'}))
for b in buckets:
    s3.create_bucket(Bucket=b)
PY
	failed=$((failed + 1))
	echo "FAIL: boto3 could not make the buckets $* on RGW at $rgw_endpoint:"
	sed 's/^/  | /' "$rgw_dir/buckets.log" | tail -5
	return 1
}

rgw_stop() {
	[ -n "$rgw_dir" ] || return 0
	"$src/scripts/ceph-rgw" stop "$rgw_dir" >/dev/null 2>&1
	if [ -n "$rgw_watchdog" ]; then
		kill -KILL "$rgw_watchdog" 2>/dev/null
		wait "$rgw_watchdog" 2>/dev/null
	fi
	rm -rf "$rgw_dir"
	rgw_dir='' rgw_watchdog=''
}
