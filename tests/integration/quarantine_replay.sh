#!/usr/bin/env bash
# kiln quarantine replay: a file run of generated user events under a
# contract made stricter (event_type "click" left out of its enum) puts the
# clicks in the quarantine with the generator's broken records; replaying
# the quarantine with the pipeline pointed at the fixed contract commits the
# clicks as one new version on the same branch and drops their lines from
# the quarantine. Checked with python3 and zstandard (not kiln) against the
# generator's ground truth: every input record is in exactly one place (a
# curated shard of the branch tip, by its event_id, or a quarantine line of
# the branch, by its offset), the quarantine holds exactly the records the
# fixed contract rejects (those that still fail stay), stats.json balances
# with the quarantine's counts per code, quarantine-replayed.json lists the
# replayed offsets and none of them is still in the quarantine. Then: a
# rerun does nothing (same tip, exit 0); the state a replay killed after its
# commit and before its cleanup leaves (the quarantine objects restored)
# and replays killed with SIGKILL at several points both end, after a rerun,
# in the same state with one replay commit (kiln quarantine stats shows each
# record once meanwhile); --dry-run and --json; a later
# kiln run goes on at the next offset (lineage.json unchanged by the replay)
# and kiln verify --deep passes; with manifest.remote, a replay commit is
# rebased on another host's run; no personal value in any output.
# Needs git, zstd and Debian's python3-zstandard (skips, exit 77, without them).
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
gen=$src/bench/gen-user-events.py

for tool in git zstd; do
	command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (run scripts/bootstrap)"; exit 77; }
done
need_py zstandard

tmp=$(mktemp -d)
cleanup() {
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

unset KILN_BRANCH KILN_SPLIT_SALT
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
(umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$tmp/hmac.key")
"$py" "$gen" --records 300 --invalid-rate 0.2 --seed 5 --max-record-bytes 16384 -o "$tmp/in.jsonl" --expect "$tmp/in.expect"

# the strict contract (an older version without "click") and the fixed one
sed -e 's/value: \[page_view, click, search/value: [page_view, search/' -e 's/^version: 1\.2\.0$/version: 1.1.0/' \
	"$src/contracts/user-events.yaml" >"$tmp/strict.yaml"
sed "s|^contract: .*|contract: $tmp/strict.yaml|" "$src/pipelines/user-events.yaml" >"$tmp/strict-p.yaml"
sed "s|^contract: .*|contract: $src/contracts/user-events.yaml|" "$src/pipelines/user-events.yaml" >"$tmp/fixed-p.yaml"
size=(--set source.max_record_bytes=16384)
count_clicks() { # the valid clicks of the input so far: what the strict contract wrongly quarantines
	"$py" -c '
import json, sys
lines = open(sys.argv[2], "rb").read().split(b"\n")
facts = [json.loads(l) for l in open(sys.argv[1])]
print(sum(1 for i, f in enumerate(facts) if f["outcome"] == "valid" and json.loads(lines[i])["event_type"] == "click"))' \
		"$tmp/in.expect" "$tmp/in.jsonl"
}
clicks=$(count_clicks)

git_m() { git --git-dir="$tmp/m.git" "$@"; }
tip() { git_m rev-parse -q --verify refs/heads/user-events/main; }
replay() { "$kiln" quarantine replay user-events --pipeline "$tmp/fixed-p.yaml" "${size[@]}" "$@"; }
qsum() { (cd "$tmp/store" && find quarantine -type f -name '*.jsonl.zst' | sort | xargs -r sha256sum); }
allsum() { (cd "$tmp" && find store m.git -type f | sort | xargs -r sha256sum); }

# The one checker: python3 + zstandard over the store and the manifest.
cat >"$tmp/check.py" <<'EOF'
import collections, json, os, subprocess, sys
import zstandard

store, repo, ref, expect, want_replayed = sys.argv[1:6]
want_replayed = int(want_replayed)
dataset, branch = "user-events", "main"
problems = []

def git(*args):
    return subprocess.run(["git", "--git-dir", repo] + list(args), check=True,
                          capture_output=True).stdout

def unzst(path):
    with open(path, "rb") as f:
        return zstandard.ZstdDecompressor().decompress(f.read()).decode("utf-8", "surrogateescape")

facts = [json.loads(l) for l in open(expect)]
ids = collections.Counter(f["event_id"] for f in facts if isinstance(f["event_id"], str))

# the curated records at the tip, by event_id
in_shards = collections.Counter()
shard_records = 0
for path in git("ls-tree", "-r", "--name-only", ref, "splits/").decode().split():
    for line in git("show", f"{ref}:{path}").decode().splitlines():
        h = json.loads(line)["shard"]
        for rec in unzst(os.path.join(store, "shards", h[:2], h + ".jsonl.zst")).splitlines():
            in_shards[json.loads(rec).get("event_id")] += 1
            shard_records += 1

# the branch's quarantine lines, by offset
in_q = collections.Counter()
q_codes = collections.Counter()
for root, _, files in os.walk(os.path.join(store, "quarantine")):
    parts = os.path.relpath(root, os.path.join(store, "quarantine")).split(os.sep)
    if len(parts) != 4 or parts[2:] != [dataset, branch]:
        continue
    for name in files:
        if not name.endswith(".jsonl.zst"):
            continue
        for line in unzst(os.path.join(root, name)).splitlines():
            q = json.loads(line)
            in_q[q["offset"]] += 1
            q_codes[q["code"]] += 1

for i, f in enumerate(facts):
    eid = f["event_id"]
    s = in_shards[eid] if isinstance(eid, str) and ids[eid] == 1 else 0
    if in_q[i] + s != 1:
        problems.append(f"offset {i}: {in_q[i]} quarantine lines, {s} curated records")
    if (f["outcome"] == "valid") != (s == 1):
        problems.append(f"offset {i}: outcome {f['outcome']} but {s} curated records")
extra = [e for e in in_shards if not (isinstance(e, str) and ids[e] == 1)]
if extra:
    problems.append(f"{len(extra)} curated records of no input record")

stats = json.loads(git("show", f"{ref}:stats.json"))
valid_splits = sum(s["records"] for s in stats["splits"].values())
for name, got, want in [("records_in", stats["records_in"], len(facts)),
                        ("valid", stats["valid"], shard_records),
                        ("splits records", valid_splits, shard_records),
                        ("quarantined", stats["quarantined"], sum(in_q.values())),
                        ("in = valid + quarantined", stats["valid"] + stats["quarantined"], stats["records_in"])]:
    if got != want:
        problems.append(f"stats.json {name}: {got}, expected {want}")
if stats["quarantined_by_code"] != dict(q_codes):
    problems.append(f"stats.json quarantined_by_code {stats['quarantined_by_code']} != {dict(q_codes)}")

listed = set()
try:
    doc = json.loads(git("show", f"{ref}:quarantine-replayed.json"))
    for p in doc["partitions"]:
        for first, last in p["offsets"]:
            listed.update(range(first, last + 1))
except subprocess.CalledProcessError:
    pass
if len(listed) != want_replayed:
    problems.append(f"quarantine-replayed.json lists {len(listed)} offsets, expected {want_replayed}")
if listed & set(in_q):
    problems.append(f"{len(listed & set(in_q))} listed offsets still in the quarantine")
for i in listed:
    if facts[i]["outcome"] != "valid":
        problems.append(f"offset {i} listed but the fixed contract rejects it")

for p in problems[:20]:
    print("  " + p)
if problems:
    print(f"  {len(problems)} problems")
sys.exit(1 if problems else 0)
EOF
fails() { ! "$@" >/dev/null 2>&1; }
state_ok() { # REPLAYED [STORE REPO]: the store and the branch tip hold every record once
	"$py" "$tmp/check.py" "${2:-$tmp/store}" "${3:-$tmp/m.git}" refs/heads/user-events/main "$tmp/in.expect" "$1"
}

# ---- the strict run
check "the strict run commits" status_is 0 "$kiln" run "$tmp/strict-p.yaml" "${size[@]}"
cp "$tmp/out" "$tmp/run1.out"
c1=$(tip)
check "some valid clicks were quarantined" test "$clicks" -gt 20
check "before the replay the checker sees the clicks quarantined, not curated" \
	test "$(state_ok 0 | tail -1)" = "  $clicks problems"
cp -a "$tmp/store" "$tmp/store.before" && cp -a "$tmp/m.git" "$tmp/m.before"
q_before=$(qsum) all_before=$(allsum)

# ---- --dry-run writes nothing
check "--dry-run exits 0" status_is 0 replay --dry-run
cp "$tmp/out" "$tmp/dry.out"
check "  counts what would pass" grep -q "^user-events@main: $clicks quarantined records would pass, [0-9]* would stay (dry run: nothing written)$" "$tmp/dry.out"
check "  per code" grep -Eq "^  enum +$clicks +[0-9]+$" "$tmp/dry.out"
check "  commits nothing" test "$(tip)" = "$c1"
check "  leaves the quarantine as it was" test "$(qsum)" = "$q_before"
check "  and writes no file in the store or the manifest repository" test "$(allsum)" = "$all_before"

# ---- the replay
check "the replay exits 0" status_is 0 replay
cp "$tmp/out" "$tmp/replay.out"
c2=$(tip)
check "  with one new commit on the branch" test "$(git_m rev-parse "$c2^")" = "$c1"
check "  saying how many records" grep -q "^user-events@${c2:0:12}: $clicks records replayed from the quarantine in [0-9]* shards, [0-9]* stay quarantined$" "$tmp/replay.out"
check "every record is once in a shard or the quarantine, stats.json balances" state_ok "$clicks"
check "lineage.json is unchanged" test "$(git_m rev-parse "$c1:lineage.json")" = "$(git_m rev-parse "$c2:lineage.json")"
check "git fsck is clean" git_m fsck --no-progress --strict

# ---- a rerun does nothing
check "a rerun exits 0" status_is 0 replay
check "  says nothing to replay" grep -q '^user-events@main: nothing to replay' "$tmp/out"
check "  and commits nothing" test "$(tip)" = "$c2"
q_after=$(qsum)
check "  nor touches the quarantine" test "$(qsum)" = "$q_after"
check "--json: one document" status_is 0 replay --json
cp "$tmp/out" "$tmp/json.out"
check "  with the counts" "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["commit"] is None and d["replayed"] == 0 and d["listed"] == int(sys.argv[2]), d
assert d["dataset"] == "user-events" and d["branch"] == "main" and d["dry_run"] is False' "$tmp/json.out" "$clicks"

# ---- killed after its commit, before its cleanup: the quarantine objects
# are those from before the replay while the branch lists the records
rm -rf "$tmp/store/quarantine" && cp -a "$tmp/store.before/quarantine" "$tmp/store/quarantine"
check "after a crash between commit and cleanup the records are twice" fails state_ok "$clicks"
stays=$(grep -c '"outcome": "quarantined"' "$tmp/in.expect")
check "  kiln quarantine stats counts each record once even so" status_is 0 "$kiln" quarantine stats user-events@main --json
check "  (the listed ones left out)" "$py" -c 'import json, sys; assert json.load(open(sys.argv[1]))["total"] == int(sys.argv[2])' "$tmp/out" "$stays"
check "  and without the repository, every line" status_is 0 env -u KILN_MANIFEST "$kiln" quarantine stats user-events@main --json
check "  (the listed ones too)" "$py" -c 'import json, sys; assert json.load(open(sys.argv[1]))["total"] == int(sys.argv[2])' "$tmp/out" "$((stays + clicks))"
check "a rerun exits 0" status_is 0 replay
cp "$tmp/out" "$tmp/repair.out"
check "  commits nothing" test "$(tip)" = "$c2"
check "  drops the replayed lines" grep -q "^quarantine: $clicks replayed lines dropped" "$tmp/repair.out"
check "  and ends in the same state" state_ok "$clicks"
check "  with the same quarantine objects" test "$(qsum)" = "$q_after"

# ---- SIGKILL at several points, then a rerun
for delay in 0 5 15 30 60 120; do
	rm -rf "$tmp/store" "$tmp/m.git"
	cp -a "$tmp/store.before" "$tmp/store" && cp -a "$tmp/m.before" "$tmp/m.git"
	"$kiln" quarantine replay user-events --pipeline "$tmp/fixed-p.yaml" "${size[@]}" \
		>"$tmp/kill-$delay.out" 2>"$tmp/kill-$delay.err" &
	pid=$!
	ms_sleep "$delay"
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	# a kill inside the ref update can leave its lock: no process holds it now
	find "$tmp/m.git" -name '*.lock' -delete
	echo "  killed after $delay ms: $(git_m rev-list --count refs/heads/user-events/main) commits on the branch"
	check "killed after $delay ms: a rerun exits 0" status_is 0 replay
	check "  one replay commit on the branch" test "$(git_m rev-list --count refs/heads/user-events/main)" -eq 2
	check "  every record once" state_ok "$clicks"
	check "  the same quarantine objects" test "$(qsum)" = "$q_after"
done

# ---- a later run goes on where the strict run stopped
"$py" "$gen" --records 40 --invalid-rate 0.2 --seed 6 --max-record-bytes 16384 -o "$tmp/in.jsonl" --expect "$tmp/in.expect" --append
check "a kiln run after the replay commits" status_is 0 "$kiln" run "$tmp/fixed-p.yaml" "${size[@]}"
check "  exactly the new records" grep -q '^user-events@[0-9a-f]*: +40 records .*offsets 300-339 of user-events' "$tmp/out"
check "every record of both runs once, stats.json balances" state_ok "$clicks"
check "kiln verify --deep passes" status_is 0 "$kiln" verify user-events@main --deep

# ---- with manifest.remote: a replay committed here while another host's
# run reached the remote first is rebased on it by the next run here
r=$tmp/r
mkdir -p "$r" && git init -q --bare "$r/R.git"
at() { # HOST ARGS...: with that host's repository, the shared remote and store
	local host=$1
	shift
	KILN_STORE=file://$r/store "$@" "${size[@]}" --set manifest.repo="$r/$host.git" --set manifest.remote="$r/R.git"
}
rclicks=$(count_clicks)
check "remote: the strict run on host A" status_is 0 at A "$kiln" run "$tmp/strict-p.yaml"
check "remote: a replay on host A, not pushed" status_is 0 env KILN_STORE=file://$r/store \
	"$kiln" quarantine replay user-events --pipeline "$tmp/fixed-p.yaml" "${size[@]}" --set manifest.repo="$r/A.git"
"$py" "$gen" --records 40 --invalid-rate 0.2 --seed 7 --max-record-bytes 16384 -o "$tmp/in.jsonl" --expect "$tmp/in.expect" --append
check "remote: host B's run reaches the remote first" status_is 0 at B "$kiln" run "$tmp/fixed-p.yaml"
check "remote: host A's next run rebases the replay on it" status_is 0 at A "$kiln" run "$tmp/fixed-p.yaml"
check "  the replay commit is on the remote, on top of B's" \
	test "$(git --git-dir="$r/R.git" log -1 --format=%s refs/heads/user-events/main)" = "user-events: $rclicks records replayed from the quarantine, 3 shards"
check "  every record once, stats.json balances" state_ok "$rclicks" "$r/store" "$r/R.git"

check "no personal data in any output" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
