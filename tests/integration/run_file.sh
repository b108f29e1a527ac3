#!/usr/bin/env bash
# `kiln run` end to end with a file source: generated user events (5 %
# invalid, every kind including too_large, too_deep and invalid_utf8) are
# curated into a file:// store and a bare manifest repository, then
# tests/integration/curate_check.py recomputes tokens, splits, shard hashes,
# quarantine, lineage and stats from docs/FORMATS.md and holds every record
# to the generator's expected outcome (--expect). Also: resuming
# after appended records, a run with nothing new, git fsck and git log on the
# manifest, zstd -t on every object, config and key errors (exit 2, one
# line), --set store.url and a stdin source.
# Needs git, zstd and Debian's python3-zstandard (scripts/bootstrap); skips
# (exit 77) without them.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
checker=$src/tests/integration/curate_check.py
gen=$src/bench/gen-user-events.py
pipeline=$src/pipelines/user-events.yaml
contract=$src/contracts/user-events.yaml
ref=refs/heads/user-events/main

for tool in git zstd; do
	command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (run scripts/bootstrap)"; exit 77; }
done
need_py zstandard
need_kiln

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# every run reads records of at most 16 KiB: the generator's too_large
# records are 1000 bytes longer
limit=16384
runs() { # NAME WANT_STATUS ARGS...: `kiln run ARGS`, stdin from $stdin, output in $tmp/NAME.out/.err
	local name=$1 want=$2 rc=0
	shift 2
	"$kiln" run "$@" --set source.max_record_bytes="$limit" <"${stdin:-/dev/null}" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
	[ "$rc" -eq "$want" ] && return 0
	echo "  kiln run $*: exit $rc, expected $want"
	sed 's/^/  | /' "$tmp/$name.err" | head -5
	return 1
}

curated_ok() { # NAME ARGS...: curate_check.py ARGS passes
	local name=$1
	shift
	"$py" "$checker" --key "$tmp/hmac.key" --manifest "$tmp/m.git" --dataset user-events \
		--contract "$contract" --expect "$tmp/in.expect" "$@" >"$tmp/$name.check" 2>&1 && return 0
	sed 's/^/  | /' "$tmp/$name.check" | tail -40
	return 1
}

one_line_error() { # NAME PATTERN: stderr of run NAME is one line matching the ERE, stdout empty
	local name=$1 pattern=$2
	[ "$(wc -l <"$tmp/$name.err")" -eq 1 ] && grep -Eq -- "$pattern" "$tmp/$name.err" && [ ! -s "$tmp/$name.out" ] && return 0
	echo "  stderr of $name (wanted one line matching /$pattern/):"
	sed 's/^/  | /' "$tmp/$name.err" | head -5
	return 1
}

contains() { # FILE FIXED-STRING
	grep -qF -- "$2" "$1" || { echo "  $1 lacks '$2':"; sed 's/^/  | /' "$1" | head -5; return 1; }
}

gitm() { git --git-dir="$tmp/m.git" "$@"; }
listing() { (cd "$1" 2>/dev/null && find . -type f -printf '%p %s %T@\n' | sort); }
nothing_written() { # STOREDIR REPO: a failed run left no object and no ref behind
	[ -z "$(find "$1" -type f 2>/dev/null)" ] || { echo "  objects in $1"; return 1; }
	[ ! -d "$2" ] || [ -z "$(git --git-dir="$2" for-each-ref 2>/dev/null)" ] || { echo "  refs in $2"; return 1; }
}

# The pipeline reads these; nothing else from the caller's environment.
unset KILN_BRANCH KILN_SPLIT_SALT KILN_IT_UNDEFINED
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git

# ---- key and input
(umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$tmp/hmac.key")
check "key is 64 hex characters, mode 0600" \
	test "$(grep -Ec '^[0-9a-f]{64}$' "$tmp/hmac.key")" = 1 -a "$(stat -c %a "$tmp/hmac.key")" = 600
"$py" "$gen" --records 3000 --invalid-rate 0.05 --seed 7 --max-record-bytes "$limit" -o "$tmp/in.jsonl" --expect "$tmp/in.expect"
check "generator wrote 3000 records" test "$(wc -l <"$tmp/in.jsonl")" -eq 3000

# ---- run 1: 3000 records
check "run 1 exits 0" runs run1 0 "$pipeline"
check "run 1 reports +3000 records" contains "$tmp/run1.out" "+3000 records"
check "run 1 reports offsets 0-2999" contains "$tmp/run1.out" "offsets 0-2999"
c1=$(gitm rev-parse -q --verify "$ref" 2>/dev/null)
check "run 1 committed to $ref" test -n "$c1"
check "run 1 output is checked" curated_ok run1 --input "$tmp/in.jsonl" --store "$tmp/store" \
	--logs "$tmp/run1.out" "$tmp/run1.err"

# ---- run 2: 1000 appended records, resumed at offset 3000
"$py" "$gen" --records 1000 --invalid-rate 0.05 --seed 8 --max-record-bytes "$limit" --append -o "$tmp/in.jsonl" \
	--expect "$tmp/in.expect"
check "generator appended 1000 records" test "$(wc -l <"$tmp/in.jsonl")" -eq 4000
check "run 2 exits 0" runs run2 0 "$pipeline"
check "run 2 reports +1000 records" contains "$tmp/run2.out" "+1000 records"
check "run 2 reports offsets 3000-3999" contains "$tmp/run2.out" "offsets 3000-3999"
c2=$(gitm rev-parse -q --verify "$ref" 2>/dev/null)
check "run 2 made a second commit on top of the first" \
	test -n "$c2" -a "$c2" != "$c1" -a "$(gitm rev-parse -q --verify "$ref^" 2>/dev/null)" = "$c1"
new_sources_ok() { # the shards the second commit added hold offsets 3000-3999 only
	gitm diff --no-renames -U0 "$c1" "$c2" -- splits | grep -E '^\+\{' | sed 's/^+//' >"$tmp/new-shards"
	"$py" - "$tmp/new-shards" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines, "no shard added"
for e in lines:
    for s in e["sources"]:
        assert 3000 <= s["first"] <= s["last"] <= 3999, e
PY
}
check "run 2 added shards with offsets 3000-3999 only" new_sources_ok
quarantine_split_ok() { # no quarantine object spans both runs, run 2's start at >= 3000
	local n first last new=0
	for n in "$tmp"/store/quarantine/user-events/0/user-events/main/*.jsonl.zst; do
		n=${n##*/}
		first=${n%%-*} last=${n#*-} last=${last%%.*}
		if [ "$first" -ge 3000 ]; then new=$((new + 1)); elif [ "$last" -ge 3000 ]; then return 1; fi
	done
	[ "$new" -ge 1 ]
}
check "run 2 quarantined into its own object" quarantine_split_ok
check "run 2 output is checked (whole file)" curated_ok run2 --input "$tmp/in.jsonl" --store "$tmp/store" \
	--logs "$tmp/run1.out" "$tmp/run1.err" "$tmp/run2.out" "$tmp/run2.err"

# ---- run 3: nothing new
listing "$tmp/store" >"$tmp/store.before"
check "run 3 (nothing new) exits 0" runs run3 0 "$pipeline"
check "run 3 says nothing new" contains "$tmp/run3.out" "nothing new"
check "run 3 made no commit" test "$(gitm rev-parse -q --verify "$ref" 2>/dev/null)" = "$c2"
check "run 3 wrote nothing to the store" diff -u "$tmp/store.before" <(listing "$tmp/store")

# ---- the manifest with stock git, the objects with stock zstd
check "git fsck --strict" gitm fsck --strict --no-progress
gitm log --format=%s "$ref" >"$tmp/log"
check "git log shows 2 commits" test "$(wc -l <"$tmp/log")" -eq 2
check "git log subjects give readable counts" grep -Eq \
	'^user-events: \+1000 records \([0-9]+ valid, [0-9]+ quarantined\)' "$tmp/log"
check "git log subjects give readable counts (first run)" grep -Eq \
	'^user-events: \+3000 records \([0-9]+ valid, [0-9]+ quarantined\)' "$tmp/log"
log_counts_ok() { # the subjects' counts add up to stats.json
	local valid quarantined
	valid=$(($(sed -E 's/.*\(([0-9]+) valid.*/\1/' "$tmp/log" | paste -sd+)))
	quarantined=$(($(sed -E 's/.*valid, ([0-9]+) quarantined.*/\1/' "$tmp/log" | paste -sd+)))
	gitm show "$ref:stats.json" | "$py" -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if (s["valid"], s["quarantined"]) == (int(sys.argv[1]), int(sys.argv[2])) else 1)' "$valid" "$quarantined"
}
check "git log counts add up to stats.json" log_counts_ok
zstd_ok() {
	local n
	n=$(find "$tmp/store" -name '*.jsonl.zst' | wc -l)
	[ "$n" -ge 4 ] || { echo "  only $n objects"; return 1; }
	find "$tmp/store" -name '*.jsonl.zst' -print0 | xargs -0 zstd -q -t
}
check "zstd -t on every shard and quarantine object" zstd_ok

# ---- failures: exit 2, one line on stderr, nothing written
# (each against a store and manifest of its own, which must stay empty)
cp "$tmp/hmac.key" "$tmp/hmac-0644.key" && chmod 0644 "$tmp/hmac-0644.key"
check "key file mode 0644: exit 2" runs key644 2 "$pipeline" --set pseudonymise.key_file="$tmp/hmac-0644.key" \
	--set store.url="file://$tmp/fail-store" --set manifest.repo="$tmp/fail.git"
check "key file mode 0644: one line naming the file" one_line_error key644 "hmac-0644\.key.*(0644|mode|permission)"
check "missing key file: exit 2" runs nokey 2 "$pipeline" --set pseudonymise.key_file="$tmp/no-such.key" \
	--set store.url="file://$tmp/fail-store" --set manifest.repo="$tmp/fail.git"
check "missing key file: one line naming the file" one_line_error nokey "no-such\.key"
check "bad split ratios: exit 2" runs ratios 2 "$pipeline" --set split.ratios.train=0.7 \
	--set store.url="file://$tmp/fail-store" --set manifest.repo="$tmp/fail.git"
check "bad split ratios: one line naming split.ratios" one_line_error ratios "split\.ratios"
sed -e "s#^contract: .*#contract: $contract#" -e 's#^\(  name: user-events.*\)$#\1\n  bogus_key: 1#' \
	"$pipeline" >"$tmp/p-unknown.yaml"
line=$(grep -n 'bogus_key' "$tmp/p-unknown.yaml" | cut -d: -f1)
check "unknown pipeline key: exit 2" runs unknown 2 "$tmp/p-unknown.yaml" \
	--set store.url="file://$tmp/fail-store" --set manifest.repo="$tmp/fail.git"
check "unknown pipeline key: one line with file:line:col" one_line_error unknown "p-unknown\.yaml:$line:3: .*bogus_key"
# shellcheck disable=SC2016 # a literal ${VAR} for kiln to expand
sed -e "s#^contract: .*#contract: $contract#" -e 's#^  salt: .*#  salt: ${KILN_IT_UNDEFINED}#' \
	"$pipeline" >"$tmp/p-undefined.yaml"
line=$(grep -n 'KILN_IT_UNDEFINED' "$tmp/p-undefined.yaml" | cut -d: -f1)
check "undefined \${VAR}: exit 2" runs undefined 2 "$tmp/p-undefined.yaml" \
	--set store.url="file://$tmp/fail-store" --set manifest.repo="$tmp/fail.git"
check "undefined \${VAR}: one line with file:line:col and the name" \
	one_line_error undefined "p-undefined\.yaml:$line:[0-9]+: .*KILN_IT_UNDEFINED"
check "failed runs wrote nothing" nothing_written "$tmp/fail-store" "$tmp/fail.git"

# the input file no longer starts as the manifest's lineage says
cp "$tmp/in.jsonl" "$tmp/in.orig"
listing "$tmp/store" >"$tmp/store.before"
sed -i '1s/"event_type":"[a-z_]*"/"event_type":"XXXX"/' "$tmp/in.jsonl"
"$py" "$gen" --records 10 --seed 9 >>"$tmp/in.jsonl"
check "changed input prefix: exit 2" runs changed 2 "$pipeline"
check "changed input prefix: one line naming the file" one_line_error changed "in\.jsonl"
head -c 1000 "$tmp/in.orig" >"$tmp/in.jsonl"
check "truncated input: exit 2" runs truncated 2 "$pipeline"
check "truncated input: one line naming the file" one_line_error truncated "in\.jsonl"
check "refused inputs made no commit" test "$(gitm rev-parse -q --verify "$ref" 2>/dev/null)" = "$c2"
check "refused inputs wrote nothing to the store" diff -u "$tmp/store.before" <(listing "$tmp/store")
mv "$tmp/in.orig" "$tmp/in.jsonl"

# ---- resuming a branch with another split salt, other ratios or another key
# would put two incompatible datasets under one dataset.json (DESIGN: changing
# them is a new major version): refused, nothing committed
cp "$tmp/in.jsonl" "$tmp/in-more.jsonl"
"$py" "$gen" --records 20 --seed 10 >>"$tmp/in-more.jsonl"
(umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$tmp/other.key")
refused_change() { # NAME PATTERN ARGS...: resuming main with ARGS exits 2, one line matching PATTERN, no commit
	local name=$1 pattern=$2 ok=0 tip
	shift 2
	rm -rf "$tmp/$name.git" && cp -r "$tmp/m.git" "$tmp/$name.git"
	runs "$name" 2 "$pipeline" --set source.path="$tmp/in-more.jsonl" --set manifest.repo="$tmp/$name.git" \
		--set store.url="file://$tmp/$name-store" "$@" || ok=1
	[ "$ok" -ne 0 ] || one_line_error "$name" "$pattern" || ok=1
	tip=$(git --git-dir="$tmp/$name.git" rev-parse -q --verify "$ref" 2>/dev/null)
	[ "$tip" = "$c2" ] || { echo "  $ref moved: the change was committed"; ok=1; }
	return "$ok"
}
check "resume with another split.salt is refused" refused_change salt 'salt' --set split.salt=another-salt
check "resume with other split.ratios is refused" refused_change ratios2 'ratio' \
	--set split.ratios.train=0.7 --set split.ratios.dev=0.2
check "resume with another HMAC key is refused" refused_change newkey 'key' \
	--set pseudonymise.key_file="$tmp/other.key"

secret_ok() { # the key never reaches an output
	! grep -rqF -- "$(cat "$tmp/hmac.key")" "$tmp"/*.out "$tmp"/*.err "$tmp/m.git"
}
check "the key is in no output and not in the manifest" secret_ok

# ---- --set store.url writes to that store
check "--set store.url: exit 0" runs other 0 "$pipeline" --set store.url="file://$tmp/other" --set branch=other-store
check "--set store.url: shards in the other store" test -n "$(find "$tmp/other/shards" -name '*.jsonl.zst' 2>/dev/null)"
check "--set store.url: default store untouched" diff -u "$tmp/store.before" <(listing "$tmp/store")
check "--set store.url output is checked" curated_ok other --input "$tmp/in.jsonl" --store "$tmp/other" \
	--branch other-store --logs "$tmp/other.out" "$tmp/other.err"

# ---- small shards (several per split, shared fan-out prefixes), uneven
# ratios, a non-ASCII salt and another zstd level, on a branch of its own
small=refs/heads/user-events/small-shards
check "small shards: exit 0" runs small 0 "$pipeline" --set branch=small-shards \
	--set store.url="file://$tmp/small" --set shards.target_bytes=64K --set shards.zstd_level=19 \
	--set split.salt=sälz-v2 --set split.ratios.train=0.3333 --set split.ratios.dev=0.3333 \
	--set split.ratios.test=0.3334
shard_lines() { gitm ls-tree -r --name-only "$small" -- splits | while read -r f; do gitm show "$small:$f"; done | wc -l; }
check "small shards: more than 10 shards" test "$(shard_lines)" -gt 10
check "small shards output is checked" curated_ok small --input "$tmp/in.jsonl" --store "$tmp/small" \
	--branch small-shards --logs "$tmp/small.out" "$tmp/small.err"

# ---- stdin source into a new branch (own store: quarantine names are per topic)
stdin=$tmp/in.jsonl check "stdin source: exit 0" runs stdin 0 "$pipeline" --set source.path=- \
	--set branch=stdin-test --set store.url="file://$tmp/stdin-store"
check "stdin source: committed to user-events/stdin-test" test -n "$(gitm rev-parse -q --verify refs/heads/user-events/stdin-test 2>/dev/null)"
check "stdin source: main branch untouched" test "$(gitm rev-parse -q --verify "$ref" 2>/dev/null)" = "$c2"
check "stdin source output is checked" curated_ok stdin --input "$tmp/in.jsonl" --store "$tmp/stdin-store" \
	--branch stdin-test --logs "$tmp/stdin.out" "$tmp/stdin.err"
check "git fsck --strict after all runs" gitm fsck --strict --no-progress

# ---- an optional split key: records without it are quarantined, never split
optional_contract=$tmp/optional-split.yaml
/usr/bin/python3 - "$src/contracts/user-events.yaml" "$optional_contract" <<'PY'
import sys
s = open(sys.argv[1]).read()
i = s.index("      - name: user_id")
j = s.index("required: true", i)
open(sys.argv[2], "w").write(s[:j] + "required: false" + s[j + len("required: true"):])
PY
head -3 "$src/samples/user-events.jsonl" >"$tmp/optional.jsonl"
sed -n 4p "$src/samples/user-events.jsonl" | sed 's/"user_id":"[^"]*",//' >>"$tmp/optional.jsonl"
KILN_INPUT=$tmp/optional.jsonl KILN_STORE=file://$tmp/optional-store KILN_MANIFEST=$tmp/optional.git \
	"$kiln" run "$src/pipelines/user-events.yaml" --set contract="$optional_contract" >"$tmp/optional.out" 2>&1
check "optional split key: the run succeeds" grep -q "+4 records (3 valid, 1 quarantined)" "$tmp/optional.out"
check "optional split key: the record without it is quarantined as missing_required" \
	sh -c "zstd -dc '$tmp'/optional-store/quarantine/*/0/*/*/*.jsonl.zst | grep -q '\"offset\":3,\"code\":\"missing_required\",\"path\":\"user_id\"'"

# ---- the progress line: on a terminal (script(1)), never on a pipe
need script
"$py" "$src/bench/gen-user-events.py" --records 20000 --seed 77 >"$tmp/progress.jsonl"
KILN_INPUT=$tmp/progress.jsonl KILN_STORE=file://$tmp/progress-store KILN_MANIFEST=$tmp/progress.git \
	script -qec "'$kiln' run '$pipeline'" /dev/null >"$tmp/progress.tty.out" 2>&1
check "run on a terminal draws a progress line" sh -c 'tr "\r" "\n" <"$1" | grep -aq "^kiln run: user-events: [0-9.]*/[0-9.]* MiB, [0-9]* records"' _ "$tmp/progress.tty.out"
check "  then the summary" grep -aq "+20000 records" "$tmp/progress.tty.out"
KILN_INPUT=$tmp/progress.jsonl KILN_STORE=file://$tmp/progress-store2 KILN_MANIFEST=$tmp/progress2.git \
	"$kiln" run "$pipeline" >"$tmp/progress.out" 2>"$tmp/progress.err"
check "not on a pipe" sh -c '! grep -q "MiB" "$1"' _ "$tmp/progress.err"

# ---- relative paths from the environment and --set are the working directory's
mkdir -p "$tmp/cwd"
head -300 "$src/samples/user-events.jsonl" >"$tmp/cwd/in.jsonl"
cp "$tmp/hmac.key" "$tmp/cwd/k"
"$kiln" keygen --out "$tmp/cwd/sign.key" >/dev/null 2>&1
(cd "$tmp/cwd" && KILN_INPUT=in.jsonl KILN_KEY_FILE=k KILN_STORE=file://st KILN_MANIFEST=m.git \
	"$kiln" run "$pipeline" --set manifest.signing_key=sign.key) >"$tmp/cwd.out" 2>"$tmp/cwd.err"
check "relative KILN_* values: the run reads and writes beside the user" \
	sh -c 'test -d "$1/st/shards" && test -d "$1/m.git" && test ! -e "$2/pipelines/st" && test ! -e "$2/pipelines/m.git"' _ "$tmp/cwd" "$src"
check "  a relative --set path too (the commit is signed)" \
	sh -c 'git --git-dir="$1/m.git" cat-file commit refs/heads/user-events/main | grep -q "^gpgsig "' _ "$tmp/cwd"
check "  kiln log and promote --pipeline find the same repository" sh -c '
	cd "$1" && KILN_MANIFEST=m.git "$2" log user-events >/dev/null &&
	KILN_INPUT=in.jsonl KILN_KEY_FILE=k KILN_STORE=file://st KILN_MANIFEST=m.git "$2" promote user-events@main \
		--pipeline "$3" --set promote.min_records.train=1 --set promote.min_records.dev=0 --set promote.min_records.test=0 \
		--set promote.ratio_tolerance=1 --set promote.max_quarantine_rate=1 >/dev/null &&
	git --git-dir=m.git rev-parse -q --verify refs/tags/user-events/v1 >/dev/null' _ "$tmp/cwd" "$kiln" "$pipeline"

check "no personal data in any log, stdout or stderr" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
