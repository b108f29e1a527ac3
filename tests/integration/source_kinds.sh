#!/usr/bin/env bash
# Sources of one name and different kinds share a branch, each with its own
# position (docs/PIPELINES.md, "Sources"; docs/FORMATS.md, "lineage.json":
# entries keyed by source kind, topic and partition). The bug this guards: a
# file source and a Kafka topic of one name on one branch shared an entry,
# and the Kafka run started at the file's line count and skipped records
# (exit 0). Later, kiln refused the second kind instead. On `kiln broker`:
#  - a file run of `tickets`, then a Kafka run of topic `tickets` on the same
#    branch: every Kafka message curated (the run's count, stats.json and
#    `kiln cat` all equal what was produced), both entries in lineage.json,
#    each with its own "source"; later runs of each go on from their own
#    position (no gap, no duplicate); `kiln check` finds 0 problems;
#  - the reverse order (Kafka, then a file of the topic's name);
#  - stdin, a file and Kafka of one name mixed on one branch, twice each;
#  - `kiln replay` of a branch that holds both: the Kafka partition only;
#  - the quarantine: a file and a Kafka topic of one name quarantine records
#    at the same offsets (0-2, one flush each): two objects, each named with
#    its kind (one name used to hold both: the later replaced the earlier),
#    and `kiln quarantine replay` takes all six records into the branch, each
#    listed under its kind in quarantine-replayed.json (one list used to take
#    one of two lines at one offset for the other and drop it).
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need git kcat
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in ${pids[@]+"${pids[@]}"}; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT
unset KILN_BRANCH KILN_SPLIT_SALT KILN_INPUT KILN_STORE KILN_MANIFEST KILN_KEY_FILE

"$kiln" broker --partitions 1 --topics tickets,orders,mixed,clicks --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
poll 10 test -s "$tmp/pf"
bs=$(head -1 "$tmp/pf" 2>/dev/null)
[ -n "$bs" ] || { echo "broker did not start"; cat "$tmp/broker.out"; exit 1; }
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/key")
"$py" "$src/bench/gen-user-events.py" --records 60 --invalid-rate 0 --seed 5 -o "$tmp/a.jsonl"
"$py" "$src/bench/gen-user-events.py" --records 90 --invalid-rate 0 --seed 6 -o "$tmp/k.jsonl"
"$py" "$src/bench/gen-user-events.py" --records 40 --invalid-rate 0 --seed 7 -o "$tmp/k2.jsonl"
"$py" "$src/bench/gen-user-events.py" --records 30 --invalid-rate 0 --seed 8 -o "$tmp/a2.jsonl"
# stdin's own records (records alike curate into one shard, whichever source read them)
"$py" "$src/bench/gen-user-events.py" --records 60 --invalid-rate 0 --seed 9 -o "$tmp/s.jsonl"
"$py" "$src/bench/gen-user-events.py" --records 30 --invalid-rate 0 --seed 10 -o "$tmp/s2.jsonl"
for t in tickets orders mixed; do
	check "kcat produced 90 records to $t" kcat -P -b "$bs" -t $t -p 0 -l "$tmp/k.jsonl"
done

common() { # the pipeline's shared part: REPO [CONTRACT]
	cat <<EOF
dataset: ds
contract: ${2:-$src/contracts/user-events.yaml}
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/store}
manifest: {repo: $1}
EOF
}
file_pipeline() { # FILE REPO NAME INPUT
	{ common "$2"; printf 'source: {kind: file, path: %s, name: %s}\n' "$4" "$3"; } >"$1"
}
stdin_pipeline() { # FILE REPO NAME
	{ common "$2"; printf 'source: {kind: stdin, name: %s}\n' "$3"; } >"$1"
}
kafka_pipeline() { # FILE REPO TOPIC
	{
		common "$2"
		printf 'source: {kind: kafka, brokers: "%s", topics: [%s], group: g-%s-%s, options: {session.timeout.ms: "6000"}}\n' \
			"$bs" "$3" "$3" "$RANDOM"
	} >"$1"
}
kafka_run() { status_is "$1" timeout 60 "$kiln" run "${@:2}" --stop-at-end; }
stdin_run() { # PIPELINE INPUT
	"$kiln" run "$1" <"$2" >"$tmp/out" 2>"$tmp/err" || { tail -3 "$tmp/err"; return 1; }
}
added() { grep -q "+$1 records" "$tmp/out" || { echo "  run said:"; sed 's/^/  | /' "$tmp/out" | head -5; return 1; }; }
lineage() { # REPO [BRANCH]: "source topic/partition next" per entry, in the file's order
	git --git-dir "$1" show "refs/heads/ds/${2:-main}:lineage.json" |
		"$py" -c 'import json,sys
for e in json.load(sys.stdin)["partitions"]: print("%s %s/%d %d" % (e.get("source", "-"), e["topic"], e["partition"], e["next"]))'
}
lineage_is() { # REPO WANT [BRANCH]
	local got
	got=$(lineage "$1" "${3:-}")
	[ "$got" = "$2" ] || { echo "  lineage.json:"; echo "$got" | sed 's/^/  | /'; return 1; }
}
counted() { # REPO N: stats.json's valid and records_in, and `kiln cat` of the three splits, all N
	local valid rin n=0 s
	valid=$(git --git-dir "$1" show refs/heads/ds/main:stats.json | "$py" -c 'import json,sys; d=json.load(sys.stdin); print(d["valid"], d["records_in"])')
	for s in train dev test; do
		n=$((n + $("$kiln" cat ds --split $s --manifest "$1" --store "file://$tmp/store" | wc -l)))
	done
	[ "$valid" = "$2 $2" ] && [ "$n" -eq "$2" ] || { echo "  stats valid/records_in $valid, kiln cat $n, want $2"; return 1; }
}
clean() { # PIPELINE: kiln check finds nothing
	status_is 0 "$kiln" check "$1" && grep -qx '0 problems found' "$tmp/out" ||
		{ echo "  kiln check said:"; sed 's/^/  | /' "$tmp/out" | head -12; return 1; }
}

# --- a file run, then a Kafka run of the same name on the branch --------------------------
m=$tmp/fk.git
cp "$tmp/a.jsonl" "$tmp/fk.jsonl"
file_pipeline "$tmp/fk-file.yaml" "$m" tickets "$tmp/fk.jsonl"
kafka_pipeline "$tmp/fk-kafka.yaml" "$m" tickets
check "file then kafka: the file run commits" status_is 0 "$kiln" run "$tmp/fk-file.yaml"
check "  +60 records" added 60
check "  the Kafka run of the same name commits (exit 0)" kafka_run 0 "$tmp/fk-kafka.yaml"
check "  every message produced is curated: +90 records" added 90
check "  stats.json and kiln cat: 150 records" counted "$m" 150
check "  lineage.json: the file's and the partition's entries, each its kind" lineage_is "$m" \
	"file tickets/0 60
kafka tickets/0 90"
check "  kiln check of the Kafka pipeline: 0 problems" clean "$tmp/fk-kafka.yaml"
check "  kiln check of the file pipeline: 0 problems" clean "$tmp/fk-file.yaml"
check "  40 more messages produced" kcat -P -b "$bs" -t tickets -p 0 -l "$tmp/k2.jsonl"
check "  the next Kafka run goes on from its own offset 90: +40" kafka_run 0 "$tmp/fk-kafka.yaml"
check "  ... +40 records" added 40
cat "$tmp/a2.jsonl" >>"$tmp/fk.jsonl"
check "  the file grown by 30 lines: the next file run goes on from its line 60" status_is 0 "$kiln" run "$tmp/fk-file.yaml"
check "  ... +30 records" added 30
check "  lineage.json: file 90, kafka 130" lineage_is "$m" \
	"file tickets/0 90
kafka tickets/0 130"
check "  no gap, no duplicate: 220 records in stats.json and kiln cat" counted "$m" 220
check "  kiln show names each kind where they share a name" sh -c \
	"'$kiln' show ds --manifest '$m' | grep -q '^  kafka:tickets/0 next 130\$'"
check "  a run with nothing new of either commits nothing" kafka_run 0 "$tmp/fk-kafka.yaml"
check "  ... and the file's neither" status_is 0 "$kiln" run "$tmp/fk-file.yaml"
check "  ... still 220" counted "$m" 220

# --- kiln replay of that branch: the raw zone holds the Kafka partition only ---------------
check "kiln replay of the branch commits (exit 0)" status_is 0 "$kiln" replay "$tmp/fk-kafka.yaml" --from main \
	--set branch=replayed
check "  its lineage.json: the Kafka partition alone, where main has it" lineage_is "$m" "kafka tickets/0 130" replayed

# --- a Kafka run, then a file run of the same name -------------------------------------
m=$tmp/kf.git
file_pipeline "$tmp/kf-file.yaml" "$m" orders "$tmp/a.jsonl"
kafka_pipeline "$tmp/kf-kafka.yaml" "$m" orders
check "kafka then file: the Kafka run commits" kafka_run 0 "$tmp/kf-kafka.yaml"
check "  +90 records" added 90
check "  the file run of the same name reads its file from line 0 (exit 0)" status_is 0 "$kiln" run "$tmp/kf-file.yaml"
check "  ... +60 records" added 60
check "  stats.json and kiln cat: 150 records" counted "$m" 150
check "  lineage.json: both entries" lineage_is "$m" \
	"file orders/0 60
kafka orders/0 90"
check "  kiln check: 0 problems" clean "$tmp/kf-kafka.yaml"

# --- stdin, a file and Kafka of one name on one branch --------------------------------
m=$tmp/mix.git
cp "$tmp/a.jsonl" "$tmp/mix.jsonl"
stdin_pipeline "$tmp/mix-stdin.yaml" "$m" mixed
file_pipeline "$tmp/mix-file.yaml" "$m" mixed "$tmp/mix.jsonl"
kafka_pipeline "$tmp/mix-kafka.yaml" "$m" mixed
check "stdin, file, kafka: the stdin run commits" stdin_run "$tmp/mix-stdin.yaml" "$tmp/s.jsonl"
check "  +60 records" added 60
check "  the file run of the same name from line 0" status_is 0 "$kiln" run "$tmp/mix-file.yaml"
check "  ... +60 records" added 60
check "  the Kafka run of the same name from offset 0" kafka_run 0 "$tmp/mix-kafka.yaml"
check "  ... +90 records" added 90
check "  three entries, sorted by kind" lineage_is "$m" \
	"file mixed/0 60
kafka mixed/0 90
stdin mixed/0 60"
check "  a second stdin run goes on from offset 60" stdin_run "$tmp/mix-stdin.yaml" "$tmp/s2.jsonl"
check "  ... +30 records" added 30
cat "$tmp/a2.jsonl" >>"$tmp/mix.jsonl"
check "  a second file run from line 60" status_is 0 "$kiln" run "$tmp/mix-file.yaml"
check "  ... +30 records" added 30
check "  40 more messages produced" kcat -P -b "$bs" -t mixed -p 0 -l "$tmp/k2.jsonl"
check "  a second Kafka run from offset 90" kafka_run 0 "$tmp/mix-kafka.yaml"
check "  ... +40 records" added 40
check "  each entry moved by its own run only" lineage_is "$m" \
	"file mixed/0 90
kafka mixed/0 130
stdin mixed/0 90"
check "  no gap, no duplicate: 310 records in stats.json and kiln cat" counted "$m" 310
for k in stdin file kafka; do
	check "  kiln check of the $k pipeline: 0 problems" clean "$tmp/mix-$k.yaml"
done

# --- the quarantine: records of both kinds at the same offsets -----------------------------
# the strict contract (an older version without "click") quarantines clicks; the fixed one takes them
sed -e 's/value: \[page_view, click, search/value: [page_view, search/' -e 's/^version: 1\.2\.0$/version: 1.1.0/' \
	"$src/contracts/user-events.yaml" >"$tmp/strict.yaml"
clicks() { # IN OUT: 5 records, the first 3 clicks
	"$py" -c 'import json,sys
for i, l in enumerate(open(sys.argv[1]).read().splitlines()[:5]):
    r = json.loads(l); r["event_type"] = "click" if i < 3 else "page_view"; print(json.dumps(r))' "$1" >"$2"
}
clicks "$tmp/a.jsonl" "$tmp/qf.jsonl"
clicks "$tmp/k.jsonl" "$tmp/qk.jsonl"
check "kcat produced 5 records to clicks" kcat -P -b "$bs" -t clicks -p 0 -l "$tmp/qk.jsonl"
m=$tmp/q.git
strict() { # FILE KIND: the pipeline of that kind under the strict contract
	case $2 in
	file) { common "$m" "$tmp/strict.yaml"; printf 'source: {kind: file, path: %s, name: clicks}\n' "$tmp/qf.jsonl"; } >"$1" ;;
	kafka) {
		common "$m" "$tmp/strict.yaml"
		printf 'source: {kind: kafka, brokers: "%s", topics: [clicks], group: g-q-%s, options: {session.timeout.ms: "6000"}}\n' "$bs" "$RANDOM"
	} >"$1" ;;
	esac
}
strict "$tmp/q-file.yaml" file
strict "$tmp/q-kafka.yaml" kafka
file_pipeline "$tmp/q-fixed.yaml" "$m" clicks "$tmp/qf.jsonl"
qobjects() { (cd "$tmp/store" && find quarantine/clicks -type f -path '*/ds/main/*' | sort); }
check "quarantine: the file run quarantines its 3 clicks" status_is 0 "$kiln" run "$tmp/q-file.yaml"
check "  ... (5 records, 2 valid, 3 quarantined)" grep -q '+5 records (2 valid, 3 quarantined)' "$tmp/out"
check "  the Kafka run of the same name quarantines its 3, at the same offsets" kafka_run 0 "$tmp/q-kafka.yaml"
check "  ... (5 records, 2 valid, 3 quarantined)" grep -q '+5 records (2 valid, 3 quarantined)' "$tmp/out"
check "  two objects, each named with its kind" test "$(qobjects)" = "quarantine/clicks/0/ds/main/0-2.jsonl.zst
quarantine/clicks/0/ds/main/0-2.kafka.jsonl.zst"
check "  kiln quarantine ls: all 6 lines" test "$("$kiln" quarantine ls ds@main --store "file://$tmp/store" | grep -c '^clicks ')" = 6
check "kiln quarantine replay under the fixed contract (exit 0)" status_is 0 "$kiln" quarantine replay ds --pipeline "$tmp/q-fixed.yaml"
check "  stats.json and kiln cat: all 10 records curated" counted "$m" 10
check "  quarantine-replayed.json lists 0-2 under each kind (the file's: no source, as its objects)" sh -c \
	"git --git-dir '$m' show refs/heads/ds/main:quarantine-replayed.json | tr -d ' \n' | grep -qF '{\"topic\":\"clicks\",\"partition\":0,\"offsets\":[[0,2]]},{\"source\":\"kafka\",\"topic\":\"clicks\",\"partition\":0,\"offsets\":[[0,2]]}'"
check "  no quarantine object left" test -z "$(qobjects)"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
