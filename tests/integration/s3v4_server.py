#!/usr/bin/python3
"""An S3-compatible test server that checks AWS Signature V4 on its own.

kiln's S3 client signs its requests itself. This server recomputes every
signature with botocore's signer (code kiln shares nothing with) and refuses
what S3 refuses, with S3's error codes and XML, so that a signing or protocol
bug fails a test here instead of surfacing against a real bucket.

Usage:
  s3v4_server.py --root DIR --port-file FILE [--port 0] [--region us-east-1]
                 [--access-key AK] [--secret-key SK] [--session-token TOKEN]
                 [--bucket NAME ...] [--min-part-size BYTES] [--log FILE]
                 [--missing-token-code InvalidToken|InvalidAccessKeyId]
Credentials may also come from S3V4_ACCESS_KEY, S3V4_SECRET_KEY and
S3V4_SESSION_TOKEN (arguments win). The port is written to --port-file
(atomically) once the socket listens. SIGTERM stops the server.

Layout under ROOT:
  <bucket>/<key>      object data
  .meta/<bucket>/<key> JSON sidecar: etag, size, content type, x-amz-meta-*,
                       checksums (a tree mirroring the data tree)
  .uploads/<id>/      multipart uploads in progress: upload.json, parts
  .tmp/               request bodies being received; renamed into place only
                      once the signature and digests are verified

Every other request must carry a valid header Signature V4 (see Verifier);
what this server does not implement (a query parameter or header it would
otherwise ignore) is refused with 501 NotImplemented rather than ignored.

Unauthenticated control endpoint on the same port, JSON in and out; each
answer is the resource's state after the change:
  GET|POST|DELETE /_ctl/faults  POST appends a list of RULEs, DELETE clears
  GET|DELETE /_ctl/log          S3 requests seen: [{"method", "path", "query",
                                "status", "signed", "error", "fault"}]
  GET|POST /_ctl/clock          {"offset_s": SECONDS} shifts the server's now
A RULE is {"action": "status", "status": 400..599}, {"action": "drop"},
{"action": "delay", "ms": M}, {"action": "truncate"}, or one of the hostile
answers {"action": "redirect"}, {"action": "error200"}, {"action": "huge"},
{"action": "list_loop"} and {"action": "barrier"}, with optional
"method" (default "*"), "match" (substring of path?query, default "") and
"count" (default 1). See Faults for what each action does.

A PUT with "If-None-Match: *" stores the object only when the key holds
none (412 PreconditionFailed otherwise), as AWS S3 does. With
--missing-token-code InvalidAccessKeyId a request without the session
token is answered as AWS answers it (InvalidToken by default).
"""
import argparse
import base64
import binascii
import calendar
import contextlib
import email.utils
import hashlib
import hmac
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import socketserver
import sys
import tempfile
import threading
import time
import traceback
import xml.etree.ElementTree as ET
import zlib
from collections import namedtuple
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
MAX_SKEW_S = 15 * 60
MAX_PUT_BYTES = 5 << 30            # S3's limit for one PUT
MAX_KEY_BYTES = 1024
MAX_SEGMENT_BYTES = 255            # NAME_MAX: each key segment is a file name
MAX_PARTS = 10000
MAX_LIST = 1000
CHUNK = 1 << 16
OWNER = [("ID", "6b696c6e2d746573742d6f776e6572"), ("DisplayName", "kiln")]

SHA256_HEX = re.compile(r"[0-9a-f]{64}")
AMZ_DATE = re.compile(r"[0-9]{8}T[0-9]{6}Z")
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
UPLOAD_ID = re.compile(r"[0-9a-f]{32}")
REQUEST_TARGET = re.compile(r"/[!-~]*")       # printable ASCII, no spaces
RANGE = re.compile(r"bytes=([0-9]*)-([0-9]*)")
DIGITS = re.compile(r"[0-9]+")

# Request checksums this server verifies: header, stored name, XML element.
CHECKSUMS = [("x-amz-checksum-sha256", "sha256", "ChecksumSHA256"),
             ("x-amz-checksum-crc32", "crc32", "ChecksumCRC32")]
UNVERIFIED_CHECKSUMS = ("x-amz-checksum-crc32c", "x-amz-checksum-crc64nvme", "x-amz-checksum-sha1")
# Injected statuses answer with the code S3 uses for them.
FAULT_CODES = {500: "InternalError", 503: "SlowDown", 408: "RequestTimeout", 429: "TooManyRequests"}


class S3Error(Exception):
    """An S3 error answer: status, Code, Message, extra XML elements."""

    def __init__(self, status, code, message, headers=(), **extra):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers, self.extra = list(headers), extra


class ClientGone(Exception):
    """The client closed or stalled before its request was complete."""


def malformed_auth(message):
    return S3Error(400, "AuthorizationHeaderMalformed", "The authorization header is malformed; " + message)


def not_implemented(message, **extra):
    return S3Error(501, "NotImplemented", message, **extra)


def invalid_argument(message, **extra):
    return S3Error(400, "InvalidArgument", message, **extra)


# --- the request as received ---------------------------------------------

def decode(component):
    """Percent-decode a path or query component; S3 takes only UTF-8."""
    try:
        return unquote(component, errors="strict")
    except UnicodeDecodeError:
        raise S3Error(400, "InvalidURI", "Couldn't parse the specified URI.") from None


def header_text(value):
    """http.server decodes header bytes as Latin-1; a signature covers the
    bytes, which clients write as UTF-8."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise invalid_argument("a header value is not valid UTF-8") from None


class Request:
    """One S3 request: method, path and query raw and decoded, headers, body."""

    def __init__(self, method, target, headers):
        if not REQUEST_TARGET.fullmatch(target):
            raise S3Error(400, "InvalidURI", "Couldn't parse the specified URI.")
        self.method, self.headers, self.body = method, headers, None
        self.raw_path, _, self.raw_query = target.partition("?")
        self.path = decode(self.raw_path)
        # botocore re-encodes each name and value when it canonicalizes; '+'
        # stays a plus (SigV4 encodes a space as %20).
        self.query = [(decode(k), decode(v)) for k, _, v in
                      (pair.partition("=") for pair in self.raw_query.split("&") if pair)]
        self.params = dict(self.query)

    def header(self, name, default=None):
        return self.headers.get(name, default)


class Body:
    """A request body received into a temp file with the digests S3 checks,
    so an upload is verified before it is renamed into place."""

    def __init__(self, rfile, length, tmpdir):
        sha256, md5, crc32 = hashlib.sha256(), hashlib.md5(), 0
        fd, self.path = tempfile.mkstemp(dir=tmpdir)
        try:
            with os.fdopen(fd, "wb") as out:
                left = length
                while left:
                    chunk = rfile.read(min(left, CHUNK))
                    if not chunk:
                        raise ConnectionError("the client closed the connection inside the body")
                    sha256.update(chunk)
                    md5.update(chunk)
                    crc32 = zlib.crc32(chunk, crc32)
                    out.write(chunk)
                    left -= len(chunk)
        except BaseException:
            self.discard()
            raise
        self.size = length
        self.sha256_hex = sha256.hexdigest()
        self.digests = {"md5": md5.digest(), "sha256": sha256.digest(), "crc32": crc32.to_bytes(4, "big")}

    def read(self):
        with open(self.path, "rb") as f:
            return f.read()

    def discard(self):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


# --- Signature V4 verification --------------------------------------------

Authorization = namedtuple("Authorization", "access_key date region service terminator signed_headers signature")


def parse_authorization(value):
    """Split 'AWS4-HMAC-SHA256 Credential=AK/DATE/REGION/s3/aws4_request,
    SignedHeaders=a;b, Signature=HEX'."""
    if value is None or not value.startswith(ALGORITHM + " "):
        raise S3Error(403, "AccessDenied", "Access Denied: the request has no AWS4-HMAC-SHA256 "
                      "Authorization header (this server accepts only header-signed Signature V4)")
    fields = {}
    for part in value[len(ALGORITHM) + 1:].split(","):
        name, sep, field = part.strip().partition("=")
        if not sep or name in fields:
            raise malformed_auth("expected Credential=..., SignedHeaders=..., Signature=...")
        fields[name] = field
    if set(fields) != {"Credential", "SignedHeaders", "Signature"}:
        raise malformed_auth("expected exactly Credential, SignedHeaders and Signature")
    scope = fields["Credential"].split("/")
    if len(scope) != 5:
        raise malformed_auth("the Credential must be ACCESS_KEY/DATE/REGION/SERVICE/aws4_request")
    return Authorization(*scope, fields["SignedHeaders"].split(";"), fields["Signature"])


class _ListedHeadersSigner(S3SigV4Auth):
    """botocore's S3 signer (path used as given, no normalization) made to
    canonicalize exactly the headers the client listed in SignedHeaders;
    botocore itself would sign every header it holds but its blacklist."""

    def headers_to_sign(self, request):
        return request.headers


class Verifier:
    """Checks a request's Signature V4 as S3 does, one rule at a time, in
    this order: Authorization (AccessDenied, AuthorizationHeaderMalformed),
    access key (InvalidAccessKeyId), scope (AuthorizationHeaderMalformed),
    x-amz-date (RequestTimeTooSkewed), session token (InvalidToken),
    x-amz-content-sha256 (InvalidRequest), unsigned headers (AccessDenied),
    signature (SignatureDoesNotMatch), body (XAmzContentSHA256Mismatch)."""

    def __init__(self, args, clock):
        self.access_key, self.secret_key = args.access_key, args.secret_key
        self.token, self.region, self.clock = args.session_token, args.region, clock
        self.missing_token_code = args.missing_token_code

    def verify(self, req):
        """Raise S3Error unless our credentials signed req; the body has
        arrived, and its digest is checked last, as S3 does."""
        auth = parse_authorization(req.header("authorization"))
        if auth.access_key != self.access_key:
            raise S3Error(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist "
                          "in our records.", AWSAccessKeyId=auth.access_key)
        self._check_scope(auth)
        timestamp = self._check_date(req, auth)
        self._check_token(req, auth)
        payload_hash = self._check_payload_header(req)
        self._check_signed_headers(req, auth)
        self._check_signature(req, auth, timestamp)
        if payload_hash != UNSIGNED_PAYLOAD and payload_hash != req.body.sha256_hex:
            raise S3Error(400, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header "
                          "does not match what was computed.", ClientComputedContentSHA256=payload_hash,
                          S3ComputedContentSHA256=req.body.sha256_hex)

    def _check_scope(self, auth):
        if auth.region != self.region:
            raise S3Error(400, "AuthorizationHeaderMalformed", "The authorization header is malformed; "
                          f"the region '{auth.region}' is wrong; expecting '{self.region}'",
                          Region=self.region)
        if auth.service != "s3" or auth.terminator != "aws4_request":
            raise malformed_auth(f"the credential scope must end in /{self.region}/s3/aws4_request, "
                                 f"not /{auth.region}/{auth.service}/{auth.terminator}")

    def _check_date(self, req, auth):
        """The x-amz-date timestamp, within 15 minutes of our clock."""
        stamp = req.header("x-amz-date")
        if stamp is None or not AMZ_DATE.fullmatch(stamp):
            raise S3Error(403, "RequestTimeTooSkewed", "The request has no valid x-amz-date "
                          "(YYYYMMDDTHHMMSSZ); this server does not accept Date instead.")
        try:
            sent = calendar.timegm(time.strptime(stamp, "%Y%m%dT%H%M%SZ"))
        except ValueError:
            raise S3Error(403, "RequestTimeTooSkewed", f"x-amz-date {stamp} is not a valid time") from None
        now = self.clock.now()
        if abs(now - sent) > MAX_SKEW_S:
            raise S3Error(403, "RequestTimeTooSkewed", "The difference between the request time and the "
                          "current time is too large.", RequestTime=stamp,
                          ServerTime=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                          MaxAllowedSkewMilliseconds=MAX_SKEW_S * 1000)
        if auth.date != stamp[:8]:
            raise malformed_auth("Invalid credential date. Date is not the same as X-Amz-Date.")
        return stamp

    def _check_token(self, req, auth):
        token = req.header("x-amz-security-token")
        if self.token is None and token is None:
            return
        if self.token is None:
            problem = "this server expects no session token, the request carries one"
        elif token is None and self.missing_token_code == "InvalidAccessKeyId":
            # AWS: a temporary access key without its token is unknown
            raise S3Error(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist "
                          "in our records.", AWSAccessKeyId=auth.access_key)
        elif token is None:
            problem = "the request has no x-amz-security-token"
        elif "x-amz-security-token" not in auth.signed_headers:
            problem = "x-amz-security-token is not in SignedHeaders"
        elif hmac.compare_digest(token.encode(), self.token.encode()):
            return
        else:
            problem = "The provided token is malformed or otherwise invalid."
        raise S3Error(403, "InvalidToken", problem)

    @staticmethod
    def _check_payload_header(req):
        value = req.header("x-amz-content-sha256")
        if value is None:
            raise S3Error(400, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256")
        if value.startswith("STREAMING-"):
            raise not_implemented(f"x-amz-content-sha256: {value} (aws-chunked bodies) is not implemented "
                                  "by this test server", Header="x-amz-content-sha256")
        if value != UNSIGNED_PAYLOAD and not SHA256_HEX.fullmatch(value):
            raise invalid_argument("x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-..., or a "
                                   "valid sha256 value.", ArgumentName="x-amz-content-sha256",
                                   ArgumentValue=value)
        return value

    @staticmethod
    def _check_signed_headers(req, auth):
        """host, every x-amz-* header and Content-MD5 must be signed, and
        every signed header must be there."""
        present = {name.lower() for name in req.headers.keys()}
        required = {"host"} | {n for n in present if n.startswith("x-amz-") or n == "content-md5"}
        unsigned = sorted(required - set(auth.signed_headers))
        if unsigned:
            raise S3Error(403, "AccessDenied", "There were headers present in the request which were not "
                          "signed: " + ", ".join(unsigned), HeadersNotSigned=", ".join(unsigned))
        absent = sorted(set(auth.signed_headers) - present)
        if absent:
            raise S3Error(403, "AccessDenied", "SignedHeaders lists headers the request does not "
                          "carry: " + ", ".join(absent))

    def _check_signature(self, req, auth, timestamp):
        canonical, string_to_sign, expected = self._botocore_signature(req, auth, timestamp)
        if not hmac.compare_digest(expected.encode(), auth.signature.encode()):
            raise S3Error(403, "SignatureDoesNotMatch", "The request signature we calculated does not "
                          "match the signature you provided. Check your key and signing method.",
                          AWSAccessKeyId=auth.access_key, StringToSign=string_to_sign,
                          SignatureProvided=auth.signature, CanonicalRequest=canonical)

    def _botocore_signature(self, req, auth, timestamp):
        """(canonical request, string to sign, signature) recomputed by
        botocore from what arrived. The path is canonicalized as S3 does:
        decoded, then URI-encoded once, so a client that sends or signs a
        character unencoded that SigV4 encodes fails here as on S3."""
        headers = HTTPHeaders()
        for name in auth.signed_headers:
            for value in req.headers.get_all(name):
                headers[name] = header_text(value)
        request = AWSRequest(method=req.method, url="http://s3" + quote(req.path, safe="/"),
                             headers=headers, params=req.query)
        request.context["timestamp"] = timestamp
        signer = _ListedHeadersSigner(Credentials(self.access_key, self.secret_key), "s3", self.region)
        canonical = signer.canonical_request(request)
        string_to_sign = signer.string_to_sign(request, canonical)
        return canonical, string_to_sign, signer.signature(string_to_sign, request)


# --- responses ------------------------------------------------------------

class Response:
    """Status, headers and a body: bytes, or `length` bytes of an open file
    (which the sender closes)."""

    def __init__(self, status, headers=(), body=b"", file=None, length=None):
        self.status, self.headers, self.body, self.file = status, list(headers), body, file
        self.length = len(body) if file is None else length


def _xml_items(parent, items):
    for tag, value in items:
        element = ET.SubElement(parent, tag)
        if isinstance(value, list):
            _xml_items(element, value)
        elif isinstance(value, bool):
            element.text = "true" if value else "false"
        elif value is not None:
            element.text = str(value)


def xml_response(root_tag, items, status=200, namespace=S3_NS, headers=()):
    """An XML answer from (tag, value) pairs; a list value nests."""
    root = ET.Element(root_tag, {"xmlns": namespace} if namespace else {})
    _xml_items(root, items)
    body = b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode").encode()
    return Response(status, [("Content-Type", "application/xml"), *headers], body)


def error_response(err, resource, request_id):
    items = [("Code", err.code), ("Message", err.message), *err.extra.items(),
             ("Resource", resource), ("RequestId", request_id)]
    return xml_response("Error", items, err.status, namespace=None, headers=err.headers)


def iso_time(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % (int(t * 1000) % 1000)


def quoted_md5(digest):
    return '"%s"' % digest.hex()


def b64_digest(value, size):
    """The digest a base64 header carries, None if it is not one of size bytes."""
    try:
        digest = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return digest if len(digest) == size else None


# --- storage --------------------------------------------------------------

def validate_key(key):
    """Keys become paths: refuse what a file system cannot hold faithfully."""
    if len(key.encode()) > MAX_KEY_BYTES:
        raise S3Error(400, "KeyTooLongError", "Your key is too long")
    for segment in key.split("/"):
        if segment in ("", ".", "..") or "\0" in segment:
            raise invalid_argument(f"this test server refuses keys with empty, '.' or '..' segments "
                                   f"(it stores keys as paths): {key!r}")
        if len(segment.encode()) > MAX_SEGMENT_BYTES:
            raise invalid_argument(f"a segment of key {key!r} is longer than {MAX_SEGMENT_BYTES} bytes")


def no_such_key(key):
    return S3Error(404, "NoSuchKey", "The specified key does not exist.", Key=key)


def no_such_upload(upload_id):
    return S3Error(404, "NoSuchUpload", "The specified upload does not exist. The upload ID may be "
                   "invalid, or the upload may have been aborted or completed.", UploadId=upload_id)


def key_clash(key):
    return invalid_argument(f"key {key!r} clashes with another key on this test server (keys are "
                            "paths: an object cannot also be a directory of other objects)")


class Store:
    """Objects, their sidecars and multipart uploads on disk. One lock makes
    each commit (data and sidecar renamed in) and each lookup (sidecar read,
    data opened) atomic, so no reader sees half an object."""

    def __init__(self, root, buckets):
        self.root = os.path.abspath(root)
        self.meta, self.uploads, self.tmp = (os.path.join(self.root, d) for d in (".meta", ".uploads", ".tmp"))
        self.lock = threading.Lock()
        shutil.rmtree(self.tmp, ignore_errors=True)  # bodies a killed server was receiving
        for d in (self.meta, self.uploads, self.tmp):
            os.makedirs(d, exist_ok=True)
        self.buckets = {}
        for bucket in buckets:
            os.makedirs(os.path.join(self.root, bucket), exist_ok=True)
            self.buckets[bucket] = os.stat(os.path.join(self.root, bucket)).st_mtime

    def _data(self, bucket, key):
        return os.path.join(self.root, bucket, *key.split("/"))

    def _sidecar(self, bucket, key):
        return os.path.join(self.meta, bucket, *key.split("/"))

    def _write_json(self, path, value):
        fd, tmp = tempfile.mkstemp(dir=self.tmp)
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, path)

    @staticmethod
    def _read_json(path):
        with open(path) as f:
            return json.load(f)

    # objects

    def put_object(self, bucket, key, data_path, meta, create_only=False):
        with self.lock:
            if create_only and os.path.exists(self._sidecar(bucket, key)):
                raise S3Error(412, "PreconditionFailed", "At least one of the pre-conditions you "
                              "specified did not hold", Condition="If-None-Match")
            self._commit(bucket, key, data_path, meta)

    def _commit(self, bucket, key, data_path, meta):
        data, sidecar = self._data(bucket, key), self._sidecar(bucket, key)
        meta = dict(meta, mtime=time.time())
        try:
            for path in (data, sidecar):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            os.replace(data_path, data)
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            raise key_clash(key) from None
        self._write_json(sidecar, meta)

    def open_object(self, bucket, key):
        """(open data file, sidecar) of an object, or NoSuchKey."""
        with self.lock:
            try:
                meta = self._read_json(self._sidecar(bucket, key))
                return open(self._data(bucket, key), "rb"), meta
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                raise no_such_key(key) from None

    def delete_object(self, bucket, key):
        with self.lock:
            for path, top in ((self._data(bucket, key), os.path.join(self.root, bucket)),
                              (self._sidecar(bucket, key), os.path.join(self.meta, bucket))):
                with contextlib.suppress(FileNotFoundError, NotADirectoryError, IsADirectoryError):
                    os.unlink(path)
                self._prune(path, top)

    @staticmethod
    def _prune(path, top):
        """Remove the directories a deleted key leaves empty, up to top."""
        parent = os.path.dirname(path)
        while parent != top:
            try:
                os.rmdir(parent)
            except OSError:
                return
            parent = os.path.dirname(parent)

    def list_objects(self, bucket, prefix):
        """[(key, sidecar)] under prefix, sorted by UTF-8 bytes as S3 sorts."""
        top, found = os.path.join(self.root, bucket), []
        with self.lock:
            for dirpath, _, files in os.walk(top):
                rel = os.path.relpath(dirpath, top)
                for name in files:
                    key = name if rel == "." else rel.replace(os.sep, "/") + "/" + name
                    if key.startswith(prefix):
                        with contextlib.suppress(FileNotFoundError):
                            found.append((key, self._read_json(self._sidecar(bucket, key))))
        return sorted(found, key=lambda item: item[0].encode())

    # multipart uploads: .uploads/<id>/upload.json, parts NNNNN and NNNNN.json

    def create_upload(self, bucket, key, meta):
        upload_id = secrets.token_hex(16)
        with self.lock:
            os.makedirs(os.path.join(self.uploads, upload_id))
            self._write_json(os.path.join(self.uploads, upload_id, "upload.json"),
                             dict(meta, bucket=bucket, key=key, initiated=time.time()))
        return upload_id

    def _upload(self, upload_id, bucket, key):
        """(directory, upload.json) of an upload of bucket/key; lock held."""
        directory = os.path.join(self.uploads, upload_id)
        try:
            # the id becomes a path: only ids this server could have made
            info = self._read_json(os.path.join(directory, "upload.json")) if UPLOAD_ID.fullmatch(upload_id) else {}
        except FileNotFoundError:
            info = {}
        if (info.get("bucket"), info.get("key")) != (bucket, key):
            raise no_such_upload(upload_id)
        return directory, info

    def _parts(self, directory):
        return {int(name[:-5]): self._read_json(os.path.join(directory, name))
                for name in os.listdir(directory) if name.endswith(".json") and name[:-5].isdigit()}

    def put_part(self, upload_id, bucket, key, number, data_path, meta):
        with self.lock:
            directory, _ = self._upload(upload_id, bucket, key)
            os.replace(data_path, os.path.join(directory, "%05d" % number))
            self._write_json(os.path.join(directory, "%05d.json" % number), dict(meta, mtime=time.time()))

    def list_parts(self, upload_id, bucket, key):
        """(upload.json, {part number: part sidecar})."""
        with self.lock:
            directory, info = self._upload(upload_id, bucket, key)
            return info, self._parts(directory)

    def complete_upload(self, upload_id, bucket, key, check):
        """Assemble the parts check(upload.json, parts) approves into the
        object, then forget the upload; all under the lock, so a part
        re-uploaded or an abort meanwhile cannot mix in."""
        with self.lock:
            directory, info = self._upload(upload_id, bucket, key)
            numbers, meta = check(info, self._parts(directory))
            fd, tmp = tempfile.mkstemp(dir=self.tmp)
            try:
                with os.fdopen(fd, "wb") as out:
                    for number in numbers:
                        with open(os.path.join(directory, "%05d" % number), "rb") as part:
                            shutil.copyfileobj(part, out, CHUNK)
                self._commit(bucket, key, tmp, meta)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            shutil.rmtree(directory)
            return meta

    def abort_upload(self, upload_id, bucket, key):
        with self.lock:
            directory, _ = self._upload(upload_id, bucket, key)
            shutil.rmtree(directory)

    def list_uploads(self, bucket, prefix):
        """[(upload id, upload.json)] by key (UTF-8 bytes), then start time."""
        found = []
        with self.lock:
            for upload_id in os.listdir(self.uploads):
                with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                    info = self._read_json(os.path.join(self.uploads, upload_id, "upload.json"))
                    if info["bucket"] == bucket and info["key"].startswith(prefix):
                        found.append((upload_id, info))
        return sorted(found, key=lambda item: (item[1]["key"].encode(), item[1]["initiated"]))


# --- S3 operations --------------------------------------------------------

# (method, target, query parameters that select it, others it accepts, operation)
ROUTES = [
    ("GET", "service", (), (), "list_buckets"),
    ("GET", "bucket", ("list-type",), ("prefix", "delimiter", "max-keys", "continuation-token",
                                       "start-after", "encoding-type", "fetch-owner"), "list_objects_v2"),
    ("GET", "bucket", ("uploads",), ("prefix",), "list_uploads"),
    ("HEAD", "bucket", (), (), "head_bucket"),
    ("PUT", "object", ("partNumber", "uploadId"), (), "upload_part"),
    ("PUT", "object", (), (), "put_object"),
    ("GET", "object", ("uploadId",), ("max-parts", "part-number-marker"), "list_parts"),
    ("GET", "object", (), (), "get_object"),
    ("HEAD", "object", (), (), "get_object"),
    ("DELETE", "object", ("uploadId",), (), "abort_upload"),
    ("DELETE", "object", (), (), "delete_object"),
    ("POST", "object", ("uploads",), (), "create_upload"),
    ("POST", "object", ("uploadId",), (), "complete_upload"),
]
ALWAYS_ACCEPTED = {"x-id"}  # newer SDKs name the operation in the query


def find_route(method, target, params):
    for r_method, r_target, selectors, optional, operation in ROUTES:
        if (r_method, r_target) == (method, target) and set(selectors) <= set(params) \
                and set(params) <= set(selectors) | set(optional) | ALWAYS_ACCEPTED:
            return operation
    raise not_implemented(f"this test server does not implement {method} on a {target} with query "
                          f"parameters {sorted(params)}")


def refuse_unsupported_headers(req):
    """Headers whose meaning this server does not implement: better refused
    than silently ignored, so a client relying on them learns it here."""
    names = {name.lower() for name in req.headers.keys()}
    unsupported = {"x-amz-copy-source", "if-modified-since", "if-unmodified-since", *UNVERIFIED_CHECKSUMS}
    if req.method not in ("GET", "HEAD"):
        unsupported |= {"if-match", "if-none-match"}
    if req.method == "PUT" and "uploadId" not in req.params and req.header("if-none-match") == "*":
        unsupported.discard("if-none-match")  # a conditional write: create only
    found = sorted(names & unsupported)
    if found:
        raise not_implemented("A header you provided implies functionality that is not implemented "
                              f"by this test server: {found[0]}", Header=found[0])


def int_param(params, name, default, low, high):
    value = params.get(name)
    if value is None:
        return default
    if not DIGITS.fullmatch(value) or not low <= int(value) <= high:
        raise invalid_argument(f"{name} must be an integer from {low} to {high}",
                               ArgumentName=name, ArgumentValue=value)
    return int(value)


def check_digests(req):
    """Refuse a body that Content-MD5 or an x-amz-checksum-* contradicts;
    return the checksums to store ({"sha256": base64, ...})."""
    md5 = req.header("content-md5")
    if md5 is not None:
        claimed = b64_digest(md5, 16)
        if claimed is None:
            raise S3Error(400, "InvalidDigest", "The Content-MD5 you specified was invalid.")
        if claimed != req.body.digests["md5"]:
            raise S3Error(400, "BadDigest", "The Content-MD5 you specified did not match what we received.")
    stored = {}
    for header, name, _ in CHECKSUMS:
        value = req.header(header)
        if value is None:
            continue
        claimed = b64_digest(value, len(req.body.digests[name]))
        if claimed is None:
            raise S3Error(400, "InvalidRequest", f"Value for {header} header is invalid.")
        if claimed != req.body.digests[name]:
            raise S3Error(400, "BadDigest", f"The {name.upper()} you specified did not match the "
                          "calculated checksum.")
        stored[name] = value
    return stored


def checksum_headers(checksums):
    return [(header, checksums[name]) for header, name, _ in CHECKSUMS if name in checksums]


def user_metadata(req):
    return {name.lower(): value for name, value in req.headers.items() if name.lower().startswith("x-amz-meta-")}


def byte_range(header, size):
    """(first, last) of a single 'bytes=' range, or None for the whole object
    (no Range, or one S3 ignores: malformed, several ranges, last < first);
    InvalidRange (416) when nothing of the object is in it."""
    match = RANGE.fullmatch(header.strip()) if header else None
    if not match or not (match[1] or match[2]):
        return None
    if not match[1]:
        suffix = int(match[2])
        first, last = size - suffix, size - 1
        if suffix == 0 or size == 0:
            raise unsatisfiable(header, size)
        return max(first, 0), last
    first = int(match[1])
    if match[2] and int(match[2]) < first:
        return None
    if first >= size:
        raise unsatisfiable(header, size)
    return first, min(int(match[2]) if match[2] else size - 1, size - 1)


def unsatisfiable(header, size):
    return S3Error(416, "InvalidRange", "The requested range is not satisfiable",
                   headers=[("Content-Range", f"bytes */{size}")], RangeRequested=header, ActualObjectSize=size)


def etag_listed(header, etag):
    tags = [tag.strip().removeprefix("W/").strip('"') for tag in header.split(",")]
    return "*" in tags or etag.strip('"') in tags


def local_name(element):
    """An XML tag without its namespace, which clients may or may not send."""
    return element.tag.rpartition("}")[2]


def parse_part_list(data):
    """[(part number, etag)] from a CompleteMultipartUpload body."""
    malformed = S3Error(400, "MalformedXML", "The XML you provided was not well-formed or did not "
                        "validate against our published schema")
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        raise malformed from None
    if local_name(root) != "CompleteMultipartUpload":
        raise malformed
    parts = []
    for part in root:
        fields = {local_name(c): (c.text or "").strip() for c in part} if local_name(part) == "Part" else {}
        if not DIGITS.fullmatch(fields.get("PartNumber", "")) or "ETag" not in fields:
            raise malformed
        parts.append((int(fields["PartNumber"]), fields["ETag"]))
    if not parts:
        raise malformed
    return parts


def check_part_list(upload_id, requested, parts, min_part_size):
    """S3's rules for completing: ascending part numbers, each uploaded with
    that ETag, each but the last at least min_part_size bytes."""
    numbers = [number for number, _ in requested]
    if any(a >= b for a, b in zip(numbers, numbers[1:])):
        raise S3Error(400, "InvalidPartOrder", "The list of parts was not in ascending order. The parts "
                      "list must be specified in order by part number.", UploadId=upload_id)
    for number, etag in requested:
        if number not in parts or parts[number]["etag"].strip('"') != etag.strip('"'):
            raise S3Error(400, "InvalidPart", "One or more of the specified parts could not be found. "
                          "The part may not have been uploaded, or the specified entity tag may not match "
                          "the part's entity tag.", UploadId=upload_id, PartNumber=number, ETag=etag)
    for number, etag in requested[:-1]:
        if parts[number]["size"] < min_part_size:
            raise S3Error(400, "EntityTooSmall", "Your proposed upload is smaller than the minimum "
                          "allowed size", ProposedSize=parts[number]["size"], MinSizeAllowed=min_part_size,
                          PartNumber=number, ETag=etag)


def multipart_etag(parts, numbers):
    """MD5 of the parts' binary MD5s, then '-' and the number of parts."""
    digests = b"".join(bytes.fromhex(parts[n]["etag"].strip('"')) for n in numbers)
    return '"%s-%d"' % (hashlib.md5(digests).hexdigest(), len(numbers))


def paginate(keys, prefix, delimiter, max_keys, after):
    """One ListObjectsV2 page of sorted keys: (keys, common prefixes,
    truncated, last key consumed). Keys are taken after `after`; keys that
    share a common prefix count once and are contiguous in byte order, so
    the next page resumes after the last key consumed."""
    contents, prefixes, last = [], [], None
    for key in keys:
        if not key.startswith(prefix) or key.encode() <= after.encode():
            continue
        cut = key.find(delimiter, len(prefix)) if delimiter else -1
        common = key[:cut + len(delimiter)] if cut >= 0 else None
        if common is None or not prefixes or prefixes[-1] != common:
            if len(contents) + len(prefixes) == max_keys:
                return contents, prefixes, True, last
            if common is None:
                contents.append(key)
            else:
                prefixes.append(common)
        last = key
    return contents, prefixes, False, last


def url_encoder(params):
    """encoding-type=url lets keys hold characters XML cannot carry."""
    return (lambda text: quote(text, safe="/")) if "encoding-type" in params else (lambda text: text)


def object_items(key, meta, enc):
    return [("Key", enc(key)), ("LastModified", iso_time(meta["mtime"])), ("ETag", meta["etag"]),
            ("Size", meta["size"]), ("StorageClass", "STANDARD")]


def encode_token(key):
    return base64.urlsafe_b64encode(key.encode()).decode()


def decode_token(token):
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, ValueError):
        raise invalid_argument("The continuation token provided is incorrect",
                               ArgumentName="continuation-token") from None


class S3Api:
    """The S3 operations, chosen by method, addressing and query."""

    def __init__(self, store, region, min_part_size):
        self.store, self.region, self.min_part_size = store, region, min_part_size

    def handle(self, req):
        bucket, key = self._locate(req)
        target = "object" if key else "bucket" if bucket else "service"
        operation = find_route(req.method, target, req.params)
        refuse_unsupported_headers(req)
        if bucket and bucket not in self.store.buckets:
            raise S3Error(404, "NoSuchBucket", "The specified bucket does not exist", BucketName=bucket)
        if key:
            validate_key(key)
        return getattr(self, operation)(req, bucket, key)

    def _locate(self, req):
        """(bucket, key): virtual-hosted when the Host is an existing bucket
        followed by a domain that is not just an IP address, else path-style."""
        hostname = req.header("host", "").lower()
        hostname = hostname if hostname.endswith("]") else hostname.rpartition(":")[0] or hostname
        for bucket in sorted(self.store.buckets, key=len, reverse=True):
            rest = hostname[len(bucket) + 1:]
            if hostname.startswith(bucket + ".") and rest and not is_ip(rest):
                return bucket, req.path[1:]
        bucket, _, key = req.path[1:].partition("/")
        return bucket, key

    # service and buckets

    def list_buckets(self, req, bucket, key):
        buckets = [("Bucket", [("Name", name), ("CreationDate", iso_time(created))])
                   for name, created in sorted(self.store.buckets.items())]
        return xml_response("ListAllMyBucketsResult", [("Owner", OWNER), ("Buckets", buckets)])

    def head_bucket(self, req, bucket, key):
        return Response(200, [("x-amz-bucket-region", self.region)])

    def list_objects_v2(self, req, bucket, key):
        p = req.params
        if p["list-type"] != "2" or p.get("encoding-type", "url") != "url":
            raise invalid_argument("list-type must be 2 and encoding-type, if given, url")
        prefix, delimiter = p.get("prefix", ""), p.get("delimiter", "")
        max_keys = min(int_param(p, "max-keys", MAX_LIST, 0, 2**31 - 1), MAX_LIST)
        token = p.get("continuation-token")
        after = decode_token(token) if token is not None else p.get("start-after", "")
        objects = dict(self.store.list_objects(bucket, prefix))
        keys, prefixes, truncated, last = paginate(objects, prefix, delimiter, max_keys, after)
        enc = url_encoder(p)
        items = [("Name", bucket), ("Prefix", enc(prefix)), ("KeyCount", len(keys) + len(prefixes)),
                 ("MaxKeys", max_keys), ("Delimiter", enc(delimiter) if delimiter else None),
                 ("EncodingType", p.get("encoding-type")), ("IsTruncated", truncated),
                 ("ContinuationToken", token),
                 ("NextContinuationToken", encode_token(last or after) if truncated else None),
                 ("StartAfter", enc(p["start-after"]) if "start-after" in p else None)]
        owner = [("Owner", OWNER)] if p.get("fetch-owner") == "true" else []
        return xml_response("ListBucketResult", [(tag, value) for tag, value in items if value is not None]
                            + [("Contents", object_items(k, objects[k], enc) + owner) for k in keys]
                            + [("CommonPrefixes", [("Prefix", enc(cp))]) for cp in prefixes])

    # objects

    def put_object(self, req, bucket, key):
        checksums = check_digests(req)
        meta = self._new_object_meta(req, etag=quoted_md5(req.body.digests["md5"]), size=req.body.size,
                                     checksums=checksums)
        self.store.put_object(bucket, key, req.body.path, meta, create_only=req.header("if-none-match") == "*")
        return Response(200, [("ETag", meta["etag"]), *checksum_headers(checksums)])

    @staticmethod
    def _new_object_meta(req, **fields):
        return dict(fields, content_type=req.header("content-type", "binary/octet-stream"),
                    metadata=user_metadata(req))

    def get_object(self, req, bucket, key):
        data, meta = self.store.open_object(bucket, key)
        try:
            return self._object_response(req, data, meta)
        except BaseException:
            data.close()
            raise

    def _object_response(self, req, data, meta):
        headers = [("Content-Type", meta["content_type"]), ("ETag", meta["etag"]),
                   ("Last-Modified", email.utils.formatdate(meta["mtime"], usegmt=True)),
                   ("Accept-Ranges", "bytes"), *meta["metadata"].items()]
        if req.header("x-amz-checksum-mode", "").upper() == "ENABLED":
            headers += checksum_headers(meta["checksums"])
        if_match, if_none_match = req.header("if-match"), req.header("if-none-match")
        if if_match is not None and not etag_listed(if_match, meta["etag"]):
            raise S3Error(412, "PreconditionFailed", "At least one of the pre-conditions you specified "
                          "did not hold", Condition="If-Match")
        if if_none_match is not None and etag_listed(if_none_match, meta["etag"]):
            return Response(304, headers, file=data, length=0)
        span = byte_range(req.header("range"), meta["size"])
        if span is None:
            return Response(200, headers, file=data, length=meta["size"])
        data.seek(span[0])
        headers.append(("Content-Range", "bytes %d-%d/%d" % (*span, meta["size"])))
        return Response(206, headers, file=data, length=span[1] - span[0] + 1)

    def delete_object(self, req, bucket, key):
        self.store.delete_object(bucket, key)
        return Response(204)

    # multipart uploads

    def create_upload(self, req, bucket, key):
        upload_id = self.store.create_upload(bucket, key, self._new_object_meta(req))
        return xml_response("InitiateMultipartUploadResult",
                            [("Bucket", bucket), ("Key", key), ("UploadId", upload_id)])

    def upload_part(self, req, bucket, key):
        number = int_param(req.params, "partNumber", None, 1, MAX_PARTS)
        checksums = check_digests(req)
        etag = quoted_md5(req.body.digests["md5"])
        self.store.put_part(req.params["uploadId"], bucket, key, number, req.body.path,
                            {"etag": etag, "size": req.body.size, "checksums": checksums})
        return Response(200, [("ETag", etag), *checksum_headers(checksums)])

    def list_parts(self, req, bucket, key):
        upload_id = req.params["uploadId"]
        max_parts = min(int_param(req.params, "max-parts", MAX_LIST, 0, 2**31 - 1), MAX_LIST)
        marker = int_param(req.params, "part-number-marker", 0, 0, MAX_PARTS)
        _, parts = self.store.list_parts(upload_id, bucket, key)
        numbers = sorted(n for n in parts if n > marker)
        shown = numbers[:max_parts]
        items = [("Bucket", bucket), ("Key", key), ("UploadId", upload_id), ("Initiator", OWNER),
                 ("Owner", OWNER), ("StorageClass", "STANDARD"), ("PartNumberMarker", marker),
                 ("NextPartNumberMarker", shown[-1] if shown else marker), ("MaxParts", max_parts),
                 ("IsTruncated", len(numbers) > len(shown))]
        for n in shown:
            part = parts[n]
            items.append(("Part", [("PartNumber", n), ("LastModified", iso_time(part["mtime"])),
                                   ("ETag", part["etag"]), ("Size", part["size"]),
                                   *[(element, part["checksums"][name]) for _, name, element in CHECKSUMS
                                     if name in part["checksums"]]]))
        return xml_response("ListPartsResult", items)

    def complete_upload(self, req, bucket, key):
        upload_id, requested = req.params["uploadId"], parse_part_list(req.body.read())

        def check(info, parts):
            check_part_list(upload_id, requested, parts, self.min_part_size)
            numbers = [number for number, _ in requested]
            meta = dict(etag=multipart_etag(parts, numbers), size=sum(parts[n]["size"] for n in numbers),
                        checksums={}, content_type=info["content_type"], metadata=info["metadata"])
            return numbers, meta

        meta = self.store.complete_upload(upload_id, bucket, key, check)
        location = "http://%s/%s/%s" % (req.header("host", ""), bucket, quote(key, safe="/"))
        return xml_response("CompleteMultipartUploadResult",
                            [("Location", location), ("Bucket", bucket), ("Key", key), ("ETag", meta["etag"])])

    def abort_upload(self, req, bucket, key):
        self.store.abort_upload(req.params["uploadId"], bucket, key)
        return Response(204)

    def list_uploads(self, req, bucket, key):
        prefix = req.params.get("prefix", "")
        uploads = self.store.list_uploads(bucket, prefix)
        last_key, last_id = (uploads[-1][1]["key"], uploads[-1][0]) if uploads else ("", "")
        items = [("Bucket", bucket), ("KeyMarker", ""), ("UploadIdMarker", ""), ("NextKeyMarker", last_key),
                 ("NextUploadIdMarker", last_id), ("Prefix", prefix), ("MaxUploads", MAX_LIST),
                 ("IsTruncated", False)]
        items += [("Upload", [("Key", info["key"]), ("UploadId", upload_id), ("Initiator", OWNER),
                              ("Owner", OWNER), ("StorageClass", "STANDARD"),
                              ("Initiated", iso_time(info["initiated"]))]) for upload_id, info in uploads]
        return xml_response("ListMultipartUploadsResult", items)


def is_ip(text):
    try:
        ipaddress.ip_address(text.strip("[]"))
        return True
    except ValueError:
        return False


# --- hostile answers (fault actions) ----------------------------------------

def redirect_answer(req):
    err = S3Error(307, "TemporaryRedirect", "Please re-send this request to the specified temporary "
                  "endpoint. Continue to use the original request endpoint for future requests.",
                  headers=[("Location", "http://elsewhere.invalid" + req.raw_path)],
                  Endpoint="elsewhere.invalid")
    return error_response(err, req.raw_path, "HOSTILE307")


def error200_answer(req):
    return error_response(S3Error(200, "InternalError", "We encountered an internal error. Please try again."),
                          req.raw_path, "HOSTILE200")


def huge_answer(req):
    head = b'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="%s"><!-- ' % S3_NS.encode()
    tail = b' --><IsTruncated>false</IsTruncated></ListBucketResult>'
    return Response(200, [("Content-Type", "application/xml")], head + b"x" * (20 << 20) + tail)


def list_loop_answer(req):
    return xml_response("ListBucketResult", [("Name", "kiln"), ("KeyCount", 0), ("MaxKeys", MAX_LIST),
                                             ("IsTruncated", True), ("NextContinuationToken", "c2FtZQ==")])


HOSTILE = {"redirect": redirect_answer, "error200": error200_answer, "huge": huge_answer,
           "list_loop": list_loop_answer}


# --- control endpoint state -----------------------------------------------

class Clock:
    """Wall-clock time shifted by an offset, so tests can fake clock skew."""

    def __init__(self):
        self.offset_s = 0.0

    def now(self):
        return time.time() + self.offset_s

    def state(self):
        return {"offset_s": self.offset_s}

    def set(self, body):
        offset = body.get("offset_s") if isinstance(body, dict) and len(body) == 1 else None
        if not isinstance(offset, (int, float)) or isinstance(offset, bool):
            raise ValueError('expected {"offset_s": SECONDS}')
        self.offset_s = float(offset)


def is_whole(value):
    return isinstance(value, int) and not isinstance(value, bool)


class Faults:
    """Fault rules: the first rule whose method and substring match a
    request applies to it and loses one of its count; at 0 it is gone.
    Faults hit requests that passed verification, after their body arrived.
      status   answer with that status and S3's error XML for it
      drop     close the connection without answering (nothing is done)
      delay    sleep ms milliseconds, then handle the request normally
      truncate handle it normally, send the headers with the full
               Content-Length and half the body, then close
    Hostile answers (nothing is done):
      redirect  307 TemporaryRedirect to another endpoint (a Location header)
      error200  200 OK with an <Error> InternalError body, as S3 can answer
      huge      200 OK with a 20 MiB XML body
      list_loop a ListObjectsV2 page with no keys, IsTruncated and always
                the same NextContinuationToken
      barrier   hold each of the rule's `count` requests until all of them
                have arrived (at most 30 s), then handle them normally: two
                clients meet at the same step"""

    EXTRA_FIELDS = {"status": {"status"}, "delay": {"ms"}, "drop": set(), "truncate": set(),
                    "redirect": set(), "error200": set(), "huge": set(), "list_loop": set(),
                    "barrier": set()}

    def __init__(self):
        self.rules, self.lock = [], threading.Lock()

    def add(self, rules):
        if not isinstance(rules, list):
            raise ValueError("the body must be a JSON list of rules")
        checked = [self._checked(rule) for rule in rules]
        for rule in checked:
            if rule["action"] == "barrier":
                rule["barrier"] = threading.Barrier(rule["count"], timeout=30)
        with self.lock:
            self.rules += checked

    @classmethod
    def _checked(cls, rule):
        """The rule with its defaults, or ValueError saying what is wrong."""
        action = rule.get("action") if isinstance(rule, dict) else None
        if action not in cls.EXTRA_FIELDS:
            raise ValueError(f"each rule needs an action among {sorted(cls.EXTRA_FIELDS)}: {rule!r}")
        unknown = set(rule) - {"method", "match", "action", "count"} - cls.EXTRA_FIELDS[action]
        missing = cls.EXTRA_FIELDS[action] - set(rule)
        if unknown or missing:
            raise ValueError(f"rule {rule!r}: unknown fields {sorted(unknown)}, missing {sorted(missing)}")
        rule = {"method": "*", "match": "", "count": 1, **rule}
        if not (isinstance(rule["method"], str) and isinstance(rule["match"], str)
                and is_whole(rule["count"]) and rule["count"] >= 1
                and (action != "status" or is_whole(rule["status"]) and 400 <= rule["status"] <= 599)
                and (action != "delay" or is_whole(rule["ms"]) and rule["ms"] >= 0)):
            raise ValueError(f"rule {rule!r}: method and match are strings, count >= 1, "
                             "status 400..599, ms >= 0 (integers)")
        rule["method"] = rule["method"].upper()
        return rule

    def take(self, method, target):
        """A copy of the rule that applies to this request, or None."""
        with self.lock:
            for rule in self.rules:
                if rule["method"] in ("*", method) and rule["match"] in target:
                    rule["count"] -= 1
                    if rule["count"] == 0:
                        self.rules.remove(rule)
                    return dict(rule)
        return None

    def listing(self):
        with self.lock:
            return [{k: v for k, v in rule.items() if k != "barrier"} for rule in self.rules]

    def clear(self, _body=None):
        with self.lock:
            self.rules.clear()


class RequestLog:
    """Every S3 request seen, for tests to assert on what a client did:
    method, path and query as received, status (null: no answer), signed
    (the signature verified), error (the S3 Code) and fault (the action of
    the rule that hit it). Also writes the --log lines."""

    def __init__(self, path):
        self.entries, self.lock = [], threading.Lock()
        self.out = open(path, "a", buffering=1) if path else sys.stderr

    def record(self, entry, control=False):
        """Keep entry (unless it is a control request) and write its line."""
        with self.lock:
            if not control:
                self.entries.append(entry)
        target = entry["path"] + ("?" + entry["query"] if entry["query"] else "")
        fault = " fault=" + entry["fault"] if entry["fault"] else ""
        self.write(f"{entry['method']} {target} {entry['status']} {entry['error'] or '-'}{fault}")

    def write(self, line):
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()

    def listing(self):
        with self.lock:
            return list(self.entries)

    def clear(self, _body=None):
        with self.lock:
            self.entries.clear()


# --- HTTP -----------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive, as S3 clients expect
    server_version = "s3v4_server"
    sys_version = ""
    timeout = 60                    # an idle connection or a stalled body gives up

    def do_GET(self):
        if self.path.startswith("/_ctl/"):
            self.control()
        else:
            self.s3()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

    def date_time_string(self, timestamp=None):
        # the Date header follows the simulated clock, as a skewed server's would
        return email.utils.formatdate(self.server.clock.now() if timestamp is None else timestamp, usegmt=True)

    def log_request(self, code="-", size="-"):
        pass  # RequestLog writes one line per request instead

    def log_message(self, fmt, *args):
        self.server.requests.write("# " + (fmt % args))

    def s3(self):
        server, request_id = self.server, secrets.token_hex(8).upper()
        path, _, query = self.path.partition("?")
        entry = {"method": self.command, "path": path, "query": query, "status": None,
                 "signed": False, "error": None, "fault": None}
        req = None
        try:
            req = Request(self.command, self.path, self.headers)
            req.body = self.read_body()
            server.verifier.verify(req)
            entry["signed"] = True
            fault = server.faults.take(req.method, self.path)
            entry["fault"] = fault and fault["action"]
            response = self.answer(req, fault)
        except S3Error as err:
            entry["error"] = err.code
            response = error_response(err, path, request_id)
        except ClientGone as err:
            entry["error"], response = str(err), None
            self.close_connection = True
        except Exception:  # a bug here: say so loudly rather than hang the client
            entry["error"] = "InternalError"
            self.close_connection = True  # part of the body may be unread
            server.requests.write(traceback.format_exc().rstrip())
            response = error_response(S3Error(500, "InternalError", "s3v4_server failed; see its log"),
                                      path, request_id)
        finally:
            if req is not None and req.body is not None:
                req.body.discard()
        # logged before answering, so a client that asks for the log as soon
        # as it has its answer finds this request in it
        entry["status"] = response and response.status
        server.requests.record(entry)
        if response is not None:
            self.send(response, request_id, truncate=entry["fault"] == "truncate")

    def answer(self, req, fault):
        """The answer to a verified request, as a fault rule alters it;
        None to answer nothing."""
        action = fault and fault["action"]
        if action == "drop":
            self.close_connection = True
            return None
        if action == "delay":
            time.sleep(fault["ms"] / 1000)
        if action == "status":
            raise S3Error(fault["status"], FAULT_CODES.get(fault["status"], "InjectedFault"),
                          "injected by a fault rule of s3v4_server")
        if action == "barrier":
            with contextlib.suppress(threading.BrokenBarrierError):
                fault["barrier"].wait()
        if action in HOSTILE:
            return HOSTILE[action](req)
        return self.server.api.handle(req)

    def read_body(self):
        """The body, received before anything is checked so that an answer
        never leaves unread bytes on a keep-alive connection."""
        length = self.headers.get("content-length")
        if "transfer-encoding" in self.headers:
            self.close_connection = True
            raise not_implemented("A header you provided implies functionality that is not implemented",
                                  Header="Transfer-Encoding")
        if length is None and self.command == "PUT":
            raise S3Error(411, "MissingContentLength", "You must provide the Content-Length HTTP header.")
        if length is not None and (not DIGITS.fullmatch(length) or int(length) > MAX_PUT_BYTES):
            self.close_connection = True
            raise S3Error(400, "EntityTooLarge" if DIGITS.fullmatch(length) else "InvalidArgument",
                          f"Content-Length {length} is not a size this server accepts (0..{MAX_PUT_BYTES})")
        try:
            return Body(self.rfile, int(length or 0), self.server.store.tmp)
        except (ConnectionError, TimeoutError) as err:
            raise ClientGone(f"client gone inside the body: {err}") from None

    def send(self, response, request_id, truncate=False):
        """Write the answer; HEAD, 204 and 304 carry no body, and only 204
        and 304 go without Content-Length."""
        try:
            self.send_response(response.status)
            for name, value in response.headers:
                self.send_header(name, value)
            self.send_header("x-amz-request-id", request_id)
            if response.status not in (204, 304):
                self.send_header("Content-Length", str(response.length))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD" and response.status not in (204, 304):
                self.write_body(response, response.length // 2 if truncate else response.length)
            if truncate:
                self.close_connection = True
        except OSError:
            self.close_connection = True
        finally:
            if response.file is not None:
                response.file.close()

    def write_body(self, response, limit):
        if response.file is None:
            self.wfile.write(response.body[:limit])
            return
        while limit:
            chunk = response.file.read(min(limit, CHUNK))
            if not chunk:  # the file shrank under us: the length sent is wrong
                self.close_connection = True
                return
            self.wfile.write(chunk)
            limit -= len(chunk)

    def control(self):
        """/_ctl/: fault rules, the request log and the clock, in JSON."""
        entry = {"method": self.command, "path": self.path, "query": "", "status": None,
                 "signed": False, "error": None, "fault": None}
        try:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            status, payload = self.server.control(self.command, self.path, body)
        except ValueError as err:
            status, payload = 400, {"error": str(err)}
        data = json.dumps(payload).encode()
        entry["status"] = status
        self.server.requests.record(entry, control=True)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


class S3Server(ThreadingHTTPServer):
    daemon_threads = True      # an idle keep-alive connection must not delay exit
    request_queue_size = 64    # clients under test open connections in parallel

    def __init__(self, args):
        self.clock = Clock()
        self.store = Store(args.root, args.buckets)
        self.verifier = Verifier(args, self.clock)
        self.api = S3Api(self.store, args.region, args.min_part_size)
        self.faults = Faults()
        self.requests = RequestLog(args.log)
        super().__init__(("127.0.0.1", args.port), Handler)

    def server_bind(self):
        # HTTPServer.server_bind looks the host name up (getfqdn), which can
        # stall on a machine without DNS; nothing here needs it
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def control(self, method, path, body):
        """(status, JSON payload) for a control request: GET reads a
        resource, POST and DELETE change it and answer its new state."""
        resources = {
            "/_ctl/faults": (self.faults.listing, {"POST": self.faults.add, "DELETE": self.faults.clear}),
            "/_ctl/log": (self.requests.listing, {"DELETE": self.requests.clear}),
            "/_ctl/clock": (self.clock.state, {"POST": self.clock.set}),
        }
        state, changes = resources.get(path, (None, {}))
        if state is None or method not in ("GET", *changes):
            return 404, {"error": f"no control request {method} {path}"}
        if method != "GET":
            changes[method](body)
        return 200, state()


# --- main -----------------------------------------------------------------

def parse_args(argv):
    env = os.environ.get
    p = argparse.ArgumentParser(description="S3 test server that verifies Signature V4 with botocore")
    p.add_argument("--root", required=True, help="directory holding buckets, sidecars and uploads")
    p.add_argument("--port-file", required=True, help="written with the port once listening")
    p.add_argument("--port", type=int, default=0, help="0: any free port")
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--access-key", default=env("S3V4_ACCESS_KEY"))
    p.add_argument("--secret-key", default=env("S3V4_SECRET_KEY"))
    p.add_argument("--session-token", default=env("S3V4_SESSION_TOKEN") or None)
    p.add_argument("--bucket", action="append", dest="buckets", help="repeatable; default: kiln")
    p.add_argument("--min-part-size", type=int, default=5 << 20, help="bytes; every part but the last")
    p.add_argument("--log", help="one line per request (default: stderr)")
    p.add_argument("--missing-token-code", choices=("InvalidToken", "InvalidAccessKeyId"), default="InvalidToken",
                   help="the answer to a request without the session token (AWS: InvalidAccessKeyId)")
    args = p.parse_args(argv)
    if not args.access_key or not args.secret_key:
        p.error("an access key and a secret key are required (arguments or S3V4_* variables)")
    args.buckets = args.buckets or ["kiln"]
    bad = [b for b in args.buckets if not BUCKET_NAME.fullmatch(b)]
    if bad:
        p.error(f"invalid bucket names: {bad}")
    return args


def write_port_file(path, port):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


def main(argv=None):
    args = parse_args(argv)
    server = S3Server(args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    write_port_file(args.port_file, server.server_address[1])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
