#!/usr/bin/env bash
# A nested split key (split.key: customer.customer_id) end to end with a
# file source: tickets of 12 customers are curated into a file:// store and
# a bare manifest repository, then /usr/bin/python3 reads the shards back
# (python3-zstandard, git) and checks that every customer's tickets (told
# apart by ticket_id, a non-personal field) sit in one split, that the
# curated customer_id is the token docs/FORMATS.md gives (domain: the
# field's name "customer_id") and that each record's split is the
# blake2b64-mod10000-v1 bucket of that token, recomputed here. A ticket
# without customer, or without customer.customer_id, is quarantined as
# missing_required with the path customer.customer_id; a split.key through
# an array (items.id) or into a scalar is refused before anything is
# written, in one line naming the pipeline's file:line:col and the array.
# kiln trace --subject customer.customer_id=VALUE (the nested path as the
# subject's field) finds that customer's records.
# Needs git and Debian's python3-zstandard; skips (exit 77) without them.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3

command -v git >/dev/null || { echo "SKIP: git is not installed (run scripts/bootstrap)"; exit 77; }
need_py zstandard
need_kiln

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset KILN_BRANCH KILN_SPLIT_SALT

(umask 077 && printf '%064x\n' 0x5eed1e55 >"$tmp/hmac.key")

# ticket_id at line 10, customer at line 15, items (an array of objects) at line 25
cat >"$tmp/tickets-contract.yaml" <<'EOF'
apiVersion: v3.0.2
kind: DataContract
id: tickets
version: 1.0.0
status: active
schema:
  - name: ticket
    logicalType: object
    properties:
      - name: ticket_id
        logicalType: string
        required: true
      - name: subject
        logicalType: string
      - name: customer
        logicalType: object
        properties:
          - name: customer_id
            logicalType: string
            classification: pii
          - name: tier
            logicalType: string
      - name: priority
        logicalType: integer
      - name: items
        logicalType: array
        items:
          logicalType: object
          properties:
            - name: id
              logicalType: string
EOF

pipeline() { # FILE SPLIT-KEY: a file pipeline splitting on SPLIT-KEY (split.key at line 12, column 8)
	cat >"$1" <<EOF
dataset: tickets
branch: main
contract: tickets-contract.yaml
source:
  kind: file
  path: in.jsonl
  name: tickets
pseudonymise:
  key_file: hmac.key
  key_version: 1
split:
  key: $2
  salt: tickets-v1
  ratios: {train: 0.5, dev: 0.25, test: 0.25}
store:
  url: file://$tmp/store
manifest:
  repo: $tmp/m.git
EOF
}
pipeline "$tmp/tickets.yaml" customer.customer_id

# 12 customers x 5 tickets (T-<customer>-<n>), then the two without a split value
"$py" - "$tmp/in.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for n in range(5):
        for c in range(12):
            f.write(json.dumps({"ticket_id": "T-%d-%d" % (c, n), "subject": "s%d" % n,
                                "customer": {"tier": "gold", "customer_id": "cust-%03d" % c},
                                "priority": n, "items": [{"id": "i%d" % n}]}) + "\n")
    f.write('{"ticket_id": "N-1", "subject": "no customer"}\n')
    f.write('{"ticket_id": "N-2", "customer": {"tier": "silver"}}\n')
PY

# ---- refused at load: a path through an array, into a scalar, to nowhere
refused() { # NAME KEY PATTERN: `kiln run` with split.key KEY exits non-zero with one stderr line matching PATTERN
	local rc=0
	pipeline "$tmp/$1.yaml" "$2"
	"$kiln" run "$tmp/$1.yaml" >"$tmp/$1.out" 2>"$tmp/$1.err" </dev/null || rc=$?
	[ "$rc" -ne 0 ] && [ "$(wc -l <"$tmp/$1.err")" -eq 1 ] && grep -Eq -- "$3" "$tmp/$1.err" && return 0
	echo "  kiln run $1 (split.key: $2): exit $rc, stderr (wanted one line matching /$3/):"
	sed 's/^/  | /' "$tmp/$1.err" | head -5
	return 1
}
check "split.key through an array is refused naming the array" refused arr items.id \
	"$tmp/arr.yaml:12:8: split.key: \"items.id\" goes through the array \"items\" \\($tmp/tickets-contract.yaml:25:9\\): a path cannot step into an array\$"
check "split.key into a scalar is refused" refused scalar ticket_id.x \
	"$tmp/scalar.yaml:12:8: split.key: \"ticket_id.x\" goes through \"ticket_id\" \\($tmp/tickets-contract.yaml:10:9\\), which has no properties"
check "split.key naming an object is refused" refused object customer \
	"$tmp/object.yaml:12:8: split.key: field \"customer\" must be a scalar"
check "split.key naming no property is refused" refused missing customer.id \
	"$tmp/missing.yaml:12:8: split.key: \"customer\" \\($tmp/tickets-contract.yaml:15:9\\) has no property \"id\""
check "nothing was written by the refused runs" test ! -e "$tmp/store/shards" -a ! -e "$tmp/m.git/refs/heads/tickets"

# ---- the run
rc=0
"$kiln" run "$tmp/tickets.yaml" >"$tmp/run.out" 2>"$tmp/run.err" </dev/null || rc=$?
check "kiln run exits 0" test "$rc" -eq 0 || sed 's/^/  | /' "$tmp/run.err" | head -5

verify() {
	"$py" - "$tmp" <<'PY' >"$tmp/verify.check" 2>&1 && return 0
import base64, hashlib, hmac, json, os, subprocess, sys, zstandard

tmp = sys.argv[1]
key = bytes.fromhex(open(os.path.join(tmp, "hmac.key")).read().strip())
salt = b"tickets-v1"

def token(domain, value):  # docs/FORMATS.md, hmac-sha256-b32-v1
    mac = hmac.new(key, domain.encode() + b"\x1f" + value.encode(), hashlib.sha256).digest()[:16]
    return "p1_" + base64.b32encode(mac).decode().rstrip("=").lower()

def split_of(value):  # docs/FORMATS.md, blake2b64-mod10000-v1 with 0.5/0.25/0.25
    d = hashlib.blake2b(salt + b"\x1f" + value.encode(), digest_size=32).digest()
    b = int.from_bytes(d[:8], "little") % 10000
    return "train" if b < 5000 else "dev" if b < 7500 else "test"

def git(*args):
    return subprocess.run(["git", "--git-dir", os.path.join(tmp, "m.git")] + list(args),
                          check=True, capture_output=True, text=True).stdout

ref = "refs/heads/tickets/main"
dataset = json.loads(git("show", ref + ":dataset.json"))
assert dataset["split"]["key"] == "customer.customer_id", dataset["split"]
where = {}  # ticket_id -> (split, curated record)
for path in git("ls-tree", "-r", "--name-only", ref, "splits").split():
    split = path.split("/")[1]
    for line in git("show", ref + ":" + path).splitlines():
        h = json.loads(line)["shard"]
        data = open(os.path.join(tmp, "store", "shards", h[:2], h + ".jsonl.zst"), "rb").read()
        for rec in zstandard.ZstdDecompressor().decompress(data).decode().splitlines():
            r = json.loads(rec)
            assert r["ticket_id"] not in where, "ticket %s twice" % r["ticket_id"]
            where[r["ticket_id"]] = (split, r)

assert len(where) == 60, "%d curated records, want 60" % len(where)
per_customer = {}
for c in range(12):
    raw = "cust-%03d" % c
    want_token = token("customer_id", raw)
    splits = set()
    for n in range(5):
        split, r = where["T-%d-%d" % (c, n)]
        assert r["customer"]["customer_id"] == want_token, "T-%d-%d: not the customer_id token" % (c, n)
        assert split == split_of(want_token), "T-%d-%d: in %s, the rule says %s" % (c, n, split, split_of(want_token))
        splits.add(split)
    assert len(splits) == 1, "customer %d in %s" % (c, sorted(splits))
    per_customer[c] = splits.pop()
json.dump(per_customer, open(os.path.join(tmp, "customer-splits.json"), "w"))
used = set(per_customer.values())
assert len(used) >= 2, "every customer in one split (%s): the test shows nothing" % used

quarantined = {}
qdir = os.path.join(tmp, "store", "quarantine")
for root, _, files in os.walk(qdir):
    for name in files:
        data = open(os.path.join(root, name), "rb").read()
        for line in zstandard.ZstdDecompressor().decompress(data).decode().splitlines():
            q = json.loads(line)
            quarantined[json.loads(q["record"])["ticket_id"]] = (q["code"], q["path"])
want = {"N-1": ("missing_required", "customer.customer_id"),
        "N-2": ("missing_required", "customer.customer_id")}
assert quarantined == want, quarantined
print("ok: 60 curated in", sorted(used), "and 2 quarantined")
PY
	sed 's/^/  | /' "$tmp/verify.check" | tail -20
	return 1
}
check "every customer in one split, by the rule; the two without customer_id quarantined" verify
# a subject named by the nested path: its tokens in the field's domain find
# the customer's 5 records, all in the customer's split
traced() {
	(cd "$tmp" && "$kiln" trace tickets --subject customer.customer_id=cust-003 --pipeline tickets.yaml \
		--json >trace.out 2>trace.err) || { sed 's/^/  | /' "$tmp/trace.err" | head -5; return 1; }
	"$py" - "$tmp" <<'PY'
import json, os, sys
tmp = sys.argv[1]
t = json.load(open(os.path.join(tmp, "trace.out")))
want = json.load(open(os.path.join(tmp, "customer-splits.json")))["3"]
erased = t["erased"]
assert erased[want] == 5 and sum(erased.values()) == 5, (erased, want)
PY
}
check "kiln trace --subject customer.customer_id=... finds the customer's 5 records in its split" traced
check "git fsck --strict" git --git-dir="$tmp/m.git" fsck --strict --no-progress
check "no raw customer id in a log" bash -c "! grep -l 'cust-0' '$tmp'/*.out '$tmp'/*.err"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
