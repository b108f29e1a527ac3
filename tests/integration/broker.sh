#!/usr/bin/env bash
# `kiln broker`: the mock cluster starts with the asked-for topics, writes its
# bootstrap servers to the port file, carries messages for kcat and for
# confluent_kafka (a consumer group), stops with status 0 on SIGTERM, and
# refuses bad options with one line and status 2. Every address is 127.0.0.1.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
tmp=$(mktemp -d)
broker_pid=
cleanup() {
	[ -n "$broker_pid" ] && kill -KILL "$broker_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
need kcat
"$py" -c 'import confluent_kafka' 2>/dev/null || {
	echo "FAIL: python3-confluent-kafka is not installed (run scripts/bootstrap)"
	echo "0 passed, 1 failed"
	exit 1
}

# --- options -----------------------------------------------------------------
check "--help" status_is 0 "$kiln" broker --help
check "--help names session.timeout.ms" grep -q 'session.timeout.ms' "$tmp/out"
check "--help names the 5 MB partition limit" grep -q '5 MB' "$tmp/out"
check "--partitions 0 exits 2" status_is 2 "$kiln" broker --partitions 0
check "--partitions 0: one line on stderr" test "$(wc -l <"$tmp/err")" -eq 1
check "--partitions 0: the line names the command" grep -q '^kiln broker: ' "$tmp/err"
check "--partitions 0: nothing on stdout" test ! -s "$tmp/out"
check "--topics with an empty name exits 2" status_is 2 "$kiln" broker --topics t1,,t2

# --- start -------------------------------------------------------------------
pf=$tmp/port
"$kiln" broker --partitions 3 --topics t1,t2 --port-file "$pf" >"$tmp/broker.out" 2>"$tmp/broker.err" &
broker_pid=$!
for _ in $(seq 100); do
	[ -s "$pf" ] && break
	sleep 0.1
done
check "port file written" test -s "$pf"
bootstrap=$(head -1 "$pf" 2>/dev/null)
check "port file holds 127.0.0.1 addresses" grep -Eq '^127\.0\.0\.1:[0-9]+(,127\.0\.0\.1:[0-9]+)*$' "$pf" 2>/dev/null
check "stdout prints the same bootstrap line" grep -qxF "bootstrap: $bootstrap" "$tmp/broker.out"
[ -n "$bootstrap" ] || { echo "broker did not start"; cat "$tmp/broker.err"; echo "$passed passed, $((failed + 1)) failed"; exit 1; }

# --- kcat ------------------------------------------------------------------
{
	seq 1 100 | sed 's/^/message-/' >"$tmp/sent"
	check "kcat produces 100 messages" kcat -P -b "$bootstrap" -t t1 <"$tmp/sent"
	timeout 30 kcat -C -b "$bootstrap" -t t1 -o beginning -e -q >"$tmp/got" 2>"$tmp/kcat.err"
	check "kcat reads 100 messages back" test "$(wc -l <"$tmp/got")" -eq 100
	check "kcat reads the same messages" cmp -s <(sort "$tmp/sent") <(sort "$tmp/got")
	kcat -L -b "$bootstrap" >"$tmp/meta" 2>&1
	check "t1 has 3 partitions" grep -q 'topic "t1" with 3 partitions' "$tmp/meta"
	check "t2 has 3 partitions" grep -q 'topic "t2" with 3 partitions' "$tmp/meta"
}

# --- confluent_kafka -------------------------------------------------------
{
	check "confluent_kafka produces and a group consumes 200 messages" timeout 60 "$py" - "$bootstrap" <<'PY'
import sys, time
from confluent_kafka import Consumer, Producer

bootstrap, n = sys.argv[1], 200
p = Producer({"bootstrap.servers": bootstrap})
for i in range(n):
    p.produce("t2", key=str(i), value=f"py-{i}")
assert p.flush(10) == 0, "messages left unsent"

c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kiln-broker-test",
              "session.timeout.ms": 6000, "auto.offset.reset": "earliest"})
c.subscribe(["t2"])
got = set()
deadline = time.monotonic() + 30
while len(got) < n and time.monotonic() < deadline:
    m = c.poll(0.5)
    if m is None or m.error():
        continue
    got.add(m.value().decode())
c.close()
if len(got) != n:
    print(f"  consumed {len(got)} of {n}")
    sys.exit(1)
PY
}

# --- stop --------------------------------------------------------------------
kill -TERM "$broker_pid"
for _ in $(seq 50); do
	kill -0 "$broker_pid" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$broker_pid" 2>/dev/null; then
	check "broker exits within 5 s of SIGTERM" false
else
	rc=0
	wait "$broker_pid" || rc=$?
	broker_pid=
	check "broker exits 0 on SIGTERM" test "$rc" -eq 0
	check "port file removed on exit" test ! -e "$pf"
fi
check "broker wrote nothing to stderr" test ! -s "$tmp/broker.err"
[ -s "$tmp/broker.err" ] && head -20 "$tmp/broker.err"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
