#!/usr/bin/env bash
# The one-shot sources end to end under kill -9 (issue 27): a file source
# (one growing file, pipelines/user-events.yaml) and stdin (a producer that
# pipes chunks into `kiln run --set source.path=-` and, after each run,
# resends from where lineage.json says the committed records end:
# docs/PIPELINES.md, "stdin after a crash"). Each does several rounds:
# records appended (5 % invalid, every kind), a run started and killed with
# kill -9 after a random delay (0 to twice a clean run's time, so that kills
# land before, during and after the commit), or killed while it waits for
# the branch's ref move (kiln-refs.lock held: its shards and quarantine are
# stored, its commit is not), or let to finish; the branch moves by a whole
# run or not at all. A last clean run, then the independent checker
# (curate_check.py --expect, which recomputes everything from
# docs/FORMATS.md): every input line curated or quarantined exactly once;
# kiln verify --deep and git fsck on the manifest. No personal value in any
# log. Needs git, zstd and Debian's python3-zstandard.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
gen=$src/bench/gen-user-events.py
checker=$src/tests/integration/curate_check.py
pipeline=$src/pipelines/user-events.yaml
contract=$src/contracts/user-events.yaml
ref=refs/heads/user-events/main
need git zstd
need_py zstandard
need_kiln

tmp=$(mktemp -d)
run=
cleanup() { [ -n "$run" ] && kill -9 "$run" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
[ -n "${KILN_IT_KEEP:-}" ] && trap - EXIT && echo "tmp: $tmp"
unset KILN_BRANCH KILN_SPLIT_SALT KILN_IT_UNDEFINED
limit=16384
(umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$tmp/hmac.key")
export KILN_KEY_FILE=$tmp/hmac.key

world() { # NAME: a store and manifest of its own
	w=$tmp/$1
	mkdir -p "$w"
	export KILN_INPUT=$w/in.jsonl KILN_STORE=file://$w/store KILN_MANIFEST=$w/m.git
}
gitw() { git --git-dir="$w/m.git" "$@"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
next_of() { # KIND TOPIC: lineage.json's next for that entry at the tip (0 without a tip or entry)
	gitw show "$ref:lineage.json" 2>/dev/null | "$py" -c 'import json, sys
try:
    doc = json.load(sys.stdin)
except ValueError:
    print(0)
    sys.exit(0)
print(next((e["next"] for e in doc["partitions"] if e.get("source") == sys.argv[1] and e["topic"] == sys.argv[2]), 0))' "$1" "$2"
}
uncommitted_objects() { # SUFFIX FROM: quarantine objects of the branch (names ending SUFFIX.jsonl.zst) with first >= FROM
	local n f first=0 count=0
	for f in "$w"/store/quarantine/*/0/user-events/main/*"$1".jsonl.zst; do
		[ -e "$f" ] || continue
		n=${f##*/}
		first=${n%%-*}
		[ "$first" -ge "$2" ] && count=$((count + 1))
	done
	[ "$count" -gt 0 ]
}
curated_ok() { # NAME: curate_check.py over $w/in.jsonl with $w/in.expect
	"$py" "$checker" --key "$tmp/hmac.key" --manifest "$w/m.git" --dataset user-events --contract "$contract" \
		--input "$w/in.jsonl" --expect "$w/in.expect" --store "$w/store" --logs "$w"/*.out "$w"/*.err \
		>"$tmp/$1.check" 2>&1 && return 0
	sed 's/^/  | /' "$tmp/$1.check" | tail -30
	return 1
}
verified() { # kiln verify --deep of the branch, git fsck
	"$kiln" verify user-events@main --deep --manifest "$w/m.git" --store "file://$w/store" >"$w/verify.out" \
		2>"$w/verify.err" || { sed 's/^/  | /' "$w/verify.err" | head -5; return 1; }
	gitw fsck --strict --no-dangling --no-progress >"$w/fsck.out" 2>&1 || { sed 's/^/  | /' "$w/fsck.out" | head -5; return 1; }
}

# hold_refs / release_refs: the test holds kiln-refs.lock exclusively, so a
# run's ref move (which takes it shared) waits: everything before the commit
# is stored, the branch has not moved
hold_refs() { exec 9>>"$w/m.git/kiln-refs.lock" && flock -x 9; }
release_refs() { flock -u 9 && exec 9>&-; }

# random kills: a round's delay falls in one band of T (0: [0, 0.4T),
# 1: [0.4T, 0.8T), 2: [0.8T, 1.2T), 3: [1.2T, 1.6T)), T a clean run's time
# on this machine for 1000 records, scaled up to the records the round
# reads, so that kills land before, during and after the commit whatever
# the speed
delay() { # CLEAN_MS BAND RECORDS: milliseconds
	local n=$(($3 > 1000 ? $3 : 1000))
	local band=$(($1 * n * 4 / 10000))
	echo $((($2 * band) + RANDOM % (band + 1)))
}
kill_after() { # MS: kill -9 $run after MS ms, counted in $killed or $finished
	ms_sleep "$1"
	if kill -9 "$run" 2>/dev/null; then
		killed=$((killed + 1)) outcomes+=("$1ms:killed")
	else
		finished=$((finished + 1)) outcomes+=("$1ms:finished")
	fi
	wait "$run" 2>/dev/null
	run=
}
outcomes=()

# a round's kiln run ends one of three ways; the branch moves by the whole
# run or not at all ($before -> $after)
killed=0 finished=0 in_commit=0
whole_or_nothing() { # BEFORE AFTER ALLOWED...
	local b=$1 a=$2 x
	shift 2
	for x in "$@"; do [ "$a" = "$x" ] && return 0; done
	echo "  lineage next went from $b to $a (allowed: $*)"
	return 1
}

# ---- file source: one growing file ------------------------------------------
world file
fnext() { next_of file user-events; }
"$py" "$gen" --records 1500 --invalid-rate 0.05 --seed 700 --max-record-bytes "$limit" -o "$w/in.jsonl" \
	--expect "$w/in.expect"
check "file: a clean first run exits 0" status_is 0 "$kiln" run "$pipeline" --set source.max_record_bytes="$limit"
cp "$tmp/out" "$w/first.out" && cp "$tmp/err" "$w/first.err"
check "file: ... and commits 1500 records" test "$(fnext)" = 1500
# a clean run's time on this machine, on a branch that exists
"$py" "$gen" --records 1000 --invalid-rate 0.05 --seed 699 --max-record-bytes "$limit" --append -o "$w/in.jsonl" \
	--expect "$w/in.expect"
t0=$(now_ms)
check "file: a clean second run exits 0" status_is 0 "$kiln" run "$pipeline" --set source.max_record_bytes="$limit"
clean_ms=$(($(now_ms) - t0))
cp "$tmp/out" "$w/second.out" && cp "$tmp/err" "$w/second.err"
check "file: ... and commits 1000 records more" test "$(fnext)" = 2500
for round in 1 2 3 4 5 6 7 8; do
	"$py" "$gen" --records $((800 + 150 * round)) --invalid-rate 0.05 --seed $((700 + round)) \
		--max-record-bytes "$limit" --append -o "$w/in.jsonl" --expect "$w/in.expect"
	lines=$(wc -l <"$w/in.jsonl") before=$(fnext)
	case $round in
	2 | 6) # killed inside its commit: its objects stored, the branch not moved
		hold_refs
		"$kiln" run "$pipeline" --set source.max_record_bytes="$limit" >"$w/r$round.out" 2>"$w/r$round.err" 9>&- &
		run=$!
		check "file round $round: the run stores its quarantine and waits for the ref move" \
			poll 30 uncommitted_objects "" "$before"
		kill -9 "$run" 2>/dev/null && in_commit=$((in_commit + 1))
		wait "$run" 2>/dev/null
		run=
		release_refs
		check "file round $round: the branch did not move" whole_or_nothing "$before" "$(fnext)" "$before"
		;;
	4) # finishes
		check "file round $round: the run exits 0" status_is 0 "$kiln" run "$pipeline" \
			--set source.max_record_bytes="$limit"
		cp "$tmp/out" "$w/r$round.out" && cp "$tmp/err" "$w/r$round.err"
		finished=$((finished + 1))
		check "file round $round: it committed the whole file" whole_or_nothing "$before" "$(fnext)" "$lines"
		;;
	*)
		"$kiln" run "$pipeline" --set source.max_record_bytes="$limit" >"$w/r$round.out" 2>"$w/r$round.err" &
		run=$!
		band=$((round == 8 ? RANDOM % 4 : round / 2)) # rounds 1, 3, 5, 7: bands 0 to 3
		kill_after "$(delay "$clean_ms" "$band" $((lines - before)))"
		check "file round $round: the branch moved by the whole run or not at all" \
			whole_or_nothing "$before" "$(fnext)" "$before" "$lines"
		;;
	esac
done
echo "  (file: a clean run took ${clean_ms} ms; random kills: ${outcomes[*]}; $in_commit killed in their commit)"
# two runs at once: the second must not take the first's stored quarantine
# for a killed run's (it finds the source's run lock held, so removes
# nothing); the first commits, the second is fenced and reads on from there
"$py" "$gen" --records 1200 --invalid-rate 0.05 --seed 799 --max-record-bytes "$limit" --append -o "$w/in.jsonl" \
	--expect "$w/in.expect"
commits=$(gitw rev-list --count "$ref")
at_ref_move() { # PID: it has kiln-refs.lock open: it waits to move the branch
	local f
	for f in /proc/"$1"/fd/*; do
		[[ $(readlink "$f" 2>/dev/null) == */kiln-refs.lock ]] && return 0
	done
	return 1
}
hold_refs
"$kiln" run "$pipeline" --set source.max_record_bytes="$limit" >"$w/a.out" 2>"$w/a.err" 9>&- &
run=$!
check "file, two runs: the first waits to move the branch" poll 30 at_ref_move "$run"
first=$run
"$kiln" run "$pipeline" --set source.max_record_bytes="$limit" >"$w/b.out" 2>"$w/b.err" 9>&- &
second=$!
check "file, two runs: the second waits to move the branch too" poll 30 at_ref_move "$second"
check "file, two runs: the second removed nothing of the first's" \
	sh -c "! grep -q '\"event\":\"uncommitted_objects\"' '$w/b.err'"
release_refs
rc=0 rc2=0
wait "$first" || rc=$?
wait "$second" || rc2=$?
run=
check "file, two runs: both exit 0" test "$rc$rc2" = 00
check "file, two runs: one commit of the new records" test "$(gitw rev-list --count "$ref")" = $((commits + 1))
check "file, two runs: the branch covers the file" test "$(fnext)" = "$(wc -l <"$w/in.jsonl")"
check "file: the last run exits 0" status_is 0 "$kiln" run "$pipeline" --set source.max_record_bytes="$limit"
cp "$tmp/out" "$w/last.out" && cp "$tmp/err" "$w/last.err"
check "file: the branch covers every line" test "$(fnext)" = "$(wc -l <"$w/in.jsonl")"
check "file: a run left by a kill in its commit had its quarantine objects removed" \
	grep -q '"event":"uncommitted_objects"' "$w"/*.err
check "file: every line curated or quarantined exactly once (curate_check.py --expect)" curated_ok file
check "file: kiln verify --deep, git fsck" verified

# ---- stdin: the producer resends what lineage.json does not cover ----------
world stdin
name=ev-stdin
snext() { next_of stdin "$name"; }
"$py" "$gen" --records 9000 --invalid-rate 0.05 --seed 800 --max-record-bytes "$limit" -o "$w/in.jsonl" \
	--expect "$w/in.expect"
total=9000
feed() { # FROM TO [slow|fast]: lines FROM..TO-1 of the stream on stdout (slow: in 4 pieces, 60 ms apart)
	if [ "${3:-}" = slow ]; then
		"$py" - "$w/in.jsonl" "$1" "$2" <<'PY'
import sys, time
lines = open(sys.argv[1], "rb").read().splitlines(keepends=True)[int(sys.argv[2]):int(sys.argv[3])]
step = len(lines) // 4 + 1
try:
    for at in range(0, len(lines), step):
        sys.stdout.buffer.write(b"".join(lines[at:at + step]))
        sys.stdout.flush()
        time.sleep(0.06)
except BrokenPipeError:  # the run was killed
    pass
PY
	else
		sed -n "$(($1 + 1)),$2p" "$w/in.jsonl"
	fi
}
stdin_run() { # FROM TO [slow]: in the background ($run; its status is the pipe's: pipefail), output in $w/s$round.out/.err
	feed "$@" 2>/dev/null | "$kiln" run "$pipeline" --set source.path=- --set source.name="$name" \
		--set source.max_record_bytes="$limit" >"$w/s$round.out" 2>"$w/s$round.err" 9>&- &
	run=$!
}
sent=0 killed=0 finished=0 in_commit=0 resent=0 outcomes=()
round=0
stdin_run 0 1000
wait "$run"
rc=$? run=
check "stdin: a clean first run exits 0" test "$rc" = 0
check "stdin: ... and commits 1000 records" test "$(snext)" = 1000
round=00
t0=$(now_ms)
stdin_run 1000 2000
wait "$run"
rc=$? run=
clean_ms=$(($(now_ms) - t0))
check "stdin: a clean second run exits 0" test "$rc" = 0
check "stdin: ... and commits 1000 records more" test "$(snext)" = 2000
sent=2000
for round in 1 2 3 4 5 6 7 8; do
	before=$(snext)
	# the producer's contract: everything from lineage's next is sent again,
	# then the new records
	resent=$((resent + sent - before))
	sent=$((sent + 800 < total - 1000 ? sent + 800 : total - 1000))
	case $round in
	3 | 7)
		hold_refs
		stdin_run "$before" "$sent"
		check "stdin round $round: the run stores its quarantine and waits for the ref move" \
			poll 30 uncommitted_objects .stdin "$before"
		kill -9 "$run" 2>/dev/null && in_commit=$((in_commit + 1))
		wait "$run" 2>/dev/null
		run=
		release_refs
		check "stdin round $round: the branch did not move" whole_or_nothing "$before" "$(snext)" "$before"
		;;
	5)
		stdin_run "$before" "$sent"
		wait "$run"
		rc=$? run=
		finished=$((finished + 1))
		check "stdin round $round: the run exits 0" test "$rc" = 0
		check "stdin round $round: it committed what was sent" whole_or_nothing "$before" "$(snext)" "$sent"
		;;
	*)
		speed=fast
		[ $((round % 2)) = 0 ] && speed=slow
		stdin_run "$before" "$sent" "$speed"
		case $round in 1) band=3 ;; 2) band=1 ;; 4) band=2 ;; 6) band=0 ;; *) band=$((RANDOM % 4)) ;; esac
		kill_after "$(delay "$clean_ms" "$band" $((sent - before)))"
		check "stdin round $round: the branch moved by the whole run or not at all" \
			whole_or_nothing "$before" "$(snext)" "$before" "$sent"
		;;
	esac
done
echo "  (stdin: a clean run took ${clean_ms} ms; random kills: ${outcomes[*]}; $in_commit killed in their commit; $resent records sent again)"
round=last
before=$(snext)
stdin_run "$before" "$total"
wait "$run"
rc=$? run=
check "stdin: the last run (the rest of the stream) exits 0" test "$rc" = 0
check "stdin: the branch covers the whole stream" test "$(snext)" = "$total"
check "stdin: a run left by a kill in its commit had its quarantine objects removed" \
	grep -q '"event":"uncommitted_objects"' "$w"/*.err
check "stdin: every record curated or quarantined exactly once (curate_check.py --expect)" curated_ok stdin
check "stdin: kiln verify --deep, git fsck" verified

check "no personal value in any log" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
