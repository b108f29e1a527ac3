#!/usr/bin/env bash
# A position is never shared across source kinds (docs/PIPELINES.md,
# "Sources"): a file source and a Kafka topic (or stdin) of the same name on
# one branch would read each other's lineage.json offsets. On `kiln broker`:
#  - a file run of `tickets`, then a Kafka run of topic `tickets` on the same
#    branch: refused before reading, one line naming the branch, the name and
#    the kind that wrote the entry, exit 2, nothing curated (the branch tip
#    and the store's shards unchanged); `kiln check` reports it as a problem;
#  - the reverse order (Kafka first, then the file), and stdin after Kafka,
#    Kafka after stdin, a file after stdin and stdin after a file;
#  - `kiln replay` of a branch whose entry a file run wrote;
#  - the same name on another branch, and another name on the same branch,
#    run as before.
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

"$kiln" broker --partitions 1 --topics tickets,orders --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
poll 10 test -s "$tmp/pf"
bs=$(head -1 "$tmp/pf" 2>/dev/null)
[ -n "$bs" ] || { echo "broker did not start"; cat "$tmp/broker.out"; exit 1; }
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/key")
"$py" "$src/bench/gen-user-events.py" --records 60 --invalid-rate 0 --seed 5 -o "$tmp/a.jsonl"
"$py" "$src/bench/gen-user-events.py" --records 90 --invalid-rate 0 --seed 6 -o "$tmp/k.jsonl"
check "kcat produced 90 records to tickets" kcat -P -b "$bs" -t tickets -p 0 -l "$tmp/k.jsonl"
check "kcat produced 90 records to orders" kcat -P -b "$bs" -t orders -p 0 -l "$tmp/k.jsonl"

common() { # the pipeline's shared part: REPO
	cat <<EOF
dataset: ds
contract: $src/contracts/user-events.yaml
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/store}
manifest: {repo: $1}
EOF
}
file_pipeline() { # FILE REPO NAME
	{ common "$2"; printf 'source: {kind: file, path: %s, name: %s}\n' "$tmp/a.jsonl" "$3"; } >"$1"
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
tip() { git --git-dir "$1" rev-parse -q --verify "refs/heads/ds/${2:-main}" 2>/dev/null; }
shards() { find "$tmp/store/shards" -type f 2>/dev/null | sort; }
kafka_run() { status_is "$1" timeout 60 "$kiln" run "${@:2}" --stop-at-end; }
refused() { # KIND-THAT-WROTE NAME [BRANCH]: the one-line refusal in $tmp/err
	[ "$(wc -l <"$tmp/err")" -eq 1 ] &&
		grep -Eq "ds@${3:-main}: lineage.json holds the position of $2 \(partition 0\) that a $1 source.* wrote" "$tmp/err" ||
		{ echo "  stderr:"; sed 's/^/  | /' "$tmp/err" | head -5; return 1; }
}
unchanged() { # REPO TIP SHARDS-BEFORE: the branch and the store as they were
	[ "$(tip "$1")" = "$2" ] && [ "$(shards)" = "$3" ] || { echo "  the branch or the store changed"; return 1; }
}
problem() { # the PROBLEM line of kiln check in $tmp/out
	grep -Eq "^PROBLEM +branch +ds@main: lineage.json holds the position of $1 .*a $2 source" "$tmp/out" ||
		{ echo "  kiln check said:"; sed 's/^/  | /' "$tmp/out" | head -12; return 1; }
}

# --- a file run, then a Kafka run of the same name on the branch --------------------------
m=$tmp/fk.git
file_pipeline "$tmp/fk-file.yaml" "$m" tickets
kafka_pipeline "$tmp/fk-kafka.yaml" "$m" tickets
check "file then kafka: the file run commits" status_is 0 "$kiln" run "$tmp/fk-file.yaml"
before=$(tip "$m") sb=$(shards)
check "  the Kafka run of the same name is refused (exit 2)" kafka_run 2 "$tmp/fk-kafka.yaml"
check "  one line naming the branch, the name and the kind that wrote it" refused file tickets
check "  nothing curated: the branch and the store unchanged" unchanged "$m" "$before" "$sb"
check "  kiln check: exit 1" status_is 1 "$kiln" check "$tmp/fk-kafka.yaml"
check "  ... reporting it" problem tickets file
check "  the file pipeline itself still checks clean" status_is 0 "$kiln" check "$tmp/fk-file.yaml"
check "  kiln replay of the branch is refused too (exit 2)" status_is 2 "$kiln" replay "$tmp/fk-kafka.yaml" --from main \
	--set branch=replayed
check "  ... with the same line" refused file tickets main
kafka_pipeline "$tmp/fk-orders.yaml" "$m" orders
check "  another topic on the same branch runs (exit 0)" kafka_run 0 "$tmp/fk-orders.yaml"
check "  ... and is curated" grep -q '+90 records' "$tmp/out"
check "  the same topic on another branch runs (exit 0)" kafka_run 0 "$tmp/fk-kafka.yaml" --set branch=stream
check "  ... all of it" grep -q '+90 records' "$tmp/out"

# --- a Kafka run, then a file run of the same name -------------------------------------
m=$tmp/kf.git
file_pipeline "$tmp/kf-file.yaml" "$m" tickets
kafka_pipeline "$tmp/kf-kafka.yaml" "$m" tickets
check "kafka then file: the Kafka run commits" kafka_run 0 "$tmp/kf-kafka.yaml"
before=$(tip "$m") sb=$(shards)
check "  the file run of the same name is refused (exit 2)" status_is 2 "$kiln" run "$tmp/kf-file.yaml"
check "  one line naming the branch, the name and the kind that wrote it" refused kafka tickets
check "  nothing curated" unchanged "$m" "$before" "$sb"
check "  kiln check: exit 1, reporting it" sh -c "'$kiln' check '$tmp/kf-file.yaml' >'$tmp/out' 2>'$tmp/err'; test \$? -eq 1"
check "  ... as a problem" problem tickets kafka
stdin_pipeline "$tmp/kf-stdin.yaml" "$m" tickets
check "  a stdin run of the same name is refused (exit 2)" sh -c "'$kiln' run '$tmp/kf-stdin.yaml' <'$tmp/a.jsonl' >'$tmp/out' 2>'$tmp/err'; test \$? -eq 2"
check "  ... in one line" refused kafka tickets
check "  nothing curated" unchanged "$m" "$before" "$sb"

# --- stdin, then Kafka and a file of the same name ---------------------------------------
m=$tmp/sk.git
stdin_pipeline "$tmp/sk-stdin.yaml" "$m" tickets
kafka_pipeline "$tmp/sk-kafka.yaml" "$m" tickets
file_pipeline "$tmp/sk-file.yaml" "$m" tickets
check "stdin then kafka: the stdin run commits" sh -c "'$kiln' run '$tmp/sk-stdin.yaml' <'$tmp/a.jsonl' >'$tmp/out' 2>'$tmp/err'"
check "  its lineage entry says stdin (path \"-\")" sh -c \
	"git --git-dir '$m' show refs/heads/ds/main:lineage.json | grep -q '\"topic\":\"tickets\",\"partition\":0,\"next\":60,\"path\":\"-\",\"bytes\":0,'"
check "  a second stdin run goes on from there" sh -c "'$kiln' run '$tmp/sk-stdin.yaml' <'$tmp/a.jsonl' >'$tmp/out' 2>'$tmp/err'"
check "  ... to offset 120" sh -c "git --git-dir '$m' show refs/heads/ds/main:lineage.json | grep -q '\"next\":120,\"path\":\"-\"'"
before=$(tip "$m") sb=$(shards)
check "  the Kafka run of the same name is refused (exit 2)" kafka_run 2 "$tmp/sk-kafka.yaml"
check "  ... in one line" refused stdin tickets
check "  the file run of the same name is refused (exit 2)" status_is 2 "$kiln" run "$tmp/sk-file.yaml"
check "  ... in one line" refused stdin tickets
check "  nothing curated" unchanged "$m" "$before" "$sb"

# --- a file, then stdin of the same name ------------------------------------------------
m=$tmp/fs.git
file_pipeline "$tmp/fs-file.yaml" "$m" tickets
stdin_pipeline "$tmp/fs-stdin.yaml" "$m" tickets
check "file then stdin: the file run commits" status_is 0 "$kiln" run "$tmp/fs-file.yaml"
before=$(tip "$m") sb=$(shards)
check "  the stdin run of the same name is refused (exit 2)" sh -c "'$kiln' run '$tmp/fs-stdin.yaml' <'$tmp/a.jsonl' >'$tmp/out' 2>'$tmp/err'; test \$? -eq 2"
check "  ... in one line" refused file tickets
check "  nothing curated" unchanged "$m" "$before" "$sb"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
