#!/usr/bin/env bash
# The systemd watchdog of a Kafka `kiln run` is fed while its store stalls
# (docs/OPERATIONS.md, "The notify protocol"): the store is an S3 endpoint
# that accepts connections, reads each request and never answers, the run
# has NOTIFY_SOCKET (notify_listen.py) and WATCHDOG_USEC=2 s (a kick due
# every second), no raw zone and a snapshot every 10 records, so the
# consume loop blocks in a snapshot whose shard uploads never get an
# answer. Once the endpoint holds a request of the run, WATCHDOG=1
# datagrams keep arriving: at least 3 in the 8 s that follow (8 expected;
# the store's stall limit, 20 s, has not ended the request by then). The
# kicks that came from the consume loop stopped for the whole stall.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need kcat "$py"

unset http_proxy https_proxy all_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY
unset NOTIFY_SOCKET WATCHDOG_USEC WATCHDOG_PID KILN_BRANCH KILN_SPLIT_SALT
export no_proxy='127.0.0.1,localhost' NO_PROXY='127.0.0.1,localhost'

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in ${pids[@]+"${pids[@]}"}; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT

# an endpoint that takes requests and never answers; OUT.seen once one came
"$py" - "$tmp/stall" <<'PY' 2>"$tmp/stall.err" &
import socket, sys, threading
out = sys.argv[1]
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(64)
held = []
def hold(c):
    while True:
        data = c.recv(65536)
        if not data:
            return
        with open(out + ".seen", "a") as f:
            f.write("request\n")
open(out + ".port", "w").write("%d\n" % srv.getsockname()[1])
while True:
    c, _ = srv.accept()
    held.append(c)
    threading.Thread(target=hold, args=(c,), daemon=True).start()
PY
pids+=($!)
"$py" "$src/tests/integration/notify_listen.py" "$tmp/notify.sock" "$tmp/notify" 2>"$tmp/notify.err" &
pids+=($!)
"$kiln" broker --partitions 1 --topics ev --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
poll 10 test -s "$tmp/stall.port" -a -s "$tmp/notify.bound" -a -s "$tmp/pf" ||
	{ echo "a helper did not start"; cat "$tmp/stall.err" "$tmp/notify.err" "$tmp/broker.out"; exit 1; }
bs=$(head -1 "$tmp/pf")
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/key")
"$py" "$src/bench/gen-user-events.py" --records 50 --invalid-rate 0 --seed 9 -o "$tmp/in.jsonl"
check "kcat produced 50 records" kcat -P -b "$bs" -t ev -p 0 -l "$tmp/in.jsonl"

cat >"$tmp/p.yaml" <<EOF
dataset: ev
contract: $src/contracts/user-events.yaml
source:
  kind: kafka
  brokers: "$bs"
  topics: [ev]
  group: g
  options: {session.timeout.ms: "6000"}
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
snapshot: {records: 10} # a snapshot after 10 records: its uploads stall
raw: {enabled: false}  # nothing to land before the snapshot
store:
  url: s3://stalled/kiln
  endpoint: 127.0.0.1:$(cat "$tmp/stall.port")
  http: true
  style: path
manifest: {repo: $tmp/m.git}
metrics: {listen: "127.0.0.1:0"}
EOF
kicks() { grep -c '"WATCHDOG=1"' "$tmp/notify" 2>/dev/null || echo 0; }

AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=stall-test-secret NOTIFY_SOCKET=$tmp/notify.sock \
	WATCHDOG_USEC=2000000 "$kiln" run "$tmp/p.yaml" >"$tmp/run.out" 2>"$tmp/run.err" &
run=$!
pids+=($run)
check "the store endpoint holds a request of the run" poll 60 test -s "$tmp/stall.seen"
check "  the run is still running" kill -0 "$run"
before=$(kicks)
sleep 8
after=$(kicks)
echo "  WATCHDOG=1: $before before the 8 s window, $after after it"
check "WATCHDOG=1 kept arriving while the store stalled (at least 3 in 8 s)" test $((after - before)) -ge 3
check "  the request is still held: the window was inside the stall" kill -0 "$run"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
