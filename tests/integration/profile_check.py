"""Checks a version's data profile (kiln profile --json) against figures
computed here, exactly, from the version's curated shards (read with
python3-zstandard from the file store), within the errors docs/QUALITY.md
states: counts, types, categories, string lengths exact; mean and variance
to rounding; each listed quantile within 1% of the exact value at its rank;
distinct counts within four standard errors of HyperLogLog (6.5%) and never
above the values counted; quantiles within [min, max]. Categories from the
data (a field with "categories_k"): every string counted exactly, at most k
names; a string field without categories has more than k distinct values,
a value that looks personal, or times. Times (date and timestamp fields):
min and max exact (to the millisecond), each quantile within its sketch's
bucket width (2^shift seconds) of the exact instant at its rank.

    profile_check.py PROFILE_JSON SHARD_LIST_JSONL STORE_DIR [RECORDS]

SHARD_LIST_JSONL: `kiln ls --format json` of every split (their "key"s).
Prints one line per failed figure and "N passed, M failed"."""

import datetime
import json
import math
import re
import sys

import zstandard

profile = json.load(open(sys.argv[1]))["profile"]
store = sys.argv[3]
passed = failed = 0


def check(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL: %s%s" % (what, (": " + detail) if detail else ""))


records = []
d = zstandard.ZstdDecompressor()
for line in open(sys.argv[2]):
    key = json.loads(line)["key"]
    with open("%s/%s" % (store, key), "rb") as f:
        text = d.stream_reader(f).read()
    records += [json.loads(r) for r in text.split(b"\n") if r]
check("profile records = curated records", profile["records"] == len(records),
      "%d vs %d" % (profile["records"], len(records)))
if len(sys.argv) > 4:
    check("records as expected", len(records) == int(sys.argv[4]))


def values_at(path):
    """Every value at a contract path ("a.b", "tags[]"), and how many
    enclosing objects (or records) lack it."""
    parts = path.replace("[]", ".[]").split(".")
    level = [(r, True) for r in records]
    missing = 0
    for i, p in enumerate(parts):
        nxt = []
        for v, _ in level:
            if p == "[]":
                if isinstance(v, list):
                    nxt += [(x, True) for x in v]
            elif isinstance(v, dict):
                if p in v:
                    nxt.append((v[p], True))
                elif i == len(parts) - 1:
                    missing += 1
        level = nxt
    return [v for v, _ in level], missing


K = 20  # profile.categories.k's default
# looser than kiln's detectors: whatever they flag matches this
PERSONAL = re.compile(r"@|\d.*\d.*\d.*\d|:.*:")


def instant(text):
    """An RFC 3339 date or date-time as ms since the epoch (UTC)."""
    if len(text) == 10:
        d = datetime.date.fromisoformat(text)
        return (d - datetime.date(1970, 1, 1)).days * 86400000
    t = datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    delta = t - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000


def jtype(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "object" if isinstance(v, dict) else "array"


for f in profile["fields"]:
    path = f["path"]
    vals, missing = values_at(path)
    check(path + ": present", f["present"] == len(vals), "%d vs %d" % (f["present"], len(vals)))
    if not f["item"]:
        check(path + ": missing", f["missing"] == missing, "%d vs %d" % (f["missing"], missing))
    types = {}
    for v in vals:
        types[jtype(v)] = types.get(jtype(v), 0) + 1
    # "integer" here is a number written without fraction or exponent
    want = {t: n for t, n in f["types"].items() if n}
    check(path + ": types", want == types, "%r vs %r" % (want, types))
    check(path + ": null", f["null"] == types.get("null", 0))
    scalars = [v for v in vals if not isinstance(v, (dict, list, bool)) and v is not None]
    if "distinct" in f:
        exact = len({json.dumps(v) for v in scalars})
        est = f["distinct"]["estimate"]
        check(path + ": distinct within 4 standard errors", abs(est - exact) <= max(1, 0.065 * exact),
              "estimate %d, exact %d" % (est, exact))
        check(path + ": distinct <= values counted", est <= len(scalars), "%d > %d" % (est, len(scalars)))
    if f["profiled"] == "tokens":
        for k in ("number", "string", "categories"):
            check(path + ": a personal field has no " + k, k not in f)
        continue
    nums = sorted(v for v in scalars if isinstance(v, (int, float)))
    if nums:
        n = f["number"]
        mean = math.fsum(nums) / len(nums)
        var = math.fsum((x - mean) ** 2 for x in nums) / len(nums)
        check(path + ": number count, min, max", (n["count"], n["min"], n["max"]) == (len(nums), nums[0], nums[-1]))
        check(path + ": mean", abs(n["mean"] - mean) <= 1e-9 * max(1, abs(mean)), "%r vs %r" % (n["mean"], mean))
        check(path + ": variance", abs(n["variance"] - var) <= 1e-9 * max(1, var), "%r vs %r" % (n["variance"], var))
        for name, q in (("p01", .01), ("p05", .05), ("p25", .25), ("p50", .5), ("p75", .75), ("p95", .95),
                        ("p99", .99)):
            exact = nums[int(math.floor(q * (len(nums) - 1)))]
            got = n["quantiles"][name]
            check("%s: %s within 1%%" % (path, name), abs(got - exact) <= 0.01 * abs(exact) + 1e-9,
                  "%r vs exact %r" % (got, exact))
            check("%s: %s within [min, max]" % (path, name), n["min"] <= got <= n["max"],
                  "%r outside [%r, %r]" % (got, n["min"], n["max"]))
    strs = [v for v in scalars if isinstance(v, str)]
    if strs:
        s = f["string"]
        lens = [len(v) for v in strs]  # code points
        check(path + ": string lengths", (s["count"], s["length_min"], s["length_max"], s["length_sum"]) ==
              (len(strs), min(lens), max(lens), sum(lens)))
    if strs and "time" in f:
        t = f["time"]
        inst = sorted(instant(v) for v in strs)
        check(path + ": time count", t["count"] == len(strs), "%d vs %d" % (t["count"], len(strs)))
        date = len(strs[0]) == 10
        check(path + ": time min, max", (instant(t["min"]), instant(t["max"])) == (inst[0], inst[-1]),
              "%s..%s vs %r..%r" % (t["min"], t["max"], inst[0], inst[-1]))
        width = (2 ** t["sketch"]["shift"]) * 1000 + 1000  # ms; a second's fraction aside
        if date:
            width += 86400000  # dates render the day the instant falls in
        for name, q in (("p01", .01), ("p05", .05), ("p25", .25), ("p50", .5), ("p75", .75), ("p95", .95),
                        ("p99", .99)):
            exact = inst[int(math.floor(q * (len(inst) - 1)))]
            got = instant(t["quantiles"][name])
            check("%s: time %s within its bucket" % (path, name), abs(got - exact) <= width,
                  "%s vs exact %r ms" % (t["quantiles"][name], exact))
            check("%s: time %s within [min, max]" % (path, name), inst[0] - 86400000 * date <= got <= inst[-1])
    if strs and "categories_k" in f:
        counts = {}
        for v in strs:
            counts[v] = counts.get(v, 0) + 1
        check(path + ": categories from the data count every string", counts == f.get("categories"),
              "%r vs %r" % (f.get("categories"), counts))
        check(path + ": at most k categories", len(counts) <= f["categories_k"])
    elif strs and "categories" not in f and "time" not in f:
        distinct = len(set(strs))
        personal = any(PERSONAL.search(v) for v in strs)
        check(path + ": no categories: more than k distinct values or a personal one", distinct > K or personal,
              "%d distinct, none personal" % distinct)
    if "categories" in f:
        counts = {}
        for v in vals:
            key = json.dumps(v) if isinstance(v, bool) else (v if isinstance(v, str) else json.dumps(v))
            counts[key] = counts.get(key, 0) + 1
        for name, c in f["categories"].items():
            check("%s: category %s" % (path, name), counts.get(name, 0) == c, "%d vs %d" % (c, counts.get(name, 0)))

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
