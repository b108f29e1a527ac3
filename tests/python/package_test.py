"""The installed kiln package (tests/integration/python_package.sh), run by
a venv's python from outside the source tree with KILN_LIBRARY unset:

    package_test.py KILN TMP EXPECT_LIBRARY

EXPECT_LIBRARY: the path (or soname) kiln._lib.library_path must be. The
version user-events@main of $KILN_MANIFEST / $KILN_STORE is compared with
stats.json read by git and with kiln cat's JSON Lines parsed by json.
"""

import importlib.metadata
import json
import math
import os
import subprocess
import sys

kiln_bin, tmp, expect_library = sys.argv[1:4]
passed = failed = 0


def check(name, ok):
    global passed, failed  # pylint: disable=global-statement
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL: " + name)


import kiln  # noqa: E402  (after the helpers: an ImportError is the test's failure)

check("kiln is imported from the venv, not the source tree (%s)" % kiln.__file__,
      kiln.__file__.startswith(sys.prefix + os.sep))
check("no KILN_LIBRARY", "KILN_LIBRARY" not in os.environ)
check("libkiln loaded from %s (got %s)" % (expect_library, kiln._lib.library_path),
      kiln._lib.library_path == expect_library)
check("the distribution's version is kiln.__version__ (%s)" % kiln.__version__,
      importlib.metadata.version("kiln") == kiln.__version__)

manifest = os.environ["KILN_MANIFEST"]
stats = json.loads(subprocess.run(["git", "--git-dir", manifest, "show", "refs/heads/user-events/main:stats.json"],
                                  check=True, capture_output=True).stdout)


def cat(split):
    out = subprocess.run([kiln_bin, "cat", "user-events@main", "--split", split], check=True,
                         capture_output=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def same(a, b):
    """pandas' value equals the JSON one (a missing field is None or NaN;
    an integer column with a gap is a float one)."""
    if b is None:
        return a is None or (isinstance(a, float) and math.isnan(a))
    return a == b


v = kiln.open("user-events@main")
for split in kiln.SPLITS:
    want = cat(split)
    check("%s: kiln cat's records are stats.json's count" % split,
          len(want) == stats["splits"][split]["records"])
    got = list(v.dicts(split))
    check("%s: dicts() equal kiln cat's records parsed (%d, %d)" % (split, len(got), len(want)),
          got == want and all(isinstance(d, dict) for d in got))

    df = v.to_pandas(split)
    check("%s: to_pandas has stats.json's count of rows (%d)" % (split, len(df)),
          len(df) == stats["splits"][split]["records"])
    flat = set()
    for rec in want:
        for k, val in rec.items():
            flat.update(k + "." + n for n in val) if isinstance(val, dict) else flat.add(k)
    check("%s: every field a column, nested ones dotted" % split, set(df.columns) == flat)

    cols = ["user_id", "device.os", "event_type", "amount", "device", "tags"]
    df = v.to_pandas(split, columns=cols)
    check("%s: to_pandas(columns) has the columns asked, in order" % split, list(df.columns) == cols)
    check("%s: ... and stats.json's count of rows" % split, len(df) == stats["splits"][split]["records"])
    rows = df.to_dict("records")
    bad = [i for i, (row, rec) in enumerate(zip(rows, want))
           if not (same(row["user_id"], rec.get("user_id"))
                   and same(row["device.os"], rec.get("device", {}).get("os"))
                   and same(row["event_type"], rec.get("event_type"))
                   and same(row["amount"], rec.get("amount"))
                   and same(row["device"], rec.get("device"))
                   and same(row["tags"], rec.get("tags")))]
    check("%s: ... each row kiln cat's record's values (%d differ)" % (split, len(bad)),
          len(rows) == len(want) and not bad)
    check("%s: some record lacks amount (None there is tested)" % split,
          any("amount" not in r for r in want) and any("amount" in r for r in want))

# dicts() is a Records: same reading options, len() and exact resume
r = v.dicts("train", rank=1, world_size=2, seed=5)
first = [next(r) for _ in range(10)]
state = r.state_dict()
rest = list(r)
again = v.dicts("train", rank=1, world_size=2, seed=5)
again.load_state_dict(state)
check("dicts(): len() and resume as records()", len(r) == len(first) + len(rest) and list(again) == rest)

for bad_columns in ("user_id", ["user_id", "user_id"], [1]):
    try:
        v.to_pandas("dev", columns=bad_columns)
        check("to_pandas(columns=%r) refused" % (bad_columns,), False)
    except kiln.InvalidError as e:
        check("to_pandas(columns=%r) refused: %s" % (bad_columns, e), "columns" in str(e) or "column" in str(e))

# without pandas: an ImportError saying what to install, raised by to_pandas
saved = sys.modules.get("pandas")
sys.modules["pandas"] = None  # import pandas raises ImportError
try:
    v.to_pandas("dev")
    check("to_pandas without pandas: ImportError", False)
except ImportError as e:
    check("to_pandas without pandas: ImportError naming python3-pandas (%s)" % e, "python3-pandas" in str(e))
sys.modules["pandas"] = saved
v.close()

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
