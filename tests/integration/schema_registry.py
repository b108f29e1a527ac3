#!/usr/bin/python3
"""A Confluent-compatible schema registry for the tests: the REST subset
kiln and the test producers use, schemas kept in memory.

Usage: schema_registry.py PORT_FILE [--port N] [--auth USER:PASSWORD]
                          [--fail-first N] [--log FILE] [--load FILE]
                          [--tls CERT KEY]

  GET  /schemas/ids/{id}              {"schema": "<the schema's JSON>"} or 404
                                      {"error_code": 40403, ...}
  GET  /subjects                      ["subject", ...]
  GET  /subjects/{s}/versions         [1, 2, ...] or 404 (40401)
  GET  /subjects/{s}/versions/{v}     {"subject","version","id","schema"}
  POST /subjects/{s}/versions         {"schema": "..."} -> {"id": N} (the same
                                      schema text gets the same id again)

With --auth every request needs HTTP basic auth (401 otherwise). With
--fail-first N the first N GET /schemas/ids answer 503. --load starts
with the schemas of a JSON file {id: schema text}; --tls serves HTTPS with
that certificate and key. Writes the port it
listens on (127.0.0.1) to PORT_FILE; --log gets one line per request
("METHOD PATH STATUS"). Runs until killed.
"""

import argparse
import base64
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
schemas = {}  # id -> schema text
ids = {}  # schema text -> id
subjects = {}  # subject -> [id, ...] (version i+1)
state = {"fail": 0}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        if self.server.logf:
            with lock:
                self.server.logf.write("%s %s %d\n" % (self.command, self.path, status))
                self.server.logf.flush()

    def authorised(self):
        if not self.server.auth:
            return True
        want = "Basic " + base64.b64encode(self.server.auth.encode()).decode()
        if self.headers.get("Authorization") == want:
            return True
        self.answer(401, {"error_code": 401, "message": "Unauthorized"})
        return False

    def do_GET(self):
        if not self.authorised():
            return
        m = re.fullmatch(r"/schemas/ids/(\d+)", self.path)
        if m:
            with lock:
                if state["fail"] > 0:
                    state["fail"] -= 1
                    fail = True
                else:
                    fail = False
            if fail:
                return self.answer(503, {"error_code": 50003, "message": "unavailable"})
            s = schemas.get(int(m.group(1)))
            if s is None:
                return self.answer(404, {"error_code": 40403, "message": "Schema not found"})
            return self.answer(200, {"schema": s})
        if self.path == "/subjects":
            return self.answer(200, sorted(subjects))
        m = re.fullmatch(r"/subjects/([^/]+)/versions(?:/(\d+))?", self.path)
        if m:
            vs = subjects.get(m.group(1))
            if vs is None:
                return self.answer(404, {"error_code": 40401, "message": "Subject not found"})
            if m.group(2) is None:
                return self.answer(200, list(range(1, len(vs) + 1)))
            v = int(m.group(2))
            if not 1 <= v <= len(vs):
                return self.answer(404, {"error_code": 40402, "message": "Version not found"})
            return self.answer(200, {"subject": m.group(1), "version": v, "id": vs[v - 1], "schema": schemas[vs[v - 1]]})
        self.answer(404, {"error_code": 404, "message": "Not found"})

    def do_POST(self):
        if not self.authorised():
            return
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        m = re.fullmatch(r"/subjects/([^/]+)/versions", self.path)
        if not m:
            return self.answer(404, {"error_code": 404, "message": "Not found"})
        try:
            text = json.loads(body)["schema"]
            json.loads(text)
        except (ValueError, KeyError, TypeError):
            return self.answer(422, {"error_code": 42201, "message": "Invalid schema"})
        with lock:
            if text not in ids:
                ids[text] = len(schemas) + 1
                schemas[ids[text]] = text
            vs = subjects.setdefault(m.group(1), [])
            if ids[text] not in vs:
                vs.append(ids[text])
            sid = ids[text]
        self.answer(200, {"id": sid})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port_file")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--auth")
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--log")
    ap.add_argument("--load", help="a JSON file {id: schema} to start with")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    a = ap.parse_args()
    state["fail"] = a.fail_first
    if a.load:
        for k, v in json.load(open(a.load)).items():
            schemas[int(k)] = v
            ids[v] = int(k)
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    if a.tls:
        import ssl

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls[0], a.tls[1])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.auth = a.auth
    srv.logf = open(a.log, "a") if a.log else None
    with open(a.port_file + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.replace(a.port_file + ".tmp", a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
