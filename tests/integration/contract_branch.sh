#!/usr/bin/env bash
# A dataset branch and its contract over time (docs/QUALITY.md, "Contract
# changes"): each commit keeps the contract it was curated under
# (contract.yaml, byte for byte); a later run with a contract that breaks
# readers (contract/compat.h) is refused unless the major version grows; a
# compatible change goes through; kiln promote with
# promote.contract_compatible compares the version's contract with the last
# promoted one's.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need git
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset KILN_BRANCH KILN_SPLIT_SALT
pipeline=$src/pipelines/user-events.yaml
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
cp "$src/contracts/user-events.yaml" "$tmp/c1.yaml"
$py - "$tmp" <<'PY'
import sys
t = sys.argv[1]
text = open(t + "/c1.yaml").read()
i = text.index("      - name: country\n")
j = text.index("      - name: ", i + 10)
removed = text[:i] + text[j:]
open(t + "/removed.yaml", "w").write(removed)  # breaking, same major
open(t + "/removed-v2.yaml", "w").write(removed.replace("version: 1.2.0", "version: 2.0.0", 1))
open(t + "/added.yaml", "w").write(text.replace("version: 1.2.0", "version: 1.3.0", 1).replace(
    "      - name: country\n", "      - name: referrer\n        logicalType: string\n      - name: country\n", 1))
PY
gen() { $py "$src/bench/gen-user-events.py" --records "$1" --seed "$2" --append -o "$tmp/in.jsonl"; }
run() { "$kiln" run "$pipeline" --set contract="$tmp/$1.yaml" --set unknown_fields=allow; }
promote() { "$kiln" promote user-events@main --pipeline "$pipeline" --set contract="$tmp/$1.yaml" \
	--set promote.ratio_tolerance=1 --set promote.contract_compatible=true "${@:2}"; }

gen 2000 1
check "run with the contract" status_is 0 run c1
check "the commit keeps the contract byte for byte (contract.yaml)" \
	sh -c "git --git-dir '$tmp/m.git' show user-events/main:contract.yaml | cmp -s - '$tmp/c1.yaml'"
check "promote v1 (contract_compatible: nothing to compare with)" status_is 0 promote c1
check "  says so" grep -q 'gate contract_compatible: no promoted version to compare with: pass' "$tmp/out"

gen 500 2
check "a compatible change (an optional field, 1.3.0) runs" status_is 0 run added
check "  and passes contract_compatible" status_is 0 promote added --dry-run
check "  with its count" grep -q 'gate contract_compatible with v1: [0-9]* changes, none breaking: pass' "$tmp/out"

gen 500 3
check "a breaking change in the same major (a field removed, 1.2.0) is refused" status_is 2 run removed
check "  naming the changes and what to do" \
	grep -q 'contract user-events 1.3.0 -> 1.2.0 breaks readers of user-events/main (2 breaking: referrer field_removed, country field_removed; kiln contract diff lists them): raise the contract.s major version or run on a new branch' "$tmp/err"
check "  nothing committed" test "$(git --git-dir "$tmp/m.git" rev-list --count user-events/main)" = 2
check "the same change with a new major version (2.0.0) runs" status_is 0 run removed-v2
check "  and the tree keeps the new contract" \
	sh -c "git --git-dir '$tmp/m.git' show user-events/main:contract.yaml | cmp -s - '$tmp/removed-v2.yaml'"
check "promote with contract_compatible: breaking against v1 (exit 1)" status_is 1 promote removed-v2 --dry-run
check "  naming the breaking change" \
	grep -q 'release gate failed: contract_compatible with v1: 1 of [0-9]* changes breaking (country field_removed): FAIL' "$tmp/err"

# the comparison is with the last promoted version, not v1: v2 promoted
# without the gate, then the same contract compared with v2
check "v2 with the new major (contract_compatible off)" status_is 0 promote removed-v2 --set promote.contract_version=2.x \
	--set promote.contract_compatible=false
check "contract_compatible then compares with v2, the last promoted version" status_is 0 promote removed-v2 --dry-run \
	--set promote.contract_version=2.x
check "  and names it" grep -q 'gate contract_compatible with v2: 0 changes, none breaking: pass' "$tmp/out"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
