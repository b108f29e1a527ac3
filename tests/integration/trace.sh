#!/usr/bin/env bash
# kiln trace (src/cli/trace.c): a file source curated in two runs (two
# commits), v1 promoted after the first. For a record of each commit, by
# --split/--record and by --shard/--line:
#  - without --pipeline: the shard, its source ranges, the commit that first
#    added it and the versions listing it; no origin, and a line saying the
#    key is needed;
#  - with --pipeline: the exact origin, checked by python3 against the input
#    file: the line at the offset holds the record's event_id (kept as is by
#    the contract) and lies in the shard's ranges; "restricted" on stderr;
#  - a Kafka source (kiln broker, kcat): the exact offset and the raw-zone
#    object holding the record, checked against what was produced;
#  - no record value in any output (pii_scan_logs); bad asks are one line,
#    exit 2.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need git kcat
tmp=$(mktemp -d)
broker_pid=
cleanup() {
	[ -n "$broker_pid" ] && kill -KILL "$broker_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
unset KILN_BRANCH KILN_SPLIT_SALT
pipeline=$src/pipelines/user-events.yaml
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
(umask 077 && echo 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f >"$tmp/hmac.key")

$py "$src/bench/gen-user-events.py" --records 400 --seed 11 -o "$tmp/in.jsonl"
check "run 1" status_is 0 "$kiln" run "$pipeline" --set shards.target_bytes=32K
c1=$(git --git-dir "$tmp/m.git" rev-parse user-events/main)
check "promote v1" status_is 0 "$kiln" promote "user-events@$c1" --pipeline "$pipeline" \
	--set promote.min_records.train=1 --set promote.min_records.dev=1 --set promote.min_records.test=1 \
	--set promote.ratio_tolerance=1 --set promote.max_quarantine_rate=1
$py "$src/bench/gen-user-events.py" --records 400 --seed 12 --append -o "$tmp/in.jsonl"
check "run 2" status_is 0 "$kiln" run "$pipeline" --set shards.target_bytes=32K
c2=$(git --git-dir "$tmp/m.git" rev-parse user-events/main)

# a shard commit 2 added, and how many train records main has
"$kiln" diff "user-events@$c1" user-events@main --shards | sed -n 's/^  + \([0-9a-f]*\) .*/\1/p' | head -1 >"$tmp/new"
new=$(cat "$tmp/new")
mkdir "$tmp/cat" # curated records: not inputs of pii_scan_logs
"$kiln" cat user-events@v1 --split train >"$tmp/cat/v1-train.jsonl"
"$kiln" cat user-events@main --split test >"$tmp/cat/main-test.jsonl"

# checks one trace document (trace.json) against the input and a record:
#   check_doc DOC RECORDS_FILE INDEX ADDED VERSIONS EXACT
check_doc() {
	$py - "$@" "$tmp/in.jsonl" <<'PY'
import json, sys
doc_path, records_path, index, added, versions, exact, input_path = sys.argv[1:8]
doc = json.load(open(doc_path))
fail = []
if doc["added"] != added:
    fail.append("added %s, expected %s" % (doc["added"], added))
if ",".join(doc["versions"]) != versions:
    fail.append("versions %r, expected %r" % (doc["versions"], versions))
if exact == "yes":
    o = doc["origin"]
    lines = open(input_path, "rb").read().split(b"\n")
    record = json.loads(open(records_path).read().split("\n")[int(index)])
    src = json.loads(lines[o["offset"]])
    if o["line"] != o["offset"] + 1 or o["raw_key"] is not None or not o["file"].endswith("in.jsonl"):
        fail.append("origin %r" % o)
    if src.get("event_id") != record["event_id"]:
        fail.append("line %d of the input is not the record's source" % o["line"])
    if not any(s["topic"] == o["topic"] and s["partition"] == o["partition"] and s["first"] <= o["offset"] <= s["last"]
               for s in doc["sources"]):
        fail.append("offset %d outside the shard's sources" % o["offset"])
elif doc["origin"] is not None:
    fail.append("an origin without the key")
if not doc["sources"]:
    fail.append("no sources")
for f in fail:
    print("  " + f)
sys.exit(1 if fail else 0)
PY
}

# --- a record of commit 1, through v1 ---------------------------------------
check "v1 train 7: trace" status_is 0 "$kiln" trace user-events@v1 --split train --record 7 --json
cp "$tmp/out" "$tmp/t1.json"
check "  without the key: shard, sources, added by commit 1, in v1, no origin" \
	check_doc "$tmp/t1.json" "$tmp/cat/v1-train.jsonl" 7 "$c1" v1 no
check "  the text form says the key is needed" \
	sh -c "'$kiln' trace user-events@v1 --split train --record 7 | grep -q '^origin .*needs the key (--pipeline FILE)'"
check "v1 train 7: trace --pipeline" status_is 0 "$kiln" trace user-events@v1 --split train --record 7 --json \
	--pipeline "$pipeline"
cp "$tmp/out" "$tmp/t1p.json"
check "  restricted, said on stderr" grep -q 'restricted: the raw zone holds personal data' "$tmp/err"
check "  the exact line of the input file" check_doc "$tmp/t1p.json" "$tmp/cat/v1-train.jsonl" 7 "$c1" v1 yes
last_v1=$(($(wc -l <"$tmp/cat/v1-train.jsonl") - 1))
check "v1 train, its last record: exact" status_is 0 "$kiln" trace user-events@v1 --split train \
	--record "$last_v1" --json --pipeline "$pipeline"
cp "$tmp/out" "$tmp/t1l.json"
check "  the exact line of the input file" check_doc "$tmp/t1l.json" "$tmp/cat/v1-train.jsonl" "$last_v1" "$c1" v1 yes

# --- a record commit 2 added, by shard and line -----------------------------
check "a shard commit 2 added" test -n "$new"
check "main --shard NEW --line 3: trace" status_is 0 "$kiln" trace user-events@main --shard "$new" --line 3 \
	--json --pipeline "$pipeline"
cp "$tmp/out" "$tmp/t2.json"
"$kiln" cat user-events@main --split "$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["split"])' "$tmp/t2.json")" \
	>"$tmp/cat/t2-split.jsonl"
# the index of that shard's line 3 in the split, as kiln cat prints it
idx=$("$kiln" ls user-events@main --split "$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["split"])' "$tmp/t2.json")" --format json |
	$py -c '
import json, sys
n = 0
for line in sys.stdin:
    s = json.loads(line)
    if s["shard"] == sys.argv[1]:
        print(n + 3); break
    n += s["records"]' "$new")
check "  added by commit 2, in no version, the exact line" check_doc "$tmp/t2.json" "$tmp/cat/t2-split.jsonl" "$idx" "$c2" "" yes
check "  --split/--record names the same shard and line" status_is 0 "$kiln" trace user-events@main \
	--split "$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["split"])' "$tmp/t2.json")" --record "$idx" --json
check "  (the same)" $py -c '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
sys.exit(0 if (a["shard"], a["line"]) == (b["shard"], b["line"]) else 1)' "$tmp/t2.json" "$tmp/out"
check "main test 0: exact" status_is 0 "$kiln" trace user-events@main --split test --record 0 --json --pipeline "$pipeline"
cp "$tmp/out" "$tmp/t3.json"
check "  the exact line of the input file" $py -c '
import json, sys
d = json.load(open(sys.argv[1]))
rec = json.loads(open(sys.argv[2]).readline())
src = json.loads(open(sys.argv[3], "rb").read().split(b"\n")[d["origin"]["offset"]])
sys.exit(0 if src["event_id"] == rec["event_id"] else 1)' "$tmp/t3.json" "$tmp/cat/main-test.jsonl" "$tmp/in.jsonl"

# --- another key finds nothing: exit 1, one line ------------------------------
(umask 077 && echo 1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100 >"$tmp/other.key")
check "another key: refused (exit 2, names both key ids)" status_is 2 env KILN_KEY_FILE="$tmp/other.key" \
	"$kiln" trace user-events@v1 --split train --record 7 --pipeline "$pipeline"
check "  one line" test "$(wc -l <"$tmp/err")" -eq 2
check "  it says why" grep -q "the pipeline's key (hmac-sha256:[0-9a-f]*) is not the version's" "$tmp/err"

# --- bad asks -----------------------------------------------------------------
n=$(wc -l <"$tmp/cat/v1-train.jsonl")
check "a record past the split: exit 2" status_is 2 "$kiln" trace user-events@v1 --split train --record "$n"
check "  one line naming the count" grep -q "^kiln trace: user-events@v1: train holds $n records, no record $n$" "$tmp/err"
check "--split without --record: exit 2" status_is 2 "$kiln" trace user-events@v1 --split train
check "--shard without --line: exit 2" status_is 2 "$kiln" trace user-events@v1 --shard "$new"
check "a shard the version lacks: exit 2" status_is 2 "$kiln" trace user-events@v1 --shard "$new" --line 0
check "  named" grep -q "user-events@v1: no shard $new" "$tmp/err"
check "--help" status_is 0 "$kiln" trace --help

# --- a Kafka source: the raw zone holds the origin ------------------------------
"$kiln" broker --partitions 1 --topics ev --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
broker_pid=$!
for _ in $(seq 100); do [ -s "$tmp/pf" ] && break; sleep 0.1; done
bs=$(head -1 "$tmp/pf" 2>/dev/null)
check "kiln broker started" test -n "$bs"
$py "$src/bench/gen-user-events.py" --records 300 --seed 13 -o "$tmp/kafka.jsonl"
check "kcat produced the records" kcat -P -b "$bs" -t ev -p 0 -l "$tmp/kafka.jsonl"
cat >"$tmp/k.yaml" <<YAML
dataset: ev
contract: $src/contracts/user-events.yaml
source: {kind: kafka, brokers: "$bs", topics: [ev], group: g1, batch: {records: 100, ms: 50}}
pseudonymise: {key_file: $tmp/hmac.key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/kstore}
manifest: {repo: $tmp/k.git}
YAML
check "kafka run --stop-at-end" status_is 0 timeout 120 "$kiln" run "$tmp/k.yaml" --stop-at-end
"$kiln" cat ev@main -m "$tmp/k.git" --store "file://$tmp/kstore" --split train >"$tmp/cat/k-train.jsonl"
check "kafka: train 9, exact" status_is 0 "$kiln" trace ev@main --split train --record 9 --json --pipeline "$tmp/k.yaml"
cp "$tmp/out" "$tmp/tk.json"
check "  the produced record at that offset, in the raw object named" $py - "$tmp/tk.json" "$tmp/cat/k-train.jsonl" \
	"$tmp/kafka.jsonl" "$tmp/kstore" <<'PY'
import json, os, sys
doc = json.load(open(sys.argv[1]))
rec = json.loads(open(sys.argv[2]).read().split("\n")[9])
produced = open(sys.argv[3], "rb").read().split(b"\n")
o = doc["origin"]
ok = (o["topic"] == "ev" and o["partition"] == 0 and o["line"] is None and o["file"] is None
      and o["raw_key"].startswith("raw/ev/0/") and os.path.isfile(os.path.join(sys.argv[4], o["raw_key"]))
      and json.loads(produced[o["offset"]])["event_id"] == rec["event_id"])
first, last = map(int, o["raw_key"].rsplit("/", 1)[1].split(".")[0].split("-"))
ok = ok and first <= o["offset"] <= last
print("" if ok else "  origin %r" % o)
sys.exit(0 if ok else 1)
PY

# no record value in anything printed
check "no personal value in any output" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
