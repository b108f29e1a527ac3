#!/usr/bin/env bash
# Signature V4, checked by code no one here wrote: kiln's signer against
# botocore's on generated requests (sigv4_botocore.py). Needs Debian's
# python3-botocore (scripts/bootstrap installs it with python3-boto3).
set -uo pipefail
src=${KILN_SRCDIR:?} build=${KILN_BUILDDIR:?}
. "$src/tests/integration/lib.sh"
py=/usr/bin/python3
$py -c 'import botocore' 2>/dev/null || { echo "FAIL: python3-botocore missing (run scripts/bootstrap)"; echo "0 passed, 1 failed"; exit 1; }

check "kiln's signatures and canonical requests equal botocore's (500 generated requests)" \
	$py "$src/tests/integration/sigv4_botocore.py" "$build/tests/sigv4_tool" 500

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
