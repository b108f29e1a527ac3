#!/usr/bin/python3
"""Checks OpenLineage events (tests/integration/openlineage.sh): each line of
each EVENTS file is one JSON event.

  openlineage_check.py validate --spec DIR EVENTS...
      every event validates against DIR/OpenLineage.json's RunEvent, every
      facet container against each facet schema of DIR/facets/ (their $refs
      to the spec resolved locally), every standard facet is one of those
      files' and names its schema in _schemaURL, kiln's own facets (kiln_*)
      carry _producer and _schemaURL, and kiln_dataQualityMetrics has the
      shape of DataQualityMetricsInputDatasetFacet.
  openlineage_check.py summary EVENTS...
      prints one line per distinct (runId, eventType): "JOBTYPE EVENTTYPE
      OUTPUT-NAMES", sorted, and fails when a run has an end but no START.
  openlineage_check.py no-pii --input JSONL --fields F,... EVENTS...
      no value of those fields of the input's records appears in any event.
"""
import argparse
import datetime
import json
import os
import sys
import uuid

import jsonschema


def load_events(paths):
    out = []
    for p in paths:
        with open(p) as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except ValueError as e:
                        sys.exit("%s:%d: not JSON: %s" % (p, n, e))
    return out


def validate(spec_dir, paths):
    with open(os.path.join(spec_dir, "OpenLineage.json")) as f:
        spec = json.load(f)
    store = {spec["$id"]: spec}
    facets = {}
    fdir = os.path.join(spec_dir, "facets")
    for name in sorted(os.listdir(fdir)):
        with open(os.path.join(fdir, name)) as f:
            doc = json.load(f)
        store[doc["$id"]] = doc
        for key, ref in doc.get("properties", {}).items():
            facets[key] = (doc, doc["$id"] + ref["$ref"])
    resolver = jsonschema.RefResolver(spec["$id"], spec, store=store)
    run_event = {"$ref": spec["$id"] + "#/$defs/RunEvent"}
    dq = store_def(store, facets["dataQualityMetrics"][1])
    problems = []
    events = load_events(paths)
    if not events:
        problems.append("no events")

    def check_container(where, container):
        for key, facet in container.items():
            if key.startswith("kiln_"):
                for k in ("_producer", "_schemaURL"):
                    if not isinstance(facet.get(k), str) or not facet[k]:
                        problems.append("%s.%s: no %s" % (where, key, k))
                if key == "kiln_dataQualityMetrics":
                    body = {k: v for k, v in facet.items()}
                    try:
                        jsonschema.validate(body, dq, resolver=jsonschema.RefResolver(facets["dataQualityMetrics"][0]["$id"], facets["dataQualityMetrics"][0], store=store))
                    except jsonschema.ValidationError as e:
                        problems.append("%s.%s: %s" % (where, key, e.message))
                continue
            if key not in facets:
                problems.append("%s.%s: not a facet of the spec files" % (where, key))
                continue
            doc, url = facets[key]
            if facet.get("_schemaURL") != url:
                problems.append("%s.%s: _schemaURL %r, expected %r" % (where, key, facet.get("_schemaURL"), url))
            try:
                jsonschema.validate({key: facet}, doc, resolver=jsonschema.RefResolver(doc["$id"], doc, store=store))
            except jsonschema.ValidationError as e:
                problems.append("%s.%s: %s at %s" % (where, key, e.message, list(e.absolute_path)))

    for i, ev in enumerate(events):
        where = "event %d (%s)" % (i + 1, ev.get("eventType"))
        try:
            jsonschema.validate(ev, run_event, resolver=resolver,
                                format_checker=jsonschema.draft202012_format_checker)
        except jsonschema.ValidationError as e:
            problems.append("%s: %s at %s" % (where, e.message, list(e.absolute_path)))
        try:  # the formats jsonschema may not check: uuid, date-time
            uuid.UUID(ev["run"]["runId"])
            if len(ev["run"]["runId"]) != 36:
                raise ValueError
        except (ValueError, KeyError, TypeError, AttributeError):
            problems.append("%s: runId %r is not a UUID" % (where, ev.get("run", {}).get("runId")))
        try:
            datetime.datetime.fromisoformat(ev["eventTime"].replace("Z", "+00:00"))
        except (ValueError, KeyError, AttributeError):
            problems.append("%s: eventTime %r is not RFC 3339" % (where, ev.get("eventTime")))
        if ev.get("schemaURL") != spec["$id"] + "#/$defs/RunEvent":
            problems.append("%s: schemaURL %r" % (where, ev.get("schemaURL")))
        check_container(where + " run.facets", ev["run"].get("facets", {}))
        check_container(where + " job.facets", ev["job"].get("facets", {}))
        for kind, io in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
            for j, d in enumerate(ev.get(kind, [])):
                check_container("%s %s[%d].facets" % (where, kind, j), d.get("facets", {}))
                check_container("%s %s[%d].%s" % (where, kind, j, io), d.get(io, {}))
    for p in problems[:30]:
        print(p)
    print("%d events, %d problems" % (len(events), len(problems)))
    return 1 if problems else 0


def store_def(store, url):
    base, _, pointer = url.partition("#")
    node = store[base]
    for part in pointer.strip("/").split("/"):
        node = node[part]
    return node


def summary(paths):
    seen = {}
    for ev in load_events(paths):
        key = (ev["run"]["runId"], ev["eventType"])
        seen.setdefault(key, ev)
    runs = {}
    lines = []
    for (run_id, etype), ev in seen.items():
        runs.setdefault(run_id, set()).add(etype)
        outs = ",".join(sorted(d["name"] for d in ev.get("outputs", []))) or "-"
        lines.append("%s %s %s" % (ev["job"]["facets"]["jobType"]["jobType"], etype, outs))
    rc = 0
    for run_id, types in runs.items():
        if types - {"START"} and "START" not in types:
            print("run %s: %s without START" % (run_id, sorted(types)))
            rc = 1
    for line in sorted(lines):
        print(line)
    return rc


def no_pii(input_path, fields, paths):
    values = set()
    with open(input_path) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            for k in fields:
                v = rec.get(k) if isinstance(rec, dict) else None
                if isinstance(v, str) and len(v) >= 6:
                    values.add(v)
    text = "".join(open(p).read() for p in paths)
    found = sorted(k for k in fields if any(v in text for v in values if v))
    hits = sum(1 for v in values if v in text)
    print("%d personal values looked for, %d found" % (len(values), hits))
    return 1 if hits or not values else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate")
    v.add_argument("--spec", required=True)
    v.add_argument("events", nargs="+")
    s = sub.add_parser("summary")
    s.add_argument("events", nargs="+")
    n = sub.add_parser("no-pii")
    n.add_argument("--input", required=True)
    n.add_argument("--fields", required=True)
    n.add_argument("events", nargs="+")
    a = ap.parse_args()
    if a.cmd == "validate":
        return validate(a.spec, a.events)
    if a.cmd == "summary":
        return summary(a.events)
    return no_pii(a.input, a.fields.split(","), a.events)


if __name__ == "__main__":
    sys.exit(main())
