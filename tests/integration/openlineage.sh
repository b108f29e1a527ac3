#!/usr/bin/env bash
# OpenLineage events (docs/LINEAGE.md) through tests/integration/
# openlineage_receiver.py, a test HTTP endpoint:
#  - a run while the endpoint is down commits at once (within
#    openlineage.timeout_ms of the commit) and leaves its START and COMPLETE
#    in the queue folder; a later command (promote) delivers them, through
#    503 answers (retried with backoff), with a bearer token read from a
#    0600 file; a 0644 token file is refused with a one-line error;
#  - run, promote, erase, push and a streaming (directory) run each send
#    START and COMPLETE; a run that fails sends FAIL with its message;
#  - a 400 is a refusal: logged once (endpoint and status), dropped;
#  - the queue is bounded: the oldest events are dropped and counted;
#  - the file transport appends one JSON document per line;
#  - every event validates against ../shared/specs/openlineage (the
#    OpenLineage JSON Schema and its facets, with python3-jsonschema), each
#    (runId, eventType) arrives (duplicates allowed: at least once), and no
#    personal value of the input, nor the token, is in any event or log.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
checker=$src/tests/integration/openlineage_check.py
spec=$src/../shared/specs/openlineage
need git curl
need_py jsonschema confluent_kafka
need_kiln
[ -f "$spec/OpenLineage.json" ] && [ -d "$spec/facets" ] ||
	{ echo "FAIL: no OpenLineage spec at $spec (CI clones the repository with ../shared beside it)"; echo "0 passed, 1 failed"; exit 1; }

tmp=$(mktemp -d)
receiver= daemon= broker=
cleanup() {
	[ -n "$broker" ] && kill "$broker" 2>/dev/null
	[ -n "$receiver" ] && kill "$receiver" 2>/dev/null
	[ -n "$daemon" ] && kill -9 "$daemon" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT; [ -n "${KILN_IT_KEEP:-}" ] && trap - EXIT && echo "tmp: $tmp"
unset KILN_BRANCH KILN_SPLIT_SALT KILN_TARGETS
pipeline=$src/pipelines/user-events.yaml
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
(umask 077 && printf '%064x\n' 0x0123abcd >"$tmp/hmac.key")
token=tok-$RANDOM$RANDOM-lineage-secret
(umask 077 && printf '%s\n' "$token" >"$tmp/token")
queue=$tmp/m.git.openlineage
$py "$src/bench/gen-user-events.py" --records 400 --seed 30 -o "$tmp/in.jsonl"

port=$($py -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port/api/v1/lineage
ol=(--set "openlineage.url=$url" --set "openlineage.token_file=$tmp/token" --set openlineage.timeout_ms=1500)
start_receiver() { # LOG [ARGS...]: the receiver on $port
	local log=$1
	shift
	rm -f "$tmp/port.txt"
	$py "$src/tests/integration/openlineage_receiver.py" --port "$port" --port-file "$tmp/port.txt" --log "$log" "$@" \
		2>"$tmp/receiver.err" &
	receiver=$!
	poll 10 test -s "$tmp/port.txt"
}
stop_receiver() { kill "$receiver" 2>/dev/null; wait "$receiver" 2>/dev/null; receiver=; }
queued() { find "$queue" -name '*.json' 2>/dev/null | wc -l; }

# 1. the endpoint is down: the run commits, its events wait in the queue
t0=$(date +%s%N)
check "a run commits while the endpoint is down" status_is 0 "$kiln" run "$pipeline" "${ol[@]}"
cp "$tmp/err" "$tmp/run1.err"
t1=$(date +%s%N)
run_ms=$(((t1 - t0) / 1000000))
check "it took under 10 s (${run_ms} ms; timeout_ms is 1500)" test "$run_ms" -lt 10000
check "START and COMPLETE are queued" test "$(queued)" -eq 2
check "the queue folder is the owner's only" test "$(stat -c %a "$queue")" = 700

# 2. a later command delivers them: 503 three times, then the token is checked
start_receiver "$tmp/http.jsonl" --fail-first 3 --token "$token"
check "promote v1 (delivering the queue through 503s)" status_is 0 "$kiln" promote user-events@main --pipeline "$pipeline" \
	--set promote.min_records.train=1 --set promote.min_records.dev=1 --set promote.min_records.test=1 \
	--set promote.ratio_tolerance=1 --set promote.max_quarantine_rate=1 "${ol[@]}" --set openlineage.timeout_ms=5000
cp "$tmp/err" "$tmp/promote.err"
check "the queue is empty" test "$(queued)" -eq 0
check "the receiver answered 503 three times, then 200" \
	test "$(grep -c ' 503$' "$tmp/http.jsonl.requests")" -eq 3 -a "$(grep -c ' 200$' "$tmp/http.jsonl.requests")" -ge 4

# 3. more runs with the endpoint up; a second file, a directory source streaming
$py "$src/bench/gen-user-events.py" --records 200 --seed 31 --append -o "$tmp/in.jsonl"
check "run 2 (endpoint up)" status_is 0 "$kiln" run "$pipeline" "${ol[@]}"
check "a run that fails" status_is 2 "$kiln" run "$pipeline" "${ol[@]}" --set "contract=$tmp/missing.yaml"
mkdir -p "$tmp/dir/in"
$py "$src/bench/gen-user-events.py" --records 150 --seed 32 -o "$tmp/dir/in/a.jsonl"
$py "$src/bench/gen-user-events.py" --records 150 --seed 33 -o "$tmp/dir/in/b.jsonl"
check "a directory run (streaming, --stop-at-end)" status_is 0 env KILN_INPUT_DIR="$tmp/dir/in" \
	KILN_STORE="file://$tmp/dir/store" KILN_MANIFEST="$tmp/dir/m.git" \
	"$kiln" run "$src/pipelines/user-events-dir.yaml" --stop-at-end "${ol[@]}"

# a long-running directory run: its thread sends each snapshot's events
# while it runs; /metrics counts them
rm -rf "$tmp/dir/in" && mkdir -p "$tmp/dir/in"
KILN_INPUT_DIR="$tmp/dir/in" KILN_STORE="file://$tmp/dir/store" KILN_MANIFEST="$tmp/dir/m.git" \
	"$kiln" run "$src/pipelines/user-events-dir.yaml" "${ol[@]}" --set metrics.listen=127.0.0.1:0 \
	--set snapshot.records=0 --set snapshot.seconds=3600 2>"$tmp/daemon.err" >"$tmp/daemon.out" &
daemon=$!
poll 20 grep -q '"event":"listening"' "$tmp/daemon.err"
mport=$(grep -o '"event":"listening"[^}]*"port":[0-9]*' "$tmp/daemon.err" | grep -o '[0-9]*$')
$py "$src/bench/gen-user-events.py" --records 120 --seed 37 -o "$tmp/dir/.c.jsonl" && mv "$tmp/dir/.c.jsonl" "$tmp/dir/in/c.jsonl"
check "it reads c.jsonl (within 20 s)" \
	poll 20 sh -c "curl -sf http://127.0.0.1:$mport/metrics | grep -qx 'kiln_records_in_total 120'"
check "kiln snapshot commits c.jsonl" status_is 0 "$kiln" snapshot "127.0.0.1:$mport"
check "its COMPLETE arrives while the run goes on" \
	poll 20 sh -c "grep -q '\"name\":\"$tmp/dir/in/c.jsonl\"' '$tmp/http.jsonl'"
check "/metrics counts the events sent" \
	poll 10 sh -c "curl -sf http://127.0.0.1:$mport/metrics | grep -q '^kiln_openlineage_events_sent_total [1-9]'"
check "the run is still running" kill -0 "$daemon"
kill -TERM "$daemon"
wait "$daemon"
check "SIGTERM: it drains and exits 0" test $? -eq 0
daemon=

# 4. erase a person (no subject value in any event), push v1 to a file store
subject=$($py -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if isinstance(r, dict) and isinstance(r.get("user_id"), str):
        print(r["user_id"]); break' "$tmp/in.jsonl")
check "erase a subject" status_is 0 "$kiln" erase user-events --subject "user_id=$subject" --pipeline "$pipeline" "${ol[@]}"
cat >"$tmp/targets.yaml" <<YAML
targets:
  burst:
    store:
      url: file://$tmp/burst
YAML
# push's --set is the target's: the section is in the pipeline file
sed "s|\.\./contracts/|$src/contracts/|" "$pipeline" >"$tmp/pipeline.yaml"
printf 'openlineage:\n  url: %s\n  token_file: token\n  timeout_ms: 1500\n' "$url" >>"$tmp/pipeline.yaml"
check "push v1 (unsigned)" status_is 0 "$kiln" push user-events@v1 --to burst --unpromoted --targets "$tmp/targets.yaml" \
	--pipeline "$tmp/pipeline.yaml"
check "queue empty again" test "$(queued)" -eq 0
stop_receiver

# 5. what arrived: every (runId, eventType) once at least, valid, no personal value
$py "$checker" summary "$tmp/http.jsonl" >"$tmp/summary.txt"
check "every run has its START" test $? -eq 0
cat >"$tmp/summary.want" <<TXT
ERASE COMPLETE user-events@main,user-events@v1
ERASE START -
PROMOTE COMPLETE user-events@v1
PROMOTE START -
PUSH COMPLETE user-events@v1
PUSH START -
RUN COMPLETE user-events@main
RUN COMPLETE user-events@main
RUN COMPLETE user-events@main
RUN COMPLETE user-events@main
RUN FAIL -
RUN START -
RUN START -
RUN START -
RUN START -
RUN START -
TXT
check "the events that arrived (deduplicated by runId and eventType)" diff "$tmp/summary.want" "$tmp/summary.txt"
check "the streaming run's events are STREAMING" grep -q '"processingType":"STREAMING"' "$tmp/http.jsonl"
check "the FAIL carries the error" grep -q '"errorMessage":{[^}]*missing.yaml' "$tmp/http.jsonl"
check "every event validates against the OpenLineage spec" $py "$checker" validate --spec "$spec" "$tmp/http.jsonl"
check "no personal value in any event" $py "$checker" no-pii --input "$tmp/in.jsonl" \
	--fields user_id,email,client_ip,message "$tmp/http.jsonl"
check "the erased subject is in no event" bash -c '! grep -qF -- "$1" "$2"' _ "$subject" "$tmp/http.jsonl"
check "kafka offsets: the run 2 range starts where run 1 ended" \
	grep -q '"ranges":\[{"partition":0,"first":[1-9][0-9]*,"next"' "$tmp/http.jsonl"

# 6. refusals, the token file's mode, the queue's bound, the file transport
chmod 644 "$tmp/token"
check "a 0644 token file is refused" status_is 2 "$kiln" run "$pipeline" "${ol[@]}"
check "with one line naming the file" test "$(wc -l <"$tmp/err")" -eq 1 -a -n "$(grep -F "$tmp/token" "$tmp/err")"
check "kiln check finds it too" status_is 1 "$kiln" check "$pipeline" "${ol[@]}"
check "on the openlineage line" grep -q "openlineage.*$tmp/token" "$tmp/out"
chmod 600 "$tmp/token"
check "kiln check: a section with neither url nor file" status_is 1 "$kiln" check "$pipeline" --set openlineage.timeout_ms=5
check "named at --set" grep -q 'openlineage.*set exactly one of url, file and kafka_topic' "$tmp/out"
check "kiln check: kafka_topic with a file source" status_is 1 "$kiln" check "$pipeline" \
	--set openlineage.kafka_topic=lineage
check "in one line" grep -q "openlineage.kafka_topic: the events go to the pipeline's Kafka brokers" "$tmp/out"
start_receiver "$tmp/refused.jsonl" --refuse-all
$py "$src/bench/gen-user-events.py" --records 50 --seed 34 --append -o "$tmp/in.jsonl"
check "run with an endpoint that answers 400 (a password in its URL)" status_is 0 "$kiln" run "$pipeline" "${ol[@]}" \
	--set "openlineage.url=http://kiln:pw-$token@127.0.0.1:$port/api/v1/lineage"
cp "$tmp/err" "$tmp/refused.err"
check "the refusal is logged once, with the endpoint (no password) and the status" \
	test "$(grep -c openlineage_refused "$tmp/refused.err")" -eq 1 -a -n "$(grep '"status":400' "$tmp/refused.err")" \
	-a -n "$(grep -F "http://<redacted>@127.0.0.1:$port/api/v1/lineage" "$tmp/refused.err")"
check "refused events are dropped" test "$(queued)" -eq 0
stop_receiver
mkdir -p "$queue"
head -c 700000 /dev/zero | tr '\0' ' ' >"$queue/0000000000001-0000000001-000000.json"
head -c 700000 /dev/zero | tr '\0' ' ' >"$queue/0000000000002-0000000001-000000.json"
$py "$src/bench/gen-user-events.py" --records 50 --seed 35 --append -o "$tmp/in.jsonl"
check "run with a full queue (1 MiB)" status_is 0 "$kiln" run "$pipeline" "${ol[@]}" --set openlineage.queue_max_mb=1
cp "$tmp/err" "$tmp/full.err"
check "the oldest was dropped, and said so" \
	test ! -e "$queue/0000000000001-0000000001-000000.json" -a -n "$(grep openlineage_dropped "$tmp/full.err")"
check "the next oldest and the new events are kept" \
	test -e "$queue/0000000000002-0000000001-000000.json" -a "$(queued)" -eq 3
rm -rf "$queue"
$py "$src/bench/gen-user-events.py" --records 50 --seed 36 --append -o "$tmp/in.jsonl"
check "the file transport" status_is 0 "$kiln" run "$pipeline" --set "openlineage.file=$tmp/events.jsonl"
check "two JSON lines, valid events" \
	test "$(wc -l <"$tmp/events.jsonl")" -eq 2 && $py "$checker" validate --spec "$spec" "$tmp/events.jsonl" >/dev/null
check "url and file together are refused" status_is 2 "$kiln" run "$pipeline" "${ol[@]}" --set "openlineage.file=$tmp/x"

# the Kafka transport: a Kafka run's events to a topic of its brokers
"$kiln" broker --partitions 2 --topics ev,lineage --port-file "$tmp/broker.port" >"$tmp/broker.out" 2>&1 &
broker=$!
poll 10 test -s "$tmp/broker.port"
bs=$(head -1 "$tmp/broker.port")
head -200 "$tmp/in.jsonl" >"$tmp/k.jsonl"
$py "$src/tests/integration/kafka_produce.py" "$bs" ev "$tmp/k.jsonl" "$tmp/produced.kafka" >/dev/null 2>&1
cat >"$tmp/kafka.yaml" <<YAML
dataset: kev
contract: $src/contracts/user-events.yaml
source: {kind: kafka, brokers: "$bs", topics: [ev], group: g1, options: {session.timeout.ms: "6000"}}
pseudonymise: {key_file: $tmp/hmac.key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: "file://$tmp/kstore"}
manifest: {repo: $tmp/k.git}
openlineage: {kafka_topic: lineage, timeout_ms: 5000}
YAML
check "a Kafka run with openlineage.kafka_topic" status_is 0 "$kiln" run "$tmp/kafka.yaml" --stop-at-end
cp "$tmp/err" "$tmp/kafka-run.err"
check "its queue is empty" test "$(find "$tmp/k.git.openlineage" -name '*.json' | wc -l)" -eq 0
$py - "$bs" "$tmp/kafka-events.jsonl" <<'PY'
import sys
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "check", "enable.partition.eof": True})
c.assign([TopicPartition("lineage", p, 0) for p in (0, 1)])
eof, out = set(), open(sys.argv[2], "w")
while len(eof) < 2:
    m = c.poll(10)
    if m is None:
        break
    if m.error():
        eof.add(m.partition())
        continue
    out.write(m.value().decode() + "\n")
c.close()
PY
check "START and COMPLETE are on the topic" \
	test "$(grep -c '"eventType":"START"' "$tmp/kafka-events.jsonl")" -ge 1 -a \
	"$(grep -c '"eventType":"COMPLETE"' "$tmp/kafka-events.jsonl")" -ge 1
check "they validate" $py "$checker" validate --spec "$spec" "$tmp/kafka-events.jsonl"
check "the input is the topic at its broker, with each partition's range" \
	grep -q "\"namespace\":\"kafka://$bs\",\"name\":\"ev\",\"inputFacets\":{\"kiln_offsets\":{[^}]*\"ranges\":\[{\"partition\":[01],\"first\":0,\"next\":[0-9]*},{\"partition\":[01]" \
	"$tmp/kafka-events.jsonl"
kill "$broker" 2>/dev/null
wait "$broker" 2>/dev/null
broker=

# the token and personal values in no log
check "the token is in no log or event" bash -c '! grep -rqF --include="*.err" --include="*.out" --include="*.jsonl*" \
	--include=err --include=out --exclude=in.jsonl -e "$1" "$2"' _ "$token" "$tmp"
check "no personal value in the logs" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
