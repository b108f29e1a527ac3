#!/usr/bin/python3
"""A plain Python curator for contracts/user-events.yaml: the speed reference
that bench/table.sh sets `kiln run` against.

Usage: curate.py --key KEYFILE [--salt SALT] [--level N] -o OUTDIR INPUT.jsonl

It does the work of `kiln run pipelines/user-events.yaml` with the standard
library and python3-zstandard (Debian), written the way a data engineer would
write it, with the obvious speed-ups (an HMAC state per domain copied per
value, precompiled patterns):
  - reads JSON Lines and parses each line with json.loads;
  - checks the contract by hand: required fields present and not null, each
    listed field's JSON type, unknown top-level fields rejected (a hand-coded
    check for this one contract, not a contract engine: it is a reference for
    speed; formats, patterns and ranges are not checked); a record that fails
    goes to the quarantine file;
  - pseudonymises as docs/FORMATS.md says (scheme hmac-sha256-b32-v1):
    user_id (domain "user") and client_ip (domain "ip") as tokens, email as
    keep-domain (domain "email"), and the free text in message through the
    six detectors (email, phone, IPv4, IPv6, IBAN, card; the patterns and
    checks of src/mask/detect.c ported to Python's re);
  - assigns the split by blake2b64-mod10000-v1 on the curated user_id
    (ratios 0.8/0.1/0.1);
  - writes each curated record with json.dumps, and each split's JSON Lines
    as one zstd frame (level 3, one thread, checksum on) in
    OUTDIR/{train,dev,test}.jsonl.zst, rejects in OUTDIR/quarantine.jsonl.zst.
Prints "curate.py: N records (V valid, Q quarantined) [train T, dev D, test E]".

Its tokens and split assignment equal kiln's for the same key and salt
(bench/table.sh's checks compare them on a sample); the curated lines may
differ from kiln's bytes where json.dumps rewrites a number (1.50 -> 1.5).
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import sys

try:
    import zstandard
except ImportError:  # pragma: no cover
    sys.stderr.write("curate.py: needs python3-zstandard (apt-get install python3-zstandard)\n")
    sys.exit(2)

PREFIX = "p1_"
RATIOS = (8000, 9000)  # round(0.8 * 10000), + round(0.1 * 10000)

# --- the contract, by hand ---------------------------------------------------
STR, INT, NUM, BOOL, OBJ, ARR = "str", "int", "num", "bool", "obj", "arr"
FIELDS = {
    "event_id": STR, "event_type": STR, "occurred_at": STR, "received_date": STR,
    "user_id": STR, "email": STR, "client_ip": STR, "session_ms": INT, "amount": NUM,
    "consent": BOOL, "country": STR, "message": STR, "page_url": STR, "device": OBJ,
    "tags": ARR,
}
REQUIRED = ("event_id", "event_type", "occurred_at", "user_id", "consent", "device")


def type_ok(kind, v):
    if kind == STR:
        return isinstance(v, str)
    if kind == INT:
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == NUM:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if kind == BOOL:
        return isinstance(v, bool)
    if kind == OBJ:
        return isinstance(v, dict)
    return isinstance(v, list)


def violation(rec):
    """The first violation as "code path", or None."""
    if not isinstance(rec, dict):
        return "not_object $"
    for name in REQUIRED:
        if rec.get(name) is None:
            return "missing_required " + name
    for name, v in rec.items():
        kind = FIELDS.get(name)
        if kind is None:
            return "unknown_field " + name
        if v is not None and not type_ok(kind, v):
            return "type " + name
    dev = rec["device"]
    if dev.get("os") is None:
        return "missing_required device.os"
    for name, v in dev.items():
        if name not in ("os", "os_version", "model"):
            return "unknown_field device." + name
        if v is not None and not isinstance(v, str):
            return "type device." + name
    return None


# --- tokens (hmac-sha256-b32-v1) ----------------------------------------------
ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
ASCII_SPACE = " \t\n\r\f\v"


class Tokens:
    """One HMAC-SHA-256 state per domain (key and "domain" 0x1F absorbed),
    copied for each value."""

    def __init__(self, key):
        self.key = key
        self.states = {}

    def __call__(self, domain, value):
        st = self.states.get(domain)
        if st is None:
            st = hmac.new(self.key, domain.encode() + b"\x1f", hashlib.sha256)
            self.states[domain] = st
        h = st.copy()
        h.update(value.encode())
        return PREFIX + base64.b32encode(h.digest()[:16]).decode().rstrip("=").lower()


def email_normal(s):
    return s.strip(ASCII_SPACE).translate(ASCII_LOWER)


# --- free-text detectors (src/mask/detect.c) ----------------------------------
# PCRE2's possessive repeats of a group are written as atomic groups: Python
# 3.11's re lets a possessive group repeat keep a failed iteration's prefix
# ("+1 555 010 4477 " with its trailing space).
NUM_BEFORE = r"(?<![A-Za-z0-9_+])(?<![0-9][-.:/])"
NUM_AFTER = r"(?![A-Za-z0-9_]|[-.:/][0-9])"
HI = "\u0080-\U0010ffff"  # kiln counts UTF-8 bytes as letters
EMAIL_RE = re.compile(
    "(?<![A-Za-z0-9_%+" + HI + "-])(?<![A-Za-z0-9_%+" + HI + r"-]\.)"
    "[A-Za-z0-9_%+" + HI + "-](?:[A-Za-z0-9._%+" + HI + "-]{0,62}[A-Za-z0-9_%+" + HI + "-])?"
    "@(?:[A-Za-z0-9" + HI + r"-]{1,63}+\.){1,10}[A-Za-z]{2,63}+(?![A-Za-z0-9_" + HI + "-])")
PHONE_RE = re.compile(
    NUM_BEFORE + r"(?:"
    r"\+[1-9][0-9]{0,14}+(?>(?:[-. ]?\([0-9]{1,4}\)[-. ]?[0-9]{1,14}+|[-. ][0-9]{1,14}+){0,7})"
    r"|(?:1[-. ])?(?:\([2-9][0-9]{2}\) ?[2-9][0-9]{2}[-. ]"
    r"|[2-9][0-9]{2}(?P<ns>[-. ])[2-9][0-9]{2}(?P=ns))[0-9]{4}"
    r"|(?<![0-9] )0[0-9]{1,4}(?P<ts>[- ])[0-9]{2,10}(?>(?:(?P=ts)[0-9]{2,10}){0,4})"
    r")" + NUM_AFTER)
IPV4_RE = re.compile(r"(?<![A-Za-z0-9_])(?<![0-9]\.)[0-9]{1,3}+(?:\.[0-9]{1,3}+){3}(?![A-Za-z0-9_]|\.[0-9])")
IPV6_RE = re.compile(r"(?<![A-Za-z0-9_:])(?:[0-9A-Fa-f]{0,4}:){2,8}"
                     r"(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}|[0-9A-Fa-f]{1,4})?(?![A-Za-z0-9_:]|\.[0-9])")
IBAN_RE = re.compile(r"(?<![A-Za-z0-9_])[A-Z]{2}[0-9]{2}"
                     r"(?:[A-Z0-9]{11,30}+|(?>(?: [A-Z0-9]{4}){2,7})(?>(?: [A-Z0-9]{1,4})?))(?![A-Za-z0-9_])")
CARD_RE = re.compile(NUM_BEFORE + r"[2-6][0-9]{2,18}+(?>(?:(?P<cs>[- ])[0-9]{3,18}+(?>(?:(?P=cs)[0-9]{3,18}+){0,5}))?)"
                     + NUM_AFTER)
ATEXT = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-/=?^_`{|}~")
DIGITS = set("0123456789")


def cut_last_group(s):
    return s[:s.rfind(" ")].rstrip(" ") if " " in s else ""


def label_ok(lab, non_ascii):
    return (0 < len(lab.encode()) <= 63 and lab[0] != "-" and lab[-1] != "-"
            and all(c.isascii() and (c.isalnum() or c == "-") or (non_ascii and not c.isascii()) for c in lab))


def ipv4_ok(s):
    parts = s.split(".")
    return len(parts) == 4 and all(p.isdigit() and p.isascii() and len(p) <= 3 and (p == "0" or p[0] != "0")
                                   and int(p) <= 255 for p in parts)


def ipv6_ok(s):
    import ipaddress
    try:
        ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return "%" not in s


def check_email(s):
    if not 0 < len(s.encode()) <= 254 or "@" not in s:
        return 0
    local, dom = s.split("@", 1)
    if not 0 < len(local.encode()) <= 64 or local[0] == "." or local[-1] == "." or ".." in local:
        return 0
    if not all(c in ATEXT or not c.isascii() for c in local if c != "."):
        return 0
    if len(dom) >= 2 and dom[0] == "[" and dom[-1] == "]":
        lit = dom[1:-1]
        ok = ipv6_ok(lit[5:]) if lit[:5].lower() == "ipv6:" else ipv4_ok(lit)
        return len(s) if ok else 0
    labels = dom.split(".")
    ok = 0 < len(dom.encode()) <= 253 and len(labels) >= 2 and all(label_ok(x, True) for x in labels)
    return len(s) if ok else 0


def phone_digits(s):
    plus = s.startswith("+")
    return sum(c in DIGITS for c in (s.replace("(0)", "") if plus else s))


def check_phone(s):
    if s[0] == "+":
        lo, hi = 8, 15
    elif s.startswith("00"):
        i = 2
        while i < len(s) and s[i] in DIGITS:
            i += 1
        if i + 1 < len(s) and s[i + 1] == "0":
            return 0
        lo, hi = 10, 17
    elif s[0] == "0":
        lo, hi = 9, 12
    else:
        return len(s)
    while s:
        d = phone_digits(s)
        if d < lo:
            return 0
        if d <= hi and s[-1] in DIGITS:
            return len(s)
        s = cut_last_group(s)
    return 0


def luhn(s):
    digits = [int(c) for c in s if c in DIGITS]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return len(digits), total % 10 == 0


def check_card(s):
    while s:
        n, ok = luhn(s)
        if n < 13:
            return 0
        if n <= 19 and ok:
            return len(s)
        s = cut_last_group(s)
    return 0


def iban_ok(s):
    c = s.replace(" ", "")
    if not 15 <= len(c) <= 34 or c[2:4] in ("00", "01", "99"):
        return False
    return int("".join(str(int(ch, 36)) for ch in c[4:] + c[:4])) % 97 == 1


def check_iban(s):
    while len(s) >= 15:
        if iban_ok(s):
            return len(s)
        s = cut_last_group(s)
    return 0


def normal_phone(s):
    if s[0] == "+":
        return "+" + "".join(c for c in s.replace("(0)", "") if c in DIGITS)
    return "".join(c for c in s if c in DIGITS)


# (pattern, check, normal form, domain, needs a byte, needs a digit, tie rank)
DETECTORS = (
    (EMAIL_RE, check_email, lambda s: s.translate(ASCII_LOWER), "email", "@", False, 2),
    (PHONE_RE, check_phone, normal_phone, "phone", None, True, 5),
    (IPV4_RE, lambda s: len(s) if ipv4_ok(s) else 0, lambda s: s, "ip", ".", True, 4),
    (IPV6_RE, lambda s: len(s) if s.strip(":") and ipv6_ok(s) else 0, lambda s: s.translate(ASCII_LOWER), "ip",
     ":", False, 3),
    (IBAN_RE, check_iban, lambda s: s.replace(" ", "").translate(ASCII_UPPER), "iban", None, True, 1),
    (CARD_RE, check_card, lambda s: "".join(c for c in s if c in DIGITS), "card", None, True, 0),
)
HAS_DIGIT = re.compile(r"[0-9]")


def scan(text, token):
    """text with every detected item replaced by its token."""
    digit = HAS_DIGIT.search(text) is not None
    cands = []
    for rank, (pat, check, normal, domain, needs, needs_digit, tie) in enumerate(DETECTORS):
        if (needs_digit and not digit) or (needs and needs not in text):
            continue
        pos = 0
        while pos < len(text):
            m = pat.search(text, pos)
            if m is None:
                break
            got = check(m.group())
            if got == 0:
                pos = m.start() + 1
                continue
            cands.append((-got, m.start(), tie, rank))
            pos = m.start() + got
    if not cands:
        return text
    cands.sort()
    keep = []
    for neg, start, _, rank in cands:
        end = start - neg
        if all(end <= s or start >= e for s, e, _ in keep):
            keep.append((start, end, rank))
    keep.sort()
    out, last = [], 0
    for start, end, rank in keep:
        det = DETECTORS[rank]
        out.append(text[last:start])
        out.append(token(det[3], det[2](text[start:end])))
        last = end
    out.append(text[last:])
    return "".join(out)


# --- the run -------------------------------------------------------------------
def read_key(path):
    st = os.stat(path)
    if st.st_mode & 0o077:
        sys.exit("curate.py: %s is readable or writable by group or others" % path)
    with open(path) as f:
        return bytes.fromhex(f.read().strip())


def curate(rec, token):
    rec["user_id"] = token("user", rec["user_id"])
    email = rec.get("email")
    if email is not None:
        e = email_normal(email)
        at = e.rfind("@")
        rec["email"] = token("email", e) if at < 0 else token("email", e[:at]) + e[at:]
    ip = rec.get("client_ip")
    if ip is not None:
        rec["client_ip"] = token("ip", ip)
    msg = rec.get("message")
    if msg:
        rec["message"] = scan(msg, token)
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--key", required=True, help="key file: 64 hex characters, chmod 600")
    ap.add_argument("--salt", default="user-events-v1", help="split.salt (default: user-events-v1)")
    ap.add_argument("--level", type=int, default=3, help="zstd level (default 3)")
    ap.add_argument("-o", "--outdir", required=True)
    ap.add_argument("input")
    args = ap.parse_args()

    token = Tokens(read_key(args.key))
    salt = args.salt.encode() + b"\x1f"
    os.makedirs(args.outdir, exist_ok=True)
    names = ("train", "dev", "test", "quarantine")
    files = [open(os.path.join(args.outdir, n + ".jsonl.zst"), "wb") for n in names]
    # one compressor per stream: a ZstdCompressor holds one frame at a time
    writers = [zstandard.ZstdCompressor(level=args.level, write_checksum=True).stream_writer(f) for f in files]
    counts = [0, 0, 0, 0]
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    blake2b = hashlib.blake2b
    with open(args.input, "rb") as f:
        for line in f:
            try:
                rec = json.loads(line)
                bad = violation(rec)
            except ValueError:
                bad = "json_syntax $"
            if bad is not None:
                writers[3].write(line.rstrip(b"\n") + b"\n")
                counts[3] += 1
                continue
            rec = curate(rec, token)
            h = blake2b(salt + rec["user_id"].encode(), digest_size=32).digest()
            bucket = int.from_bytes(h[:8], "little") % 10000
            split = 0 if bucket < RATIOS[0] else 1 if bucket < RATIOS[1] else 2
            writers[split].write((dumps(rec) + "\n").encode())
            counts[split] += 1
    for w in writers:
        w.close()  # ends the frame and closes the file
    valid = counts[0] + counts[1] + counts[2]
    print("curate.py: %d records (%d valid, %d quarantined) [train %d, dev %d, test %d]"
          % (valid + counts[3], valid, counts[3], counts[0], counts[1], counts[2]))


if __name__ == "__main__":
    main()
