#!/usr/bin/python3
"""Recompute what `kiln run` wrote for a JSON Lines input and check it.

Usage: curate_check.py --input IN.jsonl --key KEYFILE --store STOREDIR
                       --manifest REPO.git --dataset NAME [--branch main]
                       [--fields SPEC.json] [--contract FILE] [--logs FILE...]
                       [--expect EXPECT.jsonl...]
       curate_check.py scan-pii [--input IN.jsonl...] [--expect EXPECT.jsonl...]
                       [--fields SPEC.json] FILE...

Everything is recomputed from docs/FORMATS.md, not from kiln's code: key id,
pseudonym tokens, split buckets, shard hashes and frames, quarantine objects,
lineage and stats.  The manifest is read with the `git` CLI, the store (a
file:// directory) directly.  Prints one line per failed check, then
"N passed, N failed"; exits 1 when any check failed, 2 on a usage error.

Only the standard library and python3-zstandard (Debian) are used.  The
checker does not reimplement the contract: it checks that every input line
is curated or quarantined exactly once, and that lines it knows to be
invalid (not a JSON object, a duplicated key, a missing required or an
unknown top-level field) are quarantined.  Curated records are matched to
input lines by a unique field (`event_id` by default).

--expect gives the generator's ground truth (bench/gen-user-events.py
--expect; several files are concatenated in order, line i for input line i):
then every line the generator wrote as valid must be curated exactly once
and never quarantined, and every invalid one quarantined with the code and
path the generator gave, whatever kiln's own violation list says.

scan-pii: the same personal-data scan over any files (logs, stdout, stderr):
the values come from --input lines (through the field spec) and from the
"pii" lists of --expect files; exits 1 naming each file that holds one.
"""

import argparse
import base64
import collections
import hashlib
import hmac
import json
import os
import re
import subprocess
import sys

try:
    import zstandard
except ImportError:  # pragma: no cover
    sys.stderr.write("curate_check.py: needs python3-zstandard (apt-get install python3-zstandard)\n")
    sys.exit(2)

# Field spec for contracts/user-events.yaml.  modes: token, keep-domain,
# redact, drop, scan (free text run through the detectors), keep (default).
DEFAULT_SPEC = {
    "match": "event_id",
    "fields": {
        "user_id": {"mode": "token", "domain": "user"},
        "email": {"mode": "keep-domain", "domain": "email", "format": "email"},
        "client_ip": {"mode": "token", "domain": "ip"},
        "message": {"mode": "scan"},
    },
    # used only to know some records are invalid (top level only)
    "required": ["event_id", "event_type", "occurred_at", "user_id", "consent", "device"],
    "known": ["event_id", "event_type", "occurred_at", "received_date", "user_id", "email",
              "client_ip", "session_ms", "amount", "consent", "country", "message",
              "page_url", "device", "tags"],
    "unknown_fields": "reject",
}

MIN_PII_LEN = 6
MAX_LINES_PER_CHECK = 10

# Simple detectors for free text (a subset of what kiln detects).
EMAIL_RE = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?![A-Za-z0-9-])")
OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
IPV4_RE = re.compile(r"(?<![0-9.])" + OCTET + r"(?:\." + OCTET + r"){3}(?![0-9]|\.[0-9])")
PHONE_RE = re.compile(r"(?<![0-9+])\+[0-9]{2} [0-9]{2} [0-9]{4} [0-9]{4}(?![0-9])")
STRING_RE = re.compile(rb'"(?:[^"\\]|\\.)*"')
HEX64_RE = re.compile(r"^[0-9a-f]{64}$")


# ---------------------------------------------------------------------------
# Results

class Report:
    def __init__(self):
        self.checks = collections.OrderedDict()  # name -> list of failure texts

    def ok(self, name):
        self.checks.setdefault(name, [])

    def fail(self, name, detail):
        self.checks.setdefault(name, []).append(detail)

    def check(self, name, cond, detail=""):
        if cond:
            self.ok(name)
        else:
            self.fail(name, detail)
        return cond

    def finish(self):
        passed = failed = 0
        for name, fails in self.checks.items():
            if not fails:
                passed += 1
                continue
            failed += 1
            for d in fails[:MAX_LINES_PER_CHECK]:
                print("FAIL: %s%s" % (name, ": " + d if d else ""))
            if len(fails) > MAX_LINES_PER_CHECK:
                print("FAIL: %s: ... and %d more" % (name, len(fails) - MAX_LINES_PER_CHECK))
        print("%d passed, %d failed" % (passed, failed))
        return 1 if failed else 0


# ---------------------------------------------------------------------------
# Formats (docs/FORMATS.md)

def b2b256(data):
    return hashlib.blake2b(data, digest_size=32).digest()


def read_key(path):
    text = open(path, "rb").read().strip(b" \t\n\r\f\v")
    if not re.fullmatch(rb"[0-9A-Fa-f]{64}", text):
        raise ValueError("key file does not hold 64 hex characters")
    return bytes.fromhex(text.decode())


def key_id(key):
    return "hmac-sha256:" + b2b256(key)[:8].hex()


def fingerprint(data):
    """lineage.json prefix_blake2b (FORMATS.md): BLAKE2b-256 of the bytes read
    when they are at most 2 MiB, else of their first MiB then their last MiB."""
    part = 1 << 20
    if len(data) <= 2 * part:
        return b2b256(data).hex()
    return b2b256(data[:part] + data[-part:]).hex()


def token(key, prefix, domain, value):
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogatepass")
    mac = hmac.new(key, domain.encode() + b"\x1f" + value, hashlib.sha256).digest()[:16]
    return prefix + base64.b32encode(mac).decode().rstrip("=").lower()


def norm_email(s):
    s = s.strip(" \t\n\r\f\v")
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in s)


def bucket(salt, value):
    d = b2b256(salt.encode() + b"\x1f" + value)
    return int.from_bytes(d[:8], "little") % 10000


# JSON with numbers kept as written and objects as ordered pairs.
NUM = "#num"
OBJ = "#obj"


class Dups:
    found = False


def _pairs_hook(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        Dups.found = True
    return (OBJ, tuple(pairs))


def jparse(text):
    """Parse one JSON text; returns (value, has_duplicate_keys)."""
    Dups.found = False
    v = json.loads(text, object_pairs_hook=_pairs_hook,
                   parse_int=lambda s: (NUM, s), parse_float=lambda s: (NUM, s),
                   parse_constant=lambda s: (NUM, s))
    return v, Dups.found


def is_obj(v):
    return isinstance(v, tuple) and len(v) == 2 and v[0] == OBJ


def obj_get(v, path):
    """Dotted path lookup in a parsed object; returns (found, value)."""
    for part in path.split("."):
        if not is_obj(v):
            return False, None
        for k, x in v[1]:
            if k == part:
                v = x
                break
        else:
            return False, None
    return True, v


def scalar_text(v):
    """The bytes a token or bucket is computed from; None if not a scalar."""
    if isinstance(v, str):
        return v.encode("utf-8", "surrogatepass")
    if v is True:
        return b"true"
    if v is False:
        return b"false"
    if isinstance(v, tuple) and v[0] == NUM:
        return v[1].encode()
    return None


def strings_in(v, out):
    """Every string (keys excluded) inside a parsed value."""
    if isinstance(v, str):
        out.append(v)
    elif isinstance(v, list):
        for x in v:
            strings_in(x, out)
    elif is_obj(v):
        for _, x in v[1]:
            strings_in(x, out)
    return out


def detections(text):
    """(kind, as written, domain, normalised) for each item the simple detectors find."""
    out = []
    for m in EMAIL_RE.finditer(text):
        out.append(("email", m.group(0), "email", m.group(0).lower()))
    for m in IPV4_RE.finditer(text):
        out.append(("ipv4", m.group(0), "ip", m.group(0)))
    for m in PHONE_RE.finditer(text):
        out.append(("phone", m.group(0), "phone", "+" + re.sub(r"[^0-9]", "", m.group(0))))
    return out


def zstd_object(report, name, label, data):
    """Checks one zstd object as FORMATS.md describes; returns the content or None."""
    try:
        fp = zstandard.get_frame_parameters(data)
    except zstandard.ZstdError as e:
        report.fail(name, "%s: no zstd frame header (%s)" % (label, e))
        return None
    report.check(name, fp.content_size not in (0xFFFFFFFFFFFFFFFF, -1) and fp.content_size is not None,
                 "%s: frame header has no content size" % label)
    report.check(name, fp.has_checksum, "%s: frame has no content checksum" % label)
    try:
        dobj = zstandard.ZstdDecompressor().decompressobj()
        out = dobj.decompress(data)
        if not dobj.eof:
            report.fail(name, "%s: truncated zstd frame" % label)
            return None
        if dobj.unused_data:
            report.fail(name, "%s: %d bytes after the first zstd frame (not exactly one frame)"
                        % (label, len(dobj.unused_data)))
    except zstandard.ZstdError as e:
        report.fail(name, "%s: does not decompress (%s)" % (label, e))
        return None
    if fp.has_checksum and fp.content_size not in (0xFFFFFFFFFFFFFFFF, -1):
        report.check(name, fp.content_size == len(out),
                     "%s: header content size %d, decompressed %d" % (label, fp.content_size, len(out)))
    return out


# ---------------------------------------------------------------------------
# git

class Git:
    def __init__(self, repo):
        self.repo = repo

    def run(self, *args, check=True):
        p = subprocess.run(["git", "--git-dir=" + self.repo] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if check and p.returncode != 0:
            raise RuntimeError("git %s: %s" % (" ".join(args), p.stderr.decode(errors="replace").strip()))
        return p.stdout

    def cat_batch(self, oids):
        """Contents of many objects at once."""
        if not oids:
            return {}
        p = subprocess.run(["git", "--git-dir=" + self.repo, "cat-file", "--batch"],
                           input=("\n".join(oids) + "\n").encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
        data = p.stdout
        out = {}
        pos = 0
        for oid in oids:
            nl = data.index(b"\n", pos)
            header = data[pos:nl].decode().split()
            pos = nl + 1
            if len(header) < 3:
                raise RuntimeError("git cat-file: %s" % " ".join(header))
            size = int(header[2])
            out[oid] = data[pos:pos + size]
            pos += size + 1
        return out


# ---------------------------------------------------------------------------

def load_input(path, spec):
    """Lines of the input with what the checker knows about each."""
    raw = open(path, "rb").read()
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    recs = []  # per offset: dict
    for off, line in enumerate(lines):
        r = {"raw": line, "obj": None, "known_invalid": None}
        try:
            text = line.decode("utf-8")
            v, dups = jparse(text)
        except (UnicodeDecodeError, ValueError, RecursionError):
            r["known_invalid"] = "not JSON (Python)"
            recs.append(r)
            continue
        r["obj"] = v
        if not is_obj(v):
            r["known_invalid"] = "not an object"
        elif dups:
            r["known_invalid"] = "duplicate key"
        else:
            keys = [k for k, _ in v[1]]
            vals = dict(v[1])
            for req in spec.get("required", []):
                if vals.get(req) is None:
                    r["known_invalid"] = "missing required %s" % req
                    break
            else:
                if spec.get("unknown_fields", "reject") == "reject" and spec.get("known"):
                    unk = [k for k in keys if k not in spec["known"]]
                    if unk:
                        r["known_invalid"] = "unknown field"
        recs.append(r)
    return raw, recs


def load_expect(paths):
    """The generator's facts, concatenated in order; None without files."""
    if not paths:
        return None
    out = []
    for path in paths:
        with open(path, "rb") as f:
            for line in f:
                if line.strip():
                    out.append(json.loads(line))
    return out


def collect_pii(inp, fields, expect):
    """Raw personal values (bytes, longest first) of parsed input lines and expectations."""
    pii = set()
    for r in inp:
        v = r["obj"]
        if not is_obj(v):
            continue
        for k, x in v[1]:
            f = fields.get(k)
            if not f:
                continue
            if f.get("mode") in ("token", "keep-domain", "redact", "drop"):
                if isinstance(x, str):
                    pii.add(x)
                    if f.get("format") == "email" or f.get("mode") == "keep-domain":
                        pii.add(norm_email(x))
                elif isinstance(x, tuple) and x[0] == NUM:
                    pii.add(x[1])
            elif f.get("mode") == "scan":
                for s in strings_in(x, []):
                    for _, written, _, normed in detections(s):
                        pii.update((written, normed))
    for e in expect or ():
        pii.update(x for x in e.get("pii", ()) if isinstance(x, str))
    return sorted(p.encode("utf-8", "surrogatepass") for p in pii if len(p) >= MIN_PII_LEN)


WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def occurs_whole(p, hay):
    """p occurs in hay not as the tail of a longer word: a keep-domain token
    p1_<base32>@example.com ends in letters that may spell another user's
    local part ("...dhkim@example.com" holds "hkim@example.com")."""
    i = hay.find(p)
    while i >= 0:
        if i == 0 or p[0] not in WORD or hay[i - 1] not in WORD:
            return True
        i = hay.find(p, i + 1)
    return False


def pii_found(pii, hay):
    """The personal values that occur in hay."""
    if not hay:
        return []
    grams = {hay[i:i + MIN_PII_LEN] for i in range(len(hay) - MIN_PII_LEN + 1)}
    return [p for p in pii if p[:MIN_PII_LEN] in grams and occurs_whole(p, hay)]


def scan_main(argv):
    ap = argparse.ArgumentParser(prog="curate_check.py scan-pii")
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--fields")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args(argv)
    spec = DEFAULT_SPEC
    if a.fields:
        with open(a.fields) as f:
            spec = json.load(f)
    inp = []
    for path in a.input:
        inp.extend(load_input(path, spec)[1])
    pii = collect_pii(inp, spec["fields"], load_expect(a.expect))
    if not pii:
        print("FAIL: no personal values collected (no --input or --expect with any)")
        return 1
    bad = 0
    for path in a.files:
        with open(path, "rb") as f:
            found = pii_found(pii, f.read())
        if found:
            bad += 1
            # the file and how many; never the values themselves
            print("FAIL: %s holds %d raw personal values" % (path, len(found)))
    print("scan-pii: %d personal values, %d files scanned, %d with personal data" % (len(pii), len(a.files), bad))
    return 1 if bad else 0


def expected_field(key, prefix, fspec, v):
    """Expected curated value of one pseudonymised field: (present, value)."""
    mode = fspec.get("mode", "keep")
    dom = fspec.get("domain")
    if v is None:
        return (mode != "drop"), None
    if mode == "drop":
        return False, None
    if mode == "redact":
        return True, "[REDACTED]"
    if mode == "token":
        if isinstance(v, str) and fspec.get("format") == "email":
            v = norm_email(v)
        t = scalar_text(v)
        return True, (token(key, prefix, dom, t) if t is not None else ("#unexpected", None))
    if mode == "keep-domain":
        if not isinstance(v, str):
            return True, ("#unexpected", None)
        n = norm_email(v)
        at = n.rfind("@")
        if at < 0:
            return True, token(key, prefix, dom, n)
        return True, token(key, prefix, dom, n[:at]) + "@" + n[at + 1:]
    return True, v


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--input", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--store", required=True, help="the file:// store's directory")
    ap.add_argument("--manifest", required=True, help="the bare manifest repository")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--branch", default="main")
    ap.add_argument("--fields", help="field spec (JSON); default: contracts/user-events.yaml's")
    ap.add_argument("--contract", help="the contract file, to check its digest")
    ap.add_argument("--logs", nargs="*", default=[], help="kiln stdout/stderr files to scan for personal data")
    ap.add_argument("--expect", nargs="*", default=[], help="the generator's ground truth, in input order")
    a = ap.parse_args(argv)

    spec = DEFAULT_SPEC
    if a.fields:
        with open(a.fields) as f:
            spec = json.load(f)
    fields = spec["fields"]
    match_field = spec.get("match", "event_id")
    R = Report()
    git = Git(a.manifest)
    ref = "refs/heads/%s/%s" % (a.dataset, a.branch)

    # ---- inputs
    try:
        key = read_key(a.key)
    except (OSError, ValueError) as e:
        print("curate_check.py: %s: %s" % (a.key, e), file=sys.stderr)
        return 2
    input_bytes, inp = load_input(a.input, spec)
    n_in = len(inp)
    expect = load_expect(a.expect)
    if expect is not None and len(expect) != n_in:
        print("curate_check.py: %d expectations for %d input lines" % (len(expect), n_in), file=sys.stderr)
        return 2

    # event_id -> offsets
    by_match = collections.defaultdict(list)
    for off, r in enumerate(inp):
        if is_obj(r["obj"]):
            found, v = obj_get(r["obj"], match_field)
            if found and isinstance(v, str):
                by_match[v].append(off)

    # ---- manifest: tip tree
    try:
        tip = git.run("rev-parse", "--verify", "-q", ref + "^{commit}").decode().strip()
    except RuntimeError:
        tip = ""
    if not R.check("branch exists", bool(tip), "%s not found in %s" % (ref, a.manifest)):
        return R.finish()
    names = git.run("ls-tree", "-r", "--name-only", tip).decode().splitlines()

    def show(path):
        return git.run("show", "%s:%s" % (tip, path))

    def load_json(path):
        try:
            return json.loads(show(path).decode("utf-8"))
        except (RuntimeError, ValueError, UnicodeDecodeError) as e:
            R.fail("%s parses" % path, str(e))
            return None

    for n in ("dataset.json", "lineage.json", "stats.json"):
        R.check("tree has %s" % n, n in names, "missing at %s" % tip[:12])
    ds = load_json("dataset.json") if "dataset.json" in names else None
    lineage = load_json("lineage.json") if "lineage.json" in names else None
    stats = load_json("stats.json") if "stats.json" in names else None

    # ---- dataset.json
    prefix = "p1_"
    salt = None
    split_key = None
    ratios = None
    if isinstance(ds, dict):
        R.check("dataset.json name", ds.get("name") == a.dataset, "name %r" % ds.get("name"))
        ps = ds.get("pseudonymisation") or {}
        R.check("dataset.json pseudonym scheme", ps.get("scheme") == "hmac-sha256-b32-v1",
                "scheme %r" % ps.get("scheme"))
        R.check("dataset.json key_id", ps.get("key_id") == key_id(key),
                "key_id %r, recomputed %r" % (ps.get("key_id"), key_id(key)))
        kv = ps.get("key_version")
        R.check("dataset.json key_version/prefix", isinstance(kv, int) and ps.get("prefix") == "p%d_" % kv,
                "key_version %r prefix %r" % (kv, ps.get("prefix")))
        if isinstance(ps.get("prefix"), str):
            prefix = ps["prefix"]
        sp = ds.get("split") or {}
        R.check("dataset.json split scheme", sp.get("scheme") == "blake2b64-mod10000-v1",
                "scheme %r" % sp.get("scheme"))
        split_key = sp.get("key")
        salt = sp.get("salt")
        ratios = sp.get("ratios")
        R.check("dataset.json split key", isinstance(split_key, str) and split_key != "", "key %r" % split_key)
        R.check("dataset.json split salt", isinstance(salt, str), "salt %r" % salt)
        ok = (isinstance(ratios, dict) and set(ratios) == {"train", "dev", "test"}
              and all(isinstance(x, (int, float)) and 0 <= x <= 1 for x in ratios.values())
              and sum(round(x * 10000) for x in ratios.values()) == 10000)
        R.check("dataset.json split ratios", ok, "ratios %r" % (ratios,))
        if not ok:
            ratios = None
        sh = ds.get("shards") or {}
        R.check("dataset.json shard format",
                sh.get("format") == "jsonl" and sh.get("compression") == "zstd" and sh.get("hash") == "blake2b-256",
                "shards %r" % (sh,))
        if a.contract:
            c = ds.get("contract") or {}
            want = "blake2b-256:" + b2b256(open(a.contract, "rb").read()).hex()
            R.check("dataset.json contract digest", c.get("digest") == want, "digest %r, file %s" % (c.get("digest"), want))

    # ---- lineage.json
    topic = None
    if isinstance(lineage, dict):
        parts = lineage.get("partitions")
        if R.check("lineage.json one partition", isinstance(parts, list) and len(parts) == 1,
                   "partitions %r" % (parts,)):
            p = parts[0]
            topic = p.get("topic")
            R.check("lineage.json partition 0", p.get("partition") == 0, "partition %r" % p.get("partition"))
            R.check("lineage.json next = input lines", p.get("next") == n_in,
                    "next %r, input has %d lines" % (p.get("next"), n_in))
            if p.get("path") == "-":  # stdin: marked, none of its bytes checked
                R.check("lineage.json stdin entry: bytes 0, prefix of no bytes",
                        p.get("bytes") == 0 and p.get("prefix_blake2b") == fingerprint(b""),
                        "bytes %r" % p.get("bytes"))
            elif "path" in p:  # file source
                R.check("lineage.json bytes = input size", p.get("bytes") == len(input_bytes),
                        "bytes %r, input has %d" % (p.get("bytes"), len(input_bytes)))
                R.check("lineage.json prefix_blake2b", p.get("prefix_blake2b") == fingerprint(input_bytes),
                        "prefix_blake2b %r" % p.get("prefix_blake2b"))

    # ---- split files and shards
    split_re = re.compile(r"^splits/([^/]+)/([0-9a-f]{2})\.jsonl$")
    entries = []  # (split, entry dict)
    for n in names:
        m = split_re.match(n)
        if n.startswith("splits/") and not m:
            R.fail("split file names", "unexpected %s" % n)
            continue
        if not m:
            continue
        split, hh = m.group(1), m.group(2)
        R.check("split names", split in ("train", "dev", "test"), "split %r" % split)
        blob = show(n)
        R.check("split files end with a newline", blob.endswith(b"\n"), n)
        hashes = []
        for i, line in enumerate(blob.split(b"\n")[:-1] if blob.endswith(b"\n") else blob.split(b"\n")):
            try:
                e = json.loads(line)
            except ValueError as ex:
                R.fail("split lines parse", "%s:%d: %s" % (n, i + 1, ex))
                continue
            ok = (isinstance(e, dict) and isinstance(e.get("shard"), str) and HEX64_RE.match(e["shard"])
                  and all(isinstance(e.get(k), int) for k in ("bytes", "raw_bytes", "records"))
                  and isinstance(e.get("sources"), list))
            if not R.check("split lines have shard/bytes/raw_bytes/records/sources", ok, "%s:%d" % (n, i + 1)):
                continue
            R.check("split line hh = hash prefix", e["shard"][:2] == hh, "%s:%d: %s" % (n, i + 1, e["shard"]))
            hashes.append(e["shard"])
            entries.append((split, e))
        R.check("split lines sorted by hash", hashes == sorted(hashes) and len(set(hashes)) == len(hashes), n)
    all_hashes = [e["shard"] for _, e in entries]
    R.check("each shard listed once", len(all_hashes) == len(set(all_hashes)), "a shard is listed twice")

    curated_count = collections.Counter()  # offset -> times curated
    n_curated = 0
    shard_texts = []
    t_lim = d_lim = None
    if ratios:
        t_lim = round(ratios["train"] * 10000)
        d_lim = t_lim + round(ratios["dev"] * 10000)
    for split, e in entries:
        h = e["shard"]
        label = "shards/%s/%s.jsonl.zst" % (h[:2], h)
        path = os.path.join(a.store, "shards", h[:2], h + ".jsonl.zst")
        if not R.check("shard objects exist", os.path.isfile(path), label):
            continue
        data = open(path, "rb").read()
        R.check("shard BLAKE2b-256 = name", b2b256(data).hex() == h, label)
        R.check("shard bytes = file size", e["bytes"] == len(data), "%s: bytes %d, file %d" % (label, e["bytes"], len(data)))
        content = zstd_object(R, "shard is one zstd frame with content size and checksum", label, data)
        if content is None:
            continue
        shard_texts.append(content)
        R.check("shard raw_bytes = decompressed size", e["raw_bytes"] == len(content),
                "%s: raw_bytes %d, decompressed %d" % (label, e["raw_bytes"], len(content)))
        R.check("shard ends with a newline", content.endswith(b"\n"), label)
        lines = content.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        R.check("shard records = lines", e["records"] == len(lines),
                "%s: records %d, lines %d" % (label, e["records"], len(lines)))
        offs = []
        for i, line in enumerate(lines):
            where = "%s line %d" % (label, i + 1)
            n_curated += 1
            try:
                cur, dups = jparse(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as ex:
                R.fail("curated lines are JSON objects", "%s: %s" % (where, ex))
                continue
            if not R.check("curated lines are JSON objects", is_obj(cur) and not dups, where):
                continue
            R.check("curated records have no whitespace outside strings",
                    not re.search(rb"[ \t\r\n]", STRING_RE.sub(b"", line)), where)
            # split
            if t_lim is not None:
                found, sv = obj_get(cur, split_key)
                st = scalar_text(sv) if found else None
                if R.check("split key present in curated records", st is not None, where):
                    b = bucket(salt, st)
                    want = "train" if b < t_lim else "dev" if b < d_lim else "test"
                    R.check("split assignment", want == split,
                            "%s: bucket %d belongs in %s, found in %s" % (where, b, want, split))
            # match to the input
            found, mv = obj_get(cur, match_field)
            if not R.check("curated records match an input line by %s" % match_field,
                           found and isinstance(mv, str) and len(by_match.get(mv, ())) == 1,
                           "%s: %s matches %d input lines" % (where, match_field,
                                                               len(by_match.get(mv, ())) if found and isinstance(mv, str) else 0)):
                continue
            off = by_match[mv][0]
            offs.append(off)
            curated_count[off] += 1
            check_record(R, key, prefix, fields, inp[off]["obj"], cur, "%s (input offset %d)" % (where, off))
        # sources
        srcs = e["sources"]
        if offs:
            want = [{"topic": topic, "partition": 0, "first": min(offs), "last": max(offs)}]
            got = [{k: s.get(k) for k in ("topic", "partition", "first", "last")} if isinstance(s, dict) else s
                   for s in srcs]
            R.check("shard sources first/last = lowest/highest record offset", got == want,
                    "%s: sources %s, records span %d-%d" % (label, json.dumps(srcs), min(offs), max(offs)))

    # ---- quarantine
    quarantined = collections.Counter()
    q_first = {}  # offset -> (code, path) of its quarantine line
    q_codes = collections.Counter()
    n_qlines = 0
    qdir = os.path.join(a.store, "quarantine", topic or "", "0", a.dataset, a.branch)
    qnames = sorted(os.listdir(qdir)) if topic and os.path.isdir(qdir) else []
    qname_re = re.compile(r"^([0-9]+)-([0-9]+)(\.stdin)?\.jsonl\.zst$")  # stdin names its kind, a file source not
    for qn in qnames:
        label = "quarantine/%s/0/%s/%s/%s" % (topic, a.dataset, a.branch, qn)
        m = qname_re.match(qn)
        if not R.check("quarantine object names <first>-<last>[.stdin].jsonl.zst", m is not None, label):
            continue
        content = zstd_object(R, "quarantine object is one zstd frame with content size and checksum", label,
                              open(os.path.join(qdir, qn), "rb").read())
        if content is None:
            continue
        lines = content.split(b"\n")
        R.check("quarantine object ends with a newline", lines[-1] == b"", label)
        if lines[-1] == b"":
            lines.pop()
        offs = []
        for i, line in enumerate(lines):
            where = "%s line %d" % (label, i + 1)
            n_qlines += 1
            try:
                q = json.loads(line)
            except ValueError as ex:
                R.fail("quarantine lines are JSON objects", "%s: %s" % (where, ex))
                continue
            ok = (isinstance(q, dict) and isinstance(q.get("offset"), int) and isinstance(q.get("code"), str)
                  and isinstance(q.get("path"), str) and ("record" in q or "record_base64" in q))
            if not R.check("quarantine lines have offset/code/path/record", ok, where):
                continue
            R.check("quarantine lines name topic and partition", q.get("topic") == topic and q.get("partition") == 0,
                    where)
            v = q.get("violations")
            R.check("quarantine code/path repeat the first violation",
                    isinstance(v, list) and v and isinstance(v[0], dict) and v[0].get("code") == q["code"]
                    and v[0].get("path") == q["path"] and len(v) <= 8
                    and isinstance(q.get("count"), int) and q["count"] >= len(v), where)
            off = q["offset"]
            offs.append(off)
            quarantined[off] += 1
            q_first[off] = (q["code"], q["path"])
            q_codes[q["code"]] += 1
            if not R.check("quarantine offsets are input lines", 0 <= off < n_in, "%s: offset %d" % (where, off)):
                continue
            rawline = inp[off]["raw"]
            if q.get("record", "") is None:
                # FORMATS.md: null for a record over source.max_record_bytes
                same = q["code"] == "too_large"
            elif "record_base64" in q:
                try:
                    rec = base64.b64decode(q["record_base64"], validate=True)
                except ValueError:
                    rec = None
                same = rec == rawline
            else:
                same = isinstance(q["record"], str) and q["record"].encode("utf-8", "surrogatepass") == rawline
            R.check("quarantined record = raw input line", same, "%s: offset %d" % (where, off))
        if offs:
            R.check("quarantine object name = first-last offset",
                    (int(m.group(1)), int(m.group(2))) == (min(offs), max(offs)),
                    "%s: records span %d-%d" % (label, min(offs), max(offs)))

    # ---- every line curated or quarantined exactly once
    for off in range(n_in):
        c, q = curated_count[off], quarantined[off]
        R.check("every input line curated or quarantined exactly once", c + q == 1,
                "offset %d: curated %d times, quarantined %d times" % (off, c, q))
        if inp[off]["known_invalid"]:
            R.check("lines known to be invalid are quarantined", q == 1 and c == 0,
                    "offset %d (%s)" % (off, inp[off]["known_invalid"]))
    for off in quarantined:
        R.check("quarantine offsets are input lines", 0 <= off < n_in, "offset %d" % off)

    # ---- the generator's ground truth, record by record
    if expect is not None:
        outcomes = collections.Counter()
        for off, e in enumerate(expect):
            c, q = curated_count[off], quarantined[off]
            outcomes[e.get("code") or e.get("outcome")] += 1
            if e.get("outcome") == "valid":
                R.check("valid lines (generator) are curated exactly once, never quarantined", c == 1 and q == 0,
                        "offset %d: curated %d times, quarantined %d times%s"
                        % (off, c, q, " as %s %s" % q_first[off] if off in q_first else ""))
            else:
                want = (e.get("code"), e.get("path"))
                R.check("invalid lines (generator) are quarantined, never curated", q == 1 and c == 0,
                        "offset %d (%s %s): curated %d times, quarantined %d times" % ((off,) + want + (c, q)))
                if off in q_first:
                    R.check("invalid lines (generator) carry the expected code and path", q_first[off] == want,
                            "offset %d: quarantined as %s %s, expected %s %s" % ((off,) + q_first[off] + want))
        R.check("expectations cover valid and invalid lines", outcomes["valid"] > 0, "no valid line expected")

    # ---- stats.json
    if isinstance(stats, dict):
        ri, va, qu = stats.get("records_in"), stats.get("valid"), stats.get("quarantined")
        er = stats.get("erased", 0)  # written only when non-zero (kiln erase)
        R.check("stats records_in = valid + quarantined + erased = input lines",
                isinstance(va, int) and isinstance(qu, int) and isinstance(er, int) and ri == va + qu + er == n_in,
                "records_in %r valid %r quarantined %r erased %r, input lines %d" % (ri, va, qu, er, n_in))
        ss = stats.get("splits") or {}
        R.check("stats valid = sum of split records = curated records",
                va == sum(s.get("records", 0) for s in ss.values() if isinstance(s, dict)) == n_curated,
                "valid %r, splits %r, curated records %d" % (va, {k: s.get("records") for k, s in ss.items()}, n_curated))
        R.check("stats quarantined = quarantine lines", qu == n_qlines, "quarantined %r, quarantine lines %d" % (qu, n_qlines))
        qbc = stats.get("quarantined_by_code") or {}
        R.check("stats quarantined_by_code sums to quarantined", sum(qbc.values()) == qu, "by code %r" % qbc)
        R.check("stats quarantined_by_code = first codes in quarantine", qbc == dict(q_codes),
                "stats %r, quarantine %r" % (qbc, dict(q_codes)))
        for split in sorted(set(ss) | {s for s, _ in entries}):
            s = ss.get(split) or {}
            mine = [e for sp, e in entries if sp == split]
            got = {k: s.get(k) for k in ("records", "shards", "bytes", "raw_bytes")}
            want = {"records": sum(e["records"] for e in mine), "shards": len(mine),
                    "bytes": sum(e["bytes"] for e in mine), "raw_bytes": sum(e["raw_bytes"] for e in mine)}
            R.check("stats per split = split files", got == want, "%s: stats %r, split files %r" % (split, got, want))

    # ---- history: every commit of the branch
    commits = git.run("rev-list", tip).decode().split()
    tip_entries = {json.dumps(e, sort_keys=True) for _, e in entries}
    blob_ids = set()
    commit_objs = git.cat_batch(commits)
    for c in commits:
        for line in git.run("ls-tree", "-r", c).decode().splitlines():
            meta, _, path = line.partition("\t")
            mode, typ, oid = meta.split()
            if typ == "blob":
                blob_ids.add(oid)
            if c != tip and split_re.match(path):
                for l in git.run("cat-file", "blob", oid).split(b"\n"):
                    if l:
                        R.check("each commit's shards are still listed at the tip",
                                json.dumps(json.loads(l), sort_keys=True) in tip_entries,
                                "commit %s %s" % (c[:12], path))
    blobs = git.cat_batch(sorted(blob_ids))

    # ---- no personal data anywhere
    pii = collect_pii(inp, fields, expect)
    R.check("personal data collected from the input", len(pii) > 0, "none found: is --fields right?")

    def scan(name, label, hay):
        bad = pii_found(pii, hay)
        R.check(name, not bad, "%s holds %d raw personal values" % (label, len(bad)))

    scan("no raw personal data in shards", "decompressed shards", b"\n".join(shard_texts))
    scan("no raw personal data in manifest blobs", "%d blobs of %d commits" % (len(blobs), len(commits)),
         b"\n".join(blobs.values()))
    scan("no raw personal data in commits", "commit objects", b"\n".join(commit_objs.values()))
    for lf in a.logs:
        scan("no raw personal data in logs", lf, open(lf, "rb").read())

    return R.finish()


def check_record(R, key, prefix, fields, src, cur, where):
    """Curated record vs its input record."""
    got = list(cur[1])
    exp = []
    msgs = []
    for k, v in src[1]:
        f = fields.get(k)
        if f is None or f.get("mode", "keep") == "keep":
            exp.append((k, v))
        elif f.get("mode") == "scan":
            exp.append((k, "#scan"))
            msgs.append((k, v))
        else:
            present, ev = expected_field(key, prefix, f, v)
            if present:
                exp.append((k, ev))
    R.check("curated keys = input keys in order (dropped fields removed)",
            [k for k, _ in got] == [k for k, _ in exp], where)
    gd = dict(got)
    for k, ev in exp:
        if k not in gd:
            continue
        gv = gd[k]
        f = fields.get(k)
        if ev == "#scan":
            continue
        if f and f.get("mode") in ("token", "keep-domain", "redact"):
            R.check("pseudonymised fields = recomputed tokens (%s, %s)" % (k, f.get("mode")), gv == ev,
                    "%s: field %s" % (where, k))
        else:
            R.check("other fields equal the input", gv == ev, "%s: field %s" % (where, k))
    for k, v in msgs:
        gv = gd.get(k)
        if v is None or gv is None:
            R.check("other fields equal the input", v == gv, "%s: field %s" % (where, k))
            continue
        if not isinstance(v, str) or not isinstance(gv, str):
            R.fail("free-text fields stay strings", "%s: field %s" % (where, k))
            continue
        dets = detections(v)
        if not re.search(r"[0-9@]|::", v):  # nothing any detector could find
            R.check("free text without digits or @ is unchanged", gv == v, "%s: field %s" % (where, k))
        for kind, written, dom, normed in dets:
            R.check("free text: detected %s removed" % kind, written not in gv, "%s: field %s" % (where, k))
            R.check("free text: detected %s replaced by its token" % kind,
                    token(key, prefix, dom, normed) in gv, "%s: field %s" % (where, k))


if __name__ == "__main__":
    if sys.argv[1:2] == ["scan-pii"]:
        sys.exit(scan_main(sys.argv[2:]))
    sys.exit(main())
