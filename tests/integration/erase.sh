#!/usr/bin/env bash
# kiln erase as an auditor would try it (docs/ERASURE.md): a subject planted
# under two identifiers (user id; email in its field and in free text, in
# other case and with JSON escapes) in curated and quarantined records of
# three runs, on two branches and two promoted signed versions. A dry run
# changes nothing; the erasure rewrites every version (every other record
# still there once, in order), re-signs v1 and v2 (git verify-tag), records
# a ledger entry; after `kiln gc --apply` an independent scan (python3 and
# git, not kiln) of every byte of the store and the repository finds
# nothing; `kiln erase --verify` agrees; a later run goes on from the same
# offsets; a rerun does nothing; kill -9 at random points, then a rerun,
# ends in the same place.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need git zstd ssh-keygen kcat
tmp=$(mktemp -d)
broker_pid=
trap '[ -z "$broker_pid" ] || kill -KILL "$broker_pid" 2>/dev/null; rm -rf "$tmp"' EXIT

unset KILN_BRANCH KILN_SPLIT_SALT
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
pipeline=$src/pipelines/user-events.yaml
gitm() { git --git-dir="$tmp/m.git" "$@"; }
not() { ! "$@"; }
check_py=$src/tests/integration/erase_check.py

"$kiln" keygen --out "$tmp/sign.key" --comment release@kiln.test >"$tmp/keygen.out" 2>&1
grep -o 'release@kiln.test namespaces="git" ssh-ed25519 [A-Za-z0-9+/=]*' "$tmp/keygen.out" >"$tmp/allowed_signers"
sign=(--set "manifest.signing_key=$tmp/sign.key")
gates=(--set promote.min_records.train=10 --set promote.min_records.dev=1 --set promote.min_records.test=1
	--set promote.ratio_tolerance=0.5 --set promote.max_quarantine_rate=0.5)

gen() { "$py" "$src/bench/gen-user-events.py" --records "$1" --seed "$2" >>"$KILN_INPUT"; }
# The planted subject: user id subject-42, email Alice.Planted@Example.com.
plant() { # N: a curated record, one with the email in free text, two quarantined ones
	local t="2026-11-0${1}T10:00:00Z"
	printf '%s\n' \
		"{\"event_id\":\"00000000-0000-4000-8000-00000000010$1\",\"event_type\":\"click\",\"occurred_at\":\"$t\",\"user_id\":\"subject-42\",\"email\":\"Alice.Planted@Example.com\",\"consent\":true,\"device\":{\"os\":\"linux\"}}" \
		"{\"event_id\":\"00000000-0000-4000-8000-00000000020$1\",\"event_type\":\"click\",\"occurred_at\":\"$t\",\"user_id\":\"bystander-$1\",\"consent\":true,\"message\":\"write to ALICE.PLANTED@example.com please\",\"device\":{\"os\":\"linux\"}}" \
		"{\"event_id\":\"broken\",\"user_id\":\"subject\\u002d42\",\"consent\":\"yes\"}" \
		"{\"user_id\":\"subject-42\",\"cut short" >>"$KILN_INPUT"
	printf 'subject-42 \xff\xfe not utf-8\n' >>"$KILN_INPUT"
}

gen 300 1
plant 1
check "run 1" status_is 0 "$kiln" run "$pipeline" "${sign[@]}"
gen 300 2
plant 2
check "run 2" status_is 0 "$kiln" run "$pipeline" "${sign[@]}"
c1=$(gitm rev-list --reverse refs/heads/user-events/main | sed -n 1p)
check "promote v1" status_is 0 "$kiln" promote "user-events@${c1:0:12}" --pipeline "$pipeline" "${gates[@]}" "${sign[@]}"
check "promote v2" status_is 0 "$kiln" promote user-events@main --pipeline "$pipeline" "${gates[@]}" "${sign[@]}"
check "branch exp from v1" status_is 0 "$kiln" branch user-events exp v1
gen 200 3
plant 3
check "run 3" status_is 0 "$kiln" run "$pipeline" "${sign[@]}"
check "run on exp" status_is 0 "$kiln" run "$pipeline" "${sign[@]}" --set branch=exp

# The subject's needles, computed here from docs/FORMATS.md alone.
tok_user=$("$py" "$check_py" tokens "$tmp/hmac.key" user=subject-42)
tok_free=$("$py" "$check_py" tokens "$tmp/hmac.key" email=alice.planted@example.com)
tok_mail=$("$py" "$check_py" keep-domain "$tmp/hmac.key" email Alice.Planted@Example.com)
needles=(--token "$tok_user" --token "$tok_free" --token "$tok_mail" --value subject-42 --value alice.planted@example.com)
subject=(--subject user_id=subject-42 --subject email=Alice.Planted@Example.com)

check "the subject is in the data before" not "$py" "$check_py" scan --store "$tmp/store" --repo "$tmp/m.git" "${needles[@]}"
check "kiln erase --verify finds it before (exit 1)" status_is 1 "$kiln" erase user-events --verify "${subject[@]}" --pipeline "$pipeline"

# Every version's records before, per split.
refs="main exp v1 v2"
for r in $refs; do
	for s in train dev test; do
		"$kiln" cat "user-events@$r" --split "$s" >"$tmp/before.$r.$s" 2>"$tmp/cat.err" || echo "  cat $r $s failed"
	done
done
check "v1 holds the subject's curated records" grep -q "$tok_user" "$tmp/before.v1.train" "$tmp/before.v1.dev" "$tmp/before.v1.test"
gitm for-each-ref --format='%(refname) %(objectname)' >"$tmp/refs.before"

# --- dry run -------------------------------------------------------------
check "dry run" status_is 0 "$kiln" erase user-events "${subject[@]}" --pipeline "$pipeline" --dry-run --json
check "dry run: JSON with counts" "$py" -c "
import json,sys; d=json.load(open('$tmp/out'))
assert d['dry_run'] is True and d['erasure'] is None, d
assert sum(d['erased'].values()) >= 6, d['erased']
assert d['quarantine']['records'] >= 6, d['quarantine']
assert sorted(r['ref'] for r in d['refs']) == ['refs/heads/user-events/exp','refs/heads/user-events/main','refs/tags/user-events/v1','refs/tags/user-events/v2'], d['refs']
"
gitm for-each-ref --format='%(refname) %(objectname)' >"$tmp/refs.dry"
check "dry run moves no ref" cmp -s "$tmp/refs.before" "$tmp/refs.dry"
check "dry run prints no personal value" not grep -qi 'subject-42\|alice' "$tmp/out" "$tmp/err"

check "kiln trace --subject: where the subject is" status_is 0 "$kiln" trace user-events "${subject[@]}" --pipeline "$pipeline"
"$kiln" trace user-events "${subject[@]}" >"$tmp/trace.noppl.out" 2>&1
check "kiln trace --subject's errors name kiln trace" grep -q '^kiln trace: --pipeline FILE is needed' "$tmp/trace.noppl.out"
check "  every version that holds them, with counts" sh -c "grep -q '^would rewrite refs/tags/user-events/v1 ([0-9a-f]*): train [0-9]*, dev [0-9]*, test [0-9]*' '$tmp/out' && grep -q '^shard [0-9a-f]\{16\} (' '$tmp/out'"

# --- the erasure ---------------------------------------------------------
cp -a "$tmp/store" "$tmp/store.orig" && cp -a "$tmp/m.git" "$tmp/m.git.orig" && cp "$KILN_INPUT" "$tmp/in.orig"
check "erase" status_is 0 "$kiln" erase user-events "${subject[@]}" --pipeline "$pipeline" "${sign[@]}"
cp "$tmp/out" "$tmp/erase.out"
check "erase names no personal value" not grep -qi 'subject-42\|alice' "$tmp/out" "$tmp/err"
for r in $refs; do
	for s in train dev test; do
		"$kiln" cat "user-events@$r" --split "$s" >"$tmp/after.$r.$s" 2>"$tmp/cat.err" || echo "  cat $r $s failed"
		check "$r $s: every other record kept, and only those" \
			"$py" "$check_py" kept "$tmp/before.$r.$s" "$tmp/after.$r.$s" "$tok_user" "$tok_free" "$tok_mail"
	done
done
for v in v1 v2; do
	check "git verify-tag accepts the new $v" gitm -c gpg.format=ssh -c gpg.ssh.allowedSignersFile="$tmp/allowed_signers" \
		verify-tag "user-events/$v"
	check "kiln verify $v" status_is 0 "$kiln" verify "user-events@$v" --allowed-signers "$tmp/allowed_signers"
	check "the $v tag names the erasure" sh -c "git --git-dir='$tmp/m.git' cat-file tag user-events/$v | grep -q '^Erasure [0-9a-f]\{16\}: supersedes tag '"
done
check "stats balance (in = valid + quarantined + erased)" "$py" -c "
import json,subprocess
for r in ['user-events/main','user-events/exp','user-events/v1']:
    s=json.loads(subprocess.run(['git','--git-dir','$tmp/m.git','show',r+':stats.json'],capture_output=True,check=True).stdout)
    assert s['records_in']==s['valid']+s['quarantined']+s.get('erased',0), (r,s)
    assert s.get('erased',0)>0, (r,s)
    assert s['valid']==sum(v['records'] for v in s['splits'].values()), (r,s)
"
check "kiln show v1 names the erasure" status_is 0 "$kiln" show user-events@v1
check "  with the commit it replaced" grep -q "^erasure      [0-9a-f]\{16\}: rewritten from commit ${c1:0:12}, tag" "$tmp/out"
check "kiln log marks rewritten versions" status_is 0 "$kiln" log user-events
check "  on every line before the erasure" test "$(grep -c 'rewritten by erasure' "$tmp/out")" -eq 3
check "the old commit id says what replaced it" status_is 2 "$kiln" show "user-events@${c1:0:12}"
check "  one line naming the erasure and the successor" grep -q "commit ${c1:0:12} was rewritten by erasure [0-9a-f]\{16\} (kiln erase, [0-9-]*): its successor is user-events@" "$tmp/err"
check "the ledger has one entry" test "$(gitm ls-tree --name-only refs/erasures/user-events:erasures | wc -l)" -eq 1
check "the ledger commit is signed" gitm -c gpg.format=ssh -c gpg.ssh.allowedSignersFile="$tmp/allowed_signers" \
	verify-commit refs/erasures/user-events
check "the ledger holds no token" not sh -c "git --git-dir='$tmp/m.git' show refs/erasures/user-events:erasures/\$(git --git-dir='$tmp/m.git' ls-tree --name-only refs/erasures/user-events:erasures) | grep -q 'p1_'"
check "git fsck" gitm fsck --strict --no-dangling

# --- gc, then nothing anywhere -------------------------------------------
check "gc --apply" status_is 0 "$kiln" gc --apply --pipeline "$pipeline"
check "independent scan finds nothing" "$py" "$check_py" scan --store "$tmp/store" --repo "$tmp/m.git" "${needles[@]}"
check "kiln erase --verify: exit 0" status_is 0 "$kiln" erase user-events --verify "${subject[@]}" --pipeline "$pipeline"
check "git fsck after gc" gitm fsck --strict --no-dangling
check "every version still reads" sh -c "for r in $refs; do '$kiln' cat user-events@\$r --split train >/dev/null || exit 1; done"

# --- a later run, a rerun ------------------------------------------------
before_next=$(gitm show refs/heads/user-events/main:lineage.json)
gen 100 4
check "a later run" status_is 0 "$kiln" run "$pipeline" "${sign[@]}"
check "it read only the new records" "$py" -c "
import json,subprocess
s=json.loads(subprocess.run(['git','--git-dir','$tmp/m.git','show','user-events/main:stats.json'],capture_output=True,check=True).stdout)
n=sum(1 for _ in open('$KILN_INPUT','rb'))
assert s['records_in']==n, (s['records_in'], n)
"
check "rerun: nothing to erase" status_is 0 "$kiln" erase user-events "${subject[@]}" --pipeline "$pipeline" "${sign[@]}"
check "rerun says so" grep -q "nothing of the subject found" "$tmp/out"
check "rerun adds no ledger entry" test "$(gitm ls-tree --name-only refs/erasures/user-events:erasures | wc -l)" -eq 1

# --- kill -9 at random points, then a rerun --------------------------------
for k in 1 2 3; do
	rm -rf "$tmp/store" "$tmp/m.git"
	cp -a "$tmp/store.orig" "$tmp/store" && cp -a "$tmp/m.git.orig" "$tmp/m.git"
	"$kiln" erase user-events "${subject[@]}" --pipeline "$pipeline" "${sign[@]}" >/dev/null 2>&1 &
	pid=$!
	ms_sleep $((RANDOM % 400))
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	check "kill $k: the rerun completes" status_is 0 "$kiln" erase user-events "${subject[@]}" --pipeline "$pipeline" "${sign[@]}"
	check "kill $k: one ledger entry" test "$(gitm ls-tree --name-only refs/erasures/user-events:erasures | wc -l)" -eq 1
	check "kill $k: gc --apply" status_is 0 "$kiln" gc --apply --pipeline "$pipeline"
	check "kill $k: nothing of the subject left" "$py" "$check_py" scan --store "$tmp/store" --repo "$tmp/m.git" "${needles[@]}"
	for r in main v2; do
		"$kiln" cat "user-events@$r" --split train >"$tmp/k.$r" 2>/dev/null
		check "kill $k: $r train as after a clean erasure" cmp -s "$tmp/k.$r" "$tmp/after.$r.train"
	done
	check "kill $k: git fsck" gitm fsck --strict --no-dangling
done

# --- a Kafka dataset: the raw zone too --------------------------------------
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY
"$kiln" broker --partitions 2 --topics ev --port-file "$tmp/pf" >"$tmp/broker.out" 2>&1 &
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
: >"$tmp/kin.jsonl"
KILN_INPUT=$tmp/kin.jsonl gen 300 7
KILN_INPUT=$tmp/kin.jsonl plant 7
check "kcat produced the records" kcat -P -b "$bs" -t ev -l "$tmp/kin.jsonl"
check "a Kafka run lands them" status_is 0 timeout 120 "$kiln" run "$tmp/k/p.yaml" --stop-at-end
check "the raw zone holds the subject" not "$py" "$check_py" scan --store "$tmp/k/store/raw" --repo "$tmp/k/m.git" \
	--value subject-42 --value alice.planted@example.com
check "erase the Kafka dataset" status_is 0 "$kiln" erase kev "${subject[@]}" --pipeline "$tmp/k/p.yaml" --json
check "  raw-zone records erased" "$py" -c "
import json; d=json.load(open('$tmp/out'))
assert d['raw']['records'] >= 5 and d['quarantine']['records'] >= 3 and sum(d['erased'].values()) >= 2, d
"
check "gc --apply (Kafka dataset)" status_is 0 "$kiln" gc --apply --pipeline "$tmp/k/p.yaml"
check "nothing of the subject in its store or repository" \
	"$py" "$check_py" scan --store "$tmp/k/store" --repo "$tmp/k/m.git" "${needles[@]}"
check "every other raw record is still there" "$py" -c "
import glob,json,zstandard
n=0
for f in glob.glob('$tmp/k/store/raw/**/*.zst', recursive=True):
    n+=len(zstandard.ZstdDecompressor().decompressobj().decompress(open(f,'rb').read()).splitlines())
assert n == 305 - 5, n
"
kill "$broker_pid" 2>/dev/null
wait "$broker_pid" 2>/dev/null

# --- erasure while runs commit on the same branches ------------------------
for k in 1 2 3; do
	rm -rf "$tmp/store" "$tmp/m.git"
	cp -a "$tmp/store.orig" "$tmp/store" && cp -a "$tmp/m.git.orig" "$tmp/m.git"
	cp "$tmp/in.orig" "$KILN_INPUT"
	gen 6000 $((40 + k))
	"$kiln" run "$pipeline" "${sign[@]}" >"$tmp/conc.run.out" 2>&1 &
	run_pid=$!
	ms_sleep $((k * 150))
	check "concurrent $k: erase" status_is 0 "$kiln" erase user-events "${subject[@]}" --pipeline "$pipeline" "${sign[@]}"
	wait "$run_pid"
	check "concurrent $k: the run committed" test $? -eq 0
	# whichever came first, the rerun finishes what the run added after the erasure read the branch
	check "concurrent $k: a rerun" status_is 0 "$kiln" erase user-events "${subject[@]}" --pipeline "$pipeline" "${sign[@]}"
	"$kiln" cat user-events@main --split train >"$tmp/conc.train" 2>/dev/null
	"$kiln" cat user-events@main --split dev >>"$tmp/conc.train" 2>/dev/null
	"$kiln" cat user-events@main --split test >>"$tmp/conc.train" 2>/dev/null
	check "concurrent $k: no erased record came back" not grep -q "$tok_user\|$tok_free\|$tok_mail" "$tmp/conc.train"
	check "concurrent $k: every other record once" "$py" -c "
import json,subprocess
s=json.loads(subprocess.run(['git','--git-dir','$tmp/m.git','show','user-events/main:stats.json'],capture_output=True,check=True).stdout)
n=sum(1 for _ in open('$KILN_INPUT','rb'))
lines=open('$tmp/conc.train','rb').read().splitlines()
assert s['records_in']==n, (s['records_in'], n)
assert s['records_in']==s['valid']+s['quarantined']+s.get('erased',0), s
assert len(lines)==s['valid'], (len(lines), s['valid'])
assert len(set(lines))==len(lines)
"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
