#!/usr/bin/env bash
# `kiln validate` end to end: exit statuses, text and JSON output (parsed by
# Debian's python3), stdin, limits, config errors with file:line:col, and that
# no record value ever reaches the output.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
contract=$src/contracts/user-events.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# valid sample: exit 0, summary on stderr, nothing on stdout
check "valid sample exits 0" status_is 0 "$kiln" validate --contract "$contract" "$src/samples/user-events.jsonl"
check "valid sample prints no violation" test ! -s "$tmp/out"
check "summary counts" grep -q "200 records, 200 valid, 0 invalid" "$tmp/err"

# invalid sample: each expected (line, code, path) reported, nothing else
check "invalid sample exits 1" status_is 1 "$kiln" validate --contract "$contract" "$src/samples/user-events-invalid.jsonl"
sed -E 's/^[^:]+:([0-9]+):[0-9]+: ([a-z_0-9]+) (.*)$/\1 \2 \3/' "$tmp/out" >"$tmp/got"
check "violations match the expected list" diff -u "$src/samples/user-events-invalid.expected" "$tmp/got"

# the second shipped contract (ODCS v3.0.2 syntax) and its sample
check "payments sample exits 0" status_is 0 "$kiln" validate --contract "$src/contracts/payments.yaml" "$src/samples/payments.jsonl"
check "payments summary" grep -q "2 records, 2 valid, 0 invalid" "$tmp/err"

# stdin, and "-" as a file
check "stdin" status_is 1 "$kiln" validate --contract "$contract" <"$src/samples/user-events-invalid.jsonl"
check "stdin names <stdin>" grep -q "^<stdin>:2:" "$tmp/out"
check "dash is stdin" status_is 0 "$kiln" validate -c "$contract" - <"$src/samples/user-events.jsonl"

# JSON output parses and balances
check "json output exits 1" status_is 1 "$kiln" validate --contract "$contract" --format json "$src/samples/user-events-invalid.jsonl"
check "json output parses" /usr/bin/python3 - "$tmp/out" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
summary = lines[-1]["summary"]
violations = lines[:-1]
assert summary["records"] == 15 and summary["valid"] == 3 and summary["invalid"] == 12, summary
assert sum(summary["violations"].values()) == len(violations) == 12, summary
for v in violations:
    assert set(v) == {"file", "line", "column", "code", "path"}, v
PY

# no value from the records appears in any output
check "no record value in output" /usr/bin/python3 - "$src/samples/user-events-invalid.jsonl" "$tmp/out" "$tmp/err" <<'PY'
import json, sys
values = set()
def walk(x):
    if isinstance(x, dict):
        for v in x.values(): walk(v)
    elif isinstance(x, list):
        for v in x: walk(v)
    elif isinstance(x, str) and len(x) >= 4:
        values.add(x)
for line in open(sys.argv[1], encoding="utf-8"):
    try:
        walk(json.loads(line))
    except ValueError:
        pass
out = open(sys.argv[2], encoding="utf-8").read() + open(sys.argv[3], encoding="utf-8").read()
leaked = [v for v in values if v in out]
assert not leaked, leaked
PY

# a key that could be personal data is never echoed
printf '%s\n' '{"alice@example.com":1}' >"$tmp/pii-key.jsonl"
check "pii-looking unknown key exits 1" status_is 1 "$kiln" validate --contract "$contract" "$tmp/pii-key.jsonl"
check "pii-looking key not printed" sh -c "! grep -q alice '$tmp/out' '$tmp/err'"

# limits
printf '{"k":"%s"}\n' "$(head -c 3000 /dev/zero | tr '\0' x)" >"$tmp/big.jsonl"
cat "$src/samples/user-events.jsonl" >>"$tmp/big.jsonl"
check "too_large exits 1" status_is 1 "$kiln" validate --contract "$contract" --max-record-bytes 2k "$tmp/big.jsonl"
check "too_large reported on line 1" grep -q ":1:[0-9]*: too_large \\$" "$tmp/out"
check "records after a long one still read" grep -q "201 records, 200 valid, 1 invalid" "$tmp/err"
printf '[[[[[[1]]]]]]\n' >"$tmp/deep.jsonl"
check "too_deep" status_is 1 "$kiln" validate --contract "$contract" --max-depth 4 "$tmp/deep.jsonl"
check "too_deep code" grep -q "too_deep" "$tmp/out"

# unknown fields policy override
sed -n 14p "$src/samples/user-events-invalid.jsonl" >"$tmp/unknown.jsonl"
check "unknown field rejected by default" status_is 1 "$kiln" validate --contract "$contract" "$tmp/unknown.jsonl"
check "unknown field allowed by flag" status_is 0 "$kiln" validate --contract "$contract" --unknown-fields allow "$tmp/unknown.jsonl"

# usage and config errors: exit 2 with a one-line message naming file:line:col
check "no contract" status_is 2 "$kiln" validate "$src/samples/user-events.jsonl"
check "missing input file" status_is 2 "$kiln" validate --contract "$contract" "$tmp/nope.jsonl"
check "missing input named" grep -q "nope.jsonl: cannot open" "$tmp/err"
sed 's/logicalType: integer/logicalType: integr/' "$contract" >"$tmp/bad.yaml"
check "bad contract exits 2" status_is 2 "$kiln" validate --contract "$tmp/bad.yaml" "$src/samples/user-events.jsonl"
check "bad contract names file:line:col and key" grep -Eq "bad.yaml:[0-9]+:[0-9]+: schema\[0\]\.properties\[7\]\.logicalType: unknown logical type" "$tmp/err"
check "config error is one line" test "$(wc -l <"$tmp/err")" -eq 1
printf 'apiVersion: v3.1.0\nkind: DataContract\nid: x\nversion: 1\nstatus: draft\nowner: me\n' >"$tmp/unknown-key.yaml"
check "unknown top-level key exits 2" status_is 2 "$kiln" validate --contract "$tmp/unknown-key.yaml" "$src/samples/user-events.jsonl"
check "unknown top-level key named" grep -q "unknown-key.yaml:6:1: owner: unknown key" "$tmp/err"
check "bad format flag" status_is 2 "$kiln" validate --contract "$contract" --format xml

# help and version
check "kiln --help" status_is 0 "$kiln" --help
check "help lists validate" grep -q "validate" "$tmp/out"
check "kiln validate --help" status_is 0 "$kiln" validate --help
check "validate help lists codes" grep -q "missing_required" "$tmp/out"
check "kiln help validate" status_is 0 "$kiln" help validate
check "kiln --version" status_is 0 "$kiln" --version
check "version text" grep -Eq "^kiln [0-9]+\.[0-9]+\.[0-9]+$" "$tmp/out"
check "unknown command" status_is 2 "$kiln" frobnicate
check "no command" status_is 2 "$kiln"

pii_inputs=("$src/samples/user-events.jsonl" "$src/samples/user-events-invalid.jsonl")
check "no personal data in any log, stdout or stderr" pii_scan_logs

# mistyped commands and options: one line, the closest name, exit 2
check "a mistyped command exits 2" status_is 2 "$kiln" valdiate --contract "$contract"
check "  did you mean validate" grep -qx "kiln: 'valdiate' is not a kiln command; did you mean 'validate'? see 'kiln --help'" "$tmp/err"
check "a mistyped option exits 2" status_is 2 "$kiln" validate --contarct "$contract" "$src/samples/user-events.jsonl"
check "  one line: did you mean --contract" sh -c 'test "$(wc -l <"$1")" -eq 1 && grep -qx "kiln validate: unknown option --contarct; did you mean --contract? (see kiln validate --help)" "$1"' _ "$tmp/err"
check "an option without its value exits 2" status_is 2 "$kiln" validate "$src/samples/user-events.jsonl" --contract
check "  says it needs a value" grep -qx "kiln validate: option --contract needs a value (see kiln validate --help)" "$tmp/err"
check "nothing close: no guess" status_is 2 "$kiln" validate --zzzzzzzz "$src/samples/user-events.jsonl"
check "  unknown, no did you mean" grep -qx "kiln validate: unknown option --zzzzzzzz (see kiln validate --help)" "$tmp/err"

# the progress line: on a terminal (script(1) gives it one) and never on a pipe
need script
"$py" "$src/bench/gen-user-events.py" --records 20000 --seed 5 >"$tmp/big.jsonl"
check "validate on a terminal draws a progress line" sh -c 'script -qec "$1" /dev/null >"$2"; tr "\r" "\n" <"$2" | grep -aq "^kiln validate: $3: [0-9.]*/[0-9.]* MiB, [0-9]* records"' _ \
	"'$kiln' validate --contract '$contract' --quiet '$tmp/big.jsonl'" "$tmp/tty.out" "$tmp/big.jsonl"
check "  and the summary after it" grep -aq "20000 records, 20000 valid, 0 invalid" "$tmp/tty.out"
check "not on a pipe" status_is 0 "$kiln" validate --contract "$contract" --quiet "$tmp/big.jsonl"
check "  stderr is the summary alone" sh -c '! grep -q "MiB" "$1" && test "$(wc -l <"$1")" -eq 1' _ "$tmp/err"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
