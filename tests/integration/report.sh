#!/usr/bin/env bash
# `kiln report` (docs/REPORT.md) end to end in a real browser: a dataset
# with two commits on main, the first promoted v1 (signed), the second with
# session_ms shifted tenfold and more records quarantined, an erasure in the
# ledger; then the report of main against v1 with the pipeline's gates:
#  - the page is one self-contained file: no script, no external reference;
#  - html5lib parses it strictly (python3-html5lib, no parse error);
#  - headless Chromium renders it: the screenshot is not blank (its PNG
#    decoded with zlib: non-white pixels counted), and the DOM it dumps has
#    the flagged field's figure by id (field-session_ms, class flagged);
#  - what the page says: the signature as kiln verify sees it (trusted with
#    --allowed-signers, "not checked against any key" without), contract
#    and key id, lineage, the drift figures, the quarantine by code and
#    path and per commit, each gate and quality rule with figure and
#    threshold, the erasure;
#  - foreign text escaped: a field named <script>alert(1)</script>, an enum
#    value that closes an attribute, a record quarantined at that path;
#  - no personal value in it (curate_check.py scan-pii and a canary).
# KILN_REPORT_SCREENSHOT=FILE copies the screenshot there (docs/report.png).
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
need git chromium
$py -c "import html5lib" 2>/dev/null || { echo "FAIL: $py cannot import html5lib (run scripts/bootstrap)"; echo "0 passed, 1 failed"; exit 1; }
tmp=$(mktemp -d)
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
unset KILN_BRANCH KILN_SPLIT_SALT
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")

# A contract with quality rules and a pipeline with a drift gate beside it.
$py - "$src/contracts/user-events.yaml" "$tmp/q.yaml" <<'PY'
import sys
text = open(sys.argv[1]).read()
def after(anchor, block):
    global text
    assert anchor in text, anchor
    text = text.replace(anchor, anchor + block, 1)
after("  - name: user_event\n", """    quality:
      - {id: enough_rows, metric: rowCount, mustBeGreaterThan: 1000}
      - {id: freshness_sql, type: sql, query: "SELECT 1", mustBe: 1}
""")
after("      - name: country\n", """        quality:
          - {id: country_present, metric: missingValues, mustBeLessThan: 20, unit: percent}
""")
open(sys.argv[2], "w").write(text)
PY
sed -e "s|^contract: .*|contract: $tmp/q.yaml|" -e 's|^  max_quarantine_rate: .*|  max_quarantine_rate: 0.05\n  drift: {baseline: previous, max_psi: 0.2}|' \
	"$src/pipelines/user-events.yaml" >"$tmp/p.yaml"
pipeline=$tmp/p.yaml
not() { ! "$@"; }
check "the sign key" status_is 0 "$kiln" keygen --out "$tmp/sign.key" --comment release@kiln.test
printf 'release@kiln.test namespaces="git" %s\n' "$(cut -d' ' -f1,2 "$tmp/sign.key.pub")" >"$tmp/allowed"

# commit 1: the baseline (a canary record full of made-up personal data first)
canary='{"event_id":"7d8e1c8a-6f0b-4e43-9d43-2b7f0c1a9e55","event_type":"signup","occurred_at":"2026-11-30T10:00:00Z","user_id":"canary-user-5521","email":"Zelda.Canary5521@canary-mail.example","client_ip":"203.0.113.77","consent":true,"message":"call me on +44 7700 900521 or zelda.canary5521@canary-mail.example","device":{"os":"linux"}}'
echo "$canary" >"$tmp/in.jsonl"
$py "$src/bench/gen-user-events.py" --records 4000 --seed 31 --invalid-rate 0.02 --expect "$tmp/base.expect" --append -o "$tmp/in.jsonl"
check "run 1" status_is 0 "$kiln" run "$pipeline"
check "promote v1 (signed)" status_is 0 "$kiln" promote user-events@main --pipeline "$pipeline" \
	--set manifest.signing_key="$tmp/sign.key" --set promote.ratio_tolerance=0.05
# commit 2: session_ms ten times longer, more records quarantined
$py "$src/bench/gen-user-events.py" --records 4000 --seed 32 --invalid-rate 0.12 --expect "$tmp/shift.expect" -o "$tmp/shift.raw"
$py - "$tmp/shift.raw" >>"$tmp/in.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1], "rb"):
    try:
        r = json.loads(line)
    except ValueError:
        sys.stdout.buffer.write(line)
        continue
    if isinstance(r, dict) and isinstance(r.get("session_ms"), int) and r["session_ms"] >= 0:
        r["session_ms"] = min(r["session_ms"] * 10 + 1000, 3599999)
        line = (json.dumps(r) + "\n").encode()
    sys.stdout.buffer.write(line)
PY
check "run 2" status_is 0 "$kiln" run "$pipeline"
check "erase the canary's user" status_is 0 "$kiln" erase user-events --subject user_id=canary-user-5521 --pipeline "$pipeline" \
	--set manifest.signing_key="$tmp/sign.key"

# the report
out=$tmp/report
check "kiln report --baseline v1 --pipeline: exit 0" status_is 0 "$kiln" report user-events@main --baseline v1 \
	--pipeline "$pipeline" --allowed-signers "$tmp/allowed" -o "$out"
cp "$tmp/out" "$tmp/report.out"
page=$out/index.html
check "it names the page and the flagged count" grep -q "^$out/index.html: user-events@[0-9a-f]\{12\} against user-events@v1, [1-9][0-9]* of [0-9]* fields flagged$" "$tmp/report.out"
check "one self-contained file: no script, no link, no external reference" \
	not grep -qiE '<script|<link|<iframe|<img|src=|url\(|@import|https?://[^"]*"[^>]*(href|src)' "$page"
check "the only URL is SVG's namespace" test "$(grep -oE 'https?://[^" ]*' "$page" | sort -u)" = "http://www.w3.org/2000/svg"
check "html5lib parses it strictly" $py - "$page" <<'PY'
import sys, html5lib
parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)
parser.parse(open(sys.argv[1], "rb"))
PY

# in the browser
chrome() { timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$tmp/chrome" "$@" 2>>"$tmp/chromium.log"; }
chrome --screenshot="$tmp/report.png" --window-size=1200,3000 "file://$page" >/dev/null
check "chromium took a screenshot" test -s "$tmp/report.png"
check "the screenshot is not blank" $py - "$tmp/report.png" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
at, idat, w = 8, b"", 0
while at < len(data):
    n, kind = struct.unpack(">I4s", data[at:at + 8])
    body = data[at + 8:at + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        assert depth == 8 and ctype in (2, 6), (depth, ctype)
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
    at += 12 + n
raw, stride = zlib.decompress(idat), w * bpp
prev, coloured, dark = bytearray(stride), 0, 0
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        r, g, bl = line[x], line[x + 1], line[x + 2]
        if (r, g, bl) != (255, 255, 255):
            coloured += 1
        if r < 100 and g < 100 and bl < 100:
            dark += 1
    prev = line
share = coloured / (w * h)
print(f"  screenshot {w}x{h}: {share:.1%} not white, {dark} dark pixels")
assert share > 0.03 and dark > 2000, "blank"
PY
[ -n "${KILN_REPORT_SCREENSHOT:-}" ] && cp "$tmp/report.png" "$KILN_REPORT_SCREENSHOT"
chrome --dump-dom "file://$page" >"$tmp/dom.html"
check "the rendered DOM has the flagged field's figure by id" \
	grep -q '<figure class="field flagged" id="field-session_ms">' "$tmp/dom.html"
check "  and its histogram with the baseline drawn over it" $py - "$tmp/dom.html" <<'PY'
import sys, html5lib
doc = html5lib.parse(open(sys.argv[1], "rb"), namespaceHTMLElements=False)
fig = doc.find(".//figure[@id='field-session_ms']")
assert fig is not None and "flagged" in fig.get("class")
svgs = fig.findall(".//{http://www.w3.org/2000/svg}svg")
assert any(s.find(".//{http://www.w3.org/2000/svg}polyline") is not None for s in svgs), "no baseline outline"
first = doc.find(".//section[@id='fields']//figure")
assert "flagged" in first.get("class"), "a flagged field comes first"
PY

# what it says
has() { grep -qF -- "$1" "$page" || { echo "  not in the page: $1"; return 1; }; }
has_re() { grep -qE -- "$1" "$page" || { echo "  not in the page: $1"; return 1; }; }
commit=$(git --git-dir "$tmp/m.git" rev-parse user-events/main)
check "the commit" has "<code>$commit</code>"
check "the signature of v1's tag: trusted" sh -c "'$kiln' report user-events@v1 --allowed-signers '$tmp/allowed' -o '$tmp/v1' >/dev/null && grep -q 'good, trusted</span> signed by ssh-ed25519 <code>SHA256:' '$tmp/v1/index.html'"
check "  without keys: not checked against any key" sh -c "'$kiln' report user-events@v1 -o '$tmp/v1n' >/dev/null && grep -q '<th>signature</th><td>not checked against any key: signed by ssh-ed25519' '$tmp/v1n/index.html'"
check "the contract and the key id" has_re '<th>contract</th><td>user-events [0-9.]+ \(blake2b-256:[0-9a-f]{64}\)</td>'
check "  key id" has_re '<th>key id</th><td>[^<?]+ \(scheme hmac-sha256-b32-v1'
check "the lineage" has_re '<td>file</td><td>user-events</td><td class="n">0</td><td class="n">[0-9]+</td>'
check "the drift table: session_ms flagged with its PSI" has_re '<code>session_ms</code></a></td><td class="n">[0-9.]+</td>.*<span class="badge flag">drift</span> psi [0-9.]+ &gt;= 0.2'
check "the quarantine by code" has_re '<tr><td><code>type</code></td><td class="n">[0-9]+</td></tr>'
check "  by code and path (from the store)" has_re '<tr><td><code>[a-z_]+</code></td><td><code>[a-z_.]+</code></td><td class="n">[0-9]+</td></tr>'
check "  per commit, as a chart" has 'aria-label="quarantined records added per commit, oldest left"'
check "the gates with figure and threshold" has_re 'badge fail">FAIL</span></td><td><code>max_quarantine_rate: [0-9.]+ \([0-9]+ of [0-9]+\) &lt;= 0.0500: FAIL'
check "  the drift gate" has_re '<code>drift vs v1: session_ms: psi [0-9.]+ &gt;= 0.2'
check "  a quality rule" has_re '<code>quality country_present \(missingValues of country\): [0-9.]+% mustBeLessThan 20: pass'
check "  an sql rule: not run" has 'badge skip">not run</span></td><td><code>quality freshness_sql (type sql): not run by kiln'
check "the erasure" has_re '<tr><td><code>[0-9a-f]{16}</code></td><td>20[0-9-]+ [0-9:]+Z</td>'
check "without --pipeline: the version's own quality rules" sh -c "'$kiln' report user-events@main -o '$tmp/np' >/dev/null && grep -q 'quality enough_rows (rowCount): [0-9]* rows mustBeGreaterThan 1000: pass' '$tmp/np/index.html' && grep -q 'give <code>--pipeline FILE</code>' '$tmp/np/index.html'"
check "a baseline that does not resolve: exit 2" status_is 2 "$kiln" report user-events@main --baseline v9 -o "$tmp/x"
check "  one line naming it" grep -q '^kiln report: user-events@v9: ' "$tmp/err"
check "no -o: exit 2" status_is 2 "$kiln" report user-events@main

# foreign text is escaped: a contract whose field is named <script>...,
# with an enum value that closes an attribute, and a record quarantined
# at that path
mkdir -p "$tmp/h"
cat >"$tmp/h/c.yaml" <<'YAML'
apiVersion: v3.1.0
kind: DataContract
id: hostile
name: Hostile names
version: 1.0.0
status: active
schema:
  - name: rec
    logicalType: object
    properties:
      - name: "<script>alert(1)</script>"
        logicalType: string
        required: true
        customProperties:
          - property: enum
            value: ["\"><img src=x onerror=alert(2)>", "b&c"]
      - name: n
        logicalType: integer
YAML
cat >"$tmp/h/p.yaml" <<YAML
dataset: hostile
contract: c.yaml
source: {kind: file, path: in.jsonl, name: hostile}
pseudonymise: {key_file: $tmp/hmac.key, key_version: 1}
split: {key: n, salt: s, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: "file://$tmp/h/store"}
manifest: {repo: $tmp/h/m.git}
YAML
$py -c '
import json
for i in range(40):
    print(json.dumps({"<script>alert(1)</script>": ["\"><img src=x onerror=alert(2)>", "b&c"][i % 2], "n": i}))
print(json.dumps({"<script>alert(1)</script>": "other", "n": 1}))' >"$tmp/h/in.jsonl"
check "hostile names: run" status_is 0 "$kiln" run "$tmp/h/p.yaml"
check "hostile names: report" status_is 0 "$kiln" report hostile@main --pipeline "$tmp/h/p.yaml" -o "$tmp/h/out"
check "  no tag from the repository in the page" not grep -qE '<script|<img' "$tmp/h/out/index.html"
check "  the field name as text" grep -qF '&lt;script&gt;alert(1)&lt;/script&gt;' "$tmp/h/out/index.html"
check "  the category as text" grep -qF '&quot;&gt;&lt;img src=x onerror=alert(2)&gt;' "$tmp/h/out/index.html"
check "  the quarantined path as text" grep -qF '<td><code>enum</code></td><td><code>&lt;script&gt;alert(1)&lt;/script&gt;</code></td><td class="n">1</td>' "$tmp/h/out/index.html"
check "  its figure's id" grep -qF 'id="field--3cscript-3ealert-281-29-3c-2fscript-3e"' "$tmp/h/out/index.html"
check "  html5lib parses it strictly" $py -c 'import sys, html5lib; html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(open(sys.argv[1], "rb"))' "$tmp/h/out/index.html"

# no personal value
check "no personal value in the page (scan-pii)" $py "$src/tests/integration/curate_check.py" scan-pii \
	--expect "$tmp/base.expect" --expect "$tmp/shift.expect" --input "$tmp/in.jsonl" "$page" "$tmp/np/index.html"
leaks=0
for needle in canary-user-5521 Zelda zelda Canary5521 canary5521 canary-mail 203.0.113.77 "7700 900521" 900521; do
	grep -qF "$needle" "$page" && { echo "  leaked: $needle"; leaks=$((leaks + 1)); }
done
check "canary: none of its values in the page" test "$leaks" -eq 0
check "no personal value in the logs" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
