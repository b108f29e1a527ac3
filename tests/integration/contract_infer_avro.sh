#!/usr/bin/env bash
# `kiln contract infer --avro SCHEMA.avsc` (docs/CONTRACTS.md): the
# contract for a schema with every Avro type is the golden file byte for
# byte (records to objects, arrays, maps, enums to enum lists, logical
# types to formats, decimals to multipleOf 10^-scale, ["null", T] optional,
# a record inside itself not listed again); kiln validate loads it and
# accepts a record in the decoder's JSON forms; bad schemas and bad usage
# are refused with exit 2 and a message naming the file.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
need_kiln
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fx="$src/tests/fixtures/avro"

check "infer --avro writes the contract" status_is 0 "$kiln" contract infer --avro "$fx/all_types.avsc" --name orders
check "  byte for byte the golden one" cmp "$tmp/out" "$fx/all_types.contract.yaml"
[ "$failed" -eq 0 ] || diff "$fx/all_types.contract.yaml" "$tmp/out" | head -20
cp "$tmp/out" "$tmp/c.yaml"
check "kiln validate loads it and accepts a decoded record" \
	status_is 0 "$kiln" validate --contract "$tmp/c.yaml" "$fx/all_types.sample.jsonl"
sed 's/"total":-5.00/"total":-5.001/' "$fx/all_types.sample.jsonl" >"$tmp/bad.jsonl"
check "  and refuses a decimal with more digits than its scale" \
	status_is 1 "$kiln" validate --contract "$tmp/c.yaml" "$tmp/bad.jsonl"
check "-o writes the file" status_is 0 "$kiln" contract infer --avro "$fx/all_types.avsc" --name orders -o "$tmp/o.yaml"
check "  the same contract" cmp "$tmp/o.yaml" "$fx/all_types.contract.yaml"
check "  never replaced" status_is 2 "$kiln" contract infer --avro "$fx/all_types.avsc" -o "$tmp/o.yaml"

printf '{"type":"record","name":"R","fields":[{"name":"x","type":"Nope"}]}\n' >"$tmp/unknown.avsc"
check "an unknown type name is refused" status_is 2 "$kiln" contract infer --avro "$tmp/unknown.avsc"
check "  naming the file" grep -q "unknown.avsc" "$tmp/err"
printf '{"type":"record","name":"R","fields":[{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":4,"scale":9}}]}\n' >"$tmp/scale.avsc"
check "a decimal scale above its precision is refused" status_is 2 "$kiln" contract infer --avro "$tmp/scale.avsc"
check "  at file:line:col" grep -q "scale.avsc:1:[0-9]*: " "$tmp/err"
printf '"string"\n' >"$tmp/prim.avsc"
check "a schema whose top level is not a record is refused" status_is 2 "$kiln" contract infer --avro "$tmp/prim.avsc"
check "a missing schema file is refused" status_is 2 "$kiln" contract infer --avro "$tmp/none.avsc"
check "--avro with a sample file is a usage error" \
	status_is 2 "$kiln" contract infer --avro "$fx/all_types.avsc" "$fx/all_types.sample.jsonl"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
