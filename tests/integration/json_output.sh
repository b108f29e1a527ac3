#!/usr/bin/env bash
# --json on every command that prints information (docs/JSON.md): three runs
# of generated user events from a file whose name needs escaping (a quote, a
# backslash, a tab, a control character, non-ASCII), v1 and v2 promoted with
# signed tags, then log, show, diff (shards and --profile), ls, du, verify
# (--deep, a tampered shard, an untrusted signer), gc (dry run, -v, --apply,
# a missing shard), raw ls (the raw zone of a Kafka run over kiln broker)
# and cache status (after kiln cache sync --once) with --json. Every output
# is parsed by python3 -m json.tool (JSON Lines: line by line), and its
# values are held to the truth: git rev-parse and git log, the text forms
# of the same commands, the store's files. --json never changes an exit
# status, and an error still prints one line on stderr and nothing on stdout.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need git jq kcat ssh-keygen
tmp=$(mktemp -d)
broker_pid=
cleanup() {
	[ -n "$broker_pid" ] && kill -KILL "$broker_pid" 2>/dev/null
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT
unset KILN_BRANCH KILN_SPLIT_SALT

# The input's name holds what JSON must escape: ", \, a tab, U+0001, and é.
input=$tmp/$'in "q" \\ \xc3\xa9\tx\x01.jsonl'
(umask 077 && printf '%s' 5f0e2b9c41d8a7763e1c0b2a9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e >"$tmp/hmac.key") # fixed: the promote gates check split ratios of 600 records, and a random key moves them
export KILN_INPUT=$input KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
pipeline=$src/pipelines/user-events.yaml
gen() { "$py" "$src/bench/gen-user-events.py" --records "$1" --seed "$2" >>"$KILN_INPUT"; }
gates=(--set promote.min_records.train=100 --set promote.min_records.dev=5 --set promote.min_records.test=5
	--set promote.ratio_tolerance=0.05 --set promote.max_quarantine_rate=0.05)
git_m() { git --git-dir "$tmp/m.git" "$@"; }

# json_ok FILE: the file is one JSON document (json.tool parses it)
json_ok() { "$py" -m json.tool "$1" >/dev/null; }
# jsonl_ok FILE: every line is one JSON document, and there is at least one
jsonl_ok() {
	local line n=0
	while IFS= read -r line; do
		printf '%s\n' "$line" | "$py" -m json.tool >/dev/null || { echo "  not JSON: ${line:0:120}"; return 1; }
		n=$((n + 1))
	done <"$1"
	[ "$n" -gt 0 ]
}
# q FILE FILTER: jq -r over one document
q() { jq -r "$2" "$1"; }
# json_run NAME STATUS FILE COMMAND...: runs it with status STATUS, stdout in FILE
json_run() {
	local name=$1 want=$2 out=$3
	shift 3
	check "$name: exit $want" status_is "$want" "$@"
	cp "$tmp/out" "$out"
}

# --- the dataset: three runs, v1 and v2 promoted with signed tags -----------
check "keygen" status_is 0 "$kiln" keygen --out "$tmp/sign.key" --comment "release@kiln.test"
grep -o 'release@kiln.test namespaces="git" ssh-ed25519 [A-Za-z0-9+/=]*' "$tmp/out" >"$tmp/allowed_signers"
sign=(--set "manifest.signing_key=$tmp/sign.key")
for seed in 1 2; do
	gen 600 "$seed"
	check "run $seed" status_is 0 "$kiln" run "$pipeline" "${sign[@]}"
done
gen 600 3
json_run "run 3 --json" 0 "$tmp/run.json" "$kiln" run "$pipeline" "${sign[@]}" --json
check "run --json: one document" json_ok "$tmp/run.json"
check "run --json: its commit is the branch tip" test "$(q "$tmp/run.json" .commit)" = "$(git_m rev-parse refs/heads/user-events/main)"
check "run --json: counts add up, offsets of the third 600 lines" "$py" -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["records_in"] == 600 and r["valid"] + r["quarantined"] == 600, r
assert sum(r["splits"].values()) == r["valid"], r
assert r["source"] == "file" and r["ref"] == "refs/heads/user-events/main" and r["first_offset"] == 1200 and r["next_offset"] == 1800, r
' "$tmp/run.json" "$tmp/m.git"
json_run "run --json, nothing new" 0 "$tmp/run0.json" "$kiln" run "$pipeline" "${sign[@]}" --json
check "run --json, nothing new: commit null, 0 records" test "$(q "$tmp/run0.json" '[.commit, .records_in, .next_offset] | @text')" = '[null,0,1800]'
c1=$(git_m rev-list --reverse refs/heads/user-events/main | sed -n 1p)
c2=$(git_m rev-list --reverse refs/heads/user-events/main | sed -n 2p)
c3=$(git_m rev-parse refs/heads/user-events/main)
check "promote v1" status_is 0 "$kiln" promote "user-events@$c1" --pipeline "$pipeline" "${gates[@]}" "${sign[@]}"
check "promote v2" status_is 0 "$kiln" promote "user-events@$c2" --pipeline "$pipeline" "${gates[@]}" "${sign[@]}"

# --- --help names --json on every command ------------------------------------
for cmd in run log show diff ls du verify gc raw cache; do
	check "$cmd --help names --json" status_is 0 "$kiln" $cmd --help
	check "$cmd --help: the usage block and an option row name --json" \
		sh -c "sed '/^\$/q' '$tmp/out' | grep -q -- '--json' && grep -Eq '^ +(-j, )?--json ' '$tmp/out'"
done

# --- log ---------------------------------------------------------------------
json_run "log --json" 0 "$tmp/log.jsonl" "$kiln" log user-events --json
check "log --json: JSON Lines" jsonl_ok "$tmp/log.jsonl"
check "log --json: the commits, newest first, equal git rev-list" \
	test "$(jq -r .commit "$tmp/log.jsonl" | tr '\n' ' ')" = "$(git_m rev-list refs/heads/user-events/main | tr '\n' ' ')"
check "log --json: time_unix equals the commit time" \
	test "$(jq -r .time_unix "$tmp/log.jsonl" | tr '\n' ' ')" = "$(git_m log --format=%ct refs/heads/user-events/main | tr '\n' ' ')"
check "log --json: time is RFC 3339 UTC of time_unix" "$py" -c '
import datetime, json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    want = datetime.datetime.fromtimestamp(d["time_unix"], datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert d["time"] == want, (d["time"], want)
' "$tmp/log.jsonl"
check "log --json: tags of v1's and v2's commits" \
	test "$(jq -c 'select(.commit == "'"$c1"'").tags' "$tmp/log.jsonl")$(jq -c 'select(.commit == "'"$c2"'").tags' "$tmp/log.jsonl")$(jq -c 'select(.commit == "'"$c3"'").tags' "$tmp/log.jsonl")" = '["v1"]["v2"][]'
check "log --json: summary equals git's subject" \
	test "$(jq -r .summary "$tmp/log.jsonl" | head -1)" = "$(git_m log -1 --format=%s refs/heads/user-events/main)"
check "log --json: dataset on every line" test "$(jq -r .dataset "$tmp/log.jsonl" | sort -u)" = user-events
check "log -n 1 --json: one line" status_is 0 "$kiln" log user-events@v2 -n 1 --json
check "log -n 1 --json: v2's commit" test "$(jq -r .commit "$tmp/out")" = "$c2"

# --- show --------------------------------------------------------------------
json_run "show v1 --json" 0 "$tmp/show.json" "$kiln" show user-events@v1 --json
check "show --json: one JSON document" json_ok "$tmp/show.json"
check "show --json: commit equals git rev-parse v1^{commit}" \
	test "$(q "$tmp/show.json" .commit)" = "$(git_m rev-parse 'refs/tags/user-events/v1^{commit}')"
check "show --json: tag equals the tag object's id" \
	test "$(q "$tmp/show.json" .tag)" = "$(git_m rev-parse refs/tags/user-events/v1)"
check "show --json: ref" test "$(q "$tmp/show.json" .ref)" = refs/tags/user-events/v1
check "show --json: time_unix equals the commit time" \
	test "$(q "$tmp/show.json" .time_unix)" = "$(git_m log -1 --format=%ct "$c1")"
check "show --json: the key id of dataset.json" \
	test "$(q "$tmp/show.json" .pseudonymisation.key_id)" = "$(git_m show "$c1:dataset.json" | jq -r .pseudonymisation.key_id)"
check "show --json: numbers are numbers (ratios, key_version, zstd_level)" \
	test "$(jq -c '[.split.ratios.train, .pseudonymisation.key_version, .shard_settings.zstd_level] | map(type)' "$tmp/show.json")" = '["number","number","number"]'
check "show --json: stats equal stats.json" \
	test "$(jq -c '.stats | {records_in, valid, quarantined}' "$tmp/show.json")" = "$(git_m show "$c1:stats.json" | jq -c '{records_in, valid, quarantined}')"
check "show --json: counted totals equal the text form's" sh -c "
	'$kiln' show user-events@v1 | awk '\$1 == \"total\" {print \$2, \$3, \$4, \$5}' >'$tmp/show.total'
	test \"\$(jq -r '.total | \"\\(.shards) \\(.records) \\(.bytes) \\(.raw_bytes)\"' '$tmp/show.json')\" = \"\$(cat '$tmp/show.total')\""
check "show --json: stats agree with the shard lists" test "$(q "$tmp/show.json" .stats.agrees)" = true
check "show --json: the lineage path, escaped, reads back byte for byte" "$py" -c '
import json, os, sys
d = json.load(open(sys.argv[1]))
want = os.environ["KILN_INPUT"]
assert [e["path"] for e in d["lineage"]] == [want], (d["lineage"], want)
assert d["lineage"][0]["topic"] == "user-events" and d["lineage"][0]["next"] == 600
' "$tmp/show.json"
check "show --json: the raw control character is escaped" grep -q '\\u0001' "$tmp/show.json"
check "show --json: a commit id names no ref" status_is 0 "$kiln" show "user-events@$c3" --json
check "show --json: ref and tag null for a commit id" test "$(jq -c '[.ref, .tag, .commit]' "$tmp/out")" = "[null,null,\"$c3\"]"
check "show --json on a bad ref: exit 2" status_is 2 "$kiln" show user-events@v9 --json
check "show --json on a bad ref: nothing on stdout, one line on stderr" \
	sh -c "test ! -s '$tmp/out' && test \$(wc -l <'$tmp/err') -eq 1 && grep -q 'user-events@v9' '$tmp/err'"

# --- diff ----------------------------------------------------------------------
json_run "diff v1 v2 --json" 0 "$tmp/diff.json" "$kiln" diff user-events@v1 user-events@v2 --json
check "diff --json: one JSON document" json_ok "$tmp/diff.json"
check "diff --json: base and now name v1 and v2" \
	test "$(jq -r '"\(.base.commit) \(.now.commit) \(.base.ref) \(.now.ref)"' "$tmp/diff.json")" = "$c1 $c2 refs/tags/user-events/v1 refs/tags/user-events/v2"
"$kiln" diff user-events@v1 user-events@v2 >"$tmp/diff.txt"
check "diff --json: every split's counts equal the text form's" sh -c "
	jq -r '.splits | to_entries[] | \"\(.key): +\(.value.added.shards) shards (+\(.value.added.records) records, +\(.value.added.bytes) bytes), -\(.value.removed.shards) shards (-\(.value.removed.records) records, -\(.value.removed.bytes) bytes)\"' '$tmp/diff.json' | sort >'$tmp/diff.from-json'
	sort '$tmp/diff.txt' | cmp -s - '$tmp/diff.from-json'"
check "diff --json: v2 added shards" test "$(jq '[.splits[].added.shards] | add' "$tmp/diff.json")" -gt 0
check "diff --json without --shards lists no shard" test "$(jq '[.splits[] | has("shards")] | any' "$tmp/diff.json")" = false
json_run "diff --shards --json" 0 "$tmp/diffs.json" "$kiln" diff user-events@v1 user-events@main --shards --json
check "diff --shards --json: one JSON document" json_ok "$tmp/diffs.json"
"$kiln" diff user-events@v1 user-events@main --shards | sed -n 's/^  \([+-]\) \([0-9a-f]*\) \([0-9]*\) \([0-9]*\)$/\1 \2 \3 \4/p' | sort >"$tmp/diffs.txt"
check "diff --shards --json: the shards equal the text form's" sh -c "
	jq -r '.splits[].shards[] | \"\(if .change == \"added\" then \"+\" else \"-\" end) \(.shard) \(.records) \(.bytes)\"' '$tmp/diffs.json' | sort | cmp -s - '$tmp/diffs.txt' && test -s '$tmp/diffs.txt'"
json_run "diff --profile --json" 0 "$tmp/drift.json" "$kiln" diff user-events@v1 user-events@v2 --profile --psi 99 --null-rate 99 --json
check "diff --profile --json: one JSON document" json_ok "$tmp/drift.json"
check "diff --profile --json: base and now, dataset and commits" \
	test "$(jq -r '"\(.base.dataset) \(.base.commit) \(.now.commit) \(.flagged)"' "$tmp/drift.json")" = "user-events $c1 $c2 0"
check "diff --json on a bad ref: exit 2, nothing on stdout" \
	sh -c "'$kiln' diff user-events@v1 user-events@v9 --json >'$tmp/o' 2>'$tmp/e'; test \$? -eq 2 && test ! -s '$tmp/o' && test \$(wc -l <'$tmp/e') -eq 1"

# --- ls ------------------------------------------------------------------------
for split in train dev test; do
	json_run "ls --split $split --json" 0 "$tmp/ls-$split.jsonl" "$kiln" ls user-events@v2 --split $split --json
	"$kiln" ls user-events@v2 --split $split >"$tmp/ls-$split.txt"
	"$kiln" ls user-events@v2 --split $split --format json >"$tmp/ls-$split.format"
	check "ls --json ($split): JSON Lines" jsonl_ok "$tmp/ls-$split.jsonl"
	check "ls --json ($split): as many shards as the text form's lines" \
		test "$(wc -l <"$tmp/ls-$split.jsonl")" -eq "$(wc -l <"$tmp/ls-$split.txt")"
	check "ls --json ($split): hash, records, bytes and url equal the text form's" sh -c "
		jq -r '\"\(.shard) \(.records) \(.bytes) \(.url)\"' '$tmp/ls-$split.jsonl' | cmp -s - '$tmp/ls-$split.txt'"
	check "ls --json ($split): the same as --format json" cmp -s "$tmp/ls-$split.jsonl" "$tmp/ls-$split.format"
	check "ls --json ($split): split, dataset, ref and commit on every line" \
		test "$(jq -r '"\(.split) \(.dataset) \(.ref) \(.commit)"' "$tmp/ls-$split.jsonl" | sort -u)" = "$split user-events refs/tags/user-events/v2 $c2"
done
check "ls --json: the shards' records add up to show's" \
	test "$(cat "$tmp"/ls-*.jsonl | jq -s 'map(.records) | add')" -eq "$("$kiln" show user-events@v2 --json | jq .total.records)"

# --- du ------------------------------------------------------------------------
check "branch exp from v1" status_is 0 "$kiln" branch user-events exp v1
json_run "du --json" 0 "$tmp/du.json" "$kiln" du user-events --json
"$kiln" du user-events --bytes >"$tmp/du.txt"
check "du --json: one JSON document" json_ok "$tmp/du.json"
check "du --json: v1, v2, main and exp" test "$(jq -r '[.versions[].name] | join(" ")' "$tmp/du.json")" = "v1 v2 main exp"
check "du --json: shards, records and bytes equal du --bytes" sh -c "
	jq -r '.versions[] | \"user-events@\(.name) \(.type) \(.commit[0:12]) \(.shards) \(.records) \(.bytes) \(.unique_bytes) \(.shared_bytes)\"' '$tmp/du.json' >'$tmp/du.from-json'
	sed -n '2,5p' '$tmp/du.txt' | awk '{print \$1, \$2, \$3, \$4, \$5, \$6, \$7, \$8}' | cmp -s - '$tmp/du.from-json'"
check "du --json: the total equals du --bytes's last row" \
	test "$(jq -r '"\(.total.shards) \(.total.bytes)"' "$tmp/du.json")" = "$(tail -1 "$tmp/du.txt" | awk '{print $3, $4}')"
check "du --json: commits and refs equal git's" sh -c "
	jq -r '.versions[] | \"\(.ref) \(.commit)\"' '$tmp/du.json' | while read -r ref commit; do
		test \"\$(git --git-dir '$tmp/m.git' rev-parse \"\$ref^{commit}\")\" = \"\$commit\" || exit 1
	done"
check "du --json: exp shares every byte with v1" test "$(jq '.versions[] | select(.name == "exp") | .unique_bytes' "$tmp/du.json")" -eq 0

# --- verify ----------------------------------------------------------------------
json_run "verify v2 --deep --json" 0 "$tmp/verify.json" "$kiln" verify user-events@v2 --deep --allowed-signers "$tmp/allowed_signers" --json
check "verify --json: one JSON document" json_ok "$tmp/verify.json"
fp=$(ssh-keygen -lf "$tmp/sign.key.pub" 2>/dev/null | awk '{print $2}')
[ -n "$fp" ] || fp=$(ssh-keygen -lf <(grep -o 'ssh-ed25519 [A-Za-z0-9+/=]*' "$tmp/allowed_signers") | awk '{print $2}')
check "verify --json: verified, good signature by the trusted key" \
	test "$(jq -r '"\(.verified) \(.signature.state) \(.signature.trusted) \(.signature.fingerprint)"' "$tmp/verify.json")" = "true good true $fp"
check "verify --json: every shard of v2 verified" \
	test "$(q "$tmp/verify.json" .shards_verified)" -eq "$(cat "$tmp"/ls-*.jsonl | wc -l)"
check "verify --json: commit and tag" \
	test "$(jq -r '"\(.commit) \(.tag)"' "$tmp/verify.json")" = "$c2 $(git_m rev-parse refs/tags/user-events/v2)"
check "verify --json: no problems, trusted keys given" test "$(jq -c '[.problems, .signature.keys_given]' "$tmp/verify.json")" = '[[],true]'
"$kiln" keygen --out "$tmp/other.key" --comment other >"$tmp/other.out" 2>&1
grep -o 'other namespaces="git" ssh-ed25519 [A-Za-z0-9+/=]*' "$tmp/other.out" >"$tmp/other_signers"
json_run "verify --json, an untrusted signer" 1 "$tmp/untrusted.json" "$kiln" verify user-events@v2 --allowed-signers "$tmp/other_signers" --json
check "verify --json, untrusted: the verdict" \
	test "$(jq -r '"\(.verified) \(.signature.state) \(.signature.trusted) \(.signature.ok) \(.problems | length)"' "$tmp/untrusted.json")" = "false good false false 1"
check "verify --json, untrusted: the problem also on stderr" grep -q '^kiln verify: ' "$tmp/err"
victim=$(jq -r 'select(.split == "train") | .key' "$tmp/ls-train.jsonl" | head -1)
victim_hash=$(basename "$victim" .jsonl.zst)
cp "$tmp/store/$victim" "$tmp/victim.bak"
printf 'x' | dd of="$tmp/store/$victim" bs=1 seek=20 conv=notrunc 2>/dev/null
check "verify --deep (text) on a tampered shard: exit 1" status_is 1 "$kiln" verify user-events@v2 --deep
json_run "verify --deep --json on a tampered shard" 1 "$tmp/tampered.json" "$kiln" verify user-events@v2 --deep --json
check "verify --json, tampered: one JSON document" json_ok "$tmp/tampered.json"
check "verify --json, tampered: not verified, one problem naming the shard" \
	test "$(jq -r '"\(.verified) \(.problems | length) \(.problems[0] | contains("'"$victim_hash"'"))"' "$tmp/tampered.json")" = "false 1 true"
check "verify --json, tampered: the same problem on stderr" \
	test "$(sed -n 's/^kiln verify: //p' "$tmp/err")" = "$(jq -r '.problems[0]' "$tmp/tampered.json")"
check "verify --json, tampered: the intact shards counted" \
	test "$(q "$tmp/tampered.json" .shards_verified)" -eq $(($(cat "$tmp"/ls-*.jsonl | wc -l) - 1))
cp "$tmp/victim.bak" "$tmp/store/$victim"
check "verify --json on a bad ref: exit 2, nothing on stdout" \
	sh -c "'$kiln' verify user-events@v9 --json >'$tmp/o' 2>'$tmp/e'; test \$? -eq 2 && test ! -s '$tmp/o' && test \$(wc -l <'$tmp/e') -eq 1"

# --- gc --------------------------------------------------------------------------
orphan=shards/00/0000000000000000000000000000000000000000000000000000000000000000.jsonl.zst
mkdir -p "$tmp/store/shards/00"
printf 'orphan' >"$tmp/store/$orphan"
touch -d '2 hours ago' "$tmp/store/$orphan"
before=$(find "$tmp/store/shards" -type f | wc -l)
json_run "gc --json (dry run)" 0 "$tmp/gc.jsonl" "$kiln" gc --json
check "gc --json: JSON Lines" jsonl_ok "$tmp/gc.jsonl"
check "gc --json: without -v only the summary" test "$(wc -l <"$tmp/gc.jsonl")" -eq 1
check "gc --json: the summary counts the store" \
	test "$(jq -r '.summary | "\(.apply) \(.objects) \(.orphans) \(.orphan_bytes) \(.deleted) \(.missing) \(.manifest)"' "$tmp/gc.jsonl")" = "false $before 1 6 0 0 null"
"$kiln" gc >"$tmp/gc.txt"
check "gc --json: objects and bytes equal the text form's" \
	test "$(jq -r '.summary | "store: \(.objects) shards, \(.object_bytes) bytes"' "$tmp/gc.jsonl")" = "$(grep -o '^store: [0-9]* shards, [0-9]* bytes' "$tmp/gc.txt")"
json_run "gc -v --json (dry run)" 0 "$tmp/gcv.jsonl" "$kiln" gc -v --json
check "gc -v --json: JSON Lines" jsonl_ok "$tmp/gcv.jsonl"
check "gc -v --json: the orphan, then the summary" \
	test "$(jq -c 'select(.kind) | [.kind, .key, .bytes]' "$tmp/gcv.jsonl")$(tail -1 "$tmp/gcv.jsonl" | jq -c 'has("summary")')" = "[\"orphan\",\"$orphan\",6]true"
check "gc --json dry run deletes nothing" test "$(find "$tmp/store/shards" -type f | wc -l)" -eq "$before"
mv "$tmp/store/$victim" "$tmp/victim.moved"
json_run "gc --json with a referenced shard missing" 1 "$tmp/gcm.jsonl" "$kiln" gc --json
check "gc --json, missing: the key and the count" \
	test "$(jq -c 'select(.kind == "missing") | .key' "$tmp/gcm.jsonl") $(tail -1 "$tmp/gcm.jsonl" | jq .summary.missing)" = "\"$victim\" 1"
check "gc (text) with a referenced shard missing: exit 1 too" status_is 1 "$kiln" gc
mv "$tmp/victim.moved" "$tmp/store/$victim"
json_run "gc -v --apply --json" 0 "$tmp/gca.jsonl" "$kiln" gc -v --apply --json
check "gc --apply --json: JSON Lines" jsonl_ok "$tmp/gca.jsonl"
check "gc --apply --json: the orphan deleted" \
	test "$(jq -c 'select(.kind) | [.kind, .key]' "$tmp/gca.jsonl")" = "[\"deleted\",\"$orphan\"]"
check "gc --apply --json: the summary, with the manifest's compaction" \
	test "$(tail -1 "$tmp/gca.jsonl" | jq -r '.summary | "\(.apply) \(.deleted) \(.deleted_bytes) \(.manifest | type) \(.manifest.packed > 0)"')" = "true 1 6 object true"
check "gc --apply --json removed exactly the orphan" test "$(find "$tmp/store/shards" -type f | wc -l)" -eq $((before - 1))

# --- cache status ----------------------------------------------------------------
cat >"$tmp/cache.yaml" <<EOF
store: {url: file://$tmp/store}
manifest: $tmp/m.git
dir: $tmp/cache
size_limit: 100M
watermarks: {high: 0.9, low: 0.8}
pins: [user-events@v1, user-events@main]
concurrency: 2
EOF
check "cache sync --once" status_is 0 "$kiln" cache sync "$tmp/cache.yaml" --once
json_run "cache status --json" 0 "$tmp/cache.json" "$kiln" cache status "$tmp/cache.yaml" --json
check "cache status --json: one JSON document" json_ok "$tmp/cache.json"
check "cache status --json: shards and bytes equal the files under shards/" \
	test "$(jq -r '"\(.shards) \(.used_bytes)"' "$tmp/cache.json")" = "$(find "$tmp/cache/shards" -type f | wc -l) $(find "$tmp/cache/shards" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')"
check "cache status --json: the pins, resolved to git's commits, ready" \
	test "$(jq -r '.pins[] | "\(.pin) \(.dataset) \(.ref) \(.commit) \(.ready) \(.follows)"' "$tmp/cache.json" | tr '\n' ';')" = "user-events@v1 user-events refs/tags/user-events/v1 $c1 true false;user-events@main user-events refs/heads/user-events/main $c3 true true;"
check "cache status --json: the last sync ok, with its time twice" "$py" -c '
import datetime, json, sys, time
d = json.load(open(sys.argv[1]))
s = d["last_sync"]
assert s["ok"] is True and s["error"] is None and s["failed"] == 0, s
assert abs(s["time_unix"] - time.time()) < 600, s
assert s["time"] == datetime.datetime.fromtimestamp(s["time_unix"], datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
assert d["size_limit"] == 100 * 1024 * 1024 and d["high_watermark"] == 0.9 and d["pins_known"] is True
assert s["fetched"] == d["shards"], (s, d["shards"])
' "$tmp/cache.json"
check "cache sync --json is refused (status only): exit 2" status_is 2 "$kiln" cache sync "$tmp/cache.yaml" --json

# --- raw ls: the raw zone of a Kafka run -------------------------------------------
"$kiln" broker --partitions 2 --topics ev --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
broker_pid=$!
poll 10 test -s "$tmp/pf"
bs=$(head -1 "$tmp/pf" 2>/dev/null)
check "broker started" test -n "$bs"
"$py" "$src/bench/gen-user-events.py" --records 400 --seed 9 -o "$tmp/k.raw"
split -n l/2 -d "$tmp/k.raw" "$tmp/kpart."
rc=0
for p in 0 1; do kcat -P -b "$bs" -t ev -p "$p" -l "$tmp/kpart.0$p" 2>>"$tmp/kcat.err" || rc=$?; done
check "kcat produced the records" test "$rc" -eq 0
cat >"$tmp/k.yaml" <<EOF
dataset: ev
contract: $src/contracts/user-events.yaml
source:
  kind: kafka
  brokers: $bs
  topics: [ev]
  group: g1
  batch: {records: 50, ms: 50}
  options:
    session.timeout.ms: "3000"
    heartbeat.interval.ms: "300"
pseudonymise: {key_file: $tmp/hmac.key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/kstore}
manifest: {repo: $tmp/k.git}
snapshot: {records: 200, seconds: 1, drain_seconds: 20}
EOF
check "kafka run --stop-at-end" status_is 0 timeout 120 "$kiln" run "$tmp/k.yaml" --stop-at-end
json_run "raw ls --json" 0 "$tmp/raw.jsonl" "$kiln" raw ls --store "file://$tmp/kstore" --json
"$kiln" raw ls --store "file://$tmp/kstore" >"$tmp/raw.txt"
check "raw ls --json: JSON Lines" jsonl_ok "$tmp/raw.jsonl"
check "raw ls --json: as many objects as the text form's lines" \
	test "$(wc -l <"$tmp/raw.jsonl")" -eq "$(wc -l <"$tmp/raw.txt")"
check "raw ls --json: key, first and last equal the text form's" \
	sh -c "jq -r '\"\(.key) \(.first) \(.last)\"' '$tmp/raw.jsonl' | cmp -s - '$tmp/raw.txt'"
check "raw ls --json: the objects are the files under raw/" \
	test "$(jq -r .key "$tmp/raw.jsonl" | sort | tr '\n' ' ')" = "$(cd "$tmp/kstore" && find raw -type f | sort | tr '\n' ' ')"
check "raw ls --json: topic and partition match each key" \
	test "$(jq -r 'select(.key != "raw/\(.topic)/\(.partition)/\(.first)-\(.last).jsonl.zst") | .key' "$tmp/raw.jsonl" | wc -l)" -eq 0
check "raw ls --json: every offset of both partitions covered" \
	test "$(jq -s 'group_by(.partition) | map((map(.last) | max) + 1) | add' "$tmp/raw.jsonl")" -eq 400
json_run "raw ls --partition 1 --json" 0 "$tmp/raw1.jsonl" "$kiln" raw ls --store "file://$tmp/kstore" --partition 1 --json
check "raw ls --partition 1 --json: partition 1 only" test "$(jq -r .partition "$tmp/raw1.jsonl" | sort -u)" = 1
check "raw cat --json is refused: exit 2" status_is 2 "$kiln" raw cat --store "file://$tmp/kstore" --json
check "raw ls --json on a bad store: exit 2, nothing on stdout" \
	sh -c "'$kiln' raw ls --store 'bogus://x' --json >'$tmp/o' 2>'$tmp/e'; test \$? -eq 2 && test ! -s '$tmp/o' && test \$(wc -l <'$tmp/e') -eq 1"

# --- promote --json (last: v3 changes what log and show say of c3) ------------
json_run "promote --json, a gate fails" 1 "$tmp/prom-fail.json" "$kiln" promote "user-events@$c3" --pipeline "$pipeline" \
	"${gates[@]}" --set promote.min_records.train=100000 "${sign[@]}" --json
check "promote --json, a gate fails: one document, passed false, no tag" \
	test "$(q "$tmp/prom-fail.json" '[.passed, .tag, ([.gates[] | select(.pass == false)] | length > 0)] | @text')" = '[false,null,true]'
check "  the failed gate still named on stderr" grep -q 'release gate failed: min_records' "$tmp/err"
json_run "promote --dry-run --json" 0 "$tmp/prom-dry.json" "$kiln" promote "user-events@$c3" --pipeline "$pipeline" \
	"${gates[@]}" "${sign[@]}" --dry-run --json
check "promote --dry-run --json: passed, version v3, no tag" \
	test "$(q "$tmp/prom-dry.json" '[.passed, .version, .tag, .dry_run, .commit] | @text')" = "[true,\"v3\",null,true,\"$c3\"]"
check "  nothing tagged" sh -c '! git --git-dir "$1" rev-parse -q --verify refs/tags/user-events/v3' _ "$tmp/m.git"
json_run "promote --json" 0 "$tmp/prom.json" "$kiln" promote "user-events@$c3" --pipeline "$pipeline" "${gates[@]}" "${sign[@]}" --json
check "promote --json: the tag object git has, signed, every gate passed" \
	test "$(q "$tmp/prom.json" '[.tag, .signed, .version, ([.gates[] | .pass] | all)] | @text')" = "[\"$(git_m rev-parse refs/tags/user-events/v3)\",true,\"v3\",true]"
check "  gates as the text form prints them" test "$(q "$tmp/prom.json" '.gates | length')" -eq "$(git_m cat-file tag refs/tags/user-events/v3 | sed -n '/^gates:$/,/^$/p' | grep -c '^  ')"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
