#!/usr/bin/env bash
# lineage.json written before its entries named their source kind keeps
# reading (docs/FORMATS.md, "lineage.json": an entry without "source" has the
# kind its shape tells). tests/fixtures/lineage-v1.tar.gz is a repository, its
# store, key and inputs as a kiln of commit d7fced1 left them
# (tests/fixtures/make-lineage-v1.sh): a file run of `events`, a Kafka run of
# topic `clicks` and a stdin run of `feed`, 20 records each, a quarter of
# them invalid (quarantine objects named without their kind). This kiln:
#  - reads the old entries with their kinds (kiln show --json) and checks
#    each pipeline clean;
#  - resumes each source from its own position: the file at line 20 of the
#    grown file, Kafka at offset 20, stdin at offset 20, 20 records each, no
#    gap and no duplicate (stats.json, kiln cat);
#  - writes "source" into every entry on its first commit, the ones that
#    commit did not move included;
#  - reads the old quarantine objects as they are beside the new ones, named
#    with their kind (kiln quarantine ls counts every quarantined record).
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need git kcat tar
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

check "the fixture unpacks" tar -xzf "$src/tests/fixtures/lineage-v1.tar.gz" -C "$tmp"
d=$tmp/lineage-v1 m=$tmp/lineage-v1/m.git
chmod 600 "$d/key"
"$kiln" broker --partitions 1 --topics clicks --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
poll 10 test -s "$tmp/pf"
bs=$(head -1 "$tmp/pf" 2>/dev/null)
[ -n "$bs" ] || { echo "broker did not start"; cat "$tmp/broker.out"; exit 1; }
# the same 20 messages at offsets 0-19 as when the fixture was made, then 20 more
check "kcat produced 40 records to clicks" kcat -P -b "$bs" -t clicks -p 0 -l "$d/in/clicks.jsonl"

common() {
	cat <<EOF
dataset: ds
contract: $src/contracts/user-events.yaml
pseudonymise: {key_file: $d/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$d/store}
manifest: {repo: $m}
EOF
}
{ common; echo "source: {kind: file, path: $d/in/events.jsonl, name: events, max_record_bytes: 4096}"; } >"$tmp/file.yaml"
{ common; echo "source: {kind: stdin, name: feed, max_record_bytes: 4096}"; } >"$tmp/stdin.yaml"
{ common; echo "source: {kind: kafka, brokers: \"$bs\", topics: [clicks], group: g-mig, max_record_bytes: 4096, options: {session.timeout.ms: \"6000\"}}"; } >"$tmp/kafka.yaml"

lineage_raw() { git --git-dir "$m" show refs/heads/ds/main:lineage.json; }
kinds() { # "source topic/partition next" per lineage.json entry, "-" where it names none
	lineage_raw | "$py" -c 'import json,sys
for e in json.load(sys.stdin)["partitions"]: print("%s %s/%d %d" % (e.get("source", "-"), e["topic"], e["partition"], e["next"]))'
}
kinds_are() {
	local got
	got=$(kinds)
	[ "$got" = "$1" ] || { echo "  lineage.json:"; echo "$got" | sed 's/^/  | /'; return 1; }
}
added() { grep -q "$1" "$tmp/out" || { echo "  run said:"; sed 's/^/  | /' "$tmp/out" | head -5; return 1; }; }
counted() { # N: stats.json's records_in N, its valid what `kiln cat` of the three splits reads,
	# its quarantined what `kiln quarantine ls` lists, the two adding up to N
	local st n=0 q s
	st=$(git --git-dir "$m" show refs/heads/ds/main:stats.json | "$py" -c 'import json,sys; d=json.load(sys.stdin); print(d["records_in"], d["valid"], d["quarantined"])')
	for s in train dev test; do
		n=$((n + $("$kiln" cat ds --split $s --manifest "$m" --store "file://$d/store" | wc -l)))
	done
	q=$("$kiln" quarantine ls ds@main --store "file://$d/store" | grep -cE '^(clicks|events|feed) ')
	[ "$st" = "$1 $n $q" ] && [ $((n + q)) -eq "$1" ] ||
		{ echo "  stats records_in/valid/quarantined $st, kiln cat $n, quarantine ls $q, want $1 in all"; return 1; }
}
qobjects() { (cd "$d/store" && find quarantine -type f | sort); }
unnamed() { # the objects are named without a kind
	[ -n "$1" ] && ! grep -qE '\.(file|kafka|stdin)\.jsonl\.zst$' <<<"$1"
}
kept() { # OBJECTS: each still there
	local now o
	now=$(qobjects)
	for o in $1; do grep -qxF "$o" <<<"$now" || { echo "  $o is gone"; return 1; }; done
}
new_kinds() { # OLD-OBJECTS: the kinds the other objects' names end with ("(none)": a file source's)
	qobjects | grep -vxF "$1" | sed -E 's/.*\/[0-9]+-[0-9]+\.jsonl\.zst$/(none)/; s/.*\.([a-z]+)\.jsonl\.zst$/\1/' |
		sort -u | tr '\n' ' '
}

check "the fixture's lineage.json names no kind" kinds_are "- clicks/0 20
- events/0 20
- feed/0 20"
check "the fixture holds 60 records" counted 60
old_objects=$(qobjects)
check "  its quarantine objects are named without a kind" unnamed "$old_objects"
check "kiln show --json reads each old entry with its kind" sh -c \
	"'$kiln' show ds --manifest '$m' --json | '$py' -c 'import json,sys; l=json.load(sys.stdin)[\"lineage\"]; assert [(e[\"source\"], e[\"topic\"]) for e in l] == [(\"kafka\",\"clicks\"),(\"file\",\"events\"),(\"stdin\",\"feed\")], l'"
for k in file stdin kafka; do
	check "kiln check of the $k pipeline: 0 problems" status_is 0 "$kiln" check "$tmp/$k.yaml"
done

cat "$d/in/events-more.jsonl" >>"$d/in/events.jsonl"
check "the file run resumes at line 20 of the grown file" status_is 0 "$kiln" run "$tmp/file.yaml"
check "  +20 records, offsets 20-39" added '+20 records .*offsets 20-39 of events'
check "  its commit writes \"source\" into every entry, the ones it did not move too" kinds_are "kafka clicks/0 20
file events/0 40
stdin feed/0 20"
check "  the file's entry names the file where it is now" sh -c "git --git-dir '$m' show refs/heads/ds/main:lineage.json | grep -qF '\"path\":\"$d/in/events.jsonl\"'"
check "the Kafka run resumes at offset 20" status_is 0 timeout 60 "$kiln" run "$tmp/kafka.yaml" --stop-at-end
check "  +20 records" added '+20 records'
check "the stdin run resumes at offset 20" sh -c "'$kiln' run '$tmp/stdin.yaml' <'$d/in/feed-more.jsonl' >'$tmp/out' 2>'$tmp/err'"
check "  +20 records, offsets 20-39" added '+20 records .*offsets 20-39 of feed'
check "each entry where its own runs left it" kinds_are "kafka clicks/0 40
file events/0 40
stdin feed/0 40"
check "no gap, no duplicate: 120 records in stats.json, kiln cat and the quarantine" counted 120
check "  the old quarantine objects are as they were" kept "$old_objects"
check "  the new ones are named with their kind (a file source's without, as before)" test "$(new_kinds "$old_objects")" = "(none) kafka stdin "
check "a Kafka run with nothing new commits nothing" status_is 0 timeout 60 "$kiln" run "$tmp/kafka.yaml" --stop-at-end
check "  still 120" counted 120

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
