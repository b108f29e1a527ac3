#!/usr/bin/env bash
# The quarantine people work with: a file run of generated user events (30 %
# invalid) under quarantine.max_ratio (over it: exit non-zero, nothing
# committed; under it: committed), then `kiln quarantine ls|stats|cat` and
# their --json held to what python3 (zstandard, not kiln) decodes from the
# quarantine objects: every record once with its code, path and count,
# counts per code and path, --code and @BRANCH filters, cat's lines
# byte-identical to the objects' lines, cat refused without the key (no
# --pipeline, a key file others may read, an unset key_env) and never a
# personal value in ls/stats output or any error.
# A Kafka run (kiln broker, kcat) over quarantine.max_ratio stops non-zero
# with nothing committed, under it commits.
# Needs git, zstd and Debian's python3-zstandard (skips, exit 77, without
# them) and kcat.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
gen=$src/bench/gen-user-events.py
pipeline=$src/pipelines/user-events.yaml

need kcat
for tool in git zstd; do
	command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (run scripts/bootstrap)"; exit 77; }
done
need_py zstandard

tmp=$(mktemp -d)
broker_pid=
cleanup() {
	[ -z "$broker_pid" ] || kill -KILL "$broker_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

unset KILN_BRANCH KILN_SPLIT_SALT
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
(umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$tmp/hmac.key")
"$py" "$gen" --records 200 --invalid-rate 0.3 --seed 11 --max-record-bytes 16384 -o "$tmp/in.jsonl" --expect "$tmp/in.expect"
quarantined=$(grep -c '"outcome": "quarantine' "$tmp/in.expect")

q() { "$kiln" quarantine "$@"; }
one_line() { # FILE ERE: FILE is one line matching ERE
	[ "$(wc -l <"$1")" -eq 1 ] && grep -Eq -- "$2" "$1" && return 0
	echo "  $1 (wanted one line matching /$2/):"
	sed 's/^/  | /' "$1" | head -5
	return 1
}

# ---- quarantine.max_ratio
check "the generator quarantines some records" test "$quarantined" -gt 20
check "a run over quarantine.max_ratio exits non-zero" \
	status_is 2 "$kiln" run "$pipeline" --set source.max_record_bytes=16384 --set quarantine.max_ratio=0.1
cp "$tmp/err" "$tmp/ratio.err"
check "it says so in one line, with counts only" \
	one_line "$tmp/ratio.err" "^kiln run: quarantine\.max_ratio: $quarantined of 200 records quarantined \(0\.[0-9]{3} > 0\.100\); nothing committed$"
check "it committed nothing" test -z "$(git --git-dir="$tmp/m.git" for-each-ref 2>/dev/null)"
check "quarantine.max_ratio 0 is refused with file:line:col" \
	status_is 2 "$kiln" run "$pipeline" --set quarantine.max_ratio=0
check "  naming the key" grep -q 'quarantine.max_ratio: must be greater than 0 and at most 1' "$tmp/err"
sed "s|\.\./contracts/|$src/contracts/|" "$pipeline" >"$tmp/bad-ratio.yaml"
printf 'quarantine:\n  max_ratio: 1.5\n' >>"$tmp/bad-ratio.yaml"
ratio_line=$(($(wc -l <"$tmp/bad-ratio.yaml")))
check "quarantine.max_ratio over 1 in a file is refused" status_is 2 "$kiln" run "$tmp/bad-ratio.yaml"
check "  naming file:line:col" one_line "$tmp/err" "^kiln run: $tmp/bad-ratio.yaml:$ratio_line:[0-9]+: quarantine\.max_ratio: must be greater than 0 and at most 1$"
sed "s|\.\./contracts/|$src/contracts/|" "$pipeline" >"$tmp/bad-age.yaml"
printf 'retention: {raw: 30d, quarantine: 3x}\n' >>"$tmp/bad-age.yaml"
check "a retention that is not an age is refused" status_is 2 "$kiln" run "$tmp/bad-age.yaml"
check "  naming file:line:col" one_line "$tmp/err" "^kiln run: $tmp/bad-age.yaml:[0-9]+:[0-9]+: retention\.quarantine: expected an age such as 30d"
check "kiln check shows quarantine.max_ratio" \
	status_is 0 "$kiln" check "$pipeline" --set quarantine.max_ratio=0.5
check "  in its zones line" grep -q '^ok *zones *quarantine.max_ratio 0.500' "$tmp/out"
check "a run under quarantine.max_ratio commits" \
	status_is 0 "$kiln" run "$pipeline" --set source.max_record_bytes=16384 --set quarantine.max_ratio=0.5
check "  to user-events/main" test -n "$(git --git-dir="$tmp/m.git" rev-parse -q --verify refs/heads/user-events/main)"

# ---- what python3 reads from the objects (independent of kiln)
"$py" - "$tmp/store" >"$tmp/want.json" <<'PY'
import json, os, sys, zstandard
root = sys.argv[1]
recs, lines = [], []
for dirpath, _, files in os.walk(os.path.join(root, "quarantine")):
    for f in files:
        key = os.path.relpath(os.path.join(dirpath, f), root)
        data = zstandard.ZstdDecompressor().decompress(open(os.path.join(root, key), "rb").read())
        for line in data.decode().splitlines():
            d = json.loads(line)
            recs.append({"key": key, "topic": d["topic"], "partition": d["partition"], "offset": d["offset"],
                         "code": d["code"], "path": d["path"], "count": d["count"]})
            lines.append(line)
recs.sort(key=lambda r: (r["key"], r["offset"]))
json.dump({"records": recs, "lines": lines}, sys.stdout)
PY
check "the objects hold every quarantined record" \
	"$py" -c 'import json,sys; assert len(json.load(open(sys.argv[1]))["records"]) == int(sys.argv[2])' "$tmp/want.json" "$quarantined"

# ---- ls
check "ls exits 0" status_is 0 q ls user-events
cp "$tmp/out" "$tmp/ls.out"
check "ls prints one line per record" test "$(wc -l <"$tmp/ls.out")" -eq "$quarantined"
check "ls --json exits 0" status_is 0 q ls user-events@main --json --pipeline "$pipeline"
cp "$tmp/out" "$tmp/ls-json.out"
ls_ok() {
	"$py" - "$tmp/want.json" "$tmp/ls-json.out" "$tmp/ls.out" <<'PY'
import json, sys
want = json.load(open(sys.argv[1]))["records"]
doc = json.load(open(sys.argv[2]))
assert doc["dataset"] == "user-events" and doc["branch"] == "main", doc
assert doc["records"] == want, "ls --json differs from the objects"
assert doc["total"] == len(want) and doc["objects"] >= 1
text = [l.split(" ") for l in open(sys.argv[3]).read().splitlines()]
assert [(t[0], int(t[1]), int(t[2]), t[3], int(t[5]), t[6]) for t in text] == \
       [(r["topic"], r["partition"], r["offset"], r["code"], r["count"], r["key"]) for r in want], "ls text"
assert all("record" not in r for r in doc["records"])
PY
}
check "ls and ls --json list each record once, as the objects hold it" ls_ok
check "ls --code type exits 0" status_is 0 q ls user-events --code type --json
cp "$tmp/out" "$tmp/ls-type.out"
check "  and lists the type records only" "$py" -c '
import json, sys
want = [r for r in json.load(open(sys.argv[1]))["records"] if r["code"] == "type"]
got = json.load(open(sys.argv[2]))["records"]
assert want and got == want' "$tmp/want.json" "$tmp/ls-type.out"
check "an unknown --code is refused" status_is 2 q ls user-events --code no_such_code
check "  in one line listing the codes" one_line "$tmp/err" '^kiln quarantine ls: --code: no such rejection code \(codes: json_syntax, '
check "another branch has none" status_is 0 q ls user-events@other --json
check "  (an empty list)" "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["records"]==[] and d["total"]==0' "$tmp/out"
check "another topic has none" status_is 0 q ls user-events --topic other
check "  (no line)" test ! -s "$tmp/out"
check "a bad DATASET is refused" status_is 2 q ls 'User Events'

# ---- stats
check "stats --json exits 0" status_is 0 q stats user-events --json
cp "$tmp/out" "$tmp/stats-json.out"
stats_ok() {
	"$py" - "$tmp/want.json" "$tmp/stats-json.out" <<'PY'
import collections, json, sys
want = json.load(open(sys.argv[1]))["records"]
doc = json.load(open(sys.argv[2]))
assert doc["total"] == len(want), doc
assert doc["by_code"] == dict(collections.Counter(r["code"] for r in want)), doc["by_code"]
assert doc["by_path"] == dict(collections.Counter(r["path"] for r in want)), doc["by_path"]
assert sum(o["records"] for o in doc["by_object"]) == len(want)
assert sorted(o["key"] for o in doc["by_object"]) == sorted({r["key"] for r in want})
assert sum(doc["by_day"].values()) == len(want)
PY
}
check "stats --json counts per code, path, object and day" stats_ok
check "stats (text) exits 0" status_is 0 q stats user-events@main
cp "$tmp/out" "$tmp/stats.out"
check "  and gives the total" grep -q "^user-events@main: $quarantined quarantined records in " "$tmp/stats.out"

# ---- cat: personal data, for the key's holder only
check "cat without --pipeline is refused" status_is 2 q cat user-events
cp "$tmp/err" "$tmp/cat-refused.err"
check "  saying why, in one line" one_line "$tmp/cat-refused.err" 'quarantined records hold personal data'
check "  and printing nothing" test ! -s "$tmp/out"
check "cat with the pipeline exits 0" status_is 0 q cat user-events --pipeline "$pipeline"
cp "$tmp/out" "$tmp/cat.txt"
cp "$tmp/err" "$tmp/cat-notice.err"
check "  says on stderr that it shows personal data and why" \
	one_line "$tmp/cat-notice.err" "^kiln quarantine cat: quarantine records hold personal data; shown because you hold the key file $tmp/hmac.key$"
check "  prints the objects' lines byte for byte" "$py" -c '
import json, sys
want = json.load(open(sys.argv[1]))["lines"]
got = open(sys.argv[2]).read().splitlines()
assert sorted(got) == sorted(want) and len(got) == len(want)' "$tmp/want.json" "$tmp/cat.txt"
check "cat --json exits 0" status_is 0 q cat user-events --pipeline "$pipeline" --json
cp "$tmp/out" "$tmp/cat-json.txt"
check "  one document holding each line" "$py" -c '
import json, sys
want = [json.loads(l) for l in json.load(open(sys.argv[1]))["lines"]]
doc = json.load(open(sys.argv[2]))
assert doc["records"] == want and doc["total"] == len(want)' "$tmp/want.json" "$tmp/cat-json.txt"
chmod 644 "$tmp/hmac.key"
check "cat with a key file others may read is refused" status_is 2 q cat user-events --pipeline "$pipeline"
check "  naming the key file's mode" one_line "$tmp/err" 'personal data; not shown: .*mode 0644'
check "  and printing nothing" test ! -s "$tmp/out"
chmod 600 "$tmp/hmac.key"
sed 's/^  key_file: .*/  key_env: KILN_QCLI_KEY/' "$pipeline" >"$tmp/env.yaml"
sed -i "s|\.\./contracts/|$src/contracts/|" "$tmp/env.yaml"
check "cat with key_env unset is refused" \
	status_is 2 env -u KILN_QCLI_KEY "$kiln" quarantine cat user-events --pipeline "$tmp/env.yaml"
check "  saying why" one_line "$tmp/err" 'personal data; not shown'
check "  and printing nothing" test ! -s "$tmp/out"

# ---- retention: kiln gc --retention
# Two more datasets whose branches read the Kafka topic "clicks" (lineage
# written with git plumbing), raw objects of it, and quarantine objects of
# branches that do not exist or have not committed them; all but one made
# 40 days old with touch -d.
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
gitm() { git --git-dir="$tmp/m.git" "$@"; }
lineage_branch() { # REF LINEAGE-JSON
	local blob tree commit
	blob=$(printf '%s\n' "$2" | gitm hash-object -w --stdin) &&
		tree=$(printf '100644 blob %s\tlineage.json\n' "$blob" | gitm mktree) &&
		commit=$(gitm commit-tree "$tree" -m lineage) && gitm update-ref "refs/heads/$1" "$commit"
}
lineage_branch other-ds/main '{"partitions":[{"topic":"clicks","partition":0,"next":100},{"topic":"clicks","partition":1,"next":50}]}'
lineage_branch third/main '{"partitions":[{"topic":"clicks","partition":0,"next":300}]}'
"$py" - "$tmp/store" <<'PY'
import os, sys, zstandard
for k in ["raw/clicks/0/0-99", "raw/clicks/0/100-199", "raw/clicks/1/0-49", "raw/clicks/1/50-60", "raw/nobody/0/0-9",
          "raw/clicks/0/0-9", "quarantine/user-events/0/user-events/dev/0-5",
          "quarantine/user-events/0/user-events/main/200-210"]:
    p = os.path.join(sys.argv[1], k + ".jsonl.zst")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    line = b"x\n" if k.startswith("raw/") else (
        b'{"topic":"user-events","partition":0,"offset":%d,"code":"type","path":"age",'
        b'"violations":[{"code":"type","path":"age"}],"count":1,"record":null}\n' % int(k.split("/")[-1].split("-")[0]))
    open(p, "wb").write(zstandard.ZstdCompressor(write_checksum=True).compress(line))
PY
find "$tmp/store/raw" "$tmp/store/quarantine" -type f ! -path '*/raw/clicks/0/0-9.jsonl.zst' -exec touch -d '40 days ago' {} +
zones() { (cd "$tmp/store" && find raw quarantine -type f | sort); }
zones >"$tmp/zones.before"
sed "s|\.\./contracts/|$src/contracts/|" "$pipeline" >"$tmp/retention.yaml"
printf 'retention: {raw: 30d, quarantine: 30d}\n' >>"$tmp/retention.yaml"
# what must go: committed by every branch that reads it, and old
"$py" - "$tmp/want.json" >"$tmp/expired.want" <<'PY'
import json, sys
keys = {r["key"] for r in json.load(open(sys.argv[1]))["records"]}
for k in sorted(keys | {"raw/clicks/0/0-99.jsonl.zst", "raw/clicks/1/0-49.jsonl.zst"}):
    print(k)
PY

check "gc --retention without --pipeline is refused" status_is 2 "$kiln" gc --retention
check "gc --retention (dry run) exits 0" status_is 0 "$kiln" gc --retention --pipeline "$tmp/retention.yaml" --json
cp "$tmp/out" "$tmp/retention-dry.out"
check "  deletes nothing" cmp -s "$tmp/zones.before" <(zones)
decisions_ok() { # FILE EXPIRED-WORD
	"$py" - "$1" "$2" "$tmp/expired.want" "$tmp/zones.before" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
objs, summary = lines[:-1], lines[-1]["summary"]
want = open(sys.argv[3]).read().split()
assert sorted(o["key"] for o in objs) == open(sys.argv[4]).read().split(), "every object is reported once"
got = sorted(o["key"] for o in objs if o["decision"] == sys.argv[2])
assert got == want, (got, want)
by = {o["key"]: o for o in objs}
assert by["raw/clicks/0/100-199.jsonl.zst"]["held_by"] == "other-ds@main next 100"
assert by["raw/clicks/1/50-60.jsonl.zst"]["why"] == "uncommitted"
assert by["raw/nobody/0/0-9.jsonl.zst"]["why"] == "unread"
assert by["raw/clicks/0/0-9.jsonl.zst"]["why"] == "young"
assert by["quarantine/user-events/0/user-events/dev/0-5.jsonl.zst"]["why"] == "unread"
assert by["quarantine/user-events/0/user-events/main/200-210.jsonl.zst"]["why"] == "uncommitted"
assert all(o["decision"] == "kept" for o in objs if o["key"] not in want)
q = sum(1 for k in want if k.startswith("quarantine/"))
assert summary["raw"]["expired"] == 2 and summary["quarantine"]["expired"] == q, summary
metric = summary["kiln_retention_deleted_objects_total"]
assert metric == ({"raw": 2, "quarantine": q} if sys.argv[2] == "deleted" else {"raw": 0, "quarantine": 0}), metric
PY
}
check "  and reports each object: expired only when old and committed by every branch" decisions_ok "$tmp/retention-dry.out" expired
check "gc --retention (text) names why an object is kept" status_is 0 "$kiln" gc --retention --pipeline "$tmp/retention.yaml"
check "  (a branch that has not committed it)" \
	grep -qx 'raw raw/clicks/0/100-199.jsonl.zst 40d kept (not yet committed: other-ds@main next 100)' "$tmp/out"
check "a pipeline without retention keeps everything" status_is 0 "$kiln" gc --retention --pipeline "$pipeline"
check "  (nothing expired)" grep -q '^raw: 6 objects, 0 expired' "$tmp/out"
check "gc --retention --apply exits 0" status_is 0 "$kiln" gc --retention --pipeline "$tmp/retention.yaml" --apply --json
cp "$tmp/out" "$tmp/retention-apply.out"
check "  and reports the deleted objects and the metric" decisions_ok "$tmp/retention-apply.out" deleted
check "  deletes exactly those" cmp -s <(comm -23 "$tmp/zones.before" "$tmp/expired.want") <(zones)
check "kiln quarantine ls after it lists only what is left" status_is 0 q ls user-events
check "  (the records of the two objects kept)" test "$(wc -l <"$tmp/out")" -eq 2

# ---- quarantine.max_ratio on a Kafka run
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY
"$kiln" broker --partitions 1 --topics ev --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
broker_pid=$!
poll 10 test -s "$tmp/pf"
bs=$(head -1 "$tmp/pf" 2>/dev/null)
check "kiln broker started" test -n "$bs"
mkdir -p "$tmp/k"
cat >"$tmp/k/p.yaml" <<YAML
dataset: kev
contract: $src/contracts/user-events.yaml
source: {kind: kafka, brokers: $bs, topics: [ev], group: g1, options: {session.timeout.ms: "6000"}}
pseudonymise: {key_file: $tmp/hmac.key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$tmp/k/store}
manifest: {repo: $tmp/k/m.git}
log: {format: text}
YAML
"$py" "$gen" --records 200 --invalid-rate 0.3 --seed 5 --max-record-bytes 16384 -o "$tmp/kin.jsonl" --expect "$tmp/kin.expect"
kquarantined=$(grep -c '"outcome": "quarantine' "$tmp/kin.expect")
check "kcat produced the records" kcat -P -b "$bs" -t ev -p 0 -l "$tmp/kin.jsonl"
check "a Kafka run over quarantine.max_ratio stops non-zero" \
	status_is 2 timeout 120 "$kiln" run "$tmp/k/p.yaml" --stop-at-end --set quarantine.max_ratio=0.1
cp "$tmp/err" "$tmp/kafka-ratio.err"
check "  saying why in its last line, with counts only" \
	test "$(tail -1 "$tmp/kafka-ratio.err")" = "kiln run: quarantine.max_ratio: $kquarantined of 200 records quarantined ($("$py" -c "print('%.3f' % ($kquarantined / 200))") > 0.100); nothing committed"
check "  and commits nothing" test -z "$(git --git-dir="$tmp/k/m.git" for-each-ref 2>/dev/null)"
check "a Kafka run under quarantine.max_ratio commits" \
	status_is 0 timeout 120 "$kiln" run "$tmp/k/p.yaml" --stop-at-end --set quarantine.max_ratio=0.5
check "  every record" grep -q '^kev@main: +200 records' "$tmp/out"

check "no personal data in ls, stats or any error" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
