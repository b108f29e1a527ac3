#!/usr/bin/python3
"""A stand-in for systemd's notify socket (sd_notify(3)) for tests/integration/systemd.sh.

notify_listen.py ADDRESS OUT: binds an AF_UNIX datagram socket at ADDRESS (a
path, or @NAME for an abstract address), writes OUT.bound once bound, then
appends one JSON line per datagram to OUT: {"t": seconds (monotonic),
"n": sequence number, "lines": ["READY=1", ...]}, flushed at once. Runs
until killed.
"""
import json
import os
import socket
import sys
import time


def main():
    address, out = sys.argv[1], sys.argv[2]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if address.startswith("@"):
        sock.bind("\0" + address[1:])
    else:
        if os.path.exists(address):
            os.unlink(address)
        sock.bind(address)
    with open(out + ".bound", "w") as f:
        f.write(address + "\n")
    n = 0
    with open(out, "a") as f:
        while True:
            data = sock.recv(65536)
            n += 1
            lines = data.decode("utf-8", "replace").split("\n")
            f.write(json.dumps({"t": time.monotonic(), "n": n, "lines": lines}) + "\n")
            f.flush()


if __name__ == "__main__":
    main()
