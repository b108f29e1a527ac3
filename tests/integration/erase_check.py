#!/usr/bin/python3
"""The independent side of tests/integration/erase.sh (standard library and
python3-zstandard only; nothing here is kiln's code).

  erase_check.py tokens KEYFILE DOMAIN=VALUE...      the tokens (docs/FORMATS.md)
  erase_check.py keep-domain KEYFILE DOMAIN EMAIL     a keep-domain needle
  erase_check.py scan --store DIR --repo DIR [--cache DIR] [--token T]... [--value V]...
        every byte kiln wrote: store objects (zstd frames and zlib streams,
        such as a pushed manifest's loose git objects, decompressed, JSON
        lines decoded, *_base64 members decoded), every object the git
        repository holds (git cat-file --batch-all-objects) and every other
        file of the repository; prints where each needle is found (never the
        needle) and exits 1 when one is. --store, --cache and --repo repeat
  erase_check.py kept OLD NEW TOKEN...                NEW holds exactly OLD's
        lines without those holding a token, each as many times
"""
import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import zlib

import zstandard

ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"


def b32(data):
    bits, value, out = 0, 0, []
    for byte in data:
        value = (value << 8) | byte
        bits += 8
        while bits >= 5:
            bits -= 5
            out.append(ALPHABET[(value >> bits) & 31])
        value &= (1 << bits) - 1
    if bits:
        out.append(ALPHABET[(value << (5 - bits)) & 31])
    return "".join(out)


def token(key, domain, value):
    mac = hmac.new(key, domain.encode() + b"\x1f" + value.encode(), hashlib.sha256).digest()
    return "p1_" + b32(mac[:16])


def read_key(path):
    return bytes.fromhex(open(path).read().strip())


def strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield from strings(x)
            if k.endswith("_base64") and isinstance(x, str):
                try:
                    yield base64.b64decode(x).decode("utf-8", "replace")
                except ValueError:
                    pass
    elif isinstance(v, list):
        for x in v:
            yield from strings(x)


def holds(data, tokens, values):
    """Whether bytes hold a token or (case-insensitively) a value, as bytes
    or in any JSON string of their lines once decoded."""
    low = data.lower()
    if any(t.encode() in data for t in tokens) or any(v.lower().encode() in low for v in values):
        return True
    for line in data.split(b"\n"):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        for s in strings(doc):
            if any(t in s for t in tokens) or any(v.lower() in s.lower() for v in values):
                return True
    return False


def inflate(data):
    if data[:4] == b"\x28\xb5\x2f\xfd":
        try:
            return zstandard.ZstdDecompressor().decompressobj().decompress(data)
        except zstandard.ZstdError:
            return data
    if data[:1] == b"\x78":
        try:
            return zlib.decompress(data)
        except zlib.error:
            return data
    return data


def scan(argv):
    roots, repos = [], []
    tokens, values = [], []
    i = 0
    while i < len(argv):
        opt, arg = argv[i], argv[i + 1]
        if opt in ("--store", "--cache"):
            roots.append(arg)
        elif opt == "--repo":
            repos.append(arg)
        elif opt == "--token":
            tokens.append(arg)
        elif opt == "--value":
            values.append(arg)
        i += 2
    found = 0
    for root in roots:
        for dirpath, _, files in os.walk(root):
            for name in files:
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    data = f.read()
                if holds(inflate(data), tokens, values) or holds(data, tokens, values):
                    print("found in", os.path.relpath(path, root))
                    found += 1
    objects = 0
    for repo in repos:
        out = subprocess.run(["git", "--git-dir", repo, "cat-file", "--batch-all-objects", "--batch"],
                             check=True, capture_output=True).stdout
        pos = 0
        while pos < len(out):
            nl = out.index(b"\n", pos)
            oid, kind, size = out[pos:nl].split(b" ")
            body = out[nl + 1:nl + 1 + int(size)]
            pos = nl + 1 + int(size) + 1
            objects += 1
            if holds(body, tokens, values):
                print("found in git", kind.decode(), oid.decode())
                found += 1
        for dirpath, _, files in os.walk(repo):
            for name in files:
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    data = f.read()
                if holds(data, tokens, values):
                    print("found in", os.path.relpath(path, repo))
                    found += 1
    print(f"{objects} git objects scanned, {found} found")
    return 1 if found else 0


def kept(old_path, new_path, tokens):
    old = open(old_path, "rb").read().splitlines()
    new = open(new_path, "rb").read().splitlines()
    want = [line for line in old if not any(t.encode() in line for t in tokens)]
    # shards come in hash order and a rewritten shard has a new hash: the
    # records are the same, each once, whatever the order of the shards
    if sorted(new) != sorted(want) or len(set(new)) != len(set(want)):
        print(f"{new_path}: {len(new)} lines, expected {len(want)} of {len(old)}")
        return 1
    return 0


def main():
    cmd = sys.argv[1]
    if cmd == "tokens":
        key = read_key(sys.argv[2])
        for arg in sys.argv[3:]:
            domain, value = arg.split("=", 1)
            print(token(key, domain, value))
        return 0
    if cmd == "keep-domain":
        key = read_key(sys.argv[2])
        local, _, domain = sys.argv[4].strip().lower().rpartition("@")
        print(token(key, sys.argv[3], local) + "@" + domain)
        return 0
    if cmd == "scan":
        return scan(sys.argv[2:])
    if cmd == "kept":
        return kept(sys.argv[2], sys.argv[3], sys.argv[4:])
    print("unknown command", cmd, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
