#!/usr/bin/python3
"""Produce JSON Lines records to a topic with confluent_kafka (librdkafka's
Python client, as Debian ships it), logging each record the broker
acknowledged.

Usage: kafka_produce.py BOOTSTRAP TOPIC INPUT LOG [--rate N] [--partition P]
                        [--tombstone LINE]

Every line of INPUT is one message, its bytes as they are (UTF-8 or not; an
empty line is an empty value) (key: its line number; a header "producer:
python"); LOG receives the acknowledged lines, as sent. --rate limits
messages per second (0: as fast as possible). --partition sends every
message to partition P (default: by key). --tombstone LINE sends the lines
equal to LINE as tombstones (a null value; logged as LINE). Exits 1 if any
message was not acknowledged.
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
    ap.add_argument("--partition", type=int, default=-1)
    ap.add_argument("--tombstone", default=None)
    a = ap.parse_args()
    tombstone = a.tombstone.encode() if a.tombstone is not None else None
    failed = 0
    log = open(a.log, "wb")

    def delivered(err, msg):
        nonlocal failed
        if err is not None:
            failed += 1
            print("not delivered: %s" % err, file=sys.stderr)
        else:
            log.write((msg.value() if msg.value() is not None else tombstone) + b"\n")

    p = Producer({"bootstrap.servers": a.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    start = time.monotonic()
    with open(a.input, "rb") as f:
        for n, line in enumerate(f):
            line = line.rstrip(b"\n")
            value = None if line == tombstone else line
            while True:
                try:
                    p.produce(a.topic, value=value, key=str(n).encode(), headers=[("producer", b"python")],
                              partition=a.partition, on_delivery=delivered)
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
