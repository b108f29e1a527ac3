#!/usr/bin/python3
"""A test OpenLineage HTTP endpoint (tests/integration/openlineage.sh).

POST / (any path): the event is appended as one line to --log, when the
request passes: it answers 503 to the first --fail-first requests, 401 when
--token is given and the Authorization header is not "Bearer <token>", 400
to every request with --refuse-all, else 200. The port it listens on
(127.0.0.1, --port or a free one) is written to --port-file once it listens.
Every request's status goes to --log + ".requests" (method, path, status).
Standard library only.
"""
import argparse
import http.server
import os
import threading


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--token")
    ap.add_argument("--refuse-all", action="store_true")
    a = ap.parse_args()
    lock = threading.Lock()
    state = {"requests": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n)
            with lock:
                state["requests"] += 1
                if state["requests"] <= a.fail_first:
                    status = 503
                elif a.token is not None and self.headers.get("Authorization") != "Bearer " + a.token:
                    status = 401
                elif a.refuse_all:
                    status = 400
                else:
                    status = 200
                    with open(a.log, "ab") as f:
                        f.write(body.replace(b"\n", b" ") + b"\n")
                with open(a.log + ".requests", "a") as f:
                    f.write("%s %s %d\n" % (self.command, self.path, status))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
