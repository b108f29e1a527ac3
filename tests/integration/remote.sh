#!/usr/bin/env bash
# Branches, garbage collection, du and shared manifests end to end on real
# `kiln run`s (generated user events into a file:// store):
# - `kiln branch` from main, a run on the branch resuming from its lineage,
#   refusals (existing branch, bad name, unknown FROM, another dataset);
# - `kiln du` numbers recomputed from the manifest with git and python;
# - `kiln gc`: no orphans after clean runs; the shards of a run whose commit
#   never reached the manifest are reported (dry run, nothing deleted), then
#   deleted with --apply, and nothing else is (every referenced shard,
#   quarantine/ and raw/ stay); --keep policies; a missing shard exits 1;
# - manifest.remote: two hosts (two local manifests) running at the same time
#   into one bare remote, the loser of the race rebased, no shard line lost;
#   a third host resumes from the remote's lineage; an unreachable remote;
# - `git fsck --strict` on every repository.
# Needs git; skips (exit 77) without it.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
gen=$src/bench/gen-user-events.py
pipeline=$src/pipelines/user-events.yaml
main=refs/heads/user-events/main
exp=refs/heads/user-events/exp

command -v git >/dev/null || { echo "SKIP: git is not installed"; exit 77; }
need_kiln

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

k() { # NAME WANT_STATUS ARGS...: `kiln ARGS`, output in $tmp/NAME.out/.err
	local name=$1 want=$2 rc=0
	shift 2
	"$kiln" "$@" </dev/null >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
	[ "$rc" -eq "$want" ] && return 0
	echo "  kiln $*: exit $rc, expected $want"
	sed 's/^/  | /' "$tmp/$name.err" "$tmp/$name.out" | head -8
	return 1
}

contains() { # FILE FIXED-STRING
	grep -qF -- "$2" "$1" || { echo "  $1 lacks '$2':"; sed 's/^/  | /' "$1" | head -8; return 1; }
}

one_line_error() { # NAME PATTERN: stderr is one line matching the ERE
	[ "$(wc -l <"$tmp/$1.err")" -eq 1 ] && grep -Eq -- "$2" "$tmp/$1.err" && return 0
	echo "  stderr of $1 (wanted one line matching /$2/):"
	sed 's/^/  | /' "$tmp/$1.err" | head -5
	return 1
}

# The shards a ref lists: "hash bytes records" lines, sorted and unique.
shards_of() { # REPO REF
	local f
	git --git-dir="$1" ls-tree -r --name-only "$2" splits | while read -r f; do
		git --git-dir="$1" show "$2:$f"
	done | "$py" -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    print(e["shard"], e["bytes"], e["records"])' | sort -u
}
sum_col() { awk -v c="$1" '{ s += $c } END { print s + 0 }'; }

unset KILN_BRANCH KILN_SPLIT_SALT
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
(umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$tmp/hmac.key")
small=(--set shards.target_bytes=64K)

# ---- a run on main, a branch, a run on the branch ----------------------------
"$py" "$gen" --records 3000 --invalid-rate 0.05 --seed 11 -o "$tmp/in.jsonl"
check "run on main exits 0" k run1 0 run "$pipeline" "${small[@]}"
c1=$(git --git-dir="$tmp/m.git" rev-parse -q --verify "$main")
check "kiln branch exits 0" k branch1 0 branch user-events exp
check "kiln branch names the new branch" contains "$tmp/branch1.out" "user-events@exp: branched from user-events@main"
check "the branch points at main's commit" test "$(git --git-dir="$tmp/m.git" rev-parse -q --verify "$exp")" = "$c1"
check "an existing branch: exit 2" k branch2 2 branch user-events exp user-events@main
check "an existing branch: one line" one_line_error branch2 "already exists"
check "a bad branch name: exit 2" k branch3 2 branch user-events Exp
check "a bad branch name: one line" one_line_error branch3 "must match"
check "an unknown FROM: exit 2" k branch4 2 branch user-events x user-events@nope
check "an unknown FROM: one line naming it" one_line_error branch4 "user-events@nope"
check "FROM of another dataset: exit 2" k branch5 2 branch user-events y other@main
check "FROM by commit id and by short name" k branch6 0 branch user-events from-commit "${c1:0:12}"
check "kiln branch --help exits 0" k branch7 0 branch --help

"$py" "$gen" --records 1000 --invalid-rate 0.05 --seed 12 >>"$tmp/in.jsonl"
check "run on the branch exits 0" k run2 0 run "$pipeline" "${small[@]}" --set branch=exp
check "the branch run resumed from main's lineage" contains "$tmp/run2.out" "offsets 3000-3999"
check "the branch commit sits on main's" \
	test "$(git --git-dir="$tmp/m.git" rev-parse -q --verify "$exp^")" = "$c1"
check "main did not move" test "$(git --git-dir="$tmp/m.git" rev-parse -q --verify "$main")" = "$c1"

# ---- du ---------------------------------------------------------------------------
shards_of "$tmp/m.git" "$main" >"$tmp/main.shards"
shards_of "$tmp/m.git" "$exp" >"$tmp/exp.shards"
check "kiln du exits 0" k du1 0 du user-events --bytes
du_ok() {
	local main_bytes exp_bytes exp_unique main_n exp_n all_n row
	main_bytes=$(sum_col 2 <"$tmp/main.shards")
	exp_bytes=$(sum_col 2 <"$tmp/exp.shards")
	exp_unique=$(comm -13 "$tmp/main.shards" "$tmp/exp.shards" | sum_col 2)
	main_n=$(wc -l <"$tmp/main.shards")
	exp_n=$(wc -l <"$tmp/exp.shards")
	all_n=$(sort -u "$tmp/main.shards" "$tmp/exp.shards" | wc -l)
	# VERSION TYPE COMMIT SHARDS RECORDS BYTES UNIQUE SHARED
	row=$(awk '$1 == "user-events@main" { print $4, $6, $7, $8 }' "$tmp/du1.out")
	[ "$row" = "$main_n $main_bytes 0 $main_bytes" ] || { echo "  main row: '$row'"; return 1; }
	row=$(awk '$1 == "user-events@exp" { print $4, $6, $7, $8 }' "$tmp/du1.out")
	[ "$row" = "$exp_n $exp_bytes $exp_unique $((exp_bytes - exp_unique))" ] || { echo "  exp row: '$row'"; return 1; }
	row=$(awk '$1 == "all" { print $3, $4 }' "$tmp/du1.out")
	[ "$row" = "$all_n $exp_bytes" ] || { echo "  total row: '$row'"; return 1; }
	[ "$(awk '$1 == "user-events@main" { print $5 }' "$tmp/du1.out")" = "$(awk '{ s += $3 } END { print s }' "$tmp/main.shards")" ]
}
check "du rows match the manifest (total, unique, shared)" du_ok
check "du of an unknown dataset: exit 2" k du2 2 du nope
check "du without a manifest: exit 2" k du3 2 du user-events --manifest "$tmp/none.git"
check "du did not create a repository" test ! -e "$tmp/none.git"

# ---- gc ------------------------------------------------------------------------------
listing() { (cd "$1" && find . -type f ! -path './.tmp/*' | sort); }
check "gc after clean runs exits 0" k gc1 0 gc
check "gc after clean runs finds no orphans" contains "$tmp/gc1.out" "reclaimable: 0 shards"
check "gc says quarantine and raw are collected only by --retention" contains "$tmp/gc1.out" "quarantine/ and raw/ objects are collected only by kiln gc --retention"

# a run whose commit never reached this manifest: its shards are orphans
"$py" "$gen" --records 800 --invalid-rate 0.05 --seed 13 -o "$tmp/lost.jsonl"
check "a run into another manifest (the lost commit) exits 0" \
	k lost 0 run "$pipeline" "${small[@]}" --set source.path="$tmp/lost.jsonl" --set manifest.repo="$tmp/lost.git"
shards_of "$tmp/lost.git" "$main" | awk '{ print "./shards/" substr($1, 1, 2) "/" $1 ".jsonl.zst" }' | sort >"$tmp/lost.keys"
lost_n=$(wc -l <"$tmp/lost.keys")
rm -rf "$tmp/lost.git"
listing "$tmp/store" >"$tmp/store.before"
check "gc within the grace period exits 0" k gc2y 0 gc --apply -v
check "gc keeps young orphans (a run may be about to commit them)" contains "$tmp/gc2y.out" "0 orphaned, $lost_n young"
check "gc within the grace period deletes nothing" diff -u "$tmp/store.before" <(listing "$tmp/store")
# past the grace period (1 h by default) they are orphans
sed 's#^\./#'"$tmp/store/"'#' "$tmp/lost.keys" | xargs touch -d '2 hours ago'
check "gc dry run exits 0" k gc2 0 gc -v
check "gc dry run counts the orphans" contains "$tmp/gc2.out" "$lost_n orphaned"
check "gc dry run lists exactly them" diff -u "$tmp/lost.keys" \
	<(awk '$1 == "orphan" { print "./" $2 }' "$tmp/gc2.out" | sort)
check "gc dry run deletes nothing" diff -u "$tmp/store.before" <(listing "$tmp/store")
check "gc --apply exits 0" k gc3 0 gc --apply
check "gc --apply reports the deletions" contains "$tmp/gc3.out" "deleted: $lost_n shards"
check "gc --apply deleted exactly the orphans" diff -u <(comm -23 "$tmp/store.before" "$tmp/lost.keys") \
	<(listing "$tmp/store")
check "quarantine objects are still there" test -n "$(find "$tmp/store/quarantine" -name '*.jsonl.zst')"
check "gc after --apply finds no orphans" k gc4 0 gc --keep tags
check "--keep tags keeps the branch tips" contains "$tmp/gc4.out" "reclaimable: 0 shards"
check "--keep younger-than=30d exits 0" k gc5 0 gc --keep younger-than=30d --keep branches
check "a bad --keep: exit 2" k gc6 2 gc --keep everything
check "a bad --keep: one line" one_line_error gc6 "--keep"
check "no store: exit 2" k gc7 2 gc --store ""
check "gc takes store and manifest from a pipeline" k gc8 0 gc --pipeline "$pipeline"
victim=$(awk 'NR == 1 { print "shards/" substr($1, 1, 2) "/" $1 ".jsonl.zst" }' "$tmp/main.shards")
mv "$tmp/store/$victim" "$tmp/victim"
check "a missing shard: exit 1" k gc9 1 gc
check "a missing shard is named" contains "$tmp/gc9.out" "missing $victim"
mv "$tmp/victim" "$tmp/store/$victim"
check "git fsck --strict (manifest)" git --git-dir="$tmp/m.git" fsck --strict --no-progress --no-dangling

# ---- manifest.remote: two hosts, one remote ------------------------------------------------
git init -q --bare "$tmp/remote.git"
"$py" "$gen" --records 4000 --invalid-rate 0.05 --seed 21 -o "$tmp/host-a.jsonl"
"$py" "$gen" --records 4000 --invalid-rate 0.05 --seed 22 -o "$tmp/host-b.jsonl"
host() { # NAME HOST MANIFEST REMOTE [ARGS...]: a run of host HOST's file
	local name=$1 h=$2 m=$3 r=$4
	shift 4
	k "$name" 0 run "$pipeline" "${small[@]}" --set source.path="$tmp/$h.jsonl" --set source.name="$h" \
		--set store.url="file://$tmp/shared-store" --set manifest.repo="$m" --set manifest.remote="$r" "$@"
}
# both at once: one of them finds the remote moved and is rebased
host ra 'host-a' "$tmp/a.git" "$tmp/remote.git" &
pa=$!
host rb 'host-b' "$tmp/b.git" "file://$tmp/remote.git" &
pb=$!
wait "$pa"
ra=$?
wait "$pb"
rb=$?
check "host a's run exits 0" test "$ra" -eq 0
check "host b's run exits 0" test "$rb" -eq 0
remote_ok() { # the remote holds both hosts' shards, lineage and counts
	local want have
	shards_of "$tmp/remote.git" "$main" >"$tmp/remote.shards"
	want=$(grep -ho 'in [0-9]* shards' "$tmp/ra.out" "$tmp/rb.out" | awk '{ s += $2 } END { print s }')
	have=$(wc -l <"$tmp/remote.shards")
	[ "$have" -eq "$want" ] || { echo "  remote lists $have shards, the runs made $want"; return 1; }
	git --git-dir="$tmp/remote.git" show "$main:lineage.json" >"$tmp/remote.lineage"
	git --git-dir="$tmp/remote.git" show "$main:stats.json" >"$tmp/remote.stats"
	"$py" - "$tmp/remote.lineage" "$tmp/remote.stats" <<'PY'
import json, sys
lin = {p["topic"]: p["next"] for p in json.load(open(sys.argv[1]))["partitions"]}
assert lin == {"host-a": 4000, "host-b": 4000}, lin
st = json.load(open(sys.argv[2]))
assert st["records_in"] == 8000, st
assert st["records_in"] == st["valid"] + st["quarantined"] + st.get("erased", 0), st
assert st["valid"] == sum(s["records"] for s in st["splits"].values()), st
PY
}
check "the remote has every shard line, both lineages and summed stats" remote_ok
tip_of() { git --git-dir="$1" rev-parse -q --verify "$2" 2>/dev/null; }
hosts_tips_ok() { # one host's tip is the remote's, the other's is its parent: both pushes landed, in either order
	local r p a b
	r=$(tip_of "$tmp/remote.git" "$main") p=$(tip_of "$tmp/remote.git" "$main^")
	a=$(tip_of "$tmp/a.git" "$main") b=$(tip_of "$tmp/b.git" "$main")
	if [ -z "$r" ] || [ -z "$p" ] || [ -z "$a" ] || [ -z "$b" ]; then
		echo "  a branch is missing"
		return 1
	fi
	[ "$a" = "$r" ] && [ "$b" = "$p" ] && return 0
	[ "$b" = "$r" ] && [ "$a" = "$p" ] && return 0
	echo "  remote $r (parent $p), host a $a, host b $b"
	return 1
}
check "the hosts' branches are the remote's tip and its parent" hosts_tips_ok
check "the remote's history is linear, one commit per run" \
	test "$(git --git-dir="$tmp/remote.git" rev-list --count --merges "$main")" -eq 0 -a \
	"$(git --git-dir="$tmp/remote.git" rev-list --count "$main")" -eq 2
check "every shard the remote lists is in the store" \
	bash -c 'while read -r h _; do test -f "$0/shards/${h:0:2}/$h.jsonl.zst" || exit 1; done <"$1"' \
	"$tmp/shared-store" "$tmp/remote.shards"

# more records on host a; host b with nothing new still pushes (a no-op)
"$py" "$gen" --records 500 --invalid-rate 0.05 --seed 23 >>"$tmp/host-a.jsonl"
check "host a again: resumes after the fetch" host ra2 'host-a' "$tmp/a.git" "$tmp/remote.git"
check "host a again: offsets 4000-4499" contains "$tmp/ra2.out" "offsets 4000-4499"
check "host b again: nothing new" host rb2 'host-b' "$tmp/b.git" "file://$tmp/remote.git"
check "host b again: says so" contains "$tmp/rb2.out" "nothing new"
check "host b's manifest caught up with the remote" \
	test "$(git --git-dir="$tmp/b.git" rev-parse "$main")" = "$(git --git-dir="$tmp/remote.git" rev-parse "$main")"
# a third host with a fresh manifest reads host a's file: the remote's lineage says it is done
check "a fresh host resumes from the remote" host rc 'host-a' "$tmp/c.git" "$tmp/remote.git"
check "a fresh host: nothing new" contains "$tmp/rc.out" "nothing new"
# a host that curated offline (no remote) joins later: its commit is rebased
"$py" "$gen" --records 300 --invalid-rate 0.05 --seed 24 -o "$tmp/host-x.jsonl"
check "an offline run exits 0" k rx1 0 run "$pipeline" "${small[@]}" --set source.path="$tmp/host-x.jsonl" \
	--set source.name=host-x --set store.url="file://$tmp/shared-store" --set manifest.repo="$tmp/x.git"
before=$(git --git-dir="$tmp/remote.git" rev-parse "$main")
check "the offline host joins: nothing new, its commit is pushed" host rx2 'host-x' "$tmp/x.git" "$tmp/remote.git"
check "the offline commit was rebased onto the remote" \
	test "$(git --git-dir="$tmp/remote.git" rev-parse "$main^")" = "$before" -a \
	"$(git --git-dir="$tmp/x.git" rev-parse "$main")" = "$(git --git-dir="$tmp/remote.git" rev-parse "$main")"
check "the remote's lineage has all three hosts" \
	test "$(git --git-dir="$tmp/remote.git" show "$main:lineage.json" | grep -o '"topic":"host-[abx]"' | sort -u | wc -l)" -eq 3
check "an unreachable remote: exit 2" k rd 2 run "$pipeline" --set manifest.repo="$tmp/d.git" \
	--set manifest.remote="$tmp/no-such-remote.git" --set store.url="file://$tmp/d-store"
check "an unreachable remote: one line naming it" one_line_error rd "no-such-remote\.git"
check "kiln gc on the shared store: no orphans" k gc10 0 gc --manifest "$tmp/remote.git" \
	--store "file://$tmp/shared-store"
check "kiln gc on the shared store: says so" contains "$tmp/gc10.out" "reclaimable: 0 shards"
for r in remote a b c x; do
	check "git fsck --strict ($r)" git --git-dir="$tmp/$r.git" fsck --strict --no-progress --no-dangling
done

check "no personal data in any log, stdout or stderr" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
