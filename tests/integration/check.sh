#!/usr/bin/env bash
# `kiln check PIPELINE`: each class of problem kiln run would refuse is
# found, with its one line, without running anything, and every problem is
# reported, not only the first; nothing is created (no store folder, no
# manifest repository, no topic); the sample's curated records are the very
# lines kiln run writes to that split's shards, with personal data as tokens
# only; the resolved configuration redacts secrets (every librdkafka secret
# option, user:password@ in an address with or without a scheme, which is
# also a problem); a source path that is not UTF-8 is a problem, and kiln
# run refuses it before uploading anything; --json parses
# (/usr/bin/python3 -m json.tool and jq) and says the same; a Kafka source's
# brokers and topics are probed on `kiln broker`. Exit 0 / 1 / 2.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need git jq zstd
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
unset KILN_BRANCH KILN_SPLIT_SALT
pipeline=$src/pipelines/user-events.yaml
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
$py "$src/bench/gen-user-events.py" --records 400 --seed 7 -o "$tmp/in.jsonl"
cp "$src/samples/user-events-invalid.jsonl" "$tmp/sample.jsonl" # pii_scan_logs reads its values

chk() { # WANT ARGS...: kiln check ARGS, output in $tmp/out and $tmp/err
	status_is "$1" "$kiln" check "${@:2}"
}
line() { # STATUS CHECK REGEX: $tmp/out has "STATUS CHECK message" with message matching REGEX
	grep -Eq "^$1 +$2 +$3" "$tmp/out" || { echo "  no '$1 $2 $3' line in:"; sed 's/^/  | /' "$tmp/out" | head -20; return 1; }
}

# --- a fresh pipeline: everything ok, nothing created ---------------------------
check "fresh pipeline: exit 0" chk 0 "$pipeline"
check "  each check has its line" sh -c "for c in pipeline contract keys store manifest branch source; do grep -Eq \"^ok +\$c \" '$tmp/out' || exit 1; done"
check "  the contract line names the contract and split key" line ok contract '.*user-events 1\.2\.0, schema user_event, [0-9]+ fields; split key user_id'
check "  the store does not exist yet: reported, not created" line ok store "file://$tmp/store does not exist yet: the first run creates it"
check "  the manifest does not exist yet: reported, not created" line ok manifest "$tmp/m.git does not exist yet"
check "  nothing created" test ! -e "$tmp/store" -a ! -e "$tmp/m.git"
check "  the resolved configuration, ENV expanded" grep -qx "    path: $tmp/in.jsonl" "$tmp/out"
check "  the last line" grep -qx '0 problems found' "$tmp/out"
check "--json: exit 0" chk 0 "$pipeline" --json
cp "$tmp/out" "$tmp/fresh.json"
check "  python3 -m json.tool parses it" $py -m json.tool "$tmp/fresh.json" /dev/null
check "  ok, 0 problems, 7 checks all ok" test "$(jq -r '[.ok, .problems, (.checks|length), ([.checks[]|select(.status=="ok")]|length)]|@tsv' "$tmp/fresh.json")" = "$(printf 'true\t0\t7\t7')"
check "  the config as JSON, typed" test "$(jq -r '[.config.dataset, .config.split.ratios.train, .config.pseudonymise.key_version]|@tsv' "$tmp/fresh.json")" = "$(printf 'user-events\t0.8\t1')"

# --- after a run: the branch exists and matches ---------------------------------
"$kiln" run "$pipeline" >"$tmp/run.out" 2>"$tmp/run.err" || { echo "FAIL: kiln run"; cat "$tmp/run.err"; }
check "after a run: exit 0" chk 0 "$pipeline"
check "  the store answers" line ok store "file://$tmp/store answers"
check "  the manifest opens" line ok manifest "$tmp/m.git opens"
check "  the branch matches" line ok branch 'user-events/main was made with the same key, split and contract'

# --- every class of problem, one line each (exit 1) ----------------------------
cp "$pipeline" "$tmp/broken.yaml"
printf 'split:\n  key: [unclosed\n' >>"$tmp/broken.yaml"
check "a pipeline that does not parse: exit 1" chk 1 "$tmp/broken.yaml"
check "  names file:line:col" line PROBLEM pipeline "$tmp/broken.yaml:[0-9]+:[0-9]+: "
check "  and 1 problem" grep -qx '1 problem found' "$tmp/out"
check "a missing pipeline file: exit 1" chk 1 "$tmp/nope.yaml"
check "  named" line PROBLEM pipeline "$tmp/nope.yaml"

printf 'apiVersion: v3.0.0\nkind: DataContract\nid: x\nversion: 1.0.0\nschema:\n  - name: s\n    properties: [\n' >"$tmp/bad-contract.yaml"
check "a contract that does not parse: exit 1" chk 1 "$pipeline" --set contract="$tmp/bad-contract.yaml"
check "  names file:line:col" line PROBLEM contract "$tmp/bad-contract.yaml:[0-9]+:[0-9]+: "
check "  the branch check is skipped, not failed" line skipped branch 'needs the contract and the keys'
check "a split key the contract lacks: exit 1" chk 1 "$pipeline" --set split.key=no_such_field
check "  names split.key" line PROBLEM contract '.*split.key: the contract .* has no top-level field "no_such_field"'

chmod 644 "$tmp/hmac.key"
check "a group-readable key file: exit 1" chk 1 "$pipeline"
check "  names the file and its mode" line PROBLEM keys ".*$tmp/hmac.key.*0?644"
chmod 600 "$tmp/hmac.key"
check "a missing key file: exit 1" chk 1 "$pipeline" --set pseudonymise.key_file="$tmp/no.key"
check "  named" line PROBLEM keys ".*$tmp/no.key"
check "a missing signing key: exit 1" chk 1 "$pipeline" --set manifest.signing_key="$tmp/no-signing-key"
check "  named" line PROBLEM keys ".*$tmp/no-signing-key"

check "a store that cannot be made: exit 1" chk 1 "$pipeline" --set store.url=file:///proc/kiln-store
check "  named" line PROBLEM store 'file:///proc/kiln-store does not exist and cannot be created: /proc is not a writable folder'
port=$($py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
check "an S3 store that does not answer: exit 1" status_is 1 env AWS_ACCESS_KEY_ID=k AWS_SECRET_ACCESS_KEY=s \
	"$kiln" check "$pipeline" --set store.url=s3://bucket/p --set store.endpoint=127.0.0.1:"$port" \
	--set store.http=true --set store.max_retries=1
check "  its endpoint named" line PROBLEM store ".*127.0.0.1:$port"
check "a manifest that cannot be made: exit 1" chk 1 "$pipeline" --set manifest.repo=/proc/kiln/m.git
check "  named" line PROBLEM manifest '/proc/kiln/m.git does not exist and cannot be created'

check "another split salt than the branch's: exit 1" chk 1 "$pipeline" --set split.salt=other
check "  named, with the way out" line PROBLEM branch '.*the split settings .* differ from those user-events/main was made with.*--set branch=NAME'
check "  on a new branch: exit 0" chk 0 "$pipeline" --set split.salt=other --set branch=salted
$py - "$src/contracts/user-events.yaml" "$tmp/removed.yaml" <<'PY'
import sys
text = open(sys.argv[1]).read()
i = text.index("      - name: country\n")
j = text.index("      - name: ", i + 10)
open(sys.argv[2], "w").write(text[:i] + text[j:])  # a field removed: breaking, same major
PY
check "a contract change that breaks readers, same major: exit 1" chk 1 "$pipeline" --set contract="$tmp/removed.yaml"
check "  named" line PROBLEM branch '.*breaks readers of user-events/main \(1 breaking: country field_removed'

check "a missing source file: exit 1" chk 1 "$pipeline" --set source.path="$tmp/no.jsonl"
check "  named" line PROBLEM source "$tmp/no.jsonl: cannot open"

chmod 644 "$tmp/hmac.key"
check "three problems at once: all reported (exit 1)" chk 1 "$pipeline" --set store.url=file:///proc/s --set source.path="$tmp/no.jsonl"
check "  keys, store and source each have their line" sh -c "grep -Eq '^PROBLEM +keys ' '$tmp/out' && grep -Eq '^PROBLEM +store ' '$tmp/out' && grep -Eq '^PROBLEM +source ' '$tmp/out'"
check "  and the count" grep -qx '3 problems found' "$tmp/out"
check "  --json says the same" sh -c "'$kiln' check '$pipeline' --set store.url=file:///proc/s --set source.path='$tmp/no.jsonl' --json >'$tmp/three.json'; test \$? -eq 1"
check "  parses" $py -m json.tool "$tmp/three.json" /dev/null
check "  ok false, 3 problems, their names" test "$(jq -r '[.ok, .problems, ([.checks[]|select(.status=="problem")|.check]|join(","))]|@tsv' "$tmp/three.json")" = "$(printf 'false\t3\tkeys,store,source')"
chmod 600 "$tmp/hmac.key"

# --- the sample: kiln run's curated lines, personal data as tokens ----------------
check "--sample -n 4: exit 0" chk 0 "$pipeline" --sample "$tmp/sample.jsonl" -n 4
cp "$tmp/out" "$tmp/sample.out"
check "  four sample lines" test "$(grep -c '^  line [0-9]' "$tmp/sample.out")" -eq 4
check "  a rejected record as its reason and path only" grep -qx '  line 2 rejected: json_syntax at \$' "$tmp/sample.out"
check "  pseudonymised fields are tokens" grep -q '"user_id":"p1_' "$tmp/sample.out"
"$kiln" check "$pipeline" --sample "$tmp/sample.jsonl" -n 4 --json >"$tmp/sample.json"
check "  --json parses" $py -m json.tool "$tmp/sample.json" /dev/null
check "  --json: 2 curated, 2 rejected" test "$(jq '[.sample[]|select(.record)]|length' "$tmp/sample.json"),$(jq '[.sample[]|select(.rejected)]|length' "$tmp/sample.json")" = 2,2
# the same records through kiln run on a scratch branch: each curated sample
# line is in its split's shards, byte for byte
head -4 "$tmp/sample.jsonl" >"$tmp/four.jsonl"
"$kiln" run "$pipeline" --set source.path="$tmp/four.jsonl" --set branch=sample >"$tmp/run2.out" 2>"$tmp/run2.err"
in_split() { # SPLIT LINE: LINE is a record of the split's shards on user-events@sample
	local s
	for s in $("$kiln" ls user-events@sample --split "$1" --manifest "$tmp/m.git" --store "file://$tmp/store" | awk '{print $NF}'); do
		zstd -dcq "${s#file://}"
	done | grep -qxF -- "$2"
}
sed -En 's/^  line [0-9]+ (train|dev|test) +/\1\t/p' "$tmp/sample.out" >"$tmp/sample.tsv"
ok=0 n=0
while IFS=$'\t' read -r split rec; do
	n=$((n + 1))
	in_split "$split" "$rec" && ok=$((ok + 1))
done <"$tmp/sample.tsv"
check "  each curated sample record is in kiln run's shards of its split ($ok of $n)" test "$ok" -eq "$n" -a "$n" -eq 2
check "  --json holds the same records" test "$(jq -c '[.sample[]|select(.record)|.record]' "$tmp/sample.json")" = "$(cut -f2 "$tmp/sample.tsv" | jq -sc .)"

# --- the resolved configuration redacts secrets ----------------------------------
"$kiln" broker --partitions 3 --topics ev,ev.dlq --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
poll 10 test -s "$tmp/pf"
bs=$(head -1 "$tmp/pf" 2>/dev/null)
export KILN_BROKERS=$bs KILN_SECRET=hunter2-$RANDOM-secret
cat >"$tmp/kafka.yaml" <<EOF
dataset: ev
contract: $src/contracts/user-events.yaml
source:
  kind: kafka
  brokers: \${KILN_BROKERS}
  topics: [ev]
  group: g
  dead_letter_topic: ev.dlq
  connect_timeout: 3
  options:
    sasl.username: alice
    sasl.password: \${KILN_SECRET}
pseudonymise:
  key_file: $tmp/hmac.key
split:
  key: user_id
  salt: s
  ratios: {train: 0.8, dev: 0.1, test: 0.1}
store:
  url: file://$tmp/store
manifest:
  repo: $tmp/m.git
EOF
check "kafka: exit 0" chk 0 "$tmp/kafka.yaml"
check "  the brokers answered" line ok brokers "$bs: [0-9]+ brokers answered"
check "  the topic with its partition count" line ok topic 'ev: 3 partitions'
check "  the dead-letter topic" line ok topic 'ev.dlq \(dead letters\): 3 partitions'
check "  sasl.password redacted" grep -qx '      sasl.password: <redacted>' "$tmp/out"
check "  the secret is nowhere in the output" sh -c "! grep -rqF '$KILN_SECRET' '$tmp/out' '$tmp/err'"
check "  sasl.username shown" grep -qx '      sasl.username: alice' "$tmp/out"
check "  --json: redacted too" sh -c "'$kiln' check '$tmp/kafka.yaml' --json >'$tmp/k.json' && jq -e '.config.source.options.\"sasl.password\" == \"<redacted>\"' '$tmp/k.json' >/dev/null && ! grep -qF '$KILN_SECRET' '$tmp/k.json'"
# librdkafka's other secret options (its _RK_SENSITIVE ones), not only sasl.password
export KILN_PEM="pem-$RANDOM-secret" KILN_OAUTH="oauth-$RANDOM-secret" KILN_OAUTH_CLIENT="client-$RANDOM-secret"
sed 's/^    sasl.password: .*/&\n    ssl.key.pem: ${KILN_PEM}\n    sasl.oauthbearer.config: ${KILN_OAUTH}\n    sasl.oauthbearer.client.secret: ${KILN_OAUTH_CLIENT}/' \
	"$tmp/kafka.yaml" >"$tmp/kafka-secrets.yaml"
"$kiln" check "$tmp/kafka-secrets.yaml" >"$tmp/out" 2>"$tmp/err"
"$kiln" check "$tmp/kafka-secrets.yaml" --json >"$tmp/ks.json" 2>"$tmp/ks.err"
for o in ssl.key.pem sasl.oauthbearer.config sasl.oauthbearer.client.secret; do
	check "  $o redacted" grep -qx "      $o: <redacted>" "$tmp/out"
	check "  $o redacted in --json" jq -e ".config.source.options.\"$o\" == \"<redacted>\"" "$tmp/ks.json" >/dev/null
done
check "  none of their values anywhere in the output" sh -c \
	"! grep -rqE '$KILN_PEM|$KILN_OAUTH|$KILN_OAUTH_CLIENT' '$tmp/out' '$tmp/err' '$tmp/ks.json' '$tmp/ks.err'"
# user:password@ in the brokers, with a scheme and without: a problem (Kafka
# clients take credentials from sasl.*), and never shown
for b in "SASL_SSL://alice:$KILN_SECRET@127.0.0.1:9093" "alice:$KILN_SECRET@127.0.0.1:9093"; do
	shown=${b%%alice:*}'<redacted>@127.0.0.1:9093'
	check "brokers $shown: exit 1" chk 1 "$tmp/kafka.yaml" --set "source.brokers=$b"
	check "  a brokers problem naming them redacted" line PROBLEM brokers ".*source.brokers: $shown holds credentials"
	check "  the resolved configuration shows them redacted" grep -qxF "    brokers: $shown" "$tmp/out"
	check "  the password is nowhere in the output" sh -c "! grep -rqF '$KILN_SECRET' '$tmp/out' '$tmp/err'"
	check "  --json: the same" sh -c "'$kiln' check '$tmp/kafka.yaml' --json --set 'source.brokers=$b' >'$tmp/b.json'; jq -e '.config.source.brokers == \"$shown\"' '$tmp/b.json' >/dev/null && ! grep -qF '$KILN_SECRET' '$tmp/b.json'"
done
check "  an author e-mail (user@host, no password) is shown as it is" grep -qx '    author_email: kiln@example.org' \
	<("$kiln" check "$tmp/kafka.yaml" --set manifest.author_email=kiln@example.org)
check "a topic the brokers lack: exit 1" chk 1 "$tmp/kafka.yaml" --set 'source.dead_letter_topic=no.such.topic'
check "  named" line PROBLEM topic 'no.such.topic \(dead letters\): '
$py - "$bs" >"$tmp/topics" <<'PY'
import sys
from confluent_kafka.admin import AdminClient
print("\n".join(sorted(AdminClient({"bootstrap.servers": sys.argv[1]}).list_topics(timeout=10).topics)))
PY
check "  and not created on the brokers" sh -c "grep -qx ev '$tmp/topics' && ! grep -qx no.such.topic '$tmp/topics'"
check "no broker answering: exit 1" chk 1 "$tmp/kafka.yaml" --set source.brokers=127.0.0.1:"$port"
check "  named, with the time waited" line PROBLEM brokers "127.0.0.1:$port: no broker answered within 3000 ms"

# --- a source path that is not UTF-8: check refuses it, and so does run before uploading
bad=$tmp/in-$'\xff'.jsonl
cp "$tmp/in.jsonl" "$bad"
check "a source path that is not UTF-8: exit 1" status_is 1 env KILN_INPUT="$bad" "$kiln" check "$pipeline"
check "  named as a source problem" line PROBLEM source ".*source.path is not valid UTF-8"
check "  kiln run refuses it: exit 2" status_is 2 env KILN_INPUT="$bad" KILN_STORE="file://$tmp/u-store" \
	KILN_MANIFEST="$tmp/u.git" "$kiln" run "$pipeline"
check "  in one line" sh -c "test \$(wc -l <'$tmp/err') -eq 1 && grep -q 'source.path is not valid UTF-8' '$tmp/err'"
check "  before uploading anything (no store folder, no repository made)" test ! -e "$tmp/u-store" -a ! -e "$tmp/u.git"

# --- usage: exit 2 -------------------------------------------------------------
check "no pipeline: exit 2" chk 2
check "an unknown option: exit 2" chk 2 "$pipeline" --frobnicate
check "-n 0: exit 2" chk 2 "$pipeline" --sample "$tmp/sample.jsonl" -n 0
check "kiln help check is its --help" sh -c "'$kiln' help check | head -1 | grep -q '^usage: kiln check PIPELINE'"

check "no personal value in any output" pii_scan_logs
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
