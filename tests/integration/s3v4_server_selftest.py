#!/usr/bin/python3
"""Self-test of s3v4_server.py against clients that are not kiln's: boto3,
requests signed by hand with botocore and sent with urllib, and curl.

Usage: s3v4_server_selftest.py

Starts the server twice on port 0 in a temporary directory (once plain, once
with a session token), prints one line per check and exits 0 when all pass,
1 at the first failure (with the end of the server's log)."""
import base64
import hashlib
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
import zlib

import boto3
from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "s3v4_server.py")
AK, SK, TOKEN = "AKIDSELFTEST", "selftest/secret+key", "selftest-session-token"
REGION, BUCKET = "us-east-1", "kiln"
MIB = 1 << 20


class CheckFailed(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


def expect_equal(got, want, what):
    expect(got == want, f"{what}: expected {want!r}, got {got!r}")


def expect_error(code, status, call, *args, **kwargs):
    """Run a boto3 call that must fail with this S3 code and HTTP status."""
    try:
        call(*args, **kwargs)
    except ClientError as err:
        got = (err.response["Error"].get("Code"), err.response["ResponseMetadata"]["HTTPStatusCode"])
        expect_equal(got, (code, status), "error")
        return err.response
    raise CheckFailed(f"expected {code} ({status}), the call succeeded")


def b64(digest):
    return base64.b64encode(digest).decode()


def quoted_md5(data):
    return '"%s"' % hashlib.md5(data).hexdigest()


def route_localhost_subdomains():
    """Virtual-hosted boto3 requests go to kiln.localhost, which glibc does
    not resolve (systemd-resolved would): send *.localhost to 127.0.0.1, in
    this process only."""
    original = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if isinstance(host, str) and host.endswith(".localhost"):
            host = "127.0.0.1"
        return original(host, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo


class Server:
    """s3v4_server.py as a subprocess, with its control endpoint."""

    def __init__(self, workdir, name, *extra_args):
        self.log = os.path.join(workdir, name + ".log")
        self.port_file = os.path.join(workdir, name + ".port")
        self.stderr = open(os.path.join(workdir, name + ".stderr"), "w+")
        self.proc = subprocess.Popen(
            [sys.executable, SERVER, "--root", os.path.join(workdir, name), "--port-file", self.port_file,
             "--access-key", AK, "--secret-key", SK, "--min-part-size", str(MIB), "--log", self.log,
             *extra_args], stderr=self.stderr)
        self.port = None

    def wait_ready(self, timeout=20):
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None:
                self.stderr.seek(0)
                raise CheckFailed(f"the server exited ({self.proc.returncode}): {self.stderr.read()}")
            expect(time.monotonic() < deadline, "the server did not write its port file in time")
            time.sleep(0.02)
        with open(self.port_file) as f:
            self.port = int(f.read())

    def stop(self):
        """SIGTERM; the server must exit cleanly."""
        self.proc.terminate()
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise CheckFailed("the server ignored SIGTERM") from None
        expect_equal(code, 0, "exit status after SIGTERM")

    def kill(self):
        """Whatever happened, leave no server behind."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def ctl(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url(path), data=data, method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)

    def log_of(self, method, path):
        """(status, fault) of each logged request for method and path."""
        return [(e["status"], e["fault"]) for e in self.ctl("GET", "/_ctl/log")
                if e["method"] == method and e["path"] == path]

    def log_tail(self, lines=15):
        if not os.path.exists(self.log):
            return "(no log)\n"
        with open(self.log) as f:
            return "".join(f.readlines()[-lines:])


class Context:
    """The servers and a boto3 session shared by the checks."""

    def __init__(self, main, with_token):
        self.main, self.with_token = main, with_token
        self.session = boto3.session.Session()

    def client(self, server=None, style="path", attempts=1, endpoint=None, **credentials):
        """A boto3 S3 client; attempts=1 shows errors instead of retrying them."""
        server = server or self.main
        config = Config(signature_version="s3v4", s3={"addressing_style": style},
                        retries={"total_max_attempts": attempts, "mode": "standard"},
                        connect_timeout=5, read_timeout=10)
        credentials = {"aws_access_key_id": AK, "aws_secret_access_key": SK, **credentials}
        return self.session.client("s3", endpoint_url=endpoint or server.url(""), region_name=REGION,
                                   config=config, **credentials)


# --- requests signed by hand ----------------------------------------------

def signed(server, method, path, body=b"", signer=S3SigV4Auth, service="s3", region=REGION):
    """An AWSRequest signed by botocore, for urllib to send (urllib sends
    Host as 127.0.0.1:PORT, which is what botocore signs)."""
    request = AWSRequest(method=method, url=server.url(path), data=body)
    signer(Credentials(AK, SK), service, region).add_auth(request)
    return request


def send(request, body=None):
    """(status, error code or None, body) of a request sent with urllib."""
    data = request.body if body is None else body
    sent = urllib.request.Request(request.url, data=data or None, headers=dict(request.headers.items()),
                                  method=request.method)
    try:
        with urllib.request.urlopen(sent, timeout=10) as response:
            return response.status, None, response.read()
    except urllib.error.HTTPError as err:
        payload = err.read()
        return err.code, ET.fromstring(payload).findtext("Code") if payload else None, payload


# --- checks ---------------------------------------------------------------

CHECKS = []


def check(description):
    def register(function):
        CHECKS.append((description, function))
        return function
    return register


@check("path-style: put, head, get with ranges, delete, NoSuchKey/NoSuchBucket")
def check_basic(ctx):
    c, key, data = ctx.client(), "basic/obj.txt", b"0123456789"
    put = c.put_object(Bucket=BUCKET, Key=key, Body=data, ContentType="text/plain", Metadata={"colour": "blue"})
    expect_equal(put["ETag"], quoted_md5(data), "PUT ETag")
    head = c.head_object(Bucket=BUCKET, Key=key)
    expect_equal((head["ContentLength"], head["ContentType"], head["Metadata"], head["ETag"]),
                 (10, "text/plain", {"colour": "blue"}, quoted_md5(data)), "HEAD")
    for range_, want, content_range in (("bytes=2-5", b"2345", "bytes 2-5/10"), ("bytes=7-", b"789", "bytes 7-9/10"),
                                        ("bytes=-3", b"789", "bytes 7-9/10"), ("bytes=8-99", b"89", "bytes 8-9/10")):
        got = c.get_object(Bucket=BUCKET, Key=key, Range=range_)
        expect_equal((got["ResponseMetadata"]["HTTPStatusCode"], got["ContentRange"], got["Body"].read()),
                     (206, content_range, want), range_)
    expect_error("InvalidRange", 416, c.get_object, Bucket=BUCKET, Key=key, Range="bytes=10-")
    expect_equal(c.get_object(Bucket=BUCKET, Key=key)["Body"].read(), data, "GET")
    expect_equal(c.delete_object(Bucket=BUCKET, Key=key)["ResponseMetadata"]["HTTPStatusCode"], 204, "DELETE")
    expect_error("NoSuchKey", 404, c.get_object, Bucket=BUCKET, Key=key)
    expect_error("404", 404, c.head_object, Bucket=BUCKET, Key=key)
    expect_equal(c.delete_object(Bucket=BUCKET, Key=key)["ResponseMetadata"]["HTTPStatusCode"], 204,
                 "DELETE of an absent key")
    expect_error("NoSuchBucket", 404, c.list_objects_v2, Bucket="nosuchbucket")
    expect_error("InvalidArgument", 400, c.put_object, Bucket=BUCKET, Key="a/../b", Body=b"x")
    expect_equal([b["Name"] for b in c.list_buckets()["Buckets"]], [BUCKET], "ListBuckets")
    expect_equal(c.head_bucket(Bucket=BUCKET)["ResponseMetadata"]["HTTPStatusCode"], 200, "HeadBucket")


@check("a 1 MiB random object round-trips byte for byte")
def check_round_trip(ctx):
    c, data = ctx.client(), os.urandom(MIB)
    c.put_object(Bucket=BUCKET, Key="big/random.bin", Body=data)
    expect(c.get_object(Bucket=BUCKET, Key="big/random.bin")["Body"].read() == data, "the bytes differ")


@check("keys with reserved and UTF-8 characters are signed, stored and listed")
def check_odd_keys(ctx):
    c, key = ctx.client(), "odd/a b+c=d&e(f)!*'~,;:@$é中"
    c.put_object(Bucket=BUCKET, Key=key, Body=b"odd")
    expect_equal(c.get_object(Bucket=BUCKET, Key=key)["Body"].read(), b"odd", "GET")
    listed = c.list_objects_v2(Bucket=BUCKET, Prefix="odd/a b+")["Contents"]
    expect_equal([o["Key"] for o in listed], [key], "listed keys")


@check("ListObjectsV2: prefix, delimiter, 25 keys paged by MaxKeys=10, StartAfter, UTF-8 order")
def check_listing(ctx):
    c = ctx.client()
    keys = [f"list/k{i:02d}" for i in range(25)]
    for key in keys + ["list/sub/x", "list/sub/y", "listing-other"]:
        c.put_object(Bucket=BUCKET, Key=key, Body=key.encode())
    top = c.list_objects_v2(Bucket=BUCKET, Prefix="list/", Delimiter="/")
    expect_equal(([o["Key"] for o in top["Contents"]], [p["Prefix"] for p in top["CommonPrefixes"]],
                  top["KeyCount"], top["IsTruncated"]), (keys, ["list/sub/"], 26, False), "one level")
    expect_equal(top["Contents"][0]["Size"], len("list/k00"), "Size")
    for delimiter, want in (("", keys + ["list/sub/x", "list/sub/y"]), ("/", keys + ["list/sub/"])):
        pages = list_pages(c, "list/", delimiter)
        expect_equal([len(page) for page in pages], [10, 10, len(want) - 20], f"page sizes ({delimiter!r})")
        expect_equal(sum(pages, []), want, f"paged listing ({delimiter!r})")
    after = c.list_objects_v2(Bucket=BUCKET, Prefix="list/", StartAfter="list/k20")
    expect_equal([o["Key"] for o in after["Contents"]], keys[21:] + ["list/sub/x", "list/sub/y"], "StartAfter")
    for key in ("utf/é", "utf/~", "utf/z", "utf/Z"):
        c.put_object(Bucket=BUCKET, Key=key, Body=b"")
    ordered = [o["Key"] for o in c.list_objects_v2(Bucket=BUCKET, Prefix="utf/")["Contents"]]
    expect_equal(ordered, ["utf/Z", "utf/z", "utf/~", "utf/é"], "UTF-8 byte order")


def list_pages(c, prefix, delimiter):
    """Every page of a MaxKeys=10 listing, as lists of keys and prefixes."""
    pages, kwargs = [], {"Bucket": BUCKET, "Prefix": prefix, "Delimiter": delimiter, "MaxKeys": 10}
    while True:
        page = c.list_objects_v2(**kwargs)
        entries = [o["Key"] for o in page.get("Contents", [])] + [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        expect_equal(page["KeyCount"], len(entries), "KeyCount")
        pages.append(sorted(entries, key=str.encode))
        if not page["IsTruncated"]:
            return pages
        expect(len(pages) < 10, "the listing does not end")
        kwargs["ContinuationToken"] = page["NextContinuationToken"]


@check("virtual-hosted: Host kiln.localhost:PORT for put, head, get with a range, list, delete")
def check_virtual_hosted(ctx):
    c = ctx.client(style="virtual", endpoint=f"http://localhost:{ctx.main.port}")
    c.put_object(Bucket=BUCKET, Key="virtual/v.txt", Body=b"vhost")
    expect_equal(c.head_object(Bucket=BUCKET, Key="virtual/v.txt")["ContentLength"], 5, "HEAD")
    expect_equal(c.get_object(Bucket=BUCKET, Key="virtual/v.txt", Range="bytes=1-")["Body"].read(), b"host",
                 "ranged GET")
    listed = c.list_objects_v2(Bucket=BUCKET, Prefix="virtual/")["Contents"]
    expect_equal([o["Key"] for o in listed], ["virtual/v.txt"], "listing")
    c.delete_object(Bucket=BUCKET, Key="virtual/v.txt")
    # the bucket was in the Host only: the paths logged lack it
    expect_equal(ctx.main.log_of("GET", "/virtual/v.txt"), [(206, None)], "virtual-hosted GET in the log")


@check("session token: works when sent and signed; InvalidToken when missing or wrong")
def check_session_token(ctx):
    good = ctx.client(ctx.with_token, aws_session_token=TOKEN)
    good.put_object(Bucket=BUCKET, Key="token/t.txt", Body=b"token")
    expect_equal(good.get_object(Bucket=BUCKET, Key="token/t.txt")["Body"].read(), b"token", "GET")
    for client in (ctx.client(ctx.with_token), ctx.client(ctx.with_token, aws_session_token="wrong")):
        expect_error("InvalidToken", 403, client.get_object, Bucket=BUCKET, Key="token/t.txt")
    unexpected = ctx.client(aws_session_token=TOKEN)  # the main server has no token
    expect_error("InvalidToken", 403, unexpected.list_objects_v2, Bucket=BUCKET)
    unsigned = signed(ctx.with_token, "GET", "/kiln/token/t.txt")
    unsigned.headers["x-amz-security-token"] = TOKEN
    expect_equal(send(unsigned)[:2], (403, "InvalidToken"), "a token added after signing")


@check("multipart: 3 parts complete to the exact bytes with S3's multipart ETag")
def check_multipart(ctx):
    c, key = ctx.client(), "mp/whole.bin"
    parts = [os.urandom(MIB), os.urandom(MIB), os.urandom(100 << 10)]
    upload_id = c.create_multipart_upload(Bucket=BUCKET, Key=key, ContentType="application/x-test")["UploadId"]
    etags = [c.upload_part(Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumber=n, Body=data)["ETag"]
             for n, data in enumerate(parts, 1)]
    expect_equal(etags, [quoted_md5(p) for p in parts], "part ETags")
    listed = c.list_parts(Bucket=BUCKET, Key=key, UploadId=upload_id)["Parts"]
    expect_equal([(p["PartNumber"], p["Size"]) for p in listed], [(1, MIB), (2, MIB), (3, 100 << 10)], "ListParts")
    expect_error("NoSuchKey", 404, c.get_object, Bucket=BUCKET, Key=key)
    done = c.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id, MultipartUpload={
        "Parts": [{"PartNumber": n, "ETag": etag} for n, etag in enumerate(etags, 1)]})
    want_etag = '"%s-3"' % hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest()
    expect_equal(done["ETag"], want_etag, "multipart ETag")
    got = c.get_object(Bucket=BUCKET, Key=key)
    expect_equal((got["ETag"], got["ContentType"]), (want_etag, "application/x-test"), "GET headers")
    expect(got["Body"].read() == b"".join(parts), "the assembled bytes differ")
    uploads = c.list_multipart_uploads(Bucket=BUCKET, Prefix=key).get("Uploads", [])
    expect_equal(uploads, [], "uploads left after completion")


@check("multipart: an incomplete upload is listed, its object invisible; an aborted one disappears")
def check_multipart_abort(ctx):
    c, key = ctx.client(), "mp/pending.bin"
    upload_id = c.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    c.upload_part(Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumber=1, Body=b"pending")
    uploads = c.list_multipart_uploads(Bucket=BUCKET, Prefix="mp/pending")["Uploads"]
    expect_equal([(u["Key"], u["UploadId"]) for u in uploads], [(key, upload_id)], "ListMultipartUploads")
    expect_error("404", 404, c.head_object, Bucket=BUCKET, Key=key)
    expect_equal(c.list_objects_v2(Bucket=BUCKET, Prefix="mp/pending")["KeyCount"], 0, "objects listed")
    aborted = c.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id)
    expect_equal(aborted["ResponseMetadata"]["HTTPStatusCode"], 204, "AbortMultipartUpload")
    expect_equal(c.list_multipart_uploads(Bucket=BUCKET, Prefix="mp/pending").get("Uploads", []), [],
                 "uploads after abort")
    expect_error("NoSuchUpload", 404, c.abort_multipart_upload, Bucket=BUCKET, Key=key, UploadId=upload_id)
    expect_error("NoSuchUpload", 404, c.upload_part, Bucket=BUCKET, Key=key, UploadId=upload_id,
                 PartNumber=2, Body=b"late")


@check("multipart: EntityTooSmall, InvalidPartOrder and InvalidPart refuse completion")
def check_multipart_refusals(ctx):
    c, key = ctx.client(), "mp/small.bin"
    upload_id = c.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    etags = [c.upload_part(Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumber=n, Body=os.urandom(size))["ETag"]
             for n, size in ((1, 100 << 10), (2, 10 << 10))]

    def complete(parts):
        c.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id,
                                    MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in parts]})

    expect_error("EntityTooSmall", 400, complete, [(1, etags[0]), (2, etags[1])])
    expect_error("InvalidPartOrder", 400, complete, [(2, etags[1]), (1, etags[0])])
    expect_error("InvalidPart", 400, complete, [(1, quoted_md5(b"other"))])
    expect_error("InvalidPart", 400, complete, [(3, etags[0])])
    c.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id)


@check("a wrong secret key: SignatureDoesNotMatch (403) with the server's CanonicalRequest")
def check_wrong_secret(ctx):
    c = ctx.client(aws_secret_access_key="not-the-secret")
    error = expect_error("SignatureDoesNotMatch", 403, c.list_objects_v2, Bucket=BUCKET)["Error"]
    expect(error.get("CanonicalRequest", "").startswith("GET\n/kiln\n"), f"CanonicalRequest: {error!r}")
    expect(error.get("StringToSign", "").startswith("AWS4-HMAC-SHA256\n"), f"StringToSign: {error!r}")


@check("an unknown access key: InvalidAccessKeyId (403); wrong region or service: AuthorizationHeaderMalformed")
def check_credential_scope(ctx):
    stranger = ctx.client(aws_access_key_id="AKIDSTRANGER")
    expect_error("InvalidAccessKeyId", 403, stranger.list_objects_v2, Bucket=BUCKET)
    # by hand: boto3 would follow the <Region> in the answer and retry
    for scope in ({"region": "eu-west-1"}, {"service": "ec2"}):
        status, code, _ = send(signed(ctx.main, "GET", "/kiln?list-type=2", **scope))
        expect_equal((status, code), (400, "AuthorizationHeaderMalformed"), f"wrong {scope}")


@check("x-amz-date 20 minutes behind the server's clock: RequestTimeTooSkewed (403)")
def check_clock_skew(ctx):
    c = ctx.client()
    ctx.main.ctl("POST", "/_ctl/clock", {"offset_s": 1200})
    try:
        expect_error("RequestTimeTooSkewed", 403, c.list_objects_v2, Bucket=BUCKET)
    finally:
        ctx.main.ctl("POST", "/_ctl/clock", {"offset_s": 0})
    c.list_objects_v2(Bucket=BUCKET, MaxKeys=1)


@check("hand-signed: a tampered body gives XAmzContentSHA256Mismatch (400)")
def check_tampered_body(ctx):
    request = signed(ctx.main, "PUT", "/kiln/hand/tampered", body=b"the body that was signed")
    expect_equal(send(request)[:2], (200, None), "the untampered request")
    status, code, _ = send(request, body=b"the body that was sent!!")
    expect_equal((status, code), (400, "XAmzContentSHA256Mismatch"), "tampered body")


@check("hand-signed: no x-amz-content-sha256 (400), STREAMING-* (501), no x-amz-date (403), no Authorization (403)")
def check_missing_headers(ctx):
    status, code, body = send(signed(ctx.main, "GET", "/kiln?list-type=2", signer=SigV4Auth))
    expect_equal((status, code), (400, "InvalidRequest"), "no x-amz-content-sha256")
    expect(b"x-amz-content-sha256" in body, "the message names x-amz-content-sha256")
    streaming = signed(ctx.main, "GET", "/kiln?list-type=2")
    streaming.headers.replace_header("X-Amz-Content-SHA256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    expect_equal(send(streaming)[:2], (501, "NotImplemented"), "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    undated = signed(ctx.main, "GET", "/kiln?list-type=2")
    del undated.headers["X-Amz-Date"]
    expect_equal(send(undated)[:2], (403, "RequestTimeTooSkewed"), "no x-amz-date")
    anonymous = AWSRequest(method="GET", url=ctx.main.url("/kiln?list-type=2"))
    expect_equal(send(anonymous)[:2], (403, "AccessDenied"), "no Authorization")


@check("hand-signed: an x-amz-meta-foo header added after signing gives AccessDenied (403)")
def check_unsigned_header(ctx):
    request = signed(ctx.main, "PUT", "/kiln/hand/unsigned", body=b"x")
    request.headers["x-amz-meta-foo"] = "bar"
    status, code, body = send(request)
    expect_equal((status, code), (403, "AccessDenied"), "unsigned x-amz-meta-foo")
    expect(b"x-amz-meta-foo" in body, "the message names the unsigned header")


@check("checksums: SHA256 and CRC32 verified, stored and returned; a wrong one or Content-MD5 is BadDigest")
def check_checksums(ctx):
    c, key, data = ctx.client(), "sum/data", b"checksummed data"
    sha256 = b64(hashlib.sha256(data).digest())
    put = c.put_object(Bucket=BUCKET, Key=key, Body=data, ChecksumAlgorithm="SHA256")
    expect_equal(put.get("ChecksumSHA256"), sha256, "PUT ChecksumSHA256")
    expect_equal(c.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED").get("ChecksumSHA256"), sha256,
                 "HEAD ChecksumSHA256")
    crc32 = b64(zlib.crc32(data).to_bytes(4, "big"))
    put = c.put_object(Bucket=BUCKET, Key=key + "2", Body=data, ChecksumAlgorithm="CRC32")
    expect_equal(put.get("ChecksumCRC32"), crc32, "PUT ChecksumCRC32")
    expect_error("BadDigest", 400, c.put_object, Bucket=BUCKET, Key=key, Body=b"replacement",
                 ChecksumSHA256=b64(hashlib.sha256(b"other").digest()))
    expect_error("BadDigest", 400, c.put_object, Bucket=BUCKET, Key=key, Body=b"replacement",
                 ContentMD5=b64(hashlib.md5(b"other").digest()))
    expect_equal(c.get_object(Bucket=BUCKET, Key=key)["Body"].read(), data, "the object after refused PUTs")


@check("fault 503 x2: boto3 retries and succeeds; /_ctl/log shows both 503s")
def check_fault_status(ctx):
    rules = ctx.main.ctl("POST", "/_ctl/faults", [
        {"method": "PUT", "match": "/faults/slow", "action": "status", "status": 503, "count": 2}])
    expect_equal(len(rules), 1, "rules after POST")
    ctx.client(attempts=4).put_object(Bucket=BUCKET, Key="faults/slow", Body=b"slow")
    expect_equal(ctx.main.log_of("PUT", "/kiln/faults/slow"), [(503, "status"), (503, "status"), (200, None)],
                 "logged PUTs")
    expect_equal(ctx.main.ctl("GET", "/_ctl/faults"), [], "rules left")


@check("fault drop: boto3 retries after the dropped connection and succeeds")
def check_fault_drop(ctx):
    c = ctx.client(attempts=4)
    c.put_object(Bucket=BUCKET, Key="faults/drop", Body=b"dropped once")
    ctx.main.ctl("POST", "/_ctl/faults", [{"method": "GET", "match": "/faults/drop", "action": "drop"}])
    expect_equal(c.get_object(Bucket=BUCKET, Key="faults/drop")["Body"].read(), b"dropped once", "GET")
    expect_equal(ctx.main.log_of("GET", "/kiln/faults/drop"), [(None, "drop"), (200, None)], "logged GETs")


@check("fault truncate: a raw GET gets fewer bytes than its Content-Length; delay delays")
def check_fault_truncate_delay(ctx):
    data = os.urandom(10000)
    ctx.client().put_object(Bucket=BUCKET, Key="faults/cut", Body=data)
    ctx.main.ctl("POST", "/_ctl/faults", [{"method": "GET", "match": "faults/cut", "action": "truncate"},
                                          {"method": "GET", "match": "faults/cut", "action": "delay", "ms": 300}])
    request = signed(ctx.main, "GET", "/kiln/faults/cut")
    sent = urllib.request.Request(request.url, headers=dict(request.headers.items()))
    with urllib.request.urlopen(sent, timeout=10) as response:
        expect_equal(response.headers["Content-Length"], str(len(data)), "Content-Length")
        try:
            got = response.read()
        except http.client.IncompleteRead as err:
            got = err.partial
    expect(len(got) < len(data), f"{len(got)} of {len(data)} bytes arrived")
    start = time.monotonic()
    expect_equal(send(signed(ctx.main, "GET", "/kiln/faults/cut"))[2], data, "delayed GET")
    expect(time.monotonic() - start >= 0.3, "the answer came before the delay")
    try:
        ctx.main.ctl("POST", "/_ctl/faults", [{"action": "explode"}])
        raise CheckFailed("an unknown action was accepted")
    except urllib.error.HTTPError as err:
        expect_equal(err.code, 400, "status for an unknown action")


@check("curl --aws-sigv4 (a second independent signer) GETs an object")
def check_curl(ctx):
    try:
        version = subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout
    except FileNotFoundError:
        return "skipped: no curl"
    found = re.match(r"curl (\d+)\.(\d+)", version)
    if not found or (int(found[1]), int(found[2])) < (7, 75):
        return f"skipped: curl older than 7.75 ({version.split(chr(10))[0]})"
    ctx.client().put_object(Bucket=BUCKET, Key="curl/hello.txt", Body=b"hello curl")
    result = subprocess.run(["curl", "-sS", "--aws-sigv4", f"aws:amz:{REGION}:s3", "--user", f"{AK}:{SK}",
                             "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-w", "\n%{http_code}",
                             ctx.main.url("/kiln/curl/hello.txt")], capture_output=True, timeout=30)
    expect_equal(result.stdout, b"hello curl\n200", f"curl's answer (stderr: {result.stderr!r})")
    return None


def isolate_environment():
    """The checks must not depend on the user's AWS configuration or on a
    proxy that cannot reach 127.0.0.1."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        os.environ.pop(name, None)
    os.environ.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
                      no_proxy="*", NO_PROXY="*")


def run(servers):
    """Run every check, one line each; False at the first failure, after a
    line saying which and why."""
    step = "starting the servers"
    try:
        for server in servers:
            server.wait_ready()
        ctx = Context(*servers)
        for step, function in CHECKS:
            note = function(ctx)
            print(f"ok    {step}" + (f" ({note})" if note else ""), flush=True)
        step = "stopping the servers on SIGTERM"
        for server in servers:
            server.stop()
        return True
    except Exception as err:  # noqa: BLE001  any failure is reported the same way
        print(f"FAIL  {step}: {type(err).__name__}: {err}", flush=True)
        print("--- end of the main server's log:\n" + servers[0].log_tail(), flush=True)
        return False


def main():
    started = time.monotonic()
    isolate_environment()
    route_localhost_subdomains()
    with tempfile.TemporaryDirectory(prefix="s3v4-selftest-") as workdir:
        servers = [Server(workdir, "main"), Server(workdir, "token", "--session-token", TOKEN)]
        try:
            passed = run(servers)
        finally:
            for server in servers:
                server.kill()
    if passed:
        print(f"all {len(CHECKS)} checks passed in {time.monotonic() - started:.1f}s")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
