#!/usr/bin/env bash
# Concurrent users of one store and one manifest repository, started at the
# same moment on purpose (docs/VERSIONS.md, "What is safe to run at once"):
# - N `kiln run`s of one file pipeline at once: all exit 0, and every record
#   is in the version exactly once (kiln cat, distinct event ids, stats.json);
# - two first runs creating the manifest repository at once: both exit 0;
# - two stdin runs of different input: each either commits or exits non-zero
#   saying the input must be sent again; what committed is there once;
# - `kiln gc --apply` looping while runs upload: nothing a run commits is
#   deleted (verify --deep), and a run whose shard was removed before its
#   commit (gc --grace 0 on purpose) commits nothing and says so;
# - a ref lock held by a peer is waited for; a stale one is reported with
#   its path; gc --apply packs the repository and prunes the debris of lost
#   races (git count-objects, git fsck);
# - two branches reading one source into one store keep their own
#   quarantine objects.
# KILN_HOSTILE=1 (make hostile) runs it at a larger scale: 10 runs at once,
# more records, more rounds of creation races.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
gen=$src/bench/gen-user-events.py
pipeline=$src/pipelines/user-events.yaml
ref=refs/heads/user-events/main

for tool in git; do
	command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed (run scripts/bootstrap)"; exit 1; }
done
[ -x "$kiln" ] || { echo "FAIL: no kiln binary at $kiln (set KILN)"; exit 1; }

if [ "${KILN_HOSTILE:-0}" = 1 ]; then
	runs_n=10 records=60000 races=20
else
	runs_n=3 records=12000 races=4
fi

tmp=$(mktemp -d)
trap 'jobs -p | xargs -r kill 2>/dev/null; if [ -n "${KEEP_TMP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi' EXIT

contains() { # FILE FIXED-STRING
	grep -qF -- "$2" "$1" || { echo "  $1 lacks '$2':"; sed 's/^/  | /' "$1" | head -5; return 1; }
}
one_line() { # FILE ERE: the file is one line matching it
	[ "$(wc -l <"$1")" -eq 1 ] && grep -Eq -- "$2" "$1" && return 0
	echo "  $1 (wanted one line matching /$2/):"
	sed 's/^/  | /' "$1" | head -5
	return 1
}
gitm() { git --git-dir="$1" "${@:2}"; }

unset KILN_BRANCH KILN_SPLIT_SALT
export KILN_KEY_FILE=$tmp/hmac.key
(umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$tmp/hmac.key")
"$py" "$gen" --records "$records" --invalid-rate 0 --seed 21 -o "$tmp/in.jsonl"

# every record of the dataset's main branch, one per line
cat_all() { # MANIFEST STORE
	local s
	for s in train dev test; do
		"$kiln" cat user-events@main --split "$s" --manifest "$1" --store "file://$2" || return 1
	done
}
exactly_once() { # MANIFEST STORE INPUT...: the version holds each input record once
	local m=$1 st=$2
	shift 2
	cat_all "$m" "$st" >"$tmp/cat.out" 2>"$tmp/cat.err" || { sed 's/^/  | /' "$tmp/cat.err" | head -3; return 1; }
	local want got distinct
	want=$(cat "$@" | wc -l)
	got=$(wc -l <"$tmp/cat.out")
	distinct=$("$py" -c 'import json,sys; print(len({json.loads(l)["event_id"] for l in sys.stdin}))' <"$tmp/cat.out")
	[ "$got" -eq "$want" ] && [ "$distinct" -eq "$want" ] && return 0
	echo "  $got records, $distinct distinct, expected $want"
	return 1
}
stats_in() { # MANIFEST: records_in of stats.json at the tip
	git --git-dir="$1" show "$ref:stats.json" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["records_in"])'
}
run_bg() { # NAME ARGS...: kiln run ARGS in the background; its pid in $tmp/NAME.pid
	local name=$1
	shift
	("$kiln" run "$pipeline" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null; echo $? >"$tmp/$name.rc") &
}
wait_rc() { # NAME...: (after `wait`) prints the runs that did not exit 0
	local n
	for n in "$@"; do
		[ "$(cat "$tmp/$n.rc" 2>/dev/null)" = 0 ] || { echo "  $n: exit $(cat "$tmp/$n.rc" 2>/dev/null)"; sed 's/^/  | /' "$tmp/$n.err" | head -3; }
	done
}

# ---- N file runs of one source at once -----------------------------------------------
# (into an existing repository: creating one at once has its own test below)
m=$tmp/m.git st=$tmp/store
git init -q --bare "$m"
names=()
for i in $(seq 1 "$runs_n"); do
	names+=("file$i")
	run_bg "file$i" --set source.path="$tmp/in.jsonl" --set store.url="file://$st" --set manifest.repo="$m" \
		--set shards.target_bytes=256K
done
wait
bad=$(wait_rc "${names[@]}")
check "$runs_n concurrent file runs all exit 0" test -z "$bad"
[ -z "$bad" ] || echo "$bad"
check "every record is in the version exactly once" exactly_once "$m" "$st" "$tmp/in.jsonl"
check "stats.json counts each record once" test "$(stats_in "$m")" -eq "$records"
check "git fsck accepts the manifest" gitm "$m" fsck --strict --no-progress
check "the runs that lost the race say so in their logs (or won)" \
	test "$(grep -l '"rerun"' "$tmp"/file*.err | wc -l)" -le $((runs_n - 1))

# ---- creating the manifest repository from two runs at once -----------------------------
head -n 200 "$tmp/in.jsonl" >"$tmp/small.jsonl"
create_fail=0
for r in $(seq 1 "$races"); do
	run_bg "ca$r" --set source.path="$tmp/small.jsonl" --set store.url="file://$tmp/cs$r" --set manifest.repo="$tmp/c$r/deep/m.git"
	run_bg "cb$r" --set source.path="$tmp/small.jsonl" --set store.url="file://$tmp/cs$r" --set manifest.repo="$tmp/c$r/deep/m.git"
	wait
	bad=$(wait_rc "ca$r" "cb$r")
	[ -z "$bad" ] || { create_fail=$((create_fail + 1)); echo "$bad"; }
	exactly_once "$tmp/c$r/deep/m.git" "$tmp/cs$r" "$tmp/small.jsonl" || create_fail=$((create_fail + 1))
done
check "two first runs creating one repository both succeed ($races rounds)" test "$create_fail" -eq 0
check "no temporary repository is left beside it" test -z "$(find "$tmp"/c*/deep -maxdepth 1 -name '*.init-*')"

# ---- two stdin runs of different input at once ------------------------------------------
"$py" "$gen" --records 3000 --invalid-rate 0 --seed 22 -o "$tmp/s1.jsonl"
"$py" "$gen" --records 3000 --invalid-rate 0 --seed 23 -o "$tmp/s2.jsonl"
sm=$tmp/sm.git ss=$tmp/sstore
for i in 1 2; do
	("$kiln" run "$pipeline" --set source.path=- --set source.name=piped --set store.url="file://$ss" \
		--set manifest.repo="$sm" <"$tmp/s$i.jsonl" >"$tmp/stdin$i.out" 2>"$tmp/stdin$i.err"; echo $? >"$tmp/stdin$i.rc") &
done
wait
committed=()
stdin_ok=true
for i in 1 2; do
	rc=$(cat "$tmp/stdin$i.rc")
	if [ "$rc" = 0 ]; then
		committed+=("$tmp/s$i.jsonl")
	elif ! grep -q 'send this input again' "$tmp/stdin$i.err"; then
		stdin_ok=false
		echo "  stdin run $i: exit $rc without saying why:"
		sed 's/^/  | /' "$tmp/stdin$i.err" | head -3
	fi
done
check "each stdin run commits or says its input must be sent again" $stdin_ok
check "at least one stdin run committed" test "${#committed[@]}" -ge 1
check "what the stdin runs committed is there exactly once" exactly_once "$sm" "$ss" "${committed[@]}"

# ---- gc looping while runs upload --------------------------------------------------------
"$py" "$gen" --records "$records" --invalid-rate 0 --seed 24 -o "$tmp/g1.jsonl"
"$py" "$gen" --records "$records" --invalid-rate 0 --seed 25 -o "$tmp/g2.jsonl"
touch "$tmp/gc.loop"
(
	n=0
	while [ -e "$tmp/gc.loop" ]; do
		"$kiln" gc --apply --manifest "$m" --store "file://$st" >>"$tmp/gcloop.out" 2>>"$tmp/gcloop.err" ||
			echo "gc exit $?" >>"$tmp/gcloop.fail"
		n=$((n + 1))
	done
	echo "$n" >"$tmp/gcloop.n"
) &
gcpid=$!
run_bg gr1 --set source.path="$tmp/g1.jsonl" --set source.name=g1 --set store.url="file://$st" --set manifest.repo="$m" \
	--set shards.target_bytes=64K
run_bg gr2 --set source.path="$tmp/g2.jsonl" --set source.name=g2 --set store.url="file://$st" --set manifest.repo="$m" \
	--set shards.target_bytes=64K
for n in gr1 gr2; do
	while [ ! -e "$tmp/$n.rc" ]; do ms_sleep 50; done
done
rm -f "$tmp/gc.loop"
wait "$gcpid"
echo "  gc ran $(cat "$tmp/gcloop.n") times during the runs"
bad=$(wait_rc gr1 gr2)
check "runs with gc looping beside them exit 0" test -z "$bad"
[ -z "$bad" ] || echo "$bad"
check "gc never failed meanwhile" test ! -e "$tmp/gcloop.fail"
[ ! -e "$tmp/gcloop.fail" ] || { cat "$tmp/gcloop.fail"; sed 's/^/  | /' "$tmp/gcloop.err" | tail -20; }
check "every shard of the version is there (verify --deep)" \
	status_is 0 "$kiln" verify user-events@main --deep --manifest "$m" --store "file://$st"
check "every record is there exactly once after gc" exactly_once "$m" "$st" "$tmp/in.jsonl" "$tmp/g1.jsonl" "$tmp/g2.jsonl"

# ---- a shard removed before its run commits: the run commits nothing ---------------------
mkfifo "$tmp/feed"
"$py" "$gen" --records 40000 --invalid-rate 0 --seed 26 -o "$tmp/f.jsonl"
before=$(gitm "$m" rev-parse "$ref")
("$kiln" run "$pipeline" --set source.path=- --set source.name=fed --set store.url="file://$st" --set manifest.repo="$m" \
	--set shards.target_bytes=32K <"$tmp/feed" >"$tmp/fed.out" 2>"$tmp/fed.err"; echo $? >"$tmp/fed.rc") &
exec 7>"$tmp/feed"
head -n 32000 "$tmp/f.jsonl" >&7 # more batches than the curate ring holds: shards close and upload
# wait until the run has uploaded shards nothing references yet
for _ in $(seq 1 300); do
	"$kiln" gc --manifest "$m" --store "file://$st" >"$tmp/young.out" 2>&1
	grep -Eq ' [1-9][0-9]* young' "$tmp/young.out" && break
	ms_sleep 100
done
check "the run's uploaded shards are young to gc" grep -Eq ' [1-9][0-9]* young' "$tmp/young.out"
check "gc --apply (default grace) keeps them" status_is 0 "$kiln" gc --apply --manifest "$m" --store "file://$st"
check "gc --apply says it kept them" grep -Eq ' 0 orphaned, [1-9][0-9]* young' "$tmp/out"
check "gc --apply --grace 0 (unsafe on purpose) deletes them" status_is 0 "$kiln" gc --apply --grace 0 --manifest "$m" --store "file://$st"
check "gc --grace 0 deleted some" grep -Eq 'deleted: [1-9][0-9]* shards' "$tmp/out"
tail -n +32001 "$tmp/f.jsonl" >&7
exec 7>&-
while [ ! -e "$tmp/fed.rc" ]; do ms_sleep 50; done
check "the run whose shards were deleted exits non-zero" test "$(cat "$tmp/fed.rc")" != 0
check "and says which shard is gone and that nothing was committed" \
	one_line "$tmp/fed.err" "shards/[0-9a-f]{2}/[0-9a-f]{64}\.jsonl\.zst: this run's shard is gone.*nothing committed"
check "the branch did not move" test "$(gitm "$m" rev-parse "$ref")" = "$before"

# ---- ref locks ------------------------------------------------------------------------
head -n 100 "$tmp/f.jsonl" >"$tmp/l1.jsonl"
lock=$m/$ref.lock
: >"$lock"
touch -d '2 hours ago' "$lock"
check "a stale ref lock: the run exits non-zero" \
	status_is 2 "$kiln" run "$pipeline" --set source.path="$tmp/l1.jsonl" --set source.name=l1 --set store.url="file://$st" --set manifest.repo="$m"
check "a stale ref lock: named, with what to do" one_line "$tmp/err" "is locked by $lock, [0-9]+ s old: .*remove that file"
rm -f "$lock"
: >"$lock"
run_bg lockwait --set source.path="$tmp/l1.jsonl" --set source.name=l1 --set store.url="file://$st" \
	--set manifest.repo="$m" --set log.level=debug
# the peer lets go once the run has found its lock held
for _ in $(seq 1 600); do
	grep -q '"commit_retry"' "$tmp/lockwait.err" 2>/dev/null && break
	ms_sleep 50
done
check "the wait is logged as commit retries" grep -q '"commit_retry"' "$tmp/lockwait.err"
rm -f "$lock"
wait
check "a ref lock a peer holds for a moment is waited for" test "$(cat "$tmp/lockwait.rc")" = 0

# ---- two branches reading one source into one store: their own quarantine objects ------
"$py" "$gen" --records 400 --invalid-rate 0.1 --seed 27 -o "$tmp/q.jsonl"
for b in main exp; do
	run_bg "q$b" --set source.path="$tmp/q.jsonl" --set source.name=qsrc --set branch=$b \
		--set store.url="file://$tmp/qstore" --set manifest.repo="$tmp/q.git"
done
wait
check "two branches quarantine one source: both runs exit 0" test -z "$(wait_rc qmain qexp)"
check "each branch has its own quarantine object" test "$(find "$tmp/qstore/quarantine/qsrc/0/user-events" -name '*.jsonl.zst' | wc -l)" -eq 2
check "under quarantine/<topic>/<partition>/<dataset>/<branch>/" \
	test -n "$(find "$tmp/qstore/quarantine/qsrc/0/user-events/exp" -name '*-*.jsonl.zst')"

# ---- gc packs the repository and prunes the debris of lost races --------------------------
find "$m/objects" -type f -exec touch -d '2 hours ago' {} +
loose_before=$(gitm "$m" count-objects -v | awk '$1 == "count:" { print $2 }')
check "gc --apply compacts the manifest" status_is 0 "$kiln" gc --apply --manifest "$m" --store "file://$st"
check "gc --apply reports the packing" grep -Eq '^manifest: [1-9][0-9]* reachable objects packed; removed [1-9][0-9]* loose' "$tmp/out"
check "no loose objects are left (there were $loose_before)" \
	test "$(gitm "$m" count-objects -v | awk '$1 == "count:" { print $2 }')" -eq 0
check "one pack" test "$(gitm "$m" count-objects -v | awk '$1 == "packs:" { print $2 }')" -eq 1
check "git fsck accepts the compacted manifest" gitm "$m" fsck --strict --no-progress
check "nothing unreachable is left" test -z "$(gitm "$m" fsck --unreachable --no-reflogs --no-progress 2>&1)"
check "every version still verifies after compaction" \
	status_is 0 "$kiln" verify user-events@main --deep --manifest "$m" --store "file://$st"

check "no personal data in any log" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
