#!/usr/bin/python3
"""Produce Avro records in the Confluent wire format (magic byte 0, the
4-byte big-endian schema id, the Avro binary datum written by python3-avro)
to one partition of a topic with python3-confluent-kafka, registering the
schemas with the test registry (schema_registry.py) first; then hostile
messages that kiln must quarantine. Writes what it sent, in offset order,
for kafka_avro_check.py.

Usage: kafka_avro_produce.py BOOTSTRAP TOPIC REGISTRY_URL AUTH OUT_DIR
                             [--records N] [--seed S] [--first-seq K] [--no-hostile]

OUT_DIR gets v1.avsc and v2.avsc (the schemas: v2 adds an optional field),
schemas.json ({id: schema text}, the registry's) and sent.jsonl (appended):
one line per acknowledged message {"offset", "value_b64", "schema_id",
"code"}: code null for a record kiln curates, else the quarantine code
expected. Half the N records use v1, half v2 (schema evolution on one
topic).
"""

import argparse
import base64
import datetime
import decimal
import io
import json
import os
import random
import struct
import sys
import urllib.request
import uuid

import avro.io
import avro.schema
from confluent_kafka import Producer

UTC = datetime.timezone.utc


def schema_v1(extra=False):
    fields = [
        {"name": "seq", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "ok", "type": "boolean"},
        {"name": "n", "type": "int"},
        {"name": "amount", "type": "double"},
        {"name": "score", "type": "float"},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "big", "type": {"type": "fixed", "name": "Big", "size": 8, "logicalType": "decimal",
                                 "precision": 18, "scale": 4}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "atu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "blob", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
            {"name": "x", "type": "int"}, {"name": "y", "type": ["null", "double"]}]}},
    ]
    if extra:
        fields.append({"name": "extra", "type": ["null", "string"], "default": None})
    return {"type": "record", "name": "Ev", "namespace": "kiln.test", "fields": fields}


NODE = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}


def register(url, auth, subject, schema):
    body = json.dumps({"schema": json.dumps(schema)}).encode()
    req = urllib.request.Request(url + "/subjects/%s/versions" % subject, data=body, method="POST",
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json",
                                          "Authorization": "Basic " + base64.b64encode(auth.encode()).decode()})
    return json.load(urllib.request.urlopen(req))["id"]


def encode(schema, datum):
    buf = io.BytesIO()
    avro.io.DatumWriter(schema).write(datum, avro.io.BinaryEncoder(buf))
    return buf.getvalue()


def frame(sid, payload):
    return b"\x00" + struct.pack(">I", sid) + payload


def record(rng, seq, extra):
    def ts(unit):
        base = datetime.datetime(1960, 1, 1, tzinfo=UTC)
        us = rng.randrange(0, 100 * 365 * 86400 * 10**6)
        if unit == "ms":
            us -= us % 1000
        return base + datetime.timedelta(microseconds=us)

    r = {
        "seq": seq,
        "user": "u%04d" % rng.randrange(500),
        "ok": rng.random() < 0.5,
        "n": rng.randrange(-2**31, 2**31),
        "amount": rng.choice([0.1, 1e300, -2.5e-300, 123456.789, rng.uniform(-1e6, 1e6)]),
        "score": rng.choice([0.1, 3.4e38, 1e-45, rng.uniform(-1, 1)]),
        "price": decimal.Decimal(rng.randrange(-10**9 + 1, 10**9)).scaleb(-2),
        "big": decimal.Decimal(rng.randrange(-10**17, 10**17)).scaleb(-4),
        "day": datetime.date(1970, 1, 1) + datetime.timedelta(days=rng.randrange(-20000, 30000)),
        "at": ts("ms"),
        "atu": ts("us"),
        "tm": datetime.time(rng.randrange(24), rng.randrange(60), rng.randrange(60), rng.randrange(1000) * 1000),
        "tu": datetime.time(rng.randrange(24), rng.randrange(60), rng.randrange(60), rng.randrange(10**6)),
        "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "color": rng.choice(["RED", "GREEN", "BLUE"]),
        "tags": [rng.choice(["a", "b\"q", "é", "\u2028", "\\", "\n"]) for _ in range(rng.randrange(4))],
        "attrs": {"k%d" % i: rng.randrange(-2**63, 2**63) for i in range(rng.randrange(3))},
        "note": rng.choice([None, "", "text \"quoted\"", "ünïcode"]),
        "blob": bytes(rng.getrandbits(8) for _ in range(rng.randrange(6))),
        "fx": bytes(rng.getrandbits(8) for _ in range(4)),
        "inner": {"x": rng.randrange(-100, 100), "y": rng.choice([None, 0.5, -1e-10])},
    }
    if extra:
        r["extra"] = rng.choice([None, "more"])
    return r


def zigzag(v):
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("registry")
    ap.add_argument("auth")
    ap.add_argument("out")
    ap.add_argument("--records", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--first-seq", type=int, default=0)
    ap.add_argument("--no-hostile", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    v1, v2 = schema_v1(), schema_v1(extra=True)
    for name, s in (("v1", v1), ("v2", v2)):
        with open(os.path.join(a.out, name + ".avsc"), "w") as f:
            json.dump(s, f, indent=1)
    id1 = register(a.registry, a.auth, a.topic + "-value", v1)
    id2 = register(a.registry, a.auth, a.topic + "-value", v2)
    idn = register(a.registry, a.auth, "node-value", NODE)
    with open(os.path.join(a.out, "schemas.json"), "w") as f:
        json.dump({str(id1): json.dumps(v1), str(id2): json.dumps(v2), str(idn): json.dumps(NODE)}, f)
    p1, p2 = avro.schema.parse(json.dumps(v1)), avro.schema.parse(json.dumps(v2))

    msgs = []  # (bytes, schema id, expected code)
    for i in range(a.records):
        extra = i >= a.records // 2
        msgs.append((frame(id2 if extra else id1, encode(p2 if extra else p1,
                                                         record(rng, a.first_seq + i, extra))),
                     id2 if extra else id1, None))
    if not a.no_hostile:
        good = encode(p1, record(rng, 10**6, False))
        nan = record(rng, 10**6 + 1, False)
        nan["amount"] = float("nan")
        node = b"\x02" * 100 + b"\x00"  # 100 nested Nodes: deeper than kiln's 64
        msgs += [
            (frame(id1, good[: len(good) // 2]), id1, "avro_decode"),  # truncated
            (frame(id1, b"\x80"), id1, "avro_decode"),  # a varint cut short
            (frame(id1, b"\x80" * 11 + b"\x00"), id1, "avro_decode"),  # a varint of 12 bytes
            (frame(id1, b"\x02" + zigzag(-5) + b"abc"), id1, "avro_decode"),  # a negative length
            (frame(id1, b"\x02" + zigzag(2**31) + b"x" * 16), id1, "avro_decode"),  # a 2 GB string
            (frame(id1, good + b"\x00"), id1, "avro_decode"),  # a byte left over
            (frame(idn, node), idn, "avro_decode"),  # recursion past the bound
            (frame(9999, good), 9999, "schema_unknown"),
            (b"\x01" + frame(id1, good)[1:], id1, "avro_decode"),  # wrong magic byte
            (b"\x00\x00", 0, "avro_decode"),  # shorter than the header
            (frame(id1, encode(p1, nan)), id1, "not_finite"),
        ]

    sent = []
    failed = []

    def delivered(err, msg):
        if err:
            failed.append(err)
        else:
            sent.append((msg.offset(), msg.value()))

    prod = Producer({"bootstrap.servers": a.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for value, sid, code in msgs:
        prod.produce(a.topic, value=value, partition=0, on_delivery=delivered)
        prod.poll(0)
    prod.flush(30)
    if failed or len(sent) != len(msgs):
        print("not acknowledged: %d of %d (%s)" % (len(msgs) - len(sent), len(msgs), failed[:1]), file=sys.stderr)
        return 1
    by_value = {}
    for value, sid, code in msgs:
        by_value.setdefault(value, []).append((sid, code))
    with open(os.path.join(a.out, "sent.jsonl"), "a") as f:
        for offset, value in sorted(sent):
            sid, code = by_value[value].pop(0)
            f.write(json.dumps({"offset": offset, "value_b64": base64.b64encode(value).decode(),
                                "schema_id": sid, "code": code}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
