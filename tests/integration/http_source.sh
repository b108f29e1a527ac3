#!/usr/bin/env bash
# The http source (docs/PIPELINES.md "Sources: http"): `kiln run` over a
# pipeline with source.kind http, posted to by python3 http.client threads
# (http_poster.py, which also checks the store and the manifest on its own):
#  - 401 without a token and with a wrong one (WWW-Authenticate: Bearer),
#    415, 413, 404, 405, an empty body 200 with 0 records; the engine's
#    control listener still serves /metrics and /healthz;
#  - 200 concurrent posters, several batches each, ack committed: every
#    acknowledged record committed exactly once, nothing twice, stats.json
#    balances, lineage next = records committed;
#  - kill -9 while posters post (no retries); restart; more posts: the same
#    check (an unacknowledged record may be committed or not);
#  - 3 more rounds of kill -9 at random points while 40 posters post (before
#    any answer, after the first acknowledgement, after 40 % of them), a
#    restart after each: the same check after every restart;
#  - SIGTERM while posters wait: they get their acks, exit 0;
#  - ack: received: 202 and the raw zone holds the body;
#  - the token appears in no log or output.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
poster=$src/tests/integration/http_poster.py
need curl git
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/key"
chmod 600 "$tmp/key"
token=tok-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$token" >"$tmp/token"
chmod 600 "$tmp/token"
"$py" "$src/bench/gen-user-events.py" --records 12001 --seed 21 --invalid-rate 0.03 -o "$tmp/all.jsonl" \
	--expect "$tmp/all.expect"
sed -n '1,4000p' "$tmp/all.jsonl" >"$tmp/in1.jsonl"
sed -n '4001,8000p' "$tmp/all.jsonl" >"$tmp/in2.jsonl"
sed -n '8001,10000p' "$tmp/all.jsonl" >"$tmp/in3.jsonl"
sed -n '10001,11000p' "$tmp/all.jsonl" >"$tmp/in4.jsonl"
sed -n '11001,12000p' "$tmp/all.jsonl" >"$tmp/in5.jsonl"
pii_exempt=(sent*.log acked*.log)

pipeline() { # FILE DATASET [ACK] [BATCH MS] [SNAPSHOT SECONDS] [SNAPSHOT RECORDS] [BATCH RECORDS]
	cat >"$1" <<EOF
dataset: $2
contract: $src/contracts/user-events.yaml
source:
  kind: http
  name: in-$2
  listen: 127.0.0.1:0
  port_file: $tmp/$2.port
  token_file: $tmp/token
  max_body_bytes: 200000
  ack: ${3:-committed}
  batch: {ms: ${4:-20}, records: ${7:-8192}}
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/store}
manifest: {repo: $tmp/m.git}
snapshot: {records: ${6:-3000}, seconds: ${5:-2}, drain_seconds: 20}
metrics: {listen: 127.0.0.1:0}
EOF
}

# kill -9 of the run. A kill that lands inside a ref update leaves git's
# ref lock (refs/heads/DS/BRANCH.lock); kiln never breaks one by itself
# (docs/VERSIONS.md) and the next commit names it. The test does what that
# message asks of an operator once the killed process is known gone.
kill9_daemon() {
	kill -KILL "$daemon"
	wait "$daemon" 2>/dev/null
	rm -f "$tmp"/m.git/refs/heads/*/*.lock
}

starts=0
start_daemon() { # PIPELINE DATASET -> $daemon, $port (the source's), $mport (metrics)
	starts=$((starts + 1))
	daemon_log=$tmp/run.$starts.log
	rm -f "$tmp/$2.port"
	"$kiln" run "$1" >>"$tmp/run.out" 2>"$daemon_log" &
	daemon=$!
	pids+=($daemon)
	port= mport=
	for _ in $(seq 200); do
		[ -s "$tmp/$2.port" ] && port=$(cat "$tmp/$2.port")
		mport=$(grep -o '"event":"listening"[^}]*"port":[0-9]*' "$daemon_log" 2>/dev/null | grep -o '[0-9]*$')
		[ -n "$port" ] && [ -n "$mport" ] && return 0
		sleep 0.1
	done
	echo "  the run did not start:"
	tail -5 "$daemon_log"
	return 1
}

code() { # EXPECTED CURL-ARGS...: the status of a request to the source
	local want=$1 got
	shift
	got=$(curl -s -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' "$@")
	[ "$got" = "$want" ] || { echo "  status $got, expected $want: $(head -c 200 "$tmp/body")"; return 1; }
}

# --- refusals ------------------------------------------------------------------
pipeline "$tmp/p.yaml" hs
chmod 644 "$tmp/token"
check "a token file others can read is refused at file:line:col" status_is 2 "$kiln" run "$tmp/p.yaml"
check "... naming source.token_file" grep -q "p.yaml:[0-9]*:[0-9]*: source.token_file: .*0644" "$tmp/err"
cp "$tmp/err" "$tmp/mode.err"
chmod 600 "$tmp/token"
check "ack: received without the raw zone is refused" status_is 2 "$kiln" run "$tmp/p.yaml" --set source.ack=received \
	--set raw.enabled=false
check "an unknown ack is refused" status_is 2 "$kiln" run "$tmp/p.yaml" --set source.ack=maybe
start_daemon "$tmp/p.yaml" hs
url=http://127.0.0.1:$port/v1/records
nd=(-H 'Content-Type: application/x-ndjson')
sed -n 12001p "$tmp/all.jsonl" >"$tmp/one.jsonl"
check "401 without a token" code 401 "${nd[@]}" --data-binary @"$tmp/one.jsonl" "$url"
check "401 carries WWW-Authenticate: Bearer" grep -qi '^WWW-Authenticate: Bearer' "$tmp/headers"
check "401 with a wrong token" code 401 "${nd[@]}" -H "Authorization: Bearer ${token}x" --data-binary @"$tmp/one.jsonl" "$url"
auth=(-H "Authorization: Bearer $token")
check "415 for another content type" code 415 "${auth[@]}" -H 'Content-Type: application/json' --data-binary @"$tmp/one.jsonl" "$url"
head -c 300000 /dev/zero | tr '\0' 'a' >"$tmp/big"
check "413 above source.max_body_bytes" code 413 "${auth[@]}" "${nd[@]}" --data-binary @"$tmp/big" "$url"
check "404 on another path" code 404 "${auth[@]}" "${nd[@]}" --data-binary @"$tmp/one.jsonl" "http://127.0.0.1:$port/v1/other"
check "405 for GET" code 405 "${auth[@]}" "http://127.0.0.1:$port/v1/records"
check "an empty body: 200 with 0 records" code 200 "${auth[@]}" "${nd[@]}" --data-binary '' "$url"
check "an empty body's answer says 0 records" grep -q '"records":0' "$tmp/body"
check "one record: 200 once committed" code 200 "${auth[@]}" "${nd[@]}" --data-binary @"$tmp/one.jsonl" "$url"
check "the answer names the commit at the branch tip" \
	grep -q "\"commit\":\"$(git --git-dir "$tmp/m.git" rev-parse refs/heads/hs/main)\"" "$tmp/body"
cat "$tmp/one.jsonl" >>"$tmp/acked0.log"
check "/healthz of the control listener answers ok" sh -c "curl -sf http://127.0.0.1:$mport/healthz | grep -qx ok"
check "/metrics serves the source's gauge" sh -c "curl -sf http://127.0.0.1:$mport/metrics | grep -q '^kiln_http_waiting_records '"

# --- 200 concurrent posters ------------------------------------------------------
"$py" "$poster" post --port "$port" --token-file "$tmp/token" --input "$tmp/in1.jsonl" --posters 200 --batches 4 \
	--acked "$tmp/acked1.log" --sent "$tmp/sent1.log" >"$tmp/post1.out" 2>&1
check "200 posters: every POST answered 200" sh -c "grep -qx 'status 200: 800' '$tmp/post1.out' && test \$(wc -l <'$tmp/post1.out') -eq 1"
check "200 posters: every acknowledged record exactly once" "$py" "$poster" check --repo "$tmp/m.git" --dataset hs \
	--store "$tmp/store" --topic in-hs --acked "$tmp/acked0.log" "$tmp/acked1.log"

# --- kill -9 while posting -------------------------------------------------------
"$py" "$poster" post --port "$port" --token-file "$tmp/token" --input "$tmp/in2.jsonl" --posters 200 --batches 20 \
	--acked "$tmp/acked2.log" --sent "$tmp/sent2.log" >"$tmp/post2.out" 2>&1 &
pp=$!
poll 60 test -s "$tmp/acked2.log" # the kill comes after the first acknowledgements
ms_sleep $((RANDOM % 300))
kill9_daemon
wait "$pp"
check "kill -9: some POSTs were acknowledged before the kill" test -s "$tmp/acked2.log"
check "kill -9: some POSTs were not" grep -q '^status error' "$tmp/post2.out"
start_daemon "$tmp/p.yaml" hs
"$py" "$poster" post --port "$port" --token-file "$tmp/token" --input "$tmp/in3.jsonl" --posters 200 --batches 2 \
	--acked "$tmp/acked3.log" --sent "$tmp/sent3.log" >"$tmp/post3.out" 2>&1
check "after the restart: every POST answered 200" sh -c "grep -qx 'status 200: 400' '$tmp/post3.out'"

# --- kill -9 at random points while posters post, each followed by a restart ---
# 3 more rounds of 40 posters (5 POSTs each): the kill lands anywhere from
# before the first POST is answered to after the last is acknowledged; after
# each restart (which removes what the killed run left past lineage's next)
# the checker holds: every acknowledged record committed exactly once,
# nothing committed twice or never sent
"$py" "$src/bench/gen-user-events.py" --records 3000 --seed 22 --invalid-rate 0.03 -o "$tmp/kills.jsonl" \
	--expect "$tmp/kills.expect"
kill_rounds=()
acked_at_least() { [ -s "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; } # LOG N
for round in 1 2 3; do
	sed -n "$((round * 1000 - 999)),$((round * 1000))p" "$tmp/kills.jsonl" >"$tmp/ink$round.jsonl"
	"$py" "$poster" post --port "$port" --token-file "$tmp/token" --input "$tmp/ink$round.jsonl" --posters 40 \
		--batches 5 --acked "$tmp/ackedk$round.log" --sent "$tmp/sentk$round.log" >"$tmp/postk$round.out" 2>&1 &
	pp=$!
	# round 1: 0 to 600 ms after the posters start (POSTs read, curated,
	# waiting for their commit); round 2: after the first acknowledgement;
	# round 3: after 400 of the 1000 records were acknowledged
	case $round in
	2) poll 60 test -s "$tmp/ackedk$round.log" ;;
	3) poll 60 acked_at_least "$tmp/ackedk$round.log" 400 ;;
	esac
	delay=$((round == 1 ? RANDOM % 600 : round == 2 ? RANDOM % 300 : RANDOM % 150))
	ms_sleep "$delay"
	kill9_daemon
	wait "$pp"
	kill_rounds+=("${delay}ms:$(wc -l <"$tmp/ackedk$round.log")/1000-acked")
	check "kill round $round: every POST answered 200 or got no answer" \
		sh -c "! grep -Ev '^status (200|error):' '$tmp/postk$round.out'"
	start_daemon "$tmp/p.yaml" hs
	check "kill round $round, restarted: every acknowledged record exactly once" "$py" "$poster" check \
		--repo "$tmp/m.git" --dataset hs --store "$tmp/store" --topic in-hs --acked "$tmp"/acked[0-3].log \
		"$tmp"/ackedk*.log --sent "$tmp"/sent[1-3].log "$tmp"/sentk*.log
done
echo "  (kill rounds: ${kill_rounds[*]})"

# --- SIGTERM while posters wait ------------------------------------------------------
# no snapshot but the drain's: batch.ms a minute, snapshot.seconds an hour
kill -TERM "$daemon"
wait "$daemon" 2>/dev/null
pipeline "$tmp/pd.yaml" hs committed 60000 3600 0
start_daemon "$tmp/pd.yaml" hs
"$py" "$poster" post --port "$port" --token-file "$tmp/token" --input "$tmp/in4.jsonl" --posters 50 --batches 1 \
	--acked "$tmp/acked4.log" --sent "$tmp/sent4.log" >"$tmp/post4.out" 2>&1 &
pp=$!
all_waiting() { # every record of the 50 POSTs waits for its commit
	curl -sf "http://127.0.0.1:$mport/metrics" 2>/dev/null | grep -qx 'kiln_http_waiting_records 1000'
}
check "SIGTERM: the 50 POSTs wait for their commit" poll 60 all_waiting
kill -TERM "$daemon"
rc=0
wait "$daemon" || rc=$?
wait "$pp"
check "SIGTERM: the run drains and exits 0" sh -c "[ $rc -eq 0 ] || { echo '  exit $rc; its log ends:'; tail -5 '$daemon_log' | sed 's/^/  | /'; exit 1; }"
check "SIGTERM: no POST got an error (200, or 503 once stopping)" sh -c "! grep -Ev '^status (200|503):' '$tmp/post4.out'"
check "SIGTERM: every waiting POST was acknowledged by the drain" sh -c "grep -qx 'status 200: 50' '$tmp/post4.out' || { sed 's/^/  | /' '$tmp/post4.out'; grep -v '\"level\":\"info\"' '$daemon_log' | tail -5 | sed 's/^/  | /'; exit 1; }"
check "kill -9 + restart + drain: every acknowledged record exactly once" "$py" "$poster" check --repo "$tmp/m.git" \
	--dataset hs --store "$tmp/store" --topic in-hs --acked "$tmp"/acked[0-4].log "$tmp"/ackedk*.log \
	--sent "$tmp"/sent[1-4].log "$tmp"/sentk*.log
check "git fsck" git --git-dir "$tmp/m.git" fsck --strict --no-dangling
"$kiln" raw cat --store "file://$tmp/store" --topic in-hs --format value >"$tmp/raw-hs.values" 2>"$tmp/raw-hs.err"
check "the raw zone holds the committed records, each once, nothing the kill left" "$py" -c '
import json, subprocess, sys
raw = open(sys.argv[1], "rb").read().splitlines()
acked = set(l for f in sys.argv[3:] for l in open(f, "rb").read().splitlines())
lineage = json.loads(subprocess.check_output(["git", "--git-dir", sys.argv[2], "show", "refs/heads/hs/main:lineage.json"]))
nxt = [e["next"] for e in lineage["partitions"] if e["source"] == "http"][0]
sys.exit(0 if len(raw) == nxt and len(set(raw)) == nxt and acked <= set(raw) else 1)
' "$tmp/raw-hs.values" "$tmp/m.git" "$tmp"/acked[0-4].log "$tmp"/ackedk*.log

# kiln replay rebuilds the branch from the raw zone: the same records
check "kiln replay of the http branch exits 0" status_is 0 "$kiln" replay "$tmp/p.yaml" --from main --set branch=replayed
check "the replayed branch: every acknowledged record exactly once" "$py" "$poster" check --repo "$tmp/m.git" \
	--dataset hs --branch replayed --store "$tmp/store" --topic in-hs --acked "$tmp"/acked[0-4].log \
	"$tmp"/ackedk*.log --sent "$tmp"/sent[1-4].log "$tmp"/sentk*.log
check "the replayed branch has the records of main" sh -c "test \"\$(git --git-dir '$tmp/m.git' show refs/heads/hs/replayed:stats.json | grep records_in)\" = \"\$(git --git-dir '$tmp/m.git' show refs/heads/hs/main:stats.json | grep records_in)\""

# --- ack: received ---------------------------------------------------------------------
pipeline "$tmp/r.yaml" hr received 20 3600 0 10 # no commit before the kill below; 3 batches per POST
start_daemon "$tmp/r.yaml" hr
"$py" "$poster" post --port "$port" --token-file "$tmp/token" --input "$tmp/in5.jsonl" --posters 20 --batches 2 \
	--expect-status 202 --acked "$tmp/acked5.log" --sent "$tmp/sent5.log" >"$tmp/post5.out" 2>&1
check "ack received: every POST answered 202" sh -c "grep -qx 'status 202: 40' '$tmp/post5.out'"
"$kiln" raw cat --store "file://$tmp/store" --topic in-hr --format value >"$tmp/raw.values" 2>"$tmp/raw.err"
check "ack received: the raw zone holds every acknowledged body" "$py" -c '
import sys
raw = set(open(sys.argv[2], "rb").read().splitlines())
sys.exit(0 if all(l in raw for l in open(sys.argv[1], "rb").read().splitlines()) else 1)
' "$tmp/acked5.log" "$tmp/raw.values"
# kill -9 right after the acks: the next run curates what the raw zone holds
# past the last commit before anything new
ms_sleep 200
kill9_daemon
start_daemon "$tmp/r.yaml" hr
kill -TERM "$daemon"
rc=0
wait "$daemon" || rc=$?
check "ack received: SIGTERM exits 0" test "$rc" -eq 0
check "ack received: kill -9, restart, drain: every acknowledged record committed exactly once" "$py" "$poster" check --repo "$tmp/m.git" \
	--dataset hr --store "$tmp/store" --topic in-hr --acked "$tmp/acked5.log"

# --- the token and the records stay out of the logs --------------------------------------
check "the token appears in no log or output" sh -c "! grep -rqF '$token' '$tmp'/*.log '$tmp'/*.out '$tmp/headers' '$tmp/body'"
check "no log or output holds a personal value" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
