#!/usr/bin/python3
"""kiln's Signature V4 code (through tests/sigv4_tool) against botocore's
signer (Debian's python3-botocore, an implementation no one here wrote) on
generated S3 requests: keys with spaces, reserved characters and UTF-8,
query parameters with and without values (given out of order), extra
headers with runs of spaces and tabs, with and without a session token.
Every signature and canonical request must be identical.

Usage: sigv4_botocore.py SIGV4_TOOL [COUNT]"""
import random
import subprocess
import sys

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.utils import percent_encode

KEY_CHARS = "abcXYZ019-._~ /+=&?%$@!*'(),;:#[]" + "\u00e9\u4e2d\U0001f600"
VALUE_CHARS = "abcXYZ019-._~ /+=&%$@!*,;:"
HEADER_CHARS = "abcXYZ019-._~/+=&%$@!*,;:()\"'"


def pick(rng, alphabet, lo, hi):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


def header_value(rng):
    # runs of spaces and tabs inside and around a value
    parts = [pick(rng, HEADER_CHARS, 1, 8) for _ in range(rng.randint(1, 3))]
    gaps = [rng.choice([" ", "  ", "\t", " \t "]) for _ in parts]
    return rng.choice(["", " ", "\t"]) + "".join(p + g for p, g in zip(parts, gaps))


def generate(rng, n):
    method = rng.choice(["GET", "PUT", "POST", "HEAD", "DELETE"])
    host = rng.choice(["127.0.0.1:9000", "kiln.s3.eu-west-1.amazonaws.com", "localhost:4569"])
    path = "/" + rng.choice(["kiln/", ""]) + "/".join(pick(rng, KEY_CHARS, 1, 12) for _ in range(rng.randint(1, 4)))
    query = []
    for _ in range(rng.randint(0, 4)):
        query.append((pick(rng, VALUE_CHARS, 1, 10), rng.choice(["", pick(rng, VALUE_CHARS, 1, 12)])))
    if rng.random() < 0.3:
        query.append(("uploads", ""))
    names = set()
    headers = []
    for _ in range(rng.randint(0, 4)):
        name = rng.choice(["x-amz-meta-", "X-Amz-Meta-", "x-amz-checksum-", "Content-"]) + pick(rng, "abcxyz", 1, 6)
        if name.lower() in names:
            continue
        names.add(name.lower())
        headers.append((name, header_value(rng)))
    payload = rng.choice(["UNSIGNED-PAYLOAD", "%064x" % rng.getrandbits(256)])
    token = rng.choice([None, "FQoGZXIvYXdz//" + pick(rng, "abcXYZ019+/=", 20, 60)])
    return dict(method=method, host=host, path=path, query=query, headers=headers, payload=payload,
                region=rng.choice(["us-east-1", "eu-central-1"]), epoch=rng.randint(1_500_000_000, 2_000_000_000),
                access_key="AKIA" + pick(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16, 16),
                secret_key=pick(rng, "abcXYZ019+/", 40, 40), token=token, n=n)


def botocore_sign(r):
    import datetime
    ts = datetime.datetime.fromtimestamp(r["epoch"], datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    headers = {"Host": r["host"], "X-Amz-Date": ts, "X-Amz-Content-SHA256": r["payload"]}
    if r["token"]:
        headers["X-Amz-Security-Token"] = r["token"]
    for name, value in r["headers"]:
        headers[name] = value
    url = "http://" + r["host"] + percent_encode(r["path"], safe="/~")
    req = AWSRequest(method=r["method"], url=url, headers=headers, params=r["query"] or None)
    req.context["timestamp"] = ts
    auth = S3SigV4Auth(Credentials(r["access_key"], r["secret_key"], r["token"]), "s3", r["region"])
    creq = auth.canonical_request(req)
    return auth.signature(auth.string_to_sign(req, creq), req), creq


def kiln_sign(tool, r):
    argv = [tool, r["method"], r["host"], r["path"], r["payload"], r["region"], "s3", str(r["epoch"]),
            r["access_key"], r["secret_key"], r["token"] or "-"]
    for name, value in r["query"]:
        argv += ["q", name, value]
    for name, value in r["headers"]:
        argv += ["h", name, value]
    out = subprocess.run(argv, check=True, capture_output=True).stdout.decode()
    signature, authorization, creq = out.split("\n", 2)
    return signature, authorization, creq[:-1]


def main():
    tool, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 300
    rng = random.Random(20261202)
    for n in range(count):
        r = generate(rng, n)
        want_sig, want_creq = botocore_sign(r)
        sig, authorization, creq = kiln_sign(tool, r)
        if creq != want_creq or sig != want_sig:
            print("request %d differs from botocore:\n%r\n--- kiln canonical request:\n%s\n--- botocore:\n%s"
                  % (n, r, creq, want_creq))
            return 1
        if "Signature=" + sig not in authorization or "Credential=" + r["access_key"] + "/" not in authorization:
            print("request %d: unexpected Authorization header: %s" % (n, authorization))
            return 1
    print("sigv4: %d generated requests signed as botocore signs them" % count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
