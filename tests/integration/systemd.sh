#!/usr/bin/env bash
# kiln's daemons under systemd, without systemd (docs/OPERATIONS.md): a
# python3 stand-in for the notify socket (notify_listen.py) records every
# datagram that `kiln cache serve` and a Kafka `kiln run` send with
# NOTIFY_SOCKET and WATCHDOG_USEC set:
#  - READY=1 only once the daemon serves (cache: an HTTP request succeeds
#    as soon as READY is seen; Kafka: the assignment is logged by then);
#  - WATCHDOG=1 again and again; STATUS lines, and no personal value in
#    them (pii_scan_logs reads the recorded datagrams too);
#  - SIGHUP: RELOADING=1 (with MONOTONIC_USEC) then READY=1, one log line
#    naming the keys applied (watermarks, log.level, snapshot.*) and the
#    changed keys ignored, never a value; the new snapshot policy and log
#    level take effect; a config that no longer loads is refused with its
#    file:line:col and the daemon goes on;
#  - SIGTERM: STOPPING=1, then exit 0;
#  - an abstract socket address (@name);
#  - a key given as ${CREDENTIALS_DIRECTORY}/hmac.key: read from there
#    (0400 with an access ACL for this user, as systemd writes credentials),
#    and without CREDENTIALS_DIRECTORY a one-line error naming the key;
#  - the unit files in contrib/systemd pass `systemd-analyze verify` (when
#    it is installed) and hold the settings docs/OPERATIONS.md promises, and
#    `make install-systemd-units` points ExecStart at $(bindir)/kiln.
# KEEP_TMP=1 keeps the scratch directory.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need kcat curl git "$py"

unset http_proxy https_proxy all_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY
unset NOTIFY_SOCKET WATCHDOG_USEC WATCHDOG_PID CREDENTIALS_DIRECTORY KILN_BRANCH KILN_SPLIT_SALT
export no_proxy='127.0.0.1,localhost' NO_PROXY='127.0.0.1,localhost'

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT

listen() { # ADDRESS OUT: starts a notify socket stand-in recording into OUT
	"$py" "$src/tests/integration/notify_listen.py" "$1" "$2" 2>"$2.err" &
	pids+=($!)
	poll 10 test -s "$2.bound" || { echo "  notify_listen.py did not bind $1"; return 1; }
}
count() { # PATTERN FILE: datagrams holding a line PATTERN (grep -E on the JSON)
	grep -Ec "\"$1\"" "$2" 2>/dev/null
}
at_least() { # N PATTERN FILE
	[ "$(count "$2" "$3")" -ge "$1" ]
}
last_at() { # PATTERN FILE -> the sequence number of the last datagram holding PATTERN (0: none)
	grep -En "\"$1\"" "$2" 2>/dev/null | tail -1 | cut -d: -f1 | grep . || echo 0
}
reload_bracketed() { # FILE BEFORE: a RELOADING=1 (with MONOTONIC_USEC) after datagram BEFORE, then a READY=1
	local r y
	r=$(last_at 'RELOADING=1' "$1") y=$(last_at 'READY=1' "$1")
	[ "$r" -gt "$2" ] && [ "$y" -gt "$r" ] && sed -n "${r}p" "$1" | grep -q '"MONOTONIC_USEC=[0-9]*"'
}
datagrams() { wc -l <"$1"; }
log_event() { # FILE EVENT: a JSON log line with that event
	grep -q "\"event\":\"$2\"" "$1"
}
port_of() { # LOG: the port of the "listening" line
	grep -o '"event":"listening".*"port":[0-9]*' "$1" | head -1 | grep -o '[0-9]*$'
}

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/hmac.key"
chmod 600 "$tmp/hmac.key"

# ---- unit files -------------------------------------------------------------------
units=("$src/contrib/systemd/kiln-run@.service" "$src/contrib/systemd/kiln-cache.service")
mkdir -p "$tmp/units"
for u in "${units[@]}"; do sed "s|^ExecStart=/usr/bin/kiln |ExecStart=$kiln |" "$u" >"$tmp/units/${u##*/}"; done
cp "$tmp/units/kiln-run@.service" "$tmp/units/kiln-run@user-events.service"
if command -v systemd-analyze >/dev/null; then
	# warnings (an unknown key, a bad value) leave the exit status 0: no output is the pass
	check "units: systemd-analyze verify is silent and exits 0" sh -c \
		"cd '$tmp/units' && systemd-analyze verify --man=no ./kiln-cache.service ./kiln-run@user-events.service >'$tmp/verify.out' 2>&1 && test ! -s '$tmp/verify.out' || { cat '$tmp/verify.out'; false; }"
	printf '[Service]\nType=notify\nExecStart=%s cache serve x\nWatchdogSec=thirty\n' "$kiln" >"$tmp/units/broken.service"
	check "units: ... which does catch a bad value" sh -c \
		"cd '$tmp/units' && systemd-analyze verify --man=no ./broken.service 2>&1 | grep -q 'broken.service:4: .*thirty'"
else
	echo "note: systemd-analyze is not installed; checking the unit files' keys only"
fi
units_hold() { # UNIT KEY=VALUE...: the [Service] or [Unit] section sets each KEY to VALUE
	"$py" - "$@" <<'EOF'
import sys
unit, want = sys.argv[1], sys.argv[2:]
have, section = {}, None
for line in open(unit):
    line = line.strip()
    if not line or line[0] in "#;":
        continue
    if line.startswith("["):
        section = line
        continue
    k, _, v = line.partition("=")
    have.setdefault(k, []).append(v)
bad = [w for w in want if w.partition("=")[2] not in have.get(w.partition("=")[0], [])]
for w in bad:
    print("  %s: no %s (has %s)" % (unit, w, have.get(w.partition("=")[0])))
sys.exit(1 if bad else 0)
EOF
}
common=(Type=notify NotifyAccess=main WatchdogSec=30s Restart=on-failure 'ExecReload=/bin/kill -HUP $MAINPID'
	KillSignal=SIGTERM User=kiln Group=kiln DynamicUser=no ProtectSystem=strict ProtectHome=yes PrivateTmp=yes
	NoNewPrivileges=yes PrivateDevices=yes ProtectKernelTunables=yes ProtectKernelModules=yes
	ProtectControlGroups=yes 'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6' LimitCORE=0
	MemoryDenyWriteExecute=yes LockPersonality=yes SystemCallArchitectures=native UMask=0077)
check "units: kiln-run@ holds the settings" units_hold "${units[0]}" "${common[@]}" \
	'ExecStart=/usr/bin/kiln run /etc/kiln/pipelines/%i.yaml' StateDirectory=kiln ReadWritePaths=/var/lib/kiln \
	LoadCredential=hmac.key:/etc/kiln/hmac.key TimeoutStopSec=90s
check "units: kiln-cache holds the settings" units_hold "${units[1]}" "${common[@]}" \
	'ExecStart=/usr/bin/kiln cache serve /etc/kiln/cache.yaml' CacheDirectory=kiln ReadWritePaths=/var/cache/kiln \
	LoadCredential=cache.token:/etc/kiln/cache.token
if [ -n "${KILN_BUILDDIR:-}" ]; then
	check "units: make install-systemd-units" sh -c "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C '$KILN_BUILDDIR' \
		install-systemd-units DESTDIR='$tmp/root' >'$tmp/install.log' 2>&1"
	# without the MAKEFLAGS of a `make -j2 check` around this test: its -w and
	# jobserver would add "Entering directory" lines to the output
	bindir=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$KILN_BUILDDIR" --no-print-directory \
		-f Makefile -f - print-bindir <<<'print-bindir: ; @echo $(bindir)' 2>/dev/null)
	installed=$(find "$tmp/root" -name 'kiln-run@.service' | head -1)
	check "units: installed with ExecStart on \$(bindir)/kiln ($bindir)" \
		grep -qx "ExecStart=$bindir/kiln run /etc/kiln/pipelines/%i.yaml" "${installed:-/nonexistent}"
fi

# ---- credentials: ${CREDENTIALS_DIRECTORY}/hmac.key ------------------------------------
# as systemd writes a credential for a service user: 0400, owned by root, an
# access ACL entry letting the service's user read it (stat shows the mask: 0440)
mkdir -p "$tmp/creds"
cp "$tmp/hmac.key" "$tmp/creds/hmac.key"
chmod 400 "$tmp/creds/hmac.key"
"$py" - "$tmp/creds/hmac.key" <<'EOF'
import os, struct, sys
uid = os.geteuid()
entries = [(0x01, 4, 0xFFFFFFFF), (0x02, 4, uid), (0x04, 0, 0xFFFFFFFF), (0x10, 4, 0xFFFFFFFF), (0x20, 0, 0xFFFFFFFF)]
os.setxattr(sys.argv[1], "system.posix_acl_access",
            struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries))
EOF
check "credentials: the ACL shows as mode 0440" test "$(stat -c %a "$tmp/creds/hmac.key")" = 440

"$kiln" broker --partitions 2 --topics ev --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
poll 10 test -s "$tmp/pf"
bs=$(head -1 "$tmp/pf" 2>/dev/null)
[ -n "$bs" ] || { echo "broker did not start"; cat "$tmp/broker.out"; exit 1; }

kafka_pipeline() { # FILE [EXTRA YAML]
	cat >"$1" <<EOF
dataset: ev
contract: $src/contracts/user-events.yaml
source:
  kind: kafka
  brokers: $bs
  topics: [ev]
  group: g-sysd
  options: {session.timeout.ms: "6000"}
pseudonymise: {key_file: "\${CREDENTIALS_DIRECTORY}/hmac.key"}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/store}
manifest: {repo: $tmp/m.git}
metrics: {listen: "127.0.0.1:0"}
${2:-}
EOF
}
kafka_pipeline "$tmp/run.yaml" 'snapshot: {records: 100000, seconds: 3600}'
"$py" "$src/bench/gen-user-events.py" --records 200 --seed 21 --invalid-rate 0.05 -o "$tmp/ev.jsonl"
check "kafka: kcat produced 200 records" kcat -P -b "$bs" -t ev -l "$tmp/ev.jsonl"

check "credentials: without CREDENTIALS_DIRECTORY the run exits 2" \
	status_is 2 timeout 60 "$kiln" run "$tmp/run.yaml" --stop-at-end
check "credentials: ... one line naming the key and the variable" sh -c \
	"test \$(wc -l <'$tmp/err') -eq 1 && grep -Eq '^kiln run: .*run.yaml:[0-9]+:[0-9]+: pseudonymise.key_file: environment variable CREDENTIALS_DIRECTORY is not set' '$tmp/err'"
cp "$tmp/hmac.key" "$tmp/plain.key"
chmod 440 "$tmp/plain.key"
mkdir -p "$tmp/creds-plain" && mv "$tmp/plain.key" "$tmp/creds-plain/hmac.key"
check "credentials: a plain 0440 key (no ACL) is refused" \
	status_is 2 env CREDENTIALS_DIRECTORY="$tmp/creds-plain" timeout 60 "$kiln" run "$tmp/run.yaml" --stop-at-end
check "credentials: ... naming the file and its mode" grep -q "creds-plain/hmac.key: key file mode 0440" "$tmp/err"

# ---- a Kafka run ------------------------------------------------------------------
listen "$tmp/notify" "$tmp/kafka-notify.log"
env NOTIFY_SOCKET="$tmp/notify" WATCHDOG_USEC=400000 CREDENTIALS_DIRECTORY="$tmp/creds" \
	"$kiln" run "$tmp/run.yaml" >"$tmp/kafka.out" 2>"$tmp/kafka.log" &
kp=$!
pids+=($kp)
check "kafka: READY=1 (within 60 s)" poll 60 at_least 1 'READY=1' "$tmp/kafka-notify.log"
check "kafka: ... once the partitions were assigned" log_event "$tmp/kafka.log" assigned
check "kafka: ... with the key read from \${CREDENTIALS_DIRECTORY}" kill -0 "$kp"
check "kafka: READY=1 once only" test "$(count 'READY=1' "$tmp/kafka-notify.log")" -eq 1
check "kafka: WATCHDOG=1 again and again (3 within 30 s)" poll 30 at_least 3 'WATCHDOG=1' "$tmp/kafka-notify.log"
check "kafka: a STATUS line" at_least 1 'STATUS=consuming[^"]*' "$tmp/kafka-notify.log"
check "kafka: no snapshot yet (records: 100000, seconds: 3600)" sh -c "! grep -q '\"event\":\"snapshot\"' '$tmp/kafka.log'"

# SIGHUP: a smaller snapshot policy and a new salt (ignored: it needs a restart)
before=$(datagrams "$tmp/kafka-notify.log")
kafka_pipeline "$tmp/run.yaml" 'snapshot: {records: 10, seconds: 1}'
sed -i 's/salt: s1/salt: s2/' "$tmp/run.yaml"
kill -HUP "$kp"
check "kafka reload: RELOADING=1 then READY=1 (within 30 s)" poll 30 reload_bracketed "$tmp/kafka-notify.log" "$before"
check "kafka reload: one line says what it applied and which changed keys it ignored" poll 10 grep -q \
	'"event":"reloaded".*"applied":"snapshot.records,snapshot.seconds","ignored":"split.salt"' "$tmp/kafka.log"
check "kafka reload: ... and the policy in force" grep -q '"event":"reloaded".*"snapshot_records":10,"snapshot_seconds":1' "$tmp/kafka.log"
check "kafka reload: a snapshot by the new policy (within 30 s)" poll 30 log_event "$tmp/kafka.log" snapshot
check "kafka reload: STATUS names the snapshot" poll 10 at_least 1 'STATUS=consuming: snapshot [0-9a-f]{12} [^"]*' "$tmp/kafka-notify.log"
check "kafka reload: no value of the key in the log" sh -c "! grep -qF '$(cat "$tmp/hmac.key")' '$tmp/kafka.log'"

# SIGHUP: log.level warn applies before its own (info) line would be written
before=$(datagrams "$tmp/kafka-notify.log")
printf 'log: {level: warn}\n' >>"$tmp/run.yaml"
kill -HUP "$kp"
check "kafka reload 2: RELOADING=1 then READY=1" poll 30 reload_bracketed "$tmp/kafka-notify.log" "$before"
check "kafka reload 2: at log.level warn its info line is not written" \
	test "$(grep -c '"event":"reloaded"' "$tmp/kafka.log")" -eq 1

# SIGHUP with a pipeline that no longer parses: refused, the run goes on
before=$(datagrams "$tmp/kafka-notify.log")
printf 'split: {key: user_id, salt: [unterminated\n' >>"$tmp/run.yaml"
kill -HUP "$kp"
check "kafka bad reload: RELOADING=1 then READY=1" poll 30 reload_bracketed "$tmp/kafka-notify.log" "$before"
check "kafka bad reload: refused with file:line:col" poll 10 grep -Eq '"event":"reload_failed","msg":"[^"]*run.yaml:[0-9]+:[0-9]+: ' "$tmp/kafka.log"
check "kafka bad reload: still running" kill -0 "$kp"
check "kafka bad reload: still kicking the watchdog" poll 30 at_least $(($(count 'WATCHDOG=1' "$tmp/kafka-notify.log") + 2)) 'WATCHDOG=1' "$tmp/kafka-notify.log"

committed() { # the records the STATUS lines say snapshots committed, summed
	grep -o '"STATUS=consuming: snapshot [0-9a-f]* committed [0-9]* record' "$tmp/kafka-notify.log" |
		awk '{ s += $5 } END { print s + 0 }'
}
committed_is() { [ "$(committed)" -eq "$1" ]; }
check "kafka: STATUS lines account for the 200 records (within 60 s)" poll 60 committed_is 200
kill -TERM "$kp"
rc=0
wait "$kp" || rc=$?
check "kafka: SIGTERM exits 0" test "$rc" -eq 0
check "kafka: STOPPING=1 was sent" at_least 1 'STOPPING=1' "$tmp/kafka-notify.log"
check "kafka: every record committed once" grep -q '+200 records' "$tmp/kafka.out"

# ---- kiln cache serve ---------------------------------------------------------------
"$py" "$src/bench/gen-user-events.py" --records 300 --seed 22 -o "$tmp/in.jsonl"
check "cache: a version to serve" status_is 0 env KILN_INPUT="$tmp/in.jsonl" KILN_KEY_FILE="$tmp/hmac.key" \
	KILN_MANIFEST="$tmp/cm.git" KILN_STORE="file://$tmp/cstore" "$kiln" run "$src/pipelines/user-events.yaml"
cache_config() { # WATERMARKS [EXTRA]
	cat >"$tmp/cache.yaml" <<EOF
store: {url: file://$tmp/cstore}
manifest: $tmp/cm.git
dir: $tmp/cache
size_limit: 64M
watermarks: $1
pins: [user-events@main]
listen: 127.0.0.1:0
sync_seconds: 1
${2:-}
EOF
}
cache_config '{high: 0.9, low: 0.8}'
listen "$tmp/cnotify" "$tmp/cache-notify.log"
env NOTIFY_SOCKET="$tmp/cnotify" WATCHDOG_USEC=400000 "$kiln" cache serve "$tmp/cache.yaml" \
	>"$tmp/cache.out" 2>"$tmp/cache.log" &
cp=$!
pids+=($cp)
check "cache: READY=1 (within 30 s)" poll 30 at_least 1 'READY=1' "$tmp/cache-notify.log"
port=$(port_of "$tmp/cache.log")
check "cache: ... and it serves by then (one request, no retry)" \
	test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${port:-1}/healthz")" = 200
check "cache: WATCHDOG=1 again and again (3 within 30 s)" poll 30 at_least 3 'WATCHDOG=1' "$tmp/cache-notify.log"
check "cache: a STATUS line after a sync pass" poll 30 at_least 1 'STATUS=serving: the last sync pass succeeded' "$tmp/cache-notify.log"

before=$(datagrams "$tmp/cache-notify.log")
cache_config '{high: 0.7, low: 0.5}' 'concurrency: 2'
kill -HUP "$cp"
check "cache reload: RELOADING=1 then READY=1 (within 30 s)" poll 30 reload_bracketed "$tmp/cache-notify.log" "$before"
check "cache reload: applied the watermarks, ignored concurrency" poll 10 grep -q \
	'"event":"reloaded".*"applied":"watermarks.high,watermarks.low","ignored":"concurrency"' "$tmp/cache.log"
before=$(datagrams "$tmp/cache-notify.log")
cache_config '{high: 0.7, low: 0.5}' 'log: {level: error}'
kill -HUP "$cp"
check "cache reload 2: RELOADING=1 then READY=1" poll 30 reload_bracketed "$tmp/cache-notify.log" "$before"
check "cache reload 2: at log.level error its info line is not written" \
	test "$(grep -c '"event":"reloaded"' "$tmp/cache.log")" -eq 1
before=$(datagrams "$tmp/cache-notify.log")
cache_config '{high: 0.7, low: 0.9}' 'log: {level: error}'
kill -HUP "$cp"
check "cache bad reload: RELOADING=1 then READY=1" poll 30 reload_bracketed "$tmp/cache-notify.log" "$before"
check "cache bad reload: refused with file:line:col (an error, logged at level error)" poll 10 grep -Eq \
	'"event":"reload_failed","msg":"[^"]*cache.yaml:[0-9]+:[0-9]+: watermarks' "$tmp/cache.log"
check "cache bad reload: still serving" \
	test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${port:-1}/healthz")" = 200
kill -TERM "$cp"
rc=0
wait "$cp" || rc=$?
check "cache: SIGTERM exits 0" test "$rc" -eq 0
check "cache: STOPPING=1 was sent" at_least 1 'STOPPING=1' "$tmp/cache-notify.log"

# ---- an abstract socket address -----------------------------------------------------------
cache_config '{high: 0.9, low: 0.8}'
abstract="@kiln-test-$$-$RANDOM"
listen "$abstract" "$tmp/abstract-notify.log"
env NOTIFY_SOCKET="$abstract" "$kiln" cache serve "$tmp/cache.yaml" >"$tmp/cache2.out" 2>"$tmp/cache2.log" &
cp=$!
pids+=($cp)
check "abstract address: READY=1 (within 30 s)" poll 30 at_least 1 'READY=1' "$tmp/abstract-notify.log"
check "abstract address: no WATCHDOG=1 without WATCHDOG_USEC" test "$(count 'WATCHDOG=1' "$tmp/abstract-notify.log")" -eq 0
kill -TERM "$cp"
rc=0
wait "$cp" || rc=$?
check "abstract address: SIGTERM exits 0, STOPPING=1 sent" sh -c "test $rc -eq 0 && grep -q '\"STOPPING=1\"' '$tmp/abstract-notify.log'"

pii_inputs+=("$tmp/ev.jsonl" "$tmp/in.jsonl")
check "no personal value in any log or notify datagram" pii_scan_logs
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
