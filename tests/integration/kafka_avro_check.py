#!/usr/bin/python3
"""Checks a Kafka Avro run against what kafka_avro_produce.py sent: every
message ends once, curated or quarantined with its expected code, and the
raw zone holds its bytes exactly.

Usage: kafka_avro_check.py SENT SCHEMAS CURATED QUARANTINE RAW

SENT: sent.jsonl; SCHEMAS: schemas.json; CURATED: the curated records of
every split (kiln cat), JSON Lines; QUARANTINE: `kiln quarantine ls`
output; RAW: `kiln raw cat` (jsonl). A curated record is found by its seq
and compared field by field with python3-avro's decoding of the bytes sent,
in the JSON forms docs/STREAMING.md gives: timestamps RFC 3339 UTC with 3
or 6 digits, dates YYYY-MM-DD, times HH:MM:SS.fff(fff), decimals with
exactly `scale` digits (compared as text), bytes and fixed base64, unions
unwrapped, floats and doubles reading back as the same value. Prints one
line per problem and "N records checked"; exits 1 on any problem.
"""

import base64
import datetime
import decimal
import io
import json
import struct
import sys

import avro.io
import avro.schema

problems = []


def expected_form(schema, v):
    """python3-avro's value -> (kind, expected): kind says how to compare."""
    t = schema.type
    lt = schema.get_prop("logicalType")
    if t == "union":
        if v is None:
            return ("exact", None)
        for b in schema.schemas:
            if b.type == "null":
                continue
            if avro.io.validate(b, v):
                return expected_form(b, v)
    if lt == "decimal":
        scale = schema.get_prop("scale") or 0
        return ("number_text", format(decimal.Decimal(v).quantize(decimal.Decimal(1).scaleb(-scale)), "f"))
    if lt in ("timestamp-millis", "timestamp-micros"):
        v = v.astimezone(datetime.timezone.utc)
        frac = "%03d" % (v.microsecond // 1000) if lt == "timestamp-millis" else "%06d" % v.microsecond
        return ("exact", v.strftime("%Y-%m-%dT%H:%M:%S.") + frac + "Z")
    if lt == "date":
        return ("exact", v.isoformat())
    if lt in ("time-millis", "time-micros"):
        frac = "%03d" % (v.microsecond // 1000) if lt == "time-millis" else "%06d" % v.microsecond
        return ("exact", "%02d:%02d:%02d.%s" % (v.hour, v.minute, v.second, frac))
    if t in ("bytes", "fixed"):
        return ("exact", base64.b64encode(v).decode())
    if t == "float":
        return ("float", v)
    if t == "double":
        return ("double", v)
    if t == "record":
        return ("record", {f.name: expected_form(f.type, v[f.name]) for f in schema.fields})
    if t == "array":
        return ("array", [expected_form(schema.items, x) for x in v])
    if t == "map":
        return ("map", {k: expected_form(schema.values, x) for k, x in v.items()})
    if t in ("int", "long"):
        return ("int", v)
    return ("exact", v)


def same(kind_exp, got, path):
    kind, exp = kind_exp
    if kind == "exact":
        ok = got == exp and type(got) is type(exp)
    elif kind == "int":
        ok = isinstance(got, tuple) is False and type(got) is int and got == exp
    elif kind == "number_text":
        ok = isinstance(got, tuple) and got[1] == exp
    elif kind == "double":
        ok = isinstance(got, tuple) and float(got[1]) == exp
    elif kind == "float":
        ok = isinstance(got, tuple) and struct.pack("<f", float(got[1])) == struct.pack("<f", exp)
    elif kind in ("record", "map"):
        ok = isinstance(got, dict) and list(got) == list(exp) if kind == "record" else isinstance(got, dict) and set(got) == set(exp)
        if ok:
            for k in exp:
                same(exp[k], got[k], path + "." + k)
        else:
            problems.append("%s: keys %s, expected %s" % (path, list(got) if isinstance(got, dict) else got, list(exp)))
        return
    elif kind == "array":
        ok = isinstance(got, list) and len(got) == len(exp)
        if ok:
            for i, (e, g) in enumerate(zip(exp, got)):
                same(e, g, "%s[%d]" % (path, i))
            return
    else:
        ok = False
    if not ok:
        problems.append("%s: got %r, expected %r (%s)" % (path, got, exp, kind))


def main():
    sent_path, schemas_path, curated_path, quarantine_path, raw_path = sys.argv[1:6]
    schemas = {int(k): avro.schema.parse(v) for k, v in json.load(open(schemas_path)).items()}
    sent = [json.loads(l) for l in open(sent_path)]
    curated = {}
    for line in open(curated_path):
        rec = json.loads(line, parse_float=lambda s: ("num", s))
        seq = rec.get("seq")
        if seq in curated:
            problems.append("seq %s curated twice" % seq)
        curated[seq] = rec
    quarantined = {}
    for line in open(quarantine_path):
        f = line.split()
        if len(f) >= 4:
            off = int(f[2])
            if off in quarantined:
                problems.append("offset %d quarantined twice" % off)
            quarantined[off] = f[3]
    raw = {}
    for line in open(raw_path):
        r = json.loads(line)
        raw[r["offset"]] = base64.b64decode(r["value_base64"]) if "value_base64" in r else r["value"].encode()
    seen_seq = set()
    for s in sent:
        off, value = s["offset"], base64.b64decode(s["value_b64"])
        if raw.get(off) != value:
            problems.append("offset %d: the raw zone does not hold the bytes sent" % off)
        if s["code"]:
            if quarantined.get(off) != s["code"]:
                problems.append("offset %d: quarantined as %s, expected %s" % (off, quarantined.get(off), s["code"]))
            continue
        if off in quarantined:
            problems.append("offset %d: quarantined as %s, expected curated" % (off, quarantined[off]))
            continue
        schema = schemas[s["schema_id"]]
        datum = avro.io.DatumReader(schema).read(avro.io.BinaryDecoder(io.BytesIO(value[5:])))
        seq = datum["seq"]
        seen_seq.add(seq)
        if seq not in curated:
            problems.append("offset %d (seq %d): not curated" % (off, seq))
            continue
        same(expected_form(schema, datum), curated[seq], "seq %d" % seq)
    for seq in curated:
        if seq not in seen_seq:
            problems.append("seq %s curated but not sent as a valid record" % seq)
    for p in problems[:30]:
        print(p)
    print("%d records checked, %d curated, %d quarantined, %d problems"
          % (len(sent), len(curated), len(quarantined), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
