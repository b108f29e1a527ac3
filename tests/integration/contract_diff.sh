#!/usr/bin/env bash
# `kiln contract diff` end to end on edited copies of contracts/user-events.yaml:
# exit statuses 0/1/2, the text lines and summary, --json parsed by Debian's
# python3, --schema, one-line file:line:col errors for a bad contract, and
# that no example value of a contract reaches the output.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
contract=$src/contracts/user-events.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# edit SRC DST OLD NEW [OLD NEW]...: DST is SRC with each OLD replaced (once; it must be there)
edit() {
	/usr/bin/python3 - "$@" <<'PY'
import sys
src, dst, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
text = open(src, encoding="utf-8").read()
for old, new in zip(pairs[0::2], pairs[1::2]):
    assert text.count(old) == 1, (old, text.count(old))
    text = text.replace(old, new)
open(dst, "w", encoding="utf-8").write(text)
PY
}

# the same contract: no change, exit 0
cp "$contract" "$tmp/same.yaml"
check "identical exits 0" status_is 0 "$kiln" contract diff "$contract" "$tmp/same.yaml"
check "identical: no change" test "$(cat "$tmp/out")" = "0 changes: 0 breaking, 0 compatible"

# descriptions and examples only: no change, exit 0, and no example in the output
edit "$contract" "$tmp/described.yaml" \
	"purpose: Clickstream events used" "purpose: Click and search events used" \
	"description: Free text typed by the user (search box, feedback form)." \
	"description: What the user typed.
        examples: [\"call me at +44 20 7946 0958, canary-zq7\"]"
check "description only exits 0" status_is 0 "$kiln" contract diff "$contract" "$tmp/described.yaml"
check "description only: no change, files differ" grep -q "^0 changes: 0 breaking, 0 compatible (the files differ" "$tmp/out"
check "example never printed" sh -c "! grep -q canary-zq7 '$tmp/out' '$tmp/err'"

# compatible changes only: a new version, an enum value, an optional field, a looser bound
edit "$contract" "$tmp/compatible.yaml" \
	"version: 1.2.0" "version: 1.3.0" \
	"value: [page_view, click, search, signup, purchase, logout]" \
	"value: [page_view, click, search, signup, purchase, logout, share]" \
	"          maxLength: 2000" "          maxLength: 4000"
printf '      - name: referrer\n        logicalType: string\n        examples: [canary-zq7]\n' >>"$tmp/compatible.yaml"
check "compatible exits 0" status_is 0 "$kiln" contract diff "$contract" "$tmp/compatible.yaml"
check "compatible: version line" grep -Eq '^compatible +\(contract\) +contract_version_changed +version 1\.2\.0 -> 1\.3\.0$' "$tmp/out"
check "compatible: enum value line" grep -Eq '^compatible +event_type +enum_values_added +enum value added: "share"$' "$tmp/out"
check "compatible: length line" grep -Eq '^compatible +message +length_loosened +maxLength 2000 -> 4000$' "$tmp/out"
check "compatible: field line" grep -Eq '^compatible +referrer +field_added +field added \(string, optional\)$' "$tmp/out"
check "compatible: summary" test "$(tail -1 "$tmp/out")" = "4 changes: 0 breaking, 4 compatible"
check "compatible: nothing on stderr" test ! -s "$tmp/err"
check "compatible: example never printed" sh -c "! grep -q canary-zq7 '$tmp/out' '$tmp/err'"

# breaking changes: a tighter nested length, a changed pattern, a removed field,
# a pii field made public, an enum value removed
edit "$contract" "$tmp/breaking.yaml" \
	"version: 1.2.0" "version: 2.0.0" \
	'pattern: "^[A-Z]{2}$"' 'pattern: "^[A-Z]{3}$"' \
	"      - name: page_url
        logicalType: string
        logicalTypeOptions:
          format: uri
" "" \
	"value: [android, ios, linux, macos, windows, other]" "value: [android, ios, linux, macos, windows]" \
	"              maxLength: 64" "              maxLength: 32" \
	"      - name: client_ip
        logicalType: string
        classification: pii" "      - name: client_ip
        logicalType: string
        classification: public"
check "breaking exits 1" status_is 1 "$kiln" contract diff "$contract" "$tmp/breaking.yaml"
check "breaking: pattern line" grep -Eq '^breaking +country +pattern_changed +pattern "\^\[A-Z\]\{2\}\$" -> "\^\[A-Z\]\{3\}\$"$' "$tmp/out"
check "breaking: removed field" grep -Eq '^breaking +page_url +field_removed +field removed \(string\)$' "$tmp/out"
check "breaking: nested path" grep -Eq '^breaking +device\.model +length_tightened +maxLength 64 -> 32$' "$tmp/out"
check "breaking: enum value removed" grep -Eq '^breaking +device\.os +enum_values_removed +enum value removed: "other"$' "$tmp/out"
check "breaking: classification" grep -Eq '^breaking +client_ip +classification_changed +classification pii -> public$' "$tmp/out"
check "breaking: pseudonymisation" grep -Eq '^breaking +client_ip +pseudonymisation_changed +pseudonymisation token -> keep$' "$tmp/out"
check "breaking: summary" test "$(tail -1 "$tmp/out")" = "7 changes: 6 breaking, 1 compatible"
check "breaking: the other way round" status_is 1 "$kiln" contract diff "$tmp/breaking.yaml" "$contract"
check "reverse: field added" grep -Eq '^compatible +page_url +field_added ' "$tmp/out"
check "reverse: length loosened" grep -Eq '^compatible +device\.model +length_loosened +maxLength 32 -> 64$' "$tmp/out"

# --json: one document that json.tool reads, the fields docs/QUALITY.md lists
check "json exits 1" status_is 1 "$kiln" contract diff --json "$contract" "$tmp/breaking.yaml"
cp "$tmp/out" "$tmp/breaking.json"
check "json parses (json.tool)" /usr/bin/python3 -m json.tool "$tmp/breaking.json" "$tmp/breaking.pretty"
check "json fields" /usr/bin/python3 - "$tmp/breaking.json" "$contract" "$tmp/breaking.yaml" <<'PY'
import hashlib, json, sys
doc = json.load(open(sys.argv[1]))
assert set(doc) == {"old", "new", "compatible", "changes"}, doc.keys()
for side, path, version in (("old", sys.argv[2], "1.2.0"), ("new", sys.argv[3], "2.0.0")):
    s = doc[side]
    assert set(s) == {"file", "id", "version", "schema", "digest"}, s
    assert s["file"] == path and s["id"] == "user-events" and s["version"] == version, s
    assert s["schema"] == "user_event", s
    assert s["digest"] == hashlib.blake2b(open(path, "rb").read(), digest_size=32).hexdigest(), s
assert doc["compatible"] is False
changes = doc["changes"]
for c in changes:
    assert set(c) == {"path", "code", "breaking", "message"}, c
    assert isinstance(c["breaking"], bool) and "\n" not in c["message"], c
got = {(c["path"], c["code"], c["breaking"]) for c in changes}
want = {("", "contract_version_changed", False), ("country", "pattern_changed", True),
        ("page_url", "field_removed", True), ("device.os", "enum_values_removed", True),
        ("device.model", "length_tightened", True), ("client_ip", "classification_changed", True),
        ("client_ip", "pseudonymisation_changed", True)}
assert got == want, got ^ want
assert changes[0]["path"] == "", changes[0]
PY
check "json without changes" status_is 0 "$kiln" contract diff --json "$contract" "$tmp/same.yaml"
check "json without changes: compatible, empty list" /usr/bin/python3 -c '
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["compatible"] is True and doc["changes"] == [], doc
' "$tmp/out"

# --schema: the named schema object of each file
edit "$contract" "$tmp/two-schemas.yaml" "schema:
  - name: user_event" "schema:
  - name: audit
    properties:
      - name: at
        logicalType: timestamp
  - name: user_event"
check "second schema by name exits 0" status_is 0 "$kiln" contract diff --schema user_event "$contract" "$tmp/two-schemas.yaml"
check "second schema: no change" test "$(cat "$tmp/out")" = "0 changes: 0 breaking, 0 compatible (the files differ only in what decides neither validation nor curation)"
check "first schema by default" status_is 1 "$kiln" contract diff "$contract" "$tmp/two-schemas.yaml"
check "first schema: schema name changed" grep -Eq '^breaking +\(contract\) +schema_name_changed +schema user_event -> audit$' "$tmp/out"
check "unknown schema exits 2" status_is 2 "$kiln" contract diff --schema nope "$contract" "$tmp/two-schemas.yaml"
check "unknown schema named" grep -q 'no schema object named "nope"' "$tmp/err"

# a contract that does not compile: exit 2, one line naming file:line:col
sed 's/logicalType: integer/logicalType: integr/' "$contract" >"$tmp/bad.yaml"
check "bad new contract exits 2" status_is 2 "$kiln" contract diff "$contract" "$tmp/bad.yaml"
check "bad contract: file:line:col and key" grep -Eq "^kiln contract diff: $tmp/bad.yaml:[0-9]+:[0-9]+: schema\[0\]\.properties\[7\]\.logicalType: unknown logical type" "$tmp/err"
check "bad contract: one line" test "$(wc -l <"$tmp/err")" -eq 1
check "bad contract: nothing on stdout" test ! -s "$tmp/out"
check "bad old contract exits 2" status_is 2 "$kiln" contract diff --json "$tmp/bad.yaml" "$contract"
check "bad old contract: one line" test "$(wc -l <"$tmp/err")" -eq 1
printf 'apiVersion: v3.1.0\nkind: DataContract\nid: x\nversion: 1\nstatus: draft\n  bad: [\n' >"$tmp/syntax.yaml"
check "yaml syntax error exits 2" status_is 2 "$kiln" contract diff "$contract" "$tmp/syntax.yaml"
check "yaml syntax error: file:line:col" grep -Eq "^kiln contract diff: $tmp/syntax.yaml:[0-9]+:[0-9]+: " "$tmp/err"
check "missing file exits 2" status_is 2 "$kiln" contract diff "$contract" "$tmp/nope.yaml"
check "missing file named" grep -q "nope.yaml: cannot open" "$tmp/err"

# usage
check "one file exits 2" status_is 2 "$kiln" contract diff "$contract"
check "three files exit 2" status_is 2 "$kiln" contract diff "$contract" "$contract" "$contract"
check "unknown option exits 2" status_is 2 "$kiln" contract diff --frob "$contract" "$contract"
check "unknown subcommand exits 2" status_is 2 "$kiln" contract frob
check "no subcommand exits 2" status_is 2 "$kiln" contract
check "kiln contract --help" status_is 0 "$kiln" contract --help
check "help names diff and --json" grep -q "kiln contract diff OLD NEW \[--json\]" "$tmp/out"
check "kiln help contract" status_is 0 "$kiln" help contract
check "kiln contract diff --help" status_is 0 "$kiln" contract diff --help
check "kiln --help lists contract" sh -c "'$kiln' --help | grep -q '^  contract '"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
