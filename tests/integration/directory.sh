#!/usr/bin/env bash
# The directory source end to end (pipelines/user-events-dir.yaml): a folder
# of generated user events, one plain file, one made with gzip and one with
# zstd, is curated in one run, and tests/integration/directory_check.py
# checks from the store and the manifest alone that every record is curated
# or quarantined exactly once (against the generator's --expect), that
# lineage.json has one entry per file (topic user-events=<name>, bytes and
# fingerprint) and that stats.json counts them. Then: a new file adds only
# itself; nothing new commits nothing (exit 0); a committed file that is
# changed is named (stdout and one warning log line) and not read again;
# source.done moves committed files (and a committed one put back); kill -9
# at random points, then a rerun: every record once; two runs at once over
# one folder: every record once; a truncated .gz and a corrupt .zst are
# named in one error line while the good files commit; a name with a space
# and a non-ASCII byte gets its encoded topic; config errors name
# file:line:col. No personal value reaches a log.
# Needs git, gzip, zstd and Debian's python3-zstandard; skips (exit 77)
# without them.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
gen=$src/bench/gen-user-events.py
checker=$src/tests/integration/directory_check.py
pipeline=$src/pipelines/user-events-dir.yaml
ref=refs/heads/user-events/main

for tool in git gzip zstd; do
	command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (run scripts/bootstrap)"; exit 77; }
done
need_py zstandard
need_kiln

tmp=$(mktemp -d)
trap "rm -rf \"$tmp\"" EXIT; [ -n "${KILN_IT_KEEP:-}" ] && trap - EXIT && echo "tmp: $tmp"
unset KILN_BRANCH KILN_SPLIT_SALT KILN_INPUT
limit=16384
(umask 077 && printf '%064x\n' 0x5eed1e55 >"$tmp/hmac.key")
export KILN_KEY_FILE=$tmp/hmac.key

world() { # NAME: a folder, store and manifest of its own
	mkdir -p "$tmp/$1/in"
	export KILN_INPUT_DIR=$tmp/$1/in KILN_STORE=file://$tmp/$1/store KILN_MANIFEST=$tmp/$1/m.git
	w=$tmp/$1 files=()
}

gen_file() { # NAME SEED RECORDS [gz|zst]: generated into $w (its expect beside), then into the folder
	local name=$1 seed=$2 n=$3 z=${4:-} final=$1
	"$py" "$gen" --records "$n" --invalid-rate 0.05 --seed "$seed" --max-record-bytes "$limit" \
		-o "$w/.$name" --expect "$w/$name.expect"
	case $z in
	gz) gzip -c "$w/.$name" >"$w/.$name.gz" && rm "$w/.$name" && final=$name.gz ;;
	zst) zstd -q --rm "$w/.$name" -o "$w/.$name.zst" && final=$name.zst ;;
	esac
	mv "$w/.$final" "$w/in/$final" # written aside, renamed into place
	files+=("$final")
}

topic_of() { # FILE NAME: its topic, encoded by docs/FORMATS.md's rule
	"$py" -c 'import os, sys
n = os.fsencode(sys.argv[1])
print("user-events=" + "".join(chr(b) if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "._-") else "=%02X" % b for b in n))' "$1"
}

checked() { # LABEL [DIR]: directory_check.py over every file of $files (in DIR, default the folder)
	local label=$1 dir=${2:-$w/in} args=() f base
	for f in "${files[@]}"; do
		base=${f%.gz}
		base=${base%.zst}
		args+=(--file "$(topic_of "$f")" "$w/$base.expect" "$dir/$f")
	done
	"$py" "$checker" --store "$w/store" --manifest "$w/m.git" --dataset user-events "${args[@]}" \
		>"$tmp/$label.check" 2>&1 && return 0
	sed 's/^/  | /' "$tmp/$label.check" | tail -20
	return 1
}

runs() { # NAME WANT ARGS...: kiln run PIPELINE --stop-at-end ARGS, output in $tmp/NAME.out/.err
	local name=$1 want=$2 rc=0
	shift 2
	"$kiln" run "$pipeline" --stop-at-end --set source.max_record_bytes="$limit" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
	[ "$rc" -eq "$want" ] && return 0
	echo "  kiln run $*: exit $rc, expected $want"
	sed 's/^/  | /' "$tmp/$name.err" | head -5
	return 1
}

contains() { # FILE FIXED-STRING
	grep -qF -- "$2" "$1" || { echo "  $1 lacks '$2':"; sed 's/^/  | /' "$1" | head -5; return 1; }
}
tip() { git --git-dir="$w/m.git" rev-parse -q --verify "$ref" 2>/dev/null; }
commits() { git --git-dir="$w/m.git" rev-list --count "$ref" 2>/dev/null || echo 0; }

# ---- three files: plain, gzip, zstd; one run curates them all
world a
gen_file day1.jsonl 1 1500
gen_file day2.jsonl 2 1200 gz
gen_file day3.jsonl 3 900 zst
check "run 1 exits 0" runs a1 0
check "run 1 reads 3600 records from 3 files" contains "$tmp/a1.out" "+3600 records"
check "run 1 names 3 files" contains "$tmp/a1.out" "from 3 files of $w/in"
check "run 1 is checked (store, lineage, stats)" checked a1
check "run 1 made one commit" test "$(commits)" = 1
check "kiln check names the folder" status_is 0 "$kiln" check "$pipeline"
check "... as a readable folder with its glob" grep -qF "$w/in is a readable folder (source user-events, files *.jsonl*)" "$tmp/out"
traced_to_gz() { # kiln trace finds a record of day2.jsonl.gz at its line of the decompressed file
	local idx
	"$kiln" cat user-events@main --split train >"$tmp/a-train.jsonl" || return 1
	idx=$("$py" -c 'import json, sys
ids = {json.loads(l)["event_id"] for l in open(sys.argv[2]) if json.loads(l)["outcome"] == "valid"}
for i, l in enumerate(open(sys.argv[1])):
    if json.loads(l)["event_id"] in ids:
        print(i); break' "$tmp/a-train.jsonl" "$w/day2.jsonl.expect") || return 1
	"$kiln" trace user-events@main --split train --record "$idx" --json --pipeline "$pipeline" \
		>"$tmp/a-trace.json" 2>"$tmp/a-trace.err" || return 1
	"$py" - "$tmp/a-trace.json" "$tmp/a-train.jsonl" "$idx" <<'PY'
import gzip, json, sys
doc = json.load(open(sys.argv[1]))
o = doc["origin"]
record = json.loads(open(sys.argv[2]).read().split("\n")[int(sys.argv[3])])
assert o["topic"] == "user-events=day2.jsonl.gz" and o["file"].endswith("/day2.jsonl.gz"), o
line = gzip.open(o["file"]).read().split(b"\n")[o["offset"]]
assert json.loads(line)["event_id"] == record["event_id"], o
PY
}
check "kiln trace reads a record's line out of its .gz file" traced_to_gz

# ---- a new file: only it is read
gen_file day4.jsonl 4 700
check "run 2 exits 0" runs a2 0
check "run 2 reads only the new file" contains "$tmp/a2.out" "+700 records"
check "run 2 names 1 file" contains "$tmp/a2.out" "from 1 file of"
check "run 2 is checked" checked a2
c2=$(tip)
new_sources_only_day4() {
	git --git-dir="$w/m.git" diff --no-renames -U0 "$c2^" "$c2" -- splits | grep -E '^\+\{' | sed 's/^+//' |
		"$py" -c 'import json, sys
lines = [json.loads(l) for l in sys.stdin]
assert lines
assert all(s["topic"] == "user-events=day4.jsonl" for l in lines for s in l["sources"]), lines'
}
check "run 2's shards hold day4.jsonl only" new_sources_only_day4

# ---- nothing new: no commit, exit 0
check "run 3 (nothing new) exits 0" runs a3 0
check "run 3 says nothing new" contains "$tmp/a3.out" "nothing new in $w/in"
check "run 3 committed nothing" test "$(tip)" = "$c2"

# ---- a committed file that changes is named and never read again
cp "$w/in/day1.jsonl" "$w/day1.jsonl.orig"
tail -n 5 "$w/in/day1.jsonl" >>"$w/in/day1.jsonl"
check "run 4 (day1.jsonl grew) exits 0" runs a4 0
check "run 4 names the changed file" contains "$tmp/a4.out" "1 file changed after it was committed, not read again: day1.jsonl"
check "run 4 logs one warning naming it" \
	test "$(grep -c '"event":"file_changed".*day1.jsonl' "$tmp/a4.err")" = 1
check "run 4 committed nothing" test "$(tip)" = "$c2"
# the folder's day1.jsonl is the changed one: the check reads the original
mv "$w/in/day1.jsonl" "$w/day1.jsonl.changed"
cp "$w/day1.jsonl.orig" "$w/in/day1.jsonl"
check "after run 4 every record is still there once" checked a4
check "the original put back is done, not read" runs a4c 0
check "... and nothing was committed" test "$(tip)" = "$c2"

# ---- a truncated .gz and a corrupt .zst: one line naming them, the rest commits
gen_file day5.jsonl 5 400
gen_file day6.jsonl 6 300 gz
gen_file day7.jsonl 7 300 zst
unset 'files[-1]' 'files[-1]'
head -c 20000 "$w/in/day6.jsonl.gz" >"$w/in/bad6.jsonl.gz" && rm "$w/in/day6.jsonl.gz"
"$py" -c 'import sys
d = bytearray(open(sys.argv[1], "rb").read())
for i in range(200, 260): d[i] ^= 0x5a
open(sys.argv[2], "wb").write(d)' "$w/in/day7.jsonl.zst" "$w/in/bad7.jsonl.zst" && rm "$w/in/day7.jsonl.zst"
check "run 5 (a truncated .gz, a corrupt .zst) exits 2" runs a5 2
check "run 5 says it in one line (besides JSON log lines)" test "$(grep -vc '^{' "$tmp/a5.err")" = 1
check "the line names the truncated .gz" grep -q "bad6.jsonl.gz: truncated" "$tmp/a5.err"
check "the line names the corrupt .zst" grep -q "bad7.jsonl.zst: corrupt zstd data" "$tmp/a5.err"
check "the line gives the version the good file went to" grep -qE "committed as version [0-9a-f]{40}" "$tmp/a5.err"
check "run 5 committed day5.jsonl, nothing of the bad files" checked a5
check "the bad files are not in lineage.json" \
	test "$(git --git-dir="$w/m.git" show "$ref:lineage.json" | grep -c "user-events=bad")" = 0
check "the bad files fail the next run again" runs a5b 2
rm "$w/in/bad6.jsonl.gz" "$w/in/bad7.jsonl.zst"
check "without them the run has nothing new, exit 0" runs a5c 0

# ---- a name with a space and a non-ASCII byte
gen_file "day 8 é.jsonl" 8 300
check "run 6 (a name with a space and é) exits 0" runs a6 0
check "its topic is encoded" test "$(topic_of "day 8 é.jsonl")" = "user-events=day=208=20=C3=A9.jsonl"
check "its quarantine is under the encoded topic" test -d "$w/store/quarantine/user-events=day=208=20=C3=A9.jsonl"
check "run 6 is checked" checked a6
gen_file "day9 "$'\xe9'".jsonl" 9 200 gz # not UTF-8: lineage.json gets the encoded name
check "run 7 (a name that is not UTF-8) exits 0" runs a7 0 --set source.done=done
check "its entry's path is the folder and the encoded name" \
	grep -qF "\"path\":\"$w/in/day9=20=E9.jsonl.gz\"" <(git --git-dir="$w/m.git" show "$ref:lineage.json")
check "it was moved to done/ all the same" test -f "$w/in/done/day9 "$'\xe9'".jsonl.gz"
check "run 7 is checked" checked a7 "$w/in/done"

# ---- source.done: committed files move (and a committed one put back moves again)
world d
gen_file d1.jsonl 11 500
gen_file d2.jsonl 12 500 zst
check "run with source.done exits 0" runs d1 0 --set source.done=done
check "the files moved to done/" test -f "$w/in/done/d1.jsonl" -a -f "$w/in/done/d2.jsonl.zst" -a ! -e "$w/in/d1.jsonl"
check "done/ was made 0700" test "$(stat -c %a "$w/in/done")" = 700
check "done run is checked" checked d1 "$w/in/done"
cp "$w/in/done/d1.jsonl" "$w/in/d1.jsonl" # as if killed between the commit and the move
c=$(tip)
check "a committed file left in the folder is moved, not read" runs d2 0 --set source.done=done
check "... nothing committed" test "$(tip)" = "$c"
check "... it is in done/ only" test -f "$w/in/done/d1.jsonl" -a ! -e "$w/in/d1.jsonl"
check "source.done: . is refused" runs d3 2 --set source.done=.
check "... naming --set or file:line:col and the key" grep -q "source.done" "$tmp/d3.err"

# ---- kill -9 at random points, then a rerun: every record once
world k
seed=100
killed=0
for round in 1 2 3 4 5 6 7 8; do
	gen_file "k$round-a.jsonl" $((seed + 2 * round)) 3000
	gen_file "k$round-b.jsonl" $((seed + 2 * round + 1)) 2000 gz
	"$kiln" run "$pipeline" --stop-at-end --set source.max_record_bytes="$limit" >"$tmp/k$round.out" 2>"$tmp/k$round.err" &
	pid=$!
	ms_sleep $((RANDOM % 500)) # a run of these takes 0.1-0.5 s: any stage, or after it
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	[ -s "$tmp/k$round.out" ] || killed=$((killed + 1))
done
echo "  (kill -9 stopped $killed of 8 runs before they printed a version)"
check "the rerun after the kills exits 0" runs k-final 0
check "after the kills every record is curated or quarantined once" checked k

# ---- two runs at once over one folder
world c
for i in 1 2 3 4 5 6; do gen_file "c$i.jsonl" $((200 + i)) 1500; done
"$kiln" run "$pipeline" --stop-at-end --set source.max_record_bytes="$limit" >"$tmp/c1.out" 2>"$tmp/c1.err" &
p1=$!
"$kiln" run "$pipeline" --stop-at-end --set source.max_record_bytes="$limit" >"$tmp/c2.out" 2>"$tmp/c2.err" &
p2=$!
rc1=0 rc2=0
wait "$p1" || rc1=$?
wait "$p2" || rc2=$?
check "both concurrent runs exit 0" test "$rc1" = 0 -a "$rc2" = 0
cat "$tmp/c1.err" "$tmp/c2.err" >"$tmp/c.log"; cat "$tmp/c1.out" "$tmp/c2.out" >"$tmp/c.stdout"
check "two runs at once: every record once" checked c
check "two runs at once: 9000 records in all" \
	test "$(git --git-dir="$w/m.git" show "$ref:stats.json" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["records_in"])')" = 9000

# ---- the same with source.done: the first to commit moves the files away
world c2
for i in 1 2 3 4 5 6; do gen_file "c$i.jsonl" $((300 + i)) 1500; done
"$kiln" run "$pipeline" --stop-at-end --set source.max_record_bytes="$limit" --set source.done=done >"$tmp/cd1.out" 2>"$tmp/cd1.err" &
p1=$!
"$kiln" run "$pipeline" --stop-at-end --set source.max_record_bytes="$limit" --set source.done=done >"$tmp/cd2.out" 2>"$tmp/cd2.err" &
p2=$!
rc1=0 rc2=0
wait "$p1" || rc1=$?
wait "$p2" || rc2=$?
check "both concurrent runs with source.done exit 0" test "$rc1" = 0 -a "$rc2" = 0
check "every file is in done/" test "$(find "$w/in/done" -type f | wc -l)" = 6 -a -z "$(find "$w/in" -maxdepth 1 -type f)"
check "two runs at once with source.done: every record once" checked c2 "$w/in/done"

# ---- config errors: one line with file:line:col (or --set) and the key
world e
check "a glob with / is refused" runs e1 2 --set source.glob=a/b
check "... in one line naming source.glob" test "$(wc -l <"$tmp/e1.err")" = 1 -a -n "$(grep source.glob "$tmp/e1.err")"
check "a kafka key is refused" runs e2 2 --set source.topics=x
check "... naming it" grep -q "only a kafka source has this key" "$tmp/e2.err"
check "a missing folder fails in one line" runs e3 2 --set source.path="$tmp/nope"
check "... naming it" grep -q "$tmp/nope: cannot open the folder" "$tmp/e3.err"

[ -n "${KILN_IT_VERBOSE:-}" ] && { cat "$tmp"/c.log "$tmp"/c.stdout "$tmp"/k*.out; }
check "no personal value in any log" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
