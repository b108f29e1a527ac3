#!/usr/bin/env bash
# Dedup by a business key (pipeline `dedup: {key, window}`, docs/PIPELINES.md)
# end to end: a file source with duplicates inside one run (the first
# occurrence curated, the later ones quarantined as duplicate; stats.json,
# profile.json and `kiln quarantine stats` agree), across two runs (the
# second run's re-sent records quarantined: the index came from the
# manifest), a run killed with SIGKILL then run again (every record once),
# window expiry (a 2 s window, a sleep: the re-sent keys are curated again
# and the old segment is pruned from dedup/), a nested key path
# (customer.customer_id; a record without it is missing_required), keys
# refused at load with file:line:col, dataset.json's dedup member, a
# dedup.key change refused naming both keys or replaced (dedup.replaces_key:
# a new index, the old segments dropped) and dedup ended, dedup.max_keys
# failing a run (nothing committed) and a run's open, kiln check's dedup
# problems at file:line:col, and a Kafka run on `kiln broker` where
# kcat sends records twice (a producer retry), killed with SIGKILL after a
# snapshot and restarted. Every count is checked by dedup_check.py with
# python3-zstandard and git, not kiln. Without dedup nothing of this shows
# (golden.sh).
# Needs git, kcat and Debian's python3-zstandard; skips (exit 77) without them.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
chk=$src/tests/integration/dedup_check.py

for t in git kcat; do
	command -v "$t" >/dev/null || { echo "SKIP: $t is not installed (run scripts/bootstrap)"; exit 77; }
done
need_py zstandard
need_kiln

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT
unset KILN_BRANCH KILN_SPLIT_SALT

(umask 077 && printf '%064x\n' 0xdedd0b1e >"$tmp/hmac.key")

# seq at line 10, order_id at 13, customer at 16, items (an array) at 26
cat >"$tmp/orders-contract.yaml" <<'EOF'
apiVersion: v3.0.2
kind: DataContract
id: orders
version: 1.0.0
status: active
schema:
  - name: order
    logicalType: object
    properties:
      - name: seq
        logicalType: integer
        required: true
      - name: order_id
        logicalType: string
        required: true
      - name: customer
        logicalType: object
        properties:
          - name: customer_id
            logicalType: string
            classification: pii
          - name: tier
            logicalType: string
      - name: amount
        logicalType: integer
      - name: items
        logicalType: array
        items:
          logicalType: object
          properties:
            - name: id
              logicalType: string
EOF

pipeline() { # FILE DATASET KEYS WINDOW [SOURCE YAML]: dedup.key at line 18, column 8
	local source=${5:-"source: {kind: file, path: $2.jsonl, name: $2}"}
	cat >"$1" <<EOF
dataset: $2
branch: main
contract: orders-contract.yaml
$source
pseudonymise:
  key_file: hmac.key
split:
  key: order_id
  salt: orders-v1
  ratios: {train: 0.6, dev: 0.2, test: 0.2}
store:
  url: file://$tmp/${store:-store}
manifest:
  repo: $tmp/m.git
profile: {enabled: true}
workers: 2
dedup:
  key: $3
  window: $4
EOF
}

# gen FILE FIRST-SEQ COUNT MODULUS [OFFSET [PREFIX]]: records seq FIRST..,
# order_id PREFIX<(seq+OFFSET) mod MODULUS> (PREFIX o), so a modulus below
# the count repeats keys
gen() {
	"$py" - "$@" <<'PY'
import json, sys
out, first, count, mod = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
off = int(sys.argv[5]) if len(sys.argv) > 5 else 0
prefix = sys.argv[6] if len(sys.argv) > 6 else "o"
with open(out, "a") as f:
    for s in range(first, first + count):
        f.write(json.dumps({"seq": s, "order_id": prefix + "%d" % ((s + off) % mod), "amount": s,
                            "customer": {"customer_id": "cust-%03d" % (s % 17), "tier": "gold"},
                            "items": [{"id": "i%d" % s}]}) + "\n")
PY
}

run() { # PIPELINE NAME [ARG...]: kiln run, its output in $tmp/NAME.{out,err}
	local p=$1 n=$2
	shift 2
	(cd "$tmp" && "$kiln" run "$p" "$@" >"$n.out" 2>"$n.err" </dev/null) && return 0
	sed 's/^/  | /' "$tmp/$n.err" | head -5
	return 1
}

check_ds() { # DATASET [--fresh N] [--key K]... INPUTS...: dedup_check.py on the dataset
	local ds=$1
	shift
	"$py" "$chk" --repo "$tmp/m.git" --store "$tmp/${store:-store}" --dataset "$ds" --topic "$ds" "$@" >"$tmp/check.out" 2>&1 \
		&& return 0
	sed 's/^/  | /' "$tmp/check.out" | tail -5
	return 1
}

# ---- refused at load, in one line naming file:line:col; nothing written
refused() { # NAME KEYS PATTERN
	local rc=0
	pipeline "$tmp/$1.yaml" "$1" "$2" 7d
	(cd "$tmp" && "$kiln" run "$1.yaml" >"$1.out" 2>"$1.err" </dev/null) || rc=$?
	[ "$rc" -ne 0 ] && [ "$(wc -l <"$tmp/$1.err")" -eq 1 ] && grep -Eq -- "$3" "$tmp/$1.err" && return 0
	echo "  exit $rc, stderr (wanted one line matching /$3/):"
	sed 's/^/  | /' "$tmp/$1.err" | head -5
	return 1
}
check "dedup.key through an array is refused naming the array" refused arr '[items.id]' \
	"arr.yaml:18:9: dedup.key: \"items.id\" goes through the array \"items\" \\(.*orders-contract.yaml:26:9\\): a path cannot step into an array\$"
check "dedup.key naming an object is refused" refused obj '[order_id, customer]' \
	"obj.yaml:18:19: dedup.key: field \"customer\" must be a scalar"
check "dedup.key naming no field is refused" refused nofield '[order_no]' \
	"nofield.yaml:18:9: dedup.key: the contract .* has no top-level field \"order_no\""
check "dedup.key naming a field twice is refused" refused twice '[order_id, order_id]' \
	"twice.yaml:18:19: dedup.key: \"order_id\" is named twice"
pipeline "$tmp/badwin.yaml" badwin '[order_id]' 7x
check "a dedup.window that is not an age is refused" status_is 2 sh -c "cd '$tmp' && '$kiln' run badwin.yaml"
check "... naming dedup.window at its line:col" grep -q "badwin.yaml:19:11: dedup.window: expected a positive age" "$tmp/err"
check "nothing was written by the refused runs" test ! -e "$tmp/store/shards" -a ! -e "$tmp/m.git/refs/heads"

# ---- one run: 300 records, 120 keys (o0..o119 three times, o0..o59 a fourth)
pipeline "$tmp/one.yaml" one '[order_id]' 7d
gen "$tmp/one.jsonl" 0 300 120
check "run 1 exits 0" run one.yaml one1
check "run 1: first occurrences curated, the rest quarantined as duplicate (stats, profile, shards, quarantine)" \
	check_ds one --key order_id "$tmp/one.jsonl"
check "run 1 says 120 valid, 180 quarantined" grep -q "+300 records (120 valid, 180 quarantined)" "$tmp/one1.out"
check "kiln quarantine stats shows the duplicate code" sh -c \
	"cd '$tmp' && '$kiln' quarantine stats one --pipeline one.yaml | grep -Eq '^ +180 +duplicate\$'"
check "kiln quarantine replay keeps the duplicates quarantined (the index still holds their keys)" sh -c \
	"cd '$tmp' && '$kiln' quarantine replay one --pipeline one.yaml 2>&1 | grep -q 'nothing to replay (180 quarantined records still fail)'"
check "the commit tree holds one dedup segment" test "$(git --git-dir "$tmp/m.git" ls-tree --name-only refs/heads/one/main dedup/ | wc -l)" -eq 1
check "the segment holds the 120 keys (24-byte header, 16 bytes a key)" test \
	"$(git --git-dir "$tmp/m.git" cat-file -s "$(git --git-dir "$tmp/m.git" ls-tree refs/heads/one/main dedup/ | awk '{print $3}')")" -eq $((24 + 120 * 16))
segment_keys() { # the keys of run 1's segment are the keyed BLAKE2b-128 of docs/FORMATS.md of o0..o119
	git --git-dir "$tmp/m.git" show "refs/heads/one/main:$(git --git-dir "$tmp/m.git" ls-tree --name-only refs/heads/one/main dedup/)" >"$tmp/seg1"
	"$py" - "$tmp" <<'PY'
import hashlib, os, struct, sys
tmp = sys.argv[1]
hmac_key = bytes.fromhex(open(os.path.join(tmp, "hmac.key")).read().strip())
key = hashlib.blake2b(b"kiln dedup index key v1", key=hmac_key, digest_size=32).digest()
def h(v):
    v = v.encode()
    return hashlib.blake2b(b"s" + struct.pack("<I", len(v)) + v, key=key, digest_size=16).digest()
seg = open(os.path.join(tmp, "seg1"), "rb").read()
magic, ms, n = struct.unpack("<8sQQ", seg[:24])
assert magic == b"KILNDDP1" and n == 120 and len(seg) == 24 + 16 * n, (magic, n, len(seg))
keys = [seg[24 + 16 * i:40 + 16 * i] for i in range(n)]
assert keys == sorted(h("o%d" % i) for i in range(120)), "the keys are not those of docs/FORMATS.md"
PY
}
check "the segment's keys are the keyed hashes docs/FORMATS.md defines" segment_keys
check "the segment holds no key value" sh -c "! git --git-dir '$tmp/m.git' show refs/heads/one/main:dedup/\$(git --git-dir '$tmp/m.git' ls-tree --name-only refs/heads/one/main dedup/ | cut -d/ -f2) | grep -aq 'o1'"

# ---- a second run: 60 re-sent (seq 300.. with keys o0..o59) and 40 new keys
gen "$tmp/one.jsonl" 300 60 120 -300
gen "$tmp/one.jsonl" 360 40 1000 -360 n
check "run 2 exits 0" run one.yaml one2
check "run 2: the re-sent records are quarantined as duplicate, the new ones curated" \
	check_ds one --key order_id "$tmp/one.jsonl"
check "run 2 says 40 valid, 60 quarantined" grep -q "+100 records (40 valid, 60 quarantined)" "$tmp/one2.out"
check "dedup/ holds a segment per run" test "$(git --git-dir "$tmp/m.git" ls-tree --name-only refs/heads/one/main dedup/ | wc -l)" -eq 2

# ---- kiln erase rewrites the commits: dedup/ is carried through as it was
git --git-dir "$tmp/m.git" ls-tree refs/heads/one/main dedup/ >"$tmp/dedup.before"
check "kiln erase of a customer exits 0" sh -c \
	"cd '$tmp' && '$kiln' erase one --subject customer.customer_id=cust-003 --pipeline one.yaml >erase.out 2>erase.err"
check "the erasure rewrote the branch" sh -c "[ \"\$(git --git-dir '$tmp/m.git' show refs/heads/one/main:stats.json | grep -c erased)\" -eq 1 ]"
check "dedup/ is the same after the erasure" sh -c \
	"git --git-dir '$tmp/m.git' ls-tree refs/heads/one/main dedup/ | cmp -s - '$tmp/dedup.before'"
gen "$tmp/one.jsonl" 400 10 1000 -400 n
check "a run after the erasure exits 0" run one.yaml one3
check "... and still knows the keys: 10 re-sent, 10 duplicates" grep -q "+10 records (0 valid, 10 quarantined)" "$tmp/one3.out"

# ---- kill -9 in the middle of a run, then run again: every record once
pipeline "$tmp/kill.yaml" kill '[order_id]' 7d
gen "$tmp/kill.jsonl" 0 1000 700
check "run 1 of kill exits 0" run kill.yaml kill1
gen "$tmp/kill.jsonl" 1000 200000 150000 -1000
(cd "$tmp" && exec "$kiln" run kill.yaml >kill2.out 2>kill2.err </dev/null) &
victim=$!
pids+=($victim)
ms_sleep 400
kill -KILL "$victim" 2>/dev/null
wait "$victim" 2>/dev/null
check "the killed run committed nothing" test "$(git --git-dir "$tmp/m.git" rev-list --count refs/heads/kill/main)" -eq 1
check "the run after the kill exits 0" run kill.yaml kill3
check "after the kill: every record curated or quarantined once, duplicates only as duplicates" \
	check_ds kill --key order_id "$tmp/kill.jsonl"

# ---- window expiry: a 2 s window, keys re-sent after 3 s are curated again
pipeline "$tmp/win.yaml" win '[order_id]' 2s
gen "$tmp/win.jsonl" 0 50 40
check "window run 1 exits 0" run win.yaml win1
old_segment=$(git --git-dir "$tmp/m.git" ls-tree --name-only refs/heads/win/main dedup/)
sleep 3
gen "$tmp/win.jsonl" 50 50 40 -50
check "window run 2 exits 0" run win.yaml win2
check "after the window: the re-sent keys are curated again (once each)" check_ds win --key order_id --fresh 50 "$tmp/win.jsonl"
check "the expired segment was pruned from dedup/" sh -c \
	"git --git-dir '$tmp/m.git' ls-tree --name-only refs/heads/win/main dedup/ >'$tmp/segs' && [ \$(wc -l <'$tmp/segs') -eq 1 ] && ! grep -qx '$old_segment' '$tmp/segs'"

# a segment whose bytes were altered (a hostile manifest) stops the run at
# open, in one line naming the file of the tip
g() { git --git-dir "$tmp/m.git" "$@"; }
seg=$(g ls-tree --name-only refs/heads/win/main dedup/ | head -1)
bad=$(printf 'KILNDDP1 not a segment' | g hash-object -w --stdin)
dtree=$(printf '100644 blob %s\t%s\n' "$bad" "${seg#dedup/}" | g mktree)
root=$({ g ls-tree refs/heads/win/main | grep -v "	dedup\$"; printf '040000 tree %s\tdedup\n' "$dtree"; } | g mktree)
g update-ref refs/heads/win/main "$(g commit-tree "$root" -p refs/heads/win/main -m hostile)"
check "a hostile segment stops the run (exit 2)" status_is 2 sh -c "cd '$tmp' && '$kiln' run win.yaml"
check "... in one line naming the segment" sh -c \
	"[ \$(wc -l <'$tmp/err') -eq 1 ] && grep -q 'refs/heads/win/main:$seg: not a dedup segment' '$tmp/err'"

# ---- a nested key path, with a second key; a record without it is missing_required
pipeline "$tmp/nest.yaml" nest '[customer.customer_id, customer.tier]' 7d
gen "$tmp/nest.jsonl" 0 40 40
"$py" - "$tmp/nest.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"seq": 40, "order_id": "x", "customer": {"tier": "gold"}}) + "\n")
    f.write(json.dumps({"seq": 41, "order_id": "y"}) + "\n")
    f.write(json.dumps({"seq": 42, "order_id": "z", "customer": {"customer_id": "cust-001", "tier": "silver"}}) + "\n")
PY
check "nested run exits 0" run nest.yaml nest1
check "nested key: one record per (customer_id, tier), the two without customer_id missing_required" \
	check_ds nest --key customer.customer_id --key customer.tier "$tmp/nest.jsonl"

# ---- dataset.json records the dedup settings of the commit that used them
ds_json() { git --git-dir "$tmp/m.git" show "refs/heads/$1/main:dataset.json"; }
check "dataset.json records dedup.key and the window in seconds" sh -c \
	"git --git-dir '$tmp/m.git' show refs/heads/one/main:dataset.json | grep -Fqx '  \"dedup\": {\"key\":[\"order_id\"],\"window_seconds\":604800}'"
check "... a two-field key as its paths in order" sh -c \
	"git --git-dir '$tmp/m.git' show refs/heads/nest/main:dataset.json | grep -Fqx '  \"dedup\": {\"key\":[\"customer.customer_id\",\"customer.tier\"],\"window_seconds\":604800}'"

# ---- another dedup.key on a branch: refused naming both, unless
# dedup.replaces_key names the branch's (then a new index: the old
# segments go, they hashed other fields); a pipeline without dedup: is
# refused too, unless it ends dedup with replaces_key alone
pipeline "$tmp/chg.yaml" chg '[order_id]' 7d
pipeline "$tmp/chg2.yaml" chg '[customer.customer_id]' 7d
gen "$tmp/chg.jsonl" 0 40 40
check "chg run 1 (key order_id) exits 0" run chg.yaml chg1
check "a run with another dedup.key is refused (exit 2)" status_is 2 sh -c "cd '$tmp' && '$kiln' run chg2.yaml"
check "... in one line naming both keys, file:line:col and the way out" sh -c \
	"[ \$(wc -l <'$tmp/err') -eq 1 ] && grep -q 'chg2.yaml:18:9: dedup.key: \[\"customer.customer_id\"\] differs from \[\"order_id\"\], the key chg/main.s last commit deduplicated by .*set dedup.replaces_key: \[\"order_id\"\], or run on a new branch' '$tmp/err'"
check "... and nothing was committed" test "$(git --git-dir "$tmp/m.git" rev-list --count refs/heads/chg/main)" -eq 1
gen "$tmp/chg.jsonl" 40 40 1000 -40 n
check "with dedup.replaces_key naming the branch's key it runs" run chg2.yaml chg2 --set dedup.replaces_key=order_id
check "... against a new index: one record per customer (17), the rest duplicate" grep -q "+40 records (17 valid, 23 quarantined)" "$tmp/chg2.out"
check "... dataset.json records the new key" sh -c "git --git-dir '$tmp/m.git' show refs/heads/chg/main:dataset.json | grep -Fq '\"dedup\": {\"key\":[\"customer.customer_id\"],'"
check "... dedup/ holds the new key's segment only (17 keys; order_id's went)" sh -c \
	"[ \$(git --git-dir '$tmp/m.git' ls-tree refs/heads/chg/main dedup/ | wc -l) -eq 1 ] && [ \$(git --git-dir '$tmp/m.git' cat-file -s \$(git --git-dir '$tmp/m.git' ls-tree refs/heads/chg/main dedup/ | awk '{print \$3}')) -eq $((24 + 17 * 16)) ]"
check "the old key again is refused, naming both" sh -c \
	"cd '$tmp' && ! '$kiln' run chg.yaml >chg3.out 2>chg3.err && grep -q 'dedup.key: \[\"order_id\"\] differs from \[\"customer.customer_id\"\]' chg3.err"
head -16 "$tmp/chg.yaml" >"$tmp/chg-off.yaml"
cp "$tmp/chg-off.yaml" "$tmp/chg-end.yaml"
echo 'dedup: {replaces_key: [customer.customer_id]}' >>"$tmp/chg-end.yaml"
gen "$tmp/chg.jsonl" 80 10 1000 -80 n
check "a pipeline without dedup: on the branch is refused (exit 2)" status_is 2 sh -c "cd '$tmp' && '$kiln' run chg-off.yaml"
check "... in one line naming the branch's key and the way out" sh -c \
	"[ \$(wc -l <'$tmp/err') -eq 1 ] && grep -q 'chg-off.yaml: no dedup:, but chg/main.s last commit deduplicated by \[\"customer.customer_id\"\].*set dedup.replaces_key' '$tmp/err'"
check "dedup: {replaces_key} alone ends dedup on the branch" run chg-end.yaml chgend
check "... its records are not deduplicated" grep -q "+10 records (10 valid, 0 quarantined)" "$tmp/chgend.out"
check "... dedup/ is gone and dataset.json records no dedup" sh -c \
	"[ -z \"\$(git --git-dir '$tmp/m.git' ls-tree refs/heads/chg/main dedup)\" ] && ! git --git-dir '$tmp/m.git' show refs/heads/chg/main:dataset.json | grep -q dedup"
gen "$tmp/chg.jsonl" 90 10 1000 -90 n
check "... and a pipeline without dedup: runs on it again" run chg-off.yaml chgoff

# ---- dedup.max_keys: an index that would hold more keys fails the run in
# one line saying what to set (nothing committed), never stops deduplicating
pipeline "$tmp/cap.yaml" cap '[order_id]' 7d
echo "  max_keys: 50" >>"$tmp/cap.yaml"
gen "$tmp/cap.jsonl" 0 80 60
check "a run with 60 keys and dedup.max_keys 50 fails (exit 2)" status_is 2 sh -c "cd '$tmp' && '$kiln' run cap.yaml"
check "... in one line naming dedup.max_keys and what to set" sh -c \
	"[ \$(wc -l <'$tmp/err') -eq 1 ] && grep -q 'dedup.max_keys: the dedup index holds 50 keys .*raise dedup.max_keys .* or shorten dedup.window' '$tmp/err'"
check "... and committed nothing" test -z "$(git --git-dir "$tmp/m.git" for-each-ref refs/heads/cap/)"
check "with dedup.max_keys 60 the 60 keys fit" run cap.yaml cap1 --set dedup.max_keys=60
check "... 60 valid, 20 duplicate" grep -q "+80 records (60 valid, 20 quarantined)" "$tmp/cap1.out"
gen "$tmp/cap.jsonl" 80 5 1000 -80 n
check "a new key past the 60 held fails the next run" status_is 2 sh -c "cd '$tmp' && '$kiln' run cap.yaml --set dedup.max_keys=60"
check "... naming dedup.max_keys" grep -q 'dedup.max_keys: the dedup index holds 60 keys' "$tmp/err"
check "an index already past dedup.max_keys is refused at open, naming the branch" sh -c \
	"cd '$tmp' && ! '$kiln' run cap.yaml --set dedup.max_keys=59 >cap3.out 2>cap3.err && [ \$(wc -l <cap3.err) -eq 1 ] && grep -q 'cap.yaml: dedup.max_keys: cap/main.s index holds more than 59 keys committed within dedup.window: raise dedup.max_keys' cap3.err"
check "... the branch is as the last run left it" test "$(git --git-dir "$tmp/m.git" rev-list --count refs/heads/cap/main)" -eq 1
check "with room the new keys are curated" run cap.yaml cap4 --set dedup.max_keys=65
check "... 5 valid" grep -q "+5 records (5 valid, 0 quarantined)" "$tmp/cap4.out"

# ---- kiln check reports a bad dedup config with file:line:col, like
# other keys, and names the dedup settings when they are good
kcheck() { # NAME KEYS WINDOW [MAX_KEYS]: kiln check on a new pipeline NAME.yaml
	pipeline "$tmp/$1.yaml" one "$2" "$3"
	[ -n "${4:-}" ] && echo "  max_keys: $4" >>"$tmp/$1.yaml"
	(cd "$tmp" && "$kiln" check "$1.yaml" >"$1.out" 2>&1)
}
check_line() { # NAME STATUS CHECK PATTERN
	grep -Eq "^$2 +$3 +$4" "$tmp/$1.out" && return 0
	sed 's/^/  | /' "$tmp/$1.out" | head -12
	return 1
}
check "kiln check: a dedup.key through an array is a problem (exit 1)" status_is 1 kcheck kc1 '[items.id]' 7d
check "... on the contract line, at file:line:col" check_line kc1 PROBLEM contract \
	'kc1.yaml:18:9: dedup.key: "items.id" goes through the array "items"'
check "kiln check: a dedup.key naming no field" status_is 1 kcheck kc2 '[order_no]' 7d
check "... named at file:line:col" check_line kc2 PROBLEM contract 'kc2.yaml:18:9: dedup.key: the contract .* has no top-level field "order_no"'
check "kiln check: a dedup.window that is not an age" status_is 1 kcheck kc3 '[order_id]' 7x
check "... named at file:line:col" check_line kc3 PROBLEM pipeline 'kc3.yaml:19:11: dedup.window: expected a positive age'
check "kiln check: dedup.max_keys 0" status_is 1 kcheck kc4 '[order_id]' 7d 0
check "... named at file:line:col" check_line kc4 PROBLEM pipeline 'kc4.yaml:20:13: dedup.max_keys: must be between 1 and 4000000000'
check "kiln check: dedup.max_keys not a count" status_is 1 kcheck kc5 '[order_id]' 7d lots
check "... named at file:line:col" check_line kc5 PROBLEM pipeline 'kc5.yaml:20:13: dedup.max_keys'
check "kiln check: another dedup.key than the branch's" status_is 1 kcheck kc6 '[customer.customer_id]' 7d
check "... on the branch line, naming both" check_line kc6 PROBLEM branch \
	'kc6.yaml:18:9: dedup.key: \["customer.customer_id"\] differs from \["order_id"\]'
check "kiln check: good dedup settings are named on the contract line" status_is 0 kcheck kc7 '[order_id]' 2h 5000
check "... key, window, max_keys" check_line kc7 ok contract '.*; split key order_id; dedup key order_id, window 7200s, max_keys 5000$'

# ---- two writers on one branch: a stdin run holds o0..o49 uncommitted
# (its input still open) while a file run commits o25..o74; the stdin run's
# commit then finds another writer's keys in the tip and is refused
# (KILN_EFENCED, which a stdin run reports as another run having committed
# first; nothing committed); run again, its overlap is quarantined as
# duplicate
pipeline "$tmp/wf.yaml" writers '[order_id]' 7d "source: {kind: file, path: wf.jsonl, name: wf}"
pipeline "$tmp/ws.yaml" writers '[order_id]' 7d "source: {kind: stdin, name: ws}"
gen "$tmp/ws.jsonl" 0 50 100000
gen "$tmp/wf.jsonl" 50 50 100000 -25
mkfifo "$tmp/ws.fifo"
(cd "$tmp" && exec "$kiln" run ws.yaml <ws.fifo >ws1.out 2>ws1.err) &
writer=$!
pids+=($writer)
exec 3>"$tmp/ws.fifo"
cat "$tmp/ws.jsonl" >&3
check "the file run commits meanwhile" run wf.yaml wf1
exec 3>&-
rc=0
wait "$writer" || rc=$?
check "the stdin run's commit is refused (exit 2)" test "$rc" -eq 2
check "... in one line: another run committed first, nothing of this one was" sh -c \
	"[ \$(wc -l <'$tmp/ws1.err') -eq 1 ] && grep -q 'committed first.*nothing of this run was committed' '$tmp/ws1.err'"
check "the stdin run again" sh -c "cd '$tmp' && '$kiln' run ws.yaml <ws.jsonl >ws2.out 2>ws2.err"
check "... quarantines the 25 keys the file run committed" grep -q "+50 records (25 valid, 25 quarantined)" "$tmp/ws2.out"
check "the branch holds each key once" sh -c \
	"git --git-dir '$tmp/m.git' show refs/heads/writers/main:stats.json | grep -q '\"valid\": 75,'"

# ---- manifest.remote: host b commits locally (o0..o99), host a commits and
# pushes (o50..o149: the hosts did not share an index, both commit
# o50..o99), then b runs with the remote: its commit is rebased onto a's
# with its segment, and its index, loaded from the rebased tip, holds a's keys
git init -q --bare "$tmp/remote.git"
for h in a b; do
	pipeline "$tmp/h$h.yaml" hosts '[order_id]' 7d "source: {kind: file, path: h$h.jsonl, name: h$h}"
	sed -i "s|repo: $tmp/m.git|repo: $tmp/h$h.git|" "$tmp/h$h.yaml"
done
gen "$tmp/hb.jsonl" 0 100 100000
gen "$tmp/ha.jsonl" 100 100 100000 -50
check "host b commits locally" run hb.yaml hb1
check "host a commits and pushes" run ha.yaml ha1 --set manifest.remote="$tmp/remote.git"
gen "$tmp/hb.jsonl" 200 100 100000 -100
check "host b again, with the remote: rebased, then its run" run hb.yaml hb2 --set manifest.remote="$tmp/remote.git"
check "... quarantines a's keys o100..o149 as duplicate" grep -q "+100 records (50 valid, 50 quarantined)" "$tmp/hb2.out"
check "the remote's tip holds the three segments (b's first carried by the rebase)" \
	test "$(git --git-dir "$tmp/remote.git" ls-tree --name-only refs/heads/hosts/main dedup/ | wc -l)" -eq 3
check "the remote counts 50 duplicates" sh -c \
	"git --git-dir '$tmp/remote.git' show refs/heads/hosts/main:stats.json | grep -q '\"quarantined_by_code\": {\"duplicate\":50}'"

# ---- Kafka on `kiln broker`: a daemon commits 300 orders; a second one
# (no snapshot due) reads kcat's retry of those 300 and 300 more orders (100
# of them twice) and is killed with SIGKILL before it commits; the rerun
# reads them again from the branch's positions and its index
"$kiln" broker --partitions 1 --topics korders,kab --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/pf" ] && break; sleep 0.1; done
bs=$(head -1 "$tmp/pf" 2>/dev/null)
check "the broker started" test -n "$bs"
kpipeline() { # FILE SNAPSHOT-YAML [EXTRA [DATASET]]: a Kafka pipeline on topic DATASET (korders)
	local ds=${4:-korders}
	pipeline "$1" "$ds" '[order_id]' 7d "source:
  kind: kafka
  brokers: $bs
  topics: [$ds]
  group: g$ds
  batch: {records: 50, ms: 50}
  options: {session.timeout.ms: \"3000\", heartbeat.interval.ms: \"300\"}
$2
${3:-}"
}
kpipeline "$tmp/k1.yaml" 'snapshot: {records: 100, seconds: 1, drain_seconds: 20}'
kpipeline "$tmp/k2.yaml" 'snapshot: {records: 0, seconds: 3600, drain_seconds: 20}' 'metrics: {listen: 127.0.0.1:0}'
gen "$tmp/k.a" 0 300 300
"$py" - "$tmp/k.a" "$tmp/k.retry" <<'PY'
import json, sys
with open(sys.argv[2], "w") as f:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        r["seq"] += 10000  # the same order, sent again
        f.write(json.dumps(r) + "\n")
PY
gen "$tmp/k.b" 300 300 200 -300 p
check "kcat produced 300 orders" kcat -P -b "$bs" -t korders -l "$tmp/k.a"
(cd "$tmp" && exec "$kiln" run k1.yaml >k1.out 2>k1.log </dev/null) &
daemon=$!
pids+=($daemon)
committed() { # OFFSET: the branch's position on korders is OFFSET
	git --git-dir "$tmp/m.git" show refs/heads/korders/main:lineage.json 2>/dev/null | grep -q "\"next\":$1[,}]"
}
check "the first daemon committed the 300 (within 60 s)" poll 60 committed 300
kill -KILL "$daemon" 2>/dev/null
wait "$daemon" 2>/dev/null
(cd "$tmp" && exec "$kiln" run k2.yaml >k2.out 2>k2.log </dev/null) &
daemon=$!
pids+=($daemon)
port=
for _ in $(seq 100); do
	port=$(grep -o '"event":"listening"[^}]*"port":[0-9]*' "$tmp/k2.log" 2>/dev/null | grep -o '[0-9]*$')
	[ -n "$port" ] && break
	sleep 0.1
done
check "the second daemon announced its metrics port" test -n "$port"
check "kcat produced the retry of the 300" kcat -P -b "$bs" -t korders -l "$tmp/k.retry"
check "kcat produced 300 more" kcat -P -b "$bs" -t korders -l "$tmp/k.b"
consumed() { # the daemon read all 600 new records
	curl -sf "http://127.0.0.1:$port/metrics" 2>/dev/null | grep -Eq '^kiln_records_in_total 600$'
}
check "the second daemon read the 600 (within 60 s)" poll 60 consumed
check "... and quarantined duplicates, not yet committed" sh -c \
	"curl -sf http://127.0.0.1:$port/metrics | grep -Eq '^kiln_records_quarantined_total\\{code=\"duplicate\"\\} 400\$'"
kill -KILL "$daemon" 2>/dev/null
wait "$daemon" 2>/dev/null
check "the killed daemon committed nothing" committed 300
rc=0
(cd "$tmp" && timeout 120 "$kiln" run k1.yaml --stop-at-end >k3.out 2>k3.log </dev/null) || rc=$?
check "the rerun reads to the end and exits 0" test "$rc" -eq 0
check "Kafka: each order curated once, the retried and repeated ones quarantined as duplicate" \
	check_ds korders --key order_id "$tmp/k.a" "$tmp/k.retry" "$tmp/k.b"

# ---- Kafka: a snapshot that fails (the store cannot take its shards) is
# abandoned and read again: the keys it had added are dropped with it, so
# the records read again are not duplicates of themselves
store=store2
mkdir -p "$tmp/store2"
: >"$tmp/store2/shards" # a file where the shards folder goes: every upload fails
kpipeline "$tmp/kab.yaml" 'snapshot: {records: 100, seconds: 1, drain_seconds: 20}' '' kab
gen "$tmp/kab.sent" 0 200 150 0 q
check "kcat produced 200 orders (50 of them twice)" kcat -P -b "$bs" -t kab -l "$tmp/kab.sent"
(cd "$tmp" && exec "$kiln" run kab.yaml >kab.out 2>kab.log </dev/null) &
daemon=$!
pids+=($daemon)
check "the daemon abandoned a snapshot it could not store (within 60 s)" poll 60 grep -q '"event":"abandoned"' "$tmp/kab.log"
rm -f "$tmp/store2/shards"
kab_committed() {
	git --git-dir "$tmp/m.git" show refs/heads/kab/main:lineage.json 2>/dev/null | grep -q '"next":200[,}]'
}
check "once the store takes shards again it commits all 200 (within 60 s)" poll 60 kab_committed
kill -TERM "$daemon" 2>/dev/null
wait "$daemon" 2>/dev/null
check "after the abandoned snapshot: each order curated once, only the repeats quarantined" \
	check_ds kab --key order_id "$tmp/kab.sent"
unset store

check "git fsck --strict" git --git-dir="$tmp/m.git" fsck --strict --no-progress
check "no customer id in a log" bash -c "! grep -l 'cust-0' '$tmp'/*.out '$tmp'/*.err '$tmp'/*.log"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
