#!/usr/bin/python3
"""Produce JSON Lines records to a topic with confluent_kafka (librdkafka's
Python client, as Debian ships it), logging each record the broker
acknowledged.

Usage: kafka_produce.py BOOTSTRAP TOPIC INPUT LOG [--rate N]

Every line of INPUT is one message (key: its line number; a header
"producer: python"); LOG receives the acknowledged lines, as sent. --rate
limits messages per second (0: as fast as possible). Exits 1 if any message
was not acknowledged.
"""

import argparse
import sys
import time

from confluent_kafka import Producer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("input")
    ap.add_argument("log")
    ap.add_argument("--rate", type=float, default=0)
    a = ap.parse_args()
    failed = 0
    log = open(a.log, "wb")

    def delivered(err, msg):
        nonlocal failed
        if err is not None:
            failed += 1
            print("not delivered: %s" % err, file=sys.stderr)
        else:
            log.write(msg.value() + b"\n")

    p = Producer({"bootstrap.servers": a.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    start = time.monotonic()
    with open(a.input, "rb") as f:
        for n, line in enumerate(f):
            line = line.rstrip(b"\n")
            while True:
                try:
                    p.produce(a.topic, value=line, key=str(n).encode(), headers=[("producer", b"python")],
                              on_delivery=delivered)
                    break
                except BufferError:
                    p.poll(0.1)
            p.poll(0)
            if a.rate:
                ahead = (n + 1) / a.rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
    left = p.flush(60)
    log.close()
    if left or failed:
        print("kafka_produce: %d not acknowledged, %d failed" % (left, failed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
