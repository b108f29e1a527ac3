#!/usr/bin/env bash
# The first hour of a new user (issue 28), each part against the real binary:
#  - kiln keygen --hmac: the key file (64 hex + newline, 0600, never
#    overwritten, never printed) loads in kiln run and kiln check at once, and
#    the key id it prints is the one the version records;
#  - kiln init DIR: a project that kiln run, kiln check (both pipelines,
#    the Kafka one against kiln broker) and kiln validate accept, whose
#    README's ```sh blocks run as written, in order, in a fresh project;
#  - kiln contract infer: on bench/gen-user-events.py output and on a nested
#    sample, a contract kiln validate accepts for every record and kiln check
#    accepts in a pipeline, personal fields classified, no personal value in
#    it; bad input is one line with file:line:col.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need git kcat "$py"
tmp=$(mktemp -d)
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
mode_of() { stat -c %a "$1"; }
one_line() { [ "$(wc -l <"$tmp/err")" -eq 1 ]; }

# --- kiln keygen --hmac ---------------------------------------------------------------
mkdir "$tmp/k"
check "keygen --hmac writes the key" status_is 0 "$kiln" keygen --hmac --out "$tmp/k/hmac.key"
cp "$tmp/out" "$tmp/keygen.out"
check "the key file is mode 0600" [ "$(mode_of "$tmp/k/hmac.key")" = 600 ]
check "the key file is 64 hex characters and a newline" \
	"$py" -c 'import re, sys; sys.exit(not re.fullmatch(rb"[0-9a-f]{64}\n", open(sys.argv[1], "rb").read()))' "$tmp/k/hmac.key"
key_hex=$(tr -d '\n' <"$tmp/k/hmac.key")
check "the key is not on stdout or stderr" sh -c "! grep -q '$key_hex' '$tmp/keygen.out' '$tmp/err'"
key_id=$(sed -n 's/^key id: \(hmac-sha256:[0-9a-f]\{16\}\)$/\1/p' "$tmp/keygen.out")
check "keygen --hmac prints the key id" [ -n "$key_id" ]
sum=$(sha256sum <"$tmp/k/hmac.key")
check "keygen --hmac never overwrites a file" status_is 2 "$kiln" keygen --hmac --out "$tmp/k/hmac.key"
check "... one line naming it" sh -c "grep -q 'hmac.key already exists' '$tmp/err' && [ \$(wc -l <'$tmp/err') -eq 1 ]"
check "... and the key is as it was" [ "$(sha256sum <"$tmp/k/hmac.key")" = "$sum" ]
check "keygen --hmac into a missing folder fails" status_is 2 "$kiln" keygen --hmac --out "$tmp/k/none/hmac.key"
check "--hmac takes no --comment" status_is 2 "$kiln" keygen --hmac --comment x --out "$tmp/k/other.key"
check "... and writes nothing" [ ! -e "$tmp/k/other.key" ]
check "keygen without --hmac still writes a signing key" status_is 0 "$kiln" keygen --out "$tmp/k/signing.key"
check "... with its public key" sh -c "grep -q '^kiln-ed25519-v1$' '$tmp/k/signing.key' && grep -q '^ssh-ed25519 ' '$tmp/k/signing.key.pub'"

"$py" "$src/bench/gen-user-events.py" --records 1000 --seed 28 -o "$tmp/events.jsonl" --expect "$tmp/events.expect"
export KILN_INPUT=$tmp/events.jsonl KILN_KEY_FILE=$tmp/k/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
pipeline=$src/pipelines/user-events.yaml
check "kiln check accepts a pipeline with the new key" status_is 0 "$kiln" check "$pipeline"
check "kiln run loads the new key at once" status_is 0 "$kiln" run "$pipeline"
check "the version records the printed key id" sh -c "'$kiln' show user-events@main | grep -q '^key id  *$key_id '"

# --- kiln contract infer ------------------------------------------------------------------
check "infer on generated events" status_is 0 "$kiln" contract infer "$tmp/events.jsonl" --name user-events -o "$tmp/inferred.yaml"
cp "$tmp/inferred.yaml" "$tmp/inferred.out" # pii_scan_logs reads it too
check "kiln validate accepts every record against it" status_is 0 "$kiln" validate --contract "$tmp/inferred.yaml" "$tmp/events.jsonl"
check "... all 1000 valid" grep -q '1000 records, 1000 valid, 0 invalid' "$tmp/err"
check "kiln check accepts a pipeline with the inferred contract" \
	status_is 0 "$kiln" check "$pipeline" --set "contract=$tmp/inferred.yaml" --set manifest.repo="$tmp/m2.git"
# prop FILE PATH KEY: the value of KEY of the property at the dotted PATH ("" when absent)
prop() {
	"$py" - "$@" <<-'EOF'
		import sys, yaml
		doc = yaml.safe_load(open(sys.argv[1]))
		props, node = doc["schema"][0]["properties"], None
		for step in sys.argv[2].split("."):
		    if step == "[]":
		        node = node["items"]; props = node.get("properties", []); continue
		    node = next(p for p in props if p["name"] == step)
		    props = node.get("properties", [])
		key = sys.argv[3]
		if key in ("piiScan", "enum"):
		    v = [c["value"] for c in node.get("customProperties", []) if c["property"] == key]
		    print(v[0] if v else "")
		elif key == "format":
		    print(node.get("logicalTypeOptions", {}).get("format", ""))
		else:
		    print(node.get(key, ""))
	EOF
}
is() { # FILE PATH KEY VALUE...: each KEY of the property at PATH has VALUE (triples)
	local f=$1 v
	shift
	while [ $# -ge 3 ]; do
		v=$(prop "$f" "$1" "$2")
		[ "$v" = "$3" ] || { echo "  $1 $2: '$v', expected '$3'"; return 1; }
		shift 3
	done
}
has_enum() { [ -n "$(prop "$1" "$2" enum)" ]; }
y=$tmp/inferred.yaml
check "event_id: string, required, uuid" is "$y" event_id logicalType string event_id required True event_id format uuid
check "occurred_at: date-time; received_date: date" is "$y" occurred_at format date-time received_date format date
check "session_ms integer, amount number, consent boolean required" \
	is "$y" session_ms logicalType integer amount logicalType number consent logicalType boolean consent required True
check "device.os: required, an enum" is "$y" device.os required True
check "... an enum" has_enum "$y" device.os
check "event_type: an enum" has_enum "$y" event_type
check "tags: an array of strings" is "$y" tags logicalType array tags.[] logicalType string
check "email, client_ip, user_id classified pii" is "$y" email classification pii client_ip classification pii user_id classification pii
check "... with no enum" is "$y" email enum '' user_id enum '' client_ip enum ''
check "message (free text with emails and phones): piiScan" is "$y" message piiScan True
no_personal_value() { # CONTRACT EXPECT: no personal value of the generator's records in it
	"$py" - "$1" "$2" <<-'EOF'
		import json, sys
		text = open(sys.argv[1], encoding="utf-8").read()
		values = {v for line in open(sys.argv[2]) for v in json.loads(line)["pii"]}
		hits = sum(1 for v in values if v in text)
		print("  %d of %d personal values in the contract" % (hits, len(values))) if hits else None
		sys.exit(hits > 0)
	EOF
}
check "no personal value of the sample is in the contract" no_personal_value "$y" "$tmp/events.expect"
check "--pii none: no classification" sh -c "'$kiln' contract infer '$tmp/events.jsonl' --pii none >'$tmp/none.yaml' && ! grep -v '^#' '$tmp/none.yaml' | grep -q 'classification\|piiScan'"
check "--pii none still puts no personal value in it" no_personal_value "$tmp/none.yaml" "$tmp/events.expect"

cat >"$tmp/orders.jsonl" <<'EOF'
{"order_id":"A1","customer":{"customer_id":"c-1","email":"ana@example.com","address":{"city":"Lyon","zip":"69001"}},"items":[{"sku":"X-1","qty":2,"price":9.5},{"sku":"X-2","qty":1,"price":3}],"status":"paid","notes":"call me at +33 6 12 34 56 78","attrs":{"bo@example.org":1},"meta":null}
{"order_id":"A2","customer":{"customer_id":"c-2","email":"bo@example.org","address":{"city":"Paris"}},"items":[],"status":"paid","notes":"","attrs":{},"meta":{"k":1}}
{"order_id":"A3","customer":{"customer_id":"c-3","email":"cy@example.net","address":{"city":"Lyon","zip":"69002"}},"items":[{"sku":"X-1","qty":1,"price":9.5,"gift":true}],"status":"open","mixed":1}
{"order_id":"A4","customer":{"customer_id":"c-1","email":"ana@example.com","address":{"city":"Paris"}},"items":[{"sku":"X-3","qty":5,"price":1.25}],"status":"open","mixed":"x"}
EOF
y=$tmp/orders.yaml
check "infer on a nested sample" status_is 0 "$kiln" contract infer "$tmp/orders.jsonl" -o "$y"
check "... the contract is named after the file" grep -q '^id: orders$' "$y"
check "kiln validate accepts the nested sample" status_is 0 "$kiln" validate --contract "$y" "$tmp/orders.jsonl"
check "nested objects: customer.address.city required, zip not" \
	is "$y" customer logicalType object customer.address.city required True customer.address.zip required ''
check "array items are objects: items.[].sku required, gift boolean, price number" \
	is "$y" items.[] logicalType object items.[].sku required True items.[].gift logicalType boolean items.[].price logicalType number
check "customer.email and customer.customer_id pii, notes piiScan" \
	is "$y" customer.email classification pii customer.customer_id classification pii notes piiScan True
check "an object keyed by personal data is not listed" is "$y" attrs logicalType ''
check "a field of two types takes any value" is "$y" mixed logicalType ''
check "status: an enum" has_enum "$y" status
check "no email or phone of the nested sample in it" sh -c "! grep -q 'example\\.\\|+33\\|12 34' '$y'"
check "-o never replaces a file" status_is 2 "$kiln" contract infer "$tmp/orders.jsonl" -o "$y"
check "... one line" one_line
printf '{"a":1}\n{"a":\n' >"$tmp/broken.jsonl"
check "a line that is not JSON" status_is 2 "$kiln" contract infer "$tmp/broken.jsonl" -o "$tmp/broken.yaml"
check "... one line" one_line
check "... with file:line:col and the code" grep -q 'broken.jsonl:2:6: json_syntax' "$tmp/err"
check "... and nothing written" [ ! -e "$tmp/broken.yaml" ]
printf '{"a":1}\n[1,2]\n' >"$tmp/array.jsonl"
check "a line that is not an object" status_is 2 "$kiln" contract infer "$tmp/array.jsonl"
check "... one line with file:line:col" grep -q 'array.jsonl:2:1: not_object' "$tmp/err"
check "an empty sample" status_is 2 "$kiln" contract infer /dev/null

# --- kiln init --------------------------------------------------------------------------
check "kiln init DIR" status_is 0 "$kiln" init "$tmp/p"
cp "$tmp/out" "$tmp/init.out"
for f in README.md contracts/tickets.yaml pipelines/file.yaml pipelines/kafka.yaml data/sample.jsonl cache.yaml targets.yaml keys/hmac.key; do
	check "init wrote $f" [ -s "$tmp/p/$f" ]
done
check "the key is mode 0600, keys/ 0700" sh -c "[ \$(stat -c %a '$tmp/p/keys/hmac.key') = 600 ] && [ \$(stat -c %a '$tmp/p/keys') = 700 ]"
check "the key is not printed" sh -c "! grep -q \"\$(tr -d '\\n' <'$tmp/p/keys/hmac.key')\" '$tmp/init.out'"
check "init refuses a folder that is not empty" status_is 2 "$kiln" init "$tmp/p"
check "... one line" one_line
mkdir "$tmp/full" && echo keep >"$tmp/full/notes.txt"
check "init refuses a folder holding one file" status_is 2 "$kiln" init "$tmp/full"
check "... and leaves it as it was" [ "$(ls -A "$tmp/full")" = notes.txt ]
mkdir "$tmp/empty"
check "init takes an existing empty folder" status_is 0 "$kiln" init "$tmp/empty"
unset KILN_INPUT KILN_KEY_FILE KILN_STORE KILN_MANIFEST
in_p() { (cd "$tmp/p" && "$@"); } # runs a command from the project's folder
check "kiln check pipelines/file.yaml is clean" status_is 0 in_p "$kiln" check pipelines/file.yaml
check "kiln run pipelines/file.yaml, from the project" status_is 0 in_p "$kiln" run pipelines/file.yaml
check "... 8 records, 8 valid" grep -q '+8 records (8 valid, 0 quarantined)' "$tmp/out"
check "... the store and manifest are inside the project" \
	sh -c "[ -d '$tmp/p/.kiln/store/shards' ] && git --git-dir='$tmp/p/.kiln/manifest.git' rev-parse -q --verify refs/heads/tickets/main >/dev/null"
check "kiln validate accepts the sample" status_is 0 in_p "$kiln" validate --contract contracts/tickets.yaml data/sample.jsonl
check "cache.yaml loads" status_is 0 in_p "$kiln" cache status cache.yaml
check "targets.yaml loads" status_is 0 in_p "$kiln" push tickets@main --unpromoted --to local --targets targets.yaml --pipeline pipelines/file.yaml --dry-run
for split in train dev test; do
	in_p "$kiln" cat tickets@main -m .kiln/manifest.git --store file://.kiln/store --split $split >>"$tmp/curated.txt"
done
check "the 8 curated records hold no email" sh -c "[ \$(wc -l <'$tmp/curated.txt') -eq 8 ] && ! grep -q '@example' '$tmp/curated.txt'"

# The README's ```sh blocks, in order, as one script, in a fresh project,
# with kiln on PATH as a user has it.
check "kiln init a fresh project" status_is 0 "$kiln" init "$tmp/q"
mkdir "$tmp/bin" && printf '#!/bin/sh\nexec "%s" "$@"\n' "$kiln" >"$tmp/bin/kiln" && chmod +x "$tmp/bin/kiln"
awk '/^```sh$/ { on = 1; next } /^```$/ { on = 0 } on' "$tmp/q/README.md" >"$tmp/readme.sh"
check "the README has its four blocks of commands" [ "$(grep -c '^```sh$' "$tmp/q/README.md")" -eq 4 ]
check "the README's commands run as written" \
	sh -c "cd '$tmp/q' && PATH='$tmp/bin':\$PATH timeout 120 bash -e '$tmp/readme.sh' >'$tmp/readme.out' 2>'$tmp/readme.err' || { tail -5 '$tmp/readme.err'; exit 1; }"
check "... kiln check was clean on both pipelines" [ "$(grep -c '^0 problems found' "$tmp/readme.out")" -eq 2 ]
check "... the Kafka check saw the topic and the broker" sh -c "grep -q '^ok  *topic  *tickets: ' '$tmp/readme.out' && grep -q '^ok  *brokers ' '$tmp/readme.out'"
check "... tickets@main promoted to v1 and verified as trusted" grep -q 'signature: good.*(trusted)' "$tmp/readme.out"
check "... the cache view of tickets@main is ready" [ -e "$tmp/q/.kiln/cache/views/tickets/main/ready" ]
check "... v1 pushed to the local target" sh -c "git --git-dir='$tmp/q/.kiln/pushed/manifest.git' rev-parse -q --verify refs/tags/tickets/v1 >/dev/null"
check "... the Kafka run committed the 8 samples to tickets@stream" grep -q '^tickets@stream: +8 records (8 valid' "$tmp/readme.out"

check "no personal value in any log" pii_scan_logs
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
