#!/usr/bin/env bash
# Avro from Kafka (docs/STREAMING.md, "Avro records"): python3-avro
# producers write the Confluent wire format through python3-confluent-kafka
# into `kiln broker`, with their schemas in a registry-compatible test server
# (schema_registry.py, basic auth); `kiln run --stop-at-end` with
# source.format: avro and the contract `kiln contract infer --avro` wrote.
# kafka_avro_check.py then holds every message to its outcome: curated once,
# its JSON the forms python3-avro's decoding gives (logical types, decimals
# as exact text, unions unwrapped), or quarantined with its code (truncated,
# varints cut short and too long, a negative length, a 2 GB declared string,
# a byte left over, recursion past the bound, wrong magic byte, an unknown
# id, NaN); the raw zone holds every message byte-exact; two schema ids on
# one topic (evolution). Then: a registry that answers 503 and then is down
# while a run starts: the run waits (a log line naming the endpoint), the
# registry comes up, every record is curated, none quarantined as unknown;
# kiln check asks the registry (answers, or down);
# HTTPS: a registry of an unknown CA refused at once, read with
# source.schema_registry.ca_file; a credentials file readable by others is
# refused.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need_kiln
need_py avro confluent_kafka
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY

"$kiln" broker --partitions 1 --topics ev,ev2 --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
poll 10 test -s "$tmp/pf"
bs=$(head -1 "$tmp/pf" 2>/dev/null)
[ -n "$bs" ] || { echo "FAIL: broker did not start"; cat "$tmp/broker.out"; echo "0 passed, 1 failed"; exit 1; }
auth="kiln:s3cret-pw"
$py "$src/tests/integration/schema_registry.py" "$tmp/reg.port" --auth "$auth" --log "$tmp/reg.log" &
reg_pid=$!
pids+=($reg_pid)
poll 10 test -s "$tmp/reg.port"
reg="http://127.0.0.1:$(cat "$tmp/reg.port")"
(umask 077 && printf '%s\n' "$auth" >"$tmp/reg.cred")
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/key")

check "the producer wrote 200 records and 11 hostile messages" \
	$py "$src/tests/integration/kafka_avro_produce.py" "$bs" ev "$reg" "$auth" "$tmp" --records 200 --seed 5
check "the registry lists the subjects" sh -c "curl -s -u '$auth' '$reg/subjects' | grep -q ev-value"
check "contract infer --avro writes the contract" status_is 0 "$kiln" contract infer --avro "$tmp/v2.avsc" \
	--name ev -o "$tmp/contract.yaml"

pipeline() { # FILE TOPIC DATASET [REGISTRY EXTRA]
	cat >"$1" <<EOF
dataset: $3
contract: $tmp/contract.yaml
source:
  kind: kafka
  brokers: $bs
  topics: [$2]
  group: g-$3
  format: avro
  schema_registry: {url: "$reg", credentials_file: $tmp/reg.cred${4:-}}
  batch: {records: 50, ms: 50}
pseudonymise: {key_file: $tmp/key}
split: {key: user, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/store}
manifest: {repo: $tmp/m.git}
EOF
}
pipeline "$tmp/p.yaml" ev avro-ev
check "kiln check asks the registry (with the credentials)" status_is 0 "$kiln" check "$tmp/p.yaml"
check "  and says so" grep -q "schema_registry.*$reg/subjects: answered" "$tmp/out"
check "kiln run reads the topic to its end" status_is 0 timeout 120 "$kiln" run "$tmp/p.yaml" --stop-at-end
[ "$failed" -eq 0 ] || sed 's/^/  /' "$tmp/err" | tail -20

collect() { # DATASET TOPIC [BRANCH]: curated, quarantine and raw of one run
	: >"$tmp/curated.jsonl"
	for s in train dev test; do
		"$kiln" cat "$1@${3:-main}" --split "$s" --manifest "$tmp/m.git" --store "file://$tmp/store" \
			>>"$tmp/curated.jsonl" || return 1
	done
	"$kiln" quarantine ls "$1@${3:-main}" --store "file://$tmp/store" --topic "$2" >"$tmp/quarantine.txt" || return 1
	"$kiln" raw cat --store "file://$tmp/store" --topic "$2" >"$tmp/raw.jsonl"
}
check "curated, quarantine and raw zone read back" collect avro-ev ev
check "every record curated once in the decoded forms or quarantined with its code; raw byte-exact" \
	status_is 0 $py "$src/tests/integration/kafka_avro_check.py" "$tmp/sent.jsonl" "$tmp/schemas.json" \
	"$tmp/curated.jsonl" "$tmp/quarantine.txt" "$tmp/raw.jsonl"
sed 's/^/  /' "$tmp/out" | tail -12
check "schema_unknown, avro_decode and not_finite in the quarantine" \
	sh -c "grep -q ' schema_unknown ' '$tmp/quarantine.txt' && grep -q ' avro_decode ' '$tmp/quarantine.txt' && grep -q ' not_finite ' '$tmp/quarantine.txt'"
check "the registry was asked once per schema id (cached)" \
	sh -c "[ \$(grep -c '^GET /schemas/ids/' '$tmp/reg.log') -eq 4 ]"
check "no personal value in the run's log" sh -c "! grep -q 'u0[0-9][0-9][0-9]' '$tmp/err'"
check "kiln replay rebuilds a branch from the raw zone, decoding the Avro again" \
	status_is 0 "$kiln" replay "$tmp/p.yaml" --from main --set branch=again
check "  the same outcome for every message" collect avro-ev ev again
check "  held to the same checks" status_is 0 $py "$src/tests/integration/kafka_avro_check.py" "$tmp/sent.jsonl" \
	"$tmp/schemas.json" "$tmp/curated.jsonl" "$tmp/quarantine.txt" "$tmp/raw.jsonl"
check "kiln quarantine replay decodes quarantined Avro records (still rejected: none curated)" \
	status_is 0 "$kiln" quarantine replay avro-ev@main --pipeline "$tmp/p.yaml" --dry-run --json
check "  every one of the 11 tried again, none taken" sh -c "grep -q '\"replayed\":0' '$tmp/out'"
sed 's/^/  /' "$tmp/out" | head -3

# --- the registry answers 503, then is down while the run starts, then up --
port=$(cat "$tmp/reg.port")
kill -KILL "$reg_pid"
wait "$reg_pid" 2>/dev/null
: >"$tmp/sent.jsonl"
$py "$src/tests/integration/schema_registry.py" "$tmp/reg2.port" --port "$port" --auth "$auth" --load "$tmp/schemas.json" &
reg_pid=$!
pids+=($reg_pid)
poll 10 test -s "$tmp/reg2.port"
# the producer registers the same schemas (same ids) and sends to ev2
check "the producer wrote 40 more records to ev2" \
	$py "$src/tests/integration/kafka_avro_produce.py" "$bs" ev2 "$reg" "$auth" "$tmp" --records 40 --seed 6 --no-hostile
kill -KILL "$reg_pid"
wait "$reg_pid" 2>/dev/null
pipeline "$tmp/p2.yaml" ev2 avro-ev2
check "kiln check reports a registry that is down" status_is 1 "$kiln" check "$tmp/p2.yaml"
check "  naming the endpoint" grep -q "schema_registry.*127.0.0.1:$port/subjects" "$tmp/out"
"$kiln" run "$tmp/p2.yaml" --stop-at-end >"$tmp/run2.out" 2>"$tmp/run2.err" &
run_pid=$!
pids+=($run_pid)
poll 30 grep -q schema_registry_unavailable "$tmp/run2.err"
check "a registry that is down: the run logs the endpoint and waits" \
	sh -c "grep schema_registry_unavailable '$tmp/run2.err' | grep -q '127.0.0.1:$port/schemas/ids/'"
rm -f "$tmp/reg3.port"
$py "$src/tests/integration/schema_registry.py" "$tmp/reg3.port" --port "$port" --auth "$auth" --load "$tmp/schemas.json" \
	--fail-first 2 &
pids+=($!)
wait "$run_pid"
check "then the registry comes up (503 twice first) and the run ends 0" test $? -eq 0
[ "$failed" -eq 0 ] || tail -5 "$tmp/run2.err" | sed 's/^/  /'
check "ev2 read back" collect avro-ev2 ev2
check "every ev2 record curated, none quarantined as unknown" \
	status_is 0 $py "$src/tests/integration/kafka_avro_check.py" "$tmp/sent.jsonl" "$tmp/schemas.json" \
	"$tmp/curated.jsonl" "$tmp/quarantine.txt" "$tmp/raw.jsonl"
sed 's/^/  /' "$tmp/out" | tail -5
check "the quarantine of ev2 is empty" test ! -s "$tmp/quarantine.txt"

# --- TLS: a registry whose certificate a CA file vouches for ----------------
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=kiln-test-ca -keyout "$tmp/ca.key" -out "$tmp/ca.pem" \
	>/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$tmp/srv.key" -out "$tmp/srv.csr" >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1\n' >"$tmp/san.ext"
openssl x509 -req -in "$tmp/srv.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -CAcreateserial -days 2 \
	-extfile "$tmp/san.ext" -out "$tmp/srv.pem" >/dev/null 2>&1
$py "$src/tests/integration/schema_registry.py" "$tmp/tls.port" --auth "$auth" --load "$tmp/schemas.json" \
	--tls "$tmp/srv.pem" "$tmp/srv.key" &
pids+=($!)
poll 10 test -s "$tmp/tls.port"
reg="https://127.0.0.1:$(cat "$tmp/tls.port")"
pipeline "$tmp/p4.yaml" ev2 avro-tls
check "an HTTPS registry of an unknown CA is refused (no retry, the endpoint named)" \
	status_is 2 timeout 60 "$kiln" run "$tmp/p4.yaml" --stop-at-end
check "  naming the endpoint" grep -q "schema registry https://127.0.0.1:[0-9]*/schemas/ids/" "$tmp/err"
pipeline "$tmp/p4.yaml" ev2 avro-tls ", ca_file: $tmp/ca.pem"
check "with source.schema_registry.ca_file the run reads ev2" status_is 0 timeout 60 "$kiln" run "$tmp/p4.yaml" --stop-at-end
tls_ok() { collect avro-tls ev2 && [ "$(wc -l <"$tmp/curated.jsonl")" -eq 40 ] && [ ! -s "$tmp/quarantine.txt" ]; }
check "  every record curated" tls_ok

# --- configuration errors ----------------------------------------------------
chmod 644 "$tmp/reg.cred"
check "a credentials file others can read is refused" status_is 2 "$kiln" run "$tmp/p2.yaml" --stop-at-end
check "  naming the file" grep -q "reg.cred" "$tmp/err"
chmod 600 "$tmp/reg.cred"
sed 's/format: avro/format: protobuf/' "$tmp/p2.yaml" >"$tmp/p3.yaml"
check "source.format other than json or avro is refused at file:line:col" status_is 2 "$kiln" run "$tmp/p3.yaml" --stop-at-end
check "  naming source.format" grep -q "p3.yaml:[0-9]*:[0-9]*: source.format" "$tmp/err"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
